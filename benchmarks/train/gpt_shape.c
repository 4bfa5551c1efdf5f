/* gpt_shape.c — the GPT shape's options, checks and analytic figures (see gpt_shape.h). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "scalelab.h"

/* A model a 2-core machine trains in seconds a step: 2 blocks of 128 with 4 heads of 32, 64
 * tokens, a 256-token vocabulary, 8 sequences. */
const sl_gpt_shape sl_gpt_default = {.layers = 2, .d_model = 128, .heads = 4, .seq = 64, .max_seq = 64,
                                     .vocab = 256, .batch = 8, .dropout = 0};
/* GPT-2 small (Radford et al. 2019): 12 x 768, 12 heads, 1024 positions, 50257 tokens. The
 * batch, 8 sequences, is Megatron-LM's per-GPU micro-batch; --batch changes it. */
const sl_gpt_shape sl_gpt2_small = {.layers = 12, .d_model = 768, .heads = 12, .seq = 1024, .max_seq = 1024,
                                    .vocab = 50257, .batch = 8, .dropout = 0};

sl_gpt_options sl_gpt_opt = {.preset = -1, .dropout = NAN};

/* The ranges only keep the arithmetic finite; the shape's own rules are sl_gpt_check's, whose
 * messages say why. */
static const sl_opt gpt_opts[] = {
    {"model", 0, SL_OPT_CHOICE, &sl_gpt_opt.model, 0, 0, "mlp|gpt", 0,
     "the model: the MLP stack (default), or gpt (GPT blocks; programs that do not train it yet take it with "
     "--analytic only)"},
    {"d-model", 0, SL_OPT_INT, &sl_gpt_opt.d_model, 1, 1 << 20, NULL, 0, "gpt: width h (default 128)"},
    {"heads", 0, SL_OPT_INT, &sl_gpt_opt.heads, 1, 1 << 20, NULL, 0, "gpt: attention heads a, dividing h (default 4)"},
    {"seq", 0, SL_OPT_INT, &sl_gpt_opt.seq, 1, 1 << 24, NULL, 0, "gpt: tokens per sequence s (default 64)"},
    {"max-seq", 0, SL_OPT_INT, &sl_gpt_opt.max_seq, 1, 1 << 24, NULL, 0,
     "gpt: rows of the position table, at least --seq (default the preset's, else --seq)"},
    {"vocab", 0, SL_OPT_INT, &sl_gpt_opt.vocab, 1, 1 << 24, NULL, 0, "gpt: vocabulary V, at least 2 (default 256)"},
    {"preset", 0, SL_OPT_CHOICE, &sl_gpt_opt.preset, 0, 0, "gpt2-small", 0,
     "gpt2-small: 12 blocks x 768, 12 heads, 1024 tokens, V 50257 (options given change it); implies --model gpt "
     "(default none)"},
    {"dropout", 0, SL_OPT_DOUBLE, &sl_gpt_opt.dropout, 0, 0, NULL, 0, "gpt: dropout probability in [0, 1) (default 0)"},
    {"analytic", 0, SL_OPT_FLAG, &sl_gpt_opt.analytic, 0, 0, NULL, 0,
     "print the GPT shape's parameters, FLOPs, activation and ZeRO bytes, and exit (no run; "
     "--layers/--blocks and --batch set L and b)"},
    {0},
};

const sl_opt_group sl_gpt_option_group = {"transformer (gpt)", gpt_opts};
const sl_opt_group sl_gpt_shape_option_group = {"transformer (gpt)", gpt_opts + 1};

sl_gpt_shape sl_gpt_resolve(const sl_gpt_options *o)
{
    sl_gpt_shape g = o->preset == 0 ? sl_gpt2_small : sl_gpt_default;
    if (o->layers) g.layers = o->layers;
    if (o->d_model) g.d_model = o->d_model;
    if (o->heads) g.heads = o->heads;
    if (o->seq) g.seq = o->seq;
    if (o->seq && o->preset < 0) g.max_seq = o->seq; /* without a preset the table holds --seq rows */
    if (o->max_seq) g.max_seq = o->max_seq;
    if (o->vocab) g.vocab = o->vocab;
    if (o->batch) g.batch = o->batch;
    if (!isnan(o->dropout)) g.dropout = o->dropout;
    return g;
}

