/* gemm_rate.h — GEMM throughput of precision.c's table: f32 against the 16-bit GEMMs (f32
 * accumulation) on the backend, each result checked against the double-precision reference. */
#ifndef PRECISION_GEMM_RATE_H
#define PRECISION_GEMM_RATE_H

#include "scalelab.h"

/* Times C[n,n] (f32) = A[n,n] B[n,n] (dtype dt) on be and emits one row per dtype (f32 first,
 * then f16 and bf16), with GFLOP/s, the ratio to f32 and how the backend computes it. */
void gemm_rate_rows(sl_ctx *ctx, sl_backend be, int n);

#endif
