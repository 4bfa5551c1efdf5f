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
 * -d f16|bf16 (every variant): Megatron-LM's mixed precision, in the same blocks. Each rank's
 * slices in the 16-bit type with an f32 master copy that the optimizer updates and casts back,
 * 16-bit GEMM operands accumulating in f32, and the f and g all-reduces (overlap's non-blocking
 * one, seqpar's all-gathers and reduce-scatters, the replicas' all-reduce) moving 16-bit
 * activations and gradients: half of f32's bytes per block. f16 scales the loss dynamically,
 * the overflow flag OR-ed over every rank so that all skip a step together (the training
 * layer's sl_train_mixed_*).
 *
 * There is one block forward and one block backward, below, for every dtype and variant; the
 * serial model the checks compare with is the same code at t = 1 (a group of one rank: nothing
 * communicated) on the global batch. The check (with -c 1, the default): the weights after the
 * timed steps against that serial model trained in the run's dtype (the training layer's
 * tolerances), and one step at the trained weights: the forward output, the input gradient and
 * every weight gradient (A, a, B, b of every block, gathered from the slices) against the serial
 * model's in the same dtype, and against an independent f32 reference built from the shared
 * model's layers (serial.h), so that a defect of the blocks themselves, which the serial model
 * shares, cannot hide (megatron_mlp/check.c); every rank's slices bit-identical with rank 0's
 * gathered weights (replicas, and b across a group); overlap and seqpar against plain
 * (vs_plain, reported). Rows carry the errors, bytes sent per block against the model, the step
 * split into compute / comm / exposed comm, and the memory a rank holds against 1/t of the
 * serial model's.
 *
 * --model gpt (plain, overlap and seqpar, every dtype, x --dp): the whole GPT split the same way
 * (train/tp_gpt.c): each block's attention by heads (QKV column-parallel, output projection
 * row-parallel) and its MLP as above, the embedding and the LM head by the vocabulary with
 * Megatron-LM's parallel cross-entropy (--no-vocab-parallel: the logits gathered instead, the
 * counter-example); seqpar splits each sequence's positions over the group for the layer norms,
 * residuals and dropout (Korthikanti et al.); checked against serial GPT training (the training
 * layer's), bytes per block, embedding, head and step and the activations a block keeps against
 * their models (megatron_mlp/gpt_row.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "sl_train.h"
#include "tp_gpt.h"
#include "tp_groups.h"
#include "megatron_mlp/pm_schedule.h"
#include "megatron_mlp/serial.h"
#include "megatron_mlp/slices.h"
#include "megatron_mlp/tp.h"

static const char *const variant_names[NVARIANTS] = SL_ENUM_NAMES(MM_VARIANTS);

static long long opt_blocks = 2, opt_hidden = 512, opt_ffn = 4, opt_dp = 0;
static sl_int_list opt_tp;
static unsigned opt_variants = ~0u;
static int opt_overlap, opt_seqpar, opt_no_vocab_parallel;

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
    {"no-vocab-parallel", 0, SL_OPT_FLAG, &opt_no_vocab_parallel, 0, 0, NULL, 0,
     "--model gpt: gather the whole N x V logits on every rank and compute the plain cross-entropy (the "
     "counter-example to the vocabulary-parallel one)"},
    {0},
};

/* The degrees of the sweep (validate) and the pass being run. */
static int tps[SL_MAX_LIST], ntps, cur_t = 1, cur_d = 1;


/* Phases ---------------------------------------------------------------------------- */

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

/* A blocking collective begun at t0 (after a sync): communication that nothing overlaps; group
 * says whether in the tensor-parallel group, else between replicas. */
static void blocking_span(sl_train *t, int rc, const char *name, double t0, int group)
{
    sl_train_coll_ok(rc, name);
    sl_train_blocking(t, name, t0);
    count_coll(t, name, group, 0);
}

/* Precision ------------------------------------------------------------------------------
 * The blocks hold weights, activations and gradients in s->dt and compute in f32: every GEMM
 * takes dt operands and accumulates in f32 (sl_k_gemm) into an f32 result, the element-wise
 * work (bias, GeLU, residual, loss) runs on f32 values widened from dt, and each result is
 * rounded once into dt. In f32 the f32 result is the dt buffer itself and widening and
 * rounding do nothing: the f32 blocks are plain f32 arithmetic, operation for operation the
 * serial reference's (serial.h). s->dt is t->dtype: sl_train_f32, sl_train_result and
 * sl_train_round widen, place and round. */

static int is_f32(const mm *s) { return s->dt == SL_F32; }

/* Element i of a dt array. */
static void *at(const mm *s, const void *p, size_t i) { return (char *)p + i * sl_dtype_size(s->dt); }

/* Block i's pieces in a flat vector of this rank's slices (slices.h): A_r, a_r, B_r, b. */
static size_t A_at(const mm *s, int i) { return (size_t)i * s->per_block; }
static size_t B_at(const mm *s, int i) { return A_at(s, i) + (size_t)s->c * s->h + s->c; }

/* The conjugate operators --------------------------------------------------------------
 * Each moves elements of the run's dtype (half of f32's bytes in f16/bf16; 16-bit sums widen
 * each pair to f32 and round at each hop). In a group of one rank (t = 1: the serial model)
 * nothing is communicated. */

/* The group's collectives:
 *   ALLREDUCE  g forward: the partial products of the row-parallel layer summed over the group;
 *              f backward: the partial input gradients of the column-parallel layer, likewise.
 *              [n, h], in place (out is in)
 *   GATHER     sequence parallel: the token shards [nloc, h] of every rank gathered into [n, h],
 *              in order
 *   SCATTER    sequence parallel: [n, h] partial sums, each rank keeping the sum of its own
 *              tokens [nloc, h] */
enum { ALLREDUCE, GATHER, SCATTER };
static void group_coll(sl_train *t, mm *s, int op, const void *in, void *out, const char *name)
{
    const size_t count = (size_t)(op == ALLREDUCE ? s->n : s->nloc) * s->h;
    if (s->t == 1) {
        if (op != ALLREDUCE) sl_k_memcpy(t->be, out, in, count * sl_dtype_size(s->dt), SL_K_D2D);
        return;
    }
    sl_k_sync(t->be);
    const double t0 = sl_now();
    const int rc = op == ALLREDUCE ? sl_coll_allreduce(s->tp, in, out, count, s->dt, SL_OP_SUM)
                   : op == GATHER  ? sl_coll_allgather(s->tp, in, out, count, s->dt)
                                   : sl_coll_reduce_scatter(s->tp, in, out, count, s->dt, SL_OP_SUM);
    blocking_span(t, rc, name, t0, 1);
}

/* One block --------------------------------------------------------------------------- */

/* x[i] -> x[i+1]. */
static void block_forward(sl_train *t, mm *s, int i)
{
    const sl_backend be = t->be;
    const int n = s->n, h = s->h, c = s->c, seqpar = t->variant == V_SEQPAR;
    const size_t nc = (size_t)n * c, nlh = (size_t)s->nloc * h;
    const void *X = s->x[i];
    if (seqpar) {
        group_coll(t, s, GATHER, s->x[i], s->zfull, "all-gather X");
        X = s->zfull;
    }
    double t0 = sl_now();
    /* column-parallel: this rank's f/t features of U = X·A^T + a and Y = GeLU(U), no
     * communication after it */
    float *u = sl_train_result(t, s->u[i], s->w0);
    sl_k_gemm(be, 0, 1, n, c, h, 1.0f, X, h, at(s, s->w, A_at(s, i)), h, 0.0f, u, c, s->dt, SL_F32);
    sl_k_bias_add(be, n, c, u, sl_train_f32(t, at(s, s->w, A_at(s, i) + (size_t)c * h), s->bias32, (size_t)c));
    sl_train_round(t, u, s->u[i], nc);
    float *y = sl_train_result(t, s->y[i], s->w0);
    sl_k_act_forward(be, SL_ACT_GELU, nc, sl_train_f32(t, s->u[i], s->w0, nc), y);
    sl_train_round(t, y, s->y[i], nc);
    /* row-parallel: Y_r·B_r^T, a partial sum of all of Z, without the bias */
    void *z = seqpar ? s->dxpart : s->zfull;
    float *zr = sl_train_result(t, z, s->w0);
    sl_k_gemm(be, 0, 1, n, h, c, 1.0f, s->y[i], c, at(s, s->w, B_at(s, i)), c, 0.0f, zr, h, s->dt, SL_F32);
    sl_train_round(t, zr, z, (size_t)n * h);
    sl_train_compute_span(t, "forward", t0);
    if (seqpar) {
        group_coll(t, s, SCATTER, z, s->x[i + 1], "reduce-scatter Z");
        z = s->x[i + 1];
    } else {
        group_coll(t, s, ALLREDUCE, z, z, "g: allreduce Z");
    }
    t0 = sl_now();
    /* b once, after the sum, then the residual X' = X + Z on this rank's tokens */
    float *r = sl_train_f32(t, z, s->w0, nlh);
    sl_k_bias_add(be, s->nloc, h, r, sl_train_f32(t, at(s, s->w, B_at(s, i) + (size_t)h * c), s->bias32, (size_t)h));
    sl_k_add(be, SL_F32, nlh, sl_train_f32(t, s->x[i], s->w1, nlh), r);
    sl_train_round(t, r, s->x[i + 1], nlh);
    sl_train_compute_span(t, "residual", t0);
}

/* Backward of the linear layer whose block [W [out, in], bias [out]] is at flat element off of
 * this rank's slices, from dz [n, out] and its input x [n, in]: rows [r0, r1) of
 * dW = dz^T·x, accumulated in f32 in s->grads. */
static void weight_grad_rows(sl_train *t, mm *s, int out, int in, const void *dz, const void *x, size_t off,
                             int r0, int r1)
{
    if (r1 > r0)
        sl_k_gemm(t->be, 1, 0, r1 - r0, in, s->n, 1.0f, at(s, dz, (size_t)r0), out, x, in, 0.0f,
                  s->grads + off + (size_t)r0 * in, in, s->dt, SL_F32);
}

/* Then the bias gradient sum over tokens of dz, and the layer's dW, db rounded into s->g. */
static void bias_grad_round(sl_train *t, mm *s, int out, int in, const void *dz, size_t off)
{
    float *db = s->grads + off + (size_t)out * in;
    sl_k_memset0(t->be, db, (size_t)out * sizeof(float));
    if (!(s->spoil && off % s->per_block == 0)) /* SL_TEST_CORRUPT: a_r's gradient left zero */
        sl_k_bias_grad(t->be, s->n, out, sl_train_f32(t, dz, s->w0, (size_t)s->n * out), db);
    sl_train_round(t, s->grads + off, at(s, s->g, off), (size_t)out * in + out);
}

/* And the input gradient dx = dz·W [n, in] (dt). */
static void input_grad(sl_train *t, mm *s, int out, int in, const void *dz, size_t off, void *dx)
{
    float *r = sl_train_result(t, dx, s->w1);
    sl_k_gemm(t->be, 0, 0, s->n, in, out, 1.0f, dz, out, at(s, s->w, off), in, 0.0f, r, in, s->dt, SL_F32);
    sl_train_round(t, r, dx, (size_t)s->n * in);
}

static void linear_backward(sl_train *t, mm *s, int out, int in, const void *dz, const void *x, size_t off,
                            void *dx)
{
    weight_grad_rows(t, s, out, in, dz, x, off, 0, out);
    bias_grad_round(t, s, out, in, dz, off);
    input_grad(t, s, out, in, dz, off, dx);
}

/* overlap: f's all-reduce of this rank's partial dX_r (already computed, in flight as req; NULL
 * in a group of one) advancing while dA_r += dU_r^T·X is computed in pieces of A_r's rows,
 * testing it between them so that the suite's own algorithms advance (the MPI library's may
 * too); then da_r. *done says whether the all-reduce completed meanwhile, at *t_done. */
static void weight_grad_overlapped(sl_train *t, mm *s, int i, const void *X, sl_coll_req *req, int *done,
                                   double *t_done)
{
    enum { PIECES = 8 };
    const int c = s->c;
    for (int p = 0; p < PIECES; p++) {
        double t0 = sl_now();
        weight_grad_rows(t, s, c, s->h, s->dy, X, A_at(s, i), (int)((long long)c * p / PIECES),
                         (int)((long long)c * (p + 1) / PIECES));
        sl_train_compute_span(t, "backward dA", t0);
        if (!*done) {
            t0 = sl_now();
            sl_train_coll_ok(sl_coll_test(req, done), "sl_coll_test");
            const double t1 = sl_now();
            sl_train_record(t, SL_PHASE_EXPOSED, t1 - t0);
            if (*done) *t_done = t1;
        }
    }
    const double t0 = sl_now();
    bias_grad_round(t, s, c, s->h, s->dy, A_at(s, i));
    sl_train_compute_span(t, "backward da", t0);
}

/* dL/dx[i+1] in dg[cur] -> dL/dx[i] in dg[!cur]. */
static void block_backward(sl_train *t, mm *s, int i, int cur)
{
    const int n = s->n, h = s->h, c = s->c, seqpar = t->variant == V_SEQPAR;
    const size_t nc = (size_t)n * c;
    void *dout = s->dg[cur], *dprev = s->dg[!cur];
    const void *dZ = dout;
    if (seqpar) { /* the conjugate of the reduce-scatter: every token's dZ */
        group_coll(t, s, GATHER, dout, s->zfull, "all-gather dZ");
        dZ = s->zfull;
    }
    double t0 = sl_now();
    /* g backward is the identity: dZ is whole on every rank, so are db = sum dZ and its own
     * dB_r = dZ^T·Y_r and dY_r = dZ·B_r */
    linear_backward(t, s, h, c, dZ, s->y[i], B_at(s, i), s->dy);
    /* dU_r = dY_r·GeLU'(U_r), into dy */
    float *du = sl_train_f32(t, s->dy, s->w0, nc);
    sl_k_act_backward(t->be, SL_ACT_GELU, nc, sl_train_f32(t, s->u[i], s->w1, nc), du, du);
    sl_train_round(t, du, s->dy, nc);
    sl_train_compute_span(t, "backward", t0);
    const void *X = s->x[i];
    if (seqpar) { /* only the shard of X was kept: gather it again */
        group_coll(t, s, GATHER, s->x[i], s->zfull, "all-gather X");
        X = s->zfull;
    }
    void *dx = seqpar ? s->dxpart : dprev; /* this rank's partial dX [n, h] */
    if (t->variant == V_OVERLAP) {
        t0 = sl_now();
        input_grad(t, s, c, h, s->dy, A_at(s, i), dx);
        sl_train_compute_span(t, "backward dX", t0);
        t0 = sl_now();
        sl_coll_req *req = NULL;
        int done = s->t == 1; /* a group of one: nothing to sum */
        double t_done = 0;
        if (!done) {
            sl_train_coll_ok(sl_coll_iallreduce(s->tp, dx, dx, (size_t)n * h, s->dt, SL_OP_SUM, &req),
                             "f: iallreduce dX");
            sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
        }
        weight_grad_overlapped(t, s, i, X, req, &done, &t_done);
        if (req) {
            const double w0 = sl_now();
            sl_train_coll_ok(sl_coll_wait(req), "sl_coll_wait");
            const double w1 = sl_now();
            sl_train_record(t, SL_PHASE_EXPOSED, w1 - w0);
            sl_train_span(t, SL_PHASE_COMM, "f: allreduce dX (overlapped)", t0, done ? t_done : w1);
            count_coll(t, "f: allreduce dX (overlapped)", 1, 1);
        }
    } else {
        t0 = sl_now();
        linear_backward(t, s, c, h, s->dy, X, A_at(s, i), dx);
        sl_train_compute_span(t, "backward", t0);
        if (seqpar)
            group_coll(t, s, SCATTER, dx, dprev, "reduce-scatter dX");
        else
            group_coll(t, s, ALLREDUCE, dx, dx, "f: allreduce dX");
    }
    t0 = sl_now();
    sl_k_add(t->be, s->dt, (size_t)s->nloc * h, dout, dprev); /* the residual's own path */
    sl_train_compute_span(t, "residual", t0);
}

/* The step ------------------------------------------------------------------------------ */

/* Forward, loss and backward on this rank's tokens of step t->step, the loss's gradient times
 * scale; the gradient slices (in s->g, scaled) summed over the replicas. Returns dL/dx[0]
 * (this rank's tokens, dt, scaled). */
static void *forward_backward(sl_train *t, mm *s, float scale)
{
    const size_t nlh = (size_t)s->nloc * s->h;
    float *in = sl_train_result(t, s->x[0], s->w0);
    sl_train_load(t, s->first, s->nloc, in, s->target);
    sl_train_round(t, in, s->x[0], nlh);
    for (int i = 0; i < s->L; i++) block_forward(t, s, i);
    double t0 = sl_now();
    /* every rank of a group holds (plain) or shares (seqpar) the output: the loss of its tokens
     * in f32, normalised over the global batch (counted once per token: plain's group shares
     * one); its gradient scaled, then rounded */
    float *dout = sl_train_result(t, s->dg[0], s->w1);
    const double loss = sl_k_mse(t->be, nlh, sl_train_f32(t, s->x[s->L], s->w0, nlh), s->target, dout,
                                 1.0f / ((float)t->global_batch * (float)s->h));
    if (scale != 1.0f) sl_k_scale(t->be, SL_F32, nlh, dout, scale);
    sl_train_round(t, dout, s->dg[0], nlh);
    if (s->tr == 0 || t->variant == V_SEQPAR) t->loss += loss;
    sl_train_compute_span(t, "loss", t0);
    int cur = 0;
    for (int i = s->L - 1; i >= 0; i--, cur = !cur) block_backward(t, s, i, cur);
    if (s->d > 1) {
        sl_k_sync(t->be);
        t0 = sl_now();
        blocking_span(t, sl_coll_allreduce(s->dp, s->g, s->g, s->np, s->dt, SL_OP_SUM), "allreduce (replicas)", t0,
                      0);
    }
    return s->dg[cur];
}

/* f16/bf16: the gradient slices unscaled into f32 (s->grads); returns how many are inf/NaN. */
static size_t unscale(sl_train *t, mm *s, float scale)
{
    if (is_f32(s)) return 0;
    sl_k_cast(t->be, s->np, s->g, s->dt, s->grads, SL_F32, NULL);
    return sl_k_scale_check(t->be, s->np, s->grads, 1.0f / scale); /* exact: scales are powers of two */
}

static float loss_scale(const mm *s) { return is_f32(s) ? 1.0f : (float)s->ms.sc.scale; }

static void step(sl_train *t)
{
    if (sl_mlp_is_gpt(t->m)) {
        mg_step(t);
        return;
    }
    mm *s = t->state;
    const unsigned long long tp0 = sl_comm_bytes_sent(s->tp), dp0 = sl_comm_bytes_sent(s->dp);
    s->counting = 1;
    const float scale = loss_scale(s);
    forward_backward(t, s, scale);
    /* 16 bits: the overflow flag OR-ed over every rank, tensor-parallel and data-parallel alike: a
     * group's ranks hold different slices, and a step applied on some and skipped on others
     * would leave one model's slices from two different steps */
    sl_train_mixed_step(t, &s->ms, s->g, s->grads, s->params, s->optim, s->w, s->np);
    s->counting = 0;
    s->sent_tp += (double)(sl_comm_bytes_sent(s->tp) - tp0);
    s->sent_dp += (double)(sl_comm_bytes_sent(s->dp) - dp0);
}

/* mm_ops.pass: the check's step at the current weights (tp.h). */
static void pass(sl_train *t, float **out, float **dx)
{
    mm *s = t->state;
    const size_t nlh = (size_t)s->nloc * s->h, bytes = nlh * sizeof(float);
    const float scale = loss_scale(s);
    const void *d = forward_backward(t, s, scale);
    unscale(t, s, scale);
    *out = sl_k_malloc(t->be, SL_MEM_OTHER, bytes);
    *dx = sl_k_malloc(t->be, SL_MEM_OTHER, bytes);
    sl_k_cast(t->be, nlh, s->x[s->L], s->dt, *out, SL_F32, NULL);
    sl_k_cast(t->be, nlh, d, s->dt, *dx, SL_F32, NULL);
    if (scale != 1.0f) sl_k_scale(t->be, SL_F32, nlh, *dx, 1.0 / scale);
    sl_k_sync(t->be);
}

/* Setup ------------------------------------------------------------------------------- */

static void setup(sl_train *t)
{
    if (sl_mlp_is_gpt(t->m)) {
        const mg_options o = {.sequence_parallel = t->variant == V_SEQPAR,
                              .vocab_gather = opt_no_vocab_parallel,
                              .overlap = t->variant == V_OVERLAP};
        mg_setup_opts(t, cur_t, cur_d, &o);
        return;
    }
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
    s->dt = t->dtype;
    s->spoil = sl_test_corrupt() && s->dt == SL_F32; /* 16-bit runs: the injected overflow instead */

    mm_groups_open(t, s->rep, s->tr, &s->tp_mpi, &s->dp_mpi, &s->tp, &s->dp);

    /* the replica's tokens of each step; seqpar: this rank's n/t of them between blocks */
    size_t lo, hi;
    sl_share((size_t)t->global_batch, s->d, s->rep, &lo, &hi);
    t->lo = (int)lo;
    t->hi = (int)hi;
    s->n = (int)(hi - lo);
    s->nloc = t->variant == V_SEQPAR ? s->n / s->t : s->n;
    s->first = t->lo + (t->variant == V_SEQPAR ? s->tr * s->nloc : 0);

    const int L = s->L, h = s->h, n = s->n, c = s->c;
    const size_t es = sl_dtype_size(s->dt), f4 = sizeof(float), np = s->np;
    /* the f32 slices (f16/bf16: the master copy the optimizer updates), their f32 (unscaled)
     * gradients and the optimizer state; beside them in f16/bf16 the 16-bit copies the blocks
     * use and the 16-bit gradients they produce and communicate */
    s->params = sl_train_alloc(t, SL_MEM_PARAMS, np * f4);
    s->grads = sl_train_alloc(t, SL_MEM_GRADS, np * f4);
    s->optim = sl_train_alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * np * f4);
    mm_slice_init(m, s->t, s->tr, (uint64_t)sl_train_opt.seed, s->params);
    s->w = is_f32(s) ? (void *)s->params : sl_train_alloc(t, SL_MEM_PARAMS, np * es);
    s->g = is_f32(s) ? (void *)s->grads : sl_train_alloc(t, SL_MEM_GRADS, np * es);
    if (!is_f32(s)) sl_k_cast(t->be, np, s->params, SL_F32, s->w, s->dt, NULL);
    s->x = calloc((size_t)L + 1, sizeof *s->x);
    s->u = calloc((size_t)L, sizeof *s->u);
    s->y = calloc((size_t)L, sizeof *s->y);
    if (!s->x || !s->u || !s->y) SL_FATAL("out of memory");
    /* kept for backward (activ): x, u, y; work buffers (comm) are not kept across blocks */
    for (int i = 0; i <= L; i++) s->x[i] = sl_train_alloc(t, SL_MEM_ACTIV, (size_t)s->nloc * h * es);
    for (int i = 0; i < L; i++) {
        s->u[i] = sl_train_alloc(t, SL_MEM_ACTIV, (size_t)n * c * es);
        s->y[i] = sl_train_alloc(t, SL_MEM_ACTIV, (size_t)n * c * es);
    }
    s->target = sl_train_alloc(t, SL_MEM_DATA, (size_t)s->nloc * h * f4);
    s->zfull = sl_train_alloc(t, SL_MEM_COMM, (size_t)n * h * es);
    if (t->variant == V_SEQPAR) s->dxpart = sl_train_alloc(t, SL_MEM_COMM, (size_t)n * h * es);
    s->dg[0] = sl_train_alloc(t, SL_MEM_COMM, (size_t)s->nloc * h * es);
    s->dg[1] = sl_train_alloc(t, SL_MEM_COMM, (size_t)s->nloc * h * es);
    s->dy = sl_train_alloc(t, SL_MEM_COMM, (size_t)n * c * es);
    if (!is_f32(s)) { /* the f32 values the 16-bit operands are widened into, and the loss scaler */
        const size_t wmax = (size_t)(h > c ? h : c);
        s->w0 = sl_train_alloc(t, SL_MEM_OTHER, (size_t)n * wmax * f4);
        s->w1 = sl_train_alloc(t, SL_MEM_OTHER, (size_t)n * wmax * f4);
        s->bias32 = sl_train_alloc(t, SL_MEM_OTHER, wmax * f4);
        sl_train_mixed_init(&s->ms, s->dt);
    }
}

