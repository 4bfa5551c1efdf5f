/* coll_nb.c — non-blocking all-reduce (start, test, wait), for overlapping gradient
 * communication with the backward pass.
 *
 * mpi: MPI_Iallreduce on the communicator's second duplicate. nccl: enqueued on the stream.
 * ring, rhd, tree and dbtree on host buffers: a schedule engine, in the manner of libNBC. At the start
 * the algorithm writes this rank's steps (slc_ring_schedule, ...: each one exchange with a
 * peer); the engine posts a step's receive and send together, and when both have completed
 * (noticed by sl_coll_test or sl_coll_wait) it reduces what arrived and posts the next step.
 * The collective thus advances whenever the caller tests, which a training loop does between
 * layers. Device buffers run to completion at the start (see sl_coll.h). */
#include <limits.h>
#include <stdlib.h>

#include "coll_internal.h"

enum { REQ_DONE, REQ_MPI, REQ_NCCL, REQ_SCHED };

struct sl_coll_req {
    sl_comm *c;
    int kind;
    const void *s;
    void *r;
    size_t n;
    sl_dtype t;
    sl_redop op;
    MPI_Request q[2];   /* MPI: q[0]; schedule: the current step's send and receive */
    slc_step *steps;
    int nsteps, step, tag;
    void *scratch;      /* where a reducing step receives */
};

static int has_schedule(const sl_comm *c)
{
    return c->impl == SL_COLL_RING || c->impl == SL_COLL_RHD || c->impl == SL_COLL_TREE ||
           c->impl == SL_COLL_DBTREE;
}

int sl_coll_iallreduce_overlaps(const sl_comm *c)
{
    if (c->impl == SL_COLL_MPI) return c->space == SL_MEM_HOST || c->mpi_device_ok;
    if (c->impl == SL_COLL_NCCL) return 1;
    return has_schedule(c) && c->space == SL_MEM_HOST;
}

static const void *buf_of(const sl_coll_req *q, int which) { return which == SLC_BUF_S ? q->s : q->r; }

static void post_step(sl_coll_req *q)
{
    const slc_step *st = &q->steps[q->step];
    size_t es = sl_dtype_size(q->t);
    MPI_Comm comm = q->c->nb_comm;
    q->q[0] = q->q[1] = MPI_REQUEST_NULL;
    if (st->recv_len && st->from != MPI_PROC_NULL) {
        void *into = st->reduce ? q->scratch : slc_at(q->r, st->recv_off, q->t);
        SL_CHECK_MPI(MPI_Irecv(into, (int)(st->recv_len * es), MPI_BYTE, st->from, q->tag, comm,
                               &q->q[1]));
    }
    if (st->send_len && st->to != MPI_PROC_NULL) {
        q->c->bytes_sent += st->send_len * es;
        SL_CHECK_MPI(MPI_Isend(slc_at(buf_of(q, st->send_buf), st->send_off, q->t),
                               (int)(st->send_len * es), MPI_BYTE, st->to, q->tag, comm, &q->q[0]));
    }
}

/* The current step's messages have completed: reduce what arrived, post the next step. */
static void advance(sl_coll_req *q)
{
    const slc_step *st = &q->steps[q->step];
    if (st->reduce && st->recv_len && st->from != MPI_PROC_NULL)
        sl_reduce_host(slc_at(q->r, st->recv_off, q->t),
                       slc_at(buf_of(q, st->a_buf), st->recv_off, q->t), q->scratch, st->recv_len,
                       q->t, q->op);
    if (st->avg_len) slc_finish_avg(q->c, slc_at(q->r, st->avg_off, q->t), st->avg_len, q->t, q->op);
    if (++q->step < q->nsteps) post_step(q);
    else q->kind = REQ_DONE;
}

static void start_schedule(sl_coll_req *q)
{
    sl_comm *c = q->c;
    q->steps = malloc((size_t)(2 * c->size + 64) * sizeof *q->steps);
    if (!q->steps) SL_FATAL("out of memory for a schedule");
    switch (c->impl) {
    case SL_COLL_RING: q->nsteps = slc_ring_schedule(c, q->n, q->steps); break;
    case SL_COLL_RHD: q->nsteps = slc_rhd_schedule(c, q->n, q->steps); break;
    case SL_COLL_TREE: q->nsteps = slc_tree_schedule(c, q->n, q->steps); break;
    default: q->nsteps = slc_dbtree_schedule(c, q->n, q->steps); break;
    }
    size_t most = 0;
    for (int i = 0; i < q->nsteps; i++)
        if (q->steps[i].reduce && q->steps[i].recv_len > most) most = q->steps[i].recv_len;
    q->scratch = sl_alloc(SL_MEM_COMM, most * sl_dtype_size(q->t));
    q->kind = REQ_SCHED;
    if (q->nsteps) post_step(q);
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
        sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
        q->kind = REQ_NCCL; /* avg: divided once the sum is done (test, wait) */
    } else if (c->size == 1) {
        slc_copy(c, r, s, n * sl_dtype_size(t));
    } else if (n > INT_MAX / sl_dtype_size(t)) {
        /* A step moves up to the whole vector in one message, whose size MPI counts in int. */
        return sl_coll_allreduce(c, s, r, n, t, op);
    } else {
        start_schedule(q);
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
        if (sl_cdev_stream_done(q->c->stream)) {
            slc_finish_avg(q->c, q->r, q->n, q->t, q->op);
            q->kind = REQ_DONE;
        }
        break;
    case REQ_SCHED:
        /* Advance through as many steps as have completed. */
        while (q->kind == REQ_SCHED) {
            SL_CHECK_MPI(MPI_Testall(2, q->q, &flag, MPI_STATUSES_IGNORE));
            if (!flag) break;
            advance(q);
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
    case REQ_NCCL:
        sl_cdev_stream_sync(q->c->stream);
        slc_finish_avg(q->c, q->r, q->n, q->t, q->op);
        break;
    case REQ_SCHED:
        while (q->kind == REQ_SCHED) {
            SL_CHECK_MPI(MPI_Waitall(2, q->q, MPI_STATUSES_IGNORE));
            advance(q);
        }
        break;
    default: break;
    }
    sl_free(q->scratch);
    free(q->steps);
    free(q);
    return SL_COLL_OK;
}
