#!/bin/bash
# scripts/compare: a real drop beyond threshold and noise is a regression (exit 1), a small or
# noisy drop is not, a failed check always fails, and bad arguments exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

row() { # row VARIANT BUSBW CV CHECK [FASTEST]: the time is 10/BUSBW s (1 s for a BUSBW that is no
  # number), its iterations from /(1+CV) to x(1+CV) of it (the fastest FASTEST s when given)
  local t lo hi
  t=$(awk -v b="$2" 'BEGIN{if (b ~ /^[0-9.]+$/ && b > 0) printf "%.6g", 10 / b; else print 1}')
  lo=${5:-$(awk -v t="$t" -v c="$3" 'BEGIN{printf "%.6g", t / (1 + c)}')}
  hi=$(awk -v t="$t" -v c="$3" 'BEGIN{printf "%.6g", t * (1 + c)}')
  printf '{"schema_version":1,"run_id":"r","benchmark":"b","variant":"%s","backend":"cpu","collective":"ring","dtype":"f32","ranks":2,"params":{"bytes":1024},"iterations":{"timed":5,"warmup":1},"time":{"unit":"s","min":%s,"median":%s,"mean":%s,"max":%s,"p95":%s,"cv":%s},"metrics":{"busbw":{"value":%s,"unit":"GB/s"}},"headline":"busbw","check":{"status":"%s","error":0,"message":null},"counters":{}}\n' "$1" "$lo" "$t" "$t" "$hi" "$hi" "$3" "$2" "$4"
}
{ row steady 10 0.01 pass; row noisy 10 0.20 pass; row small 10 0.01 pass; } >"$out/base.jsonl"

# One round a side: no rank test. A drop beyond the limit is INCONCLUSIVE (exit 0, and compare
# says to run --ci); only one beyond --max-limit (50%) and beyond the rows' own spread (their
# timed iterations do not overlap) is a REGRESSION, said to be one round's.
{ row steady 7 0.01 pass; row noisy 10 0.20 pass; row small 9.5 0.01 pass; } >"$out/new.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'b/steady.*INCONCLUSIVE' "$out/log" && grep -q 'b/small.*ok' "$out/log" \
  && grep -q '1 figure(s) INCONCLUSIVE: .*run_all.sh --ci' "$out/log" && ! grep -q '^ b/.*REGRESSION' "$out/log"
ok $? "one round a side: a 30% drop with 1% noise is INCONCLUSIVE, exit 0, and --ci is advised (rc=$rc)"
[ $rc = 0 ] || diag "$(cat "$out/log")"
{ row steady 4 0.01 pass; row noisy 10 0.20 pass; row small 9.5 0.01 pass; } >"$out/new.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'b/steady.*REGRESSION (one round decided it: a drop beyond --max-limit 50%)' "$out/log" \
  && grep -q 'b/small.*ok' "$out/log"
