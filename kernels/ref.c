/* ref.c — double-precision references of the kernels (see ref.h): straight from the
 * definitions, no blocking, no reordering, nothing shared with the kernels' code. */
#include <math.h>

#include "ref.h"

#define GELU_C 0.7978845608028654 /* sqrt(2 / pi) */

double sl_ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(GELU_C * (x + 0.044715 * x * x * x)));
}

double sl_ref_gelu_grad(double x)
{
    double t = tanh(GELU_C * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * x * x);
}

double sl_ref_act(sl_act a, double x)
{
    return a == SL_ACT_RELU ? (x > 0 ? x : 0) : a == SL_ACT_GELU ? sl_ref_gelu(x) : x;
}

double sl_ref_act_grad(sl_act a, double x)
{
    return a == SL_ACT_RELU ? (x > 0) : a == SL_ACT_GELU ? sl_ref_gelu_grad(x) : 1.0;
}

/* Adds one term t to a sum and its bookkeeping. */
static void add_term(double t, double *sum, double *mag, double *terms)
{
    *sum += t;
    *mag += fabs(t);
    *terms += 1;
}

static void put(double *out, double v)
{
    if (out) *out = v;
}

double sl_ref_gemm_at(int transa, int transb, int k, const float *a, int lda, const float *b,
                      int ldb, int i, int j, double *mag)
{
    double s = 0, m = 0, n = 0;
    for (int p = 0; p < k; p++) {
        double x = transa ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
        double y = transb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
        add_term(x * y, &s, &m, &n);
    }
    put(mag, m);
    return s;
}

double sl_ref_mse(size_t n, const float *y, const float *t, double norm, double *dy)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (float)(y[i] - t[i]);
        s += d * d;
        if (dy) dy[i] = 2.0 * norm * d;
    }
    return norm * s;
}

double sl_ref_softmax_xent_row(int classes, const float *z, int label, double norm, double *dz)
{
    double m = z[0], se = 0;
    for (int j = 1; j < classes; j++) m = z[j] > m ? z[j] : m;
    for (int j = 0; j < classes; j++) se += exp(z[j] - m);
    double lse = m + log(se);
    for (int j = 0; dz && j < classes; j++) dz[j] = norm * (exp(z[j] - lse) - (j == label));
    return lse - z[label];
}

void sl_ref_sgd_step(const sl_sgd *o, size_t n, double *w, const float *g, double *v)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = (double)o->momentum * v[i] + g[i] + (double)o->weight_decay * w[i];
        w[i] -= (double)o->lr * v[i];
    }
}

void sl_ref_adamw_step(const sl_adamw *o, size_t n, double *w, const float *g, double *m,
                       double *v)
{
    double b1 = o->beta1, b2 = o->beta2; /* the f32 values the kernels use */
    double c1 = 1 - pow(b1, (double)o->step), c2 = 1 - pow(b2, (double)o->step);
    for (size_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
        double mh = m[i] / c1, vh = v[i] / c2;
        w[i] -= (double)o->lr * ((double)o->weight_decay * w[i] + mh / (sqrt(vh) + (double)o->eps));
    }
}

/* Flat indices of x[b, c, h, w], w[k, c, i, j] and y[b, k, p, q]. */
static size_t xi(const sl_conv2d *cv, int b, int c, int h, int w)
{
    return (((size_t)b * cv->c + c) * cv->h + h) * cv->w + w;
}
static size_t wi(const sl_conv2d *cv, int k, int c, int i, int j)
{
    return (((size_t)k * cv->c + c) * cv->r + i) * cv->s + j;
}
static size_t yi(const sl_conv2d *cv, int b, int k, int p, int q)
{
    return (((size_t)b * cv->k + k) * cv->p + p) * cv->q + q;
}

/* The input row (column) tap i of output row p reads, or -1 in the padding. */
static int in_at(int p, int stride, int pad, int i, int size)
{
    int h = p * stride - pad + i;
    return h >= 0 && h < size ? h : -1;
}

double sl_ref_conv2d_forward_at(const sl_conv2d *cv, const float *x, const float *w, size_t idx,
                                double *mag, double *terms)
{
    int q = (int)(idx % cv->q), p = (int)(idx / cv->q % cv->p);
    int k = (int)(idx / ((size_t)cv->p * cv->q) % cv->k), b = (int)(idx / ((size_t)cv->p * cv->q * cv->k));
    double s = 0, m = 0, n = 0;
    for (int c = 0; c < cv->c; c++)
        for (int i = 0; i < cv->r; i++)
            for (int j = 0; j < cv->s; j++) {
                int h = in_at(p, cv->stride_h, cv->pad_h, i, cv->h), ww = in_at(q, cv->stride_w, cv->pad_w, j, cv->w);
                if (h >= 0 && ww >= 0) add_term((double)x[xi(cv, b, c, h, ww)] * w[wi(cv, k, c, i, j)], &s, &m, &n);
            }
    put(mag, m), put(terms, n);
    return s;
}

double sl_ref_conv2d_backward_data_at(const sl_conv2d *cv, const float *dy, const float *w,
                                      size_t idx, double *mag, double *terms)
{
    int ww = (int)(idx % cv->w), h = (int)(idx / cv->w % cv->h);
    int c = (int)(idx / ((size_t)cv->w * cv->h) % cv->c), b = (int)(idx / ((size_t)cv->w * cv->h * cv->c));
    double s = 0, m = 0, n = 0;
    for (int k = 0; k < cv->k; k++)
        for (int i = 0; i < cv->r; i++)
            for (int j = 0; j < cv->s; j++) {
                /* the output (p, q) whose tap (i, j) reads (h, ww), if any */
                int hp = h + cv->pad_h - i, wq = ww + cv->pad_w - j;
                if (hp < 0 || wq < 0 || hp % cv->stride_h || wq % cv->stride_w) continue;
                int p = hp / cv->stride_h, q = wq / cv->stride_w;
                if (p >= cv->p || q >= cv->q) continue;
                add_term((double)dy[yi(cv, b, k, p, q)] * w[wi(cv, k, c, i, j)], &s, &m, &n);
            }
    put(mag, m), put(terms, n);
    return s;
}

double sl_ref_conv2d_backward_filter_at(const sl_conv2d *cv, const float *x, const float *dy,
                                        size_t idx, double *mag, double *terms)
{
    int j = (int)(idx % cv->s), i = (int)(idx / cv->s % cv->r);
    int c = (int)(idx / ((size_t)cv->s * cv->r) % cv->c), k = (int)(idx / ((size_t)cv->s * cv->r * cv->c));
    double s = 0, m = 0, n = 0;
    for (int b = 0; b < cv->n; b++)
        for (int p = 0; p < cv->p; p++)
            for (int q = 0; q < cv->q; q++) {
                int h = in_at(p, cv->stride_h, cv->pad_h, i, cv->h), ww = in_at(q, cv->stride_w, cv->pad_w, j, cv->w);
                if (h >= 0 && ww >= 0) add_term((double)x[xi(cv, b, c, h, ww)] * dy[yi(cv, b, k, p, q)], &s, &m, &n);
            }
    put(mag, m), put(terms, n);
    return s;
}
