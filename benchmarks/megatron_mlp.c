/* megatron_mlp.c — Megatron-LM's tensor-parallel MLP (Shoeybi et al., "Megatron-LM: Training
 * Multi-Billion Parameter Language Models Using Model Parallelism", 2019; sequence parallelism
 * from Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
 * 2022), on the training layer.
 *
 * The model: L blocks, each  U = X·A^T + a,  Y = GeLU(U),  Z = Y·B^T + b,  X' = X + Z,  with
 * A [f, h] and B [h, f] ([out, in] as everywhere in the suite), f = ffn-mult·h; a batch of n
 * tokens of width h goes through it (serial.h).
 *
 * What is partitioned: the ranks are t·d, t-rank tensor-parallel groups of consecutive ranks
 * (rank = replica·t + tp_rank) and d data-parallel replicas of them. In a group, rank r holds
 * f/t of the inner features (slices.h): A by its output features (rows of A, columns of A^T:
 * "column-parallel"), a likewise, B by its input features ("row-parallel"), b whole. Then
 *   U_r = X·A_r^T + a_r  and  Y_r = GeLU(U_r)  are exactly rank r's columns of U and Y: GeLU
 *       acts element by element, so nothing is communicated between the two layers;
 *   Z = sum_r Y_r·B_r^T  (+ b once): each rank holds a partial sum of the whole Z.
 * What is communicated when, in the tensor-parallel group (Megatron's conjugate pair):
 *   f  before the block: identity forward; backward, the all-reduce of the partial dX_r = dU_r·A_r
 *   g  after the block: forward, the all-reduce of the partial Z; identity backward (dZ is the
 *      same on every rank, so each computes dB_r = dZ^T·Y_r and dY_r = dZ·B_r alone)
 * two all-reduces of n·h elements per block and step. Across replicas, each rank's gradient
 * slices are summed (all-reduce over the d ranks holding the same slices) before the optimizer
 * steps them.
 *
 *   plain    the all-reduces blocking, in order
 *   overlap  backward: dX_r = dU_r·A_r first, its all-reduce started non-blocking, and the
 *            weight gradient dA_r += dU_r^T·X computed in pieces, testing the all-reduce between
 *            them, so that the sum advances while the GEMM runs (Megatron's async grad all-reduce)
 *   seqpar   sequence parallelism: between blocks each rank holds only n/t of the tokens (the
 *            residual stream X and its gradient are split by tokens). g becomes a reduce-scatter
 *            along the tokens (each rank keeps the sum of its own tokens, adds b, adds its part
 *            of the residual) and f an all-gather of X before the block; in backward, their
 *            conjugates: dZ is all-gathered, dX_r reduce-scattered, and X is all-gathered again
 *            to form dA_r (only the shard is kept). An all-reduce is a reduce-scatter plus an
 *            all-gather, so the volume is the same as plain's plus that one extra all-gather.
 *
 * The check (with -c 1, the default): the weights after the timed steps against serial training
 * of the whole model on the global batch (the training layer's tolerances), and one step at the
 * trained weights: the forward output, the input gradient and every weight gradient (A, a, B, b
 * of every block, gathered from the slices) against the serial blocks' on the same tokens
 * (OUT_TOL in megatron_mlp/check.c); every rank's slices bit-identical with rank 0's gathered
 * weights (replicas, and b across a group); overlap and seqpar against plain (vs_plain,
 * reported). Rows carry the errors, bytes sent per block against the model, the step split
 * into compute / comm / exposed comm, and the memory a rank holds against 1/t of the serial
 * model's.
 *
 * -d f16|bf16 (megatron_mlp/mixed.c, every variant): Megatron-LM's mixed precision. Each
 * rank's slices in the 16-bit type with an f32 master copy that the optimizer updates and casts
 * back, 16-bit GEMMs accumulating in f32, and the f and g all-reduces (overlap's non-blocking
 * one, seqpar's all-gathers and reduce-scatters, the replicas' all-reduce) moving 16-bit
 * activations and gradients: half of f32's bytes per block. f16 scales the loss
 * dynamically, the overflow flag OR-ed over every rank so that all skip a step together. The
 * check is against the same blocks trained serially in the same precision.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_train.h"
#include "megatron_mlp/mixed.h"
#include "megatron_mlp/serial.h"
#include "megatron_mlp/slices.h"
#include "megatron_mlp/tp.h"

static const char *const variant_names[NVARIANTS] = SL_ENUM_NAMES(MM_VARIANTS);

static long long opt_blocks = 2, opt_hidden = 512, opt_ffn = 4, opt_dp = 0;
static sl_int_list opt_tp;
static unsigned opt_variants = ~0u;
static int opt_overlap, opt_seqpar;

static const sl_opt mm_opts[] = {
    {"blocks", 0, SL_OPT_INT, &opt_blocks, 1, SL_MLP_MAX_LAYERS / 2, NULL, 0, "MLP blocks L (default 2)"},
    {"hidden", 0, SL_OPT_INT, &opt_hidden, 1, 1 << 16, NULL, 0, "hidden width h (default 512)"},
    {"ffn-mult", 0, SL_OPT_INT, &opt_ffn, 1, 64, NULL, 0, "inner width f = ffn-mult x h (default 4)"},
    {"tp", 0, SL_OPT_INT_LIST, &opt_tp, 1, 1 << 16, NULL, 0,
     "tensor-parallel degrees t to run, a list (default 1,2,4,... dividing the ranks)"},
    {"dp", 0, SL_OPT_INT, &opt_dp, 1, 1 << 16, NULL, 0, "data-parallel replicas d (default ranks / t)"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(MM_VARIANTS), 0,
     "variants to run (default all)"},
    {"overlap", 0, SL_OPT_FLAG, &opt_overlap, 0, 0, NULL, 0, "run the overlap variant (--variants overlap)"},
    {"sequence-parallel", 0, SL_OPT_FLAG, &opt_seqpar, 0, 0, NULL, 0,
     "run the sequence-parallel variant (--variants seqpar)"},
    {0},
};

/* The degrees of the sweep (validate) and the pass being run. */
static int tps[SL_MAX_LIST], ntps, cur_t = 1, cur_d = 1;


