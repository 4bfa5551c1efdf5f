/* coll_comm.c — the front door of the communication layer: each call of sl_coll.h checks its
 * arguments (coll_local.c) and is dispatched to the implementation the communicator carries.
 * Nothing else happens here: the algorithms live in one file each (coll_mpi.c, coll_ring.c,
 * coll_tree.c, ...), communicators are made in coll_setup.c. */
#include "coll_internal.h"

/* One rank: every collective is a copy (and avg divides by one). */
static int single_rank_copy(sl_comm *c, void *dst, const void *src, size_t n, sl_dtype t)
{
    slc_copy(c, dst, src, n * sl_dtype_size(t));
    return SL_COLL_OK;
}

/* ---- the blocking collectives, once the arguments are valid and count > 0 -------------- */

static int run_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_allreduce(c, s, r, n, t, op);
    case SL_COLL_NCCL: return slc_nccl_allreduce(c, s, r, n, t, op);
    default: break;
    }
    if (c->size == 1) return single_rank_copy(c, r, s, n, t);
    switch (c->impl) {
    case SL_COLL_RING: return slc_ring_allreduce(c, s, r, n, t, op);
    case SL_COLL_TREE: return slc_tree_allreduce(c, s, r, n, t, op);
    case SL_COLL_DBTREE: return slc_dbtree_allreduce(c, s, r, n, t, op);
    case SL_COLL_RHD: return slc_rhd_allreduce(c, s, r, n, t, op);
    default: return SL_COLL_ENOTSUP;
    }
}

static int run_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                              sl_redop op)
{
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_reduce_scatter(c, s, r, n, t, op);
    case SL_COLL_NCCL: return slc_nccl_reduce_scatter(c, s, r, n, t, op);
    default: break;
    }
    if (c->size == 1) return single_rank_copy(c, r, s, n, t);
    if (c->impl == SL_COLL_RING) return slc_ring_reduce_scatter(c, s, r, n, t, op);
    return slc_rhd_reduce_scatter(c, s, r, n, t, op);
}

static int run_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_allgather(c, s, r, n, t);
    case SL_COLL_NCCL: return slc_nccl_allgather(c, s, r, n, t);
    default: break;
    }
    if (c->size == 1) return single_rank_copy(c, r, s, n, t);
    if (c->impl == SL_COLL_RING) return slc_ring_allgather(c, s, r, n, t);
    return slc_rhd_allgather(c, s, r, n, t);
}

/* ---- sl_coll.h: blocking --------------------------------------------------------------- */

int sl_coll_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    int rc = slc_check_allreduce(c, s, r, n, t, op);
    if (rc || n == 0) return rc;
    return run_allreduce(c, s, r, n, t, op);
}

int sl_coll_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op)
{
    int rc = slc_check_reduce_scatter(c, s, r, n, t, op);
    if (rc || n == 0) return rc;
    return run_reduce_scatter(c, s, r, n, t, op);
}

int sl_coll_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    int rc = slc_check_allgather(c, s, r, n, t);
    if (rc || n == 0) return rc;
    return run_allgather(c, s, r, n, t);
}

int sl_coll_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    int rc = slc_check_broadcast(c, buf, n, t, root);
    if (rc || n == 0) return rc;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_broadcast(c, buf, n, t, root);
    case SL_COLL_NCCL: return slc_nccl_broadcast(c, buf, n, t, root);
    default: break;
    }
    if (c->size == 1) return SL_COLL_OK;
    if (c->impl == SL_COLL_RING) return slc_chain_broadcast(c, buf, n, t, root);
    return slc_tree_broadcast(c, buf, n, t, root);
}

int sl_coll_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                   int root)
{
    int rc = slc_check_reduce(c, s, r, n, t, op, root);
    if (rc || n == 0) return rc;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_reduce(c, s, r, n, t, op, root);
    case SL_COLL_NCCL: return slc_nccl_reduce(c, s, r, n, t, op, root);
    default: break;
    }
    if (c->size == 1) return single_rank_copy(c, r, s, n, t);
    if (c->impl == SL_COLL_RING) return slc_chain_reduce(c, s, r, n, t, op, root);
    return slc_tree_reduce(c, s, r, n, t, op, root);
}

int sl_coll_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = slc_check_p2p(c, buf, n, t, peer, tag);
    if (rc || n == 0) return rc;
    if (c->impl == SL_COLL_NCCL) return slc_nccl_send(c, buf, n, t, peer);
    slx_send(c, buf, n, t, peer, SL_TAG_USER + tag);
    return SL_COLL_OK;
}

int sl_coll_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = slc_check_p2p(c, buf, n, t, peer, tag);
    if (rc || n == 0) return rc;
    if (c->impl == SL_COLL_NCCL) return slc_nccl_recv(c, buf, n, t, peer);
    slx_recv(c, buf, n, t, peer, SL_TAG_USER + tag);
    return SL_COLL_OK;
}

int sl_coll_barrier(sl_comm *c)
{
    if (!c || c->comm == MPI_COMM_NULL) return SL_COLL_EINVAL;
    if (c->stream) sl_cdev_stream_sync(c->stream);
    SL_CHECK_MPI(MPI_Barrier(c->comm));
    return SL_COLL_OK;
}
