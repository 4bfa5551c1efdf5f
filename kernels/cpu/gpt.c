/* cpu/gpt.c — the cpu backend of the GPT kernels (gpt.h): batched GEMMs as one CBLAS call per
 * (batch row, head), and OpenMP loops over rows for layer norm, the causal softmax and the
 * embeddings. 16-bit rows are widened to f32 in a per-thread row buffer, computed in f32 and
 * rounded once when stored. Sums over rows (parameter gradients) are formed in a fixed order,
 * so the bits do not depend on the number of threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/mvec.h"
#include "cpu/vsum.h"
#include "gpt_backend.h"
#include "sl_dropout.h"
#include "sl_error.h"
#include "sl_half.h"

/* dst[n] = src[off .. off+n) of dtype dt, widened */
static void load(sl_dtype dt, const void *src, size_t off, size_t n, float *dst)
{
    if (dt == SL_F32) memcpy(dst, (const float *)src + off, n * 4);
    else if (dt == SL_F16) sl_cpu_f16_to_f32_n((const uint16_t *)src + off, dst, n);
    else sl_cpu_bf16_to_f32_n((const uint16_t *)src + off, dst, n);
}

static void store(sl_dtype dt, const float *src, void *dst, size_t off, size_t n)
{
    if (dt == SL_F32) memcpy((float *)dst + off, src, n * 4);
    else if (dt == SL_F16) sl_cpu_f32_to_f16_n(src, (uint16_t *)dst + off, n);
    else sl_cpu_f32_to_bf16_n(src, (uint16_t *)dst + off, n);
}

static float *xmalloc_f32(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) SL_FATAL("out of memory: %zu bytes of GPT kernel workspace", n * sizeof *p);
    return p;
}

static void gemm_batched(int transa, int transb, int m, int n, int k, float alpha, const void *a,
                         int lda, long long stride_a, const void *b, int ldb, long long stride_b,
                         float beta, void *c, int ldc, long long stride_c, int batch,
                         sl_dtype ab, sl_dtype cdt)
{
    size_t ea = sl_dtype_size(ab), ec = sl_dtype_size(cdt);
    /* one GEMM per matrix, each on OpenBLAS's threads */
    for (int i = 0; i < batch; i++)
        sl_cpu_gemm(transa, transb, m, n, k, alpha, (const char *)a + (size_t)i * stride_a * ea,
                    lda, (const char *)b + (size_t)i * stride_b * ea, ldb, beta,
                    (char *)c + (size_t)i * stride_c * ec, ldc, ab, cdt);
}

/* Layer norm ------------------------------------------------------------------------------- */

#define LN_EPS 1e-5f

/* One row, x into y (the same row or another): the mean, then the variance about it (a second
 * pass over the row, in cache, instead of E[x^2] - m^2, which cancels), each summed in vsum.h's
 * fixed lanes so that every clone gives the same bits. */
SL_CPU_CLONES static void layernorm_row(int C, const float *x, float *y, const float *w,
                                        const float *b, float *mean, float *rstd)
{
    float a[SL_LANES] = {0}, q[SL_LANES] = {0};
    SL_LANE_LOOP(C, j, l, a[l] += x[j];);
    float m = sl_lanes_fold(a) / C;
    SL_LANE_LOOP(C, j, l, float d = x[j] - m; q[l] += d * d;);
    float s = 1.0f / sqrtf(sl_lanes_fold(q) / C + LN_EPS);
#pragma omp simd
    for (int j = 0; j < C; j++) y[j] = (x[j] - m) * s * w[j] + b[j];
    *mean = m;
    *rstd = s;
}

