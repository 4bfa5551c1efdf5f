#!/bin/bash
# zero: every stage x f32/f16/bf16 x mpi/ring on 1-4 ranks passes the program's check (stage 0-2
# replicas bit-identical, stage 3's gathered weights against serial training in the row's dtype);
# a parameter count that no rank count divides (padding); per-rank memory == the ZeRO formula
# (padded shards; 16 bits: the paper's 2 + 2 + 12 bytes per parameter) exactly, and the
# communication buffers == the ones the row lists; the ring's bytes per step == the model, and
# 16-bit bytes == half of f32's; --precision mixed is -d f16; the analytic table on the paper's
# example; one rank's overflow skips the step on all; exposed <= comm, the predicted step's
# arithmetic and the operations its schedule names and the error columns print
# 3 significant digits; AdamW's default learning rate trains a model that 0.01 diverges on, and a
# diverged reference fails the check; usage errors exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# layers of 12x48, 48x48, 48x5 (+ biases): 624, 2352 and 245 elements; 245 divides by none of 2, 3, 4
small="--layers 3 --width 48 --inputs 12 --outputs 5 --bucket-mb 0.004 -n 2 -w 1 --baseline 0"

rows_exact() { # rows_exact FILE NP DTYPES [K]: checks, memory and bytes against the formulas, recomputed here
  python3 - "$@" <<'PY'
import json, sys
path, N, D, K = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]) if len(sys.argv) > 4 else 2
sizes = [48 * 13, 48 * 49, 5 * 49]
psi = sum(sizes)
S = sum(-(-s // N) for s in sizes)          # a rank's shard: ceil(size_l / N) per layer
rows = [json.loads(l) for l in open(path)]
bad = []
key = lambda r: (r["variant"], r["dtype"], r["collective"])
if sorted(map(key, rows)) != sorted((f"stage{s}", d, c) for s in range(4) for d in D for c in ("mpi", "ring")):
    bad.append(f"not every stage x dtype x collective ran: {sorted(map(key, rows))}")
by = {key(r): r for r in rows}
for r in rows:
    m = {k: v["value"] for k, v in r["metrics"].items()}
    v, d, s = r["variant"], r["dtype"], int(r["variant"][-1])
    at = f"{v}/{d}/{r['collective']}"
    # bytes per element; the f32 master weights are an optimizer state in 16 bits (the paper's K = 12)
    es, master = (4, 0) if d == "f32" else (2, 4)
    if r["check"]["status"] != "pass": bad.append(f"{at}: {r['check']}")
    if r["params"]["params"] != psi or r["params"]["padded_params"] != N * S: bad.append(f"{at}: sizes {r['params']}")
    if d != "f32" and (r["params"]["precision"] != "mixed" or r["params"]["loss_scale"] != ("dynamic" if d == "f16" else "none")):
        bad.append(f"{at}: params {r['params']}")
    want = {"mem_params": es * (S if s == 3 else psi), "mem_grads": es * (S if s >= 2 else psi),
            "mem_optim": (4 * K + master) * (S if s >= 1 else psi)}
    for k, w in want.items():
        if m[k] != w or m["model_" + k[4:]] != w: bad.append(f"{at}: {k} {m[k]} model {m['model_' + k[4:]]} formula {w}")
    total = sum(want.values())
    if not (m["mem_total"] == m["mem_model_total"] == total): bad.append(f"{at}: mem_total {m['mem_total']} formula {total}")
    listed = m["mem_staging"] + m["mem_bucket"] + m["mem_gather"]
    if m["mem_comm"] != listed: bad.append(f"{at}: communication buffers {m['mem_comm']} != listed {listed}")
    widest = es * N * max(-(-x // N) for x in sizes)
    expect = {0: (0, 0, 0), 1: (widest, 0, 0), 2: (0, None, 0), 3: (0, None, 2 * widest)}[s]
    for k, e in zip(("mem_staging", "mem_bucket", "mem_gather"), expect):
        if (e is None and not m[k] > 0) or (e is not None and m[k] != e): bad.append(f"{at}: {k} {m[k]}, expected {e}")
    # stages 1-2: a step the loss scaler skipped all-gathers nothing (3 steps: -w 1 -n 2)
    skipped = m.get("skipped_steps") or 0
    passes = 3 if s == 3 else 2 if s == 0 else 1 + (3 - skipped) / 3
    model = passes * (N - 1) / N * es * (psi if s == 0 else N * S)
    if abs(m["bytes_model"] - model) > 1e-6 * model + 1e-9: bad.append(f"{at}: bytes_model {m['bytes_model']} != {model}")
    if r["collective"] == "ring" and N > 1:
        if m["bytes_sent"] is None or abs(m["bytes_sent"] - model) > 0.01 * model:
            bad.append(f"{at}: ring sent {m['bytes_sent']} bytes/step, model {model}")
    if r["collective"] == "mpi" and m["bytes_sent"] is not None: bad.append(f"{at}: mpi bytes should be n/a")
    f = by.get((v, "f32", r["collective"]))
    if d != "f32" and f and not skipped:  # 16 bits: exactly half of f32's bytes, stage by stage
        fm = {k: x["value"] for k, x in f["metrics"].items()}
        if m["bytes_model"] * 2 != fm["bytes_model"] or (N > 1 and r["collective"] == "ring" and m["bytes_sent"] * 2 != fm["bytes_sent"]):
            bad.append(f"{at}: sent {m['bytes_sent']} model {m['bytes_model']}, f32 {fm['bytes_sent']} {fm['bytes_model']}")
    for k in ("compute", "exposed_comm", "samples_per_s", "weight_l2_err"):
        if m.get(k) is None: bad.append(f"{at}: {k} missing")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

for np in 1 2 3 4; do
  # shellcheck disable=SC2086
  launch $np zero $small --batch 3 -C mpi,ring -d f32,f16,bf16 -o "$out/np$np" >"$out/np$np.txt" 2>&1
  rc=$?
  ok $rc "zero on $np rank(s): every stage x f32/f16/bf16 x mpi/ring passes its check"
  [ $rc = 0 ] || tail -15 "$out/np$np.txt" | sed 's/^/#   /' >&2
  rows_exact "$out/np$np/zero.jsonl" $np f32,f16,bf16
  ok $? "np=$np: memory == formula (padded shards; 16 bits: 2 + 2 + 12 bytes) + listed buffers, exactly; ring bytes == model; 16-bit bytes == half of f32's"
  python3 "$top/t/lib/train_rows.py" phases "$out/np$np/zero.jsonl"
  ok $? "np=$np: exposed_comm <= comm in every row"
  python3 "$top/t/lib/train_rows.py" pred "$out/np$np/zero.jsonl" stage0=allreduce \
    stage1=ireduce_scatter,iallgather stage2=ireduce_scatter,iallgather stage3=ireduce_scatter,iallgather
  ok $? "np=$np: every row carries the predicted step, pred_step = pred_compute + pred_exposed, and fits the operations its stage issues"
done

# SGD is the stricter check (max element, 1e-4); stage 3 without prefetch, uneven strong split.
# shellcheck disable=SC2086
launch 3 zero $small --optim sgd --stage 1,2,3 --prefetch 0 --scaling strong --batch 7 -C ring \
  -o "$out/sgd" >"$out/sgd.txt" 2>&1
ok $? "-np 3 --optim sgd --prefetch 0 --scaling strong --batch 7: stages 1-3 pass"
grep -q -- "--prefetch applies to stage 3 only" "$out/sgd.txt"
ok $? "--prefetch given with stages 0-2 selected: a note says they ignore it"
python3 -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)['variant'] == 'stage3'][0]
sys.exit(0 if r['metrics']['mem_gather']['value'] == 4 * 3 * 784 and r['params']['prefetch'] == 0 else 1)" "$out/sgd/zero.jsonl"
ok $? "stage 3 --prefetch 0 holds one gathered layer (mem_gather = 4 x 3 x 784 bytes: the widest layer, padded)"

# stage 3 gathers every layer twice a step and reduce-scatters it once, on the trace's comm row
# shellcheck disable=SC2086
launch 2 zero $small --stage 3 --prefetch 0 --trace -o "$out/trace" >/dev/null 2>&1
python3 - "$out/trace/zero.trace.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["tid"] == 1]
steps, L = 3, 3
n = lambda name, pid: sum(1 for e in ev if e["name"] == name and e["pid"] == pid)
sys.exit(0 if all(n("allgather", p) == 2 * L * steps and n("reduce_scatter", p) == L * steps for p in (0, 1)) else 1)
PY
ok $? "--trace: stage 3's 2L all-gathers and L reduce-scatters per step on the comm row of both ranks"

# --precision mixed is the paper's fp16 training: -d f16 (the rows of the np3 run above, bit for bit)
# shellcheck disable=SC2086
launch 3 zero $small --batch 3 -C ring --precision mixed -o "$out/mixed" >"$out/mixed.txt" 2>&1
ok $? "--precision mixed on 3 ranks: every stage passes its check"
python3 - "$out/mixed/zero.jsonl" "$out/np3/zero.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
f16 = {r["variant"]: r for r in map(json.loads, open(sys.argv[2])) if r["dtype"] == "f16" and r["collective"] == "ring"}
ok = len(rows) == 4 and all(r["dtype"] == "f16" and r["metrics"]["weight_l2_err"]["value"] == f16[r["variant"]]["metrics"]["weight_l2_err"]["value"] for r in rows)
sys.exit(0 if ok else 1)
PY
ok $? "--precision mixed: the f16 rows, with the errors of -d f16's"
grep -q ' f16 ' "$out/mixed.txt"
ok $? "the table's rows say f16"
# the 16-bit rows' errors (1e-5 to 1e-2 here) in the table to 3 significant digits, never "0.00"
python3 "$top/t/lib/train_rows.py" cells "$out/np3.txt" "$out/np3/zero.jsonl" "L2 err=weight_l2_err" \
  "error=weight_rel_err"
ok $? "-d f32,f16,bf16: the table's L2 err and error columns show each row's error to 3 significant digits"
# shellcheck disable=SC2086
launch 2 zero $small --batch 3 -d f16,bf16 --optim sgd -C mpi,ring -o "$out/mixed_sgd" >/dev/null 2>&1
ok $? "-d f16,bf16 --optim sgd (stricter check) passes every stage"
rows_exact "$out/mixed_sgd/zero.jsonl" 2 f16,bf16 1
ok $? "-d f16,bf16 --optim sgd: optimizer states 8 bytes per parameter (master + momentum), sharded"

# One rank's overflow (SL_TEST_CORRUPT=1, last rank, step 0): with sharded gradients no rank
# sees the whole gradient, so the flag is OR-ed: every rank skips, and the check then fails.
# shellcheck disable=SC2086
SL_TEST_CORRUPT=1 launch 3 zero $small --batch 3 --stage 2 -C ring --precision mixed -o "$out/overflow" \
  >"$out/overflow.txt" 2>&1
rc=$?
python3 - "$out/overflow/zero.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m = r["metrics"]
sys.exit(0 if r["check"]["status"] == "fail" and m["skipped_steps"]["value"] == 1 and m["overflow_seen"]["value"] == 1 else 1)
PY
ok $? "one rank's overflow skips the step on every rank (rank 0's row: skipped 1) and the check fails"
[ $rc = 1 ]
ok $? "... exit 1 (rc=$rc)"

# AdamW's default learning rate follows the model's width and depth (sl_optim_default_lr): at
# 3 x 512 (batch 32) a fixed 0.01 makes the serial run's loss rise 19x in 3 steps, and the
# default (0.00361) trains it. A diverged reference fails the check, even on one rank, where the
# replica equals it bit for bit.
deep="--layers 3 --width 512 --inputs 64 --outputs 16 -n 2 -w 1 --baseline 0 --stage 0"
# shellcheck disable=SC2086
launch 2 zero $deep --batch 16 -o "$out/deep" >"$out/deep.txt" 2>&1
rc=$?
python3 - "$out/deep/zero.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m = {k: v["value"] for k, v in r["metrics"].items()}
first, peak = m.get("ref_first_loss"), m.get("ref_peak_loss")
print(r["check"], first, peak, file=sys.stderr)
sys.exit(0 if r["check"]["status"] == "pass" and first and peak and peak <= 10 * first else 1)
PY
ok $? "3 x 512 on 2 ranks at the default rate: passes, the reference's loss never above 10x its first (rc=$rc)"
grep -q "adamw lr 0.00361 (this shape's default)" "$out/deep.txt"
ok $? "the note line prints the rate and says it is the shape's default"
# shellcheck disable=SC2086
launch 1 zero $deep --batch 32 --lr 0.01 -o "$out/diverged" >"$out/diverged.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "CHECK FAILED: stage0: diverged: the serial reference's loss rose from .* at lr 0.01; lower --lr (this model's default: 0.00361)$" "$out/diverged.txt"
ok $? "--lr 0.01 at 3 x 512 on one rank: the check fails as diverged naming --lr and the default, exit 1 (rc=$rc)"

# The paper's example (Rajbhandari et al., Figure 1): 7.5B parameters on 64 devices.
got=$(zero --analytic 7.5e9 --ranks 64 --precision mixed | awk '/^stage/ {print $NF}' | tr '\n' ' ')
[ "$got" = "120.0 31.4 16.6 1.9 " ]
ok $? "--analytic 7.5e9 --ranks 64 --precision mixed: 120.0 31.4 16.6 1.9 GB (got '$got')"
got=$(zero --analytic=7.5e9 --ranks=64 --precision fp32 | awk '/^stage/ {print $NF}' | tr '\n' ' ')
[ "$got" = "120.0 60.9 31.4 1.9 " ]
ok $? "--analytic fp32 (4+4+8): 120.0 60.9 31.4 1.9 GB (got '$got')"

expect_usage() { # expect_usage NP NAME ARGS...
  local np="$1" want="$2"; shift 2
  if [ "$np" = 0 ]; then zero "$@" >"$out/stdout" 2>"$out/stderr"; else
    launch "$np" zero "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"; fi
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "zero $* -> exit 2 naming $want (rc=$rc)"
}
expect_usage 1 --stage --stage 4
expect_usage 1 --bucket-mb --bucket-mb 0
expect_usage 1 --bucket-mb --bucket-mb -1
expect_usage 1 --precision --precision half
expect_usage 1 "give one of them" --precision mixed -d f16
expect_usage 1 "accepts f32|f16|bf16|all" -d f8
expect_usage 1 --coll -C tree
expect_usage 1 --ranks --ranks 4
expect_usage 0 --ranks --analytic 7.5e9
expect_usage 0 --analytic --analytic lots --ranks 8
expect_usage 0 --ranks --analytic 1e9 --ranks 0
expect_usage 0 --precision --analytic 1e9 --ranks 8 --precision fp8
expect_usage 0 "not '--stage'" --analytic 1e9 --ranks 8 --stage 1
[ ! -e "$out/bad" ]
ok $? "usage errors leave no results directory behind"

done_testing
