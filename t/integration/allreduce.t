#!/bin/bash
# allreduce (the collectives benchmark) on 1..5 ranks with every implementation (-C all) over a
# small sweep: every row's exact check passes, rows validate against the schema, every
# implementation that provides the collective appears at every size, busbw is null on one
# rank and a number otherwise, and the model rows are written. Bad inputs exit 2. The last
# block holds the exact claims of the lab sheet (benchmarks/labs/allreduce.md).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

# run NP OP DTYPES: a small sweep (5 sizes from one element per rank), both placements and modes.
run() {
  local np=$1 op=$2 dt=$3 dir="$out/np$1-$2"
  local b=$(( 8 * np ))
  launch "$np" allreduce -C all --op "$op" -d "$dt" -b "$b" -e $(( b * 4096 )) -f 8 -n 3 -w 1 \
    --reps 1 --cold --pool 4M -o "$dir" >"$dir.txt" 2>&1
  local rc=$?
  ok $rc "np=$np --op $op -d $dt -C all exits 0"
  [ $rc = 0 ] || sed 's/^/#   /' "$dir.txt" | tail -n 20 >&2
  "$top/scripts/validate" rows "$dir/allreduce.jsonl" >/dev/null
  ok $? "np=$np --op $op: rows validate against the schema"
  python3 - "$dir/allreduce.jsonl" "$np" "$op" "$dt" <<'PY'
import json, sys
path, np, op, dts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
rows = [json.loads(l) for l in open(path)]
provides = {"allreduce": {"mpi", "ring", "tree", "dbtree", "rhd", "shm", "hier", "direct", "torus"},
            "reduce_scatter": {"mpi", "ring", "rhd", "direct", "torus"},
            "allgather": {"mpi", "ring", "rhd", "direct", "torus"},
            "broadcast": {"mpi", "ring", "tree"}}[op]
# -C all leaves the torus out where the rank count is prime (its only grid, 1 x n, is the ring)
if np in (2, 3, 5):
    provides = provides - {"torus"}
places = {"in"} if op == "broadcast" else {"in", "out"}
bad, seen, models = [], set(), set()
for r in rows:
    if r["variant"] == "memcpy":
        continue
    if r["variant"] == "model":
        models.add(r["collective"])
        continue
    p, m = r["params"], r["metrics"]
    if r["check"]["status"] != "pass":
        bad.append(f"{r['variant']} {p}: check {r['check']}")
    busbw = m["busbw"]["value"]
    if np == 1 and busbw is not None:
        bad.append(f"one rank: busbw {busbw}, expected null")
    if np > 1 and not (isinstance(busbw, (int, float)) and busbw > 0):
        bad.append(f"busbw {busbw} on {np} ranks")
    if p.get("buffers") != "cold" or p["buffer_sets"] < 1:
        bad.append(f"--cold: params buffers {p.get('buffers')}, sets {p['buffer_sets']}")
    rm = r["time"]["rank_mean"]
    bra = m["busbw_rank_mean"]["value"]
    if not (isinstance(rm, (int, float)) and rm > 0) or (bra is None) != (np == 1):
        bad.append(f"time.rank_mean {rm}, busbw_rank_mean {bra}")
    seen.add((r["variant"], r["dtype"], p["place"], p["mode"], p["bytes"]))
sizes = {s[4] for s in seen}
if len(sizes) != 5:
    bad.append(f"sizes seen: {sorted(sizes)}")
want = {(v, d, pl, mo, s) for v in provides for d in dts for pl in places
        for mo in ("latency", "throughput") for s in sizes}
if seen != want:
    bad.append(f"missing {sorted(want - seen)[:5]} extra {sorted(seen - want)[:5]}")
if models != provides:
    bad.append(f"model rows for {sorted(models)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ok $? "np=$np --op $op: every implementation x size x place x mode checked exactly; busbw $([ "$np" = 1 ] && echo null || echo set)"
}

for np in 1 2 3 4 5; do
  run "$np" allreduce f32,f64,f16,bf16
done
for np in 3 4; do
  run "$np" reduce_scatter f16,f64
  run "$np" allgather bf16,f32
  run "$np" broadcast f32
done

# Warm buffers by default (one pair, as OSU and nccl-tests), recorded in every row; both
# statistics present, OSU's no larger than the slowest rank's mean (it averages over ranks).
launch 2 allreduce -C mpi,ring -b 64 -e 4K -f 8 -n 4 -w 1 -o "$out/warm" >"$out/warm.txt" 2>&1
ok $? "default run (warm buffers) exits 0"
python3 - "$out/warm/allreduce.jsonl" <<'PY'
import json, sys
bad = []
for r in map(json.loads, open(sys.argv[1])):
    if r["variant"] in ("memcpy", "model"):
        continue
    p, t = r["params"], r["time"]
    if p["buffers"] != "warm" or p["buffer_sets"] != 1:
        bad.append(f"buffers {p['buffers']} sets {p['buffer_sets']}")
    if not 0 < t["rank_mean"] <= t["max"] * (1 + 1e-12):
        bad.append(f"rank_mean {t['rank_mean']} outside (0, max {t['max']}]")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "warm by default: every row says buffers warm, one buffer set, and carries time.rank_mean"
grep -q '^#.*avg' "$out/warm.txt"
ok $? "the table has OSU's statistic as its avg column"

# Bad inputs: exit 2 with one line naming the option, and no results directory left behind.
nbad=0
expect_usage() { # expect_usage NP NAME_IN_MESSAGE ARGS...
  local np=$1 want=$2; shift 2
  nbad=$((nbad + 1))
  launch "$np" allreduce "$@" -o "$out/bad$nbad" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  if [ $rc = 2 ] && [ "$(grep -c -- "$want" "$out/stderr")" = 1 ] && [ ! -e "$out/bad$nbad" ]; then
    ok 0 "allreduce $* on $np rank(s) -> exit 2: $(head -n 1 "$out/stderr")"
  else
    ok 1 "allreduce $* on $np rank(s) -> exit 2 naming $want"
    diag "rc=$rc, stderr: $(head -n 5 "$out/stderr")"
  fi
}
expect_usage 1 --coll -C bogus
expect_usage 2 --coll -C ring,nope
expect_usage 1 --op --op alltoall
expect_usage 1 --minbytes -b 2
expect_usage 3 --minbytes --op reduce_scatter -b 8
expect_usage 1 --minbytes -b 1M -e 4K
expect_usage 2 --root --op broadcast --root 2
expect_usage 1 --place --op broadcast --place out
expect_usage 1 --dtype -d int8
expect_usage 1 --redop --redop prod
expect_usage 1 --pool --cold --pool 1K
expect_usage 1 --mpi-thread --mpi-thread many
# --torus and --max-inflight: the cases coll_direct_torus.t's (a grid of the wrong size, a
# malformed grid, a bound above ranks - 1 or without direct) are not repeated here
expect_usage 4 --torus -C torus --torus 2x+2
expect_usage 4 --torus -C ring --torus 2x2
expect_usage 3 --coll -C ring,torus
expect_usage 4 --max-inflight -C direct --max-inflight 0

# The line survives a rank 0 that starts last: the other ranks wait for it before they exit (a
# launcher stops the rest of a job once one rank exits non-zero).
cat >"$out/slow0" <<'SH'
#!/bin/sh
[ "$OMPI_COMM_WORLD_RANK" = 0 ] && sleep 2
exec "$@"
SH
chmod +x "$out/slow0"
launch 4 "$out/slow0" "$top/bin/allreduce" -C torus --torus 2x+2 >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 2 ] && [ "$(grep -c -- '--torus' "$out/stderr")" = 1 ]
ok $? "a usage error on 4 ranks whose rank 0 starts 2 s late: exit 2 and rank 0's line (rc=$rc)"

