/* gemm_rate.c — the GEMM throughput rows of precision.c (see gemm_rate.h). On the cpu backend
 * the 16-bit GEMM is OpenBLAS's bf16 kernel where it has one and otherwise the operands widened
 * to f32 first (sl_k_gemm_impl says which, in the row); on cuda it is cublasGemmEx on tensor
 * cores. The row's check: 64 entries of C against sl_ref_gemm_at on the rounded operands, to
 * n f32 roundings of the sum of |terms| (accumulation is in f32 whatever the operand type).
 *
 * The three types are timed in alternation, ROUNDS rounds of a short batch each, and each
 * type's time is the median over the rounds: on a shared machine the load moves, and a ratio of
 * two measurements taken at different moments would measure the load rather than the GEMMs. */
#include <math.h>
#include <stdlib.h>

#include "gemm_rate.h"
#include "kernels.h"
#include "ref.h"
#include "sl_half.h"
#include "sl_rng.h"

#define NTYPES 3
#define ROUNDS 15

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

/* A[n,n], B[n,n] in dt from fixed normals (ha, hb receive the values as rounded to dt). */
static void make_operands(gemm_arg *g, float *ha, float *hb)
{
    const size_t nn = (size_t)g->n * g->n, es = sl_dtype_size(g->dt);
    for (size_t i = 0; i < nn; i++) {
        ha[i] = sl_round_to(g->dt, sl_rng_normal(1, i));
        hb[i] = sl_round_to(g->dt, sl_rng_normal(2, i));
    }
    g->a = sl_k_malloc(g->be, SL_MEM_DATA, nn * es);
    g->b = sl_k_malloc(g->be, SL_MEM_DATA, nn * es);
    g->c = sl_k_malloc(g->be, SL_MEM_DATA, nn * sizeof(float));
    float *up = sl_k_upload(g->be, SL_MEM_OTHER, ha, nn * sizeof(float));
    sl_k_cast(g->be, nn, up, SL_F32, g->a, g->dt, NULL);
    sl_k_memcpy(g->be, up, hb, nn * sizeof(float), SL_K_H2D);
    sl_k_cast(g->be, nn, up, SL_F32, g->b, g->dt, NULL);
    sl_k_free(g->be, up);
}

/* Largest error of 64 entries of C over its bound (<= 1 passes). */
static double check_entries(const gemm_arg *g, const float *ha, const float *hb)
{
    const int n = g->n;
    float *hc = sl_k_download(g->be, g->c, (size_t)n * n * sizeof(float));
    double worst = 0;
    for (int k = 0; k < 64; k++) {
        int i = (int)(sl_rng_u64(3, (uint64_t)k) % (uint64_t)n), j = (int)(sl_rng_u64(4, (uint64_t)k) % (uint64_t)n);
        double mag, want = sl_ref_gemm_at(0, 0, n, ha, n, hb, n, i, j, &mag);
        double r = fabs(hc[(size_t)i * n + j] - want) / (n * 0x1p-24 * mag + 1e-30);
        worst = r > worst || isnan(r) ? r : worst;
    }
    free(hc);
    return worst;
}

void gemm_rate_rows(sl_ctx *ctx, sl_backend be, int n)
{
    static const sl_dtype types[NTYPES] = {SL_F32, SL_F16, SL_BF16};
    const size_t nn = (size_t)n * n;
    gemm_arg g[NTYPES];
    double worst[NTYPES];
    float *ha = malloc(nn * sizeof *ha), *hb = malloc(nn * sizeof *hb);
    if (!ha || !hb) SL_FATAL("out of memory for two %d x %d matrices", n, n);
    for (int t = 0; t < NTYPES; t++) {
        g[t] = (gemm_arg){.be = be, .dt = types[t], .n = n};
        make_operands(&g[t], ha, hb);
        gemm_body(&g[t]);
        worst[t] = check_entries(&g[t], ha, hb);
    }
    /* a round's batch: about 10 ms of f32 GEMMs (the same count for every type and rank) */
    sl_stats st;
    sl_slowdown_ceiling(1); /* f32 is the ceiling of vs_f32: SL_TEST_SLOWDOWN leaves it */
    sl_time_loop_n(ctx, 1, 3, gemm_body, &g[0], &st);
    sl_slowdown_ceiling(0);
    double want = 0.01 / (st.median > 1e-9 ? st.median : 1e-9);
    int batch = want < 1 ? 1 : want > 1000 ? 1000 : (int)want;
    SL_CHECK_MPI(MPI_Bcast(&batch, 1, MPI_INT, 0, ctx->comm));
    double rounds[NTYPES][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int t = 0; t < NTYPES; t++) {
            if (types[t] == SL_F32) sl_slowdown_ceiling(1);
            sl_time_loop_n(ctx, 0, batch, gemm_body, &g[t], &st);
            if (types[t] == SL_F32) sl_slowdown_ceiling(0);
            rounds[t][r] = st.median;
        }

    double f32_rate = NAN;
    for (int t = 0; t < NTYPES; t++) {
        sl_stats_compute(rounds[t], ROUNDS, &st);
        double rate = 2.0 * n * (double)nn / st.median / 1e9;
        if (types[t] == SL_F32) f32_rate = rate;
        sl_result r;
        sl_result_init(ctx, &r, "gemm");
        r.backend = sl_backend_name(be);
        r.dtype = sl_dtype_name(types[t]);
        r.iters = ROUNDS * batch;
        r.warmup = 0;
        sl_result_param_num(&r, "n", n);
        sl_result_param_num(&r, "rounds", ROUNDS);
        sl_result_param_str(&r, "impl", sl_k_gemm_impl(be, types[t]));
        sl_result_set_time(&r, &st);
        sl_result_metric(&r, "gflops", rate, "GFLOP/s");
        sl_result_metric(&r, "vs_f32", rate / f32_rate, "ratio");
        snprintf(r.headline, sizeof r.headline, "gflops");
        if (types[t] != SL_F32) sl_result_gate(&r, "vs_f32"); /* f32 is the ceiling */
        if (!ctx->opt.check) sl_result_check(&r, SL_CHECK_SKIPPED, NAN, NULL);
        else if (worst[t] <= 1) sl_result_check(&r, SL_CHECK_PASS, worst[t], NULL);
        else sl_result_check(&r, SL_CHECK_FAIL, worst[t], "%s GEMM: an entry is %.3g times the bound from the reference",
                             r.dtype, worst[t]);
        sl_result_emit(ctx, &r);
        sl_k_free(be, g[t].a), sl_k_free(be, g[t].b), sl_k_free(be, g[t].c);
    }
    free(ha), free(hb);
}
