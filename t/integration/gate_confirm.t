#!/bin/bash
# The regression gate's --confirm (scripts/compare, scripts/gatelib/confirm.py) on real runs:
# a baseline of run_all.sh --ci rounds of mae_threads, a new side with one row far down, and the
# program run again, once as it is (not confirmed) and once slowed by the test switch
# (confirmed). The reruns are compared with the baseline measured minutes before, so this test
# runs alone (Makefile: CHECK_SERIAL); the gate's other cases, which measure nothing, are gate.t's.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cmp_() { "$top/scripts/compare" "$@" >"$out/log" 2>"$out/err"; }

# --- --confirm: a row that regressed is run again, and fails only if it regresses again. The new
# side is the baseline run itself with mae_threads partial (2 threads) at a quarter of its median
# in every round (a whole run in another state of the machine; beyond any limit, so that a loaded
# machine's noise cannot hide it): rerun, the row is back, not confirmed. With the test switch slowing
# mae_threads fourfold in the rerun (a real regression), it is confirmed.
"$top/run_all.sh" --ci --only mae_threads --out "$out/cb" >"$out/log" 2>&1
ok $? "run_all.sh --ci --only mae_threads: a baseline of 5 rounds"
cp -r "$out/cb" "$out/cn"
python3 - "$out/cn" <<'PY'
import glob, json, sys
from statistics import median
# each round's figure: a quarter of the baseline's median, steady (no round of its own stands out)
files = sorted(glob.glob(sys.argv[1] + "/round-*/mae_threads.jsonl"))
vals = {"bw_fraction": [], "eff_bw": []}
for f in files:
    for r in map(json.loads, open(f)):
        if r["variant"] == "partial" and r["params"]["threads"] == 2:
            for m in vals: vals[m].append(r["metrics"][m]["value"])
med = {m: median(v) for m, v in vals.items()}
for f in files:
    rows = [json.loads(l) for l in open(f)]
    for r in rows:
        if r["variant"] == "partial" and r["params"]["threads"] == 2:
            for m in ("bw_fraction", "eff_bw"):
                r["metrics"][m]["value"] = med[m] * 0.25 * (1 + 0.01 * int(f.split("round-")[1][:2]))
    open(f, "w").write("".join(json.dumps(r) + "\n" for r in rows))
PY
cmp_ "$out/cb" "$out/cn" --confirm
rc=$?
[ $rc = 0 ] && grep -Eq 'mae_threads/partial .* ratio +bw_fraction .* -7[0-9]\.[0-9]% .* REGRESSION$' "$out/log" \
  && grep -q '^# confirm: mae_threads/partial.*not confirmed' "$out/log" && grep -q '^# confirm: verdict: no regression confirmed' "$out/log" \
  && [ -s "$out/cn/confirm-1/round-05/mae_threads.jsonl" ]
ok $? "--confirm: a row 74% down in one run only is run again into NEW/confirm-1, not confirmed: exit 0 (rc=$rc)"
[ $rc = 0 ] || diag "$(grep -E 'REGRESSION|confirm' "$out/log" | head -5)"
SL_TEST_SLOWDOWN=mae_threads:3 cmp_ "$out/cb" "$out/cn" --confirm
rc=$?
[ $rc = 1 ] && grep -q '^# confirm: mae_threads/partial.*REGRESSION in both runs' "$out/log" \
  && grep -q '^# confirm: verdict: FAILED' "$out/log" && [ -d "$out/cn/confirm-2" ]
ok $? "--confirm: slowed again in the rerun (SL_TEST_SLOWDOWN), the regression is confirmed: exit 1 (rc=$rc)"
[ $rc = 1 ] || diag "$(grep -E "REGRESSION|confirm|partial" "$out/log" | head -12)"

done_testing
