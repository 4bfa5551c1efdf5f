/* coll_internal.h — what the files of the communication layer share: message tags, the
 * partition of a vector into chunks, local memory operations in the communicator's memory
 * space, the segmented point-to-point transport and the algorithm entry points. Not for
 * benchmarks: they use sl_coll.h. */
#ifndef SL_COLL_INTERNAL_H
#define SL_COLL_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "coll_device.h"
#include "sl_coll.h"
#include "sl_error.h"

/* Tags on the private communicator. Blocking collectives run one at a time, in the same order
 * on every rank, so one tag per kind of message is enough; point-to-point messages of the user
 * get SL_TAG_USER + tag so they can never match a collective's. */
enum {
    SL_TAG_RING = 1, SL_TAG_TREE, SL_TAG_DBTREE_UP, SL_TAG_DBTREE_DOWN = SL_TAG_DBTREE_UP + 2,
    SL_TAG_RHD = SL_TAG_DBTREE_DOWN + 2, SL_TAG_RHD_FOLD, SL_TAG_CHAIN,
    SL_TAG_USER = 1 << 10,
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

/* The transport every suite algorithm is written in (coll_xfer.c): sends sn elements of sbuf
 * to rank `to` while receiving rn elements from rank `from`. With op == SL_NREDOPS the received
 * data is stored in dst; otherwise dst = a op received (dst may be a). Either side may be
 * absent (count 0 or rank MPI_PROC_NULL). Messages are cut into segments of c->seg_bytes and
 * double-buffered so that segment i is reduced while segment i+1 arrives; both ends compute
 * the same segmentation from the count. Device buffers are staged through pinned host memory
 * when MPI cannot take them. Blocking. */
void slx_xchg(sl_comm *c, const void *sbuf, size_t sn, int to, void *dst, const void *a,
              size_t rn, int from, sl_dtype t, sl_redop op, int tag);
static inline void slx_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int to, int tag)
{
    slx_xchg(c, buf, n, to, NULL, NULL, 0, MPI_PROC_NULL, t, SL_NREDOPS, tag);
}
static inline void slx_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int from, int tag)
{
    slx_xchg(c, NULL, 0, MPI_PROC_NULL, buf, NULL, n, from, t, SL_NREDOPS, tag);
}
static inline void slx_recv_reduce(sl_comm *c, void *dst, const void *a, size_t n, sl_dtype t,
                                   sl_redop op, int from, int tag)
{
    slx_xchg(c, NULL, 0, MPI_PROC_NULL, dst, a, n, from, t, op, tag);
}

/* The argument checks of sl_coll_allreduce, shared with sl_coll_iallreduce. */
int slc_check_allreduce(const sl_comm *c, const void *s, const void *r, size_t n, sl_dtype t,
                        sl_redop op);

/* Algorithms: arguments are already validated; count > 0; c->size > 1. */
int slc_mpi_init(sl_comm *c);
void slc_mpi_free(sl_comm *c);
int slc_mpi_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_mpi_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op);
int slc_mpi_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);
int slc_mpi_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root);
int slc_mpi_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                   int root);
/* The MPI datatype and op for (t, op) on this communicator (op avg -> sum). */
MPI_Datatype slc_mpi_type(const sl_comm *c, sl_dtype t);
MPI_Op slc_mpi_op(const sl_comm *c, sl_dtype t, sl_redop op);

int slc_nccl_init(sl_comm *c);
int slc_nccl_op(sl_redop op); /* the op passed to NCCL (avg -> sum, divided afterwards) */
void slc_nccl_free(sl_comm *c);

int slc_ring_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_ring_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op);
int slc_ring_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);
int slc_chain_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root);
int slc_chain_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                     int root);

int slc_tree_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_tree_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root);
int slc_tree_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                    int root);

int slc_dbtree_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                         sl_redop op);
/* Tree `which` (0 or 1) of the double binary tree over n ranks: rank's parent and children
 * (-1 where absent). Exposed for the unit test of its shape. */
void slc_dbtree_shape(int n, int rank, int which, int *parent, int *child0, int *child1);

/* Schedules for the non-blocking all-reduce (coll_nb.c): this rank's part of an algorithm as
 * a list of steps, each one exchange (send a range to one rank while receiving a range from
 * another), after which the received range is reduced into the result or was received straight
 * into it. Ranges are in elements; S is the send buffer, R the result. The engine runs one step
 * at a time, advancing whenever the caller tests. */
enum { SLC_BUF_S, SLC_BUF_R };
typedef struct slc_step {
    int to, from;                /* MPI_PROC_NULL when this step only receives / only sends */
    int send_buf;                /* SLC_BUF_S or SLC_BUF_R */
    size_t send_off, send_len;
    size_t recv_off, recv_len;
    int reduce;                  /* 1: R[recv] = A[recv] op received; 0: received into R */
    int a_buf;                   /* A: SLC_BUF_S or SLC_BUF_R */
    size_t avg_off, avg_len;     /* for avg: this range of R is final after the step; divide it */
} slc_step;
/* Each fills out[0..) (room for 2 * nranks + 64 steps) and returns the number of steps. */
int slc_ring_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_rhd_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_tree_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_dbtree_schedule(const sl_comm *c, size_t n, slc_step *out);

int slc_rhd_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_rhd_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op);
int slc_rhd_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);

#endif
