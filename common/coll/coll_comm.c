/* coll_comm.c — the front door of the communication layer: each call of sl_coll.h checks its
 * arguments (coll_local.c) and is dispatched to the implementation the communicator carries.
 * Nothing else happens here: the algorithms live in one file each (coll_mpi.c, coll_ring.c,
 * coll_tree.c, ...), communicators are made in coll_setup.c. */
#include <limits.h>
#include <stdint.h>

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
    case SL_COLL_SHM: return slc_shm_allreduce(c, s, r, n, t, op);
    case SL_COLL_HIER: return slc_hier_allreduce(c, s, r, n, t, op);
    case SL_COLL_DIRECT: return slc_direct_allreduce(c, s, r, n, t, op);
    case SL_COLL_TORUS: return slc_torus_allreduce(c, s, r, n, t, op);
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
    switch (c->impl) {
    case SL_COLL_RING: return slc_ring_reduce_scatter(c, s, r, n, t, op);
    case SL_COLL_DIRECT: return slc_direct_reduce_scatter(c, s, r, n, t, op);
    case SL_COLL_TORUS: return slc_torus_reduce_scatter(c, s, r, n, t, op);
    default: return slc_rhd_reduce_scatter(c, s, r, n, t, op);
    }
}

static int run_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_allgather(c, s, r, n, t);
    case SL_COLL_NCCL: return slc_nccl_allgather(c, s, r, n, t);
    default: break;
    }
    if (c->size == 1) return single_rank_copy(c, r, s, n, t);
    switch (c->impl) {
    case SL_COLL_RING: return slc_ring_allgather(c, s, r, n, t);
    case SL_COLL_DIRECT: return slc_direct_allgather(c, s, r, n, t);
    case SL_COLL_TORUS: return slc_torus_allgather(c, s, r, n, t);
    default: return slc_rhd_allgather(c, s, r, n, t);
    }
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
    if (c->impl == SL_COLL_NCCL) slc_nccl_flush(c);
    if (c->stream) sl_cdev_stream_sync(c->stream);
    SL_CHECK_MPI(MPI_Barrier(c->comm));
    return SL_COLL_OK;
}

/* ---- sl_coll.h: non-blocking ----------------------------------------------------------- */

/* Whether collective w on n elements runs in the background: per implementation and memory
 * space (sl_coll_iallreduce_overlaps), and for the schedules of the suite's algorithms only
 * while every message (at most the whole vector) fits MPI's int count of bytes. */
static int overlaps(const sl_comm *c, size_t total, sl_dtype t)
{
    if (!sl_coll_iallreduce_overlaps(c)) return 0;
    if (c->impl == SL_COLL_MPI || c->impl == SL_COLL_NCCL) return 1;
    return c->size > 1 && total <= INT_MAX / sl_dtype_size(t);
}

int sl_coll_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                       sl_coll_req **req)
{
    if (!req) return SL_COLL_EINVAL;
    *req = NULL;
    int rc = slc_check_allreduce(c, s, r, n, t, op);
    if (rc) return rc;
    sl_coll_req *q = *req = slc_req_new(c, 1, t, op);
    if (n == 0) return SL_COLL_OK;
    if (!overlaps(c, n, t)) return run_allreduce(c, s, r, n, t, op); /* completes here */
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_iallreduce(c, s, r, n, t, op, q);
    case SL_COLL_NCCL: return slc_nccl_iallreduce(c, s, r, n, t, op, q);
    default: slc_nb_schedule(q, SL_CO_ALLREDUCE, s, r, n); return SL_COLL_OK;
    }
}

int sl_coll_ireduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op, sl_coll_req **req)
{
    if (!req) return SL_COLL_EINVAL;
    *req = NULL;
    int rc = slc_check_reduce_scatter(c, s, r, n, t, op);
    if (rc) return rc;
    sl_coll_req *q = *req = slc_req_new(c, 1, t, op);
    if (n == 0) return SL_COLL_OK;
    if (!overlaps(c, n * (size_t)c->size, t)) return run_reduce_scatter(c, s, r, n, t, op);
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_ireduce_scatter(c, s, r, n, t, op, q);
    case SL_COLL_NCCL: return slc_nccl_ireduce_scatter(c, s, r, n, t, op, q);
    default: slc_nb_schedule(q, SL_CO_REDUCE_SCATTER, s, r, n); return SL_COLL_OK;
    }
}

int sl_coll_iallgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                       sl_coll_req **req)
{
    if (!req) return SL_COLL_EINVAL;
    *req = NULL;
    int rc = slc_check_allgather(c, s, r, n, t);
    if (rc) return rc;
    sl_coll_req *q = *req = slc_req_new(c, 1, t, SL_OP_SUM);
    if (n == 0) return SL_COLL_OK;
    if (!overlaps(c, n * (size_t)c->size, t)) return run_allgather(c, s, r, n, t);
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_iallgather(c, s, r, n, t, q);
    case SL_COLL_NCCL: return slc_nccl_iallgather(c, s, r, n, t, q);
    default: slc_nb_schedule(q, SL_CO_ALLGATHER, s, r, n); return SL_COLL_OK;
    }
}

/* isend and irecv: the same checks and request, then the one direction. */
static int start_p2p(sl_comm *c, int send, void *buf, size_t n, sl_dtype t, int peer, int tag,
                     sl_coll_req **req)
{
    if (!req) return SL_COLL_EINVAL;
    *req = NULL;
    int rc = slc_check_p2p(c, buf, n, t, peer, tag);
    if (rc) return rc;
    sl_coll_req *q = *req = slc_req_new(c, 0, t, SL_OP_SUM);
    if (n == 0) return SL_COLL_OK;
    if (c->impl == SL_COLL_NCCL) return slc_nccl_ip2p(c, send, buf, n, t, peer, q);
    if (send)
        slx_isend(c, buf, n, t, peer, SL_TAG_USER + tag, q);
    else
        slx_irecv(c, buf, n, t, peer, SL_TAG_USER + tag, q);
    return SL_COLL_OK;
}

int sl_coll_isend(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag,
                  sl_coll_req **req)
{
    return start_p2p(c, 1, (void *)(uintptr_t)buf, n, t, peer, tag, req); /* only read */
}

int sl_coll_irecv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer, int tag,
                  sl_coll_req **req)
{
    return start_p2p(c, 0, buf, n, t, peer, tag, req);
}
