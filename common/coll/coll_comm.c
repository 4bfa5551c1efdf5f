/* coll_comm.c — the communicator object and the front door of the communication layer:
 * creation (backend checks, private MPI communicators, scratch), argument validation, and the
 * dispatch of each collective to the implementation the communicator carries. The algorithms
 * themselves live in one file each (coll_ring.c, coll_tree.c, ...). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "sl_options.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support */
#endif

static const char *const redop_names[SL_NREDOPS] = {"sum", "max", "min", "avg"};
static const char *const co_names[SL_NCOS] = {"allreduce", "reduce_scatter", "allgather",
                                              "broadcast", "reduce"};

const char *sl_redop_name(sl_redop op)
{
    return (unsigned)op < SL_NREDOPS ? redop_names[op] : "?";
}

int sl_redop_from_name(const char *s)
{
    for (int i = 0; s && i < SL_NREDOPS; i++)
        if (!strcmp(s, redop_names[i])) return i;
    return -1;
}

const char *sl_collective_name(sl_collective w)
{
    return (unsigned)w < SL_NCOS ? co_names[w] : "?";
}

int sl_collective_from_name(const char *s)
{
    for (int i = 0; s && i < SL_NCOS; i++)
        if (!strcmp(s, co_names[i])) return i;
    return -1;
}

const char *sl_coll_strerror(int rc)
{
    switch (rc) {
    case SL_COLL_OK: return "success";
    case SL_COLL_EINVAL: return "invalid argument";
    case SL_COLL_ENOTSUP: return "not provided by this implementation";
    case SL_COLL_ENOTBUILT: return "not built (needs CUDA/NCCL at build time)";
    case SL_COLL_ENODEV: return "no CUDA device visible";
    default: return "unknown error";
    }
}

int sl_coll_supports(sl_coll impl, sl_collective w)
{
    if ((unsigned)w >= SL_NCOS) return 0;
    switch (impl) {
    case SL_COLL_MPI:
    case SL_COLL_NCCL: return 1;
    case SL_COLL_RING: return 1;
    case SL_COLL_TREE: return w == SL_CO_ALLREDUCE || w == SL_CO_BROADCAST || w == SL_CO_REDUCE;
    case SL_COLL_DBTREE: return w == SL_CO_ALLREDUCE;
    case SL_COLL_RHD:
        return w == SL_CO_ALLREDUCE || w == SL_CO_REDUCE_SCATTER || w == SL_CO_ALLGATHER;
    default: return 0;
    }
}

/* Whether MPI can be handed device pointers: compiled with CUDA support and says so now. */
static int mpi_is_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}

static size_t default_segment(void)
{
    size_t seg = 256 * 1024;
    const char *e = getenv("SL_COLL_SEGMENT");
    size_t v;
    if (e && *e && sl_parse_size(e, &v) == 0 && v >= 8) seg = v;
    return seg;
}

int sl_coll_bind_device(MPI_Comm comm)
{
    int ndev = sl_cdev_count(), local = 0;
    MPI_Comm node;
    SL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (ndev == 0) return -1;
    sl_cdev_set(local % ndev);
    return local % ndev;
}

int sl_comm_init(sl_comm *c, MPI_Comm comm, sl_coll impl, sl_mem_space space)
{
    memset(c, 0, sizeof *c);
    c->comm = c->nb_comm = MPI_COMM_NULL;
    c->mpi_half = MPI_DATATYPE_NULL;
    if ((unsigned)impl >= SL_NCOLLS || (unsigned)space >= SL_MEM_NSPACES) return SL_COLL_EINVAL;
    if (space == SL_MEM_DEVICE || impl == SL_COLL_NCCL) {
        if (!sl_cdev_built()) return SL_COLL_ENOTBUILT;
        if (impl == SL_COLL_NCCL && !sl_nccl_built()) return SL_COLL_ENOTBUILT;
        if (space != SL_MEM_DEVICE) return SL_COLL_ENOTSUP; /* NCCL works on device memory */
        if (sl_cdev_count() == 0) return SL_COLL_ENODEV;
    }
    c->impl = impl;
    c->space = space;
    c->seg_bytes = default_segment();
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->comm));
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->nb_comm));
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (space == SL_MEM_DEVICE) {
        c->mpi_device_ok = mpi_is_cuda_aware();
        c->stream = sl_cdev_stream_create();
    }
    if (impl == SL_COLL_MPI) return slc_mpi_init(c);
    if (impl == SL_COLL_NCCL) return slc_nccl_init(c);
    return SL_COLL_OK;
}

