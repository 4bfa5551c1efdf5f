/* gpt_backend.h — inside the kernels library: the operations a backend provides for the GPT
 * kernels of gpt.h. gpt.c checks arguments and composes them (attention = batched GEMMs +
 * causal softmax; LM head = GEMMs + softmax_xent of backend.h); cpu/gpt.c fills
 * sl_cpu_gpt_ops, cuda/gpt.cu returns its table from sl_cuda_gpt_ops(), nocuda/ says NULL. */
#ifndef SL_KERNELS_GPT_BACKEND_H
#define SL_KERNELS_GPT_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

#include "gpt.h"

typedef struct sl_gpt_kops {
    /* batch GEMMs of sl_k_gemm's kind; matrix i of X starts at X + i * stride_x elements */
    void (*gemm_batched)(int transa, int transb, int m, int n, int k, float alpha,
                         const void *a, int lda, long long stride_a, const void *b, int ldb,
                         long long stride_b, float beta, void *c, int ldc, long long stride_c,
                         int batch, sl_dtype ab, sl_dtype cdt);
    void (*layernorm_forward)(sl_dtype dt, int N, int C, const void *inp, const float *w,
                              const float *b, void *out, float *mean, float *rstd);
    void (*layernorm_backward)(sl_dtype dt, int N, int C, const void *dout, const void *inp,
                               const float *w, const float *mean, const float *rstd,
                               void *dinp, float *dw, float *db);
    /* rows of T scores (f32, already scaled); row r is query t = r % T: att = softmax over
     * s <= t, 0 above (dt) */
    void (*softmax_causal_forward)(sl_dtype dt, long long rows, int T, const float *scores,
                                   void *att);
    /* dpre = att * (datt - sum_s att datt) for s <= t, 0 above (dt; may alias datt for f32) */
    void (*softmax_causal_backward)(sl_dtype dt, long long rows, int T, const void *att,
                                    const float *datt, void *dpre);
    void (*gelu_forward)(sl_dtype dt, size_t n, const void *x, void *y);
    void (*gelu_backward)(sl_dtype dt, size_t n, const void *x, const void *dy, void *dx);
    void (*embedding_forward)(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                              const void *wte, const void *wpe, void *out);
    void (*embedding_backward)(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                               const void *dout, float *dwte, float *dwpe);
    /* y = keep(first + i) ? x / (1 - p) : 0 (sl_dropout.h); y may be x */
    void (*dropout)(sl_dtype dt, size_t n, const void *x, void *y, float p, uint64_t key, uint64_t first);
} sl_gpt_kops;

extern const sl_gpt_kops sl_cpu_gpt_ops;
/* The cuda table; NULL in a build without CUDA. Only asked for once sl_cuda_ops succeeded. */
const sl_gpt_kops *sl_cuda_gpt_ops(void);

#ifdef __cplusplus
}
#endif

#endif
