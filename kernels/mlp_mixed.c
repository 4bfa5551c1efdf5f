/* mlp_mixed.c — mixed-precision training of the shared MLP (see mlp_mixed.h). The order of
 * operations with dt = f32 is that of mlp.c and train_ref.c, so that the f32 path reproduces
 * the serial reference bit for bit. */
#include <string.h>

#include "mlp_mixed.h"
#include "sl_error.h"

/* Element `off` of a dt array. */
static void *at(const sl_mixed *mx, const void *p, size_t off)
{
    return (char *)p + off * sl_dtype_size(mx->dt);
}

static int max_width(const sl_mlp *m)
{
    int w = 0;
    for (int l = 0; l <= m->nlayers; l++) w = m->dims[l] > w ? m->dims[l] : w;
    return w;
}

void sl_mixed_init_work(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int batch)
{
    if (dt != SL_F32 && dt != SL_F16 && dt != SL_BF16)
        SL_FATAL("sl_mixed_init: dtype %s (expected f32, f16 or bf16)", sl_dtype_name(dt));
    memset(mx, 0, sizeof *mx);
    mx->m = m;
    mx->be = m->be;
    mx->dt = dt;
    mx->batch = batch;
    const sl_backend be = m->be;
    const size_t w = (size_t)max_width(m);
    mx->t0 = sl_k_malloc(be, SL_MEM_OTHER, (size_t)batch * w * sizeof(float));
    mx->t1 = sl_k_malloc(be, SL_MEM_OTHER, (size_t)batch * w * sizeof(float));
    mx->bias32 = sl_k_malloc(be, SL_MEM_OTHER, w * sizeof(float));
    const size_t nout = (size_t)batch * m->dims[m->nlayers] * sizeof(float);
    mx->out32 = sl_k_malloc(be, SL_MEM_OTHER, nout);
    mx->dout32 = sl_k_malloc(be, SL_MEM_OTHER, nout);
}

void sl_mixed_init_layers(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int batch)
{
    sl_mixed_init_work(mx, m, dt, batch);
    const sl_backend be = m->be;
    const size_t es = sl_dtype_size(dt), w = (size_t)max_width(m);
    for (int l = 0; l <= m->nlayers; l++)
        mx->x[l] = sl_k_malloc(be, SL_MEM_ACTIV, (size_t)batch * m->dims[l] * es);
    for (int l = 0; l < m->nlayers; l++)
        mx->z[l] = m->act[l] == SL_ACT_NONE
                       ? mx->x[l + 1]
                       : sl_k_malloc(be, SL_MEM_ACTIV, (size_t)batch * m->dims[l + 1] * es);
    for (int i = 0; i < 2; i++) mx->dbuf[i] = sl_k_malloc(be, SL_MEM_ACTIV, (size_t)batch * w * es);
}

void sl_mixed_init(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int master, int batch,
                   uint64_t seed, const sl_optim *o)
{
    sl_mixed_init_layers(mx, m, dt, batch);
    const sl_backend be = m->be;
    const size_t n = m->nparams, es = sl_dtype_size(dt);
    /* In f32 the layers' weights are the master copy and the gradients are not rounded:
     * one buffer each, as a plain f32 trainer holds (the casts between them are skipped). */
    const int f32 = dt == SL_F32;
    mx->g32 = sl_k_malloc(be, SL_MEM_GRADS, n * sizeof(float));
    mx->g16 = f32 ? (void *)mx->g32 : sl_k_malloc(be, SL_MEM_GRADS, n * es);
    const size_t state = (size_t)sl_optim_state_per_param(o) * n * sizeof(float);
    mx->state = state ? sl_k_malloc(be, SL_MEM_OPTIM, state) : NULL;
    /* the f32 weights: kept (master) or a workspace for the update (none) */
    float *init = sl_k_malloc(be, master ? SL_MEM_PARAMS : SL_MEM_OTHER, n * sizeof(float));
    sl_mlp_init_params(m, seed, 0, n, init);
    mx->w16 = f32 && master ? (void *)init : sl_k_malloc(be, SL_MEM_PARAMS, n * es);
    if (mx->w16 != init) sl_k_cast(be, n, init, SL_F32, mx->w16, dt, NULL);
    if (master) mx->master = init;
    else mx->wide = init;
}

