/* train_main.c — sl_train_main: the life of a training benchmark. Parses the technique's
 * program with the training option group added, checks the shared options, builds the model,
 * the task and the optimizer, runs every requested collective x variant, and finishes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "sl_env_check.h"
#include "train_internal.h"

static const sl_technique *the_technique;

/* The shared options' checks, then the technique's (which may drop variants it cannot run);
 * then every variant left must be able to split its batch. Runs in sl_init, before anything
 * is written. */
static void validate(sl_ctx *ctx)
{
    const sl_technique *tech = the_technique;
    const sl_train_options *o = &sl_train_opt;
    if (!isnan(o->lr) && (!(o->lr > 0) || o->lr > 1e6)) sl_usage_error("--lr: expected a learning rate in (0, 1e6], got %g", o->lr);
    if (tech->sleep_mode) train_compute_validate(ctx);
    sl_gpt_gate(ctx);
    sl_gpt_analytic(ctx); /* --analytic ends here, before the technique's checks of the run */
    if (sl_gpt_selected()) { /* the GPT trains b sequences (--batch, or the shape's), not the stack */
        static const char *const stack_opts[] = {"width", "inputs", "outputs"};
        for (size_t i = 0; i < sizeof stack_opts / sizeof *stack_opts; i++)
            if (sl_option_given(&ctx->opt, stack_opts[i]))
                sl_usage_error("--%s: the MLP stack's; with --model gpt the shape is --layers --d-model --heads "
                               "--seq --vocab", stack_opts[i]);
        sl_train_opt.batch = sl_gpt_resolve(&sl_gpt_opt).batch;
        /* AdamW unless --optim says otherwise: with SGD a transformer learns the task too slowly
         * to see (200 steps at lr 0.1: loss 5.55 -> 4.91 where AdamW reaches 2.04 of 1.94) */
        if (!sl_option_given(&ctx->opt, "optim")) sl_train_opt.optim = 1;
    }
    if (tech->program.validate) tech->program.validate(ctx);
    if (tech->schedule && !sl_no_predict()) train_calibration_load(o->calibration, ctx->opt.colls, ctx->nranks);
    train_predict_validate(ctx, tech);
    for (int d = 0; d < SL_NDTYPES; d++) /* a technique's validate may choose the precision */
        if (d != SL_F32 && (ctx->opt.dtypes & (1u << d)) &&
            !(train_mixed_tol(tech, (sl_dtype)d, 0) > 0 && train_mixed_tol(tech, (sl_dtype)d, 1) > 0))
            SL_FATAL("%s: training in %s is asked for but the technique states no tolerance for it",
                     tech->program.name, sl_dtype_name((sl_dtype)d));
    unsigned mask = *tech->variant_mask;
    if (!mask) sl_usage_error("--variants: none of the variants asked for can run on %d ranks", ctx->nranks);
    for (int v = 0; v < tech->nvariants; v++) {
        if (!(mask & (1u << v))) continue;
        int d = tech->data_ranks ? tech->data_ranks(v, ctx->nranks) : ctx->nranks;
        if (o->scaling == 1 && d > 0 && o->batch < d)
            sl_usage_error("--batch %lld cannot be split over %d data ranks (strong scaling gives each "
                           "at least one sample): use --batch >= %d", o->batch, d, d);
    }
}

int train_runs(const sl_technique *tech, unsigned mask, int v, sl_dtype dt)
{
    if (!(mask & (1u << v))) return 0;
    if (tech->dtype_variants[dt]) return (tech->dtype_variants[dt] >> v) & 1;
    return dt == SL_F32 ? !((tech->mixed_only_variants >> v) & 1) : (tech->mixed_variants >> v) & 1;
}

