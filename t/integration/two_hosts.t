#!/bin/bash
# two_hosts.t — two hosts without a cluster: two network namespaces joined by a veth pair, each
# with a host name of its own, stand for two nodes. Open MPI reaches the second one through a
# remote launch agent that enters its namespace (t/lib/netns_rsh, in place of ssh), and the ranks
# talk over TCP only (pml ob1, btl tcp,self on the veth's subnet). allreduce and ddp run on
# 2 ranks per host through scripts/sl-launch --hostfile (rank count from the hostfile's slots).
# Checked: exit codes and checks, the manifest's host list and each rank's host, that the
# inter-host traffic crossed the veth (at least one step's modelled bytes), hostfile errors, and
# that nothing is left: the namespaces, the link and every process in them are removed.
. "$(dirname "$0")/../lib/common.sh"
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip_all "needs root: it makes network namespaces and a veth pair (CI runs as root)"
for c in ip unshare mpirun; do
  command -v "$c" >/dev/null 2>&1 || skip_all "$c not found (Debian: apt-get install iproute2 util-linux openmpi-bin)"
done
mpirun --version 2>&1 | grep -q "Open MPI" || skip_all "the remote launch agent is Open MPI's (plm_rsh_agent); this mpirun is not Open MPI"
out=$(tmpdir)
nsa=slh$$a nsb=slh$$b
cleanup() {
  local ns p
  for ns in $nsa $nsb; do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
}
trap 'cleanup; rm -rf "$out"' EXIT
cd "$top" || exit 1

# Two hosts: 10.251.0.1 (slhosta) and 10.251.0.2 (slhostb) on a veth pair of their own; the
# addresses exist only inside these two namespaces.
if ! { ip netns add $nsa && ip netns add $nsb &&
       ip link add vta$$ type veth peer name vtb$$ &&
       ip link set vta$$ netns $nsa && ip link set vtb$$ netns $nsb &&
       ip -n $nsa addr add 10.251.0.1/24 dev vta$$ && ip -n $nsb addr add 10.251.0.2/24 dev vtb$$ &&
       ip -n $nsa link set lo up && ip -n $nsb link set lo up &&
       ip -n $nsa link set vta$$ up && ip -n $nsb link set vtb$$ up; } 2>"$out/ip.err"; then
  cleanup
  skip_all "cannot make network namespaces here: $(head -1 "$out/ip.err")"
fi
ok 0 "two hosts: namespaces $nsa (10.251.0.1, slhosta) and $nsb (10.251.0.2, slhostb) joined by a veth pair"

export SL_NETNS_HOSTS="$out/hosts"
printf '10.251.0.1 %s slhosta\n10.251.0.2 %s slhostb\n' $nsa $nsb >"$SL_NETNS_HOSTS"
printf '# two hosts, two ranks each\n10.251.0.1 slots=2\n10.251.0.2 slots=2\n' >"$out/hostfile"
# TCP only, on the veth's subnet; the launch agent for the second host. The two 'hosts' share
# this machine's cores, so ranks are not bound (each host would bind its two ranks to the same
# two cores as the other's) and waiting ranks yield (4 ranks on 2 cores, which neither host sees).
export SL_LAUNCHER_ARGS="--mca plm_rsh_agent $top/t/lib/netns_rsh --mca pml ob1 --mca btl tcp,self
  --mca btl_tcp_if_include 10.251.0.0/24 --mca oob_tcp_if_include 10.251.0.0/24 --mca mpi_yield_when_idle 1"
export SL_BIND=none SL_RUN_ID=two-hosts-$$
on_host_a() { "$top/t/lib/netns_rsh" 10.251.0.1 "$@"; }
tx() { ip netns exec $nsa cat /sys/class/net/vta$$/statistics/tx_bytes; }

tx0=$(tx)
t0=$SECONDS
on_host_a scripts/sl-launch --hostfile "$out/hostfile" bin/allreduce -C ring,mpi -b 8 -e 64K -f 8 \
  -n 2 -w 1 -o "$out/res" >"$out/allreduce.log" 2>&1
rc=$?
diag "allreduce ran in $((SECONDS - t0)) s"
ok $rc "allreduce (ring, mpi) on 4 ranks, 2 per host, over TCP: every check passes (rc=$rc)"
[ $rc = 0 ] || tail -15 "$out/allreduce.log" | sed 's/^/#   /' >&2
t0=$SECONDS
on_host_a scripts/sl-launch --hostfile "$out/hostfile" -np 4 bin/ddp --layers 2 --width 256 --inputs 64 \
  --outputs 16 --batch 8 -C mpi,ring -n 2 -w 1 -o "$out/res" >"$out/ddp.log" 2>&1
rc=$?
diag "ddp ran in $((SECONDS - t0)) s"
ok $rc "ddp (mpi, ring) on 4 ranks over the two hosts: checked against serial training (rc=$rc)"
[ $rc = 0 ] || tail -15 "$out/ddp.log" | sed 's/^/#   /' >&2
tx1=$(tx)

scripts/validate rows "$out/res/allreduce.jsonl" >/dev/null &&
  scripts/validate rows "$out/res/ddp.jsonl" >/dev/null &&
  scripts/validate manifest "$out/res/manifest.json" >/dev/null
ok $? "rows and manifest valid"
python3 - "$out/res" <<'PY'
import json, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
where = {b["rank"]: b["host"] for b in m["rank_binding"]}
rows = [json.loads(l) for p in ("allreduce", "ddp") for l in open(f"{sys.argv[1]}/{p}.jsonl")]
ok = (m["hosts"] == ["slhosta", "slhostb"] and where == {0: "slhosta", 1: "slhosta", 2: "slhostb", 3: "slhostb"}
      and all(r["ranks"] == 4 for r in rows))
print("# hosts", m["hosts"], "ranks", where)
sys.exit(0 if ok else 1)
PY
ok $? "the manifest lists both hosts [slhosta, slhostb]; ranks 0-1 ran on slhosta, 2-3 on slhostb"
model=$(python3 -c 'import json, sys; print(int(max(json.loads(l)["metrics"]["bytes_model"]["value"] for l in open(sys.argv[1]))))' "$out/res/ddp.jsonl")
[ $((tx1 - tx0)) -ge "$model" ]
ok $? "the veth carried $((tx1 - tx0)) bytes from slhosta, at least one ddp step's modelled $model bytes"

# Hostfile errors: one line naming the file, exit 2, no launcher started.
printf '10.251.0.1 slots=two\n' >"$out/bad"
: >"$out/empty"
for args in "--hostfile $out/nosuch" "--hostfile $out/bad" "--hostfile $out/empty" "--hostfile"; do
  # shellcheck disable=SC2086
  scripts/sl-launch $args bin/allreduce >"$out/log" 2>&1
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/log")" = 1 ] && grep -q -- "--hostfile" "$out/log"
  ok $? "sl-launch $args: exit 2: $(cat "$out/log")"
done

cleanup
left=$(ip netns list | grep -c "slh$$")
[ "$left" = 0 ] && ! ip link show vta$$ >/dev/null 2>&1
ok $? "the namespaces, their veth pair and every process in them are gone"
done_testing
