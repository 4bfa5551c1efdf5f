/* cuda/gpt.cu — the cuda backend of the GPT kernels (gpt.h); twins of cpu/gpt.c.
 * Batched GEMMs are one cublasGemmStridedBatchedEx (f32 compute, no TF32); layer norm and the
 * causal softmax run one warp per row with f32 sums; parameter gradients are summed by one
 * thread per column over the rows in order (deterministic: no atomics). Every kernel is a
 * template over the storage dtype (half.cuh's traits). */
#include "cuda/cuda_util.cuh"
#include "cuda/half.cuh"
#include "gpt_backend.h"
#include "sl_dropout.h"

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Calls F<traits>(args) for the storage dtype dt. */
#define DISPATCH(dt, F, ...)                                                          \
    do {                                                                              \
        switch (dt) {                                                                 \
        case SL_F32: F<slk_f32>(__VA_ARGS__); break;                                  \
        case SL_F16: F<slk_f16>(__VA_ARGS__); break;                                  \
        case SL_BF16: F<slk_bf16>(__VA_ARGS__); break;                                \
        default: SL_FATAL("GPT kernel: bad dtype %d", (int)(dt));                     \
        }                                                                             \
    } while (0)

#define WARP 32
#define ROWS_PER_BLOCK (SLK_THREADS / WARP)

static unsigned row_blocks(long long rows)
{
    long long b = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    if (b > 0x7fffffffLL) SL_FATAL("GPT kernel: %lld rows exceed one grid", rows);
    return (unsigned)(b < 1 ? 1 : b);
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static cudaDataType_t cuda_type(sl_dtype t)
{
    return t == SL_F16 ? CUDA_R_16F : t == SL_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first (gemm.cu). */
static void gemm_batched(int transa, int transb, int m, int n, int k, float alpha, const void *a,
                         int lda, long long stride_a, const void *b, int ldb, long long stride_b,
                         float beta, void *c, int ldc, long long stride_c, int batch,
                         sl_dtype ab, sl_dtype cdt)
{
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    SL_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
        slk_cublas(), tb, ta, n, m, k, &alpha, b, cuda_type(ab), ldb, stride_b, a, cuda_type(ab),
        lda, stride_a, &beta, c, cuda_type(cdt), ldc, stride_c, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
}

/* Layer norm: one warp per row ---------------------------------------------------------------- */

template <class D>
__global__ void layernorm_forward_kernel(int N, int C, const typename D::T *inp, const float *w,
                                         const float *b, typename D::T *out, float *mean,
                                         float *rstd)
{
    long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= N) return;
    const typename D::T *x = inp + row * C;
    float s = 0.0f;
    for (int j = lane; j < C; j += WARP) s += D::load(x[j]);
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int j = lane; j < C; j += WARP) {
        float d = D::load(x[j]) - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    for (int j = lane; j < C; j += WARP)
        out[row * C + j] = D::store((D::load(x[j]) - m) * r * w[j] + b[j]);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <class D>
static void layernorm_forward_t(int N, int C, const void *inp, const float *w, const float *b,
                                void *out, float *mean, float *rstd)
{
    layernorm_forward_kernel<D><<<row_blocks(N), SLK_THREADS>>>(
        N, C, (const typename D::T *)inp, w, b, (typename D::T *)out, mean, rstd);
    SLK_LAUNCHED();
}

template <class D>
__global__ void layernorm_backward_kernel(int N, int C, const typename D::T *dout,
                                          const typename D::T *inp, const float *w,
                                          const float *mean, const float *rstd,
                                          typename D::T *dinp)
{
    long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (row >= N) return;
    const typename D::T *x = inp + row * C, *g = dout + row * C;
    float m = mean[row], r = rstd[row], s1 = 0.0f, s2 = 0.0f;
    for (int j = lane; j < C; j += WARP) {
        float dxh = D::load(g[j]) * w[j];
        s1 += dxh;
        s2 += dxh * (D::load(x[j]) - m) * r;
    }
    s1 = warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
    for (int j = lane; j < C; j += WARP) {
        float xh = (D::load(x[j]) - m) * r;
        dinp[row * C + j] = D::store(r * (D::load(g[j]) * w[j] - s1 - xh * s2));
    }
}

/* One thread per column, rows in order. */
template <class D>
__global__ void layernorm_params_kernel(int N, int C, const typename D::T *dout,
                                        const typename D::T *inp, const float *mean,
                                        const float *rstd, float *dw, float *db)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= C) return;
    float sw = 0.0f, sb = 0.0f;
    for (long long i = 0; i < N; i++) {
        float g = D::load(dout[i * C + j]);
        sw += g * (D::load(inp[i * C + j]) - mean[i]) * rstd[i];
        sb += g;
    }
    dw[j] += sw;
    db[j] += sb;
}

