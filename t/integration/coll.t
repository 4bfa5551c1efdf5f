#!/bin/sh
# coll.t — the communication layer on 1..8 ranks: runs build/t/test_coll (every implementation,
# collective, dtype, op, count, in and out of place; blocking and non-blocking, point to point)
# under the launcher for each rank count and merges the TAP streams into one, numbering the
# tests across runs (the reference reductions and the double binary tree's shapes, which no
# communicator changes, in the one-rank run only). A run that exits non-zero or prints no
# tests is itself a failed test.
# Then shm and hier again on virtual nodes (SL_COLL_RANKS_PER_NODE, hier's testing aid), and
# direct and torus on the grids and bounds the 1..8 runs leave out (their counts and bytes only).
. "$(dirname "$0")/../lib/common.sh"
prog="$top/build/t/test_coll"
[ -x "$prog" ] || { echo "1..0 # SKIP $prog not built"; exit 0; }
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT
n=0

# run NP LABEL ARGS...: test_coll on NP ranks, its lines renumbered after the n tests already
# printed and prefixed with LABEL, then one line for the run itself.
run() {
  np=$1 label=$2
  shift 2
  # A deadlocked collective must fail the test, not hang it.
  timeout 600 "$top/scripts/sl-launch" -np "$np" "$prog" "$@" > "$out/tap" 2> "$out/err"
  rc=$?
  awk -v off="$n" -v label="$label" '/^(not )?ok [0-9]+/ {
      st = ($1 == "not") ? "not ok" : "ok"
      sub(/^(not )?ok [0-9]+ ?(- )?/, "")
      print st " " ++off " - " label $0
    }' "$out/tap" > "$out/merged"
  cat "$out/merged"
  got=$(wc -l < "$out/merged")
  n=$((n + got))
  grep '^#' "$out/err" | head -n 20 >&2
  n=$((n + 1))
  if [ "$rc" = 0 ] && [ "$got" -gt 0 ]; then
    echo "ok $n - np=$np: ${label}test_coll exited 0 after $got tests"
  else
    echo "not ok $n - np=$np: ${label}test_coll exited $rc after $got tests"
    tail -n 20 "$out/err" >&2
  fi
}

# 1..4 ranks with every count (3: a rank count that is not a power of two, rhd's fold of one
# rank); 5..8 (folds of 1, 2 and 3 ranks in rhd, deeper trees) without the two large counts,
# to keep the time down. Under the sanitizers (make SANITIZE=1 check) 1..4 ranks leave them out
# too (make check runs them): they are half of a run's time there, and the small counts already
# take every path they do, since each run repeats the sweep with 24-byte segments (many segments
# per chunk) and the non-blocking sweeps keep 100003. shm and hier run here on one node.
# Under the sanitizers, 5..8 ranks run only the implementations whose code takes new paths
# there (tree and dbtree deeper, rhd's folds, the torus's 2-row grids): the others' code is the
# same as on 1..4 ranks, and 8 oversubscribed ranks under ASan took a third of the pass's time.
for np in 1 2 3 4 5 6 7 8; do
  quick=; { [ "$np" -gt 4 ] || [ "${SL_SANITIZE:-0}" = 1 ]; } && quick=--quick
  if [ "$np" -gt 4 ] && [ "${SL_SANITIZE:-0}" = 1 ]; then
    run "$np" "[sanitized: tree dbtree rhd torus] " $quick --only tree,dbtree,rhd,torus
  else
    run "$np" "" $quick
  fi
done
# 2 and 3 virtual nodes of k consecutive ranks, on 2..7 ranks, unequal nodes included (7 ranks
# in nodes of 3: 3 + 3 + 1); the smallest k that makes each number of nodes.
for np in 2 3 4 5 6 7; do
  done_nodes=
  for k in 1 2 3 4 5 6; do
    nodes=$(( (np + k - 1) / k ))
    case "$nodes" in 2|3) ;; *) continue ;; esac
    case " $done_nodes " in *" $nodes "*) continue ;; esac
    done_nodes="$done_nodes $nodes"
    SL_COLL_RANKS_PER_NODE=$k run "$np" "[$nodes virtual nodes of up to $k] " --quick --only shm,hier
  done
done
# The torus on 9 ranks (3x3), on 8 as 2x4 and as a grid taller than wide (4x2: rows of 2) and on
# 7 (1x7), direct on 9, 8 and on 7 with at most 3 exchanges in flight, and both on 5 and 6 ranks
# (1x5, 2x3), each with the count 10^6 + 3 that the --quick runs of 5..8 ranks above leave out
# (seconds each); 1..8 ranks above took the default grids (1x1, 1x2, 1x3, 2x2, 1x5, 2x3, 1x7,
# 2x4) and every exchange at once.
run 5 "[default grid 1x5, 4 in flight] " --counts-only --only direct,torus
run 6 "[default grid 2x3, 5 in flight] " --counts-only --only direct,torus
run 9 "[default grid 3x3, 8 in flight] " --counts-only --only direct,torus
run 8 "[--grid 4x2] " --counts-only --only direct,torus --grid 4x2
run 8 "[default grid 2x4] " --counts-only --only torus
run 7 "[default grid 1x7, --max-inflight 3] " --counts-only --only direct,torus --max-inflight 3
# The bidirectional torus (--torus-bidir) on the first 4, 6, 8 and 9 ranks of one launch (grids
# 2x2, 2x3, 2x4, 3x3): exact at counts 0, 1, 3, 10^6 + 3 in every dtype, bytes 2(n-1)/n S.
run 9 "[bidirectional, on 4 6 8 9 ranks] " --sizes 4,6,8,9 --bidir
echo "1..$n"
