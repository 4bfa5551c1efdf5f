/* cuda/cast.cu — f32/f16/bf16 conversions with underflow and overflow counts; twin of
 * cpu/cast.c, using the CUDA conversion intrinsics (half.cuh). */
#include "cuda/cuda_util.cuh"
#include "cuda/half.cuh"
#include "cuda/reduce.cuh"

template <class S, class D>
__global__ void cast_kernel(size_t n, const typename S::T *src, typename D::T *dst,
                            double *partial)
{
    double under = 0, over = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = S::load(src[i]);
        typename D::T o = D::store(v);
        dst[i] = o;
        float r = D::load(o);
        under += r == 0.0f && v != 0.0f && isfinite(v);
        over += isinf(r) && isfinite(v);
    }
    under = slk_block_sum(under);
    over = slk_block_sum(over);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = under;
        partial[SLK_RED_BLOCKS + blockIdx.x] = over;
    }
}

template <class S, class D>
static void cast_t(size_t n, const void *src, void *dst, sl_cast_count *cnt)
{
    cast_kernel<S, D><<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, (const typename S::T *)src,
                                                       (typename D::T *)dst, slk_scratch());
    SLK_LAUNCHED();
    double uo[2];
    slk_collect(2, uo);
    if (cnt) {
        cnt->underflow += (unsigned long long)uo[0];
        cnt->overflow += (unsigned long long)uo[1];
    }
}

template <class S>
static void cast_from(size_t n, const void *src, void *dst, sl_dtype dt, sl_cast_count *cnt)
{
    switch (dt) {
    case SL_F16: cast_t<S, slk_f16>(n, src, dst, cnt); break;
    case SL_BF16: cast_t<S, slk_bf16>(n, src, dst, cnt); break;
    default: cast_t<S, slk_f32>(n, src, dst, cnt); break;
    }
}

void slk_cast(size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt, sl_cast_count *cnt)
{
    if (st == dt) { /* a copy loses nothing */
        SL_CHECK_CUDA(cudaMemcpy(dst, src, n * (st == SL_F32 ? 4 : 2), cudaMemcpyDeviceToDevice));
        return;
    }
    switch (st) {
    case SL_F16: cast_from<slk_f16>(n, src, dst, dt, cnt); break;
    case SL_BF16: cast_from<slk_bf16>(n, src, dst, dt, cnt); break;
    default: cast_from<slk_f32>(n, src, dst, dt, cnt); break;
    }
}
