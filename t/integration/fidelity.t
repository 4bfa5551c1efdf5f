#!/bin/bash
# Measurement fidelity: allreduce's latency rows at the reference sizes carry the plain loop's
# statistics, harness_overhead and the core-to-core round trip (finite, on every implementation,
# both placements, a dtype the library takes directly and one it does not), other rows do not,
# the table shows harness_overhead as its ovh column, and the run says where the plain loop ran,
# the worst overhead and the round trip's range; SL_NO_PHASES=1 turns the training programs' phase
# recording off and their rows stay correct (no timed assertions: the figures are not judged).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

# -b 4 -e 1K -f 4: 5 sizes; the plain loop runs at every fourth (4, 1024 B) and the last (1024).
launch 2 allreduce -C mpi,ring -d f32,f16 -b 4 -e 1K -f 4 -n 10 -w 2 --reps 1 -o "$out/ar" \
  >"$out/ar.txt" 2>&1
rc=$?
ok $rc "allreduce -C mpi,ring -d f32,f16 over 5 sizes exits 0"
[ $rc = 0 ] || sed 's/^/#   /' "$out/ar.txt" | tail -n 20 >&2
"$top/scripts/validate" rows "$out/ar/allreduce.jsonl" >/dev/null
ok $? "rows validate against the schema"
python3 - "$out/ar/allreduce.jsonl" <<'PY'
import json, math, sys
fields = ("harness_overhead", "harness_overhead_median", "reference_avg", "reference_median", "core_rtt")
bad, seen = [], set()
for r in map(json.loads, open(sys.argv[1])):
    if r["variant"] in ("memcpy", "model"):
        continue
    p, m = r["params"], r["metrics"]
    want = p["mode"] == "latency" and p["bytes"] in (4, 1024)
    for f in fields:
        v = m.get(f, {}).get("value")
        if want and not (isinstance(v, (int, float)) and math.isfinite(v)):
            bad.append(f"{r['variant']} {r['dtype']} {p['place']} {p['bytes']}: {f} = {v}")
        if not want and f in m:
            bad.append(f"{r['variant']} {p['mode']} {p['bytes']}: {f} where no plain loop ran")
    if want:
        ref, h = m["reference_avg"]["value"], m["harness_overhead"]["value"]
        if ref and not (ref > 0 and abs(r["time"]["rank_mean"] / ref - 1 - h) < 1e-9 * (1 + abs(h))):
            bad.append(f"{r['variant']} {p['bytes']}: harness_overhead {h} != avg / reference_avg - 1")
        seen.add((r["variant"], r["dtype"], p["place"], p["bytes"]))
