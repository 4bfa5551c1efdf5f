#!/bin/bash
# labs_pipeline_megatron: the exact figures the pipeline and megatron_mlp lab sheets quote
# (benchmarks/labs/pipeline.md, megatron_mlp.md) are what the programs print: bytes, message
# counts, memory, micro-batches in flight, collectives per step. Timings are not asserted (the
# sheets give them as ranges). The sheets' sizes are used where a figure depends on them; every
# run is one step with the check off, so the file takes seconds (a minute on a busy 2-core machine).
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is pipeline.t's, checkpoint.t's, vdnn.t's and megatron_mlp.t's to test;
# here it would only cost time (a calibration per row, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
quick="-n 1 -w 0 -c 0 --baseline 0"

# --- pipeline.md, "Interleaving": the busiest stage's messages per micro-batch ------------------
# A stage sends an activation for each of its chunks but the model's last and a gradient for each
# but the model's first: a middle stage 2v per micro-batch (2 without interleaving, so v times),
# a first or last stage 2v - 1 (1 without: at p = 2 both are, so 2v - 1 times: 3x at v = 2, 7x
# at v = 4). The `sent` column is the busiest stage's bytes, equal to the model.
small="--layers 8 --width 64 --inputs 64 --outputs 64 --batch 16 --micro-batches 4 $quick"
for v in 2 4; do
  # shellcheck disable=SC2086
  launch 2 pipeline $small --schedule 1f1b,interleaved --virtual $v -o "$out/v$v" >"$out/v$v.txt" 2>&1
  ok $? "p = 2, --virtual $v runs"
done
# shellcheck disable=SC2086
launch 4 pipeline $small --schedule 1f1b,interleaved --virtual 2 -o "$out/p4v2" >"$out/p4v2.txt" 2>&1
ok $? "p = 4, --virtual 2 runs"
python3 - "$out" <<'PY'
import json, sys
bad = []
def rows(name):
    return {r["variant"]: r for r in map(json.loads, open(f"{sys.argv[1]}/{name}/pipeline.jsonl"))}
