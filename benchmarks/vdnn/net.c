/* net.c — the conv stack of net.h, one operation at a time, on the kernels of kernels.h. */
#include <math.h>
#include <string.h>

#include "net.h"

int net_init(net *n, sl_backend be, int layers, int batch, int channels, int image, unsigned long long seed)
{
    memset(n, 0, sizeof *n);
    if (layers < 1 || layers > SL_MLP_MAX_LAYERS || batch < 1 || channels < 1 || image < 1) return -1;
    n->be = be;
    n->layers = layers;
    n->batch = batch;
    n->seed = seed;
    n->nops = 2 * layers - 1;
    for (int i = 0; i < n->nops; i++) {
        n->op[i] = i % 2 ? OP_RELU : OP_CONV;
        n->layer_of[i] = i / 2;
    }
    n->cv = (sl_conv2d){.n = batch, .c = channels, .h = image, .w = image, .k = channels,
                        .r = 3, .s = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1};
    if (sl_conv2d_init(&n->cv)) return -1;
    n->act_elems = (size_t)batch * channels * image * image;
    n->nparams = (size_t)layers * channels * channels * 9;
    return 0;
}

size_t net_act_bytes(const net *n) { return n->act_elems * sizeof(float); }

static size_t filter_elems(const net *n) { return (size_t)n->cv.k * n->cv.c * 9; }

void net_init_params(const net *n, float *params)
{
    /* He initialisation: the ReLUs keep the signal's scale */
    sl_k_rng_normal(n->be, n->seed, 0, n->nparams, params, 0.0f, (float)sqrt(2.0 / (9.0 * n->cv.c)));
}

void net_load(net *n, int step, float *x, float *y)
{
    const unsigned long long first = (unsigned long long)step * n->act_elems;
    sl_k_rng_normal(n->be, n->seed + 1, first, n->act_elems, x, 0.0f, 1.0f);
    sl_k_rng_normal(n->be, n->seed + 2, first, n->act_elems, y, 0.0f, 1.0f);
}

void net_forward(const net *n, int i, const float *params, const float *x, float *y)
{
    if (n->op[i] == OP_CONV)
        sl_k_conv2d_forward(n->be, &n->cv, x, params + (size_t)n->layer_of[i] * filter_elems(n), y);
    else
        sl_k_act_forward(n->be, SL_ACT_RELU, n->act_elems, x, y);
}

void net_backward(const net *n, int i, const float *params, const float *x, const float *dy,
                  float *grads, float *dx)
{
    if (n->op[i] == OP_RELU) {
        sl_k_act_backward(n->be, SL_ACT_RELU, n->act_elems, x, dy, dx);
        return;
    }
    const size_t off = (size_t)n->layer_of[i] * filter_elems(n);
    sl_k_conv2d_backward_filter(n->be, &n->cv, x, dy, grads + off);
    if (dx) sl_k_conv2d_backward_data(n->be, &n->cv, dy, params + off, dx);
}

double net_loss(const net *n, const float *out, const float *y, float *dout)
{
    return sl_k_mse(n->be, n->act_elems, out, y, dout, 1.0f / (float)n->act_elems);
}
