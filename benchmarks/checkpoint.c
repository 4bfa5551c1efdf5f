/* checkpoint.c — activation checkpointing (Chen, Xu, Zhang, Guestrin, "Training Deep Nets with
 * Sublinear Memory Cost", 2016) of the shared deep MLP or the GPT (--model gpt), on the
 * training layer.
 *
 * Backward needs, for every layer l, its input x_l and its pre-activation z_l. Store-all keeps
 * all of them from the forward pass: memory grows with the depth N. Checkpointing cuts the
 * layers into segments (benchmarks/checkpoint/plan.h) and keeps, through the forward pass, only
 * each segment's input, its checkpoint; in backward it runs each segment's forward again from
 * its checkpoint, keeping everything this time, and back-propagates through it before moving
 * to the segment below. The last segment is kept whole in the forward pass (it would be
 * recomputed at once), as PyTorch's checkpoint_sequential does. With segments of k layers the
 * step holds ceil(N/k) checkpoints plus one segment's activations, 2k tensors here (each layer
 * keeps its input and its z): least near k = sqrt(N) (sqrt(N/2) for this count), for one more
 * forward pass of every layer outside the last segment.
 *
 *   store_all  one segment: nothing dropped, nothing recomputed (the reference)
 *   every_k    a checkpoint every k layers (--segments k, default ceil(sqrt(N))); a list of k, or
 *              "sweep", gives one row per k
 *   budget     the plan whose activations fit --budget BYTES with the least recomputation, from
 *              Chen et al.'s greedy segmentation searched over its segment budget (plan.c)
 *   selective  the GPT only (the MLP has no attention; there it is skipped with a note, and
 *              refused when asked for by name): Korthikanti et al. 2022's selective
 *              recomputation, every layer kept but each block's attention core (the softmax
 *              probabilities, B·NH·T·T, and the attention output), recomputed from the kept
 *              qkv before the block's backward: the s²-sized part gone for a few % more FLOPs
 *
 * The GPT (checkpoint/gpt_pass.c) is cut into segments over its L + 2 layers alike (--segments
 * counts layers: the embedding, each block, the head; default k = 1, a checkpoint per block),
 * each segment's activations one block from the pool beside its checkpoint, with its own
 * analytic model (checkpoint/gpt_plan.h).
 *
 * Measured: every activation buffer (inputs, pre-activations, outputs, the gradients flowing
 * backward) is taken when produced and given back when no longer needed (from a caching pool,
 * checkpoint/pool.h, as a framework's allocator keeps them), and the allocator's count of live
 * activation bytes is read after each one is taken; the row's peak is the most of any step,
 * beside the analytic model (ck_model_peak; the GPT's ck_gpt_model_peak). Forward FLOPs recomputed are counted as
 * they are executed, beside the model (every layer outside the last segment), and the time
 * over store-all's, measured A/B in each row, beside the model (recomputed FLOPs over a step's).
 *
 * On several ranks every rank is a data-parallel replica: it checkpoints its slice of the
 * batch, and the gradients are summed with the -C collective before the optimizer step.
 *
 * The step is written once for every precision (-d f32,f16,bf16): weights, gradients and every
 * activation are in the run's dtype (sl_train.h: the replica, its f32 master and the loss
 * scaler), so in 16 bits each activation tensor is half f32's bytes and so is the peak.
 *
 * The check (beside the driver's against serial training): recomputation repeats the same
 * arithmetic in the same order, so the first step's gradients and the weights after every
 * step must equal store-all's bit for bit; the measured peak must equal the model to the
 * byte, and the budget plan's must fit the budget.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "checkpoint/gpt_plan.h"
#include "checkpoint/state.h"

#define VARIANTS(X) X(V_STORE_ALL, "store_all") X(V_EVERY_K, "every_k") X(V_BUDGET, "budget") X(V_SELECTIVE, "selective")
SL_ENUM(variant, VARIANTS, NVARIANTS);
static const char *const variant_names[] = SL_ENUM_NAMES(VARIANTS);

static unsigned opt_variants = ~0u;
static sl_int_list opt_segments; /* nothing given: ceil(sqrt(layers)); the word: sweep */
static size_t opt_budget = 0;
static int plan_rows; /* the busiest rank's samples, for which every rank plans */

static const sl_opt ck_opts[] = {
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(VARIANTS), 0,
     "variants to run (default all)"},
    /* each K within --layers, checked in validate; the shared parser refuses a K given twice */
    {"segments", 0, SL_OPT_INT_LIST, &opt_segments, 1, SL_MLP_MAX_LAYERS, "sweep", 1,
     "K[,K...]|sweep: every_k checkpoints every K layers (default ceil(sqrt(layers)); --model gpt: 1, "
     "counting the embedding, each block and the head as layers); sweep: "
     "the powers of 2 and every K from sqrt(layers/2) - 2 to sqrt(layers) + 3"},
    {"budget", 0, SL_OPT_SIZE, &opt_budget, 1, 1LL << 50, NULL, 0,
     "activation bytes the budget variant must fit in (K/M/G; default a quarter of store-all's)"},
    {0},
};

