#!/bin/bash
# vdnn: every policy (none, all, conv; prefetch 0 and 1) on the mlp and the conv stack passes
# the program's check (weights and gradients bit-identical to none, peak bytes and bytes moved
# equal to its model); the peak bytes by category and the bytes moved per step recomputed here
# from closed forms; an arena too small for a configuration gives its "does not fit" row and
# exit 0; an arena that holds only the offloading policies; 1 layer, a prime number of layers,
# 2 ranks; in f16 and bf16 (-d) the same closed forms with 16-bit activations, and exactly half
# the bytes of f32 moved per step; usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
mlp="--model mlp --width 32 --batch 16 -n 2 -w 1"
conv="--model conv --channels 4 --image 8 --batch 4 -n 2 -w 1"

# rows_exact FILE LAYERS CAP: every configuration that fits passes, its memory by category and
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

# Every policy, both models, arena large enough for all: layers 3, then 1, then 7 (prime)
for L in 3 1 7; do
  launch 1 vdnn $mlp --layers $L -o "$out/mlp$L" >"$out/mlp$L.txt" 2>&1
  rc=$?
  got=$(rows_exact "$out/mlp$L/vdnn.jsonl" $L 16777216)
  ok $? "mlp, $L layers: none, all/pf0, all/pf1 pass; memory and bytes == closed forms (rc=$rc; $got)"
  [ $rc = 0 ] && [ "$got" = "mlp:all/pf0:ran mlp:all/pf1:ran mlp:none:ran" ]
  ok $? "mlp, $L layers: exit 0, every policy ran"
  launch 1 vdnn $conv --layers $L -o "$out/conv$L" >"$out/conv$L.txt" 2>&1
  rc=$?
  got=$(rows_exact "$out/conv$L/vdnn.jsonl" $L 16777216)
  ok $? "conv, $L layers: none, all and conv with prefetch 0/1 pass; memory == closed forms (rc=$rc; $got)"
  [ $rc = 0 ] && [ "$got" = "conv:all/pf0:ran conv:all/pf1:ran conv:conv/pf0:ran conv:conv/pf1:ran conv:none:ran" ]
  ok $? "conv, $L layers: exit 0, every policy ran"
done
"$top/scripts/validate" rows "$out/conv3/vdnn.jsonl" --min-rows 7 >/dev/null &&
  "$top/scripts/validate" rows "$out/mlp3/vdnn.jsonl" --min-rows 5 >/dev/null
ok $? "rows validate against the schema"
grep -q "EMULATED" "$out/mlp3.txt" && grep -q "emulated" "$out/mlp3.txt"
ok $? "the output says the device is emulated, in the header and in the rows"
grep -q "peak device bytes by category" "$out/conv3.txt"
ok $? "the per-category summary (measured / model) is printed"

# 16 bits: the activations are held and moved in f16 / bf16, so every offloading configuration
# moves exactly half the bytes of its f32 twin each way; each dtype's policies are bit-identical
# to that dtype's none, and the mlp's none is within its tolerance of serial f32 training.
launch 1 vdnn $mlp --layers 3 -d f32,f16,bf16 -o "$out/half" >"$out/half.txt" 2>&1
rc=$?
got=$(rows_exact "$out/half/vdnn.jsonl" 3 16777216)
ok $? "mlp -d f32,f16,bf16: rows exact in every dtype (rc=$rc; $got)"
launch 1 vdnn $conv --layers 3 -d f16,bf16 -o "$out/halfc" >"$out/halfc.txt" 2>&1
rc2=$?
gotc=$(rows_exact "$out/halfc/vdnn.jsonl" 3 16777216)
ok $? "conv -d f16,bf16: rows exact (rc=$rc2; $gotc)"
[ $rc = 0 ] && [ $rc2 = 0 ] &&
  [ "$gotc" = "conv:all/pf0/bf16:ran conv:all/pf0/f16:ran conv:all/pf1/bf16:ran conv:all/pf1/f16:ran conv:conv/pf0/bf16:ran conv:conv/pf0/f16:ran conv:conv/pf1/bf16:ran conv:conv/pf1/f16:ran conv:none/bf16:ran conv:none/f16:ran" ] &&
  grep -q "# mlp f16: peak device bytes" "$out/half.txt" && grep -q "# conv bf16: peak device bytes" "$out/halfc.txt"