static void release(sl_train *t)
{
    if (sl_mlp_is_gpt(t->m)) {
        mg_free(t);
        return;
    }
    mm *s = t->state;
    for (int i = 0; s->x && i <= s->L; i++) sl_k_free(t->be, s->x[i]);
    for (int i = 0; s->u && i < s->L; i++) {
        sl_k_free(t->be, s->u[i]);
        sl_k_free(t->be, s->y[i]);
    }
    void *bufs[] = {s->params, s->grads, s->optim, is_f32(s) ? NULL : s->w, is_f32(s) ? NULL : s->g, s->target,
                    s->zfull, s->dxpart, s->dg[0], s->dg[1], s->dy, s->w0, s->w1, s->bias32};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    free(s->x);
    free(s->u);
    free(s->y);
    mm_groups_close(&s->tp_mpi, &s->dp_mpi, s->tp, s->dp);
    free(s);
}

/* What the checks run (check.c): the serial model is this technique at t = 1. */
static const mm_ops ops = {.setup = setup, .step = step, .release = release, .pass = pass};

/* Weights ------------------------------------------------------------------ */

/* At t = 1 a rank's vector is the flat vector; otherwise its first run, A_r of block 0. */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    if (sl_mlp_is_gpt(t->m)) return mg_weights(t, first, count);
    mm *s = t->state;
    *first = s->t == 1 ? 0 : t->m->w_off[0] + (size_t)s->tr * s->c * s->h;
    *count = s->t == 1 ? t->m->nparams : (size_t)s->c * s->h;
    return s->params;
}