int sl_train_main(const sl_technique *tech, int argc, char **argv)
{
    /* The program as the technique wrote it, with the training options before its own. */
    static sl_program prog;
    prog = tech->program;
    int g = 0;
    while (g < SL_MAX_OPT_GROUPS - 1 && prog.groups[g]) g++;
    prog.groups[g++] = tech->model ? &sl_train_step_option_group : &sl_train_option_group;
    if (g >= SL_MAX_OPT_GROUPS - 1) SL_FATAL("%s: no free option group for the GPT shape", prog.name);
    prog.groups[g++] = &sl_gpt_option_group;
    /* The GPT's block count is the stack's --layers (a technique with its own model names its
     * own option) and b is --batch. */
    if (!tech->model) sl_gpt_opt.layers_opt = "layers", sl_gpt_opt.layers_src = &sl_train_opt.layers;
    sl_gpt_opt.trains = tech->trains_gpt;
    sl_gpt_opt.batch_opt = "batch", sl_gpt_opt.batch_src = &sl_train_opt.batch;
    if (tech->sleep_mode) {
        if (g >= SL_MAX_OPT_GROUPS - 1 || !tech->reset) /* groups stay NULL-ended */
            SL_FATAL("%s: sleep mode needs a free option group and .reset", prog.name);
        prog.groups[g] = &train_compute_option_group;
        train_compute_env(argc, argv);
    }
    prog.validate = validate;
    the_technique = tech;

    sl_ctx ctx;
    sl_init(&ctx, &prog, argc, argv);
    const int P = ctx.nranks;
    const sl_backend be = ctx.opt.backend;
    const sl_train_options *o = &sl_train_opt;

    sl_mlp m;
    const int gpt = sl_gpt_selected();
    const sl_gpt_shape gs = sl_gpt_resolve(&sl_gpt_opt);
    if (gpt) {
        const sl_gpt_dims d = {.layers = (int)gs.layers, .C = (int)gs.d_model, .NH = (int)gs.heads,
                               .T = (int)gs.seq, .max_T = (int)gs.max_seq, .V = (int)gs.vocab,
                               .dropout = (float)gs.dropout, .dropout_seed = (uint64_t)o->seed};
        if (sl_gpt_model_init(&m, be, &d) != 0)
            sl_usage_error("--layers %lld: the GPT takes at most %d blocks", gs.layers, SL_MLP_MAX_LAYERS - 3);
    } else if (tech->model ? tech->model(&m, be) != 0
                           : sl_mlp_init(&m, be, (int)o->layers, (int)o->inputs, (int)o->width, (int)o->outputs,
                                         SL_ACT_GELU)) {
        sl_usage_error("%s: not a valid model shape",
                       tech->model ? "the model's options" : "--layers/--width/--inputs/--outputs");
    }
    sl_optim optim = {0};
    optim.kind = o->optim ? SL_OPTIM_ADAMW : SL_OPTIM_SGD;
    /* Without --lr: the optimizer's default for this model (a technique's own model, which
     * sl_optim_default_lr does not describe, takes 0.01). */
    const int lr_given = !isnan(o->lr);
    if (!lr_given) sl_train_opt.lr = tech->model_params ? 0.01 : sl_optim_default_lr(&m, optim.kind);
    optim.sgd = (sl_sgd){.lr = (float)o->lr, .momentum = 0.9f, .weight_decay = 0.0f};
    optim.adamw = (sl_adamw){.lr = (float)o->lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                             .weight_decay = (float)o->weight_decay};
    int max_batch = o->scaling == 0 ? (int)o->batch * P : (int)o->batch;
    sl_task task;
    if (gpt)
        sl_task_init_gpt(&task, be, m.gpt.T, m.gpt.V, (uint64_t)o->seed);
    else
        sl_task_init(&task, be, m.dims[0], m.dims[m.nlayers], (uint64_t)o->seed, max_batch);

    if (gpt)
        sl_note(&ctx, "GPT %d blocks x %d, %d heads, %d tokens, vocabulary %d (%zu parameters, LM head untied; "
                      "%.1f MiB of f32 gradients), %s scaling, batch %lld sequences %s, %s lr %.3g%s; the task's "
                      "loss falls from ln V = %.3f towards %.3f nats",
                m.gpt.layers, m.gpt.C, m.gpt.NH, m.gpt.T, m.gpt.V, m.nparams, m.nparams * 4.0 / 1048576,
                o->scaling ? "strong" : "weak", o->batch, o->scaling ? "in all" : "per data rank",
                sl_optim_name(optim.kind), o->lr, lr_given ? "" : " (this model's default)", log((double)m.gpt.V),
                sl_gpt_task_floor(m.gpt.V));
    else if (!tech->model && !tech->model_params) /* a technique's own model: it says what it trains */
        sl_note(&ctx, "MLP %lld x %lld wide (%zu parameters, %.1f MiB of f32 gradients), %s scaling, "
                      "batch %lld %s, %s lr %.3g%s",
                o->layers, o->width, m.nparams, m.nparams * 4.0 / 1048576, o->scaling ? "strong" : "weak",
                o->batch, o->scaling ? "in all" : "per data rank", sl_optim_name(optim.kind), o->lr,
                lr_given ? "" : " (this shape's default)");
    /* Say what the efficiency is measured against: the same variant on one rank training the
     * same global batch, inside this run, on one rank's share of the cores, which is fewer than
     * a program started alone gets. */
    char threads[48];
    snprintf(threads, sizeof threads, ", on %d GEMM thread%s", sl_k_cpu_threads(), sl_k_cpu_threads() == 1 ? "" : "s");
    if (P > 1 && o->baseline)
        sl_note(&ctx, "eff: the speedup over one rank training the same global batch (the same variant on "
                      "rank 0 alone, in this run%s), divided by the %d ranks: at most 100%% unless "
                      "superlinear, which the row then says; compare variants by samples/s",
                be == SL_BACKEND_CPU ? threads : "", P);
    train_plan_bind(tech, &m, &task, &optim);
    const int predicts_itself = train_predict_file && tech->predicts_itself && tech->predicts_itself();
    if (train_predict_file && !predicts_itself) { /* a described machine at rank counts not launched: nothing is run */
        train_predict_main(&ctx, tech, &m, &task, &optim);
        sl_task_free(&task);
        return sl_finalize(&ctx);
    }
    if (tech->before) tech->before(&ctx, &m);
    if (!predicts_itself) sl_table_begin(&ctx, tech->columns, tech->ncolumns);

    train_baseline *baselines = calloc((size_t)tech->nvariants, sizeof *baselines);
    if (!baselines) SL_FATAL("out of memory");
    const unsigned mask = *tech->variant_mask;
    for (int d = 0; d < SL_NDTYPES; d++) { /* f32 first: the 16-bit rows then read against it */
        if (!(ctx.opt.dtypes & (1u << d))) continue;
        const sl_dtype dt = (sl_dtype)d;
        memset(baselines, 0, (size_t)tech->nvariants * sizeof *baselines);
        for (int pass = 0; tech->sweep ? tech->sweep(&ctx, pass) : pass == 0; pass++) {
            for (int c = 0; c < SL_NCOLLS; c++) {
                if (!(ctx.opt.colls & (1u << c))) continue;
                for (int v = 0; v < tech->nvariants; v++)
                    if (train_runs(tech, mask, v, dt) && !((tech->p2p_variants >> v) & 1))
                        train_run_variant(&ctx, tech, v, dt, (sl_coll)c, &m, &task, &optim, baselines);
            }
            for (int v = 0; v < tech->nvariants; v++) /* point to point: once, whatever -C says */
                if (train_runs(tech, mask, v, dt) && ((tech->p2p_variants >> v) & 1))
                    train_run_variant(&ctx, tech, v, dt, SL_COLL_MPI, &m, &task, &optim, baselines);
        }
    }

    if (tech->after) tech->after(&ctx);
    free(baselines);
    train_references_free();
    sl_task_free(&task);
    return sl_finalize(&ctx);
}
