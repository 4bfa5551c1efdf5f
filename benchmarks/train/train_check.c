/* train_check.c — the check of a training run, outside the timed region: the full weights
 * (gathered where the technique shards them) against the serial reference, computed once per
 * global batch on rank 0 and cached, and every rank's own weights against rank 0's, which
 * must be bit-identical wherever two ranks hold the same elements. */
#include <math.h>
#include <string.h>

#include "train_internal.h"

#define MAX_REFERENCES 8

/* Reference weights (host memory, rank 0) by global batch and precision, and by variant where
 * the technique has its own reference (it may differ between variants; -1 otherwise), with
 * the first, largest and last step's loss (NAN where the technique's own reference does not
 * say) and the steps its loss scaler skipped. */
typedef struct reference {
    int batch, variant;
    sl_dtype dtype;
    float *params;
    double loss, first, peak;
    int peak_step;
    long skipped;
} reference;
static reference refs[MAX_REFERENCES];
static int nrefs;

long sl_train_serial_run(sl_train *t, sl_dtype dt, float *params, double *losses)
{
    const sl_mlp *m = t->m;
    const uint64_t seed = (uint64_t)sl_train_opt.seed;
    /* in the run's dtype its scaler and master choice (technique.precision), else the default */
    sl_loss_scaler sc = t->scaler0;
    int master = t->master;
    if (dt != t->dtype) sl_train_scaler(dt, &sc), master = 1;
    if (sl_mlp_is_gpt(m))
        return sl_train_serial_gpt(m, t->task, &t->optim, dt, &sc, master, t->global_batch, t->nsteps, seed,
                                      params, losses);
    if (dt != SL_F32)
        return sl_train_serial_mixed(m, t->task, &t->optim, dt, &sc, master, t->global_batch, t->nsteps, seed,
                                        params, losses);
    sl_train_serial(m, t->task, &t->optim, t->global_batch, t->nsteps, seed, params, losses);
    return 0;
}

static const reference *reference_in(sl_train *t, sl_dtype dtype)
{
    /* per variant where the technique's reference, or its precision, differs between them (not
     * in f32: its reference is f32 training unscaled, whatever the run's scaler) */
    const int variant = t->tech->reference || (t->tech->precision && dtype != SL_F32) ? t->variant : -1;
    for (int i = 0; i < nrefs; i++)
        if (refs[i].batch == t->global_batch && refs[i].variant == variant && refs[i].dtype == dtype)
            return &refs[i];
    const size_t n = t->nparams;
    float *dev = sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float));
    double *losses = sl_alloc(SL_MEM_OTHER, (size_t)t->nsteps * sizeof(double));
    for (int s = 0; s < t->nsteps; s++) losses[s] = NAN;
    long skipped = 0;
    if (t->tech->reference)
        t->tech->reference(t, dev, losses);
    else if (t->tech->model_params)
        SL_FATAL("%s: a technique with its own model needs its own reference", t->tech->program.name);
    else
        skipped = sl_train_serial_run(t, dtype, dev, losses);
    const double loss = losses[t->nsteps - 1], first = losses[0];
    /* the largest loss; inf for one that is inf or NaN (NAN: the reference does not say) */
    double peak = NAN;
    int peak_step = -1;
    for (int s = 0; s < t->nsteps && !isnan(first); s++) {
        const double l = isfinite(losses[s]) ? losses[s] : INFINITY;
        if (peak_step < 0 || l > peak) peak = l, peak_step = s;
    }
    sl_free(losses);
    float *host = sl_alloc(SL_MEM_OTHER, n * sizeof(float) + 1);
    sl_k_memcpy(t->be, host, dev, n * sizeof(float), SL_K_D2H);
    sl_k_free(t->be, dev);
    if (nrefs == MAX_REFERENCES) { /* forget the oldest */
        sl_free(refs[0].params);
        memmove(refs, refs + 1, (MAX_REFERENCES - 1) * sizeof refs[0]);
        nrefs--;
    }
    refs[nrefs] = (reference){.batch = t->global_batch, .variant = variant, .dtype = dtype,
                              .params = host, .loss = loss, .first = first, .peak = peak,
                              .peak_step = peak_step, .skipped = skipped};
    return &refs[nrefs++];
}

