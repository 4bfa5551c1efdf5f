#!/bin/sh
. "$(dirname "$0")/../lib/common.sh"
exec "$top/build/t/test_perf_model"