/* Phases ---------------------------------------------------------------------------- */

void mm_compute_span(sl_train *t, const char *name, double t0)
{
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
}

/* One more collective named name in this step (only in the driver's steps: not in the check's). */
static void count_coll(sl_train *t, const char *name, int group, int overlapped)
{
    mm *s = t->state;
    if (!s->counting || (group && s->t == 1)) return; /* a group of one rank communicates nothing */
    int i = 0;
    while (i < s->ncolls && strcmp(s->coll_name[i], name) != 0) i++;
    if (i == MM_MAX_COLLS) SL_FATAL("megatron_mlp: more than %d kinds of collective", MM_MAX_COLLS);
    if (i == s->ncolls) {
        s->coll_name[i] = name;
        s->coll_group[i] = (unsigned char)group;
        s->coll_overlapped[i] = (unsigned char)overlapped;
        s->ncolls++;
    }
    s->coll_count[i]++;
}

static void blocking_span(sl_train *t, int rc, const char *name, double t0, int group)
{
    sl_train_coll_ok(rc, name);
    sl_train_blocking(t, name, t0);
    count_coll(t, name, group, 0);
}

/* A blocking collective: communication that nothing overlaps. */
void mm_comm_span(sl_train *t, int rc, const char *name, double t0) { blocking_span(t, rc, name, t0, 1); }
void mm_replicas_span(sl_train *t, int rc, const char *name, double t0) { blocking_span(t, rc, name, t0, 0); }

void mm_overlapped_span(sl_train *t, const char *name, double t0, double t1)
{
    sl_train_span(t, SL_PHASE_COMM, name, t0, t1);
    count_coll(t, name, 1, 1);
}

/* The conjugate operators --------------------------------------------------------------- */

/* g forward: the partial products of the row-parallel layer summed over the group. */
static void g_forward(sl_train *t, mm *s, float *z)
{
    sl_k_sync(t->be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_allreduce(s->tp, z, z, (size_t)s->n * s->h, SL_F32, SL_OP_SUM), "g: allreduce Z", t0);
}

/* f backward: the partial input gradients of the column-parallel layer summed over the group. */
static void f_backward(sl_train *t, mm *s, float *dx)
{
    sl_k_sync(t->be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_allreduce(s->tp, dx, dx, (size_t)s->n * s->h, SL_F32, SL_OP_SUM), "f: allreduce dX", t0);
}

/* Sequence parallel: the token shards [nloc, h] of every rank gathered into [n, h], in order. */
static void gather_tokens(sl_train *t, mm *s, const float *shard, float *full, const char *name)
{
    sl_k_sync(t->be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_allgather(s->tp, shard, full, (size_t)s->nloc * s->h, SL_F32), name, t0);
}

/* Sequence parallel: [n, h] partial sums, each rank keeping the sum of its own tokens. */
static void scatter_tokens(sl_train *t, mm *s, const float *full, float *shard, const char *name)
{
    sl_k_sync(t->be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_reduce_scatter(s->tp, full, shard, (size_t)s->nloc * s->h, SL_F32, SL_OP_SUM), name, t0);
}

/* One block --------------------------------------------------------------------------- */

static float *A_of(mm *s, float *v, int i) { return v + (size_t)i * s->per_block; }
static float *a_of(mm *s, float *v, int i) { return A_of(s, v, i) + (size_t)s->c * s->h; }
static float *B_of(mm *s, float *v, int i) { return a_of(s, v, i) + s->c; }
static float *b_of(mm *s, float *v, int i) { return B_of(s, v, i) + (size_t)s->h * s->c; }

