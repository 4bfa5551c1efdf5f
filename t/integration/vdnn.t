#!/bin/bash
# vdnn on the training layer (the MLP, default; the GPT, --model gpt; the conv stack, --model
# conv): every variant (none, all/pf0, all/pf1, and the conv stack's conv/pf0, conv/pf1) in f32,
# f16 and bf16 passes the program's checks (gradients and weights bit-identical to none, the
# arena's peaks and the bytes moved equal to its model) and the driver's against serial training
# (the conv stack's: halo_conv's serial stack); the arena's peaks by category and the bytes moved
# recomputed here from closed forms (the MLP: every tensor one rows x width; the GPT:
# gpt_model.h's pieces; the conv stack: every tensor rows x C x H x W); 16 bits move exactly half
# the MLP's and the conv stack's f32 bytes (the GPT's: all but its int32 tokens, f32 layer-norm
# moments and f32 head weight gradient); one and two ranks (data-parallel replicas, -C
# mpi,ring); a --device-mem too small for none (or for anything) gives "does not fit" rows,
# exit 0; offloading rows gate vs_none (none's step over theirs). Usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction calibrates GEMMs and alpha-beta for every row (seconds under the
# sanitizers): off here, but for the one run at the end that tests it.
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
mlp="--width 32 --inputs 32 --outputs 32 --batch 16 -n 2 -w 1"
gpt="--model gpt --layers 2 --d-model 32 --heads 2 --seq 16 --vocab 64 --batch 2 -n 2 -w 1"
conv="--model conv --channels 4 --image 8 --batch 4 -n 2 -w 1"

