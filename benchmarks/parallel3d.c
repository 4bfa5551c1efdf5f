/* parallel3d.c — 3-D parallelism of the GPT on the training layer: data x tensor x pipeline.
 *
 * The ranks form a grid D x T x P (--dp --tp --pp, D·T·P = ranks). A rank's coordinates (d, t,
 * p) come from its rank with the dimensions in --order, fastest first: Megatron-LM's order,
 * the default tp-dp-pp, puts the T ranks of a tensor-parallel group on consecutive ranks (on
 * a cluster: one node), then the data-parallel replicas, then the pipeline stages slowest:
 * rank = t + T·(d + D·p). Three groups per rank: tp (same d, p), dp (same t, p), pp (same d, t).
 *
 * What is partitioned, and what is communicated when:
 *   pipeline  the L blocks in P contiguous stages (the first L % P stages one more), the
 *             embedding with stage 0 and the LM head with the last. A replica's sequences of
 *             the step go through in --micro-batches m, in the order of the pipeline schedule
 *             (train/pipe_schedule.c, the lists pipeline.c runs: 1f1b by default, gpipe): each
 *             micro-batch's boundary activation forward and its gradient backward, non-blocking
 *             point to point in the pp group. 1F1B keeps at most P - p micro-batches in flight
 *             on stage p, GPipe all m.
 *   tensor    each block, the embedding and the head split T ways as megatron_mlp --model gpt
 *             splits them (train/tp_gpt.c, the same code): heads and the MLP's inner features
 *             column- then row-parallel, four all-reduces of the micro-batch's N·C per block,
 *             the vocabulary-parallel embedding (one all-reduce) and head with the parallel
 *             cross-entropy (three of N f32 and one of N·C).
 *   data      each stage's slices summed over the D replicas holding them, one all-reduce in
 *             the run's dtype after the last micro-batch, then the optimizer on every rank.
 *   --zero 1  ZeRO stage 1 (Rajbhandari et al. 2020) over the data-parallel group: the stage's
 *             vector padded to D equal blocks of S, replica d keeps the optimizer state (and in
 *             16 bits the f32 master weights) of block d alone; the gradients are
 *             reduce-scattered over the replicas instead of all-reduced, each replica steps its
 *             block and the weights (the run's dtype) are all-gathered back into every replica.
 *             The same bytes on a ring as the all-reduce; optimizer state 1/D.
 *   --recompute selective  Korthikanti et al.'s selective recomputation (2022, section 5): the
 *             attention probabilities (B·(a/T)·s² a block, the largest tensor at long sequences)
 *             are not kept; before each block's backward its attention forward runs again from
 *             the kept QKV into one buffer the blocks share. No communication is repeated.
 *   --recompute full  full activation recomputation: a micro-batch in flight keeps only its stage
 *             input; before its backward the stage's forward runs again (its two all-reduces a
 *             block too) into one set of tensors the micro-batches share.
 *
 * The check: gradients are summed over every micro-batch and replica and the loss normalised
 * over the global batch, so one step is serial full-batch GPT training up to the order of
 * floating-point additions; the trained weights, gathered from replica 0's ranks, are compared
 * with serial training in the run's dtype (the driver's tolerances), and every rank's vector
 * must be bit-identical to the other replicas' of its (t, p) (check()). The measured bytes of
 * each group per step are compared with their models on the suite's ring (exactly, where the
 * ring's chunks are equal), and the parameters a rank holds with the model's count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "gpt_shape.h"
#include "pipe_schedule.h"
#include "parallel3d/buckets.h"
#include "parallel3d/pm_schedule.h"
#include "parallel3d/search.h"
#include "sl_env.h"
#include "sl_env_check.h"
#include "sl_train.h"
#include "tp_gpt.h"
#include "tp_groups.h"

#define P3_VARIANTS(X) X(V_1F1B, "1f1b") X(V_GPIPE, "gpipe")
SL_ENUM(p3_variant, P3_VARIANTS, NVARIANTS);
static const char *const variant_names[] = SL_ENUM_NAMES(P3_VARIANTS);
static const int variant_schedule[NVARIANTS] = {[V_1F1B] = S_1F1B, [V_GPIPE] = S_GPIPE};

static long long opt_dp = 0, opt_tp = 1, opt_pp = 1, opt_micro = 0;
static long long opt_zero = 0;
enum { RC_NONE, RC_SELECTIVE, RC_FULL }; /* --recompute */
static const char *const recompute_names[] = {"none", "selective", "full"};
static int opt_recompute = RC_NONE;
static const char *opt_order = "tp-dp-pp";
static unsigned opt_variants = 1u << V_1F1B;
static int opt_search = 0, opt_predict_only = 0;
static long long opt_search_top = 3, opt_search_sample = 2;
static size_t opt_mem_limit = 0;
static double opt_bucket_mb = 0;

static const sl_opt p3_opts[] = {
    {"dp", 0, SL_OPT_INT, &opt_dp, 1, 1 << 16, NULL, 0, "data-parallel replicas D (default ranks / (T x P))"},
    {"tp", 0, SL_OPT_INT, &opt_tp, 1, 1 << 16, NULL, 0, "tensor-parallel degree T (default 1)"},
    {"pp", 0, SL_OPT_INT, &opt_pp, 1, 1 << 16, NULL, 0, "pipeline stages P (default 1)"},
    {"order", 0, SL_OPT_STRING, &opt_order, 0, 0, NULL, 0,
     "the grid's dimensions, fastest first (default tp-dp-pp, Megatron-LM's)"},
    {"micro-batches", 'm', SL_OPT_INT, &opt_micro, 1, 1 << 30, NULL, 0,
     "micro-batches per replica and step (default P)"},
    {"zero", 0, SL_OPT_INT, &opt_zero, 0, 1, NULL, 0,
     "ZeRO stage over the data-parallel group: 0 replicated, 1 optimizer state (and f32 master) sharded over the D replicas (default 0)"},
    {"recompute", 0, SL_OPT_CHOICE, &opt_recompute, 0, 0, "none|selective|full", 0,
     "activation recomputation: none (default); selective: the attention probabilities are not kept, each block's "
     "attention runs again before its backward; full: each micro-batch keeps its stage input only, the stage's "
     "forward runs again before its backward"},
    {"schedule", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(P3_VARIANTS), 0,
     "pipeline schedules to run (default 1f1b)"},
    {"bucket-mb", 0, SL_OPT_DOUBLE, &opt_bucket_mb, 0, 0, NULL, 0,
     "the replicas' gradient all-reduce in buckets of at least this many MiB of a stage's layers, each started "
     "as soon as its layers' gradients are complete in the stage's last backward (--zero 0; default 0: one "
     "all-reduce after the last micro-batch)"},
    {"search", 0, SL_OPT_FLAG, &opt_search, 0, 0, NULL, 0,
     "find the fastest layout: predict every (D, T, P, micro-batches, zero, recompute) that divides the ranks, the "
     "model and the batch and fits --mem-limit, run the fastest predictions and a sample of the rest, and print "
     "them by measured step beside the prediction (--batch is then the global batch)"},
    {"search-top", 0, SL_OPT_INT, &opt_search_top, 1, 1000, NULL, 0,
     "--search: the fastest predictions to run (default 3)"},
    {"search-sample", 0, SL_OPT_INT, &opt_search_sample, 0, 1000, NULL, 0,
     "--search: layouts to run besides, spread evenly over the rest of the predicted order (default 2)"},
    {"predict-only", 0, SL_OPT_FLAG, &opt_predict_only, 0, 0, NULL, 0,
     "--search: predict every layout and run none (with --predict FILE --predict-ranks N: on that machine at N "
     "ranks, from one rank here; without it, from primitives measured on the launched ranks)"},
    {"mem-limit", 0, SL_OPT_SIZE, &opt_mem_limit, 1, 1LL << 50, NULL, 0,
     "--search: bytes a rank may hold by the memory model (default: the device's free memory, or on the cpu "
     "backend the node's available memory or its cgroup's limit over the ranks on the node)"},
    {0},
};

/* The grid ---------------------------------------------------------------------------------- */

enum { DIM_TP, DIM_DP, DIM_PP, NDIMS };
static const char *const dim_names[NDIMS] = {"tp", "dp", "pp"};
static int order[NDIMS] = {DIM_TP, DIM_DP, DIM_PP}; /* fastest first */

/* --order: a permutation of tp, dp, pp joined by '-' or ','; 0 or -1. */
static int parse_order(const char *s)
{
    int seen = 0, n = 0;
    while (*s && n < NDIMS) {
        int k = -1;
        for (int i = 0; i < NDIMS; i++)
            if (strncmp(s, dim_names[i], 2) == 0) k = i;
        if (k < 0 || (seen >> k & 1)) return -1;
        seen |= 1 << k;
        order[n++] = k;
        s += 2;
        if (*s == '-' || *s == ',') s++;
        else if (*s) return -1;
    }
    return n == NDIMS && !*s ? 0 : -1;
}

/* Rank r's coordinates (c[DIM_TP], c[DIM_DP], c[DIM_PP]) in a grid of n[dim]. */
static void coords_of(int r, const int n[NDIMS], int c[NDIMS])
{
    for (int i = 0; i < NDIMS; i++) {
        c[order[i]] = r % n[order[i]];
        r /= n[order[i]];
    }
}

/* The rank at coordinates c (coords_of's inverse). */
static int rank_of(const int n[NDIMS], const int c[NDIMS])
{
    int r = 0;
    for (int i = NDIMS - 1; i >= 0; i--) r = r * n[order[i]] + c[order[i]];
    return r;
}

/* One rank ------------------------------------------------------------------------------------ */

