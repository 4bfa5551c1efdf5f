/* gemm_rate.c — the GEMM throughput rows of precision.c (see gemm_rate.h). On the cpu backend
 * the 16-bit GEMM is OpenBLAS's bf16 kernel where it has one and otherwise the operands widened
 * to f32 first (sl_k_gemm_impl says which, in the row); on cuda it is cublasGemmEx on tensor
 * cores. The row's check: 64 entries of C against sl_ref_gemm_at on the rounded operands, to
 * n f32 roundings of the sum of |terms| (accumulation is in f32 whatever the operand type). */
#include <math.h>
#include <stdlib.h>

#include "kernels.h"
#include "gemm_rate.h"
#include "ref.h"
#include "sl_half.h"
#include "sl_rng.h"

typedef struct gemm_arg {
    sl_backend be;
    sl_dtype dt;
    int n;
    void *a, *b;
    float *c;
} gemm_arg;

static void gemm_body(void *p)
{
    gemm_arg *g = p;
    sl_k_gemm(g->be, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n, g->dt, SL_F32);
    sl_k_sync(g->be);
}

void gemm_rate_rows(sl_ctx *ctx, sl_backend be, int n)
{
    static const sl_dtype types[] = {SL_F32, SL_F16, SL_BF16};
    const size_t nn = (size_t)n * n;
    float *ha = malloc(nn * sizeof *ha), *hb = malloc(nn * sizeof *hb);
    if (!ha || !hb) SL_FATAL("out of memory for two %d x %d matrices", n, n);
    double f32_rate = NAN;
    for (int t = 0; t < 3; t++) {
        const sl_dtype dt = types[t];
        /* operands rounded to dt, so the reference sees what the GEMM sees */
        for (size_t i = 0; i < nn; i++) {
            ha[i] = sl_round_to(dt, sl_rng_normal(1, i));
            hb[i] = sl_round_to(dt, sl_rng_normal(2, i));
        }
        gemm_arg g = {be, dt, n, sl_k_malloc(be, SL_MEM_DATA, nn * sl_dtype_size(dt)),
                      sl_k_malloc(be, SL_MEM_DATA, nn * sl_dtype_size(dt)),
                      sl_k_malloc(be, SL_MEM_DATA, nn * sizeof(float))};
        float *up = sl_k_upload(be, SL_MEM_OTHER, ha, nn * sizeof(float));
        sl_k_cast(be, nn, up, SL_F32, g.a, dt, NULL);
        sl_k_memcpy(be, up, hb, nn * sizeof(float), SL_K_H2D);
        sl_k_cast(be, nn, up, SL_F32, g.b, dt, NULL);
        sl_k_free(be, up);
        sl_stats st;
        /* fixed counts: the table is a side measurement, not the run's -n/-w training steps */
        sl_time_loop_n(ctx, 2, 10, gemm_body, &g, &st);
        float *hc = sl_k_download(be, g.c, nn * sizeof(float));
        double worst = 0;
        for (int k = 0; k < 64; k++) {
            int i = (int)(sl_rng_u64(3, (uint64_t)k) % (uint64_t)n), j = (int)(sl_rng_u64(4, (uint64_t)k) % (uint64_t)n);
            double mag, want = sl_ref_gemm_at(0, 0, n, ha, n, hb, n, i, j, &mag);
            double r = fabs(hc[(size_t)i * n + j] - want) / (n * 0x1p-24 * mag + 1e-30);
            worst = r > worst || isnan(r) ? r : worst;
        }
        double rate = 2.0 * n * (double)nn / st.median / 1e9;
        if (dt == SL_F32) f32_rate = rate;

        sl_result r;
        sl_result_init(ctx, &r, "gemm");
        r.backend = sl_backend_name(be);
        r.dtype = sl_dtype_name(dt);
        sl_result_param_num(&r, "n", n);
        sl_result_param_str(&r, "impl", sl_k_gemm_impl(be, dt));
        sl_result_set_time(&r, &st);
        sl_result_metric(&r, "gflops", rate, "GFLOP/s");
        sl_result_metric(&r, "vs_f32", rate / f32_rate, "ratio");
        snprintf(r.headline, sizeof r.headline, "gflops");
        if (!ctx->opt.check) sl_result_check(&r, SL_CHECK_SKIPPED, NAN, NULL);
        else if (worst <= 1) sl_result_check(&r, SL_CHECK_PASS, worst, NULL);
        else sl_result_check(&r, SL_CHECK_FAIL, worst, "%s GEMM: an entry is %.3g times the bound from the reference", sl_dtype_name(dt), worst);
        sl_result_emit(ctx, &r);
        free(hc);
        sl_k_free(be, g.a), sl_k_free(be, g.b), sl_k_free(be, g.c);
    }
    free(ha), free(hb);
}
