#!/bin/bash
# gpu_check.t — scripts/gpu-check without a GPU, through stand-ins first on PATH (so that this
# holds on a GPU machine too): nvidia-smi (listing no GPU, or one), make, and timeout, which
# records each step's limit and command and runs none of them (make aside, itself a stand-in).
#   - no device: every step skipped with its reason, exit 0, nothing built or run;
#   - a GPU listed but the suite's probe finds none: a failure carrying the probe's message;
#   - a failing step: logged, the next one runs, exit 1 at the end; the archive holds it all;
#   - the build without NCCL, and no build at all: the fallback and the skips;
#   - a tiny SL_GPU_CHECK_TOTAL_S: the later steps are skipped for the time budget;
#   - SL_GPU_CHECK_DRYRUN=1: the commands, in order of value, their limits within the cap;
#   - bad usage: one line and exit 2.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
# the stand-ins below are written and made executable under $out: never without it
[ -n "$out" ] && [ -d "$out" ] || { echo "Bail out! no temporary directory"; exit 1; }
trap 'rm -rf "$out"' EXIT
cd "$top" || exit 1

mkdir "$out/nogpu" "$out/gpu" "$out/stub" "$out/stub-make"
printf '#!/bin/sh\nexit 0\n' >"$out/nogpu/nvidia-smi"
printf '#!/bin/sh\necho "GPU 0: Stand-in GPU (UUID: GPU-00000000)"\n' >"$out/gpu/nvidia-smi"
# make: FAKE_MAKE=no-nccl fails NCCL=1 as the Makefile does where NCCL is missing, =fail every build
cat >"$out/stub/make" <<'EOF'
#!/bin/sh
case "$FAKE_MAKE $*" in
  fail*) echo "kernels/cuda/gemm.cu(1): error: stand-in compile error"; exit 2 ;;
  no-nccl*NCCL=1*) echo "Makefile:95: *** NCCL=1 was asked for but nccl.h and libnccl were not found.  Stop."; exit 2 ;;
esac
echo "make $*: nothing to do"
EOF
# timeout --kill-after=K LIMIT CMD...: records "LIMIT CMD", sleeps FAKE_SLEEP, fails a command
# containing FAKE_FAIL, runs make (the stand-in above) and nothing else
cat >"$out/stub/timeout" <<'EOF'
#!/bin/sh
shift; limit=$1; shift
echo "$limit $*" >>"$FAKE_LOG"
[ -z "$FAKE_SLEEP" ] || sleep "$FAKE_SLEEP"
case "$*" in *"${FAKE_FAIL:-no such command}"*) echo "stand-in: '$FAKE_FAIL' fails as asked"; exit 1 ;; esac
[ "$1" != make ] || exec "$@"
echo "stand-in: $*"
EOF
chmod +x "$out/nogpu/nvidia-smi" "$out/gpu/nvidia-smi" "$out/stub/make" "$out/stub/timeout"
cp "$out/stub/make" "$out/stub-make/" # make alone, for the real probe below
nodev() { PATH="$out/nogpu:$PATH" scripts/gpu-check "$@"; }
# staged GPU runs: the stand-in make and timeout, a GPU listed; FAKE_* from the caller
staged() { PATH="$out/gpu:$out/stub:$PATH" FAKE_LOG="$out/$1.cmds" scripts/gpu-check "$out/$1" >"$out/$1.txt" 2>&1; }
row() { awk -F'\t' -v s="$2" '$1 == s' "$out/$1/summary.tsv"; } # row RUN STEP
status_of() { row "$1" "$2" | cut -f2; }

# --- no device -------------------------------------------------------------------------------
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
  grep -q "outputs in $out/run" "$out/log" && [ "$(tail -1 "$out/log")" = "$out/run/gpu-check.tar.gz" ] &&
  tar -tzf "$out/run/gpu-check.tar.gz" | grep -qx 'run/summary.txt'
ok $? "nothing ran; summary.txt written, in the archive, whose path is the last line printed"

# --- a GPU listed, the probe finds no usable device ------------------------------------------
# The real probe with the devices hidden: "no CUDA device" (a CUDA build; here, and on a GPU
# machine through CUDA_VISIBLE_DEVICES) or "CUDA support was not built" (a CPU build).
PATH="$out/gpu:$out/stub-make:$PATH" CUDA_VISIBLE_DEVICES= scripts/gpu-check "$out/probe" >"$out/probe.txt" 2>&1
rc=$?
msg=$(grep -m1 -E '^[a-z_]+: ' "$out/probe/logs/device-probe.log")
[ $rc = 1 ] && [ "$(status_of probe build)" = passed ] && [ -n "$msg" ] &&
  [ "$(row probe device-probe | cut -f2,6)" = "failed"$'\t'"$msg" ] &&
  grep -qF "not usable: $msg" "$out/probe/summary.txt"
