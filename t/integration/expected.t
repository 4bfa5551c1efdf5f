#!/bin/bash
# expected.t — expected values beside measured ones (docs/expected.md): the compiled table is
# what scripts/expected-table makes of results/expected (a stale or malformed table is caught);
# on this machine's CPU, mae_threads and kernels rows carry expected = this run's probe and
# of_expected = measured / it, GEMM rows say "no expected value" and why, each program's header
# names what the hardware matched (a link speed from a sysfs tree made here); scripts/report
# prints the fractions. (The GPU and link figures' rules: t/unit/expected.t; rows across two
# hosts with a known link: t/integration/pairs.t.)
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1

scripts/expected-table --check
ok $? "common/expected_table.c is what scripts/expected-table makes of results/expected/*.json"
mkdir -p "$out/copy/scripts" "$out/copy/common" "$out/copy/results"
cp scripts/expected-table "$out/copy/scripts/" && cp -r results/expected "$out/copy/results/" &&
  cp common/expected_table.c "$out/copy/common/"
sed -i 's/"value": 989,/"value": 990,/' "$out/copy/results/expected/nvidia-h100-sxm.json"
"$out/copy/scripts/expected-table" --check 2>"$out/err"
[ $? = 1 ] && grep -q "out of date" "$out/err"
ok $? "a figure changed in its JSON file without regenerating: --check exit 1: $(cat "$out/err")"
sed -i 's/"source": "NVIDIA H100[^"]*FP32 67 teraFLOPS"/"source": ""/' "$out/copy/results/expected/nvidia-h100-sxm.json"
"$out/copy/scripts/expected-table" 2>"$out/err"
[ $? = 2 ] && grep -q "nvidia-h100-sxm.json: figures.f32_tflops" "$out/err"
ok $? "a figure without a source: exit 2 naming the file and figure: $(cat "$out/err")"

# a host with one 100 Gb/s interface that is up, as sysfs shows it
sys="$out/sys"
mkdir -p "$sys/class/net/eth7/device"
echo 100000 >"$sys/class/net/eth7/speed"
echo up >"$sys/class/net/eth7/operstate"
export SL_EXPECTED_SYSFS="$sys" SL_RUN_ID=expected-$$
mae_threads -n 2 -w 1 --samples 262144 --threads 1,2 -o "$out/res" >"$out/mae.log" 2>&1 &&
  kernels -n 2 -w 1 --gemm-n 128 --elems 65536 --copy-bytes 8M --kernels gemm,axpby,relu -o "$out/res" >"$out/kernels.log" 2>&1 &&
  launch 2 allreduce -C mpi -b 1K -e 64K -f 64 -n 2 -w 1 -o "$out/res" >"$out/allreduce.log" 2>&1
ok $? "mae_threads, kernels and allreduce (2 ranks) run"
grep -qx "# expected values (results/expected): no GPU; link 100000 Mb/s (eth7): nic-100g.json; cpu: this run's memory probe" "$out/allreduce.log"
ok $? "the header names the link found and its file: $(grep '^# expected' "$out/allreduce.log")"
invalid=0
for p in mae_threads kernels allreduce; do
  "$top/scripts/validate" rows "$out/res/$p.jsonl" >/dev/null || { invalid=1; diag "$p rows invalid"; }
done
ok $invalid "the rows with the expected-value fields are valid results rows"
python3 - "$out/res" <<'PY'
import json, sys
rows = {p: [json.loads(l) for l in open(f"{sys.argv[1]}/{p}.jsonl")] for p in ("mae_threads", "kernels", "allreduce")}
bad = []
def m(r, k):
    return (r["metrics"].get(k) or {}).get("value")
for r in rows["mae_threads"]:
    if r["variant"] == "stream_read":
        continue
    p = r["params"]
    if (p.get("expected_source") != "measured: this run's read_bw" or m(r, "expected") != m(r, "read_bw")
            or abs(m(r, "of_expected") - m(r, "eff_bw") / m(r, "read_bw")) > 1e-12):
        bad.append(f"mae_threads {r['variant']}: {p.get('expected_source')} {m(r, 'expected')} {m(r, 'of_expected')}")
for r in rows["kernels"]:
    p = r["params"]
    if r["variant"] == "gemm" and not str(p.get("expected_source")).startswith("no expected value: CPU"):
        bad.append(f"kernels gemm: {p.get('expected_source')}")
    if r["variant"] in ("axpby", "relu") and (p.get("expected_source") != "measured: this run's peak_gbps"
                                               or abs(m(r, "of_expected") - m(r, "gbps") / m(r, "peak_gbps")) > 1e-12):
        bad.append(f"kernels {r['variant']}: {p.get('expected_source')}")
ar = [r for r in rows["allreduce"] if "busbw" in r["metrics"]]
if not ar or any(r["params"].get("expected_source") != "no expected value: one host, cpu buffers (see of_copy)"
                 or "expected" in r["metrics"] for r in ar):
    bad.append("allreduce on one host: " + str({r["params"].get("expected_source") for r in ar}))
print("# " + ("; ".join(bad) if bad else "as expected"))
sys.exit(1 if bad else 0)
PY
ok $? "mae_threads against its read probe, kernels' memory-bound rows against the copy probe (of_expected = measured / probe), GEMM on a CPU and busbw on one host: 'no expected value' and why"
scripts/report "$out/res" >"$out/report.log" 2>&1
grep -q "^# against expected values" "$out/report.log" &&
  grep -Eq "^ +mae_threads +partial +f64 +- +eff_bw +[0-9.]+ +[0-9.]+ +[0-9.]+%  measured: this run's read_bw$" "$out/report.log" &&
  grep -Eq "^ +kernels +gemm +f32 .* n/a +n/a  no expected value: CPU" "$out/report.log"
ok $? "scripts/report prints each group's best row against its expected value, in percent"
# The expected-value annotations are not part of a row's identity: a baseline written before
# them (or on a machine the table does not know) still matches the new rows in scripts/compare.
python3 - "$out/res/mae_threads.jsonl" "$out/stripped.jsonl" <<'PY'
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        for k in ("expected_of", "expected_source"):
            r["params"].pop(k, None)
        for k in ("expected", "of_expected"):
            r["metrics"].pop(k, None)
        f.write(json.dumps(r) + "\n")
PY
scripts/compare "$out/stripped.jsonl" "$out/res/mae_threads.jsonl" >"$out/compare.log" 2>&1
rc=$?
n=$(wc -l <"$out/res/mae_threads.jsonl")
[ $rc = 0 ] && grep -q "over $n matched row(s); verdict: no regression" "$out/compare.log"
ok $? "scripts/compare matches all $n rows against the same rows without the annotations: $(tail -1 "$out/compare.log")"
done_testing