/* x[i] -> x[i+1]. */
static void block_forward(sl_train *t, mm *s, int i)
{
    const int n = s->n, h = s->h, c = s->c, seqpar = t->variant == V_SEQPAR;
    const float *X = s->x[i];
    if (seqpar) {
        gather_tokens(t, s, s->x[i], s->zfull, "all-gather X");
        X = s->zfull;
    }
    double t0 = sl_now();
    /* column-parallel: this rank's f/t features of U and Y, no communication after it */
    sl_linear_forward(t->be, n, h, c, A_of(s, s->params, i), a_of(s, s->params, i), X, s->u[i]);
    sl_k_act_forward(t->be, SL_ACT_GELU, (size_t)n * c, s->u[i], s->y[i]);
    /* row-parallel: a partial sum of all of Z, without the bias */
    float *z = seqpar ? s->dxpart : s->zfull;
    sl_linear_forward(t->be, n, c, h, B_of(s, s->params, i), NULL, s->y[i], z);
    mm_compute_span(t, "forward", t0);
    if (seqpar) {
        scatter_tokens(t, s, z, s->x[i + 1], "reduce-scatter Z");
        z = s->x[i + 1];
    } else {
        g_forward(t, s, z);
    }
    t0 = sl_now();
    const size_t nh = (size_t)s->nloc * h;
    sl_k_bias_add(t->be, s->nloc, h, z, b_of(s, s->params, i)); /* once, after the sum */
    if (seqpar) {
        sl_k_add(t->be, SL_F32, nh, s->x[i], s->x[i + 1]); /* residual, on this rank's tokens */
    } else {
        sl_k_memcpy(t->be, s->x[i + 1], s->x[i], nh * sizeof(float), SL_K_D2D);
        sl_k_add(t->be, SL_F32, nh, z, s->x[i + 1]);
    }
    mm_compute_span(t, "residual", t0);
}

/* dA_r += dU_r^T·X in pieces of A_r's rows, testing the all-reduce in flight between them so
 * that the suite's own algorithms advance (the MPI library's may too). Returns when the GEMM
 * is done; *done says whether the all-reduce completed meanwhile, at *t_done. */
static void weight_grad_overlapped(sl_train *t, mm *s, int i, const float *du, const float *X, sl_coll_req *req,
                                   int *done, double *t_done)
{
    enum { PIECES = 8 };
    const int n = s->n, h = s->h, c = s->c;
    float *dA = A_of(s, s->grads, i);
    for (int p = 0; p < PIECES; p++) {
        const int r0 = (int)((long long)c * p / PIECES), r1 = (int)((long long)c * (p + 1) / PIECES);
        double t0 = sl_now();
        if (r1 > r0) sl_k_sgemm(t->be, 1, 0, r1 - r0, h, n, 1.0f, du + r0, c, X, h, 1.0f, dA + (size_t)r0 * h, h);
        mm_compute_span(t, "backward dA", t0);
        if (!*done) {
            t0 = sl_now();
            sl_train_coll_ok(sl_coll_test(req, done), "sl_coll_test");
            const double t1 = sl_now();
            sl_train_record(t, SL_PHASE_EXPOSED, t1 - t0);
            if (*done) *t_done = t1;
        }
    }
    const double t0 = sl_now();
    sl_k_bias_grad(t->be, n, c, du, a_of(s, s->grads, i));
    mm_compute_span(t, "backward da", t0);
}

/* dL/dx[i+1] in d[cur] -> dL/dx[i] in d[!cur]. */
static void block_backward(sl_train *t, mm *s, int i, int cur)
{
    const int n = s->n, h = s->h, c = s->c, seqpar = t->variant == V_SEQPAR;
    const size_t nh = (size_t)s->nloc * h;
    float *dout = s->dg[cur], *dprev = s->dg[!cur];
    const float *dZ = dout;
    if (seqpar) { /* the conjugate of the reduce-scatter: every token's dZ */
        gather_tokens(t, s, dout, s->zfull, "all-gather dZ");
        dZ = s->zfull;
    }
    double t0 = sl_now();
    /* g backward is the identity: dZ is whole on every rank, so are db = sum dZ and its own
     * dB_r = dZ^T·Y_r and dY_r = dZ·B_r */
    sl_linear_backward(t->be, n, c, h, B_of(s, s->params, i), s->y[i], dZ, B_of(s, s->grads, i),
                       b_of(s, s->grads, i), s->dy);
    sl_k_act_backward(t->be, SL_ACT_GELU, (size_t)n * c, s->u[i], s->dy, s->dy);
    mm_compute_span(t, "backward", t0);
    const float *X = s->x[i];
    if (seqpar) { /* only the shard of X was kept: gather it again */
        gather_tokens(t, s, s->x[i], s->zfull, "all-gather X");
        X = s->zfull;
    }
    float *dx = seqpar ? s->dxpart : dprev; /* this rank's partial dX [n, h] */
    if (t->variant == V_OVERLAP) {
        t0 = sl_now();
        sl_k_sgemm(t->be, 0, 0, n, h, c, 1.0f, s->dy, c, A_of(s, s->params, i), h, 0.0f, dx, h);
        mm_compute_span(t, "backward dX", t0);
        t0 = sl_now();
        sl_coll_req *req;
        int done = 0;
        double t_done = 0;
        sl_train_coll_ok(sl_coll_iallreduce(s->tp, dx, dx, (size_t)n * h, SL_F32, SL_OP_SUM, &req),
                         "f: iallreduce dX");
        sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
        weight_grad_overlapped(t, s, i, s->dy, X, req, &done, &t_done);
        const double w0 = sl_now();
        sl_train_coll_ok(sl_coll_wait(req), "sl_coll_wait");
        const double w1 = sl_now();
        sl_train_record(t, SL_PHASE_EXPOSED, w1 - w0);
        mm_overlapped_span(t, "f: allreduce dX (overlapped)", t0, done ? t_done : w1);
    } else {
        t0 = sl_now();
        sl_linear_backward(t->be, n, h, c, A_of(s, s->params, i), X, s->dy, A_of(s, s->grads, i),
                           a_of(s, s->grads, i), dx);
        mm_compute_span(t, "backward", t0);
        if (seqpar)
            scatter_tokens(t, s, dx, dprev, "reduce-scatter dX");
        else
            f_backward(t, s, dx);
    }
    t0 = sl_now();
    sl_k_add(t->be, SL_F32, nh, dout, dprev); /* the residual's own path */
    mm_compute_span(t, "residual", t0);
}

