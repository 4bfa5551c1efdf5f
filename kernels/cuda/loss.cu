/* cuda/loss.cu — MSE and softmax cross-entropy with their gradients; twins of cpu/loss.c.
 * Loss sums go through the deterministic block partials of reduce.cuh. */
#include "cuda/cuda_util.cuh"
#include "cuda/reduce.cuh"

__global__ void mse_kernel(size_t n, const float *y, const float *t, float *dy, float norm,
                           double *partial)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = y[i] - t[i];
        s += (double)d * d;
        if (dy) dy[i] = 2.0f * norm * d;
    }
    s = slk_block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

double slk_mse(size_t n, const float *y, const float *t, float *dy, float norm)
{
    mse_kernel<<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, y, t, dy, norm, slk_scratch());
    SLK_LAUNCHED();
    double s;
    slk_collect(1, &s);
    return norm * s;
}

/* One thread per row (class counts in these benchmarks are small): lse = m + log sum exp(z - m),
 * loss = lse - z[label], dz = norm (exp(z - lse) - onehot). */
__global__ void xent_kernel(int rows, int classes, const float *logits, const int32_t *labels,
                            float *dlogits, float norm, double *partial)
{
    double s = 0.0;
    /* size_t: an int r plus the stride overflows for row counts near INT_MAX */
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < (size_t)rows;
         r += (size_t)gridDim.x * blockDim.x) {
        const float *z = logits + r * classes;
        float m = z[0];
        for (int j = 1; j < classes; j++) m = z[j] > m ? z[j] : m;
        double se = 0.0;
        for (int j = 0; j < classes; j++) se += exp((double)z[j] - m);
        double lse = m + log(se);
        int lab = labels[r];
        s += lse - z[lab];
        if (dlogits)
            for (int j = 0; j < classes; j++)
                dlogits[r * classes + j] = norm * (float)(exp(z[j] - lse) - (j == lab));
    }
    s = slk_block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

double slk_softmax_xent(int rows, int classes, const float *logits, const int32_t *labels,
                        float *dlogits, float norm)
{
    xent_kernel<<<SLK_RED_BLOCKS, SLK_THREADS>>>(rows, classes, logits, labels, dlogits, norm,
                                                 slk_scratch());
    SLK_LAUNCHED();
    double s;
    slk_collect(1, &s);
    return norm * s;
}
