/* range.c — the range table: every figure found by walking the type's positive bit patterns in
 * order (each pattern decoded to its value), not copied from a header. Positive finite values
 * of a binary floating-point type increase with their bit pattern, so:
 *   min subnormal  the value of pattern 1;
 *   min normal     below it values are spaced evenly by the min subnormal; the spacing first
 *                  doubles at twice the min normal, found by walking up from pattern 1;
 *   max            the last finite pattern before infinity (walking down past the NaNs);
 *   eps, gap_1000  the value of the pattern after 1 (1000) minus 1 (1000).
 * The field widths come from the patterns too: the exponent field is where infinity's bits
 * are set. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "range.h"
#include "sl_half.h"

/* The value of bit pattern u of dt, and the pattern of a value (exact for the values asked). */
static double decode(sl_dtype dt, uint32_t u)
{
    if (dt == SL_F16) return sl_f16_to_f32((sl_f16)u);
    if (dt == SL_BF16) return sl_bf16_to_f32((sl_bf16)u);
    return sl_bits_f32(u);
}

static uint32_t encode(sl_dtype dt, float v)
{
    if (dt == SL_F16) return sl_f32_to_f16(v);
    if (dt == SL_BF16) return sl_f32_to_bf16(v);
    return sl_f32_bits(v);
}

type_range range_measure(sl_dtype dt)
{
    type_range r = {.dt = dt, .bits = dt == SL_F32 ? 32 : 16};
    const uint32_t inf = encode(dt, INFINITY), top = (uint32_t)((1ull << (r.bits - 1)) - 1);
    r.exponent_bits = __builtin_popcount(inf);
    r.mantissa_bits = r.bits - 1 - r.exponent_bits;
    r.min_subnormal = decode(dt, 1);
    uint32_t u = 1;
    while (decode(dt, u + 1) - decode(dt, u) == r.min_subnormal) u++;
    r.min_normal = decode(dt, u) / 2; /* u: the first value whose gap to the next has doubled */
    u = top;
    while (!isfinite(decode(dt, u))) u--;
    r.max = decode(dt, u);
    r.eps = decode(dt, encode(dt, 1.0f) + 1) - 1.0;
    r.gap_1000 = decode(dt, encode(dt, 1000.0f) + 1) - 1000.0;
    return r;
}

type_range range_expected(sl_dtype dt)
{
    if (dt == SL_F16) /* binary16: 5 exponent bits (bias 15), 10 mantissa bits */
        return (type_range){SL_F16, 16, 5, 10, 65504.0, 0x1p-14, 0x1p-24, 0x1p-10, 0.5};
    if (dt == SL_BF16) /* f32's 8 exponent bits, 7 mantissa bits: max (2 - 2^-7) 2^127 */
        return (type_range){SL_BF16, 16, 8, 7, 0x1.fep127, 0x1p-126, 0x1p-133, 0x1p-7, 4.0};
    /* binary32: 8 exponent bits (bias 127), 23 mantissa bits */
    return (type_range){SL_F32, 32, 8, 23, FLT_MAX, FLT_MIN, 0x1p-149, FLT_EPSILON, 0x1p-14};
}
