/* cuda/optim.cu — SGD with momentum and AdamW on fp32 master weights; twins of cpu/optim.c
 * (same formulas in the same order, so results agree to rounding of the math library). */
#include <math.h>

#include "cuda/cuda_util.cuh"

__global__ void sgd_kernel(size_t n, float lr, float mu, float wd, float *w, const float *g,
                           float *v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = g[i] + wd * w[i];
        if (v) d = v[i] = mu * v[i] + d;
        w[i] -= lr * d;
    }
}

void slk_sgd_step(const sl_sgd *o, size_t n, float *w, const float *g, float *v)
{
    sgd_kernel<<<slk_blocks(n), SLK_THREADS>>>(n, o->lr, o->momentum, o->weight_decay, w, g, v);
    SLK_LAUNCHED();
}

__global__ void adamw_kernel(size_t n, float lr, float b1, float b2, float eps, float wd,
                             float c1, float c2, float *w, const float *g, float *m, float *v)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = m[i] = b1 * m[i] + (1.0f - b1) * gi;
        float vi = v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        w[i] -= lr * (wd * w[i] + (mi * c1) / (sqrtf(vi * c2) + eps));
    }
}

void slk_adamw_step(const sl_adamw *o, size_t n, float *w, const float *g, float *m, float *v)
{
    /* bias corrections computed on the host in double, as the cpu twin */
    float c1 = (float)(1.0 / (1.0 - pow((double)o->beta1, (double)o->step)));
    float c2 = (float)(1.0 / (1.0 - pow((double)o->beta2, (double)o->step)));
    adamw_kernel<<<slk_blocks(n), SLK_THREADS>>>(n, o->lr, o->beta1, o->beta2, o->eps,
                                                 o->weight_decay, c1, c2, w, g, m, v);
    SLK_LAUNCHED();
}
