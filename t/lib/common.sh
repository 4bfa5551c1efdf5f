# common.sh — sourced by the shell tests: paths, launcher settings and a small TAP producer.
top="$(cd "$(dirname "$0")/../.." && pwd)"
export PATH="$top/bin:$PATH"
# Open MPI keeps some allocations until exit, and CUDA's runtime needs the shadow gap: neither
# is a defect of ours, so LeakSanitizer and the gap protection are off in sanitizer runs.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:protect_shadow_gap=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# A rank that exits non-zero (every usage error, check failure and runtime failure the tests
# provoke) makes mpirun stop the job: it signals what is left of it and waits
# odls_base_sigkill_timeout (1 s) twice before it exits. The programs install no signal
# handler, so that grace buys nothing here; without it such a launch ends 2 s sooner.
export OMPI_MCA_odls_base_sigkill_timeout="${OMPI_MCA_odls_base_sigkill_timeout:-0}"
# Tests are short: keep OpenMP from spinning on the 2-core machines they run on.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# The same for MPI: make check runs two test files at once, and Open MPI yields the core while a
# rank waits only when its own job has more ranks than slots. Two 2-rank jobs on 2 cores each
# spin in every wait, taking the core from the rank the other is waiting for: two test_coll runs
# side by side took 15.3 s against 2.7 s with yielding (one alone: 1.5 s). Tests assert no
# timing; a user's run keeps the library's default (spinning, the lowest latency).
export OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}"

tap_n=0
tap_failed=0
ok() { # ok CONDITION_STATUS DESCRIPTION
  tap_n=$((tap_n + 1))
  if [ "$1" = 0 ]; then echo "ok $tap_n - $2"; else echo "not ok $tap_n - $2"; tap_failed=$((tap_failed + 1)); fi
}
diag() { echo "# $*" >&2; }
done_testing() { echo "1..$tap_n"; [ "$tap_failed" = 0 ]; exit $?; }
launch() { # launch NP PROGRAM ARGS...
  "$top/scripts/sl-launch" -np "$@"
}
# A usage error of PROGRAM run (with no launcher) in $out: exit 2 and one line naming WANT. No
# -o is given: a usage error writes nothing.
expect_usage_of() { # expect_usage_of PROGRAM WANT ARGS...
  local prog="$1" want="$2"; shift 2
  env -C "$out" "$prog" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines; lines=$(wc -l <"$out/stderr")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$out/stderr"; then
    ok 0 "$prog $* -> exit 2: $(cat "$out/stderr")"
  else
    ok 1 "$prog $* -> exit 2 naming $want"; diag "rc=$rc, stderr: $(cat "$out/stderr")"
  fi
}
# The same under the launcher on NP ranks (with -o, which a usage error must leave unwritten):
# exit 2 and the line once.
expect_usage_np() { # expect_usage_np NP PROGRAM WANT ARGS...
  local np="$1" prog="$2" want="$3"; shift 3
  launch "$np" "$prog" "$@" -o "$out/np" >"$out/stdout" 2>"$out/stderr" </dev/null
  local rc=$?
  if [ $rc = 2 ] && [ "$(grep -c "^$prog: " "$out/stderr")" = 1 ] && grep -q -- "$want" "$out/stderr" &&
     [ ! -e "$out/np" ]; then
    ok 0 "$prog $* on $np ranks -> exit 2: $(grep "^$prog: " "$out/stderr")"
  else
    ok 1 "$prog $* on $np ranks -> exit 2 naming $want"; diag "rc=$rc, stderr: $(cat "$out/stderr")"
  fi
}
tmpdir() { mktemp -d "${TMPDIR:-/tmp}/scalelab-test.XXXXXX"; }