ok $? "a GPU listed but the probe finds none: a failure, exit 1, with the probe's message in the summary (rc=$rc): ${msg:-no message}"
awk -F'\t' 'NR > 1 && after && ($2 != "skipped" || $6 !~ /no usable CUDA device/) { bad++ }
  $1 == "device-probe" { after = 1 } END { exit bad > 0 }' "$out/probe/summary.tsv" && [ ! -e "$out/probe/results" ]
ok $? "every step after the probe is skipped: no usable CUDA device"

# --- a failing step: logged, the next one runs -----------------------------------------------
FAKE_FAIL=test_gpt_kernels staged fail
rc=$?
[ $rc = 1 ] && [ "$(status_of fail unit-gpt-kernels)" = failed ] &&
  grep -q "fails as asked" "$out/fail/logs/unit-gpt-kernels.log" &&
  [ "$(status_of fail unit-kernels)" = passed ] && [ "$(status_of fail allreduce-ddp-np16)" = passed ] &&
  grep -q '^unit-gpt-kernels  *failed  *exit 1, .*unit-gpt-kernels.log' "$out/fail/summary.txt"
ok $? "a failing step is logged, the steps after it run, exit 1 (rc=$rc)"
tar -tzf "$out/fail/gpu-check.tar.gz" >"$out/fail.tar" && grep -qx 'fail/summary.tsv' "$out/fail.tar" &&
  grep -qx 'fail/logs/unit-gpt-kernels.log' "$out/fail.tar" && grep -qx 'fail/logs/machine.log' "$out/fail.tar"
ok $? "gpu-check.tar.gz holds the summary and every log"
# the order of value: what the stand-in ran, in order, is what the summary says passed or failed
awk -F'\t' 'NR > 1 && $2 != "skipped" { print $1 }' "$out/fail/summary.tsv" >"$out/fail.ran"
[ "$(wc -l <"$out/fail.cmds")" = "$(wc -l <"$out/fail.ran")" ] &&
  [ "$(head -3 "$out/fail.ran" | tr '\n' ' ')" = "build device-probe unit-kernels-cuda " ] &&
  [ "$(tail -1 "$out/fail.ran")" = allreduce-ddp-np16 ] &&
  grep -q 'SL_COLL_STAGE=1 scripts/sl-launch -np 2 bin/allreduce -B cuda' "$out/fail.cmds" &&
  grep -q 'SL_COLL_STAGE=1 scripts/sl-launch -np 4 bin/allreduce -B cuda' "$out/fail.cmds"
ok $? "steps run in order (build, probe, unit tests ... np16 last); the staged ones with SL_COLL_STAGE=1"
ci=$(awk '/run_all.sh --ci/ { print $1 }' "$out/fail.cmds")
[ "${ci:-0}" -gt 110 ] && [ "$(awk '/run_all.sh --quick --timeout/ { print $1 }' "$out/fail.cmds")" = 25 ]
ok $? "run_all-ci takes the time the quick steps before it left (limit ${ci}s), the others their own"

# --- the build: without NCCL, then not at all ------------------------------------------------
FAKE_MAKE=no-nccl staged nonccl
rc=$?
[ $rc = 1 ] && [ "$(status_of nonccl build)" = failed ] && [ "$(status_of nonccl build-no-nccl)" = passed ] &&
  row nonccl build | cut -f6 | grep -q 'NCCL=1 was asked for' &&
  row nonccl allreduce-nccl-np1 | grep -q $'\tskipped\t.*built without NCCL' &&
  [ "$(status_of nonccl cuda-programs)" = passed ] &&
  grep -q '^build: CUDA=1 NCCL=0: make CUDA=1 NCCL=1 failed: .*NCCL=1 was asked for' "$out/nonccl/summary.txt"
ok $? "make CUDA=1 NCCL=1 fails: built with NCCL=0, said so, the NCCL step skipped, the rest run (rc=$rc)"
FAKE_MAKE=fail staged nobuild
rc=$?
awk -F'\t' 'NR > 2 && $1 != "build-no-nccl" && ($2 != "skipped" || $6 !~ /^build failed/) { bad++ } END { exit bad > 0 }' "$out/nobuild/summary.tsv" &&
  [ $rc = 1 ] && [ "$(status_of nobuild build-no-nccl)" = failed ] && [ "$(wc -l <"$out/nobuild.cmds")" = 2 ] &&
  grep -q '^build: failed: .*stand-in compile error' "$out/nobuild/summary.txt"
ok $? "no build at all: every later step skipped (build failed), nothing but make ran, exit 1 (rc=$rc)"

# --- the time budget -------------------------------------------------------------------------
SL_GPU_CHECK_TOTAL_S=12 FAKE_SLEEP=1 staged cap
rc=$?
awk -F'\t' 'NR == 1 { next } $6 ~ /^time budget/ { cut = 1 } cut && $2 != "skipped" { bad++ } $2 == "failed" { bad++ }
  END { exit !(cut && !bad) }' "$out/cap/summary.tsv" && [ "$(status_of cap build)" = passed ] &&
  [ "$(status_of cap allreduce-ddp-np16)" = skipped ] && [ $rc = 0 ]
