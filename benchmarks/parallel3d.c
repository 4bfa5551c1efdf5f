/* parallel3d.c — 3-D parallelism of the GPT on the training layer: data x tensor x pipeline.
 *
 * The ranks form a grid D x T x P (--dp --tp --pp, D·T·P = ranks). A rank's coordinates (d, t,
 * p) come from its rank with the dimensions in --order, fastest first: Megatron-LM's order,
 * the default tp-dp-pp, puts the T ranks of a tensor-parallel group on consecutive ranks (on
 * a cluster: one node), then the data-parallel replicas, then the pipeline stages slowest:
 * rank = t + T·(d + D·p). Three groups per rank: tp (same d, p), dp (same t, p), pp (same d, t).
 *
 * What is partitioned, and what is communicated when:
 *   pipeline  the L blocks in P contiguous stages (the first L % P stages one more), the
 *             embedding with stage 0 and the LM head with the last. A replica's sequences of
 *             the step go through in --micro-batches m, in the order of the pipeline schedule
 *             (train/pipe_schedule.c, the lists pipeline.c runs: 1f1b by default, gpipe,
 *             interleaved): each micro-batch's boundary activation forward and its gradient
 *             backward, non-blocking point to point in the pp group. 1F1B keeps at most P - p
 *             micro-batches in flight on stage p, GPipe all m.
 *   interleaved  Megatron-LM's interleaved 1F1B (Narayanan et al. 2021): the blocks in P·v
 *             equal chunks (--virtual v, default 2; P·v must divide L, P the micro-batches),
 *             stage p holding chunks p, p + P, ... (parallel3d/chunks.h), any of its slots
 *             holding any of them; a micro-batch goes round the stages v times, the last
 *             stage's output of chunk k sent to stage 0's chunk k + 1 (and its gradient back):
 *             2v boundaries a micro-batch on a middle stage against 1F1B's 2 (2v − 1 against 1
 *             on the first and the last), a bubble of (P − 1)/(v·m) of the ideal step against
 *             1F1B's (P − 1)/m, and up to min(m·v, 2(P − p − 1) + (v − 1)P + 1) micro-batch
 *             chunks in flight on stage p (each a chunk's activations).
 *   tensor    each block, the embedding and the head split T ways as megatron_mlp --model gpt
 *             splits them (train/tp_gpt.c, the same code): heads and the MLP's inner features
 *             column- then row-parallel, four all-reduces of the micro-batch's N·C per block,
 *             the vocabulary-parallel embedding (one all-reduce) and head with the parallel
 *             cross-entropy (three of N f32 and one of N·C).
 *   data      each stage's slices summed over the D replicas holding them, one all-reduce in
 *             the run's dtype after the last micro-batch, then the optimizer on every rank.
 *   --zero 1  ZeRO stage 1 (Rajbhandari et al. 2020) over the data-parallel group: the stage's
 *             vector padded to D equal blocks of S, replica d keeps the optimizer state (and in
 *             16 bits the f32 master weights) of block d alone; the gradients are
 *             reduce-scattered over the replicas instead of all-reduced, each replica steps its
 *             block and the weights (the run's dtype) are all-gathered back into every replica.
 *             The same bytes on a ring as the all-reduce; optimizer state 1/D.
 *   --zero 2  ZeRO stage 2: the 16-bit gradient sharded too. The micro-batches still accumulate
 *             in the stage's whole f32 gradient (one rounding, as serial training's); the
 *             reduce-scatter's 16-bit vector is written over that accumulation block by block,
 *             and the replica keeps the 16-bit gradient of block d alone, 1/D. The same
 *             collectives and bytes as --zero 1, and the same weights bit for bit; in f32 the
 *             accumulation is the gradient, and --zero 2 holds what --zero 1 does.
 *   --recompute selective  Korthikanti et al.'s selective recomputation (2022, section 5): the
 *             attention probabilities (B·(a/T)·s² a block, the largest tensor at long sequences)
 *             are not kept; before each block's backward its attention forward runs again from
 *             the kept QKV into one buffer the blocks share. No communication is repeated.
 *   --recompute full  full activation recomputation: a micro-batch in flight keeps only its stage
 *             input; before its backward the stage's forward runs again (its two all-reduces a
 *             block too) into one set of tensors the micro-batches share.
 *
 * The check: gradients are summed over every micro-batch and replica and the loss normalised
 * over the global batch, so one step is serial full-batch GPT training up to the order of
 * floating-point additions; the trained weights, gathered from replica 0's ranks, are compared
 * with serial training in the run's dtype (the driver's tolerances), and every rank's vector
 * must be bit-identical to the other replicas' of its (t, p) (check()). The measured bytes of
 * each group per step are compared with their models on the suite's ring (exactly, where the
 * ring's chunks are equal), and the parameters a rank holds with the model's count.
 *
 * This file is the technique: its options, their checks, the search's hooks and the table the
 * training layer runs. Below it, in parallel3d/ (state.h: what a rank holds): the grid
 * (grid.c), a stage's setup (stage.c) and step (pass.c), the replicas' exchange and update
 * (replicas.c), the models and the row (model.c), the checks (check.c), the step as the
 * performance model reads it (pm_schedule.c), --bucket-mb's buckets (buckets.c) and --search
 * (search.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "parallel3d/pm_schedule.h"
#include "parallel3d/search.h"
#include "parallel3d/state.h"

#define P3_VARIANTS(X) X(V_1F1B, "1f1b") X(V_GPIPE, "gpipe") X(V_INTERLEAVED, "interleaved")
SL_ENUM(p3_variant, P3_VARIANTS, NVARIANTS);
static const char *const variant_names[] = SL_ENUM_NAMES(P3_VARIANTS);
static const int variant_schedule[NVARIANTS] = {[V_1F1B] = S_1F1B, [V_GPIPE] = S_GPIPE,
                                                [V_INTERLEAVED] = S_INTERLEAVED};

static long long opt_dp = 0, opt_tp = 1, opt_pp = 1, opt_micro = 0, opt_virtual = 0;
static long long opt_zero = 0;
static int opt_recompute = RC_NONE;
static const char *opt_order = "tp-dp-pp";
static unsigned opt_variants = 1u << V_1F1B;
static int opt_search = 0, opt_predict_only = 0;
static long long opt_search_top = 3, opt_search_sample = 2;
static size_t opt_mem_limit = 0;
static double opt_bucket_mb = 0;

static const sl_opt p3_opts[] = {
    {"dp", 0, SL_OPT_INT, &opt_dp, 1, 1 << 16, NULL, 0, "data-parallel replicas D (default ranks / (T x P))"},
    {"tp", 0, SL_OPT_INT, &opt_tp, 1, 1 << 16, NULL, 0, "tensor-parallel degree T (default 1)"},
    {"pp", 0, SL_OPT_INT, &opt_pp, 1, 1 << 16, NULL, 0, "pipeline stages P (default 1)"},
    {"order", 0, SL_OPT_STRING, &opt_order, 0, 0, NULL, 0,
     "the grid's dimensions, fastest first (default tp-dp-pp, Megatron-LM's)"},
    {"micro-batches", 'm', SL_OPT_INT, &opt_micro, 1, 1 << 30, NULL, 0,
     "micro-batches per replica and step (default P)"},
    {"zero", 0, SL_OPT_INT, &opt_zero, 0, 2, NULL, 0,
     "ZeRO stage over the data-parallel group: 0 replicated, 1 optimizer state (and f32 master) sharded over the D "
     "replicas, 2 the 16-bit gradient too (the micro-batches accumulate in the whole f32 gradient; default 0)"},
    {"recompute", 0, SL_OPT_CHOICE, &opt_recompute, 0, 0, "none|selective|full", 0,
     "activation recomputation: none (default); selective: the attention probabilities are not kept, each block's "
     "attention runs again before its backward; full: each micro-batch keeps its stage input only, the stage's "
     "forward runs again before its backward"},
    {"schedule", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(P3_VARIANTS), 0,
     "pipeline schedules to run (default 1f1b; interleaved: Megatron's interleaved 1F1B over --virtual chunks a "
     "stage)"},
    /* 0 stays "not given" (interleaved's default 2): the parser refuses 0 itself */
    {"virtual", 0, SL_OPT_INT, &opt_virtual, 1, P3_MAX_CHUNKS, NULL, 0,
     "model chunks per stage for interleaved: the blocks in P x v chunks, stage p holding chunks p, p + P, ... "
     "(default 2; P x v must divide --layers, P the micro-batches)"},
    {"bucket-mb", 0, SL_OPT_DOUBLE, &opt_bucket_mb, 0, 0, NULL, 0,
     "the replicas' gradient all-reduce in buckets of at least this many MiB of a stage's layers, each started "
     "as soon as its layers' gradients are complete in the stage's last backward (--zero 0; default 0: one "
     "all-reduce after the last micro-batch)"},
    {"search", 0, SL_OPT_FLAG, &opt_search, 0, 0, NULL, 0,
     "find the fastest layout: predict every (D, T, P, micro-batches, zero, recompute) that divides the ranks, the "
     "model and the batch and fits --mem-limit (--schedule interleaved: each with every --virtual v >= 2 that its "
     "rules allow, P 1 left out), run the fastest predictions and a sample of the rest, and print them by measured "
     "step beside the prediction (--batch is then the global batch)"},
    {"search-top", 0, SL_OPT_INT, &opt_search_top, 1, 1000, NULL, 0,
     "--search: the fastest predictions to run (default 3)"},
    {"search-sample", 0, SL_OPT_INT, &opt_search_sample, 0, 1000, NULL, 0,
     "--search: layouts to run besides, spread evenly over the rest of the predicted order (default 2)"},
    {"predict-only", 0, SL_OPT_FLAG, &opt_predict_only, 0, 0, NULL, 0,
     "--search: predict every layout and run none (with --predict FILE --predict-ranks N: on that machine at N "
     "ranks, from one rank here; without it, from primitives measured on the launched ranks)"},
    {"mem-limit", 0, SL_OPT_SIZE, &opt_mem_limit, 1, 1LL << 50, NULL, 0,
     "--search: bytes a rank may hold by the memory model (default: the device's free memory, or on the cpu "
     "backend the node's available memory or its cgroup's limit over the ranks on the node)"},
    {0},
};


