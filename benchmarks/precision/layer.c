/* layer.c — precision as a technique of the training layer (sl_train.h): the MLP (the default)
 * or the GPT (--model gpt) trained data-parallel (each rank its share of the batch, the gradients
 * all-reduced in the run's precision, every replica taking the same step) in fp32, fp16 and bf16.
 * A variant is a loss scaler (none, static, dynamic) and a master choice (an f32 master copy, or
 * none); the layer is told them through .precision and does the rest: the 16-bit model pieces,
 * the unscale, the skip-or-apply decision agreed over the ranks, the optimizer on the master copy
 * or on the 16-bit weights widened, and the serial reference trained with the same scaler and
 * master choice. fp32 takes a scaler too (the MLP's fp32/static and fp32/dynamic): a power of two,
 * it changes no bit, and the run must equal serial f32 training bit for bit on one rank.
 *
 * What is counted, per step, on every rank, summed over the ranks (the layer's sl_train_counts):
 * the rounding of each layer's f32 weight gradient into the 16-bit type (underflow: nonzero
 * values that became 0), the unscaled gradient elements that were inf or NaN (an overflow
 * anywhere before them), the steps the scaler skipped, and, without a master copy, the updates
 * rounding threw away. The MLP's activation gradients are counted too (sl_mixed's counts of the
 * replica's activations): the rows' underflow_frac, subnormal_frac and overflow_max hold activation
 * and weight gradients together. The GPT's activation gradients are rounded inside its kernels
 * (gpt_model.h) and are not counted: those three are null for it, and counts_note says why.
 *
 * The checks: every run's weights against serial training in its precision with its scaler and
 * master choice (the driver's check: bit for bit in fp32 on one rank for the MLP, within the
 * layer's tolerances otherwise, where the batch's gradient is summed in pieces); and the 16-bit
 * runs that should train (bf16, or fp16 with a scaler, with a master copy) end within LOSS_TOL of
 * fp32's loss (run.h says why 0.25). The MLP's rows carry its teaching figures (speed and model
 * states against fp32); its scenario and loss curves read every run once all have run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "curve.h"
#include "gpt_shape.h"
#include "layer.h"
#include "options.h"
#include "run.h"
#include "sl_train.h"

/* Variants: scaler x master, in the order none, static, dynamic; with a master copy first:
 * k = 2 x sl_scale_mode + (no master copy). The GPT's are these six in every precision; the MLP's
 * are each precision's, v = NVARIANTS x precision_id + k, named as its curve ("fp16/none"). */
static const char *const gpt_variants[] = {"none",    "none/no-master",    "static",
                                           "static/no-master", "dynamic", "dynamic/no-master"};
enum { NVARIANTS = 6, NMLP = NPRECISIONS * NVARIANTS };
static const char *mlp_variants[NMLP];
static unsigned opt_variants;

static sl_scale_mode variant_mode(int v) { return (sl_scale_mode)(v % NVARIANTS / 2); }
static int variant_master(int v) { return !(v % NVARIANTS & 1); }

/* The run's state: a replica and the log of every step (run.h's, for the curve and the
 * fractions), with the counts' reading at the end of the last step. */
typedef struct prec_run {
    sl_replica rep;
    run_result res;
    sl_train_counts last;
    double states; /* bytes setup held for weights, gradients, master copy and optimizer state */
    int summed;    /* the log holds the sums over the ranks (prec_finish) */
} prec_run;

/* fp32's final loss and step (the first fp32 run's): the 16-bit rows are read against them. */
static double fp32_final = NAN, fp32_step = NAN;
static FILE *curve;
static char curve_path[PATH_MAX + 64];
static const precision_mlp *mlp; /* the MLP's program (NULL: the GPT's) */
static run_result *done;         /* the MLP's finished runs, for its after hook */
static int ndone;

static void precision(sl_train *t)
{
    const sl_scale_mode mode = variant_mode(t->variant);
    const precision_options *o = &precision_opt;
    sl_loss_scaler_init(&t->ms.sc, mode, mode == SL_SCALE_STATIC ? o->scale : o->init_scale, o->growth, o->backoff,
                        (long)o->interval);
    t->master = variant_master(t->variant);
}

