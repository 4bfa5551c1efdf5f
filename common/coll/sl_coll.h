/* sl_coll.h — the communication layer: one API for the collectives every benchmark uses, with
 * several implementations behind it (DESIGN.md, "Backends").
 *
 *   mpi     the MPI library's collectives (f16/bf16 through user-defined MPI ops)
 *   nccl    NCCL on device buffers (built when NCCL is found)
 *   ring    reduce-scatter then all-gather around a ring, N-1 steps each, segments pipelined
 *   tree    binomial-tree reduce then binomial-tree broadcast
 *   dbtree  double binary tree: two complementary trees each carrying half the data, in chunks
 *   rhd     Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather,
 *           with the fold for rank counts that are not a power of two
 *
 * A communicator (sl_comm) carries the implementation and where the buffers live (host or
 * device), so a call site does not change with either. The suite's own algorithms (ring, tree,
 * dbtree, rhd) run over MPI point-to-point: on host buffers directly; on device buffers through
 * CUDA-aware MPI where the library has it, otherwise staged segment by segment through pinned
 * host memory with the reductions done on the device by a CUDA kernel.
 *
 * Conventions (those of NCCL where the MPI and NCCL conventions differ):
 *   - counts are in elements; count 0 is valid and does nothing; every rank passes the same
 *     count, dtype, op and root.
 *   - all-reduce / reduce: in place when sendbuf == recvbuf. reduce: recvbuf matters at the
 *     root only (may be NULL elsewhere).
 *   - reduce-scatter: sendbuf holds nranks blocks of recvcount, block i is reduced into rank i's
 *     recvbuf; in place when recvbuf == sendbuf + rank * recvcount elements (the other blocks
 *     of sendbuf may then be overwritten, as with MPI_IN_PLACE).
 *   - all-gather: recvbuf holds nranks blocks of sendcount, block i is rank i's sendbuf; in place
 *     when sendbuf == recvbuf + rank * sendcount elements.
 *   - 16-bit types are combined in f32 per element and rounded once per combination; avg is a
 *     sum followed by one division by nranks (x / n, not x * (1/n)).
 *
 * Every call returns SL_COLL_OK or one of the SL_COLL_E* codes below. Argument errors are
 * detected before any communication, identically on every rank, so a program can turn them
 * into a usage error (exit 2). A failing MPI, CUDA or NCCL call is a runtime error (exit 3,
 * through sl_fatal).
 */
#ifndef SL_COLL_H
#define SL_COLL_H

#include <mpi.h>
#include <stddef.h>

#include "sl_mem.h"
#include "sl_types.h"

typedef enum { SL_OP_SUM, SL_OP_MAX, SL_OP_MIN, SL_OP_AVG, SL_NREDOPS } sl_redop;
const char *sl_redop_name(sl_redop op);     /* "sum" "max" "min" "avg" */
int sl_redop_from_name(const char *s);      /* -1 when unknown */

/* The collectives, for capability queries and for the benchmark's --op. */
typedef enum {
    SL_CO_ALLREDUCE, SL_CO_REDUCE_SCATTER, SL_CO_ALLGATHER, SL_CO_BROADCAST, SL_CO_REDUCE,
    SL_NCOS
} sl_collective;
const char *sl_collective_name(sl_collective w); /* "allreduce" "reduce_scatter" ... */
int sl_collective_from_name(const char *s);      /* -1 when unknown */

enum {
    SL_COLL_OK = 0,
    SL_COLL_EINVAL = 1,    /* bad argument: unknown implementation, dtype or op, root out of
                              range, NULL buffer with count > 0, count too large */
    SL_COLL_ENOTSUP = 2,   /* this implementation does not provide this collective */
    SL_COLL_ENOTBUILT = 3, /* needs CUDA or NCCL, which this build does not have */
    SL_COLL_ENODEV = 4,    /* needs a GPU and none is visible */
};
const char *sl_coll_strerror(int rc);

/* Whether implementation `impl` provides collective `w` (1) or answers SL_COLL_ENOTSUP (0).
 * mpi and nccl provide all five; ring: allreduce, reduce_scatter, allgather, broadcast (a
 * pipelined chain) and reduce (the chain reversed); tree: allreduce, broadcast, reduce; rhd:
 * allreduce, reduce_scatter, allgather; dbtree: allreduce. Send, recv and barrier exist for all. */
int sl_coll_supports(sl_coll impl, sl_collective w);

