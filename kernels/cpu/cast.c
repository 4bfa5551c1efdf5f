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
    else sl_cpu_bf16_to_f32_n(h, buf, m);
    return buf;
}

/* f32 values to a 16-bit type, n <= CHUNK */
static void narrow(const float *v, uint16_t *h, sl_dtype dt, size_t n)
{
    if (dt == SL_F16) sl_cpu_f32_to_f16_n(v, h, n);
    else sl_cpu_f32_to_bf16_n(v, h, n);
}

/* What the narrowing of v to h lost, from the bits (branch-free, so that it vectorises): +-0 is
 * 0x0000/0x8000, +-inf 0x7c00 (f16), 0x7f80 (bf16); a subnormal has exponent bits 0 and a
 * mantissa (below 0x0400 / 0x0080). c: zeros in v, underflows, subnormals, overflows. */
SL_CPU_CLONES static void count_lost(const float *v, const uint16_t *h, size_t m, uint32_t inf,
                                     uint32_t min_normal, unsigned c[4])
{
    unsigned zero = 0, under = 0, sub = 0, over = 0;
#pragma omp simd reduction(+ : zero, under, sub, over)
    for (size_t i = 0; i < m; i++) {
        uint32_t b = sl_f32_bits(v[i]) & 0x7fffffffu, a = h[i] & 0x7fffu;
        unsigned finite = b < 0x7f800000u, finite_nonzero = b - 1u < 0x7f7fffffu;
        zero += b == 0;
        under += finite_nonzero & (a == 0);
        sub += finite_nonzero & (a != 0) & (a < min_normal);
        over += finite & (a == inf);
    }
    c[0] = zero, c[1] = under, c[2] = sub, c[3] = over;
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
        if (dt == SL_F32) { /* widening is exact: nothing to count but zeros */
            memcpy((float *)dst + lo, v, m * sizeof(float));
            for (size_t i = 0; i < m; i++) zero += v[i] == 0.0f;
            continue;
        }
        uint16_t *h = (uint16_t *)dst + lo;
        narrow(v, h, dt, m);
        unsigned c4[4];
        count_lost(v, h, m, dt == SL_F16 ? 0x7c00 : 0x7f80, dt == SL_F16 ? 0x0400 : 0x0080, c4);
        zero += c4[0], under += c4[1], sub += c4[2], over += c4[3];
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
    size_t lost = 0, nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static) reduction(+ : lost)
    for (size_t c = 0; c < nchunks; c++) {
        float old[CHUNK];
        uint16_t r[CHUNK];
        size_t lo = c * CHUNK, m = n - lo < CHUNK ? n - lo : CHUNK;
        uint16_t *h = (uint16_t *)w16 + lo;
        const float *wc = w + lo;
        as_f32(w16, dt, lo, m, old);
        narrow(wc, r, dt, m);
        size_t l = 0;
#pragma omp simd reduction(+ : l)
        for (size_t i = 0; i < m; i++) l += (wc[i] != old[i]) & (r[i] == h[i]);
        lost += l;
        memcpy(h, r, m * sizeof *r);
    }
    return lost;
}