void sl_mixed_free(sl_mixed *mx)
{
    const sl_mlp *m = mx->m;
    const sl_backend be = mx->be;
    for (int l = 0; l < m->nlayers; l++)
        if (mx->z[l] != mx->x[l + 1]) sl_k_free(be, mx->z[l]);
    for (int l = 0; l <= m->nlayers; l++) sl_k_free(be, mx->x[l]);
    void *bufs[] = {mx->w16 != mx->master ? mx->w16 : NULL, mx->g16 != mx->g32 ? mx->g16 : NULL,
                    mx->g32, mx->state, mx->master, mx->wide, mx->dbuf[0], mx->dbuf[1], mx->t0,
                    mx->t1, mx->bias32, mx->out32, mx->dout32};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(be, bufs[i]);
    memset(mx, 0, sizeof *mx);
}

/* f32 src[n] rounded into dt dst[n], counted in c / *cn (one buffer in f32: nothing to do) */
static void narrow(sl_mixed *mx, size_t n, const float *src, void *dst, sl_cast_count *c,
                   unsigned long long *cn)
{
    if ((const void *)src != dst) sl_k_cast(mx->be, n, src, SL_F32, dst, mx->dt, c);
    *cn += n;
}

static void widen(sl_mixed *mx, size_t n, const void *src, float *dst)
{
    if (src != (const void *)dst) sl_k_cast(mx->be, n, src, mx->dt, dst, SL_F32, NULL);
}

/* Layer l: z = x W^T + b (f32 accumulate, rounded into dt), y = act(z) (in f32 from the
 * rounded z, rounded into dt). */
void sl_mixed_layer_forward(sl_mixed *mx, int l, const void *wl)
{
    const sl_mlp *m = mx->m;
    const int B = mx->batch, in = m->dims[l], out = m->dims[l + 1];
    const size_t nz = (size_t)B * out;
    const void *W = wl, *b = at(mx, wl, m->b_off[l] - m->w_off[l]);
    /* t0[B, out] = x[B, in] . W^T[in, out] */
    sl_k_gemm(mx->be, 0, 1, B, out, in, 1.0f, mx->x[l], in, W, in, 0.0f, mx->t0, out, mx->dt, SL_F32);
    widen(mx, (size_t)out, b, mx->bias32);
    sl_k_bias_add(mx->be, B, out, mx->t0, mx->bias32);
    narrow(mx, nz, mx->t0, mx->z[l], &mx->cnt.act, &mx->cnt.act_n);
    if (m->act[l] == SL_ACT_NONE || !mx->x[l + 1]) return; /* z[l] is x[l + 1], or z only */
    widen(mx, nz, mx->z[l], mx->t0);
    sl_k_act_forward(mx->be, m->act[l], nz, mx->t0, mx->t0);
    narrow(mx, nz, mx->t0, mx->x[l + 1], &mx->cnt.act, &mx->cnt.act_n);
}

/* Layer l backward from dy = dL/dy (dt, [B, out]), overwritten with dL/dz: dW and db into
 * gw32 (f32) then rounded into g16l; dx = dL/dx into dx (dt) unless NULL. */
void sl_mixed_layer_backward(sl_mixed *mx, int l, void *dy, void *dx, const void *wl, float *gw32,
                             void *g16l)
{
    const sl_mlp *m = mx->m;
    const sl_backend be = mx->be;
    const int B = mx->batch, in = m->dims[l], out = m->dims[l + 1];
    const size_t nz = (size_t)B * out;
    if (m->act[l] != SL_ACT_NONE) {
        widen(mx, nz, dy, mx->t0);
        widen(mx, nz, mx->z[l], mx->t1);
        sl_k_act_backward(be, m->act[l], nz, mx->t1, mx->t0, mx->t0);
        narrow(mx, nz, mx->t0, dy, &mx->cnt.agrad, &mx->cnt.agrad_n);
    }
    /* dW[out, in] = dz^T[out, B] . x[B, in], accumulated in f32 */
    float *dW = gw32, *db = gw32 + (m->b_off[l] - m->w_off[l]);
    sl_k_gemm(be, 1, 0, out, in, B, 1.0f, dy, out, mx->x[l], in, 0.0f, dW, in, mx->dt, SL_F32);
    /* db[out] = sum over rows of dz, from the dz the GEMMs see */
    widen(mx, nz, dy, mx->t0);
    sl_k_memset0(be, db, (size_t)out * sizeof(float));
    sl_k_bias_grad(be, B, out, mx->t0, db);
    const size_t nb = sl_mlp_layer_size(m, l);
    narrow(mx, nb, dW, g16l, &mx->cnt.wgrad, &mx->cnt.wgrad_n);
    if (!dx) return;
    /* dx[B, in] = dz[B, out] . W[out, in] */
    sl_k_gemm(be, 0, 0, B, in, out, 1.0f, dy, out, wl, in, 0.0f, mx->t1, in, mx->dt, SL_F32);
    narrow(mx, (size_t)B * in, mx->t1, dx, &mx->cnt.agrad, &mx->cnt.agrad_n);
}

