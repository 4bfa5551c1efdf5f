#!/bin/sh
# coll.t — the communication layer on 1..8 ranks: runs build/t/test_coll (every implementation,
# collective, dtype, op, count, in and out of place; blocking and non-blocking, point to point)
# under the launcher for each rank count and merges the TAP streams into one, numbering the
# tests across runs. A run that exits non-zero or prints no tests is itself a failed test.
. "$(dirname "$0")/../lib/common.sh"
prog="$top/build/t/test_coll"
[ -x "$prog" ] || { echo "1..0 # SKIP $prog not built"; exit 0; }
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
n=0
# 1..5 ranks with every count; 6..8 (folds of 2 and 3 ranks in rhd, deeper trees) without the
# two large counts, to keep the time down.
for np in 1 2 3 4 5 6 7 8; do
  quick=; [ "$np" -gt 5 ] && quick=--quick
  # A deadlocked collective must fail the test, not hang it.
  timeout 600 "$top/scripts/sl-launch" -np "$np" "$prog" $quick > "$out/tap.$np" 2> "$out/err.$np"
  rc=$?
  # Renumber "ok N - ..." / "not ok N ..." lines after the n tests already printed.
  awk -v off="$n" '/^(not )?ok [0-9]+/ {
      st = ($1 == "not") ? "not ok" : "ok"
      sub(/^(not )?ok [0-9]+ ?/, "")
      print st " " ++off " " $0
    }' "$out/tap.$np" > "$out/merged.$np"
  cat "$out/merged.$np"
  got=$(wc -l < "$out/merged.$np")
  n=$((n + got))
  grep '^#' "$out/err.$np" | head -n 20 >&2
  n=$((n + 1))
  if [ "$rc" = 0 ] && [ "$got" -gt 0 ]; then
    echo "ok $n - np=$np: test_coll exited 0 after $got tests"
  else
    echo "not ok $n - np=$np: test_coll exited $rc after $got tests"
    tail -n 20 "$out/err.$np" >&2
  fi
done
echo "1..$n"
