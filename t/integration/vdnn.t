#!/bin/bash
# vdnn on the training layer (the MLP, default, and the GPT, --model gpt): every variant (none,
# all/pf0, all/pf1) in f32, f16 and bf16 passes the program's checks (gradients and weights
# bit-identical to none, the arena's peaks and the bytes moved equal to its model) and the
# driver's against serial training; the arena's peaks by category and the bytes moved recomputed
# here from closed forms (the MLP: every tensor one rows x width; the GPT: gpt_model.h's pieces);
# 16 bits move exactly half the MLP's f32 bytes (the GPT's: all but its int32 tokens, f32
# layer-norm moments and f32 head weight gradient); one and two ranks (data-parallel replicas,
# -C mpi,ring); a --device-mem too small for none (or for anything) gives "does not fit" rows,
# exit 0; offloading rows gate vs_none (none's step over theirs). The conv stack (--model conv, vdnn's own loop): every policy (none, all, conv;
# prefetch 0 and 1) passes, its peak bytes by category and bytes moved from closed forms, in
# f16/bf16 half of f32's. Usage errors exit 2.
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
    else:              # gpt_model.h: tokens int32, residual stream N x C, the blocks' pieces
        C, NH, Tq, V = 32, 2, 16, 64
        N = rows * Tq; NC = N * C
        I = [al(N * 4)] + [al(NC * es)] * (L + 1)
        blk = sum(al(x) for x in [NC * es, 3 * NC * es, rows * NH * Tq * Tq * es, NC * es, NC * es, NC * es,
                                  4 * NC * es, 4 * NC * es] + [N * 4] * 4)
        B = [0] + [blk] * L + [al(NC * es) + 2 * al(N * 4) + al(V * C * 4)]
        G, O = [N * 4] + [NC * es] * (L + 2), 0
        L = L + 2
    off = p["offload"] == "all"
    pf = p["prefetch"] == 1
    act = work = tot = K = 0
    for l in range(L):  # forward l: what stays below, the body still copying, l's, its output
        a = K + (rnd(B[l - 1]) if l and off else 0) + rnd(I[l]) + rnd(B[l]) + (rnd(I[l + 1]) if l < L - 1 else rnd(O))
        w = rnd(G[L]) if l == L - 1 else 0
        act, work, tot = max(act, a), max(work, w), max(tot, a + w)
        K += 0 if off else rnd(I[l]) + rnd(B[l])
    for l in reversed(range(L)):  # backward l: below, l's, prefetched l - 1; dy and dx
        K -= 0 if off else rnd(I[l]) + rnd(B[l])
        a = K + rnd(I[l]) + rnd(B[l]) + (rnd(I[l - 1]) + rnd(B[l - 1]) if pf and l else 0)
        w = rnd(G[l + 1]) + (rnd(G[l]) if l else 0)
        act, work, tot = max(act, a), max(work, w), max(tot, a + w)
    moved = sum(I) + sum(B) if off else 0
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
    if off and (m.get("transfer") is None or m.get("exposed_transfer") is None): bad.append(f"{v}: transfer phases missing")
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