ok $? "one round a side: a 60% drop (beyond --max-limit) is a REGRESSION decided by one round; a 5% drop is ok (rc=$rc)"
# ... but not when the rows' own iterations overlap: the new row's fastest as fast as the
# baseline's slowest (noise that stretched the others), though its median dropped by 60%
{ row steady 4 0.01 pass 1.01; row noisy 10 0.20 pass; row small 9.5 0.01 pass; } >"$out/new.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q "b/steady.*-60.0%.*INCONCLUSIVE (beyond --max-limit, within the rows' own spread)" "$out/log" \
  && grep -q "^# 1 of them dropped beyond --max-limit, but their rows' timed iterations overlap" "$out/log"
ok $? "one round a side: a 60% drop whose iterations overlap the baseline's is INCONCLUSIVE, exit 0 (rc=$rc)"
[ $rc = 0 ] || diag "$(cat "$out/log")"

{ row steady 10 0.01 pass; row noisy 6.5 0.20 pass; row small 10 0.01 pass; } >"$out/new2.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new2.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'b/noisy.*ok' "$out/log"
ok $? "a 35% drop within 3x the combined noise (28% cv) is not called a regression (rc=$rc)"

{ row steady 10 0.01 fail; row noisy 10 0.2 pass; row small 10 0.01 pass; } >"$out/new3.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new3.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'CHECK FAILED' "$out/log"
ok $? "a failed check in the new run fails the comparison"

"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/base.jsonl" >/dev/null 2>&1
ok $? "a run compared with itself passes"

{ row noisy 0.1 0.25 pass; row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/new4.jsonl"
{ row noisy 10 0.25 pass; row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/base4.jsonl"
"$top/scripts/compare" --absolute yes "$out/base4.jsonl" "$out/new4.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'b/noisy.*REGRESSION' "$out/log"
ok $? "noise never excuses a drop beyond --max-limit (99% drop at 25% cv)"

{ row steady 10 0.01 pass; row small 10 0.01 pass; } >"$out/new5.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new5.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'b/noisy.*MISSING' "$out/log"
ok $? "a baseline row missing from the new run (a program that did not run) fails"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new5.jsonl" --allow-missing >/dev/null 2>&1
ok $? "... unless --allow-missing"

# A program added since the baseline was recorded (its rows have no counterpart there) is
# listed, not gated, and does not fail the comparison; a failed check of it still does.
{ cat "$out/base.jsonl"; row added 10 0.01 pass | sed 's/"benchmark":"b"/"benchmark":"newprog"/'; } >"$out/new6.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new6.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^ newprog/added .*new, no baseline$' "$out/log" \
  && grep -q '^# 1 row(s) of the new run have no counterpart in the baseline' "$out/log" && grep -q 'verdict: no regression' "$out/log"
ok $? "a row with no baseline (a new program) is reported 'new, no baseline', not gated, exit 0 (rc=$rc)"
[ $rc = 0 ] || diag "$(cat "$out/log")"
{ cat "$out/base.jsonl"; row added 10 0.01 fail | sed 's/"benchmark":"b"/"benchmark":"newprog"/'; } >"$out/new7.jsonl"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/new7.jsonl" >"$out/log" 2>&1
[ $? = 1 ] && grep -q '^ newprog/added .*CHECK FAILED' "$out/log"
ok $? "... but its failed check fails the comparison"

mkdir -p "$out/newdir" && cp "$out/base.jsonl" "$out/newdir/b.jsonl"
printf 'program\texit\tseconds\nb\t0\t1\nother\t3\t1\n' >"$out/newdir/status.tsv"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/newdir" >"$out/log" 2>&1
[ $? = 1 ] && grep -q 'other: exited 3' "$out/log"
ok $? "a program that exited non-zero in the new run (status.tsv) fails the comparison"
"$top/scripts/compare" "$out/base.jsonl" "$out/new.jsonl" --threshold 2 >/dev/null 2>&1; [ $? = 2 ]
ok $? "--threshold outside (0,1) exits 2"
"$top/scripts/compare" "$out/base.jsonl" >/dev/null 2>&1; [ $? = 2 ]
ok $? "a missing argument exits 2"

# Nothing compared is never a pass: exit 2 and one line on stderr.
expect2() { # expect2 WHAT_IN_MESSAGE DESCRIPTION ARGS...
  local want="$1" what="$2"; shift 2
  "$top/scripts/compare" "$@" >"$out/log" 2>"$out/err"
  local rc=$? lines; lines=$(wc -l <"$out/err")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$out/err" && ! grep -q Traceback "$out/err"; then
    ok 0 "$what: exit 2: $(cat "$out/err")"
  else
    ok 1 "$what: exit 2, one line naming '$want'"; diag "rc=$rc: $(cat "$out/err")"
  fi
}
mkdir -p "$out/empty1" "$out/empty2" "$out/run/r1"
expect2 "nothing to compare" "two empty directories" "$out/empty1" "$out/empty2"
: >"$out/blank.jsonl"
expect2 "no rows" "an empty new run" "$out/base.jsonl" "$out/blank.jsonl"
cp "$out/base.jsonl" "$out/run/r1/b.jsonl"
expect2 "no .jsonl files" "a baseline path one level too high" "$out/run" "$out/base.jsonl"
{ row other 10 0.01 pass; } >"$out/other.jsonl"
expect2 "no row of" "no row matched" "$out/base.jsonl" "$out/other.jsonl"
{ row steady NaN 0.01 pass; row noisy 10 0.20 pass; row small 10 0.01 pass; } >"$out/nan.jsonl"
expect2 "b/steady.*busbw is nan" "a NaN headline in the new run" "$out/base.jsonl" "$out/nan.jsonl"
{ row steady null 0.01 pass; row noisy 10 0.20 pass; row small 10 0.01 pass; } >"$out/null.jsonl"
expect2 "busbw is null" "a null headline in the new run" "$out/base.jsonl" "$out/null.jsonl"
row steady 10 0.01 pass | sed 's/"busbw":{/"algbw":{/' >"$out/nometric.jsonl"
expect2 "busbw is missing" "a headline metric missing from the new run" "$out/base.jsonl" "$out/nometric.jsonl"

# Malformed lines: file:line, no traceback, in compare (exit 2) and report (each named, exit 2).
mkdir -p "$out/bad"
printf '{"schema_version":1}\n' >"$out/m1.jsonl"
printf '[1,2]\n' >"$out/m2.jsonl"
row steady 10 0.01 pass | sed 's/"headline":"busbw"/"headline":7/' >"$out/m3.jsonl"
row steady 10 0.01 pass | sed 's/"value":10/"value":"10"/' >"$out/m4.jsonl"
{ row steady 10 0.01 pass; printf '{"variant":"\xff"}\n'; } >"$out/m5.jsonl"
expect2 "m1.jsonl:1: not a results row" "valid JSON of the wrong shape (no benchmark)" "$out/base.jsonl" "$out/m1.jsonl"
expect2 "m2.jsonl:1: not a results row (results/schema.json): a JSON list" "a JSON array line" "$out/m2.jsonl" "$out/base.jsonl"
expect2 "m3.jsonl:1:.*headline" "a headline that is not a string" "$out/base.jsonl" "$out/m3.jsonl"
expect2 "m4.jsonl:1:.*busbw" "a metric value that is a string" "$out/base.jsonl" "$out/m4.jsonl"
expect2 "m5.jsonl:2: not UTF-8" "a non-UTF-8 byte" "$out/base.jsonl" "$out/m5.jsonl"
mkdir -p "$out/st" && cp "$out/base.jsonl" "$out/st/b.jsonl"
printf 'program\texit\tseconds\nb\tzero\t1\n\xff\n' >"$out/st/status.tsv"
"$top/scripts/compare" --absolute yes "$out/base.jsonl" "$out/st" >"$out/log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'status.tsv:2: malformed' "$out/log" && ! grep -q Traceback "$out/log"
ok $? "compare: a malformed status.tsv line is named by file:line and fails (rc=$rc)"

# report: every malformed line named, the good rows still summarised, exit 2, no traceback
manifest=$top/results/baselines/xeon-2core-ci/round-01/manifest.json
mkdir -p "$out/rep" && cp "$manifest" "$out/rep/"
{ row steady 10 0.01 pass; printf '[1]\n'; row small 9 0.01 pass | sed 's/"headline":"busbw"/"headline":{}/';
  printf '{"x":"\xfe"}\n'; row noisy 8 0.01 pass | sed 's/"value":8/"value":"8"/'; } >"$out/rep/b.jsonl"
printf 'program\texit\tseconds\nb\t0\tfast\nb\n' >"$out/rep/status.tsv"
"$top/scripts/report" "$out/rep" >"$out/log" 2>"$out/err"
rc=$?
[ $rc = 2 ] && ! grep -q Traceback "$out/err" \
  && grep -q 'b.jsonl:2: not a results row' "$out/err" && grep -q 'b.jsonl:3: .*headline: {} is an object' "$out/err" \
  && grep -q 'b.jsonl:4: not UTF-8' "$out/err" && grep -q 'b.jsonl:5: .*metrics.busbw.value: "8" is a string' "$out/err" \
  && grep -q 'status.tsv:2: malformed' "$out/err" && grep -q 'status.tsv:3: malformed' "$out/err" \
  && grep -q ' steady .* 10.00' "$out/log" && grep -q 'verdict: INVALID: 4 line(s) are not results rows' "$out/log"
ok $? "report: each malformed line (file:line: field) and status.tsv line named, the rest summarised, exit 2 (rc=$rc)"
[ $rc = 2 ] || diag "$(cat "$out/err" "$out/log")"
mkdir -p "$out/norows" && cp "$manifest" "$out/norows/"
"$top/scripts/report" "$out/norows" >"$out/log" 2>"$out/err"
[ $? = 1 ] && grep -q 'no results rows' "$out/err"
ok $? "report: a directory with no rows is not 'every check passed'"

# report: "best" is taken over the quiet rows; a noisy row (time cv above 0.25) is counted, not picked
mkdir -p "$out/best" && cp "$manifest" "$out/best/"
{ row v 10 0.05 pass; row v 30 1.93 pass; row v 12 0.10 pass; row w 7 0.90 pass; } >"$out/best/b.jsonl"
"$top/scripts/report" "$out/best" >"$out/log" 2>"$out/err"
grep -Eq ' v +f32 +ring +busbw +12\.00 +GB/s +3 +1 +pass' "$out/log" && grep -Eq ' w +f32 +ring +busbw +~7\.00 +GB/s +1 +1 +pass' "$out/log"
ok $? "report: best over quiet rows only (12, not the noisy 30); a group with only noisy rows marked ~"

# Two single runs of identical code, recorded on the quiet CI machine (consecutive rounds of
# results/baselines/xeon-2core-ci: each round is a whole run): figures moved by up to -80% and
# +123% between them, which one round cannot tell from a change; nothing is flagged, exit 0, and
# compare says to run --ci. (Rounds 3-4 and 4-5 have drops beyond --max-limit, 55-80%, whose
# rows' iterations overlap or whose ceilings rose; the rule on --max-limit alone flagged them.)
B="$top/results/baselines/xeon-2core-ci"
for pair in "01 02" "02 03" "03 04" "04 05"; do
  set -- $pair
  "$top/scripts/compare" "$B/round-$1" "$B/round-$2" >"$out/log" 2>&1
  rc=$?
  [ $rc = 0 ] && ! grep -q '  REGRESSION' "$out/log" && grep -q '  INCONCLUSIVE' "$out/log" \
    && grep -q 'figure(s) INCONCLUSIVE: for a decision, run both sides with ./run_all.sh --ci' "$out/log" \
    && grep -q 'verdict: no regression (one round a side: not a decision)' "$out/log"
  ok $? "identical code, one round a side (baseline rounds $1 and $2): no REGRESSION, INCONCLUSIVE rows, exit 0 (rc=$rc)"
  [ $rc = 0 ] || diag "$(grep '  REGRESSION' "$out/log")"
done

# ... and a real slowdown between two such runs is still caught by one round: round 3 with
# mae_threads' techniques made 3.3x slower, as SL_TEST_SLOWDOWN=mae_threads:2.3 does (every
# timed iteration longer, the read probe its ratios divide by untouched)
mkdir -p "$out/slow" && cp "$B"/round-03/* "$out/slow/"
python3 - "$out/slow/mae_threads.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if r["gate"]:
        for m in (r["gate"], r["headline"]):
            r["metrics"][m]["value"] *= 0.3
        t = r["time"]
        for f in ("min", "median", "mean", "max", "p95", "rank_mean"):
            if t.get(f) is not None:
                t[f] /= 0.3
        t["samples"] = [x / 0.3 for x in t.get("samples", [])]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
"$top/scripts/compare" "$B/round-02" "$out/slow" >"$out/log" 2>&1
rc=$?
n=$(grep -c '^ mae_threads/.*ratio .*REGRESSION (one round decided it' "$out/log")
[ $rc = 1 ] && [ "$n" -ge 6 ] && ! grep -v '^ mae_threads/' "$out/log" | grep -q '  REGRESSION'
ok $? "one round a side, quiet machine: mae_threads 70% slower is a REGRESSION ($n rows), nothing else is (rc=$rc)"
[ $rc = 1 ] || diag "$(grep -E 'mae_threads|spread' "$out/log")"

# Parameters a program derives from its measurements (allreduce's iterations, kernels' bound,
# pipeline's idle_stages, the training programs' eff_note, "superlinear" in one run and absent
# in the next, the performance model's pred_fit and pred_dominant) differ between identical runs:
# they do not tell rows apart.
for side in a b; do
  it=$([ $side = a ] && echo 5 || echo 4); bd=$([ $side = a ] && echo memory || echo compute)
  note=$([ $side = a ] && echo ',\"eff_note\":\"superlinear\",\"pred_fit\":\"allreduce 9.0 us + 5.494 GB/s\",\"pred_dominant\":\"gemm\"' ||
    echo ',\"pred_fit\":\"allreduce 9.4 us + 5.123 GB/s\",\"pred_dominant\":\"elementwise\"')
  row steady 10 0.01 pass | sed "s|\"params\":{\"bytes\":1024}|\"params\":{\"bytes\":1024,\"iterations\":$it,\"bound\":\"$bd\",\"idle_stages\":\"3$it.1\"$note}|" >"$out/measured_$side.jsonl"
done
grep -q '"iterations":4' "$out/measured_b.jsonl" && grep -q '"eff_note":"superlinear"' "$out/measured_a.jsonl" &&
  grep -q '"pred_dominant":"elementwise"' "$out/measured_b.jsonl"
"$top/scripts/compare" --absolute yes "$out/measured_a.jsonl" "$out/measured_b.jsonl" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && ! grep -q MISSING "$out/log" && grep -q 'b/steady.*ok' "$out/log"
ok $? "rows that differ only in measured parameters (iterations, bound, idle_stages, eff_note, pred_fit, pred_dominant) are the same row (rc=$rc)"
[ $rc = 0 ] || diag "$(cat "$out/log")"

done_testing
