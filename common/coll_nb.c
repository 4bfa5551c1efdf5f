/* coll_nb.c — non-blocking all-reduce (start, test, wait), for overlapping gradient
 * communication with the backward pass.
 *
 * mpi: MPI_Iallreduce on the communicator's second duplicate. nccl: enqueued on the stream.
 * ring on host buffers: a state machine, one ring step per state: a step's send and receive
 * are posted together; when both have completed (noticed by sl_coll_test or sl_coll_wait) the
 * received chunk is reduced and the next step is posted. The ring thus advances whenever the
 * caller tests, which a training loop does between layers. Everything else runs to completion
 * at the start (see sl_coll.h). */
#include <stdlib.h>

#include "coll_internal.h"

enum { REQ_DONE, REQ_MPI, REQ_NCCL, REQ_RING };

struct sl_coll_req {
    sl_comm *c;
    int kind;
    const void *s;
    void *r;
    size_t n;
    sl_dtype t;
    sl_redop op;
    MPI_Request q[2];   /* MPI: q[0]; ring: the current step's send and receive */
    int step, tag;      /* ring: steps 0..n-2 reduce-scatter, n-1..2n-3 all-gather */
    void *scratch;      /* ring: one chunk, where a reduce-scatter step receives */
};

int sl_coll_iallreduce_overlaps(const sl_comm *c)
{
    if (c->impl == SL_COLL_MPI) return c->space == SL_MEM_HOST || c->mpi_device_ok;
    if (c->impl == SL_COLL_NCCL) return 1;
    return c->impl == SL_COLL_RING && c->space == SL_MEM_HOST;
}

/* The chunks of ring step k: the one sent and the one received (as in coll_ring.c). */
static void ring_chunks(const sl_coll_req *q, int k, int *send, int *recv)
{
    int n = q->c->size, r = q->c->rank;
    if (k < n - 1) { /* reduce-scatter */
        *send = slc_mod(r - k - 1, n);
        *recv = slc_mod(r - k - 2, n);
    } else {         /* all-gather */
        int s = k - (n - 1);
        *send = slc_mod(r - s, n);
        *recv = slc_mod(r - s - 1, n);
    }
}

static void ring_post(sl_coll_req *q)
{
    sl_comm *c = q->c;
    int n = c->size, si, ri;
    ring_chunks(q, q->step, &si, &ri);
    size_t es = sl_dtype_size(q->t);
    const void *src = q->step == 0 ? q->s : q->r; /* step 0 sends the own contribution */
    void *into = q->step < n - 1 ? q->scratch : slc_at(q->r, slc_chunk_off(q->n, n, ri), q->t);
    int right = (c->rank + 1) % n, left = (c->rank + n - 1) % n;
    SL_CHECK_MPI(MPI_Irecv(into, (int)(slc_chunk_len(q->n, n, ri) * es), MPI_BYTE, left, q->tag,
                           c->nb_comm, &q->q[1]));
    SL_CHECK_MPI(MPI_Isend(slc_at(src, slc_chunk_off(q->n, n, si), q->t),
                           (int)(slc_chunk_len(q->n, n, si) * es), MPI_BYTE, right, q->tag,
                           c->nb_comm, &q->q[0]));
}

/* The current step has completed: reduce what arrived, then post the next step. */
static void ring_advance(sl_coll_req *q)
{
    sl_comm *c = q->c;
    int n = c->size, si, ri;
    ring_chunks(q, q->step, &si, &ri);
    if (q->step < n - 1) {
        size_t off = slc_chunk_off(q->n, n, ri), len = slc_chunk_len(q->n, n, ri);
        void *dst = slc_at(q->r, off, q->t);
        sl_reduce_host(dst, slc_at(q->s, off, q->t), q->scratch, len, q->t, q->op);
        if (q->step == n - 2) slc_finish_avg(c, dst, len, q->t, q->op); /* own chunk done */
    }
    if (++q->step < 2 * (n - 1)) ring_post(q);
    else q->kind = REQ_DONE;
}

int sl_coll_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                       sl_coll_req **req)
{
    *req = NULL;
    int rc = slc_check_allreduce(c, s, r, n, t, op);
    if (rc) return rc;
    sl_coll_req *q = calloc(1, sizeof *q);
    if (!q) SL_FATAL("out of memory for a request");
    *q = (sl_coll_req){.c = c, .kind = REQ_DONE, .s = s, .r = r, .n = n, .t = t, .op = op,
                       .q = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}};
    /* Operations in flight at once are told apart by tag; every rank starts them in the same
     * order, so the sequence number agrees. */
    q->tag = 1 + (int)(c->nb_seq++ % 30000u);
    *req = q;
    if (n == 0) return SL_COLL_OK;
    if (!sl_coll_iallreduce_overlaps(c)) return sl_coll_allreduce(c, s, r, n, t, op);
    if (c->impl == SL_COLL_MPI) {
        SL_CHECK_MPI(MPI_Iallreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, slc_mpi_type(c, t),
                                    slc_mpi_op(c, t, op), c->nb_comm, &q->q[0]));
        q->kind = REQ_MPI;
    } else if (c->impl == SL_COLL_NCCL) {
        sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, (int)op);
        q->kind = REQ_NCCL;
    } else if (c->size == 1) {
        slc_copy(c, r, s, n * sl_dtype_size(t));
    } else {
        q->scratch = sl_alloc(SL_MEM_COMM, slc_chunk_len(n, c->size, 0) * sl_dtype_size(t));
        q->kind = REQ_RING;
        ring_post(q);
    }
    return SL_COLL_OK;
}

int sl_coll_test(sl_coll_req *q, int *done)
{
    int flag = 0;
    switch (q->kind) {
    case REQ_MPI:
        SL_CHECK_MPI(MPI_Test(&q->q[0], &flag, MPI_STATUS_IGNORE));
        if (flag) {
            slc_finish_avg(q->c, q->r, q->n, q->t, q->op);
            q->kind = REQ_DONE;
        }
        break;
    case REQ_NCCL:
        if (sl_cdev_stream_done(q->c->stream)) q->kind = REQ_DONE;
        break;
    case REQ_RING:
        /* Advance as many steps as have completed. */
        while (q->kind == REQ_RING) {
            SL_CHECK_MPI(MPI_Testall(2, q->q, &flag, MPI_STATUSES_IGNORE));
            if (!flag) break;
            ring_advance(q);
        }
        break;
    default: break;
    }
    *done = q->kind == REQ_DONE;
    return SL_COLL_OK;
}

int sl_coll_wait(sl_coll_req *q)
{
    if (!q) return SL_COLL_EINVAL;
    switch (q->kind) {
    case REQ_MPI:
        SL_CHECK_MPI(MPI_Wait(&q->q[0], MPI_STATUS_IGNORE));
        slc_finish_avg(q->c, q->r, q->n, q->t, q->op);
        break;
    case REQ_NCCL: sl_cdev_stream_sync(q->c->stream); break;
    case REQ_RING:
        while (q->kind == REQ_RING) {
            SL_CHECK_MPI(MPI_Waitall(2, q->q, MPI_STATUSES_IGNORE));
            ring_advance(q);
        }
        break;
    default: break;
    }
    sl_free(q->scratch);
    free(q);
    return SL_COLL_OK;
}
