/* coll_nccl.c — setting up the NCCL communicator of an sl_comm: rank 0 creates the unique id,
 * MPI broadcasts it, every rank joins. The NCCL calls themselves are in common/coll/cuda/coll_nccl.cu
 * (stubs that say "NCCL not built" in common/coll/nocuda/ and in CUDA builds without NCCL). */
#include <stdlib.h>

#include "coll_internal.h"

/* NCCL refuses two ranks of one communicator on the same GPU (ncclCommInitRank fails with
 * "invalid usage" and a warning only NCCL_DEBUG shows): 1 when any node of c has two ranks
 * whose current device is the same, the same answer on every rank. */
static int shares_gpu(sl_comm *c)
{
    MPI_Comm node;
    int nn, dev = sl_cdev_current(), dup = 0;
    SL_CHECK_MPI(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &nn);
    int *devs = malloc((size_t)nn * sizeof *devs);
    if (!devs) SL_FATAL("out of memory for %d device numbers", nn);
    SL_CHECK_MPI(MPI_Allgather(&dev, 1, MPI_INT, devs, 1, MPI_INT, node));
    for (int i = 0; i < nn && !dup; i++)
        for (int j = i + 1; j < nn && !dup; j++) dup = devs[i] == devs[j];
    free(devs);
    MPI_Comm_free(&node);
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &dup, 1, MPI_INT, MPI_MAX, c->comm));
    return dup;
}

int slc_nccl_init(sl_comm *c)
{
    if (shares_gpu(c))
        SL_FATAL("nccl: ranks of one node share a GPU (%d visible per node); NCCL needs one GPU "
                 "per rank: run at most that many ranks per node, or use -C mpi",
                 sl_cdev_count());
    unsigned char id[512];
    size_t len = sl_nccl_id_bytes();
    if (len > sizeof id) SL_FATAL("NCCL unique id of %zu bytes does not fit", len);
    if (c->rank == 0) sl_nccl_get_id(id);
    SL_CHECK_MPI(MPI_Bcast(id, (int)len, MPI_BYTE, 0, c->comm));
    c->nccl = sl_nccl_comm_init(c->size, id, c->rank);
    return SL_COLL_OK;
}

/* The op NCCL is asked for: avg as a sum, divided afterwards. NCCL's own ncclAvg multiplies
 * each contribution by 1/n before adding for floating types, which rounds differently from
 * the one division every other implementation does; the suite keeps one definition. */
int slc_nccl_op(sl_redop op) { return op == SL_OP_AVG ? (int)SL_OP_SUM : (int)op; }

void slc_nccl_free(sl_comm *c)
{
    if (c->nccl) sl_nccl_comm_destroy(c->nccl);
    c->nccl = NULL;
}

/* The blocking calls flush the isend/irecv held back first (their order on the stream is the
 * order of the calls). The blocking collectives: enqueued on the communicator's stream, waited for, then the avg
 * division (NCCL was asked for a sum). */
int slc_nccl_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    slc_nccl_flush(c);
    sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    sl_cdev_stream_sync(c->stream);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op)
{
    slc_nccl_flush(c);
    sl_nccl_reduce_scatter(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    sl_cdev_stream_sync(c->stream);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    slc_nccl_flush(c);
    sl_nccl_allgather(c->nccl, c->stream, s, r, n, t);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    slc_nccl_flush(c);
    sl_nccl_broadcast(c->nccl, c->stream, buf, n, t, root);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                    int root)
{
    slc_nccl_flush(c);
    sl_nccl_reduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op), root);
    sl_cdev_stream_sync(c->stream);
    if (c->rank == root) slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer)
{
    slc_nccl_flush(c);
    c->bytes_sent += n * sl_dtype_size(t);
    sl_nccl_send(c->nccl, c->stream, buf, n, t, peer);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer)
{
    slc_nccl_flush(c);
    sl_nccl_recv(c->nccl, c->stream, buf, n, t, peer);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

/* ---- non-blocking: enqueued, with an event after each operation ------------------------- */

static int enqueued(sl_comm *c, struct sl_coll_req *q)
{
    q->event = sl_cdev_event_record(c->stream);
    q->kind = SLC_REQ_NCCL;
    return SL_COLL_OK;
}

int slc_nccl_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                        struct sl_coll_req *q)
{
    slc_nccl_flush(c);
    sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    q->avg_buf = r; /* avg: divided once the sum is done (test, wait) */
    q->avg_n = n;
    return enqueued(c, q);
}

int slc_nccl_ireduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                             sl_redop op, struct sl_coll_req *q)
{
    slc_nccl_flush(c);
    sl_nccl_reduce_scatter(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    q->avg_buf = r;
    q->avg_n = n;
    return enqueued(c, q);
}

int slc_nccl_iallgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                        struct sl_coll_req *q)
{
    slc_nccl_flush(c);
    sl_nccl_allgather(c->nccl, c->stream, s, r, n, t);
    return enqueued(c, q);
}

/* isend/irecv wait in c->nccl_pending (in the order they were started) for the next flush. */
int slc_nccl_ip2p(sl_comm *c, int send, const void *buf, size_t n, sl_dtype t, int peer,
                  struct sl_coll_req *q)
{
    q->kind = SLC_REQ_NCCL_PENDING;
    q->p2p_send = send;
    q->p2p_buf = buf;
    q->p2p_n = n;
    q->p2p_peer = peer;
    if (send) c->bytes_sent += n * sl_dtype_size(t);
    struct sl_coll_req **tail = &c->nccl_pending;
    while (*tail) tail = &(*tail)->pnext;
    *tail = q;
    return SL_COLL_OK;
}

void slc_nccl_flush(sl_comm *c)
{
    if (!c->nccl_pending) return;
    sl_nccl_group_start();
    for (struct sl_coll_req *q = c->nccl_pending; q; q = q->pnext) {
        if (q->p2p_send)
            sl_nccl_send(c->nccl, c->stream, q->p2p_buf, q->p2p_n, q->t, q->p2p_peer);
        else
            sl_nccl_recv(c->nccl, c->stream, (void *)(uintptr_t)q->p2p_buf, q->p2p_n, q->t,
                         q->p2p_peer);
    }
    sl_nccl_group_end();
    struct sl_coll_req *q = c->nccl_pending;
    c->nccl_pending = NULL;
    while (q) {
        struct sl_coll_req *next = q->pnext;
        q->pnext = NULL;
        enqueued(c, q);
        q = next;
    }
}
