#!/bin/bash
# parallel3d: the GPT on a D x T x P grid (data x tensor x pipeline), on a tiny model (4 blocks of
# 32, 4 heads, 8 tokens, vocabulary 64). On 4 ranks the layouts 1x2x2, 2x1x2 and 2x2x1 (f32, f16,
# bf16; 1f1b and gpipe; --recompute full and selective), interleaved (--virtual 2) on 2x1x2 (f32,
# f16) and 1x1x2 (f32, bf16; its pp bytes against 1f1b's, the step predicted), and on 8 ranks
# 2x2x2: every row equals serial GPT training in its dtype
# (the training layer's check), every rank's vector bit-identical to its replicas' (the program's
# check), each group's bytes per step equal to its model (ring), the memory per category equal to
# the combined model, the grid file giving each rank's (d, t, p) in Megatron-LM's order and in
# --order's. --zero 1 (2x1x2; f32, bf16): the same checks, the optimizer state (and the
# bf16 run's f32 master) one replica's block of the stage's vector, AdamW's 8 bytes per element
# of it; --zero 2 (2x2x1 f32 and bf16, 4x1x1 bf16): the bf16 gradient one block too, beside the
# whole f32 accumulation. SL_TEST_CORRUPT=1 (a replica that halves its gradients before their
# sum) fails, exit 1, with --zero 2 too. Bad layouts and --zero values exit 2 naming the option.
# SL_TEST_LAYOUTS8=1 runs the other 8-rank layouts too, f32 and bf16 (1x2x4, 4x1x2, 2x4x1, 8x1x1:
# about 6 s each on 2 cores).
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is tested where said below (a calibration per row costs seconds).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
shape="--d-model 32 --heads 4 --seq 8 --vocab 64 --batch 4 -n 2 -w 1 --baseline 0 -C ring"
gpt="--layers 4 $shape"

