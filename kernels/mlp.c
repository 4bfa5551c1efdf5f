/* mlp.c — the shared MLP model (see mlp.h): shape and flat layout, initialisation, one-layer
 * forward/backward, the store-all activation store, optimizers and the synthetic task. */
#include <math.h>
#include <string.h>

#include "gpt_model.h"
#include "mlp.h"
#include "sl_error.h"

/* Shape and layout ----------------------------------------------------------------------- */

int sl_mlp_init(sl_mlp *m, sl_backend be, int nlayers, int in, int hidden, int out, sl_act act)
{
    if (nlayers < 1 || nlayers > SL_MLP_MAX_LAYERS || in < 1 || out < 1 ||
        (nlayers > 1 && hidden < 1) || (unsigned)act >= SL_NACTS)
        return -1;
    memset(m, 0, sizeof *m);
    m->be = be;
    m->nlayers = nlayers;
    m->dims[0] = in;
    for (int l = 1; l < nlayers; l++) m->dims[l] = hidden;
    m->dims[nlayers] = out;
    size_t off = 0;
    for (int l = 0; l < nlayers; l++) {
        m->act[l] = l == nlayers - 1 ? SL_ACT_NONE : act;
        m->w_off[l] = off;
        m->b_off[l] = off + (size_t)m->dims[l + 1] * m->dims[l];
        off = m->b_off[l] + m->dims[l + 1];
    }
    m->nparams = off;
    return 0;
}

size_t sl_mlp_layer_size(const sl_mlp *m, int l)
{
    if (sl_mlp_is_gpt(m)) return sl_gpt_layer_size(m, l);
    return (size_t)m->dims[l + 1] * (m->dims[l] + 1);
}

size_t sl_mlp_range_size(const sl_mlp *m, int l0, int l1)
{
    if (l1 <= l0) return 0;
    if (sl_mlp_is_gpt(m)) return m->w_off[l1] - m->w_off[l0];
    return m->b_off[l1 - 1] + m->dims[l1] - m->w_off[l0];
}

void sl_mlp_init_params(const sl_mlp *m, uint64_t seed, size_t first, size_t count, float *dst)
{
    if (sl_mlp_is_gpt(m)) {
        sl_gpt_init_params(m, seed, first, count, dst);
        return;
    }
    size_t end = first + count;
    for (int l = 0; l < m->nlayers; l++) {
        /* the weight part of layer l intersected with [first, end) */
        size_t lo = m->w_off[l] > first ? m->w_off[l] : first;
        size_t hi = m->b_off[l] < end ? m->b_off[l] : end;
        float gain = m->act[l] == SL_ACT_NONE ? 1.0f : 2.0f;
        if (lo < hi)
            sl_k_rng_normal(m->be, seed, lo, hi - lo, dst + (lo - first), 0.0f,
                            sqrtf(gain / m->dims[l]));
        /* the bias part */
        lo = m->b_off[l] > first ? m->b_off[l] : first;
        size_t bend = m->b_off[l] + m->dims[l + 1];
        hi = bend < end ? bend : end;
        if (lo < hi) sl_k_memset0(m->be, dst + (lo - first), (hi - lo) * sizeof(float));
    }
}

double sl_mlp_flops_forward(const sl_mlp *m, int batch)
{
    if (sl_mlp_is_gpt(m)) return sl_gpt_flops_forward(m, batch);
    double f = 0;
    for (int l = 0; l < m->nlayers; l++) f += 2.0 * batch * m->dims[l] * m->dims[l + 1];
    return f;
}

double sl_mlp_flops_backward(const sl_mlp *m, int batch)
{
    /* dW for every layer, dx for every layer but the first (the GPT's first is the embedding:
     * no GEMM, so its backward is twice its forward) */
    if (sl_mlp_is_gpt(m)) return 2.0 * sl_gpt_flops_forward(m, batch);
    return 2.0 * sl_mlp_flops_forward(m, batch) - 2.0 * batch * m->dims[0] * m->dims[1];
}

/* One layer ------------------------------------------------------------------------------- */

