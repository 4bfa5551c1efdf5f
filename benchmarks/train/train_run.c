/* train_run.c — one run of one variant: set up through the technique's table, time its steps
 * with their phases, measure memory and bytes, check, and emit the common row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "sl_compute.h"
#include "sl_env_check.h"
#include "train_internal.h"

int train_data_ranks(const sl_technique *tech, int variant, int nranks)
{
    return tech->data_ranks ? tech->data_ranks(variant, nranks) : nranks;
}

int train_global_batch(const sl_technique *tech, int variant, int nranks)
{
    return sl_train_opt.scaling == 0 ? (int)sl_train_opt.batch * train_data_ranks(tech, variant, nranks)
                                     : (int)sl_train_opt.batch;
}

void train_open(sl_train *t, sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                sl_comm *comm, const sl_mlp *m, sl_task *task, const sl_optim *o, int global_batch,
                int nsteps, int baseline)
{
    train_open_as(t, ctx, tech, variant, dtype, comm, sl_comm_rank(comm), sl_comm_size(comm), m, task, o,
                  global_batch, nsteps, baseline);
}

void train_open_as(sl_train *t, sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                   sl_comm *comm, int rank, int size, const sl_mlp *m, sl_task *task, const sl_optim *o,
                   int global_batch, int nsteps, int baseline)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->baseline = baseline;
    t->ctx = ctx;
    t->tech = tech;
    t->variant = variant;
    t->be = m->be;
    t->m = m;
    t->task = task;
    t->nparams = tech->model_params ? tech->model_params() : m->nparams;
    t->optim = *o;
    t->comm = comm;
    t->rank = rank;
    t->size = size;
    t->global_batch = global_batch;
    t->data_ranks = train_data_ranks(tech, variant, t->size);
    if (t->rank < t->data_ranks) {
        size_t lo, hi;
        sl_share((size_t)global_batch, t->data_ranks, t->rank, &lo, &hi);
        t->lo = (int)lo;
        t->hi = (int)hi;
    }
    t->nsteps = nsteps;
    sl_train_mixed_init(&t->ms, dtype);
    t->master = 1;
    if (tech->precision) tech->precision(t); /* its scaler, its master choice */
    if (dtype == SL_F32) t->master = 1;       /* f32 is its own master copy */
    t->scaler0 = t->ms.sc;
    t->phase_log = calloc((size_t)nsteps * SL_NPHASES, sizeof *t->phase_log);
    if (!t->phase_log) SL_FATAL("out of memory for %d steps' phases", nsteps);
    t->planning = train_planning;
    tech->setup(t);
}

void train_close(sl_train *t)
{
    if (t->tech->free) t->tech->free(t);
    sl_k_free(t->be, t->wide);
    t->wide = NULL;
    free(t->phase_log);
    t->phase_log = NULL;
}

void train_step_body(void *arg)
{
    sl_train *t = arg;
    memset(t->phase, 0, sizeof t->phase);
    t->loss = 0;
    train_compute_before_step(t);
    t->tech->step(t);
    /* exposed is the part of comm the step waited for (sl_train.h): never more than comm */
    if ((t->phases_used & (1u << SL_PHASE_COMM)) && t->phase[SL_PHASE_EXPOSED] > t->phase[SL_PHASE_COMM])
        t->phase[SL_PHASE_EXPOSED] = t->phase[SL_PHASE_COMM];
    if (t->step < t->nsteps) memcpy(t->phase_log + (size_t)t->step * SL_NPHASES, t->phase, sizeof t->phase);
    train_compute_after_step(t);
    t->step++;
}

void train_phase_medians(const sl_train *t, int timed, MPI_Comm comm, double med[SL_NPHASES],
                         unsigned *used)
{
    const int first = t->nsteps - timed, n = timed * SL_NPHASES;
    double *slowest = malloc((size_t)n * sizeof *slowest), *col = malloc((size_t)timed * sizeof *col);
    if (!slowest || !col) SL_FATAL("out of memory for %d steps' phases", timed);
    sl_stats_slowest_rank(t->phase_log + (size_t)first * SL_NPHASES, slowest, n, comm);
    for (int p = 0; p < SL_NPHASES; p++) {
        for (int i = 0; i < timed; i++) col[i] = slowest[i * SL_NPHASES + p];
        sl_stats s;
        sl_stats_compute(col, timed, &s);
        med[p] = s.median;
    }
    free(slowest);
    free(col);
    SL_CHECK_MPI(MPI_Allreduce(&t->phases_used, used, 1, MPI_UNSIGNED, MPI_BOR, comm));
}

