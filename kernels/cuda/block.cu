/* cuda/block.cu — strided 3-D block copies (kernels.h, sl_k_copy_block), twin of
 * cpu/block.c: one thread per element, rows of a block are contiguous in both arrays. */
#include "cuda/cuda_util.cuh"

__global__ void copy_block_kernel(size_t n, int ny, int nx, const float *src, size_t src_z,
                                  size_t src_y, float *dst, size_t dst_z, size_t dst_y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t x = e % (size_t)nx, y = e / (size_t)nx % (size_t)ny, z = e / ((size_t)nx * ny);
        dst[z * dst_z + y * dst_y + x] = src[z * src_z + y * src_y + x];
    }
}

void slk_copy_block(int nz, int ny, int nx, const float *src, size_t src_z, size_t src_y,
                    float *dst, size_t dst_z, size_t dst_y)
{
    size_t n = (size_t)nz * ny * nx;
    copy_block_kernel<<<slk_blocks(n), SLK_THREADS>>>(n, ny, nx, src, src_z, src_y, dst, dst_z, dst_y);
    SLK_LAUNCHED();
}
