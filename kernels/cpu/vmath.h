/* cpu/vmath.h — expf, tanhf, the logistic sigmoid and an f64 exp in plain arithmetic, for loops
 * under `#pragma omp simd`.
 *
 * libm's expf is an opaque call per element, so a loop that uses it never vectorises; glibc's
 * vector variants (libmvec) would, but they round differently from the scalar expf that the
 * loop's remainder iterations call, so an element's bits would depend on where a slice starts.
 * These are inline, branch-free (selects only) and use only +, -, *, / and bit moves, all
 * correctly rounded by IEEE 754: a lane of any vector width and the scalar remainder give the
 * same bits, on every ISA (the build's ISO C mode leaves fused multiply-add contraction off).
 * Maximum error against the exact result, measured on every 7th f32 (t/unit/test_vmath.c
 * asserts <= 2 ulp over the whole range, ±0, subnormals, ±inf and NaN included): expf
 * 0.98 ulp, tanhf 1.33 ulp; sigmoid (GeLU) 2.26 ulp on every 509th f32 (asserted <= 4);
 * exp in f64 for softmax (x <= 0) 2.4 ulp of f64. */
#ifndef SL_CPU_VMATH_H
#define SL_CPU_VMATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float sl_vexpf(float x)
{
    /* exp(x) = 2^k exp(r), k = round(x / ln 2), |r| <= ln 2 / 2; exp(r) by Cephes' minimax
     * polynomial. Beyond the clamps the result is inf or 0 anyway; NaN is sent through a
     * harmless 0 so that the float-to-int conversion stays defined, and returned at the end. */
    uint32_t bx;
    memcpy(&bx, &x, 4);
    int nan = (bx & 0x7fffffffu) > 0x7f800000u; /* bits, not x != x: that does not vectorise */
    float xc = nan ? 0.0f : x > 89.0f ? 89.0f : x < -104.0f ? -104.0f : x;
    float kf = xc * 1.44269504088896341f + 0x1.8p23f; /* round to nearest integer */
    kf -= 0x1.8p23f;
    float r = xc - kf * 0.693359375f; /* ln 2 in two parts: kf * hi is exact */
    r = r - kf * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    /* 2^k as two normal factors, so that k down to -150 (subnormal results) and up to 128
     * (overflow to inf) round once, at the last product. */
    int32_t k = (int32_t)kf, k1 = k / 2, k2 = k - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    float y = p * s1 * s2;
    return nan ? x + x : y;
}

#pragma omp declare simd notinbranch
static inline float sl_vtanhf(float x)
{
    /* On |x|, the sign put back last (so tanh(-0) = -0): below 0.625 Cephes' odd polynomial
     * (no cancellation near 0), else 1 - 2 / (exp(2|x|) + 1), which saturates to 1 where exp
     * overflows. */
    uint32_t bx, sign;
    memcpy(&bx, &x, 4);
    sign = bx & 0x80000000u;
    bx &= 0x7fffffffu;
    float a;
    memcpy(&a, &bx, 4);
    float z = a * a;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float small = p * z * a + a;
    float big = 1.0f - 2.0f / (sl_vexpf(2.0f * a) + 1.0f);
    float t = a < 0.625f ? small : big;
    uint32_t bt;
    memcpy(&bt, &t, 4);
    bt |= sign;
    memcpy(&t, &bt, 4);
    return t;
}

#pragma omp declare simd notinbranch
static inline float sl_vsigmoidf(float x)
{
    /* 1 / (1 + exp(-x)) as (x >= 0 ? 1 : e) / (1 + e), e = exp(-|x|) <= 1: exp never
     * overflows, so the tail below x = -88.7 (where 1 / (1 + exp(-x)) would give 0) keeps its
     * small and subnormal values, and neither side subtracts. -0 gives 1/2; NaN gives NaN. */
    uint32_t bx;
    memcpy(&bx, &x, 4);
    bx |= 0x80000000u;
    float nabs;
    memcpy(&nabs, &bx, 4);
    float e = sl_vexpf(nabs);
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

#pragma omp declare simd notinbranch
static inline double sl_vexp_nonpos(double x)
{
    /* exp(x) in f64 for x <= 0 (softmax's exp(z - max z)): the same reduction as sl_vexpf,
     * exp(r) by its Taylor series to r^12 (truncation below 2^-53 for |r| <= ln 2 / 2).
     * Results below 2^-1021 (x < -708) are returned as 0, ahead of the subnormal range; a
     * positive x is taken as 0 (gives 1). NaN in, NaN out. */
    int nan = x != x; /* a 64-bit integer compare on the bits would not vectorise (SSE2) */
    int tiny = x < -708.0;
    double xc = nan || tiny ? -708.0 : x > 0.0 ? 0.0 : x;
    double kf = xc * 1.4426950408889634 + 0x1.8p52;
    kf -= 0x1.8p52;
    double r = xc - kf * 6.93147180369123816490e-01; /* ln 2, hi: 32 bits, kf * hi exact */
    r = r - kf * 1.90821492927058770002e-10;
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * (r * r) + r + 1.0;
    int32_t k = (int32_t)kf; /* -1022 .. 0; a 64-bit conversion would not vectorise */
    uint64_t bs = (uint64_t)(uint32_t)(k + 1023) << 52;
    double s;
    memcpy(&s, &bs, 8);
    double y = p * s;
    return nan ? x + x : tiny ? 0.0 : y;
}

#endif