ok $? "SL_GPU_CHECK_TOTAL_S=12: the first steps run, every one after the first 'time budget' skip is skipped (rc=$rc)"

# --- dry run ---------------------------------------------------------------------------------
SL_GPU_CHECK_DRYRUN=1 nodev "$out/dry" >"$out/dry.txt" 2>&1
rc=$?
[ $rc = 0 ] && [ ! -e "$out/dry" ]
ok $? "DRYRUN: exit 0, creates nothing (rc=$rc)"
grep -v '^#' "$out/dry.txt" >"$out/dry.steps"
grep -q $'^build\t[0-9]*s\tmake -j[0-9]* CUDA=1 NCCL=1 NO_OPTIONAL=1$' "$out/dry.steps" &&
  grep -q $'^build-no-nccl\t<=[0-9]*s\tmake -j[0-9]* CUDA=1 NCCL=0 NO_OPTIONAL=1$' "$out/dry.steps" &&
  grep -q $'^allreduce-nccl-np1\t[0-9]*s\tscripts/sl-launch -np 1 bin/allreduce -B cuda -C nccl ' "$out/dry.steps" &&
  grep -q $'^run_all-quick\t[0-9]*s\t./run_all.sh --quick ' "$out/dry.steps" &&
  grep -q $'^run_all-ci\t[0-9]*s+\t./run_all.sh --ci ' "$out/dry.steps" &&
  grep -q $'^allreduce-ddp-np16\t[0-9]*s\t./run_all.sh --quick --np 16 --only allreduce,ddp ' "$out/dry.steps" &&
  grep -q $'^cuda-programs\t[0-9]*s\t./run_all.sh --quick --np 1 --only [a-z0-9_,]* --args \'-B cuda\' ' "$out/dry.steps" &&
  grep -q $'^test-vdnn\t([0-9]*s)\tprove -v t/integration/vdnn.t' "$out/dry.steps" &&
  ! grep -q 'pairs_schedule' "$out/dry.steps"
ok $? "DRYRUN lists the build and its fallback, NCCL, run_all --ci and --quick, --np 16, -B cuda, the device tests (not pairs_schedule)"
[ "$(cut -f1 "$out/dry.steps" | sort)" = "$(tail -n +2 "$out/run/summary.tsv" | cut -f1 | sort)" ]
ok $? "DRYRUN lists exactly the steps the summary reports"
sum=$(awk -F'\t' '$2 ~ /^[0-9]+s\+?$/ { s += $2 + 0 } END { print s + 0 }' "$out/dry.steps")
[ "$sum" -gt 0 ] && [ "$sum" -le 480 ] && grep -q "add up to ${sum}s of the 480s cap" "$out/dry.txt"
ok $? "the limits of the steps that always run add up to ${sum}s, within the default cap of 480s"
cut -f1 "$out/dry.steps" | awk '{ pos[$1] = NR } END {
    exit !(pos["build"] == 1 && pos["device-probe"] < pos["unit-kernels-cuda"] && pos["unit-kernels"] < pos["cuda-programs"] &&
           pos["cuda-programs"] < pos["allreduce-nccl-np1"] && pos["allreduce-staged-np4"] < pos["run_all-ci"] &&
           pos["run_all-ci"] < pos["run_all-quick"] && pos["run_all-quick"] < pos["allreduce-ddp-np8"] && pos["allreduce-ddp-np16"] == NR) }'
ok $? "DRYRUN's order: build, probe, unit tests, -B cuda programs, NCCL, staged, --ci, --quick, the CPU runs last"

# the script's list of programs against the built ones that take --backend (-B)
want=$(for p in bin/*; do [ -x "$p" ] && "$p" --help 2>&1 | grep -q -- '--backend' && echo "${p##*/}"; done | sort)
got=$(grep $'^cuda-programs\t' "$out/dry.steps" | sed 's/.* --only \([a-z0-9_,]*\) .*/\1/' | tr ',' '\n' | sort)
[ -n "$want" ] && [ "$want" = "$got" ]
ok $? "DRYRUN runs every built program that takes -B with -B cuda (${got//$'\n'/ })"

for bad in "" "$out/run" "-h" "/proc/no-such-dir/run"; do
  scripts/gpu-check ${bad:+"$bad"} >"$out/bad.txt" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/bad.txt")" = 1 ] && grep -q '^gpu-check: ' "$out/bad.txt"
  ok $? "bad usage '${bad}': exit 2, one line (rc=$rc): $(cat "$out/bad.txt")"
done
for v in SL_GPU_CHECK_TOTAL_S=0 SL_GPU_CHECK_DRYRUN=yes SL_GPU_CHECK_CPU=2; do
  env "$v" scripts/gpu-check "$out/never" >"$out/bad.txt" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/bad.txt")" = 1 ] && grep -q "^gpu-check: ${v%%=*}: " "$out/bad.txt" && [ ! -e "$out/never" ]
  ok $? "$v: exit 2, one line naming it (rc=$rc): $(cat "$out/bad.txt")"
done
done_testing
