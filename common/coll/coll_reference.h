/* coll_reference.h — the reference a collective's result is checked against, shared by the
 * collective benchmark (benchmarks/allreduce.c) and the unit test of the communication layer
 * (t/unit/test_coll.c), so that both check the same thing the same way.
 *
 * Data are small integers in [-8, 8] that differ per rank (p * 5 mod 17: distinct across up to
 * 17 ranks at every element; beyond that values repeat but stay exact), per element (a hash of
 * the index) and per seed, so sums over up to 32 ranks stay within 256 and are exact in every
 * dtype (f16 and bf16 included), whatever the order of additions. */
#ifndef SL_COLL_REFERENCE_H
#define SL_COLL_REFERENCE_H

#include <stddef.h>

#include "sl_coll.h"

/* Rank p's value at element i of the data set `seed`. */
int sl_coll_ref_value(int p, size_t i, unsigned seed);

/* The reduction `op` of element i over ranks 0..nranks-1, as dtype t holds it: exact for sum,
 * max and min; for avg the exact sum divided once by nranks in the type's arithmetic (f32 for
 * the 16-bit types, rounded once to the type). */
double sl_coll_ref_reduce(int nranks, size_t i, unsigned seed, sl_dtype t, sl_redop op);

#endif
