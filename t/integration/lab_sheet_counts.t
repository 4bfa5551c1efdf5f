#!/bin/bash
# lab_sheet_counts: exact figures the ddp, checkpoint and transformer sheets quote for their
# exercises (counts and bytes, never timings): the buckets of ddp's simulation exercise 2 and the trace spans checkpoint's
# exercise 4 sums. (mae_threads.t asserts that the read probe reads at least the data.)
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

# ddp simulation exercise 2's model (9.3 MiB of f32 gradients): 1 MiB buckets cut it in 3
# (a layer is never split), the default 25 MiB leaves it in one
model="-L 4 --width 1024 --inputs 256 --outputs 64 --batch 8 -n 1 -w 0 -C ring --variants bucketed"
for mb in 1 25; do
  launch 2 ddp $model --bucket-mb $mb -o "$out/ddp$mb" >"$out/ddp$mb.txt" 2>&1
  ok $? "ddp, exercise 2's model with --bucket-mb $mb, exits 0"
done
python3 - "$out" <<'PY'
import json, sys
got = {mb: [json.loads(l)["params"]["buckets"] for l in open(f"{sys.argv[1]}/ddp{mb}/ddp.jsonl")] for mb in (1, 25)}
sys.exit(0 if got == {1: [3], 25: [1]} else f"buckets {got}, expected 3 at 1 MiB and 1 at 25 MiB")
PY
ok $? "ddp: 3 buckets at --bucket-mb 1, 1 bucket at the default 25 (the sheet's exercise 2)"

# checkpoint exercise 4: the trace has the spans it names, one per layer and step (recompute:
# one per layer outside the last segment), and one optimizer span per step
bin_args="--layers 8 --width 32 --inputs 32 --outputs 32 --batch 8 -n 2 -w 1"
checkpoint $bin_args --segments 4 --variants every_k --trace -o "$out/ck" >"$out/ck.txt" 2>&1
ok $? "checkpoint --trace exits 0"
python3 - "$out/ck/checkpoint.trace.json" <<'PY'
import collections, json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
n = collections.Counter(e["name"].split(" ")[0] for e in ev if e.get("ph") == "X")
steps, layers, recomputed = 3, 8, 4  # 1 warm-up + 2 timed; segments of 4: the lower one is recomputed
want = {"forward": steps * layers, "backward": steps * layers, "recompute": steps * recomputed, "optimizer": steps}
got = {k: n[k] for k in want}
sys.exit(0 if got == want else f"spans {got}, expected {want}")
PY
ok $? "checkpoint: the trace's forward, backward, recompute and optimizer spans (the sheet's exercise 4)"

# transformer: the default GPT's parameters on the note line and a block's activations at the
# sheet's shortest and longest sequences (exercise 2 fits them), in bf16 at b 8, h 128, a 4
for s in 32 256; do
  ddp --model gpt --variants sync -n 1 -w 0 --baseline 0 --max-seq 256 -d bf16 --seq $s -o "$out/gpt$s" \
    >"$out/gpt$s.txt" 2>&1
  ok $? "ddp --model gpt --seq $s (the transformer sheet's command) exits 0"
done
ddp --model gpt --variants sync -n 1 -w 0 --baseline 0 -o "$out/gpt" >"$out/gpt.txt" 2>&1
grep -q "^# GPT 2 blocks x 128, 4 heads, 64 tokens, vocabulary 256 (470528 parameters" "$out/gpt.txt"
ok $? "transformer: the default GPT has 470,528 parameters with its LM head untied (exercise 1)"
python3 - "$out" <<'PY'
import json, sys
got = {}
for s in (32, 256):
    m = json.loads(open(f"{sys.argv[1]}/gpt{s}/ddp.jsonl").readline())["metrics"]
    got[s] = (m["activ_block"]["value"], m["activ_block_formula"]["value"])
want = {32: (1118208, 1277952), 256: (12615680, 19398656)}
sys.exit(0 if got == want else f"activ_block, formula {got}, the sheet says {want}")
PY
ok $? "transformer: activ_block and activ_block_formula at s = 32 and 256 are the sheet's"

