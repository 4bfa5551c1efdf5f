#!/bin/bash
# ddp: every variant on 1-4 ranks trains to the serial reference's weights (the program's own
# check, which this test requires to pass in every row), and in f16 and bf16 too on 2-4 ranks,
# sending exactly half of f32's bytes; uneven strong-scaling splits; one rank's overflow skips
# the step on all; bad inputs exit 2; --trace shows communication beside compute; exposed <= comm
# and the error column prints 3 significant digits; every row's predicted step and its arithmetic
# (SL_NO_PREDICT=1 leaves it out); a diverged AdamW run fails its check.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
small="--layers 3 --width 48 --inputs 12 --outputs 5 --bucket-mb 0.004 --accum 3 -n 2 -w 1 --baseline 0"

rows_pass() { # rows_pass FILE NP EXPECTED_VARIANTS...
  python3 - "$@" <<'PY'
import json, sys
path, np, want = sys.argv[1], int(sys.argv[2]), set(sys.argv[3:])
rows = [json.loads(l) for l in open(path)]
bad = [f"{r['variant']}/{r['collective']}: {r['check']}" for r in rows if r["check"]["status"] != "pass"]
seen = {r["variant"] for r in rows}
if seen != want: bad.append(f"variants {sorted(seen)} != {sorted(want)}")
for r in rows:
    if r["ranks"] != np: bad.append(f"ranks {r['ranks']}")
    if r["metrics"]["weight_rel_err"]["value"] is None: bad.append("no weight error")
    for m in ("samples_per_s", "compute", "comm", "exposed_comm", "bytes_model"):
        if r["metrics"].get(m, {}).get("value") is None and not (m == "comm" and np == 1):
            bad.append(f"{r['variant']}: {m} missing")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

for np in 1 2 3 4; do
  want="sync bucketed accum ps"; [ $np = 1 ] && want="sync bucketed accum"
  # shellcheck disable=SC2086
  launch $np ddp $small --batch 5 -C mpi,ring,rhd -o "$out/np$np" >"$out/np$np.txt" 2>&1
  rc=$?
  ok $rc "ddp on $np rank(s): every variant and collective passes its check"
  [ $rc = 0 ] || tail -15 "$out/np$np.txt" | sed 's/^/#   /' >&2
  # shellcheck disable=SC2086
  rows_pass "$out/np$np/ddp.jsonl" $np $want
  ok $? "np=$np: rows pass and carry the step breakdown"
  python3 "$top/t/lib/train_rows.py" phases "$out/np$np/ddp.jsonl"
  ok $? "np=$np: exposed_comm <= comm in every row"
  python3 "$top/t/lib/train_rows.py" pred "$out/np$np/ddp.jsonl" sync=allreduce bucketed=iallreduce accum=allreduce ps=p2p
  ok $? "np=$np: every row carries the predicted step, pred_step = pred_compute + pred_exposed, and fits the operations its variant issues"
done

# SL_NO_PREDICT=1: no calibration, no pred_* fields, params.predict "off"; a bad value is exit 2
# shellcheck disable=SC2086
SL_NO_PREDICT=1 launch 2 ddp $small --variants sync --batch 5 -o "$out/nopred" >"$out/nopred.txt" 2>&1
ok $? "SL_NO_PREDICT=1: ddp exits 0"
python3 - "$out/nopred/ddp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
bad = [r["variant"] for r in rows if r["params"].get("predict") != "off" or any(k.startswith("pred_") or k == "step_vs_pred" for k in r["metrics"])]
sys.exit(1 if bad or not rows else 0)
PY
ok $? "SL_NO_PREDICT=1: rows say params.predict off and carry no pred_* field"
SL_NO_PREDICT=yes launch 1 ddp $small -o "$out/badpred" >"$out/badpred.txt" 2>"$out/badpred.err"
rc=$?
[ $rc = 2 ] && [ "$(grep -c 'SL_NO_PREDICT' "$out/badpred.err")" = 1 ] && [ ! -e "$out/badpred" ]
ok $? "SL_NO_PREDICT=yes: exit 2 with one line naming it (rc=$rc)"

python3 - "$out/np4/ddp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ring = [r for r in rows if r["collective"] == "ring" and r["variant"] == "sync"][0]
mpi = [r for r in rows if r["collective"] == "mpi" and r["variant"] == "sync"][0]
model, sent = ring["metrics"]["bytes_model"]["value"], ring["metrics"]["bytes_sent"]["value"]
# the ring sends 2(N-1)/N of the gradient; chunks of an uneven split differ by one element
ok = sent is not None and abs(sent - model) <= 0.01 * model and mpi["metrics"]["bytes_sent"]["value"] is None
print(f"ring sent {sent} bytes/step, model {model}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "np=4: the ring's measured bytes per step match 2(N-1)/N x gradient bytes; mpi's are n/a"

# shellcheck disable=SC2086
launch 3 ddp $small -C ring --scaling strong --batch 16 -o "$out/strong" >"$out/strong.txt" 2>&1
ok $? "-np 3 -C ring --scaling strong --batch 16: the uneven split (6+5+5) passes"
# shellcheck disable=SC2086
launch 4 ddp $small --variants ps --servers 2 --batch 3 -o "$out/ps2" >"$out/ps2.txt" 2>&1
ok $? "ps with two servers sharding the parameters passes"
# shellcheck disable=SC2086
launch 2 ddp ${small/--accum 3/--accum 4} --variants accum --batch 9 --optim adamw -o "$out/adamw" >"$out/adamw.txt" 2>&1
ok $? "accum with AdamW equals the serial full-batch run"

# AdamW at 3 x 512, batch 32: the shape's default rate (0.00361) trains it on 2 ranks; 0.01
# makes the serial run's loss rise 19x in 3 steps, and the check says the run diverged.
deep="--layers 3 --width 512 --inputs 64 --outputs 16 -n 2 -w 1 --baseline 0 --variants sync --optim adamw"
# shellcheck disable=SC2086
launch 2 ddp $deep --batch 16 -o "$out/deep" >"$out/deep.txt" 2>&1
ok $? "AdamW at 3 x 512 on 2 ranks at the shape's default rate passes its check"
# shellcheck disable=SC2086
launch 1 ddp $deep --batch 32 --lr 0.01 -o "$out/diverged" >"$out/diverged.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "CHECK FAILED: sync: diverged: .*lower --lr" "$out/diverged.txt"
ok $? "... at --lr 0.01 on one rank: the check fails as diverged, naming --lr, exit 1 (rc=$rc)"

# The one-rank baseline (rank 0 alone while the others wait): the row's efficiency is its own
# one-rank step over (ranks x step), the one-rank run trained the row's global batch, and a row
# above 1 says superlinear. Exact relations between the row's fields: no timing is judged.
launch 2 ddp --layers 3 --width 48 --inputs 12 --outputs 5 --batch 4 -n 2 -w 1 --variants sync \
  -o "$out/eff" >"$out/eff.txt" 2>&1
python3 - "$out/eff/ddp.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][0]
m, p = r["metrics"], r["params"]
e, t1, t = m["scaling_eff"]["value"], m["one_rank_step"]["value"], r["time"]["median"]
good = (r["check"]["status"] == "pass" and e is not None and t1 and t
        and abs(e - t1 / (2 * t)) <= 1e-9 * e and p.get("one_rank_batch") == p["global_batch"]
        and (p.get("eff_note") == "superlinear") == (e > 1))
sys.exit(0 if good else 1)
PY
ok $? "--baseline 1: scaling efficiency = one-rank step / (2 x step), the one-rank run on the global batch"

# A batch smaller than the default --accum: accum is skipped with a note, the rest runs.
launch 2 ddp --layers 2 --width 16 --inputs 4 --outputs 3 --batch 2 -n 1 -w 0 --baseline 0 \
  -o "$out/skip" >"$out/skip.txt" 2>&1
[ $? = 0 ] && grep -q 'skipping accum' "$out/skip.txt"
ok $? "--batch below the default --accum skips accum with a note instead of failing"
launch 2 ddp --layers 2 --width 16 --inputs 4 --outputs 3 --batch 2 -n 1 -w 0 --check 0 \
  -o "$out/nocheck" >/dev/null 2>&1
python3 -c "import json,sys; sys.exit(0 if all(json.loads(l)['check']['status']=='skipped' for l in open(sys.argv[1])) else 1)" "$out/nocheck/ddp.jsonl"
ok $? "--check 0: rows marked skipped"

# mixed_rows_ok FILE "COLLS" VARIANTS...: one row per variant x f32/f16/bf16 x collective (ps:
# p2p), each passing; a 16-bit row sends exactly half of its f32 row's bytes (the model, and what
# the suite's own collectives and point-to-point sends measured), in as many buckets; holds 2 + 4 bytes of params and of grads per
# parameter and the activations of its model (accum: a micro-batch's, fewer than sync's, summed
# in f32); its scaler is f16's dynamic or none; its loss is beside f32's (unless it skipped a step).
mixed_rows_ok() {
  python3 - "$@" <<'PY'
import json, sys
path, C, V, D = sys.argv[1], sys.argv[2].split(), sys.argv[3:], ("f32", "f16", "bf16")
rows = {(r["variant"], r["dtype"], r["collective"]): r for r in map(json.loads, open(path))}
# ps communicates point to point: one row per dtype, collective p2p
want = {(v, d, c) for v in V for d in D for c in (["p2p"] if v == "ps" else C)}
bad = [] if set(rows) == want else [f"rows {sorted(rows)} != {sorted(want)}"]
val = lambda r, k: r["metrics"][k]["value"]
for (v, d, c), r in rows.items():
    if r["check"]["status"] != "pass": bad.append(f"{v}/{d}/{c}: {r['check']}")
    if d == "f32": continue
    f, at = rows[(v, "f32", c)], f"{v}/{d}/{c}"
    if val(r, "bytes_model") * 2 != val(f, "bytes_model"): bad.append(f"{at}: model {val(r, 'bytes_model')} vs f32 {val(f, 'bytes_model')}")
    if c != "mpi" and (val(r, "bytes_sent") is None or val(r, "bytes_sent") * 2 != val(f, "bytes_sent")):
        bad.append(f"{at}: sent {val(r, 'bytes_sent')} vs f32 {val(f, 'bytes_sent')}")
    if r["params"].get("buckets") != f["params"].get("buckets"): bad.append(f"{at}: buckets {r['params'].get('buckets')}")
    n = r["params"]["params"]
    for k in ("params", "grads"):
        if val(r, "mem_" + k) != val(r, "model_" + k) or val(r, "mem_" + k) != 6 * n: bad.append(f"{at}: mem_{k} {val(r, 'mem_' + k)} != 6 x {n}")
    if val(r, "mem_activ") != val(r, "model_activ"): bad.append(f"{at}: activ {val(r, 'mem_activ')} vs model {val(r, 'model_activ')}")
    if v == "accum" and "sync" in V and not val(r, "mem_activ") < val(rows[("sync", d, c)], "mem_activ"): bad.append(f"{at}: a whole batch's activations")
    if v == "accum" and not r["params"].get("accum_sum", "").startswith("f32"): bad.append(f"{at}: accum_sum {r['params'].get('accum_sum')}")
    if r["params"]["precision"] != "mixed" or r["params"]["loss_scale"] != ("dynamic" if d == "f16" else "none"): bad.append(f"{at}: {r['params']}")
    # a step the f16 scaler skipped (ps on 2 ranks: one worker's 5 samples overflow 2^16 at
    # step 0, as in the serial run) leaves the loss one step behind f32's
    loss, f32 = val(r, "final_loss"), val(r, "f32_final_loss")
    if not (loss > 0 and f32 > 0 and (abs(loss - f32) < 0.05 * f32 or val(r, "skipped_steps") > 0)): bad.append(f"{at}: loss {loss} vs f32 {f32}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# -d f16|bf16: mixed-precision sync DDP on 3 ranks (uneven split 2+2+1) beside f32. Every row
# passes (replicas bit-identical, weights within the stated bound of serial mixed-precision
# training); the 16-bit all-reduce sends exactly half of f32's bytes, and its model says so; the
# replica holds exactly sl_mixed_memory (2+4 bytes of params and of grads per parameter).
mixed="--layers 3 --width 48 --inputs 12 --outputs 5 -n 3 -w 1 --baseline 0 --variants sync --batch 5"
# shellcheck disable=SC2086
launch 3 ddp $mixed -d f32,f16,bf16 -C ring,rhd,mpi -o "$out/mixed" >"$out/mixed.txt" 2>&1
ok $? "ddp -d f32,f16,bf16 on 3 ranks: every row passes its check"
mixed_rows_ok "$out/mixed/ddp.jsonl" "ring rhd mpi" sync
ok $? "-d f16/bf16: bytes per step exactly half of f32's (sent and model), memory equals sl_mixed_memory, loss beside f32's"
grep -q ' f16 ' "$out/mixed.txt" && grep -q ' bf16 ' "$out/mixed.txt"
ok $? "the table's rows carry their dtype"
# errors from 1e-8 (f32) to 1e-3 (bf16), each read against its bound: 3 significant digits
python3 "$top/t/lib/train_rows.py" cells "$out/mixed.txt" "$out/mixed/ddp.jsonl" "error=weight_rel_err"
ok $? "the table's error column shows each row's error to 3 significant digits"
python3 "$top/t/lib/train_rows.py" phases "$out/mixed/ddp.jsonl"
ok $? "-d f16/bf16: exposed_comm <= comm in every row"

# An overflow that only the last rank sees (SL_TEST_CORRUPT=1: an inf in its unscaled gradients
# at step 0) must skip the step on every rank: the replicas stay bit-identical, but the weights,
# one step short of the serial run's, fail the check (exit 1).
# shellcheck disable=SC2086
SL_TEST_CORRUPT=1 launch 3 ddp $mixed -d f16 -C ring -o "$out/overflow" >"$out/overflow.txt" 2>&1
rc=$?
python3 - "$out/overflow/ddp.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m, c = r["metrics"], r["check"]
ok = (c["status"] == "fail" and "0 elements differ between replicas" in c["message"]
      and m["skipped_steps"]["value"] == 1 and m["overflow_seen"]["value"] == 1)
print(r["check"], m["skipped_steps"], m["overflow_seen"], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "one rank's overflow skips the step on all (rank 0 skipped too, replicas identical), and the check fails"
[ $rc = 1 ]
ok $? "the run whose step was skipped against the reference exits 1 (rc=$rc)"

# shellcheck disable=SC2086
launch 2 ddp ${mixed/--batch 5/--batch 4} -d f16,bf16 --optim adamw -C ring -o "$out/mixed_adamw" >"$out/mixed_adamw.txt" 2>&1
ok $? "-d f16,bf16 with AdamW passes its check"

# -d f16|bf16 for every variant, through the one step of ddp.c, on 2, 3 and 4 ranks (--accum 3
# cuts each rank's 5 samples into micro-batches of 2+2+1; ps: the last rank serves), beside f32:
# mixed_rows_ok. Here f16 and f32 cut the gradient into as many buckets (2: layers 2-3 fill the
# 4 KiB bucket in either, layer 1 is the other), so the ring's bytes are exactly half bucket by
# bucket; ps pushes 16-bit gradients and pulls 16-bit weights.
mixv="--layers 3 --width 48 --inputs 12 --outputs 5 -n 3 -w 1 --baseline 0 --bucket-mb 0.004 --accum 3 --batch 5"
for np in 2 3 4; do
  # shellcheck disable=SC2086
  launch $np ddp $mixv -d f32,f16,bf16 -C ring,mpi -o "$out/mixv$np" >"$out/mixv$np.txt" 2>&1
  rc=$?
  ok $rc "ddp, every variant, -d f32,f16,bf16 -C ring,mpi on $np ranks: every row passes its check"
  [ $rc = 0 ] || tail -15 "$out/mixv$np.txt" | sed 's/^/#   /' >&2
  mixed_rows_ok "$out/mixv$np/ddp.jsonl" "ring mpi" sync bucketed accum ps
  ok $? "np=$np: every 16-bit variant sends exactly half of f32's bytes (sent and model), holds 6 bytes of params and grads a parameter, accum a micro-batch's activations"
done

# A model whose f16 gradients overflow at the initial scale 2^16: bucketed and accum skip the
# step the serial run skips (one decision per step, after every bucket / micro-batch), so they
# pass; the f32 rows have no scaler.
launch 2 ddp --variants bucketed,accum -C ring -d f16 --layers 2 --width 8 --inputs 4 --outputs 2 --batch 4 \
  --accum 2 --bucket-mb 0.0001 -n 3 -w 1 --baseline 0 -o "$out/mixv_skip" >"$out/mixv_skip.txt" 2>&1
rc=$?
python3 -c "
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(rows) == 2 and all(r['check']['status'] == 'pass' and r['metrics']['skipped_steps']['value'] == 1 for r in rows) else 1)" "$out/mixv_skip/ddp.jsonl"
ok $? "f16 bucketed and accum skip the overflowing step as the serial run does, and pass (rc=$rc)"

# One rank's overflow (SL_TEST_CORRUPT=1) skips the step on every rank in bucketed and accum too:
# replicas identical, one step short of the reference: the check fails, exit 1.
# shellcheck disable=SC2086
SL_TEST_CORRUPT=1 launch 3 ddp $mixv --variants bucketed,accum,ps -d f16 -C ring -o "$out/mixv_over" >"$out/mixv_over.txt" 2>&1
rc=$?
python3 - "$out/mixv_over/ddp.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = len(rows) == 3 and all(r["check"]["status"] == "fail" and "0 elements differ between replicas" in r["check"]["message"]
                            and r["metrics"]["skipped_steps"]["value"] == 1 for r in rows)
sys.exit(0 if ok else 1)
PY
ok $? "bucketed, accum and ps -d f16: one rank's overflow (ps: a server's) skips the step on all ranks, and the check fails"
[ $rc = 1 ]
ok $? "that run exits 1 (rc=$rc)"

# shellcheck disable=SC2086
launch 3 ddp ${mixv/--batch 5/--batch 4} --variants bucketed,accum,ps -d f16,bf16 --optim adamw -C ring -o "$out/mixv_adamw" >"$out/mixv_adamw.txt" 2>&1
ok $? "bucketed, accum and ps -d f16,bf16 with AdamW pass their check"

# -d f16 without f32 and every variant: all four train in 16 bits.
launch 3 ddp --layers 2 --width 16 --inputs 4 --outputs 3 --batch 4 --accum 2 -n 1 -w 0 --baseline 0 -d f16 \
  -o "$out/mixv_all" >"$out/mixv_all.txt" 2>&1
rc=$?
[ $rc = 0 ] && [ "$(python3 -c "import json,sys; print(' '.join(json.loads(l)['variant'] + '/' + json.loads(l)['dtype'] for l in open(sys.argv[1])))" "$out/mixv_all/ddp.jsonl")" = "sync/f16 bucketed/f16 accum/f16 ps/f16" ]
ok $? "-d f16 alone: sync, bucketed, accum and ps train in 16 bits (rc=$rc)"

expect_usage() { # expect_usage NP NAME ARGS...
  local np="$1" want="$2"; shift 2
  launch "$np" ddp "$@" -o "$out/bad" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "ddp $* on $np ranks -> exit 2 naming $want (rc=$rc)"
}
expect_usage 3 --batch --scaling strong --batch 2
expect_usage 1 --accum --accum 0
expect_usage 1 --bucket-mb --bucket-mb 0
expect_usage 2 --servers --variants ps --servers 2
expect_usage 1 --scaling --scaling linear
expect_usage 1 --coll -C nccl -B cpu
expect_usage 1 --accum --variants accum --batch 2 --accum 3
expect_usage 1 --lr --lr nan
expect_usage 1 --lr --lr 1e300
expect_usage 1 "accepts f32|f16|bf16|all" -d f8
expect_usage 1 "accepts f32|f16|bf16|all" -d f64

# shellcheck disable=SC2086
launch 2 ddp $small --variants bucketed --batch 4 --trace -o "$out/trace" >/dev/null 2>&1
python3 - "$out/trace/ddp.trace.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
comm = [e for e in ev if e["cat"] == "comm" and e["tid"] == 1]
names = {e["name"] for e in ev}
back = [e for e in ev if e["name"].startswith("backward L")]
ok = comm and back and {e["pid"] for e in comm} == {0, 1}
# named as the student reads the model: layers from 1, buckets by their layers, the wait, the variant
ok = ok and {"forward L1", "backward L1", "optimizer", "wait for buckets", "bucketed, mpi"} <= names
ok = ok and any(n.startswith("all-reduce bucket, layers ") for n in names)
print(sorted(names), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "--trace: bucket all-reduces on their own row beside backward, for both ranks; spans named by layer, bucket, wait and variant"
# shellcheck disable=SC2086
launch 2 ddp $small --variants bucketed --batch 4 -d bf16 --trace -o "$out/trace16" >/dev/null 2>&1
python3 - "$out/trace16/ddp.trace.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
names = {e["name"] for e in ev}
comm = [e for e in ev if e["cat"] == "comm" and e["tid"] == 1 and e["name"].startswith("all-reduce bucket, layers ")]
ok = comm and {e["pid"] for e in comm} == {0, 1} and {"backward L1 (16-bit)", "wait for buckets", "overflow flag"} <= names
print(sorted(names), file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "--trace -d bf16: 16-bit bucket all-reduces beside the 16-bit backward, then the wait and the overflow flag"

# A long run (1.1M steps) must not crash: nothing on the stack is sized by the step count. It is
# not waited for: it either finishes or is still running when the short timeout ends it.
timeout 4 ddp -n 1100000 --layers 1 --width 4 --inputs 2 --outputs 1 --batch 1 --check 0 \
  --variants sync -o "$out/long" >"$out/long.out" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 124 ]
ok $? "ddp -n 1100000 starts and runs (exit 0, or still running at the timeout) (rc=$rc)"
[ $rc = 0 ] || [ $rc = 124 ] || diag "$(tail -5 "$out/long.out")"

# --calibration DIR: the all-reduces' alpha-beta from an allreduce run's rows (the same algorithm
# on as many ranks), said so in pred_fit; a directory without them is exit 2 naming the option
launch 2 allreduce -C ring -b 1K -e 64K -f 4 --mode latency -o "$out/ar" >"$out/ar.txt" 2>&1
ok $? "--calibration: the allreduce run exits 0"
# shellcheck disable=SC2086
launch 2 ddp $small --variants sync,bucketed -C ring --batch 5 --calibration "$out/ar" -o "$out/cal" >"$out/cal.txt" 2>&1
ok $? "--calibration: ddp exits 0"
python3 "$top/t/lib/train_rows.py" pred "$out/cal/ddp.jsonl" sync=allreduce bucketed=iallreduce &&
  [ "$(grep -c '(--calibration, f32 rows)' "$out/cal/ddp.jsonl")" = 2 ]
ok $? "--calibration: both rows predicted, their all-reduce fitted from the allreduce run's rows"
# shellcheck disable=SC2086
launch 2 ddp $small --variants sync -C mpi --calibration "$out/ar" -o "$out/calbad" >/dev/null 2>"$out/calbad.err"
rc=$?
[ $rc = 2 ] && grep -q -- '--calibration .*collective mpi on 2 ranks' "$out/calbad.err" && [ ! -e "$out/calbad" ]
ok $? "--calibration without the -C algorithm's rows: exit 2 naming the option (rc=$rc)"

done_testing
