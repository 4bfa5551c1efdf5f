/* model.c — the convolution stack's weights, data and serial reference (model.h). */
#include <math.h>

#include "model.h"
#include "sl_train.h"
#include "train_ref.h"
#include "scalelab.h"

enum { SEED_DATA = 0x68616c6f, SEED_WEIGHTS = 0x636f6e76 }; /* streams apart from the MLP's */

size_t hc_layer_params(const hc_geom *g) { return (size_t)g->c * g->c * g->f * g->f; }
size_t hc_params(const hc_geom *g) { return (size_t)g->layers * hc_layer_params(g); }

double hc_flops_step(const hc_geom *g, int batch)
{
    double pass = 2.0 * batch * g->c * (double)g->c * g->f * g->f * g->h * g->w;
    return pass * (g->layers + (g->layers - 1) + g->layers);
}

void hc_init_params(sl_backend be, const hc_geom *g, uint64_t seed, float *params)
{
    const size_t n = hc_layer_params(g);
    const double fan_in = (double)g->c * g->f * g->f;
    for (int l = 0; l < g->layers; l++) {
        double gain = l < g->layers - 1 ? 2.0 : 1.0;
        sl_k_rng_normal(be, seed ^ SEED_WEIGHTS, (uint64_t)l * n, n, params + (size_t)l * n, 0.0f,
                        (float)sqrt(gain / fan_in));
    }
}

void hc_load(sl_backend be, const hc_geom *g, uint64_t seed, uint64_t sample0, int nimg,
             hc_rect o, float *x, size_t x_z, size_t x_y)
{
    const size_t cols = (size_t)(o.x1 - o.x0);
    for (int i = 0; i < nimg; i++)
        for (int ch = 0; ch < g->c; ch++)
            for (int h = o.y0; h < o.y1; h++) {
                uint64_t first = (((sample0 + (uint64_t)i) * (uint64_t)g->c + (uint64_t)ch) * (uint64_t)g->h +
                                  (uint64_t)h) * (uint64_t)g->w + (uint64_t)o.x0;
                sl_k_rng_uniform(be, seed ^ SEED_DATA, first, cols,
                                 x + ((size_t)i * g->c + ch) * x_z + (size_t)(h - o.y0) * x_y, -1.0f, 1.0f);
            }
}

/* The serial reference ------------------------------------------------------------------ */

void hc_serial_init(hc_serial *s, sl_backend be, const hc_geom *g, sl_dtype dt)
{
    *s = (hc_serial){.be = be, .g = *g, .dt = dt};
    s->cv = (sl_conv2d){.n = g->n, .c = g->c, .h = g->h, .w = g->w, .k = g->c, .r = g->f, .s = g->f,
                        .pad_h = g->r, .pad_w = g->r, .stride_h = 1, .stride_w = 1,
                        .dil_h = g->dil, .dil_w = g->dil};
    if (sl_conv2d_init(&s->cv) != 0 || s->cv.p != g->h || s->cv.q != g->w)
        SL_FATAL("halo_conv: the serial convolution is not same-size (%dx%d)", s->cv.p, s->cv.q);
    s->cv.work = sl_k_malloc(be, SL_MEM_OTHER, sl_conv2d_work_bytes(&s->cv));
    const size_t n = (size_t)g->n * g->c * g->h * g->w, bytes = n * sizeof(float);
    for (int l = 0; l <= g->layers; l++) s->x[l] = sl_k_malloc(be, SL_MEM_OTHER, bytes);
    s->dy = sl_k_malloc(be, SL_MEM_OTHER, bytes);
    s->dx = sl_k_malloc(be, SL_MEM_OTHER, bytes);
    s->target = s->x[0];
    if (dt != SL_F32) {
        s->target = sl_k_malloc(be, SL_MEM_OTHER, bytes);
        size_t most = n > hc_params(g) ? n : hc_params(g);
        s->r16 = sl_k_malloc(be, SL_MEM_OTHER, most * sl_dtype_size(dt));
    }
}

void hc_serial_free(hc_serial *s)
{
    for (int l = 0; l <= s->g.layers; l++) sl_k_free(s->be, s->x[l]);
    if (s->target != s->x[0]) sl_k_free(s->be, s->target);
    sl_k_free(s->be, s->dy);
    sl_k_free(s->be, s->dx);
    sl_k_free(s->be, s->r16);
    sl_k_free(s->be, s->cv.work);
}

/* v[n] rounded to what the run's 16-bit dtype holds (nothing in f32). */
static void round_dt(hc_serial *s, size_t n, float *v)
{
    if (s->dt == SL_F32) return;
    sl_k_cast(s->be, n, v, SL_F32, s->r16, s->dt, NULL);
    sl_k_cast(s->be, n, s->r16, s->dt, v, SL_F32, NULL);
}