typedef struct slot { /* one micro-batch in flight on this stage */
    int mb;           /* -1: free */
    void *res[SL_MLP_MAX_LAYERS + 1];
    mg_block blk[SL_MLP_MAX_LAYERS];
    int32_t *tok, *tgt, *tokl, *htok, *htgt;
    void *dsend;                  /* the input gradient sent to the previous stage */
    sl_coll_req *sq_act, *sq_grad; /* their sends in flight */
} slot;

typedef struct p3 {
    mg s;                       /* the tensor-parallel stage: tp_gpt.c's state, layers [l0, l1) */
    int D, T, P, d, tr, p;      /* the grid and this rank's coordinates */
    int l0, l1, b0, b1;         /* layers [l0, l1) (0 embedding, 1..L blocks, L + 1 head); blocks [b0, b1) */
    size_t base;                /* the stage's first element in the tensor-parallel rank's vector */
    size_t lw_full[SL_MLP_MAX_LAYERS + 3];
    int m, Bd, lo;              /* micro-batches, the replica's sequences, its first */
    int Bmax;                   /* the largest micro-batch */
    MPI_Comm tp_mpi, dp_mpi, pp_mpi;
    sl_comm *pp;
    op *ops;
    int nops, nslots;
    slot *slots;
    int *slot_of;               /* micro-batch -> slot */
    int recompute;              /* --recompute: RC_FULL, the slots share one set of the stage's tensors;
                                   RC_SELECTIVE, the blocks share one attention-probability buffer */
    void *att;                  /* RC_SELECTIVE: that buffer, (B, NH/T, T, T) */
    int zero;                   /* --zero 1: optimizer state (and f32 master) sharded over the replicas */
    size_t S, npad;             /* a replica's block of the stage's vector, and D·S (S = npad = np: --zero 0) */
    slot shared;                /* that set: the residual stream inside the stage, the blocks' tensors */
    double sent_dp, sent_pp;    /* bytes over the counted steps */
    int nbuckets;               /* --bucket-mb: the stage's buckets (buckets.h; 0: one all-reduce) */
    p3_bucket buckets[P3_MAX_BUCKETS];
    sl_coll_req *breq[P3_MAX_BUCKETS]; /* each bucket's all-reduce in flight */
    double bstart[P3_MAX_BUCKETS], bdone[P3_MAX_BUCKETS];
    int last_mb;                /* the micro-batch of the stage's last backward */
    unsigned long long dp_sent0; /* the replicas' communicator's bytes at the step's start */
    double held[SL_MEM_NCATS];  /* bytes setup allocated, by category (this rank's, for check()) */
    long long inflight_peak;
} p3;

static int is_f32(const p3 *q) { return q->s.dt == SL_F32; }
static void *alloc(sl_train *t, sl_mem_cat cat, size_t bytes) { return sl_k_malloc(t->be, cat, bytes ? bytes : 1); }
static int last_stage(const p3 *q) { return q->p == q->P - 1; }

static void compute_span(sl_train *t, const char *name, double t0)
{
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
}

/* The micro-batch k of the replica's Bd sequences: [*first, *first + *count). */
static void micro(const p3 *q, int k, int *first, int *count)
{
    size_t lo, hi;
    sl_share((size_t)q->Bd, q->m, k, &lo, &hi);
    *first = q->lo + (int)lo;
    *count = (int)(hi - lo);
}

/* In-flight micro-batches of a stage's list: the most forwards not yet matched by backwards. */
static int inflight(const op *ops, int n)
{
    int cur = 0, most = 0;
    for (int i = 0; i < n; i++) {
        cur += ops[i].kind == 'F' ? 1 : -1;
        if (cur > most) most = cur;
    }
    return most;
}

/* Setup ---------------------------------------------------------------------------------------- */

typedef struct stage_runs {
    size_t base, end;
    void (*fn)(size_t full, size_t local, size_t count, void *arg);
    void *arg;
} stage_runs;

/* mg_runs restricted to the stage's layers, with local offsets in the stage's vector. */
static void stage_run(size_t full, size_t local, size_t count, int replicated, void *arg)
{
    (void)replicated;
    const stage_runs *r = arg;
    if (local >= r->base && local < r->end) r->fn(full, local - r->base, count, r->arg);
}

static void for_stage_runs(const sl_train *t, p3 *q, int tr, void (*fn)(size_t, size_t, size_t, void *), void *arg)
{
    /* mg_runs reads the layout of the whole tensor-parallel vector: put it back for the call */
    size_t saved[SL_MLP_MAX_LAYERS + 3];
    memcpy(saved, q->s.lw, sizeof saved);
    memcpy(q->s.lw, q->lw_full, sizeof saved);
    stage_runs r = {q->base, q->lw_full[q->l1], fn, arg};
    mg_runs(t->m, &q->s, tr, stage_run, &r);
    memcpy(q->s.lw, saved, sizeof saved);
}

typedef struct init_arg {
    const sl_mlp *m;
    float *local;
} init_arg;

static void init_run(size_t full, size_t local, size_t count, void *arg)
{
    const init_arg *a = arg;
    sl_mlp_init_params(a->m, (uint64_t)sl_train_opt.seed, full, count, a->local + local);
}

static void open_groups(sl_train *t, p3 *q)
{
    MPI_Comm world = t->baseline ? MPI_COMM_SELF : t->ctx->comm;
    const sl_mem_space space = sl_comm_space(t->comm);
    const sl_coll impl = sl_comm_impl(t->comm);
    SL_CHECK_MPI(MPI_Comm_split(world, q->d * q->P + q->p, q->tr, &q->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, q->tr * q->P + q->p, q->d, &q->dp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, q->d * q->T + q->tr, q->p, &q->pp_mpi));
    sl_train_coll_ok(sl_comm_create(&q->s.tp, q->tp_mpi, impl, space), "sl_comm_create (tp)");
    sl_train_coll_ok(sl_comm_create(&q->s.dp, q->dp_mpi, impl, space), "sl_comm_create (dp)");
    sl_train_coll_ok(sl_comm_create(&q->pp, q->pp_mpi, impl, space), "sl_comm_create (pp)");
}

/* The grid, once per layout run: every rank's (d, t, p) and host, as a note and in
 * <out>/parallel3d.grid.tsv (a header, then one line per rank and layout). */
static void record_grid(sl_train *t, const p3 *q)
{
    static int header, D, T, P; /* the grid last recorded (the search runs several) */
    if (t->baseline || (header && D == q->D && T == q->T && P == q->P)) return;
    D = q->D, T = q->T, P = q->P;
    const int first = !header;
    header = 1;
    sl_env_local e;
    sl_env_local_capture(&e);
    const int n = t->ctx->nranks;
    char *hosts = t->rank == 0 ? sl_alloc(SL_MEM_OTHER, (size_t)n * sizeof e.host) : NULL;
    SL_CHECK_MPI(MPI_Gather(e.host, (int)sizeof e.host, MPI_CHAR, hosts, (int)sizeof e.host, MPI_CHAR, 0,
                            t->ctx->comm));
    if (t->rank != 0) return;
    char path[PATH_MAX + 64], line[512], ord[16];
    snprintf(ord, sizeof ord, "%s-%s-%s", dim_names[order[0]], dim_names[order[1]], dim_names[order[2]]);
    FILE *f = sl_results_file_open(t->ctx, "grid.tsv", path, sizeof path);
    if (first) sl_results_append_line(f, path, "run_id\trank\thost\td\tt\tp\tdp\ttp\tpp\torder");
    const int dims[NDIMS] = {q->T, q->D, q->P};
    for (int r = 0; r < n; r++) {
        int c[NDIMS];
        coords_of(r, dims, c);
        char *h = hosts + (size_t)r * sizeof e.host;
        h[sizeof e.host - 1] = 0;
        snprintf(line, sizeof line, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s", t->ctx->run_id, r, h, c[DIM_DP],
                 c[DIM_TP], c[DIM_PP], q->D, q->T, q->P, ord);
        sl_results_append_line(f, path, line);
        if (r < 16) sl_note(t->ctx, "rank %d: (d, t, p) = (%d, %d, %d) on %s", r, c[DIM_DP], c[DIM_TP], c[DIM_PP], h);
    }
    if (fclose(f) != 0) SL_FATAL("cannot close %s", path);
    sl_free(hosts);
}

/* --bucket-mb's bytes where this run buckets the replicas' all-reduce, else 0. */
static double bucket_bytes(const sl_train *t, const p3 *q)
{
    return !t->baseline && opt_bucket_mb > 0 && q->D > 1 && !q->zero ? opt_bucket_mb * 1048576 : 0;
}

/* The layout the options ask for (the search sets them to each layout it runs). */
static p3_layout asked(void)
{
    return (p3_layout){(int)opt_dp, (int)opt_tp, (int)opt_pp, (int)opt_micro, (int)opt_zero, opt_recompute};
}

/* Rank `rank`'s place in layout L and what follows from it before anything is allocated: its
 * coordinates, the stage's layers and its part of the flat vector (tp_gpt.c's layout of the
 * whole model, shifted to start at the stage's first layer), the replica's sequences and
 * micro-batches, ZeRO's blocks. setup's first half, and the search's memory model of a layout. */