static void gather_weights(sl_train *t, float *full)
{
    if (sl_mlp_is_gpt(t->m)) {
        mg_gather(t, full);
        return;
    }
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
    if (sl_mlp_is_gpt(t->m)) return mg_bytes_model(t);
    const mm *s = t->state;
    return s->L * tp_block_model(t) + 2.0 * (s->d - 1) / s->d * (double)s->np * (double)sl_dtype_size(t->dtype);
}

/* What setup allocates per category: the slices, their gradients and optimizer state (f32;
 * f16/bf16 with the 16-bit copies of the slices and of their gradients beside the f32 master
 * and unscaled gradients: 2 + 4 bytes an element each); the kept activations x[0..L] of nloc
 * tokens (plain: all n; seqpar: n/t) and u, y of c features, in the run's dtype. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    if (sl_mlp_is_gpt(t->m)) {
        mg_memory_model(t, bytes);
        return;
    }
    const mm *s = t->state;
    const double np = (double)s->np, es = (double)sl_dtype_size(s->dt), copy = s->dt == SL_F32 ? 0 : es * np;
    bytes[SL_MEM_PARAMS] = 4 * np + copy;
    bytes[SL_MEM_GRADS] = 4 * np + copy;
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * 4 * np;
    bytes[SL_MEM_ACTIV] = ((s->L + 1.0) * s->nloc * s->h + 2.0 * s->L * s->n * s->c) * es;
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
    if (sl_mlp_is_gpt(t->m)) {
        mg_row(t, res);
        return;
    }
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
    mm_set_metric(res, "bytes_sent", opaque ? NAN : most[0] + most[1]);
    sl_result_metric(res, "tp_bytes_block", opaque ? NAN : most[0] / s->L, "bytes");
    sl_result_metric(res, "tp_bytes_block_model", tp_block_model(t), "bytes");
    sl_result_metric(res, "dp_bytes", opaque ? NAN : most[1], "bytes");
    sl_result_metric(res, "tflops_rank", mm_metric_of(res, "tflops") / P, "TFLOP/s");
    /* memory against 1/t of the serial model's on the same tokens */
    const double serial_params = (double)t->m->nparams * sizeof(float);
    const double serial_activ = mm_serial_activ_bytes(t->m, s->n);
    sl_result_metric(res, "serial_params", serial_params, "bytes");
    sl_result_metric(res, "serial_activ", serial_activ, "bytes");
    sl_result_metric(res, "params_frac", mm_metric_of(res, "mem_params") / serial_params, "fraction");
    sl_result_metric(res, "activ_frac", mm_metric_of(res, "mem_activ") / serial_activ, "fraction");
    sl_result_metric(res, "inv_tp", 1.0 / s->t, "fraction");
    const int checked = s->check_step;
    sl_result_metric(res, "out_rel_err", checked ? s->out_err : NAN, "ratio");
    sl_result_metric(res, "dx_rel_err", checked ? s->dx_err : NAN, "ratio");
    sl_result_metric(res, "grad_rel_err", checked ? s->grad_err : NAN, "ratio");
    sl_result_metric(res, "colpar_diff", checked ? s->colpar_diff : NAN, "abs");
    sl_result_metric(res, "vs_plain", checked ? s->vs_plain : NAN, "ratio");
    sl_result_metric(res, "f32_ref_err", checked ? s->f32_ref_err : NAN, "ratio");
    if (t->variant == V_OVERLAP)
        sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(s->tp));
    if (s->dt != SL_F32) {
        sl_result_param_str(res, "precision", "mixed");
        sl_result_param_str(res, "tp_allreduce",
                            t->variant == V_SEQPAR
                                ? "16-bit reduce-scatters and all-gathers, summed pairwise in f32 and rounded at each hop"
                                : "16-bit, summed pairwise in f32 and rounded at each hop");
        sl_train_mixed_row(t, &s->ms, res);
    }
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

