/* test_vmath.c — the vector math of the CPU kernels, glibc's libmvec through the variant the
 * kernels' clone on this CPU calls (cpu.h's SL_CPU_CLONES), against libm in f64:
 *   - expf as the softmax cross-entropy and attention call it (cpu/loss.c, cpu/gpt.c), on the
 *     domain below, within MAX_ULP_EXPF; NaN gives NaN, ±0 gives 1, overflow gives inf, -inf
 *     gives 0;
 *   - the sigmoid the GeLU kernels compute on libmvec's expf (cpu/elementwise.c), on every f32
 *     bit pattern with a stride of 509 (8.4 million values: all exponents, both signs,
 *     subnormals, inf and NaN) and a list of edges (±0, the smallest and largest subnormals,
 *     the overflow and underflow thresholds of exp and their neighbours, NaN of either sign):
 *     its error in f32 ulp of the exact result (f64 libm rounded from there, whose own error is
 *     2^-29 of an f32 ulp) within MAX_ULP_SIGMOID_MVEC; NaN gives NaN, ±0 gives 1/2, the tail
 *     below -88.7 is kept;
 *   - the GeLU kernels, forward and backward, give the same bits for an element wherever a
 *     slice starts and ends (vector groups and the padded last group agree); AdamW's kernel
 *     (cloned the same way) gives the scalar loop's bits;
 *   - and both against f64 (in the sigmoid form) on [-16, 16]: relative error (the gradient's
 *     relative to the size of its two terms) within gelu_rel_bound, a bound that grows with
 *     |u| = |c (x + a x^3)|, since the f32 rounding of u itself (its relative error about
 *     2^-23) moves sigmoid(2u) by 2 |u| times that in the negative tail. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "sl_env.h"
#include "test_kernels_util.h"

/* libmvec's expf under the sigmoid, its AVX2 variant: 3.488 at -0x1.f16a2p+3 over every 509th
 * f32, 3.628 at -0x1.d1c9p+2 measured once over every f32 */
#define MAX_ULP_SIGMOID_MVEC 4.0
/* libmvec's expf (softmax cross-entropy, attention), AVX2 variant: 2.462 at -0x1.fe1d3ap+2 over every
 * 509th f32 */
#define MAX_ULP_EXPF 4.0
#define STRIDE 509u

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* |got - exact| in units of the last place of the f32 nearest the exact value; a result that
 * should overflow must be inf (then 0), NaN in must be NaN out (then 0); -1 flags a wrong
 * special value. */
static double ulp_err(float got, double exact)
{
    if (isnan(exact)) return isnan(got) ? 0.0 : -1.0;
    if (fabs(exact) >= 0x1p128) return isinf(got) && (got > 0) == (exact > 0) ? 0.0 : -1.0;
    double g = isinf(got) ? copysign(0x1p128, got) : got;
    int e;
    frexp(exact, &e); /* exact = m 2^e, 0.5 <= |m| < 1 */
    double ulp = ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
    return fabs(g - exact) / ulp;
}

typedef struct worst {
    double err;
    float at;
    unsigned long long n, bad;
} worst;

static void measure(worst *w, float x, float got, double exact)
{
    double e = ulp_err(got, exact);
    w->n++;
    if (e < 0) {
        if (w->bad++ < 5) diag("wrong special value at %a: got %a, exact %a", x, got, exact);
        return;
    }
    if (e > w->err) w->err = e, w->at = x;
}

static const float edges[] = {
    0.0f, -0.0f, 0x1p-149f, -0x1p-149f, 0x1.fffffcp-127f, -0x1.fffffcp-127f, 0x1p-126f,
    INFINITY, -INFINITY, 88.72283935546875f, 88.7228317f, 88.7228469f, 89.0f, 104.0f,
    -87.3365478515625f, -87.3365402f, -103.278931f, -103.972084f, -103.972092f, -104.0f,
    -150.0f, 0.625f, -0.625f, 0.62499994f, -0.62499994f, 9.0f, -9.0f, 0x1p-30f, -0x1p-30f,
    1.0f, -1.0f, 0.34657359f, -0.34657359f, FLT_MAX, -FLT_MAX,
};