/* The driver's variants are this run's rows: store_all, one every_k per k, budget (built in
 * validate, once the layer count is known). */
#define MAX_RUNS 32
static struct { int kind, k; } runs[MAX_RUNS];
static const char *run_names[MAX_RUNS];
static unsigned run_mask;

static sl_technique checkpoint_technique; /* defined at the end; validate sets its variants */

/* Store-all's step time in this run, for the overhead of the others, and its weights after
 * training (host), for their check: the driver runs store_all first for each collective. */
static double store_all_time = NAN;
static const char *store_all_coll;
static float *store_all_weights;

/* Activation buffers ------------------------------------------------------------------- */

static void *act_alloc(sl_train *t, int rows, int width)
{
    ck *s = t->state;
    return ck_pool_get(&s->pool, (size_t)rows * width * sl_train_esize(t));
}

/* A buffer of rows x width taken and put in activation slot (which, i). */
static void *place(sl_train *t, sl_acts_slot which, int i, int width)
{
    ck *s = t->state;
    void *p = act_alloc(t, s->rows, width);
    sl_acts_set(&s->rep.acts, which, i, p);
    return p;
}

static void act_free(sl_train *t, sl_acts_slot which, int i)
{
    ck *s = t->state;
    ck_pool_put(&s->pool, sl_acts_get(&s->rep.acts, which, i));
    sl_acts_set(&s->rep.acts, which, i, NULL);
}

/* Forward: before layer l its output x_{l+1} and its z are allocated; after it, in a dropped
 * segment, its z and its input are freed (not the segment's input: that is the checkpoint).
 * Backward: before layer l its dL/dx_l; after it, dL/dx_{l+1}, x_l and z_l are freed. */
static const void *before_layer(sl_train *t, int l, int backward)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    if (!backward) {
        void *x = place(t, SL_ACTS_X, l + 1, m->dims[l + 1]);
        sl_acts_set(&s->rep.acts, SL_ACTS_Z, l, m->act[l] == SL_ACT_NONE ? x : act_alloc(t, s->rows, m->dims[l + 1]));
    } else if (l > 0) {
        place(t, SL_ACTS_DBUF, l & 1, m->dims[l]);
    }
    return NULL; /* the layer's own parameters */
}

static void after_layer(sl_train *t, int l, int backward)
{
    ck *s = t->state;
    const int own_z = t->m->act[l] != SL_ACT_NONE;
    if (!backward) {
        if (s->keep) return;
        if (own_z) act_free(t, SL_ACTS_Z, l);
        if (l > s->seg_lo) act_free(t, SL_ACTS_X, l);
        return;
    }
    act_free(t, SL_ACTS_DBUF, (l + 1) & 1);
    act_free(t, SL_ACTS_X, l);
    if (own_z) act_free(t, SL_ACTS_Z, l);
    sl_acts_set(&s->rep.acts, SL_ACTS_Z, l, NULL);
}

/* Backward of segment [lo, hi) needs x_l and z_l of its layers again: the segment's forward
 * from its checkpoint x_lo, keeping everything. The top layer's output is the next segment's
 * checkpoint, already back-propagated through and freed: only its z is computed. The output
 * layer (no activation) is always in the last segment, which is never recomputed. */
static void recompute(sl_train *t, const void *params, int lo, int hi)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    for (int l = lo; l < hi; l++) {
        const int in = m->dims[l], out = m->dims[l + 1];
        const double t0 = sl_now();
        void *z = place(t, SL_ACTS_Z, l, out);
        if (l + 1 < hi) place(t, SL_ACTS_X, l + 1, out); /* else x[hi] is NULL: z alone */
        sl_acts_layer_forward(t, &s->rep.acts, l, sl_train_at(t, params, m->w_off[l]));
        sl_k_sync(t->be);
        sl_train_span(t, SL_PHASE_RECOMPUTE, "recompute", t0, sl_now());
        s->recomputed += 2.0 * s->rows * in * out;
        if (l == lo && s->corrupt) ck_spoil(t, z); /* for the test of the check itself */
    }
}

void ck_spoil(sl_train *t, void *p)
{
    char e[4];
    float v;
    sl_k_memcpy(t->be, e, p, sl_train_esize(t), SL_K_D2H);
    sl_k_cast(SL_BACKEND_CPU, 1, e, t->dtype, &v, SL_F32, NULL);
    v += 1.0f;
    sl_k_cast(SL_BACKEND_CPU, 1, &v, SL_F32, e, t->dtype, NULL);
    sl_k_memcpy(t->be, p, e, sl_train_esize(t), SL_K_H2D);
}