/* seqpar's f and g are an all-gather and a reduce-scatter (--no-vocab-parallel's logits an
 * all-gather): an implementation without them would fail at the first such step, after other
 * rows were measured. */
static void require_gather_scatter(sl_ctx *ctx, int needed, const char *what, const char *instead)
{
    unsigned ok = 0;
    for (int c = 0; c < SL_NCOLLS; c++)
        if (sl_coll_supports((sl_coll)c, SL_CO_ALLGATHER) && sl_coll_supports((sl_coll)c, SL_CO_REDUCE_SCATTER))
            ok |= 1u << c;
    const unsigned lacking = ctx->opt.colls & ~ok;
    if (!needed || !lacking) return;
    char names[128] = "";
    for (int c = 0; c < SL_NCOLLS; c++)
        if (ok & ctx->prog->colls & (1u << c))
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? "|" : "",
                     sl_coll_name((sl_coll)c));
    const char *bad = sl_coll_name((sl_coll)__builtin_ctz(lacking));
    sl_usage_error("--coll (-C) %s: %s needs allgather and reduce_scatter, which %s does not provide; with %s "
                   "megatron_mlp accepts %s (%s)", bad, what, bad, what, names, instead);
}

/* --model gpt: every block split over t ranks by heads (tp_gpt.h), the embedding and head by
 * the vocabulary; plain and overlap, seqpar when asked for. */
