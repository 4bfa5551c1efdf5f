#!/bin/sh
. "$(dirname "$0")/../lib/common.sh"
export top
exec "$top/build/t/test_expected"
