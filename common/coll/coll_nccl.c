/* coll_nccl.c — setting up the NCCL communicator of an sl_comm: rank 0 creates the unique id,
 * MPI broadcasts it, every rank joins. The NCCL calls themselves are in common/coll/cuda/coll_nccl.cu
 * (stubs that say "NCCL not built" in common/coll/nocuda/ and in CUDA builds without NCCL). */
#include "coll_internal.h"

int slc_nccl_init(sl_comm *c)
{
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

/* The blocking collectives: enqueued on the communicator's stream, waited for, then the avg
 * division (NCCL was asked for a sum). */
int slc_nccl_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    sl_cdev_stream_sync(c->stream);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op)
{
    sl_nccl_reduce_scatter(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
    sl_cdev_stream_sync(c->stream);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    sl_nccl_allgather(c->nccl, c->stream, s, r, n, t);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    sl_nccl_broadcast(c->nccl, c->stream, buf, n, t, root);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                    int root)
{
    sl_nccl_reduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op), root);
    sl_cdev_stream_sync(c->stream);
    if (c->rank == root) slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_nccl_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer)
{
    c->bytes_sent += n * sl_dtype_size(t);
    sl_nccl_send(c->nccl, c->stream, buf, n, t, peer);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}

int slc_nccl_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer)
{
    sl_nccl_recv(c->nccl, c->stream, buf, n, t, peer);
    sl_cdev_stream_sync(c->stream);
    return SL_COLL_OK;
}