/* The MLP's forward and backward under plan p (the GPT's: ck_gpt_pass, gpt_pass.c). */
static void mlp_pass(sl_train *t, const ck_plan *p, const void *params, void *grads)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    const int N = m->nlayers, S = p->nseg;
    sl_acts *a = &s->rep.acts;
    place(t, SL_ACTS_X, 0, m->dims[0]); /* the first checkpoint */
    sl_acts_load(t, a, t->lo, s->rows);
    for (int j = 0; j < S; j++) {
        s->seg_lo = p->start[j];
        s->keep = j == S - 1;
        sl_acts_forward(t, a, params, p->start[j], p->start[j + 1], &s->hooks);
    }
    void *dy = place(t, SL_ACTS_DBUF, N & 1, m->dims[N]); /* dL/d output */
    sl_acts_loss(t, a);
    act_free(t, SL_ACTS_X, N); /* the output is the last layer's z; its backward needs neither */
    sl_acts_set(a, SL_ACTS_Z, N - 1, NULL);
    for (int j = S - 1; j >= 0; j--) { /* each segment from the top, dy its output's gradient */
        if (j < S - 1) recompute(t, params, p->start[j], p->start[j + 1]);
        dy = sl_acts_backward_range(t, a, params, grads, dy, p->start[j], p->start[j + 1], &s->hooks);
    }
}

/* One forward and backward of this rank's samples under plan p (selective: the GPT's blocks
 * keep no attention core), gradients (t->dtype, loss-scaled in 16 bits) into grads; the
 * pool's peak is the pass's. */
static void pass(sl_train *t, const ck_plan *p, int selective, const void *params, void *grads)
{
    ck *s = t->state;
    s->selective = selective;
    ck_pool_begin(&s->pool);
    s->recomputed = 0;
    if (sl_mlp_is_gpt(t->m)) ck_gpt_pass(t, p, params, grads);
    else mlp_pass(t, p, params, grads);
    if (ck_pool_live(&s->pool) != 0)
        SL_FATAL("checkpoint: %lld activation bytes still held after backward", ck_pool_live(&s->pool));
}

/* The technique ------------------------------------------------------------------------- */

/* The analytic models of plan p on model m (the MLP: plan.h; the GPT: gpt_plan.h) at `rows`
 * samples in dt: the peak of live activation bytes, and the forward FLOPs recomputed. */
static double model_peak(const sl_mlp *m, sl_dtype dt, int rows, const ck_plan *p, int selective)
{
    return sl_mlp_is_gpt(m) ? ck_gpt_model_peak(p, m, dt, rows, selective) : ck_model_peak(p, m, rows, sl_dtype_size(dt));
}

static double model_recompute(const sl_mlp *m, int rows, const ck_plan *p, int selective)
{
    return sl_mlp_is_gpt(m) ? ck_gpt_recompute_flops(p, m, rows, selective) : ck_model_recompute_flops(p, m, rows);
}

static void plan_store_all(ck_plan *p, const sl_mlp *m) { ck_plan_every(p, m->nlayers, m->nlayers); }

/* The plan search of plan.h on m's costs. */
static int search(const sl_mlp *m, sl_dtype dt, ck_plan *p, double budget, double *least)
{
    if (!sl_mlp_is_gpt(m)) return ck_plan_for_budget(p, m, plan_rows, sl_dtype_size(dt), budget, least);
    const ck_gpt_ctx ctx = {m, dt, plan_rows};
    ck_costs c;
    ck_gpt_costs(&c, &ctx);
    return ck_plan_search(p, &c, budget, least);
}

/* The budget variant's bytes for elements of dt (--budget, or a quarter of store-all's, or the
 * least any plan needs if that is more) into *budget, and its plan into *p; -1, with *least
 * and *p the plan of least peak, when no plan fits. */
static int budget_plan(const sl_mlp *m, sl_dtype dt, ck_plan *p, double *budget, double *least)
{
    ck_plan all;
    plan_store_all(&all, m);
    *budget = opt_budget ? (double)opt_budget : floor(model_peak(m, dt, plan_rows, &all, 0) / 4);
    if (search(m, dt, p, *budget, least) == 0) return 0;
    if (opt_budget) return -1;
    *budget = *least; /* a shallow model: a quarter is below what any plan needs */
    return search(m, dt, p, *budget, least);
}

