#!/bin/bash
# predict: --predict FILE --predict-ranks LIST on one rank, a platform file of round rates: the
# rows are the hand-computed step of ddp's schedule (an MLP 8 -> 8 -> 8, 4 samples a rank, SGD)
# at 2 and 4 ranks on the ring and rhd, with a group of 2 ranks so that 4 ranks pay the far link,
# the reduction's additions charged at the element-wise bandwidth; rows are in the results format (ranks N, time null, check none); zero states its
# schedule too (every stage predicted, the sharded stages' traffic growing as the formula says);
# vdnn's offload copies are charged at the file's h2d_alpha and h2d_bw, computed by hand.
# Usage errors exit 2 with one line naming the file and what is wrong. Nothing is timed.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top"

plat="$out/round.txt"
cat >"$plat" <<'P'
# round figures, so that the prediction can be computed by hand
name = round
source = t/integration/predict.t
gemm_f32 = 1e9          # FLOP/s
bw = 1e9                # bytes/s
group = 2
alpha = 1e-5
link_bw = 1e8
alpha_far = 1e-4
link_bw_far = 1e7
segment = 0
background = 0
P
small="--layers 2 --inputs 8 --width 8 --outputs 8 --batch 4 --optim sgd -d f32"
bin/ddp --predict "$plat" --predict-ranks 2,4 -C ring,rhd --variants sync $small -o "$out/ddp" >"$out/ddp.log" 2>&1
ok $? "ddp --predict on one rank: exit 0"
python3 - "$out/ddp/ddp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = []
def near(a, b): return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300) + 1e-18
n = 2 * (8 * 8 + 8)                     # parameters: 144
gemm = (2 + 2 + 1) * 2 * 4 * 8 * 8      # forward of both layers, both dW, layer 1's dx: 2560 FLOPs
# element-wise bytes of the schedule (benchmarks/train/train_perf.c): the gradient zeroed (4n),
# the batch loaded (4 rows (in + out)), each layer's bias (8 rows out) and layer 0's GELU (8 rows
# out), the loss (12 rows out), backward's GELU (12 rows out) and biases (4 rows out each), SGD
# with momentum (20 bytes an element)
rows_, out_ = 4, 8
elem = 4 * n + 4 * rows_ * 16 + 2 * 8 * rows_ * out_ + 8 * rows_ * out_ + 12 * rows_ * out_ \
     + 12 * rows_ * out_ + 2 * 4 * rows_ * out_ + 20 * n
S = 4 * n                               # bytes all-reduced
# the additions (gamma): (p-1)/p of the vector's elements added, each 12 bytes read + written
# per 4-byte element: 3 (p-1)/p S bytes at bw
gamma = lambda p: 3 * (p - 1) / p * S / 1e9
comm = {  # (collective, ranks): seconds
    ("ring", 2): 2 * 1 * 1e-5 + 2 * 1 / 2 * S / 1e8 + gamma(2),                  # 2 ranks: one group, near link
    ("ring", 4): 2 * 3 * 1e-4 + 2 * 3 / 4 * S / 1e7 + gamma(4),                  # 4 ranks: the ring crosses groups
    ("rhd", 2): 2 * 1e-5 + 2 * (S / 2) / 1e8 + gamma(2),                         # one step at distance 1
    ("rhd", 4): 2 * (1e-4 + S / 2 / 1e7) + 2 * (1e-5 + S / 4 / 1e8) + gamma(4),  # distance 2 (far), then 1 (near)
}
got = {(r["collective"], r["ranks"]): r for r in rows}
if sorted(got) != sorted(comm): bad.append(f"rows {sorted(got)}, expected {sorted(comm)}")
for key, want_comm in comm.items():
    r = got.get(key)
    if not r: continue
    m = {k: v["value"] for k, v in r["metrics"].items()}
    want = {"pred_gemm": gemm / 1e9, "pred_compute": gemm / 1e9 + elem / 1e9, "pred_comm": want_comm,
            "pred_exposed": want_comm, "pred_step": gemm / 1e9 + elem / 1e9 + want_comm}
    for k, v in want.items():
        if not near(m.get(k, float("nan")), v): bad.append(f"{key} {k} = {m.get(k)}, expected {v}")
    if r["time"] is not None or r["check"]["status"] != "none": bad.append(f"{key}: time {r['time']}, check {r['check']}")
    p = r["params"]
    if p.get("predict") != "platform" or p.get("predict_platform") != "round" or p.get("pred_ranks") != key[1]:
        bad.append(f"{key}: params {p}")
    if p.get("global_batch") != 4 * key[1] or p.get("pred_algo") != key[0]: bad.append(f"{key}: params {p}")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "ddp sync: pred_gemm, pred_compute, pred_comm and pred_step as computed by hand (ring and rhd, 2 and 4 ranks, near and far links)"
