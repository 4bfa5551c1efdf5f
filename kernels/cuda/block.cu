/* cuda/block.cu — strided 3-D block copies between f32, f16 and bf16 (kernels.h,
 * sl_k_copy_block_cast), twin of cpu/block.c: one thread per element, converted through the
 * CUDA intrinsics of half.cuh (round to nearest even, as cpu/cast.c). */
#include "cuda/cuda_util.cuh"
#include "cuda/half.cuh"

/* A 16-bit element moved as it is (f16 -> f16, bf16 -> bf16: NaN payloads kept, as memcpy). */
struct raw16 {
    typedef uint16_t T;
    __device__ static uint16_t load(uint16_t v) { return v; }
    __device__ static uint16_t store(uint16_t v) { return v; }
};

template <class S, class D>
__global__ void copy_block_kernel(size_t n, int ny, int nx, const typename S::T *src, size_t src_z,
                                  size_t src_y, typename D::T *dst, size_t dst_z, size_t dst_y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t x = e % (size_t)nx, y = e / (size_t)nx % (size_t)ny, z = e / ((size_t)nx * ny);
        dst[z * dst_z + y * dst_y + x] = D::store(S::load(src[z * src_z + y * src_y + x]));
    }
}

template <class S, class D>
static void copy_t(int nz, int ny, int nx, const void *src, size_t src_z, size_t src_y, void *dst,
                   size_t dst_z, size_t dst_y)
{
    size_t n = (size_t)nz * ny * nx;
    copy_block_kernel<S, D><<<slk_blocks(n), SLK_THREADS>>>(n, ny, nx, (const typename S::T *)src, src_z, src_y,
                                                           (typename D::T *)dst, dst_z, dst_y);
    SLK_LAUNCHED();
}

template <class S>
static void copy_from(int nz, int ny, int nx, const void *src, size_t src_z, size_t src_y, void *dst,
                      sl_dtype dt, size_t dst_z, size_t dst_y)
{
    switch (dt) {
    case SL_F16: copy_t<S, slk_f16>(nz, ny, nx, src, src_z, src_y, dst, dst_z, dst_y); break;
    case SL_BF16: copy_t<S, slk_bf16>(nz, ny, nx, src, src_z, src_y, dst, dst_z, dst_y); break;
    default: copy_t<S, slk_f32>(nz, ny, nx, src, src_z, src_y, dst, dst_z, dst_y); break;
    }
}

void slk_copy_block(int nz, int ny, int nx, const void *src, sl_dtype st, size_t src_z,
                    size_t src_y, void *dst, sl_dtype dt, size_t dst_z, size_t dst_y)
{
    if (st == dt && st != SL_F32) { /* the same bits: move them as raw 16-bit patterns */
        copy_t<raw16, raw16>(nz, ny, nx, src, src_z, src_y, dst, dst_z, dst_y);
        return;
    }
    switch (st) {
    case SL_F16: copy_from<slk_f16>(nz, ny, nx, src, src_z, src_y, dst, dt, dst_z, dst_y); break;
    case SL_BF16: copy_from<slk_bf16>(nz, ny, nx, src, src_z, src_y, dst, dt, dst_z, dst_y); break;
    default: copy_from<slk_f32>(nz, ny, nx, src, src_z, src_y, dst, dt, dst_z, dst_y); break;
    }
}