# layer_rows FILE KIND LAYERS: every row of the training layer's vdnn passes (or, over its
# --device-mem, is a "does not fit" row whose model_device exceeds it), its arena peaks by
# category and bytes moved are the closed forms, its measured figures equal them, and it says
# the device is emulated. Prints variant/dtype:ran|dnf per row.
layer_rows() {
  python3 - "$@" <<'PY'
import json, sys
path, kind, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = lambda b: (b + 255) // 256 * 256 if b else 0
al = lambda b: (b + 63) // 64 * 64
bad, seen = [], []
for r in map(json.loads, open(path)):
    p, m = r["params"], {k: v["value"] for k, v in r["metrics"].items()}
    es = {"f32": 4, "f16": 2, "bf16": 2}[r["dtype"]]
    rows = p["rank_batch"] if "rank_batch" in p else p["global_batch"] // r["ranks"]
    L = layers
    if kind == "mlp":  # every layer keeps x (and z below the top); io tensors rows x 32
        T = rows * 32 * es
        I, B = [T] * L, [T] * (L - 1) + [0]
        G, O = [T] * (L + 1), T
    elif kind == "conv":  # 2L - 1 layers (conv, relu, ..., conv), each keeps its input: rows x 4 x 8 x 8
        T = rows * 4 * 64 * es
        L = 2 * layers - 1
        I, B = [T] * L, [0] * L
        G, O = [T] * (L + 1), T
        if p["model"] != "conv" or p["ops"] != L or p["act_bytes"] != T: bad.append(f"{r['variant']}: conv params {p}")
        # resident: weights and gradients in the dtype, SGD's momentum, the f32 target, one image's
        # im2col (36 x 64 f32); 16 bits: f32 master and gradient twins, three f32 tensor
        # workspaces, one layer's dW (144), the weights' f32 view (the +1s: allocations never of 0)
        n, T32 = layers * 144, T // es * 4
        res = 2 * n * es + 4 * n + 1 + T32 + 1 + 36 * 64 * 4 + 1
        if es == 2: res += 4 * n + 4 * n + 3 * (T32 + 1) + 144 * 4 + 4 * n
        if m["resident"] != res: bad.append(f"{r['variant']}/{r['dtype']}: resident {m['resident']}, closed form {res}")
    else:              # gpt_model.h: tokens int32, residual stream N x C, the blocks' pieces
        C, NH, Tq, V = 32, 2, 16, 64
        N = rows * Tq; NC = N * C
        I = [al(N * 4)] + [al(NC * es)] * (L + 1)
        blk = sum(al(x) for x in [NC * es, 3 * NC * es, rows * NH * Tq * Tq * es, NC * es, NC * es, NC * es,
                                  4 * NC * es, 4 * NC * es] + [N * 4] * 4)
        B = [0] + [blk] * L + [al(NC * es) + 2 * al(N * 4) + al(V * C * 4)]
        G, O = [N * 4] + [NC * es] * (L + 2), 0
        L = L + 2
    # offloaded layers: all, or the conv stack's convolutions (its even layers)
    off = [p["offload"] == "all" or (p["offload"] == "conv" and l % 2 == 0) for l in range(L)]
    pf = p["prefetch"] == 1
    act = work = tot = K = 0
    for l in range(L):  # forward l: what stays below, the body still copying, l's, its output
        a = K + (rnd(B[l - 1]) if l and off[l - 1] else 0) + rnd(I[l]) + rnd(B[l]) + (rnd(I[l + 1]) if l < L - 1 else rnd(O))
        w = rnd(G[L]) if l == L - 1 else 0
        act, work, tot = max(act, a), max(work, w), max(tot, a + w)
        K += 0 if off[l] else rnd(I[l]) + rnd(B[l])
    for l in reversed(range(L)):  # backward l: below, l's, the nearest offloaded below prefetched; dy and dx
        K -= 0 if off[l] else rnd(I[l]) + rnd(B[l])
        j = max([j for j in range(l) if off[j]], default=-1) if pf else -1
        a = K + rnd(I[l]) + rnd(B[l]) + (rnd(I[j]) + rnd(B[j]) if j >= 0 else 0)
        w = rnd(G[l + 1]) + (rnd(G[l]) if l else 0)
        act, work, tot = max(act, a), max(work, w), max(tot, a + w)
    moved = sum(I[l] + B[l] for l in range(L) if off[l])
    v = r["variant"] + "/" + r["dtype"]
    for k, x in (("model_arena_activ", act), ("model_arena_workspace", work), ("model_arena_peak", tot), ("moved_model", moved)):
        if m[k] != x: bad.append(f"{v}: {k} {m[k]}, closed form {x}")
    if p["device"] != "emulated" or p["emulation"] != 1: bad.append(f"{v}: not labelled an emulation")
    if m["model_device"] != m["resident"] + tot: bad.append(f"{v}: model_device {m['model_device']}")
    if m["model_device"] > p["device_mem"]:
        msg = r["check"]["message"] or ""
        if r["check"]["status"] != "none" or not msg.startswith("does not fit: needs") or p["note"] != msg:
            bad.append(f"{v}: over --device-mem but {r['check']}")
        seen.append(v + ":dnf")
        continue
    if r["check"]["status"] != "pass": bad.append(f"{v}: {r['check']}")
    for k, x in (("arena_activ", act), ("arena_workspace", work), ("arena_peak", tot), ("bytes_d2h", moved), ("bytes_h2d", moved), ("host_activ", moved)):
        if m[k] != x: bad.append(f"{v}: {k} {m[k]}, closed form {x}")
    if any(off) and (m.get("transfer") is None or m.get("exposed_transfer") is None): bad.append(f"{v}: transfer phases missing")
    seen.append(v + ":ran")
print("\n".join(bad), file=sys.stderr)
print(" ".join(sorted(seen)))
sys.exit(1 if bad else 0)
PY
}
all3="all/pf0/f32:ran all/pf1/f32:ran none/f32:ran"

# The MLP: 3 layers, 1, 7 (prime), every variant
for L in 3 1 7; do
  launch 1 vdnn $mlp --layers $L -o "$out/mlp$L" >"$out/mlp$L.txt" 2>&1
  rc=$?
  got=$(layer_rows "$out/mlp$L/vdnn.jsonl" mlp $L)
  ok $? "mlp, $L layers: none, all/pf0, all/pf1 pass; arena peaks and bytes moved == closed forms (rc=$rc; $got)"
  [ $rc = 0 ] && [ "$got" = "$all3" ]
  ok $? "mlp, $L layers: exit 0, every variant ran"
done
"$top/scripts/validate" rows "$out/mlp3/vdnn.jsonl" --min-rows 3 >/dev/null
ok $? "rows validate against the schema"
grep -q "EMULATED" "$out/mlp3.txt"
ok $? "the output says the device is emulated"

