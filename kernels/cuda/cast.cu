/* cuda/cast.cu — f32/f16/bf16 conversions with underflow, subnormal and overflow counts, and
 * the store of weight updates into 16-bit weights counting those lost to rounding; twin of
 * cpu/cast.c, using the CUDA conversion intrinsics (half.cuh). */
#include "cuda/cuda_util.cuh"
#include "cuda/half.cuh"
#include "cuda/reduce.cuh"

template <class S, class D>
__global__ void cast_kernel(size_t n, const typename S::T *src, typename D::T *dst,
                            double *partial)
{
    double under = 0, over = 0, sub = 0, zero = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = S::load(src[i]);
        typename D::T o = D::store(v);
        dst[i] = o;
        float r = D::load(o);
        under += r == 0.0f && v != 0.0f && isfinite(v);
        zero += v == 0.0f;
        sub += r != 0.0f && fabsf(r) < D::min_normal() && v != 0.0f && isfinite(v);
        over += isinf(r) && isfinite(v);
    }
    under = slk_block_sum(under);
    over = slk_block_sum(over);
    sub = slk_block_sum(sub);
    zero = slk_block_sum(zero);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = under;
        partial[SLK_RED_BLOCKS + blockIdx.x] = over;
        partial[2 * SLK_RED_BLOCKS + blockIdx.x] = sub;
        partial[3 * SLK_RED_BLOCKS + blockIdx.x] = zero;
    }
}

template <class S, class D>
static void cast_t(size_t n, const void *src, void *dst, sl_cast_count *cnt)
{
    cast_kernel<S, D><<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, (const typename S::T *)src,
                                                       (typename D::T *)dst, slk_scratch());
    SLK_LAUNCHED();
    double uo[4];
    slk_collect(4, uo);
    if (cnt) {
        cnt->underflow += (unsigned long long)uo[0];
        cnt->overflow += (unsigned long long)uo[1];
        cnt->subnormal += (unsigned long long)uo[2];
        cnt->zero += (unsigned long long)uo[3];
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
    if (st == dt && !cnt) { /* a copy loses nothing; with counts, the kernel counts the zeros */
        SL_CHECK_CUDA(cudaMemcpy(dst, src, n * sl_dtype_size(st), cudaMemcpyDeviceToDevice));
        return;
    }
    switch (st) {
    case SL_F16: cast_from<slk_f16>(n, src, dst, dt, cnt); break;
    case SL_BF16: cast_from<slk_bf16>(n, src, dst, dt, cnt); break;
    default: cast_from<slk_f32>(n, src, dst, dt, cnt); break;
    }
}

/* w16 = round(w); counts elements whose w differs from the old w16 value but rounds back to it */
template <class D>
__global__ void cast_update_kernel(size_t n, const float *w, typename D::T *w16, double *partial)
{
    double lost = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        typename D::T old = w16[i], r = D::store(w[i]);
        lost += w[i] != D::load(old) && r == old;
        w16[i] = r;
    }
    lost = slk_block_sum(lost);
    if (threadIdx.x == 0) partial[blockIdx.x] = lost;
}

size_t slk_cast_update(sl_dtype dt, size_t n, const float *w, void *w16)
{
    if (dt == SL_F32) { /* f32 holds every f32 update */
        SL_CHECK_CUDA(cudaMemcpy(w16, w, n * sizeof(float), cudaMemcpyDeviceToDevice));
        return 0;
    }
    if (dt == SL_F16)
        cast_update_kernel<slk_f16><<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, w, (uint16_t *)w16, slk_scratch());
    else
        cast_update_kernel<slk_bf16><<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, w, (uint16_t *)w16, slk_scratch());
    SLK_LAUNCHED();
    double lost;
    slk_collect(1, &lost);
    return (size_t)lost;
}
