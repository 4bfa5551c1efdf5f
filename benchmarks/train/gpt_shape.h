/* gpt_shape.h — the GPT model's shape (--model gpt --layers --d-model --heads --seq --max-seq
 * --vocab --preset --dropout), its checks, and the analytic figures every training program
 * prints with --analytic: parameters, training FLOPs per step, activation bytes per block and
 * ZeRO's model states per rank. The arithmetic is pure (no MPI): t/unit/test_gpt_shape.c
 * checks it on hand-computed cases.
 *
 * A program that trains the GPT (kernels/gpt_model.h) sets sl_gpt_opt.trains; in the others
 * --model gpt is accepted with --analytic only (any other use is a usage error), never silently
 * replaced by the MLP. */
#ifndef SL_GPT_SHAPE_H
#define SL_GPT_SHAPE_H

#include <stddef.h>

struct sl_ctx;
struct sl_opt_group;

/* L blocks of width h with a heads, s tokens per sequence, a position table of max_seq rows, a
 * vocabulary of V tokens, b sequences per step; the token embedding is tied to the LM head. */
typedef struct sl_gpt_shape {
    long long layers, d_model, heads, seq, max_seq, vocab, batch;
    double dropout;
} sl_gpt_shape;

/* The default shape (small enough for a 2-core machine) and --preset gpt2-small. */
extern const sl_gpt_shape sl_gpt_default, sl_gpt2_small;

/* The options as given: 0 (NAN for dropout) where not given. layers and batch come from the
 * program's own options (sl_gpt_gate copies them when given): --layers (--blocks in
 * megatron_mlp) and --batch, named by layers_opt and batch_opt with their destinations. */
typedef struct sl_gpt_options {
    int model;      /* 0 mlp, 1 gpt */
    int preset;     /* -1 none, 0 gpt2-small */
    int analytic;
    int trains;     /* the program trains the GPT (set before parsing); else --analytic only */
    long long layers, d_model, heads, seq, max_seq, vocab, batch;
    double dropout;
    const long long *stages; /* pipeline: its --stages (0: not given), which the blocks must fill */
    const char *layers_opt, *batch_opt;
    const long long *layers_src, *batch_src;
} sl_gpt_options;
extern sl_gpt_options sl_gpt_opt;
/* --model --d-model --heads --seq --max-seq --vocab --preset --dropout --analytic; the
 * second without --model, for a program with a --model of its own (vdnn). */
extern const struct sl_opt_group sl_gpt_option_group, sl_gpt_shape_option_group;

/* --model gpt or --preset was given. */
static inline int sl_gpt_selected(void) { return sl_gpt_opt.model == 1 || sl_gpt_opt.preset >= 0; }
/* The shape the options describe: the default or the preset, then each option given. */
sl_gpt_shape sl_gpt_resolve(const sl_gpt_options *o);
/* 0 when g is a valid shape; else -1 with one line naming the option in err. */
int sl_gpt_check(const sl_gpt_shape *g, char *err, size_t errlen);

/* Parameters with tied embeddings: 12·L·h² + 13·L·h + V·h + max_seq·h + 2h. */
double sl_gpt_params(const sl_gpt_shape *g);
/* Training FLOPs of one step on B sequences (Megatron-LM, Narayanan et al. 2021, with
 * activation recomputation excluded): 72·B·s·L·h²·(1 + s/(6h) + V/(12·h·L)). */
double sl_gpt_flops_step(const sl_gpt_shape *g, double B);
/* Activation bytes one block keeps for backward on b sequences, 16-bit activations
 * (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
 * no tensor or sequence parallelism). */
typedef enum { SL_GPT_STORE_ALL, SL_GPT_SELECTIVE, SL_GPT_FULL_RECOMPUTE } sl_gpt_recompute;
double sl_gpt_activ_block(const sl_gpt_shape *g, double b, sl_gpt_recompute r);

/* ZeRO (Rajbhandari et al. 2020): per-rank bytes of model states at stage s (0-3) for psi
 * parameters on nd data-parallel ranks, with p, g, o bytes per parameter of parameters,
 * gradients and optimizer states (pgo): stage 1 shards o, 2 also g, 3 also p. */
double sl_zero_states(int stage, double psi, double nd, const double pgo[3]);

/* The analytic table of g (nd: the data-parallel ranks of ZeRO's first column). */
void sl_gpt_print_analytic(const sl_gpt_shape *g, int nd);

/* Called in a program's validate: an invalid shape (or more
 * pipeline stages than blocks) is a usage error; so is --model gpt without --analytic in a
 * program that does not train it (.trains 0), --dropout above 0 in training, and a GPT shape
 * option without --model gpt, --preset or --analytic. Then sl_gpt_analytic: with --analytic, rank 0 prints the table and the program
 * ends with status 0 (nothing written, the technique's own checks skipped: they are about the
 * run, which does not happen); without, it returns. */
void sl_gpt_gate(struct sl_ctx *ctx);
void sl_gpt_analytic(struct sl_ctx *ctx);

#endif
