/* cpu/elementwise.c — bias add and its gradient, activations, axpby/fill for every dtype and
 * the loss-scaling check, as OpenMP loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/vmath.h"
#include "sl_error.h"
#include "sl_half.h"

void sl_cpu_bias_add(int rows, int cols, float *y, const float *bias)
{
#pragma omp parallel for if (sl_cpu_par((size_t)rows * cols)) schedule(static)
    for (int i = 0; i < rows; i++)
#pragma omp simd
        for (int j = 0; j < cols; j++) y[(size_t)i * cols + j] += bias[j];
}

/* Rows are cut into fixed chunks of ROWS_PER_CHUNK; each chunk's column sums are formed in
 * row order (rows walked in memory order), then the chunks are added in chunk order. The
 * chunking does not depend on the number of threads, so neither do the bits of the result
 * (bit-identical runs are compared by the vdnn and checkpoint benchmarks). */
#define ROWS_PER_CHUNK 512

static void column_sums(const float *dy, int r0, int r1, int cols, float *s)
{
    for (int i = r0; i < r1; i++) {
        const float *row = dy + (size_t)i * cols;
#pragma omp simd
        for (int j = 0; j < cols; j++) s[j] += row[j];
    }
}

void sl_cpu_bias_grad(int rows, int cols, const float *dy, float *dbias)
{
    int nchunks = (rows + ROWS_PER_CHUNK - 1) / ROWS_PER_CHUNK;
    float *part = calloc((size_t)nchunks * cols, sizeof *part);
    if (!part) SL_FATAL("out of memory: %d x %d floats for a bias gradient", nchunks, cols);
#pragma omp parallel for if (sl_cpu_par((size_t)rows * cols)) schedule(static)
    for (int c = 0; c < nchunks; c++) {
        int r0 = c * ROWS_PER_CHUNK, r1 = r0 + ROWS_PER_CHUNK < rows ? r0 + ROWS_PER_CHUNK : rows;
        column_sums(dy, r0, r1, cols, part + (size_t)c * cols);
    }
    for (int c = 1; c < nchunks; c++) { /* in chunk order */
        const float *pc = part + (size_t)c * cols;
#pragma omp simd
        for (int j = 0; j < cols; j++) part[j] += pc[j];
    }
#pragma omp simd
    for (int j = 0; j < cols; j++) dbias[j] += part[j];
    free(part);
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* v if x > 0, else +0 (also for NaN x), without a branch: on random signs a branch is
 * mispredicted half of the time, which made ReLU several times slower than a copy. */
static inline float keep_if_positive(float x, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u &= -(uint32_t)(x > 0.0f);
    memcpy(&v, &u, 4);
    return v;
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = c (x + a x^3): one exp and one division, where
 * the tanh form needs an exp, a division and a polynomial for small u, and loses the tail to
 * cancellation in 1 + tanh(u) for u << 0 (vmath.h's sigmoid keeps it). The loops are cloned per
 * ISA (cpu.h). */
static inline float gelu_u(float v) { return GELU_C * (v + GELU_A * v * v * v); }

SL_CPU_CLONES static void gelu_block(size_t n, const float *x, float *y)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * sl_vsigmoidf(2.0f * gelu_u(x[i]));
}

/* d/dx x s(2u) = s + 2 x s (1 - s) u', u' = c (1 + 3 a x^2). With e = exp(-2|u|) and
 * r = 1 / (1 + e): s = r (u >= 0) or e r, and s (1 - s) = e r^2 either way, without the
 * cancellation of 1 - s or of 1 - tanh^2. */
SL_CPU_CLONES static void gelu_grad_block(size_t n, const float *x, const float *dy,
                                          float *dx)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u = gelu_u(v);
        float e = sl_vexpf(-2.0f * fabsf(u)), r = 1.0f / (1.0f + e);
        float s = u >= 0.0f ? r : e * r;
        float d = s + 2.0f * v * (e * r * r) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = dy[i] * d;
    }
}

void sl_cpu_act_forward(sl_act act, size_t n, const float *x, float *y)
{
    switch (act) {
    case SL_ACT_NONE:
        if (y != x)
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
            for (size_t i = 0; i < n; i++) y[i] = x[i];
        break;
    case SL_ACT_RELU:
#pragma omp parallel for simd if (sl_cpu_par(n)) schedule(static)
        for (size_t i = 0; i < n; i++) y[i] = keep_if_positive(x[i], x[i]);
        break;
    case SL_ACT_GELU: {
        size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * SL_CPU_VBLOCK;
            gelu_block(n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK, x + lo, y + lo);
        }
        break;
    }
    default:
        SL_FATAL("bad activation %d", (int)act);
    }
}