template <class D>
static void layernorm_backward_t(int N, int C, const void *dout, const void *inp, const float *w,
                                 const float *mean, const float *rstd, void *dinp, float *dw,
                                 float *db)
{
    typedef typename D::T T;
    layernorm_backward_kernel<D><<<row_blocks(N), SLK_THREADS>>>(
        N, C, (const T *)dout, (const T *)inp, w, mean, rstd, (T *)dinp);
    SLK_LAUNCHED();
    layernorm_params_kernel<D><<<(C + SLK_THREADS - 1) / SLK_THREADS, SLK_THREADS>>>(
        N, C, (const T *)dout, (const T *)inp, mean, rstd, dw, db);
    SLK_LAUNCHED();
}

static void layernorm_forward(sl_dtype dt, int N, int C, const void *inp, const float *w,
                              const float *b, void *out, float *mean, float *rstd)
{
    DISPATCH(dt, layernorm_forward_t, N, C, inp, w, b, out, mean, rstd);
}
static void layernorm_backward(sl_dtype dt, int N, int C, const void *dout, const void *inp,
                               const float *w, const float *mean, const float *rstd, void *dinp,
                               float *dw, float *db)
{
    DISPATCH(dt, layernorm_backward_t, N, C, dout, inp, w, mean, rstd, dinp, dw, db);
}

/* Causal softmax: one warp per row of T scores; row r is query t = r % T ---------------------- */

template <class D>
__global__ void softmax_causal_forward_kernel(long long rows, int T, const float *scores,
                                              typename D::T *att)
{
    long long r = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (r >= rows) return;
    int n = (int)(r % T) + 1;
    const float *z = scores + r * T;
    float m = -INFINITY;
    for (int j = lane; j < n; j += WARP) m = fmaxf(m, z[j]);
    m = warp_max(m);
    float s = 0.0f;
    for (int j = lane; j < n; j += WARP) s += expf(z[j] - m);
    float inv = 1.0f / warp_sum(s);
    for (int j = lane; j < T; j += WARP)
        att[r * T + j] = D::store(j < n ? expf(z[j] - m) * inv : 0.0f);
}

template <class D>
static void softmax_causal_forward_t(long long rows, int T, const float *scores, void *att)
{
    softmax_causal_forward_kernel<D><<<row_blocks(rows), SLK_THREADS>>>(
        rows, T, scores, (typename D::T *)att);
    SLK_LAUNCHED();
}

/* dpre may alias datt (f32): each lane reads its own elements before writing them. */
template <class D>
__global__ void softmax_causal_backward_kernel(long long rows, int T, const typename D::T *att,
                                               const float *datt, typename D::T *dpre)
{
    long long r = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / WARP;
    int lane = threadIdx.x % WARP;
    if (r >= rows) return;
    int n = (int)(r % T) + 1;
    float s = 0.0f;
    for (int j = lane; j < n; j += WARP) s += D::load(att[r * T + j]) * datt[r * T + j];
    s = warp_sum(s);
    for (int j = lane; j < T; j += WARP) {
        float v = j < n ? D::load(att[r * T + j]) * (datt[r * T + j] - s) : 0.0f;
        dpre[r * T + j] = D::store(v);
    }
}

template <class D>
static void softmax_causal_backward_t(long long rows, int T, const void *att, const float *datt,
                                      void *dpre)
{
    typedef typename D::T X;
    softmax_causal_backward_kernel<D><<<row_blocks(rows), SLK_THREADS>>>(
        rows, T, (const X *)att, datt, (X *)dpre);
    SLK_LAUNCHED();
}

static void softmax_causal_forward(sl_dtype dt, long long rows, int T, const float *scores,
                                   void *att)
{
    DISPATCH(dt, softmax_causal_forward_t, rows, T, scores, att);
}
static void softmax_causal_backward(sl_dtype dt, long long rows, int T, const void *att,
                                    const float *datt, void *dpre)
{
    DISPATCH(dt, softmax_causal_backward_t, rows, T, att, datt, dpre);
}

