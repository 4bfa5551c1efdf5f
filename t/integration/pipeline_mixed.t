#!/bin/bash
# pipeline -d f16|bf16: every schedule (gpipe, 1f1b, interleaved, pipedream) x {f32, f16, bf16} x
# {mpi, ring} on 2 stages and on 2 stages x 2 replicas passes its check (the flushing schedules
# against serial training in the row's dtype, pipedream against its own simulation in it); the
# boundary tensors (and the replicas' all-reduce) travel in the row's dtype: bytes per step,
# sent and modelled, exactly half of the f32 run's, and so are the kept activations and
# pipedream's weight stash; one rank's overflow skips the step on every stage and replica;
# combinations not built exit 2.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is pipeline.t's, checkpoint.t's, vdnn.t's and megatron_mlp.t's to test;
# here it would only cost time (a calibration per row, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
tiny="--layers 9 --width 12 --inputs 6 --outputs 3 --batch 7 -n 2 -w 1 --baseline 0"

halves() { # halves FILE: all 24 rows pass; each 16-bit row's bytes, activations, stash are half of f32's
  python3 - "$1" <<'PY'
import json, sys
rows = {(r["params"]["schedule"], r["collective"], r["dtype"]): r for r in map(json.loads, open(sys.argv[1]))}
val = lambda r, k: r["metrics"][k]["value"]
bad = []
want = {(v, c, d) for v in ("gpipe", "1f1b", "interleaved", "pipedream") for c in ("mpi", "ring")
        for d in ("f32", "f16", "bf16")}
if want != set(rows): bad.append(f"rows {sorted(rows)}")
for (v, c, d), r in rows.items():
    if r["check"]["status"] != "pass": bad.append(f"{v}/{c}/{d}: {r['check']}")
    if d == "f32": continue
    f = rows[(v, c, "f32")]
    keys = ["bytes_model", "activ_peak"] + (["stash_bytes"] if v == "pipedream" else [])
    if val(f, "bytes_sent") is not None: keys.append("bytes_sent")  # null: MPI's all-reduce, unobserved
    for k in keys:
        if not (val(r, k) > 0 and val(r, k) * 2 == val(f, k)): bad.append(f"{v}/{c}/{d}: {k} {val(r, k)} vs f32 {val(f, k)}")
    p = r["params"]
    scale = "none" if d == "bf16" else "static" if v == "pipedream" else "dynamic"
    flag = 0 if v == "pipedream" else 4  # pipedream's stages decide alone: no flag is sent
    if p["precision"] != "mixed" or p["loss_scale"] != scale or p["overflow_flag_bytes"] != flag:
        bad.append(f"{v}/{c}/{d}: {p}")
    loss, l32 = val(r, "final_loss"), val(f, "final_loss")
    if not (loss > 0 and abs(loss - l32) < 0.05 * l32): bad.append(f"{v}/{c}/{d}: loss {loss} vs f32 {l32}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# shellcheck disable=SC2086
launch 2 pipeline $tiny --micro-batches 3 -C mpi,ring -d f32,f16,bf16 -o "$out/p2" >"$out/p2.txt" 2>&1
ok $? "2 stages, m=3: every schedule x f32/f16/bf16 x mpi/ring passes its check"
halves "$out/p2/pipeline.jsonl"
ok $? "2 stages: 16-bit bytes per step (sent and model), kept activations and stash exactly half of f32's"
grep -q ' f16 ' "$out/p2.txt" && grep -q ' bf16 ' "$out/p2.txt"
ok $? "the table's rows carry their dtype"

# shellcheck disable=SC2086
launch 4 pipeline $tiny --stages 2 --dp 2 --micro-batches 3 -C mpi,ring -d f32,f16,bf16 -o "$out/dp" \
  >"$out/dp.txt" 2>&1
ok $? "2 stages x 2 replicas: every schedule x dtype x mpi/ring passes"
halves "$out/dp/pipeline.jsonl"
ok $? "2 x 2: boundary tensors and the replicas' 16-bit all-reduce: bytes exactly half of f32's"

# shellcheck disable=SC2086
launch 2 pipeline $tiny --micro-batches 3 -d f16,bf16 --optim adamw --recompute --schedule gpipe,1f1b,pipedream \
  -o "$out/adamw" >"$out/adamw.txt" 2>&1
ok $? "-d f16,bf16 with AdamW and --recompute passes (pipedream too)"

# An overflow that only the last rank (stage 1 of replica 1) sees at step 0 (SL_TEST_CORRUPT=1)
# must skip the step on every stage and replica: rank 0, which saw none, skipped too, the
# replicas stay bit-identical, and the weights, one step short of the reference's, fail (exit 1).
# shellcheck disable=SC2086
SL_TEST_CORRUPT=1 launch 4 pipeline $tiny --stages 2 --dp 2 --micro-batches 3 -d f16 --schedule 1f1b \
  -o "$out/overflow" >"$out/overflow.txt" 2>&1
rc=$?
python3 - "$out/overflow/pipeline.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
m, c = r["metrics"], r["check"]
ok = (c["status"] == "fail" and "0 elements differ between replicas" in c["message"]
      and m["skipped_steps"]["value"] == 1 and m["overflow_seen"]["value"] == 1)
print(c, m["skipped_steps"], m["overflow_seen"], file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "one rank's overflow skips the step on every stage and replica, and the check fails"
[ $rc = 1 ]
ok $? "the run whose step was skipped against the reference exits 1 (rc=$rc)"

# NP|NAME|ARGS: each must exit 2 with one line naming NAME
while IFS='|' read -r np want args; do
  # shellcheck disable=SC2086
  launch "$np" pipeline $tiny $args -o "$out/bad" </dev/null >/dev/null 2>"$out/stderr"
  rc=$?
  [ $rc = 2 ] && [ "$(grep -c '^pipeline:' "$out/stderr")" = 1 ] && grep -q -- "$want" "$out/stderr"
  ok $? "$args on $np ranks -> exit 2 naming $want (rc=$rc)"
done <<'CASES'
2|--compute sleep|-d f16 --compute sleep --schedule gpipe
1|accepts f32|-d f8
CASES

done_testing
