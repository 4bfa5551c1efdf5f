/* test_kernels_cuda.c — the cuda backend: the same double-precision reference checks as
 * test_kernels (test_kernels_checks.h), then direct agreement with the cpu twin of each kind
 * of kernel. Skipped where no CUDA device is visible (or CUDA is not built). */
#include <string.h>

#include "mlp.h"
#include "mlp_mixed.h"
#include "train_ref.h"
#include "test_kernels_checks.h"

static void agree_casts(void)
{
    /* f32 -> f16/bf16 on a dense sample: CUDA's intrinsics and sl_half.h both round to
     * nearest even, so the bits must match (NaN payloads may differ: compare NaN-ness) */
    enum { N = 1 << 20 };
    float *v = t_xmalloc(N * 4);
    uint16_t *hc = t_xmalloc(N * 2), *hg = t_xmalloc(N * 2);
    for (sl_dtype dt = SL_F16; dt <= SL_BF16; dt++) {
        size_t wrong = 0;
        sl_cast_count cc = {0}, cg = {0};
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < N; i++) v[i] = sl_bits_f32((uint32_t)((rep * (uint64_t)N + i) * 1021));
            sl_k_cast(SL_BACKEND_CPU, N, v, SL_F32, hc, dt, &cc);
            void *vd = sl_k_upload(SL_BACKEND_CUDA, SL_MEM_OTHER, v, N * 4), *hd = sl_k_malloc(SL_BACKEND_CUDA, SL_MEM_OTHER, N * 2);
            sl_k_cast(SL_BACKEND_CUDA, N, vd, SL_F32, hd, dt, &cg);
            sl_k_memcpy(SL_BACKEND_CUDA, hg, hd, N * 2, SL_K_D2H);
            sl_k_free(SL_BACKEND_CUDA, vd), sl_k_free(SL_BACKEND_CUDA, hd);
            for (size_t i = 0; i < N; i++)
                wrong += isnan(v[i]) ? !isnan(t_load(dt, hg, i)) : hc[i] != hg[i];
        }
        ok(wrong == 0, "f32 -> %s: cuda and cpu give the same bits on 4M values", sl_dtype_name(dt));
        ok(cc.underflow == cg.underflow && cc.overflow == cg.overflow && cc.subnormal == cg.subnormal,
           "f32 -> %s: the same underflow, subnormal and overflow counts", sl_dtype_name(dt));
    }
    free(v), free(hc), free(hg);
}

static void agree_rng(void)
{
    const size_t n = 100000;
    float *c = t_xmalloc(n * 4), *g = t_xmalloc(n * 4);
    float *d = sl_k_malloc(SL_BACKEND_CUDA, SL_MEM_OTHER, n * 4);
    sl_k_rng_uniform(SL_BACKEND_CPU, 3, 77, n, c, 0.0f, 1.0f);
    sl_k_rng_uniform(SL_BACKEND_CUDA, 3, 77, n, d, 0.0f, 1.0f);
    sl_k_memcpy(SL_BACKEND_CUDA, g, d, n * 4, SL_K_D2H);
    ok(memcmp(c, g, n * 4) == 0, "uniform: the same bits on cuda and cpu");
    sl_k_rng_normal(SL_BACKEND_CPU, 3, 77, n, c, 0.0f, 1.0f);
    sl_k_rng_normal(SL_BACKEND_CUDA, 3, 77, n, d, 0.0f, 1.0f);
    sl_k_memcpy(SL_BACKEND_CUDA, g, d, n * 4, SL_K_D2H);
    /* computed in double and rounded once: the device log/cos may differ by an ulp of
     * double, which changes the f32 result by at most one f32 ulp */
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(c[i] - g[i]) / (fabs(c[i]) * 0x1p-23 + 1e-30));
    ok(worst <= 1.0, "normal: cuda and cpu within one f32 ulp (%.2g ulp)", worst);
    sl_k_free(SL_BACKEND_CUDA, d);
    free(c), free(g);
}

static void agree_training(void)
{
    /* 30 steps of the MLP on the synthetic task on each backend: the curves agree to the
     * accumulated rounding differences of the GEMMs (different summation orders) */
    enum { STEPS = 30 };
    double curve[2][STEPS];
    for (int b = 0; b < 2; b++) {
        sl_backend be = b ? SL_BACKEND_CUDA : SL_BACKEND_CPU;
        const int in = 32, out = 8, batch = 32;
        sl_mlp m;
        sl_mlp_init(&m, be, 3, in, 64, out, SL_ACT_GELU);
        float *p = sl_k_malloc(be, SL_MEM_PARAMS, m.nparams * 4);
        sl_optim o = {.kind = SL_OPTIM_SGD, .sgd = {.lr = 0.05f, .momentum = 0.9f}};
        sl_task task;
        sl_task_init(&task, be, in, out, 5, batch);
        sl_train_serial(&m, &task, &o, batch, STEPS, 5, p, curve[b]);
        sl_task_free(&task);
        sl_k_free(be, p);
    }
    double worst = 0;
    for (int s = 0; s < STEPS; s++) worst = fmax(worst, fabs(curve[0][s] - curve[1][s]) / curve[0][s]);
    ok(worst < 1e-3, "30 training steps: cuda and cpu loss curves agree (%.2g relative)", worst);
}

