/* cuda/gemm.cu — GEMM through cuBLAS: cublasSgemm for f32 (plain f32, no TF32), cublasGemmEx
 * for f16/bf16 operands with f32 accumulation (CUBLAS_COMPUTE_32F).
 *
 * cuBLAS is column-major. A row-major C[m,n] = op(A) op(B) is, read column-major, the matrix
 * C^T[n,m] = op(B)^T op(A)^T, so the call passes B before A and n before m, with the same
 * leading dimensions and transpose flags. */
#include "cuda/cuda_util.cuh"

static cudaDataType_t cuda_type(sl_dtype t)
{
    return t == SL_F16 ? CUDA_R_16F : t == SL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

void slk_gemm(int transa, int transb, int m, int n, int k, float alpha, const void *a, int lda,
              const void *b, int ldb, float beta, void *c, int ldc, sl_dtype ab, sl_dtype cdt)
{
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (ab == SL_F32 && cdt == SL_F32) {
        SL_CHECK_CUBLAS(cublasSgemm(slk_cublas(), tb, ta, n, m, k, &alpha, (const float *)b, ldb,
                               (const float *)a, lda, &beta, (float *)c, ldc));
        return;
    }
    SL_CHECK_CUBLAS(cublasGemmEx(slk_cublas(), tb, ta, n, m, k, &alpha, b, cuda_type(ab), ldb, a,
                            cuda_type(ab), lda, &beta, c, cuda_type(cdt), ldc,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

const char *slk_gemm_impl(sl_dtype ab)
{
    switch (ab) {
    case SL_F16: return "cublasGemmEx (f16 in, f32 compute)";
    case SL_BF16: return "cublasGemmEx (bf16 in, f32 compute)";
    default: return "cublasSgemm (f32, no TF32)";
    }
}
