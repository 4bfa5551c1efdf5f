#!/bin/bash
# Bad command lines: exit 2 and one line on stderr naming the option (run directly and under
# mpirun), never a crash or a silent default. --help and --version exit 0.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

expect_usage() { # expect_usage NAME_IN_MESSAGE ARGS...
  local want="$1"; shift
  mae_threads "$@" -o "$out/x" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  local lines; lines=$(wc -l <"$out/stderr")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$out/stderr"; then
    ok 0 "mae_threads $* -> exit 2: $(cat "$out/stderr")"
  else
    ok 1 "mae_threads $* -> exit 2 naming $want"
    diag "rc=$rc, stderr: $(cat "$out/stderr")"
  fi
}
expect_usage --threads --threads 0
expect_usage --iters --iters -1
expect_usage --bogus --bogus
expect_usage --dtype --dtype f128
expect_usage --samples --samples 0
expect_usage --features --features x
expect_usage --variants --variants serial,nope
expect_usage --minbytes -b 4
expect_usage --check --check yes
expect_usage --threads --threads

launch 2 mae_threads --threads 0 >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 2 ] && [ "$(grep -c -- '--threads' "$out/stderr")" = 1 ]
ok $? "under mpirun: exit 2, the message printed once (rc=$rc)"

mae_threads --help >"$out/stdout" 2>&1
[ $? = 0 ] && grep -q -- '--threads' "$out/stdout" && grep -q 'exit status' "$out/stdout"
ok $? "--help exits 0 and lists the technique options"
mae_threads --version >"$out/stdout" 2>&1
ok $? "--version exits 0"
[ ! -e "$out/x" ]
ok $? "no results directory is created for a usage error"

done_testing
