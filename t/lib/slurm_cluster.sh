# slurm_cluster.sh — sourced by t/integration/slurm.t: a one-node Slurm cluster from Debian's
# packages (munged, slurmctld, slurmd) whose keys, sockets, state, logs and configuration all live
# in one temporary directory, on ports of its own, so that it touches nothing of the machine's.
#   cluster_start DIR     start it (exports SLURM_CONF); 0 once the node is idle
#   cluster_stop          scontrol shutdown, munged --stop; 0 once every daemon has gone
#   cluster_pids          the daemons' pids (from their pid files)
cluster_dir=""

cluster_start() {
  cluster_dir="$1"
  local d="$1" node port
  node=$(hostname -s)
  # A port from /dev/urandom, not $RANDOM: slurm.t runs in a PID namespace of its own, where two
  # runs started in the same second have the same pid and so the same $RANDOM sequence (two
  # checkouts tested at once then collided on one port). Skipped while something listens there.
  local tries
  for tries in $(seq 20); do
    port=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000 ))
    ss -Htln "sport = :$port or sport = :$((port + 1))" 2>/dev/null | grep -q . || break
  done
  mkdir -p "$d/state" "$d/spool" && chmod 700 "$d" || return 1
  mungekey -c -k "$d/munge.key" || return 1
  munged -f --key-file="$d/munge.key" --socket="$d/munge.sock" --pid-file="$d/munged.pid" \
    --log-file="$d/munged.log" --seed-file="$d/munged.seed" || return 1
  # MpiDefault stays Slurm's default (none), as on a cluster nobody configured for MPI:
  # scripts/sl-launch must ask for pmix itself. Process tracking without cgroups (a container).
  cat >"$d/slurm.conf" <<CONF
ClusterName=sltest
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$d/slurm.conf"
  slurmctld -c || return 1
  slurmd || return 1
  # The node registers within seconds. A broken start ends in 30 s at most, and at once when a
  # daemon has exited (a port taken, a bad configuration): sinfo against a controller that is
  # gone waits seconds per call, so a count of tries alone would not bound it.
  local t0=$SECONDS p
  while (( SECONDS - t0 < 30 )); do
    for p in slurmctld slurmd; do
      [ -s "$d/$p.pid" ] && ! kill -0 "$(cat "$d/$p.pid")" 2>/dev/null && { echo "cluster_start: $p exited (see $d/$p.log)" >&2; return 1; }
    done
    timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null | grep -qx idle && return 0
    sleep 0.1
  done
  return 1
}

cluster_pids() {
  local f
  for f in slurmctld slurmd munged; do
    [ -s "$cluster_dir/$f.pid" ] && cat "$cluster_dir/$f.pid"
  done
}

cluster_stop() {
  [ -n "$cluster_dir" ] || return 0
  local pids i p alive
  pids=$(cluster_pids)
  scontrol shutdown >/dev/null 2>&1
  for i in $(seq 100); do
    alive=0
    for p in $(cat "$cluster_dir/slurmctld.pid" "$cluster_dir/slurmd.pid" 2>/dev/null); do
      kill -0 "$p" 2>/dev/null && alive=1
    done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  munged --stop --socket="$cluster_dir/munge.sock" >/dev/null 2>&1
  for i in $(seq 50); do
    alive=0
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in $pids; do kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null; done
  cluster_dir_done="$cluster_dir"
  cluster_dir=""
  [ $alive = 0 ]
}