int sl_gpt_check(const sl_gpt_shape *g, char *err, size_t errlen)
{
    if (g->d_model % g->heads)
        snprintf(err, errlen, "--heads %lld: the heads must divide --d-model %lld (each head is h/a wide)", g->heads,
                 g->d_model);
    else if (g->seq > g->max_seq)
        snprintf(err, errlen, "--seq %lld: longer than the position table's %lld rows (--max-seq)", g->seq,
                 g->max_seq);
    else if (g->vocab < 2)
        snprintf(err, errlen, "--vocab %lld: expected a vocabulary of at least 2 tokens", g->vocab);
    else if (!(g->dropout >= 0 && g->dropout < 1))
        snprintf(err, errlen, "--dropout %g: expected a probability in [0, 1)", g->dropout);
    else
        return 0;
    return -1;
}

double sl_gpt_params(const sl_gpt_shape *g)
{
    const double L = (double)g->layers, h = (double)g->d_model;
    return 12 * L * h * h + 13 * L * h + (double)g->vocab * h + (double)g->max_seq * h + 2 * h;
}

double sl_gpt_flops_step(const sl_gpt_shape *g, double B)
{
    const double L = (double)g->layers, h = (double)g->d_model, s = (double)g->seq, V = (double)g->vocab;
    return 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
}

double sl_gpt_activ_block(const sl_gpt_shape *g, double b, sl_gpt_recompute r)
{
    const double s = (double)g->seq, h = (double)g->d_model, a = (double)g->heads;
    switch (r) {
    case SL_GPT_STORE_ALL: return s * b * h * (34 + 5 * a * s / h);
    case SL_GPT_SELECTIVE: return 34 * s * b * h;
    case SL_GPT_FULL_RECOMPUTE: return 2 * s * b * h; /* the block's input, 16 bits */
    }
    return NAN;
}

double sl_zero_states(int stage, double psi, double nd, const double pgo[3])
{
    double kept = 0, sharded = 0;
    for (int i = 0; i < 3; i++) {
        int is_sharded = (i == 2 && stage >= 1) || (i == 1 && stage >= 2) || (i == 0 && stage >= 3);
        *(is_sharded ? &sharded : &kept) += pgo[i];
    }
    return kept * psi + sharded * psi / nd;
}

