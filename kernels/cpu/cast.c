/* cpu/cast.c — conversions between f32, f16 and bf16 (round to nearest even, sl_half.h),
 * counting the values that mixed precision loses: nonzero finite inputs flushed to zero
 * (underflow: what loss scaling exists to prevent) and finite inputs that became infinite
 * (overflow: what dynamic loss scaling detects and backs off from). */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "sl_error.h"
#include "sl_half.h"

static float load(const void *p, sl_dtype t, size_t i)
{
    switch (t) {
    case SL_F16: return sl_f16_to_f32(((const uint16_t *)p)[i]);
    case SL_BF16: return sl_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

static float store(void *p, sl_dtype t, size_t i, float v)
{
    switch (t) {
    case SL_F16: {
        uint16_t h = sl_f32_to_f16(v);
        ((uint16_t *)p)[i] = h;
        return sl_f16_to_f32(h);
    }
    case SL_BF16: {
        uint16_t h = sl_f32_to_bf16(v);
        ((uint16_t *)p)[i] = h;
        return sl_bf16_to_f32(h);
    }
    default: ((float *)p)[i] = v; return v;
    }
}

void sl_cpu_cast(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
                 sl_cast_count *cnt)
{
    if (st == dt) { /* a copy loses nothing */
        memmove(dst, src, n * sl_dtype_size(st));
        return;
    }
    unsigned long long under = 0, over = 0;
#pragma omp parallel for if (n > SL_CPU_PAR_MIN) schedule(static) reduction(+ : under, over)
    for (size_t i = 0; i < n; i++) {
        float v = load(src, st, i);
        float r = store(dst, dt, i, v);
        under += r == 0.0f && v != 0.0f && isfinite(v);
        over += isinf(r) && isfinite(v);
    }
    if (cnt) {
        cnt->underflow += under;
        cnt->overflow += over;
    }
}