static void scratch_release(sl_comm *c, void **p, size_t *have, int which)
{
    if (!*p) return;
    int device = c->space == SL_MEM_DEVICE;
    if (device && (which == SLC_WORK || which == SLC_SEG)) {
        sl_cdev_free(*p);
        sl_mem_track(SL_MEM_DEVICE, SL_MEM_COMM, -(long long)*have);
    } else if (device) {
        sl_cdev_host_free(*p);
        sl_mem_track(SL_MEM_HOST, SL_MEM_COMM, -(long long)*have);
    } else {
        sl_free(*p);
    }
    *p = NULL;
    *have = 0;
}

void sl_comm_free(sl_comm *c)
{
    if (c->comm == MPI_COMM_NULL) return;
    if (c->impl == SL_COLL_MPI) slc_mpi_free(c);
    if (c->impl == SL_COLL_NCCL) slc_nccl_free(c);
    scratch_release(c, &c->work, &c->work_bytes, SLC_WORK);
    scratch_release(c, &c->work_host, &c->work_host_bytes, SLC_WORK_HOST);
    scratch_release(c, &c->seg_scratch, &c->seg_scratch_bytes, SLC_SEG);
    scratch_release(c, &c->stage, &c->stage_bytes, SLC_STAGE);
    if (c->stream) sl_cdev_stream_destroy(c->stream);
    MPI_Comm_free(&c->comm);
    MPI_Comm_free(&c->nb_comm);
    memset(c, 0, sizeof *c);
    c->comm = c->nb_comm = MPI_COMM_NULL;
}

void *slc_scratch(sl_comm *c, int which, size_t bytes)
{
    void **p;
    size_t *have;
    switch (which) {
    case SLC_WORK: p = &c->work; have = &c->work_bytes; break;
    case SLC_WORK_HOST: p = &c->work_host; have = &c->work_host_bytes; break;
    case SLC_SEG: p = &c->seg_scratch; have = &c->seg_scratch_bytes; break;
    default: p = &c->stage; have = &c->stage_bytes; break;
    }
    if (*have >= bytes && *p) return *p;
    scratch_release(c, p, have, which);
    size_t want = bytes ? bytes : 64;
    int device = c->space == SL_MEM_DEVICE;
    if (device && (which == SLC_WORK || which == SLC_SEG)) {
        *p = sl_cdev_malloc(want);
        sl_mem_track(SL_MEM_DEVICE, SL_MEM_COMM, (long long)want);
    } else if (device) {
        *p = sl_cdev_host_alloc(want);
        sl_mem_track(SL_MEM_HOST, SL_MEM_COMM, (long long)want);
    } else {
        *p = sl_alloc(SL_MEM_COMM, want);
    }
    *have = want;
    return *p;
}

void slc_copy(sl_comm *c, void *dst, const void *src, size_t bytes)
{
    if (dst == src || bytes == 0) return;
    if (c->space == SL_MEM_DEVICE)
        sl_cdev_memcpy(dst, src, bytes, SL_CDEV_D2D, c->stream);
    else
        memmove(dst, src, bytes);
}

void slc_reduce(sl_comm *c, void *dst, const void *a, const void *b, size_t n, sl_dtype t,
                sl_redop op)
{
    if (c->space == SL_MEM_DEVICE)
        sl_cdev_reduce(dst, a, b, n, t, (int)op, c->stream);
    else
        sl_reduce_host(dst, a, b, n, t, op);
}

void slc_finish_avg(sl_comm *c, void *buf, size_t n, sl_dtype t, sl_redop op)
{
    if (op != SL_OP_AVG || c->size == 1 || n == 0) return;
    if (c->space == SL_MEM_DEVICE)
        sl_cdev_divide(buf, n, t, c->size, c->stream);
    else
        sl_divide_host(buf, n, t, c->size);
}

