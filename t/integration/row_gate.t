#!/bin/bash
# The data the regression gate needs in every row (results/schema.md, version 2): the samples'
# sketch (all of them up to 32, else 32 quantiles), the gate metric where each program promises
# one, rows of the training programs valid under the v2 rules, and the SL_TEST_SLOWDOWN switch's
# usage errors and notice. Exact assertions only: no timing is judged.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
V="$top/scripts/validate"

# --- samples: -n 5 keeps all five in iteration order, -n 40 keeps 32 quantiles --------------
mae="--threads 1 --variants partial -w 0 --samples 20011 --features 3"
for n in 5 40; do
  launch 1 mae_threads $mae -n $n -o "$out/n$n" >"$out/n$n.txt" 2>&1
  ok $? "mae_threads -n $n exits 0"
  "$V" rows "$out/n$n/mae_threads.jsonl" >/dev/null
  ok $? "-n $n: rows validate (v2: samples and gate)"
done
python3 - "$out/n5/mae_threads.jsonl" "$out/n40/mae_threads.jsonl" <<'PY'
import json, sys
bad = []
for path, n, kind in ((sys.argv[1], 5, "all"), (sys.argv[2], 40, "quantiles")):
    for r in map(json.loads, open(path)):
        t = r["time"]
        if r["schema_version"] != 2 or r["iterations"]["timed"] != n:
            bad.append(f"{path}: version {r['schema_version']}, timed {r['iterations']['timed']}")
        if len(t["samples"]) != min(n, 32) or t["samples_kind"] != kind:
            bad.append(f"{r['variant']} -n {n}: {len(t['samples'])} samples, kind {t['samples_kind']}")
        if kind == "all" and (min(t["samples"]) != t["min"] or max(t["samples"]) != t["max"]):
            bad.append(f"{r['variant']} -n {n}: samples' min/max are not time.min/max")
        if kind == "quantiles" and (t["samples"] != sorted(t["samples"]) or t["samples"][0] < t["min"]):
            bad.append(f"{r['variant']} -n {n}: quantiles not ascending within min..max")
        want = "bw_fraction" if r["variant"] != "stream_read" else None
        if r["gate"] != want:
            bad.append(f"{r['variant']}: gate {r['gate']}, expected {want}")
print("\n".join("# " + b for b in bad))
sys.exit(1 if bad else 0)
PY
ok $? "samples: 5 in order (kind all, min/max exact), 40 -> 32 ascending quantiles; mae gates bw_fraction, stream_read none"

# --- gate metrics where promised --------------------------------------------------------------
launch 2 allreduce -C mpi,ring,rhd -b 64 -e 4096 -f 8 -n 3 -w 1 -o "$out/ar" >"$out/ar.txt" 2>&1
ok $? "allreduce -C mpi,ring,rhd exits 0"
launch 2 allreduce -C ring -b 64 -e 64 -n 3 -w 1 -o "$out/ar1" >"$out/ar1.txt" 2>&1
ok $? "allreduce -C ring (no library reference) exits 0"
"$V" rows "$out/ar/allreduce.jsonl" >/dev/null && "$V" rows "$out/ar1/allreduce.jsonl" >/dev/null
ok $? "allreduce rows validate (v2)"
python3 - "$out/ar/allreduce.jsonl" "$out/ar1/allreduce.jsonl" <<'PY'
import json, sys
bad, own = [], 0
for r in map(json.loads, open(sys.argv[1])):
    v, m = r["variant"], r["metrics"]
    if v in ("ring", "rhd"):
        own += 1
        if r["gate"] != "vs_mpi" or not m["vs_mpi"]["value"] > 0:
            bad.append(f"{v} {r['params']['bytes']} {r['params']['mode']}: gate {r['gate']}")
    elif v == "mpi":
        if r["gate"] != "of_copy" or not m["of_copy"]["value"] > 0:
            bad.append(f"mpi: gate {r['gate']}")
    elif v == "model":
        want = "plateau_of_membw" if r["collective"] == "mpi" else "plateau_vs_mpi"
        if r["gate"] != want or not m[want]["value"] > 0:
            bad.append(f"model {r['collective']}: gate {r['gate']}, expected {want}")
    elif r["gate"] is not None:
        bad.append(f"{v}: gate {r['gate']}, expected none (the probe)")
for r in map(json.loads, open(sys.argv[2])):
    if r["gate"] is not None or "vs_mpi" in r["metrics"] or "plateau_vs_mpi" in r["metrics"]:
        bad.append(f"-C ring alone: {r['variant']} has gate {r['gate']}")
if own != 2 * 3 * 2 * 2:  # two algorithms x three sizes x two modes x out and in place
    bad.append(f"{own} own rows, expected 24")
print("\n".join("# " + b for b in bad))
sys.exit(1 if bad else 0)
PY
ok $? "allreduce: own rows gate vs_mpi, mpi rows of_copy, own models plateau_vs_mpi, mpi's plateau_of_membw, the probe none; without mpi no vs_mpi"

launch 1 kernels -n 2 -w 0 --kernels gemm,relu,rng_normal --gemm-n 64 --elems 4096 --copy-bytes 8M \
  -o "$out/k" >"$out/k.txt" 2>&1
