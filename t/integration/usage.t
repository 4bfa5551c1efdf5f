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

expect_usage_of kernels "none of the requested kernels has a variant" -d bf16 -k relu
expect_usage_of kernels "does not apply with --train-steps" --train-steps 5 -k gemm
expect_usage_of kernels "lmhead_xent, or all, got 'nope'" -k nope
expect_usage_of kernels "--heads 3 does not divide --d-model 256" --heads 3
expect_usage_of ddp "out of the range of a double (it underflows to 0)" --lr 1e-400
expect_usage_of ddp "out of the range of a double (it overflows)" --lr 1e400
expect_usage_of ddp "--lr: expected a finite number, got 'nan'" --lr nan
SL_COLL_SEGMENT=abc expect_usage_of allreduce "SL_COLL_SEGMENT: expected a size in bytes" -n 1
SL_COLL_STAGE=yes expect_usage_of allreduce "SL_COLL_STAGE: expected 0 or 1 (1: device buffers staged" -n 1
[ ! -e "$out/results" ]
ok $? "none of them created a results directory"
kernels -d bf16,f32 -k relu,gemm -n 1 -w 0 --gemm-n 64 --elems 1024 --copy-bytes 8M -o "$out/k" >"$out/stdout" 2>&1
rc=$?
[ $rc = 0 ] && grep -q 'skipping relu for bf16: it has no bf16 variant' "$out/stdout"
ok $? "kernels -d bf16,f32 -k relu,gemm: runs what it can, a note for relu/bf16 (rc=$rc)"
mae_threads --help | grep -q 'each option is given once'
ok $? "--help says an option is given once"

# An option given explicitly that cannot be honoured is refused before anything is measured,
# naming the option and what it accepts (not dropped with exit 0, nor a failure rows later).
tiny_mlp="--layers 2 --width 8 --inputs 4 --outputs 2 --batch 4 -n 1 -w 0 --baseline 0"
# shellcheck disable=SC2086
expect_usage_of ddp "--accum 100: expected micro-batches in \[1, 4\]" $tiny_mlp --accum 100
# shellcheck disable=SC2086
expect_usage_np 2 ddp "--servers 2: expected servers in \[1, 1\]" $tiny_mlp --servers 2
expect_usage_np 2 allreduce "--root applies to --op broadcast only" -n 1 -w 0 -e 64 --root 1
expect_usage_of allreduce "--redop applies to --op allreduce and reduce_scatter" -n 1 -e 64 --op allgather --redop max
expect_usage_of allreduce "--reps applies to --mode throughput" -n 1 -e 64 --mode latency --reps 2
mm_tiny="--blocks 1 --hidden 8 --ffn-mult 1 --batch 2 -n 1 -w 0 --baseline 0"
# shellcheck disable=SC2086
expect_usage_np 2 megatron_mlp "--coll (-C) shm: seqpar needs allgather and reduce_scatter.*accepts mpi|nccl|ring|rhd" $mm_tiny -C shm
# shellcheck disable=SC2086
expect_usage_np 2 megatron_mlp "--tp 4 needs a multiple of 4 ranks, 2 given" $mm_tiny --tp 4
# shellcheck disable=SC2086
megatron_mlp $mm_tiny -C shm --variants plain -o "$out/mm_shm" >"$out/stdout" 2>&1
ok $? "megatron_mlp -C shm --variants plain: shm provides what plain needs, and it runs"

