/* model.h — the convolution stack halo_conv trains, as both the distributed technique and the
 * serial reference see it: its flat weight vector (layer l's filters w_l[c, c, f, f] at
 * l * c*c*f*f), their initialisation, the synthetic data (any tile of any sample, from the
 * counter RNG, so every rank generates exactly its part of what the serial run sees), the
 * task (reproduce the input: the target is the input image, the loss the mean squared error
 * over the global batch) and the serial stack on the whole image, the reference. */
#ifndef HALO_CONV_MODEL_H
#define HALO_CONV_MODEL_H

#include <stdint.h>

#include "grid.h"
#include "loss_scale.h"
#include "mlp.h"

#define HC_MAX_LAYERS 64

size_t hc_layer_params(const hc_geom *g);
size_t hc_params(const hc_geom *g);
/* FLOPs of one training step on `batch` whole images: forward, backward data (all layers
 * but the first) and backward filter. */
double hc_flops_step(const hc_geom *g, int batch);
/* w_l ~ N(0, 2 / (c f^2)) before a ReLU (He), N(0, 1 / (c f^2)) for the last layer; element e
 * of the flat vector depends only on (seed, e). */
void hc_init_params(sl_backend be, const hc_geom *g, uint64_t seed, float *params);
/* Images [0, nimg) = samples [sample0, sample0 + nimg) of the data stream, rows [o.y0, o.y1)
 * and columns [o.x0, o.x1) of each (image coordinates): x[img][ch] at x + (img * c + ch) *
 * x_z, row pitch x_y. Pixel (s, ch, h, w) is uniform in [-1, 1), RNG element
 * ((s * c + ch) * H + h) * W + w. */
void hc_load(sl_backend be, const hc_geom *g, uint64_t seed, uint64_t sample0, int nimg,
             hc_rect o, float *x, size_t x_z, size_t x_y);

/* The serial stack on whole images (g->n of them): every layer a convolution with padding r
 * (same size), ReLU between. Buffers in backend memory, counted as "other" (a reference).
 * In f16/bf16 (dt) it computes in f32 and rounds into dt wherever the distributed run stores
 * 16 bits: the input, each layer's output (after its ReLU), dL/d(output), each dL/d(input) and
 * the weight gradients; the weights it is given are already the 16-bit ones (as f32 values).
 * So the two differ only in the order of f32 additions (and the all-reduce's rounding). */
typedef struct hc_serial {
    sl_backend be;
    hc_geom g;
    sl_dtype dt;
    sl_conv2d cv;
    float *x[HC_MAX_LAYERS + 1]; /* x[0] the input, x[layers] the output */
    float *target;               /* the input before rounding: x[0] itself in f32 */
    float *dy, *dx;              /* dL/d(layer output), dL/d(layer input) */
    void *r16;                   /* 16 bits: the roundings' staging buffer */
} hc_serial;
void hc_serial_init(hc_serial *s, sl_backend be, const hc_geom *g, sl_dtype dt);
void hc_serial_free(hc_serial *s);
/* The forward of samples [sample0, sample0 + g->n): the input in s->x[0], each layer's output
 * (after its ReLU) in s->x[1..layers]. */
void hc_serial_forward(hc_serial *s, const float *params, uint64_t seed, uint64_t sample0);
/* The backward from the activations in s->x[] (the forward's, or any put there): the loss of
 * s->x[layers] against s->target normalised over `norm_images` whole images (returned), its
 * gradients times `scale` (the loss scale; 1 in f32) added to grads (zero before, in 16 bits:
 * they are rounded), dL/d(input) in s->dx when want_dx. ReLU' is taken from s->x[]. */
double hc_serial_backward(hc_serial *s, const float *params, float *grads, int want_dx, int norm_images,
                          float scale);
/* Trains from hc_init_params(seed) for `steps` steps (step k on samples [k n, (k + 1) n)); in
 * 16 bits with f32 master weights, the loss scaler of sl_train_scaler(dt) (a step with inf/NaN
 * gradients is skipped) and the weights rounded into dt after each step. params receives the
 * (master) weights; returns the steps skipped. */
long hc_serial_train(hc_serial *s, const sl_optim *o, int steps, uint64_t seed, float *params);
/* A training technique's reference (sl_technique .reference): the stack of shape g (g->n
 * ignored) trained by hc_serial_train on t's global batch for t->nsteps steps in t->dtype. */
struct sl_train;
void hc_reference(struct sl_train *t, const hc_geom *g, float *params);

#endif