void sl_linear_forward(sl_backend be, int batch, int in, int out, const float *W,
                       const float *b, const float *x, float *z)
{
    /* z[batch, out] = x[batch, in] . W^T[in, out] */
    sl_k_sgemm(be, 0, 1, batch, out, in, 1.0f, x, in, W, in, 0.0f, z, out);
    if (b) sl_k_bias_add(be, batch, out, z, b);
}

void sl_linear_backward(sl_backend be, int batch, int in, int out, const float *W,
                        const float *x, const float *dz, float *dW, float *db, float *dx)
{
    /* dW[out, in] += dz^T[out, batch] . x[batch, in] */
    sl_k_sgemm(be, 1, 0, out, in, batch, 1.0f, dz, out, x, in, 1.0f, dW, in);
    if (db) sl_k_bias_grad(be, batch, out, dz, db);
    /* dx[batch, in] = dz[batch, out] . W[out, in] */
    if (dx) sl_k_sgemm(be, 0, 0, batch, in, out, 1.0f, dz, out, W, in, 0.0f, dx, in);
}

void sl_mlp_layer_forward(const sl_mlp *m, int l, int batch, const float *lp, const float *x,
                          float *z, float *y)
{
    int in = m->dims[l], out = m->dims[l + 1];
    const float *W = lp, *b = lp + (size_t)out * in;
    sl_linear_forward(m->be, batch, in, out, W, b, x, z);
    sl_k_act_forward(m->be, m->act[l], (size_t)batch * out, z, y);
}

void sl_mlp_layer_backward(const sl_mlp *m, int l, int batch, const float *lp, const float *x,
                           const float *z, float *dy, float *lg, float *dx)
{
    int in = m->dims[l], out = m->dims[l + 1];
    if (m->act[l] != SL_ACT_NONE) {
        if (!z) SL_FATAL("sl_mlp_layer_backward: layer %d needs its pre-activation", l);
        sl_k_act_backward(m->be, m->act[l], (size_t)batch * out, z, dy, dy);
    }
    sl_linear_backward(m->be, batch, in, out, lp, x, dy, lg, lg + (size_t)out * in, dx);
}

/* The activation store -------------------------------------------------------------------- */

static int max_width(const sl_mlp *m)
{
    int w = 0;
    for (int l = 0; l <= m->nlayers; l++) w = m->dims[l] > w ? m->dims[l] : w;
    return w;
}

size_t sl_mlp_acts_bytes(const sl_mlp *m, int batch)
{
    if (sl_mlp_is_gpt(m)) return sl_gpt_acts_bytes(m, SL_F32, batch);
    size_t e = 0;
    for (int l = 0; l <= m->nlayers; l++) e += m->dims[l];
    for (int l = 0; l < m->nlayers; l++)
        if (m->act[l] != SL_ACT_NONE) e += m->dims[l + 1];
    e += 2 * (size_t)max_width(m);
    return e * batch * sizeof(float);
}

static void acts_alloc(const sl_mlp *m, int batch, sl_mem_cat cat, sl_mlp_acts *a)
{
    memset(a, 0, sizeof *a);
    a->batch = batch;
    for (int l = 0; l <= m->nlayers; l++)
        a->x[l] = sl_k_malloc(m->be, cat, (size_t)batch * m->dims[l] * sizeof(float));
    for (int l = 0; l < m->nlayers; l++)
        a->z[l] = m->act[l] == SL_ACT_NONE
                      ? a->x[l + 1]
                      : sl_k_malloc(m->be, cat, (size_t)batch * m->dims[l + 1] * sizeof(float));
    for (int i = 0; i < 2; i++)
        a->dbuf[i] = sl_k_malloc(m->be, cat, (size_t)batch * max_width(m) * sizeof(float));
}

void sl_mlp_acts_alloc(const sl_mlp *m, int batch, sl_mlp_acts *a)
{
    acts_alloc(m, batch, SL_MEM_ACTIV, a);
}

