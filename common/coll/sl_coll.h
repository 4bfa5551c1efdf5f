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
 *   shm     one node: every rank reduces its slice straight from its peers' buffers in an
 *           MPI-3 shared-memory window; no messages (host buffers, ranks of one node)
 *   hier    shm inside each node, rhd across nodes on each slice, shm again to gather
 *           (host buffers; SL_COLL_RANKS_PER_NODE=k splits a host into virtual nodes of k
 *           ranks, a testing aid)
 *   direct  fully connected: reduce-scatter as one step of N-1 simultaneous exchanges (each
 *           rank sends piece j to rank j and sums the N-1 copies of its own piece), then
 *           all-gather as one step of N-1 exchanges; at most max_inflight exchanges in flight
 *   torus   the ranks as a 2-D grid (R x C): ring reduce-scatter along the rows, then along the
 *           columns, then the all-gathers back; a 1 x N grid is the ring
 *
 * A communicator (sl_comm, opaque: sl_comm_create / sl_comm_destroy and accessors) carries the
 * implementation and where the buffers live (host or device), so a call site does not change
 * with either; sl_coll_available says beforehand whether a combination can run, and why not.
 * The suite's own algorithms (ring, tree, dbtree, rhd, direct, torus) run over MPI
 * point-to-point: on host buffers directly; on device buffers through
 * CUDA-aware MPI where the library has it, otherwise (or with SL_COLL_STAGE=1) staged segment
 * by segment through pinned host memory with the reductions done on the device by a CUDA kernel.
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

/* Whether implementation `impl` provides collective `w` (1) or answers SL_COLL_ENOTSUP (0),
 * in its blocking and (for allreduce, reduce_scatter, allgather) non-blocking form alike.
 * mpi and nccl provide all five; ring: allreduce, reduce_scatter, allgather, broadcast (a
 * pipelined chain) and reduce (the chain reversed); tree: allreduce, broadcast, reduce; rhd:
 * allreduce, reduce_scatter, allgather; direct and torus: the same three; dbtree, shm, hier:
 * allreduce. Send, recv (blocking
 * and not) and barrier exist for all. */
int sl_coll_supports(sl_coll impl, sl_collective w);

/* Whether a communicator for `impl` on buffers in `space` can be made by this build on this
 * machine: SL_COLL_OK, or the code sl_comm_create would return (SL_COLL_EINVAL unknown
 * implementation or space, SL_COLL_ENOTBUILT CUDA/NCCL not built, SL_COLL_ENOTSUP nccl on host
 * buffers or shm/hier on device buffers, SL_COLL_ENODEV no CUDA device visible) with a
 * one-line reason in why (may be NULL). The one place that decides; local, not collective. */
int sl_coll_available(sl_coll impl, sl_mem_space space, char *why, size_t whylen);

/* Gives each rank of a node its own GPU (node-local rank modulo the visible devices), as NCCL
 * requires; call before allocating device memory. Returns the device, or -1 where there is
 * none (nothing is changed). Collective over comm. */
int sl_coll_bind_device(MPI_Comm comm);

/* The default pipelining segment: SL_COLL_SEGMENT (a size >= 8 bytes, K/M/G suffixes) or 256 KiB.
 * Returns -1 (and the default in *bytes) when the variable is set but malformed. */
int sl_coll_env_segment(size_t *bytes);

/* SL_COLL_RANKS_PER_NODE for hier (a testing aid): *k = 0 where unset, -1 returned (and 0 in
 * *k) where set but not an integer in [1, 2^20]. */
int sl_coll_env_ranks_per_node(int *k);

/* SL_COLL_STAGE=1 stages device buffers through pinned host memory even where MPI is
 * CUDA-aware, so that the staging path can be measured and checked on a node whose MPI takes
 * device pointers; 0 or unset leaves the choice to the library (device pointers to MPI
 * directly where it can take them). Returns -1 (and 0 in *on) where set to anything else. */
int sl_coll_env_stage(int *on);
/* Whether device buffers go to MPI directly: MPI says it is CUDA-aware and SL_COLL_STAGE is
 * not 1. The rule every communicator on device buffers follows; local, needs no communicator
 * (MPI started, except where SL_COLL_STAGE=1 answers without asking MPI). */
int sl_coll_mpi_takes_device(void);

/* Bytes one rank of shm reads and writes for an all-reduce of `bytes` on l ranks, cache and
 * memory alike ((5 - 2/l) x bytes), and of those the bytes that must reach memory: its input
 * read and its result written (2 x bytes; the window's stay in cache, coll_shm.c). The second
 * divided by a copy bandwidth (reads + writes per second) is the memory bound on its time. */