/* GELU (tanh form of kernels.h): f32 goes to the activation kernel of elementwise.cu --------- */

#define GELU_C 0.7978845608028654f
#define GELU_A 0.044715f

template <class D>
__global__ void gelu_forward_kernel(size_t n, const typename D::T *x, typename D::T *y)
{
    GRID_STRIDE(i, n)
    {
        float v = D::load(x[i]);
        y[i] = D::store(0.5f * v * (1.0f + tanhf(GELU_C * (v + GELU_A * v * v * v))));
    }
}

template <class D>
__global__ void gelu_backward_kernel(size_t n, const typename D::T *x, const typename D::T *dy,
                                     typename D::T *dx)
{
    GRID_STRIDE(i, n)
    {
        float v = D::load(x[i]);
        float t = tanhf(GELU_C * (v + GELU_A * v * v * v));
        float d = 0.5f * (1.0f + t) +
                  0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = D::store(D::load(dy[i]) * d);
    }
}

template <class D>
static void gelu_forward_t(size_t n, const void *x, void *y)
{
    gelu_forward_kernel<D><<<slk_blocks(n), SLK_THREADS>>>(n, (const typename D::T *)x,
                                                          (typename D::T *)y);
    SLK_LAUNCHED();
}
template <class D>
static void gelu_backward_t(size_t n, const void *x, const void *dy, void *dx)
{
    typedef typename D::T X;
    gelu_backward_kernel<D><<<slk_blocks(n), SLK_THREADS>>>(n, (const X *)x, (const X *)dy,
                                                           (X *)dx);
    SLK_LAUNCHED();
}

static void gelu_forward(sl_dtype dt, size_t n, const void *x, void *y)
{
    if (dt == SL_F32) {
        slk_act_forward(SL_ACT_GELU, n, (const float *)x, (float *)y);
        return;
    }
    if (dt == SL_F16) gelu_forward_t<slk_f16>(n, x, y);
    else gelu_forward_t<slk_bf16>(n, x, y);
}
static void gelu_backward(sl_dtype dt, size_t n, const void *x, const void *dy, void *dx)
{
    if (dt == SL_F32) {
        slk_act_backward(SL_ACT_GELU, n, (const float *)x, (const float *)dy, (float *)dx);
        return;
    }
    if (dt == SL_F16) gelu_backward_t<slk_f16>(n, x, dy, dx);
    else gelu_backward_t<slk_bf16>(n, x, dy, dx);
}

/* Embeddings ----------------------------------------------------------------------------------- */

template <class D>
__global__ void embedding_forward_kernel(int B, int T, int C, const int32_t *tok,
                                         const typename D::T *wte, const typename D::T *wpe,
                                         typename D::T *out)
{
    GRID_STRIDE(i, (size_t)B * T * C)
    {
        size_t row = i / C, j = i % C;
        out[i] = D::store(D::load(wte[(size_t)tok[row] * C + j]) +
                          D::load(wpe[(row % T) * C + j]));
    }
}

/* wpe: one thread per (t, channel), summing the batch rows in order */
template <class D>
__global__ void embedding_wpe_kernel(int B, int T, int C, const typename D::T *dout, float *dwpe)
{
    GRID_STRIDE(i, (size_t)T * C)
    {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += D::load(dout[(size_t)b * T * C + i]);
        dwpe[i] += s;
    }
}

/* wte: one thread per channel walking all rows in order: repeated tokens add up without atomics
 * and in the same order on every run (N sequential steps per thread: fine for the batch sizes
 * of these benchmarks; the GEMMs dominate) */
template <class D>
__global__ void embedding_wte_kernel(int N, int C, const int32_t *tok, const typename D::T *dout,
                                     float *dwte)
{
    GRID_STRIDE(j, (size_t)C)
    for (int i = 0; i < N; i++) dwte[(size_t)tok[i] * C + j] += D::load(dout[(size_t)i * C + j]);
}

#if SL_DEBUG
/* DEBUG=1: an id outside [0, V) makes the kernels below read (forward) or write (backward)
 * outside wte, which surfaces later as an illegal address or as wrong numbers; a debug build
 * looks for one first and names it. The lowest offending row wins, so the message is the same
 * on every run. */