/* Every STRIDE-th f32 and the edges with their two neighbours each side into x (room for
 * domain_size()); the NaNs last, from *nan_at. Returns the count. */
static size_t domain_size(void)
{
    return (size_t)(0xffffffffu / STRIDE) + 1 + 5 * (sizeof edges / sizeof edges[0]) + 4;
}

static size_t domain(float *x, size_t *nan_at)
{
    size_t m = 0, ne = sizeof edges / sizeof edges[0];
    for (uint64_t b = 0; b <= 0xffffffffu; b += STRIDE) x[m++] = from_bits((uint32_t)b);
    for (size_t i = 0; i < ne; i++)
        for (int d = -2; d <= 2; d++) {
            uint32_t b;
            memcpy(&b, &edges[i], 4);
            int keep = isinf(edges[i]) || (d < 0 && (b & 0x7fffffffu) < 2);
            x[m++] = keep ? edges[i] : from_bits(b + d);
        }
    *nan_at = m;
    x[m++] = from_bits(0x7fc00000u), x[m++] = from_bits(0xffc00000u);
    x[m++] = from_bits(0x7f800001u), x[m++] = from_bits(0xff800001u);
    return m;
}

/* libmvec's expf, as the softmax cross-entropy calls it, over the domain: within
 * MAX_ULP_EXPF of exp in f64 (overflow to inf, the subnormal tail measured in its own ulp). */
static void check_expf_mvec(void)
{
    float *x = malloc(domain_size() * sizeof *x), *y = malloc(domain_size() * sizeof *y);
    size_t nan_at, m = domain(x, &nan_at);
    sl_cpu_expf_n(m, x, y);
    worst w = {0};
    for (size_t i = 0; i < nan_at; i++) measure(&w, x[i], y[i], exp((double)x[i]));
    int nan_ok = 1;
    for (size_t i = nan_at; i < m; i++) nan_ok &= isnan(y[i]);
    float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, 89.0f, -104.0f, -0x1p-149f, 0x1p-149f}, sy[8];
    sl_cpu_expf_n(8, sp, sy);
    ok(nan_ok && sy[0] == 1.0f && sy[1] == 1.0f && sy[2] == INFINITY && sy[3] == 0.0f &&
           sy[4] == INFINITY && sy[5] == 0.0f && sy[6] == 1.0f && sy[7] == 1.0f,
       "libmvec expf: NaN gives NaN, exp(±0) = 1, exp(inf) = inf, exp(-inf) = 0, overflow to inf");
    ok(w.bad == 0 && w.err <= MAX_ULP_EXPF,
       "libmvec expf (%s): %llu values, max error %.3f ulp at %a (bound %.1f)",
       sl_env_cpu_vec_isa(), w.n, w.err, w.at, MAX_ULP_EXPF);
    free(x);
    free(y);
}

/* The kernels' sigmoid over every STRIDE-th f32 and the edges, in one call per array. */
static void check_sigmoid_mvec(void)
{
    float *x = malloc(domain_size() * sizeof *x), *y = malloc(domain_size() * sizeof *y);
    size_t nan_at, m = domain(x, &nan_at);
    sl_cpu_sigmoid_n(m, x, y);
    worst w = {0};
    for (size_t i = 0; i < nan_at; i++) measure(&w, x[i], y[i], 1.0 / (1.0 + exp(-(double)x[i])));
    int nan_ok = 1;
    for (size_t i = nan_at; i < m; i++) nan_ok &= isnan(y[i]);
    float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, -100.0f, -103.0f}, sy[6];
    sl_cpu_sigmoid_n(6, sp, sy);
    ok(nan_ok && sy[0] == 0.5f && sy[1] == 0.5f && sy[2] == 1.0f && sy[3] == 0.0f && sy[4] > 0.0f &&
           sy[5] > 0.0f,
       "libmvec sigmoid: NaN gives NaN, sigmoid(±0) = 1/2, sigmoid(±inf) = 1, 0, the tail kept");
    ok(w.bad == 0 && w.err <= MAX_ULP_SIGMOID_MVEC,
       "libmvec sigmoid (%s): %llu values, max error %.3f ulp at %a (bound %.1f)",
       sl_env_cpu_vec_isa(), w.n, w.err, w.at, MAX_ULP_SIGMOID_MVEC);
    free(x);
    free(y);
}

