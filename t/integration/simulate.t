#!/bin/bash
# simulate: the SMPI build (make SIMGRID=1) and a 16-rank all-reduce on a simulated fat tree:
# every check passes on real buffers (8 B, 8 KiB) and the folded size (8 MiB, over --fold 4M)
# is reported skipped, not passed; rows and manifest say simulated and name the platform; the
# alpha-beta models are what the formulas say (ring at 8 B on one leaf: 2(p-1) x 2 links x
# 0.5 us = 30 us, plus 2(p-1)/p x 8 B / 25 GB/s) and ring, rhd and tree come within 15% + one
# route latency (1 us) of them at 8 B and 8 MiB (the tolerance scripts/simulate asserts and
# justifies in its header). A buffer of exactly --fold bytes is real and checked. Compute
# sampling marks rows and manifest, keeps every check passing and changes no simulated time.
# Platform generators and usage errors; results directories checked before anything is written
# into them, and rank counts that are not powers of two (one rank, small tori, the tree at p = 3);
# direct on the fat-tree and the torus on the torus platform at 16 ranks (8 B and 8 MiB) and at
# 8 MiB on 64 ranks (the torus also on 256), within 15% of their models; scaling-study checks
# its options before any point, exits 3 when no point was measured, and with direct and torus in
# --colls prints their crossover lines.
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
for n in 2M 2052K; do  # one results directory each: a program refuses another run's directory
  scripts/simulate --ranks 4 --fold 4M allreduce -C ring,dbtree -b $n -e $n -o "$out/lim-$n" >>"$out/lim.log" 2>&1
done
python3 - "$out/lim-2M/allreduce.jsonl" "$out/lim-2052K/allreduce.jsonl" <<'PY'
import json, sys
rows = [r for f in sys.argv[1:] for r in map(json.loads, open(f)) if r["variant"] in ("ring", "dbtree")]
got = sorted((r["variant"], r["params"]["bytes"], r["check"]["status"]) for r in rows)
want = sorted((c, n, s) for c in ("ring", "dbtree") for n, s in ((2 << 20, "pass"), ((2 << 20) + 4096, "skipped")))
if got != want: print(f"# got {got}, expected {want}")
sys.exit(got != want)
PY
ok $? "a buffer of exactly --fold bytes is real and checked (pass); one page more is folded (skipped)"

# Compute sampling: the same 8-rank sweep (8 KiB to 8 MiB, every buffer real under --fold 16M)
# with --sample 2 and --sample 0. Sampled rows say so (2 samples, the collectives' local
# reduction, runs skipped), every check passes (the checked call computes every sum), and the
# simulated times are those of the unsampled run to 1 ns (allreduce charges no computation).
for n in 0 2; do
  scripts/simulate --ranks 8 --fold 16M --sample $n allreduce -C ring,rhd,tree,dbtree -b 8K -e 8M \
    -o "$out/smp$n" >"$out/smp$n.log" 2>&1
  ok $? "8 ranks with --sample $n: exit 0"
done
python3 - "$out/smp0" "$out/smp2" <<'PY'
import json, sys, os
def rows(d):
    return {(r["variant"], r["params"]["bytes"]): r for r in map(json.loads, open(os.path.join(d, "allreduce.jsonl")))
            if r["variant"] in ("ring", "rhd", "tree", "dbtree")}
plain, smp = rows(sys.argv[1]), rows(sys.argv[2])
bad = []
if len(smp) != 12 or plain.keys() != smp.keys(): bad.append(f"rows {sorted(smp)} vs {sorted(plain)}")
for k, r in smp.items():
    s = r["simulated"].get("sampling") or {}
    if s.get("samples") != 2 or s.get("sites") != ["the collectives' local reduction (sl_reduce_host)"] or not s.get("skipped_runs"):
        bad.append(f"{k}: sampling {s}")
    if "sampling" in plain[k]["simulated"]: bad.append(f"{k}: unsampled row says sampling")
    if r["check"]["status"] != "pass" or plain[k]["check"]["status"] != "pass": bad.append(f"{k}: check {r['check']}")
    if abs(r["time"]["median"] - plain[k]["time"]["median"]) > 1e-9: bad.append(f"{k}: {r['time']['median']} vs {plain[k]['time']['median']}")
man = json.load(open(os.path.join(sys.argv[2], "manifest.json")))
if (man["simulated"].get("sampling") or {}).get("samples") != 2: bad.append(f"manifest: {man['simulated']}")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "sampled rows and manifest say so; checks pass; simulated times as without sampling (1 ns)"
grep -q "compute sampled: each rank adds up its first 2 segments" "$out/smp2.log"
ok $? "the header says compute was sampled and how"