# 16 bits, the MLP and the GPT: every variant in every dtype passes (bit-identical to that
# dtype's none, the driver's check against serial training in that dtype)
launch 1 vdnn $mlp --layers 3 -d f32,f16,bf16 -o "$out/half" >"$out/half.txt" 2>&1
rc=$?
got=$(layer_rows "$out/half/vdnn.jsonl" mlp 3)
ok $? "mlp -d f32,f16,bf16: closed forms in every dtype (rc=$rc; $got)"
launch 1 vdnn $gpt -d f32,f16,bf16 -o "$out/gpt" >"$out/gpt.txt" 2>&1
rc2=$?
gotg=$(layer_rows "$out/gpt/vdnn.jsonl" gpt 2)
ok $? "gpt -d f32,f16,bf16: closed forms in every dtype (rc=$rc2; $gotg)"
every="all/pf0/bf16:ran all/pf0/f16:ran all/pf0/f32:ran all/pf1/bf16:ran all/pf1/f16:ran all/pf1/f32:ran none/bf16:ran none/f16:ran none/f32:ran"
[ $rc = 0 ] && [ $rc2 = 0 ] && [ "$got" = "$every" ] && [ "$gotg" = "$every" ]
ok $? "mlp and gpt: every variant ran and passed in f32, f16 and bf16, exit 0"
# The regression gate's figure: every offloading row gates vs_none, none's step over its own in
# the same dtype (both timed in this run); none gates nothing.
python3 - "$out/half/vdnn.jsonl" "$out/gpt/vdnn.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    rows = [json.loads(l) for l in open(f)]
    step = {(r["variant"], r["dtype"]): r["time"]["median"] for r in rows}
    for r in rows:
        if r["variant"] == "none":
            assert r.get("gate") in (None, "") and "vs_none" not in r["metrics"], r
        else:
            want = step[("none", r["dtype"])] / r["time"]["median"]
            got = r["metrics"]["vs_none"]["value"]
            assert r["gate"] == "vs_none" and abs(got - want) <= 1e-9 * want, (r["variant"], got, want)
PY
ok $? "offloading rows gate vs_none = none's step / theirs; none gates nothing"
python3 - "$out/half/vdnn.jsonl" "$out/gpt/vdnn.jsonl" <<'PY'
import json, sys
bad, n = [], 0
for f, exact in zip(sys.argv[1:], (True, False)):
    rows = [json.loads(l) for l in open(f)]
    m = lambda r, k: r["metrics"][k]["value"]
    f32 = {r["variant"]: r for r in rows if r["dtype"] == "f32"}
    for r in rows:
        if r["dtype"] == "f32" or r["variant"] == "none": continue
        for k in ("bytes_d2h", "bytes_h2d", "host_activ"):
            half, full = m(r, k), m(f32[r["variant"]], k)
            if (exact and 2 * half != full) or (not exact and not full < 2 * half < 2 * full): bad.append(f"{f} {r['variant']} {r['dtype']} {k} {half} vs f32 {full}")
        n += 1
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or n != 8 else 0)
PY
ok $? "16 bits: the MLP moves exactly half of f32's bytes each way; the GPT less than f32's, more than half (its int32 tokens, f32 moments and head gradient)"
grep -q "parameters" "$out/gpt.txt" && grep -q '"model":"gpt"' "$out/gpt/vdnn.jsonl"
ok $? "--model gpt trains the GPT (rows say model gpt)"

# Two ranks, data-parallel replicas, two collectives
launch 2 vdnn $gpt -d f32,bf16 -C mpi,ring -o "$out/np2" >"$out/np2.txt" 2>&1
rc=$?
got=$(layer_rows "$out/np2/vdnn.jsonl" gpt 2)
ok $? "gpt on 2 ranks, -C mpi,ring: closed forms (rc=$rc)"
[ $rc = 0 ] && [ "$(grep -c '"check":{"status":"pass"' "$out/np2/vdnn.jsonl")" = 12 ]
ok $? "gpt on 2 ranks: 12 rows (3 variants x 2 dtypes x 2 collectives) pass, exit 0"
launch 2 vdnn $mlp --layers 2 -o "$out/np2m" >/dev/null 2>&1
rc=$?
got=$(layer_rows "$out/np2m/vdnn.jsonl" mlp 2)
[ $rc = 0 ] && [ "$got" = "$all3" ]
ok $? "mlp on 2 ranks: every variant passes, closed forms (rc=$rc; $got)"

