/* coll_reference.c — reference values for checking collectives (coll_reference.h). */
#include <stdint.h>

#include "coll_reference.h"
#include "sl_half.h"

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}

/* The element's hash, and rank p's value from it. */
static uint32_t elem_hash(size_t i, unsigned seed) { return mix((uint32_t)i ^ (seed * 0x9e3779b9U)); }
static int value_of(uint32_t h, int p) { return (int)((h + (uint32_t)p * 5u) % 17u) - 8; }

int sl_coll_ref_value(int p, size_t i, unsigned seed) { return value_of(elem_hash(i, seed), p); }

/* The reduction over ranks first..nranks-1, term by term. */
static long reduce_terms(long acc, int first, int nranks, uint32_t h, sl_redop op)
{
    for (int p = first; p < nranks; p++) {
        long v = value_of(h, p);
        acc = op == SL_OP_MAX ? (v > acc ? v : acc) : op == SL_OP_MIN ? (v < acc ? v : acc) : acc + v;
    }
    return acc;
}

/* The reduction for an element whose hash is r mod 17, over nranks ranks, when no h + 5p wraps
 * around 2^32: rank p's value is then (r + 5p) mod 17 - 8, so the result depends on r alone.
 * The 17 results are worked out once per (nranks, op). */
static long by_residue(int nranks, uint32_t r, sl_redop op)
{
    static int have, table_n;
    static sl_redop table_op;
    static long table[17];
    if (!have || table_n != nranks || table_op != op) {
        for (uint32_t q = 0; q < 17; q++) table[q] = reduce_terms(value_of(q, 0), 1, nranks, q, op);
        have = 1;
        table_n = nranks;
        table_op = op;
    }
    return table[r];
}

double sl_coll_ref_reduce(int nranks, size_t i, unsigned seed, sl_dtype t, sl_redop op)
{
    /* Every rank checks every element, so a reference of nranks terms per element would cost
     * nranks^2 x n over all ranks (under the simulator, on one core: at 64 ranks it was nearly
     * all of a simulation's wall time): by residue, one look-up per element, except where
     * h + 5p wraps around 2^32 (which shifts the residue): term by term there. */
    uint32_t h = elem_hash(i, seed);
    long acc = h <= UINT32_MAX - 5u * (uint32_t)(nranks - 1)
                   ? by_residue(nranks, h % 17u, op)
                   : reduce_terms(value_of(h, 0), 1, nranks, h, op);
    if (op != SL_OP_AVG) return (double)acc;
    if (t == SL_F64) return (double)acc / nranks;
    float q = (float)acc / (float)nranks;
    return t == SL_F32 ? q : t == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(q)) : sl_bf16_to_f32(sl_f32_to_bf16(q));
}
