#!/bin/bash
# pairs_schedule.t — scripts/pairs without hosts: its schedule (every pair once, rounds of
# disjoint pairs, N - 1 rounds for even N and N for odd), its flags on made-up sweeps (the pairs
# of one slow host flagged and that host named, against the median of many pairs and against
# the best of few; healthy pairs within a few percent never flagged; one pair flags nothing;
# GPU pairs inside a node judged apart from those between nodes; timeouts named by host) and its
# usage errors.
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
if s["flagged"] or [g["rule"] for g in s["metrics"]["p2p_bw"]["groups"]] != [None]:
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

# fewer than 10 pairs of a kind: each pair against the best pair of its kind (--flag-below)
python3 - <<'PY'
import random, sys
sys.path.insert(0, "scripts")
from pairslib import analysis, schedule
rnd = random.Random(11)
def sweep(eps, slow=(), spread=0.04, fast_inside=1):
    """pairs of endpoints 'host' or 'host:gpuN'; a pair through a slow endpoint or link at 0.3x,
    pairs inside a host fast_inside x faster"""
    out = []
    for r in schedule.rounds(eps):
        for a, b in r:
            ha, hb = a.split(":")[0], b.split(":")[0]
            f = (1 + rnd.uniform(-spread, spread)) * (fast_inside if ha == hb else 1)
            if any(x in (a, b) if isinstance(x, str) else set(x) == {a, b} for x in slow):
                f *= 0.3
            p = {"host_a": ha, "host_b": hb, "endpoint_a": a, "endpoint_b": b, "status": "ok"}
            for name, unit, higher in analysis.METRICS:
                p[name] = 12.0 * f if higher else 5e-6 / f
            out.append(p)
    return out
def flagged(pairs, s):
    return {"-".join(sorted((pairs[i]["endpoint_a"], pairs[i]["endpoint_b"]))) for i in s["flagged"]}
fails = []
hosts = [f"node{i:02d}" for i in range(4)]
for n in (3, 4):
    pairs = sweep(hosts[:n], slow=["node02"])
    s = analysis.summary(pairs)
    want = {"-".join(sorted((h, "node02"))) for h in hosts[:n] if h != "node02"}
    if flagged(pairs, s) != want or s["most_flagged"] != (["node02"], n - 1) or s["noted"] != s["flagged"]:
        fails.append(f"{n} hosts, node02 slow: flagged {sorted(flagged(pairs, s))}, named {s['most_flagged']}")
    if {g["rule"] for r in s["metrics"].values() for g in r["groups"]} != {"best"}:
        fails.append(f"{n} hosts: not judged against the best pair")
    for seed in range(50):
        rnd.seed(seed)
        s = analysis.summary(sweep(hosts[:n]))
        if s["flagged"] or s["noted"]:
            fails.append(f"{n} healthy hosts (seed {seed}): flagged {s['flagged']} noted {s['noted']}")
            break
pairs = sweep(hosts[:3], slow=[("node00", "node02")])
s = analysis.summary(pairs)
if flagged(pairs, s) != {"node00-node02"} or s["most_flagged"] != (["node00", "node02"], 1):
    fails.append(f"3 hosts, one slow link: flagged {sorted(flagged(pairs, s))}, named {s['most_flagged']}")
pairs = sweep(hosts[:3], slow=["node02"])
if analysis.summary([dict(p, flag_below=0.2) for p in pairs])["flagged"]:
    fails.append("pairs at 0.3x flagged by a sweep run with --flag-below 0.2")
# two hosts of two GPUs: the two pairs inside a node 10x faster than the four between them,
# each kind judged on its own; then gpu1 of node01 slow: its three pairs
eps = ["node00:gpu0", "node00:gpu1", "node01:gpu0", "node01:gpu1"]
pairs = sweep(eps, fast_inside=10)
s = analysis.summary(pairs)
kinds = [g["kind"] for g in s["metrics"]["p2p_bw"]["groups"]]
if s["flagged"] or kinds != ["between hosts", "inside a host"]:
    fails.append(f"2 hosts x 2 GPUs, healthy: flagged {sorted(flagged(pairs, s))}, kinds {kinds}")
pairs = sweep(eps, slow=["node01:gpu1"], fast_inside=10)
s = analysis.summary(pairs)
if flagged(pairs, s) != {"node00:gpu0-node01:gpu1", "node00:gpu1-node01:gpu1", "node01:gpu0-node01:gpu1"}:
    fails.append(f"2 hosts x 2 GPUs, node01:gpu1 slow: flagged {sorted(flagged(pairs, s))}")
print("# " + ("; ".join(fails) if fails else "all as expected"))
sys.exit(1 if fails else 0)
PY
ok $? "flags with few pairs, against the best of their kind: one slow host of 3 or 4 (0.3x): its pairs flagged, it named; healthy pairs within +-4% never (50 sweeps each); one slow link of 3 hosts: that pair, its ends named; the sweep's --flag-below is the reader's; GPU pairs inside and between hosts judged apart"