void train_references_free(void)
{
    for (int i = 0; i < nrefs; i++) sl_free(refs[i].params);
    nrefs = 0;
}

/* The full weights on rank 0 (host memory): its own where it holds them all, else gathered by
 * the technique. Collective. */
static void full_weights(sl_train *t, float *full)
{
    size_t first = 0, count = 0;
    const float *w = t->tech->weights(t, &first, &count);
    int whole = first == 0 && count == t->nparams;
    SL_CHECK_MPI(MPI_Bcast(&whole, 1, MPI_INT, 0, t->ctx->comm));
    if (whole) {
        if (t->rank == 0) sl_k_memcpy(t->be, full, w, count * sizeof(float), SL_K_D2H);
    } else if (t->tech->gather_weights) {
        t->tech->gather_weights(t, full);
    } else {
        SL_FATAL("%s: rank 0 holds weights [%zu, %zu) of %zu, not all, and the technique has no "
                 "gather_weights", t->tech->program.name, first, first + count, t->nparams);
    }
}

train_check train_check_run(sl_train *t)
{
    train_check c = {0};
    const size_t n = t->nparams;
    MPI_Comm world = t->ctx->comm;
    float *full = sl_alloc(SL_MEM_OTHER, n * sizeof(float) + 1);
    full_weights(t, full);
    if (t->rank == 0) {
        const reference *r = reference_in(t, t->dtype);
        c.diff = sl_weights_compare(SL_BACKEND_CPU, n, full, r->params);
        c.ref_loss = r->loss;
        c.ref_first_loss = r->first;
        c.ref_peak_loss = r->peak;
        c.ref_peak_step = r->peak_step;
        c.ref_skipped = r->skipped;
        double sq = 0;
        for (size_t i = 0; i < n; i++) sq += (double)r->params[i] * r->params[i];
        c.ref_rms = sqrt(sq / (double)n);
        /* the loss a 16-bit run is read against (the f32 one is cached for the f32 rows) */
        c.f32_loss = t->tech->sums_loss ? reference_in(t, SL_F32)->loss : NAN;
    }

    /* Replicas: every rank's elements against rank 0's full vector. */
    SL_CHECK_MPI(MPI_Bcast(full, (int)n, MPI_FLOAT, 0, world));
    size_t first = 0, count = 0;
    const float *mine = t->tech->weights(t, &first, &count);
    long long mismatched = 0;
    if (count) {
        if (first + count > n) SL_FATAL("weights [%zu, %zu) beyond the model's %zu", first, first + count, n);
        float *host = sl_alloc(SL_MEM_OTHER, count * sizeof(float));
        sl_k_memcpy(t->be, host, mine, count * sizeof(float), SL_K_D2H);
        for (size_t i = 0; i < count; i++) mismatched += memcmp(&host[i], &full[first + i], sizeof(float)) != 0;
        sl_free(host);
    }
    SL_CHECK_MPI(MPI_Allreduce(&mismatched, &c.replica_mismatches, 1, MPI_LONG_LONG, MPI_SUM, world));
    SL_CHECK_MPI(MPI_Bcast(&c.diff, (int)sizeof c.diff, MPI_BYTE, 0, world));
    double figures[6] = {c.ref_loss, c.f32_loss, c.ref_rms, c.ref_first_loss, c.ref_peak_loss, c.ref_peak_step};
    SL_CHECK_MPI(MPI_Bcast(figures, 6, MPI_DOUBLE, 0, world));
    c.ref_loss = figures[0];
    c.f32_loss = figures[1];
    c.ref_rms = figures[2];
    c.ref_first_loss = figures[3];
    c.ref_peak_loss = figures[4];
    c.ref_peak_step = (int)figures[5];
    SL_CHECK_MPI(MPI_Bcast(&c.ref_skipped, 1, MPI_LONG, 0, world));
    sl_free(full);

    /* The technique's own check: the largest error, and the lowest failing rank's reason, on
     * every rank. */
    if (t->tech->check) {
        double error = NAN;
        int failed = t->tech->check(t, &error, c.tech_why, sizeof c.tech_why) != 0, first;
        int mine = failed ? t->ctx->rank : t->ctx->nranks;
        SL_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, world));
        double e = isnan(error) ? -INFINITY : error;
        SL_CHECK_MPI(MPI_Allreduce(&e, &c.tech_error, 1, MPI_DOUBLE, MPI_MAX, world));
        if (c.tech_error == -INFINITY) c.tech_error = NAN;
        c.tech_failed = first < t->ctx->nranks;
        if (c.tech_failed) SL_CHECK_MPI(MPI_Bcast(c.tech_why, (int)sizeof c.tech_why, MPI_CHAR, first, world));
    }
    return c;
}

