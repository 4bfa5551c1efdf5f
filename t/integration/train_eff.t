#!/bin/bash
# train_eff: the one definition of eff (scaling_eff) that the training driver gives every
# program: the speedup over one rank training the same global batch, divided by the ranks. On 2
# ranks, for pipeline (2 stages: each rank holds half the model and runs the whole batch) and
# megatron_mlp (t = 1 x d = 2 and t = 2 x d = 1), every row's one-rank run trained the row's
# global batch (one_rank_batch = global_batch) on the whole model (one_rank_mem_params holds every
# parameter), and eff is one_rank_step / (ranks x step) from the row's own fields; a row above 1
# says superlinear, and the note line above the table says what eff is. No timing is asserted:
# whether a row comes out above 1 depends on the machine, what it must then say does not.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

launch 2 pipeline --layers 4 --width 32 --inputs 32 --outputs 32 --batch 8 -m 2 -n 2 -w 1 \
  --schedule gpipe,1f1b -o "$out/pipe" >"$out/pipe.txt" 2>&1
ok $? "pipeline, 2 stages, baseline on: runs"
launch 2 megatron_mlp --blocks 1 --hidden 32 --batch 4 -n 2 -w 1 --variants plain -o "$out/mm" \
  >"$out/mm.txt" 2>&1
ok $? "megatron_mlp, t = 1 and 2 on 2 ranks, baseline on: runs"

for prog in pipe:pipeline mm:megatron_mlp; do
  dir=${prog%%:*} name=${prog#*:}
  python3 - "$out/$dir/$name.jsonl" "$out/$dir.txt" <<'PY'
import json, sys
rows, bad = [json.loads(l) for l in open(sys.argv[1])], []
text = open(sys.argv[2]).read()
if len(rows) != 2: bad.append(f"{len(rows)} rows")
for r in rows:
    p, m = r["params"], r["metrics"]
    v = f"{r['variant']} t={p.get('tp', '-')}"
    if r["check"]["status"] != "pass": bad.append(f"{v}: {r['check']}")
    # the same global work: every sample of the step, on one rank holding the whole model
    if p.get("one_rank_batch") != p["global_batch"]:
        bad.append(f"{v}: one_rank_batch {p.get('one_rank_batch')} != global_batch {p['global_batch']}")
    held = m.get("one_rank_mem_params", {}).get("value")
    if held is None or held < 4 * p["params"]:
        bad.append(f"{v}: one_rank_mem_params {held} < the model's {4 * p['params']} bytes")
    eff, one, step = m["scaling_eff"]["value"], m["one_rank_step"]["value"], r["time"]["median"]
    if eff is None or one is None or abs(eff - one / (r["ranks"] * step)) > 1e-9 * eff:
        bad.append(f"{v}: eff {eff} is not one_rank_step {one} / ({r['ranks']} x step {step})")
    elif (eff > 1) != (p.get("eff_note") == "superlinear"):
        bad.append(f"{v}: eff {eff} with eff_note {p.get('eff_note')}")
    elif eff > 1 and f"{r['variant']}, {r['collective']}: eff" not in text:
        bad.append(f"{v}: eff {eff} without its superlinear note line")
note = [l for l in text.splitlines() if l.startswith("# eff: ")]
if len(note) != 1 or "same global batch" not in note[0] or "divided by the 2 ranks" not in note[0] \
        or "superlinear" not in note[0]:
    bad.append(f"eff note line: {note}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ok $? "$name: the one-rank run trained the global batch on the whole model; eff = one_rank_step / (2 x step); the note says so"
done

done_testing
