/* cpu/conv.c — 2-D convolution (NCHW, zero padding, stride) as im2col + GEMM, one image at a
 * time: the image's patches are unfolded into col[c*r*s, p*q] so that each pass is one
 * cblas_sgemm:
 *   forward          y_n[k, pq]   = w[k, crs] . col[crs, pq]
 *   backward data    dcol[crs, pq] = w^T[crs, k] . dy_n[k, pq], then folded back (col2im)
 *   backward filter  dw[k, crs]  += dy_n[k, pq] . col^T[pq, crs]
 * col2im adds each input pixel's patch entries in a fixed order (tap by tap), so it is
 * deterministic; cuda/conv.cu gathers in the same order. Tap (i, j) reads input row
 * i * dil_h and column j * dil_w of its patch (dilation).
 * The col workspace is the caller's (cv->work) when given, so that a timed loop allocates
 * nothing; otherwise one is allocated per call.
 * im2col and col2im run on one thread: they are cheap next to the GEMM, and an OpenMP region
 * between two GEMMs leaves OpenMP threads spinning on the cores OpenBLAS's threads need
 * (measured: 10x slower convolutions on 2 cores unless OMP_WAIT_POLICY=passive). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "sl_error.h"

static float *col_get(const sl_conv2d *cv)
{
    if (cv->work) return cv->work;
    size_t bytes = sl_conv2d_work_bytes(cv);
    float *col = malloc(bytes);
    if (!col) SL_FATAL("out of memory: %zu bytes of im2col workspace", bytes);
    return col;
}

static void col_put(const sl_conv2d *cv, float *col)
{
    if (col != cv->work) free(col);
}

/* col[(ci*r + i)*s + j, pi*q + qi] = x[ci, pi*sh - ph + i*dh, qi*sw - pw + j*dw] or 0 outside */
static void im2col(const sl_conv2d *cv, const float *x, float *col)
{
    const int C = cv->c, H = cv->h, W = cv->w, R = cv->r, S = cv->s, P = cv->p, Q = cv->q;
    const size_t rows = (size_t)C * R * S;
    for (size_t row = 0; row < rows; row++) {
        int ci = (int)(row / ((size_t)R * S)), i = (int)(row / S % R), j = (int)(row % S);
        float *out = col + row * P * Q;
        for (int pi = 0; pi < P; pi++) {
            int hi = pi * cv->stride_h - cv->pad_h + i * cv->dil_h;
            for (int qi = 0; qi < Q; qi++) {
                int wi = qi * cv->stride_w - cv->pad_w + j * cv->dil_w;
                out[pi * Q + qi] = hi >= 0 && hi < H && wi >= 0 && wi < W
                                       ? x[((size_t)ci * H + hi) * W + wi]
                                       : 0.0f;
            }
        }
    }
}

/* dx[ci, hi, wi] = sum of the dcol entries whose patch position reads (ci, hi, wi), added
 * tap by tap in (i, j) order onto zero: the same order as the gather in cuda/conv.cu, so both
 * give the same sums, without a division in the inner loop. */
static void col2im(const sl_conv2d *cv, const float *dcol, float *dx)
{
    const int C = cv->c, H = cv->h, W = cv->w, R = cv->r, S = cv->s, P = cv->p, Q = cv->q;
    memset(dx, 0, (size_t)C * H * W * sizeof *dx);
    for (int ci = 0; ci < C; ci++)
        for (int i = 0; i < R; i++)
            for (int j = 0; j < S; j++) {
                const float *src = dcol + (((size_t)ci * R + i) * S + j) * P * Q;
                float *img = dx + (size_t)ci * H * W;
                for (int pi = 0; pi < P; pi++) {
                    int hi = pi * cv->stride_h - cv->pad_h + i * cv->dil_h;
                    if (hi < 0 || hi >= H) continue;
                    for (int qi = 0; qi < Q; qi++) {
                        int wi = qi * cv->stride_w - cv->pad_w + j * cv->dil_w;
                        if (wi >= 0 && wi < W) img[(size_t)hi * W + wi] += src[pi * Q + qi];
                    }
                }
            }
}

void sl_cpu_conv2d_forward(const sl_conv2d *cv, const float *x, const float *w, float *y)
{
    const int crs = cv->c * cv->r * cv->s, pq = cv->p * cv->q;
    float *col = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        im2col(cv, x + (size_t)b * cv->c * cv->h * cv->w, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, cv->k, pq, crs, 1.0f, w, crs,
                    col, pq, 0.0f, y + (size_t)b * cv->k * pq, pq);
    }
    col_put(cv, col);
}

void sl_cpu_conv2d_backward_data(const sl_conv2d *cv, const float *dy, const float *w,
                                 float *dx)
{
    const int crs = cv->c * cv->r * cv->s, pq = cv->p * cv->q;
    float *dcol = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, pq, cv->k, 1.0f, w, crs,
                    dy + (size_t)b * cv->k * pq, pq, 0.0f, dcol, pq);
        col2im(cv, dcol, dx + (size_t)b * cv->c * cv->h * cv->w);
    }
    col_put(cv, dcol);
}

void sl_cpu_conv2d_backward_filter(const sl_conv2d *cv, const float *x, const float *dy,
                                   float *dw)
{
    const int crs = cv->c * cv->r * cv->s, pq = cv->p * cv->q;
    float *col = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        im2col(cv, x + (size_t)b * cv->c * cv->h * cv->w, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, cv->k, crs, pq, 1.0f,
                    dy + (size_t)b * cv->k * pq, pq, col, pq, 1.0f, dw, crs);
    }
    col_put(cv, col);
}