/* f32 rows are read and written where they are; 16-bit rows through a widened copy. */
static void layernorm_forward(sl_dtype dt, int N, int C, const void *inp, const float *w,
                              const float *b, void *out, float *mean, float *rstd)
{
#pragma omp parallel if (sl_cpu_par((size_t)N * C))
    {
        float *x = dt == SL_F32 ? NULL : xmalloc_f32(C);
#pragma omp for schedule(static)
        for (int i = 0; i < N; i++) {
            size_t o = (size_t)i * C;
            if (dt == SL_F32) {
                layernorm_row(C, (const float *)inp + o, (float *)out + o, w, b, &mean[i], &rstd[i]);
                continue;
            }
            load(dt, inp, o, C, x);
            layernorm_row(C, x, x, w, b, &mean[i], &rstd[i]);
            store(dt, x, out, o, C);
        }
        free(x);
    }
}

/* One row of dinp into dx (which may be the row of x or g itself): the two means in vsum.h's
 * fixed lanes, and the row's terms of the parameter gradients added to sw and sb, in the same
 * pass. */
SL_CPU_CLONES static void layernorm_bwd_row(int C, const float *x, const float *g, float *dx,
                                            const float *w, float mean, float rstd, float *sw,
                                            float *sb)
{
    float a[SL_LANES] = {0}, q[SL_LANES] = {0};
    SL_LANE_LOOP(C, j, l, float xh = (x[j] - mean) * rstd, dxh = g[j] * w[j]; a[l] += dxh;
                 q[l] += dxh * xh; sw[j] += g[j] * xh; sb[j] += g[j];);
    float s1 = sl_lanes_fold(a) / C, s2 = sl_lanes_fold(q) / C;
#pragma omp simd
    for (int j = 0; j < C; j++) {
        float xh = (x[j] - mean) * rstd;
        dx[j] = rstd * (g[j] * w[j] - s1 - xh * s2);
    }
}

/* Rows per chunk of the parameter gradients' partial sums. */
#define LN_ROWS_PER_CHUNK 32

/* dxhat = dout w;  dinp = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));
 * dw += sum_rows dout xhat;  db += sum_rows dout.
 * One pass over the rows: each chunk of LN_ROWS_PER_CHUNK rows sums its rows' terms in row
 * order into its own partial sums, and the chunks are added in chunk order after. The chunking
 * does not depend on the threads, so neither do the bits; and dout and inp are read once (a
 * second pass over columns read them again, with a stride, and ran at a quarter of memory
 * speed once they left the cache). */
static void layernorm_backward(sl_dtype dt, int N, int C, const void *dout, const void *inp,
                               const float *w, const float *mean, const float *rstd, void *dinp,
                               float *dw, float *db)
{
    int nch = (N + LN_ROWS_PER_CHUNK - 1) / LN_ROWS_PER_CHUNK;
    float *part = calloc((size_t)nch * 2 * C, sizeof *part); /* per chunk: sw[C], sb[C] */
    if (!part) SL_FATAL("out of memory: %d x %d floats of layer-norm partial sums", nch, 2 * C);
#pragma omp parallel if (sl_cpu_par((size_t)N * C))
    {
        float *x = dt == SL_F32 ? NULL : xmalloc_f32(C), *g = dt == SL_F32 ? NULL : xmalloc_f32(C);
#pragma omp for schedule(static)
        for (int c = 0; c < nch; c++) {
            float *sw = part + (size_t)c * 2 * C, *sb = sw + C;
            int r1 = (c + 1) * LN_ROWS_PER_CHUNK < N ? (c + 1) * LN_ROWS_PER_CHUNK : N;
            for (int i = c * LN_ROWS_PER_CHUNK; i < r1; i++) {
                size_t o = (size_t)i * C;
                if (dt == SL_F32) {
                    layernorm_bwd_row(C, (const float *)inp + o, (const float *)dout + o,
                                      (float *)dinp + o, w, mean[i], rstd[i], sw, sb);
                    continue;
                }
                load(dt, inp, o, C, x);
                load(dt, dout, o, C, g);
                layernorm_bwd_row(C, x, g, x, w, mean[i], rstd[i], sw, sb);
                store(dt, x, dinp, o, C);
            }
        }
        free(x);
        free(g);
    }
    for (int c = 1; c < nch; c++) { /* in chunk order */
        const float *pc = part + (size_t)c * 2 * C;
#pragma omp simd
        for (int j = 0; j < 2 * C; j++) part[j] += pc[j];
    }
#pragma omp simd
    for (int j = 0; j < C; j++) {
        dw[j] += part[j];
        db[j] += part[C + j];
    }
    free(part);
}

