/* cuda/elementwise.cu — bias add and its gradient, activations, axpby/fill for every dtype and
 * the loss-scaling check; twins of cpu/elementwise.c. */
#include "cuda/cuda_util.cuh"
#include "cuda/half.cuh"
#include "cuda/reduce.cuh"

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* y[rows, cols] += bias[cols] */
__global__ void bias_add_kernel(size_t rows, size_t cols, float *y, const float *bias)
{
    GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

void slk_bias_add(int rows, int cols, float *y, const float *bias)
{
    size_t n = (size_t)rows * cols;
    bias_add_kernel<<<slk_blocks(n), SLK_THREADS>>>(rows, cols, y, bias);
    SLK_LAUNCHED();
}

/* One thread per column, summing rows in order (as the cpu twin): adjacent threads read
 * adjacent addresses, and the result is deterministic. */
__global__ void bias_grad_kernel(int rows, int cols, const float *dy, float *dbias)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (int i = 0; i < rows; i++) s += dy[(size_t)i * cols + j];
    dbias[j] += s;
}

void slk_bias_grad(int rows, int cols, const float *dy, float *dbias)
{
    bias_grad_kernel<<<(cols + SLK_THREADS - 1) / SLK_THREADS, SLK_THREADS>>>(rows, cols, dy,
                                                                            dbias);
    SLK_LAUNCHED();
}

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

__global__ void act_forward_kernel(int act, size_t n, const float *x, float *y)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i];
        if (act == SL_ACT_RELU) v = v > 0.0f ? v : 0.0f;
        else if (act == SL_ACT_GELU) v = 0.5f * v * (1.0f + tanhf(GELU_C * (v + GELU_A * v * v * v)));
        y[i] = v;
    }
}

__global__ void act_backward_kernel(int act, size_t n, const float *x, const float *dy, float *dx)
{
    GRID_STRIDE(i, n)
    {
        float v = x[i], d = 1.0f;
        if (act == SL_ACT_RELU) {
            d = v > 0.0f ? 1.0f : 0.0f;
        } else if (act == SL_ACT_GELU) {
            float t = tanhf(GELU_C * (v + GELU_A * v * v * v));
            d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * GELU_A * v * v);
        }
        /* relu selects rather than multiplies, as the cpu twin: 0 * inf stays 0 */
        dx[i] = act == SL_ACT_RELU ? (v > 0.0f ? dy[i] : 0.0f) : dy[i] * d;
    }
}

void slk_act_forward(sl_act act, size_t n, const float *x, float *y)
{
    if (act == SL_ACT_NONE && x == y) return;
    act_forward_kernel<<<slk_blocks(n), SLK_THREADS>>>((int)act, n, x, y);
    SLK_LAUNCHED();
}

void slk_act_backward(sl_act act, size_t n, const float *x, const float *dy, float *dx)
{
    if (act == SL_ACT_NONE && dx == dy) return;
    act_backward_kernel<<<slk_blocks(n), SLK_THREADS>>>((int)act, n, x, dy, dx);
    SLK_LAUNCHED();
}

/* y = alpha x + beta y in the dtype's arithmetic; x unread for alpha 0, y for beta 0 */
template <class D>
__global__ void axpby_kernel(size_t n, double alpha, const typename D::T *x, double beta,
                             typename D::T *y)
{
    typedef typename D::A A;
    A al = (A)alpha, be = (A)beta;
    GRID_STRIDE(i, n)
    {
        A v = al == (A)0 ? (A)0 : al * D::load(x[i]);
        if (be != (A)0) v += be * D::load(y[i]);
        y[i] = D::store(v);
    }
}

template <class D>
static void axpby_t(size_t n, double alpha, const void *x, double beta, void *y)
{
    axpby_kernel<D><<<slk_blocks(n), SLK_THREADS>>>(n, alpha, (const typename D::T *)x, beta,
                                                    (typename D::T *)y);
    SLK_LAUNCHED();
}

void slk_axpby(sl_dtype dt, size_t n, double alpha, const void *x, double beta, void *y)
{
    switch (dt) {
    case SL_F32: axpby_t<slk_f32>(n, alpha, x, beta, y); break;
    case SL_F64: axpby_t<slk_f64>(n, alpha, x, beta, y); break;
    case SL_F16: axpby_t<slk_f16>(n, alpha, x, beta, y); break;
    default: axpby_t<slk_bf16>(n, alpha, x, beta, y); break;
    }
}

template <class D>
__global__ void fill_kernel(size_t n, typename D::T *x, double value)
{
    typename D::T v = D::store((typename D::A)value);
    GRID_STRIDE(i, n) x[i] = v;
}

void slk_fill(sl_dtype dt, size_t n, void *x, double value)
{
    switch (dt) {
    case SL_F32: fill_kernel<slk_f32><<<slk_blocks(n), SLK_THREADS>>>(n, (float *)x, value); break;
    case SL_F64: fill_kernel<slk_f64><<<slk_blocks(n), SLK_THREADS>>>(n, (double *)x, value); break;
    case SL_F16: fill_kernel<slk_f16><<<slk_blocks(n), SLK_THREADS>>>(n, (uint16_t *)x, value); break;
    default: fill_kernel<slk_bf16><<<slk_blocks(n), SLK_THREADS>>>(n, (uint16_t *)x, value); break;
    }
    SLK_LAUNCHED();
}

__global__ void scale_check_kernel(size_t n, float *x, float scale, double *partial)
{
    double bad = 0;
    GRID_STRIDE(i, n)
    {
        float v = x[i] * scale;
        x[i] = v;
        bad += !isfinite(v);
    }
    double s = slk_block_sum(bad);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

size_t slk_scale_check(size_t n, float *x, float scale)
{
    scale_check_kernel<<<SLK_RED_BLOCKS, SLK_THREADS>>>(n, x, scale, slk_scratch());
    SLK_LAUNCHED();
    double bad;
    slk_collect(1, &bad);
    return (size_t)bad;
}
