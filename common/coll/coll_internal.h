/* coll_internal.h — the algorithm layer of the communication layer: the entry points of each
 * implementation (mpi, nccl, ring, tree, dbtree, rhd) and the schedules of the non-blocking
 * engine. Algorithms are written in the transport (coll_xfer.h) and the local operations
 * (coll_local.h); only the dispatch (coll_comm.c) and set-up (coll_setup.c) call them. Not for
 * benchmarks: they use sl_coll.h. */
#ifndef SL_COLL_INTERNAL_H
#define SL_COLL_INTERNAL_H

#include "coll_xfer.h"

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

/* Non-blocking forms of the mpi implementation on buffers MPI can take: posted into q. */
int slc_mpi_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                       struct sl_coll_req *q);
int slc_mpi_ireduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op, struct sl_coll_req *q);
int slc_mpi_iallgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                       struct sl_coll_req *q);

int slc_nccl_init(sl_comm *c);
int slc_nccl_op(sl_redop op); /* the op passed to NCCL (avg -> sum, divided afterwards) */
void slc_nccl_free(sl_comm *c);
int slc_nccl_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_nccl_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op);
int slc_nccl_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);
int slc_nccl_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root);
int slc_nccl_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                    int root);
int slc_nccl_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int peer);
/* Non-blocking: enqueued on the stream, an event recorded after it (q kind SLC_REQ_NCCL). */
int slc_nccl_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                        struct sl_coll_req *q);
int slc_nccl_ireduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                             sl_redop op, struct sl_coll_req *q);
int slc_nccl_iallgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                        struct sl_coll_req *q);
/* isend (send = 1) / irecv: held back (SLC_REQ_NCCL_PENDING) until slc_nccl_flush enqueues
 * everything held as one NCCL group; every other NCCL call of the communicator flushes first. */
int slc_nccl_ip2p(sl_comm *c, int send, const void *buf, size_t n, sl_dtype t, int peer,
                  struct sl_coll_req *q);
void slc_nccl_flush(sl_comm *c);
int slc_nccl_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int peer);

/* A ring of n members (the suite's ring, or one row or column of the torus): this rank's
 * position on it and its neighbours' ranks. */
typedef struct slc_ring { int n, pos, right, left; } slc_ring;
/* How a vector is cut into a ring's n chunks: it is first cut into `pieces` pieces (an even
 * split of count, sizes differing by at most one element, or fixed blocks of `block`), and
 * chunk i is the `group` consecutive pieces from piece first + i * group. The plain ring:
 * pieces = n, first 0, group 1. Offsets are from the start of the vector. */
typedef struct slc_layout { size_t count, block; int pieces, first, group, n; } slc_layout;
size_t slc_layout_piece(const slc_layout *L, int p); /* first element of piece p */
/* Ring reduce-scatter and all-gather over ring g (coll_ring.c), on messages tagged `tag`. */
void slc_ring_rs(sl_comm *c, const slc_ring *g, const void *src, void *work, void *final,
                 const slc_layout *L, sl_dtype t, sl_redop op, int tag);
void slc_ring_ag(sl_comm *c, const slc_ring *g, void *buf, const slc_layout *L, sl_dtype t, int tag);
/* The same, bidirectional: each chunk's first half goes clockwise and its second half
 * counter-clockwise in the same steps (the torus's --torus-bidir). */
void slc_ring_rs2(sl_comm *c, const slc_ring *g, const void *src, void *work, void *final,
                  const slc_layout *L, sl_dtype t, sl_redop op, int tag);
void slc_ring_ag2(sl_comm *c, const slc_ring *g, void *buf, const slc_layout *L, sl_dtype t, int tag);

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

/* The fully connected algorithm (coll_direct.c): each phase one round of nranks - 1
 * exchanges, at most c->max_inflight in flight. */
int slc_direct_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_direct_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                              sl_redop op);
int slc_direct_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);
/* The 2-D torus (coll_torus.c): rings along the rows of c's grid, then along its columns. */
int slc_torus_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_torus_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                             sl_redop op);
int slc_torus_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);

/* shm and hier (coll_shm.c, coll_hier.c). slc_node_create makes the shared-memory window of
 * the node communicator `node` (which it then owns), for vectors cut into nslices slices per
 * chunk; slc_node_allreduce runs the node's reduce-scatter and all-gather through it, calling
 * between(c, slice, result, len, t, op) on each slice this rank owns once the node has reduced
 * it (hier: the inter-node all-reduce; NULL for shm). slc_shm_init returns SL_COLL_ENOTSUP
 * where the communicator spans several nodes. */
typedef void (*slc_slice_fn)(sl_comm *c, int slice, void *buf, size_t n, sl_dtype t, sl_redop op);
int slc_node_create(MPI_Comm node, int nslices, slc_node **out);
void slc_node_free(slc_node *nd);
void slc_node_allreduce(sl_comm *c, slc_node *nd, const void *s, void *r, size_t n, sl_dtype t,
                        sl_redop op, slc_slice_fn between);
