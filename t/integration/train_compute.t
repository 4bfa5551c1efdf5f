#!/bin/bash
# train_compute: sleep mode (--compute sleep) belongs to the training layer (train/sl_compute.h),
# not to a technique: pipeline takes it by a flag in its sl_technique, and --help lists it in the
# layer's own "compute" group; a technique without the flag (ddp) refuses it; its checks are the
# layer's. The driver replays the steps with real compute whether or not the check runs, so a
# row computed from the weights after the timed steps (pipedream's drift from serial training)
# is the same with --compute sleep as with real compute, also with -c 0.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
tiny="--layers 4 --width 12 --inputs 6 --outputs 3 --batch 8 -m 2 -n 2 --baseline 0"

pipeline --help 2>&1 | awk '/^compute options:/ {g = 1; next} /^$/ {g = 0} g && /--compute/ {found = 1}
  /^pipeline options:/ {p = 1} p && /--compute / {own = 1} END {exit !(found && !own)}'
ok $? "pipeline --help: --compute is in the training layer's compute group, not pipeline's options"

launch 1 ddp --layers 2 --width 8 --inputs 4 --outputs 2 --batch 4 -n 1 -w 1 --compute sleep -o "$out/ddp" \
  </dev/null >/dev/null 2>"$out/ddp.err"
rc=$?
[ $rc = 2 ] && grep -q -- "--compute" "$out/ddp.err"
ok $? "ddp, which does not set .sleep_mode, refuses --compute with exit 2 (rc=$rc)"

# shellcheck disable=SC2086
launch 2 pipeline $tiny -w 0 --compute sleep -o "$out/bad" </dev/null >/dev/null 2>"$out/bad.err"
rc=$?
[ $rc = 2 ] && [ "$(grep -c '^pipeline:' "$out/bad.err")" = 1 ] && grep -q -- "--compute sleep: needs -w 1" "$out/bad.err"
ok $? "--compute sleep -w 0: exit 2, one line naming --compute sleep and -w (rc=$rc)"

for mode in real sleep; do
  # shellcheck disable=SC2086
  launch 2 pipeline $tiny -w 1 -c 0 --schedule pipedream --compute $mode -o "$out/$mode" >"$out/$mode.txt" 2>&1
  ok $? "pipedream, -c 0, --compute $mode runs"
done
python3 - "$out/real/pipeline.jsonl" "$out/sleep/pipeline.jsonl" <<'PY'
import json, sys
real, slept = (json.loads(open(f).readline()) for f in sys.argv[1:])
d = [r["metrics"]["drift"]["value"] for r in (real, slept)]
ok = d[0] is not None and d[0] > 0 and d[0] == d[1] and slept["params"]["compute_mode"] == "sleep"
print(f"drift real {d[0]}, sleep {d[1]}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "--compute sleep -c 0: pipedream's drift is the real-compute run's, bit for bit (the replay ran)"

done_testing