/* One mixed-precision step (kernels/mlp_mixed.h) in f16 and bf16 on each backend: cuBLAS's
 * tensor-core GEMMs and the cpu's accumulate in f32 in different orders, so a value near a
 * rounding boundary of the 16-bit type may round the other way; 8 units of the type's
 * epsilon of the largest gradient bounds that (a wrong operand is off by O(1)). */
static void agree_mixed(void)
{
    for (sl_dtype dt = SL_F16; dt <= SL_BF16; dt++) {
        const int in = 32, out = 8, batch = 32;
        double loss[2];
        float *g[2];
        sl_mlp m;
        for (int b = 0; b < 2; b++) {
            sl_backend be = b ? SL_BACKEND_CUDA : SL_BACKEND_CPU;
            sl_mlp_init(&m, be, 3, in, 64, out, SL_ACT_GELU);
            sl_optim o = {.kind = SL_OPTIM_SGD, .sgd = {.lr = 0.05f}};
            sl_task task;
            sl_task_init(&task, be, in, out, 5, batch);
            float *x = sl_k_malloc(be, SL_MEM_DATA, (size_t)batch * in * 4), *y = sl_k_malloc(be, SL_MEM_DATA, (size_t)batch * out * 4);
            sl_task_batch(&task, 0, batch, x, y);
            sl_mixed mx;
            sl_mixed_init(&mx, &m, dt, 1, batch, 5, &o);
            loss[b] = sl_mixed_forward_backward(&mx, x, y, sl_task_loss_norm(&task, batch), 1024.0f);
            sl_mixed_unscale(&mx, 1024.0f);
            g[b] = sl_k_download(be, mx.g32, m.nparams * 4);
            sl_mixed_free(&mx);
            sl_k_free(be, x), sl_k_free(be, y);
            sl_task_free(&task);
        }
        double gmax = 0, e = 0, eps = dt == SL_F16 ? 0x1p-10 : 0x1p-7;
        for (size_t i = 0; i < m.nparams; i++) {
            gmax = fmax(gmax, fabs(g[0][i]));
            e = fmax(e, fabs((double)g[0][i] - g[1][i]));
        }
        ok(e <= 8 * eps * gmax && fabs(loss[0] - loss[1]) <= 8 * eps * loss[0],
           "%s mixed step: cuda and cpu gradients within 8 eps (%.3g of %.3g), losses %.6g %.6g",
           sl_dtype_name(dt), e, gmax, loss[0], loss[1]);
        free(g[0]), free(g[1]);
    }
    /* weight updates lost to rounding: the same count on both */
    uint16_t w16[3] = {sl_f32_to_f16(1.0f), sl_f32_to_f16(1.0f), sl_f32_to_f16(1000.0f)};
    float w[3] = {1.0f + 0x1p-12f, 1.0f + 0x1p-10f, 1000.25f};
    void *wd = sl_k_upload(SL_BACKEND_CUDA, SL_MEM_OTHER, w, sizeof w), *hd = sl_k_upload(SL_BACKEND_CUDA, SL_MEM_OTHER, w16, sizeof w16);
    is_int(sl_k_cast_update(SL_BACKEND_CUDA, SL_F16, 3, wd, hd), 2, "cuda: two f16 weight updates lost to rounding");
    sl_k_free(SL_BACKEND_CUDA, wd), sl_k_free(SL_BACKEND_CUDA, hd);
}

int main(void)
{
    char why[256];
    if (sl_k_backend_resolve(SL_BACKEND_CUDA, why, sizeof why) != SL_BACKEND_CUDA) {
        /* the reason (not built / no device) goes to the diagnostics */
        diag("%s", why);
        skip_all("no CUDA device");
    }
    T_BE = SL_BACKEND_CUDA;
    diag("GEMM on cuda: f32 %s; f16 %s; bf16 %s", sl_k_gemm_impl(T_BE, SL_F32),
         sl_k_gemm_impl(T_BE, SL_F16), sl_k_gemm_impl(T_BE, SL_BF16));
    run_all_checks();
    agree_casts();
    agree_rng();
    agree_training();
    agree_mixed();
    done_testing();
    return exit_status();
}