void hc_serial_forward(hc_serial *s, const float *params, uint64_t seed, uint64_t sample0)
{
    const hc_geom *g = &s->g;
    const size_t lp = hc_layer_params(g), n = (size_t)g->n * g->c * g->h * g->w;
    const size_t plane = (size_t)g->h * g->w;
    hc_load(s->be, g, seed, sample0, g->n, (hc_rect){0, g->h, 0, g->w}, s->target, plane, (size_t)g->w);
    if (s->target != s->x[0]) {
        sl_k_memcpy(s->be, s->x[0], s->target, n * sizeof(float), SL_K_D2D);
        round_dt(s, n, s->x[0]);
    }
    for (int l = 0; l < g->layers; l++) {
        sl_k_conv2d_forward(s->be, &s->cv, s->x[l], params + l * lp, s->x[l + 1]);
        if (l < g->layers - 1) sl_k_act_forward(s->be, SL_ACT_RELU, n, s->x[l + 1], s->x[l + 1]);
        round_dt(s, n, s->x[l + 1]);
    }
    sl_k_sync(s->be);
}

double hc_serial_backward(hc_serial *s, const float *params, float *grads, int want_dx, int norm_images,
                          float scale)
{
    const hc_geom *g = &s->g;
    const size_t lp = hc_layer_params(g), n = (size_t)g->n * g->c * g->h * g->w;
    /* the target is the input image */
    const float norm = 1.0f / ((float)norm_images * g->c * g->h * g->w);
    double loss = sl_k_mse(s->be, n, s->x[g->layers], s->target, s->dy, norm * scale) / scale;
    round_dt(s, n, s->dy);
    for (int l = g->layers - 1; l >= 0; l--) {
        sl_k_conv2d_backward_filter(s->be, &s->cv, s->x[l], s->dy, grads + l * lp);
        if (l == 0 && !want_dx) break;
        sl_k_conv2d_backward_data(s->be, &s->cv, s->dy, params + l * lp, s->dx);
        round_dt(s, n, s->dx);
        /* ReLU'(z) from its output: x > 0 exactly where z > 0 */
        if (l > 0) sl_k_act_backward(s->be, SL_ACT_RELU, n, s->x[l], s->dx, s->dy);
    }
    round_dt(s, hc_params(g), grads);
    sl_k_sync(s->be);
    return loss;
}

void hc_reference(sl_train *t, const hc_geom *g, float *params)
{
    hc_geom whole = *g;
    whole.n = t->global_batch;
    hc_serial ref;
    hc_serial_init(&ref, t->be, &whole, t->dtype);
    hc_serial_train(&ref, &t->optim, t->nsteps, (uint64_t)sl_train_opt.seed, params);
    hc_serial_free(&ref);
}

long hc_serial_train(hc_serial *s, const sl_optim *o, int steps, uint64_t seed, float *params)
{
    const size_t np = hc_params(&s->g);
    float *grads = sl_k_malloc(s->be, SL_MEM_OTHER, np * sizeof(float));
    float *state = sl_k_malloc(s->be, SL_MEM_OTHER, (size_t)sl_optim_state_per_param(o) * np * sizeof(float) + 1);
    /* the weights the layers use: the master weights rounded into dt (params itself in f32) */
    float *w = s->dt == SL_F32 ? params : sl_k_malloc(s->be, SL_MEM_OTHER, np * sizeof(float));
    sl_loss_scaler sc; /* the training layer's, as the distributed run's */
    sl_train_scaler(s->dt, &sc);
    hc_init_params(s->be, &s->g, seed, params);
    int applied = 0; /* AdamW's step count: a skipped step is not one */
    for (int k = 0; k < steps; k++) {
        if (w != params) {
            sl_k_memcpy(s->be, w, params, np * sizeof(float), SL_K_D2D);
            round_dt(s, np, w);
        }
        sl_k_memset0(s->be, grads, np * sizeof(float));
        hc_serial_forward(s, w, seed, (uint64_t)k * s->g.n);
        hc_serial_backward(s, w, grads, 0, s->g.n, (float)sc.scale);
        size_t bad = s->dt == SL_F32 ? 0 : sl_k_scale_check(s->be, np, grads, 1.0f / (float)sc.scale);
        if (!sl_loss_scaler_update(&sc, bad > 0)) continue;
        sl_optim so = sl_optim_for_step(o, applied++);
        sl_optim_step(s->be, &so, np, params, grads, state);
    }
    sl_k_sync(s->be);
    if (w != params) sl_k_free(s->be, w);
    sl_k_free(s->be, grads);
    sl_k_free(s->be, state);
    return sc.skipped;
}