# --device-mem: the MLP's none needs 54401 bytes here (resident 40065 + 14336 of arena), all
# 48257 (pf0) and 52353 (pf1): at 50000 none and all/pf1 do not fit, all/pf0 does
launch 1 vdnn $mlp --layers 3 --device-mem 50000 -o "$out/tight" >"$out/tight.txt" 2>&1
rc=$?
got=$(layer_rows "$out/tight/vdnn.jsonl" mlp 3)
ok $? "mlp in 50000 bytes: rows exact ($got)"
[ $rc = 0 ] && [ "$got" = "all/pf0/f32:ran all/pf1/f32:dnf none/f32:dnf" ] && grep -q "does not fit: needs 54401 bytes, has 49920" "$out/tight.txt"
ok $? "none and all/pf1 do not fit (needs, has), all/pf0 runs and passes, exit 0 (rc=$rc)"
# on 2 ranks the same per-rank batch fits alike; the one-rank baseline (the global batch on rank
# 0, for scaling_eff) runs on a device big enough, not as a row
launch 2 vdnn $mlp --layers 3 --device-mem 50000 -o "$out/tight2" >"$out/tight2.txt" 2>&1
rc=$?
got=$(layer_rows "$out/tight2/vdnn.jsonl" mlp 3)
[ $rc = 0 ] && [ "$got" = "all/pf0/f32:ran all/pf1/f32:dnf none/f32:dnf" ] &&
  grep -q '"scaling_eff":{"value":[0-9]' "$out/tight2/vdnn.jsonl"
ok $? "2 ranks in 50000 bytes each: all/pf0 runs with its one-rank baseline, the others do not fit (rc=$rc; $got)"
launch 1 vdnn $gpt --device-mem 4K -o "$out/small" >"$out/small.txt" 2>&1
rc=$?
got=$(layer_rows "$out/small/vdnn.jsonl" gpt 2)
[ $rc = 0 ] && [ "$got" = "all/pf0/f32:dnf all/pf1/f32:dnf none/f32:dnf" ]
ok $? "gpt in 4 KiB: 'does not fit' rows for every variant, exit 0 (rc=$rc; $got)"

# The conv stack on the training layer: every policy, 1, 3 and 7 layers (1 to 13 layers of the pass)
allc="all/pf0/f32:ran all/pf1/f32:ran conv/pf0/f32:ran conv/pf1/f32:ran none/f32:ran"
for L in 3 1 7; do
  launch 1 vdnn $conv --layers $L -o "$out/conv$L" >"$out/conv$L.txt" 2>&1
  rc=$?
  got=$(layer_rows "$out/conv$L/vdnn.jsonl" conv $L)
  ok $? "conv, $L layers: none, all and conv with prefetch 0/1 pass; arena peaks and bytes moved == closed forms (rc=$rc; $got)"
  [ $rc = 0 ] && [ "$got" = "$allc" ]
  ok $? "conv, $L layers: exit 0, every policy ran"
done
"$top/scripts/validate" rows "$out/conv3/vdnn.jsonl" --min-rows 5 >/dev/null
ok $? "conv rows validate against the schema"
grep -q "conv stack: 3 layers of 3x3 convolutions 4 -> 4 channels" "$out/conv3.txt" && grep -q '"model":"conv"' "$out/conv3/vdnn.jsonl"
ok $? "--model conv trains the conv stack (it says so; rows say model conv)"
launch 2 vdnn $conv --layers 3 -d f32,f16,bf16 -C mpi,ring -o "$out/halfc" >"$out/halfc.txt" 2>&1
rc=$?
gotc=$(layer_rows "$out/halfc/vdnn.jsonl" conv 3)
ok $? "conv on 2 ranks, -d f32,f16,bf16 -C mpi,ring: closed forms in every dtype (rc=$rc)"
[ $rc = 0 ] && [ "$(grep -c '"check":{"status":"pass"' "$out/halfc/vdnn.jsonl")" = 30 ]
ok $? "conv on 2 ranks: 30 rows (5 variants x 3 dtypes x 2 collectives) pass against none and the serial stack, exit 0"
python3 - "$out/halfc/vdnn.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
m = lambda r, k: r["metrics"][k]["value"]
f32 = {(r["variant"], r["collective"]): r for r in rows if r["dtype"] == "f32"}
bad, n = [], 0
for r in rows:
    if r["dtype"] == "f32" or r["variant"] == "none": continue
    for d in ("bytes_d2h", "bytes_h2d", "host_activ", "arena_activ", "moved_model"):
        full = m(f32[(r["variant"], r["collective"])], d)
        if 2 * m(r, d) != full: bad.append(f"{r['variant']} {r['dtype']} {d} {m(r, d)} vs f32 {full}")
    n += 1
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or n != 16 else 0)
PY
ok $? "conv, 16 bits: bytes each way, pinned host bytes and peak activations exactly half of f32's"
launch 1 vdnn $conv --layers 3 --device-mem 4K -o "$out/smallc" >"$out/smallc.txt" 2>&1
rc=$?
got=$(layer_rows "$out/smallc/vdnn.jsonl" conv 3)
[ $rc = 0 ] && [ "$got" = "all/pf0/f32:dnf all/pf1/f32:dnf conv/pf0/f32:dnf conv/pf1/f32:dnf none/f32:dnf" ]
ok $? "conv in 4 KiB: 'does not fit' rows for every policy, exit 0 (rc=$rc; $got)"
launch 1 vdnn $conv --layers 2 --offload conv --prefetch 1 -o "$out/one" >/dev/null 2>&1
rc=$?
got=$(layer_rows "$out/one/vdnn.jsonl" conv 2)
[ $rc = 0 ] && [ "$got" = "conv/pf1/f32:ran none/f32:ran" ]
ok $? "conv --offload conv --prefetch 1: that policy and none only (rc=$rc; $got)"