float *mm_forward_backward(sl_train *t, mm *s)
{
    const int h = s->h;
    sl_k_memset0(t->be, s->grads, s->np * sizeof(float));
    sl_train_load(t, s->first, s->nloc, s->x[0], s->target);
    for (int i = 0; i < s->L; i++) block_forward(t, s, i);
    double t0 = sl_now();
    /* every rank of a group holds (plain) or shares (seqpar) the output: the loss of its tokens,
     * normalised over the global batch (counted once per token: plain's group shares one) */
    const double loss = sl_k_mse(t->be, (size_t)s->nloc * h, s->x[s->L], s->target, s->dg[0],
                                 1.0f / ((float)t->global_batch * (float)h));
    if (s->tr == 0 || t->variant == V_SEQPAR) t->loss += loss;
    mm_compute_span(t, "loss", t0);
    int cur = 0;
    for (int i = s->L - 1; i >= 0; i--, cur = !cur) block_backward(t, s, i, cur);
    if (s->d > 1) {
        sl_k_sync(t->be);
        t0 = sl_now();
        mm_replicas_span(t, sl_coll_allreduce(s->dp, s->grads, s->grads, s->np, SL_F32, SL_OP_SUM),
                         "allreduce (replicas)", t0);
    }
    return s->dg[cur];
}

static void step(sl_train *t)
{
    mm *s = t->state;
    const unsigned long long tp0 = sl_comm_bytes_sent(s->tp), dp0 = sl_comm_bytes_sent(s->dp);
    s->counting = 1;
    if (s->mixed) {
        mm_mixed_step(t, s);
    } else {
        mm_forward_backward(t, s);
        sl_train_optimize(t, s->params, s->grads, s->optim, 0, s->np);
    }
    s->counting = 0;
    s->sent_tp += (double)(sl_comm_bytes_sent(s->tp) - tp0);
    s->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - dp0);
}

/* Setup ------------------------------------------------------------------------------- */

static void *alloc(sl_train *t, sl_mem_cat cat, size_t floats)
{
    return sl_k_malloc(t->be, cat, floats ? floats * sizeof(float) : 1);
}

