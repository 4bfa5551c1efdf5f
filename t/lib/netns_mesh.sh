# netns_mesh.sh — sourced by tests: N hosts without a cluster, each a network namespace with a
# host name of its own (reached by t/lib/netns_rsh, Open MPI's launch agent in place of ssh),
# every two of them joined by a veth pair of their own (a full mesh), so that one link can be
# slowed (tc netem on one end) without touching the others. Host i (1-based) has one address,
# 10.252.0.i, on each of its links, as a point-to-point address whose peer is the host at the
# other end: the kernel sends to each host through the link to it, and a host has the same one
# address whichever link Open MPI's TCP transport picks (a subnet per link would give each host
# addresses that only some of the others can reach).
#   mesh_up PREFIX N       makes the hosts slhosta, slhostb, ... in namespaces PREFIXa, PREFIXb, ...;
#                          writes $SL_NETNS_HOSTS (lines 'HOST NAMESPACE HOST'); 1 with the reason
#                          in $mesh_err where namespaces cannot be made here
#   mesh_link I J          the name of host I's end of the link to host J (in host I's namespace)
#   mesh_down              removes the namespaces, their links and every process in them
mesh_prefix="" mesh_n=0 mesh_err=""
mesh_name() { printf "slhost\\$(printf %03o $((96 + $1)))"; }
mesh_link() { echo "${mesh_prefix}$1$2"; }
mesh_up() {
  mesh_prefix="$1" mesh_n="$2"
  local i j err
  err=$(mktemp)
  : >"$SL_NETNS_HOSTS"
  for ((i = 1; i <= mesh_n; i++)); do
    ip netns add "$mesh_prefix$i" 2>"$err" && ip -n "$mesh_prefix$i" link set lo up 2>>"$err" || {
      mesh_err=$(head -1 "$err"); rm -f "$err"; return 1; }
    echo "$(mesh_name $i) $mesh_prefix$i $(mesh_name $i)" >>"$SL_NETNS_HOSTS"
  done
  for ((i = 1; i <= mesh_n; i++)); do
    for ((j = i + 1; j <= mesh_n; j++)); do
      { ip link add "$(mesh_link $i $j)" type veth peer name "$(mesh_link $j $i)" &&
        ip link set "$(mesh_link $i $j)" netns "$mesh_prefix$i" &&
        ip link set "$(mesh_link $j $i)" netns "$mesh_prefix$j" &&
        ip -n "$mesh_prefix$i" addr add "10.252.0.$i/32" peer "10.252.0.$j/32" dev "$(mesh_link $i $j)" &&
        ip -n "$mesh_prefix$j" addr add "10.252.0.$j/32" peer "10.252.0.$i/32" dev "$(mesh_link $j $i)" &&
        ip -n "$mesh_prefix$i" link set "$(mesh_link $i $j)" up &&
        ip -n "$mesh_prefix$j" link set "$(mesh_link $j $i)" up; } 2>"$err" || {
        mesh_err=$(head -1 "$err"); rm -f "$err"; return 1; }
    done
  done
  rm -f "$err"
}
mesh_down() {
  local i p
  for ((i = 1; i <= mesh_n; i++)); do
    for p in $(ip netns pids "$mesh_prefix$i" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    ip netns del "$mesh_prefix$i" 2>/dev/null
  done
  return 0
}