scripts/platforms/fat-tree --nodes 1024 | grep -q 'topo_parameters="2;32,32;1,32;1,1"'
ok $? "fat-tree of 1024 nodes: 32 leaves of 32, 32 spines"
scripts/platforms/torus --nodes 1024 --bw 400Gbps >"$out/torus.xml"
grep -q 'topo_parameters="8,8,16"' "$out/torus.xml" && grep -q 'bw="5e+10Bps"' "$out/torus.xml"
ok $? "torus of 1024 nodes: 8x8x16, 400 Gb/s = 50 GB/s links"
scripts/platforms/fat-tree --bw fast >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a bad --bw is exit 2"
for args in "--platform mesh allreduce" "--ranks 0 allreduce" "--ranks 16 nosuch" "--fold 1K allreduce" \
            "--ranks 128 ddp -C mpi" "--sample many allreduce" "--tolerance inf allreduce" \
            "--tolerance nan allreduce" "--tolerance -5 allreduce"; do
  scripts/simulate $args >"$out/err" 2>&1
  rc=$?
  ok $([ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ]; echo $?) "simulate $args: one line, exit 2 (got $rc)"
done

# refused PATTERN DESCRIPTION COMMAND...: exit 2, one line on stderr matching PATTERN, no traceback
# (within a minute: a refusal that came only after running points would take hours)
refused() {
  local want=$1 what=$2; shift 2
  timeout 60 "$@" >"$out/log" 2>"$out/err"
  local rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/err")" = 1 ] && grep -q -- "$want" "$out/err" \
    && ! grep -q Traceback "$out/log" "$out/err"
  ok $? "$what: exit 2, one line ($(cat "$out/err"))"
  [ $rc = 2 ] || diag "rc=$rc: $(tail -3 "$out/err")"
}
# Results directories are checked before simulate writes its platform into them (the program
# would refuse them only after that), and nothing is written through a planted link.
: >"$out/afile"
refused "--out (-o) '$out/afile' is not a directory" "simulate -o FILE" \
  scripts/simulate --ranks 2 allreduce -b 8 -e 8 -o "$out/afile"
SL_RESULTS=$out/afile refused "SL_RESULTS '$out/afile' is not a directory" "simulate with SL_RESULTS=FILE" \
  scripts/simulate --ranks 2 allreduce -b 8 -e 8
before=$(cksum <"$out/ar/platform-fat-tree-16.xml")
refused "$out/ar already holds the results of another run" "simulate into another run's directory" \
  scripts/simulate --ranks 16 --bw 100Gbps allreduce -b 8 -e 8 -o "$out/ar"
[ "$(cksum <"$out/ar/platform-fat-tree-16.xml")" = "$before" ]
ok $? "... and that run's platform file is left as it was"
mkdir -p "$out/planted" && echo keep >"$out/victim" && ln -s "$out/victim" "$out/planted/platform-fat-tree-2.xml"
refused "platform-fat-tree-2.xml is a symbolic link: refusing to write through it" "simulate with a planted link" \
  scripts/simulate --ranks 2 allreduce -b 8 -e 8 -o "$out/planted"
[ "$(cat "$out/victim")" = keep ]
ok $? "... and the file the link points to is untouched"

# Rank counts a power of two or not, on both platforms: one rank has no model to compare with
# (no message); a torus of 1, 2, 3 or 5 nodes would declare a link twice (SimGrid aborts), so
# those get the smallest torus with at most one dimension of 1 (1x2x2, 1x2x3); the binomial
# tree at p = 3 takes one hop each way, not two (scripts/platforms/alpha_beta.py).
for pr in "fat-tree 1" "fat-tree 3" "torus 1" "torus 2" "torus 3" "torus 5"; do
  set -- $pr
  timeout 300 scripts/simulate --platform $1 --ranks $2 allreduce -C ring,rhd,tree -b 8 -e 8K -o "$out/p-$1-$2" \
    >"$out/p.log" 2>&1
  rc=$?
  [ $rc = 0 ] && ! grep -q -e Traceback -e 'OUTSIDE TOLERANCE' "$out/p.log" \
    && if [ $2 = 1 ]; then grep -q "one rank sends no message" "$out/p.log"
       else grep -q "alpha-beta: 6 of 6 asserted rows within 15%" "$out/p.log"; fi
  ok $? "simulate --platform $1 --ranks $2: exit 0, every asserted row within tolerance (rc=$rc)"
  [ $rc = 0 ] || grep -v WARNING "$out/p.log" | tail -5 | sed 's/^/# /' >&2
