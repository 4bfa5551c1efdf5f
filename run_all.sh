#!/usr/bin/env bash
# run_all.sh — run every built scalelab program on this allocation and summarise.
#
#   ./run_all.sh [--quick] [--ci] [--rounds K] [--np N] [--only a,b] [--args A] [--out DIR] [--timeout SEC] [--list]
#
# --quick      small sizes and few iterations: the whole suite in a few minutes on 2 cores (CI)
# --rounds K   run the suite K times, one round after another (every program once per round),
#              into DIR/round-01 ... DIR/round-K: the samples scripts/compare's rank test needs
# --ci         the regression gate's mode: the quick sizes, more iterations where a round's
#              median needs them, 5 rounds unless --rounds says otherwise (then scripts/compare
#              BASELINE DIR)
# --np N       ranks per program (default: SLURM_NTASKS under Slurm, else the GPUs, else the cores;
#              threaded programs such as mae_threads default to one rank per node)
# --only a,b   run just these programs (names of built programs, each once)
# --args A     append A to every program's arguments (e.g. "-B cuda": the quick sizes on a GPU)
# --out DIR    results directory (default results/<run-id>); every program writes into it
# --timeout S  per-program limit in seconds (default 300 quick, 3600 full): a hang cannot stall
#              the suite; a program past it is killed and counted as failed
# Programs run one after another; a failing one does not stop the rest (ddp, zero, pipeline,
# checkpoint, vdnn and precision run twice: on the MLP, then on the transformer, --model gpt, into
# one log and jsonl; parallel3d on the grid its ranks allow: 2 -> 1x1x2, 4 -> 1x2x2, 8 -> 2x2x2).
# The run ends with a summary table (program, variant, headline metric, check) and exits 1 if any
# program failed. Ctrl-C, TERM (scancel) or HUP (a closed terminal or ssh session) stops the
# running program and its ranks, records it in status.tsv with exit 130, prints the summary so
# far marked INTERRUPTED and exits 130, whichever the signal (the summary names it).
set -uo pipefail

top="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The programs: bin/ beside this script in a build tree, PREFIX/bin for an installed copy
# (PREFIX/share/scalelab/run_all.sh), or $SL_BIN. Results go below the current directory.
bindir="${SL_BIN:-$top/bin}"
[[ -d "$bindir" || -n "${SL_BIN:-}" ]] || bindir="$(cd "$top/../.." && pwd)/bin"
launch="$top/scripts/sl-launch"

mode=full np="" only="" extra="" out="" timeout_s="" list=0 rounds=
command_line="$0 $*"
# Rounds of --ci: with 5 rounds a side the rank test can reach p = 0.008 (complete separation);
# fewer can never reach compare's default alpha of 0.01.
ci_rounds=5
usage() { sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run_all.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) mode=quick ;;
    --ci) mode=ci ;;
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ && "${2:-}" -le 100 ]] || die "--rounds: expected a count from 1 to 100, got '${2:-}'"; rounds="$2"; shift ;;
    --np) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--np: expected a positive integer, got '${2:-}'"; np="$2"; shift ;;
    --only) [[ -n "${2:-}" ]] || die "--only: expected a comma-separated list of programs"; only="$2"; shift ;;
    --args) [[ -n "${2:-}" ]] || die "--args: expected the arguments to append (e.g. '-B cuda')"; extra="$2"; shift ;;
    --out) [[ -n "${2:-}" ]] || die "--out: expected a directory"; out="$2"; shift ;;
    --timeout) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--timeout: expected seconds (a positive integer), got '${2:-}'"; timeout_s="$2"; shift ;;
    --list) list=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done
# An explicit --rounds wins over --ci's default, whichever comes first.
[[ -n "$rounds" ]] || { [[ $mode == ci ]] && rounds="$ci_rounds" || rounds=1; }

