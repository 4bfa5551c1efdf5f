#!/bin/bash
# mae_threads on 1, 2 and 3 ranks: every non-racy variant must pass its exact check, the
# racy one must be reported (not asserted), rows must validate, and the table must show time,
# speedup and GB/s. Also --check 0 marks rows skipped, and --trace writes a valid trace.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

for np in 1 2 3; do
  dir="$out/np$np"
  launch "$np" mae_threads --threads 1,2 -n 2 -w 1 --samples 50021 --features 7 -d all -o "$dir" >"$dir.txt" 2>&1
  rc=$?
  ok $rc "mae_threads on $np rank(s) exits 0"
  [ $rc = 0 ] || sed 's/^/#   /' "$dir.txt" >&2
  "$top/scripts/validate" rows "$dir/mae_threads.jsonl" --min-rows 24 >/dev/null
  ok $? "np=$np: rows validate against the schema"
  "$top/scripts/validate" manifest "$dir/manifest.json" >/dev/null
  ok $? "np=$np: manifest validates"
  python3 - "$dir/mae_threads.jsonl" "$np" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
np = int(sys.argv[2])
variants = {"serial", "racy", "mutex", "atomic", "partial", "openmp"}
seen = set()
bad = []
for r in rows:
    if r["ranks"] != np:
        bad.append(f"ranks {r['ranks']} != {np}")
    v = r["variant"]
    if v == "stream_read":
        # the ceiling reads at least the data's bytes, and 64 MiB per rank (from memory)
        data = 50021 * (7 + 1) * (4 if r["dtype"] == "f32" else 8)
        if r["params"]["bytes"] < max(data, np * (64 << 20)) or r["params"]["probe_reads"] != "f64":
            bad.append(f"probe reads {r['params']['bytes']} bytes for {data} bytes of data on {np} ranks")
        continue
    seen.add((v, r["dtype"]))
    status = r["check"]["status"]
    if v == "racy":
        if status != "not_asserted":
            bad.append(f"racy check is {status}, expected not_asserted")
        if "lost_updates" not in r["metrics"]:
            bad.append("racy row has no lost_updates")
    else:
        if status != "pass" or r["metrics"]["diff_from_serial"]["value"] != 0:
            bad.append(f"{v} {r['dtype']} threads={r['params']['threads']}: {status}")
    for m in ("speedup", "eff_bw", "read_bw"):
        if r["metrics"].get(m, {}).get("value") is None:
            bad.append(f"{v}: metric {m} missing")
want = {(v, d) for v in variants for d in ("f32", "f64")}
if seen != want:
    bad.append(f"variants x dtypes seen {sorted(seen)}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ok $? "np=$np: every non-racy variant passes, racy is reported not asserted, both dtypes"
  grep -q 'time.*speedup.*eff_bw.*read_bw' "$dir.txt" && grep -q ' GB/s ' "$dir.txt"
  ok $? "np=$np: the table shows time, speedup and GB/s"
  grep -q "every check passed" "$dir.txt"
  ok $? "np=$np: verdict line"
  python3 - "$dir/mae_threads.jsonl" "$dir.txt" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
notes = re.findall(r"racy, (\d+) threads? x \d+ ranks?: wrong in (\d+) of (\d+) iterations \(not asserted\)", open(sys.argv[2]).read())
bad = []
racy = [r for r in rows if r["variant"] == "racy"]
if len(notes) != len(racy): bad.append(f"{len(notes)} racy verdict lines for {len(racy)} racy rows")
for r, (threads, wrong, n) in zip(racy, notes):
    m = {k: v["value"] for k, v in r["metrics"].items()}
    # one row, one iteration: the value, its diff and its lost fraction are the last timed
    # iteration's (the sum and the counter race separately, so one can lose updates while the
    # other does not: only the bounds and the iteration count are asserted)
    if not 0 <= m["lost_updates"] <= 1: bad.append(f"racy: lost fraction {m['lost_updates']}")
    if int(wrong) != m["wrong_iterations"] or int(n) != 2 or int(threads) != r["params"]["threads"]:
        bad.append(f"racy verdict {threads} threads {wrong}/{n} vs row {m['wrong_iterations']}")
    if m["wrong_iterations"] == 0 and m["diff_from_serial"] != 0: bad.append("racy: last iteration wrong but no wrong iteration counted")
for r in rows:
    if r["variant"] == "stream_read": continue
    m = {k: v["value"] for k, v in r["metrics"].items()}
    t = r["time"]["median"] if "time" in r and "median" in r["time"] else None
    if t is not None and abs(m["ns_per_update"] * r["params"]["samples"] - t) > 1e-9 * t: bad.append(f"{r['variant']}: ns_per_update x samples != time")
    if not (0 <= m["combine_time"] < 10): bad.append(f"{r['variant']}: combine_time {m['combine_time']}")
    if r["variant"] != "racy" and m["wrong_iterations"] != 0: bad.append(f"{r['variant']}: wrong_iterations {m['wrong_iterations']}")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  ok $? "np=$np: the racy row agrees with itself and its verdict line; ns per update, combine time"
done

# oversubscription: 3 ranks, and 1 rank x 3 threads, against the CPUs this test may use
cpus=$(nproc)
launch 3 mae_threads --threads 1 -n 1 -w 0 --samples 1000 --variants partial -o "$out/over" >"$out/over.txt" 2>&1
python3 - "$out/over/manifest.json" "$out/over.txt" "$cpus" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read(); cpus = int(sys.argv[3])
want = 3 > cpus
said = "oversubscribed: 3 ranks on a node with" in text
ok = m["ranks_per_node"] == 3 and m["oversubscribed"] == want and said == want and \
     (m["cpus_per_node"] == cpus or not want)
print(f"manifest {m['ranks_per_node']} ranks, {m['cpus_per_node']} cpus, oversubscribed {m['oversubscribed']}; note {said}; nproc {cpus}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
ok $? "3 ranks: the manifest records ranks and CPUs per node, and oversubscription is noted exactly when 3 > CPUs"
bin_threads=$((cpus + 1))
launch 1 mae_threads --threads "$bin_threads" -n 1 -w 0 --samples 1000 --variants partial -o "$out/overt" >"$out/overt.txt" 2>&1
grep -q "oversubscribed: 1 rank x $bin_threads threads on a node with $cpus CPU" "$out/overt.txt"
ok $? "1 rank x (CPUs + 1) threads: oversubscription noted with the thread count"
! grep -q "bind-to" "$out/overt.txt"
ok $? "no binding advice when binding cannot work"

launch 2 mae_threads --threads 2 -n 1 -w 0 --samples 1000 --variants partial --check 0 --trace -o "$out/nocheck" >/dev/null 2>&1
ok $? "--check 0 --trace runs"
python3 - "$out/nocheck/mae_threads.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if all(r["check"]["status"] in ("skipped", "none") for r in rows) else 1)
PY
ok $? "--check 0: rows are marked skipped"
"$top/scripts/validate" trace "$out/nocheck/mae_threads.trace.json" >/dev/null
ok $? "--trace: one valid trace for the run"

done_testing