double sl_coll_shm_traffic(int l, double bytes);
double sl_coll_shm_memory_traffic(double bytes);

/* The double binary tree over n ranks in words, for the benchmark's header: each tree's parent
 * of every rank (-1 at the root) and the ranks that are inner nodes of both trees. */
void sl_coll_dbtree_describe(int n, char *buf, size_t len);

/* The torus's grid for n ranks: the most square factorisation rows x cols (rows <= cols; 8 ->
 * 2 x 4, 9 -> 3 x 3). Returns 1 where n is prime (only 1 x n, the ring), 0 otherwise. */
int sl_coll_torus_grid(int n, int *rows, int *cols);

/* Defaults for the communicators made afterwards (a program's --torus and --max-inflight):
 * the torus grid rows x cols, used by communicators of rows * cols ranks (others, such as a
 * training program's sub-groups, take sl_coll_torus_grid of their size); and direct's bound on
 * exchanges in flight (0: nranks - 1, every exchange at once; a communicator with fewer ranks
 * uses at most nranks - 1). Not collective; every rank must set the same. */
void sl_coll_set_torus(int rows, int cols);
void sl_coll_set_max_inflight(int k);
/* The torus's rings bidirectional (on != 0; a program's --torus-bidir) for the torus
 * communicators made afterwards: each dimension's reduce-scatter and all-gather send half of
 * every chunk each way round the ring at once, exchanging with both neighbours each step
 * (the same steps and bytes), blocking and non-blocking alike. Not collective; every rank must
 * set the same. */
void sl_coll_set_torus_bidir(int on);

/* The communicator: opaque; made and queried by the calls below. */
typedef struct sl_comm sl_comm;

/* Wraps `comm` (duplicated; the caller keeps its own) for implementation `impl` on buffers in
 * `space`. Returns SL_COLL_OK with *c set, or the code of sl_coll_available with *c = NULL,
 * or SL_COLL_ENOTSUP for shm over ranks of several nodes (the same on every rank).
 * Collective over comm. sl_comm_destroy(NULL) is a no-op; every request must be complete. */
int sl_comm_create(sl_comm **c, MPI_Comm comm, sl_coll impl, sl_mem_space space);
void sl_comm_destroy(sl_comm *c);
int sl_comm_rank(const sl_comm *c);
int sl_comm_size(const sl_comm *c);
sl_coll sl_comm_impl(const sl_comm *c);
sl_mem_space sl_comm_space(const sl_comm *c);
/* Pipelining segment of the suite's algorithms' messages (default 256 KiB, or the environment's
 * SL_COLL_SEGMENT); may be changed between calls (at least 1 byte; whole elements are used). */
size_t sl_comm_segment(const sl_comm *c);
void sl_comm_set_segment(sl_comm *c, size_t bytes);
/* Bytes this rank has sent through the suite's own transport (ring, tree, dbtree, rhd, direct,
 * torus, send and
 * isend of every implementation, nccl send/isend); not the MPI library's or NCCL's collectives,
 * which cannot be observed from here. */
unsigned long long sl_comm_bytes_sent(const sl_comm *c);
/* The torus grid of c (rows x cols = nranks), and direct's bound on exchanges in flight
 * (1..nranks-1; 0 on one rank). */
void sl_comm_torus(const sl_comm *c, int *rows, int *cols);
int sl_comm_max_inflight(const sl_comm *c);
/* Whether c's torus rings are bidirectional (sl_coll_set_torus_bidir; 0 for other implementations). */
int sl_comm_torus_bidir(const sl_comm *c);
/* Scratch the communicator holds now: buffers the algorithms allocated for intermediate data
 * (and staging copies), kept between calls and grown as needed. After sl_comm_scratch_free and
 * one operation, the scratch that operation needed. Not the MPI library's or NCCL's own. */
size_t sl_comm_scratch_bytes(const sl_comm *c);
void sl_comm_scratch_free(sl_comm *c);

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
 * once the message is too large to be buffered (use sl_coll_isend / sl_coll_irecv there).
 * A blocking send matches a non-blocking receive and the reverse. */
int sl_coll_send(sl_comm *c, const void *buf, size_t count, sl_dtype t, int peer, int tag);
int sl_coll_recv(sl_comm *c, void *buf, size_t count, sl_dtype t, int peer, int tag);
int sl_coll_barrier(sl_comm *c);

