/* test_casts.c — sl_k_cast on the cpu backend, exhaustively where the domain is small:
 *   - every one of the 65536 f16 and bf16 bit patterns widened to f32 and narrowed back
 *     returns the same pattern (NaNs stay NaN with their sign);
 *   - f32 -> f16 and f32 -> bf16 agree with an independent reference (rounding done in
 *     double with nearbyint, and gcc's _Float16 conversion where the compiler has it) on
 *     every f32 pattern with a stride of 251 (17 million values, all exponents and signs),
 *     and on every tie and its neighbours (the midpoints between adjacent 16-bit values);
 *   - the underflow, subnormal and overflow counts equal those counted from the reference;
 *   - the kernels (F16C where the CPU has it, the vectorised bf16 loops) and sl_half.h's
 *     scalar conversions give the same bits, NaNs included, both ways: every 16-bit pattern
 *     widened, every sampled f32 narrowed;
 *   - the 16-bit weight store (cast_update) gives sl_half.h's bits and counts the updates
 *     rounding lost as the scalar comparison does. */
#include <float.h>
#include <string.h>

#include "test_kernels_util.h"

#define BE SL_BACKEND_CPU

/* Round-to-nearest-even of an f32 to a float format with `mant` stored mantissa bits and
 * minimum normal exponent emin (f16: 10, -14; bf16: 7, -126), max finite `maxv`, in double.
 * Returns the rounded value as a double (infinite on overflow). */
static double ref_round(float f, int mant, int emin, double maxv)
{
    if (isnan(f) || isinf(f) || f == 0.0f) return f;
    int e;
    frexp(f, &e); /* f = m 2^e, 0.5 <= |m| < 1: the leading bit has weight 2^(e-1) */
    int lead = e - 1 < emin ? emin : e - 1;
    double q = ldexp(1.0, lead - mant); /* the spacing of representable values there */
    double r = nearbyint((double)f / q) * q; /* default rounding mode: to nearest even */
    if (fabs(r) > maxv) {
        /* overflow threshold: values at or above max + half an ulp round to infinity */
        return r > 0 ? INFINITY : -INFINITY;
    }
    return r;
}

static double ref_f16(float f) { return ref_round(f, 10, -14, 65504.0); }
static double ref_bf16(float f) { return ref_round(f, 7, -126, 0x1.fep127); }

typedef struct counts {
    unsigned long long checked, wrong, under, over, sub;
    unsigned long long soft_differs; /* sl_half.h's software rounding vs the kernel's bits */
} counts;

/* Cast a batch of f32 values with sl_k_cast and compare each result with the reference. */
static void check_batch(const float *v, size_t n, sl_dtype dt, counts *c, sl_cast_count *cc)
{
    uint16_t *h = t_xmalloc(n * 2);
    sl_k_cast(BE, n, v, SL_F32, h, dt, cc);
    for (size_t i = 0; i < n; i++) {
        float got = dt == SL_F16 ? sl_f16_to_f32(h[i]) : sl_bf16_to_f32(h[i]);
        double want = dt == SL_F16 ? ref_f16(v[i]) : ref_bf16(v[i]);
        int same = isnan(want) ? isnan(got) && !!signbit(got) == !!signbit(v[i])
                               : got == want && !!signbit(got) == !!signbit(want);
        if (!same && c->wrong < 5)
            diag("  %s(%a) = %a, expected %a", sl_dtype_name(dt), v[i], got, want);
        c->wrong += !same;
        c->checked++;
        /* the kernel may use F16C: sl_half.h's software path must give the same bits */
        uint16_t soft = dt == SL_F16 ? sl_f32_to_f16(v[i]) : sl_f32_to_bf16(v[i]);
        c->soft_differs += soft != h[i];
        if (isfinite(v[i]) && v[i] != 0.0f && want == 0.0) c->under++;
        if (isfinite(v[i]) && want != 0.0 && fabs(want) < (dt == SL_F16 ? 0x1p-14 : 0x1p-126))
            c->sub++;
        if (isfinite(v[i]) && isinf(want)) c->over++;
    }
    free(h);
}