if len(seen) != 2 * 2 * 2 * 2:
    bad.append(f"rows with a plain loop: {sorted(seen)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "latency rows at 4 and 1024 B (mpi and ring, f32 and f16, in and out) carry finite harness_overhead, the plain loop's avg and median and core_rtt; no other row does"
grep -q '^# harness_overhead: latency rows at 4,1024 B are also timed by a plain loop .*, in 10 chunks alternating with the row' "$out/ar.txt"
ok $? "the run header names the sizes the plain loop runs at, and its chunks"
# the table's ovh column: harness_overhead in %, a finite number where the plain loop ran, n/a elsewhere
python3 - "$out/ar.txt" <<'PY'
import math, sys
lines = open(sys.argv[1]).read().splitlines()
head = [l for l in lines if l.startswith("#") and " place " in l and " ovh " in l]
bad = [] if len(head) == 1 else [f"table headers with ovh: {head}"]
cols = head[0].lstrip("#").split() if head else []
rows = 0
for l in lines:
    f = l.split()
    if l.startswith("#") or len(f) != len(cols) or f[0] not in ("mpi", "ring"):
        continue
    r = dict(zip(cols, f))
    rows += 1
    want = r["mode"] == "latency" and r["size"] in ("4", "1024")
    ovh = r["ovh"]
    if want and not (ovh != "n/a" and math.isfinite(float(ovh))):
        bad.append(f"{l}: ovh {ovh}, expected a number")
    if not want and ovh != "n/a":
        bad.append(f"{l}: ovh {ovh}, expected n/a")
if rows != 2 * 2 * 2 * 5 * 2:
    bad.append(f"{rows} table rows")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "the table's ovh column (after avg): a finite % at 4 and 1024 B in latency mode, n/a in every other row"
grep -Eq '^# harness_overhead \(.*16 latency rows\): worst [-+][0-9.]+% on avg \((mpi|ring) f(32|16) (in|out) [0-9]+ B\), [-+][0-9.]+% on the median' "$out/ar.txt"
ok $? "the worst harness_overhead is printed, with where it was"
grep -Eq '^# core_rtt \(one cache line between ranks 0 and 1 and back, beside those rows\): [0-9.]+ to [0-9.]+ us' "$out/ar.txt"
ok $? "the range of core_rtt over the run is printed"
grep -Eq '^# core_rtt: [0-9]+\.[0-9]{3} us at the start \(one cache line between ranks 0 and 1' "$out/ar.txt" &&
  [ "$(grep -n '^# core_rtt: ' "$out/ar.txt" | cut -d: -f1)" -lt "$(grep -n '^#  *coll  *place' "$out/ar.txt" | cut -d: -f1)" ]
ok $? "the run header gives core_rtt at the start, before the table"
launch 1 allreduce -C mpi -b 4 -e 64 -n 4 -w 1 -o "$out/one" >"$out/one.txt" 2>&1
rc=$?
[ $rc = 0 ] && ! grep -q 'core_rtt' "$out/one.txt" && ! grep -q core_rtt "$out/one/allreduce.jsonl"
ok $? "one rank: no core_rtt in the header or the rows (nothing to bounce a line with; rc=$rc)"

# The phase timers' cost is measured against steps that record none: SL_NO_PHASES=1.
small="--layers 3 --width 48 --inputs 12 --outputs 5 --bucket-mb 0.004 --accum 3 -n 2 -w 1 --baseline 0"
for np_off in "" 1; do
  SL_NO_PHASES=$np_off launch 2 ddp $small -o "$out/ddp$np_off" >"$out/ddp$np_off.txt" 2>&1
  ok $? "ddp with SL_NO_PHASES='$np_off' exits 0 (every check passed)"
done
python3 - "$out/ddp/ddp.jsonl" "$out/ddp1/ddp.jsonl" <<'PY'
import json, sys
on, off = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
bad = []
if len(on) != len(off) or not on:
    bad.append(f"{len(on)} rows with phases, {len(off)} without")
for a, b in zip(on, off):
    if (a["variant"], a["check"]["status"]) != (b["variant"], "pass") or a["check"]["status"] != "pass":
        bad.append(f"{a['variant']} {a['check']['status']} / {b['variant']} {b['check']['status']}")
    if "compute" not in a["metrics"] or "phases" in a["params"]:
        bad.append(f"{a['variant']} with phases: metrics {sorted(a['metrics'])[:8]}, params {a['params'].get('phases')}")
    phases = {"data", "compute", "comm", "exposed_comm", "bubble", "transfer", "recompute", "overlap"}
    if b["params"].get("phases") != "off" or phases & set(b["metrics"]):
        bad.append(f"{b['variant']} SL_NO_PHASES=1: params.phases {b['params'].get('phases')}, "
                   f"phase metrics {sorted(phases & set(b['metrics']))}")
    if b["metrics"]["final_loss"]["value"] != a["metrics"]["final_loss"]["value"]:
        bad.append(f"{a['variant']}: final_loss {a['metrics']['final_loss']} vs {b['metrics']['final_loss']}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "SL_NO_PHASES=1: the same rows, checks passed and the same loss; params.phases off and no phase metrics"
SL_NO_PHASES=yes launch 1 ddp $small -o "$out/bad" >"$out/bad.txt" 2>"$out/bad.err"
rc=$?
[ $rc = 2 ] && [ "$(grep -c 'SL_NO_PHASES' "$out/bad.err")" = 1 ] && [ ! -e "$out/bad" ]
ok $? "SL_NO_PHASES=yes: exit 2 with one line naming it (rc=$rc: $(head -n 1 "$out/bad.err"))"

done_testing
