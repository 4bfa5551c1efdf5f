/* cuda/conv.cu — 2-D convolution (NCHW) as im2col + cublasSgemm per image, and col2im by
 * gathering (no atomics, deterministic); twin of cpu/conv.c, which documents the layout.
 * Dilation: tap (i, j) reads input row i * dh, column j * dw of its patch. The col workspace
 * is the caller's (cv->work) when given, so that a timed loop allocates nothing; otherwise it
 * is allocated per call, stream-ordered on the default stream (cudaFree would wait for the whole
 * device, copy streams included: a vDNN offload would stop overlapping), and counted under
 * "other" while it lives. */
#include "cuda/cuda_util.cuh"

struct geom {
    int C, H, W, R, S, P, Q, ph, pw, sh, sw, dh, dw;
};

static geom geom_of(const sl_conv2d *cv)
{
    geom g = {cv->c, cv->h, cv->w, cv->r, cv->s, cv->p, cv->q,
              cv->pad_h, cv->pad_w, cv->stride_h, cv->stride_w, cv->dil_h, cv->dil_w};
    return g;
}

/* col[(ci*R + i)*S + j, pi*Q + qi] = x[ci, pi*sh - ph + i*dh, qi*sw - pw + j*dw] or 0 */
__global__ void im2col_kernel(geom g, const float *x, float *col)
{
    size_t n = (size_t)g.C * g.R * g.S * g.P * g.Q;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        int qi = (int)(e % g.Q), pi = (int)(e / g.Q % g.P);
        size_t row = e / ((size_t)g.P * g.Q);
        int j = (int)(row % g.S), i = (int)(row / g.S % g.R), ci = (int)(row / ((size_t)g.R * g.S));
        int hi = pi * g.sh - g.ph + i * g.dh, wi = qi * g.sw - g.pw + j * g.dw;
        col[e] = hi >= 0 && hi < g.H && wi >= 0 && wi < g.W ? x[((size_t)ci * g.H + hi) * g.W + wi]
                                                            : 0.0f;
    }
}

/* dx[ci, hi, wi] = sum of the dcol entries that read it */
__global__ void col2im_kernel(geom g, const float *dcol, float *dx)
{
    size_t n = (size_t)g.C * g.H * g.W;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        int wi = (int)(e % g.W), hi = (int)(e / g.W % g.H), ci = (int)(e / ((size_t)g.W * g.H));
        float sum = 0.0f;
        for (int i = 0; i < g.R; i++) {
            int ph = hi + g.ph - i * g.dh;
            if (ph < 0 || ph % g.sh || ph / g.sh >= g.P) continue;
            for (int j = 0; j < g.S; j++) {
                int pw = wi + g.pw - j * g.dw;
                if (pw < 0 || pw % g.sw || pw / g.sw >= g.Q) continue;
                sum += dcol[(((size_t)ci * g.R + i) * g.S + j) * g.P * g.Q +
                            (size_t)(ph / g.sh) * g.Q + pw / g.sw];
            }
        }
        dx[e] = sum;
    }
}

/* The caller's workspace, or one allocated for this call (stream-ordered, see above). */
static float *col_get(const sl_conv2d *cv)
{
    if (cv->work) return cv->work;
    size_t bytes = sl_conv2d_work_bytes(cv);
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes, 0);
    if (e != cudaSuccess)
        sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                 "out of device memory: cudaMallocAsync of %zu bytes of im2col workspace failed: %s",
                 bytes, cudaGetErrorString(e));
    sl_mem_track(SL_MEM_DEVICE, SL_MEM_OTHER, (long long)bytes);
    return (float *)p;
}

static void col_put(const sl_conv2d *cv, float *col)
{
    if (col == cv->work) return;
    SL_CHECK_CUDA(cudaFreeAsync(col, 0));
    sl_mem_track(SL_MEM_DEVICE, SL_MEM_OTHER, -(long long)sl_conv2d_work_bytes(cv));
}

/* Row-major C[m,n] = op(A) op(B) + beta C through the column-major cuBLAS (see gemm.cu). */
static void sgemm_rm(int ta, int tb, int m, int n, int k, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    const float one = 1.0f;
    SL_CHECK_CUBLAS(cublasSgemm(slk_cublas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                           ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &one, b, ldb, a, lda, &beta,
                           c, ldc));
}

void slk_conv2d_forward(const sl_conv2d *cv, const float *x, const float *w, float *y)
{
    geom g = geom_of(cv);
    const int crs = g.C * g.R * g.S, pq = g.P * g.Q;
    float *col = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        im2col_kernel<<<slk_blocks((size_t)crs * pq), SLK_THREADS>>>(
            g, x + (size_t)b * g.C * g.H * g.W, col);
        SLK_LAUNCHED();
        sgemm_rm(0, 0, cv->k, pq, crs, w, crs, col, pq, 0.0f, y + (size_t)b * cv->k * pq, pq);
    }
    col_put(cv, col);
}

void slk_conv2d_backward_data(const sl_conv2d *cv, const float *dy, const float *w, float *dx)
{
    geom g = geom_of(cv);
    const int crs = g.C * g.R * g.S, pq = g.P * g.Q;
    float *dcol = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        sgemm_rm(1, 0, crs, pq, cv->k, w, crs, dy + (size_t)b * cv->k * pq, pq, 0.0f, dcol, pq);
        col2im_kernel<<<slk_blocks((size_t)g.C * g.H * g.W), SLK_THREADS>>>(
            g, dcol, dx + (size_t)b * g.C * g.H * g.W);
        SLK_LAUNCHED();
    }
    col_put(cv, dcol);
}

void slk_conv2d_backward_filter(const sl_conv2d *cv, const float *x, const float *dy, float *dw)
{
    geom g = geom_of(cv);
    const int crs = g.C * g.R * g.S, pq = g.P * g.Q;
    float *col = col_get(cv);
    for (int b = 0; b < cv->n; b++) {
        im2col_kernel<<<slk_blocks((size_t)crs * pq), SLK_THREADS>>>(
            g, x + (size_t)b * g.C * g.H * g.W, col);
        SLK_LAUNCHED();
        sgemm_rm(0, 1, cv->k, crs, pq, dy + (size_t)b * cv->k * pq, pq, col, pq, 1.0f, dw, crs);
    }
    col_put(cv, col);
}
