/* cpu/elementwise.c — bias add and its gradient, activations, axpby/fill for every dtype and
 * the loss-scaling check, as OpenMP loops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/mvec.h"
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

/* expf from libmvec (cpu/mvec.h). Its vector variants' results are not the scalar expf's bits,
 * so no element may take the scalar call: the loops below run whole groups of SL_EXP_GROUP
 * elements only (a multiple of every vector width, no remainder iterations), and a slice's last
 * partial group goes through a padded copy. An element's value then depends on its x only, not
 * on where a slice or a thread's share starts.
 * Against the plain-arithmetic exp polynomial before it, AVX2, one thread (a loaded
 * machine): GeLU 0.87 against 1.93 ns per element, its gradient 1.15 against 2.2. The sigmoid
 * on it is 3.6 ulp from the exact value at worst (every f32, AVX2), 2.3 on that polynomial;
 * t/unit/test_vmath.c holds it to MAX_ULP_SIGMOID_MVEC = 4. */
#define SL_EXP_GROUP 16

/* The three functions below in two stages over a block of up to EXP_BLOCK elements: e =
 * exp(-|t|) by libmvec (t = x, or 2u for GeLU), then the arithmetic on it. Done element by
 * element in one loop, each division waited on the call before it; in stages the calls run back
 * to back and the divisions after them: the gradient 0.97 against 1.11 ns an element (AVX2, one
 * loaded core), GeLU itself unchanged at 0.84, of which libmvec's expf is half.
 * expf is still called on whole groups of SL_EXP_GROUP only: inner loops of exactly that many
 * lanes, which no ISA's loop splits into a vector part and a scalar rest. */
#define EXP_BLOCK 256

/* 1 / (1 + exp(-x)) as (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|) <= 1: exp never overflows,
 * so the tail below x = -88.7 keeps its small and subnormal values, and neither side
 * subtracts. -0 gives 1/2; NaN gives NaN. */
static inline float sigmoid_e(float x, float e) { return (x >= 0.0f ? 1.0f : e) / (1.0f + e); }

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = c (x + a x^3): one exp and one division, where
 * the tanh form needs an exp, a division and a polynomial for small u, and loses the tail to
 * cancellation in 1 + tanh(u) for u << 0. The loops are cloned per ISA (cpu.h). */
static inline float gelu_u(float v) { return GELU_C * (v + GELU_A * v * v * v); }

/* d/dx x s(2u) = s + 2 x s (1 - s) u', u' = c (1 + 3 a x^2). With e = exp(-2|u|) and
 * r = 1 / (1 + e): s = r (u >= 0) or e r, and s (1 - s) = e r^2 either way, without the
 * cancellation of 1 - s or of 1 - tanh^2. */
static inline float gelu_grad_e(float v, float e)
{
    float u = gelu_u(v), r = 1.0f / (1.0f + e);
    float s = u >= 0.0f ? r : e * r;
    return s + 2.0f * v * (e * r * r) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
}

/* The argument t whose exp(-|t|) op needs: op 0 (sigmoid) x, 1 and 2 (GeLU) 2u. */
static inline float exp_arg(int op, float v) { return op == 0 ? v : 2.0f * gelu_u(v); }

/* op 0: y = sigmoid(x); 1: y = gelu(x); 2: y = dy gelu'(x); 3: y = exp(x) (for the accuracy
 * test). n is a multiple of SL_EXP_GROUP. */
SL_CPU_CLONES static void exp_groups(int op, size_t n, const float *x, const float *dy, float *y)
{
    float e[EXP_BLOCK];
    for (size_t b = 0; b < n; b += EXP_BLOCK) {
        size_t m = n - b < EXP_BLOCK ? n - b : EXP_BLOCK;
        const float *xb = x + b;
        float *yb = y + b;
        for (size_t g = 0; g < m; g += SL_EXP_GROUP) {
            if (op == 3) {
#pragma omp simd
                for (int l = 0; l < SL_EXP_GROUP; l++) e[g + l] = expf(xb[g + l]);
            } else {
#pragma omp simd
                for (int l = 0; l < SL_EXP_GROUP; l++)
                    e[g + l] = expf(-fabsf(exp_arg(op, xb[g + l])));
            }
        }
        if (op == 0) {
#pragma omp simd
            for (size_t i = 0; i < m; i++) yb[i] = sigmoid_e(xb[i], e[i]);
        } else if (op == 1) {
#pragma omp simd
            for (size_t i = 0; i < m; i++) yb[i] = xb[i] * sigmoid_e(2.0f * gelu_u(xb[i]), e[i]);
        } else if (op == 2) {
            const float *dyb = dy + b;
#pragma omp simd
            for (size_t i = 0; i < m; i++) yb[i] = dyb[i] * gelu_grad_e(xb[i], e[i]);
        } else {
            memcpy(yb, e, m * sizeof *yb);
        }
    }
}

/* exp_groups over any n: whole groups in place, the last partial group padded with zeros. */
static void exp_block(int op, size_t n, const float *x, const float *dy, float *y)
{
    size_t whole = n - n % SL_EXP_GROUP;
    exp_groups(op, whole, x, dy, y);
    if (whole == n) return;
    float xp[SL_EXP_GROUP] = {0}, dp[SL_EXP_GROUP] = {0}, yp[SL_EXP_GROUP];
    memcpy(xp, x + whole, (n - whole) * sizeof *xp);
    if (dy) memcpy(dp, dy + whole, (n - whole) * sizeof *dp);
    exp_groups(op, SL_EXP_GROUP, xp, dp, yp);
    memcpy(y + whole, yp, (n - whole) * sizeof *yp);
}

/* exp_block over the threads, in blocks of SL_CPU_VBLOCK (a multiple of SL_EXP_GROUP). */
static void exp_op(int op, size_t n, const float *x, const float *dy, float *y)
{
    size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * SL_CPU_VBLOCK;
        exp_block(op, n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK, x + lo, dy ? dy + lo : NULL,
                  y + lo);
    }
}

void sl_cpu_sigmoid_n(size_t n, const float *x, float *y) { exp_op(0, n, x, NULL, y); }
void sl_cpu_expf_n(size_t n, const float *x, float *y) { exp_op(3, n, x, NULL, y); }

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
    case SL_ACT_GELU: exp_op(1, n, x, NULL, y); break;
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
    case SL_ACT_GELU: exp_op(2, n, x, dy, dx); break;
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