static void place(p3 *q, const sl_gpt_dims *g, sl_dtype dt, int global_batch, const p3_layout *L, int rank)
{
    mg *s = &q->s;
    q->D = L->D, q->T = L->T, q->P = L->P;
    const int dims[NDIMS] = {q->T, q->D, q->P};
    int c[NDIMS];
    coords_of(rank, dims, c);
    q->d = c[DIM_DP], q->tr = c[DIM_TP], q->p = c[DIM_PP];
    s->t = q->T, s->d = q->D, s->tr = q->tr, s->rep = q->d;
    s->L = g->layers, s->C = g->C, s->NH = g->NH, s->T = g->T, s->V = g->V, s->maxT = g->max_T;
    s->Vl = s->V / s->t, s->Cl = s->C / s->t, s->NHl = s->NH / s->t;
    s->dt = dt;
    mg_layout(s);
    memcpy(q->lw_full, s->lw, sizeof q->lw_full);
    size_t blo, bhi;
    sl_share((size_t)s->L, q->P, q->p, &blo, &bhi);
    q->b0 = (int)blo + 1, q->b1 = (int)bhi + 1;
    q->l0 = q->p == 0 ? 0 : q->b0;
    q->l1 = last_stage(q) ? s->L + 2 : q->b1;
    q->base = q->lw_full[q->l0];
    for (int l = q->l0; l <= q->l1; l++) s->lw[l] = q->lw_full[l] - q->base;
    s->np = s->lw[q->l1];
    /* the replica's sequences and its micro-batches */
    size_t lo, hi;
    sl_share((size_t)global_batch, q->D, q->d, &lo, &hi);
    q->lo = (int)lo;
    q->Bd = (int)(hi - lo);
    q->m = L->m;
    if (q->m > q->Bd) q->m = q->Bd > 0 ? q->Bd : 1;
    q->Bmax = (q->Bd + q->m - 1) / q->m;
    s->B = q->Bmax, s->N = s->B * s->T;
    s->Tl = s->T, s->Nl = s->N, s->p0 = 0; /* no sequence parallelism: every position held */
    /* --zero 1: the vectors the replicas exchange padded to D equal blocks (the reduce-scatter
     * and the all-gather move equal blocks; the padding stays zero), the optimizer state and
     * the f32 master (16 bits) of block d alone */
    q->zero = L->zero;
    q->S = q->zero ? (s->np + (size_t)q->D - 1) / (size_t)q->D : s->np;
    q->npad = q->zero ? (size_t)q->D * q->S : s->np;
    q->recompute = L->recompute;
}

static void setup(sl_train *t)
{
    p3 *q = calloc(1, sizeof *q);
    if (!q) SL_FATAL("out of memory");
    t->state = q;
    mg *s = &q->s;
    const sl_mem_space space = t->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    for (int k = 0; k < SL_MEM_NCATS; k++) q->held[k] = -(double)sl_mem_current(space, (sl_mem_cat)k);
    const p3_layout one = {1, 1, 1, 1, 0, 0}, L = t->baseline ? one : asked();
    place(q, &t->m->gpt, t->dtype, t->global_batch, &L, t->rank);
    t->lo = q->lo, t->hi = q->lo + q->Bd;
    if (t->planning == 2) return; /* a rank not launched: what the schedule reads, and no more */
    if (!t->planning) record_grid(t, q);
    open_groups(t, q);

    /* the schedule's list for this stage and the slots its in-flight micro-batches need */
    const geometry geo = {.p = q->P, .v = 1, .m = q->m, .nsteps = 1};
    q->ops = calloc((size_t)ops_capacity(&geo), sizeof *q->ops);
    q->slot_of = calloc((size_t)q->m, sizeof *q->slot_of);
    if (!q->ops || !q->slot_of) SL_FATAL("out of memory");
    q->nops = builders[variant_schedule[t->variant]](&geo, q->p, q->ops);
    q->nslots = inflight(q->ops, q->nops);
    for (int i = 0; i < q->nops; i++)
        if (q->ops[i].kind == 'B') q->last_mb = q->ops[i].mb;
    if (bucket_bytes(t, q) > 0)
        q->nbuckets = p3_buckets(s->lw, q->l0, q->l1, sl_dtype_size(s->dt), bucket_bytes(t, q), q->buckets);
    q->slots = calloc((size_t)q->nslots, sizeof *q->slots);
    if (!q->slots) SL_FATAL("out of memory");

    const size_t f4 = sizeof(float), es = sl_dtype_size(s->dt), N = (size_t)s->N, C = (size_t)s->C;
    const size_t Cl = (size_t)s->Cl, NC = N * C, NV = N * (size_t)s->Vl;
    const size_t npad = q->npad, master = q->zero && !is_f32(q) ? q->S : npad;
    s->params = alloc(t, SL_MEM_PARAMS, master * f4);
    s->grads = alloc(t, SL_MEM_GRADS, npad * f4);
    s->optim = alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * q->S * f4);
    /* the stage's f32 weights from the seed (a sharded master takes its block of them) */
    float *init = master < npad ? alloc(t, SL_MEM_OTHER, npad * f4) : s->params;
    sl_k_memset0(t->be, init, npad * f4); /* the embedding's zero row, the padding */
    init_arg ia = {t->m, init};
    for_stage_runs(t, q, q->tr, init_run, &ia);
    sl_k_sync(t->be);
    s->w = is_f32(q) ? (void *)s->params : alloc(t, SL_MEM_PARAMS, npad * es);
    s->g = is_f32(q) ? (void *)s->grads : alloc(t, SL_MEM_GRADS, npad * es);
    if (!is_f32(q)) {
        sl_k_cast(t->be, npad, init, SL_F32, s->w, s->dt, NULL);
        sl_train_mixed_init(&s->ms, s->dt);
    }
    if (init != s->params) {
        sl_k_memcpy(t->be, s->params, init + (size_t)q->d * q->S, q->S * f4, SL_K_D2D);
        sl_k_sync(t->be);
        sl_k_free(t->be, init);
    }
    /* per slot: the residual stream into each block and the head (kept), the stage's output
     * (sent), the blocks' tensors, the tokens (first and last stage) and the input gradient
     * sent back. --recompute full: a slot keeps its input and output only, the rest is one set */
    const int rlo = q->b0, rhi = last_stage(q) ? s->L + 1 : q->b1;
    const int tokens = q->p == 0 || last_stage(q), full = q->recompute == RC_FULL;
    if (q->recompute == RC_SELECTIVE && q->b1 > q->b0) /* one attention-probability buffer for the stage */
        q->att = alloc(t, SL_MEM_ACTIV, (size_t)s->B * s->NHl * s->T * s->T * es);
    for (int k = -1; k < q->nslots; k++) {
        slot *sl = k < 0 ? &q->shared : &q->slots[k];
        if (k < 0 && !full) continue;
        sl->mb = -1;
        for (int l = rlo; l <= rhi; l++) {
            const int own = l == rlo || (l == q->b1 && !last_stage(q));
            if (full && k >= 0 && !own) sl->res[l] = q->shared.res[l];
            else if (!(full && k < 0 && own))
                sl->res[l] = alloc(t, l == q->b1 && !last_stage(q) ? SL_MEM_COMM : SL_MEM_ACTIV, NC * es);
        }
        if (full && k >= 0) memcpy(sl->blk, q->shared.blk, sizeof sl->blk);
        for (int l = q->b0; l < q->b1 && !(full && k >= 0); l++) mg_block_alloc(t, s, &sl->blk[l - 1], q->att);
        if (k < 0) continue;
        if (tokens) {
            sl->tok = alloc(t, SL_MEM_DATA, N * sizeof(int32_t)), sl->tgt = alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
            sl->tokl = alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
            sl->htok = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
            sl->htgt = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
        }
        if (q->p > 0) sl->dsend = alloc(t, SL_MEM_COMM, NC * es);
    }
    if (last_stage(q)) { /* the head's forward and backward run at once: not kept across operations */
        s->lnf = alloc(t, SL_MEM_ACTIV, NC * es);
        s->mf = alloc(t, SL_MEM_ACTIV, N * f4), s->rf = alloc(t, SL_MEM_ACTIV, N * f4);
    }
    s->dres[0] = alloc(t, SL_MEM_COMM, NC * es), s->dres[1] = alloc(t, SL_MEM_COMM, NC * es);
    s->dpart = alloc(t, SL_MEM_COMM, NC * es);
    s->rowmax = alloc(t, SL_MEM_COMM, N * f4), s->rowtgt = alloc(t, SL_MEM_COMM, N * f4);
    s->rowsum = alloc(t, SL_MEM_COMM, N * f4);
    s->dh = alloc(t, SL_MEM_OTHER, NC * es), s->dqkv = alloc(t, SL_MEM_OTHER, 3 * N * Cl * es);
    s->datty = alloc(t, SL_MEM_OTHER, N * Cl * es), s->dfc = alloc(t, SL_MEM_OTHER, 4 * N * Cl * es);
    s->zero_wpe = alloc(t, SL_MEM_OTHER, (size_t)s->T * C * es);
    sl_k_memset0(t->be, s->zero_wpe, (size_t)s->T * C * es);
    const size_t widest = 4 * Cl > C ? 4 * Cl : C;
    if (!is_f32(q)) {
        s->lin32 = alloc(t, SL_MEM_OTHER, N * widest * f4);
        if (last_stage(q)) s->dlog16 = alloc(t, SL_MEM_OTHER, NV * es);
    }
    s->vec32 = alloc(t, SL_MEM_OTHER, 4 * C * f4);
    if (last_stage(q)) {
        s->logits = alloc(t, SL_MEM_OTHER, NV * f4), s->dlog = alloc(t, SL_MEM_OTHER, NV * f4);
        if (t->be != SL_BACKEND_CPU) s->hlog = sl_alloc(SL_MEM_OTHER, (2 * NV + 3 * N) * f4);
    }
    s->attn_work = alloc(t, SL_MEM_OTHER, sl_k_attention_work_bytes(s->dt, s->B, s->NHl, s->T));
    for (int k = 0; k < SL_MEM_NCATS; k++) q->held[k] += (double)sl_mem_current(space, (sl_mem_cat)k);
}

