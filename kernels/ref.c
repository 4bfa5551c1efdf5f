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

/* A sum with what its rounding bound needs: the sum of |terms| and their count. */
typedef struct sum {
    double s, mag, terms;
} sum;

static void add_term(sum *a, double t)
{
    a->s += t;
    a->mag += fabs(t);
    a->terms += 1;
}

static double finish(const sum *a, double *mag, double *terms)
{
    if (mag) *mag = a->mag;
    if (terms) *terms = a->terms;
    return a->s;
}

double sl_ref_gemm_at(int transa, int transb, int k, const float *a, int lda, const float *b,
                      int ldb, int i, int j, double *mag)
{
    sum d = {0, 0, 0};
    for (int p = 0; p < k; p++) {
        double x = transa ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
        double y = transb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
        add_term(&d, x * y);
    }
    return finish(&d, mag, NULL);
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

/* The input pixel (h, w) that tap (i, j) of output pixel (p, q) reads; 0 in the padding. */
static int tap(const sl_conv2d *cv, int p, int q, int i, int j, int *h, int *w)
{
    *h = p * cv->stride_h - cv->pad_h + i * cv->dil_h;
    *w = q * cv->stride_w - cv->pad_w + j * cv->dil_w;
    return *h >= 0 && *h < cv->h && *w >= 0 && *w < cv->w;
}

/* The four indices of entry idx of an array [*][n1][n2][n3]. */
static void split4(size_t idx, int n1, int n2, int n3, int *i0, int *i1, int *i2, int *i3)
{
    *i3 = (int)(idx % (size_t)n3), idx /= (size_t)n3;
    *i2 = (int)(idx % (size_t)n2), idx /= (size_t)n2;
    *i1 = (int)(idx % (size_t)n1), *i0 = (int)(idx / (size_t)n1);
}

double sl_ref_conv2d_forward_at(const sl_conv2d *cv, const float *x, const float *w, size_t idx,
                                double *mag, double *terms)
{
    int b, k, p, q, h, ww;
    split4(idx, cv->k, cv->p, cv->q, &b, &k, &p, &q);
    sum y = {0, 0, 0};
    for (int c = 0; c < cv->c; c++)
        for (int i = 0; i < cv->r; i++)
            for (int j = 0; j < cv->s; j++)
                if (tap(cv, p, q, i, j, &h, &ww)) add_term(&y, (double)x[xi(cv, b, c, h, ww)] * w[wi(cv, k, c, i, j)]);
    return finish(&y, mag, terms);
}

double sl_ref_conv2d_backward_data_at(const sl_conv2d *cv, const float *dy, const float *w,
                                      size_t idx, double *mag, double *terms)
{
    int b, c, h, ww;
    split4(idx, cv->c, cv->h, cv->w, &b, &c, &h, &ww);
    sum dx = {0, 0, 0};
    for (int k = 0; k < cv->k; k++)
        for (int i = 0; i < cv->r; i++)
            for (int j = 0; j < cv->s; j++) {
                /* the output (p, q) whose tap (i, j) reads (h, ww), if any */
                int hp = h + cv->pad_h - i * cv->dil_h, wq = ww + cv->pad_w - j * cv->dil_w;
                if (hp < 0 || wq < 0 || hp % cv->stride_h || wq % cv->stride_w) continue;
                int p = hp / cv->stride_h, q = wq / cv->stride_w;
                if (p < cv->p && q < cv->q) add_term(&dx, (double)dy[yi(cv, b, k, p, q)] * w[wi(cv, k, c, i, j)]);
            }
    return finish(&dx, mag, terms);
}

double sl_ref_conv2d_backward_filter_at(const sl_conv2d *cv, const float *x, const float *dy,
                                        size_t idx, double *mag, double *terms)
{
    int k, c, i, j, h, ww;
    split4(idx, cv->c, cv->r, cv->s, &k, &c, &i, &j);
    sum dw = {0, 0, 0};
    for (int b = 0; b < cv->n; b++)
        for (int p = 0; p < cv->p; p++)
            for (int q = 0; q < cv->q; q++)
                if (tap(cv, p, q, i, j, &h, &ww)) add_term(&dw, (double)x[xi(cv, b, c, h, ww)] * dy[yi(cv, b, k, p, q)]);
    return finish(&dw, mag, terms);
}
