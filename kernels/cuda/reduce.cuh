/* cuda/reduce.cuh — deterministic sums for the reduction kernels (losses, counts).
 *
 * A reduction kernel runs SLK_RED_BLOCKS blocks of SLK_THREADS threads over a grid-stride
 * loop, sums each block in a fixed tree order and writes one partial per block into the
 * scratch area; the host copies the partials back and adds them in block order. The result
 * is the same on every run, unlike an atomicAdd of floating-point partials. */
#ifndef SL_KERNELS_CUDA_REDUCE_CUH
#define SL_KERNELS_CUDA_REDUCE_CUH

#include "cuda/cuda_util.cuh"

/* Sum of v over the block; every thread must call it. The result is valid in thread 0. */
__device__ __forceinline__ double slk_block_sum(double v)
{
    __shared__ double buf[SLK_THREADS];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = SLK_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    double r = buf[0];
    __syncthreads(); /* buf may be reused by the next call */
    return r;
}

/* Copies `nsums` groups of SLK_RED_BLOCKS partials (group g at scratch + g * SLK_RED_BLOCKS)
 * back and returns their sums in out[g]. Waits for the kernel. */
static inline void slk_collect(int nsums, double *out)
{
    double h[SLK_RED_GROUPS * SLK_RED_BLOCKS];
    if (nsums > SLK_RED_GROUPS) SL_FATAL("slk_collect: %d sums, the scratch holds %d", nsums, SLK_RED_GROUPS);
    SL_CHECK_CUDA(cudaMemcpy(h, slk_scratch(), (size_t)nsums * SLK_RED_BLOCKS * sizeof(double),
                        cudaMemcpyDeviceToHost));
    for (int g = 0; g < nsums; g++) {
        double s = 0.0;
        for (int b = 0; b < SLK_RED_BLOCKS; b++) s += h[g * SLK_RED_BLOCKS + b];
        out[g] = s;
    }
}

#endif
