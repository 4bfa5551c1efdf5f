/* state.h — what one rank of a parallel3d run holds (parallel3d.c, the technique), shared with
 * the files below it: the rank grid and its groups (grid.c), the stage's setup (stage.c), its
 * forwards and backwards in the schedule's order (pass.c), the replicas' gradient exchange and
 * the update (replicas.c), the bytes and memory models and the row (model.c), the weights the
 * driver compares and the program's own checks (check.c). None of these calls into
 * parallel3d.c: what the options decide comes in as arguments. */
#ifndef P3_STATE_H
#define P3_STATE_H

#include "pipe_schedule.h"
#include "sl_train.h"
#include "tp_gpt.h"
#include "buckets.h"
#include "chunks.h"
#include "search.h"

enum { RC_NONE, RC_SELECTIVE, RC_FULL }; /* --recompute */
enum { DIM_TP, DIM_DP, DIM_PP, NDIMS };  /* the grid's dimensions */
enum { G_TP, G_PP, G_DP, NGROUPS };      /* the groups whose bytes are counted */

typedef struct slot { /* one micro-batch in flight in one of the stage's chunks */
    int mb;           /* -1: free */
    int ck;           /* the chunk it holds now (0 but with interleaved) */
    void *res[SL_MLP_MAX_LAYERS + 1]; /* the residual stream into the chunk's block b0 + i, res[nbc] its output */
    mg_block blk[SL_MLP_MAX_LAYERS];  /* block b0 + i's tensors */
    int32_t *tok, *tgt, *tokl, *htok, *htgt;
    void *dsend;                  /* the input gradient sent to the previous stage */
    sl_coll_req *sq_act, *sq_grad; /* their sends in flight */
} slot;

typedef struct p3 {
    mg s;                       /* the tensor-parallel stage: tp_gpt.c's state, its chunks' layers */
    int D, T, P, d, tr, p;      /* the grid and this rank's coordinates */
    int v, nb;                  /* model chunks on the stage (chunks.h), and their blocks */
    p3_chunk ch[P3_MAX_CHUNKS]; /* chunk k: the model's chunk k·P + p (0 embedding, 1..L blocks, L + 1 head) */
    size_t lw_full[SL_MLP_MAX_LAYERS + 3]; /* the tensor-parallel rank's whole vector (s.lw: the stage's,
                                   its chunks' layers one after the other) */
    int m, Bd, lo;              /* micro-batches, the replica's sequences, its first */
    int Bmax;                   /* the largest micro-batch */
    int sched;                  /* pipe_schedule.h's schedule (S_1F1B, S_GPIPE, S_INTERLEAVED) */
    MPI_Comm tp_mpi, dp_mpi, pp_mpi;
    sl_comm *pp;
    op *ops;
    int nops, nslots;
    slot *slots;
    int *slot_of;               /* micro-batch mb of chunk k -> slot (slot_of[mb·v + k]) */
    int recompute;              /* --recompute: RC_FULL, the slots share one set of the stage's tensors;
                                   RC_SELECTIVE, the blocks share one attention-probability buffer */
    void *att;                  /* RC_SELECTIVE: that buffer, (B, NH/T, T, T) */
    int zero;                   /* --zero 1: optimizer state (and f32 master) sharded over the replicas;
                                   2: the 16-bit gradient too (grad16_elems) */
    size_t S, npad;             /* a replica's block of the stage's vector, and D·S (S = npad = np: --zero 0) */
    slot shared;                /* that set: the residual stream inside the stage, the blocks' tensors */
    double sent_dp, sent_pp;    /* bytes over the counted steps */
    double bucket_bytes;        /* --bucket-mb's bytes where this run buckets the replicas' all-reduce, else 0 */
    int nbuckets;               /* --bucket-mb: the stage's buckets (buckets.h; 0: one all-reduce) */
    p3_bucket buckets[P3_MAX_BUCKETS];
    sl_coll_req *breq[P3_MAX_BUCKETS]; /* each bucket's all-reduce in flight */
    double bstart[P3_MAX_BUCKETS], bdone[P3_MAX_BUCKETS];
    int last_mb;                /* the micro-batch of the stage's last backward */
    unsigned long long dp_sent0; /* the replicas' communicator's bytes at the step's start */
    double held[SL_MEM_NCATS];  /* bytes setup allocated, by category (this rank's, for p3_check()) */
    long long inflight_peak;
} p3;