/* Causal softmax --------------------------------------------------------------------------- */

/* One row of n live scores (the rest, up to T, masked to 0) into p: the max (exact in any
 * order), exp in f32 through libmvec's expf (cpu/mvec.h; eight lanes on AVX2, twice the f64
 * exp's, each within 4 ulp: t/unit/test_vmath.c), summed in vsum.h's fixed lanes: the bits
 * depend on the row and the CPU's vector variant only (loss.c says why). */
SL_CPU_CLONES static void softmax_row(int n, int T, const float *z, float *p)
{
    float m = z[0], a[SL_LANES] = {0};
#pragma omp simd reduction(max : m)
    for (int j = 1; j < n; j++) m = z[j] > m ? z[j] : m;
    SL_LANE_LOOP(n, j, l, p[j] = expf(z[j] - m); a[l] += p[j];);
    float inv = 1.0f / sl_lanes_fold(a);
#pragma omp simd
    for (int j = 0; j < n; j++) p[j] *= inv;
    for (int j = n; j < T; j++) p[j] = 0.0f;
}

static void softmax_causal_forward(sl_dtype dt, long long rows, int T, const float *scores,
                                   void *att)
{
#pragma omp parallel if (sl_cpu_par((size_t)rows * T))
    {
        float *p = xmalloc_f32(T);
#pragma omp for schedule(static)
        for (long long r = 0; r < rows; r++) {
            int t = (int)(r % T), n = t + 1;
            softmax_row(n, T, scores + (size_t)r * T, p);
            store(dt, p, att, (size_t)r * T, T);
        }
        free(p);
    }
}

/* p = p (g - sum p g) over the n live entries, the sum in vsum.h's fixed lanes; 0 beyond. */
SL_CPU_CLONES static void softmax_bwd_row(int n, int T, const float *g, float *p)
{
    float a[SL_LANES] = {0};
    SL_LANE_LOOP(n, j, l, a[l] += p[j] * g[j];);
    float s = sl_lanes_fold(a);
#pragma omp simd
    for (int j = 0; j < n; j++) p[j] = p[j] * (g[j] - s);
    for (int j = n; j < T; j++) p[j] = 0.0f;
}

static void softmax_causal_backward(sl_dtype dt, long long rows, int T, const void *att,
                                    const float *datt, void *dpre)
{
#pragma omp parallel if (sl_cpu_par((size_t)rows * T))
    {
        float *p = xmalloc_f32(T);
#pragma omp for schedule(static)
        for (long long r = 0; r < rows; r++) {
            int n = (int)(r % T) + 1;
            const float *g = datt + (size_t)r * T;
            load(dt, att, (size_t)r * T, T, p);
            softmax_bwd_row(n, T, g, p);
            store(dt, p, dpre, (size_t)r * T, T); /* may overwrite g's row (f32): read above */
        }
        free(p);
    }
}

/* GELU: kernels.h's f32 activation, on rows widened from 16 bits ------------------------------ */

static void gelu_forward(sl_dtype dt, size_t n, const void *x, void *y)
{
    if (dt == SL_F32) {
        sl_cpu_act_forward(SL_ACT_GELU, n, x, y);
        return;
    }
    size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel if (sl_cpu_par(n))
    {
        float *v = xmalloc_f32(SL_CPU_VBLOCK);
#pragma omp for schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * SL_CPU_VBLOCK, m = n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK;
            load(dt, x, lo, m, v);
            sl_cpu_act_forward(SL_ACT_GELU, m, v, v); /* short: runs on this thread */
            store(dt, v, y, lo, m);
        }
        free(v);
    }
}