static void check_round_trip(sl_dtype dt)
{
    uint16_t *all = t_xmalloc(65536 * 2), *back = t_xmalloc(65536 * 2);
    float *wide = t_xmalloc(65536 * 4);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    sl_cast_count cc = {0};
    sl_k_cast(BE, 65536, all, dt, wide, SL_F32, &cc);
    sl_k_cast(BE, 65536, wide, SL_F32, back, dt, &cc);
    int bad = 0, nans = 0;
    for (int i = 0; i < 65536; i++) {
        int is_nan = dt == SL_F16 ? (i & 0x7c00) == 0x7c00 && (i & 0x3ff)
                                  : (i & 0x7f80) == 0x7f80 && (i & 0x7f);
        if (is_nan) {
            nans++;
            bad += !(isnan(wide[i]) && !!signbit(wide[i]) == !!(i & 0x8000) &&
                     (back[i] & 0x8000) == (i & 0x8000) &&
                     isnan(dt == SL_F16 ? sl_f16_to_f32(back[i]) : sl_bf16_to_f32(back[i])));
        } else {
            bad += back[i] != i;
        }
    }
    ok(bad == 0, "%s: all 65536 patterns survive f32 and back (%d NaN patterns stay NaN)",
       sl_dtype_name(dt), nans);
    ok(cc.underflow == 0 && cc.overflow == 0, "%s: the round trip counts no loss",
       sl_dtype_name(dt));
    /* widening is exact: compare with the value computed from the fields */
    int wbad = 0;
    for (int i = 0; i < 65536; i++) {
        int s = i >> 15, e, m;
        double v;
        if (dt == SL_F16) {
            e = (i >> 10) & 31, m = i & 0x3ff;
            if (e == 31) continue;
            v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        } else {
            e = (i >> 7) & 255, m = i & 0x7f;
            if (e == 255) continue;
            v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
        }
        wbad += wide[i] != (s ? -v : v);
    }
    ok(wbad == 0, "%s: every finite pattern widens to its exact value", sl_dtype_name(dt));
    int sbad = 0;
    for (int i = 0; i < 65536; i++) {
        float soft = dt == SL_F16 ? sl_f16_to_f32((uint16_t)i) : sl_bf16_to_f32((uint16_t)i);
        sbad += memcmp(&soft, &wide[i], 4) != 0;
    }
    ok(sbad == 0, "%s: every pattern, NaNs included, widens to sl_half.h's bits (%d differ)",
       sl_dtype_name(dt), sbad);
    free(all), free(back), free(wide);
}

static void check_narrowing(sl_dtype dt)
{
    counts c = {0, 0, 0, 0, 0, 0};
    sl_cast_count cc = {0};
    enum { CHUNK = 1 << 20 };
    float *v = t_xmalloc(CHUNK * 4);
    size_t k = 0;
    /* a dense sample of all f32 patterns: stride 251 is odd (a prime), so every exponent,
     * sign and low-bit residue is visited */
    for (uint64_t u = 0; u <= 0xffffffffull; u += 251) {
        v[k++] = sl_bits_f32((uint32_t)u);
        if (k == CHUNK) check_batch(v, k, dt, &c, &cc), k = 0;
    }
    /* every midpoint between adjacent 16-bit values (the ties) and its f32 neighbours */
    for (uint32_t i = 0; i < 65536; i++) {
        float lo = dt == SL_F16 ? sl_f16_to_f32((uint16_t)i) : sl_bf16_to_f32((uint16_t)i);
        if (!isfinite(lo)) continue;
        /* the tie is lo + half a 16-bit ulp (away from zero). For f16 normals and all bf16
         * values that is half the 16-bit step in the f32 bits; f16 subnormals are spaced
         * 2^-24 and are normal f32 values, so the half step is added as a number. */
        uint32_t tie;
        if (dt == SL_F16 && (i & 0x7c00) == 0)
            tie = sl_f32_bits(lo + ((i & 0x8000) ? -0x1p-25f : 0x1p-25f));
        else
            tie = sl_f32_bits(lo) + (dt == SL_F16 ? 1u << 12 : 1u << 15);
        for (int d = -2; d <= 2; d++) {
            v[k++] = sl_bits_f32(tie + (uint32_t)d);
            if (k == CHUNK) check_batch(v, k, dt, &c, &cc), k = 0;
        }
    }
    if (k) check_batch(v, k, dt, &c, &cc);
    ok(c.wrong == 0, "f32 -> %s agrees with the double-precision reference on %llu values (%llu wrong)",
       sl_dtype_name(dt), c.checked, c.wrong);
    ok(cc.underflow == c.under && cc.overflow == c.over,
       "f32 -> %s counts %llu underflows and %llu overflows, as the reference (%llu, %llu)",
       sl_dtype_name(dt), cc.underflow, cc.overflow, c.under, c.over);
    is_int(cc.subnormal, c.sub, "f32 -> %s counts the values that became subnormal",
           sl_dtype_name(dt));
    ok(c.under > 0 && c.over > 0 && c.sub > 0,
       "the sample contains underflows, subnormals and overflows");
    ok(c.soft_differs == 0, "f32 -> %s: sl_half.h's software rounding gives the same bits (%llu differ)",
       sl_dtype_name(dt), c.soft_differs);
    free(v);
}

