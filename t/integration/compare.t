#!/bin/bash
# scripts/compare: a real drop beyond threshold and noise is a regression (exit 1), a small or
# noisy drop is not, a failed check always fails, and bad arguments exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

row() { # row VARIANT BUSBW CV CHECK
  printf '{"schema_version":1,"run_id":"r","benchmark":"b","variant":"%s","backend":"cpu","collective":"ring","dtype":"f32","ranks":2,"params":{"bytes":1024},"iterations":{"timed":5,"warmup":1},"time":{"unit":"s","min":1,"median":1,"mean":1,"max":1,"p95":1,"cv":%s},"metrics":{"busbw":{"value":%s,"unit":"GB/s"}},"headline":"busbw","check":{"status":"%s","error":0,"message":null},"counters":{}}\n' "$1" "$3" "$2" "$4"
}
{ row steady 10 0.01 pass; row noisy 10 0.20 pass; row small 10 0.01 pass; } >"$out/base.jsonl"

{ row steady 5 0.01 pass; row noisy 10 0.20 pass; row small 9.5 0.01 pass; } >"$out/new.jsonl"
"$top/scripts/compare" "$out/base.jsonl" "$out/new.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'b/steady.*REGRESSION' "$out/log" && grep -q 'b/small.*ok' "$out/log"
ok $? "a 50% drop with 1% noise is a regression; a 5% drop is not (rc=$rc)"

{ row steady 10 0.01 pass; row noisy 6.5 0.20 pass; row small 10 0.01 pass; } >"$out/new2.jsonl"
"$top/scripts/compare" "$out/base.jsonl" "$out/new2.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'b/noisy.*ok' "$out/log"
ok $? "a 35% drop within 3x the combined noise (28% cv) is not called a regression (rc=$rc)"

{ row steady 10 0.01 fail; row noisy 10 0.2 pass; row small 10 0.01 pass; } >"$out/new3.jsonl"
"$top/scripts/compare" "$out/base.jsonl" "$out/new3.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'CHECK FAILED' "$out/log"
ok $? "a failed check in the new run fails the comparison"

"$top/scripts/compare" "$out/base.jsonl" "$out/base.jsonl" >/dev/null 2>&1
ok $? "a run compared with itself passes"

{ row noisy 0.1 0.25 pass; row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/new4.jsonl"
{ row noisy 10 0.25 pass; row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/base4.jsonl"
"$top/scripts/compare" "$out/base4.jsonl" "$out/new4.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'b/noisy.*REGRESSION' "$out/log"
ok $? "noise never excuses a drop beyond --max-limit (99% drop at 25% cv)"

{ row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/new5.jsonl"
"$top/scripts/compare" "$out/base.jsonl" "$out/new5.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'b/noisy.*MISSING' "$out/log"
ok $? "a baseline row missing from the new run (a program that did not run) fails"
"$top/scripts/compare" "$out/base.jsonl" "$out/new5.jsonl" --allow-missing >/dev/null 2>&1
ok $? "... unless --allow-missing"

mkdir -p "$out/newdir" && cp "$out/base.jsonl" "$out/newdir/b.jsonl"
printf 'program\texit\tseconds\nb\t0\t1\nother\t3\t1\n' >"$out/newdir/status.tsv"
"$top/scripts/compare" "$out/base.jsonl" "$out/newdir" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'other: exited 3' "$out/log"
ok $? "a program that exited non-zero in the new run (status.tsv) fails the comparison"
"$top/scripts/compare" "$out/base.jsonl" "$out/new.jsonl" --threshold 2 >/dev/null 2>&1; [ $? = 2 ]
ok $? "--threshold outside (0,1) exits 2"
"$top/scripts/compare" "$out/base.jsonl" >/dev/null 2>&1; [ $? = 2 ]
ok $? "a missing argument exits 2"

done_testing
