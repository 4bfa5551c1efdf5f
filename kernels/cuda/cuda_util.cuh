/* cuda/cuda_util.cuh — what every .cu file of the cuda backend shares: error checks that end
 * the run with the failing call, file and line (exit 3), launch geometry, the cuBLAS handle,
 * a small device scratch area for reductions, and the functions of each file.
 * The error checks are those of common/sl_cuda.h. */
#ifndef SL_KERNELS_CUDA_UTIL_CUH
#define SL_KERNELS_CUDA_UTIL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "backend.h"
#include "sl_cuda.h"

/* After every kernel launch (sl_cuda.h: also waits for the kernel in DEBUG=1 builds). */
#define SLK_LAUNCHED() SL_CHECK_LAUNCH()

#define SLK_THREADS 256
/* Grid-stride loops: enough blocks to fill any current GPU, few enough to launch cheaply. */
static inline unsigned slk_blocks(size_t n)
{
    size_t b = (n + SLK_THREADS - 1) / SLK_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 4096 ? 4096 : b);
}

/* Number of blocks of the reduction kernels (loss, counts): their per-block partials are
 * copied back and added on the host in block order, so the sum does not depend on timing. */
#define SLK_RED_BLOCKS 256
/* Sums one reduction kernel may return at most (groups of SLK_RED_BLOCKS partials). */
#define SLK_RED_GROUPS 4

cublasHandle_t slk_cublas(void);
/* Device scratch for partial sums: SLK_RED_GROUPS * SLK_RED_BLOCKS doubles (not counted in
 * the memory accounting: a few KiB held for the whole run). */
double *slk_scratch(void);

void *slk_malloc(sl_mem_cat cat, size_t bytes);
void slk_free(void *p);

/* The kernels, by file; the signatures are those of backend.h. */
void slk_gemm(int transa, int transb, int m, int n, int k, float alpha, const void *a, int lda,
              const void *b, int ldb, float beta, void *c, int ldc, sl_dtype ab, sl_dtype cdt);
const char *slk_gemm_impl(sl_dtype ab);
void slk_bias_add(int rows, int cols, float *y, const float *bias);
void slk_bias_grad(int rows, int cols, const float *dy, float *dbias);
void slk_act_forward(sl_act act, size_t n, const float *x, float *y);
void slk_act_backward(sl_act act, size_t n, const float *x, const float *dy, float *dx);
void slk_axpby(sl_dtype dt, size_t n, double alpha, const void *x, double beta, void *y);
void slk_fill(sl_dtype dt, size_t n, void *x, double value);
size_t slk_scale_check(size_t n, float *x, float scale);
double slk_mse(size_t n, const float *y, const float *t, float *dy, float norm);
double slk_softmax_xent(int rows, int classes, const float *logits, const int32_t *labels,
                        float *dlogits, float norm);
void slk_sgd_step(const sl_sgd *o, size_t n, float *w, const float *g, float *v);
void slk_adamw_step(const sl_adamw *o, size_t n, float *w, const float *g, float *m, float *v);
void slk_cast(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
              sl_cast_count *cnt);
size_t slk_cast_update(sl_dtype dt, size_t n, const float *w, void *w16);
void slk_conv2d_forward(const sl_conv2d *cv, const float *x, const float *w, float *y);
void slk_conv2d_backward_data(const sl_conv2d *cv, const float *dy, const float *w, float *dx);
void slk_conv2d_backward_filter(const sl_conv2d *cv, const float *x, const float *dy,
                                float *dw);
void slk_copy_block(int nz, int ny, int nx, const void *src, sl_dtype st, size_t src_z,
                    size_t src_y, void *dst, sl_dtype dt, size_t dst_z, size_t dst_y);
void slk_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi);
void slk_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                    float stddev);
double slk_read_sum(size_t n, const double *x);

#endif