train_baseline train_one_rank_step(sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                                   const sl_mlp *m, sl_task *task, const sl_optim *o, int global_batch)
{
    double got[3] = {0}; /* train_baseline's fields, rank 0's */
    int tracing = sl_trace_enabled();
    sl_trace_enable(0); /* the one-rank run is not part of the timeline */
    if (ctx->rank == 0) {
        const sl_mem_space space = m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
        sl_comm *self;
        sl_train_coll_ok(sl_comm_create(&self, MPI_COMM_SELF, SL_COLL_MPI, space), "sl_comm_create (one rank)");
        const int steps = (int)ctx->opt.warmup + (int)ctx->opt.iters;
        sl_train t;
        const size_t params0 = sl_mem_current(space, SL_MEM_PARAMS);
        train_open(&t, ctx, tech, variant, dtype, self, m, task, o, global_batch, steps, 1);
        got[1] = t.hi - t.lo;
        got[2] = (double)sl_mem_current(space, SL_MEM_PARAMS) - (double)params0;
        double *times = malloc((size_t)steps * sizeof *times);
        if (!times) SL_FATAL("out of memory for %d step times", steps);
        /* not through sl_time_loop (rank 0 alone), and so never slowed by SL_TEST_SLOWDOWN:
         * this is the ceiling the rows' scaling_eff gate divides by */
        for (int s = 0; s < steps; s++) {
            double t0 = sl_now();
            train_step_body(&t);
            times[s] = sl_now() - t0;
        }
        sl_stats st;
        sl_stats_compute(times + ctx->opt.warmup, (int)ctx->opt.iters, &st);
        got[0] = st.median;
        free(times);
        train_close(&t);
        sl_comm_destroy(self);
    }
    sl_trace_enable(tracing);
    /* The other ranks wait without polling (a busy MPI_Bcast would take the cores rank 0 is
     * being measured on). */
    MPI_Request req;
    SL_CHECK_MPI(MPI_Ibcast(got, 3, MPI_DOUBLE, 0, ctx->comm, &req));
    sl_mpi_wait_quietly(&req, 1000000);
    return (train_baseline){.step = got[0], .batch = got[1], .mem_params = got[2]};
}

/* What setup holds by category, as the allocator counted it. */
static const sl_mem_cat held_cats[] = {SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV};
enum { NHELD = sizeof held_cats / sizeof held_cats[0] };

static size_t space_total(sl_mem_space space)
{
    size_t total = 0;
    for (int c = 0; c < SL_MEM_NCATS; c++) total += sl_mem_current(space, (sl_mem_cat)c);
    return total;
}

