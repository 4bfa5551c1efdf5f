/* train_gemm_peak.c — the GEMM rate this run's ranks reach at the model's largest GEMM (and the
 * timing of one GEMM shape that the step's prediction calibrates each of its shapes with),
 * measured in the run, every rank at once as during its steps: the ceiling a training row's
 * tflops is read against (gemm_frac = tflops / gemm_peak). A step is its GEMMs and the
 * element-wise work between them (softmax, layer norm, GELU, the optimizer); a step near the
 * GEMM's rate is dominated by its GEMMs, one far below it by the rest or by waiting. Taken in the
 * same run so that the ratio holds on a machine whose load or clock moves between runs. */
#include <math.h>
#include <stdio.h>

#include "train_internal.h"

/* The largest GEMM of a step on `rows` samples, C (n x m) = A (n x k) B^T: the GPT's MLP
 * up-projection (rows x T tokens, h -> 4h), the MLP's widest layer. */
static void largest_gemm(const sl_mlp *m, int rows, int *n, int *mm, int *k)
{
    if (sl_mlp_is_gpt(m)) {
        *n = rows * m->gpt.T, *k = m->gpt.C, *mm = 4 * m->gpt.C;
        return;
    }
    *n = rows, *k = 0, *mm = 0;
    for (int l = 0; l < m->nlayers; l++)
        if ((long long)m->dims[l] * m->dims[l + 1] > (long long)*k * *mm) *k = m->dims[l], *mm = m->dims[l + 1];
}

enum { REPS = 11 }; /* the first untimed: the best of the other ten */
#define WINDOW_S 0.01     /* seconds a timing spans at most, beside 2e8 FLOPs (below) */

typedef struct cached { /* a rate measured, by dtype and shape */
    sl_dtype dt;
    int n, m, k;
    double rate;
} cached;

/* Seconds of one call of g (its operands filled, the product f32 as the layers' is), the best of
 * reps after one untimed call, every rank of comm at once: a barrier before each call, so that
 * the ranks share the machine as in their steps. A rank with active 0 only joins the barriers. */
double train_gemm_seconds(sl_backend be, const sl_pm_gemm_shape *g, int reps, int active, MPI_Comm comm,
                          double *median)
{
    double times[64];
    if (reps > 64) reps = 64;
    void *a = NULL, *b = NULL;
    float *c = NULL;
    const int lda = active ? (g->ta ? g->m : g->k) : 0, ldb = active ? (g->tb ? g->k : g->n) : 0;
    if (active) {
        const size_t es = sl_dtype_size(g->dt);
        a = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->m * g->k * es);
        b = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->k * g->n * es);
        c = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->m * g->n * sizeof(float));
        sl_k_fill(be, g->dt, (size_t)g->m * g->k, a, 0.5f);
        sl_k_fill(be, g->dt, (size_t)g->k * g->n, b, 0.25f);
        sl_k_memset0(be, c, (size_t)g->m * g->n * sizeof(float));
        sl_k_sync(be);
    }
    /* a GEMM under 2e8 FLOPs (a few ms in f32) is timed over calls in a row, as a step runs its
     * layers' and heads': one call alone after a barrier pays the BLAS threads' wake-up, which
     * calls in a row do not, and a window of several ms spans the time slices a shared core is
     * cut into. The untimed window stops early once its calls after the first have run WINDOW_S, and the timed ones
     * take as many calls as it ran: 2e8 FLOPs of a 16-bit GEMM (converted to f32 on the cpu
     * backend, slower still under the sanitizers) take 0.1-1 s, which a 16-bit row's
     * calibration paid for every shape, where WINDOW_S of calls in a row times them as well */
    const double flops = active ? 2.0 * g->m * g->n * (double)g->k : 1;
    int calls = flops >= 2e8 ? 1 : flops * 1000 <= 2e8 ? 1000 : (int)ceil(2e8 / flops);
    double best = INFINITY;
    for (int r = 0; r <= reps; r++) {
        SL_CHECK_MPI(MPI_Barrier(comm));
        if (!active) continue;
        const double t0 = sl_now();
        double t1 = t0; /* the untimed window: after its first call (which pays the wake-up) */
        int n = 0;
        while (n < calls) {
            sl_k_gemm(be, g->ta, g->tb, g->m, g->n, g->k, 1.0f, a, lda, b, ldb, (float)g->beta, c, g->n, g->dt, SL_F32);
            n++;
            if (r == 0 && n < calls) { /* it stops once the calls after the first ran WINDOW_S */
                sl_k_sync(be);
                if (n == 1) t1 = sl_now();
                else if (sl_now() - t1 >= WINDOW_S) calls = n;
            }
        }
        sl_k_sync(be);
        const double dt = (sl_now() - t0) / n;
        if (r > 0) times[r - 1] = dt, best = dt < best ? dt : best;
    }
    if (active) sl_k_free(be, a), sl_k_free(be, b), sl_k_free(be, c);
    if (median) {
        sl_stats st;
        sl_stats_compute(times, active ? reps : 0, &st);
        *median = active ? st.median : INFINITY;
    }
    return best;
}

double train_gemm_peak(const sl_train *t, int rows, char *shape, size_t len)
{
    static cached seen[16];
    static int nseen;
    const sl_mlp *m = t->m;
    int n, mm, k;
    rows = rows > 0 ? rows : 1;
    largest_gemm(m, rows, &n, &mm, &k);
    snprintf(shape, len, "%dx%dx%d", n, mm, k);
    /* every rank asks with its own rows; all must measure, or none */
    int mine = -1, all = -1;
    for (int i = 0; i < nseen; i++)
        if (seen[i].dt == t->dtype && seen[i].n == n && seen[i].m == mm && seen[i].k == k) mine = i;
    SL_CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, t->ctx->comm));
    if (all >= 0) return seen[mine].rate;
    /* operands in the run's dtype, the product in f32 (the 16-bit layers' GEMMs: f32 accumulation
     * into an f32 product before the bias and the cast) */
    const sl_pm_gemm_shape g = {.ta = 0, .tb = 1, .m = n, .n = mm, .k = k, .beta = 0, .dt = t->dtype};
    const double best = train_gemm_seconds(t->be, &g, REPS - 1, 1, t->ctx->comm, NULL);
    double rate = 2.0 * n * mm * (double)k / best / 1e12, sum = 0;
    SL_CHECK_MPI(MPI_Allreduce(&rate, &sum, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    if (mine < 0 && nseen < (int)(sizeof seen / sizeof *seen)) seen[nseen++] = (cached){t->dtype, n, mm, k, sum};
    else if (mine >= 0) seen[mine].rate = sum;
    return sum;
}
