#!/bin/bash
# The kernels benchmark: a quick sweep of every kernel and dtype on 1 and 2 ranks (rows
# validate, every check passes, each kernel sits on the roofline), the MLP training
# demonstration (the loss falls at least 10x in 200 steps), and its errors (exit 2 for a bad
# option; 2 or 3 with the reason for a backend that is not built or has no device).
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

quick="-n 2 -w 1 --gemm-n 192 --elems 100003 --copy-bytes 8M --seq 32 --d-model 64 --vocab 256"
for np in 1 2; do
  dir="$out/np$np"
  launch "$np" kernels $quick -d all -o "$dir" >"$dir.txt" 2>&1
  rc=$?
  ok $rc "kernels on $np rank(s), all dtypes, exits 0"
  [ $rc = 0 ] || sed 's/^/#   /' "$dir.txt" >&2
  "$top/scripts/validate" rows "$dir/kernels.jsonl" --min-rows 20 >/dev/null
  ok $? "np=$np: rows validate against the schema"
  python3 - "$dir/kernels.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
f32 = {"gemm", "bias_add", "bias_grad", "relu", "gelu", "gelu_bwd", "mse", "softmax_xent", "sgd",
       "adamw", "scale_check", "axpby", "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "rng_normal"}
gpt = ("layernorm", "layernorm_bwd", "attention", "attention_bwd", "embedding", "embedding_bwd",
       "lmhead_xent")
want = {(k, "f32") for k in f32} | {(k, d) for k in ("gemm", "cast", "axpby") for d in ("f16", "bf16")}
want |= {(k, d) for k in gpt for d in ("f32", "f16", "bf16")}
want |= {(k, d) for k in ("gelu", "gelu_bwd") for d in ("f16", "bf16")}
want |= {("peak_copy", "f32"), ("peak_gemm", "f32")}
seen, bad = set(), []
for r in rows:
    key = (r["variant"], r["dtype"])
    seen.add(key)
    status = r["check"]["status"]
    if r["variant"] == "peak_copy":
        if status != "none": bad.append(f"peak_copy check {status}")
    elif status != "pass":
        bad.append(f"{key}: check {status}: {r['check'].get('message')}")
    m = r["metrics"]
    if r["variant"] != "rng_normal" and m.get("roof_fraction", {}).get("value") is None:
        bad.append(f"{key}: no roofline position")
    if not m.get("gbps", {}).get("value"):
        bad.append(f"{key}: no GB/s")
if seen != want:
    bad.append(f"missing {sorted(want - seen)}, unexpected {sorted(seen - want)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ok $? "np=$np: every kernel and dtype ran, passed its check and has a roofline position"
done

kernels --train-steps 200 -o "$out/train" >"$out/train.txt" 2>&1
rc=$?
ok $rc "--train-steps 200 exits 0"
[ $rc = 0 ] || sed 's/^/#   /' "$out/train.txt" >&2
python3 - "$out/train/kernels.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
ok = r["variant"] == "train_mlp" and r["check"]["status"] == "pass" \
     and r["metrics"]["loss_reduction"]["value"] >= 10
print(f"loss reduction {r['metrics']['loss_reduction']['value']:.1f}x", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "training the MLP 200 steps lowers the loss at least 10x, and the row says pass"
grep -q 'step   199  loss' "$out/train.txt"
ok $? "the loss curve is printed"

kernels --kernels gemm,nope -o "$out/x" >"$out/stdout" 2>"$out/stderr"
[ $? = 2 ] && grep -q -- '--kernels' "$out/stderr"
ok $? "an unknown kernel name is a usage error naming --kernels"

kernels -B cuda $quick -k relu -o "$out/cuda" >"$out/cuda.txt" 2>&1
rc=$?
gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -gt 0 ]; then
  ok $rc "-B cuda runs and passes where a device is visible ($gpus GPUs)"
else
  # not built: a usage error (2); built but no device: a runtime error (3)
  { [ $rc = 2 ] || [ $rc = 3 ]; } && grep -qi 'cuda' "$out/cuda.txt" &&
    { [ $rc = 2 ] || grep -q 'no CUDA device is visible on this node (no CUDA device' "$out/cuda.txt"; }
  ok $? "-B cuda where it cannot run exits 2 (not built) or 3 (no device, with the runtime's reason) (rc=$rc)"
  if [ $rc = 3 ]; then # built for CUDA, no device: -B auto (the default) says why it chose cpu
    kernels $quick -k relu -o "$out/auto" >"$out/auto.txt" 2>&1 &&
      grep -q '^# backend auto: cpu chosen: no CUDA device' "$out/auto.txt"
    ok $? "-B auto on a CUDA build without a device runs on cpu and notes the reason"
  fi
fi

done_testing