static void setup(sl_train *t)
{
    const sl_mlp *m = t->m;
    ck *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    s->rows = t->hi - t->lo;
    s->hooks = (sl_layer_hooks){.before = before_layer, .after = after_layer};
    ck_pool_init(&s->pool, t->be);
    s->corrupt = sl_test_corrupt();
    const int kind = runs[t->variant].kind;
    double least;
    if (kind == V_BUDGET && budget_plan(m, t->dtype, &s->plan, &s->budget, &least) != 0)
        SL_FATAL("checkpoint: no plan fits the budget validate accepted"); /* validate checked f32's */
    if (kind != V_BUDGET) ck_plan_every(&s->plan, m->nlayers, kind == V_EVERY_K ? runs[t->variant].k : m->nlayers);
    s->selective_run = kind == V_SELECTIVE; /* on store-all's plan: every block kept, less its core */
    sl_replica_place(t, s->rows, &s->rep);
}

static void step(sl_train *t)
{
    ck *s = t->state;
    sl_k_memset0(t->be, s->rep.grads, t->m->nparams * sl_train_esize(t));
    pass(t, &s->plan, s->selective_run, s->rep.params, s->rep.grads);
    s->step_peak = fmax(s->step_peak, s->pool.peak);
    s->step_recomputed = s->recomputed;
    s->pool_held = s->pool.held;
    sl_replica_step(t, &s->rep); /* the replicas' gradients summed, the update */
}

static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    return sl_replica_weights(t, &((ck *)t->state)->rep, first, count);
}

static void release(sl_train *t)
{
    ck *s = t->state;
    sl_replica_free(t, &s->rep);
    ck_pool_free(&s->pool);
    free(s);
}

/* Gradients of the first step and weights after the run, against store-all bit for bit in the
 * run's dtype (on this rank's samples, with the same all-reduce and, in 16 bits, the same loss
 * scaler from its start); the measured peak against the model. */
static int check(sl_train *t, double *error, char *why, size_t len)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    const size_t n = m->nparams, es = sl_train_esize(t);
    const int steps_run = t->step;
    ck_plan all;
    plan_store_all(&all, m);
    /* store-all's replica from the initial weights, trained here with a scaler of its own: the
     * run's (its state, the optimizer steps applied, the step's flags) is put back after */
    sl_train_saved run;
    sl_train_aside(t, &run);
    sl_replica ref;
    sl_replica_place(t, s->rows, &ref);
    void *g = sl_k_malloc(t->be, SL_MEM_OTHER, n * es);

    sl_k_memset0(t->be, g, n * es);
    sl_k_memset0(t->be, ref.grads, n * es);
    t->step = 0;
    pass(t, &s->plan, s->selective_run, ref.params, g);
    pass(t, &all, 0, ref.params, ref.grads);
    const long long grad_diff = sl_bit_differences(t->be, n, es, g, ref.grads);

    /* Weights: store_all's row's when it ran (then store_all itself trains again here: the
     * run must repeat bit for bit), else store-all training from the initial weights. */
    const int store_all_ran = run_mask & 1u, is_store_all = runs[t->variant].kind == V_STORE_ALL;
    long long weight_diff = 0;
    if (store_all_ran && !is_store_all) {
        float *mine = sl_k_download(t->be, sl_replica_weights(t, &s->rep, NULL, NULL), n * sizeof(float));
        for (size_t i = 0; i < n; i++) weight_diff += memcmp(&mine[i], &store_all_weights[i], sizeof(float)) != 0;
        free(mine);
    } else {
        sl_k_memset0(t->be, ref.optim, (size_t)sl_optim_state_per_param(&t->optim) * n * sizeof(float));
        for (t->step = 0; t->step < steps_run; t->step++) {
            sl_k_memset0(t->be, ref.grads, n * es);
            pass(t, &all, 0, ref.params, ref.grads);
            sl_replica_step(t, &ref);
        }
        weight_diff = sl_bit_differences(t->be, n, sizeof(float), sl_replica_weights(t, &s->rep, NULL, NULL), sl_replica_weights(t, &ref, NULL, NULL));
    }
    if (is_store_all) {
        free(store_all_weights);
        store_all_weights = sl_k_download(t->be, sl_replica_weights(t, &s->rep, NULL, NULL), n * sizeof(float));
    }
    sl_train_back(t, &run);
    sl_replica_free(t, &ref);
    sl_k_free(t->be, g);

    const double model = model_peak(m, t->dtype, s->rows, &s->plan, s->selective_run);
    *error = (double)(grad_diff + weight_diff); /* elements that differ: 0 when bit-identical */
    if (grad_diff)
        snprintf(why, len, "first step: %lld of %zu gradient elements differ from store-all's", grad_diff, n);
    else if (weight_diff)
        snprintf(why, len, "after %d steps: %lld of %zu weights differ from store-all training", steps_run,
                 weight_diff, n);
    else if (s->step_peak != model)
        snprintf(why, len, "peak activation bytes: %.0f measured, %.0f by the model", s->step_peak, model);
    else if (runs[t->variant].kind == V_BUDGET && s->step_peak > s->budget)
        snprintf(why, len, "peak activation bytes %.0f exceed --budget %.0f", s->step_peak, s->budget);
    else
        return 0;
    return 1;
}

