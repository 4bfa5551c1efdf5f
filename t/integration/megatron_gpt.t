#!/bin/bash
# megatron_mlp --model gpt: Megatron-LM's tensor parallelism over the whole GPT (attention split
# by heads, the MLP as the blocks', a vocabulary-parallel embedding and LM head with the parallel
# cross-entropy), plain and overlap (the f all-reduces under the weight-gradient GEMMs), with and
# without replicas (--dp). On 2 ranks (t = 2) and 4 ranks (the
# sweep t = 1, 2, 4 and t = 2 x d = 2), f32, f16 and bf16, ring: every row's weights against
# serial GPT training in its dtype (the training layer's check), and its own check (on the ring,
# each region's bytes equal to its model, the collectives counted); here besides: the bytes per
# block, embedding, head and step equal to the models, 1 + 4L + 4 collectives a step in a group
# (overlap: 2L + 1 of them non-blocking),
# and the parameters a rank holds equal to the model (1/t of the matrices, the norms, the
# row-parallel biases and the position table whole); with dropout too. Sequence parallelism
# (seqpar) at t = 2 (beside plain, with dropout: the masks numbered by global position) and
# t = 4, f32 and a 16-bit dtype: equal to serial training, every region's bytes and the
# activations a block keeps equal to their models, the saving against plain measured;
# --no-vocab-parallel (the logits gathered) likewise. Bad splits exit 2 naming the option.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is tested once below (a calibration per row costs seconds under the
# sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
gpt="--model gpt --blocks 2 --d-model 32 --heads 4 --seq 8 --vocab 64 --batch 2 -n 2 -w 1 --baseline 0 -C ring"