static void release(sl_train *t)
{
    p3 *q = t->state;
    mg *s = &q->s;
    if (t->planning == 2) {
        free(q);
        return;
    }
    for (int k = -1; k < q->nslots; k++) {
        slot *sl = k < 0 ? &q->shared : &q->slots[k];
        for (int l = 0; l <= SL_MLP_MAX_LAYERS; l++)
            if (k < 0 || q->recompute != RC_FULL || sl->res[l] != q->shared.res[l]) sl_k_free(t->be, sl->res[l]);
        for (int l = q->b0; l < q->b1 && !(k >= 0 && q->recompute == RC_FULL); l++)
            mg_block_free(t, &sl->blk[l - 1], q->att);
        sl_k_free(t->be, sl->tok), sl_k_free(t->be, sl->tgt), sl_k_free(t->be, sl->tokl), sl_k_free(t->be, sl->dsend);
        if (sl->htok) sl_free(sl->htok), sl_free(sl->htgt);
    }
    void *p[] = {q->att, s->params, s->grads, s->optim, is_f32(q) ? NULL : s->w, is_f32(q) ? NULL : s->g, s->lnf, s->mf,
                 s->rf, s->dres[0], s->dres[1], s->dpart, s->rowmax, s->rowtgt, s->rowsum, s->dh, s->dqkv,
                 s->datty, s->dfc, s->zero_wpe, s->lin32, s->dlog16, s->vec32, s->logits, s->dlog, s->attn_work};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(t->be, p[i]);
    if (s->hlog) sl_free(s->hlog);
    sl_comm_destroy(s->tp), sl_comm_destroy(s->dp), sl_comm_destroy(q->pp);
    SL_CHECK_MPI(MPI_Comm_free(&q->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(&q->dp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(&q->pp_mpi));
    free(q->ops), free(q->slot_of), free(q->slots);
    free(q);
}

/* The step ---------------------------------------------------------------------------------- */

/* Puts slot sl's activations and the micro-batch's size in place for tp_gpt.c's layers, and
 * t->lo at its first sequence (the tokens' and the dropout masks' numbering). */
static void install(sl_train *t, p3 *q, slot *sl)
{
    mg *s = &q->s;
    int first, count;
    micro(q, sl->mb, &first, &count);
    t->lo = first;
    s->B = count, s->N = count * s->T, s->Nl = s->N;
    memcpy(s->res, sl->res, sizeof s->res);
    memcpy(s->blk, sl->blk, sizeof s->blk);
    s->tok = sl->tok, s->tgt = sl->tgt, s->tokl = sl->tokl, s->htok = sl->htok, s->htgt = sl->htgt;
}

static void wait_req(sl_train *t, sl_coll_req **r, const char *name)
{
    if (!*r) return;
    const double t0 = sl_now();
    sl_train_coll_ok(sl_coll_wait(*r), "sl_coll_wait");
    *r = NULL;
    sl_train_blocking(t, name, t0);
}

/* A boundary tensor of the micro-batch from stage `from`, waited for (the time is the
 * pipeline's bubble: this stage idles until its neighbour has it). */
static void recv_boundary(sl_train *t, p3 *q, void *buf, int from, int tag, const char *name)
{
    const double t0 = sl_now();
    sl_coll_req *r = NULL;
    sl_train_coll_ok(sl_coll_irecv(q->pp, buf, (size_t)q->s.N * q->s.C, q->s.dt, from, tag, &r), name);
    sl_train_coll_ok(sl_coll_wait(r), name);
    sl_train_span(t, SL_PHASE_BUBBLE, name, t0, sl_now());
}

static void send_boundary(sl_train *t, p3 *q, const void *buf, int to, int tag, sl_coll_req **r, const char *name)
{
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(q->pp);
    const double t0 = sl_now();
    sl_train_coll_ok(sl_coll_isend(q->pp, buf, (size_t)q->s.N * q->s.C, q->s.dt, to, tag, r), name);
    sl_train_blocking(t, name, t0);
    if (q->s.counting) q->sent_pp += (double)(sl_comm_bytes_sent(q->pp) - b0);
}

static void forward(sl_train *t, p3 *q, int mb)
{
    mg *s = &q->s;
    slot *sl = NULL;
    for (int k = 0; k < q->nslots && !sl; k++)
        if (q->slots[k].mb < 0) sl = &q->slots[k];
    if (!sl) SL_FATAL("parallel3d: stage %d has no free slot for micro-batch %d", q->p, mb);
    wait_req(t, &sl->sq_act, "send activation"); /* its last micro-batch's output has left */
    sl->mb = mb;
    q->slot_of[mb] = (int)(sl - q->slots);
    install(t, q, sl);
    if (q->p == 0 || last_stage(q)) mg_load(t, s);
    if (q->p == 0) mg_embedding_forward(t, s);
    else recv_boundary(t, q, s->res[q->b0], q->p - 1, 2 * mb, "recv activation");
    for (int l = q->b0; l < q->b1; l++) mg_block_forward(t, s, l);
    if (!last_stage(q)) send_boundary(t, q, s->res[q->b1], q->p + 1, 2 * mb, &sl->sq_act, "send activation");
}

static float loss_scale(const p3 *q) { return is_f32(q) ? 1.0f : (float)q->s.ms.sc.scale; }

/* --bucket-mb, in the stage's last backward: layer's gradient is complete; the bucket it ends
 * (its lowest layer) is rounded into the run's dtype and its all-reduce over the replicas
 * started (SL_TEST_CORRUPT=1: the last replica halves it first, as step() does without buckets).
 * An implementation that cannot overlap finishes inside the start. */
static void gradient_done(sl_train *t, p3 *q, int mb, int layer)
{
    mg *s = &q->s;
    if (!q->nbuckets || mb != q->last_mb) return;
    for (int b = 0; b < q->nbuckets; b++) {
        const p3_bucket *k = &q->buckets[b];
        if (k->lo != layer) continue;
        const double t0 = sl_now();
        void *g = (char *)s->g + k->off * sl_dtype_size(s->dt);
        if (!is_f32(q)) sl_k_cast(t->be, k->count, s->grads + k->off, SL_F32, g, s->dt, NULL);
        if (sl_test_corrupt() && q->d == q->D - 1) sl_k_scale(t->be, s->dt, k->count, g, 0.5);
        sl_k_sync(t->be);
        compute_span(t, "round bucket", t0);
        q->bstart[b] = sl_now();
        sl_train_coll_ok(sl_coll_iallreduce(s->dp, g, g, k->count, s->dt, SL_OP_SUM, &q->breq[b]),
                         "sl_coll_iallreduce (replicas)");
        int done = 0;
        sl_train_coll_ok(sl_coll_test(q->breq[b], &done), "sl_coll_test");
        sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - q->bstart[b]);
    }
}

static void backward(sl_train *t, p3 *q, int mb)
{
    mg *s = &q->s;
    slot *sl = &q->slots[q->slot_of[mb]];
    install(t, q, sl);
    wait_req(t, &sl->sq_grad, "send gradient");
    if (q->recompute == RC_FULL) { /* the stage's forward again from its kept input (its output's send has left) */
        wait_req(t, &sl->sq_act, "send activation");
        for (int l = q->b0; l < q->b1; l++) mg_block_forward(t, s, l);
    }
    int cur = 0;
    if (last_stage(q)) {
        const double loss = mg_head(t, s, sl_task_loss_norm(t->task, t->global_batch), loss_scale(q), s->dres[0]);
        if (q->tr == 0) t->loss += loss; /* every rank of the group has it: counted once */
        gradient_done(t, q, mb, s->L + 1);
    } else {
        recv_boundary(t, q, s->dres[0], q->p + 1, 2 * mb + 1, "recv gradient");
    }
    for (int l = q->b1 - 1; l >= q->b0; l--, cur = !cur) {
        if (q->recompute == RC_SELECTIVE) mg_attention_again(t, s, l); /* into the shared buffer */
        mg_block_backward(t, s, l, s->dres[cur], l == q->b0 && q->p > 0 ? sl->dsend : s->dres[!cur]);
        gradient_done(t, q, mb, l);
    }
    if (q->p == 0) {
        mg_embedding_backward(t, s, s->dres[cur]);
        gradient_done(t, q, mb, 0);
    } else {
        send_boundary(t, q, sl->dsend, q->p - 1, 2 * mb + 1, &sl->sq_grad, "send gradient");
    }
    sl->mb = -1;
}

/* A collective of the data-parallel group on the run's dtype, its bytes counted: the
 * all-reduce of the replicas' gradients, or ZeRO-1's reduce-scatter of them (n elements a
 * replica) and all-gather of the weights. */
enum { DP_ALLREDUCE, DP_REDUCE_SCATTER, DP_ALLGATHER };
static void dp_coll(sl_train *t, p3 *q, int kind, const void *send, void *recv, size_t n)
{
    static const char *const names[] = {"allreduce (replicas)", "reduce-scatter (replicas)", "allgather (replicas)"};
    mg *s = &q->s;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(s->dp);
    const double t0 = sl_now();
    int rc = kind == DP_ALLREDUCE        ? sl_coll_allreduce(s->dp, send, recv, n, s->dt, SL_OP_SUM)
             : kind == DP_REDUCE_SCATTER ? sl_coll_reduce_scatter(s->dp, send, recv, n, s->dt, SL_OP_SUM)
                                         : sl_coll_allgather(s->dp, send, recv, n, s->dt);
    sl_train_coll_ok(rc, names[kind]);
    sl_train_blocking(t, names[kind], t0);
    q->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - b0);
}

/* The elements of block d that are the stage's (the last block ends in padding). */
static size_t own_elems(const p3 *q)
{
    const size_t first = (size_t)q->d * q->S;
    return first >= q->s.np ? 0 : q->s.np - first < q->S ? q->s.np - first : q->S;
}

