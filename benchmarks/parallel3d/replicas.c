/* replicas.c — the data-parallel side of a parallel3d step (state.h): the stage's gradient
 * accumulated over the micro-batches, summed over the D replicas holding the stage (one
 * all-reduce after the last micro-batch; --bucket-mb's buckets started in the last backward; or
 * --zero 1 and 2's reduce-scatter), the optimizer on what this replica owns and, with --zero,
 * the weights all-gathered back into every replica. */
#include "state.h"

/* The step's start: the gradient accumulation zeroed, the replicas' bytes counted from here. */
void p3_grads_zero(sl_train *t, p3 *q)
{
    mg *s = &q->s;
    q->dp_sent0 = sl_comm_bytes_sent(s->dp);
    const double t0 = sl_now();
    sl_k_memset0(t->be, s->grads, q->npad * sizeof(float));
    sl_train_compute_span(t, "zero grads", t0);
}

/* --bucket-mb, in the stage's last backward: layer's gradient is complete; the bucket it ends
 * (its lowest layer) is rounded into the run's dtype and its all-reduce over the replicas
 * started (SL_TEST_CORRUPT=1: the last replica halves it first, as p3_update does without buckets).
 * An implementation that cannot overlap finishes inside the start. */
void p3_gradient_done(sl_train *t, p3 *q, int mb, int layer)
{
    mg *s = &q->s;
    if (!q->nbuckets || mb != q->last_mb) return;
    for (int b = 0; b < q->nbuckets; b++) {
        const p3_bucket *k = &q->buckets[b];
        if (k->lo != layer) continue;
        const double t0 = sl_now();
        void *g = (char *)s->g + k->off * sl_dtype_size(s->dt);
        if (!is_f32(q)) sl_k_cast(t->be, k->count, s->grads + k->off, SL_F32, g, s->dt, NULL);
        if (sl_test_corrupt() && q->d == q->D - 1) sl_k_scale(t->be, s->dt, k->count, g, 0.5);
        sl_k_sync(t->be);
        sl_train_compute_span(t, "round bucket", t0);
        q->bstart[b] = sl_now();
        sl_train_coll_ok(sl_coll_iallreduce(s->dp, g, g, k->count, s->dt, SL_OP_SUM, &q->breq[b]),
                         "sl_coll_iallreduce (replicas)");
        int done = 0;
        sl_train_coll_ok(sl_coll_test(q->breq[b], &done), "sl_coll_test");
        sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - q->bstart[b]);
    }
}

/* A collective of the data-parallel group on the run's dtype, its bytes counted: the
 * all-reduce of the replicas' gradients, or ZeRO's reduce-scatter of them (n elements a
 * replica) and all-gather of the weights. */
enum { DP_ALLREDUCE, DP_REDUCE_SCATTER, DP_ALLGATHER };
static void dp_coll(sl_train *t, p3 *q, int kind, const void *send, void *recv, size_t n)
{
    static const char *const names[] = {"allreduce (replicas)", "reduce-scatter (replicas)", "allgather (replicas)"};
    mg *s = &q->s;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(s->dp);
    const double t0 = sl_now();
    int rc = kind == DP_ALLREDUCE        ? sl_coll_allreduce(s->dp, send, recv, n, s->dt, SL_OP_SUM)
             : kind == DP_REDUCE_SCATTER ? sl_coll_reduce_scatter(s->dp, send, recv, n, s->dt, SL_OP_SUM)
                                         : sl_coll_allgather(s->dp, send, recv, n, s->dt);
    sl_train_coll_ok(rc, names[kind]);
    sl_train_blocking(t, names[kind], t0);
    q->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - b0);
}

/* The elements of block d that are the stage's (the last block ends in padding). */
static size_t own_elems(const p3 *q)
{
    const size_t first = (size_t)q->d * q->S;
    return first >= q->s.np ? 0 : q->s.np - first < q->S ? q->s.np - first : q->S;
}

/* --zero 2 in 16 bits on several replicas: the rank keeps the 16-bit gradient of its block
 * alone (s->g, S elements), so the reduce-scatter's 16-bit vector of the npad elements is
 * written over the f32 accumulation it is rounded from, block by block in order. Block k's
 * 16-bit values take bytes [k·S·es, (k+1)·S·es) (es = 2), f32 elements below (k+1)·S/2: for k >= 1
 * apart from its own f32 block, and in blocks already rounded; block 0 overlaps its own and goes
 * through s->g. The kernels and the copy run in order on the backend's one stream. */
