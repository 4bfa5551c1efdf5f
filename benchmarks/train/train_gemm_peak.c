/* train_gemm_peak.c — the GEMM rate this run's ranks reach at the model's largest GEMM,
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

typedef struct cached { /* a rate measured, by dtype and shape */
    sl_dtype dt;
    int n, m, k;
    double rate;
} cached;

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
    const size_t es = sl_train_esize(t);
    void *a = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)n * k * es), *b = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)mm * k * es);
    float *c = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)n * mm * sizeof(float));
    sl_k_fill(t->be, t->dtype, (size_t)n * k, a, 0.5f);
    sl_k_fill(t->be, t->dtype, (size_t)mm * k, b, 0.25f);
    sl_k_sync(t->be);
    SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        const double t0 = sl_now();
        sl_k_gemm(t->be, 0, 1, n, mm, k, 1.0f, a, k, b, k, 0.0f, c, mm, t->dtype, SL_F32);
        sl_k_sync(t->be);
        const double dt = sl_now() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    sl_k_free(t->be, a), sl_k_free(t->be, b), sl_k_free(t->be, c);
    double rate = 2.0 * n * mm * (double)k / best / 1e12, sum = 0;
    SL_CHECK_MPI(MPI_Allreduce(&rate, &sum, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    if (mine < 0 && nseen < (int)(sizeof seen / sizeof *seen)) seen[nseen++] = (cached){t->dtype, n, mm, k, sum};
    else if (mine >= 0) seen[mine].rate = sum;
    return sum;
}
