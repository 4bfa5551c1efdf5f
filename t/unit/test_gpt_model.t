#!/bin/sh
# Open MPI keeps some allocations until exit and the CUDA runtime needs the shadow gap:
# neither is a defect of this code (the same settings as t/lib/common.sh).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:protect_shadow_gap=0}"
exec "$(dirname "$0")/../../build/t/test_gpt_model"
