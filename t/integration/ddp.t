#!/bin/bash
# ddp: every variant on 1-4 ranks trains to the serial reference's weights (the program's own
# check, which this test requires to pass in every row); uneven strong-scaling splits; bad
# inputs exit 2; --trace shows communication beside compute.
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
done

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

# The one-rank baseline (rank 0 alone while the others wait) gives an efficiency in (0, 1.5].
launch 2 ddp --layers 3 --width 48 --inputs 12 --outputs 5 --batch 4 -n 2 -w 1 --variants sync \
  -o "$out/eff" >"$out/eff.txt" 2>&1
python3 - "$out/eff/ddp.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][0]
e = r["metrics"]["scaling_eff"]["value"]
sys.exit(0 if r["check"]["status"] == "pass" and e is not None and 0 < e <= 1.5 else 1)
PY
ok $? "--baseline 1: scaling efficiency measured against the one-rank run"

# A batch smaller than the default --accum: accum is skipped with a note, the rest runs.
launch 2 ddp --layers 2 --width 16 --inputs 4 --outputs 3 --batch 2 -n 1 -w 0 --baseline 0 \
  -o "$out/skip" >"$out/skip.txt" 2>&1
[ $? = 0 ] && grep -q 'skipping accum' "$out/skip.txt"
ok $? "--batch below the default --accum skips accum with a note instead of failing"
launch 2 ddp --layers 2 --width 16 --inputs 4 --outputs 3 --batch 2 -n 1 -w 0 --check 0 \
  -o "$out/nocheck" >/dev/null 2>&1
python3 -c "import json,sys; sys.exit(0 if all(json.loads(l)['check']['status']=='skipped' for l in open(sys.argv[1])) else 1)" "$out/nocheck/ddp.jsonl"
ok $? "--check 0: rows marked skipped"

# -d f16|bf16: mixed-precision sync DDP on 3 ranks (uneven split 2+2+1) beside f32. Every row
# passes (replicas bit-identical, weights within the stated bound of serial mixed-precision
# training); the 16-bit all-reduce sends exactly half of f32's bytes, and its model says so; the
# replica holds exactly sl_mixed_memory (2+4 bytes of params and of grads per parameter).
mixed="--layers 3 --width 48 --inputs 12 --outputs 5 -n 3 -w 1 --baseline 0 --variants sync --batch 5"
# shellcheck disable=SC2086
launch 3 ddp $mixed -d f32,f16,bf16 -C ring,rhd,mpi -o "$out/mixed" >"$out/mixed.txt" 2>&1
ok $? "ddp -d f32,f16,bf16 on 3 ranks: every row passes its check"
python3 - "$out/mixed/ddp.jsonl" <<'PY'
import json, sys
rows = {(r["dtype"], r["collective"]): r for r in map(json.loads, open(sys.argv[1]))}
bad = []
if set(rows) != {(d, c) for d in ("f32", "f16", "bf16") for c in ("ring", "rhd", "mpi")}: bad.append(f"rows {sorted(rows)}")
val = lambda r, k: r["metrics"][k]["value"]
for (d, c), r in rows.items():
    if r["check"]["status"] != "pass": bad.append(f"{d}/{c}: {r['check']}")
    if d == "f32": continue
    f = rows[("f32", c)]
    if val(r, "bytes_model") * 2 != val(f, "bytes_model"): bad.append(f"{d}/{c}: model {val(r, 'bytes_model')} vs f32 {val(f, 'bytes_model')}")
    if c != "mpi" and (val(r, "bytes_sent") is None or val(r, "bytes_sent") * 2 != val(f, "bytes_sent")):
        bad.append(f"{d}/{c}: sent {val(r, 'bytes_sent')} vs f32 {val(f, 'bytes_sent')}")
    n = r["params"]["params"]
    for k in ("params", "grads"):
        if val(r, "mem_" + k) != val(r, "model_" + k) or val(r, "mem_" + k) != 6 * n: bad.append(f"{d}/{c}: mem_{k} {val(r, 'mem_' + k)} != 6 x {n}")
    if r["params"]["precision"] != "mixed" or r["params"]["loss_scale"] != ("dynamic" if d == "f16" else "none"): bad.append(f"{d}: {r['params']}")
    loss, f32 = val(r, "final_loss"), val(r, "f32_final_loss")
    if not (loss > 0 and f32 > 0 and abs(loss - f32) < 0.05 * f32): bad.append(f"{d}/{c}: loss {loss} vs f32 {f32}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
ok $? "-d f16/bf16: bytes per step exactly half of f32's (sent and model), memory equals sl_mixed_memory, loss beside f32's"
grep -q ' f16 ' "$out/mixed.txt" && grep -q ' bf16 ' "$out/mixed.txt"
ok $? "the table's rows carry their dtype"

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
expect_usage 2 "with --variants sync only" -d f16 --variants bucketed
expect_usage 2 "with --variants sync only" -d bf16 --variants sync,ps

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

# A long run (1.1M steps) must not crash: nothing on the stack is sized by the step count. It is
# not waited for: it either finishes or is still running when the short timeout ends it.
timeout 4 ddp -n 1100000 --layers 1 --width 4 --inputs 2 --outputs 1 --batch 1 --check 0 \
  --variants sync -o "$out/long" >"$out/long.out" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 124 ]
ok $? "ddp -n 1100000 starts and runs (exit 0, or still running at the timeout) (rc=$rc)"
[ $rc = 0 ] || [ $rc = 124 ] || diag "$(tail -5 "$out/long.out")"

done_testing