# Arguments per program and mode. A program not listed runs with its own defaults.
declare -A quick_args=(
  [mae_threads]="-n 3 -w 1 --samples 1048576 --threads 1,2"
  [allreduce]="-C all -b 8 -e 1M -f 8 -n 5 -w 2 --cold"
  [kernels]="-n 3 -w 1 --gemm-n 512 --elems 1048576 --copy-bytes 32M"
  [ddp]="--layers 4 --width 512 --inputs 128 --outputs 32 --batch 16 --bucket-mb 1 -n 3 -w 1"
  [zero]="--layers 4 --width 512 --inputs 128 --outputs 32 --batch 16 --bucket-mb 1 -n 3 -w 1"
  [pipeline]="--layers 4 --width 256 --inputs 256 --outputs 256 --batch 16 --micro-batches 4 -n 3 -w 1"
  [precision]="--gemm-n 128"
  [halo_conv]="--image 48x48 --channels 8 --batch 4 -n 3 -w 1"
  [vdnn]="--device-mem 32M -n 3 -w 1" # none fits too: the offloading rows' gate is its step over theirs
  [checkpoint]="--layers 16 --width 128 --inputs 128 --outputs 128 --batch 32 --segments sweep -n 3 -w 1"
  [megatron_mlp]="--blocks 2 --hidden 256 --batch 8 -n 3 -w 1"
  [parallel3d]="--layers 2 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 -n 3 -w 1"
)
# --ci: the quick sizes; the training programs time 10 steps rather than 3, so that one
# descheduled step does not move a round's median (their rounds' spread was 2-5x the others').
declare -A ci_args=()
for p in "${!quick_args[@]}"; do ci_args[$p]="${quick_args[$p]/-n 3 -w 1/-n 10 -w 2}"; done
ci_args[vdnn]="${quick_args[vdnn]}" # steady at 3 (round spread 3-6%), and 10 would double the round
# From 4 KiB: below it a 2-rank all-reduce on a shared VM times the hypervisor's scheduler (64 B
# rows moved by 30-36% between identical runs, every round of one run against every round of
# the other); the library's small-message path is still timed at 4 KiB.
ci_args[allreduce]="${quick_args[allreduce]/-b 8 /-b 4K }"
# Element-wise kernels at 4M elements (16 MiB a vector): beyond the per-core L2 (4 MiB on the
# machine of results/baselines/xeon-2core-ci), in the same level of the hierarchy as the 32 MiB
# copy probe their roof_fraction divides by. At --quick's 1M they ran half from L2, and a run in
# which that level was faster (kernels 26% above the other runs in all five rounds, the probe
# not) moved their ratio as much as a regression.
ci_args[kernels]="${ci_args[kernels]/--elems 1048576/--elems 4194304}"
declare -A full_args=(
  [mae_threads]="--samples 8388608 --threads max"
  [allreduce]="-C all -b 8 -e 256M -f 2"
  [kernels]=""
  [ddp]="-C mpi,ring"
  [zero]="-C mpi,ring"
  [pipeline]=""
  [precision]="--master fp32,none --gemm-n 1024"
  [halo_conv]=""
  [vdnn]="-n 10 -w 2"
  [checkpoint]="--segments sweep"
  [megatron_mlp]="-C ring,mpi"
  [parallel3d]="--layers 4"
)

# The transformer: a second configuration of the programs that train it, run right after the
# program's first into the same log and jsonl (its rows are told apart by params.model "gpt");
# status.tsv keeps one line per program (the worse exit, the seconds of both).
declare -A quick_gpt=(
  [ddp]="--model gpt --layers 2 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 --bucket-mb 0.1 -n 3 -w 1"
  [zero]="--model gpt --layers 2 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 --bucket-mb 0.1 -n 3 -w 1"
  [pipeline]="--model gpt --layers 4 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 8 --micro-batches 4 -n 3 -w 1"
  [checkpoint]="--model gpt --layers 4 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 -n 3 -w 1"
  [vdnn]="--model gpt --layers 4 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 -n 3 -w 1"
  [precision]="--model gpt --layers 2 --d-model 64 --heads 4 --seq 32 --vocab 128 --batch 4 --loss-scale none,dynamic -n 3 -w 1"
)
declare -A ci_gpt=()
for p in "${!quick_gpt[@]}"; do ci_gpt[$p]="${quick_gpt[$p]/-n 3 -w 1/-n 10 -w 2}"; done
declare -A full_gpt=(
  [ddp]="--model gpt -C mpi,ring"
  [zero]="--model gpt -C mpi,ring"
  [pipeline]="--model gpt --layers 4"
  [checkpoint]="--model gpt --layers 4"
  [vdnn]="--model gpt --layers 8 --device-mem 64M -n 10 -w 2"
  [precision]="--model gpt --master fp32,none"
)

# parallel3d's grid from the ranks it runs on: the most dimensions they allow, so that on 4 ranks
# or a multiple of 4 every group (tensor, pipeline, data) is one the run measures: P = 2 where
# the ranks are even, T = 2 where 4 divides them, D the rest (2 -> 1x1x2, 4 -> 1x2x2, 8 -> 2x2x2;
# odd counts: D alone). Every mode's model has heads, width and vocabulary divisible by 2 and at
# least 2 blocks.
p3d_layout() { # p3d_layout RANKS
  local n="$1" T=1 P=1
  (( n % 2 == 0 )) && P=2
  (( n % 4 == 0 )) && T=2
  echo "--dp $(( n / (T * P) )) --tp $T --pp $P"
}

# Ranks per node for programs that scale with threads inside a rank: they get the node's cores
# as threads rather than as ranks (unless --np is given).
declare -A ranks_per_node=(
  [mae_threads]=1
  [precision]=1
  [vdnn]=1
)