static sl_mem_space space_of(const sl_train *t) { return t->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST; }

static double states_held(const sl_train *t)
{
    const sl_mem_space sp = space_of(t);
    return (double)(sl_mem_current(sp, SL_MEM_PARAMS) + sl_mem_current(sp, SL_MEM_GRADS) +
                    sl_mem_current(sp, SL_MEM_OPTIM));
}

static void setup(sl_train *t)
{
    prec_run *r = calloc(1, sizeof *r);
    if (!r) SL_FATAL("out of memory");
    t->state = r;
    t->task->loss_weight = (float)precision_opt.loss_weight; /* the task's loss, the reference's too */
    r->res.cfg = (run_config){t->dtype, variant_mode(t->variant), t->dtype == SL_F32 || variant_master(t->variant),
                              mlp ? NULL : "gpt"};
    r->res.steps = t->nsteps;
    r->res.log = calloc((size_t)t->nsteps, sizeof *r->res.log);
    if (!r->res.log) SL_FATAL("out of memory for %d steps' logs", t->nsteps);
    r->states = -states_held(t);
    sl_replica_alloc(t, t->hi - t->lo, &r->rep);
    r->states += states_held(t);
    /* the MLP's fp32 runs are the ceiling its speed_vs_fp32 gate divides by: SL_TEST_SLOWDOWN
     * slows the 16-bit ones only */
    if (mlp && t->dtype == SL_F32) sl_slowdown_ceiling(1);
}

/* One data-parallel step, and what it lost. */
static void step(sl_train *t)
{
    prec_run *r = t->state;
    const size_t n = t->m->nparams;
    const double scale = t->ms.sc.scale; /* the step's: the update may change it */
    const int applied = t->ms.applied;
    sl_replica_gradients(t, &r->rep, 1, NULL);
    if (t->size > 1) {
        const double t0 = sl_now();
        sl_train_coll_ok(sl_coll_allreduce(t->comm, r->rep.grads, r->rep.grads, n, t->dtype, SL_OP_SUM),
                         "sl_coll_allreduce");
        sl_train_blocking(t, "allreduce", t0);
    }
    sl_replica_update(t, &r->rep, 0, n, r->rep.optim);
    if (t->step >= t->nsteps) return;
    step_log *lg = &r->res.log[t->step];
    lg->loss = t->loss; /* this rank's part: the loss is normalised over the global batch */
    lg->scale = scale;
    lg->skipped = t->ms.applied == applied;
    const sl_train_counts *c = &t->cnt, *p = &r->last;
    lg->cnt.wgrad = (sl_cast_count){c->wgrad.underflow - p->wgrad.underflow, c->wgrad.overflow - p->wgrad.overflow,
                                    c->wgrad.subnormal - p->wgrad.subnormal, c->wgrad.zero - p->wgrad.zero};
    lg->cnt.wgrad_n = c->wgrad_n - p->wgrad_n;
    lg->cnt.lost_updates = (size_t)(c->lost_updates - p->lost_updates);
    lg->cnt.nonfinite = (size_t)(c->nonfinite - p->nonfinite);
    r->last = *c;
    if (mlp && t->dtype != SL_F32) { /* sl_mixed's, of this step (its input resets them) */
        lg->cnt.agrad = r->rep.acts.mx.cnt.agrad;
        lg->cnt.agrad_n = r->rep.acts.mx.cnt.agrad_n;
    }
}

/* The log summed over the ranks (every rank's part of each step's loss and counts), once a run;
 * the scaler's state and fp32's final loss. Collective. */