/* The technique's entries on parallel3d/ ------------------------------------------------------ */

/* Chunks a stage for schedule variant (pipeline.c's rule: interleaved's --virtual, default 2). */
static int virtual_of(int variant) { return variant == V_INTERLEAVED ? (opt_virtual > 0 ? (int)opt_virtual : 2) : 1; }

/* The layout the options ask for under schedule variant (the search sets them to each layout it
 * runs). */
static p3_layout asked(int variant)
{
    return (p3_layout){(int)opt_dp,   (int)opt_tp,   (int)opt_pp,         (int)opt_micro,
                       (int)opt_zero, opt_recompute, virtual_of(variant)};
}

static void setup(sl_train *t)
{
    const p3_layout one = {1, 1, 1, 1, 0, 0, 1}, L = t->baseline ? one : asked(t->variant);
    p3_setup(t, &L, variant_schedule[t->variant], opt_bucket_mb);
}

static void row(sl_train *t, sl_result *res)
{
    p3_row(t, res, variant_names[t->variant]);
    if (opt_search) p3_search_row(res);
}

static void reference(sl_train *t, float *params, double *losses) { sl_train_serial_run(t, t->dtype, params, losses); }

/* Options ----------------------------------------------------------------------------------- */

static int data_ranks(int variant, int nranks)
{
    (void)variant;
    return nranks < opt_dp ? nranks : (int)opt_dp;
}

