#!/bin/bash
# The regression gate: scripts/compare over rounds (the rank test on known samples, identical
# rounds never flagged, a shift beyond the minimum effect flagged, a small or noisy one not),
# the normalised ratio gated first and absolute figures only on the same machine, run_all.sh
# --rounds, and compare --ab. Synthetic rounds come from t/lib/make_rounds.py. --confirm, which
# compares a rerun with a baseline measured before it, is gate_confirm.t's (run alone).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
mk() { python3 "$top/t/lib/make_rounds.py" "$@"; }
cmp_() { "$top/scripts/compare" "$@" >"$out/log" 2>"$out/err"; }

# --- the rank test on known samples (hand-computed values; R's wilcox.test gives the same)
python3 - "$top/scripts" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from gatelib.ranktest import mann_whitney, min_p
p, u = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
assert abs(p - 2 / 252) < 1e-12 and u == 0, (p, u)          # complete separation, exact
p, u = mann_whitney([1, 2, 3, 4, 5], [1.5, 2.5, 3.5, 4.5, 5.5])
assert abs(p - 2 * 87 / 252) < 1e-12 and u == 10, (p, u)    # P(U <= 10) = 87/252
p, u = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "less")
assert abs(p - 1 / 252) < 1e-12 and u == 0, (p, u)          # one-sided: half of it
p, _ = mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], "greater")
assert p == 1.0, p                                          # every split has U >= 0
p, u = mann_whitney([1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 7, 8])  # ties, 924 splits: exact over them
assert u == 8 and abs(p - 120 / 924) < 1e-12, (p, u)         # |U - 18| >= 10 in 120 of 924
p, u = mann_whitney([1, 2, 3, 4, 5, 6], [3, 4, 5, 6, 7, 8], "less")
assert abs(p - 60 / 924) < 1e-12, p
x, y = list(range(1, 16)), list(range(5, 20))                # ties, 1.5e8 splits: normal approximation
p, u = mann_whitney(x, y)                                    # U = 60.5; 11 values tied: sum t^3 - t = 66
assert u == 60.5 and abs(p - 0.032457) < 5e-6, (p, u)        # var 579.83, z = (112.5 - 60.5 - 0.5) / sqrt(var)
p, _ = mann_whitney([3, 3, 3], [3, 3, 3])
assert p == 1.0
assert abs(min_p(5, 5) - 2 / 252) < 1e-15 and min_p(3, 3) == 0.1 and abs(min_p(4, 5, "less") - 1 / 126) < 1e-15
PY
ok $? "rank test: exact p for 5 vs 5 (2/252 separated two-sided, 1/252 one-sided, 174/252 interleaved); with ties exact over the 924 splits of 6 vs 6 (120/924), the tie-corrected normal beyond; equal samples p 1"

# --- identical code, identical machine
mk "$out/base" --seed 1 steady:10:0.8 noisy:10:0.8:0.4 probe:20:-
mk "$out/same" --seed 2 steady:10:0.8 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/base" "$out/base"
ok $? "a run of 5 rounds compared with itself passes"
cmp_ "$out/base" "$out/same"
rc=$?
[ $rc = 0 ] && ! grep -q REGRESSION "$out/log" && grep -q 'absolute figures gated (same machine' "$out/log"
ok $? "two runs of the same figures (rounds jittered +-1%, one row +-40%) pass, absolute figures gated (rc=$rc)"

# --- a real drop, a small one, a noisy one
mk "$out/slow" --seed 3 steady:8:0.64 noisy:8:0.64:0.4 probe:20:-
cmp_ "$out/base" "$out/slow"
rc=$?
[ $rc = 1 ] && grep -Eq 'b/steady .* ratio +vs_ref .* -20\.[0-9]% .* 0\.00397 +REGRESSION' "$out/log" \
  && grep -Eq 'b/noisy .* ratio .* ok$' "$out/log"