/* The replicas' gradients summed and the optimizer stepped: on the whole vector after an
 * all-reduce (--zero 0), or on block d after a reduce-scatter, the blocks all-gathered back into
 * every replica's weights (--zero 1; not on a step every rank skipped: nothing changed). In 16
 * bits the overflow flag is OR-ed over every rank: the stages, slices and blocks are one model. */
static void update(sl_train *t, p3 *q)
{
    mg *s = &q->s;
    const size_t es = sl_dtype_size(s->dt), off = q->zero ? (size_t)q->d * q->S : 0;
    const size_t n = q->zero ? own_elems(q) : s->np;
    void *g = (char *)s->g + off * es, *w = (char *)s->w + off * es;
    float *master = is_f32(q) || !q->zero ? s->params + off : s->params;
    if (q->nbuckets) { /* the buckets' all-reduces, started in the last backward: waited for */
        const double t0 = sl_now();
        double span = 0, reach = 0; /* the time some bucket was in flight (they start in order) */
        for (int b = 0; b < q->nbuckets; b++) {
            sl_train_coll_ok(sl_coll_wait(q->breq[b]), "sl_coll_wait (replicas)");
            q->breq[b] = NULL;
            q->bdone[b] = sl_now();
            const double from = q->bstart[b] > reach ? q->bstart[b] : reach;
            if (q->bdone[b] > from) span += q->bdone[b] - from;
            reach = q->bdone[b] > reach ? q->bdone[b] : reach;
        }
        sl_train_span(t, SL_PHASE_EXPOSED, "wait for buckets (replicas)", t0, sl_now());
        sl_train_record(t, SL_PHASE_COMM, span);
        q->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - q->dp_sent0);
    } else if (q->D > 1) {
        if (q->zero) dp_coll(t, q, DP_REDUCE_SCATTER, s->g, g, q->S);
        else dp_coll(t, q, DP_ALLREDUCE, s->g, s->g, s->np);
    }
    int stepped = 1;
    if (is_f32(q)) {
        sl_train_optimize(t, s->params, s->grads, s->optim, off, n);
    } else {
        const double t0 = sl_now();
        sl_k_cast(t->be, n, g, s->dt, s->grads + off, SL_F32, NULL);
        const size_t bad = sl_k_scale_check(t->be, n, s->grads + off, 1.0f / loss_scale(q));
        sl_optim o;
        stepped = sl_train_mixed_decide(t, &s->ms, bad > 0, &o);
        if (stepped) {
            sl_optim_step(t->be, &o, n, master, s->grads + off, s->optim);
            sl_k_cast(t->be, n, master, SL_F32, w, s->dt, NULL);
        }
        compute_span(t, "unscale + optimizer (f32 master)", t0);
    }
    if (q->zero && q->D > 1 && stepped) dp_coll(t, q, DP_ALLGATHER, w, s->w, q->S);
}

static void step(sl_train *t)
{
    p3 *q = t->state;
    mg *s = &q->s;
    s->counting = 1;
    q->dp_sent0 = sl_comm_bytes_sent(s->dp);
    double t0 = sl_now();
    sl_k_memset0(t->be, s->grads, q->npad * sizeof(float));
    compute_span(t, "zero grads", t0);
    int live = 0;
    for (int i = 0; i < q->nops; i++) {
        if (q->ops[i].kind == 'F') forward(t, q, q->ops[i].mb), live++;
        else backward(t, q, q->ops[i].mb), live--;
        if (live > q->inflight_peak) q->inflight_peak = live;
    }
    for (int k = 0; k < q->nslots; k++) {
        wait_req(t, &q->slots[k].sq_act, "send activation");
        wait_req(t, &q->slots[k].sq_grad, "send gradient");
    }
    t->lo = q->lo;
    if (!is_f32(q) && !q->nbuckets) { /* the gradient as the serial run keeps it: rounded into dt once */
        t0 = sl_now();
        sl_k_cast(t->be, q->npad, s->grads, SL_F32, s->g, s->dt, NULL);
        compute_span(t, "round grads", t0);
    }
    /* SL_TEST_CORRUPT=1 (the tests of the check): the last replica halves its gradients before
     * the sum (an average taken where a sum is due), a defect the serial reference does not share */
    if (sl_test_corrupt() && q->D > 1 && q->d == q->D - 1 && !q->nbuckets) sl_k_scale(t->be, s->dt, s->np, s->g, 0.5);
    update(t, q);
    s->counting = 0;
}

/* Weights ----------------------------------------------------------------------------------- */

/* A run every rank of the world holds whole, for the driver's bit-for-bit comparison: stage
 * 0's position table, the other stages' first layer norm (replicated in the tensor-parallel
 * group; the replicas' copies are compared in full by check()). */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    p3 *q = t->state;
    const mg *s = &q->s;
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(s->C, off);
    if (q->zero && !is_f32(q)) { /* the f32 master is sharded: none held whole (gather_weights) */
        *first = *count = 0;
        return s->params;
    }
    if (q->p == 0) {
        *first = (size_t)s->V * s->C, *count = (size_t)s->maxT * s->C;
        return s->params + ((size_t)s->Vl + 1) * s->C;
    }
    *first = t->m->w_off[q->b0] + off[SL_GPT_LN1W];
    *count = off[SL_GPT_LN1B + 1] - off[SL_GPT_LN1W];
    return s->params + s->lw[q->b0] + s->boff[SL_GPT_LN1W];
}

typedef struct place_arg {
    const float *local;
    float *full;
} place_arg;

static void place_run(size_t full, size_t local, size_t count, void *arg)
{
    const place_arg *a = arg;
    memcpy(a->full + full, a->local + local, count * sizeof(float));
}

/* Replica 0's ranks' vectors placed into the flat vector on rank 0 (the grid's (0, 0, 0)). */
static void gather_weights(sl_train *t, float *full)
{
    p3 *q = t->state;
    const int n = t->ctx->nranks;
    int mine = q->d == 0 ? (int)q->s.np : 0;
    if (q->s.np > (size_t)1 << 30) SL_FATAL("parallel3d: %zu parameters on a rank: too many to gather", q->s.np);
    int *counts = t->rank == 0 ? calloc((size_t)n, sizeof *counts) : NULL, *displs = NULL;
    SL_CHECK_MPI(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, t->ctx->comm));
    float *all = NULL;
    if (t->rank == 0) {
        displs = calloc((size_t)n, sizeof *displs);
        if (!counts || !displs) SL_FATAL("out of memory");
        size_t total = 0;
        for (int r = 0; r < n; r++) displs[r] = (int)total, total += (size_t)counts[r];
        all = sl_alloc(SL_MEM_OTHER, total * sizeof(float) + 1);
    }
    /* a sharded f32 master (--zero 1, 16 bits): the replicas' blocks gathered first */
    const float *vec = q->s.params;
    float *blocks = NULL;
    if (q->zero && !is_f32(q)) {
        blocks = sl_k_malloc(t->be, SL_MEM_OTHER, q->npad * sizeof(float));
        sl_train_coll_ok(sl_coll_allgather(q->s.dp, q->s.params, blocks, q->S, SL_F32), "allgather (weights for the check)");
        vec = blocks;
    }
    float *host = sl_alloc(SL_MEM_OTHER, q->s.np * sizeof(float) + 1);
    sl_k_memcpy(t->be, host, vec, q->s.np * sizeof(float), SL_K_D2H);
    if (blocks) sl_k_free(t->be, blocks);
    SL_CHECK_MPI(MPI_Gatherv(host, mine, MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, t->ctx->comm));
    if (t->rank == 0) {
        const int dims[NDIMS] = {q->T, q->D, q->P};
        p3 other = *q; /* rank r's stage, from its coordinates */
        for (int r = 0; r < n; r++) {
            if (!counts[r]) continue;
            int c[NDIMS];
            coords_of(r, dims, c);
            size_t blo, bhi;
            sl_share((size_t)q->s.L, q->P, c[DIM_PP], &blo, &bhi);
            other.p = c[DIM_PP];
            other.l0 = other.p == 0 ? 0 : (int)blo + 1;
            other.l1 = other.p == q->P - 1 ? q->s.L + 2 : (int)bhi + 1;
            other.base = q->lw_full[other.l0];
            place_arg a = {all + displs[r], full};
            for_stage_runs(t, &other, c[DIM_TP], place_run, &a);
        }
    }
    sl_free(host);
    if (all) sl_free(all);
    free(counts), free(displs);
}

/* Models ------------------------------------------------------------------------------------ */

/* What a rank sends in an all-reduce of n elements of es bytes over k ranks on a ring, and in a
 * reduce-scatter or an all-gather of them (n: the whole vector, k blocks). */
static double ring_allreduce(int k, double n, double es) { return k > 1 ? 2.0 * (k - 1) / k * n * es : 0; }
static double ring_scatter(int k, double n, double es) { return k > 1 ? (double)(k - 1) / k * n * es : 0; }

/* --zero 1's block of the stage's model parameters np over D replicas (np itself with --zero 0),
 * and the padded vector D·S. */
static double shard_model(const p3 *q, double np) { return q->zero ? ceil(np / q->D) : np; }
static double padded_model(const p3 *q, double np) { return q->zero ? q->D * shard_model(q, np) : np; }

/* The parameters of a stage as Megatron-LM splits them (megatron_mlp's mg_params_model, for
 * the stage's layers): per block (12C² + 7C)/T + 6C; stage 0 the embedding V·C/T plus this
 * program's zero row C and the position table max_T·C; the last stage the head V·C/T + 2C. */