#define GELU_C 0.7978845608028654f
#define GELU_A 0.044715f

/* 2^-23 (4 + 3 |u|): 4 ulp for the sigmoid and the products, plus the rounding of u carried
 * into the tail (2 |u| 2^-24 per rounding, a few roundings). */
static double gelu_rel_bound(double v)
{
    double u = fabs(0.7978845608028654 * (v + 0.044715 * v * v * v));
    return 0x1p-23 * (4.0 + 3.0 * u);
}

/* GeLU and its gradient in f64, in the sigmoid form: kernels/ref.c's tanh form cancels in the
 * negative tail (1 + tanh(u) is 0 in f64 below u = -19), this one does not. term[0], term[1]:
 * the gradient's two terms s and 2 x s (1 - s) u'; their size is the scale of its error, as it
 * crosses 0 near x = -0.75. */
static double gelu_f64(double v, double *grad, double term[2])
{
    double u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    double e = exp(-2.0 * fabs(u)), r = 1.0 / (1.0 + e), s = u >= 0 ? r : e * r;
    term[0] = s;
    term[1] = 2.0 * v * e * r * r * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * v * v);
    *grad = term[0] + term[1];
    return v * s;
}

static int same_bits(float a, float b) { return !memcmp(&a, &b, 4) || (isnan(a) && isnan(b)); }

/* GeLU and its gradient through the kernels, whole, and in pieces that start and end mid-group
 * (an odd offset, odd lengths): the same bits for every element either way; and against the
 * f64 reference within gelu_rel_bound. */
static void check_kernel_lanes(void)
{
    enum { N = 4099 };
    static const int cuts[] = {0, 3, 20, 37, 4096, N}; /* pieces [cuts[k], cuts[k+1]) */
    size_t bytes = N * sizeof(float);
    float *x = malloc(bytes), *y = malloc(bytes), *g = malloc(bytes), *y1 = malloc(bytes),
          *g1 = malloc(bytes), *ones = malloc(bytes);
    for (int i = 0; i < N; i++) x[i] = (float)(i - N / 2) * 0x1p-7f; /* -16 .. 16 */
    x[0] = -0.0f, x[1] = INFINITY, x[2] = -INFINITY;
    for (int i = 0; i < N; i++) ones[i] = 1.0f;
    float *dx = t_up(x, bytes), *dy = t_up(y, bytes), *d1 = t_up(ones, bytes), *dg = t_up(g, bytes);
    sl_k_act_forward(T_BE, SL_ACT_GELU, N, dx, dy);
    sl_k_act_backward(T_BE, SL_ACT_GELU, N, dx, d1, dg);
    t_down(y1, dy, bytes);
    t_down(g1, dg, bytes);
    for (size_t k = 0; k + 1 < sizeof cuts / sizeof cuts[0]; k++) {
        size_t lo = (size_t)cuts[k], n = (size_t)(cuts[k + 1] - cuts[k]);
        sl_k_act_forward(T_BE, SL_ACT_GELU, n, dx + lo, dy + lo);
        sl_k_act_backward(T_BE, SL_ACT_GELU, n, dx + lo, d1 + lo, dg + lo);
    }
    t_down(y, dy, bytes);
    t_down(g, dg, bytes);
    int same = 1, sameg = 1;
    double wf = 0, wb = 0;
    float atf = 0, atb = 0;
    for (int i = 0; i < N; i++) {
        float v = x[i];
        if (!same_bits(y1[i], y[i])) {
            if (same) diag("forward, element %d (x = %a): whole %a, pieces %a", i, v, y1[i], y[i]);
            same = 0;
        }
        if (!same_bits(g1[i], g[i])) {
            if (sameg)
                diag("backward, element %d (x = %a): whole %a, pieces %a", i, v, g1[i], g[i]);
            sameg = 0;
        }
        if (isinf(v)) continue;
        double rb, term[2], rf = gelu_f64(v, &rb, term), b = gelu_rel_bound(v);
        /* in units of the bound; where sigmoid(2u) is subnormal (u < -43.7) its absolute
         * error, a few 2^-149, times |x| (times 2 |x u'| in the gradient) joins it */
        double sub = (fabs(v) + 1.0) * 0x1p-147;
        double subg = (2.0 * fabs(v) * 0.8 * (1.0 + 0.134145 * v * v) + 1.0) * 0x1p-147;
        double ef = fabs(y[i] - rf) / (b * fabs(rf) + sub);
        double eb = fabs(g[i] - rb) / (b * (fabs(term[0]) + fabs(term[1])) + subg);
        if (ef > wf) wf = ef, atf = v;
        if (eb > wb) wb = eb, atb = v;
    }
    ok(same, "GeLU kernel: whole = in pieces, bit for bit (vector groups, padded last group)");
    ok(sameg, "GeLU backward kernel: whole = in pieces, bit for bit");
    ok(wf <= 1.0, "GeLU against f64 on [-16, 16]: worst %.3f of the bound 2^-23 (4 + 3|u|) |gelu| + (|x| + 1) 2^-147, at %a",
       wf, atf);
    ok(wb <= 1.0,
       "GeLU backward against f64 on [-16, 16] (relative to its terms' size): worst %.3f of "
       "the bound, at %a", wb, atb);
    sl_k_free(T_BE, dx);
    sl_k_free(T_BE, dy);
    sl_k_free(T_BE, d1);
    sl_k_free(T_BE, dg);
    free(x), free(y), free(g), free(y1), free(g1), free(ones);
}

