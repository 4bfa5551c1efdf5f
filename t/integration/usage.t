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

expect_usage "--threads (-t)\? is given more than once" --threads 1 --threads 2
expect_usage "--iters (-n) is given more than once" -n 3 --iters 4

expect_usage_of() { # expect_usage_of PROGRAM WANT ARGS... (no -o: a usage error writes nothing)
  local prog="$1" want="$2"; shift 2
  env -C "$out" "$prog" "$@" >"$out/stdout" 2>"$out/stderr"
  local rc=$? lines; lines=$(wc -l <"$out/stderr")
  if [ $rc = 2 ] && [ "$lines" = 1 ] && grep -q -- "$want" "$out/stderr"; then
    ok 0 "$prog $* -> exit 2: $(cat "$out/stderr")"
  else
    ok 1 "$prog $* -> exit 2 naming $want"; diag "rc=$rc, stderr: $(cat "$out/stderr")"
  fi
}
expect_usage_of kernels "none of the requested kernels has a variant" -d bf16 -k relu
expect_usage_of kernels "does not apply with --train-steps" --train-steps 5 -k gemm
expect_usage_of kernels "rng_normal, or all, got 'nope'" -k nope
expect_usage_of ddp "out of the range of a double (it underflows to 0)" --lr 1e-400
expect_usage_of ddp "out of the range of a double (it overflows)" --lr 1e400
expect_usage_of ddp "--lr: expected a finite number, got 'nan'" --lr nan
SL_COLL_SEGMENT=abc expect_usage_of allreduce "SL_COLL_SEGMENT: expected a size in bytes" -n 1
[ ! -e "$out/results" ]
ok $? "none of them created a results directory"
kernels -d bf16,f32 -k relu,gemm -n 1 -w 0 --gemm-n 64 --elems 1024 --copy-bytes 8M -o "$out/k" >"$out/stdout" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'skipping relu for bf16: it has no bf16 variant' "$out/stdout"
ok $? "kernels -d bf16,f32 -k relu,gemm: runs what it can, a note for relu/bf16 (rc=$rc)"
mae_threads --help | grep -q 'each option is given once'
ok $? "--help says an option is given once"

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