static void setup(sl_train *t)
{
    mm *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    const sl_mlp *m = t->m;
    s->t = t->baseline ? 1 : cur_t;
    s->d = t->baseline ? 1 : cur_d;
    s->rep = t->rank / s->t;
    s->tr = t->rank % s->t;
    s->L = m->nlayers / 2;
    s->h = m->dims[0];
    s->f = m->dims[1];
    s->c = s->f / s->t;
    s->per_block = mm_slice_per_block(m, s->t);
    s->np = (size_t)s->L * s->per_block;

    MPI_Comm world = t->baseline ? MPI_COMM_SELF : t->ctx->comm;
    const sl_mem_space space = sl_comm_space(t->comm);
    SL_CHECK_MPI(MPI_Comm_split(world, s->rep, s->tr, &s->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, s->tr, s->rep, &s->dp_mpi));
    sl_train_coll_ok(sl_comm_create(&s->tp, s->tp_mpi, sl_comm_impl(t->comm), space), "sl_comm_create (tensor-parallel)");
    sl_train_coll_ok(sl_comm_create(&s->dp, s->dp_mpi, sl_comm_impl(t->comm), space), "sl_comm_create (replicas)");

    /* the replica's tokens of each step; seqpar: this rank's n/t of them between blocks */
    size_t lo, hi;
    sl_share((size_t)t->global_batch, s->d, s->rep, &lo, &hi);
    t->lo = (int)lo;
    t->hi = (int)hi;
    s->n = (int)(hi - lo);
    s->nloc = t->variant == V_SEQPAR ? s->n / s->t : s->n;
    s->first = t->lo + (t->variant == V_SEQPAR ? s->tr * s->nloc : 0);

    if (t->dtype != SL_F32) { /* 16-bit blocks with an f32 master copy (mixed.c) */
        mm_mixed_setup(t, s);
        return;
    }
    const int L = s->L, h = s->h, n = s->n, c = s->c;
    s->params = alloc(t, SL_MEM_PARAMS, s->np);
    s->grads = alloc(t, SL_MEM_GRADS, s->np);
    s->optim = alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * s->np);
    mm_slice_init(m, s->t, s->tr, (uint64_t)sl_train_opt.seed, s->params);
    s->x = calloc((size_t)L + 1, sizeof *s->x);
    s->u = calloc((size_t)L, sizeof *s->u);
    s->y = calloc((size_t)L, sizeof *s->y);
    if (!s->x || !s->u || !s->y) SL_FATAL("out of memory");
    /* kept for backward (activ): x, u, y; work buffers (comm) are not kept across blocks */
    for (int i = 0; i <= L; i++) s->x[i] = alloc(t, SL_MEM_ACTIV, (size_t)s->nloc * h);
    for (int i = 0; i < L; i++) {
        s->u[i] = alloc(t, SL_MEM_ACTIV, (size_t)n * c);
        s->y[i] = alloc(t, SL_MEM_ACTIV, (size_t)n * c);
    }
    s->target = alloc(t, SL_MEM_DATA, (size_t)s->nloc * h);
    s->zfull = alloc(t, SL_MEM_COMM, (size_t)n * h);
    if (t->variant == V_SEQPAR) s->dxpart = alloc(t, SL_MEM_COMM, (size_t)n * h);
    s->dg[0] = alloc(t, SL_MEM_COMM, (size_t)s->nloc * h);
    s->dg[1] = alloc(t, SL_MEM_COMM, (size_t)s->nloc * h);
    s->dy = alloc(t, SL_MEM_COMM, (size_t)n * c);
}