static size_t stage_params_model(const p3 *q)
{
    const mg *s = &q->s;
    const size_t C = (size_t)s->C, T = (size_t)q->T;
    size_t n = (size_t)(q->b1 - q->b0) * ((12 * C * C + 7 * C) / T + 6 * C);
    if (q->p == 0) n += (size_t)s->V * C / T + C + (size_t)s->maxT * C;
    if (last_stage(q)) n += (size_t)s->V * C / T + 2 * C;
    return n;
}

/* Bytes this rank sends per step in each group, on the suite's ring: tp, per micro-batch of N
 * tokens, the embedding's all-reduce of N·C (stage 0), four of N·C per block, the head's three
 * of N f32 and one of N·C (last stage); pp, the micro-batch's N·C boundary activation forward
 * (all but the last stage) and its gradient backward (all but the first); dp, the all-reduce of
 * the stage's slices, or with --zero 1 their reduce-scatter and the weights' all-gather (the same
 * bytes) on the steps that were applied (a 16-bit step every rank skipped gathers nothing).
 * Elements of the run's dtype. */
enum { G_TP, G_PP, G_DP, NGROUPS };
static void group_bytes_model(const sl_train *t, double b[NGROUPS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    const double es = (double)sl_dtype_size(t->dtype), C = s->C;
    b[G_TP] = b[G_PP] = 0;
    for (int k = 0; k < q->m; k++) {
        int first, count;
        micro(q, k, &first, &count);
        const double N = (double)count * s->T;
        if (q->p == 0) b[G_TP] += ring_allreduce(q->T, N * C, es);
        /* four all-reduces a block; --recompute full: its forward's two again (selective repeats
         * the attention alone, which communicates nothing) */
        b[G_TP] += (q->b1 - q->b0) * (q->recompute == RC_FULL ? 6 : 4) * ring_allreduce(q->T, N * C, es);
        if (last_stage(q)) b[G_TP] += 3 * ring_allreduce(q->T, N, 4) + ring_allreduce(q->T, N * C, es);
        b[G_PP] += ((q->p > 0) + !last_stage(q)) * N * C * es;
    }
    if (q->zero) {
        const sl_loss_scaler *sc = &s->ms.sc;
        const double applied = is_f32(q) || sc->steps == 0 ? 1 : (double)(sc->steps - sc->skipped) / sc->steps;
        const double npad = padded_model(q, (double)stage_params_model(q));
        b[G_DP] = ring_scatter(q->D, npad, es) * (1 + applied);
    } else if (q->nbuckets) {
        b[G_DP] = 0;
        for (int k = 0; k < q->nbuckets; k++) b[G_DP] += ring_allreduce(q->D, (double)q->buckets[k].count, es);
    } else {
        b[G_DP] = ring_allreduce(q->D, (double)s->np, es);
    }
}

static double bytes_model(const sl_train *t)
{
    double b[NGROUPS];
    group_bytes_model(t, b);
    return b[G_TP] + b[G_PP] + b[G_DP];
}

/* Memory of this rank, the combined model: the stage's 1/T slices (f32, with their 16-bit copy
 * in f16/bf16) and as many gradients, the optimizer state of those (--zero 1: the vectors padded
 * to D blocks of S, the optimizer state and a 16-bit run's f32 master of one block: 1/D);
 * activations: the
 * micro-batches the schedule keeps in flight on stage p (1F1B: min(m, P - p); GPipe: m), each
 * with, per block, megatron_mlp's 3NC + 12N·C/T + b·(a/T)·s² values and 4N f32 moments plus
 * the residual stream into each block (NC), and on the last stage the stream into the head;
 * the head's final norm once (its forward and backward run together). --recompute full: each
 * micro-batch in flight keeps the stage's input (NC) alone, and one set of the rest serves the
 * micro-batch being recomputed; selective: the blocks keep all but the b·(a/T)·s² probabilities,
 * of which the stage holds one block's. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    const double np = (double)stage_params_model(q), es = (double)sl_dtype_size(s->dt);
    const double S = shard_model(q, np), n = padded_model(q, np);
    const double copy = s->dt == SL_F32 ? 0 : es * n;
    bytes[SL_MEM_PARAMS] = 4 * (q->zero && s->dt != SL_F32 ? S : n) + copy;
    bytes[SL_MEM_GRADS] = 4 * n + copy;
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * 4 * S;
    const int P = q->P, p = q->p, m = q->m;
    const double flight = t->variant == V_GPIPE ? m : (m < P - p ? m : P - p);
    const double N = (double)q->Bmax * s->T, NC = N * s->C, NCl = NC / q->T;
    const double att = (double)q->Bmax * (s->NH / q->T) * s->T * s->T * es; /* a block's probabilities */
    const double block = (3 * NC + 12 * NCl) * es + att + 4 * N * 4;
    const int nb = q->b1 - q->b0;
    const double head = last_stage(q) ? NC * es + 2 * N * 4 : 0, into_head = last_stage(q) ? NC * es : 0;
    if (q->recompute == RC_FULL) /* each micro-batch's input, and one set of the rest for the one recomputed */
        bytes[SL_MEM_ACTIV] = flight * NC * es + nb * block + (nb - 1) * NC * es + into_head + head;
    else if (q->recompute == RC_SELECTIVE) /* no block keeps its probabilities: one buffer serves them all */
        bytes[SL_MEM_ACTIV] = flight * (nb * (block - att + NC * es) + into_head) + head + (nb > 0 ? att : 0);
    else
        bytes[SL_MEM_ACTIV] = flight * (nb * (block + NC * es) + into_head) + head;
}

