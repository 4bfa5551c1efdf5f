/* serial.c — megatron_mlp's model on one process, built from the shared model's layers (mlp.h):
 * the independent f32 reference of the technique's blocks (serial.h says why it is kept). Each
 * block is two sl_mlp layers (A with GeLU, B without) and the residual sum around them. */
#include <stdlib.h>
#include <string.h>

#include "serial.h"

int mm_model_init(sl_mlp *m, sl_backend be, int blocks, int h, int f)
{
    if (blocks < 1 || 2 * blocks > SL_MLP_MAX_LAYERS || h < 1 || f < 1) return -1;
    memset(m, 0, sizeof *m);
    m->be = be;
    m->nlayers = 2 * blocks;
    size_t off = 0;
    for (int l = 0; l < m->nlayers; l++) {
        m->dims[l] = l % 2 ? f : h;
        m->act[l] = l % 2 ? SL_ACT_NONE : SL_ACT_GELU;
        m->w_off[l] = off;
        m->b_off[l] = off + (size_t)(l % 2 ? h : f) * m->dims[l];
        off = m->b_off[l] + (l % 2 ? h : f);
    }
    m->dims[m->nlayers] = h;
    m->nparams = off;
    return 0;
}

static void *buf(const sl_mlp *m, sl_mem_cat cat, size_t floats)
{
    return sl_k_malloc(m->be, cat, floats * sizeof(float) + 1);
}

void mm_serial_acts_alloc(const sl_mlp *m, int n, mm_serial_acts *a)
{
    const int L = m->nlayers / 2, h = m->dims[0], f = m->dims[1];
    a->n = n;
    a->blocks = L;
    a->x = calloc((size_t)L + 1, sizeof *a->x);
    a->u = calloc((size_t)L, sizeof *a->u);
    a->y = calloc((size_t)L, sizeof *a->y);
    if (!a->x || !a->u || !a->y) SL_FATAL("out of memory");
    for (int i = 0; i <= L; i++) a->x[i] = buf(m, SL_MEM_OTHER, (size_t)n * h);
    for (int i = 0; i < L; i++) {
        a->u[i] = buf(m, SL_MEM_OTHER, (size_t)n * f);
        a->y[i] = buf(m, SL_MEM_OTHER, (size_t)n * f);
    }
    a->z = buf(m, SL_MEM_OTHER, (size_t)n * h);
    a->d[0] = buf(m, SL_MEM_OTHER, (size_t)n * h);
    a->d[1] = buf(m, SL_MEM_OTHER, (size_t)n * h);
    a->dy = buf(m, SL_MEM_OTHER, (size_t)n * f);
}

void mm_serial_acts_free(const sl_mlp *m, mm_serial_acts *a)
{
    for (int i = 0; i <= a->blocks; i++) sl_k_free(m->be, a->x[i]);
    for (int i = 0; i < a->blocks; i++) {
        sl_k_free(m->be, a->u[i]);
        sl_k_free(m->be, a->y[i]);
    }
    float *w[] = {a->z, a->d[0], a->d[1], a->dy};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) sl_k_free(m->be, w[i]);
    free(a->x);
    free(a->u);
    free(a->y);
    memset(a, 0, sizeof *a);
}

double mm_serial_activ_bytes(const sl_mlp *m, int n)
{
    const double L = m->nlayers / 2, h = m->dims[0], f = m->dims[1];
    return ((L + 1) * h + 2 * L * f) * n * sizeof(float);
}

void mm_serial_forward(const sl_mlp *m, mm_serial_acts *a, const float *params)
{
    const size_t nh = (size_t)a->n * m->dims[0];
    for (int i = 0; i < a->blocks; i++) {
        sl_mlp_layer_forward(m, 2 * i, a->n, params + m->w_off[2 * i], a->x[i], a->u[i], a->y[i]);
        sl_mlp_layer_forward(m, 2 * i + 1, a->n, params + m->w_off[2 * i + 1], a->y[i], a->z, a->z);
        /* the residual: x' = x + z */
        sl_k_memcpy(m->be, a->x[i + 1], a->x[i], nh * sizeof(float), SL_K_D2D);
        sl_k_add(m->be, SL_F32, nh, a->z, a->x[i + 1]);
    }
}

float *mm_serial_backward(const sl_mlp *m, mm_serial_acts *a, const float *params, float *grads,
                          const float *dout)
{
    const size_t nh = (size_t)a->n * m->dims[0];
    float *d = a->d[0], *dnext = a->d[1];
    sl_k_memcpy(m->be, d, dout, nh * sizeof(float), SL_K_D2D);
    for (int i = a->blocks - 1; i >= 0; i--) {
        const int lb = 2 * i + 1, la = 2 * i;
        /* dZ = dX' (B has no activation, so d is left as it is); dY = dZ·B */
        sl_mlp_layer_backward(m, lb, a->n, params + m->w_off[lb], a->y[i], NULL, d, grads + m->w_off[lb], a->dy);
        /* dU = dY·GeLU'(U); dX = dU·A */
        sl_mlp_layer_backward(m, la, a->n, params + m->w_off[la], a->x[i], a->u[i], a->dy, grads + m->w_off[la],
                              dnext);
        /* the residual: dX += dX' */
        sl_k_add(m->be, SL_F32, nh, d, dnext);
        float *swap = d;
        d = dnext;
        dnext = swap;
    }
    return d;
}