void sl_mlp_acts_free(const sl_mlp *m, sl_mlp_acts *a)
{
    for (int l = 0; l < m->nlayers; l++)
        if (a->z[l] != a->x[l + 1]) sl_k_free(m->be, a->z[l]);
    for (int l = 0; l <= m->nlayers; l++) sl_k_free(m->be, a->x[l]);
    for (int i = 0; i < 2; i++) sl_k_free(m->be, a->dbuf[i]);
    memset(a, 0, sizeof *a);
}

void sl_mlp_forward(const sl_mlp *m, sl_mlp_acts *a, const float *params)
{
    for (int l = 0; l < m->nlayers; l++)
        sl_mlp_layer_forward(m, l, a->batch, params + m->w_off[l], a->x[l], a->z[l], a->x[l + 1]);
}

void sl_mlp_backward(const sl_mlp *m, sl_mlp_acts *a, const float *params, float *grads,
                     float *dout)
{
    float *dy = dout;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        /* dL/dx of layer l is dL/dy of layer l - 1: alternate between the two buffers */
        float *dx = l > 0 ? a->dbuf[l & 1] : NULL;
        sl_mlp_layer_backward(m, l, a->batch, params + m->w_off[l], a->x[l], a->z[l], dy,
                              grads + m->w_off[l], dx);
        dy = dx;
    }
}

/* Optimizers ------------------------------------------------------------------------------ */

const char *sl_optim_name(sl_optim_kind k)
{
    return k == SL_OPTIM_SGD ? "sgd" : k == SL_OPTIM_ADAMW ? "adamw" : "?";
}

int sl_optim_state_per_param(const sl_optim *o)
{
    if (o->kind == SL_OPTIM_ADAMW) return 2;
    return o->sgd.momentum != 0.0f ? 1 : 0;
}

void sl_optim_step(sl_backend be, const sl_optim *o, size_t n, float *w, const float *g,
                   float *state)
{
    if (o->kind == SL_OPTIM_ADAMW)
        sl_k_adamw_step(be, &o->adamw, n, w, g, state, state + n);
    else
        sl_k_sgd_step(be, &o->sgd, n, w, g, o->sgd.momentum != 0.0f ? state : NULL);
}

/* SGD's step is lr times the gradient, which the loss's normalisation over the batch keeps
 * small; 0.01 trains every shape the suite runs.
 * AdamW's step is not: m/sqrt(v) is +-1 at the first step and near it after, so every weight
 * moves by about lr whatever its gradient's size. A layer's batch gradient dz^T x is dominated
 * by a few directions, and the sign pattern of a rank-one matrix u v^T is sign(u) sign(v)^T,
 * whose spectral norm is sqrt(in * out): one step can change the layer's gain by up to
 * lr * sqrt(in * out), against the ~2*sqrt(2) of its He-initialised weights (spectral norm
 * sqrt(2 / in) (sqrt(in) + sqrt(out))). Through the stack these changes multiply: the output
 * can grow by exp(sum_l lr sqrt(in_l out_l) / (2 sqrt(2))). Keeping that exponent at 1 gives
 * the bound below, ~1/(width x depth) for a deep stack (the width half is muP's 1/fan_in
 * scaling of Adam's rate). A fixed 0.01 is 10x over it at 4 x 1024 and 57x at 32 x 512, where
 * the serial run's loss rose from 0.95 to 1.4e8 in one step, and a distributed run and its
 * reference, both diverged, no longer agreed to 1e-3 (L2 0.07-0.12). Measured on the synthetic
 * task (batch 32, 60 steps, 1 to 64 layers, 64 to 2048 wide): at the bound the loss falls in
 * every shape; at twice it a step can raise the loss 2-3x, at four times 7-15x. Capped at
 * 0.01, the top of Adam's customary range, at which the small models (where the bound is
 * larger) train well. */
double sl_optim_default_lr(const sl_mlp *m, sl_optim_kind k)
{
    if (k != SL_OPTIM_ADAMW) return 0.01;
    if (sl_mlp_is_gpt(m)) return 1e-3; /* GPT-2's and most transformers' AdamW rate */
    double sum = 0;
    for (int l = 0; l < m->nlayers; l++) sum += sqrt((double)m->dims[l] * m->dims[l + 1]);
    const double bound = 2.0 * sqrt(2.0) / sum;
    return bound < 0.01 ? bound : 0.01;
}