typedef struct sl_comm {
    MPI_Comm comm;        /* private duplicate: the suite's messages never meet the caller's */
    MPI_Comm nb_comm;     /* second duplicate, for non-blocking operations in flight */
    int rank, size;
    sl_coll impl;
    sl_mem_space space;   /* where the buffers passed to this communicator live */
    int mpi_device_ok;    /* device buffers may go to MPI directly (CUDA-aware MPI) */
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
    unsigned long long bytes_sent; /* bytes this rank has sent through the suite's own transport
                                      (ring, tree, dbtree, rhd, send; not the MPI library's or
                                      NCCL's collectives, which cannot be observed from here) */
} sl_comm;

/* Gives each rank of a node its own GPU (node-local rank modulo the visible devices), as NCCL
 * requires; call before allocating device memory. Returns the device, or -1 where there is
 * none (nothing is changed). Collective over comm. */
int sl_coll_bind_device(MPI_Comm comm);

/* Wraps `comm` (duplicated; the caller keeps its own) for implementation `impl` on buffers in
 * `space`. Returns SL_COLL_EINVAL for an unknown implementation or space, SL_COLL_ENOTSUP for
 * nccl on host buffers, SL_COLL_ENOTBUILT or SL_COLL_ENODEV when the build or the machine
 * cannot run it (c is then left empty and sl_comm_free on it is a no-op). Collective over comm. */
int sl_comm_init(sl_comm *c, MPI_Comm comm, sl_coll impl, sl_mem_space space);
void sl_comm_free(sl_comm *c);

int sl_coll_allreduce(sl_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                      sl_dtype t, sl_redop op);
int sl_coll_reduce_scatter(sl_comm *c, const void *sendbuf, void *recvbuf, size_t recvcount,
                           sl_dtype t, sl_redop op);
int sl_coll_allgather(sl_comm *c, const void *sendbuf, void *recvbuf, size_t sendcount,
                      sl_dtype t);
int sl_coll_broadcast(sl_comm *c, void *buf, size_t count, sl_dtype t, int root);
int sl_coll_reduce(sl_comm *c, const void *sendbuf, void *recvbuf, size_t count, sl_dtype t,
                   sl_redop op, int root);

/* Point to point (for pipeline stages, halo exchange). tag >= 0 and below 1 << 20. Blocking,
 * like MPI_Send: a send to oneself, or two ranks sending to each other first, can wait forever
 * once the message is too large to be buffered. */
int sl_coll_send(sl_comm *c, const void *buf, size_t count, sl_dtype t, int peer, int tag);
int sl_coll_recv(sl_comm *c, void *buf, size_t count, sl_dtype t, int peer, int tag);
int sl_coll_barrier(sl_comm *c);

/* Non-blocking all-reduce, for overlapping communication with computation (DDP buckets).
 *
 *   sl_coll_req *q; sl_coll_iallreduce(c, g, g, n, SL_F32, SL_OP_SUM, &q);
 *   ... compute, calling sl_coll_test(q, &done) now and then ...
 *   sl_coll_wait(q);      completes and frees q
 *
 * What progresses in the background:
 *   mpi     MPI_Iallreduce (progress as the MPI library makes it; calling test helps).
 *   nccl    enqueued on the communicator's stream; runs on the device.
 *   ring, rhd, tree, dbtree   on host buffers: the algorithm's steps as a schedule; each
 *           sl_coll_test completes what has arrived, reduces it and posts the next step, so
 *           the collective advances as often as the caller tests (whole chunks, no segments;
 *           dbtree runs its two trees one after the other).
 *   others  the suite's algorithms on device buffers or on vectors of 2 GiB and more run to
 *           completion inside sl_coll_iallreduce: correct, but nothing overlaps.
 *           sl_coll_iallreduce_overlaps says which case a communicator is in (for vectors
 *           under 2 GiB).
 * Several operations may be in flight on one communicator; every rank must start them in the
 * same order. The buffers must not be touched until the operation is complete. */
typedef struct sl_coll_req sl_coll_req;
int sl_coll_iallreduce(sl_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                       sl_dtype t, sl_redop op, sl_coll_req **req);
int sl_coll_test(sl_coll_req *req, int *done); /* progresses; *done = 1 when complete */
int sl_coll_wait(sl_coll_req *req);            /* completes and frees req */
int sl_coll_iallreduce_overlaps(const sl_comm *c);

#endif