# The conv stack (vdnn's own loop) ---------------------------------------------------------
# rows_exact FILE LAYERS CAP (the conv stack): every configuration that fits passes, its memory by category and
# bytes moved are the closed forms (every tensor s bytes in the row's dtype, s32 in f32, rounded
# to 256; N = 2L - 1 operations): activations none 2L tensors (N + 1), all 2, conv L + 1 (the
# L - 1 ReLU inputs kept + 2); resident: params, grads and momentum (one flat vector each), a
# target and two gradient buffers (s32 each), in 16 bits a third f32 workspace (s32).
# A configuration whose total exceeds CAP is a "does not fit: needs X, has Y" row.
rows_exact() {
  python3 - "$@" <<'PY'
import json, sys
path, L, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = lambda b: (b + 255) // 256 * 256
rows = [json.loads(l) for l in open(path)]
bad, seen = [], set()
for r in rows:
    p, m = r["params"], {k: v["value"] for k, v in r["metrics"].items()}
    v, model = r["variant"], p["model"]
    if v.startswith("probe"):
        if not m["bw"] > 0: bad.append(f"{model} {v}: bandwidth {m['bw']}")
        continue
    if p["device"] != "emulated" or p["emulation"] != 1: bad.append(f"{v}: not labelled an emulation")
    act, es = p["act_bytes"], {"f32": 4, "f16": 2, "bf16": 2}[r["dtype"]]
    tag = "" if r["dtype"] == "f32" else "/" + r["dtype"]
    want_act = es * p["global_batch"] * (p["width"] if model == "mlp" else p["channels"] * p["image"] ** 2)
    if act != want_act: bad.append(f"{model} {v}: tensor {act} bytes, expected {want_act}")
    if p["ops"] != 2 * L - 1: bad.append(f"{model} {v}: {p['ops']} operations")
    nparams = L * 33 * 32 if model == "mlp" else L * 4 * 4 * 9
    s, s32, w = rnd(act), rnd(act // es * 4), rnd(4 * nparams)
    pol = p["offload"]
    tensors = {"none": 2 * L, "all": 2, "conv": L + 1}[pol]
    want = {"params": w, "grads": w, "optim": w, "activ": tensors * s,
            "workspace": (2 if es == 4 else 3) * s32, "data": s32}
    total = sum(want.values())
    offl = {"none": 0, "all": 2 * L - 1, "conv": L}[pol]
    for k, x in want.items():
        if m["model_" + k] != x: bad.append(f"{model} {v}: model_{k} {m['model_' + k]}, closed form {x}")
    if m["model_peak"] != total: bad.append(f"{model} {v}: model_peak {m['model_peak']} != {total}")
    if m["bytes_model"] != offl * act: bad.append(f"{model} {v}: bytes_model {m['bytes_model']} != {offl * act}")
    fits = total <= p["device_mem"]
    if not fits:
        msg = r["check"]["message"] or ""
        if not msg.startswith("does not fit: needs") or "has" not in msg: bad.append(f"{model} {v}: message {msg!r}")
        if p["device_mem"] != cap // 256 * 256: bad.append(f"{model} {v}: device_mem {p['device_mem']}")
        seen.add((model, v + tag, "dnf"))
        continue
    if r["check"]["status"] != "pass": bad.append(f"{model} {v}: {r['check']}")
    for k, x in want.items():
        if m["mem_" + k] != x: bad.append(f"{model} {v}: peak {k} {m['mem_' + k]}, closed form {x}")
    if m["mem_peak"] != total: bad.append(f"{model} {v}: mem_peak {m['mem_peak']} != {total}")
    if m["bytes_d2h"] != offl * act or m["bytes_h2d"] != offl * act:
        bad.append(f"{model} {v}: moved {m['bytes_d2h']}/{m['bytes_h2d']}, expected {offl * act}")
    if m["host_activ"] != offl * act: bad.append(f"{model} {v}: pinned host {m['host_activ']}")
    if pol != "none" and m["weight_rel_err"] != 0: bad.append(f"{model} {v}: not bit-identical")
    for k in ("transfer", "exposed_transfer", "overhead"):
        if pol != "none" and m.get(k) is None: bad.append(f"{model} {v}: {k} missing")
    seen.add((model, v + tag, "ran"))
print("\n".join(bad), file=sys.stderr)
print(" ".join(sorted(f"{a}:{b}:{c}" for a, b, c in seen)))
sys.exit(1 if bad else 0)
PY
}

for L in 3 1 7; do
  launch 1 vdnn $conv --layers $L -o "$out/conv$L" >"$out/conv$L.txt" 2>&1
  rc=$?
  got=$(rows_exact "$out/conv$L/vdnn.jsonl" $L 16777216)
  ok $? "conv, $L layers: none, all and conv with prefetch 0/1 pass; memory == closed forms (rc=$rc; $got)"
  [ $rc = 0 ] && [ "$got" = "conv:all/pf0:ran conv:all/pf1:ran conv:conv/pf0:ran conv:conv/pf1:ran conv:none:ran" ]
  ok $? "conv, $L layers: exit 0, every policy ran"
done
"$top/scripts/validate" rows "$out/conv3/vdnn.jsonl" --min-rows 7 >/dev/null
ok $? "conv rows validate against the schema"
grep -q "EMULATED" "$out/conv3.txt" && grep -q "peak device bytes by category" "$out/conv3.txt"
ok $? "conv: the output says the device is emulated; the per-category summary (measured / model) is printed"
launch 1 vdnn $conv --layers 3 -d f16,bf16 -o "$out/halfc" >"$out/halfc.txt" 2>&1
rc=$?
gotc=$(rows_exact "$out/halfc/vdnn.jsonl" 3 16777216)
ok $? "conv -d f16,bf16: rows exact (rc=$rc; $gotc)"
[ $rc = 0 ] &&
  [ "$gotc" = "conv:all/pf0/bf16:ran conv:all/pf0/f16:ran conv:all/pf1/bf16:ran conv:all/pf1/f16:ran conv:conv/pf0/bf16:ran conv:conv/pf0/f16:ran conv:conv/pf1/bf16:ran conv:conv/pf1/f16:ran conv:none/bf16:ran conv:none/f16:ran" ] &&
  grep -q "# conv bf16: peak device bytes" "$out/halfc.txt"
ok $? "conv, 16 bits: every policy ran in f16 and bf16, a summary per dtype, exit 0"
python3 - "$out/conv3/vdnn.jsonl" "$out/halfc/vdnn.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f)]
m = lambda r, k: r["metrics"][k]["value"]
f32 = {r["variant"]: r for r in rows if r["dtype"] == "f32" and "bytes_d2h" in r["metrics"]}
bad, n = [], 0
for r in rows:
    if r["dtype"] == "f32" or "bytes_d2h" not in r["metrics"]: continue
    for d in ("bytes_d2h", "bytes_h2d", "host_activ", "mem_activ"):
        if 2 * m(r, d) != m(f32[r["variant"]], d): bad.append(f"{r['variant']} {r['dtype']} {d} {m(r, d)} vs f32 {m(f32[r['variant']], d)}")
    n += 1
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or n != 10 else 0)
PY
ok $? "conv, 16 bits: bytes each way, pinned host bytes and peak activations exactly half of f32's"
launch 1 vdnn $conv --layers 3 --device-mem 4K -o "$out/smallc" >"$out/smallc.txt" 2>&1
rc=$?
got=$(rows_exact "$out/smallc/vdnn.jsonl" 3 4096)
[ $rc = 0 ] && [ "$got" = "conv:all/pf0:dnf conv:all/pf1:dnf conv:conv/pf0:dnf conv:conv/pf1:dnf conv:none:dnf conv:none:ran" ]
ok $? "conv in a 4 KiB arena: 'does not fit' rows for every policy, the reference at its need, exit 0 (rc=$rc; $got)"
launch 1 vdnn $conv --layers 2 --offload conv --prefetch 1 -o "$out/one" >/dev/null 2>&1
rc=$?
got=$(rows_exact "$out/one/vdnn.jsonl" 2 16777216)
[ $rc = 0 ] && [ "$got" = "conv:conv/pf1:ran conv:none:ran" ]
ok $? "conv --offload conv --prefetch 1: that policy and the reference only (rc=$rc; $got)"

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
# The step predicted from the run's primitives (perf_model.h): the offloading rows fit the
# host<->device copy (h2d) beside the replicas' all-reduce
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/vdnn" $mlp --layers 3 -o "$out/pred" >"$out/pred.txt" 2>&1
ok $? "prediction: vdnn exits 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/vdnn.jsonl" none=allreduce all/pf0=allreduce,h2d all/pf1=allreduce,h2d
ok $? "prediction: every row carries the predicted step, and the offloading rows fit h2d"

done_testing