done
python3 - "$out/p-fat-tree-3/alpha_beta.json" <<'PY'
import json, sys
t = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["rows"] if r["collective"] == "tree"}[8]
ok = abs(t["model_s"] - 2e-6) < 0.01e-6 and abs(t["simulated_s"] - t["model_s"]) < 0.1e-6
print(f"# tree at p = 3, 8 B: simulated {t['simulated_s'] * 1e6:.3f} us, model {t['model_s'] * 1e6:.3f} us")
sys.exit(0 if ok else 1)
PY
ok $? "the binomial tree at p = 3, 8 B: model 2 us (one hop each way), simulated within 0.1 us of it"

# The fully connected all-reduce on the fat-tree and the 2-D torus on the torus, the platforms
# they suit: both asserted within 15% (+ one route latency) of their models at 8 B and 8 MiB on
# 16 ranks; on the torus simulate lays the grid along the platform's first dimension (2x2x4:
# --torus 2x8, said in its options line), and on a prime rank count gives the 1xP grid.
for pc in "fat-tree direct" "torus torus"; do
  set -- $pc
  timeout 300 scripts/simulate --platform $1 --ranks 16 allreduce -C $2 -b 8 -e 8M -f 1024 \
    -o "$out/dt-$2" >"$out/dt.log" 2>&1
  rc=$?
  [ $rc = 0 ] && grep -q "alpha-beta: 2 of 2 asserted rows within 15%" "$out/dt.log" \
    && { [ $2 = direct ] || grep -q "options for a simulation .*--torus 2x8" "$out/dt.log"; }
  ok $? "simulate --platform $1 --ranks 16 -C $2: both sizes asserted within tolerance of the model (rc=$rc)"
  [ $rc = 0 ] || grep -v WARNING "$out/dt.log" | tail -5 | sed 's/^/# /' >&2
done
# ... and at more rank counts at 8 MiB, where the beta term is 99% of either model: direct on
# the fat-tree at p = 64 (two leaves: its flows cross the spines), the torus on the torus at
# p = 64 and 256, each within 15% of its model with no route latency added (buffers folded; the
# 16-rank runs above check results). Each point takes seconds; direct at 128 ranks (16256 flows
# at once) took 30-45 s on 2 cores, and direct at 256 and the torus at 1024 take minutes: they
# are the lab sheet's (scripts/scaling-study).
for pc in "fat-tree direct 64" "torus torus 64" "torus torus 256"; do
  set -- $pc
  timeout 600 scripts/simulate --platform $1 --ranks $3 --fold 4M allreduce -C $2 -b 8M -e 8M \
    -o "$out/big-$2-$3" >"$out/big.log" 2>&1
  rc=$?
  got=$(python3 - "$out/big-$2-$3/alpha_beta.json" "$2" <<'PY'
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["rows"] if r["collective"] == sys.argv[2]]
r = rows[0] if len(rows) == 1 and rows[0]["bytes"] == 8 << 20 else None
print(f"{r['simulated_s'] * 1e6:.2f} us against {r['model_s'] * 1e6:.2f} us, {r['rel_diff'] * 100:+.1f}%" if r else "no row")
sys.exit(0 if r and abs(r["rel_diff"]) <= 0.15 else 1)
PY
)
  within=$?
  ok $([ $rc = 0 ] && [ $within = 0 ]; echo $?) "simulate --platform $1 --ranks $3 -C $2 at 8 MiB: within 15% of the model ($got; rc=$rc)"
  [ $rc = 0 ] || grep -v WARNING "$out/big.log" | tail -5 | sed 's/^/# /' >&2
done
timeout 300 scripts/simulate --platform fat-tree --ranks 3 allreduce -C torus -b 12 -e 12 -o "$out/dt3" \
  >"$out/dt.log" 2>&1
ok $? "simulate -C torus on 3 ranks: --torus 1x3 given, exit 0 ($(grep -o -- '--torus [0-9x]*' "$out/dt.log" | head -1))"

# scaling-study: options checked before any point runs; no point measured is exit 3.
refused "--platform: expected fat-tree or torus, got 'bogus'" "scaling-study --platform bogus" \
  scripts/scaling-study --platform bogus --out "$out/ss-bogus"
[ ! -e "$out/ss-bogus" ]
ok $? "... and no point ran"
refused "--out '$out/afile' is not a directory" "scaling-study --out FILE" scripts/scaling-study --out "$out/afile"
refused "--max-ranks: expected an integer in \[2, 4096\], got '0'" "scaling-study --max-ranks 0" \
  scripts/scaling-study --max-ranks 0 --out "$out/ss0"