static void prec_finish(sl_train *t)
{
    prec_run *r = t->state;
    if (r->summed) return;
    r->summed = 1;
    enum { PER = 13 };
    const int S = r->res.steps;
    double *v = calloc((size_t)S * PER, sizeof *v);
    if (!v) SL_FATAL("out of memory");
    for (int s = 0; s < S; s++) {
        const sl_mixed_counts *c = &r->res.log[s].cnt;
        double *x = v + (size_t)s * PER;
        x[0] = r->res.log[s].loss, x[1] = (double)c->wgrad.underflow, x[2] = (double)c->wgrad.overflow;
        x[3] = (double)c->wgrad.subnormal, x[4] = (double)c->wgrad.zero, x[5] = (double)c->wgrad_n;
        x[6] = (double)c->lost_updates, x[7] = (double)c->nonfinite, x[8] = (double)c->agrad.underflow;
        x[9] = (double)c->agrad.overflow, x[10] = (double)c->agrad.subnormal, x[11] = (double)c->agrad.zero;
        x[12] = (double)c->agrad_n;
    }
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, S * PER, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    for (int s = 0; s < S; s++) {
        sl_mixed_counts *c = &r->res.log[s].cnt;
        const double *x = v + (size_t)s * PER;
        r->res.log[s].loss = x[0];
        c->wgrad = (sl_cast_count){(unsigned long long)x[1], (unsigned long long)x[2], (unsigned long long)x[3],
                                   (unsigned long long)x[4]};
        c->wgrad_n = (unsigned long long)x[5];
        c->lost_updates = (size_t)x[6];
        c->nonfinite = (size_t)x[7];
        c->agrad = (sl_cast_count){(unsigned long long)x[8], (unsigned long long)x[9], (unsigned long long)x[10],
                                   (unsigned long long)x[11]};
        c->agrad_n = (unsigned long long)x[12];
    }
    free(v);
    r->res.skipped = t->ms.sc.skipped;
    r->res.growths = t->ms.sc.growths;
    r->res.backoffs = t->ms.sc.backoffs;
    r->res.final_scale = t->ms.sc.scale;
    if (t->dtype == SL_F32 && isnan(fp32_final)) fp32_final = run_final_loss(&r->res);
}

/* Expected to train as fp32 does: master weights, and a type whose range holds the gradients. */
static int should_track(const run_config *c)
{
    return c->dt == SL_F32 || (c->master && (c->dt == SL_BF16 || c->mode != SL_SCALE_NONE));
}

static int check(sl_train *t, double *error, char *why, size_t whylen)
{
    prec_run *r = t->state;
    prec_finish(t);
    if (t->dtype == SL_F32 || !should_track(&r->res.cfg)) return 0;
    const double fl = run_final_loss(&r->res);
    *error = fabs(fl - fp32_final) / fp32_final;
    if (*error <= LOSS_TOL) return 0;
    snprintf(why, whylen, "final loss %.4g is %.3g from fp32's %.4g (relative; bound %g)", fl, *error, fp32_final,
             LOSS_TOL);
    return 1;
}

static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    prec_run *r = t->state;
    *first = 0;
    *count = t->m->nparams;
    if (r->rep.master || t->dtype == SL_F32) return r->rep.master ? r->rep.master : r->rep.params;
    return sl_train_widen(t, r->rep.params, sl_train_wide(t), t->m->nparams); /* no master copy */
}

static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    sl_replica_memory_model(t, ((const prec_run *)t->state)->rep.acts.rows, bytes);
}

/* Ring all-reduce's textbook volume: 2(N-1)/N of the gradient, in the run's precision. */
static double bytes_model(const sl_train *t)
{
    return t->size > 1 ? 2.0 * (t->size - 1) / t->size * (double)t->m->nparams * (double)sl_train_esize(t) : 0.0;
}

/* The MLP's figures beside the GPT's: its activation gradients counted, and speed against fp32's
 * (the gate of its 16-bit rows, fp32 being their ceiling; on several ranks the layer gates
 * scaling_eff instead, null unless --baseline 1). */