static void gelu_backward(sl_dtype dt, size_t n, const void *x, const void *dy, void *dx)
{
    if (dt == SL_F32) {
        sl_cpu_act_backward(SL_ACT_GELU, n, x, dy, dx);
        return;
    }
    size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel if (sl_cpu_par(n))
    {
        float *v = xmalloc_f32(SL_CPU_VBLOCK), *g = xmalloc_f32(SL_CPU_VBLOCK);
#pragma omp for schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * SL_CPU_VBLOCK, m = n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK;
            load(dt, x, lo, m, v);
            load(dt, dy, lo, m, g);
            sl_cpu_act_backward(SL_ACT_GELU, m, v, g, g);
            store(dt, g, dx, lo, m);
        }
        free(v);
        free(g);
    }
}

/* Embeddings ------------------------------------------------------------------------------- */

static void embedding_forward(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                              const void *wte, const void *wpe, void *out)
{
    (void)V;
#pragma omp parallel if (sl_cpu_par((size_t)B * T * C))
    {
        float *e = xmalloc_f32(C), *p = xmalloc_f32(C);
#pragma omp for schedule(static)
        for (int i = 0; i < B * T; i++) {
            load(dt, wte, (size_t)tok[i] * C, C, e);
            load(dt, wpe, (size_t)(i % T) * C, C, p);
            for (int j = 0; j < C; j++) e[j] += p[j];
            store(dt, e, out, (size_t)i * C, C);
        }
        free(e);
        free(p);
    }
}

/* Columns split across threads; within a column block rows are added in order, so repeated
 * tokens scatter-add without races or atomics. */
static void embedding_backward(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                               const void *dout, float *dwte, float *dwpe)
{
    (void)V;
    enum { CB = 64 };
    int ncb = (C + CB - 1) / CB;
#pragma omp parallel if (sl_cpu_par((size_t)B * T * C))
    {
        float *g = xmalloc_f32(CB);
#pragma omp for schedule(static)
        for (int cb = 0; cb < ncb; cb++) {
            int j0 = cb * CB, nj = C - j0 < CB ? C - j0 : CB;
            for (int i = 0; i < B * T; i++) {
                load(dt, dout, (size_t)i * C + j0, nj, g);
                float *te = dwte + (size_t)tok[i] * C + j0, *pe = dwpe + (size_t)(i % T) * C + j0;
                for (int j = 0; j < nj; j++) {
                    te[j] += g[j];
                    pe[j] += g[j];
                }
            }
        }
        free(g);
    }
}

/* Dropout: the mask drawn per element from its global number (sl_dropout.h). */
static void dropout(sl_dtype dt, size_t n, const void *x, void *y, float p, uint64_t key, uint64_t first)
{
    const float scale = sl_dropout_scale(p);
    const long long nn = (long long)n;
#pragma omp parallel for schedule(static) if (sl_cpu_par(n))
    for (long long i = 0; i < nn; i++) {
        const int keep = sl_dropout_keep(key, first + (uint64_t)i, p);
        if (dt == SL_F32) {
            ((float *)y)[i] = keep ? ((const float *)x)[i] * scale : 0.0f;
        } else if (dt == SL_F16) {
            const float v = keep ? sl_f16_to_f32(((const uint16_t *)x)[i]) * scale : 0.0f;
            ((uint16_t *)y)[i] = sl_f32_to_f16(v);
        } else {
            const float v = keep ? sl_bf16_to_f32(((const uint16_t *)x)[i]) * scale : 0.0f;
            ((uint16_t *)y)[i] = sl_f32_to_bf16(v);
        }
    }
}

const sl_gpt_kops sl_cpu_gpt_ops = {
    .gemm_batched = gemm_batched,
    .layernorm_forward = layernorm_forward,
    .layernorm_backward = layernorm_backward,
    .softmax_causal_forward = softmax_causal_forward,
    .softmax_causal_backward = softmax_causal_backward,
    .gelu_forward = gelu_forward,
    .gelu_backward = gelu_backward,
    .embedding_forward = embedding_forward,
    .embedding_backward = embedding_backward,
    .dropout = dropout,
};
