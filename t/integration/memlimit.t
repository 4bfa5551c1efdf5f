#!/bin/bash
# A memory-cgroup limit (Slurm, containers) is seen by the memory guard: a training run that
# cannot fit in it stops with exit 3 and "needs X, limit Y (cgroup)" instead of an OOM kill.
# Needs a memory cgroup this test may create (root; v1 or v2); skipped with the reason elsewhere.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
cg=""
cleanup() { [ -n "$cg" ] && { for _ in 1 2 3 4 5; do rmdir "$cg" 2>/dev/null && break; sleep 0.2; done; }; rm -rf "$out"; }
trap cleanup EXIT
v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
v2=$(awk -F: '$1 == "0" && $2 == "" {print $3}' /proc/self/cgroup)
if [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ] && mkdir "/sys/fs/cgroup/memory${v1%/}/sl-test-$$" 2>/dev/null; then
  cg="/sys/fs/cgroup/memory${v1%/}/sl-test-$$"; limit_file=memory.limit_in_bytes
elif [ -n "$v2" ] && [ -f /sys/fs/cgroup/cgroup.controllers ] && mkdir "/sys/fs/cgroup${v2%/}/sl-test-$$" 2>/dev/null; then
  cg="/sys/fs/cgroup${v2%/}/sl-test-$$"; limit_file=memory.max
fi
if [ -z "$cg" ] || ! echo $((400 << 20)) >"$cg/$limit_file" 2>/dev/null; then
  echo "1..0 # SKIP cannot create a memory cgroup with a limit here (needs root and a writable cgroup tree)"
  exit 0
fi
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
  timeout 60 "$top/bin/ddp" --width 6000 -n 1 -w 0 -o "$out/r" >"$out/log" 2>&1
rc=$?
[ $rc = 3 ] && grep -q 'needs .* MiB (.* held already), limit 400.0 MiB (cgroup)' "$out/log"
ok $? "ddp --width 6000 in a 400 MiB cgroup: exit 3, needs X, limit Y (cgroup) (rc=$rc: $(grep 'out of memory' "$out/log"))"
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
  timeout 60 "$top/bin/ddp" --width 256 --layers 2 -n 1 -w 0 -o "$out/s" >"$out/log2" 2>&1
ok $? "a run that fits in the same cgroup runs"
done_testing