static void mlp_row(sl_train *t, const run_result *rr, sl_result *res)
{
    const int f32 = t->dtype == SL_F32;
    sl_result_metric(res, "underflow_frac", run_underflow_frac(rr), "fraction");
    sl_result_metric(res, "subnormal_frac", run_subnormal_frac(rr), "fraction");
    sl_result_metric(res, "overflow_mean", run_overflow_mean(rr), "elements/step");
    sl_result_metric(res, "overflow_max", run_overflow_max(rr), "elements/step");
    if (!t->scaled) { /* no scaler's row: what it would say */
        sl_result_metric(res, "skipped_steps", 0, "steps");
        sl_result_metric(res, "final_scale", 1, "scale");
    }
    if (f32 && isnan(fp32_step)) fp32_step = res->time.median;
    sl_result_metric(res, "speed_vs_fp32", fp32_step / res->time.median, "ratio");
    if (!f32) sl_result_gate(res, "speed_vs_fp32");
}

static void row(sl_train *t, sl_result *res)
{
    prec_run *r = t->state;
    prec_finish(t);
    const run_result *rr = &r->res;
    const int every = precision_curve_every(rr->steps), f32 = t->dtype == SL_F32;
    if (!t->scaled) sl_result_param_str(res, "loss_scale", "none"); /* else the scaler's row says */
    sl_result_param_str(res, "master", rr->cfg.master ? "fp32" : "none");
    sl_result_param_num(res, "steps", rr->steps);
    sl_result_param_num(res, "curve_every", every);
    sl_result_param_str(res, "loss_check", f32 ? "serial f32 training's weights"
                                           : should_track(&rr->cfg) ? "asserted: within 0.25 of fp32's final loss"
                                           : rr->cfg.master ? "not asserted: fp16 without loss scaling, the lesson"
                                                            : "not asserted: no master copy, the lesson");
    const double fl = run_final_loss(rr);
    sl_result_metric(res, "final_loss", fl, "");
    sl_result_metric(res, "loss_vs_fp32", fl / fp32_final, "ratio");
    sl_result_metric(res, "loss_last", rr->log[rr->steps - 1].loss, "");
    if (mlp) {
        mlp_row(t, rr, res);
    } else { /* (a row's strings hold 63 characters: the file's head comment says it in full) */
        sl_result_param_str(res, "counts_note", "activation gradients uncounted (in the GPT's kernels)");
        sl_result_metric(res, "underflow_frac", NAN, "fraction");
        sl_result_metric(res, "subnormal_frac", NAN, "fraction");
        sl_result_metric(res, "overflow_max", NAN, "elements/step");
    }
    sl_result_metric(res, "wgrad_underflow_frac", f32 ? 0 : run_wgrad_underflow_frac(rr), "fraction");
    sl_result_metric(res, "wgrad_zero_frac", f32 && !mlp ? NAN : run_wgrad_zero_frac(rr), "fraction");
    sl_result_metric(res, "nonfinite_max", run_nonfinite_max(rr), "elements/step");
    sl_result_metric(res, "backoffs", (double)rr->backoffs, "");
    sl_result_metric(res, "growths", (double)rr->growths, "");
    sl_result_metric(res, "lost_updates_frac", rr->cfg.master ? NAN : run_lost_frac(rr, t->m->nparams),
                     "fraction/step");
    sl_result_metric(res, "state_bytes_per_param", r->states / (double)t->m->nparams, "bytes");
    if (t->ctx->rank == 0) {
        if (!curve) curve = curve_file_open(t->ctx, curve_path, sizeof curve_path);
        curve_file_write(curve, curve_path, rr, every);
        if (fflush(curve) != 0) SL_FATAL("cannot write %s", curve_path);
    }
}

static void release(sl_train *t)
{
    prec_run *r = t->state;
    sl_replica_free(t, &r->rep);
    if (mlp && t->dtype == SL_F32) sl_slowdown_ceiling(0);
    if (mlp && r->summed && !t->baseline) { /* its log, for the curves and the scenario */
        run_result *more = realloc(done, (size_t)(ndone + 1) * sizeof *done);
        if (!more) SL_FATAL("out of memory");
        done = more;
        done[ndone++] = r->res;
    } else {
        free(r->res.log);
    }
    free(r);
}

/* The scaler options choose the variants; --precision the dtypes, fp32 always (the rows are
 * read against it). fp32 runs with a master copy alone (f32 is its own); the GPT's runs "none"
 * alone there, the MLP's also its scalers (exact: powers of two). */
