/* test_train.c — a small technique driven through the training layer, run by
 * t/integration/train.t on 1-3 ranks. Each variant exercises one path of the driver:
 *
 *   replicated  every rank trains its slice and the gradient is all-reduced (the plain case:
 *               must pass the check against the serial reference)
 *   sharded     each rank reports only its shard of the weights and the driver gathers them
 *               (gather_weights); forward and backward fetch each layer's parameters through
 *               the `before` hook (as ZeRO-3 does), counted in the row (must pass)
 *   offbyone    trains on samples shifted by one: the check must FAIL (exit 1)
 *   drift       rank 1 nudges one weight by one ulp: within the tolerance of the reference,
 *               but replicas differ, so the check must FAIL (exit 1)
 */
#include <math.h>
#include <stdlib.h>

#include "sl_train.h"

enum { V_REPLICATED, V_SHARDED, V_OFFBYONE, V_DRIFT, NVARIANTS };
static const char *const names[NVARIANTS] = {"replicated", "sharded", "offbyone", "drift"};
static unsigned opt_variants = (1u << V_REPLICATED) | (1u << V_SHARDED);
static const sl_opt opts[] = {
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, "replicated|sharded|offbyone|drift", 0,
     "variants (default replicated,sharded)"},
    {0},
};

typedef struct replica {
    sl_replica rep;
    long long hook_calls;
} replica;

static void setup(sl_train *t)
{
    replica *r = calloc(1, sizeof *r);
    if (!r) SL_FATAL("out of memory");
    sl_replica_alloc(t, t->hi - t->lo, &r->rep);
    t->state = r;
}

static const void *fetch_layer(sl_train *t, int layer, int backward)
{
    (void)backward;
    replica *r = t->state;
    r->hook_calls++;
    return (const float *)r->rep.params + t->m->w_off[layer];
}
static const sl_layer_hooks fetch_hooks = {.before = fetch_layer};

static void step(sl_train *t)
{
    replica *r = t->state;
    const size_t n = t->m->nparams;
    const sl_layer_hooks *h = t->variant == V_SHARDED ? &fetch_hooks : NULL;
    sl_k_memset0(t->be, r->rep.grads, n * sizeof(float));
    if (t->hi > t->lo) sl_replica_forward_backward(t, &r->rep, t->lo + (t->variant == V_OFFBYONE), t->hi - t->lo, h);
    double t0 = sl_now();
    sl_train_coll_ok(sl_coll_allreduce(t->comm, r->rep.grads, r->rep.grads, n, SL_F32, SL_OP_SUM), "allreduce");
    sl_train_span(t, SL_PHASE_COMM, "allreduce", t0, sl_now());
    sl_replica_update(t, &r->rep, 0, n, r->rep.optim);
    if (t->variant == V_DRIFT && t->rank == 1 && t->step == t->nsteps - 1) {
        float w;
        sl_k_memcpy(t->be, &w, r->rep.params, sizeof w, SL_K_D2H);
        w = nextafterf(w, INFINITY);
        sl_k_memcpy(t->be, r->rep.params, &w, sizeof w, SL_K_H2D);
    }
}

static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    replica *r = t->state;
    size_t lo = 0, hi = t->m->nparams;
    if (t->variant == V_SHARDED) sl_share(t->m->nparams, t->size, t->rank, &lo, &hi);
    *first = lo;
    *count = hi - lo;
    return (const float *)r->rep.params + lo;
}

/* The shards, gathered to rank 0 as a sharded technique would (the driver calls this only
 * when rank 0's weights are not the whole vector: the sharded variant). */
static void gather_weights(sl_train *t, float *full)
{
    size_t first, count;
    const float *mine = weights(t, &first, &count);
    float *host = sl_alloc(SL_MEM_OTHER, count * sizeof(float) + 1);
    sl_k_memcpy(t->be, host, mine, count * sizeof(float), SL_K_D2H);
    int *counts = calloc((size_t)t->size, sizeof(int)), *displs = calloc((size_t)t->size, sizeof(int));
    for (int p = 0; p < t->size; p++) {
        size_t lo, hi;
        sl_share(t->m->nparams, t->size, p, &lo, &hi);
        counts[p] = (int)(hi - lo);
        displs[p] = (int)lo;
    }
    SL_CHECK_MPI(MPI_Gatherv(host, (int)count, MPI_FLOAT, full, counts, displs, MPI_FLOAT, 0, t->ctx->comm));
    free(counts);
    free(displs);
    sl_free(host);
}

static void release(sl_train *t)
{
    replica *r = t->state;
    sl_replica_free(t, &r->rep);
    free(r);
}

static double bytes_model(const sl_train *t)
{
    return t->size > 1 ? 2.0 * (t->size - 1) / t->size * (double)t->m->nparams * sizeof(float) : 0;
}

static void row(sl_train *t, sl_result *res)
{
    replica *r = t->state;
    sl_result_metric(res, "hook_calls", (double)r->hook_calls, "calls");
}

static const sl_column columns[] = {SL_TRAIN_COLUMNS_RUN, SL_TRAIN_COLUMNS_STEP, SL_TRAIN_COLUMNS_CHECK};

static const sl_technique tech = {
    .program = {.name = "test_train", .summary = "a small technique through the training layer",
                .uses = SL_USES_BACKEND | SL_USES_COLL, .colls = (1u << SL_COLL_MPI) | (1u << SL_COLL_RING),
                .default_coll = SL_COLL_MPI, .default_iters = 3, .default_warmup = 1, .extra = opts},
    .variants = names, .nvariants = NVARIANTS, .variant_mask = &opt_variants,
    .setup = setup, .step = step, .weights = weights, .gather_weights = gather_weights, .free = release,
    .bytes_model = bytes_model, .row = row,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    sl_train_opt.layers = 3; /* a technique's own defaults: shown by --help */
    sl_train_opt.width = 24;
    sl_train_opt.inputs = 8;
    sl_train_opt.outputs = 4;
    sl_train_opt.batch = 5;
    return sl_train_main(&tech, argc, argv);
}