void sl_mixed_input(sl_mixed *mx, const float *x)
{
    memset(&mx->cnt, 0, sizeof mx->cnt);
    narrow(mx, (size_t)mx->batch * mx->m->dims[0], x, mx->x[0], &mx->cnt.act, &mx->cnt.act_n);
}

double sl_mixed_loss(sl_mixed *mx, const float *y, float norm, float scale)
{
    const sl_mlp *m = mx->m;
    const int L = m->nlayers;
    const size_t nout = (size_t)mx->batch * m->dims[L];
    /* the loss in f32, as autocast computes it; its gradient scaled, then rounded into dt: the
     * first place where small gradients underflow */
    widen(mx, nout, mx->x[L], mx->out32);
    double loss = sl_k_mse(mx->be, nout, mx->out32, y, mx->dout32, norm);
    if (scale != 1.0f) sl_k_scale(mx->be, SL_F32, nout, mx->dout32, scale);
    narrow(mx, nout, mx->dout32, sl_mixed_dout(mx), &mx->cnt.agrad, &mx->cnt.agrad_n);
    return loss;
}

void *sl_mixed_dout(sl_mixed *mx)
{
    return mx->dbuf[mx->m->nlayers & 1]; /* not the buffer the last layer's dx goes to (as mlp.c) */
}

void *sl_mixed_dx(sl_mixed *mx, int l) { return l > 0 ? mx->dbuf[l & 1] : NULL; }

double sl_mixed_forward_backward(sl_mixed *mx, const float *x, const float *y, float norm,
                                 float scale)
{
    const sl_mlp *m = mx->m;
    const int L = m->nlayers;
    sl_mixed_input(mx, x);
    for (int l = 0; l < L; l++) sl_mixed_layer_forward(mx, l, at(mx, mx->w16, m->w_off[l]));
    double loss = sl_mixed_loss(mx, y, norm, scale);
    void *dy = sl_mixed_dout(mx);
    for (int l = L - 1; l >= 0; l--) {
        void *dx = sl_mixed_dx(mx, l);
        sl_mixed_layer_backward(mx, l, dy, dx, at(mx, mx->w16, m->w_off[l]), mx->g32 + m->w_off[l],
                                at(mx, mx->g16, m->w_off[l]));
        dy = dx;
    }
    return loss;
}

size_t sl_mixed_unscale(sl_mixed *mx, float scale)
{
    const size_t n = mx->m->nparams;
    widen(mx, n, mx->g16, mx->g32);
    /* 1/scale is exact for the powers of two scalers use */
    mx->cnt.nonfinite = sl_k_scale_check(mx->be, n, mx->g32, 1.0f / scale);
    return mx->cnt.nonfinite;
}

void sl_mixed_apply(sl_mixed *mx, const sl_optim *o)
{
    const size_t n = mx->m->nparams;
    if (mx->master) {
        sl_optim_step(mx->be, o, n, mx->master, mx->g32, mx->state);
        if (mx->w16 != mx->master) sl_k_cast(mx->be, n, mx->master, SL_F32, mx->w16, mx->dt, NULL);
        return;
    }
    widen(mx, n, mx->w16, mx->wide);
    sl_optim_step(mx->be, o, n, mx->wide, mx->g32, mx->state);
    mx->cnt.lost_updates = sl_k_cast_update(mx->be, mx->dt, n, mx->wide, mx->w16);
}

const float *sl_mixed_weights(sl_mixed *mx)
{
    if (mx->master) return mx->master;
    widen(mx, mx->m->nparams, mx->w16, mx->wide);
    return mx->wide;
}

sl_mlp_bytes sl_mixed_memory(const sl_mlp *m, sl_dtype dt, int master, int batch, const sl_optim *o)
{
    const double n = (double)m->nparams, es = (double)sl_dtype_size(dt);
    const int f32 = dt == SL_F32;
    sl_mlp_bytes b;
    b.params = (size_t)(n * es + (master && !f32 ? 4 * n : 0));
    b.grads = (size_t)(n * es + (f32 ? 0 : 4 * n));
    b.optim = (size_t)(4.0 * sl_optim_state_per_param(o) * n);
    size_t e = 0; /* activation elements per sample: x[0..L], z where an activation follows */
    for (int l = 0; l <= m->nlayers; l++) e += (size_t)m->dims[l];
    for (int l = 0; l < m->nlayers; l++)
        if (m->act[l] != SL_ACT_NONE) e += (size_t)m->dims[l + 1];
    e += 2 * (size_t)max_width(m); /* the two gradient buffers */
    b.activ = (size_t)((double)e * batch * es);
    return b;
}
