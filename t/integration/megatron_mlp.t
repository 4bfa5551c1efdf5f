#!/bin/bash
# megatron_mlp: tensor-parallel degrees t = 1-4, alone and with d = 2 replicas, every variant
# (plain, overlap, seqpar) equal to the serial blocks (forward output, input gradient, every
# weight gradient, weights after training), overlap and seqpar equal to plain, bytes sent per
# block equal to the model on the ring and rhd collectives, memory per rank equal to its model
# (seqpar's activations exactly 1/t of the serial blocks'), and bad inputs exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# h = 48 and f = 96 divide by 1, 2, 3 and 4
tiny="--blocks 2 --hidden 48 --ffn-mult 2 -n 2 -w 1 --baseline 0"

rows_ok() { # rows_ok FILE T_LIST: every row passes, every t of the list ran every variant, bytes and memory equal the models
  python3 - "$1" "$2" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want_t = sorted(int(x) for x in sys.argv[2].split(","))
bad = []
seen = {}
for r in rows:
    p, m = r["params"], r["metrics"]
    v = lambda k: m.get(k, {}).get("value")
    t, d, name = p["tp"], p["dp"], f'{r["variant"]} t={p["tp"]} d={p["dp"]} {r["collective"]}'
    seen.setdefault(t, set()).add(r["variant"])
    if r["check"]["status"] != "pass": bad.append(f"{name}: {r['check']}")
    for k in ("out_rel_err", "dx_rel_err", "grad_rel_err", "colpar_diff", "weight_rel_err"):
        if v(k) is None or not v(k) <= 1e-5: bad.append(f"{name}: {k} = {v(k)}")
    if r["variant"] != "plain" and not (v("vs_plain") is not None and v("vs_plain") <= 1e-5):
        bad.append(f"{name}: vs_plain = {v('vs_plain')}")
    if r["collective"] in ("ring", "rhd"):
        if v("tp_bytes_block") != v("tp_bytes_block_model"):
            bad.append(f"{name}: {v('tp_bytes_block')} bytes per block, model {v('tp_bytes_block_model')}")
        if r["collective"] == "ring" and v("bytes_sent") != v("bytes_model"):
            bad.append(f"{name}: {v('bytes_sent')} bytes per step, model {v('bytes_model')}")
    for k in ("params", "grads", "optim", "activ"):
        if v("mem_" + k) != v("model_" + k): bad.append(f"{name}: mem_{k} {v('mem_' + k)} != model {v('model_' + k)}")
    if r["variant"] == "seqpar" and abs(v("activ_frac") - 1 / t) > 1e-12:
        bad.append(f"{name}: activations {v('activ_frac')} of the serial blocks', not 1/t")
    if t > 1 and not (1 / t < v("params_frac") < 1 / t + 0.02):
        bad.append(f"{name}: parameters {v('params_frac')} of the serial blocks' (1/t plus the replicated b)")
    for k in ("compute", "comm", "exposed_comm", "tflops", "tflops_rank"):
        if v(k) is None: bad.append(f"{name}: {k} missing")
if sorted(seen) != want_t: bad.append(f"degrees run {sorted(seen)}, expected {want_t}")
for t, vs in seen.items():
    if vs != {"plain", "overlap", "seqpar"}: bad.append(f"t={t}: variants {sorted(vs)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

run() { # run NAME NP T_LIST ARGS...: exit 0 and rows_ok
  local name=$1 np=$2 tl=$3
  shift 3
  # shellcheck disable=SC2086
  launch "$np" megatron_mlp $tiny "$@" -o "$out/$name" >"$out/$name.txt" 2>&1 </dev/null
  local rc=$?
  ok $rc "$np ranks $*: every t and variant equals the serial blocks"
  [ $rc = 0 ] || tail -5 "$out/$name.txt" | sed 's/^/#   /' >&2
  rows_ok "$out/$name/megatron_mlp.jsonl" "$tl"
  ok $? "$np ranks $*: t = $tl ran; bytes per block and memory equal the models; overlap and seqpar equal plain"
}

run one 1 1 --batch 4 -C ring
run two 2 1,2 --batch 4 -C ring,rhd
run three 3 3 --batch 4 --tp 3 -C ring
run four 4 1,2,4 --batch 4 -C ring
run tp2dp2 4 2 --batch 4 --tp 2 --dp 2 -C ring,rhd,mpi --trace
run strong 4 1,2,4 --scaling strong --batch 8 --optim adamw -C ring

# the t = 1 rows on 4 ranks are data parallelism alone: no tensor-parallel traffic
python3 - "$out/four/megatron_mlp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = all(r["metrics"]["tp_bytes_block"]["value"] == 0 and r["metrics"]["dp_bytes"]["value"] > 0
         for r in rows if r["params"]["tp"] == 1)
ok = ok and all(r["metrics"]["dp_bytes"]["value"] == 0 for r in rows if r["params"]["tp"] == 4)
sys.exit(0 if ok else 1)
PY
ok $? "t = 1: only the replicas' all-reduce; t = 4 (d = 1): only the group's"

python3 "$top/t/lib/validate_results.py" rows "$out/tp2dp2/megatron_mlp.jsonl" --min-rows 9 >/dev/null &&
  python3 "$top/t/lib/validate_results.py" manifest "$out/tp2dp2/manifest.json" >/dev/null &&
  python3 "$top/t/lib/validate_results.py" trace "$out/tp2dp2/megatron_mlp.trace.json" >/dev/null &&
  grep -q 'f: allreduce dX' "$out/tp2dp2/megatron_mlp.trace.json" && grep -q 'g: allreduce Z' "$out/tp2dp2/megatron_mlp.trace.json"
ok $? "rows, manifest and trace follow the schema; the trace has the f and g all-reduces"

grep -q '^# t = 2 tensor-parallel x d = 2 data-parallel' "$out/tp2dp2.txt" && grep -q 'every check passed' "$out/tp2dp2.txt"
ok $? "--tp 2 --dp 2 says its layout and passes"

launch 2 megatron_mlp $tiny --batch 4 --overlap -o "$out/flag" >"$out/flag.txt" 2>&1 </dev/null
[ $? = 0 ] && [ "$(grep -c '"variant":"overlap"' "$out/flag/megatron_mlp.jsonl")" = 2 ] &&
  ! grep -q '"variant":"plain"' "$out/flag/megatron_mlp.jsonl"
ok $? "--overlap runs the overlap variant alone (t = 1, 2)"

gpus=0
command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -gt 0 ]; then
  launch 2 megatron_mlp $tiny --batch 4 -B cuda -C ring,nccl -o "$out/cuda" >"$out/cuda.txt" 2>&1 </dev/null
  rc=$?
  ok $rc "-B cuda ($gpus GPUs): every t and variant equals the serial blocks"
  [ $rc = 0 ] || tail -5 "$out/cuda.txt" | sed 's/^/#   /' >&2
