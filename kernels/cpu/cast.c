/* cpu/cast.c — conversions between f32, f16 and bf16 (round to nearest even, sl_half.h),
 * counting the values that mixed precision loses: nonzero finite inputs flushed to zero
 * (underflow: what loss scaling exists to prevent), those that became subnormal (kept, with
 * fewer bits), and finite inputs that became infinite (overflow: what dynamic loss scaling
 * detects and backs off from). Also the store of a weight update into a 16-bit weight, which
 * counts the updates that rounding threw away. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "sl_half.h"

#define CHUNK 2048 /* elements per block: the f32 staging buffer stays in L1 */

/* f32 values of src[lo, lo + m): the array itself, or widened into buf */
static const float *as_f32(const void *src, sl_dtype st, size_t lo, size_t m, float *buf)
{
    if (st == SL_F32) return (const float *)src + lo;
    const uint16_t *h = (const uint16_t *)src + lo;
    if (st == SL_F16) sl_cpu_f16_to_f32_n(h, buf, m);
    else
        for (size_t i = 0; i < m; i++) buf[i] = sl_bf16_to_f32(h[i]);
    return buf;
}

void sl_cpu_cast(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
                 sl_cast_count *cnt)
{
    if (st == dt) { /* a copy loses nothing */
        memmove(dst, src, n * sl_dtype_size(st));
        if (cnt)
            for (size_t i = 0; i < n; i++) cnt->zero += sl_elem_get(src, i, st) == 0.0;
        return;
    }
    unsigned long long under = 0, over = 0, sub = 0, zero = 0;
    size_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static) reduction(+ : under, over, sub, zero)
    for (size_t c = 0; c < nchunks; c++) {
        float buf[CHUNK];
        size_t lo = c * CHUNK, m = n - lo < CHUNK ? n - lo : CHUNK;
        const float *v = as_f32(src, st, lo, m, buf);
        for (size_t i = 0; i < m; i++) zero += v[i] == 0.0f;
        if (dt == SL_F32) { /* widening is exact: nothing else to count */
            memcpy((float *)dst + lo, v, m * sizeof(float));
            continue;
        }
        uint16_t *h = (uint16_t *)dst + lo;
        if (dt == SL_F16) sl_cpu_f32_to_f16_n(v, h, m);
        else
            for (size_t i = 0; i < m; i++) h[i] = sl_f32_to_bf16(v[i]);
        /* what was lost, from the bits: +-0 is 0x0000/0x8000, +-inf 0x7c00 (f16), 0x7f80
         * (bf16); a subnormal has exponent bits 0 and a mantissa (below 0x0400 / 0x0080) */
        const uint16_t inf = dt == SL_F16 ? 0x7c00 : 0x7f80, min_normal = dt == SL_F16 ? 0x0400 : 0x0080;
        for (size_t i = 0; i < m; i++) {
            uint16_t a = h[i] & 0x7fff;
            int finite_nonzero = isfinite(v[i]) && v[i] != 0.0f;
            under += finite_nonzero && a == 0;
            sub += finite_nonzero && a != 0 && a < min_normal;
            over += isfinite(v[i]) && a == inf;
        }
    }
    if (cnt) {
        cnt->underflow += under;
        cnt->overflow += over;
        cnt->subnormal += sub;
        cnt->zero += zero;
    }
}

size_t sl_cpu_cast_update(sl_dtype dt, size_t n, const float *w, void *w16)
{
    if (dt == SL_F32) { /* f32 holds every f32 update */
        memmove(w16, w, n * sizeof(float));
        return 0;
    }
    uint16_t *h = w16;
    size_t lost = 0;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static) reduction(+ : lost)
    for (size_t i = 0; i < n; i++) {
        float old = dt == SL_F16 ? sl_f16_to_f32(h[i]) : sl_bf16_to_f32(h[i]);
        uint16_t r = dt == SL_F16 ? sl_f32_to_f16(w[i]) : sl_f32_to_bf16(w[i]);
        lost += w[i] != old && r == h[i];
        h[i] = r;
    }
    return lost;
}