ok $? "a 20% drop of the ratio in every round is a REGRESSION with one-sided p 0.00397; at +-40% noise it is not (rc=$rc)"
mk "$out/small" --seed 4 steady:9.5:0.76 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/base" "$out/small"
rc=$?
[ $rc = 0 ] && grep -Eq 'b/steady .* ratio .* -[45]\.[0-9]% .* 0\.00397 +ok$' "$out/log"
ok $? "a 5% drop is significant (p 0.00397) but below the minimum effect: not a regression (rc=$rc)"
# one round of the baseline stalled (ratio 30% low in round 4): below every new round, it alone
# would keep the rank test from p <= 0.01 (U = 5 of 25, p 0.075); set aside, 4 vs 5 rounds
# separate completely (p 1/126 = 0.00794) and the line marks it
mk "$out/stall" --seed 1 steady:10:0.8:0.01:4=0.7 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/stall" "$out/slow"
rc=$?
[ $rc = 1 ] && grep -Eq 'b/steady .* ratio +vs_ref .* -20\.[0-9]% .* 0\.00794\* +REGRESSION' "$out/log" \
  && grep -q '^# \*: .* without one outlying round' "$out/log"
ok $? "a baseline round that stalled is set aside (marked *): the 20% drop is still a REGRESSION (rc=$rc)"
# ... but only a round that is far off: rounds within the minimum effect of their median stay,
# and with them the noise of a noisy row (its +-40% rounds are not trimmed into significance)
mk "$out/near" --seed 1 steady:10:0.8:0.01:4=0.95 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/near" "$out/base"
rc=$?
[ $rc = 0 ] && ! grep -Eq 'b/steady .*\*' "$out/log"
ok $? "a round 5% off its run's median is not set aside; identical figures pass (rc=$rc)"
# ... nor one of two low rounds (a row with two modes): 0.8 0.8 0.56 0.8 0.52 against 0.6 x 5
# is not a shift the rounds agree on (one-sided p 0.35, all five kept)
mk "$out/modes" --seed 1 steady:10:0.8:0.01:3=0.7,5=0.65 noisy:10:0.8:0.4 probe:20:-
mk "$out/low" --seed 3 steady:10:0.6 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/modes" "$out/low"
rc=$?
[ $rc = 0 ] && grep -Eq 'b/steady .* ratio .* -2[0-9]\.[0-9]% .* 0\.3[0-9]+ +ok$' "$out/log"
ok $? "a row with two low rounds keeps them: a drop its rounds do not agree on is not a regression (rc=$rc)"

# --- the normalised ratio first; absolute figures on the same machine only
mk "$out/other" --seed 5 --cpu "Other CPU" steady:5:0.8 noisy:5:0.8:0.4 probe:10:-
cmp_ "$out/base" "$out/other"
rc=$?
[ $rc = 0 ] && grep -q 'machines differ in cpu' "$out/log" && grep -Eq 'b/steady .* abs .* -(49|50)\.[0-9]% .* shown$' "$out/log"
ok $? "a machine half as fast, ratios unchanged: passes, says the machines differ in cpu, shows the absolute drop ungated (rc=$rc)"
mk "$out/other_slow" --seed 5 --cpu "Other CPU" steady:5:0.6 noisy:5:0.8:0.4 probe:10:-
cmp_ "$out/base" "$out/other_slow"
[ $? = 1 ] && grep -Eq 'b/steady .* ratio .* REGRESSION' "$out/log"
ok $? "on another machine a drop of the ratio is still a REGRESSION"
mk "$out/abs" --seed 6 steady:8:0.8 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/base" "$out/abs"
rc=$?
[ $rc = 0 ] && grep -Eq 'b/steady .* abs +busbw .* shown$' "$out/log"
ok $? "a row with a ratio is gated by it: its absolute figure 20% down is shown, not gated (rc=$rc)"
cmp_ "$out/base" "$out/abs" --abs-all
[ $? = 1 ] && grep -Eq 'b/steady .* abs +busbw .* REGRESSION' "$out/log"
ok $? "... and gated with --abs-all"
mk "$out/pbase" --seed 1 steady:10:0.8 probe:20:- probe2:20:- probe3:20:-
mk "$out/pslow" --seed 6 steady:10:0.8 probe:20:- probe2:20:- probe3:16:-
cmp_ "$out/pbase" "$out/pslow"
[ $? = 1 ] && grep -Eq 'b/probe3 .* abs +busbw .* -(19|20|21)\.[0-9]% .* REGRESSION' "$out/log"
ok $? "on the same machine a row without a ratio 20% down, the other probes steady, is a REGRESSION"
mk "$out/ceiling" --seed 10 steady:10:0.64 noisy:10:0.8:0.4 probe:20:-
cmp_ "$out/base" "$out/ceiling"
rc=$?
[ $rc = 0 ] && grep -Eq 'b/steady .* ratio .* -(19|20|21)\.[0-9]% .* ok: its ceiling rose$' "$out/log"
ok $? "same machine, the ratio 20% down but the row's own figure steady: its ceiling rose, not a regression (rc=$rc)"
mk "$out/drift" --seed 7 steady:5:0.8 noisy:5:0.8:0.4 probe:10:-
cmp_ "$out/base" "$out/drift"
rc=$?
[ $rc = 0 ] && grep -Eq 'ceilings \(the probe rows\) moved by -(49|50)' "$out/log"
ok $? "same machine whose probes all halved: absolute figures not gated, and compare says why (rc=$rc)"
cmp_ "$out/base" "$out/drift" --absolute yes
[ $? = 1 ]
ok $? "... unless --absolute yes"

