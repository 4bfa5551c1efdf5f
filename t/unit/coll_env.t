#!/bin/sh
# SL_COLL_STAGE's parsing, on one process without MPI (test_coll_env.c).
. "$(dirname "$0")/../lib/common.sh"
exec "$top/build/t/test_coll_env"