# On a GPU, the real thing (skipped where none is visible)
if nvidia-smi -L >/dev/null 2>&1; then
  launch 1 vdnn -B cuda $mlp --layers 3 -d f32,f16,bf16 -o "$out/cuda" >"$out/cuda.txt" 2>&1 &&
    launch 1 vdnn -B cuda $gpt -d f32,bf16 -o "$out/cudag" >"$out/cudag.txt" 2>&1 &&
    launch 1 vdnn -B cuda $conv --layers 3 -o "$out/cudac" >"$out/cudac.txt" 2>&1
  ok $? "-B cuda: the MLP, the GPT and the conv stack pass their checks"
else
  echo "ok $((tap_n + 1)) # SKIP -B cuda: no CUDA device"; tap_n=$((tap_n + 1))
fi

expect_usage() { # expect_usage NAME ARGS...
  local want="$1"; shift
  launch 1 vdnn "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "vdnn $* -> exit 2 naming $want (rc=$rc)"
}
expect_usage --offload --model gpt --offload conv
expect_usage --offload --offload conv
expect_usage --offload --offload everything
expect_usage --prefetch --offload none --prefetch 1
expect_usage --prefetch --prefetch 2
expect_usage --model --model rnn
expect_usage -d -d f64
expect_usage --device-mem --device-mem 0
expect_usage --device-mem --device-mem lots
# below the arena's 256-byte unit the capacity would round down to a 0-byte arena: refused,
# in one line
for m in 1 255; do
  launch 1 vdnn --device-mem $m -o "$out/bad" >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/stderr")" = 1 ] &&
    grep -q -- "--device-mem: expected a size in bytes in \[256," "$out/stderr"
  ok $? "vdnn --device-mem $m -> exit 2, one line naming --device-mem and its minimum 256 (rc=$rc)"
done
expect_usage --layers --layers 0
expect_usage --lr --lr 0
expect_usage --batch --batch 0
expect_usage --prefetch --model conv --offload none --prefetch 1
expect_usage --layers --model conv --layers 257
expect_usage --channels --model conv --channels 4096 --image 4096
expect_usage --channels --channels 8
expect_usage --width --model conv --width 64
expect_usage --model --model conv --model gpt
# The step predicted from the run's primitives (perf_model.h): the offloading rows fit the
# host<->device copy (h2d) beside the replicas' all-reduce
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/vdnn" $mlp --layers 3 -o "$out/pred" >"$out/pred.txt" 2>&1
ok $? "prediction: vdnn exits 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/vdnn.jsonl" none=allreduce all/pf0=allreduce,h2d all/pf1=allreduce,h2d
ok $? "prediction: every row carries the predicted step, and the offloading rows fit h2d"
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/vdnn" $conv --layers 2 -o "$out/predc" >"$out/predc.txt" 2>&1 &&
  python3 "$top/t/lib/train_rows.py" pred "$out/predc/vdnn.jsonl" none=allreduce all/pf0=allreduce,h2d \
    all/pf1=allreduce,h2d conv/pf0=allreduce,h2d conv/pf1=allreduce,h2d
ok $? "prediction, the conv stack: every row carries the predicted step (its convolutions' GEMMs), the offloading rows fit h2d"

done_testing
