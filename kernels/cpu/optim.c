/* cpu/optim.c — optimizer updates on fp32 master weights: SGD with momentum (PyTorch's
 * form, weight decay added to the gradient) and AdamW (decoupled weight decay). Each element
 * is independent, so a shard updated alone gives the same bits as the whole tensor. */
#include <math.h>

#include "cpu/cpu.h"

void sl_cpu_sgd_step(const sl_sgd *o, size_t n, float *w, const float *g, float *v)
{
    const float lr = o->lr, mu = o->momentum, wd = o->weight_decay;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        if (v) d = v[i] = mu * v[i] + d; /* no state without momentum */
        w[i] -= lr * d;
    }
}

/* One slice of AdamW, cloned per ISA (cpu.h): its sqrt and division per element keep the
 * baseline's 4-wide loop below memory speed. simd: w, g, m and v never overlap; sqrtf is one
 * correctly rounded instruction (the kernels are built with -fno-math-errno), so every lane
 * and every variant gives the scalar loop's bits. */
SL_CPU_CLONES static void adamw_block(size_t n, float *w, const float *g, float *m, float *v,
                                      float b1, float b2, float lr, float eps, float wd,
                                      float c1, float c2)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = m[i] = b1 * m[i] + (1.0f - b1) * gi;
        float vi = v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        w[i] -= lr * (wd * w[i] + (mi * c1) / (sqrtf(vi * c2) + eps));
    }
}

void sl_cpu_adamw_step(const sl_adamw *o, size_t n, float *w, const float *g, float *m,
                       float *v)
{
    const float b1 = o->beta1, b2 = o->beta2, lr = o->lr, eps = o->eps, wd = o->weight_decay;
    /* Bias corrections in double: 1 - beta^t loses digits in f32 for beta2 near 1. */
    const float c1 = (float)(1.0 / (1.0 - pow(b1, (double)o->step)));
    const float c2 = (float)(1.0 / (1.0 - pow(b2, (double)o->step)));
    size_t nb = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t b = 0; b < nb; b++) {
        size_t lo = b * SL_CPU_VBLOCK, k = n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK;
        adamw_block(k, w + lo, g + lo, m + lo, v + lo, b1, b2, lr, eps, wd, c1, c2);
    }
}