__global__ void bad_token_kernel(int N, const int32_t *tok, int V, unsigned long long *first)
{
    GRID_STRIDE(i, (size_t)N)
    if (tok[i] < 0 || tok[i] >= V) atomicMin(first, (unsigned long long)i);
}

static void check_tokens(const char *what, int N, const int32_t *tok, int V)
{
    const unsigned long long none = ~0ULL;
    unsigned long long first = none, *d;
    SL_CHECK_CUDA(cudaMalloc((void **)&d, sizeof *d));
    SL_CHECK_CUDA(cudaMemcpy(d, &first, sizeof first, cudaMemcpyHostToDevice));
    bad_token_kernel<<<slk_blocks((size_t)N), SLK_THREADS>>>(N, tok, V, d);
    SLK_LAUNCHED();
    SL_CHECK_CUDA(cudaMemcpy(&first, d, sizeof first, cudaMemcpyDeviceToHost));
    SL_CHECK_CUDA(cudaFree(d));
    if (first == none) return;
    int32_t id;
    SL_CHECK_CUDA(cudaMemcpy(&id, tok + first, sizeof id, cudaMemcpyDeviceToHost));
    SL_FATAL("%s: token id %d at row %llu is outside the vocabulary [0, %d)", what, (int)id, first, V);
}
#endif

template <class D>
static void embedding_forward_t(int B, int T, int C, const int32_t *tok, const void *wte,
                                const void *wpe, void *out)
{
    typedef typename D::T X;
    embedding_forward_kernel<D><<<slk_blocks((size_t)B * T * C), SLK_THREADS>>>(
        B, T, C, tok, (const X *)wte, (const X *)wpe, (X *)out);
    SLK_LAUNCHED();
}
template <class D>
static void embedding_backward_t(int B, int T, int C, const int32_t *tok, const void *dout,
                                 float *dwte, float *dwpe)
{
    typedef typename D::T X;
    embedding_wpe_kernel<D><<<slk_blocks((size_t)T * C), SLK_THREADS>>>(B, T, C, (const X *)dout,
                                                                        dwpe);
    SLK_LAUNCHED();
    embedding_wte_kernel<D><<<slk_blocks((size_t)C), SLK_THREADS>>>(B * T, C, tok,
                                                                    (const X *)dout, dwte);
    SLK_LAUNCHED();
}

static void embedding_forward(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                              const void *wte, const void *wpe, void *out)
{
#if SL_DEBUG
    check_tokens("sl_k_embedding_forward", B * T, tok, V);
#else
    (void)V;
#endif
    DISPATCH(dt, embedding_forward_t, B, T, C, tok, wte, wpe, out);
}
static void embedding_backward(sl_dtype dt, int B, int T, int C, int V, const int32_t *tok,
                               const void *dout, float *dwte, float *dwpe)
{
#if SL_DEBUG
    check_tokens("sl_k_embedding_backward", B * T, tok, V);
#else
    (void)V;
#endif
    DISPATCH(dt, embedding_backward_t, B, T, C, tok, dout, dwte, dwpe);
}

/* Dropout ---------------------------------------------------------------------------------------- */

template <class D>
__global__ void dropout_kernel(size_t n, const typename D::T *x, typename D::T *y, float p,
                               uint64_t key, uint64_t first)
{
    const float scale = sl_dropout_scale(p);
    GRID_STRIDE(i, n)
    {
        y[i] = D::store(sl_dropout_keep(key, first + i, p) ? D::load(x[i]) * scale : 0.0f);
    }
}

template <class D>
static void dropout_t(size_t n, const void *x, void *y, float p, uint64_t key, uint64_t first)
{
    dropout_kernel<D><<<slk_blocks(n), SLK_THREADS>>>(n, (const typename D::T *)x, (typename D::T *)y, p,
                                                      key, first);
    SLK_LAUNCHED();
}

static void dropout(sl_dtype dt, size_t n, const void *x, void *y, float p, uint64_t key, uint64_t first)
{
    DISPATCH(dt, dropout_t, n, x, y, p, key, first);
}

static const sl_gpt_kops cuda_gpt_ops = {
    gemm_batched,        layernorm_forward,  layernorm_backward,
    softmax_causal_forward, softmax_causal_backward, gelu_forward,
    gelu_backward,       embedding_forward,  embedding_backward,
    dropout,
};

extern "C" const sl_gpt_kops *sl_cuda_gpt_ops(void) { return &cuda_gpt_ops; }
