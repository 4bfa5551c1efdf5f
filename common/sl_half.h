/* sl_half.h — IEEE binary16 (f16) and bfloat16 (bf16) conversions, round-to-nearest-even.
 *
 * Used wherever 16-bit values are reduced or computed on the host: the value is widened to
 * f32, combined in f32, and narrowed once. Header-only so that hot loops inline it.
 * Narrowing handles subnormals, overflow to infinity and NaN (kept quiet, sign preserved).
 */
#ifndef SL_HALF_H
#define SL_HALF_H

#include <stdint.h>
#include <string.h>

#include "sl_types.h"

typedef uint16_t sl_f16;  /* bit pattern of an IEEE binary16 value */
typedef uint16_t sl_bf16; /* bit pattern of a bfloat16 value */

static inline uint32_t sl_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float sl_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float sl_f16_to_f32(sl_f16 h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return sl_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return sl_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline sl_f16 sl_f32_to_f16(float f)
{
    uint32_t u = sl_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf or NaN (NaN stays NaN: force a mantissa bit) */
        return (sl_f16)(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow to infinity */
        return (sl_f16)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below the smallest normal f16 (2^-14): subnormal or zero */
        if (abs < 0x33000000u) return (sl_f16)sign; /* < 2^-25: rounds to zero */
        uint32_t e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;  /* so that the result is m >> shift in units of 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (sl_f16)(sign | r);
    }
    uint32_t r = (abs - 0x38000000u) >> 13; /* rebias exponent 127 -> 15 */
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++; /* may carry into the exponent */
    return (sl_f16)(sign | r);
}

static inline float sl_bf16_to_f32(sl_bf16 b) { return sl_bits_f32((uint32_t)b << 16); }

static inline sl_bf16 sl_f32_to_bf16(float f)
{
    uint32_t u = sl_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (sl_bf16)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries to inf */
    return (sl_bf16)(u >> 16);
}

/* v rounded to what dtype t holds (f16, bf16; f32 and f64 hold it as it is): the one
 * round-to-dtype of the suite, for references that must see operands as a kernel saw them. */
static inline float sl_round_to(sl_dtype t, float v)
{
    if (t == SL_F16) return sl_f16_to_f32(sl_f32_to_f16(v));
    if (t == SL_BF16) return sl_bf16_to_f32(sl_f32_to_bf16(v));
    return v;
}

#endif