else
  echo "ok $((tap_n += 1)) # SKIP -B cuda: no CUDA device visible"
fi

# NP|NAME|ARGS: each must exit 2 with a message naming NAME (1 rank: without the launcher)
while IFS='|' read -r np want args; do
  if [ "$np" = 1 ]; then
    # shellcheck disable=SC2086
    megatron_mlp --blocks 1 -n 1 -w 0 --baseline 0 $args -o "$out/bad" >/dev/null 2>"$out/stderr" </dev/null
  else
    # shellcheck disable=SC2086
    launch "$np" megatron_mlp --blocks 1 -n 1 -w 0 --baseline 0 $args -o "$out/bad" >/dev/null 2>"$out/stderr" </dev/null
  fi
  rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "$args on $np ranks -> exit 2 naming $want (rc=$rc)"
done <<'CASES'
1|--tp 3|--tp 3
1|divisible by t|--tp 4 --hidden 50
1|divisible by t|--tp 2 --hidden 47 --ffn-mult 2
3|must be t x d|--tp 2
1|must be t x d|--tp 2 --dp 3
3|not divisible by d|--dp 2
1|f32 only|-d f16
1|f32 only|-d bf16
1|--layers|--layers 3
1|--width|--width 8
1|--overlap|--overlap --variants plain
2|seqpar|--scaling strong --batch 3 --variants seqpar
1|--variants|--variants zigzag
CASES

done_testing
