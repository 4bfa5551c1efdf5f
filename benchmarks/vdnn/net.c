/* net.c — the MLP and conv stack of net.h, one operation at a time, on the kernels of
 * kernels.h and mlp.h. */
#include <math.h>
#include <string.h>

#include "net.h"

int net_init(net *n, net_kind kind, sl_backend be, int layers, int batch, int width, int channels,
             int image, unsigned long long seed)
{
    memset(n, 0, sizeof *n);
    if (layers < 1 || layers > SL_MLP_MAX_LAYERS || batch < 1) return -1;
    n->kind = kind;
    n->be = be;
    n->layers = layers;
    n->batch = batch;
    n->seed = seed;
    n->nops = 2 * layers - 1;
    for (int i = 0; i < n->nops; i++) {
        n->op[i] = i % 2 ? OP_RELU : kind == NET_MLP ? OP_LINEAR : OP_CONV;
        n->layer_of[i] = i / 2;
    }
    if (kind == NET_MLP) {
        if (sl_mlp_init(&n->mlp, be, layers, width, width, width, SL_ACT_RELU)) return -1;
        n->act_elems = (size_t)batch * width;
        n->nparams = n->mlp.nparams;
        sl_task_init(&n->task, be, width, width, seed, batch);
    } else {
        n->cv = (sl_conv2d){.n = batch, .c = channels, .h = image, .w = image, .k = channels,
                            .r = 3, .s = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1};
        if (channels < 1 || image < 1 || sl_conv2d_init(&n->cv)) return -1;
        n->act_elems = (size_t)batch * channels * image * image;
        n->nparams = (size_t)layers * channels * channels * 9;
    }
    return 0;
}

void net_free(net *n)
{
    if (n->kind == NET_MLP) sl_task_free(&n->task);
}

const char *net_op_name(const net *n, int i)
{
    return n->op[i] == OP_LINEAR ? "linear" : n->op[i] == OP_CONV ? "conv" : "relu";
}

size_t net_act_bytes(const net *n) { return n->act_elems * sizeof(float); }

static size_t filter_elems(const net *n) { return (size_t)n->cv.k * n->cv.c * 9; }

void net_init_params(const net *n, float *params)
{
    if (n->kind == NET_MLP)
        sl_mlp_init_params(&n->mlp, n->seed, 0, n->nparams, params);
    else /* He initialisation: the ReLUs keep the signal's scale */
        sl_k_rng_normal(n->be, n->seed, 0, n->nparams, params, 0.0f,
                        (float)sqrt(2.0 / (9.0 * n->cv.c)));
}

void net_load(net *n, int step, float *x, float *y)
{
    const unsigned long long first = (unsigned long long)step * n->act_elems;
    if (n->kind == NET_MLP) {
        sl_task_batch(&n->task, (unsigned long long)step * n->batch, n->batch, x, y);
    } else {
        sl_k_rng_normal(n->be, n->seed + 1, first, n->act_elems, x, 0.0f, 1.0f);
        sl_k_rng_normal(n->be, n->seed + 2, first, n->act_elems, y, 0.0f, 1.0f);
    }
}

void net_forward(const net *n, int i, const float *params, const float *x, float *y)
{
    const int l = n->layer_of[i];
    switch (n->op[i]) {
    case OP_LINEAR: {
        const sl_mlp *m = &n->mlp;
        sl_linear_forward(n->be, n->batch, m->dims[l], m->dims[l + 1], params + m->w_off[l],
                          params + m->b_off[l], x, y);
        break;
    }
    case OP_CONV:
        sl_k_conv2d_forward(n->be, &n->cv, x, params + (size_t)l * filter_elems(n), y);
        break;
    case OP_RELU:
        sl_k_act_forward(n->be, SL_ACT_RELU, n->act_elems, x, y);
        break;
    }
}

void net_backward(const net *n, int i, const float *params, const float *x, const float *dy,
                  float *grads, float *dx)
{
    const int l = n->layer_of[i];
    switch (n->op[i]) {
    case OP_LINEAR: {
        const sl_mlp *m = &n->mlp;
        sl_linear_backward(n->be, n->batch, m->dims[l], m->dims[l + 1], params + m->w_off[l], x,
                           dy, grads + m->w_off[l], grads + m->b_off[l], dx);
        break;
    }
    case OP_CONV: {
        const size_t off = (size_t)l * filter_elems(n);
        sl_k_conv2d_backward_filter(n->be, &n->cv, x, dy, grads + off);
        if (dx) sl_k_conv2d_backward_data(n->be, &n->cv, dy, params + off, dx);
        break;
    }
    case OP_RELU:
        sl_k_act_backward(n->be, SL_ACT_RELU, n->act_elems, x, dy, dx);
        break;
    }
}

double net_loss(const net *n, const float *out, const float *y, float *dout)
{
    /* the normalisation of the training layer's serial reference (train_ref.h) */
    const float norm = n->kind == NET_MLP ? 1.0f / ((float)n->batch * (float)n->mlp.dims[n->layers])
                                          : 1.0f / (float)n->act_elems;
    return sl_k_mse(n->be, n->act_elems, out, y, dout, norm);
}

double net_flops(const net *n, int i, int backward)
{
    const int l = n->layer_of[i];
    double f = 0;
    if (n->op[i] == OP_LINEAR) f = 2.0 * n->batch * n->mlp.dims[l] * n->mlp.dims[l + 1];
    if (n->op[i] == OP_CONV) f = sl_conv2d_flops(&n->cv);
    return backward ? (i == 0 ? f : 2 * f) : f; /* backward: dW and dx (op 0 has no dx) */
}
