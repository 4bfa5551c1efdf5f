#!/bin/bash
# The GPT shape's options on the training programs: --preset gpt2-small --analytic prints the
# figures (124,439,808 parameters with tied embeddings) and exits 0 writing nothing; each bad
# shape, --model gpt without --analytic in a program that does not train it yet, dropout in
# training, the MLP's shape options with the GPT and a GPT option without the GPT are usage
# errors: exit 2, one line naming the option.
. "$(dirname "$0")/../lib/common.sh"
out=$(tmpdir)
trap 'rm -rf "$out"' EXIT

for prog in ddp zero pipeline vdnn precision megatron_mlp checkpoint; do
  env -C "$out" "$prog" --preset gpt2-small --analytic >"$out/stdout" 2>"$out/stderr"
  rc=$?
  [ $rc = 0 ] && grep -Eq '^parameters +12Lh\^2 \+ 13Lh \+ Vh \+ sh \+ 2h +124439808 ' "$out/stdout" &&
    grep -q '^# GPT: L 12 blocks, h 768, a 12 heads, s 1024 tokens (position table 1024), V 50257' "$out/stdout"
  ok $? "$prog --preset gpt2-small --analytic: exit 0, 124439808 parameters (rc=$rc)"
  [ $rc = 0 ] || diag "$(cat "$out/stdout" "$out/stderr")"
done
# The figures of gpt2-small at b 8 (hand-computed): 72·8·1024·12·768²·(1 + 1024/4608 + 50257/110592)
# FLOPs; s·b·h = 6291456 bytes (6 MiB): store all x(34 + 5·12·1024/768) = 114 -> 684 MiB,
# selective x34 -> 204 MiB, full 2sbh -> 12 MiB; ZeRO-3 on 64 ranks 16Ψ/64 = 29.669 MiB.
ddp --preset gpt2-small --analytic >"$out/stdout" 2>"$out/stderr"
grep -Eq '^training FLOPs per step .* 6999559372800 ' "$out/stdout" &&
  grep -Eq '^activation MiB/block, store all .* 684\.000 ' "$out/stdout" &&
  grep -Eq '^activation MiB/block, selective .* 204\.000 ' "$out/stdout" &&
  grep -Eq '^activation MiB/block, full recomp .* 12\.000 ' "$out/stdout" &&
  grep -Eq '^ZeRO-3 model states MiB/rank, Nd 64 +16Psi/Nd +29\.669 ' "$out/stdout"
ok $? "ddp --preset gpt2-small --analytic: FLOPs, activation bytes per block, ZeRO-3 states"
# --layers and --batch are the GPT's L and b (megatron_mlp: --blocks); on two ranks, one table
launch 2 ddp --model gpt --layers 3 --batch 2 --analytic >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 0 ] && [ "$(grep -c '^# GPT: L 3 blocks, h 128, a 4 heads, s 64 tokens (position table 64), V 256, b 2 sequences' "$out/stdout")" = 1 ] &&
  grep -Eq '^parameters .* 636032 ' "$out/stdout" && grep -q 'Nd 2 ' "$out/stdout"
ok $? "ddp on 2 ranks, --model gpt --layers 3 --batch 2 --analytic: one table, L 3, b 2, Nd 2 (rc=$rc)"
megatron_mlp --analytic --blocks 3 | grep -q '^# GPT: L 3 blocks'
ok $? "megatron_mlp --analytic --blocks 3: L 3"
[ ! -e "$out/results" ]
ok $? "--analytic wrote no results directory"

expect_usage_of ddp "^ddp: --heads 5: the heads must divide --d-model 128" --model gpt --heads 5 --analytic
expect_usage_of zero "^zero: --heads 7: the heads must divide --d-model 768" --preset gpt2-small --heads 7 --analytic
expect_usage_of pipeline "^pipeline: --seq 2048: longer than the position table's 1024 rows (--max-seq)" \
  --preset gpt2-small --seq 2048 --analytic
expect_usage_of ddp "^ddp: --seq 128: longer than the position table's 64 rows" --model gpt --seq 128 --max-seq 64 --analytic
expect_usage_of checkpoint "^checkpoint: --vocab 1: expected a vocabulary of at least 2" --model gpt --vocab 1 --analytic
expect_usage_of vdnn "^vdnn: --dropout 1: expected a probability in \[0, 1)" --model gpt --dropout 1 --analytic
expect_usage_of precision "^precision: --dropout -0.5: expected a probability in \[0, 1)" --model gpt --dropout -0.5 --analytic
expect_usage_of pipeline "^pipeline: --stages 2: more pipeline stages than the GPT has blocks (--layers 1)" \
  --model gpt --layers 1 --stages 2 --analytic
# Every training program trains the GPT (ddp and zero: t/integration/gpt_train.t; pipeline:
# gpt_pipeline.t; checkpoint: gpt_checkpoint.t; vdnn: vdnn.t; megatron_mlp: megatron_gpt.t;
# precision: precision_gpt.t); a program that took the GPT's shape without training it would say
# so (gpt_shape.c) rather than train the MLP in its place.
expect_usage_of ddp "^ddp: --dropout 1: expected a probability in \[0, 1)" --model gpt --dropout 1
expect_usage_of zero "^zero: --width: the MLP stack's; with --model gpt the shape is" --model gpt --width 64
expect_usage_of ddp "^ddp: --d-model: a GPT shape option; it applies with --model gpt" --d-model 64
expect_usage_of ddp "^ddp: --analytic: prints the GPT model's figures; it does not apply with --model mlp" \
  --model mlp --analytic
expect_usage_of ddp "^ddp: --preset gpt2-small: a GPT shape, and --model is not gpt" --model mlp --preset gpt2-small
expect_usage_of vdnn "^vdnn: --heads: a GPT shape option" --model conv --heads 4
launch 2 ddp --model gpt --heads 3 --analytic >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc = 2 ] && [ "$(grep -c . "$out/stderr")" = 1 ] && grep -q '^ddp: --heads 3' "$out/stderr"
ok $? "on 2 ranks: one line naming --heads, exit 2 (rc=$rc)"
# zero's own --analytic PARAMS (the paper's table) is unchanged beside the GPT's flag
zero --analytic 7.5e9 --ranks 64 | grep -Eq '^stage3 +\+ parameters +16Psi/Nd +1\.9 '
ok $? "zero --analytic 7.5e9 --ranks 64: the paper's table"
done_testing