ok $? "kernels exits 0"
"$V" rows "$out/k/kernels.jsonl" >/dev/null
ok $? "kernels rows validate (v2)"
python3 - "$out/k/kernels.jsonl" <<'PY'
import json, sys
want = {"peak_copy": None, "peak_gemm": None, "gemm": "roof_fraction", "relu": "roof_fraction",
        "rng_normal": "copy_fraction"}
got = {r["variant"]: r["gate"] for r in map(json.loads, open(sys.argv[1]))}
print(f"# {got}")
sys.exit(0 if got == want else 1)
PY
ok $? "kernels: gemm and relu gate roof_fraction, rng_normal copy_fraction, the peaks none"

small="--layers 3 --width 48 --inputs 12 --outputs 5 --bucket-mb 0.004 -n 2 -w 1"
launch 2 ddp $small --batch 4 -C mpi -o "$out/ddp" >"$out/ddp.txt" 2>&1
ok $? "ddp on 2 ranks exits 0"
launch 1 ddp $small --batch 4 --variants sync -C mpi -o "$out/ddp1" >"$out/ddp1.txt" 2>&1
ok $? "ddp on 1 rank exits 0"
python3 - "$out/ddp/ddp.jsonl" "$out/ddp1/ddp.jsonl" <<'PY'
import json, sys
bad = []
for r in map(json.loads, open(sys.argv[1])):
    want = None if r["variant"] == "ps" else "scaling_eff"  # ps has no one-rank form
    if r["gate"] != want:
        bad.append(f"2 ranks {r['variant']}: gate {r['gate']}, expected {want}")
for r in map(json.loads, open(sys.argv[2])):
    if r["gate"] is not None:
        bad.append(f"1 rank {r['variant']}: gate {r['gate']} (its own baseline: none)")
print("\n".join("# " + b for b in bad))
sys.exit(1 if bad else 0)
PY
ok $? "ddp: scaling_eff is the gate on 2 ranks (ps none), no gate on 1 rank"

# --- every row of the other training programs validates under the v2 rules --------------------
launch 2 zero $small --batch 3 -C mpi -o "$out/zero" >/dev/null 2>&1 &&
  launch 2 pipeline --layers 9 --width 12 --inputs 6 --outputs 3 --batch 7 --micro-batches 3 -n 2 -w 1 -o "$out/pipe" >/dev/null 2>&1 &&
  launch 2 halo_conv --image 13x11 --channels 3 --batch 4 --conv-layers 3 -n 2 -w 1 -o "$out/halo" >/dev/null 2>&1 &&
  launch 2 checkpoint --layers 6 --width 16 --inputs 16 --outputs 16 --batch 4 -n 2 -w 1 -o "$out/ck" >/dev/null 2>&1
ok $? "zero, pipeline, halo_conv and checkpoint on 2 ranks exit 0"
for f in "$out/ddp/ddp.jsonl" "$out/ddp1/ddp.jsonl" "$out/zero/zero.jsonl" "$out/pipe/pipeline.jsonl" \
         "$out/halo/halo_conv.jsonl" "$out/ck/checkpoint.jsonl"; do
  "$V" rows "$f" >/dev/null && python3 - "$f" <<'PY'
import json, sys
sys.exit(0 if all(r["gate"] == "scaling_eff" for r in map(json.loads, open(sys.argv[1]))
                  if r["ranks"] > 1 and r["variant"] != "ps") else 1)
PY
  ok $? "$(basename "$f"): rows validate (v2); every 2-rank row (but ps) gates scaling_eff"
done

# --- SL_TEST_SLOWDOWN -------------------------------------------------------------------------
for bad in "mae_threads" "mae_threads:" "mae_threads:0" "mae_threads:-1" "mae_threads:10.5" \
           "mae_threads:x" "mae_threads:0.2s" ":0.2" "mae_threads:nan"; do
  SL_TEST_SLOWDOWN="$bad" "$top/bin/mae_threads" $mae -n 1 -o "$out/bad" >"$out/bad.out" 2>"$out/bad.err"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/bad.err")" = 1 ] && grep -q 'SL_TEST_SLOWDOWN' "$out/bad.err" && [ ! -e "$out/bad" ]
  ok $? "SL_TEST_SLOWDOWN='$bad': exit 2, one line naming it (rc=$rc: $(cat "$out/bad.err"))"
done
SL_TEST_SLOWDOWN=mae_threads:1 launch 1 mae_threads $mae -n 2 -o "$out/slow" >"$out/slow.out" 2>"$out/slow.err"
rc=$?
[ $rc = 0 ] && grep -q '^mae_threads: SL_TEST_SLOWDOWN: .*lengthened by 1 ' "$out/slow.err"
ok $? "SL_TEST_SLOWDOWN=mae_threads:1: runs (rc=$rc) and says so on stderr"
SL_TEST_SLOWDOWN=ddp:0.2 launch 1 mae_threads $mae -n 2 -o "$out/other" >"$out/other.out" 2>"$out/other.err"
rc=$?
[ $rc = 0 ] && ! grep -q SL_TEST_SLOWDOWN "$out/other.err"
ok $? "SL_TEST_SLOWDOWN for another program: off, nothing said (rc=$rc)"

done_testing