static int send_in_grads(const p3 *q) { return grad16_elems(q) < q->npad && !is_f32(q); }

static void round_in_place(sl_train *t, p3 *q)
{
    mg *s = &q->s;
    const size_t S = q->S, es = sl_dtype_size(s->dt);
    sl_k_cast(t->be, S, s->grads, SL_F32, s->g, s->dt, NULL);
    for (int k = 1; k < q->D; k++)
        sl_k_cast(t->be, S, s->grads + (size_t)k * S, SL_F32, (char *)s->grads + (size_t)k * S * es, s->dt, NULL);
    sl_k_memcpy(t->be, s->grads, s->g, S * es, SL_K_D2D);
}

/* After the last micro-batch: the gradient rounded into the run's dtype (16 bits, unless the
 * buckets did), the replicas' gradients summed and the optimizer stepped: on the whole vector
 * after an all-reduce (--zero 0), or on block d after a reduce-scatter, the blocks all-gathered
 * back into every replica's weights (--zero 1 and 2; not on a step every rank skipped: nothing
 * changed). In 16 bits the overflow flag is OR-ed over every rank: the stages, slices and blocks
 * are one model. --zero 2 reduce-scatters the same 16-bit vector as --zero 1 (send_in_grads), into
 * the block-sized s->g, and the optimizer reads its f32 values from the accumulation's start. */
void p3_update(sl_train *t, p3 *q)
{
    mg *s = &q->s;
    const int in_grads = send_in_grads(q);
    void *send = in_grads ? (void *)s->grads : s->g; /* the reduce-scatter's (all-reduce's) 16-bit vector */
    if (!is_f32(q) && !q->nbuckets) { /* the gradient as the serial run keeps it: rounded into dt once */
        const double t0 = sl_now();
        if (in_grads) round_in_place(t, q);
        else sl_k_cast(t->be, q->npad, s->grads, SL_F32, s->g, s->dt, NULL);
        sl_train_compute_span(t, "round grads", t0);
    }
    /* SL_TEST_CORRUPT=1 (the tests of the check): the last replica halves its gradients before
     * the sum (an average taken where a sum is due), a defect the serial reference does not share */
    if (sl_test_corrupt() && q->D > 1 && q->d == q->D - 1 && !q->nbuckets) sl_k_scale(t->be, s->dt, s->np, send, 0.5);
    const size_t es = sl_dtype_size(s->dt), off = q->zero ? (size_t)q->d * q->S : 0;
    const size_t n = q->zero ? own_elems(q) : s->np;
    void *g = in_grads ? s->g : (char *)s->g + off * es, *w = (char *)s->w + off * es;
    float *master = is_f32(q) || !q->zero ? s->params + off : s->params;
    float *g32 = in_grads ? s->grads : s->grads + off; /* the f32 gradient the optimizer reads */
    if (q->nbuckets) { /* the buckets' all-reduces, started in the last backward: waited for */
        const double t0 = sl_now();
        double span = 0, reach = 0; /* the time some bucket was in flight (they start in order) */
        for (int b = 0; b < q->nbuckets; b++) {
            sl_train_coll_ok(sl_coll_wait(q->breq[b]), "sl_coll_wait (replicas)");
            q->breq[b] = NULL;
            q->bdone[b] = sl_now();
            const double from = q->bstart[b] > reach ? q->bstart[b] : reach;
            if (q->bdone[b] > from) span += q->bdone[b] - from;
            reach = q->bdone[b] > reach ? q->bdone[b] : reach;
        }
        sl_train_span(t, SL_PHASE_EXPOSED, "wait for buckets (replicas)", t0, sl_now());
        sl_train_record(t, SL_PHASE_COMM, span);
        q->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - q->dp_sent0);
    } else if (q->D > 1) {
        if (q->zero) dp_coll(t, q, DP_REDUCE_SCATTER, send, g, q->S);
        else dp_coll(t, q, DP_ALLREDUCE, s->g, s->g, s->np);
    }
    /* f32: the optimizer on the weights themselves; 16 bits: unscale, the decision over every
     * rank, the optimizer on the f32 master and the weights cast from it */
    const int stepped = is_f32(q) ? sl_train_mixed_step(t, &s->ms, NULL, s->grads + off, s->params + off, s->optim,
                                                        NULL, n)
                                  : sl_train_mixed_step(t, &s->ms, g, g32, master, s->optim, w, n);
    if (q->zero && q->D > 1 && stepped) dp_coll(t, q, DP_ALLGATHER, w, s->w, q->S);
}