# --- comparisons that cannot be made honestly: exit 2, one line
expect2() { # expect2 WANT DESCRIPTION ARGS...
  local want="$1" what="$2"; shift 2
  cmp_ "$@"
  local rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q -- "$want" "$out/err" && ! grep -q Traceback "$out/err"; then
    ok 0 "$what: exit 2: $(cat "$out/err")"
  else
    ok 1 "$what"; diag "rc=$rc: $(cat "$out/err")"
  fi
}
mk "$out/three" --rounds 3 --seed 8 steady:10:0.8 probe:20:-
expect2 "rank test cannot give p" "3 vs 3 rounds cannot reach alpha 0.01" "$out/three" "$out/three"
mk "$out/probes" --seed 9 probe:20:-
mk "$out/probes2" --seed 9 --cpu "Other CPU" probe:10:-
expect2 "nothing could be gated" "no ratio and different machines: nothing gated" "$out/probes" "$out/probes2"
expect2 "alpha" "--alpha outside (0, 1)" "$out/base" "$out/base" --alpha 1.5
expect2 "cannot reach p" "--ab --rounds 3: refused before anything is built or run" --ab HEAD HEAD --rounds 3 --out "$out/ab3"
expect2 "neither a directory nor a git revision" "--ab with a revision that does not exist" --ab no-such-rev-xyz HEAD --out "$out/abx"

# --- run_all.sh --rounds and compare --ab (structure and verdict only: no timing asserted)
"$top/run_all.sh" --quick --rounds 2 --only mae_threads --out "$out/r2" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && [ -s "$out/r2/round-01/mae_threads.jsonl" ] && [ -s "$out/r2/round-02/mae_threads.jsonl" ] \
  && [ -s "$out/r2/round-02/manifest.json" ] && grep -q '# round 2 of 2' "$out/log"
ok $? "run_all.sh --rounds 2: round-01 and round-02, each a complete results directory (rc=$rc)"
"$top/run_all.sh" --rounds 0 >/dev/null 2>"$out/err"
[ $? = 2 ] && grep -q -- '--rounds: expected a count' "$out/err"
ok $? "run_all.sh --rounds 0 exits 2 naming the option"
"$top/scripts/compare" --ab "$top" "$top" --rounds 1 --only mae_threads --out "$out/ab" >"$out/log" 2>&1
rc=$?
{ [ $rc = 0 ] || [ $rc = 1 ]; } && grep -q 'round 1/1 A: exit 0' "$out/log" && grep -q 'round 1/1 B: exit 0' "$out/log" \
  && [ -s "$out/ab/a/round-01/mae_threads.jsonl" ] && [ -s "$out/ab/b/round-01/mae_threads.jsonl" ] \
  && grep -q '# new: .*/ab/b: 1 round' "$out/log" && grep -q 'verdict:' "$out/log"
ok $? "compare --ab TREE TREE: runs A and B in turn into OUT/a and OUT/b and compares them (rc=$rc)"
[ $rc = 0 ] || [ $rc = 1 ] || diag "$(tail -5 "$out/log")"

done_testing