# The thread counts every program would refuse (scripts/sl-launch checks them): once, up front.
"$launch" --check-env || exit 2

mapfile -t available < <(find -H "$bindir" -maxdepth 1 -type f -perm -u+x ! -name 'sl-*' -printf '%f\n' 2>/dev/null | sort)
if [[ ${#available[@]} -eq 0 ]]; then
  echo "run_all.sh: no programs in $bindir; run make first" >&2
  exit 2
fi
programs=("${available[@]}")
if [[ -n "$only" ]]; then
  programs=()
  declare -A seen=()
  [[ "$only" != *, && "$only" != ,* && "$only" != *,,* ]] || die "--only: '$only' has an empty name (expected a,b,...)"
  IFS=',' read -ra wanted <<<"$only"
  for w in "${wanted[@]}"; do
    known=0
    for a in "${available[@]}"; do [[ "$w" == "$a" ]] && known=1; done
    [[ $known == 1 ]] || die "--only: '$w' is not a built program (built: ${available[*]})"
    [[ -z "${seen[$w]-}" ]] || die "--only: '$w' is named twice"
    seen[$w]=1
    programs+=("$w")
  done
fi
if [[ $list == 1 ]]; then printf '%s\n' "${programs[@]}"; exit 0; fi

np_given="$np"
if [[ -z "$np" ]]; then
  if [[ -n "${SLURM_NTASKS:-}" ]]; then np="$SLURM_NTASKS"
  elif command -v nvidia-smi >/dev/null 2>&1 && gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU') && (( gpus > 0 )); then np="$gpus"
  else np="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"; fi
fi
[[ -n "$timeout_s" ]] || { [[ $mode == full ]] && timeout_s=3600 || timeout_s=300; }

run_id="$(date +%Y%m%d-%H%M%S)-$(hostname -s 2>/dev/null || echo host)"
out="${out:-results/$run_id}"
if [[ -e "$out" && ! -d "$out" ]]; then
  die "--out: '$out' is not a directory"
fi
if [[ -e "$out" && -n "$(ls -A "$out" 2>/dev/null)" ]]; then
  die "--out: '$out' already holds results (of another run); choose a new directory"
fi
mkdir -p "$out" || die "--out: cannot create '$out'"
export SL_RUN_COMMAND="$command_line"

echo "# scalelab run_all ($mode): ${#programs[@]} program(s), $np rank(s) each, results in $out" \
  "$( (( rounds > 1 )) && echo "($rounds rounds: $out/round-01 ...)")"

# Ctrl-C, a TERM (scancel) or a HUP (the terminal or ssh session closed) stops the program that
# runs and ends with the summary so far, exit 130 for each. The launcher (timeout's child:
# sl-launch, which passes the signal on to mpirun once, or srun) gets one TERM and stops its ranks
# (a second signal would make mpirun leave at once, without them); whatever is left of the
# process group that timeout made for the launcher gets a KILL 10 s later. Once a signal came,
# output that cannot be written (the terminal is gone, a pipe's reader has died) must not stop
# the rest: status.tsv and the summary in the results directory.
interrupted="" child=""
on_signal() {
  trap '' PIPE
  [[ -z "$interrupted" ]] || return 0 # one TERM for the launcher, whatever comes after
  interrupted="$1"
  [[ -n "$child" ]] && { pkill -TERM -P "$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null; }
}
trap 'on_signal SIGINT' INT
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGHUP' HUP

failed=0 ran=0
# One configuration of program P on N ranks with ARGS, its output to DIR/P.log (MODE > starts the
# log, >> adds to it); its exit status in config_rc (130 when a signal stopped it).
run_config() { # run_config DIR P N ARGS MODE
  local dir="$1" p="$2" p_np="$3" args="$4" start secs logfd tee_pid tee_mode
  [[ $5 == ">>" ]] && tee_mode=-a || tee_mode=
  echo
  echo "## $p  ($p_np ranks: $p $args)"
  start=$(date +%s)
  # The program in the background (so that a signal reaches this script at once) writing through
  # tee, which ignores the signals and ends when the program's output does.
  exec {logfd}> >(trap '' INT TERM HUP; exec tee $tee_mode "$dir/$p.log")
  tee_pid=$!
  # shellcheck disable=SC2086
  timeout --kill-after=10 "$timeout_s" "$launch" -np "$p_np" "$bindir/$p" $args >&"$logfd" 2>&1 &
  child=$!
  exec {logfd}>&-
  wait "$child"
  config_rc=$?
  # a signal ends the wait early: wait until the program has really gone
  if [[ -n "$interrupted" ]]; then
    for _ in $(seq 100); do kill -0 "$child" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  child=""
  wait "$tee_pid" 2>/dev/null
  secs=$(( $(date +%s) - start ))
  if [[ -n "$interrupted" ]]; then
    # into the log first: the terminal may be gone
    echo "## $p: stopped by $interrupted after ${secs}s" >>"$dir/$p.log"
    echo "## $p: stopped by $interrupted after ${secs}s"
    config_rc=130
  elif [[ $config_rc == 124 ]] || [[ $config_rc == 137 && $secs -ge $timeout_s ]]; then
    echo "## $p: killed after the ${timeout_s}s limit" | tee -a "$dir/$p.log"
  elif [[ $config_rc == 137 ]]; then
    echo "## $p: killed by SIGKILL from outside the suite after ${secs}s, well within the ${timeout_s}s limit (the kernel's out-of-memory killer? see dmesg, or the job's memory limit)" | tee -a "$dir/$p.log"
  fi
}

# One round: every program once, into DIR (its own manifest, rows, logs and status.tsv).
run_round() { # run_round DIR RUN_ID
  local dir="$1" p args gpt p_np start rc secs
  mkdir -p "$dir" || die "--out: cannot create '$dir'"
  export SL_RESULTS="$dir" SL_RUN_ID="$2"
  status_file="$dir/status.tsv"
  printf 'program\texit\tseconds\n' >"$status_file"
  for p in "${programs[@]}"; do
    [[ -z "$interrupted" ]] || break
    case $mode in
      quick) args="${quick_args[$p]-}" ;;
      ci) args="${ci_args[$p]-}" ;;
      *) args="${full_args[$p]-}" ;;
    esac
    p_np="$np"
    if [[ -z "$np_given" && -n "${ranks_per_node[$p]-}" ]]; then
      p_np=$(( ${SLURM_NNODES:-1} * ${ranks_per_node[$p]} ))
    fi
    case $mode in
      quick) gpt="${quick_gpt[$p]-}" ;;
      ci) gpt="${ci_gpt[$p]-}" ;;
      *) gpt="${full_gpt[$p]-}" ;;
    esac
    [[ $p != parallel3d ]] || args+=" $(p3d_layout "$p_np")"
    start=$(date +%s)
    run_config "$dir" "$p" "$p_np" "$args${extra:+ $extra}" ">"
    rc=$config_rc
    if [[ -n "$gpt" && -z "$interrupted" ]]; then
      run_config "$dir" "$p" "$p_np" "$gpt${extra:+ $extra}" ">>"
      [[ $rc != 0 ]] || rc=$config_rc
    fi
    secs=$(( $(date +%s) - start ))
    ran=$((ran + 1))
    [[ -z "$interrupted" ]] || rc=130
    [[ $rc == 0 ]] || failed=1
    printf '%s\t%s\t%s\n' "$p" "$rc" "$secs" >>"$status_file"
    [[ -z "$interrupted" ]] || break
  done
}