check_rows() { # check_rows FILE D T P NROWS: every row passed; bytes and memory equal to the models
  python3 - "$@" <<'PY'
import json, sys
path, D, T, P, n = sys.argv[1], *map(int, sys.argv[2:])
rows = [json.loads(l) for l in open(path)]
bad = [] if len(rows) == n else [f"{len(rows)} rows, expected {n}"]
val = lambda r, k: r["metrics"][k]["value"]
for r in rows:
    name = f"{r['variant']} {r['dtype']}"
    p = r["params"]
    if (p["dp"], p["tp"], p["pp"]) != (D, T, P): bad.append(f"{name}: layout {p['dp']}x{p['tp']}x{p['pp']}")
    if r["check"]["status"] != "pass": bad.append(f"{name}: {r['check']}")
    for g in ("tp", "pp", "dp"):
        if val(r, g + "_bytes") != val(r, g + "_bytes_model"):
            bad.append(f"{name}: {g}_bytes {val(r, g + '_bytes')} != model {val(r, g + '_bytes_model')}")
    if (val(r, "tp_bytes") > 0) != (T > 1) or (val(r, "pp_bytes") > 0) != (P > 1) or (val(r, "dp_bytes") > 0) != (D > 1):
        bad.append(f"{name}: a group of one sent bytes, or a larger one none")
    for k in ("params", "grads", "optim", "activ"):
        if val(r, "mem_" + k) != val(r, "model_" + k): bad.append(f"{name}: mem_{k} {val(r, 'mem_' + k)} != model")
    if p["zero"]:  # ZeRO-1: the optimizer state of block d alone (AdamW: m and v, f32), and in 16 bits
        S, es = p["shard_elems"], {"f32": 4, "f16": 2, "bf16": 2}[r["dtype"]]  # the f32 master too
        if val(r, "mem_optim") != 8 * S: bad.append(f"{name}: mem_optim {val(r, 'mem_optim')} != 8 x S {S}")
        if es == 2 and val(r, "mem_params") != 4 * S + 2 * D * S:
            bad.append(f"{name}: mem_params {val(r, 'mem_params')} != 4S + 2DS (S = {S})")
        grads = 4 * D * S + (0 if es == 4 else 2 * S if p["zero"] == 2 else 2 * D * S)  # ZeRO-2: the 16-bit one S
        if val(r, "mem_grads") != grads: bad.append(f"{name}: mem_grads {val(r, 'mem_grads')} != {grads} (S = {S})")
    flight = p["micro_batches"] if r["variant"] == "gpipe" else min(p["micro_batches"], P)
    if r["variant"] == "interleaved":  # micro-batch chunks: Megatron's warm-up 2(P - 1) + (v - 1)P, and one
        flight = min(p["micro_batches"] * p["virtual"], (p["virtual"] + 1) * P - 1)
    if val(r, "inflight_peak") != flight: bad.append(f"{name}: {val(r, 'inflight_peak')} in flight, expected {flight}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

run() { # run NP D T P NROWS NAME ARGS...: the layout's rows pass and equal the models
  local np=$1 D=$2 T=$3 P=$4 n=$5 name=$6; shift 6
  # shellcheck disable=SC2086
  launch "$np" parallel3d $gpt --dp "$D" --tp "$T" --pp "$P" "$@" -o "$out/$name" >"$out/$name.txt" 2>&1 </dev/null
  local rc=$?
  ok $rc "$np ranks, D x T x P = ${D}x${T}x${P} $*: every row equals serial GPT training"
  [ $rc = 0 ] || tail -5 "$out/$name.txt" | sed 's/^/#   /' >&2
  check_rows "$out/$name/parallel3d.jsonl" "$D" "$T" "$P" "$n"
  ok $? "${D}x${T}x${P}: bytes per group and memory per category equal to the models, the in-flight micro-batches the schedule's"
}

run 4 1 2 2 2 a -d f32,bf16
run 4 2 1 2 6 b -d f32,f16 --schedule 1f1b,gpipe,interleaved
run 4 2 2 1 1 c
run 4 1 2 2 2 r --recompute full --micro-batches 4 --schedule 1f1b,gpipe
run 4 1 2 2 2 s --recompute selective --micro-batches 4 --schedule 1f1b,gpipe
run 8 2 2 2 1 d
run 4 2 1 2 2 z -d f32,bf16 --zero 1
run 4 2 2 1 2 y -d f32,bf16 --zero 2
run 4 4 1 1 1 x -d bf16 --zero 2
# Recomputation changes what is kept, never the arithmetic: selective and full train the same
# weights bit for bit (the same error against serial training, the same loss)
python3 - "$out/r/parallel3d.jsonl" "$out/s/parallel3d.jsonl" <<'PY'
import json, sys
get = lambda p: [(r["variant"], r["metrics"]["weight_rel_err"]["value"], r["metrics"]["final_loss"]["value"]) for r in map(json.loads, open(p))]
full, sel = get(sys.argv[1]), get(sys.argv[2])
sys.exit(0 if full == sel and len(full) == 2 else f"full {full} != selective {sel}")
PY
ok $? "--recompute selective and full: the same weights' error and loss in both schedules (bit-identical training)"
# Interleaved 1F1B (--virtual 2: the 4 blocks in 4 chunks, stage p holding chunks p and p + 2)
# beside 1F1B on the same 4 micro-batches, the step predicted: both equal serial training; a stage
# sends 2v - 1 = 3 boundaries a micro-batch (its chunks' but the model's first input and last
# output) against 1F1B's 1; the predicted step's arithmetic, the stages' exchanges fitted
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/parallel3d" $gpt --pp 2 --schedule 1f1b,interleaved \
  --micro-batches 4 -d f32,bf16 -o "$out/i" >"$out/i.txt" 2>&1 </dev/null
rc=$?
ok $rc "1x1x2, --schedule 1f1b,interleaved --micro-batches 4, f32 and bf16: every row equals serial GPT training"
[ $rc = 0 ] || tail -5 "$out/i.txt" | sed 's/^/#   /' >&2
check_rows "$out/i/parallel3d.jsonl" 1 1 2 4
ok $? "interleaved: bytes and memory equal to the models, 5 micro-batch chunks in flight on stage 0"
python3 - "$out/i/parallel3d.jsonl" <<'PY'
import json, sys
rows = {(r["variant"], r["dtype"]): r for r in map(json.loads, open(sys.argv[1]))}
pp = lambda v, d: rows[(v, d)]["metrics"]["pp_bytes"]["value"]
bad = [d for d in ("f32", "bf16")
       if pp("interleaved", d) != 3 * pp("1f1b", d) or rows[("interleaved", d)]["params"]["virtual"] != 2]
sys.exit(f"pp bytes not 3x 1f1b's, or virtual not 2: {bad}" if bad else 0)
PY
ok $? "interleaved: pp bytes per step 3x 1F1B's (2v - 1 boundaries a micro-batch against 1), virtual 2 in the row"
python3 "$top/t/lib/train_rows.py" pred "$out/i/parallel3d.jsonl" 1f1b=p2p interleaved=p2p
ok $? "interleaved: the predicted step's arithmetic, the stages' exchanges fitted"

if [ "${SL_TEST_LAYOUTS8:-0}" = 1 ]; then
  run 8 1 2 4 2 e -d f32,bf16
  run 8 4 1 2 2 f -d f32,bf16
  run 8 2 4 1 2 g -d f32,bf16
  run 8 8 1 1 2 h -d f32,bf16
fi

# The grid: Megatron-LM's order (tp fastest, then dp, then pp) and --order's.
python3 - "$out/d/parallel3d.grid.tsv" <<'PY'
import json, sys
import csv
g = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
want = [(r // 2 % 2, r % 2, r // 4) for r in range(8)]
got = [(int(x["d"]), int(x["t"]), int(x["p"])) for x in g]
sys.exit(0 if got == want and all(x["host"] and x["order"] == "tp-dp-pp" for x in g) else 1)
PY
ok $? "2x2x2: the grid file gives rank r (d, t, p) = (r/2 % 2, r % 2, r/4) and its host"
launch 4 parallel3d $gpt --dp 2 --tp 2 --pp 1 --order dp-tp-pp -o "$out/order" >"$out/order.txt" 2>&1 </dev/null
rc=$?
python3 - "$out/order/parallel3d.grid.tsv" <<'PY'
import json, sys
import csv
g = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
sys.exit(0 if [(int(x["d"]), int(x["t"])) for x in g] == [(0, 0), (1, 0), (0, 1), (1, 1)] else 1)
PY
ok $(( rc || $? )) "--order dp-tp-pp: the replicas adjacent (rank 1 is (d, t) = (1, 0)), and the run passes"

# A defect the check must catch: one replica halves its gradients before their sum.
SL_TEST_CORRUPT=1 launch 4 parallel3d $gpt --dp 2 --tp 1 --pp 2 -o "$out/corrupt" >"$out/corrupt.txt" 2>&1 </dev/null
rc=$?
[ $rc = 1 ] && grep -q '"status": *"fail"' "$out/corrupt/parallel3d.jsonl"
ok $? "SL_TEST_CORRUPT=1 (a replica halves its gradients before the all-reduce): the row fails, exit 1 (rc=$rc)"

SL_TEST_CORRUPT=1 launch 4 parallel3d $gpt --dp 2 --tp 1 --pp 2 --zero 2 -d bf16 -o "$out/corrupt1" >"$out/corrupt1.txt" 2>&1 </dev/null
rc=$?
[ $rc = 1 ] && grep -q '"status": *"fail"' "$out/corrupt1/parallel3d.jsonl"
ok $? "... and with --zero 2 (the halved gradients reduce-scattered from the f32 accumulation's place): the row fails, exit 1 (rc=$rc)"

expect_usage_np 2 parallel3d "--zero: expected an integer in \[0, 2\]" $gpt --zero 3
expect_usage_np 2 parallel3d "--zero 1 needs reduce_scatter and allgather, which tree" --layers 4 --d-model 32 --heads 4 --seq 8 --vocab 64 -C tree --zero 1

# The step predicted from the run's primitives (parallel3d/pm_schedule.c), 1x2x2, 1f1b and gpipe:
# every row carries it and its arithmetic holds (pred_step = pred_compute + pred_exposed +
# pred_idle), the stages' exchanges and the group's all-reduces fitted, and a stage waits for its
# neighbour (pred_idle > 0: the bubble)
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 4 "$top/bin/parallel3d" $gpt --dp 1 --tp 2 --pp 2 --schedule 1f1b,gpipe \
  -o "$out/pred" >"$out/pred.txt" 2>&1 </dev/null
ok $? "prediction: 1x2x2, 1f1b and gpipe: exit 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/parallel3d.jsonl" 1f1b=p2p,tp.allreduce gpipe=p2p,tp.allreduce
ok $? "prediction: every row carries the predicted step and its arithmetic; the exchanges' and the group's fits"
python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if len(rows)==2 and all(r["metrics"]["pred_idle"]["value"]>0 for r in rows) else 1)' "$out/pred/parallel3d.jsonl"
ok $? "prediction: both schedules' predicted steps have a bubble (pred_idle > 0)"
# --zero 1's predicted step: the replicas' reduce-scatter and all-gather fitted on the dp group
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 4 "$top/bin/parallel3d" $gpt --dp 2 --tp 1 --pp 2 --zero 1 \
  -o "$out/predz" >"$out/predz.txt" 2>&1 </dev/null
ok $? "prediction, --zero 1 on 2x1x2: exit 0"
python3 "$top/t/lib/train_rows.py" pred "$out/predz/parallel3d.jsonl" 1f1b=p2p,dp.ireduce_scatter,dp.iallgather
ok $? "prediction, --zero 1: the step's arithmetic, the exchanges' and the dp group's reduce-scatter and all-gather fitted"

# --search (parallel3d/search.c) on 2 ranks: every layout that divides the ranks, the model and
# the batch predicted into parallel3d.search.tsv (the count from the rule, independently), the
# fastest prediction and one sample run and checked, the table beside the prediction.
layouts() { # layouts RANKS BATCH [left]: the layouts of the tiny model at that global batch, by the rule
  # (left: those left out, replicas or micro-batches of unequal sizes, m from 1 to B/D rounded down)
  python3 - "$1" "$2" "${3:-}" <<'PY'
import sys
R, L, heads, C, V, B = int(sys.argv[1]), 4, 4, 32, 64, int(sys.argv[2])
n = left = 0
for P in range(1, min(R, L) + 1):
    for T in range(1, R // P + 1):
        if R % P or (R // P) % T or heads % T or C % T or V % T: continue
        D = R // P // T
        ms = [B // D % m == 0 and B % D == 0 for m in range(1, B // D + 1)]
        zeros = 2 if D > 1 else 1  # f32: --zero 2 holds and moves what --zero 1 does, not tried
        n += sum(ms) * zeros * 3
        left += (len(ms) - sum(ms)) * zeros * 3
print(left if sys.argv[3] else n)
PY
}
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/parallel3d" ${gpt/--batch 4/--batch 2} --search --search-top 1 \
  --search-sample 1 -o "$out/search" >"$out/search.txt" 2>&1 </dev/null
ok $? "--search on 2 ranks: exit 0"
python3 - "$out/search" "$(layouts 2 2)" <<'PY'
import csv, json, math, sys
d, want = sys.argv[1], int(sys.argv[2])
plan = list(csv.DictReader(open(d + "/parallel3d.search.tsv"), delimiter="\t"))
rows = [json.loads(l) for l in open(d + "/parallel3d.jsonl")]
bad = [] if len(plan) == want else [f"{len(plan)} layouts predicted, the rule gives {want}"]
for p in plan:
    step, parts = float(p["pred_step"]), [float(p[k]) for k in ("pred_compute", "pred_exposed", "pred_idle")]
    if p["fits"] != "1" or not step > 0 or abs(sum(parts) - step) > 1e-7 * step:
        bad.append(f"layout {p}: not fitted, or pred_step != compute + exposed + idle")
picks = sorted(r["params"]["search_pick"] for r in rows)
if picks != ["sample", "top"]: bad.append(f"rows picked {picks}, expected one top and one sample")
key = lambda x: tuple(int(x[k]) for k in ("dp", "tp", "pp", "micro_batches", "virtual", "zero")) + (x["recompute"],)
preds = {key(p): float(p["pred_step"]) for p in plan}
for r in rows:
    p = r["params"]
    if r["check"]["status"] != "pass": bad.append(f"{key(p)}: check {r['check']}")
    if p["search_pick"] == "top" and p["search_rank"] != 1: bad.append(f"top row has rank {p['search_rank']}")
    if p["search_layouts"] != want: bad.append(f"search_layouts {p['search_layouts']} != {want}")
    if not math.isclose(r["metrics"]["search_pred"]["value"], preds[key(p)], rel_tol=1e-6):
        bad.append(f"{key(p)}: search_pred != the plan's prediction")
    fastest = min(preds.values())
    if p["search_pick"] == "top" and preds[key(p)] != fastest: bad.append("the top row is not the fastest prediction")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "--search: the rule's layouts each predicted (compute + exposed + idle), the fastest and a sample run and passed"
grep -Eq "search: the predicted best, .* was (not )?the measured best" "$out/search.txt"
ok $? "--search: the summary says whether the predicted best was the measured best"

# --predict-only with --mem-limit between the layouts' memories: those above it are not predicted,
# nothing is run
lim=$(awk -F'\t' 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == "mem_model") c = i; next} {print $c}' \
  "$out/search/parallel3d.search.tsv" | sort -n | awk '{v[NR] = $1} END {print v[int(NR / 2)]}')
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/parallel3d" ${gpt/--batch 4/--batch 2} --search --predict-only --mem-limit "$lim" \
  -o "$out/search2" >"$out/search2.txt" 2>&1 </dev/null
rc=$?
python3 - "$out/search2" "$lim" <<'PY'
import csv, os, sys
d, lim = sys.argv[1], float(sys.argv[2])
plan = list(csv.DictReader(open(d + "/parallel3d.search.tsv"), delimiter="\t"))
bad = [p for p in plan if (p["fits"] == "1") != (float(p["mem_model"]) <= lim) or (p["fits"] == "1") == (p["pred_step"] == "nan")]
some = 0 < sum(p["fits"] == "1" for p in plan) < len(plan)
ran = os.path.exists(d + "/parallel3d.jsonl") and os.path.getsize(d + "/parallel3d.jsonl") > 0
sys.exit(1 if bad or not some or ran else 0)
PY
ok $(( rc || $? )) "--search --predict-only --mem-limit $lim: the layouts above it left out, the others predicted, none run"

# --predict-only on a described machine: 8 ranks predicted from one (the rule's count at 8)
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/bin/parallel3d" $gpt --search --predict-only --predict "$top/scripts/platforms/predict/h100-sxm-node.txt" \
  --predict-ranks 8 -o "$out/search3" >"$out/search3.txt" 2>&1 </dev/null
rc=$?
[ $rc = 0 ] && [ "$(($(wc -l <"$out/search3/parallel3d.search.tsv") - 1))" = "$(layouts 8 4)" ] &&
  grep -q "by predicted step" "$out/search3.txt"
ok $? "--search --predict-only --predict FILE --predict-ranks 8: the rule's $(layouts 8 4) layouts predicted, the table printed (rc=$rc)"
grep -q "search: $(layouts 8 4) layouts of 8 ranks ($(layouts 8 4 left) more left out:" "$out/search3.txt"
ok $? "--search: the note counts the layouts left out for unequal replicas or micro-batches ($(layouts 8 4 left), by the rule)"

# --search --schedule interleaved: each layout once per v >= 2 with P x v dividing the 4 blocks, where
# m is a multiple of P (Megatron-LM's rules; P 1 left out), predicted on 2 ranks, none run
ilayouts() { # ilayouts RANKS BATCH: "layouts left-out one-stage no-v m-not-P" of the tiny model, by those rules
  python3 - "$1" "$2" <<'PY'
import sys
R, L, heads, C, V, B = int(sys.argv[1]), 4, 4, 32, 64, int(sys.argv[2])
n, left, why = 0, 0, {"P 1": 0, "no v": 0, "m % P": 0}
for P in range(1, min(R, L) + 1):
    vs = [v for v in range(2, L // P + 1) if P > 1 and L % (P * v) == 0]
    for T in range(1, R // P + 1):
        if R % P or (R // P) % T or heads % T or C % T or V % T: continue
        D = R // P // T
        zeros = 2 if D > 1 else 1
        for m in range(1, B // D + 1):
            if B % D or B // D % m: left += zeros * 3  # replicas or micro-batches of unequal sizes
            elif P == 1: why["P 1"] += zeros * 3
            elif not vs: why["no v"] += zeros * 3
            elif m % P: why["m % P"] += zeros * 3
            else: n += zeros * 3 * len(vs)
print(n, left + sum(why.values()), *why.values())
PY
}
read -r n left one nov mp <<<"$(ilayouts 2 4)"
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/parallel3d" $gpt --search --predict-only --schedule interleaved \
  -o "$out/searchi" >"$out/searchi.txt" 2>&1 </dev/null
rc=$?
python3 - "$out/searchi" "$n" <<'PY'
import csv, os, sys
d, want = sys.argv[1], int(sys.argv[2])
plan = list(csv.DictReader(open(d + "/parallel3d.search.tsv"), delimiter="\t"))
bad = [] if len(plan) == want else [f"{len(plan)} layouts predicted, the rules give {want}"]
for p in plan:
    P, v, m = int(p["pp"]), int(p["virtual"]), int(p["micro_batches"])
    if P < 2 or v < 2 or 4 % (P * v) or m % P: bad.append(f"layout {p} breaks the rules")
    if p["fits"] != "1" or not float(p["pred_step"]) > 0: bad.append(f"layout {p} not predicted")
if len({(p["micro_batches"], p["virtual"], p["recompute"]) for p in plan}) != len(plan): bad.append("a layout twice")
if os.path.exists(d + "/parallel3d.jsonl") and os.path.getsize(d + "/parallel3d.jsonl"): bad.append("a layout ran")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $(( rc || $? )) "--search --predict-only --schedule interleaved on 2 ranks: the rules' $n layouts (v >= 2) predicted, none run (rc=$rc)"
grep -q "search: $n layouts of 2 ranks ($left more left out: .*, $one of one stage (interleaved needs P >= 2), $nov whose P x v divides the 4 layers for no v >= 2, $mp whose m is no multiple of P;" "$out/searchi.txt" &&
  grep -Eq "^#   1x1x2 m[0-9]+ v2 z0" "$out/searchi.txt"
ok $? "--search --schedule interleaved: the note counts those left out by the rules ($left: $one of one stage, $mp whose m is no multiple of P), the table names v"

# (one process: the checks are the options', not the ranks')
expect_usage_of parallel3d "--tp: --search chooses the layout" $gpt --search --tp 2
expect_usage_of parallel3d "--virtual: --search chooses the layout" $gpt --search --schedule interleaved --virtual 2
expect_usage_of parallel3d "--mem-limit 1024: none of the" $gpt --search --mem-limit 1K
expect_usage_of parallel3d "--dtype (-d): --search ranks layouts in one precision" $gpt --search -d f32,bf16
expect_usage_of parallel3d "--search-top: only with --search" $gpt --search-top 2
expect_usage_of parallel3d "add --predict-only" $gpt --search --predict "$top/scripts/platforms/predict/h100-sxm-node.txt"
expect_usage_of parallel3d "--predict-ranks: --search --predict ranks the layouts of one rank count" $gpt --search \
  --predict-only --predict "$top/scripts/platforms/predict/h100-sxm-node.txt" --predict-ranks 8,16
SL_NO_PREDICT=1 expect_usage_of parallel3d "which SL_NO_PREDICT=1 switches off" $gpt --search

# --bucket-mb: the replicas' all-reduce in buckets of a stage's layers, started in the stage's
# last backward (0.001 MiB: a bucket a layer), f32 and bf16: the weights as serial training's, the
# bucketed bytes equal to their model, the buckets' iallreduce in the prediction; a replica that
# halves a bucket fails
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 4 "$top/bin/parallel3d" $gpt --dp 2 --pp 2 --bucket-mb 0.001 -d f32,bf16 \
  -o "$out/bucket" >"$out/bucket.txt" 2>&1 </dev/null
ok $? "--bucket-mb 0.001 on 2x1x2, f32 and bf16: exit 0"
check_rows "$out/bucket/parallel3d.jsonl" 2 1 2 2
ok $? "--bucket-mb: bytes per group (the buckets' all-reduces) and memory equal to the models"
python3 - "$out/bucket/parallel3d.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(rows) == 2 and all(r["params"]["dp_buckets"] > 1 for r in rows) else "expected several buckets a row")
PY
ok $? "--bucket-mb 0.001: rank 0's stage has several buckets"
python3 "$top/t/lib/train_rows.py" pred "$out/bucket/parallel3d.jsonl" 1f1b=p2p,dp.iallreduce
ok $? "--bucket-mb: the step's arithmetic, the buckets' non-blocking all-reduce fitted on the dp group"
SL_TEST_CORRUPT=1 launch 4 parallel3d $gpt --dp 2 --pp 2 --bucket-mb 0.001 -o "$out/corruptb" >"$out/corruptb.txt" 2>&1 </dev/null
rc=$?
[ $rc = 1 ] && grep -q '"status": *"fail"' "$out/corruptb/parallel3d.jsonl"
ok $? "... a replica that halves its buckets before their all-reduce: the row fails, exit 1 (rc=$rc)"
expect_usage_of parallel3d "--bucket-mb: --zero 1 reduce-scatters" $gpt --dp 2 --pp 2 --zero 1 --bucket-mb 1
expect_usage_of parallel3d "--bucket-mb -1: expected MiB" $gpt --bucket-mb -1
expect_usage_of parallel3d "--layers 4 must be divisible by --pp 2 x --virtual 3" $gpt --pp 2 --schedule interleaved --virtual 3
expect_usage_of parallel3d "--micro-batches 3: the interleaved schedule needs a multiple of --pp 2" $gpt --pp 2 \
  --schedule interleaved --micro-batches 3

expect_usage_np 4 parallel3d "D x T x P must equal the ranks" $gpt --dp 2 --tp 2 --pp 2
expect_usage_np 3 parallel3d "--heads 4 must be divisible by T" $gpt --tp 3
expect_usage_np 2 parallel3d "more pipeline stages than the GPT's --layers" $shape --layers 1 --pp 2
expect_usage_np 2 parallel3d "--order" $gpt --tp 2 --order tp-tp-pp
expect_usage_np 2 parallel3d "--micro-batches 8" $gpt --pp 2 --micro-batches 8
expect_usage_np 1 parallel3d "--model" --model mlp
expect_usage_of parallel3d "--predict: parallel3d's layout is chosen for the launched ranks" \
  --predict "$top/scripts/platforms/predict/h100-sxm-node.txt"
done_testing
