#!/bin/bash
# make-report-run.sh — remakes t/data/report-run/, the small committed run that
# t/integration/report_html.t draws: run_all.sh --quick on 2 ranks for allreduce, ddp, zero and
# pipeline, then pipeline in sleep mode on its default model (1 ms operations, where the bubble
# comes close to the formula) at m = 1, 2, 4, 8 and once more with --trace (the per-stage
# timeline). Run from the repository root after make; it takes a few minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=t/data/report-run
rm -rf "$out"
./run_all.sh --quick --np 2 --only allreduce,ddp,zero,pipeline --out "$out"
run_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' "$out/manifest.json")
pipe=(-w 1 --compute sleep --schedule gpipe,1f1b --baseline 0 -o "$out" -q)
for m in 1 2 4 8; do
  SL_RUN_ID=$run_id scripts/sl-launch -np 2 bin/pipeline "${pipe[@]}" --micro-batches "$m" -n 3
done
SL_RUN_ID=$run_id scripts/sl-launch -np 2 bin/pipeline "${pipe[@]}" --micro-batches 4 --trace -n 1
echo "wrote $out"