/* The row every training benchmark shares. */
static void common_row(sl_train *t, sl_result *res, const sl_stats *st, const double med[SL_NPHASES],
                       unsigned used, const train_baseline *one, double sent, const double held[NHELD],
                       double peak)
{
    const sl_technique *tech = t->tech;
    const sl_mlp *m = t->m;
    const int B = t->global_batch, P = t->size;
    sl_result_param_num(res, "global_batch", B);
    sl_result_param_num(res, "rank_batch", t->hi - t->lo);
    sl_result_param_str(res, "scaling", sl_train_opt.scaling ? "strong" : "weak");
    if (sl_mlp_is_gpt(m)) { /* layers: the GPT's blocks */
        const sl_gpt_dims *g = &m->gpt;
        sl_result_param_str(res, "model", "gpt");
        sl_result_param_num(res, "layers", g->layers);
        sl_result_param_num(res, "d_model", g->C);
        sl_result_param_num(res, "heads", g->NH);
        sl_result_param_num(res, "seq", g->T);
        sl_result_param_num(res, "vocab", g->V);
        sl_result_param_num(res, "tied_embeddings", 0); /* gpt_model.h says why */
        sl_result_param_num(res, "dropout", g->dropout);
        /* a block's activations as kept for this rank's samples beside Korthikanti et al.'s
         * count at the run's element size, and what the two count differently */
        const sl_gpt_shape gs = {.layers = g->layers, .d_model = g->C, .heads = g->NH, .seq = g->T};
        const int rows = t->act_rows > 0 ? t->act_rows : t->hi - t->lo; /* a micro-batch's, if any */
        const double kept = (double)sl_gpt_block_kept_bytes(m, t->dtype, rows);
        const double formula = sl_gpt_activ_block(&gs, rows, SL_GPT_STORE_ALL) * sl_dtype_size(t->dtype) / 2;
        sl_result_metric(res, "activ_block", kept, "bytes");
        sl_result_metric(res, "activ_block_formula", formula, "bytes");
        sl_result_param_str(res, "activ_block_note",
                            "kept: 16sbh + as^2b values + 16sb bytes of f32 layer-norm moments; the formula "
                            "(34sbh + 5as^2b at 16 bits, all of it scaled to the run's element size, its 1-byte "
                            "masks too) also holds dropout's masks (2sbh + as^2b bytes) and the attention "
                            "dropout's output (2as^2b), which this model does not keep: with --dropout it draws "
                            "each mask again from its counter and recomputes the dropped probabilities");
    } else if (!tech->model_params) {
        sl_result_param_num(res, "layers", (double)sl_train_opt.layers);
        sl_result_param_num(res, "width", (double)sl_train_opt.width);
    }
    sl_result_param_num(res, "params", (double)t->nparams);
    if (tech->sleep_mode) sl_result_param_str(res, "compute_mode", sl_compute_sleep_mode() ? "sleep" : "real");
    sl_result_set_time(res, st);
    if (sl_no_phases()) sl_result_param_str(res, "phases", "off"); /* SL_NO_PHASES=1: none below */
    sl_result_metric(res, "samples_per_s", B / st->median, "samples/s");
    for (int p = 0; p < SL_NPHASES; p++)
        if (used & (1u << p)) sl_result_metric(res, sl_phase_name((sl_phase)p), med[p], "s");
    if ((used & (1u << SL_PHASE_COMM)) && (used & (1u << SL_PHASE_EXPOSED))) {
        double overlap = med[SL_PHASE_COMM] > 0 ? 1.0 - med[SL_PHASE_EXPOSED] / med[SL_PHASE_COMM] : NAN;
        if (!isnan(overlap)) overlap = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
        sl_result_metric(res, "overlap", overlap, "fraction");
    }
    /* The one definition of eff, for every technique and both scalings: the speedup over one
     * rank training the same global batch (the whole model, every sample of the step: the
     * row's one_rank_batch and one_rank_mem_params say so), divided by the ranks. A baseline at
     * the per-rank batch divided only by the step would credit a technique that splits the
     * model (pipeline's stages, megatron_mlp's slices) with the other ranks' share of the work:
     * 160-180 % on 2 ranks. Above 1 the ranks together beat P one-rank runs: superlinear, and
     * the row says so rather than a reason this run did not establish. */
    double eff = NAN;
    if (one) eff = one->step / (P * st->median);
    sl_result_metric(res, "scaling_eff", eff, "fraction");
    sl_result_metric(res, "one_rank_step", one ? one->step : NAN, "s");
    if (one) {
        sl_result_param_num(res, "one_rank_batch", one->batch);
        sl_result_metric(res, "one_rank_mem_params", one->mem_params, "bytes");
        if (eff > 1) sl_result_param_str(res, "eff_note", "superlinear");
    }
    /* the one-rank baseline ran inside this run, on this rank's threads only: say how many */
    if (one && m->be == SL_BACKEND_CPU) sl_result_param_num(res, "one_rank_threads", sl_k_cpu_threads());
    sl_result_metric(res, "bytes_model", tech->bytes_model ? tech->bytes_model(t) : NAN, "bytes");
    sl_result_metric(res, "bytes_sent", sent, "bytes");
    double flops = tech->model_flops ? tech->model_flops(B) : 3.0 * sl_mlp_flops_forward(m, B);
    sl_result_metric(res, "tflops", flops / st->median / 1e12, "TFLOP/s");
    if (!tech->model_params) { /* the model's GEMMs: their rate on these ranks, in this run */
        char shape[64];
        const double peak_gemm = train_gemm_peak(t, t->act_rows > 0 ? t->act_rows : t->hi - t->lo, shape, sizeof shape);
        sl_result_param_str(res, "gemm_shape", shape);
        sl_result_metric(res, "gemm_peak", peak_gemm, "TFLOP/s");
        sl_result_metric(res, "gemm_frac", flops / st->median / 1e12 / peak_gemm, "fraction");
    }
    static const char *const held_names[NHELD] = {"mem_params", "mem_grads", "mem_optim", "mem_activ"};
    for (int k = 0; k < NHELD; k++) sl_result_metric(res, held_names[k], held[k], "bytes");
    if (tech->memory_model) {
        static const char *const model_names[NHELD] = {"model_params", "model_grads", "model_optim", "model_activ"};
        double model[SL_MEM_NCATS] = {0};
        tech->memory_model(t, model);
        for (int k = 0; k < NHELD; k++) sl_result_metric(res, model_names[k], model[held_cats[k]], "bytes");
    }
    sl_result_metric(res, "mem_peak", peak, "bytes");
}

