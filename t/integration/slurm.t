#!/bin/bash
# slurm.t — the suite under a real Slurm allocation: a one-node cluster from Debian's packages
# (t/lib/slurm_cluster.sh: munged, slurmctld, slurmd, configuration in a temporary directory),
# then `sbatch scripts/slurm/run_all.sbatch --quick --only ddp,zero` and
# `salloc ./run_all.sh --quick --only mae_threads,pipeline` (quick programs, to keep it short). Checked: the results directory (statuses, manifest, rows), the manifest's
# host list against the node Slurm gave, and that the ranks were started by srun in the job's
# allocation (slurmd's log of each step's launch; sl-launch adds --mpi=pmix, since this cluster's
# MpiDefault is none). The cluster is shut down and nothing of it left running: the test runs in
# a PID namespace of its own, so the kernel ends whatever a failure leaves behind.
. "$(dirname "$0")/../lib/common.sh"
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root: it starts munged, slurmctld and slurmd (CI runs as root)"
for c in munged mungekey slurmctld slurmd sbatch salloc srun scontrol sinfo unshare; do
  command -v "$c" >/dev/null 2>&1 || skip_all "$c not found (Debian: apt-get install slurm-wlm munge)"
done
if [ -z "${SL_SLURM_PIDNS:-}" ]; then
  unshare --pid --fork --mount-proc true 2>/dev/null || skip_all "cannot make a PID namespace (unshare --pid)"
  SL_SLURM_PIDNS=1 exec unshare --pid --fork --mount-proc --kill-child "$0" "$@"
fi
. "$top/t/lib/slurm_cluster.sh"
out=$(tmpdir)
trap 'cluster_stop; rm -rf "$out"' EXIT
cd "$top" || exit 1
node=$(hostname -s)

t0=$SECONDS
cluster_start "$out/cluster"
rc=$?
diag "cluster started in $((SECONDS - t0)) s"
ok $rc "a one-node Slurm cluster ($node, $(nproc) CPUs) starts and its node is idle"
if [ $rc != 0 ]; then
  tail -5 "$out/cluster/slurmctld.log" "$out/cluster/slurmd.log" "$out/cluster/munged.log" 2>&1 | sed 's/^/#   /' >&2
  done_testing
fi

# check_run NAME DIR JOBID MPIPROG PROGRAMS...: statuses 0, rows valid, the manifest valid with
# this node as its one host, MPIPROG's rows on 2 ranks, and one srun step launched by slurmd per
# program of the job and per second configuration (the GPT's: run_all.sh's *_gpt).
check_run() {
  local name=$1 dir=$2 job=$3 mpiprog=$4; shift 4
  local p steps
  for p in "$@"; do
    grep -q "^$p	0	" "$dir/status.tsv" && scripts/validate rows "$dir/$p.jsonl" >/dev/null
    ok $? "$name: $p exited 0 and its rows are valid"
  done
  scripts/validate manifest "$dir/manifest.json" >/dev/null &&
    python3 - "$dir/manifest.json" "$node" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
sys.exit(0 if m["hosts"] == [sys.argv[2]] and all(b["host"] == sys.argv[2] for b in m["rank_binding"]) else 1)
PY
  ok $? "$name: the manifest's host list is the allocation's node [$node]"
  # two ranks in one MPI job, not two one-rank jobs (what srun without PMIx would start)
  python3 -c 'import json, sys; sys.exit(0 if {json.loads(l)["ranks"] for l in open(sys.argv[1])} == {2} else 1)' "$dir/$mpiprog.jsonl"
  ok $? "$name: $mpiprog's rows say 2 ranks: srun --mpi=pmix joined them into one MPI job"
  steps=$(grep -c "launch task StepId=$job\.[0-9]" "$out/cluster/slurmd.log")
  local want=$#
  for p in "$@"; do # run_all runs these twice: on the MLP, then on the GPT (--model gpt)
    case $p in ddp|zero|pipeline|checkpoint|vdnn|precision) want=$((want + 1)) ;; esac
  done
  [ "$steps" = "$want" ]
  ok $? "$name: slurmd launched $steps srun step(s) in job $job, one per program and configuration ($want)"
}

t0=$SECONDS
# sbatch: the job script as a user submits it, its #SBATCH lines overridden for one node. The
# job's end is polled here every 0.2 s (sbatch --wait polls at growing intervals, up to 30 s).
sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --output="$out/sbatch.out" \
  scripts/slurm/run_all.sbatch --quick --only ddp,zero --out "$out/sbatch-run" >"$out/sbatch.id" 2>"$out/sbatch.err"
rc=$?
job=$(head -1 "$out/sbatch.id")
if [ $rc = 0 ]; then
  rc=1
  for _ in $(seq 3000); do          # bounded (10 minutes): a stuck job fails the test, never hangs it
    state=$(scontrol show job "$job" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p')
    case "$state" in
      COMPLETED) rc=0; break ;;
      FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;;
    esac
    sleep 0.2
  done
fi
diag "sbatch job ran in $((SECONDS - t0)) s (state ${state:-none}): $(tail -n +2 "$out/sbatch-run/status.tsv" 2>/dev/null | tr "\t\n" " ,")"
ok $rc "sbatch scripts/slurm/run_all.sbatch --quick --only ddp,zero: job $job COMPLETED (exit 0)"
[ $rc = 0 ] || cat "$out/sbatch.err" "$out/sbatch.out" 2>&1 | tail -20 | sed "s/^/#   /" >&2
grep -q 'verdict: every program ran and every check passed' "$out/sbatch.out" &&
  grep -q '2 rank(s) each' "$out/sbatch.out"
ok $? "the job's output has run_all's summary: 2 ranks each (SLURM_NTASKS), every check passed"
check_run sbatch "$out/sbatch-run" "$job" ddp ddp zero

# salloc: run_all.sh inside an interactive allocation; mae_threads runs one rank per node
# (SLURM_NNODES), pipeline on the allocation's 2 tasks (2 stages).
t0=$SECONDS
salloc --nodes=1 --ntasks=2 ./run_all.sh --quick --only mae_threads,pipeline --out "$out/salloc-run" >"$out/salloc.out" 2>&1
rc=$?
diag "salloc run ran in $((SECONDS - t0)) s"
job=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$out/salloc.out" | head -1)
ok $rc "salloc ./run_all.sh --quick --only mae_threads,pipeline: job $job exits 0"
[ $rc = 0 ] || tail -20 "$out/salloc.out" | sed 's/^/#   /' >&2
grep -q '## mae_threads  (1 ranks' "$out/salloc.out" && grep -q '## pipeline  (2 ranks' "$out/salloc.out"
ok $? "run_all took its rank counts from the allocation: mae_threads 1 (one per node), pipeline 2"
check_run salloc "$out/salloc-run" "$job" pipeline mae_threads pipeline

pids=$(cluster_pids)
t0=$SECONDS
cluster_stop
rc=$?
diag "cluster stopped in $((SECONDS - t0)) s"
ok $rc "scontrol shutdown and munged --stop: slurmctld, slurmd and munged ($(echo $pids)) have exited"
left=$(ps -e -o stat=,pid=,comm= | awk '$1 !~ /^Z/ && $3 ~ /^(slurmctld|slurmd|slurmstepd|slurmscriptd|munged|srun|salloc|sbatch|orted|prted|ddp|zero|mae_threads|pipeline)$/')
[ -z "$left" ]
ok $? "nothing of the cluster or the jobs is left running${left:+: $left}"
done_testing