sl_mlp_bytes sl_mlp_memory(const sl_mlp *m, int batch, const sl_optim *o)
{
    sl_mlp_bytes b;
    b.params = m->nparams * sizeof(float);
    b.grads = b.params;
    b.optim = (size_t)sl_optim_state_per_param(o) * b.params;
    b.activ = sl_mlp_acts_bytes(m, batch);
    return b;
}

/* The synthetic task ---------------------------------------------------------------------- */

#define TEACHER_WIDTH 8 /* narrow, so that a student learns it in a few hundred steps */
/* Streams of the task, derived from its seed so that they never coincide. */
#define TEACHER_STREAM 0x7465616368657221ull /* "teacher!" */
#define DATA_STREAM 0x6461746173747265ull    /* "datastre" */

void sl_task_init(sl_task *t, sl_backend be, int in, int out, uint64_t seed, int max_batch)
{
    memset(t, 0, sizeof *t);
    t->be = be;
    t->seed = seed;
    t->max_batch = max_batch;
    t->loss_weight = 1.0f;
    if (sl_mlp_init(&t->teacher, be, 2, in, TEACHER_WIDTH, out, SL_ACT_GELU) != 0)
        SL_FATAL("sl_task_init: bad shape in=%d out=%d", in, out);
    t->teacher_params = sl_k_malloc(be, SL_MEM_DATA, t->teacher.nparams * sizeof(float));
    sl_mlp_init_params(&t->teacher, seed ^ TEACHER_STREAM, 0, t->teacher.nparams,
                       t->teacher_params);
    /* the teacher's activations are part of the data pipeline, not the model's activations:
     * counted as "data" so that activation peaks compare with the analytic model */
    acts_alloc(&t->teacher, max_batch, SL_MEM_DATA, &t->tacts);
}

void sl_task_init_gpt(sl_task *t, sl_backend be, int seq, int vocab, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->be = be;
    t->seed = seed;
    t->loss_weight = 1.0f;
    t->seq = seq;
    t->vocab = vocab;
}

void sl_task_tokens(sl_task *t, uint64_t first, int count, int32_t *tok, int32_t *tgt)
{
    if (!t->seq) SL_FATAL("sl_task_tokens: the task is the MLP's, not the GPT's");
    sl_gpt_task_tokens(t->be, t->seed, t->seq, t->vocab, first, count, tok, tgt);
}

void sl_task_free(sl_task *t)
{
    if (t->seq) {
        memset(t, 0, sizeof *t);
        return;
    }
    sl_mlp_acts_free(&t->teacher, &t->tacts);
    sl_k_free(t->be, t->teacher_params);
    memset(t, 0, sizeof *t);
}

float sl_task_loss_norm(const sl_task *t, int batch)
{
    return t->loss_weight / ((float)batch * (float)(t->seq ? t->seq : t->teacher.dims[2]));
}

void sl_task_batch(sl_task *t, uint64_t first, int count, float *x, float *y)
{
    const int in = t->teacher.dims[0], out = t->teacher.dims[2];
    if (t->seq) SL_FATAL("sl_task_batch: the task is the GPT's (sl_task_tokens)");
    if (count > t->max_batch)
        SL_FATAL("sl_task_batch: %d samples, the task was set up for %d", count, t->max_batch);
    sl_k_rng_normal(t->be, t->seed ^ DATA_STREAM, first * in, (size_t)count * in, x, 0.0f, 1.0f);
    /* the teacher runs on its own store, sized for max_batch, at this batch */
    sl_mlp_acts a = t->tacts;
    a.batch = count;
    a.x[0] = x;
    sl_mlp_forward(&t->teacher, &a, t->teacher_params);
    sl_k_memcpy(t->be, y, a.x[2], (size_t)count * out * sizeof(float), SL_K_D2D);
}