/* The collectives that provide a reduce-scatter and an all-gather (--zero 1 and 2 need both). */
static unsigned gather_scatter_colls(void)
{
    unsigned ok = 0;
    for (int c = 0; c < SL_NCOLLS; c++)
        if (sl_coll_supports((sl_coll)c, SL_CO_ALLGATHER) && sl_coll_supports((sl_coll)c, SL_CO_REDUCE_SCATTER))
            ok |= 1u << c;
    return ok;
}

/* --search ----------------------------------------------------------------------------------- */

static p3_search search; /* validate fills it, the first pass of the sweep adds the memory limit */

static sl_gpt_dims shape_dims(void)
{
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    return (sl_gpt_dims){.layers = (int)g.layers, .C = (int)g.d_model, .NH = (int)g.heads, .T = (int)g.seq,
                         .max_T = (int)g.max_seq, .V = (int)g.vocab};
}

/* The search's memory of a layout: p3_layout_memory (parallel3d/model.c) on the options. */
static double layout_memory(const p3_layout *L)
{
    const sl_gpt_dims g = shape_dims();
    return p3_layout_memory(L, &g, search.dt, search.global_batch, variant_schedule[search.variant],
                            sl_train_opt.optim ? SL_OPTIM_ADAMW : SL_OPTIM_SGD);
}

