/* coll_local.h — the bottom layer of the communication layer: the communicator's own state
 * and what a rank does without communicating: element addressing, the partition of a vector
 * into chunks, scratch buffers owned by the communicator, local copies and reductions in the
 * communicator's memory space, and the argument checks every call makes before its first
 * message. Everything above (transport, algorithms, dispatch) depends on this; it depends on
 * nothing of theirs. Not for benchmarks: they use sl_coll.h.
 *
 *   sl_coll.h API      coll_comm.c (dispatch), coll_setup.c (communicators, queries)
 *   algorithms         coll_mpi.c coll_nccl.c coll_ring.c coll_tree.c coll_dbtree.c coll_rhd.c
 *                      coll_direct.c coll_torus.c coll_shm.c coll_hier.c
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

typedef struct slc_node slc_node;

/* The communicator (opaque to benchmarks: sl_coll.h declares it, the accessors read it). */
struct sl_comm {
    MPI_Comm comm;        /* private duplicate: the suite's messages never meet the caller's */
    MPI_Comm nb_comm;     /* second duplicate, for non-blocking operations in flight */
    int rank, size;
    sl_coll impl;
    sl_mem_space space;   /* where the buffers passed to this communicator live */
    int mpi_device_ok;    /* device buffers may go to MPI directly (sl_coll_mpi_takes_device) */
    size_t seg_bytes;     /* pipelining segment of ring, tree, dbtree, rhd messages; may be
                             changed between calls (default 256 KiB, env SL_COLL_SEGMENT) */
    /* Scratch, grown on demand and kept: received segments (in the buffers' memory space),
     * pinned host staging for device buffers, and a whole-vector work buffer. */
    void *seg_scratch;  size_t seg_scratch_bytes;
    void *stage;        size_t stage_bytes;
    void *work;         size_t work_bytes;
    void *work_host;    size_t work_host_bytes;
    MPI_Datatype mpi_half;    /* 2-byte contiguous type for f16/bf16 (mpi implementation) */
    MPI_Op mpi_ops[2][3];     /* [f16, bf16][sum, max, min] user-defined ops */
    void *nccl;           /* ncclComm_t (nccl implementation) */
    void *stream;         /* cudaStream_t for device work (CUDA builds, device space) */
    unsigned nb_seq;      /* non-blocking operations started so far: tags in flight */
    struct sl_coll_req *nb_active; /* operations in flight (started, not yet waited for) */
    struct sl_coll_req *nccl_pending; /* nccl isend/irecv not yet enqueued (coll_nccl.c) */
    struct slc_node *node;  /* shm, hier: the shared-memory window of this rank's node */
    struct slc_hier *hier;  /* hier: the inter-node communicators, one per slice */
    int torus_rows, torus_cols; /* torus: the grid (rows x cols = size) */
    int torus_bidir;      /* torus: bidirectional rings (coll_torus.c) */
    int max_inflight;     /* direct: exchanges in flight at once; 0: size - 1 */
    unsigned long long bytes_sent; /* bytes this rank has sent through the suite's own transport
                                      (ring, tree, dbtree, rhd, send; not the MPI library's or
                                      NCCL's collectives, which cannot be observed from here) */
};

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
