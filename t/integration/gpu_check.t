#!/bin/bash
# gpu_check.t — scripts/gpu-check where no CUDA device is visible (an nvidia-smi that lists none
# comes first on PATH, so that this holds on a GPU machine too): every step is skipped with its
# reason and the exit is 0, nothing is built or run; SL_GPU_CHECK_DRYRUN=1 lists the commands;
# a bad OUTDIR is one line and exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1

mkdir "$out/fakebin"
printf '#!/bin/sh\nexit 0\n' >"$out/fakebin/nvidia-smi"
chmod +x "$out/fakebin/nvidia-smi"
nodev() { PATH="$out/fakebin:$PATH" scripts/gpu-check "$@"; }

nodev "$out/run" >"$out/log" 2>&1
rc=$?
ok $rc "no device: exit 0 (rc=$rc)"
[ $rc = 0 ] || tail -5 "$out/log" | sed 's/^/#   /' >&2
awk -F'\t' 'NR == 1 { next } { n++ } $2 != "skipped" || $6 == "" || $6 == "-" { bad++ }
  END { exit !(n >= 20 && bad == 0) }' "$out/run/summary.tsv"
ok $? "no device: every step in summary.tsv is skipped with a reason ($(($(wc -l <"$out/run/summary.tsv") - 1)) steps)"
grep -q $'^build\tskipped\t.*no CUDA device (nvidia-smi -L lists no GPU)' "$out/run/summary.tsv" &&
  grep -q $'^run_all-ci\tskipped\t.*GPU bring-up' "$out/run/summary.tsv"
ok $? "the reasons name the missing device, the CPU steps' too"
[ ! -e "$out/run/results" ] && [ ! -e "$out/run/cuda" ] && grep -q 'build  *skipped' "$out/run/summary.txt" &&
  grep -q "outputs in $out/run" "$out/log"
ok $? "nothing ran; summary.txt written and the output directory printed"

SL_GPU_CHECK_DRYRUN=1 nodev "$out/dry" >"$out/dry.txt" 2>&1
rc=$?
[ $rc = 0 ] && [ ! -e "$out/dry" ]
ok $? "DRYRUN: exit 0, creates nothing (rc=$rc)"
grep -q $'^build\t[0-9]*s\tmake -j[0-9]* CUDA=1 NCCL=1$' "$out/dry.txt" &&
  grep -q $'^allreduce-nccl-np1\t[0-9]*s\tscripts/sl-launch -np 1 bin/allreduce -B cuda -C nccl ' "$out/dry.txt" &&
  grep -q $'^run_all-quick\t[0-9]*s\t./run_all.sh --quick ' "$out/dry.txt" &&
  grep -q $'^allreduce-ddp-np16\t[0-9]*s\t./run_all.sh --quick --np 16 --only allreduce,ddp ' "$out/dry.txt" &&
  grep -q $'^cuda-kernels\t[0-9]*s\t./run_all.sh --quick --only kernels --np 1 --args \'-B cuda\' ' "$out/dry.txt"
ok $? "DRYRUN lists the build, NCCL, run_all --quick, --np 16 and -B cuda commands"
[ "$(cut -f1 "$out/dry.txt" | sort)" = "$(tail -n +2 "$out/run/summary.tsv" | cut -f1 | sort)" ]
ok $? "DRYRUN lists exactly the steps the summary reports"

# the script's list of programs against the built ones that take --backend (-B)
want=$(for p in bin/*; do [ -x "$p" ] && "$p" --help 2>&1 | grep -q -- '--backend' && echo "cuda-${p##*/}"; done | sort)
got=$(grep -o '^cuda-[a-z_]*' "$out/dry.txt" | sort)
[ -n "$want" ] && [ "$want" = "$got" ]
ok $? "DRYRUN runs every built program that takes -B with -B cuda (${got//$'\n'/ })"

for bad in "" "$out/run" "-h" "/proc/no-such-dir/run"; do
  scripts/gpu-check ${bad:+"$bad"} >"$out/bad.txt" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/bad.txt")" = 1 ] && grep -q '^gpu-check: ' "$out/bad.txt"
  ok $? "bad usage '${bad}': exit 2, one line (rc=$rc): $(cat "$out/bad.txt")"
done
done_testing