static inline int is_f32(const p3 *q) { return q->s.dt == SL_F32; }
static inline int last_stage(const p3 *q) { return q->p == q->P - 1; }
/* The elements of the 16-bit gradient a rank keeps (s->g; f32: s->grads itself): the padded
 * vector, or under --zero 2 on several replicas its block alone (replicas.c builds the
 * reduce-scatter's 16-bit vector inside the f32 accumulation instead). */
static inline size_t grad16_elems(const p3 *q) { return q->zero == 2 && q->D > 1 ? q->S : q->npad; }
static inline float loss_scale(const p3 *q) { return is_f32(q) ? 1.0f : (float)q->s.ms.sc.scale; }

/* The micro-batch k of the replica's Bd sequences: [*first, *first + *count). */
static inline void micro(const p3 *q, int k, int *first, int *count)
{
    size_t lo, hi;
    sl_share((size_t)q->Bd, q->m, k, &lo, &hi);
    *first = q->lo + (int)lo;
    *count = (int)(hi - lo);
}

/* The stage's chunk k holds the embedding (the model's first chunk), the head (its last). */
static inline int first_chunk(const p3 *q, int k) { return k == 0 && q->p == 0; }
static inline int last_chunk(const p3 *q, int k) { return k == q->v - 1 && last_stage(q); }

/* grid.c: the grid's order, a rank's coordinates, its groups, the grid recorded */
int p3_parse_order(const char *s);
void p3_order_name(char *buf, size_t len);
void p3_coords_of(int r, const int n[NDIMS], int c[NDIMS]);
int p3_rank_of(const int n[NDIMS], const int c[NDIMS]);
void p3_open_groups(sl_train *t, p3 *q);
void p3_record_grid(sl_train *t, const p3 *q);

/* stage.c: a rank's place in a layout, its allocations, their release */
void p3_place(p3 *q, const sl_gpt_dims *g, sl_dtype dt, int global_batch, const p3_layout *L, int sched, int rank);
void p3_chunks(p3 *q);
void p3_setup(sl_train *t, const p3_layout *L, int sched, double bucket_mb);
void p3_release(sl_train *t);
void p3_for_stage_runs(const sl_train *t, p3 *q, int tr, void (*fn)(size_t, size_t, size_t, void *), void *arg);

/* pass.c: one step of the stage */
void p3_step(sl_train *t);

/* replicas.c: the replicas' gradient exchange and the update */
void p3_grads_zero(sl_train *t, p3 *q);
void p3_gradient_done(sl_train *t, p3 *q, int mb, int layer);
void p3_update(sl_train *t, p3 *q);

/* model.c: the bytes and memory models, the row */
size_t p3_stage_params_model(const p3 *q);
void p3_group_bytes_model(const sl_train *t, double b[NGROUPS]);
double p3_bytes_model(const sl_train *t);
void p3_memory_model(const sl_train *t, double bytes[SL_MEM_NCATS]);
double p3_layout_memory(const p3_layout *L, const sl_gpt_dims *g, sl_dtype dt, int global_batch, int sched,
                        sl_optim_kind optim);
void p3_measured(sl_train *t, double sent[NGROUPS]);
void p3_row(sl_train *t, sl_result *res, const char *schedule);

/* check.c: the weights the driver compares, the program's own checks */
const float *p3_weights(sl_train *t, size_t *first, size_t *count);
void p3_gather_weights(sl_train *t, float *full);
int p3_check(sl_train *t, double *error, char *why, size_t len);

#endif
