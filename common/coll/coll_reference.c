/* coll_reference.c — reference values for checking collectives (coll_reference.h). */
#include <stdint.h>

#include "coll_reference.h"
#include "sl_half.h"

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}

int sl_coll_ref_value(int p, size_t i, unsigned seed)
{
    return (int)((mix((uint32_t)i ^ (seed * 0x9e3779b9U)) + (uint32_t)p * 5u) % 17u) - 8;
}

double sl_coll_ref_reduce(int nranks, size_t i, unsigned seed, sl_dtype t, sl_redop op)
{
    long acc = sl_coll_ref_value(0, i, seed);
    for (int p = 1; p < nranks; p++) {
        long v = sl_coll_ref_value(p, i, seed);
        acc = op == SL_OP_MAX ? (v > acc ? v : acc) : op == SL_OP_MIN ? (v < acc ? v : acc) : acc + v;
    }
    if (op != SL_OP_AVG) return (double)acc;
    if (t == SL_F64) return (double)acc / nranks;
    float q = (float)acc / (float)nranks;
    return t == SL_F32 ? q : t == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(q)) : sl_bf16_to_f32(sl_f32_to_bf16(q));
}
