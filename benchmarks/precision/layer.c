/* layer.c — precision as a technique of the training layer (sl_train.h): the GPT trained
 * data-parallel (each rank its share of the batch, the gradients all-reduced in the run's
 * precision, every replica taking the same step) in fp32, fp16 and bf16. A variant is a loss
 * scaler (none, static, dynamic) and a master choice (an f32 master copy, or none); the layer is
 * told them through .precision and does the rest: the 16-bit model pieces, the unscale, the
 * skip-or-apply decision agreed over the ranks, the optimizer on the master copy or on the 16-bit
 * weights widened, and the serial reference trained with the same scaler and master choice.
 *
 * What is counted, per step, on every rank, summed over the ranks (the layer's sl_train_counts):
 * the rounding of each layer's f32 weight gradient into the 16-bit type (underflow: nonzero
 * values that became 0), the unscaled gradient elements that were inf or NaN (an overflow
 * anywhere before them), the steps the scaler skipped, and, without a master copy, the updates
 * rounding threw away. The GPT's activation gradients
 * are rounded inside its kernels (gpt_model.h) and are not counted: the rows' underflow_frac,
 * subnormal_frac and overflow_max (the MLP's, activation and weight gradients together) are
 * null for it, and counts_note says why.
 *
 * The checks: every run's weights against serial training in its precision with its scaler and
 * master choice (the driver's check: bit for bit on one rank, within the layer's mixed-precision
 * tolerances on several, where the batch's gradient is summed in pieces); fp32 is serial f32
 * training; and the 16-bit runs that should train (bf16, or fp16 with a scaler, with a master
 * copy) end within LOSS_TOL of fp32's loss, as precision's MLP runs (run.h says why 0.25). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "curve.h"
#include "gpt_shape.h"
#include "layer.h"
#include "options.h"
#include "run.h"
#include "sl_train.h"

/* Variants: scaler x master, in the order the MLP's runs take (none, static, dynamic; with a
 * master copy first). v = 2 x sl_scale_mode + (no master copy). */
static const char *const variant_names[] = {"none",    "none/no-master",    "static",
                                            "static/no-master", "dynamic", "dynamic/no-master"};
enum { NVARIANTS = 6 };
static unsigned opt_variants;

static sl_scale_mode variant_mode(int v) { return (sl_scale_mode)(v / 2); }
static int variant_master(int v) { return !(v & 1); }

/* The run's state: a replica and the log of every step (run.h's, for the curve and the
 * fractions), with the counts' reading at the end of the last step. */
typedef struct prec_run {
    sl_replica rep;
    run_result res;
    sl_train_counts last;
    int summed; /* the log holds the sums over the ranks (prec_finish) */
} prec_run;

/* fp32's final loss (the first fp32 run's): the 16-bit rows are read against it. */
static double fp32_final = NAN;
static FILE *curve;
static char curve_path[PATH_MAX + 64];

static void precision(sl_train *t)
{
    const sl_scale_mode mode = variant_mode(t->variant);
    const precision_options *o = &precision_opt;
    sl_loss_scaler_init(&t->ms.sc, mode, mode == SL_SCALE_STATIC ? o->scale : o->init_scale, o->growth, o->backoff,
                        (long)o->interval);
    t->master = variant_master(t->variant);
}

static void setup(sl_train *t)
{
    prec_run *r = calloc(1, sizeof *r);
    if (!r) SL_FATAL("out of memory");
    t->state = r;
    t->task->loss_weight = (float)precision_opt.loss_weight; /* the task's loss, the reference's too */
    r->res.cfg = (run_config){t->dtype, t->dtype == SL_F32 ? SL_SCALE_NONE : variant_mode(t->variant),
                              t->dtype == SL_F32 || variant_master(t->variant), "gpt"};
    r->res.steps = t->nsteps;
    r->res.log = calloc((size_t)t->nsteps, sizeof *r->res.log);
    if (!r->res.log) SL_FATAL("out of memory for %d steps' logs", t->nsteps);
    sl_replica_alloc(t, t->hi - t->lo, &r->rep);
}

/* One data-parallel step, and what it lost. */
static void step(sl_train *t)
{
    prec_run *r = t->state;
    const size_t n = t->m->nparams;
    const double scale = t->dtype == SL_F32 ? 1.0 : t->ms.sc.scale;
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
}