# a made-up sweep of six hosts: node02's links at a tenth, node04 hanging
res=$(tmpdir)
python3 - "$res" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from pairslib import schedule
hosts = [f"node{i:02d}" for i in range(6)]
with open(sys.argv[1] + "/pairs.jsonl", "w") as f:
    for rnd, r in enumerate(schedule.rounds(hosts), 1):
        for a, b in r:
            st = "timeout" if "node04" in (a, b) else "ok"
            slow = 0.1 if "node02" in (a, b) else 1
            m = {k: {"value": (v if st == "ok" else None), "unit": u} for k, v, u in
                 [("p2p_bw", 12 * slow, "GB/s"), ("p2p_lat", 3e-6, "s"), ("allreduce_busbw", 11 * slow, "GB/s"),
                  ("allreduce_small", 5e-6, "s")]}
            f.write(json.dumps({
                "schema_version": 2, "run_id": "made-up", "benchmark": "pairs", "variant": f"{a}-{b}",
                "backend": None, "collective": "mpi", "dtype": "f32", "ranks": 2,
                "params": {"host_a": a, "host_b": b, "endpoint_a": a, "endpoint_b": b, "round": rnd,
                           "status": st, "attempt": 1},
                "iterations": {"timed": 1, "warmup": 0}, "time": None, "metrics": m, "headline": "p2p_bw",
                "gate": None, "check": {"status": "pass" if st == "ok" else "fail", "error": 0,
                                        "message": None if st == "ok" else f"timed out (hosts {a}, {b})"}}) + "\n")
PY
scripts/report "$res" >"$res/report.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "host in most flagged pairs: node02 (in 4 of them)" "$res/report.log" &&
  grep -q "host in most timeout pairs: node04 (in 5 of them)" "$res/report.log" &&
  grep -Eq "^# +node02 +1.2\* +1.2\* +\. +1.2\* +T +1.2\*$" "$res/report.log"
ok $? "report on a sweep (no manifest): node02's 4 measured pairs flagged and node02 named, node04's 5 timeouts named, the heat map row (rc=$rc)"
scripts/report "$res" --html "$res/page.html" >"$res/html.log" 2>&1
if grep -q "matplotlib is not installed" "$res/html.log"; then
  ok 0 "# SKIP report --html: no matplotlib here"
else
  grep -q 'alt="pairs heat map"' "$res/page.html" && grep -q "Host in most flagged pairs: node02 (4)" "$res/page.html"
  ok $? "report --html draws the host x host heat map, its caption naming node02"
fi
rm -rf "$res"

# --gpus on one host: its two GPUs are the endpoints, one pair inside the node; both ranks see
# both devices (the suite gives local rank r the r-th). There is no GPU here: the program the
# sweep starts (SL_BIN) records what it was given and runs allreduce on the cpu backend.
res=$(tmpdir)
mkdir "$res/bin"
cat >"$res/bin/allreduce" <<EOF
#!/bin/sh
echo "CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-unset} args \$*" >>"$res/seen"
for a; do shift; [ "\$a" = cuda ] && set -- "\$@" cpu || set -- "\$@" "\$a"; done
exec "$top/bin/allreduce" "\$@"
EOF
chmod +x "$res/bin/allreduce"
printf 'localhost slots=2\n' >"$res/hostfile"
SL_BIN="$res/bin" SL_BIND=none scripts/pairs --hostfile "$res/hostfile" --gpus 2 --coll mpi --large 64K --iters 3 \
  --timeout 60 --out "$res/out" >"$res/log" 2>&1
rc=$?
sed 's/^/#   /' "$res/log" >&2
[ $rc = 0 ] && grep -q "1 pair(s) of 1 host(s)" "$res/log" &&
  grep -Eq "^ +1 +localhost:gpu0 +localhost:gpu1 +ok " "$res/log" &&
  [ "$(grep -c "CUDA_VISIBLE_DEVICES=0,1 args .*-B cuda" "$res/seen")" = 4 ] &&
  grep -Eq "^# *localhost +[0-9.e-]+$" "$res/log"
ok $? "--gpus 2 on one host: the pair gpu0-gpu1 inside the node, both ranks of both runs see devices 0,1 with -B cuda, the heat map's diagonal holds it (rc=$rc)"
rm -rf "$res"

printf 'onlyone slots=1\n' >"${TMPDIR:-/tmp}/pairs-one.$$"
printf 'a slots=x\n' >"${TMPDIR:-/tmp}/pairs-bad.$$"
for args in "--small 0" "--large 1X" "--small 8K --large 8K" "--timeout 0" "--retries 11" "--flag-below 0" "--flag-below 1" "--flag-below x" "--coll ring" "--gpus -1" "--frobnicate 1" \
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