static void use_layout(const p3_layout *L)
{
    opt_dp = L->D, opt_tp = L->T, opt_pp = L->P, opt_micro = L->m, opt_zero = L->zero, opt_recompute = L->recompute;
    opt_virtual = L->v; /* read under interleaved alone (virtual_of) */
}

/* --mem-limit, or what a rank can hold here: the device's free memory, or the node's available
 * memory (the cgroup's limit where it leaves less) shared by the ranks on the node; the least
 * over the ranks. */
static void mem_limit(sl_ctx *ctx)
{
    if (opt_mem_limit) {
        search.mem_limit = (double)opt_mem_limit;
        snprintf(search.mem_source, sizeof search.mem_source, "--mem-limit %zu bytes a rank", opt_mem_limit);
        return;
    }
    if (search.mode == P3_SEARCH_PLATFORM) {
        search.mem_limit = INFINITY;
        snprintf(search.mem_source, sizeof search.mem_source,
                 "no limit: the platform states no memory; give --mem-limit");
        return;
    }
    double mine = INFINITY;
    if (ctx->opt.backend == SL_BACKEND_CUDA) {
        const long long f = sl_cuda_device_free();
        if (f >= 0) mine = (double)f;
    } else {
        const size_t a = sl_mem_available();
        if (a != SIZE_MAX) mine = (double)a / (ctx->node_ranks > 0 ? ctx->node_ranks : 1);
    }
    SL_CHECK_MPI(MPI_Allreduce(&mine, &search.mem_limit, 1, MPI_DOUBLE, MPI_MIN, ctx->comm));
    if (isinf(search.mem_limit))
        snprintf(search.mem_source, sizeof search.mem_source, "no memory limit known");
    else
        snprintf(search.mem_source, sizeof search.mem_source, "%.0f MiB a rank: %s", search.mem_limit / 1048576,
                 ctx->opt.backend == SL_BACKEND_CUDA ? "the device's free memory"
                                                     : "available memory over the node's ranks");
}

static int sweep(sl_ctx *ctx, int pass)
{
    if (!opt_search) return pass == 0;
    if (pass == 0) mem_limit(ctx);
    return p3_search_sweep(ctx, pass, &search);
}

static int predicts_itself(void) { return opt_search; }

static void row_done(sl_train *t, const sl_result *res)
{
    (void)t;
    if (opt_search) p3_search_done(res);
}