static void validate_gpt(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    const sl_gpt_shape g = sl_gpt_resolve(&sl_gpt_opt);
    if (opt_variants == ~0u) opt_variants = (1u << V_PLAIN) | (1u << V_OVERLAP);
    const int seqpar = (opt_variants & (1u << V_SEQPAR)) != 0;
    require_gather_scatter(ctx, seqpar, "seqpar", "or leave seqpar out of --variants");
    require_gather_scatter(ctx, opt_no_vocab_parallel, "--no-vocab-parallel", "or leave it out");
    static const char *const mlp_opts[] = {"hidden", "ffn-mult"};
    for (size_t i = 0; i < sizeof mlp_opts / sizeof *mlp_opts; i++)
        if (sl_option_given(&ctx->opt, mlp_opts[i]))
            sl_usage_error("--%s: the MLP blocks' shape; with --model gpt the shape is --blocks --d-model --heads "
                           "--seq --vocab (the MLP four times --d-model)", mlp_opts[i]);
    ntps = 0;
    for (int i = 0; i < opt_tp.n; i++) tps[ntps++] = (int)opt_tp.v[i];
    if (!opt_tp.n && opt_dp) {
        if (P % opt_dp != 0) sl_usage_error("--dp %lld: the ranks (%d) are not divisible by d", opt_dp, P);
        tps[ntps++] = (int)(P / opt_dp);
    }
    const long long B = sl_train_opt.scaling ? sl_train_opt.batch : sl_train_opt.batch * P; /* sequences a step */
    for (int tv = 1; !opt_tp.n && !opt_dp && tv <= P; tv *= 2) {
        if (P % tv != 0) continue;
        if (g.heads % tv == 0 && g.vocab % tv == 0 && B >= P / tv && (!seqpar || g.seq % tv == 0)) tps[ntps++] = tv;
        else sl_note(ctx, "skipping t = %d: it does not divide --heads %lld and --vocab %lld (seqpar: --seq %lld), or "
                     "the %lld sequences of a step do not give its %d replicas one each", tv, g.heads, g.vocab, g.seq,
                     B, P / tv);
    }
    if (!opt_tp.n && !opt_dp && !ntps) sl_usage_error("--tp: no t of 1, 2, 4, ... can split this GPT on %d ranks", P);
    for (int i = 0; i < ntps; i++) {
        const long long tv = tps[i], d = P / tv;
        if (g.heads % tv != 0)
            sl_usage_error("--tp %lld: the GPT's --heads %lld must be divisible by t (each rank takes heads/t heads)",
                           tv, g.heads);
        if (g.d_model % tv != 0)
            sl_usage_error("--tp %lld: --d-model %lld must be divisible by t", tv, g.d_model);
        if (g.vocab % tv != 0)
            sl_usage_error("--tp %lld: --vocab %lld must be divisible by t (each rank holds vocab/t rows of the "
                           "embedding and of the LM head)", tv, g.vocab);
        if (seqpar && g.seq % tv != 0)
            sl_usage_error("--seq %lld: --sequence-parallel splits each sequence's positions over t ranks; t = %lld "
                           "must divide it", g.seq, tv);
        if (opt_dp && tv * opt_dp != P) sl_usage_error("--tp %lld x --dp %lld: the ranks (%d) must be t x d", tv, opt_dp, P);
        if (P % tv != 0) sl_usage_error("--tp %lld needs a multiple of %lld ranks, %d given", tv, tv, P);
        if (B < d)
            sl_usage_error("--batch %lld: d = %lld replicas need at least one sequence each", sl_train_opt.batch, d);
    }
}

