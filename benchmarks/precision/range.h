/* range.h — the range and precision of f32, f16 and bf16, measured from the types themselves
 * (by walking their bit patterns through the suite's conversions, sl_half.h) and checked
 * against the constants of the standards. */
#ifndef PRECISION_RANGE_H
#define PRECISION_RANGE_H

#include "sl_types.h"

typedef struct type_range {
    sl_dtype dt;
    int bits, exponent_bits, mantissa_bits;
    double max;            /* largest finite value */
    double min_normal;     /* smallest positive normal */
    double min_subnormal;  /* smallest positive value */
    double eps;            /* machine epsilon: the gap between 1 and the next value */
    double gap_1000;       /* the gap between 1000 and the next value */
} type_range;

/* Measured from the bit patterns of dt (f32, f16 or bf16). */
type_range range_measure(sl_dtype dt);
/* The standard's values (IEEE 754 binary32 / binary16; bfloat16 = binary32's top 16 bits). */
type_range range_expected(sl_dtype dt);

#endif