void sl_gpt_print_analytic(const sl_gpt_shape *g, int nd)
{
    const double psi = sl_gpt_params(g), B = (double)g->batch, MiB = 1048576.0;
    printf("# GPT: L %lld blocks, h %lld, a %lld heads, s %lld tokens (position table %lld), V %lld, "
           "b %lld sequences, tied embeddings\n",
           g->layers, g->d_model, g->heads, g->seq, g->max_seq, g->vocab, g->batch);
    printf("%-35s %-34s %16s  %s\n", "#figure", "formula", "value", "source");
    printf("%-35s %-34s %16.0f  %s\n", "parameters", "12Lh^2 + 13Lh + Vh + sh + 2h", psi,
           "GPT-2 with tied embeddings");
    printf("%-35s %-34s %16.0f  %s\n", "training FLOPs per step", "72bsLh^2 (1 + s/6h + V/12hL)",
           sl_gpt_flops_step(g, B), "Narayanan et al. 2021 (Megatron-LM)");
    static const char *const act_name[3] = {"activation MiB/block, store all", "activation MiB/block, selective",
                                            "activation MiB/block, full recomp"};
    static const char *const act_formula[3] = {"sbh (34 + 5as/h), 16-bit", "34sbh (attention core recomputed)",
                                               "2sbh (the block's input)"};
    for (int r = 0; r < 3; r++)
        printf("%-35s %-34s %16.3f  %s\n", act_name[r], act_formula[r],
               sl_gpt_activ_block(g, B, (sl_gpt_recompute)r) / MiB, "Korthikanti et al. 2022");
    /* mixed precision with Adam: fp16 parameters and gradients, fp32 master, momentum, variance */
    static const double pgo[3] = {2, 2, 12};
    static const char *const zf[4] = {"16Psi", "4Psi + 12Psi/Nd", "2Psi + 14Psi/Nd", "16Psi/Nd"};
    const int nds[2] = {nd, 64};
    for (int k = 0; k < 2; k++) {
        if (k == 1 && nd == 64) break;
        for (int s = 0; s < 4; s++) {
            char name[64];
            snprintf(name, sizeof name, "ZeRO-%d model states MiB/rank, Nd %d", s, nds[k]);
            printf("%-35s %-34s %16.3f  %s\n", name, zf[s], sl_zero_states(s, psi, nds[k], pgo) / MiB,
                   "Rajbhandari et al. 2020 (2+2+12 B/param, Adam)");
        }
    }
    printf("# b: --batch sequences (per rank); MiB = 2^20 bytes; activations of a block without tensor or "
           "sequence parallelism\n");
}

void sl_gpt_gate(sl_ctx *ctx)
{
    static const char *const shape_opts[] = {"d-model", "heads", "seq", "max-seq", "vocab", "dropout"};
    if (sl_gpt_opt.layers_src && sl_option_given(&ctx->opt, sl_gpt_opt.layers_opt))
        sl_gpt_opt.layers = *sl_gpt_opt.layers_src;
    if (sl_gpt_opt.batch_src && sl_option_given(&ctx->opt, sl_gpt_opt.batch_opt)) sl_gpt_opt.batch = *sl_gpt_opt.batch_src;
    const int gpt = sl_gpt_selected();
    if (sl_gpt_opt.model == 0 && sl_option_given(&ctx->opt, "model") && sl_gpt_opt.preset >= 0)
        sl_usage_error("--preset gpt2-small: a GPT shape, and --model is not gpt");
    if (!gpt && !sl_gpt_opt.analytic) {
        for (size_t i = 0; i < sizeof shape_opts / sizeof shape_opts[0]; i++)
            if (sl_option_given(&ctx->opt, shape_opts[i]))
                sl_usage_error("--%s: a GPT shape option; it applies with --model gpt (or --preset, --analytic)",
                               shape_opts[i]);
        return;
    }
    if (sl_gpt_opt.analytic && sl_gpt_opt.model == 0 && sl_option_given(&ctx->opt, "model"))
        sl_usage_error("--analytic: prints the GPT model's figures; it does not apply with --model %s",
                       "mlp");
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    char err[256];
    if (sl_gpt_check(&g, err, sizeof err)) sl_usage_error("%s", err);
    if (sl_gpt_opt.stages && *sl_gpt_opt.stages > g.layers)
        sl_usage_error("--stages %lld: more pipeline stages than the GPT has blocks (--layers %lld)", *sl_gpt_opt.stages,
                       g.layers);
    if (sl_gpt_opt.analytic && !gpt) sl_gpt_opt.model = 1; /* the flag alone: the default GPT shape */
    if (sl_gpt_opt.analytic) return;
    if (!sl_gpt_opt.trains)
        sl_usage_error("--model gpt: the gpt model is not trained by %s yet; --analytic prints its figures",
                       ctx->prog->name);
}

void sl_gpt_analytic(sl_ctx *ctx)
{
    if (!sl_gpt_opt.analytic) return;
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    if (ctx->rank == 0) {
        sl_gpt_print_analytic(&g, ctx->nranks);
        fflush(stdout);
    }
    MPI_Barrier(ctx->comm);
    MPI_Finalize();
    exit(0);
}