/* Validation shared by every collective: identical on every rank, before any message. */
static int check_common(const sl_comm *c, size_t count, sl_dtype t, size_t mult)
{
    if (!c || c->comm == MPI_COMM_NULL || (unsigned)t >= SL_NDTYPES) return SL_COLL_EINVAL;
    /* The whole buffer (count * mult elements) must be addressable; the MPI library counts in
     * int per call. */
    if (count > SIZE_MAX / sl_dtype_size(t) / (mult ? mult : 1)) return SL_COLL_EINVAL;
    if (c->impl == SL_COLL_MPI && count > INT_MAX) return SL_COLL_EINVAL;
    return SL_COLL_OK;
}

static int check_op(sl_redop op) { return (unsigned)op < SL_NREDOPS ? 0 : SL_COLL_EINVAL; }

/* The op NCCL is asked for: avg as a sum, divided afterwards. NCCL's own ncclAvg multiplies
 * each contribution by 1/n before adding for floating types, which rounds differently from
 * the one division every other implementation does; the suite keeps one definition. */
int slc_nccl_op(sl_redop op) { return op == SL_OP_AVG ? (int)SL_OP_SUM : (int)op; }

/* One rank: every collective is a copy (and avg divides by one). */
static void single_rank_copy(sl_comm *c, void *dst, const void *src, size_t n, sl_dtype t)
{
    slc_copy(c, dst, src, n * sl_dtype_size(t));
}

int slc_check_allreduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                        sl_redop op)
{
    int rc = check_common(c, n, t, 1);
    if (rc || (rc = check_op(op))) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_ALLREDUCE) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int sl_coll_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    int rc = slc_check_allreduce(c, s, r, n, t, op);
    if (rc || n == 0) return rc;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_allreduce(c, s, r, n, t, op);
    case SL_COLL_NCCL:
        sl_nccl_allreduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
        sl_cdev_stream_sync(c->stream);
        slc_finish_avg(c, r, n, t, op);
        return SL_COLL_OK;
    default: break;
    }
    if (c->size == 1) { single_rank_copy(c, r, s, n, t); return SL_COLL_OK; }
    switch (c->impl) {
    case SL_COLL_RING: return slc_ring_allreduce(c, s, r, n, t, op);
    case SL_COLL_TREE: return slc_tree_allreduce(c, s, r, n, t, op);
    case SL_COLL_DBTREE: return slc_dbtree_allreduce(c, s, r, n, t, op);
    case SL_COLL_RHD: return slc_rhd_allreduce(c, s, r, n, t, op);
    default: return SL_COLL_ENOTSUP;
    }
}

int sl_coll_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op)
{
    int rc = check_common(c, n, t, c ? (size_t)c->size : 1);
    if (rc || (rc = check_op(op))) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    if (!sl_coll_supports(c->impl, SL_CO_REDUCE_SCATTER)) return SL_COLL_ENOTSUP;
    if (n == 0) return SL_COLL_OK;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_reduce_scatter(c, s, r, n, t, op);
    case SL_COLL_NCCL:
        sl_nccl_reduce_scatter(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op));
        sl_cdev_stream_sync(c->stream);
        slc_finish_avg(c, r, n, t, op);
        return SL_COLL_OK;
    default: break;
    }
    if (c->size == 1) { single_rank_copy(c, r, s, n, t); return SL_COLL_OK; }
    if (c->impl == SL_COLL_RING) return slc_ring_reduce_scatter(c, s, r, n, t, op);
    return slc_rhd_reduce_scatter(c, s, r, n, t, op);
}

int sl_coll_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    int rc = check_common(c, n, t, c ? (size_t)c->size : 1);
    if (rc) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    if (!sl_coll_supports(c->impl, SL_CO_ALLGATHER)) return SL_COLL_ENOTSUP;
    if (n == 0) return SL_COLL_OK;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_allgather(c, s, r, n, t);
    case SL_COLL_NCCL:
        sl_nccl_allgather(c->nccl, c->stream, s, r, n, t);
        sl_cdev_stream_sync(c->stream);
        return SL_COLL_OK;
    default: break;
    }
    if (c->size == 1) { single_rank_copy(c, r, s, n, t); return SL_COLL_OK; }
    if (c->impl == SL_COLL_RING) return slc_ring_allgather(c, s, r, n, t);
    return slc_rhd_allgather(c, s, r, n, t);
}