double train_mixed_tol(const sl_technique *tech, sl_dtype dt, int adamw)
{
    const double own = adamw ? tech->tol_mixed_adamw_l2[dt] : tech->tol_mixed_sgd_max[dt];
    if (own > 0 || (dt != SL_F16 && dt != SL_BF16)) return own;
    if (adamw) return dt == SL_F16 ? SL_TRAIN_TOL_MIXED_ADAMW_F16 : SL_TRAIN_TOL_MIXED_ADAMW_BF16;
    return dt == SL_F16 ? SL_TRAIN_TOL_MIXED_SGD_F16 : SL_TRAIN_TOL_MIXED_SGD_BF16;
}

void train_check_verdict(const sl_train *t, const train_check *c, sl_result *res)
{
    const sl_weight_diff *d = &c->diff;
    int adamw = t->optim.kind == SL_OPTIM_ADAMW;
    double err = adamw ? d->l2_rel : d->max_rel;
    double tol = adamw ? (t->tech->tol_adamw_l2 > 0 ? t->tech->tol_adamw_l2 : SL_TRAIN_TOL_ADAMW_L2)
                       : (t->tech->tol_sgd_max > 0 ? t->tech->tol_sgd_max : SL_TRAIN_TOL_SGD_MAX);
    if (t->dtype == SL_F32 && t->size == 1 && t->tech->exact_one_rank) tol = 0;
    if (t->dtype != SL_F32) /* the technique justifies them; AdamW's in units of lr / rms(w) */
        tol = train_mixed_tol(t->tech, t->dtype, adamw) * (adamw ? t->optim.adamw.lr / c->ref_rms : 1);
    /* A diverged reference fails the row first: its weights say nothing (SL_TRAIN_DIVERGED_RISE). */
    const double lr = adamw ? t->optim.adamw.lr : t->optim.sgd.lr;
    char lower[64] = "lower --lr"; /* and where the rate was not this model's default, say that */
    if (!t->tech->model_params) {
        const double def = sl_optim_default_lr(t->m, t->optim.kind);
        if ((float)def != (float)lr) snprintf(lower, sizeof lower, "lower --lr (this model's default: %.3g)", def);
    }
    if (d->ref_nonfinite)
        sl_result_check(res, SL_CHECK_FAIL, NAN,
                        "diverged: the serial reference's weights are not finite at lr %.3g; %s", lr, lower);
    else if (c->ref_peak_loss > SL_TRAIN_DIVERGED_RISE * c->ref_first_loss)
        sl_result_check(res, SL_CHECK_FAIL, err,
                        "diverged: the serial reference's loss rose from %.3g to %.3g by step %d of %d "
                        "at lr %.3g; %s",
                        c->ref_first_loss, c->ref_peak_loss, c->ref_peak_step + 1, t->nsteps, lr, lower);
    else if (c->tech_failed) /* the technique's own check names the defect more exactly */
        sl_result_check(res, SL_CHECK_FAIL, c->tech_error, "%s", c->tech_why);
    else if (d->nonfinite || !(err <= tol) || c->replica_mismatches)
        sl_result_check(res, SL_CHECK_FAIL, err,
                        "weights differ from the serial reference by %.3g (%s; tolerance %g; "
                        "worst element %zu); %lld elements differ between replicas",
                        err, adamw ? "L2" : "max", tol, d->worst, c->replica_mismatches);
    else
        sl_result_check(res, SL_CHECK_PASS, err, NULL);
}