val = lambda r, k: r["metrics"][k]["value"]
for name, factor in (("v2", 3), ("v4", 7), ("p4v2", 2)):
    r = rows(name)
    one, inter = r["1f1b"], r["interleaved"]
    for x in (one, inter):
        if val(x, "bytes_sent") != val(x, "bytes_model"):
            bad.append(f"{name} {x['variant']}: sent {val(x, 'bytes_sent')} != model {val(x, 'bytes_model')}")
    if val(inter, "bytes_sent") != factor * val(one, "bytes_sent"):
        bad.append(f"{name}: interleaved sends {val(inter, 'bytes_sent')}, not {factor} x 1f1b's {val(one, 'bytes_sent')}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "interleaved: the busiest stage sends (2v-1)x the messages at p = 2 (3x, 7x) and vx at p = 4; sent = model"

# --- pipeline.md: the per-stage line that answers Exercise 1 ------------------------------------
python3 - "$out/p4v2/pipeline.jsonl" "$out/p4v2.txt" <<'PY'
import json, re, sys
bad = []
text = open(sys.argv[2]).read()
for r in map(json.loads, open(sys.argv[1])):
    p, m = r["params"], r["metrics"]
    idle = [float(x) for x in p["idle_stages"].split(",")]
    if len(idle) != 4: bad.append(f"{r['variant']}: idle_stages {p['idle_stages']}")
    busiest = int(m["busiest_stage"]["value"])
    if idle[busiest] != min(idle): bad.append(f"{r['variant']}: busiest {busiest} of {idle}")
    # per step the bubble is the least idle of any stage, so its median is at most each
    # stage's median idle (the list is rounded to 0.1 %)
    if not m["bubble_frac"]["value"] * 100 <= min(idle) + 0.05: bad.append(f"{r['variant']}: bubble above {min(idle)}")
    # stage 0 cannot start its first backward before the gradient has come back from stage 3
    if not m["s0_wait_first_backward"]["value"] > 0: bad.append(f"{r['variant']}: no wait for the first gradient")
    if m["s0_wait_later_backwards"]["value"] is None: bad.append(f"{r['variant']}: s0_wait_later_backwards missing")
    if not re.search(rf"^# {r['variant']}: idle % of W by stage {re.escape(p['idle_stages'])} \(busiest s{busiest}\); "
                     r"stage 0 waited [0-9.]+ ms for its first backward's gradient, [0-9.]+ ms before its later ones", text, re.M):
        bad.append(f"{r['variant']}: no per-stage line")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "each row has its stages' idle, the busiest stage and stage 0's waits, and a line says them"

# --- pipeline.md: the sheet's sizes (8 layers of 1024, batch 128, m = 8) -------------------------
# p = 2: 524288 bytes per step and activations of 4.194 MB (gpipe) and 1.049 MB (1f1b) in f32
# (the 16-bit rows' halves are pipeline_mixed.t's). p = 4: the activations held at the peak per
# stage, with and without --recompute, and the micro-batches in flight (gpipe 8 everywhere; 1f1b
# 4, 3, 2, 1).
# shellcheck disable=SC2086
launch 2 pipeline --schedule gpipe,1f1b $quick -o "$out/sheet2" >"$out/sheet2.txt" 2>&1
ok $? "p = 2 at the sheet's size runs"
# shellcheck disable=SC2086
launch 4 pipeline --schedule gpipe,1f1b $quick -o "$out/sheet4" >"$out/sheet4.txt" 2>&1 &&
  launch 4 pipeline --schedule gpipe,1f1b --recompute $quick -o "$out/sheet4rc" >"$out/sheet4rc.txt" 2>&1
ok $? "p = 4 at the sheet's size, with and without --recompute, runs"
python3 - "$out" <<'PY'
import json, sys
bad = []
def rows(name):
    return {(r["variant"], r["dtype"]): r for r in map(json.loads, open(f"{sys.argv[1]}/{name}/pipeline.jsonl"))}
val = lambda r, k: r["metrics"][k]["value"]
two = rows("sheet2")
for (v, d), r in two.items():
    want = (524288, {"gpipe": 4194304, "1f1b": 1048576}[v])
    if (val(r, "bytes_sent"), val(r, "activ_peak")) != want:
        bad.append(f"p=2 {v}/{d}: sent {val(r, 'bytes_sent')} activ {val(r, 'activ_peak')}, sheet {want}")
want = {("sheet4", "gpipe"): ("2097152,2097152,2097152,1572864", "8,8,8,8"),
        ("sheet4", "1f1b"): ("1048576,786432,524288,196608", "4,3,2,1"),
        ("sheet4rc", "gpipe"): ("786432,786432,786432,720896", "8,8,8,8"),
        ("sheet4rc", "1f1b"): ("524288,458752,393216,262144", "4,3,2,1")}
for (name, v), (activ, inflight) in want.items():
    p = rows(name)[(v, "f32")]["params"]
    if (p["activ_peak_stages"], p["inflight_stages"]) != (activ, inflight):
        bad.append(f"{name} {v}: {p['activ_peak_stages']} / {p['inflight_stages']}, sheet {activ} / {inflight}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "the sheet's bytes per step, activation bytes per stage and micro-batches in flight"

# Exercise 6: the tiny model whose f16 gradients overflow at 2^16: one step skipped on both
# stages, found by one of them, and the scale halved once.
launch 2 pipeline --schedule 1f1b -d f32,f16 --layers 9 --width 12 --inputs 6 --outputs 3 --batch 7 \
  --micro-batches 3 --baseline 0 -o "$out/ovf" >"$out/ovf.txt" 2>&1
ok $? "Exercise 6's overflowing model runs and passes"
python3 - "$out/ovf/pipeline.jsonl" <<'PY'
import json, sys
r = {x["dtype"]: x for x in map(json.loads, open(sys.argv[1]))}["f16"]
m = r["metrics"]
got = (m["skipped_steps"]["value"], m["overflow_seen"]["value"], m["final_scale"]["value"])
print(got, file=sys.stderr)
sys.exit(0 if got == (1, 1, 32768) else 1)
PY
ok $? "Exercise 6: skipped 1, overflow_seen 1, final_scale 32768"

# --- megatron_mlp.md: collectives per step (Exercise 5), bytes and memory at the sheet's sizes ----
# Per step and group: plain and overlap 2L collectives (g's all-reduce of Z, f's of dX), overlap
# running f's L under the dA GEMM; seqpar 5L; none at t = 1 (a group of one).
# shellcheck disable=SC2086
launch 4 megatron_mlp $quick -o "$out/mm" >"$out/mm.txt" 2>&1
ok $? "megatron_mlp at the sheet's size, every t and variant, runs"
# shellcheck disable=SC2086
launch 4 megatron_mlp --tp 2 --dp 2 -d f32,f16,bf16 $quick -o "$out/mmd" >"$out/mmd.txt" 2>&1
ok $? "megatron_mlp -d f32,f16,bf16 on t = 2 x d = 2 runs"
python3 - "$out/mm/megatron_mlp.jsonl" "$out/mm.txt" <<'PY'
import json, sys
bad = []
text = open(sys.argv[2]).read()
val = lambda r, k: r["metrics"][k]["value"]
for r in map(json.loads, open(sys.argv[1])):
    v, t, d, L = r["variant"], r["params"]["tp"], r["params"]["dp"], r["params"]["blocks"]
    want = 0 if t == 1 else (5 if v == "seqpar" else 2) * L
    over = L if (v == "overlap" and t > 1) else 0
    if (val(r, "tp_collectives"), val(r, "tp_collectives_overlapped")) != (want, over):
        bad.append(f"{v} t={t}: {val(r, 'tp_collectives')} collectives, {val(r, 'tp_collectives_overlapped')} overlapped; want {want}, {over}")
    if f"# {v}, t = {t}, d = {d}, f32: collectives per step: " not in text: bad.append(f"{v} t={t}: no line")
for line in ("# plain, t = 4, d = 1, f32: collectives per step: 2 x g: allreduce Z, 2 x f: allreduce dX\n",
             "# overlap, t = 4, d = 1, f32: collectives per step: 2 x g: allreduce Z, 2 x f: allreduce dX (overlapped)\n",
             "# plain, t = 1, d = 4, f32: collectives per step: 1 x allreduce (replicas)\n"):
    if line not in text: bad.append(f"missing: {line.strip()}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "collectives per step: 2L (plain, overlap: L of them overlapped), 5L (seqpar), and the lines naming them"

python3 - "$out/mm/megatron_mlp.jsonl" "$out/mmd/megatron_mlp.jsonl" <<'PY'
import json, sys
bad = []
val = lambda r, k: r["metrics"][k]["value"]
rows = {(r["variant"], r["params"]["tp"]): r for r in map(json.loads, open(sys.argv[1]))}
# (blk-sent bytes, MB/step sent to 3 decimals, param /serial, activ /serial to 3 decimals)
want = {("plain", 1): (0, 25.197, 1.0, 1.0), ("plain", 2): (131072, 8.663, 0.5, 0.579),
        ("plain", 4): (393216, 0.786, 0.25, 0.368), ("seqpar", 2): (163840, 8.729, 0.5, 0.5),
        ("seqpar", 4): (491520, 0.983, 0.25, 0.25)}
for k, (blk, mb, pf, af) in want.items():
    r = rows[k]
    got = (val(r, "tp_bytes_block"), round(val(r, "bytes_sent") / 1e6, 3), round(val(r, "params_frac"), 3),
           round(val(r, "activ_frac"), 3))
    if got != (blk, mb, pf, af): bad.append(f"{k}: {got}, sheet {(blk, mb, pf, af)}")
    if val(r, "tp_bytes_block") != val(r, "tp_bytes_block_model"): bad.append(f"{k}: sent != model")
if round(val(rows[("plain", 2)], "params_frac"), 5) != 0.50012: bad.append("params_frac at t = 2 is not 0.50012")
mixed = {(r["variant"], r["dtype"]): r for r in map(json.loads, open(sys.argv[2]))}
for v, blk16 in (("plain", 65536), ("overlap", 65536), ("seqpar", 81920)):
    f, h = mixed[(v, "f32")], mixed[(v, "f16")]
    if (val(h, "tp_bytes_block"), val(h, "dp_bytes"), val(f, "dp_bytes")) != (blk16, 4200448, 8400896):
        bad.append(f"{v}: 16-bit blk-sent {val(h, 'tp_bytes_block')}, dp_bytes {val(h, 'dp_bytes')} / {val(f, 'dp_bytes')}")
    if (val(h, "mem_params"), val(h, "mem_grads"), val(f, "mem_params")) != (12601344, 12601344, 8400896):
        bad.append(f"{v}: mem_params {val(h, 'mem_params')} / {val(f, 'mem_params')}")
    if (round(val(h, "params_frac"), 3), round(val(f, "params_frac"), 3)) != (0.75, 0.5): bad.append(f"{v}: param /serial")
want_activ = {"plain": (360448, 0.289), "overlap": (360448, 0.289), "seqpar": (311296, 0.25)}
for v, (b, fr) in want_activ.items():
    h = mixed[(v, "bf16")]
    if (val(h, "mem_activ"), round(val(h, "activ_frac"), 3)) != (b, fr): bad.append(f"{v}: bf16 mem_activ {val(h, 'mem_activ')}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "the sheet's bytes per block and step, 16-bit halves, and memory per rank at its sizes"

# "When tensor parallelism beats data parallelism": with --hidden 128 and --batch 128, t = 4
# sends 1.573 MB/step against t = 1's 1.581 (and twice as much at --batch 256: bytes per token)
# shellcheck disable=SC2086
launch 4 megatron_mlp --hidden 128 --batch 128 --tp 1,4 --variants plain $quick -o "$out/cross" >"$out/cross.txt" 2>&1
ok $? "--hidden 128 --batch 128 runs"
python3 - "$out/cross/megatron_mlp.jsonl" <<'PY'
import json, sys
got = {r["params"]["tp"]: round(r["metrics"]["bytes_sent"]["value"] / 1e6, 3) for r in map(json.loads, open(sys.argv[1]))}
print(got, file=sys.stderr)
sys.exit(0 if got == {1: 1.581, 4: 1.573} else 1)
PY
ok $? "the crossover: t = 4 sends 1.573 MB/step at --batch 128 against t = 1's 1.581"

done_testing