/* cast_update on 2^20 + 3 weights (a remainder after whole blocks): old 16-bit values from a
 * stride over all f32 patterns, each new weight the old value nudged by a few f32 ulps (often
 * lost to rounding), or a sampled pattern outright (NaN, inf, subnormal among them). */
static void check_cast_update(sl_dtype dt)
{
    enum { N = (1 << 20) + 3 };
    float *w = t_xmalloc(N * 4);
    uint16_t *h = t_xmalloc(N * 2), *want = t_xmalloc(N * 2);
    size_t lost = 0;
    for (size_t i = 0; i < N; i++) {
        float f = sl_bits_f32((uint32_t)(i * 4093u));
        h[i] = dt == SL_F16 ? sl_f32_to_f16(f) : sl_f32_to_bf16(f);
        float old = dt == SL_F16 ? sl_f16_to_f32(h[i]) : sl_bf16_to_f32(h[i]);
        w[i] = i % 3 ? sl_bits_f32(sl_f32_bits(old) + (uint32_t)(i % 7) * 1024u) : f;
        want[i] = dt == SL_F16 ? sl_f32_to_f16(w[i]) : sl_f32_to_bf16(w[i]);
        lost += w[i] != old && want[i] == h[i];
    }
    float *wd = t_up(w, N * 4);
    uint16_t *hd = t_up(h, N * 2);
    size_t got = sl_k_cast_update(BE, dt, N, wd, hd);
    t_down(h, hd, N * 2);
    ok(memcmp(h, want, N * 2) == 0 && got == lost && lost > 0,
       "%s cast_update: sl_half.h's bits, %zu updates lost to rounding counted (want %zu)",
       sl_dtype_name(dt), got, lost);
    t_free(wd), t_free(hd);
    free(w), free(h), free(want);
}

#ifdef __FLT16_MAX__
/* gcc's own conversion (libgcc's or F16C's), a second independent reference for f16 */
static void check_against_float16(void)
{
    enum { N = 1 << 20 };
    float *v = t_xmalloc(N * 4);
    uint16_t *h = t_xmalloc(N * 2);
    unsigned long long wrong = 0, checked = 0;
    for (uint64_t base = 0; base <= 0xffffffffull; base += (uint64_t)N * 4099) {
        size_t n = 0;
        for (uint64_t u = base; n < N && u <= 0xffffffffull; u += 4099) v[n++] = sl_bits_f32((uint32_t)u);
        sl_k_cast(BE, n, v, SL_F32, h, SL_F16, NULL);
        for (size_t i = 0; i < n; i++) {
            _Float16 g = (_Float16)v[i];
            uint16_t gb;
            memcpy(&gb, &g, 2);
            int same = isnan(v[i]) ? ((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff)) : h[i] == gb;
            wrong += !same;
            checked++;
        }
    }
    ok(wrong == 0, "f32 -> f16 agrees with gcc's _Float16 on %llu values", checked);
    free(v), free(h);
}
#endif

int main(void)
{
    T_BE = BE;
    /* the reference itself, on values whose rounding is known */
    ok(ref_f16(65519.0f) == 65504.0 && isinf(ref_f16(65520.0f)) && ref_f16(0x1p-25f) == 0.0 &&
           ref_f16(0x1.000002p-25f) == 0x1p-24 && ref_bf16(1.00390625f) == 1.0 &&
           ref_bf16(1.01171875f) == 1.015625,
       "the reference rounds known cases (overflow threshold, subnormal tie, ties to even)");
    check_round_trip(SL_F16);
    check_round_trip(SL_BF16);
    check_narrowing(SL_F16);
    check_narrowing(SL_BF16);
    check_cast_update(SL_F16);
    check_cast_update(SL_BF16);
#ifdef __FLT16_MAX__
    check_against_float16();
#else
    skip(1, "this compiler has no _Float16");
#endif
    done_testing();
    return exit_status();
}
