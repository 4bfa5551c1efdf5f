/* backend.h — inside the kernels library: the table of operations a backend provides.
 *
 * kernels.c checks arguments once and dispatches through this table, so each backend
 * implements only the computation. cpu/ fills sl_cpu_ops; the cuda/ files fill the table returned
 * by sl_cuda_ops(), and nocuda/ provides the same two symbols for a build without CUDA
 * (no table, and the reason). The signatures mirror kernels.h without the backend argument.
 */
#ifndef SL_KERNELS_BACKEND_H
#define SL_KERNELS_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels.h"

typedef struct sl_kops {
    const char *name;
    void (*sync)(void);
    void *(*malloc)(sl_mem_cat cat, size_t bytes);
    void (*free)(void *p);
    void *(*host_alloc)(sl_mem_cat cat, size_t bytes);
    void (*host_free)(void *p);
    void (*memcpy)(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind);
    void (*memset0)(void *p, size_t bytes);
    void *(*stream_create)(void);
    void (*stream_destroy)(void *s);
    void (*memcpy_async)(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind, void *s);
    void (*stream_sync)(void *s);
    void *(*event_create)(void);
    void (*event_destroy)(void *e);
    void (*event_record)(void *e, void *s);
    void (*stream_wait_event)(void *s, void *e);
    void (*event_sync)(void *e);
    double (*event_elapsed)(void *a, void *b);

    void (*gemm)(int transa, int transb, int m, int n, int k, float alpha, const void *a,
                 int lda, const void *b, int ldb, float beta, void *c, int ldc, sl_dtype ab,
                 sl_dtype cdt);
    const char *(*gemm_impl)(sl_dtype ab);

    void (*bias_add)(int rows, int cols, float *y, const float *bias);
    void (*bias_grad)(int rows, int cols, const float *dy, float *dbias);
    void (*act_forward)(sl_act act, size_t n, const float *x, float *y);
    void (*act_backward)(sl_act act, size_t n, const float *x, const float *dy, float *dx);
    double (*mse)(size_t n, const float *y, const float *t, float *dy, float norm);
    double (*softmax_xent)(int rows, int classes, const float *logits, const int32_t *labels,
                           float *dlogits, float norm);
    void (*sgd_step)(const sl_sgd *o, size_t n, float *w, const float *g, float *v);
    void (*adamw_step)(const sl_adamw *o, size_t n, float *w, const float *g, float *m,
                       float *v);
    void (*cast)(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
                 sl_cast_count *cnt);
    size_t (*scale_check)(size_t n, float *x, float scale);
    size_t (*cast_update)(sl_dtype dt, size_t n, const float *w, void *w16);
    void (*axpby)(sl_dtype dt, size_t n, double alpha, const void *x, double beta, void *y);
    void (*fill)(sl_dtype dt, size_t n, void *x, double value);
    void (*conv2d_forward)(const sl_conv2d *cv, const float *x, const float *w, float *y);
    void (*conv2d_backward_data)(const sl_conv2d *cv, const float *dy, const float *w,
                                 float *dx);
    void (*conv2d_backward_filter)(const sl_conv2d *cv, const float *x, const float *dy,
                                   float *dw);
    void (*copy_block)(int nz, int ny, int nx, const void *src, sl_dtype st, size_t src_z,
                       size_t src_y, void *dst, sl_dtype dt, size_t dst_z, size_t dst_y);
    void (*rng_uniform)(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi);
    void (*rng_normal)(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                       float stddev);
    double (*read_sum)(size_t n, const double *x);
} sl_kops;

extern const sl_kops sl_cpu_ops;

/* The cuda table, or NULL with the reason in why: not built, or no device visible. */
const sl_kops *sl_cuda_ops(char *why, size_t whylen);
/* Visible devices; 0 when not built or none (never an error). Defined by the harness
 * (common/sl_env.h), which reports devices in the manifest. */
int sl_cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