static double max_over_ranks(const sl_train *t, double v)
{
    double r;
    SL_CHECK_MPI(MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    return r;
}

/* The time a step's forward and backward take more than store-all's, measured A/B: passes of
 * this plan and of store-all alternate (ABBA, each pair between barriers, the slowest rank's
 * time), -n pairs after one untimed pair; the median of the pairs' ratios. Rows run minutes
 * apart on a shared machine, and load that comes and goes between them moves a comparison of
 * two rows' step times by tens of percent; a pair's two passes see the same load. */
static double overhead_ab(sl_train *t)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    const int rounds = (int)t->ctx->opt.iters, steps_run = t->step, tracing = sl_trace_enabled();
    ck_plan all;
    plan_store_all(&all, m);
    void *g = sl_k_malloc(t->be, SL_MEM_OTHER, m->nparams * sl_train_esize(t));
    double *ratio = malloc((size_t)rounds * sizeof *ratio);
    if (!ratio) SL_FATAL("out of memory");
    sl_trace_enable(0);
    t->step = 0;
    for (int i = -1; i < rounds; i++) {
        double dt[2];
        for (int j = 0; j < 2; j++) {
            const int v = (i & 1) ? 1 - j : j; /* 0: this plan, 1: store-all */
            SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
            const double t0 = sl_now();
            pass(t, v ? &all : &s->plan, v ? 0 : s->selective_run, s->rep.params, g);
            const double mine = sl_now() - t0;
            SL_CHECK_MPI(MPI_Allreduce(&mine, &dt[v], 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
        }
        if (i >= 0) ratio[i] = dt[0] / dt[1];
    }
    t->step = steps_run;
    sl_trace_enable(tracing);
    sl_stats st;
    sl_stats_compute(ratio, rounds, &st);
    free(ratio);
    sl_k_free(t->be, g);
    return st.median - 1;
}

/* The unit the rows count activations in: one tensor T = rows x width of the MLP, one residual
 * stream rows x s x h of the GPT (s·b·h values, Korthikanti et al.'s unit). */
static double tensor_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    if (sl_mlp_is_gpt(m)) return (double)sl_gpt_io_bytes(m, dt, rows, 1);
    return (double)sl_dtype_size(dt) * rows * (double)sl_train_opt.width;
}

/* Selective's block beside Korthikanti et al.'s 34sbh (sl_gpt_activ_block), and what differs. */
static void selective_row(sl_train *t, sl_result *res)
{
    const sl_gpt_dims *g = &t->m->gpt;
    const int rows = ((ck *)t->state)->rows;
    const sl_gpt_shape gs = {.layers = g->layers, .d_model = g->C, .heads = g->NH, .seq = g->T};
    sl_result_metric(res, "activ_block_selective", (double)sl_gpt_block_kept_selective_bytes(t->m, t->dtype, rows), "bytes");
    sl_result_metric(res, "activ_block_selective_formula",
                     sl_gpt_activ_block(&gs, rows, SL_GPT_SELECTIVE) * sl_dtype_size(t->dtype) / 2, "bytes");
    sl_result_param_str(res, "activ_block_selective_note",
                        "kept: 15sbh values (the block's input, ln1, qkv, h, ln2, fc, gelu) + 16sb bytes of f32 "
                        "layer-norm moments; the formula (34sbh at 16 bits, scaled to the run's element size) "
                        "also holds dropout's two sbh-byte masks and the attention output atty (the output "
                        "projection's input, 2sbh), which Korthikanti et al. keep and this model does not: "
                        "it draws dropout's masks again from their counter and recomputes atty with the "
                        "attention core");
}

/* The plan; peak activation bytes measured and by the model (the busiest rank), in bytes and
 * in tensors T (tensor_bytes); recomputed FLOPs counted and by the model, as a fraction of a
 * forward pass; the step's overhead over store-all's, measured and by the FLOP model. */
static void row(sl_train *t, sl_result *res)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    const int kind = runs[t->variant].kind;
    char plan[64];
    ck_plan_describe(&s->plan, plan, sizeof plan);
    sl_result_param_num(res, "k", ck_plan_longest(&s->plan));
    sl_result_param_num(res, "segments", s->plan.nseg);
    sl_result_param_str(res, "plan", plan);
    if (kind == V_BUDGET) sl_result_param_num(res, "budget", s->budget);

    ck_plan all;
    plan_store_all(&all, m);
    const double peak = max_over_ranks(t, s->step_peak);
    const double model = max_over_ranks(t, model_peak(m, t->dtype, s->rows, &s->plan, s->selective_run));
    const double store_all = max_over_ranks(t, model_peak(m, t->dtype, s->rows, &all, 0));
    const double tensor = max_over_ranks(t, tensor_bytes(m, t->dtype, s->rows));
    sl_result_metric(res, "activ_peak", peak, "bytes");
    sl_result_metric(res, "activ_model", model, "bytes");
    sl_result_metric(res, "activ_peak_tensors", peak / tensor, "tensors");
    sl_result_metric(res, "activ_model_tensors", model / tensor, "tensors");
    sl_result_metric(res, "activ_store_all", store_all, "bytes");
    sl_result_metric(res, "activ_frac", peak / store_all, "fraction");
    sl_result_metric(res, "activ_pool", max_over_ranks(t, (double)s->pool_held), "bytes");
    if (kind == V_SELECTIVE) selective_row(t, res);

    const double fwd = sl_mlp_flops_forward(m, s->rows), bwd = sl_mlp_flops_backward(m, s->rows);
    const double flops_model = model_recompute(m, s->rows, &s->plan, s->selective_run);
    sl_result_metric(res, "recompute_flops", s->step_recomputed, "FLOP");
    sl_result_metric(res, "recompute_flops_model", flops_model, "FLOP");
    sl_result_metric(res, "extra_forward", s->step_recomputed / fwd, "forwards");
    sl_result_metric(res, "overhead_model", flops_model / (fwd + bwd), "fraction");
    if (kind == V_STORE_ALL) {
        store_all_time = res->time.median;
        store_all_coll = res->collective;
    }
    const int same = store_all_coll && res->collective && !strcmp(store_all_coll, res->collective);
    sl_result_metric(res, "overhead", same ? res->time.median / store_all_time - 1 : NAN, "fraction");
    sl_result_metric(res, "overhead_ab", kind == V_STORE_ALL ? 0 : overhead_ab(t), "fraction");
    /* The same from this row's steps alone, immune to the machine's drift between rows. */
    const double recomp = sl_result_get(res, "recompute");
    sl_result_metric(res, "overhead_recompute", isnan(recomp) ? 0 : recomp / (res->time.median - recomp), "fraction");
}


