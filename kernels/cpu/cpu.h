/* cpu/cpu.h — the cpu backend's functions, gathered into sl_cpu_ops by cpu/ops.c.
 * Each is the reference ("twin") for the cuda kernel of the same name. */
#ifndef SL_KERNELS_CPU_H
#define SL_KERNELS_CPU_H

#include "backend.h"

/* Whether a loop over n elements is split across the OpenMP threads (cpu/ops.c): not when
 * it is short (starting a parallel region costs more), and not when OpenMP threads would spin
 * against OpenBLAS's. */
int sl_cpu_par(size_t n);

/* Loops whose cost is arithmetic (libmvec's exp, mvec.h; divisions, square roots) are compiled
 * for AVX-512F, for AVX2 and for the build's baseline (generic x86-64: SSE2), and the loader
 * picks by the CPU (GCC's target_clones, an ifunc): two or four times the lanes without
 * -march=native, and each clone calls libmvec's variant of its width. Arithmetic of correctly
 * rounded IEEE operations with no contraction into FMA (AdamW) gives the same bits in every
 * clone; libmvec's variants need not agree with each other in the last bit, so GeLU and
 * softmax may differ in that bit between CPUs that run different clones (never between runs,
 * ranks or thread counts on one CPU).
 * sl_env_cpu_vec_isa() (common/sl_env.h) names the one this CPU runs, for the manifest. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SL_CPU_CLONES
#endif
/* Elements per call of a cloned loop, within one thread's share of the loop. */
#define SL_CPU_VBLOCK 4096

void sl_cpu_gemm(int transa, int transb, int m, int n, int k, float alpha, const void *a,
                 int lda, const void *b, int ldb, float beta, void *c, int ldc, sl_dtype ab,
                 sl_dtype cdt);
const char *sl_cpu_gemm_impl(sl_dtype ab);
/* cblas_sbgemm when the linked OpenBLAS has it (returns 1), else 0 (gemm_sbgemm.c). */
int sl_cpu_sbgemm(int transa, int transb, int m, int n, int k, float alpha, const uint16_t *a,
                  int lda, const uint16_t *b, int ldb, float beta, float *c, int ldc);
int sl_cpu_have_sbgemm(void);

/* f32 <-> f16 arrays (F16C where available; half_vec.c), same bits as sl_half.h. */
void sl_cpu_f32_to_f16_n(const float *src, uint16_t *dst, size_t n);
void sl_cpu_f16_to_f32_n(const uint16_t *src, float *dst, size_t n);
const char *sl_cpu_f16_impl(void);
/* f32 <-> bf16 arrays, same bits as sl_half.h (half_vec.c). */
void sl_cpu_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n);
void sl_cpu_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n);

void sl_cpu_bias_add(int rows, int cols, float *y, const float *bias);
void sl_cpu_bias_grad(int rows, int cols, const float *dy, float *dbias);
void sl_cpu_act_forward(sl_act act, size_t n, const float *x, float *y);
/* The logistic sigmoid on libmvec's expf, as the GeLU kernels compute it (elementwise.c). */
void sl_cpu_sigmoid_n(size_t n, const float *x, float *y);
/* libmvec's expf as the kernels' loops call it (softmax cross-entropy), for the accuracy test. */
void sl_cpu_expf_n(size_t n, const float *x, float *y);
void sl_cpu_act_backward(sl_act act, size_t n, const float *x, const float *dy, float *dx);
void sl_cpu_axpby(sl_dtype dt, size_t n, double alpha, const void *x, double beta, void *y);
void sl_cpu_fill(sl_dtype dt, size_t n, void *x, double value);
size_t sl_cpu_scale_check(size_t n, float *x, float scale);

double sl_cpu_mse(size_t n, const float *y, const float *t, float *dy, float norm);
double sl_cpu_softmax_xent(int rows, int classes, const float *logits, const int32_t *labels,
                           float *dlogits, float norm);

void sl_cpu_sgd_step(const sl_sgd *o, size_t n, float *w, const float *g, float *v);
void sl_cpu_adamw_step(const sl_adamw *o, size_t n, float *w, const float *g, float *m,
                       float *v);

void sl_cpu_cast(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
                 sl_cast_count *cnt);
size_t sl_cpu_cast_update(sl_dtype dt, size_t n, const float *w, void *w16);

void sl_cpu_conv2d_forward(const sl_conv2d *cv, const float *x, const float *w, float *y);
void sl_cpu_conv2d_backward_data(const sl_conv2d *cv, const float *dy, const float *w,
                                 float *dx);
void sl_cpu_conv2d_backward_filter(const sl_conv2d *cv, const float *x, const float *dy,
                                   float *dw);
void sl_cpu_copy_block(int nz, int ny, int nx, const void *src, sl_dtype st, size_t src_z,
                       size_t src_y, void *dst, sl_dtype dt, size_t dst_z, size_t dst_y);

void sl_cpu_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi);
void sl_cpu_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                       float stddev);

double sl_cpu_read_sum(size_t n, const double *x);
/* The same sum on the calling thread only (the probe's own threads, probe.c). */
double sl_cpu_read_sum_1(size_t n, const double *x);

#endif
