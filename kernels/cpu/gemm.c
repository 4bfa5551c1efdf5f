/* cpu/gemm.c — GEMM on the host through OpenBLAS: f32 with cblas_sgemm; bf16 with
 * cblas_sbgemm where the linked OpenBLAS has it; otherwise (and always for f16, which
 * OpenBLAS has no GEMM for) the 16-bit operands are widened to f32 once and cblas_sgemm
 * runs on the copies. A 16-bit C is computed in an f32 copy and rounded once at the end. */
#include <cblas.h>
#include <stdlib.h>

#include "cpu/cpu.h"
#include "sl_error.h"
#include "sl_half.h"

static float *xmalloc_f32(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) SL_FATAL("out of memory: %zu bytes of GEMM workspace", n * sizeof *p);
    return p;
}

/* Widens a rows x cols matrix with leading dimension ld into a packed f32 one. */
static float *widen(const uint16_t *x, sl_dtype t, int rows, int cols, int ld)
{
    float *y = xmalloc_f32((size_t)rows * cols);
#pragma omp parallel for if (sl_cpu_par((size_t)rows * cols)) schedule(static)
    for (int i = 0; i < rows; i++) {
        if (t == SL_F16) {
            sl_cpu_f16_to_f32_n(x + (size_t)i * ld, y + (size_t)i * cols, cols);
            continue;
        }
        for (int j = 0; j < cols; j++) y[(size_t)i * cols + j] = sl_bf16_to_f32(x[(size_t)i * ld + j]);
    }
    return y;
}

static void narrow(const float *y, uint16_t *x, sl_dtype t, int rows, int cols, int ld)
{
#pragma omp parallel for if (sl_cpu_par((size_t)rows * cols)) schedule(static)
    for (int i = 0; i < rows; i++) {
        if (t == SL_F16) {
            sl_cpu_f32_to_f16_n(y + (size_t)i * cols, x + (size_t)i * ld, cols);
            continue;
        }
        for (int j = 0; j < cols; j++) x[(size_t)i * ld + j] = sl_f32_to_bf16(y[(size_t)i * cols + j]);
    }
}

void sl_cpu_gemm(int transa, int transb, int m, int n, int k, float alpha, const void *a,
                 int lda, const void *b, int ldb, float beta, void *c, int ldc, sl_dtype ab,
                 sl_dtype cdt)
{
    enum CBLAS_TRANSPOSE ta = transa ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = transb ? CblasTrans : CblasNoTrans;
    /* A 16-bit C goes through a packed f32 copy (read only if beta != 0). */
    float *cf = cdt == SL_F32 ? (float *)c : NULL;
    int ldcf = ldc;
    if (!cf) {
        ldcf = n;
        cf = beta != 0.0f ? widen(c, cdt, m, n, ldc) : xmalloc_f32((size_t)m * n);
    }
    if (k == 0) { /* BLAS would leave C alone for beta == 1; spell the k = 0 case out */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float *p = &cf[(size_t)i * ldcf + j];
                *p = beta == 0.0f ? 0.0f : beta * *p;
            }
    } else if (ab == SL_F32) {
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cf, ldcf);
    } else if (ab != SL_BF16 ||
               !sl_cpu_sbgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, cf, ldcf)) {
        int ar = transa ? k : m, ac = transa ? m : k, br = transb ? n : k, bc = transb ? k : n;
        float *af = widen(a, ab, ar, ac, lda), *bf = widen(b, ab, br, bc, ldb);
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, af, ac, bf, bc, beta, cf, ldcf);
        free(af);
        free(bf);
    }
    if (cdt != SL_F32) {
        narrow(cf, c, cdt, m, n, ldc);
        free(cf);
    }
}

const char *sl_cpu_gemm_impl(sl_dtype ab)
{
    if (ab == SL_F32) return "cblas_sgemm (OpenBLAS)";
    if (ab == SL_BF16 && sl_cpu_have_sbgemm()) return "cblas_sbgemm (OpenBLAS, f32 accumulate)";
    return ab == SL_F16 ? "f16 widened to f32 (F16C where present), cblas_sgemm (OpenBLAS has no f16 GEMM)"
                        : "bf16 widened to f32, cblas_sgemm (no cblas_sbgemm in this OpenBLAS)";
}