/* --search's checks, and the layout of the first run (the sweep sets each). */
static void validate_search(sl_ctx *ctx)
{
    static const char *const chosen[] = {"dp", "tp", "pp", "micro-batches", "zero", "recompute", "virtual"};
    static const char *const own[] = {"search-top", "search-sample", "mem-limit", "predict-only"};
    if (!opt_search) {
        for (size_t i = 0; i < sizeof own / sizeof *own; i++)
            if (sl_option_given(&ctx->opt, own[i])) sl_usage_error("--%s: only with --search", own[i]);
        return;
    }
    for (size_t i = 0; i < sizeof chosen / sizeof *chosen; i++)
        if (sl_option_given(&ctx->opt, chosen[i]))
            sl_usage_error("--%s: --search chooses the layout; leave out --dp --tp --pp --micro-batches --zero "
                           "--recompute --virtual", chosen[i]);
    if (__builtin_popcount(ctx->opt.dtypes) != 1)
        sl_usage_error("--dtype (-d): --search ranks layouts in one precision; give one of f32, f16, bf16");
    if (__builtin_popcount(ctx->opt.colls) != 1)
        sl_usage_error("--coll (-C): --search ranks layouts over one collective implementation; give one");
    if (__builtin_popcount(opt_variants) != 1)
        sl_usage_error("--schedule: --search ranks layouts of one pipeline schedule; give one of 1f1b, gpipe, "
                       "interleaved");
    if (sl_option_given(&ctx->opt, "scaling") && sl_train_opt.scaling == 0)
        sl_usage_error("--scaling weak: --search compares layouts on the same global batch (strong scaling: --batch "
                       "is the global batch)");
    sl_train_opt.scaling = 1;
    const int platform = sl_option_given(&ctx->opt, "predict");
    if (platform && !opt_predict_only)
        sl_usage_error("--predict: with --search it ranks layouts on the machine described without running them: "
                       "add --predict-only");
    if (!platform && sl_option_given(&ctx->opt, "predict-ranks"))
        sl_usage_error("--predict-ranks: only with --predict FILE");
    const int ranks = platform ? sl_train_predict_ranks() : ctx->nranks;
    if (ranks <= 0)
        sl_usage_error("--predict-ranks: --search --predict ranks the layouts of one rank count; give one (e.g. "
                       "--predict-ranks 1024)");
    if (!sl_option_given(&ctx->opt, "batch")) sl_train_opt.batch *= ranks; /* the shape's batch per rank */
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    search = (p3_search){.mode = platform ? P3_SEARCH_PLATFORM : opt_predict_only ? P3_SEARCH_PREDICT : P3_SEARCH_RUN,
                         .ranks = ranks, .layers = (int)g.layers, .heads = (int)g.heads,
                         .d_model = (int)g.d_model, .vocab = (int)g.vocab, .global_batch = (int)sl_train_opt.batch,
                         .zero_ok = (ctx->opt.colls & gather_scatter_colls()) != 0, .top = (int)opt_search_top,
                         .sample = (int)opt_search_sample, .variant = __builtin_ctz(opt_variants),
                         .interleaved = opt_variants == 1u << V_INTERLEAVED,
                         .dt = (sl_dtype)__builtin_ctz(ctx->opt.dtypes), .impl = (sl_coll)__builtin_ctz(ctx->opt.colls),
                         .memory = layout_memory, .use = use_layout};
    search.mem_limit = opt_mem_limit ? (double)opt_mem_limit : INFINITY; /* the sweep sets the default */
    p3_search_validate(&search, opt_mem_limit != 0);
    if (sl_no_predict())
        sl_usage_error("--search: the layouts are ranked by the performance model, which SL_NO_PREDICT=1 switches off");
    use_layout(&(p3_layout){ctx->nranks, 1, 1, 1, 0, 0, 1});
}