# direct and torus on a prime rank count: the torus runs when its 1 x n grid is given; each rank
# sends 2(n-1)/n S, the ring's bytes, in both (12 and 48 KiB divide into 3 equal pieces); the rows
# carry the grid and the bound, the model rows the analytic model's terms.
launch 3 allreduce -C ring,direct,torus --torus 1x3 --max-inflight 1 -b 12K -e 48K -f 4 -n 2 -w 0 \
  --mode latency --place out -o "$out/dt3" >"$out/dt3.txt" 2>&1
rc=$?
python3 - "$out/dt3/allreduce.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = []
for r in rows:
    p, m = r["params"], r["metrics"]
    if r["variant"] == "model":
        want = {"ring": 4, "direct": 4, "torus": 4}[r["collective"]]  # direct: 2 halves x 2 rounds of 1
        if p.get("steps") != want or not m["alpha_per_step"]["value"]:
            bad.append(f"model {r['collective']}: steps {p.get('steps')} (expected {want})")
        continue
    if r["variant"] == "memcpy": continue
    if r["check"]["status"] != "pass": bad.append(f"{r['variant']}: check {r['check']}")
    if m["sent_bytes"]["value"] != 2 * 2 * p["bytes"] // 3:
        bad.append(f"{r['variant']} {p['bytes']} B: sent_bytes {m['sent_bytes']['value']}, expected 4/3 of it")
    if r["variant"] == "torus" and p.get("torus_grid") != "1x3": bad.append(f"torus_grid {p.get('torus_grid')}")
    if r["variant"] == "direct" and p.get("max_inflight") != 1: bad.append(f"max_inflight {p.get('max_inflight')}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or len(rows) != 10 else 0)
PY
ok $? "3 ranks, -C ring,direct,torus --torus 1x3 --max-inflight 1: exact, 2(n-1)/n S sent by each, grid and bound in the rows, steps in the model rows (rc=$rc)"
grep -q '^# torus   analytic: 4 steps (grid 1x3) x ' "$out/dt3.txt" && grep -q '^# direct  analytic: 4 steps x .*(1 message in flight per step' "$out/dt3.txt"
ok $? "the summary prints the analytic models' terms (steps, alpha per step, link bandwidth)"

# The check can fail: one spoiled element on the last rank is reported and exits 1.
SL_TEST_CORRUPT=1 launch 3 allreduce -C ring,rhd -b 48 -e 48 -n 2 -w 0 -o "$out/corrupt" \
  >"$out/corrupt.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q 'CHECK FAILED' "$out/corrupt.txt" && grep -q 'rank 2 element 11' "$out/corrupt.txt"
ok $? "a wrong element is caught: exit 1, CHECK FAILED naming rank and element (rc=$rc)"

# nccl needs device buffers: on a cpu run it is skipped with a note, not a failure.
launch 2 allreduce -C nccl,ring -B cpu -b 64 -e 64 -n 2 -w 0 -o "$out/nccl" >"$out/nccl.txt" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'nccl' "$out/nccl.txt" && grep -qi "skip" "$out/nccl.txt"
ok $? "-C nccl on cpu buffers: skipped with a note, exit 0 (rc=$rc)"

# one size, throughput only: the model header names the sweep that ran, the fit says it needs
# two sizes instead of printing nan; scratch is reported for the suite's algorithms only
launch 2 allreduce -C mpi,ring,rhd -b 4K -e 4K --mode throughput -n 3 -w 1 -o "$out/one" >"$out/one.txt" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'throughput sweep' "$out/one.txt" && grep -q 'one size: no alpha-beta fit' "$out/one.txt" \
  && ! grep -q '^#.* nan ' "$out/one.txt"
ok $? "one size, throughput mode: 'throughput sweep', no fit and no nan in the summary (rc=$rc)"
python3 - "$out/one/allreduce.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"mode":"throughput"' in l.replace(" ", "")]
sc = {(r["collective"], r["params"]["place"]): r["metrics"]["scratch_bytes"]["value"] for r in rows}
# the MPI library's scratch cannot be seen; the ring holds only its segment buffers; rhd's
# recursive doubling (4 KiB is below its threshold) also receives the partner's whole vector
ok = sc[("mpi", "out")] is None and sc[("ring", "out")] >= 0 and sc[("rhd", "out")] - sc[("ring", "out")] >= 4096
print(sc, file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "scratch_bytes: null for mpi; rhd's doubling holds the whole vector more than the ring"

# ---- the lab sheet's exact claims (benchmarks/labs/allreduce.md) --------------------------------
# The last-level cache: one source (sysfs, what lscpu and hwloc read; sysconf takes cpuid, which
# a VM fills with nonsense), the same in the manifest and in allreduce's --cold header.
sysfs_llc=$(python3 - <<'PY'
import glob, os
best = (0, 0)
for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
    rd = lambda f: open(os.path.join(d, f)).read().strip()
    if rd("type") == "Instruction":
        continue
    v = rd("size"); n = int(v.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(v[-1], 0)
    best = max(best, (int(rd("level")), n))
print(best[0], best[1])
PY
)
launch 2 allreduce -C mpi,rhd,shm -b 4K -e 64K -f 16 -n 3 -w 1 --cold -o "$out/lab" >"$out/lab.txt" 2>&1
ok $? "lab: a cold run of mpi, rhd and shm exits 0"
python3 - "$out/lab/manifest.json" "$out/lab.txt" $sysfs_llc <<'PY'
import json, re, sys
m = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
level, size = int(sys.argv[3]), int(sys.argv[4])
llc = m["cpu"]["llc"]
head = re.search(r"last-level cache (\d+) (KiB|MiB)", text)
shown = int(head.group(1)) << (10 if head.group(2) == "KiB" else 20) if head else None
good = (size and llc["bytes"] == size == shown and llc["level"] == level
        and f"L{level} {size >> 10} KiB" in m["cpu"]["topology"] and m["coll_ranks_per_node"] is None)
if not good: print(f"sysfs L{level} {size} B, manifest {llc}, header {shown}", file=sys.stderr)
sys.exit(0 if good else 1)
PY
ok $? "lab: the manifest's cpu.llc and the --cold header's last-level cache are sysfs's ($sysfs_llc)"
python3 - "$out/lab/allreduce.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad, mem = [], [r for r in rows if r["variant"] == "memcpy"][0]["metrics"]["copy_bw_per_rank"]["value"]
lat = {(r["variant"], r["params"]["place"], r["params"]["bytes"]): r["params"]["iterations"]
       for r in rows if r.get("params", {}).get("mode") == "latency"}
for r in rows:
    p, m = r["params"], r["metrics"]
    if r["variant"] == "model":
        if not m["gamma"]["value"] > 0: bad.append(f"model {r['collective']}: gamma {m['gamma']}")
        continue
    if r["variant"] == "memcpy": continue
    # the iters column (params.iterations): throughput rows time --reps (3) runs of the count
    if p["mode"] == "throughput" and p["iterations"] != 3 * lat[(r["variant"], p["place"], p["bytes"])]:
        bad.append(f"{r['variant']} {p['bytes']}: throughput iters {p['iterations']} != 3 x latency's")
    if r["variant"] == "shm":
        S = p["bytes"]
        if m["memory_traffic_per_rank"]["value"] != 2 * S or m["traffic_per_rank"]["value"] != 4 * S:
            bad.append(f"shm {S}: traffic {m['traffic_per_rank']} memory {m['memory_traffic_per_rank']}")
        if abs(m["bound_time"]["value"] - 2 * S / (mem * 1e9)) > 1e-9 * m["bound_time"]["value"] + 1e-15:
            bad.append(f"shm {S}: bound_time {m['bound_time']} != 2 S / copy bandwidth {mem}")
    want_sent = {"mpi": None, "shm": 0, "rhd": p["bytes"] if p["bytes"] <= 32768 else p["bytes"]}[r["variant"]]
    if m["sent_bytes"]["value"] != want_sent:
        bad.append(f"{r['variant']} {p['bytes']}: sent_bytes {m['sent_bytes']} != {want_sent}")
    if r["variant"] != "mpi" and "vs_mpi" not in m: bad.append(f"{r['variant']}: no vs_mpi")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "lab: throughput iters = 3 x latency's; shm's bound is 2 S at the copy bandwidth; sent bytes exact; gamma in the model rows"
grep -q '^# reduction (f32 sum.*gamma = ' "$out/lab.txt" && grep -q '^#.* sent .* vs_mpi ' "$out/lab.txt"
ok $? "lab: the header prints gamma; the table has sent and vs_mpi columns"
bin/allreduce --help | grep -q 'their iters is --reps x the'
ok $? "lab: --help explains the iters column (the time budget, --reps x)"

# hier's bytes between nodes: 4 ranks, 64 KiB (rhd above its 32 KiB doubling threshold sends
# 2 S (p-1)/p = 1.5 S); 2 virtual nodes of 2: rhd over 2 nodes on S/2 slices (doubling: S/2);
# 4 nodes of 1: rhd over 4 on S (1.5 S); one node: nothing.
for k in 2 1 ""; do
  SL_COLL_RANKS_PER_NODE=$k launch 4 allreduce -C hier,rhd -b 64K -e 64K -n 2 -w 0 --mode latency \
    --place out -o "$out/hier$k" >"$out/hier$k.txt" 2>&1
  rc=$?
  python3 - "$out/hier$k" "$k" <<'PY'
import json, sys
d, k = sys.argv[1], sys.argv[2]
sent = {json.loads(l)["variant"]: json.loads(l)["metrics"]["sent_bytes"]["value"]
        for l in open(d + "/allreduce.jsonl") if '"latency"' in l}
rpn = json.load(open(d + "/manifest.json"))["coll_ranks_per_node"]
want = {"2": 32768, "1": 98304, "": 0}[k]
good = sent == {"rhd": 98304, "hier": want} and rpn == (int(k) if k else None)
if not good: print(f"sent_bytes {sent}, coll_ranks_per_node {rpn}", file=sys.stderr)
sys.exit(0 if good else 1)
PY
  ok $? "lab: SL_COLL_RANKS_PER_NODE='$k' on 4 ranks at 64 KiB: hier sends $( [ "$k" = 2 ] && echo 'S/2' || { [ "$k" = 1 ] && echo '1.5 S' || echo 0; }) between nodes, rhd 1.5 S; the manifest records the split (rc=$rc)"
done
grep -q '^# SL_COLL_RANKS_PER_NODE=2: hier splits each host into virtual nodes of 2' "$out/hier2.txt"
ok $? "lab: the header names the virtual node split"
# The double binary tree's shape in the header (exercise 8): on 6 ranks the mirror leaves no
# rank inner in both trees; on 7 the shift leaves one (rank 0).
launch 7 allreduce -C dbtree -b 64 -e 64 -n 2 -w 0 --mode latency --place out -o "$out/db7" >"$out/db7.txt" 2>&1
grep -q '^# dbtree on 7 ranks: tree 0 parents: -1 2 4 2 0 6 4; tree 1 parents: 5 -1 3 5 3 1 0 .*inner in both trees: 0$' "$out/db7.txt"
ok $? "lab: the header draws the double binary tree on 7 ranks (rank 0 inner in both)"
# ---- end of the lab sheet's claims -------------------------------------------------------------

done_testing
