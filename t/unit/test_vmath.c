/* test_vmath.c — the vectorisable expf and tanhf of kernels/cpu/vmath.h against libm in f64:
 *   - every f32 bit pattern with a stride of 509 (8.4 million values: all exponents, both
 *     signs, subnormals, inf and NaN) and a list of edges (±0, the smallest and largest
 *     subnormals, the overflow and underflow thresholds and their neighbours, tanh's switch
 *     between its two forms, NaN of either sign);
 *   - the error in f32 ulp of the exact result (f64 libm rounded from there, whose own error is
 *     2^-29 of an f32 ulp) stays within the stated bound: expf MAX_ULP_EXP, tanhf MAX_ULP_TANH;
 *     a result beyond FLT_MAX must be inf, NaN must give NaN, tanh(±0) keeps the sign;
 *   - softmax's f64 exp (x <= 0) against expl in long double, in f64 ulp, on 4 million points
 *     of [-745, 0] and on -0, -inf, NaN; below -708 it returns 0 by design;
 *   - the GeLU kernel (its loop vectorised, compiled with the kernels' flags) gives, bit for
 *     bit, the scalar formula on the same function: vector lanes and the loop's remainder agree,
 *     so an element's value does not depend on where a slice starts. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "cpu/vmath.h"
#include "test_kernels_util.h"

#define MAX_ULP_EXP 2.0  /* measured over every 7th f32: 0.975 at -0x1.df5aeap+5 */
#define MAX_ULP_TANH 2.0 /* measured over every 7th f32: 1.322 at -0x1.414e1p-1 */
#define MAX_ULP_EXP64 4.0 /* of f64; measured on 20 million points of [-745, 0]: 2.37 */
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

static void check_functions(void)
{
    worst we = {0}, wt = {0};
    for (uint64_t b = 0; b <= 0xffffffffu; b += STRIDE) {
        float x = from_bits((uint32_t)b);
        measure(&we, x, sl_vexpf(x), exp((double)x));
        measure(&wt, x, sl_vtanhf(x), tanh((double)x));
    }
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        float x = edges[i];
        for (int d = -2; d <= 2; d++) { /* the edge and its neighbours */
            uint32_t b;
            memcpy(&b, &x, 4);
            float y = isinf(x) || (d < 0 && (b & 0x7fffffffu) < 2) ? x : from_bits(b + d);
            measure(&we, y, sl_vexpf(y), exp((double)y));
            measure(&wt, y, sl_vtanhf(y), tanh((double)y));
        }
    }
    const float nans[] = {from_bits(0x7fc00000u), from_bits(0xffc00000u), from_bits(0x7f800001u),
                          from_bits(0xff800001u)};
    int nan_ok = 1;
    for (int i = 0; i < 4; i++) nan_ok &= isnan(sl_vexpf(nans[i])) && isnan(sl_vtanhf(nans[i]));
    ok(nan_ok, "NaN of either sign, quiet or signalling, gives NaN");
    ok(!signbit(sl_vtanhf(0.0f)) && signbit(sl_vtanhf(-0.0f)) && sl_vexpf(-0.0f) == 1.0f &&
           sl_vexpf(-INFINITY) == 0.0f && sl_vexpf(INFINITY) == INFINITY &&
           sl_vtanhf(INFINITY) == 1.0f && sl_vtanhf(-INFINITY) == -1.0f,
       "tanh(±0) = ±0, exp(-0) = 1, exp(±inf) = inf, 0; tanh(±inf) = ±1");
    ok(we.bad == 0 && we.err <= MAX_ULP_EXP, "expf: %llu values, max error %.3f ulp at %a (bound %.1f)",
       we.n, we.err, we.at, MAX_ULP_EXP);
    ok(wt.bad == 0 && wt.err <= MAX_ULP_TANH,
       "tanhf: %llu values, max error %.3f ulp at %a (bound %.1f)", wt.n, wt.err, wt.at,
       MAX_ULP_TANH);
}

static void check_exp64(void)
{
    enum { N = 1 << 22 };
    double worst = 0, at = 0;
    unsigned long long wrong_tiny = 0;
    for (int i = 0; i <= N; i++) {
        double x = -745.0 * i / N - 1e-3 * (i % 7); /* the offsets break the grid's regularity */
        double y = sl_vexp_nonpos(x);
        if (x < -708.0) {
            wrong_tiny += y != 0.0;
            continue;
        }
        long double e = expl((long double)x);
        int ex;
        frexpl(e, &ex);
        double err = (double)(fabsl((long double)y - e) / ldexpl(1.0L, ex - 53));
        if (err > worst) worst = err, at = x;
    }
    ok(wrong_tiny == 0 && worst <= MAX_ULP_EXP64,
       "f64 exp on [-745, 0]: max error %.3f ulp of f64 at %a (bound %.1f), 0 below -708", worst,
       at, MAX_ULP_EXP64);
    ok(sl_vexp_nonpos(0.0) == 1.0 && sl_vexp_nonpos(-0.0) == 1.0 &&
           sl_vexp_nonpos(-INFINITY) == 0.0 && isnan(sl_vexp_nonpos(NAN)),
       "f64 exp: exp(±0) = 1, exp(-inf) = 0, NaN gives NaN");
}

#define GELU_C 0.7978845608028654f
#define GELU_A 0.044715f

/* GeLU through the kernel, on an odd length (a remainder after the vector loop) and from an
 * odd offset (a slice starting mid-vector), against the scalar formula. */
static void check_kernel_lanes(void)
{
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < N; i++) x[i] = (float)(i - N / 2) * 0x1p-7f; /* -16 .. 16 */
    x[0] = -0.0f, x[1] = INFINITY, x[2] = -INFINITY;
    float *dx = t_up(x, N * sizeof *x), *dy = t_up(y, N * sizeof *y);
    sl_k_act_forward(T_BE, SL_ACT_GELU, N - 3, dx + 3, dy + 3);
    sl_k_act_forward(T_BE, SL_ACT_GELU, 3, dx, dy);
    t_down(y, dy, N * sizeof *y);
    int same = 1;
    for (int i = 0; i < N; i++) {
        float v = x[i], t = sl_vtanhf(GELU_C * (v + GELU_A * v * v * v));
        float want = 0.5f * v * (1.0f + t);
        if (memcmp(&want, &y[i], 4) && !(isnan(want) && isnan(y[i]))) {
            if (same) diag("element %d (x = %a): kernel %a, scalar %a", i, v, y[i], want);
            same = 0;
        }
    }
    ok(same, "GeLU kernel = scalar formula bit for bit (vector lanes, remainder, odd offset)");
    sl_k_free(T_BE, dx);
    sl_k_free(T_BE, dy);
    free(x);
    free(y);
}

int main(void)
{
    check_functions();
    check_exp64();
    check_kernel_lanes();
    done_testing();
    return exit_status();
}
