/* conv.c — vdnn's conv stack (--model conv) as layers of the training layer's run: halo_conv's
 * model (halo_conv/model.h: 3x3 convolutions C -> C with same padding, ReLU between, trained to
 * reproduce its input, MSE over the global batch) on whole images, each convolution and each
 * ReLU one layer of vdnn's pass (pass.c), so that the policy conv can keep the ReLUs' inputs on
 * the device and offload only the convolutions'. Layer l reads tensor t[l] and writes t[l + 1],
 * every tensor [images, C, H, W] in t->dtype. Its reference is halo_conv's serial stack
 * trained on the whole batch in the run's dtype (hc_serial_train).
 *
 * In f16/bf16 every tensor (the image, each layer's output, every dL/d) is held, offloaded and
 * fetched in 16 bits: half the bytes. A layer widens its input into an f32 workspace, computes
 * in f32 and rounds its output once into 16 bits (as hc_serial does); the weights, their
 * gradients and the loss scale are the training layer's (f32 master, dW rounded into 16 bits). */
#include <stdlib.h>

#include "conv.h"
#include "state.h"

static hc_geom problem; /* the global batch's; set by vd_conv_validate */

size_t vd_conv_params(void) { return hc_params(&problem); }
double vd_conv_flops(int batch) { return hc_flops_step(&problem, batch); }

void vd_conv_init_params(const sl_train *t, float *w32)
{
    hc_init_params(t->be, &problem, (uint64_t)sl_train_opt.seed, w32);
}

void vd_conv_reference(sl_train *t, float *params, double *losses)
{
    (void)losses; /* hc_serial_train does not report its loss */
    hc_reference(t, &problem, params);
}

void vd_conv_validate(sl_ctx *ctx, long long channels, long long image)
{
    const double elems = (double)sl_train_opt.batch * channels * image * image;
    if (elems * 4 > 1u << 30)
        sl_usage_error("--batch/--channels/--image: one conv activation would be %.0f MiB; at most 1024 MiB",
                       elems * 4 / 1048576);
    problem = (hc_geom){.n = (int)sl_train_opt.batch, .c = (int)channels, .h = (int)image, .w = (int)image,
                        .f = 3, .dil = 1, .layers = (int)sl_train_opt.layers};
    hc_geom_init(&problem);
    sl_note(ctx, "conv stack: %d layers of 3x3 convolutions %d -> %d channels, ReLU between (%d layers of the "
                 "pass), %lld images of %lldx%lld %s, %zu weights, %s; the target is the input",
            problem.layers, problem.c, problem.c, 2 * problem.layers - 1, sl_train_opt.batch, image, image,
            sl_train_opt.scaling ? "in all" : "per rank", hc_params(&problem), sl_train_opt.optim ? "adamw" : "sgd");
}

void vd_conv_setup(sl_train *t, vd *s)
{
    vd_conv *c = s->conv = calloc(1, sizeof *c);
    if (!c) SL_FATAL("out of memory");
    s->N = 2 * problem.layers - 1;
    c->g = problem;
    c->g.n = s->rows;
    c->cv = (sl_conv2d){.n = s->rows, .c = c->g.c, .h = c->g.h, .w = c->g.w, .k = c->g.c, .r = 3, .s = 3,
                        .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1};
    if (s->rows > 0 && sl_conv2d_init(&c->cv)) SL_FATAL("vdnn: invalid convolution");
    c->elems = (size_t)s->rows * c->g.c * c->g.h * c->g.w;
    const sl_backend be = t->be;
    c->cv.work = sl_k_malloc(be, SL_MEM_OTHER, sl_conv2d_work_bytes(&c->cv) + 1);
    c->target = sl_k_malloc(be, SL_MEM_ACTIV, c->elems * sizeof(float) + 1);
    if (t->dtype == SL_F32) return;
    for (int i = 0; i < 3; i++) c->ws[i] = sl_k_malloc(be, SL_MEM_OTHER, c->elems * sizeof(float) + 1);
    c->gw32 = sl_k_malloc(be, SL_MEM_OTHER, hc_layer_params(&c->g) * sizeof(float));
    c->w32 = sl_k_malloc(be, SL_MEM_OTHER, t->nparams * sizeof(float));
}

/* The bytes vd_conv_setup and sl_replica_place allocate, as requested (the allocator counts
 * them so): the weights and gradients in t->dtype, the optimizer state, the target, one image's
 * im2col workspace; in 16 bits the weights' and gradients' f32 twins, three tensor workspaces,
 * one layer's dW and the weights' f32 view. */
size_t vd_conv_resident(const sl_train *t, const vd *s)
{
    const vd_conv *c = s->conv;
    const size_t n = t->nparams, es = sl_train_esize(t), T32 = c->elems * sizeof(float) + 1;
    size_t b = 2 * n * es + (size_t)sl_optim_state_per_param(&t->optim) * n * 4 + 1 + T32 +
               sl_conv2d_work_bytes(&c->cv) + 1;
    if (t->dtype != SL_F32) b += (t->master ? 4 * n : 0) + 4 * n + 3 * T32 + hc_layer_params(&c->g) * 4 + 4 * n;
    return b;
}

void vd_conv_free(sl_train *t, vd *s)
{
    vd_conv *c = s->conv;
    void *bufs[] = {c->cv.work, c->target, c->ws[0], c->ws[1], c->ws[2], c->gw32, t->dtype == SL_F32 ? NULL : c->w32};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    free(c);
}

void vd_conv_widen(sl_train *t, vd *s, const void *params)
{
    vd_conv *c = s->conv;
    c->w32 = (float *)sl_train_widen(t, params, t->dtype == SL_F32 ? NULL : c->w32, t->nparams);
}