/* The busiest rank's figures, per step. Collective. */
static void most_per_step(sl_train *t, const double *mine, double *most, int n)
{
    double per[NGROUPS + 1];
    for (int i = 0; i < n; i++) per[i] = mine[i] / t->nsteps;
    SL_CHECK_MPI(MPI_Allreduce(per, most, n, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
}

static void measured(sl_train *t, double sent[NGROUPS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    sent[G_TP] = s->sent[MG_EMB] + s->sent[MG_BLOCKS] + s->sent[MG_HEAD];
    sent[G_PP] = q->sent_pp;
    sent[G_DP] = q->sent_dp;
}

static int opaque(const p3 *q)
{
    const sl_coll impl = sl_comm_impl(q->s.tp);
    return impl == SL_COLL_MPI || impl == SL_COLL_NCCL;
}

static void row(sl_train *t, sl_result *res)
{
    p3 *q = t->state;
    double sent[NGROUPS], model[NGROUPS], most[NGROUPS], most_model[NGROUPS];
    measured(t, sent);
    group_bytes_model(t, model);
    for (int i = 0; i < NGROUPS; i++) model[i] *= t->nsteps; /* per step below */
    most_per_step(t, sent, most, NGROUPS);
    most_per_step(t, model, most_model, NGROUPS);
    char ord[16];
    snprintf(ord, sizeof ord, "%s-%s-%s", dim_names[order[0]], dim_names[order[1]], dim_names[order[2]]);
    sl_result_param_num(res, "dp", q->D);
    sl_result_param_num(res, "tp", q->T);
    sl_result_param_num(res, "pp", q->P);
    sl_result_param_str(res, "order", ord);
    sl_result_param_num(res, "micro_batches", q->m);
    sl_result_param_str(res, "schedule", variant_names[t->variant]);
    sl_result_param_str(res, "recompute", recompute_names[q->recompute]);
    sl_result_param_num(res, "zero", q->zero);
    sl_result_param_num(res, "dp_buckets", q->nbuckets);
    if (q->zero) sl_result_param_num(res, "shard_elems", (double)q->S);
    const int op = opaque(q);
    static const char *const names[NGROUPS][2] = {
        {"tp_bytes", "tp_bytes_model"}, {"pp_bytes", "pp_bytes_model"}, {"dp_bytes", "dp_bytes_model"}};
    for (int i = 0; i < NGROUPS; i++) {
        /* the pipeline's sends are the suite's own on every implementation */
        sl_result_metric(res, names[i][0], op && i != G_PP ? NAN : most[i], "bytes");
        sl_result_metric(res, names[i][1], most_model[i], "bytes");
    }
    long long peak = q->inflight_peak, all_peak = 0;
    SL_CHECK_MPI(MPI_Allreduce(&peak, &all_peak, 1, MPI_LONG_LONG, MPI_MAX, t->ctx->comm));
    sl_result_metric(res, "inflight_peak", (double)all_peak, "micro-batches");
    const double serial = (double)t->m->nparams * sizeof(float);
    double mine = (double)q->s.np, most_np = 0;
    SL_CHECK_MPI(MPI_Allreduce(&mine, &most_np, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    sl_result_metric(res, "params_frac", most_np * sizeof(float) / serial, "fraction");
    if (q->s.dt != SL_F32) {
        sl_result_param_str(res, "precision", "mixed");
        sl_train_mixed_row(t, &q->s.ms, res);
    }
    double loss = 0;
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "final_loss", loss, "loss");
    if (opt_search) p3_search_row(res);
}

/* The check beside the weights': every rank's whole vector bit-identical across its replicas,
 * the parameters it holds against the model, its memory per category against the combined
 * model, and, on the suite's ring, each group's bytes per
 * step against its model where the ring's chunks are equal. Collective. */
static int check(sl_train *t, double *error, char *why, size_t len)
{
    p3 *q = t->state;
    const mg *s = &q->s;
    *error = NAN;
    int bad = 0;
    if (s->np != stage_params_model(q)) {
        snprintf(why, len, "stage %d holds %zu parameters, the model says %zu", q->p, s->np, stage_params_model(q));
        bad = 1;
    }
    /* replicas: replica 0's vector sent to the others, compared bit for bit (the f32 weights; a
     * 16-bit run's dt weights where --zero 1 shards its f32 master) */
    const int dt_copy = q->zero && !is_f32(q);
    const size_t es = dt_copy ? sl_dtype_size(s->dt) : sizeof(float);
    char *mine = sl_alloc(SL_MEM_OTHER, s->np * es + 1), *ref = sl_alloc(SL_MEM_OTHER, s->np * es + 1);
    sl_k_memcpy(t->be, mine, dt_copy ? s->w : (void *)s->params, s->np * es, SL_K_D2H);
    memcpy(ref, mine, s->np * es);
    if (s->np * es > (size_t)1 << 30) SL_FATAL("parallel3d: %zu parameters on a rank: too many to compare", s->np);
    SL_CHECK_MPI(MPI_Bcast(ref, (int)(s->np * es), MPI_BYTE, 0, q->dp_mpi));
    long long differ = 0;
    for (size_t i = 0; i < s->np; i++) differ += memcmp(mine + i * es, ref + i * es, es) != 0;
    sl_free(mine), sl_free(ref);
    if (!bad && differ) {
        snprintf(why, len, "replica %d of (t, p) = (%d, %d) differs from replica 0 in %lld of %zu weights", q->d, q->tr,
                 q->p, differ, s->np);
        *error = (double)differ;
        bad = 1;
    }
    /* this rank's memory, every stage's, against the combined model (the row has rank 0's) */
    double mem[SL_MEM_NCATS] = {0};
    memory_model(t, mem);
    static const sl_mem_cat cats[] = {SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV};
    static const char *const cat_names[] = {"parameters", "gradients", "optimizer state", "activations"};
    for (size_t k = 0; k < sizeof cats / sizeof *cats && !bad; k++)
        if (q->held[cats[k]] != mem[cats[k]]) {
            *error = fabs(q->held[cats[k]] - mem[cats[k]]);
            snprintf(why, len, "rank %d (stage %d): %.0f bytes of %s held, the model says %.0f", t->rank, q->p,
                     q->held[cats[k]], cat_names[k], mem[cats[k]]);
            bad = 1;
        }
    double sent[NGROUPS], model[NGROUPS];
    measured(t, sent);
    group_bytes_model(t, model);
    const int ring = sl_comm_impl(s->tp) == SL_COLL_RING;
    /* exact where every count divides into T (tp) or D (dp) equal chunks */
    int exact[NGROUPS] = {ring && (size_t)q->Bmax * s->T % (size_t)q->T == 0 && q->Bd % q->m == 0, 1,
                          ring && (q->zero || s->np % (size_t)q->D == 0)};
    for (int k = 0; k < q->nbuckets; k++) exact[G_DP] &= q->buckets[k].count % (size_t)q->D == 0;
    static const char *const gname[NGROUPS] = {"tp", "pp", "dp"};
    for (int i = 0; i < NGROUPS && !bad; i++) {
        const double per = sent[i] / t->nsteps;
        if (exact[i] && per != model[i]) {
            *error = fabs(per - model[i]);
            snprintf(why, len, "%s group: %.0f bytes sent per step by rank %d, the model says %.0f", gname[i], per,
                     t->rank, model[i]);
            bad = 1;
        }
    }
    return bad;
}

static void reference(sl_train *t, float *params, double *losses) { sl_train_serial_run(t, t->dtype, params, losses); }

/* Options ----------------------------------------------------------------------------------- */

static int data_ranks(int variant, int nranks)
{
    (void)variant;
    return nranks < opt_dp ? nranks : (int)opt_dp;
}

/* The collectives that provide a reduce-scatter and an all-gather (--zero 1 needs both). */
static unsigned gather_scatter_colls(void)
{
    unsigned ok = 0;
    for (int c = 0; c < SL_NCOLLS; c++)
        if (sl_coll_supports((sl_coll)c, SL_CO_ALLGATHER) && sl_coll_supports((sl_coll)c, SL_CO_REDUCE_SCATTER))
            ok |= 1u << c;
    return ok;
}

/* --search ----------------------------------------------------------------------------------- */

static p3_search search; /* validate fills it, the first pass of the sweep adds the memory limit */

static sl_gpt_dims shape_dims(void)
{
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    return (sl_gpt_dims){.layers = (int)g.layers, .C = (int)g.d_model, .NH = (int)g.heads, .T = (int)g.seq,
                         .max_T = (int)g.max_seq, .V = (int)g.vocab};
}

/* A layout's memory for the search: the busiest rank's bytes by the combined model
 * (memory_model: parameters, gradients, optimizer state, activations), plus the last stage's
 * head logits and their gradient (f32, and a 16-bit copy of the gradient): the largest buffers
 * the four categories leave out. */
static double layout_memory(const p3_layout *L)
{
    const sl_gpt_dims g = shape_dims();
    sl_train t;
    memset(&t, 0, sizeof t);
    t.optim.kind = sl_train_opt.optim ? SL_OPTIM_ADAMW : SL_OPTIM_SGD;
    t.variant = search.variant;
    t.dtype = search.dt;
    p3 *q = malloc(sizeof *q);
    if (!q) SL_FATAL("out of memory");
    const double es = (double)sl_dtype_size(search.dt);
    double most = 0;
    for (int p = 0; p < L->P; p++) { /* the replicas hold equal batches (D divides it): stage p's ranks alike */
        const int dims[NDIMS] = {L->T, L->D, L->P}, c[NDIMS] = {[DIM_TP] = 0, [DIM_DP] = 0, [DIM_PP] = p};
        memset(q, 0, sizeof *q);
        place(q, &g, search.dt, search.global_batch, L, rank_of(dims, c));
        t.state = q;
        double mem[SL_MEM_NCATS] = {0};
        memory_model(&t, mem);
        double sum = mem[SL_MEM_PARAMS] + mem[SL_MEM_GRADS] + mem[SL_MEM_OPTIM] + mem[SL_MEM_ACTIV];
        if (last_stage(q)) sum += (double)q->s.N * q->s.Vl * (8 + (search.dt == SL_F32 ? 0 : es));
        if (sum > most) most = sum;
    }
    free(q);
    return most;
}

static void use_layout(const p3_layout *L)
{
    opt_dp = L->D, opt_tp = L->T, opt_pp = L->P, opt_micro = L->m, opt_zero = L->zero, opt_recompute = L->recompute;
}

/* --mem-limit, or what a rank can hold here: the device's free memory, or the node's available
 * memory (the cgroup's limit where it leaves less) shared by the ranks on the node; the least
 * over the ranks. */
static void mem_limit(sl_ctx *ctx)
{
    if (opt_mem_limit) {
        search.mem_limit = (double)opt_mem_limit;
        snprintf(search.mem_source, sizeof search.mem_source, "--mem-limit %zu bytes a rank", opt_mem_limit);
        return;
    }
    if (search.mode == P3_SEARCH_PLATFORM) {
        search.mem_limit = INFINITY;
        snprintf(search.mem_source, sizeof search.mem_source,
                 "no limit: the platform states no memory; give --mem-limit");
        return;
    }
    double mine = INFINITY;
    if (ctx->opt.backend == SL_BACKEND_CUDA) {
        const long long f = sl_cuda_device_free();
        if (f >= 0) mine = (double)f;
    } else {
        const size_t a = sl_mem_available();
        if (a != SIZE_MAX) mine = (double)a / (ctx->node_ranks > 0 ? ctx->node_ranks : 1);
    }
    SL_CHECK_MPI(MPI_Allreduce(&mine, &search.mem_limit, 1, MPI_DOUBLE, MPI_MIN, ctx->comm));
    if (isinf(search.mem_limit))
        snprintf(search.mem_source, sizeof search.mem_source, "no memory limit known");
    else
        snprintf(search.mem_source, sizeof search.mem_source, "%.0f MiB a rank: %s", search.mem_limit / 1048576,
                 ctx->opt.backend == SL_BACKEND_CUDA ? "the device's free memory"
                                                     : "available memory over the node's ranks");
}

static int sweep(sl_ctx *ctx, int pass)
{
    if (!opt_search) return pass == 0;
    if (pass == 0) mem_limit(ctx);
    return p3_search_sweep(ctx, pass, &search);
}

static int predicts_itself(void) { return opt_search; }

static void row_done(sl_train *t, const sl_result *res)
{
    (void)t;
    if (opt_search) p3_search_done(res);
}

/* --search's checks, and the layout of the first run (the sweep sets each). */
static void validate_search(sl_ctx *ctx)
{
    static const char *const chosen[] = {"dp", "tp", "pp", "micro-batches", "zero", "recompute"};
    static const char *const own[] = {"search-top", "search-sample", "mem-limit", "predict-only"};
    if (!opt_search) {
        for (size_t i = 0; i < sizeof own / sizeof *own; i++)
            if (sl_option_given(&ctx->opt, own[i])) sl_usage_error("--%s: only with --search", own[i]);
        return;
    }
    for (size_t i = 0; i < sizeof chosen / sizeof *chosen; i++)
        if (sl_option_given(&ctx->opt, chosen[i]))
            sl_usage_error("--%s: --search chooses the layout; leave out --dp --tp --pp --micro-batches --zero "
                           "--recompute", chosen[i]);
    if (__builtin_popcount(ctx->opt.dtypes) != 1)
        sl_usage_error("--dtype (-d): --search ranks layouts in one precision; give one of f32, f16, bf16");
    if (__builtin_popcount(ctx->opt.colls) != 1)
        sl_usage_error("--coll (-C): --search ranks layouts over one collective implementation; give one");
    if (__builtin_popcount(opt_variants) != 1)
        sl_usage_error("--schedule: --search ranks layouts of one pipeline schedule; give one of 1f1b, gpipe");
    if (sl_option_given(&ctx->opt, "scaling") && sl_train_opt.scaling == 0)
        sl_usage_error("--scaling weak: --search compares layouts on the same global batch (strong scaling: --batch "
                       "is the global batch)");
    sl_train_opt.scaling = 1;
    const int platform = sl_option_given(&ctx->opt, "predict");
    if (platform && !opt_predict_only)
        sl_usage_error("--predict: with --search it ranks layouts on the machine described without running them: "
                       "add --predict-only");
    if (!platform && sl_option_given(&ctx->opt, "predict-ranks"))
        sl_usage_error("--predict-ranks: only with --predict FILE");
    const int ranks = platform ? sl_train_predict_ranks() : ctx->nranks;
    if (ranks <= 0)
        sl_usage_error("--predict-ranks: --search --predict ranks the layouts of one rank count; give one (e.g. "
                       "--predict-ranks 1024)");
    if (!sl_option_given(&ctx->opt, "batch")) sl_train_opt.batch *= ranks; /* the shape's batch per rank */
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    search = (p3_search){.mode = platform ? P3_SEARCH_PLATFORM : opt_predict_only ? P3_SEARCH_PREDICT : P3_SEARCH_RUN,
                         .ranks = ranks, .layers = (int)g.layers, .heads = (int)g.heads,
                         .d_model = (int)g.d_model, .vocab = (int)g.vocab, .global_batch = (int)sl_train_opt.batch,
                         .zero_ok = (ctx->opt.colls & gather_scatter_colls()) != 0, .top = (int)opt_search_top,
                         .sample = (int)opt_search_sample, .variant = __builtin_ctz(opt_variants),
                         .dt = (sl_dtype)__builtin_ctz(ctx->opt.dtypes), .impl = (sl_coll)__builtin_ctz(ctx->opt.colls),
                         .memory = layout_memory, .use = use_layout};
    search.mem_limit = opt_mem_limit ? (double)opt_mem_limit : INFINITY; /* the sweep sets the default */
    p3_search_validate(&search, opt_mem_limit != 0);
    if (sl_no_predict())
        sl_usage_error("--search: the layouts are ranked by the performance model, which SL_NO_PREDICT=1 switches off");
    use_layout(&(p3_layout){ctx->nranks, 1, 1, 1, 0, 0});
}

static void validate(sl_ctx *ctx)
{
    const int R = ctx->nranks;
    if (!sl_gpt_selected()) sl_usage_error("--model: parallel3d trains the GPT (--model gpt, the default)");
    validate_search(ctx);
    if (parse_order(opt_order) != 0)
        sl_usage_error("--order %s: expected tp, dp and pp once each, fastest first, joined by '-' (e.g. tp-dp-pp)",
                       opt_order);
    if (sl_gpt_resolve(&sl_gpt_opt).dropout > 0) sl_usage_error("--dropout: parallel3d trains without dropout (0)");
    if (!(opt_bucket_mb >= 0 && opt_bucket_mb <= 1e6))
        sl_usage_error("--bucket-mb %g: expected MiB in [0, 1e6] (0: one all-reduce after the step)", opt_bucket_mb);
    if (opt_bucket_mb > 0 && opt_search)
        sl_usage_error("--bucket-mb: not with --search (its layouts all-reduce once, after the last micro-batch)");
    if (opt_bucket_mb > 0 && opt_zero)
        sl_usage_error("--bucket-mb: --zero 1 reduce-scatters the stage's padded vector at once; buckets are for "
                       "--zero 0");
    if (opt_search) return; /* each layout it runs is one of those below's valid ones */
    if (opt_dp == 0) opt_dp = R % (opt_tp * opt_pp) == 0 ? R / (opt_tp * opt_pp) : 0;
    if (opt_dp * opt_tp * opt_pp != R)
        sl_usage_error("--dp %lld x --tp %lld x --pp %lld: D x T x P must equal the ranks (%d)", opt_dp, opt_tp, opt_pp,
                       R);
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    if (g.heads % opt_tp != 0)
        sl_usage_error("--tp %lld: the GPT's --heads %lld must be divisible by T", opt_tp, g.heads);
    if (g.d_model % opt_tp != 0) sl_usage_error("--tp %lld: --d-model %lld must be divisible by T", opt_tp, g.d_model);
    if (g.vocab % opt_tp != 0) sl_usage_error("--tp %lld: --vocab %lld must be divisible by T", opt_tp, g.vocab);
    if (opt_pp > g.layers)
        sl_usage_error("--pp %lld: more pipeline stages than the GPT's --layers %lld (a stage holds whole blocks)",
                       opt_pp, g.layers);
    if (opt_zero) { /* ZeRO-1's reduce-scatter and all-gather: refused up front, not at the first step */
        const unsigned lacking = ctx->opt.colls & ~gather_scatter_colls();
        if (lacking) {
            char names[128] = "";
            for (int c = 0; c < SL_NCOLLS; c++)
                if (gather_scatter_colls() & (1u << c))
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? "|" : "",
                             sl_coll_name((sl_coll)c));
            sl_usage_error("--coll (-C) %s: --zero 1 needs reduce_scatter and allgather, which %s does not provide; "
                           "with --zero 1 parallel3d accepts %s",
                           sl_coll_name((sl_coll)__builtin_ctz(lacking)), sl_coll_name((sl_coll)__builtin_ctz(lacking)),
                           names);
        }
    }
    if (opt_micro == 0) opt_micro = opt_pp;
    const long long B = sl_train_opt.scaling == 1 ? sl_train_opt.batch : sl_train_opt.batch * opt_dp;
    if (B / opt_dp < opt_micro)
        sl_usage_error("--micro-batches %lld: a replica's %lld sequences of the batch are fewer (--batch)", opt_micro,
                       B / opt_dp);
    sl_note(ctx, "grid D %lld x T %lld x P %lld, order %s (fastest first); %lld micro-batches per replica", opt_dp,
            opt_tp, opt_pp, opt_order, opt_micro);
}

static const sl_column columns[] = {
    {"D", "", "dp", 3, 0, 0},
    {"T", "", "tp", 3, 0, 0},
    {"P", "", "pp", 3, 0, 0},
    SL_TRAIN_COLUMNS_RUN,
    SL_COL("dtype", "dtype", 5),
    {"m", "", "micro_batches", 4, 0, 0},
    {"step", "ms", "time.median", 10, 2, 1e3},
    SL_TRAIN_COLUMNS_PRED,
    {"compute", "ms", "compute", 9, 2, 1e3},
    {"exposed", "ms", "exposed_comm", 9, 2, 1e3},
    {"bubble", "ms", "bubble", 9, 2, 1e3},
    {"tp", "KB", "tp_bytes", 9, 1, 1e-3},
    {"model", "KB", "tp_bytes_model", 9, 1, 1e-3},
    {"pp", "KB", "pp_bytes", 9, 1, 1e-3},
    {"model", "KB", "pp_bytes_model", 9, 1, 1e-3},
    {"dp", "KB", "dp_bytes", 9, 1, 1e-3},
    {"model", "KB", "dp_bytes_model", 9, 1, 1e-3},
    {"Z", "", "zero", 2, 0, 0},
    {"optim", "KB", "mem_optim", 9, 1, 1e-3},
    {"model", "KB", "model_optim", 9, 1, 1e-3},
    {"activ", "KB", "mem_activ", 9, 1, 1e-3},
    {"model", "KB", "model_activ", 9, 1, 1e-3},
    {"loss", "", "final_loss", 10, 6, 0},
    SL_TRAIN_COLUMNS_CHECK,
};

/* The step as the performance model reads it: parallel3d/pm_schedule.c. */
static void pm_schedule(const sl_train *t, sl_pm_sched *sc)
{
    const p3 *q = t->state;
    const p3_pm_grid g = {q->P, q->m, q->Bd, variant_schedule[t->variant], q->recompute,
                          bucket_bytes(t, q),
                          q->zero && q->D > 1, q->lw_full};
    p3_pm_schedule(t, &q->s, &g, sc);
}

static const sl_technique parallel3d = {
    .program = {.name = "parallel3d", .extra = p3_opts, .validate = validate,
                .summary = "3-D parallelism of the GPT: data x tensor (Megatron) x pipeline (1F1B) on a rank grid",
                .uses = SL_USES_BACKEND | SL_USES_COLL | SL_USES_DTYPE,
                .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16), .default_dtype = SL_F32,
                .colls = (1u << SL_NCOLLS) - 1, .default_coll = SL_COLL_RING,
                .default_iters = 5, .default_warmup = 2},
    .variants = variant_names, .nvariants = NVARIANTS, .variant_mask = &opt_variants,
    .data_ranks = data_ranks, .setup = setup, .step = step, .free = release,
    .schedule = pm_schedule, .schedule_launched_only = 1, .sweep = sweep, .row_done = row_done,
    .predicts_itself = predicts_itself,
    .weights = weights, .gather_weights = gather_weights, .reference = reference,
    .memory_model = memory_model, .bytes_model = bytes_model, .row = row, .check = check,
    .trains_gpt = 1,
    /* f16/bf16: the data-parallel bounds (sl_train.h), for the same reason as megatron_mlp's:
     * the run and serial training differ in where 16-bit sums are rounded (the group's partial
     * sums, the replicas' gradient sum: one rounding per hop) */
    .mixed_variants = (1u << NVARIANTS) - 1,
    .tol_mixed_sgd_max = {[SL_F16] = SL_TRAIN_TOL_MIXED_SGD_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_SGD_BF16},
    .tol_mixed_adamw_l2 = {[SL_F16] = SL_TRAIN_TOL_MIXED_ADAMW_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_ADAMW_BF16},
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    sl_gpt_opt.model = 1; /* the GPT is this program's model */
    return sl_train_main(&parallel3d, argc, argv);
}
