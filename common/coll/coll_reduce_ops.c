/* coll_reduce_ops.c — the element-wise reduction kernels of the suite's own collectives on
 * host buffers: dst = a op b for f32, f64, f16 and bf16, and the avg epilogue.
 *
 * dst may alias a or b (in-place steps), so the pointers are not restrict; each loop is a
 * plain element-wise loop that the compiler vectorises with a runtime overlap check. 16-bit
 * values are widened to f32, combined and rounded once, as on the device and in NCCL. */
#include <math.h>

#include "coll_local.h"
#include "sl_half.h"
#include "sl_sim.h"

#define SL_LOOP(T, EXPR)                                                    \
    do {                                                                    \
        T *d_ = dst;                                                        \
        const T *a_ = a, *b_ = b;                                           \
        for (size_t i = 0; i < n; i++) {                                    \
            T x = a_[i], y = b_[i];                                         \
            d_[i] = (EXPR);                                                 \
        }                                                                   \
    } while (0)

/* Max and min by comparison, so that the result is always one of the operands (exact). */
#define SL_FLOAT_OPS(T)                                                     \
    switch (op) {                                                           \
    case SL_OP_MAX: SL_LOOP(T, x > y ? x : y); break;                       \
    case SL_OP_MIN: SL_LOOP(T, x < y ? x : y); break;                       \
    default: SL_LOOP(T, x + y); break; /* sum, and avg before its division */ \
    }

#define SL_HALF_OPS(TO_F32, FROM_F32)                                       \
    switch (op) {                                                           \
    case SL_OP_MAX: SL_LOOP(uint16_t, TO_F32(x) > TO_F32(y) ? x : y); break; \
    case SL_OP_MIN: SL_LOOP(uint16_t, TO_F32(x) < TO_F32(y) ? x : y); break; \
    default: SL_LOOP(uint16_t, FROM_F32(TO_F32(x) + TO_F32(y))); break;     \
    }

void sl_reduce_host(void *dst, const void *a, const void *b, size_t n, sl_dtype t, sl_redop op)
{
    /* Under the simulator a folded buffer holds no real data (sl_sim.h): nothing to add up. */
    if (!sl_sim_real(dst, n * sl_dtype_size(t))) return;
    /* Under the simulator with sampling, the sum is timed a few times per (length, dtype, op)
     * and then skipped where its result is not checked (sl_sim.h); a plain block otherwise. */
    SL_SIM_SAMPLED("the collectives' local reduction (sl_reduce_host)", (n * SL_NDTYPES + t) * SL_NREDOPS + op) {
        switch (t) {
        case SL_F32: SL_FLOAT_OPS(float); break;
        case SL_F64: SL_FLOAT_OPS(double); break;
        case SL_F16: SL_HALF_OPS(sl_f16_to_f32, sl_f32_to_f16); break;
        case SL_BF16: SL_HALF_OPS(sl_bf16_to_f32, sl_f32_to_bf16); break;
        default: SL_FATAL("sl_reduce_host: unknown dtype %d", (int)t);
        }
    }
}

void sl_divide_host(void *buf, size_t n, sl_dtype t, int divisor)
{
    switch (t) {
    case SL_F32: { float *p = buf; for (size_t i = 0; i < n; i++) p[i] /= (float)divisor; break; }
    case SL_F64: { double *p = buf; for (size_t i = 0; i < n; i++) p[i] /= divisor; break; }
    case SL_F16: {
        sl_f16 *p = buf;
        for (size_t i = 0; i < n; i++) p[i] = sl_f32_to_f16(sl_f16_to_f32(p[i]) / (float)divisor);
        break;
    }
    case SL_BF16: {
        sl_bf16 *p = buf;
        for (size_t i = 0; i < n; i++)
            p[i] = sl_f32_to_bf16(sl_bf16_to_f32(p[i]) / (float)divisor);
        break;
    }
    default: SL_FATAL("sl_divide_host: unknown dtype %d", (int)t);
    }
}