/* The run's model, for the plans validate makes: the GPT's shape or the MLP stack. Returns 0,
 * or -1 for a shape the driver refuses (it says why). */
static int validate_model(sl_mlp *m)
{
    if (!sl_gpt_selected())
        return sl_mlp_init(m, SL_BACKEND_CPU, (int)sl_train_opt.layers, (int)sl_train_opt.inputs,
                           (int)sl_train_opt.width, (int)sl_train_opt.outputs, SL_ACT_GELU);
    const sl_gpt_shape gs = sl_gpt_resolve(&sl_gpt_opt);
    const sl_gpt_dims d = {.layers = (int)gs.layers, .C = (int)gs.d_model, .NH = (int)gs.heads,
                           .T = (int)gs.seq, .max_T = (int)gs.max_seq, .V = (int)gs.vocab};
    return sl_gpt_model_init(m, SL_BACKEND_CPU, &d);
}

/* The runs, the default budget and its plan; usage errors. */
static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    const int rows = plan_rows = sl_train_opt.scaling == 0 ? (int)sl_train_opt.batch
                                                           : (int)((sl_train_opt.batch + P - 1) / P);
    /* the widest element asked for: a budget that holds its plan holds a narrower one's */
    const sl_dtype dt = ctx->opt.dtypes & (1u << SL_F32) ? SL_F32 : ctx->opt.dtypes & (1u << SL_F16) ? SL_F16 : SL_BF16;
    const size_t es = sl_dtype_size(dt);
    sl_mlp m;
    if (validate_model(&m)) return; /* the driver says what is wrong with the shape */
    const int gpt = sl_mlp_is_gpt(&m), N = m.nlayers;
    char layers[96]; /* what a segment's layers are, for the messages */
    if (gpt)
        snprintf(layers, sizeof layers, "the GPT's %d layers: the embedding, --layers %d blocks, the head", N, N - 2);
    else
        snprintf(layers, sizeof layers, "--layers %d", N);

    /* selective recomputation is of a transformer block's attention core: the MLP has none */
    if (!gpt && sl_option_given(&ctx->opt, "variants") && (opt_variants & (1u << V_SELECTIVE)))
        sl_usage_error("--variants selective: recomputes a transformer block's attention core; it applies with --model gpt");
    if (!gpt && (opt_variants & (1u << V_SELECTIVE)))
        sl_note(ctx, "selective (Korthikanti et al.'s recomputation of the attention core) applies with --model gpt: "
                     "not run on the MLP");
    const unsigned asked = gpt ? opt_variants : opt_variants & ~(1u << V_SELECTIVE);

    int nk = 0, ks[MAX_RUNS];
    const int root = (int)ceil(sqrt((double)N) - 1e-9);
    if (opt_segments.is_max && opt_segments.n)
        sl_usage_error("--segments: expected K[,K...] or sweep, not both");
    if (!opt_segments.n && !opt_segments.is_max) {
        ks[nk++] = gpt ? 1 : root; /* the GPT: a checkpoint per layer (per block) */
    } else if (opt_segments.is_max) {
        /* the powers of two, and every k around the minimum: sqrt(N/2) for this model's
         * ceil(N/k) + 2k tensors, sqrt(N) for Chen et al.'s N/k + k */
        const int lo = (int)floor(sqrt(N / 2.0)) - 2, hi = root + 3;
        for (int k = 1; k <= N; k++)
            if ((k & (k - 1)) == 0 || (k >= lo && k <= hi) || k == N) ks[nk++] = k;
    } else {
        for (int i = 0; i < opt_segments.n; i++) {
            const long long k = opt_segments.v[i];
            if (k > N) sl_usage_error("--segments: %lld layers per segment is outside 1..%d (%s)", k, N, layers);
            const int most = MAX_RUNS - (gpt ? 3 : 2); /* beside store_all, budget (and selective) */
            if (nk == most) sl_usage_error("--segments: at most %d values", most);
            ks[nk++] = (int)k;
        }
    }
    /* an option whose variant does not run would be silently unused */
    if (sl_option_given(&ctx->opt, "segments") && !(asked & (1u << V_EVERY_K)))
        sl_usage_error("--segments applies to every_k, which is not among the --variants asked for");
    if (sl_option_given(&ctx->opt, "budget") && !(asked & (1u << V_BUDGET)))
        sl_usage_error("--budget applies to budget, which is not among the --variants asked for");

    int nruns = 0;
    run_mask = 0;
    for (int v = 0; v < NVARIANTS; v++) {
        if (v == V_SELECTIVE && !gpt) continue;
        const int copies = v == V_EVERY_K ? nk : 1;
        for (int i = 0; i < copies; i++) {
            runs[nruns].kind = v;
            runs[nruns].k = v == V_EVERY_K ? ks[i] : 0;
            run_names[nruns] = variant_names[v];
            if (asked & (1u << v)) run_mask |= 1u << nruns;
            nruns++;
        }
    }
    checkpoint_technique.variants = run_names;
    checkpoint_technique.nvariants = nruns;

    ck_plan all;
    plan_store_all(&all, &m);
    const double store_all = model_peak(&m, dt, rows, &all, 0), tensor = tensor_bytes(&m, dt, rows);
    ck_plan budget;
    double budget_bytes, least;
    if ((asked & (1u << V_BUDGET)) && budget_plan(&m, dt, &budget, &budget_bytes, &least) != 0) {
        char plan[64];
        ck_plan_describe(&budget, plan, sizeof plan);
        sl_usage_error("--budget: %.0f bytes cannot hold the activations of %d rows in %zu-byte elements under any "
                       "checkpoint plan; the least any needs is %.0f bytes (segments %s): give --budget >= %.0f",
                       budget_bytes, rows, es, least, plan, least);
    }
    const char *in16 = es == 4 && (ctx->opt.dtypes & ~(1u << SL_F32)) ? " (f32; half the bytes in f16 and bf16)" : "";
    if (gpt)
        sl_note(ctx, "activations: T = one residual stream, %d sequences x %d tokens x %d wide x %zu B = %.1f KiB; "
                     "store-all holds %.6g T = %.3f MB (every layer's input and what it keeps, the head's weight "
                     "gradient, dL/d output); layers: 0 the embedding, 1..%d the blocks, %d the head%s",
                rows, m.gpt.T, m.gpt.C, es, tensor / 1024, store_all / tensor, store_all / 1e6, N - 2, N - 1, in16);
    else
        sl_note(ctx, "activations: T = %d rows x %lld wide x %zu B = %.1f KiB; store-all holds %.6g T = %.3f MB "
                     "(every layer's input and z, the output, dL/d output); a checkpoint every k layers about N/k + 2k T%s",
                rows, sl_train_opt.width, es, tensor / 1024, store_all / tensor, store_all / 1e6, in16);
    if (!(asked & (1u << V_BUDGET))) return;
    char plan[64];
    ck_plan_describe(&budget, plan, sizeof plan);
    sl_note(ctx, "budget: %.0f bytes%s; chosen plan: segments %s (layers per segment), peak %.0f bytes by the model%s",
            budget_bytes, opt_budget ? "" : " (a quarter of store-all's, or the least any plan needs if more; --budget BYTES)", plan,
            model_peak(&m, dt, rows, &budget, 0), es == 4 && (ctx->opt.dtypes & ~(1u << SL_F32)) ? " in f32 (16 bits plan for their own bytes)" : "");
}
/* The step as the performance model reads it (perf_model.h), in pass()'s order: the forward of
 * every layer, the loss, then from the top each segment's backward, every segment but the last
 * preceded by its forward again from its checkpoint (the recomputed GEMMs are stated a second
 * time, as they are run). Selective: every block's attention core (the per-head score and
 * att·V GEMMs and the softmax) again before the block's backward. Then the replicas' all-reduce
 * and the optimizer (sl_replica_step). */
