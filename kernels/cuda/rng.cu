/* cuda/rng.cu — fills a tensor slice from the counter-based generator of sl_rng.h, the same
 * function the cpu twin calls. */
#include "cuda/cuda_util.cuh"
#include "sl_rng.h"

__global__ void uniform_kernel(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = lo + (hi - lo) * sl_rng_uniform(seed, first + i);
}

__global__ void normal_kernel(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                              float stddev)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = mean + stddev * sl_rng_normal(seed, first + i);
}

void slk_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi)
{
    uniform_kernel<<<slk_blocks(n), SLK_THREADS>>>(seed, first, n, x, lo, hi);
    SLK_LAUNCHED();
}

void slk_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean, float stddev)
{
    normal_kernel<<<slk_blocks(n), SLK_THREADS>>>(seed, first, n, x, mean, stddev);
    SLK_LAUNCHED();
}