# transformer, pipeline: each stage's activation peak in the sheet's table (gpipe, 1f1b, gpipe
# --recompute at 4 blocks on 2 stages), and exercise 7's prediction at 4 micro-batches of 2
for run in "a:--schedule gpipe,1f1b" "r:--schedule gpipe --recompute" "e:--schedule gpipe --micro-batches 4"; do
  # shellcheck disable=SC2086
  launch 2 pipeline --model gpt --layers 4 -n 1 -w 0 --baseline 0 ${run#*:} -o "$out/pipe${run%%:*}" \
    >"$out/pipe${run%%:*}.txt" 2>&1
  ok $? "pipeline --model gpt ${run#*:} exits 0"
done
python3 - "$out" <<'PY'
import json, sys
got = {}
for k in "are":
    for r in map(json.loads, open(f"{sys.argv[1]}/pipe{k}/pipeline.jsonl")):
        got[(k, r["variant"])] = (r["params"]["activ_peak_stages"], r["params"]["inflight_stages"])
want = {("a", "gpipe"): ("9455616,11030528", "8,8"), ("a", "1f1b"): ("2363904,1378816", "2,1"),
        ("r", "gpipe"): ("1184000,1640960", "8,8"), ("e", "gpipe"): ("9455616,10506240", "4,4")}
sys.exit(0 if got == want else f"activ_peak_stages, inflight_stages {got}, the sheet says {want}")
PY
ok $? "transformer: the pipeline table's peaks per stage, and exercise 7's 10,506,240 bytes"

# transformer, dropout: the same activation bytes with and without it (no mask is kept)
for p in 0 0.3; do
  launch 2 ddp --model gpt --variants sync -C ring -n 1 -w 0 --baseline 0 --dropout $p -o "$out/drop$p" >"$out/drop$p.txt" 2>&1
done
python3 - "$out" <<'PY'
import json, sys
got = {p: json.loads(open(f"{sys.argv[1]}/drop{p}/ddp.jsonl").readline())["metrics"]["mem_activ"]["value"] for p in ("0", "0.3")}
sys.exit(0 if got == {"0": 10506240, "0.3": 10506240} else f"mem_activ {got}, the sheet says 10,506,240 in both")
PY
ok $? "transformer: activ is 10.506 MB with --dropout 0 and 0.3 alike"

# transformer, recomputation: the peaks of store-all, a checkpoint per block and selective at
# s 64 x b 8 and s 256 x b 2 (the section's table), and a block's bytes whole and under selective
for run in "s64:" "s256:--seq 256 --max-seq 256 --batch 2"; do
  # shellcheck disable=SC2086
  checkpoint --model gpt --layers 4 --variants store_all,every_k,selective -n 1 -w 0 --baseline 0 ${run#*:} \
    -o "$out/ck${run%%:*}" >"$out/ck${run%%:*}.txt" 2>&1
  ok $? "checkpoint --model gpt ${run#*:} (the transformer sheet's command) exits 0"
done
python3 - "$out" <<'PY'
import json, sys
got = {}
for s in ("s64", "s256"):
    for r in map(json.loads, open(f"{sys.argv[1]}/ck{s}/checkpoint.jsonl")):
        m = {k: v["value"] for k, v in r["metrics"].items()}
        got[(s, r["variant"])] = (m["activ_peak"], m.get("activ_block_selective", m["activ_block"]))
want = {("s64", "store_all"): (20092928, 4726784), ("s64", "every_k"): (6039552, 4726784),
        ("s64", "selective"): (17733632, 3940352), ("s256", "store_all"): (26384384, 6299648),
        ("s256", "every_k"): (7612416, 6299648), ("s256", "selective"): (19306496, 3940352)}
sys.exit(0 if got == want else f"activ_peak, block bytes {got}, the sheet says {want}")
PY
ok $? "transformer: the recomputation table's peaks, and a block's bytes whole and under selective"

# transformer, sequence parallelism and the vocabulary: the section's bytes and activations at
# t = 2 (d = 2) and t = 4 on 4 ranks, seqpar beside plain in bf16 and the logits gathered in f32
# (exact counts: one step, no check, which megatron_gpt.t runs)
megatron="--model gpt --batch 2 -n 1 -w 0 --baseline 0 -c 0 -C ring --tp 2,4"
# shellcheck disable=SC2086
launch 4 megatron_mlp $megatron --variants plain,seqpar -d bf16 -o "$out/msp" >"$out/msp.txt" 2>&1 </dev/null
ok $? "megatron_mlp --model gpt --variants plain,seqpar (the transformer sheet's command) exits 0"
# shellcheck disable=SC2086
launch 4 megatron_mlp $megatron --variants plain --no-vocab-parallel -o "$out/mnv" >"$out/mnv.txt" 2>&1 </dev/null
ok $? "megatron_mlp --model gpt --no-vocab-parallel (the transformer sheet's command) exits 0"
python3 - "$out" <<'PY'
import json, sys
got = {}
for run, keys in (("msp", ("tp_activ_block", "tp_activ_block_korthikanti", "activ_frac", "activ_saving",
                            "tp_bytes_block", "regather_bytes", "norms_bytes", "bytes_sent")),
                  ("mnv", ("head_bytes", "head_logit_mem"))):
    for r in map(json.loads, open(f"{sys.argv[1]}/{run}/megatron_mlp.jsonl")):
        m = {k: v["value"] for k, v in r["metrics"].items()}
        got[(run, r["variant"], r["params"]["tp"])] = tuple(round(m[k], 3) if k in m else None for k in keys)
want = {("msp", "plain", 2): (724992, 884736, 0.612, None, 262144, None, None, 1139200),
        ("msp", "seqpar", 2): (591872, 720896, 0.5, 0.184, 262144, 131072, 5120, 1275392),
        ("msp", "plain", 4): (991232, 1212416, 0.419, None, 786432, None, None, 1975296),
        ("msp", "seqpar", 4): (591872, 720896, 0.25, 0.403, 786432, 393216, 7680, 2376192),
        ("mnv", "plain", 2): (262144, 786432), ("mnv", "plain", 4): (786432, 1310720)}
sys.exit(0 if got == want else f"got {got}, the sheet says {want}")
PY
ok $? "transformer: sequence parallelism's activations and bytes, and the gathered head's, are the sheet's"

done_testing
