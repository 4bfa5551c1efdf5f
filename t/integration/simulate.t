#!/bin/bash
# simulate: the SMPI build (make SIMGRID=1) and a 16-rank all-reduce on a simulated fat tree:
# every check passes on real buffers (8 B, 8 KiB) and the folded size (8 MiB, over --fold 4M)
# is reported skipped, not passed; rows and manifest say simulated and name the platform; the
# alpha-beta models are what the formulas say (ring at 8 B on one leaf: 2(p-1) x 2 links x
# 0.5 us = 30 us, plus 2(p-1)/p x 8 B / 25 GB/s) and ring, rhd and tree come within 15% + one
# route latency (1 us) of them at 8 B and 8 MiB (the tolerance scripts/simulate asserts and
# justifies in its header). Platform generators and usage errors.
# Skips when smpicc is not installed (apt: libsimgrid-dev).
. "$(dirname "$0")/../lib/common.sh"
if ! command -v smpicc >/dev/null 2>&1 || ! command -v smpirun >/dev/null 2>&1; then
  echo "1..0 # SKIP smpicc/smpirun not found (apt: libsimgrid-dev)"
  exit 0
fi
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top"

make -s SIMGRID=1 smpi >"$out/make.log" 2>&1
ok $? "make SIMGRID=1 smpi builds the SMPI tree"
for p in allreduce ddp; do
  test -x build/smpi/bin/$p
  ok $? "build/smpi/bin/$p exists"
done

scripts/simulate --platform fat-tree --ranks 16 --fold 4M allreduce -C ring,rhd,tree,dbtree \
  -b 8 -e 8M -f 1024 --mode latency --place out -w 0 -n 3 -o "$out/ar" >"$out/ar.log" 2>&1
rc=$?
ok $rc "16 simulated ranks: checks pass and the alpha-beta rows are within tolerance (exit $rc)"
[ $rc = 0 ] || sed 's/^/# /' "$out/ar.log" | grep -v WARNING | tail -30 >&2
grep -q "SIMULATED by SimGrid SMPI.*fat-tree of 16 nodes" "$out/ar.log"
ok $? "the header says simulated and describes the platform"

python3 - "$out/ar" <<'PY'
import json, sys, os
d = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(d, "allreduce.jsonl"))]
man = json.load(open(os.path.join(d, "manifest.json")))
bad = []
plat = "fat-tree of 16 nodes (1 leaves x 16 nodes, 16 spines), links 200 Gb/s, 0.5 us per link"
if (man.get("simulated") or {}).get("platform") != plat: bad.append(f"manifest: {man.get('simulated')}")
lat = [r for r in rows if (r.get("params") or {}).get("mode") == "latency"]
if len(lat) != 12: bad.append(f"{len(lat)} latency rows, expected 4 x 3")
for r in rows:
    if (r.get("simulated") or {}).get("platform") != plat: bad.append(f"row {r['variant']}: {r.get('simulated')}")
for r in lat:
    want = "skipped" if r["params"]["bytes"] == 8 << 20 else "pass"
    if r["check"]["status"] != want: bad.append(f"{r['variant']} {r['params']['bytes']}: {r['check']['status']}, expected {want}")
ab = json.load(open(os.path.join(d, "alpha_beta.json")))
m = {(x["collective"], x["bytes"]): x for x in ab["rows"]}
want = 30e-6 + 2 * 15 / 16 * 8 / 25e9
if abs(m[("ring", 8)]["model_s"] - want) > 1e-15: bad.append(f"ring model at 8 B {m[('ring', 8)]['model_s']}, expected {want}")
# rhd on 16 ranks of one leaf at 8 MiB: steps of 4, 2, 1 and 0.5 MiB, each way, in 256 KiB
# segments of 1 us latency each (16 + 8 + 4 + 2), and 2(15/16) n / 25 GB/s
want = 2 * (16 + 8 + 4 + 2) * 1e-6 + 2 * 15 / 16 * (8 << 20) / 25e9
if abs(m[("rhd", 8 << 20)]["model_s"] - want) > 1e-15: bad.append(f"rhd model at 8 MiB {m[('rhd', 8 << 20)]['model_s']}, expected {want}")
for c in ("ring", "rhd", "tree"):
    for n in (8, 8 << 20):
        x = m[(c, n)]
        if abs(x["simulated_s"] - x["model_s"]) > 0.15 * x["model_s"] + 1e-6: bad.append(f"{c} {n}: simulated {x['simulated_s']} vs model {x['model_s']}")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "rows and manifest marked simulated; checks pass on real buffers, skipped on folded; models as the formulas say, within 15% + 1 us"

# At the fold limit: a 2 MiB all-reduce's send and receive buffers are 4 MiB, exactly --fold 4M,
# so they are real and checked; 4 KiB more (one page each) is folded and reported skipped.
for n in 2M 2052K; do
  scripts/simulate --ranks 4 --fold 4M allreduce -C ring,dbtree -b $n -e $n -o "$out/lim" >>"$out/lim.log" 2>&1
done
python3 - "$out/lim/allreduce.jsonl" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["variant"] in ("ring", "dbtree")]
got = sorted((r["variant"], r["params"]["bytes"], r["check"]["status"]) for r in rows)
want = sorted((c, n, s) for c in ("ring", "dbtree") for n, s in ((2 << 20, "pass"), ((2 << 20) + 4096, "skipped")))
if got != want: print(f"# got {got}, expected {want}")
sys.exit(got != want)
PY
ok $? "a buffer of exactly --fold bytes is real and checked (pass); one page more is folded (skipped)"

scripts/platforms/fat-tree --nodes 1024 | grep -q 'topo_parameters="2;32,32;1,32;1,1"'
ok $? "fat-tree of 1024 nodes: 32 leaves of 32, 32 spines"
scripts/platforms/torus --nodes 1024 --bw 400Gbps >"$out/torus.xml"
grep -q 'topo_parameters="8,8,16"' "$out/torus.xml" && grep -q 'bw="5e+10Bps"' "$out/torus.xml"
ok $? "torus of 1024 nodes: 8x8x16, 400 Gb/s = 50 GB/s links"
scripts/platforms/fat-tree --bw fast >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a bad --bw is exit 2"
for args in "--platform mesh allreduce" "--ranks 0 allreduce" "--ranks 16 nosuch" "--fold 1K allreduce" \
            "--ranks 128 ddp -C mpi"; do
  scripts/simulate $args >"$out/err" 2>&1
  rc=$?
  ok $([ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ]; echo $?) "simulate $args: one line, exit 2 (got $rc)"
done
done_testing