scripts/validate run "$out/ddp" >"$out/validate.log" 2>&1
ok $? "the predicted rows validate against results/schema.json"
[ $? = 0 ] || sed 's/^/# /' "$out/validate.log" | tail -5 >&2

# zero: every stage at 8 and 16 ranks on the ring; the sharded stages' comm at 16 is their
# operations' alpha-beta on the ring (not compared by hand here: the partition's padding), but
# stage 3 moves 1.5 times stage 1's bytes, so its comm is larger at every rank count.
bin/zero --predict "$plat" --predict-ranks 8,16 -C ring $small -o "$out/zero" >"$out/zero.log" 2>&1
ok $? "zero --predict: exit 0"
python3 - "$out/zero/zero.jsonl" <<'PY'
import json, sys
rows = {(r["variant"], r["ranks"]): {k: v["value"] for k, v in r["metrics"].items()} for r in map(json.loads, open(sys.argv[1]))}
bad = []
if len(rows) != 8: bad.append(f"{len(rows)} rows, expected 4 stages x 2 rank counts")
for p in (8, 16):
    if not rows[("stage3", p)]["pred_comm"] > rows[("stage1", p)]["pred_comm"]: bad.append(f"{p}: stage3 comm not above stage1's")
    for s in range(4):
        m = rows[(f"stage{s}", p)]
        if abs(m["pred_step"] - (m["pred_compute"] + m["pred_exposed"])) > 1e-15: bad.append(f"stage{s} {p}: step != compute + exposed")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "zero: four stages at 8 and 16 ranks; stage 3's communication above stage 1's; step = compute + exposed"

# The ddp sheet's exercise 9 quotes what its command prints at the sheet's model (datasheet rates:
# arithmetic only, the same on every machine): compute 0.178 ms at every rank count, comm 0.192,
# 0.297, 0.368 and 2.825 ms at 2, 4, 8 and 16 ranks.
ddp --predict scripts/platforms/predict/h100-sxm-node.txt --predict-ranks 2,4,8,16 --variants sync -o "$out/sheet" >"$out/sheet.log" 2>&1
got=$(awk '$1 == "sync" {printf "%s %s %s;", $4, $7, $9}' "$out/sheet.log")
[ "$got" = "2 0.178 0.192;4 0.178 0.297;8 0.178 0.368;16 0.178 2.825;" ]
ok $? "the ddp sheet's exercise 9: ranks, compute and comm as the sheet quotes them (got: $got)"

# vdnn: its offload copies at the file's h2d_alpha + bytes / h2d_bw, on a copy engine beside the
# compute (the MLP 8 -> 8 -> 8, 4 samples, on 1 rank: no all-reduce). Each way the copies are
# layer 0's input and pre-activation and layer 1's input, 4 x 8 f32 = 128 bytes each (layer 1's
# output is not kept): 6 copies of 0.1 us + 128 ns. Forward they hide behind the layers' compute;
# backward all/pf0 fetches each layer's pieces and waits for them at once (3 copies exposed),
# all/pf1 waits only for the top layer's input (the layer below comes while the top one computes).
cat "$plat" >"$out/round-h2d.txt"
printf 'h2d_bw = 1e9\nh2d_alpha = 1e-7\n' >>"$out/round-h2d.txt"
bin/vdnn --predict "$out/round-h2d.txt" --predict-ranks 1 -C ring $small -o "$out/vdnn" >"$out/vdnn.log" 2>&1
ok $? "vdnn --predict with h2d_bw: exit 0"
python3 - "$out/vdnn/vdnn.jsonl" <<'PY'
import json, sys
rows = {r["variant"]: {k: v["value"] for k, v in r["metrics"].items()} for r in map(json.loads, open(sys.argv[1]))}
copy = 1e-7 + 128 / 1e9
want = {"none": (0, 0), "all/pf0": (6 * copy, 3 * copy), "all/pf1": (6 * copy, copy)}  # comm, exposed
bad = []
if sorted(rows) != sorted(want): bad.append(f"rows {sorted(rows)}")
for v, (comm, exposed) in want.items():
    m = rows.get(v, {})
    got = (m.get("pred_comm"), m.get("pred_exposed"), m.get("pred_step"))
    exp = (comm, exposed, rows["none"]["pred_compute"] + exposed)
    if any(g is None or abs(g - e) > 1e-15 for g, e in zip(got, exp)): bad.append(f"{v}: comm, exposed, step {got}, expected {exp}")
    if m.get("pred_compute") != rows["none"]["pred_compute"]: bad.append(f"{v}: compute differs from none's")