check_rows() { # check_rows FILE WANT_TD: every row passed, with the bytes, collectives and memory of the model
  python3 - "$1" "$2" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = {(v,) + tuple(map(int, td.split("x"))) + (d,) for td in sys.argv[2].split(",") for d in ("f32", "f16", "bf16")
        for v in ("plain", "overlap")}
got = {(r["variant"], r["params"]["tp"], r["params"]["dp"], r["dtype"]) for r in rows}
bad = [] if got == want else [f"rows {sorted(got)}, expected {sorted(want)}"]
val = lambda r, k: r["metrics"][k]["value"]
for r in rows:
    t, d, dt = r["params"]["tp"], r["params"]["dp"], r["dtype"]
    name = f"{r['variant']} t={t} d={d} {dt}"
    if r["check"]["status"] != "pass" or r["params"].get("model") != "gpt": bad.append(f"{name}: {r['check']}")
    for k in ("tp_bytes_block", "emb_bytes", "head_bytes"):
        if val(r, k) != val(r, k + "_model"): bad.append(f"{name}: {k} {val(r, k)} != model {val(r, k + '_model')}")
    if val(r, "bytes_sent") != val(r, "bytes_model"): bad.append(f"{name}: bytes_sent {val(r, 'bytes_sent')} != model")
    if (t > 1) != (val(r, "tp_bytes_block") > 0) or (d > 1) != (val(r, "dp_bytes") > 0):
        bad.append(f"{name}: group bytes {val(r, 'tp_bytes_block')}, replicas' {val(r, 'dp_bytes')}")
    if val(r, "tp_collectives") != (0 if t == 1 else 1 + 4 * 2 + 4): bad.append(f"{name}: {val(r, 'tp_collectives')} collectives")
    if val(r, "tp_collectives_overlapped") != (2 * 2 + 1 if t > 1 and r["variant"] == "overlap" else 0):
        bad.append(f"{name}: {val(r, 'tp_collectives_overlapped')} overlapped")
    # f32: the parameters a rank holds (4 bytes each) are the model's exactly
    if dt == "f32" and abs(val(r, "params_frac") - val(r, "params_frac_model")) > 1e-12:
        bad.append(f"{name}: params_frac {val(r, 'params_frac')} != model {val(r, 'params_frac_model')}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# shellcheck disable=SC2086
launch 2 megatron_mlp $gpt --tp 2 -d f32,f16,bf16 -o "$out/two" >"$out/two.txt" 2>&1 </dev/null
rc=$?
ok $rc "2 ranks, t = 2, plain and overlap, f32/f16/bf16: every row equals serial GPT training and passes its check"
[ $rc = 0 ] || tail -5 "$out/two.txt" | sed 's/^/#   /' >&2
check_rows "$out/two/megatron_mlp.jsonl" 2x1
ok $? "2 ranks: bytes per block, embedding, head and step equal to the models; 13 collectives a step; memory the model's"
grep -q '^# gpt, overlap, t = 2, d = 1, f32: 13 collectives per step in each group.*, 5 of them under' "$out/two.txt"
ok $? "2 ranks: the collectives of a step are said"
# the model at t = 2, f32, N = 4 sequences x 8 = 32 tokens (--batch 2 a rank), C = 32: per block
# 4 x 2(1/2) x 32 x 32 x 4 bytes; the embedding one of those; the head three of 32 f32 and one
python3 -c "
import json, sys
r = [json.loads(l) for l in open('$out/two/megatron_mlp.jsonl') if '\"f32\"' in l and '\"plain\"' in l][0]['metrics']
sys.exit(0 if (r['tp_bytes_block']['value'], r['emb_bytes']['value'], r['head_bytes']['value']) == (16384, 4096, 3 * 128 + 4096) else 1)"
ok $? "2 ranks, f32: 16384 bytes per block, 4096 for the embedding, 4480 for the head (by hand)"
scripts/validate rows "$out/two/megatron_mlp.jsonl" >/dev/null
ok $? "the rows are valid against results/schema.json"

# shellcheck disable=SC2086
launch 4 megatron_mlp $gpt -d f32,f16,bf16 -o "$out/four" >"$out/four.txt" 2>&1 </dev/null
rc=$?
ok $rc "4 ranks, t = 1, 2, 4 (d = 4, 2, 1), plain and overlap, f32/f16/bf16: every row equals serial GPT training and passes its check"
[ $rc = 0 ] || tail -5 "$out/four.txt" | sed 's/^/#   /' >&2
check_rows "$out/four/megatron_mlp.jsonl" 1x4,2x2,4x1
ok $? "4 ranks: bytes per block, embedding, head and step (the replicas' all-reduce included) equal to the models"

# Dropout (every site: the embedding, the attention probabilities, the two residual branches): each
# rank draws the masks of its own heads as serial training numbers them (a head offset of
# tr·a/t per sequence), so the weights still equal serial training's; SGD, whose check is the
# strict one (largest element 1e-4: a mask of the wrong heads gives 7e-3 at t = 2).
# shellcheck disable=SC2086
launch 4 megatron_mlp $gpt --tp 2,4 --variants plain --dropout 0.2 --optim sgd --lr 0.1 -d f32,bf16 \
  -o "$out/drop" >"$out/drop.txt" 2>&1 </dev/null
rc=$?
ok $rc "4 ranks, t = 2 x d = 2 and t = 4, dropout 0.2, f32/bf16: every row equals serial GPT training with the same masks"
[ $rc = 0 ] || tail -5 "$out/drop.txt" | sed 's/^/#   /' >&2
[ "$(grep -c '"status":"pass"' "$out/drop/megatron_mlp.jsonl")" = 4 ]
ok $? "4 ranks, dropout: 4 rows passed"

# Sequence parallelism. check_sp FILE: every row passed; every region's bytes (the regathers and
# the layer norms' all-reduce too), the activations a block keeps and the head's logits equal
# to their models; 2 + 10L + 5 + 1 collectives a step (--no-vocab-parallel: 2 + 10L + 3 + 1).
check_sp() {
  python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
val = lambda r, k: r["metrics"][k]["value"]
bad = [] if rows else ["no rows"]
for r in rows:
    t, sp, vp = r["params"]["tp"], r["params"]["sequence_parallel"], r["params"]["vocab_parallel"]
    name = f"{r['variant']} t={t} {r['dtype']} vp={vp}"
    if r["check"]["status"] != "pass": bad.append(f"{name}: {r['check']}")
    keys = ["tp_bytes_block", "emb_bytes", "head_bytes", "tp_activ_block", "head_logit_mem"]
    keys += ["regather_bytes", "norms_bytes"] if sp else []
    for k in keys:
        if val(r, k) != val(r, k + "_model"): bad.append(f"{name}: {k} {val(r, k)} != model {val(r, k + '_model')}")
    if val(r, "bytes_sent") != val(r, "bytes_model"): bad.append(f"{name}: bytes_sent != model")
    want = 0 if t == 1 else (2 + 10 * 2 + (5 if vp else 3) + 1 if sp else 1 + 4 * 2 + (4 if vp else 2))
    if val(r, "tp_collectives") != want: bad.append(f"{name}: {val(r, 'tp_collectives')} collectives, expected {want}")
    if sp and r["variant"] != "seqpar": bad.append(f"{name}: sequence_parallel in a {r['variant']} row")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# t = 2 (N = 4 sequences x 8 = 32 tokens, 16 a rank between layers), plain beside seqpar, with
# dropout on every site (SGD's strict check: a mask drawn at the wrong positions fails it)
# shellcheck disable=SC2086
launch 2 megatron_mlp $gpt --tp 2 --variants plain,seqpar --dropout 0.2 --optim sgd --lr 0.1 -d f32,bf16 \
  -o "$out/sp2" >"$out/sp2.txt" 2>&1 </dev/null
rc=$?
ok $rc "2 ranks, t = 2, seqpar beside plain, dropout 0.2, f32/bf16: every row equals serial GPT training"
[ $rc = 0 ] || tail -5 "$out/sp2.txt" | sed 's/^/#   /' >&2
check_sp "$out/sp2/megatron_mlp.jsonl"
ok $? "2 ranks, seqpar: bytes of every region, activations a block keeps, collectives: the models'"
# by hand, f32: the blocks' eight halves of 16 x 32 x 4 bytes = plain's four all-reduces (16384);
# the two regathers a block (8192 a step); the norms' (4L + 2)C = 320 f32 all-reduced (1280);
# a block keeps (4 x 16 x 32 + 12 x 32 x 16 + 4 x 2 x 8 x 8) x 4 + 4 x 16 x 4 = 35072 bytes
# against plain's 43520 (4 x 32 x 32 of the norms' tensors and 4 x 32 x 4 of moments): 19.4 %
python3 - "$out/sp2/megatron_mlp.jsonl" <<'PY'
import json, sys
rows = {(r["variant"], r["dtype"]): r["metrics"] for r in map(json.loads, open(sys.argv[1]))}
sp, pl = rows[("seqpar", "f32")], rows[("plain", "f32")]
got = tuple(sp[k]["value"] for k in ("tp_bytes_block", "regather_bytes", "norms_bytes", "tp_activ_block",
                                       "activ_block_plain")) + (pl["tp_activ_block"]["value"], pl["tp_bytes_block"]["value"])
want = (16384, 8192, 1280, 35072, 43520, 43520, 16384)
saving = sp["activ_saving"]["value"]
sys.exit(0 if got == want and abs(saving - (1 - 35072 / 43520)) < 1e-12 else f"got {got} saving {saving}, want {want}")
PY
ok $? "2 ranks, f32: seqpar's 16384 bytes a block (plain's), 8192 regathered, 1280 of norms, 35072 activation bytes a block against plain's 43520 (by hand)"
grep -q '^# gpt, seqpar, t = 2, d = 1, f32: 28 collectives per step in each group' "$out/sp2.txt"
ok $? "2 ranks, seqpar: the collectives of a step are said"

# t = 4 and t = 2 x d = 2, seqpar alone, f32 and f16
# shellcheck disable=SC2086
launch 4 megatron_mlp $gpt --tp 2,4 --sequence-parallel -d f32,f16 -o "$out/sp4" >"$out/sp4.txt" 2>&1 </dev/null
rc=$?
ok $rc "4 ranks, t = 2 x d = 2 and t = 4, seqpar, f32/f16: every row equals serial GPT training"
[ $rc = 0 ] || tail -5 "$out/sp4.txt" | sed 's/^/#   /' >&2
check_sp "$out/sp4/megatron_mlp.jsonl"
ok $? "4 ranks, seqpar: bytes of every region, activations, collectives: the models'"

# --no-vocab-parallel: the 32 x 64 f32 logits all-gathered (32 x 32 x 4 sent by each of 2 ranks)
# beside the input gradient's all-reduce (4096): 8192 bytes in the head
# shellcheck disable=SC2086
launch 2 megatron_mlp $gpt --tp 2 --variants plain,seqpar --no-vocab-parallel -d f32,bf16 -o "$out/nv" \
  >"$out/nv.txt" 2>&1 </dev/null
rc=$?
ok $rc "2 ranks, --no-vocab-parallel, plain and seqpar, f32/bf16: every row equals serial GPT training"
[ $rc = 0 ] || tail -5 "$out/nv.txt" | sed 's/^/#   /' >&2
check_sp "$out/nv/megatron_mlp.jsonl"
ok $? "2 ranks, --no-vocab-parallel: bytes, logits held and collectives: the models'"
python3 -c "
import json, sys
r = [json.loads(l) for l in open('$out/nv/megatron_mlp.jsonl') if '"f32"' in l and '"plain"' in l][0]['metrics']
sys.exit(0 if (r['head_bytes']['value'], r['head_logit_mem']['value']) == (8192, 2 * 32 * 32 * 4 + 2 * 32 * 64 * 4) else 1)"
ok $? "2 ranks, f32, logits gathered: 8192 bytes in the head, 24576 bytes of logits held (by hand)"

# The step predicted from the run's primitives (tp_gpt_schedule.c), on 4 ranks at t = 2 x d = 2
# (one run: each row calibrates): every row carries it and its arithmetic holds (pred_step =
# pred_compute + pred_exposed), each group's operations fitted on its own communicator: the
# overlap variant's all-reduces (f behind the weight gradient non-blocking, g, the embedding's,
# the cross-entropy's) in the group, seqpar's all-gathers and reduce-scatters, the replicas' sum
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 4 "$top/bin/megatron_mlp" $gpt --tp 2 --variants overlap,seqpar \
  -o "$out/pred" >"$out/pred.txt" 2>&1 </dev/null
ok $? "prediction: 4 ranks, t = 2 x d = 2, overlap and seqpar: exit 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/megatron_mlp.jsonl" overlap=tp.allreduce,tp.iallreduce,dp.allreduce \
  seqpar=tp.allreduce,tp.iallgather,tp.ireduce_scatter,dp.allreduce
ok $? "prediction: every row carries the predicted step and its arithmetic; the group's and the replicas' fits"

# Bad splits and what this program does not do with the GPT: one line naming the option, exit 2.
expect_usage_np 2 megatron_mlp "--tp 2: the GPT's --heads 3 must be divisible by t" \
  --model gpt --d-model 24 --heads 3 --seq 8 --vocab 64 --tp 2
expect_usage_np 4 megatron_mlp "--tp 4: --vocab 66 must be divisible by t" \
  --model gpt --d-model 32 --heads 4 --seq 8 --vocab 66 --tp 4
expect_usage_np 2 megatron_mlp "--tp 4 needs a multiple of 4 ranks, 2 given" --model gpt --d-model 32 --heads 4 --tp 4
expect_usage_np 4 megatron_mlp "--tp 2 x --dp 3: the ranks (4) must be t x d" --model gpt --d-model 32 --heads 4 --tp 2 --dp 3
expect_usage_np 4 megatron_mlp "--seq 6: --sequence-parallel splits each sequence's positions over t ranks; t = 4" \
  --model gpt --d-model 32 --heads 4 --seq 6 --vocab 64 --tp 4 --sequence-parallel
expect_usage_of megatron_mlp "--overlap/--sequence-parallel: give the variants either by these flags or by --variants" \
  --model gpt --sequence-parallel --variants plain
expect_usage_of megatron_mlp "--no-vocab-parallel: the GPT's LM head; give --model gpt" --no-vocab-parallel
expect_usage_of megatron_mlp "--hidden: the MLP blocks' shape; with --model gpt the shape is" --model gpt --hidden 64
expect_usage_of megatron_mlp "--predict: megatron_mlp's layout is chosen for the launched ranks" \
  --model gpt --predict "$top/scripts/platforms/predict/h100-sxm-node.txt"

done_testing
