/* train_check.c — the check of a training run, outside the timed region: the full weights
 * (gathered where the technique shards them) against the serial reference, computed once per
 * global batch on rank 0 and cached, and every rank's own weights against rank 0's, which
 * must be bit-identical wherever two ranks hold the same elements. */
#include <math.h>
#include <string.h>

#include "train_internal.h"

#define MAX_REFERENCES 8

/* Reference weights (host memory, rank 0) by global batch, and by variant where the technique
 * has its own reference (it may differ between variants; -1 otherwise). */
static struct {
    int batch, variant;
    float *params;
} refs[MAX_REFERENCES];
static int nrefs;

static const float *reference_for(sl_train *t)
{
    const int variant = t->tech->reference ? t->variant : -1;
    for (int i = 0; i < nrefs; i++)
        if (refs[i].batch == t->global_batch && refs[i].variant == variant) return refs[i].params;
    const sl_mlp *m = t->m;
    float *dev = sl_k_malloc(t->be, SL_MEM_OTHER, m->nparams * sizeof(float));
    if (t->tech->reference)
        t->tech->reference(t, dev);
    else
        sl_train_serial(m, t->task, &t->optim, t->global_batch, t->nsteps,
                        (uint64_t)sl_train_opt.seed, dev, NULL);
    float *host = sl_alloc(SL_MEM_OTHER, m->nparams * sizeof(float) + 1);
    sl_k_memcpy(t->be, host, dev, m->nparams * sizeof(float), SL_K_D2H);
    sl_k_free(t->be, dev);
    if (nrefs == MAX_REFERENCES) { /* forget the oldest */
        sl_free(refs[0].params);
        memmove(refs, refs + 1, (MAX_REFERENCES - 1) * sizeof refs[0]);
        nrefs--;
    }
    refs[nrefs].batch = t->global_batch;
    refs[nrefs].variant = variant;
    refs[nrefs].params = host;
    nrefs++;
    return host;
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
    int whole = first == 0 && count == t->m->nparams;
    SL_CHECK_MPI(MPI_Bcast(&whole, 1, MPI_INT, 0, t->ctx->comm));
    if (whole) {
        if (t->rank == 0) sl_k_memcpy(t->be, full, w, count * sizeof(float), SL_K_D2H);
    } else if (t->tech->gather_weights) {
        t->tech->gather_weights(t, full);
    } else {
        SL_FATAL("%s: rank 0 holds weights [%zu, %zu) of %zu, not all, and the technique has no "
                 "gather_weights", t->tech->program.name, first, first + count, t->m->nparams);
    }
}

train_check train_check_run(sl_train *t)
{
    train_check c = {0};
    const size_t n = t->m->nparams;
    MPI_Comm world = t->ctx->comm;
    float *full = sl_alloc(SL_MEM_OTHER, n * sizeof(float) + 1);
    full_weights(t, full);
    if (t->rank == 0) c.diff = sl_weights_compare(SL_BACKEND_CPU, n, full, reference_for(t));

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
    sl_free(full);
    if (t->tech->check) {
        c.own_failed = t->tech->check(t, c.own_why, sizeof c.own_why) != 0;
        SL_CHECK_MPI(MPI_Bcast(&c.own_failed, 1, MPI_INT, 0, world));
        SL_CHECK_MPI(MPI_Bcast(c.own_why, (int)sizeof c.own_why, MPI_CHAR, 0, world));
    }
    return c;
}

void train_check_verdict(const sl_train *t, const train_check *c, sl_result *res)
{
    const sl_weight_diff *d = &c->diff;
    int adamw = t->optim.kind == SL_OPTIM_ADAMW;
    double err = adamw ? d->l2_rel : d->max_rel;
    double tol = adamw ? (t->tech->tol_adamw_l2 > 0 ? t->tech->tol_adamw_l2 : SL_TRAIN_TOL_ADAMW_L2)
                       : (t->tech->tol_sgd_max > 0 ? t->tech->tol_sgd_max : SL_TRAIN_TOL_SGD_MAX);
    if (d->ref_nonfinite)
        sl_result_check(res, SL_CHECK_FAIL, NAN,
                        "the serial reference itself diverged (non-finite weights): lower --lr");
    else if (d->nonfinite || !(err <= tol) || c->replica_mismatches)
        sl_result_check(res, SL_CHECK_FAIL, err,
                        "weights differ from the serial reference by %.3g (%s; tolerance %g; "
                        "worst element %zu); %lld elements differ between replicas",
                        err, adamw ? "L2" : "max", tol, d->worst, c->replica_mismatches);
    else if (c->own_failed)
        sl_result_check(res, SL_CHECK_FAIL, err, "%s", c->own_why);
    else
        sl_result_check(res, SL_CHECK_PASS, err, NULL);
}