for b in bad: print("# " + b)
sys.exit(1 if bad else 0)
PY
ok $? "vdnn: the copies' pred_comm (6 of 0.228 us) and pred_exposed (pf0 3 of them, pf1 1) as computed by hand"
# The vdnn sheet's exercise 7 quotes its H100 prediction (datasheet rates, arithmetic only):
# compute 0.070 ms, copies 0.642 ms, exposed 0.616 (pf0) and 0.580 (pf1), exposed_comm dominant.
vdnn --predict scripts/platforms/predict/h100-sxm-node.txt --predict-ranks 1 -o "$out/vsheet" >"$out/vsheet.log" 2>&1
got=$(awk '$1 ~ /^all/ {printf "%s %s %s %s %s;", $1, $7, $9, $10, $12}' "$out/vsheet.log")
[ "$got" = "all/pf0 0.070 0.642 0.616 exposed_comm;all/pf1 0.070 0.642 0.580 exposed_comm;" ]
ok $? "the vdnn sheet's exercise 7: compute, comm, exposed and dominant on the H100 file as the sheet quotes them (got: $got)"
expect_usage_of vdnn "gives no h2d_bw" --predict "$plat" --predict-ranks 1 -C ring
printf 'h2d_alpha = 1e-6\n' | cat "$plat" - >"$out/alpha-only.txt"
expect_usage_of ddp "alpha-only.txt: h2d_alpha needs h2d_bw" --predict "$out/alpha-only.txt"

# Usage errors: one line, exit 2, naming the file and what is wrong.
expect_usage_of ddp "cannot read the platform file" --predict "$out/none.txt"
printf 'name = x\nsource = y\ngemm_f32 = fast\n' >"$out/bad-number.txt"
expect_usage_of ddp "bad-number.txt:3: gemm_f32: expected a finite number" --predict "$out/bad-number.txt"
printf 'name = x\nsource = y\ngemm_f32 = 1e9\nbw = 1e9\nlatency = 1e-6\n' >"$out/bad-key.txt"
expect_usage_of ddp "bad-key.txt:5: unknown key 'latency'" --predict "$out/bad-key.txt"
printf 'name = x\nsource = y\ngemm_f32 = 1e9\nbw = 1e9\nlink_bw = 1e9\nbackground = 0\n' >"$out/no-alpha.txt"
expect_usage_of ddp "no-alpha.txt: no 'alpha'" --predict "$out/no-alpha.txt"
printf 'just words\n' >"$out/no-eq.txt"
expect_usage_of ddp "no-eq.txt:1: expected 'key = value'" --predict "$out/no-eq.txt"
expect_usage_of ddp "does not say which algorithm -C mpi" --predict "$plat" -C mpi
expect_usage_of ddp "gives no gemm_bf16" --predict "$plat" -C ring -d bf16
expect_usage_of ddp "predict-ranks: only with --predict" --predict-ranks 8
expect_usage_np 2 ddp "runs on one rank" --predict "$plat" -C ring
# pipeline's stages are the launched ranks: a row at another rank count would be another pipeline
expect_usage_of pipeline "--predict: pipeline's layout is chosen for the launched ranks" --predict "$plat" -C ring
done_testing
