/* coll_local.h — the bottom layer of the communication layer: the communicator's own state
 * and what a rank does without communicating: element addressing, the partition of a vector
 * into chunks, scratch buffers owned by the communicator, local copies and reductions in the
 * communicator's memory space, and the argument checks every call makes before its first
 * message. Everything above (transport, algorithms, dispatch) depends on this; it depends on
 * nothing of theirs. Not for benchmarks: they use sl_coll.h.
 *
 *   sl_coll.h API      coll_comm.c (dispatch), coll_setup.c (communicators, queries)
 *   algorithms         coll_mpi.c coll_nccl.c coll_ring.c coll_tree.c coll_dbtree.c coll_rhd.c
 *                      coll_nb.c (the non-blocking engine)            coll_internal.h
 *   transport          coll_xfer.c                                    coll_xfer.h
 *   local operations   coll_local.c coll_reduce_ops.c (host), coll_device.h (device)
 */
#ifndef SL_COLL_LOCAL_H
#define SL_COLL_LOCAL_H

#include <stdint.h>
#include <string.h>

#include "coll_device.h"
#include "sl_coll.h"
#include "sl_error.h"

/* Element i of a typed buffer. */
static inline void *slc_at(const void *p, size_t i, sl_dtype t)
{
    return (char *)(uintptr_t)p + i * sl_dtype_size(t);
}

/* The vector of `count` elements cut into n chunks whose sizes differ by at most one (the
 * first count % n chunks are one longer): works for any count, including count < n and 0. */
static inline size_t slc_chunk_off(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}
static inline size_t slc_chunk_len(size_t count, int n, int i)
{
    return count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
}
static inline int slc_mod(int a, int n) { return ((a % n) + n) % n; }

/* Elements per pipelining segment: c->seg_bytes rounded down to whole elements, at least one,
 * and at most 1 GiB so that every message size fits MPI's int count. */
static inline size_t slc_seg_elems(const sl_comm *c, sl_dtype t)
{
    size_t b = c->seg_bytes < ((size_t)1 << 30) ? c->seg_bytes : ((size_t)1 << 30);
    size_t e = b / sl_dtype_size(t);
    return e ? e : 1;
}

/* Scratch owned by the communicator, grown on demand (contents are not kept when it grows):
 * SLC_WORK and SLC_SEG live in the buffers' space, SLC_WORK_HOST and SLC_STAGE in host memory
 * (pinned on a device communicator). */
enum { SLC_WORK, SLC_WORK_HOST, SLC_SEG, SLC_STAGE };
void *slc_scratch(sl_comm *c, int which, size_t bytes);

/* Local operations on buffers in the communicator's space. */
void slc_copy(sl_comm *c, void *dst, const void *src, size_t bytes);
/* dst[i] = a[i] op b[i]; dst may be a or b. op avg combines as sum. */
void slc_reduce(sl_comm *c, void *dst, const void *a, const void *b, size_t n, sl_dtype t,
                sl_redop op);
/* The avg epilogue: buf[i] /= nranks (no-op for other ops). */
void slc_finish_avg(sl_comm *c, void *buf, size_t n, sl_dtype t, sl_redop op);

/* Host element-wise kernels (coll_reduce_ops.c). */
void sl_reduce_host(void *dst, const void *a, const void *b, size_t n, sl_dtype t, sl_redop op);
void sl_divide_host(void *buf, size_t n, sl_dtype t, int divisor);

/* Releases every scratch buffer (communicator destruction). */
void slc_scratch_release_all(sl_comm *c);

/* Argument checks, identical on every rank and made before any message: SL_COLL_OK, or the
 * code the call returns (SL_COLL_EINVAL, SL_COLL_ENOTSUP). */
int slc_check_allreduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                        sl_redop op);
int slc_check_reduce_scatter(const sl_comm *c, const void *s, const void *r, size_t n,
                             sl_dtype t, sl_redop op);
int slc_check_allgather(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t);
int slc_check_broadcast(const sl_comm *c, const void *buf, size_t n, sl_dtype t, int root);
int slc_check_reduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                     sl_redop op, int root);
int slc_check_p2p(const sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer, int tag);

#endif