static void pm_attention_core(const sl_train *t, sl_pm_sched *sc, int rows)
{
    const sl_gpt_dims *g = &t->m->gpt;
    const double heads = (double)rows * g->NH;
    sl_pm_gemm(sc, 0, 1, g->T, g->T, g->C / g->NH, 0, heads); /* scores = Q K^T */
    sl_pm_bytes(sc, 8.0 * heads * g->T * g->T);                  /* the softmax */
    sl_pm_gemm(sc, 0, 0, g->T, g->C / g->NH, g->T, 0, heads); /* out = att V */
}

static void schedule(const sl_train *t, sl_pm_sched *sc)
{
    const ck *s = t->state;
    const ck_plan *p = &s->plan;
    const int rows = s->rows, gpt = sl_mlp_is_gpt(t->m);
    sl_pm_bytes(sc, (double)t->m->nparams * sl_train_esize(t)); /* the gradient zeroed */
    sl_pm_load(t, sc, rows);
    for (int l = 0; l < t->m->nlayers; l++) sl_pm_layer_forward(t, sc, l, rows);
    sl_pm_loss(t, sc, rows);
    for (int j = p->nseg - 1; j >= 0; j--) {
        if (j < p->nseg - 1)
            for (int l = p->start[j]; l < p->start[j + 1]; l++) sl_pm_layer_forward(t, sc, l, rows);
        for (int l = p->start[j + 1] - 1; l >= p->start[j]; l--) {
            if (s->selective_run && gpt && l >= 1 && l <= t->m->gpt.layers) pm_attention_core(t, sc, rows);
            sl_pm_layer_backward(t, sc, l, rows);
        }
    }
    if (t->size > 1) sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)t->m->nparams);
    sl_pm_optimizer(t, sc, t->m->nparams);
}

