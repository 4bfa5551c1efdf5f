#!/bin/bash
# pairs_schedule.t — scripts/pairs without hosts: its schedule (every pair once, rounds of
# disjoint pairs, N - 1 rounds for even N and N for odd), its flags on made-up sweeps (the pairs
# of one slow host flagged and that host named; healthy pairs within a few percent never
# flagged; too few pairs flag nothing; timeouts named by host) and its usage errors.
# (t/integration/pairs.t runs it on hosts in network namespaces.)
. "$(dirname "$0")/../lib/common.sh"
cd "$top" || exit 1

python3 - <<'PY'
import sys
sys.path.insert(0, "scripts")
from pairslib import schedule
bad = []
for n in range(0, 34):
    eps = [f"h{i}" for i in range(n)]
    plan = schedule.rounds(eps)
    seen = [tuple(p) for r in plan for p in r]
    want = {(a, b) for i, a in enumerate(eps) for b in eps[i + 1:]}
    rounds_ok = len(plan) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)
    disjoint = all(len({e for p in r for e in p}) == 2 * len(r) for r in plan)
    if len(seen) != len(set(seen)) or set(seen) != want or not rounds_ok or not disjoint:
        bad.append(n)
print(f"# endpoints 0..33: {'all good' if not bad else 'wrong for ' + str(bad)}")
sys.exit(1 if bad else 0)
PY
ok $? "schedule: for 0 to 33 endpoints every pair exactly once, in rounds of disjoint pairs, N-1 rounds (N even) or N (odd)"

python3 - <<'PY'
import random, sys
sys.path.insert(0, "scripts")
from pairslib import analysis, schedule
rnd = random.Random(7)
def sweep(n, slow=None, dead=None, spread=0.05):
    hosts = [f"node{i:02d}" for i in range(n)]
    out = []
    for r in schedule.rounds(hosts):
        for a, b in r:
            f = 1 + rnd.uniform(-spread, spread)
            if slow in (a, b):
                f *= 0.3
            p = {"host_a": a, "host_b": b, "status": "timeout" if dead in (a, b) else "ok"}
            for name, unit, higher in analysis.METRICS:
                base = 12.0 if higher else 5e-6
                p[name] = None if p["status"] != "ok" else base * f if higher else base / f
            out.append(p)
    return out
fails = []
pairs = sweep(8, slow="node05")
s = analysis.summary(pairs)
flagged = {frozenset((pairs[i]["host_a"], pairs[i]["host_b"])) for i in s["flagged"]}
if flagged != {frozenset(("node05", h)) for h in [f"node{i:02d}" for i in range(8)] if h != "node05"}:
    fails.append(f"slow host: flagged {sorted(map(sorted, flagged))}")
if s["most_flagged"] != (["node05"], 7):
    fails.append(f"slow host: named {s['most_flagged']}")
for seed in range(50):
    rnd.seed(seed)
    s = analysis.summary(sweep(8, spread=0.04))
    if s["flagged"] or s["noted"]:
        fails.append(f"healthy sweep (seed {seed}) flagged {s['flagged']} noted {s['noted']}")
        break
s = analysis.summary(sweep(2, slow="node01"))
if s["flagged"] or s["metrics"]["p2p_bw"]["median"] is not None:
    fails.append("one pair: flagged or judged")
pairs = sweep(6, dead="node03")
s = analysis.summary(pairs)
if s["most_timeouts"] != (["node03"], 5) or len(s["timeouts"]) != 5 or s["flagged"]:
    fails.append(f"dead host: {s['most_timeouts']}, {len(s['timeouts'])} timeouts, flagged {s['flagged']}")
# a pair slowed once and measured again: judged by the best of its attempts, no longer flagged
pairs = sweep(8)
again = dict(pairs[3], attempt=2)
pairs[3] = dict(pairs[3], p2p_bw=0.01, allreduce_busbw=0.01)
if len(analysis.summary(pairs)["flagged"]) != 1:
    fails.append("a slowed pair is flagged before its retry")
merged = analysis.merge(pairs + [again])
if len(merged) != len(pairs) or merged[3]["attempts"] != 2 or analysis.summary(merged)["flagged"]:
    fails.append(f"retry: {len(merged)} pairs, attempts {merged[3].get('attempts')}, flagged {analysis.summary(merged)['flagged']}")
print("# " + ("; ".join(fails) if fails else "all as expected"))
sys.exit(1 if fails else 0)
PY
ok $? "flags: one slow host of 8 (pairs at 0.3x): its 7 pairs flagged, it is named; healthy pairs within +-4% never flagged (50 sweeps); one pair judges nothing; a dead host's 5 timeouts named by host; a pair slow once and fine on its retry is not flagged"

printf 'onlyone slots=1\n' >"${TMPDIR:-/tmp}/pairs-one.$$"
printf 'a slots=x\n' >"${TMPDIR:-/tmp}/pairs-bad.$$"
for args in "--small 0" "--large 1X" "--small 8K --large 8K" "--timeout 0" "--retries 11" "--coll ring" "--gpus -1" "--frobnicate 1" \
            "--timeout" "--hostfile ${TMPDIR:-/tmp}/pairs-nosuch.$$" "--hostfile ${TMPDIR:-/tmp}/pairs-one.$$" \
            "--hostfile ${TMPDIR:-/tmp}/pairs-bad.$$"; do
  # shellcheck disable=SC2086
  env -u SLURM_JOB_NODELIST -u SLURM_NODELIST scripts/pairs $args >"${TMPDIR:-/tmp}/pairs-log.$$" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"${TMPDIR:-/tmp}/pairs-log.$$")" = 1 ] && grep -q "^pairs: .*--" "${TMPDIR:-/tmp}/pairs-log.$$"
  ok $? "pairs $args: exit 2, one line naming the option: $(cat "${TMPDIR:-/tmp}/pairs-log.$$")"
done
env -u SLURM_JOB_NODELIST -u SLURM_NODELIST scripts/pairs >"${TMPDIR:-/tmp}/pairs-log.$$" 2>&1
[ $? = 2 ] && grep -q "hostfile.*or run inside a Slurm allocation" "${TMPDIR:-/tmp}/pairs-log.$$"
ok $? "no hostfile outside Slurm: exit 2: $(cat "${TMPDIR:-/tmp}/pairs-log.$$")"
rm -f "${TMPDIR:-/tmp}"/pairs-*.$$
done_testing