static void validate(sl_ctx *ctx)
{
    const int R = ctx->nranks;
    if (!sl_gpt_selected()) sl_usage_error("--model: parallel3d trains the GPT (--model gpt, the default)");
    validate_search(ctx);
    if (p3_parse_order(opt_order) != 0)
        sl_usage_error("--order %s: expected tp, dp and pp once each, fastest first, joined by '-' (e.g. tp-dp-pp)",
                       opt_order);
    if (sl_gpt_resolve(&sl_gpt_opt).dropout > 0) sl_usage_error("--dropout: parallel3d trains without dropout (0)");
    if (sl_option_given(&ctx->opt, "virtual") && !(opt_variants & (1u << V_INTERLEAVED)))
        sl_usage_error("--virtual: only the interleaved schedule has chunks (--schedule interleaved)");
    if (!(opt_bucket_mb >= 0 && opt_bucket_mb <= 1e6))
        sl_usage_error("--bucket-mb %g: expected MiB in [0, 1e6] (0: one all-reduce after the step)", opt_bucket_mb);
    if (opt_bucket_mb > 0 && opt_search)
        sl_usage_error("--bucket-mb: not with --search (its layouts all-reduce once, after the last micro-batch)");
    if (opt_bucket_mb > 0 && opt_zero) /* a bucket's reduce-scatter would leave each replica a piece of every
                                          bucket, not the one block its optimizer state holds */
        sl_usage_error("--bucket-mb: --zero %lld reduce-scatters the stage's padded vector at once, a block a replica; "
                       "buckets are for --zero 0", opt_zero);
    if (opt_search) return; /* each layout it runs is one of those below's valid ones */
    const long long L = sl_gpt_resolve(&sl_gpt_opt).layers;
    if (opt_variants & (1u << V_INTERLEAVED)) { /* Megatron-LM's conditions */
        const int v = virtual_of(V_INTERLEAVED);
        const long long m = opt_micro ? opt_micro : opt_pp; /* the default below */
        if (opt_pp < 2)
            sl_usage_error("--schedule interleaved: its chunks go round the pipeline's stages; give --pp 2 or more");
        if (L % (opt_pp * v) != 0)
            sl_usage_error("--virtual %d: --layers %lld must be divisible by --pp %lld x --virtual %d (P x v equal "
                           "chunks of blocks)", v, L, opt_pp, v);
        if (m % opt_pp != 0)
            sl_usage_error("--micro-batches %lld: the interleaved schedule needs a multiple of --pp %lld", m, opt_pp);
        if (opt_bucket_mb > 0)
            sl_usage_error("--bucket-mb: not with --schedule interleaved (a stage's chunks are no one run of layers)");
    }
    if (opt_dp == 0) opt_dp = R % (opt_tp * opt_pp) == 0 ? R / (opt_tp * opt_pp) : 0;
    if (opt_dp * opt_tp * opt_pp != R)
        sl_usage_error("--dp %lld x --tp %lld x --pp %lld: D x T x P must equal the ranks (%d)", opt_dp, opt_tp, opt_pp,
                       R);
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    if (g.heads % opt_tp != 0)
        sl_usage_error("--tp %lld: the GPT's --heads %lld must be divisible by T", opt_tp, g.heads);
    if (g.d_model % opt_tp != 0) sl_usage_error("--tp %lld: --d-model %lld must be divisible by T", opt_tp, g.d_model);
    if (g.vocab % opt_tp != 0) sl_usage_error("--tp %lld: --vocab %lld must be divisible by T", opt_tp, g.vocab);
    if (opt_pp > g.layers)
        sl_usage_error("--pp %lld: more pipeline stages than the GPT's --layers %lld (a stage holds whole blocks)",
                       opt_pp, g.layers);
    if (opt_zero) { /* ZeRO's reduce-scatter and all-gather: refused up front, not at the first step */
        const unsigned lacking = ctx->opt.colls & ~gather_scatter_colls();
        if (lacking) {
            char names[128] = "";
            for (int c = 0; c < SL_NCOLLS; c++)
                if (gather_scatter_colls() & (1u << c))
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? "|" : "",
                             sl_coll_name((sl_coll)c));
            sl_usage_error("--coll (-C) %s: --zero %lld needs reduce_scatter and allgather, which %s does not provide; "
                           "with --zero %lld parallel3d accepts %s",
                           sl_coll_name((sl_coll)__builtin_ctz(lacking)), opt_zero,
                           sl_coll_name((sl_coll)__builtin_ctz(lacking)), opt_zero, names);
        }
    }
    if (opt_micro == 0) opt_micro = opt_pp;
    const long long B = sl_train_opt.scaling == 1 ? sl_train_opt.batch : sl_train_opt.batch * opt_dp;
    if (B / opt_dp < opt_micro)
        sl_usage_error("--micro-batches %lld: a replica's %lld sequences of the batch are fewer (--batch)", opt_micro,
                       B / opt_dp);
    sl_note(ctx, "grid D %lld x T %lld x P %lld, order %s (fastest first); %lld micro-batches per replica", opt_dp,
            opt_tp, opt_pp, opt_order, opt_micro);
}

