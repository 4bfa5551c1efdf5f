/* coll_local.c — the bottom layer of the communication layer (coll_local.h): scratch owned by
 * the communicator, local copies and reductions in the communicator's memory space, and the
 * argument checks of every call. Nothing here sends a message. */
#include <limits.h>

#include "coll_local.h"
#include "sl_sim.h"

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

void slc_scratch_release_all(sl_comm *c)
{
    scratch_release(c, &c->work, &c->work_bytes, SLC_WORK);
    scratch_release(c, &c->work_host, &c->work_host_bytes, SLC_WORK_HOST);
    scratch_release(c, &c->seg_scratch, &c->seg_scratch_bytes, SLC_SEG);
    scratch_release(c, &c->stage, &c->stage_bytes, SLC_STAGE);
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
    if (!sl_sim_real(dst, bytes)) return; /* folded by the simulator: no real data */
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

/* What each implementation provides (sl_coll.h); the checks below answer SL_COLL_ENOTSUP
 * from it, blocking and non-blocking alike. */
int sl_coll_supports(sl_coll impl, sl_collective w)
{
    if ((unsigned)w >= SL_NCOS) return 0;
    switch (impl) {
    case SL_COLL_MPI:
    case SL_COLL_NCCL: return 1;
    case SL_COLL_RING: return 1;
    case SL_COLL_TREE: return w == SL_CO_ALLREDUCE || w == SL_CO_BROADCAST || w == SL_CO_REDUCE;
    case SL_COLL_DBTREE:
    case SL_COLL_SHM:
    case SL_COLL_HIER: return w == SL_CO_ALLREDUCE;
    case SL_COLL_RHD:
    case SL_COLL_DIRECT:
    case SL_COLL_TORUS:
        return w == SL_CO_ALLREDUCE || w == SL_CO_REDUCE_SCATTER || w == SL_CO_ALLGATHER;
    default: return 0;
    }
}

/* ---- argument checks: identical on every rank, before any message ----------------------- */

/* What every call checks: a live communicator, a known dtype, and a buffer of count * mult
 * elements that is addressable; the MPI library counts in int per call. */
static int check_common(const sl_comm *c, size_t count, sl_dtype t, size_t mult)
{
    if (!c || c->comm == MPI_COMM_NULL || (unsigned)t >= SL_NDTYPES) return SL_COLL_EINVAL;
    if (count > SIZE_MAX / sl_dtype_size(t) / (mult ? mult : 1)) return SL_COLL_EINVAL;
    if (c->impl == SL_COLL_MPI && count > INT_MAX) return SL_COLL_EINVAL;
    return SL_COLL_OK;
}

static int check_op(sl_redop op) { return (unsigned)op < SL_NREDOPS ? 0 : SL_COLL_EINVAL; }

int slc_check_allreduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                        sl_redop op)
{
    int rc = check_common(c, n, t, 1);
    if (rc || (rc = check_op(op))) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_ALLREDUCE) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int slc_check_reduce_scatter(const sl_comm *c, const void *s, const void *r, size_t n,
                             sl_dtype t, sl_redop op)
{
    int rc = check_common(c, n, t, c ? (size_t)c->size : 1);
    if (rc || (rc = check_op(op))) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_REDUCE_SCATTER) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int slc_check_allgather(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t)
{
    int rc = check_common(c, n, t, c ? (size_t)c->size : 1);
    if (rc) return rc;
    if (n > 0 && (!s || !r)) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_ALLGATHER) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int slc_check_broadcast(const sl_comm *c, const void *buf, size_t n, sl_dtype t, int root)
{
    int rc = check_common(c, n, t, 1);
    if (rc) return rc;
    if (root < 0 || root >= c->size || (n > 0 && !buf)) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_BROADCAST) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int slc_check_reduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                     sl_redop op, int root)
{
    int rc = check_common(c, n, t, 1);
    if (rc || (rc = check_op(op))) return rc;
    if (root < 0 || root >= c->size) return SL_COLL_EINVAL;
    if (n > 0 && (!s || (c->rank == root && !r))) return SL_COLL_EINVAL;
    return sl_coll_supports(c->impl, SL_CO_REDUCE) ? SL_COLL_OK : SL_COLL_ENOTSUP;
}

int slc_check_p2p(const sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag)
{
    int rc = check_common(c, n, t, 1);
    if (rc) return rc;
    if (peer < 0 || peer >= c->size || tag < 0 || tag >= (1 << 20) || (n > 0 && !buf))
        return SL_COLL_EINVAL;
    return SL_COLL_OK;
}