static sl_technique gpt_technique, mlp_technique;

static void validate(sl_ctx *ctx)
{
    const precision_options *o = &precision_opt;
    precision_options_validate();
    if (ctx->opt.iters < 1) sl_usage_error("-n/--iters: expected at least 1 timed training step");
    unsigned asked = 0;
    for (int v = 0; v < NVARIANTS; v++)
        if ((o->scalings >> variant_mode(v) & 1) && (o->masters >> !variant_master(v) & 1)) asked |= 1u << v;
    ctx->opt.dtypes = 1u << SL_F32;
    for (int p = 0; p < NPRECISIONS; p++)
        if (o->precisions >> p & 1) ctx->opt.dtypes |= 1u << precision_dtype[p];
    if (!mlp) {
        if (!sl_gpt_selected()) sl_usage_error("--model: this program trains the MLP without --model gpt");
        opt_variants = asked | 1u; /* fp32's */
        gpt_technique.mixed_variants = asked;
        return;
    }
    opt_variants = 1u; /* fp32/none: every row is read against it */
    for (int p = 0; p < NPRECISIONS; p++)
        if (o->precisions >> p & 1) opt_variants |= (p == P_FP32 ? asked & 0x15u : asked) << (NVARIANTS * p);
    mlp->validate(ctx);
}

static void after(sl_ctx *ctx)
{
    curve_file_close(curve, curve_path);
    curve = NULL;
    if (mlp) mlp->after(ctx, done, ndone);
    for (int i = 0; i < ndone; i++) free(done[i].log);
    free(done);
    done = NULL, ndone = 0;
}