void sl_cpu_act_backward(sl_act act, size_t n, const float *x, const float *dy, float *dx)
{
    switch (act) {
    case SL_ACT_NONE:
        if (dx != dy)
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
            for (size_t i = 0; i < n; i++) dx[i] = dy[i];
        break;
    case SL_ACT_RELU:
#pragma omp parallel for simd if (sl_cpu_par(n)) schedule(static)
        for (size_t i = 0; i < n; i++) dx[i] = keep_if_positive(x[i], dy[i]);
        break;
    case SL_ACT_GELU: {
        size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
        for (size_t b = 0; b < nb; b++) {
            size_t lo = b * SL_CPU_VBLOCK;
            gelu_grad_block(n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK, x + lo, dy + lo,
                            dx + lo);
        }
        break;
    }
    default:
        SL_FATAL("bad activation %d", (int)act);
    }
}

/* y = alpha x + beta y in the dtype's arithmetic (f32 for the 16-bit types). */
#define AXPBY_LOOP(T, A, LOAD, STORE)                                                 \
    do {                                                                             \
        const T *xs = x;                                                             \
        T *ys = y;                                                                   \
        A al = (A)alpha, be = (A)beta;                                               \
        _Pragma("omp parallel for if (sl_cpu_par(n)) schedule(static)")         \
        for (size_t i = 0; i < n; i++) {                                             \
            A v = al == 0 ? (A)0 : al * LOAD(xs[i]);                                 \
            if (be != 0) v += be * LOAD(ys[i]);                                      \
            ys[i] = STORE(v);                                                        \
        }                                                                            \
    } while (0)
#define ID(v) (v)

/* One block's combine in f32, the zero coefficients decided once per block rather than per
 * element (a select per element kept the loop scalar). Each case is the expression the element
 * loop had: alpha = 0 gives 0 + beta y (so -0 becomes +0), beta = 0 leaves y unread. Correctly
 * rounded operations without contraction: every clone gives the same bits. */
SL_CPU_CLONES static void axpby_block(size_t m, float al, const float *xf, float be, float *yf)
{
    if (al == 0.0f && be == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < m; i++) yf[i] = 0.0f;
    } else if (al == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < m; i++) yf[i] = 0.0f + be * yf[i];
    } else if (be == 0.0f) {
#pragma omp simd
        for (size_t i = 0; i < m; i++) yf[i] = al * xf[i];
    } else {
#pragma omp simd
        for (size_t i = 0; i < m; i++) yf[i] = al * xf[i] + be * yf[i];
    }
}

/* f16 and bf16 in blocks: widen (half_vec.c: F16C, vectorised bf16), combine in f32, narrow
 * once */
static void axpby_16(sl_dtype dt, size_t n, float al, const uint16_t *x, float be, uint16_t *y)
{
    void (*widen)(const uint16_t *, float *, size_t) =
        dt == SL_F16 ? sl_cpu_f16_to_f32_n : sl_cpu_bf16_to_f32_n;
    void (*narrow)(const float *, uint16_t *, size_t) =
        dt == SL_F16 ? sl_cpu_f32_to_f16_n : sl_cpu_f32_to_bf16_n;
    enum { B = 1024 };
    size_t nb = (n + B - 1) / B;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        float xf[B], yf[B];
        size_t lo = b * B, m = n - lo < B ? n - lo : B;
        if (al != 0.0f) widen(x + lo, xf, m);
        if (be != 0.0f) widen(y + lo, yf, m);
        axpby_block(m, al, xf, be, yf);
        narrow(yf, y + lo, m);
    }
}

void sl_cpu_axpby(sl_dtype dt, size_t n, double alpha, const void *x, double beta, void *y)
{
    switch (dt) {
    case SL_F32: AXPBY_LOOP(float, float, ID, ID); break;
    case SL_F64: AXPBY_LOOP(double, double, ID, ID); break;
    case SL_F16:
    case SL_BF16: axpby_16(dt, n, (float)alpha, x, (float)beta, y); break;
    default: SL_FATAL("axpby: bad dtype %d", (int)dt);
    }
}

void sl_cpu_fill(sl_dtype dt, size_t n, void *x, double value)
{
    switch (dt) {
    case SL_F32: {
        float *p = x, v = (float)value;
        for (size_t i = 0; i < n; i++) p[i] = v;
        break;
    }
    case SL_F64: {
        double *p = x;
        for (size_t i = 0; i < n; i++) p[i] = value;
        break;
    }
    case SL_F16:
    case SL_BF16: {
        uint16_t *p = x;
        uint16_t v = dt == SL_F16 ? sl_f32_to_f16((float)value) : sl_f32_to_bf16((float)value);
        for (size_t i = 0; i < n; i++) p[i] = v;
        break;
    }
    default: SL_FATAL("fill: bad dtype %d", (int)dt);
    }
}

size_t sl_cpu_scale_check(size_t n, float *x, float scale)
{
    size_t bad = 0;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static) reduction(+ : bad)
    for (size_t i = 0; i < n; i++) {
        x[i] *= scale;
        bad += !isfinite(x[i]);
    }
    return bad;
}
