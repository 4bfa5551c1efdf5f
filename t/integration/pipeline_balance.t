#!/bin/bash
# pipeline --balance on 2 ranks: every schedule (gpipe, 1f1b and pipedream per stage, interleaved
# per chunk; three runs each; bf16 once) passes its check, with the one-rank baseline on:
# that run trains the whole model on one stage (one_rank_layers = --layers) and scaling_eff is
# measured. A balance that is not a comma-separated list of counts >= 1, one per stage (or
# chunk) summing to --layers, exits 2 with one line naming --balance; so does --virtual 0.
. "$(dirname "$0")/../lib/common.sh"
# The step's prediction is pipeline.t's, checkpoint.t's, vdnn.t's and megatron_mlp.t's to test;
# here it would only cost time (a calibration per row, seconds under the sanitizers).
export SL_NO_PREDICT=1
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
# 5 layers: unequal stages (3,2) and p x v = 4 chunks (2,1,1,1); the baseline is on (the default)
small="--layers 5 --width 32 --inputs 32 --outputs 32 --batch 8 -m 2 -n 1 -w 1"

rows_ok() { # rows_ok FILE N: N rows, each passing, each baseline one stage of all 5 layers
  python3 - "$1" "$2" <<'PY'
import json, sys
rows, bad = [json.loads(l) for l in open(sys.argv[1])], []
if len(rows) != int(sys.argv[2]): bad.append(f"{len(rows)} rows, expected {sys.argv[2]}")
for r in rows:
    v, p, m = f"{r['variant']}/{r['dtype']}", r["params"], r["metrics"]
    if r["check"]["status"] != "pass": bad.append(f"{v}: {r['check']}")
    if p.get("one_rank_layers") != p["layers"]: bad.append(f"{v}: one_rank_layers {p.get('one_rank_layers')}")
    if m["scaling_eff"]["value"] is None or m["one_rank_step"]["value"] is None: bad.append(f"{v}: no eff")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
}

# NAME|RUNS|ROWS|ARGS (three runs: the baseline's out-of-range reads crashed only some runs)
while IFS='|' read -r name runs nrows args; do
  for i in $(seq "$runs"); do
    d="$out/$name$i"
    # shellcheck disable=SC2086
    launch 2 pipeline $small $args -o "$d" </dev/null >"$d.txt" 2>&1
    rc=$?
    [ $rc = 0 ] && rows_ok "$d/pipeline.jsonl" "$nrows"
    ok $? "$args, run $i: exit 0, every check passes, the baseline trains all 5 layers (rc=$rc)"
    [ $rc = 0 ] || tail -5 "$d.txt" | sed 's/^/#   /' >&2
  done
done <<'CASES'
stage|3|3|--balance 3,2 --schedule gpipe,1f1b,pipedream
chunk|3|1|--balance 2,1,1,1 --schedule interleaved
mixed|1|2|--balance 1,4 --schedule gpipe,1f1b -d bf16
CASES

# NP|NAME|ARGS: each must exit 2 with one line of the program's naming NAME, and write no results.
# On one rank the program runs alone (no launcher), so its stderr is that one line; the cases
# whose outcome depends on the stage count run on 2.
nbad=0
while IFS='|' read -r np want args; do
  nbad=$((nbad + 1))
  if [ "$np" = 1 ]; then
    # shellcheck disable=SC2086
    pipeline $small $args -o "$out/bad$nbad" </dev/null >/dev/null 2>"$out/stderr"
  else
    # shellcheck disable=SC2086
    launch "$np" pipeline $small $args -o "$out/bad$nbad" </dev/null >/dev/null 2>"$out/stderr"
  fi
  rc=$?
  mine=$(grep -c '^pipeline:' "$out/stderr") all=$(wc -l <"$out/stderr")
  [ $rc = 2 ] && [ "$mine" = 1 ] && { [ "$np" != 1 ] || [ "$all" = 1 ]; } &&
    grep -q "^pipeline: $want" "$out/stderr" && [ ! -e "$out/bad$nbad" ]
  ok $? "$args on $np rank(s) -> exit 2, one line naming $want (rc=$rc): $(grep '^pipeline:' "$out/stderr" | head -1)"
done <<'CASES'
2|--balance|--schedule gpipe --balance 3,2,
1|--balance|--schedule gpipe --balance ,5
1|--balance|--schedule gpipe --balance 3,,2
1|--balance|--schedule gpipe --balance 0,5
1|--balance|--schedule gpipe --balance 3,-2
2|--balance|--schedule gpipe --balance 3,1
2|--balance|--schedule gpipe --balance 1,1,3
2|--balance|--schedule interleaved --balance 3,2
1|--virtual|--schedule interleaved --virtual 0
CASES

done_testing
