#!/bin/bash
# checkpoint --model gpt: segments over the GPT's L + 2 layers (the embedding, each block, the
# head), store_all, every_k, budget and selective (Korthikanti et al.'s recomputation of the
# attention core) in f32, f16 and bf16, on 1 to 3 ranks: every row equals store-all bit for bit
# (the program's own check) and serial training within the dtype's tolerance (the driver's); the
# measured peak of live activation bytes equals the model to the byte, and the hand-derived
# bytes below; recomputed FLOPs equal the model and the count by hand; selective's peak lies
# between a checkpoint per block's and store-all's; a spoilt recomputation fails the check;
# what cannot apply is a usage error.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is pipeline.t's, checkpoint.t's, vdnn.t's and megatron_mlp.t's to test;
# here it would only cost time (a calibration per row, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# 3 blocks of 32, 2 heads, 8 tokens, vocabulary 32; 2 sequences per rank
shape="--model gpt --layers 3 --d-model 32 --heads 2 --seq 8 --vocab 32 --batch 2 -n 2 -w 1 --baseline 0"

run() { # run NAME NP ARGS...: runs; on failure shows the end of its output
  local name="$1" np="$2"; shift 2
  launch "$np" checkpoint "$@" -o "$out/$name" >"$out/$name.txt" 2>&1 </dev/null
  local rc=$?
  [ $rc = 0 ] || tail -5 "$out/$name.txt" | sed 's/^/#   /' >&2
  return $rc
}