static void release(sl_train *t)
{
    mm *s = t->state;
    if (s->mixed) mm_mixed_free(t, s);
    for (int i = 0; s->x && i <= s->L; i++) sl_k_free(t->be, s->x[i]);
    for (int i = 0; s->u && i < s->L; i++) {
        sl_k_free(t->be, s->u[i]);
        sl_k_free(t->be, s->y[i]);
    }
    float *bufs[] = {s->params, s->grads, s->optim, s->target, s->zfull, s->dxpart, s->dg[0], s->dg[1], s->dy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    free(s->x);
    free(s->u);
    free(s->y);
    sl_comm_destroy(s->tp);
    sl_comm_destroy(s->dp);
    SL_CHECK_MPI(MPI_Comm_free(&s->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(&s->dp_mpi));
    free(s);
}

/* Weights ------------------------------------------------------------------ */

/* At t = 1 a rank's vector is the flat vector; otherwise its first run, A_r of block 0. */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    mm *s = t->state;
    *first = s->t == 1 ? 0 : t->m->w_off[0] + (size_t)s->tr * s->c * s->h;
    *count = s->t == 1 ? t->m->nparams : (size_t)s->c * s->h;
    return s->params;
}

void mm_gather_slices(sl_train *t, const float *local, float *full)
{
    mm *s = t->state;
    if (s->rep != 0) return;
    float *mine = sl_k_download(t->be, local, s->np * sizeof(float));
    float *all = t->rank == 0 ? malloc((size_t)s->t * s->np * sizeof(float)) : NULL;
    if (t->rank == 0 && !all) SL_FATAL("out of memory");
    SL_CHECK_MPI(MPI_Gather(mine, (int)s->np, MPI_FLOAT, all, (int)s->np, MPI_FLOAT, 0, s->tp_mpi));
    for (int r = 0; t->rank == 0 && r < s->t; r++) mm_slice_scatter(t->m, s->t, r, all + (size_t)r * s->np, full);
    free(mine);
    free(all);
}

static void gather_weights(sl_train *t, float *full)
{
    mm_gather_slices(t, ((mm *)t->state)->params, full);
}

/* Models -------------------------------------------------------------------------------- */

/* Bytes one rank sends per block and step in its tensor-parallel group, on a ring (and on
 * recursive halving/doubling with t a power of two): an all-reduce of N elements sends
 * 2(t-1)/t·N, a reduce-scatter or all-gather (t-1)/t·N. plain and overlap: two all-reduces of
 * n·h (g forward, f backward). seqpar: all-gather X and reduce-scatter Z forward; all-gather dZ,
 * all-gather X again and reduce-scatter dX backward: five halves, 5(t-1)/t·n·h. Elements of the
 * run's dtype: 4 bytes in f32, 2 in f16/bf16 (the 16-bit activations and gradients). */
static double tp_block_model(const sl_train *t)
{
    const mm *s = t->state;
    /* in whole elements: h, and so n·h, is divisible by t */
    const double part = (double)(s->t - 1) * (double)((size_t)s->n * s->h / (size_t)s->t) *
                        (double)sl_dtype_size(t->dtype);
    return t->variant == V_SEQPAR ? 5 * part : 2 * 2 * part;
}

/* The busiest rank's bytes per step: L blocks of the group's traffic plus the all-reduce of
 * its gradient slices over the d replicas, 2(d-1)/d of them. */
static double bytes_model(const sl_train *t)
{
    const mm *s = t->state;
    return s->L * tp_block_model(t) + 2.0 * (s->d - 1) / s->d * (double)s->np * (double)sl_dtype_size(t->dtype);
}

/* What setup allocates per category: the slices, their gradients and optimizer state; kept
 * activations x[0..L] of nloc tokens (plain: all n; seqpar: n/t) and u, y of c features. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const mm *s = t->state;
    if (s->mixed) {
        mm_mixed_memory(t, s, bytes);
        return;
    }
    const double np = (double)s->np * sizeof(float);
    bytes[SL_MEM_PARAMS] = np;
    bytes[SL_MEM_GRADS] = np;
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * np;
    bytes[SL_MEM_ACTIV] = ((s->L + 1.0) * s->nloc * s->h + 2.0 * s->L * s->n * s->c) * sizeof(float);
}

static double metric_of(const sl_result *r, const char *name)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) return r->metrics[i].value;
    return NAN;
}

static void set_metric(sl_result *r, const char *name, double v)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) r->metrics[i].value = v;
}

/* The collectives of a step, counted by name (rank 0's; every rank runs the same): the group's
 * and the overlapped ones in the row, and all of them as a line before it, with the names of
 * their spans in the trace. */
static void coll_figures(sl_train *t, sl_result *res)
{
    const mm *s = t->state;
    char line[512] = "";
    size_t at = 0;
    double group = 0, overlapped = 0;
    for (int i = 0; i < s->ncolls; i++) {
        const double per_step = (double)s->coll_count[i] / t->nsteps;
        if (s->coll_group[i]) group += per_step;
        if (s->coll_overlapped[i]) overlapped += per_step;
        if (at < sizeof line)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%g x %s", i ? ", " : "", per_step, s->coll_name[i]);
    }
    sl_result_metric(res, "tp_collectives", group, "per step");
    sl_result_metric(res, "tp_collectives_overlapped", overlapped, "per step");
    sl_note(t->ctx, "%s, t = %d, d = %d, %s: collectives per step: %s", variant_names[t->variant], s->t, s->d,
            sl_dtype_name(t->dtype), s->ncolls ? line : "none");
}

static void row(sl_train *t, sl_result *res)
{
    mm *s = t->state;
    coll_figures(t, res);
    const int P = t->size;
    sl_result_param_num(res, "tp", s->t);
    sl_result_param_num(res, "dp", s->d);
    sl_result_param_num(res, "blocks", s->L);
    sl_result_param_num(res, "hidden", s->h);
    sl_result_param_num(res, "ffn", s->f);
    sl_result_param_num(res, "tokens_per_group", s->n);
    /* Bytes: the technique's communicators are its own, so the driver's count (of the world's)
     * is replaced by theirs, the busiest rank's per step; the MPI library's and NCCL's
     * collectives cannot be observed (n/a). */
    double sent[2] = {s->sent_tp / t->nsteps, s->sent_dp / t->nsteps}, most[2];
    SL_CHECK_MPI(MPI_Allreduce(sent, most, 2, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    const sl_coll impl = sl_comm_impl(s->tp);
    const int opaque = impl == SL_COLL_MPI || impl == SL_COLL_NCCL;
    set_metric(res, "bytes_sent", opaque ? NAN : most[0] + most[1]);
    sl_result_metric(res, "tp_bytes_block", opaque ? NAN : most[0] / s->L, "bytes");
    sl_result_metric(res, "tp_bytes_block_model", tp_block_model(t), "bytes");
    sl_result_metric(res, "dp_bytes", opaque ? NAN : most[1], "bytes");
    sl_result_metric(res, "tflops_rank", metric_of(res, "tflops") / P, "TFLOP/s");
    /* memory against 1/t of the serial model's on the same tokens */
    const double serial_params = (double)t->m->nparams * sizeof(float);
    const double serial_activ = mm_serial_activ_bytes(t->m, s->n);
    sl_result_metric(res, "serial_params", serial_params, "bytes");
    sl_result_metric(res, "serial_activ", serial_activ, "bytes");
    sl_result_metric(res, "params_frac", metric_of(res, "mem_params") / serial_params, "fraction");
    sl_result_metric(res, "activ_frac", metric_of(res, "mem_activ") / serial_activ, "fraction");
    sl_result_metric(res, "inv_tp", 1.0 / s->t, "fraction");
    const int checked = s->check_step;
    sl_result_metric(res, "out_rel_err", checked ? s->out_err : NAN, "ratio");
    sl_result_metric(res, "dx_rel_err", checked ? s->dx_err : NAN, "ratio");
    sl_result_metric(res, "grad_rel_err", checked ? s->grad_err : NAN, "ratio");
    sl_result_metric(res, "colpar_diff", checked ? s->colpar_diff : NAN, "abs");
    sl_result_metric(res, "vs_plain", checked ? s->vs_plain : NAN, "ratio");
    if (t->variant == V_OVERLAP)
        sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(s->tp));
    if (s->mixed) mm_mixed_row(t, s, res);
    /* the last step's loss over the global batch beside the serial runs' in this dtype and in f32 */
    double loss = 0, ref[2] = {mm_reference_loss(t, t->dtype), mm_reference_loss(t, SL_F32)};
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    SL_CHECK_MPI(MPI_Bcast(ref, 2, MPI_DOUBLE, 0, t->ctx->comm));
    sl_result_metric(res, "final_loss", loss, "loss");
    sl_result_metric(res, "ref_final_loss", ref[0], "loss");
    sl_result_metric(res, "f32_final_loss", ref[1], "loss");
    sl_result_metric(res, "loss_vs_f32", (loss - ref[1]) / ref[1], "ratio");
}

/* Options and the sweep ------------------------------------------------------------------ */

static int divides_model(long long t) { return opt_hidden % t == 0 && (opt_hidden * opt_ffn) % t == 0; }

static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    if (opt_overlap || opt_seqpar) {
        if (opt_variants != ~0u)
            sl_usage_error("--overlap/--sequence-parallel: give the variants either by these flags or by --variants");
        opt_variants = (opt_overlap ? 1u << V_OVERLAP : 0) | (opt_seqpar ? 1u << V_SEQPAR : 0);
    }
    /* seqpar's f and g are an all-gather and a reduce-scatter: an implementation without them
     * would fail at the first seqpar step, after the other variants' rows were measured */
    unsigned seqpar_colls = 0;
    for (int c = 0; c < SL_NCOLLS; c++)
        if (sl_coll_supports((sl_coll)c, SL_CO_ALLGATHER) && sl_coll_supports((sl_coll)c, SL_CO_REDUCE_SCATTER))
            seqpar_colls |= 1u << c;
    const unsigned lacking = ctx->opt.colls & ~seqpar_colls;
    if ((opt_variants & (1u << V_SEQPAR)) && lacking) {
        char names[128] = "";
        for (int c = 0; c < SL_NCOLLS; c++)
            if (seqpar_colls & ctx->prog->colls & (1u << c))
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? "|" : "",
                         sl_coll_name((sl_coll)c));
        const char *bad = sl_coll_name((sl_coll)__builtin_ctz(lacking));
        sl_usage_error("--coll (-C) %s: seqpar needs allgather and reduce_scatter, which %s does not provide; "
                       "with seqpar megatron_mlp accepts %s (or leave seqpar out of --variants)", bad, bad, names);
    }
    const long long h = opt_hidden, f = opt_hidden * opt_ffn;
    ntps = 0;
    if (opt_tp.n) {
        for (int i = 0; i < opt_tp.n; i++) {
            const long long tv = opt_tp.v[i];
            if (!divides_model(tv))
                sl_usage_error("--tp %lld: the hidden width %lld and the inner width %lld (--ffn-mult %lld x h) must "
                               "both be divisible by t", tv, h, f, opt_ffn);
            if (opt_dp && tv * opt_dp != P)
                sl_usage_error("--tp %lld x --dp %lld: the ranks (%d) must be t x d", tv, opt_dp, P);
            if (!opt_dp && P % tv != 0)
                sl_usage_error("--tp %lld needs a multiple of %lld ranks, %d given", tv, tv, P);
            tps[ntps++] = (int)tv;
        }
    } else if (opt_dp) {
        if (P % opt_dp != 0) sl_usage_error("--dp %lld: the ranks (%d) are not divisible by d", opt_dp, P);
        if (!divides_model(P / opt_dp))
            sl_usage_error("--dp %lld: t = %lld does not divide the hidden width %lld and the inner width %lld",
                           opt_dp, P / opt_dp, h, f);
        tps[ntps++] = (int)(P / opt_dp);
    } else {
        for (int tv = 1; tv <= P; tv *= 2)
            if (P % tv == 0) {
                if (divides_model(tv)) tps[ntps++] = tv;
                else sl_note(ctx, "skipping t = %d: it does not divide --hidden %lld and the inner width %lld", tv, h, f);
            }
    }
    /* seqpar splits a replica's tokens into t equal shards */
    for (int i = 0; i < ntps && (opt_variants & (1u << V_SEQPAR)); i++) {
        const long long tv = tps[i], d = P / tv, B = sl_train_opt.scaling ? sl_train_opt.batch : sl_train_opt.batch * P;
        if (B % d == 0 && (B / d) % tv == 0) continue;
        if (opt_variants == (1u << V_SEQPAR))
            sl_usage_error("--batch %lld: seqpar splits a replica's tokens in t equal parts; with t = %lld, d = %lld "
                           "the global batch %lld must be divisible by t x d", sl_train_opt.batch, tv, d, B);
        opt_variants &= ~(1u << V_SEQPAR);
        sl_note(ctx, "skipping seqpar: the global batch %lld does not split into t x d = %d equal token shards", B, P);
    }
    /* the rows and the task: the model's shape in the training layer's terms */
    sl_train_opt.layers = 2 * opt_blocks;
    sl_train_opt.width = f;
    sl_train_opt.inputs = sl_train_opt.outputs = h;
}