static const sl_column columns[] = {
    SL_COL("variant", "variant", 9), SL_COL("dtype", "dtype", 5), SL_COL("k", "k", 4), SL_COL("segs", "segments", 5),
    {"step", "ms", "time.median", 9, 2, 1e3},
    SL_TRAIN_COLUMNS_PRED,
    {"recomp", "ms", "recompute", 8, 2, 1e3},
    {"extra", "fwd", "extra_forward", 6, 3, 0},
    {"+step", "%", "overhead_ab", 7, 1, 100},
    {"+recomp", "%", "overhead_recompute", 8, 1, 100},
    {"model", "%", "overhead_model", 6, 1, 100},
    {"peak", "MB", "activ_peak", 8, 3, 1e-6},
    {"model", "MB", "activ_model", 8, 3, 1e-6},
    {"peak", "T", "activ_peak_tensors", 6, 1, 0},
    {"of all", "%", "activ_frac", 7, 1, 100},
    SL_COL_CHECK(6),
};

static sl_technique checkpoint_technique = {
    .program = {.name = "checkpoint",
                .summary = "activation checkpointing: store-all, a checkpoint every k layers, a memory budget; "
                           "peak activation bytes and recomputation against the model",
                SL_TRAIN_PROGRAM_USES, .default_coll = SL_COLL_MPI, .default_iters = 5, .default_warmup = 1,
                .extra = ck_opts, .validate = validate},
    .variant_mask = &run_mask,
    .mixed_variants = ~0u, /* every row: store_all, each every_k, budget, selective */
    .trains_gpt = 1,
    .setup = setup, .step = step, .weights = weights, .free = release, .schedule = schedule,
    .check = check, .row = row,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    /* 64 layers of one width, so that every activation is one tensor T and the memory curve
     * reads in whole T; small enough that a sweep over k runs in seconds on 2 cores. */
    sl_train_opt.layers = 64;
    sl_train_opt.width = 256;
    sl_train_opt.inputs = 256;
    sl_train_opt.outputs = 256;
    sl_train_opt.batch = 64;
    const int rc = sl_train_main(&checkpoint_technique, argc, argv);
    free(store_all_weights);
    return rc;
}