/* The log summed over the ranks (every rank's part of each step's loss and counts), once a run;
 * the scaler's state and fp32's final loss. Collective. */
static void prec_finish(sl_train *t)
{
    prec_run *r = t->state;
    if (r->summed) return;
    r->summed = 1;
    enum { PER = 8 };
    const int S = r->res.steps;
    double *v = calloc((size_t)S * PER, sizeof *v);
    if (!v) SL_FATAL("out of memory");
    for (int s = 0; s < S; s++) {
        const step_log *lg = &r->res.log[s];
        double *x = v + (size_t)s * PER;
        x[0] = lg->loss, x[1] = (double)lg->cnt.wgrad.underflow, x[2] = (double)lg->cnt.wgrad.overflow;
        x[3] = (double)lg->cnt.wgrad.subnormal, x[4] = (double)lg->cnt.wgrad.zero, x[5] = (double)lg->cnt.wgrad_n;
        x[6] = (double)lg->cnt.lost_updates, x[7] = (double)lg->cnt.nonfinite;
    }
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, S * PER, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    for (int s = 0; s < S; s++) {
        step_log *lg = &r->res.log[s];
        const double *x = v + (size_t)s * PER;
        lg->loss = x[0];
        lg->cnt.wgrad = (sl_cast_count){(unsigned long long)x[1], (unsigned long long)x[2], (unsigned long long)x[3],
                                        (unsigned long long)x[4]};
        lg->cnt.wgrad_n = (unsigned long long)x[5];
        lg->cnt.lost_updates = (size_t)x[6];
        lg->cnt.nonfinite = (size_t)x[7];
    }
    free(v);
    r->res.skipped = t->ms.sc.skipped;
    r->res.growths = t->ms.sc.growths;
    r->res.backoffs = t->ms.sc.backoffs;
    r->res.final_scale = t->dtype == SL_F32 ? 1.0 : t->ms.sc.scale;
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

static void row(sl_train *t, sl_result *res)
{
    prec_run *r = t->state;
    prec_finish(t);
    const run_result *rr = &r->res;
    const int every = precision_curve_every(rr->steps);
    if (t->dtype == SL_F32) sl_result_param_str(res, "loss_scale", "none"); /* 16 bits: the scaler's row */
    sl_result_param_str(res, "master", rr->cfg.master ? "fp32" : "none");
    sl_result_param_num(res, "steps", rr->steps);
    sl_result_param_num(res, "curve_every", every);
    sl_result_param_str(res, "loss_check", t->dtype == SL_F32 ? "serial f32 training's weights"
                                           : should_track(&rr->cfg) ? "asserted: within 0.25 of fp32's final loss"
                                           : rr->cfg.master ? "not asserted: fp16 without loss scaling, the lesson"
                                                            : "not asserted: no master copy, the lesson");
    /* (a row's strings hold 63 characters: the file's head comment says it in full) */
    sl_result_param_str(res, "counts_note", "activation gradients uncounted (in the GPT's kernels)");
    const double fl = run_final_loss(rr);
    sl_result_metric(res, "final_loss", fl, "");
    sl_result_metric(res, "loss_vs_fp32", fl / fp32_final, "ratio");
    sl_result_metric(res, "loss_last", rr->log[rr->steps - 1].loss, "");
    sl_result_metric(res, "underflow_frac", NAN, "fraction");
    sl_result_metric(res, "subnormal_frac", NAN, "fraction");
    sl_result_metric(res, "overflow_max", NAN, "elements/step");
    sl_result_metric(res, "wgrad_underflow_frac", t->dtype == SL_F32 ? 0 : run_wgrad_underflow_frac(rr), "fraction");
    sl_result_metric(res, "wgrad_zero_frac", t->dtype == SL_F32 ? NAN : run_wgrad_zero_frac(rr), "fraction");
    sl_result_metric(res, "nonfinite_max", t->dtype == SL_F32 ? 0 : run_nonfinite_max(rr), "elements/step");
    sl_result_metric(res, "backoffs", (double)rr->backoffs, "");
    sl_result_metric(res, "growths", (double)rr->growths, "");
    sl_result_metric(res, "lost_updates_frac", rr->cfg.master ? NAN : run_lost_frac(rr, t->m->nparams),
                     "fraction/step");
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
    free(r->res.log);
    free(r);
}

/* The scaler options choose the variants; --precision the dtypes, fp32 always (the rows are
 * read against it). fp32 runs "none" alone: f32 has no use for a scaler or a master copy. */
static sl_technique technique;

static void validate(sl_ctx *ctx)
{
    const precision_options *o = &precision_opt;
    precision_options_validate();
    if (!sl_gpt_selected()) sl_usage_error("--model: this program trains the MLP without --model gpt");
    unsigned asked = 0;
    for (int v = 0; v < NVARIANTS; v++)
        if ((o->scalings >> variant_mode(v) & 1) && (o->masters >> !variant_master(v) & 1)) asked |= 1u << v;
    opt_variants = asked | 1u; /* fp32's */
    technique.mixed_variants = asked;
    ctx->opt.dtypes = 1u << SL_F32;
    for (int p = 0; p < NPRECISIONS; p++)
        if (o->precisions >> p & 1) ctx->opt.dtypes |= 1u << precision_dtype[p];
    if (ctx->opt.iters < 1) sl_usage_error("-n/--iters: expected at least 1 timed training step");
}

static const sl_column columns[] = {
    SL_COL("variant", "variant", 18), SL_COL("dtype", "dtype", 5), SL_COL("coll", "collective", 5),
    SL_COL("batch", "global_batch", 6), {"step", "ms", "time.median", 9, 2, 1e3},
    {"samples/s", "", "samples_per_s", 10, 1, 0}, {"loss", "final", "final_loss", 9, 4, 0},
    {"vs fp32", "x", "loss_vs_fp32", 8, 3, 0}, {"underflow", "% dW", "wgrad_underflow_frac", 9, 3, 100},
    {"zero dW", "% dW", "wgrad_zero_frac", 8, 2, 100}, {"skipped", "steps", "skipped_steps", 7, 0, 0},
    {"scale", "final", "final_scale", 8, 0, 0}, {"lost upd", "% w/step", "lost_updates_frac", 8, 2, 100},
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

static sl_technique technique = {
    .trains_gpt = 1,
    .program = {
        .name = "precision",
        .summary = "mixed-precision training of the GPT: fp32, fp16, bf16; no, static, dynamic loss scaling; "
                   "f32 master weights; data-parallel",
        .uses = SL_USES_BACKEND | SL_USES_COLL,
        .colls = (1u << SL_NCOLLS) - 1,
        .default_coll = SL_COLL_MPI,
        .default_iters = 40,
        .default_warmup = 0,
        .groups = {&precision_option_group},
        .validate = validate,
    },
    .variants = variant_names,
    .nvariants = NVARIANTS,
    .variant_mask = &opt_variants,
    .mixed_only_variants = ((1u << NVARIANTS) - 1) & ~1u,
    .precision = precision,
    .tol_mixed_sgd_max = {[SL_F16] = SL_TRAIN_TOL_MIXED_SGD_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_SGD_BF16},
    .tol_mixed_adamw_l2 = {[SL_F16] = TOL_GPT_ADAMW_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_ADAMW_BF16},
    .setup = setup,
    .step = step,
    .weights = weights,
    .free = release,
    .memory_model = memory_model,
    .bytes_model = bytes_model,
    .row = row,
    .check = check,
    .columns = columns,
    .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int precision_on_layer(int argc, char **argv)
{
    int gpt = 0, analytic = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc) gpt = !strcmp(argv[i + 1], "gpt");
        else if (!strncmp(argv[i], "--model=", 8)) gpt = !strcmp(argv[i] + 8, "gpt");
        else if (!strcmp(argv[i], "--preset") || !strncmp(argv[i], "--preset=", 9)) gpt = 1;
        else if (!strcmp(argv[i], "--analytic")) analytic = 1;
    }
    return gpt && !analytic;
}

int precision_layer_main(int argc, char **argv)
{
    precision_opt.loss_weight = 1; /* the GPT's cross-entropy as it is */
    sl_train_opt.baseline = 0;     /* what precision measures is not scaling: --baseline 1 adds it */
    const int rc = sl_train_main(&technique, argc, argv);
    curve_file_close(curve, curve_path);
    return rc;
}