# rows FILE VARIANTS DTYPES: every variant x dtype ran and passed, peak == model to the byte,
# recomputed FLOPs == model.
rows() {
  python3 - "$@" <<'PY'
import json, sys
path, variants, dtypes = sys.argv[1], set(sys.argv[2].split(",")), set(sys.argv[3].split(","))
rows = [json.loads(l) for l in open(path)]
bad = []
if {r["variant"] for r in rows} != variants or {r["dtype"] for r in rows} != dtypes:
    bad.append(f"rows {sorted({(r['variant'], r['dtype']) for r in rows})}")
for r in rows:
    m, tag = {k: x["value"] for k, x in r["metrics"].items()}, f"{r['variant']} k={r['params']['k']} {r['dtype']}"
    if r["check"]["status"] != "pass": bad.append(f"{tag}: {r['check']}")
    if r["params"].get("model") != "gpt": bad.append(f"{tag}: model {r['params'].get('model')}")
    if m["activ_peak"] != m["activ_model"]: bad.append(f"{tag}: peak {m['activ_peak']} != model {m['activ_model']}")
    if m["recompute_flops"] != m["recompute_flops_model"]: bad.append(f"{tag}: recomputed {m['recompute_flops']} != model")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# One rank, every variant, k = 1 (the default: a checkpoint per layer), 2 and 5 (= L + 2: store-
# all's plan), in every dtype.
# shellcheck disable=SC2086
run one 1 $shape --segments 1,2,5 -d f32,f16,bf16
ok $? "1 rank: store_all, every_k (k = 1, 2, 5), budget, selective x f32, f16, bf16 pass"
rows "$out/one/checkpoint.jsonl" store_all,every_k,budget,selective f32,f16,bf16
ok $? "every row: measured peak == model to the byte, recomputed FLOPs == model"

# The bytes by hand, f32, 16 tokens (2 x 8), h 32: a residual stream S = 16 x 32 x 4 = 2048; the
# tokens 64; a block keeps beside its input ln1 S, qkv 3S, att 2 x 2 x 8 x 8 x 4 = 1024, atty S,
# h S, ln2 S, fc 4S, gelu 4S and four 16-float moments (256): 32000 (selective: 28928, less att
# and atty, its core K = 3072 while alive); the head keeps its final norm's output S, its moments
# (128) and its weight gradient 32 x 32 x 4 = 4096: 6272. A gradient between layers is S.
#   store_all:  tokens + 4 S (the inputs of layers 1..4) + 3 x 32000 + 6272 + dy + dx
#               = 64 + 8192 + 96000 + 6272 + 4096 = 114624
#   selective:  64 + 8192 + 3 x 28928 + 6272 + dy + dx + K = 108480
#   every_k 1:  backward of block 3: tokens + 3 checkpoints S + its 32000 + dy + dx = 42304
#   every_k 2:  segments [0,2) [2,4) [4,5); the peak at block 3's backward: the tokens, checkpoint
#               2 (S), the segment's block (the input of layer 3, S, and two blocks), dy and dx
#               = 64 + S + S + 2 x 32000 + 2S = 72256
# Recomputed FLOPs (GEMMs and attention products, N = 16 tokens, C = 32): a block 24NC^2 +
# 4BT^2C = 393216 + 16384 = 409600; the top layer of a recomputed segment skips its last
# linear (8NC^2 = 131072); selective recomputes each block's core (16384) once.
#   every_k 1: blocks 1, 2, 3 each the top of its segment: 3 x 278528 = 835584
#   every_k 2: [0,2): the embedding (0) and block 1 as top (278528); [2,4): block 2 (409600) and
#              block 3 as top (278528): 966656
#   selective: 3 x 16384 = 49152
python3 - "$out/one/checkpoint.jsonl" <<'PY'
import json, sys
want = {("store_all", 5): (114624, 0), ("selective", 5): (108480, 49152),
        ("every_k", 1): (42304, 835584), ("every_k", 2): (72256, 966656)}
got = {}
for r in map(json.loads, open(sys.argv[1])):
    if r["dtype"] != "f32": continue
    m = r["metrics"]
    got[(r["variant"], r["params"]["k"])] = (m["activ_peak"]["value"], m["recompute_flops"]["value"])
    if r["variant"] == "selective":
        blk = (m["activ_block"]["value"], m["activ_block_selective"]["value"], m["activ_block_selective_formula"]["value"])
bad = [f"{k}: {got.get(k)}, by hand {v}" for k, v in want.items() if got.get(k) != v]
# one block with its input: 16 S + the moments (34048), less att and atty (30976); the formula
# 34 s b h at 16 bits, scaled to f32: 34 x 8 x 2 x 32 x 2 = 34816
if blk != (34048, 30976, 34816): bad.append(f"block bytes {blk}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "f32 peaks by hand: store_all 114624, selective 108480, every_k 1 42304, k 2 72256; recomputed FLOPs 0, 49152, 835584, 966656; a block 34048 bytes, 30976 selective, Korthikanti's 34sbh 34816"

python3 - "$out/one/checkpoint.jsonl" <<'PY'
import json, sys
rows = {}
for r in map(json.loads, open(sys.argv[1])):
    rows.setdefault(r["dtype"], {})[(r["variant"], r["params"]["k"])] = r["metrics"]["activ_peak"]["value"]
bad = []
for d, p in rows.items():
    if not p[("every_k", 1)] < p[("selective", 5)] < p[("store_all", 5)]:
        bad.append(f"{d}: every_k 1 {p[('every_k', 1)]}, selective {p[('selective', 5)]}, store_all {p[('store_all', 5)]}")
    if p[("every_k", 5)] != p[("store_all", 5)]: bad.append(f"{d}: k = 5 is store-all's plan")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "every dtype: a checkpoint per block < selective < store-all; k = L + 2 holds store-all's bytes"

# Data-parallel replicas on 3 ranks (strong batch 5: 2/2/1 sequences), two collectives, f32 and bf16
# shellcheck disable=SC2086
run np3 3 ${shape/--batch 2/--batch 5} --scaling strong --variants every_k,selective -C mpi,ring -d f32,bf16
ok $? "3 ranks, strong batch 5, -C mpi,ring: every_k and selective x f32, bf16 pass"
rows "$out/np3/checkpoint.jsonl" every_k,selective f32,bf16
ok $? "3 ranks: peak == model on the busiest rank"

# 2 ranks in f16 (the loss scaler, the all-reduce in 16 bits), the budget given
# shellcheck disable=SC2086
run np2 2 $shape -d f16 --budget 30000
ok $? "2 ranks, f16, --budget 30000: every variant passes"
rows "$out/np2/checkpoint.jsonl" store_all,every_k,budget,selective f16
ok $? "2 ranks, f16: peak == model"

# The check itself: one recomputed element spoilt fails every_k and selective, not store_all.
# shellcheck disable=SC2086
SL_TEST_CORRUPT=1 checkpoint $shape --variants store_all,every_k,selective -d f32,bf16 -o "$out/corrupt" \
  >"$out/corrupt.txt" 2>&1
rc=$?
python3 - "$out/corrupt/checkpoint.jsonl" <<'PY'
import json, sys
st = {(r["variant"], r["dtype"]): r["check"] for r in map(json.loads, open(sys.argv[1]))}
ok = all(st[("store_all", d)]["status"] == "pass" and
         all(st[(v, d)]["status"] == "fail" and "differ from store-all" in st[(v, d)]["message"]
             for v in ("every_k", "selective")) for d in ("f32", "bf16"))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] && [ $rc = 1 ]
ok $? "SL_TEST_CORRUPT=1: every_k and selective fail naming store-all, store_all passes, exit 1 (rc=$rc)"

# Dropout: the recomputation draws the forward's masks again (a counter, never stored), so every
# variant still equals store-all bit for bit, with the same peaks as without dropout.
# shellcheck disable=SC2086
run drop 2 $shape --dropout 0.2 -d f32,bf16
rc=$?
rows "$out/drop/checkpoint.jsonl" store_all,every_k,budget,selective f32,bf16
ok $? "--dropout 0.2: every variant in f32 and bf16 equals store-all bit for bit and passes (rc=$rc)"

# What cannot apply
expect_usage_of checkpoint "^checkpoint: --segments: 6 layers per segment is outside 1..5 (the GPT's 5 layers" \
  --model gpt --layers 3 --segments 6
expect_usage_of checkpoint "^checkpoint: --variants selective: .* applies with --model gpt" --variants selective
expect_usage_of checkpoint "^checkpoint: --segments applies to every_k" --model gpt --variants selective --segments 2

"$top/scripts/validate" run "$out/one" >"$out/validate.txt" 2>&1
ok $? "the rows validate against results/schema.json"
done_testing