static int model(sl_mlp *m, sl_backend be)
{
    return mm_model_init(m, be, (int)opt_blocks, (int)opt_hidden, (int)(opt_hidden * opt_ffn));
}

static int sweep(sl_ctx *ctx, int pass)
{
    if (pass >= ntps) return 0;
    cur_t = tps[pass];
    cur_d = ctx->nranks / cur_t;
    if (pass == 0)
        sl_note(ctx, "%lld MLP blocks, h %lld, f %lld (%.1f MiB of f32 parameters), %s scaling: %lld tokens %s, %s lr %.3g",
                opt_blocks, opt_hidden, opt_hidden * opt_ffn,
                (double)(2 * opt_hidden * opt_hidden * opt_ffn + opt_hidden * opt_ffn + opt_hidden) * opt_blocks * 4 /
                    1048576,
                sl_train_opt.scaling ? "strong" : "weak", sl_train_opt.batch,
                sl_train_opt.scaling ? "in all" : "per rank (t x that per replica)", sl_optim_name(sl_train_opt.optim),
                sl_train_opt.lr);
    sl_note(ctx, "t = %d tensor-parallel x d = %d data-parallel", cur_t, cur_d);
    return 1;
}

static const sl_column columns[] = {
    {"t", "", "tp", 3, 0, 0},
    {"d", "", "dp", 3, 0, 0},
    SL_TRAIN_COLUMNS_RUN,
    SL_COL("dtype", "dtype", 5),
    {"step", "ms", "time.median", 9, 2, 1e3},
    {"compute", "ms", "compute", 9, 2, 1e3},
    {"comm", "ms", "comm", 8, 2, 1e3},
    {"exposed", "ms", "exposed_comm", 8, 2, 1e3},
    {"TFLOP/s", "all", "tflops", 8, 4, 0},
    {"TFLOP/s", "rank", "tflops_rank", 8, 4, 0},
    {"eff", "%", "scaling_eff", 6, 1, 100},
    {"blk-model", "KB", "tp_bytes_block_model", 10, 1, 1e-3},
    {"blk-sent", "KB", "tp_bytes_block", 9, 1, 1e-3},
    {"model", "MB/step", "bytes_model", 8, 3, 1e-6},
    {"sent", "MB/step", "bytes_sent", 8, 3, 1e-6},
    {"param", "/serial", "params_frac", 8, 3, 0},
    {"activ", "/serial", "activ_frac", 8, 3, 0},
    {"1/t", "", "inv_tp", 5, 3, 0},
    SL_COL_ERROR("grad-err", "grad_rel_err", 9),
    {"loss", "", "final_loss", 10, 6, 0},
    {"vs f32", "%", "loss_vs_f32", 8, 3, 100},
    SL_COL("skipped", "skipped_steps", 7),
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_technique megatron = {
    .program = {.name = "megatron_mlp", .extra = mm_opts, .validate = validate,
                .summary = "Megatron tensor-parallel MLP blocks (column- then row-parallel, f/g), x data parallelism",
                .uses = SL_USES_BACKEND | SL_USES_COLL | SL_USES_DTYPE,
                .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16), .default_dtype = SL_F32,
                .colls = (1u << SL_NCOLLS) - 1, .default_coll = SL_COLL_RING,
                .default_iters = 5, .default_warmup = 2},
    .variants = variant_names, .nvariants = NVARIANTS, .variant_mask = &opt_variants,
    .setup = setup, .step = step, .free = release,
    .weights = weights, .gather_weights = gather_weights, .reference = mm_reference,
    .memory_model = memory_model, .bytes_model = bytes_model, .row = row,
    .model = model, .sweep = sweep, .check = mm_check_step,
    /* -d f16|bf16 (megatron_mlp/mixed.c): every variant, against the serial mixed-precision
     * blocks. The weights' bounds are the data-parallel ones (sl_train.h), for the same reason:
     * the distributed run and the serial one differ by where 16-bit sums are rounded (here the
     * f and g sums' partial sums over t ranks, all-reduced or seqpar's reduce-scattered, and the
     * replicas' gradient sum, one rounding per hop, at most t - 1 + d - 1 <= 3 hops in the tests), a few u of the partial sums per
     * step, and the bounds are 4u of the weights over the steps of a test or a lab run. */
    .mixed_variants = (1u << NVARIANTS) - 1,
    .tol_mixed_sgd_max = {[SL_F16] = SL_TRAIN_TOL_MIXED_SGD_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_SGD_BF16},
    .tol_mixed_adamw_l2 = {[SL_F16] = SL_TRAIN_TOL_MIXED_ADAMW_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_ADAMW_BF16},
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    sl_train_opt.batch = 16;
    return sl_train_main(&megatron, argc, argv);
}