int sl_coll_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    int rc = check_common(c, n, t, 1);
    if (rc) return rc;
    if (root < 0 || root >= c->size || (n > 0 && !buf)) return SL_COLL_EINVAL;
    if (!sl_coll_supports(c->impl, SL_CO_BROADCAST)) return SL_COLL_ENOTSUP;
    if (n == 0) return SL_COLL_OK;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_broadcast(c, buf, n, t, root);
    case SL_COLL_NCCL:
        sl_nccl_broadcast(c->nccl, c->stream, buf, n, t, root);
        sl_cdev_stream_sync(c->stream);
        return SL_COLL_OK;
    default: break;
    }
    if (c->size == 1) return SL_COLL_OK;
    if (c->impl == SL_COLL_RING) return slc_chain_broadcast(c, buf, n, t, root);
    return slc_tree_broadcast(c, buf, n, t, root);
}

int sl_coll_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                   int root)
{
    int rc = check_common(c, n, t, 1);
    if (rc || (rc = check_op(op))) return rc;
    if (root < 0 || root >= c->size) return SL_COLL_EINVAL;
    if (n > 0 && (!s || (c->rank == root && !r))) return SL_COLL_EINVAL;
    if (!sl_coll_supports(c->impl, SL_CO_REDUCE)) return SL_COLL_ENOTSUP;
    if (n == 0) return SL_COLL_OK;
    switch (c->impl) {
    case SL_COLL_MPI: return slc_mpi_reduce(c, s, r, n, t, op, root);
    case SL_COLL_NCCL:
        sl_nccl_reduce(c->nccl, c->stream, s, r, n, t, slc_nccl_op(op), root);
        sl_cdev_stream_sync(c->stream);
        if (c->rank == root) slc_finish_avg(c, r, n, t, op);
        return SL_COLL_OK;
    default: break;
    }
    if (c->size == 1) { single_rank_copy(c, r, s, n, t); return SL_COLL_OK; }
    if (c->impl == SL_COLL_RING) return slc_chain_reduce(c, s, r, n, t, op, root);
    return slc_tree_reduce(c, s, r, n, t, op, root);
}

static int check_p2p(const sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = check_common(c, n, t, 1);
    if (rc) return rc;
    if (peer < 0 || peer >= c->size || tag < 0 || tag >= (1 << 20) || (n > 0 && !buf))
        return SL_COLL_EINVAL;
    return SL_COLL_OK;
}

int sl_coll_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = check_p2p(c, buf, n, t, peer, tag);
    if (rc || n == 0) return rc;
    if (c->impl == SL_COLL_NCCL) {
        c->bytes_sent += n * sl_dtype_size(t);
        sl_nccl_send(c->nccl, c->stream, buf, n, t, peer);
        sl_cdev_stream_sync(c->stream);
    } else {
        slx_send(c, buf, n, t, peer, SL_TAG_USER + tag);
    }
    return SL_COLL_OK;
}

int sl_coll_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = check_p2p(c, buf, n, t, peer, tag);
    if (rc || n == 0) return rc;
    if (c->impl == SL_COLL_NCCL) {
        sl_nccl_recv(c->nccl, c->stream, buf, n, t, peer);
        sl_cdev_stream_sync(c->stream);
    } else {
        slx_recv(c, buf, n, t, peer, SL_TAG_USER + tag);
    }
    return SL_COLL_OK;
}

int sl_coll_barrier(sl_comm *c)
{
    if (!c || c->comm == MPI_COMM_NULL) return SL_COLL_EINVAL;
    if (c->stream) sl_cdev_stream_sync(c->stream);
    SL_CHECK_MPI(MPI_Barrier(c->comm));
    return SL_COLL_OK;
}
