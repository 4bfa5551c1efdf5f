/* cpu/gemm_sbgemm.c — OpenBLAS's bf16 GEMM, used only where the linked library provides it.
 *
 * cblas_sbgemm appeared in OpenBLAS 0.3.10 and is absent from other CBLAS libraries, so it is
 * declared here as a weak symbol: where it is missing its address is NULL and the caller
 * falls back to widening. This file does not include cblas.h, whose declaration (non-weak,
 * with its own bfloat16 type) would conflict; the CBLAS enums are passed by their values. */
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 }; /* CBLAS_ORDER, CBLAS_TRANSPOSE */

extern void cblas_sbgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                         const uint16_t *a, int lda, const uint16_t *b, int ldb, float beta,
                         float *c, int ldc) __attribute__((weak));

int sl_cpu_have_sbgemm(void) { return cblas_sbgemm != NULL; }

int sl_cpu_sbgemm(int transa, int transb, int m, int n, int k, float alpha, const uint16_t *a,
                  int lda, const uint16_t *b, int ldb, float beta, float *c, int ldc)
{
    if (!cblas_sbgemm) return 0;
    cblas_sbgemm(ROW_MAJOR, transa ? TRANS : NO_TRANS, transb ? TRANS : NO_TRANS, m, n, k, alpha,
                 a, lda, b, ldb, beta, c, ldc);
    return 1;
}