refused "--point-timeout: expected a whole number of seconds >= 1, got '0'" "scaling-study --point-timeout 0" \
  scripts/scaling-study --point-timeout 0 --out "$out/ss0"
refused "--colls: expected a comma-separated list of ring, rhd, tree, dbtree, direct, torus, each once, got 'ring,mesh'" \
  "scaling-study --colls ring,mesh" scripts/scaling-study --colls ring,mesh --out "$out/ss0"
# every point refused: each point's directory already holds another run
for d in allreduce-p2-8B allreduce-p2-268435456B; do
  mkdir -p "$out/ssx/$d" && echo '{"run_id":"another"}' >"$out/ssx/$d/manifest.json"
done
timeout 300 scripts/scaling-study --part allreduce --max-ranks 2 --large-max-ranks 2 --out "$out/ssx" \
  >"$out/log" 2>"$out/err"
rc=$?
[ $rc = 3 ] && grep -q "no point was measured" "$out/err" && [ "$(wc -l <"$out/err")" = 1 ]
ok $? "scaling-study with every point failed: exit 3, no point was measured (rc=$rc: $(cat "$out/err"))"
timeout 300 scripts/scaling-study --platform torus --part allreduce --max-ranks 2 --large-max-ranks 2 \
  --out "$out/sst" >"$out/log" 2>&1
rc=$?
# p = 2 with a figure for each algorithm: the 8 B row, the 256 MiB row and their models' row
[ $rc = 0 ] && [ "$(grep -Ec '^ +2 \| +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ \|' "$out/log")" = 3 ]
ok $? "scaling-study on a torus at p = 2: both sizes measured and compared with the models, exit 0 (rc=$rc)"
[ $rc = 0 ] || tail -5 "$out/log" | sed 's/^/# /' >&2
# --colls with direct and torus on a torus platform, p = 2 and 4 at 8 B (2 at 256 MiB): at p = 2
# all three are one exchange each way and tie; at p = 4 direct (2 route latencies) and the 2x2
# torus (4 one-hop steps) tie ahead of the ring's 6 steps. The study says so in its crossover
# lines, direct's against the ring included; every point's results directory validates; the
# agreement table has direct's and the torus's ratios to their models.
timeout 300 scripts/scaling-study --platform torus --part allreduce --colls ring,direct,torus --max-ranks 4 \
  --large-max-ranks 2 --out "$out/ssdt" >"$out/log" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^# crossover: ring=direct=torus fastest below 4 ranks, direct=torus from 4$' "$out/log" \
  && grep -q '^# direct ties with the ring from p = 2 ' "$out/log" && grep -q '^# direct beats the ring from p = 4 ' "$out/log"
ok $? "scaling-study --colls ring,direct,torus: crossover lines for direct and torus at p = 4, direct vs the ring (rc=$rc)"
[ $rc = 0 ] || tail -5 "$out/log" | sed 's/^/# /' >&2
n=0
for d in "$out"/ssdt/allreduce-p*B; do
  scripts/validate run "$d" >/dev/null 2>"$out/err" && n=$((n + 1)) || sed 's/^/# /' "$out/err" | head -3 >&2
done
[ $n = 3 ]
ok $? "... its 3 points' results directories validate against results/schema.json ($n valid)"
python3 - "$out/log" <<'PY'
import re, sys
text = open(sys.argv[1]).read().split("# simulated / alpha-beta model")[-1]
# p | ring 8B direct 8B torus 8B | ring 256M direct 256M torus 256M. At 256 MiB within 15%. At
# 8 B each rank's clock starts at its own exit from the barrier, whose spread (about one route
# latency) adds to a model of one or two microseconds: 1.51 for all three at p = 2, where they
# are the same one exchange, so at most 1.6 there, never under the model.
rows = {int(m[1]): m[2].split() for m in re.finditer(r"^ +(\d+) \|([^|]*\|[^\n]*)$", text, re.M)}
bad = []
for p, cells in rows.items():
    cells = [c for c in cells if c != "|"]
    for name, c, lo, hi in zip(("direct 8B", "torus 8B", "direct 256M", "torus 256M"),
                               (cells[1], cells[2], cells[4], cells[5]), (1.0, 1.0, 0.85, 0.85),
                               (1.6, 1.6, 1.15, 1.15)):
        if c == "-" and "256M" in name and p > 2: continue
        if c == "-" or not lo <= float(c) <= hi: bad.append(f"p={p} {name}: {c}")
if sorted(rows) != [2, 4]: bad.append(f"agreement rows for p = {sorted(rows)}, expected 2 and 4")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "... its agreement table gives direct's and the torus's simulated/model ratios at p = 2 and 4"
done_testing