/* The last step's loss over all ranks beside the serial references' (rank 0's figures). */
static void train_loss_metrics(sl_train *t, const train_check *c, sl_result *res)
{
    double loss = 0;
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "final_loss", loss, "loss");
    const int checked = t->ctx->opt.check;
    sl_result_metric(res, "ref_final_loss", checked ? c->ref_loss : NAN, "loss");
    sl_result_metric(res, "f32_final_loss", checked ? c->f32_loss : NAN, "loss");
    sl_result_metric(res, "loss_vs_f32", checked ? (loss - c->f32_loss) / c->f32_loss : NAN, "ratio");
}

void train_run_variant(sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                       sl_coll impl, const sl_mlp *m, sl_task *task, const sl_optim *o,
                       train_baseline *baselines)
{
    const int P = ctx->nranks;
    const int p2p = (tech->p2p_variants >> variant) & 1;
    const int B = train_global_batch(tech, variant, P);
    const int steps = (int)ctx->opt.warmup + (int)ctx->opt.iters;
    const sl_mem_space space = m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;

    sl_comm *comm;
    sl_train_coll_ok(sl_comm_create(&comm, ctx->comm, impl, space), "sl_comm_create");
    double held[NHELD];
    for (int k = 0; k < NHELD; k++) held[k] = -(double)sl_mem_current(space, held_cats[k]);
    size_t before = space_total(space);
    sl_train t;
    train_open(&t, ctx, tech, variant, dtype, comm, m, task, o, B, steps, 0);
    for (int k = 0; k < NHELD; k++) held[k] += (double)sl_mem_current(space, held_cats[k]);
    const char *cannot = tech->cannot_run ? tech->cannot_run(&t) : NULL;
    if (cannot) { /* its row says why, and the run goes on */
        sl_result res;
        sl_result_init(ctx, &res, tech->variants[variant]);
        res.backend = sl_backend_name(m->be);
        res.collective = p2p ? "p2p" : sl_coll_name(impl);
        res.dtype = sl_dtype_name(dtype);
        sl_result_param_num(&res, "global_batch", B);
        if (tech->row) tech->row(&t, &res);
        sl_result_check(&res, SL_CHECK_NONE, NAN, "%s", cannot);
        sl_result_emit(ctx, &res);
        train_close(&t);
        sl_comm_destroy(comm);
        return;
    }

    sl_stats st;
    sl_mem_reset_peaks();
    unsigned long long sent0 = sl_comm_bytes_sent(comm);
    double v0 = sl_now();
    sl_time_loop(ctx, train_step_body, &t, &st);
    char span[96]; /* the variant's whole run, on its own trace row, so the steps below read in context */
    snprintf(span, sizeof span, "%s, %s", tech->variants[variant], p2p ? "p2p" : sl_coll_name(impl));
    sl_trace_event(span, "variant", 2, v0, sl_now());
    double peak = (double)sl_mem_peak_total(space) - (double)before;
    /* What the device itself reports in use after the steps (allocator caches, the CUDA
     * context and other processes included): beside the suite's own count, not instead. */
    long long dev_used = m->be == SL_BACKEND_CUDA ? sl_cuda_device_used() : -1;
    /* Bytes sent per step, measured where the suite's own transport carries them (the MPI
     * library's and NCCL's collectives are opaque: n/a); the busiest rank's figure. */
    double sent = (double)(sl_comm_bytes_sent(comm) - sent0) / steps, sent_max = 0;
    SL_CHECK_MPI(MPI_Allreduce(&sent, &sent_max, 1, MPI_DOUBLE, MPI_MAX, ctx->comm));
    int opaque = !p2p && (impl == SL_COLL_MPI || impl == SL_COLL_NCCL);
    double med[SL_NPHASES];
    unsigned used;
    train_phase_medians(&t, (int)ctx->opt.iters, ctx->comm, med, &used);
    train_compute_replay(&t); /* sleep mode: the weights the check and the row read */

    train_prediction pred; /* after the bytes were counted: its sweep sends too */
    const int predicted = train_predict(&t, impl, p2p, &pred);

    train_check c = {0};
    if (ctx->opt.check) c = train_check_run(&t);

    train_baseline self = {0}, *one = NULL;
    if (P == 1) {
        /* this run is the one-rank run */
        self = (train_baseline){.step = st.median, .batch = t.hi - t.lo, .mem_params = held[0]};
        one = &self;
    } else if (sl_train_opt.baseline && !((tech->no_baseline_variants >> variant) & 1)) {
        if (baselines[variant].step == 0) /* once per variant: on one rank the collective is moot */
            baselines[variant] = train_one_rank_step(ctx, tech, variant, dtype, m, task, o, B);
        one = &baselines[variant];
    }

    sl_result res;
    sl_result_init(ctx, &res, tech->variants[variant]);
    res.backend = sl_backend_name(m->be);
    res.collective = p2p ? "p2p" : sl_coll_name(impl);
    res.dtype = sl_dtype_name(dtype);
    common_row(&t, &res, &st, med, used, one, opaque ? NAN : sent_max, held, peak);
    if (P > 1 && one && st.median * P < one->step)
        sl_note(ctx, "%s, %s: eff %.1f%% is superlinear: the %d ranks trained the global batch more than %d "
                     "times as fast as one rank",
                tech->variants[variant], res.collective, 100 * one->step / (P * st.median), P, P);
    sl_result_metric(&res, "mem_device_used", dev_used >= 0 ? (double)dev_used : NAN, "bytes");
    if (predicted || (tech->schedule && sl_no_predict())) train_prediction_row(&pred, st.median, &res);
    if (tech->row) tech->row(&t, &res);
    if (t.scaled) { /* the training layer's loss scaler took the steps (train_precision.c) */
        if (dtype != SL_F32) sl_result_param_str(&res, "precision", "mixed");
        sl_train_mixed_row(&t, &t.ms, &res);
    }
    sl_result_metric(&res, "weight_rel_err", c.diff.max_rel, "ratio");
    sl_result_metric(&res, "weight_l2_err", c.diff.l2_rel, "ratio");
    sl_result_metric(&res, "ref_weight_rms", ctx->opt.check ? c.ref_rms : NAN, "weight");
    /* the reference's first and largest loss: the check fails a run whose loss rose far above
     * where it started (SL_TRAIN_DIVERGED_RISE) */
    sl_result_metric(&res, "ref_first_loss", ctx->opt.check ? c.ref_first_loss : NAN, "loss");
    sl_result_metric(&res, "ref_peak_loss", ctx->opt.check ? c.ref_peak_loss : NAN, "loss");
    if (tech->sums_loss) train_loss_metrics(&t, &c, &res);
    snprintf(res.headline, sizeof res.headline, "samples_per_s");
    /* The gate: the step against the one-rank step timed in this run (train_one_rank_step, a
     * ceiling that SL_TEST_SLOWDOWN leaves alone). With one rank the row is its own baseline
     * (scaling_eff 1 by construction): no gate. */
    if (P > 1) sl_result_gate(&res, "scaling_eff");
    if (ctx->opt.check)
        train_check_verdict(&t, &c, &res);
    else
        sl_result_check(&res, SL_CHECK_SKIPPED, NAN, NULL);
    if (tech->row_done) tech->row_done(&t, &res);
    sl_result_emit(ctx, &res);

    train_close(&t);
    sl_comm_destroy(comm);
}