/* AdamW through the kernel (cloned per ISA like GeLU) on an odd length from an odd offset, two
 * steps, against the scalar loop bit for bit: its sqrt and division are correctly rounded, so
 * lanes, remainder and ISA variant agree. */
static void check_adamw_lanes(void)
{
    enum { N = 4099 };
    size_t bytes = N * sizeof(float);
    float *w = malloc(bytes), *g = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    float *w2 = malloc(bytes), *m2 = malloc(bytes), *v2 = malloc(bytes);
    for (int i = 0; i < N; i++) {
        w[i] = w2[i] = sl_rng_uniform(1, (uint64_t)i) - 0.5f;
        g[i] = (sl_rng_uniform(2, (uint64_t)i) - 0.5f) * (i % 5 ? 1e-3f : 1e3f);
        m[i] = m2[i] = v[i] = v2[i] = 0.0f;
    }
    float *dw = t_up(w, bytes), *dg = t_up(g, bytes), *dm = t_up(m, bytes), *dv = t_up(v, bytes);
    int same = 1;
    for (long step = 1; step <= 2; step++) {
        sl_adamw o = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, step};
        sl_k_adamw_step(T_BE, &o, N - 1, dw + 1, dg + 1, dm + 1, dv + 1);
        sl_k_adamw_step(T_BE, &o, 1, dw, dg, dm, dv);
        float c1 = (float)(1.0 / (1.0 - pow(o.beta1, (double)step)));
        float c2 = (float)(1.0 / (1.0 - pow(o.beta2, (double)step)));
        for (int i = 0; i < N; i++) {
            float gi = g[i];
            float mi = m2[i] = o.beta1 * m2[i] + (1.0f - o.beta1) * gi;
            float vi = v2[i] = o.beta2 * v2[i] + (1.0f - o.beta2) * gi * gi;
            w2[i] -= o.lr * (o.weight_decay * w2[i] + (mi * c1) / (sqrtf(vi * c2) + o.eps));
        }
    }
    t_down(w, dw, bytes);
    t_down(m, dm, bytes);
    t_down(v, dv, bytes);
    for (int i = 0; i < N; i++)
        if (!same_bits(w[i], w2[i]) || !same_bits(m[i], m2[i]) || !same_bits(v[i], v2[i])) {
            if (same) diag("element %d: kernel w %a, scalar %a", i, w[i], w2[i]);
            same = 0;
        }
    ok(same, "AdamW kernel = scalar loop bit for bit over 2 steps (lanes, remainder, offset)");
    sl_k_free(T_BE, dw), sl_k_free(T_BE, dg), sl_k_free(T_BE, dm), sl_k_free(T_BE, dv);
    free(w), free(g), free(m), free(v), free(w2), free(m2), free(v2);
}

int main(void)
{
    check_expf_mvec();
    check_sigmoid_mvec();
    check_kernel_lanes();
    check_adamw_lanes();
    done_testing();
    return exit_status();
}
