#!/bin/bash
# labs: every command of every lab sheet (the ```sh blocks of benchmarks/labs/*.md) runs and
# exits 0 at the sheet's quick size, and every column a sheet explains appears in the output of
# its commands. The conventions are in benchmarks/labs/README.md; the runner in t/lib/lab_sheets.py.
. "$(dirname "$0")/../lib/common.sh"
exec python3 "$top/t/lib/lab_sheets.py"