static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    if (opt_no_vocab_parallel && !sl_gpt_selected())
        sl_usage_error("--no-vocab-parallel: the GPT's LM head; give --model gpt (the MLP blocks have no vocabulary)");
    if (opt_overlap || opt_seqpar) {
        if (opt_variants != ~0u)
            sl_usage_error("--overlap/--sequence-parallel: give the variants either by these flags or by --variants");
        opt_variants = (opt_overlap ? 1u << V_OVERLAP : 0) | (opt_seqpar ? 1u << V_SEQPAR : 0);
    }
    if (sl_gpt_selected()) {
        validate_gpt(ctx);
        return;
    }
    require_gather_scatter(ctx, (opt_variants & (1u << V_SEQPAR)) != 0, "seqpar", "or leave seqpar out of --variants");
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
    if (sl_gpt_selected()) {
        sl_note(ctx, "GPT, t = %d tensor-parallel (heads and vocabulary) x d = %d data-parallel", cur_t, cur_d);
        return 1;
    }
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
    SL_TRAIN_COLUMNS_PRED,
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

/* The checks and the reference (check.c), run through the technique's own entry points. */
static int check(sl_train *t, double *error, char *why, size_t len)
{
    return sl_mlp_is_gpt(t->m) ? mg_check(t, error, why, len) : mm_check_step(t, &ops, error, why, len);
}