static const sl_column columns[] = {
    {"D", "", "dp", 3, 0, 0},
    {"T", "", "tp", 3, 0, 0},
    {"P", "", "pp", 3, 0, 0},
    SL_TRAIN_COLUMNS_RUN,
    SL_COL("dtype", "dtype", 5),
    {"m", "", "micro_batches", 4, 0, 0},
    {"step", "ms", "time.median", 10, 2, 1e3},
    SL_TRAIN_COLUMNS_PRED,
    {"compute", "ms", "compute", 9, 2, 1e3},
    {"exposed", "ms", "exposed_comm", 9, 2, 1e3},
    {"bubble", "ms", "bubble", 9, 2, 1e3},
    {"tp", "KB", "tp_bytes", 9, 1, 1e-3},
    {"model", "KB", "tp_bytes_model", 9, 1, 1e-3},
    {"pp", "KB", "pp_bytes", 9, 1, 1e-3},
    {"model", "KB", "pp_bytes_model", 9, 1, 1e-3},
    {"dp", "KB", "dp_bytes", 9, 1, 1e-3},
    {"model", "KB", "dp_bytes_model", 9, 1, 1e-3},
    {"Z", "", "zero", 2, 0, 0},
    {"optim", "KB", "mem_optim", 9, 1, 1e-3},
    {"model", "KB", "model_optim", 9, 1, 1e-3},
    {"activ", "KB", "mem_activ", 9, 1, 1e-3},
    {"model", "KB", "model_activ", 9, 1, 1e-3},
    {"loss", "", "final_loss", 10, 6, 0},
    SL_TRAIN_COLUMNS_CHECK,
};

/* The step as the performance model reads it: parallel3d/pm_schedule.c. */
static void pm_schedule(const sl_train *t, sl_pm_sched *sc)
{
    const p3 *q = t->state;
    const p3_pm_grid g = {q->P, q->v, q->m, q->Bd, q->sched, q->recompute,
                          q->bucket_bytes,
                          q->zero && q->D > 1, q->lw_full};
    p3_pm_schedule(t, &q->s, &g, sc);
}

static const sl_technique parallel3d = {
    .program = {.name = "parallel3d", .extra = p3_opts, .validate = validate,
                .summary = "3-D parallelism of the GPT: data x tensor (Megatron) x pipeline (1F1B, interleaved) on a "
                           "rank grid",
                SL_TRAIN_PROGRAM_USES, .default_coll = SL_COLL_RING,
                .default_iters = 5, .default_warmup = 2},
    .variants = variant_names, .nvariants = NVARIANTS, .variant_mask = &opt_variants,
    .data_ranks = data_ranks, .setup = setup, .step = p3_step, .free = p3_release,
    .schedule = pm_schedule, .schedule_launched_only = 1, .sweep = sweep, .row_done = row_done,
    .predicts_itself = predicts_itself,
    .weights = p3_weights, .gather_weights = p3_gather_weights, .reference = reference,
    .memory_model = p3_memory_model, .bytes_model = p3_bytes_model, .row = row, .check = p3_check,
    .trains_gpt = 1,
    /* f16/bf16: the layer's default (data-parallel) bounds (sl_train.h), for the same reason as megatron_mlp's:
     * the run and serial training differ in where 16-bit sums are rounded (the group's partial
     * sums, the replicas' gradient sum: one rounding per hop) */
    .mixed_variants = (1u << NVARIANTS) - 1,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    sl_gpt_opt.model = 1; /* the GPT is this program's model */
    return sl_train_main(&parallel3d, argc, argv);
}