# One rule for every list option of every program: each value once ('all' alone).
expect_usage "--threads (-t): '2' is given twice" --threads 2,2
expect_usage "--threads (-t): 'max' is given twice" --threads max,max
expect_usage "--dtype (-d): 'f32' is given twice" -d f32,f32
expect_usage "--variants: 'serial' is given twice" --variants serial,serial
# shellcheck disable=SC2086
expect_usage_of megatron_mlp "--tp: '1' is given twice; list each value once" $mm_tiny --tp 1,1
expect_usage_of allreduce "--coll (-C): 'ring' is given twice" -n 1 -e 64 -C ring,ring
expect_usage_of allreduce "--coll (-C): 'all' already names every value" -n 1 -e 64 -C all,ring
expect_usage_of kernels "--kernels (-k): 'relu' is given twice" -k relu,gemm,relu
expect_usage_of ddp "--variants: 'sync' is given twice; list each value once" --variants sync,sync
# kernels --elems: checked against the memory there is before the probes run (a cgroup limit
# of 1 GiB, faked through SL_CGROUP_ROOT, makes it refuse on any machine)
cgv2=$(awk -F: '$1 == "0" && $2 == "" {print $3}' /proc/self/cgroup)
cgv1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
mkdir -p "$out/cg$cgv2" "$out/cg/memory$cgv1"
echo 1073741824 >"$out/cg$cgv2/memory.max"; echo 1073741824 >"$out/cg/memory$cgv1/memory.limit_in_bytes"
SL_CGROUP_ROOT="$out/cg" expect_usage_of kernels "--elems 4294967296: the element-wise kernels hold up to .* expected at most" \
  --elems 4294967296 --gemm-n 64 --copy-bytes 8M -n 1 -w 0

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

# The environment: thread counts and the tests' switches are checked at start-up, one line
# naming the variable (libgomp adds its own warning for OMP_NUM_THREADS when run directly).
for v in 0 garbage -3; do
  OMP_NUM_THREADS=$v mae_threads --samples 1024 --threads 1 -n 1 -w 0 -o "$out/env" >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc = 2 ] && [ "$(grep -c '^mae_threads: ' "$out/stderr")" = 1 ] &&
    grep -q "^mae_threads: OMP_NUM_THREADS '$v': expected a number of threads in \[1, 4096\]" "$out/stderr"
  ok $? "OMP_NUM_THREADS=$v mae_threads -> exit 2 naming it (rc=$rc)"
  OMP_NUM_THREADS=$v launch 1 mae_threads --samples 1024 --threads 1 -n 1 -w 0 -o "$out/env" >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/stderr")" = 1 ] && grep -q "^sl-launch: OMP_NUM_THREADS '$v'" "$out/stderr"
  ok $? "OMP_NUM_THREADS=$v sl-launch -> exit 2, one line, no rank started (rc=$rc: $(cat "$out/stderr"))"
done
OMP_NUM_THREADS=garbage "$top/run_all.sh" --list >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$out/stderr")" = 1 ] && grep -q "OMP_NUM_THREADS 'garbage'" "$out/stderr"
ok $? "OMP_NUM_THREADS=garbage run_all.sh -> exit 2 up front, one line (rc=$rc)"
expect_env() { # expect_env VAR=VALUE WANT
  env "$1" "$top/bin/mae_threads" --samples 1024 --threads 1 -n 1 -w 0 -o "$out/env" >"$out/stdout" 2>"$out/stderr"
  local rc=$?
  [ $rc = 2 ] && [ "$(wc -l <"$out/stderr")" = 1 ] && grep -q -- "$2" "$out/stderr"
  ok $? "$1 mae_threads -> exit 2, one line naming it (rc=$rc: $(cat "$out/stderr"))"
}
expect_env OPENBLAS_NUM_THREADS=garbage "OPENBLAS_NUM_THREADS 'garbage': expected a number of threads"
expect_env SL_TEST_SLOWDOWN=dpp:0.2 "SL_TEST_SLOWDOWN 'dpp:0.2': expected PROGRAM:FRACTION with PROGRAM one of allreduce|"
expect_env SL_TEST_SLOWDOWN=ddp:0.2:3 "SL_TEST_SLOWDOWN 'ddp:0.2:3': expected PROGRAM:FRACTION"
expect_env SL_TEST_CORRUPT=yes "SL_TEST_CORRUPT 'yes': expected 1"
[ ! -e "$out/env" ]
ok $? "no results directory for a bad environment"

done_testing