if (( rounds == 1 )); then
  run_round "$out" "$run_id"
else
  # Rounds one after another, not each program K times in a row: a slow minute of a shared
  # machine then falls on one round of every program rather than on all rounds of one.
  for (( r = 1; r <= rounds; r++ )); do
    [[ -z "$interrupted" ]] || break
    echo
    echo "# round $r of $rounds"
    run_round "$out/$(printf 'round-%02d' "$r")" "$run_id-r$r"
  done
fi

echo
if command -v python3 >/dev/null 2>&1; then
  # The summary (of the last round) on the terminal and in OUT/summary.txt, then the same run as
  # one page of plots and tables, OUT/report.html: the one file to open (or attach) after a run.
  # Without matplotlib the page has the tables and says why there are no plots.
  python3 "$top/scripts/report" "$(dirname "$status_file")" >"$out/summary.txt" 2>&1 || failed=1
  cat "$out/summary.txt"
  if (( rounds > 1 )); then
    echo "# $rounds rounds in $out (the summary above is of the last): compare them with" \
      "scripts/compare BASELINE $out"
  fi
  python3 "$top/scripts/report" "$out" --html "$out/report.html" >"$out/report.log" 2>&1
  case $? in
    0|1) sed 's/^/# /' "$out/report.log"   # "report: wrote OUT/report.html (N KiB, M plot(s))"
         echo "# the summary above is in $out/summary.txt; open $out/report.html for the plots" ;;
    *) cat "$out/report.log"; echo "# report: $out/report.html was not written (above)"; failed=1 ;;
  esac
  rm -f "$out/report.log"
else
  echo "# python3 not found: no summary table; exit codes are in $status_file"
  cat "$status_file"
fi
if [[ -n "$interrupted" ]]; then
  echo "# run_all: INTERRUPTED by $interrupted after $ran of $(( ${#programs[@]} * rounds )) program run(s); the summary above is of the last round run"
  exit 130
fi
exit $failed
