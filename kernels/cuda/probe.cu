/* cuda/probe.cu — the read of the read-bandwidth probe (probe.h) on the device: every element
 * of an array of doubles summed, through the deterministic block partials of reduce.cuh.
 * Twin of cpu/probe.c. */
#include "cuda/cuda_util.cuh"
#include "cuda/reduce.cuh"

__global__ void read_sum_kernel(size_t n, const double *x, double *partial)
{
    double s = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += x[i];
    s = slk_block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

double slk_read_sum(size_t n, const double *x)
{
    read_sum_kernel<<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, x, slk_scratch());
    SLK_LAUNCHED();
    double s;
    slk_collect(1, &s);
    return s;
}
