#!/bin/bash
# pipeline --model gpt: GPT blocks split into stages (the embedding on the first, the LM head on
# the last), every schedule checked against one process training the whole batch in the same
# dtype; the boundary tensors are the residual stream (b/m x s x h of the run's dtype, half of
# f32's bytes in 16 bits, the bytes the model states); each micro-batch in flight keeps its own
# activations (gpipe's m against 1f1b's p on stage 0), --recompute keeps only the stage's input;
# replicas of the pipeline (--dp) on 4 ranks; the options that cannot apply are usage errors.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is pipeline.t's, checkpoint.t's, vdnn.t's and megatron_mlp.t's to test;
# here it would only cost time (a calibration per row, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# 4 blocks of 32, 2 heads, 8 tokens, vocabulary 32; 4 sequences in 2 micro-batches
shape="--model gpt --layers 4 --d-model 32 --heads 2 --seq 8 --vocab 32 --batch 4 -m 2 -n 3 -w 1 --baseline 0"

# rows FILE SCHEDULES DTYPES COLLS: every schedule x dtype x collective ran and passed, with the
# GPT's shape in the row.
rows() {
  python3 - "$@" <<'PY'
import json, sys
path, scheds, dtypes, colls = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4].split(",")
rows = [json.loads(l) for l in open(path)]
got = {(r["variant"], r["dtype"], r["collective"]) for r in rows}
want = {(s, d, c) for s in scheds for d in dtypes for c in colls}
bad = [f"rows {sorted(got ^ want)}"] if got != want else []
for r in rows:
    p = r["params"]
    if r["check"]["status"] != "pass": bad.append(f"{r['variant']}/{r['dtype']}/{r['collective']}: {r['check']}")
    if (p.get("model"), p["layers"], p["d_model"], p["heads"], p["seq"], p["vocab"]) != ("gpt", 4, 32, 2, 8, 32):
        bad.append(f"params {p}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}
metric() { # metric FILE VARIANT DTYPE NAME: the value of the first such row
  python3 -c 'import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if r["variant"] == sys.argv[2] and r["dtype"] == sys.argv[3]:
        v = r["metrics"].get(sys.argv[4]); print(v["value"] if v else r["params"][sys.argv[4]]); break' "$@"
}

# 2 stages, every schedule (interleaved: 2 chunks of one block per stage), f32, f16, bf16
# shellcheck disable=SC2086
launch 2 pipeline $shape -d f32,f16,bf16 -o "$out/p2" >"$out/p2.txt" 2>&1 </dev/null
rc=$?
ok $rc "pipeline --model gpt on 2 stages: gpipe, 1f1b, interleaved, pipedream x f32, f16, bf16 pass"
[ $rc = 0 ] || tail -5 "$out/p2.txt" | sed 's/^/#   /' >&2
rows "$out/p2/pipeline.jsonl" gpipe,1f1b,interleaved,pipedream f32,f16,bf16 mpi
ok $? "every row passed, with the GPT's shape in it"

# The busiest stage sends each micro-batch's residual stream one way: b x s x h elements
# (4 x 8 x 32) of the dtype per step, the model's figure; interleaved crosses 3 boundaries.
f32=$(metric "$out/p2/pipeline.jsonl" 1f1b f32 bytes_sent)
b16=$(metric "$out/p2/pipeline.jsonl" 1f1b bf16 bytes_sent)
model=$(metric "$out/p2/pipeline.jsonl" 1f1b f32 bytes_model)
inter=$(metric "$out/p2/pipeline.jsonl" interleaved f32 bytes_model)
python3 -c "import sys; sys.exit(0 if ($f32, $model, $b16, $inter) == (4096, 4096, 2048, 12288) else 1)"
ok $? "boundary bytes per step: 4096 sent in f32 = the model, 2048 in bf16, interleaved 12288 (got $f32, $model, $b16, $inter)"

# Each micro-batch in flight keeps its blocks' activations: stage 0 holds m = 2 under gpipe, as
# many as 1f1b's min(p, m) = 2 here, so run m = 4 on 8 sequences: gpipe 4, 1f1b 2.
# shellcheck disable=SC2086
launch 2 pipeline ${shape/--batch 4 -m 2/--batch 8 -m 4} --schedule gpipe,1f1b -o "$out/fly" >"$out/fly.txt" 2>&1 </dev/null
rc=$?
python3 - "$out/fly/pipeline.jsonl" <<'PY'
import json, sys
rows = {r["variant"]: r for r in map(json.loads, open(sys.argv[1]))}
peak = {v: float(r["params"]["activ_peak_stages"].split(",")[0]) for v, r in rows.items()}
fly = {v: r["params"]["inflight_stages"] for v, r in rows.items()}
print(f"stage 0 activation peaks {peak}, in flight {fly}", file=sys.stderr)
sys.exit(0 if fly == {"gpipe": "4,4", "1f1b": "2,1"} and peak["gpipe"] == 2 * peak["1f1b"] > 0 else 1)
PY
ok $? "stage 0 keeps 4 micro-batches' activations under gpipe, 2 under 1f1b: twice the bytes (rc=$rc)"

# --recompute: only each stage's input per micro-batch is kept; the forward runs again before
# the backward (the head's loss included), and the weights are the same. The peak is then one
# micro-batch's blocks beside the m inputs: on stage 1 half gpipe's peak (m = 2) plus two
# residual streams of 2 x 8 x 32 f32.
# shellcheck disable=SC2086
launch 2 pipeline $shape --schedule gpipe --recompute -d f32,bf16 -o "$out/rc" >"$out/rc.txt" 2>&1 </dev/null
rc=$?
rows "$out/rc/pipeline.jsonl" gpipe f32,bf16 mpi
ok $? "--recompute: gpipe in f32 and bf16 passes (rc=$rc)"
full=$(metric "$out/p2/pipeline.jsonl" gpipe f32 activ_peak)
kept=$(metric "$out/rc/pipeline.jsonl" gpipe f32 activ_peak)
python3 -c "import sys; sys.exit(0 if $kept == $full / 2 + 2 * 2 * 8 * 32 * 4 else 1)"
ok $? "--recompute: peak $kept bytes = gpipe's $full / 2 + the two micro-batches' inputs"

# Two replicas of a 2-stage pipeline on 4 ranks, their gradients all-reduced by the library and
# by the ring; 16 bits too.
# shellcheck disable=SC2086
launch 4 pipeline $shape --dp 2 --schedule 1f1b,pipedream -d f32,f16 -C mpi,ring -o "$out/dp" >"$out/dp.txt" 2>&1 </dev/null
rc=$?
rows "$out/dp/pipeline.jsonl" 1f1b,pipedream f32,f16 mpi,ring
ok $? "--dp 2 --stages 2 on 4 ranks: 1f1b and pipedream x f32, f16 x mpi, ring pass (rc=$rc)"

# Dropout: each stage numbers a micro-batch's elements by its sequences' place in the step, so
# every schedule (pipedream's stream too) draws serial training's masks.
# shellcheck disable=SC2086
launch 2 pipeline $shape --dropout 0.2 -d f32,bf16 -o "$out/drop" >"$out/drop.txt" 2>&1 </dev/null
rc=$?
rows "$out/drop/pipeline.jsonl" gpipe,1f1b,interleaved,pipedream f32,bf16 mpi
ok $? "--dropout 0.2: every schedule in f32 and bf16 passes against serial training with dropout (rc=$rc)"

# What cannot apply
expect_usage_of pipeline "--dropout" --model gpt --dropout 0.1 --dp 2 --schedule pipedream
expect_usage_of pipeline "--compute sleep" --model gpt --compute sleep
expect_usage_of pipeline "--stages 3" --model gpt --layers 2 --stages 3
expect_usage_of pipeline "--balance 1,2" --model gpt --layers 4 --balance 1,2 --schedule 1f1b

"$top/scripts/validate" run "$out/p2" >"$out/validate.txt" 2>&1
ok $? "the rows validate against results/schema.json"
done_testing
