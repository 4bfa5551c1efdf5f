#!/bin/sh
# The slowest-rank rule needs several ranks.
. "$(dirname "$0")/../lib/common.sh"
launch 3 "$top/build/t/test_slowest"
