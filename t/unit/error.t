#!/bin/sh
# One whole line per fatal or usage error, in one write (see test_error.c).
. "$(dirname "$0")/../lib/common.sh"
exec "$top/build/t/test_error"