int slc_shm_init(sl_comm *c);
int slc_shm_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_hier_init(sl_comm *c);
void slc_hier_free(sl_comm *c);
int slc_hier_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);

/* Schedules for the non-blocking all-reduce (coll_nb.c): this rank's part of an algorithm as
 * a list of steps, each one exchange (send a range to one rank while receiving a range from
 * another), after which the received range is reduced into the result or was received straight
 * into it. Ranges are in elements; S is the send buffer, R the result. The engine runs one step
 * at a time, advancing whenever the caller tests, unless steps form a group: a step with join
 * set is posted while the steps before it in its group are still in flight, at most `window`
 * of the group at once (direct's p - 1 exchanges, the bidirectional ring's two directions).
 * A group's steps are completed, and reduced, in their order; the next group starts when the
 * whole group is complete. The steps of a group must not touch each other's ranges. */
enum { SLC_BUF_S, SLC_BUF_R };
typedef struct slc_step {
    int to, from;                /* MPI_PROC_NULL when this step only receives / only sends */
    int send_buf;                /* SLC_BUF_S or SLC_BUF_R */
    size_t send_off, send_len;
    size_t recv_off, recv_len;
    int reduce;                  /* 1: R[recv] = A[recv] op received; 0: received into R */
    int a_buf;                   /* A: SLC_BUF_S or SLC_BUF_R */
    size_t avg_off, avg_len;     /* for avg: this range of R is final after the step; divide it */
    int join;                    /* 1: in the previous step's group (0: starts one) */
    int window;                  /* joining steps: the most of the group in flight at once */
} slc_step;
/* Each fills out[0..) (room for 4 * nranks + 64 steps) and returns the number of steps.
 * The ring's: its reduce-scatter half, its all-gather half or both (the all-reduce), over an
 * even split of count (block 0) or over nranks blocks of `block` elements (reduce-scatter and
 * all-gather, R then being the whole vector). rhd's: the all-reduce, and its reduce-scatter
 * (R the whole vector; this rank's block of R is the result) and all-gather on blocks of n. */
enum { SLC_PART_RS = 1, SLC_PART_AG = 2 };
int slc_ring_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out);
/* One ring's steps over layout L (the torus runs four): `own` is the buffer holding this
 * rank's contribution (SLC_BUF_S, or SLC_BUF_R after an earlier phase); avg: divide the chunk
 * the reduce-scatter completes. */
int slc_ring_steps(const slc_ring *g, const slc_layout *L, int parts, int own, int avg, slc_step *out);
/* The same for the bidirectional ring (slc_ring_rs2, slc_ring_ag2): each of its steps as a
 * group of two, the clockwise half and the counter-clockwise half in flight together. */
int slc_ring_steps2(const slc_ring *g, const slc_layout *L, int parts, int own, int avg, slc_step *out);
/* direct and torus: all-reduce over an even split of count (block 0), or reduce-scatter /
 * all-gather (parts) over nranks blocks of `block`, as the ring's. */
int slc_direct_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out);
int slc_torus_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out);
int slc_rhd_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_rhd_rs_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_rhd_ag_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_tree_schedule(const sl_comm *c, size_t n, slc_step *out);
int slc_dbtree_schedule(const sl_comm *c, size_t n, slc_step *out);

/* rhd's all-reduce switches to recursive doubling (whole vectors, log2 p steps) at or below
 * this many bytes: measured with the allreduce benchmark on a 2-core machine, doubling was the
 * faster up to 64 KiB on 2 ranks and up to 16 KiB on 4 (where it sends 2 S against 1.5 S). */
#ifndef SLC_RHD_DOUBLING_BYTES
#define SLC_RHD_DOUBLING_BYTES ((size_t)32 << 10)
#endif
/* The binomial tree's latency path (host buffers, vectors of at most this many bytes): every
 * child's message is received at once into its own slot, and the broadcast sends to every
 * child at once, in single unsegmented messages. */
#ifndef SLC_TREE_LATENCY_BYTES
#define SLC_TREE_LATENCY_BYTES ((size_t)16 << 10)
#endif
int slc_rhd_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op);
int slc_rhd_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op);
int slc_rhd_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t);

/* The non-blocking engine (coll_nb.c). slc_req_new makes a request in flight on c (a
 * collective takes the next sequence tag: every rank starts collectives in the same order);
 * slc_nb_schedule starts collective w (allreduce, reduce_scatter, allgather) of implementation
 * c->impl as a schedule on host buffers; slc_nb_overlaps says whether c's collectives would. */
struct sl_coll_req *slc_req_new(sl_comm *c, int collective, sl_dtype t, sl_redop op);
void slc_nb_schedule(struct sl_coll_req *q, sl_collective w, const void *s, void *r, size_t n);

#endif
