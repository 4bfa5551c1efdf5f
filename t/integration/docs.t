#!/bin/bash
# docs: every command of README.md and docs/*.md (their ```sh blocks) runs and exits 0 at a
# quick size, each page in a sandbox of its own; blocks marked as needing a cluster or building
# the whole suite are listed, not run. A command that leaves a report.html (the README's
# ./run_all.sh --quick, as written: every program) has it checked for a plot of every program
# that ran and has one, and rendered in headless Chromium where installed (t/lib/report_check.py).
# The conventions and the runner: t/lib/doc_commands.py.
. "$(dirname "$0")/../lib/common.sh"
exec python3 "$top/t/lib/doc_commands.py"
