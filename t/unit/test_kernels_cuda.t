#!/bin/sh
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
exec "$(dirname "$0")/../../build/t/test_kernels_cuda"
