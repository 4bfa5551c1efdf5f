#!/bin/bash
# pipeline: every schedule on 1-4 stages (and 2 stages x 2 replicas), with m = 1, p and a value
# not divisible by p, passes its check (gpipe, 1f1b, interleaved: serial full-batch training;
# pipedream: the one-process simulation of its own schedule); layers not divisible by the stages;
# micro-batches in flight equal the formula; the text timeline of a small case; sleep mode's row
# has no loss; bad inputs exit 2.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction calibrates GEMMs and alpha-beta for every row (seconds under the
# sanitizers): off here, but for the one run at the end that tests it.
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
tiny="--layers 9 --width 12 --inputs 6 --outputs 3 --batch 7 -n 2 -w 1 --baseline 0"

rows_ok() { # rows_ok FILE: every row passes and its in-flight peak per stage equals the formula
  python3 - "$1" <<'PY'
import json, sys
bad = []
for r in map(json.loads, open(sys.argv[1])):
    v, p = r["variant"], r["params"]
    if r["check"]["status"] != "pass": bad.append(f"{v}: {r['check']}")
    if v != "interleaved" and p["inflight_stages"] != p["inflight_formula"]:
        bad.append(f"{v} m={p['micro_batches']}: in flight {p['inflight_stages']} != {p['inflight_formula']}")
    for k in ("bubble", "bubble_frac", "bubble_formula", "activ_peak", "bytes_model"):
        if r["metrics"].get(k, {}).get("value") is None and not (k == "bubble" and p["stages"] == 1):
            bad.append(f"{v}: {k} missing")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

for p in 1 2 3 4; do
  for m in $(printf '%s\n' 1 $p $((p + 1)) | sort -un); do
    d="$out/p${p}m$m"
    # shellcheck disable=SC2086
    launch $p pipeline $tiny --micro-batches $m -o "$d" >"$d.txt" 2>&1
    rc=$?
    ok $rc "p=$p m=$m: every schedule equals its reference (9 layers)"
    [ $rc = 0 ] || tail -5 "$d.txt" | sed 's/^/#   /' >&2
    rows_ok "$d/pipeline.jsonl"
    ok $? "p=$p m=$m: rows pass; in-flight micro-batches per stage equal the formula"
  done
done
# shellcheck disable=SC2086
launch 4 pipeline $tiny --stages 2 --dp 2 --micro-batches 3 -C mpi,ring -o "$out/dp" >"$out/dp.txt" 2>&1
ok $? "2 stages x 2 replicas, m=3, mpi and ring all-reduce: every schedule passes"
rows_ok "$out/dp/pipeline.jsonl"
ok $? "2 x 2: in-flight counts equal the formula"
# shellcheck disable=SC2086
launch 2 pipeline $tiny --micro-batches 3 --recompute --balance 8,1 --schedule gpipe,1f1b,pipedream \
  -o "$out/rc" >"$out/rc.txt" 2>&1
ok $? "--recompute with --balance 8,1 passes"
python3 - "$out/p2m3/pipeline.jsonl" "$out/rc/pipeline.jsonl" <<'PY'
import json, sys
a = {r["variant"]: r for r in map(json.loads, open(sys.argv[1]))}
b = {r["variant"]: r for r in map(json.loads, open(sys.argv[2]))}
g, f = a["gpipe"]["metrics"]["activ_peak"]["value"], a["1f1b"]["metrics"]["activ_peak"]["value"]
pd = a["pipedream"]["metrics"]
ok = f < g and pd["stash_bytes"]["value"] == pd["stash_formula"]["value"] and pd["drift"]["value"] is not None
sys.exit(0 if ok and b["gpipe"]["metrics"]["recompute"]["value"] is not None else 1)
PY
ok $? "1f1b keeps fewer activation bytes than gpipe; stash bytes equal (p-s) versions; recompute recorded"

launch 2 pipeline $tiny --micro-batches 3 --schedule gpipe,1f1b -o "$out/tl" >"$out/tl.txt" 2>&1
cat >"$out/want" <<'TXT'
# s0 F0 F1 F2 . . . B0 - B1 - B2 -
# s1 . F0 F1 F2 B0 - B1 - B2 - . .
# s0 F0 F1 . . B0 - F2 B1 - . B2 -
# s1 . F0 B0 - F1 B1 - F2 B2 - . .
TXT
grep '^# s[0-9]' "$out/tl.txt" | diff - "$out/want" >&2
ok $? "the text timeline of gpipe and 1f1b on p=2, m=3 is the expected schedule"

# shellcheck disable=SC2086
launch 2 pipeline $tiny --micro-batches 3 --schedule gpipe --compute sleep -o "$out/sleep" >"$out/sleep.txt" 2>&1
[ $? = 0 ] && grep -q '"compute_mode":"sleep"' "$out/sleep/pipeline.jsonl" && grep -q '"status":"pass"' "$out/sleep/pipeline.jsonl"
ok $? "--compute sleep: the row says so and the weights from the real-compute replay pass"
python3 - "$out/sleep/pipeline.jsonl" "$out/p2m3/pipeline.jsonl" <<'PY'
import json, sys
loss = lambda f: [r["metrics"]["final_loss"]["value"] for r in map(json.loads, open(f))]
slept, real = loss(sys.argv[1]), loss(sys.argv[2])
sys.exit(0 if slept == [None] and real and all(x is not None and x > 0 for x in real) else 1)
PY
ok $? "--compute sleep: no loss in the row (its timed steps compute none; n/a), real compute's rows have one"

# NP|NAME|ARGS: each must exit 2 with a message naming NAME
while IFS='|' read -r np want args; do
  # shellcheck disable=SC2086
  launch "$np" pipeline $tiny $args -o "$out/bad" </dev/null >/dev/null 2>"$out/stderr"
  rc=$?
  [ $rc = 2 ] && grep -q -- "$want" "$out/stderr"
  ok $? "$args on $np ranks -> exit 2 naming $want (rc=$rc)"
done <<'CASES'
2|--micro-batches|--micro-batches 0
2|--micro-batches|--micro-batches 8
2|--stages|--stages 10
3|--stages|--stages 2
3|--dp|--dp 2
2|--virtual|--schedule 1f1b --virtual 2
2|--balance|--balance 2,2
1|--schedule|--schedule zigzag
CASES

# The step predicted from the run's primitives (perf_model.h), every schedule on 2 stages: each
# row carries it, fits the point-to-point exchange its stages use, pred_step = pred_compute +
# pred_exposed + pred_idle, and in the flushing schedules a stage waits for its neighbour
# (pred_idle > 0, the bubble; pipedream's middle step of its stream has the earlier steps'
# messages there at its start)
# shellcheck disable=SC2086
env -u SL_NO_PREDICT "$top/scripts/sl-launch" -np 2 "$top/bin/pipeline" $tiny -m 2 -o "$out/pred" >"$out/pred.txt" 2>&1
ok $? "prediction: pipeline exits 0"
python3 "$top/t/lib/train_rows.py" pred "$out/pred/pipeline.jsonl" gpipe=p2p 1f1b=p2p interleaved=p2p pipedream=p2p
ok $? "prediction: every schedule's row carries the predicted step and its arithmetic"
python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if len(rows)==4 and all(r["metrics"]["pred_idle"]["value"]>0 for r in rows if r["variant"]!="pipedream") else 1)' "$out/pred/pipeline.jsonl"
ok $? "prediction: gpipe's, 1f1b's and interleaved's predicted steps have a bubble (pred_idle > 0)"

done_testing
