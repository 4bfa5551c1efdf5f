#!/bin/sh
# MPI and OpenBLAS keep allocations until exit: not leaks of this code.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
exec "$(dirname "$0")/../../build/t/test_mlp"