static const sl_column gpt_columns[] = {
    SL_COL("variant", "variant", 18), SL_COL("dtype", "dtype", 5), SL_COL("coll", "collective", 5),
    SL_COL("batch", "global_batch", 6), {"step", "ms", "time.median", 9, 2, 1e3},
    {"samples/s", "", "samples_per_s", 10, 1, 0}, {"loss", "final", "final_loss", 9, 4, 0},
    {"vs fp32", "x", "loss_vs_fp32", 8, 3, 0}, {"underflow", "% dW", "wgrad_underflow_frac", 9, 3, 100},
    {"zero dW", "% dW", "wgrad_zero_frac", 8, 2, 100}, {"skipped", "steps", "skipped_steps", 7, 0, 0},
    {"scale", "final", "final_scale", 8, 0, 0}, {"lost upd", "% w/step", "lost_updates_frac", 8, 2, 100},
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_column mlp_columns[] = {
    SL_COL("variant", "variant", 22),
    {"loss", "final", "final_loss", 10, 3, 0}, {"vs fp32", "x", "loss_vs_fp32", 8, 2, 0},
    {"underflow", "% grads", "underflow_frac", 9, 2, 100}, {"subnormal", "% grads", "subnormal_frac", 9, 2, 100},
    {"zero dW", "% dW", "wgrad_zero_frac", 8, 1, 100}, {"overflow", "max/step", "overflow_max", 8, 0, 0},
    {"skipped", "steps", "skipped_steps", 7, 0, 0}, {"scale", "final", "final_scale", 8, 0, 0},
    {"lost upd", "% w/step", "lost_updates_frac", 8, 2, 100},
    {"states", "B/param", "state_bytes_per_param", 7, 0, 0}, {"activ", "KiB", "mem_activ", 7, 1, 1.0 / 1024},
    {"samples/s", "", "samples_per_s", 10, 0, 0}, {"vs fp32", "x", "speed_vs_fp32", 7, 2, 0},
    SL_TRAIN_COLUMNS_CHECK,
};

/* The weights' tolerance against the serial twin in 16 bits with AdamW, in units of lr / rms(w_ref)
 * (sl_train.h: SL_TRAIN_TOL_MIXED_ADAMW_*, the MLP's 0.1 for f16 and 0.5 for bf16). The GPT flips
 * more weights than the MLP: its embedding and layer-norm gradients hold many values within
 * 16-bit rounding of zero, which AdamW turns into steps of +-lr. Measured (2 to 4 ranks, d-model
 * 32 and 64, 1-2 blocks, 10-20 steps, every scaler and master choice, mpi and ring): f16 0.07 to
 * 0.14, bf16 0.11 to 0.25. So f16 takes 0.3 and bf16 the layer's 0.5: a step missed or taken
 * twice is 1 and more in these units. SGD keeps the layer's bounds. */
#define TOL_GPT_ADAMW_F16 0.3

#define PRECISION_CALLBACKS                                                                                       \
    .variant_mask = &opt_variants, .precision = precision, .setup = setup, .step = step, .weights = weights,      \
    .free = release, .memory_model = memory_model, .bytes_model = bytes_model, .row = row, .check = check,      \
    .after = after

#define PRECISION_PROGRAM(what)                                                                            \
    .name = "precision", .summary = what, .uses = SL_USES_BACKEND | SL_USES_COLL,                                 \
    .colls = (1u << SL_NCOLLS) - 1, .default_coll = SL_COLL_MPI, .groups = {&precision_option_group},             \
    .validate = validate

static sl_technique gpt_technique = {
    .trains_gpt = 1,
    .program = {PRECISION_PROGRAM("mixed-precision training of the GPT: fp32, fp16, bf16; no, static, dynamic "
                                  "loss scaling; f32 master weights; data-parallel"),
                .default_iters = 40, .default_warmup = 0},
    .variants = gpt_variants,
    .nvariants = NVARIANTS,
    .mixed_only_variants = ((1u << NVARIANTS) - 1) & ~1u,
    .tol_mixed_adamw_l2 = {[SL_F16] = TOL_GPT_ADAMW_F16}, /* bf16, and SGD: the layer's */
    PRECISION_CALLBACKS,
    .columns = gpt_columns,
    .ncolumns = (int)(sizeof gpt_columns / sizeof gpt_columns[0]),
};

static sl_technique mlp_technique = {
    .program = {PRECISION_PROGRAM("mixed-precision training: fp32, fp16, bf16; no, static, dynamic loss scaling; "
                                  "f32 master weights")}, /* its defaults: precision.c's */
    .variants = mlp_variants,
    .nvariants = NMLP,
    .dtype_variants = {[SL_F32] = (1u << NVARIANTS) - 1, [SL_F16] = ((1u << NVARIANTS) - 1) << NVARIANTS,
                       [SL_BF16] = ((1u << NVARIANTS) - 1) << (2 * NVARIANTS)},
    .exact_one_rank = 1,
    PRECISION_CALLBACKS,
    .columns = mlp_columns,
    .ncolumns = (int)(sizeof mlp_columns / sizeof mlp_columns[0]),
};

int precision_trains_gpt(int argc, char **argv)
{
    int gpt = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) gpt = !strcmp(argv[i + 1], "gpt");
        else if (!strncmp(argv[i], "--model=", 8)) gpt = !strcmp(argv[i] + 8, "gpt");
        else if (!strcmp(argv[i], "--preset") || !strncmp(argv[i], "--preset=", 9)) gpt = 1;
    }
    return gpt;
}

int precision_layer_main(int argc, char **argv, const precision_mlp *m)
{
    sl_train_opt.baseline = 0; /* what precision measures is not scaling: --baseline 1 adds it */
    mlp = m;
    if (!m) {
        precision_opt.loss_weight = 1; /* the GPT's cross-entropy as it is */
        return sl_train_main(&gpt_technique, argc, argv);
    }
    static char names[NMLP][32];
    for (int v = 0; v < NMLP; v++) {
        const run_config c = {precision_dtype[v / NVARIANTS], variant_mode(v), variant_master(v), NULL};
        run_name(&c, names[v], sizeof names[v]);
        mlp_variants[v] = names[v];
    }
    mlp_technique.program.extra = m->extra;
    mlp_technique.program.default_iters = m->default_iters;
    mlp_technique.program.default_warmup = m->default_warmup;
    mlp_technique.before = m->before;
    return sl_train_main(&mlp_technique, argc, argv);
}