/* Non-blocking operations, for overlapping communication with computation (DDP buckets, ZeRO)
 * and for exchanges that would deadlock with blocking calls (pipeline stages, halos):
 *
 *   sl_coll_req *q; sl_coll_iallreduce(c, g, g, n, SL_F32, SL_OP_SUM, &q);
 *   ... compute, calling sl_coll_test(q, &done) now and then ...
 *   sl_coll_wait(q);      completes and frees q
 *
 * Arguments, conventions and error codes are those of the blocking calls (count 0 is valid, the
 * same in-place rules, argument errors found before any message and identical on every rank);
 * on an error *req is NULL. A request that succeeded must be completed by sl_coll_wait (or
 * sl_coll_waitall), which frees it. sl_coll_test and sl_coll_wait advance every operation in
 * flight on the request's communicator, not only their own, so requests may be waited for in
 * any order.
 *
 * What progresses in the background:
 *   mpi     MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Isend/Irecv (as the
 *           MPI library progresses them; calling test helps). Counts above INT_MAX are refused
 *           (SL_COLL_EINVAL), as by the blocking calls.
 *   nccl    enqueued on the communicator's stream; complete when the device says so (an event
 *           per operation). isend/irecv are enqueued together, as one NCCL group, at the next
 *           sl_coll_test/wait or operation on the communicator, so that an exchange with both
 *           neighbours started by several calls cannot deadlock in stream order.
 *   ring, rhd, tree, dbtree, direct, torus   on host buffers: the algorithm's steps as a
 *           schedule (all-reduce for all six; reduce-scatter and all-gather, the two halves of
 *           the all-reduce, for ring, rhd, direct and torus; direct with max_inflight
 *           exchanges in flight, the bidirectional torus with both directions of each ring
 *           step, as their blocking forms); a step's messages travel in the
 *           communicator's segments, as the
 *           blocking transport's do, and each sl_coll_test reduces the segments that have
 *           arrived and, once the step is complete, posts the next, so the collective advances
 *           as often as the caller tests (dbtree runs its two trees one after the other).
 *   isend / irecv of mpi, ring, rhd, tree, dbtree: MPI_Isend/Irecv on the private communicator
 *           of the blocking send/recv, cut into the same segments, so that either side may be
 *           blocking and the other not; device buffers that MPI cannot
 *           take are staged through pinned host memory (send: copied, then sent; receive:
 *           received into the stage, copied to the device when complete).
 *   others  collectives of the suite's algorithms on device buffers (without CUDA-aware MPI: the
 *           copies to and from the device must be ordered with the messages), of mpi on device
 *           buffers without CUDA-aware MPI, and on vectors whose messages exceed 2 GiB run to
 *           completion inside the start call: correct, but nothing overlaps.
 *           sl_coll_iallreduce_overlaps says which case a communicator is in (for vectors
 *           under 2 GiB).
 * Several operations may be in flight on one communicator, each told apart by its own tag;
 * every rank must start the collectives in the same order. The buffers must not be touched
 * until the operation is complete. */
typedef struct sl_coll_req sl_coll_req;
int sl_coll_iallreduce(sl_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                       sl_dtype t, sl_redop op, sl_coll_req **req);
int sl_coll_ireduce_scatter(sl_comm *c, const void *sendbuf, void *recvbuf, size_t recvcount,
                            sl_dtype t, sl_redop op, sl_coll_req **req);
int sl_coll_iallgather(sl_comm *c, const void *sendbuf, void *recvbuf, size_t sendcount,
                       sl_dtype t, sl_coll_req **req);
int sl_coll_isend(sl_comm *c, const void *buf, size_t count, sl_dtype t, int peer, int tag,
                  sl_coll_req **req);
int sl_coll_irecv(sl_comm *c, void *buf, size_t count, sl_dtype t, int peer, int tag,
                  sl_coll_req **req);
int sl_coll_test(sl_coll_req *req, int *done); /* progresses; *done = 1 when complete */
int sl_coll_wait(sl_coll_req *req);            /* completes and frees req */
/* Completes and frees reqs[0..n) (NULL entries are skipped) and sets them to NULL; returns
 * the first error, SL_COLL_OK otherwise. */
int sl_coll_waitall(int n, sl_coll_req **reqs);
/* Whether the non-blocking collectives of c progress in the background (1) or complete inside
 * the start call (0). */
int sl_coll_iallreduce_overlaps(const sl_comm *c);

#endif