ok $? "16 bits: every policy ran in f16 and bf16, a summary per dtype, exit 0"
python3 - "$out/half/vdnn.jsonl" "$out/conv3/vdnn.jsonl" "$out/halfc/vdnn.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f)]
m = lambda r, k: r["metrics"][k]["value"]
f32 = {(r["params"]["model"], r["variant"]): r for r in rows if r["dtype"] == "f32" and "bytes_d2h" in r["metrics"]}
bad, n = [], 0
for r in rows:
    if r["dtype"] == "f32" or "bytes_d2h" not in r["metrics"]: continue
    k = (r["params"]["model"], r["variant"])
    for d in ("bytes_d2h", "bytes_h2d", "host_activ", "mem_activ"):
        if 2 * m(r, d) != m(f32[k], d): bad.append(f"{k} {r['dtype']} {d} {m(r, d)} vs f32 {m(f32[k], d)}")
    if r["variant"] == "none" and k[0] == "mlp":
        tol = {"f16": 1e-3, "bf16": 1e-2}[r["dtype"]]
        if not 0 < m(r, "weight_rel_err") <= tol: bad.append(f"{k} {r['dtype']}: vs serial {m(r, 'weight_rel_err')}")
    n += 1
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad or n != 16 else 0)
PY
ok $? "16 bits: bytes each way, pinned host bytes and peak activations exactly half of f32's; mlp none near serial f32, not equal"

# An arena that holds the offloading policies but not none (mlp, 3 layers: none needs 56832
# bytes, all 48640): none's row does not fit, its reference runs in an arena of its need.
launch 1 vdnn $mlp --layers 3 --device-mem 50000 -o "$out/tight" >"$out/tight.txt" 2>&1
rc=$?
got=$(rows_exact "$out/tight/vdnn.jsonl" 3 50000)
ok $? "mlp in a 50000-byte arena: rows exact ($got)"
[ $rc = 0 ] && [ "$got" = "mlp:all/pf0:ran mlp:all/pf1:ran mlp:none:dnf mlp:none:ran" ] &&
  grep -q "does not fit: needs 55.50 KiB\|does not fit: needs 0.05 MiB" "$out/tight.txt"
ok $? "none does not fit (needs, has), the reference and the offloading policies run, exit 0 (rc=$rc)"

# Too small for anything: every row says so, and the run still ends with exit 0
launch 1 vdnn $conv --layers 3 --device-mem 4K -o "$out/small" >"$out/small.txt" 2>&1
rc=$?
got=$(rows_exact "$out/small/vdnn.jsonl" 3 4096)
ok $? "conv in a 4 KiB arena: rows exact ($got)"
[ $rc = 0 ] && [ "$got" = "conv:all/pf0:dnf conv:all/pf1:dnf conv:conv/pf0:dnf conv:conv/pf1:dnf conv:none:dnf conv:none:ran" ]
ok $? "--device-mem too small: 'does not fit' rows for every policy, exit 0 (rc=$rc)"

# One policy at a time, and two ranks (each trains its own replica)
launch 1 vdnn $conv --layers 2 --offload conv --prefetch 1 -o "$out/one" >/dev/null 2>&1
rc=$?
got=$(rows_exact "$out/one/vdnn.jsonl" 2 16777216)
[ $rc = 0 ] && [ "$got" = "conv:conv/pf1:ran conv:none:ran" ]
ok $? "--offload conv --prefetch 1: that policy and the reference only (rc=$rc; $got)"
launch 2 vdnn $mlp --layers 2 -o "$out/np2" >/dev/null 2>&1
rc=$?
got=$(rows_exact "$out/np2/vdnn.jsonl" 2 16777216)
ok $? "2 ranks: rows exact, exit $rc ($got)"

# On a GPU, the real thing (skipped where none is visible)
if nvidia-smi -L >/dev/null 2>&1; then
  launch 1 vdnn -B cuda $mlp --layers 3 -o "$out/cuda" >"$out/cuda.txt" 2>&1
  ok $? "-B cuda: every policy passes its check"
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
expect_usage --offload --model mlp --offload conv
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
expect_usage --layers --layers 257
expect_usage --lr --lr 0
expect_usage --batch --batch 0
expect_usage --width --model mlp --width 65536 --batch 65536
expect_usage --channels --model conv --channels 4096 --image 4096
done_testing