/* --model gpt: serial GPT training on the global batch in the run's dtype (train_gpt.c). */
static void reference(sl_train *t, float *params, double *losses)
{
    if (sl_mlp_is_gpt(t->m)) sl_train_serial_run(t, t->dtype, params, losses);
    else mm_reference(t, &ops, params, losses);
}

static const sl_technique megatron = {
    .program = {.name = "megatron_mlp", .extra = mm_opts, .validate = validate,
                .summary = "Megatron tensor-parallel MLP blocks (column- then row-parallel, f/g), x data parallelism",
                SL_TRAIN_PROGRAM_USES, .default_coll = SL_COLL_RING,
                .default_iters = 5, .default_warmup = 2},
    .variants = variant_names, .nvariants = NVARIANTS, .variant_mask = &opt_variants,
    .setup = setup, .step = step, .free = release,
    .weights = weights, .gather_weights = gather_weights, .reference = reference,
    .memory_model = memory_model, .bytes_model = bytes_model, .schedule = mm_pm_schedule, .row = row,
    .schedule_launched_only = 1,
    .model = model, .sweep = sweep, .check = check, .trains_gpt = 1,
    /* -d f16|bf16: every variant, against the serial model trained in the same precision. The
     * weights' bounds are the data-parallel ones (sl_train.h), for the same reason:
     * the distributed run and the serial one differ by where 16-bit sums are rounded (here the
     * f and g sums' partial sums over t ranks, all-reduced or seqpar's reduce-scattered, and the
     * replicas' gradient sum, one rounding per hop, at most t - 1 + d - 1 <= 3 hops in the
     * tests), a few u of the partial sums per step, and the bounds are 4u of the weights over the steps of a test or a lab run. */
    .mixed_variants = (1u << NVARIANTS) - 1,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    sl_train_opt.batch = 16;
    sl_gpt_opt.layers_opt = "blocks", sl_gpt_opt.layers_src = &opt_blocks; /* the GPT's L */
    return sl_train_main(&megatron, argc, argv);
}