void vd_conv_load(sl_train *t, vd *s, void *x)
{
    vd_conv *c = s->conv;
    const double t0 = sl_now();
    const size_t plane = (size_t)c->g.h * c->g.w;
    hc_load(t->be, &c->g, (uint64_t)sl_train_opt.seed, sl_train_sample(t, t->lo), s->rows,
            (hc_rect){0, c->g.h, 0, c->g.w}, c->target, plane, (size_t)c->g.w);
    sl_train_round(t, c->target, x, c->elems); /* f32: a copy */
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());
}

void vd_conv_forward(sl_train *t, vd *s, int l, const void *x, void *y)
{
    vd_conv *c = s->conv;
    const double t0 = sl_now();
    const float *x32 = sl_train_f32(t, x, c->ws[0], c->elems);
    float *y32 = sl_train_result(t, y, c->ws[1]);
    if (l % 2 == 0)
        sl_k_conv2d_forward(t->be, &c->cv, x32, c->w32 + (size_t)(l / 2) * hc_layer_params(&c->g), y32);
    else
        sl_k_act_forward(t->be, SL_ACT_RELU, c->elems, x32, y32);
    sl_train_round(t, y32, y, c->elems);
    sl_train_compute_span(t, l % 2 ? "relu" : "conv", t0);
}

/* MSE against the image over the global batch, as hc_serial_backward: dL/d(output) times the
 * loss scale, rounded into t->dtype. */
void vd_conv_loss(sl_train *t, vd *s, const void *out, void *dout)
{
    vd_conv *c = s->conv;
    const double t0 = sl_now();
    const float scale = t->dtype == SL_F32 ? 1.0f : (float)t->ms.sc.scale;
    const float norm = 1.0f / ((float)t->global_batch * c->g.c * c->g.h * c->g.w);
    float *d32 = sl_train_result(t, dout, c->ws[1]);
    const float *out32 = sl_train_f32(t, out, c->ws[0], c->elems);
    t->loss += sl_k_mse(t->be, c->elems, out32, c->target, d32, norm * scale) / scale;
    sl_train_round(t, d32, dout, c->elems);
    sl_train_compute_span(t, "loss", t0);
}

void vd_conv_backward(sl_train *t, vd *s, int l, const void *x, const void *dy, void *dx, void *grads)
{
    vd_conv *c = s->conv;
    const double t0 = sl_now();
    const float *x32 = sl_train_f32(t, x, c->ws[0], c->elems), *dy32 = sl_train_f32(t, dy, c->ws[1], c->elems);
    float *dx32 = sl_train_result(t, dx, c->ws[2]);
    if (l % 2) { /* ReLU'(z) from its input z */
        sl_k_act_backward(t->be, SL_ACT_RELU, c->elems, x32, dy32, dx32);
    } else {
        const size_t lp = hc_layer_params(&c->g), off = (size_t)(l / 2) * lp;
        float *gw = t->dtype == SL_F32 ? (float *)grads + off : c->gw32;
        if (gw == c->gw32) sl_k_memset0(t->be, gw, lp * sizeof(float));
        sl_k_conv2d_backward_filter(t->be, &c->cv, x32, dy32, gw); /* dw += */
        if (gw == c->gw32) sl_k_cast(t->be, lp, gw, SL_F32, sl_train_at(t, grads, off), t->dtype, NULL);
        if (dx) sl_k_conv2d_backward_data(t->be, &c->cv, dy32, c->w32 + off, dx32);
    }
    if (dx) sl_train_round(t, dx32, dx, c->elems);
    sl_train_compute_span(t, l % 2 ? "relu backward" : "conv backward", t0);
}

/* A convolution is one GEMM per image after im2col (kernels' cpu/conv.c): forward
 * [k, crs] x [crs, pq], backward filter [k, pq] x [pq, crs] added into dW, backward data
 * [crs, k] x [k, pq] then col2im; each unfolding writes and reads crs x pq f32 per image. A
 * ReLU reads its input (and dy) and writes its output. In 16 bits each f32 operand is widened
 * from, and each result rounded into, the run's dtype (es + 4 bytes an element). The GEMMs are
 * stated in the run's dtype, as the training layer's are; the conv stack's run in f32 (an
 * approximation in 16 bits). */
void vd_conv_pm(const sl_train *t, const vd *s, sl_pm_sched *sc, int l, int backward)
{
    const vd_conv *c = s->conv;
    const double T = (double)c->elems, n = c->g.n, es = (double)sl_train_esize(t);
    const double cast = t->dtype == SL_F32 ? 0 : es + 4.0;
    if (n <= 0) return;
    if (l % 2) {
        sl_pm_bytes(sc, T * ((backward ? 3 : 2) * 4.0 + (backward ? 3 : 2) * cast));
        return;
    }
    const int k = c->cv.k, pq = c->cv.p * c->cv.q, crs = c->cv.c * 9;
    const double unfold = 2.0 * 4.0 * crs * pq * n;
    if (!backward) {
        sl_pm_bytes(sc, unfold + 2 * T * cast);
        sl_pm_gemm(sc, 0, 0, k, pq, crs, 0, n);
        return;
    }
    sl_pm_bytes(sc, unfold + 2 * T * cast);
    sl_pm_gemm(sc, 0, 1, k, crs, pq, 1, n);
    if (l > 0) {
        sl_pm_gemm(sc, 1, 0, crs, pq, k, 0, n);
        sl_pm_bytes(sc, unfold + T * cast);
    }
}
