/* stats.c — min, median, mean, max, p95, stddev and cv of per-iteration times. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_stats.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sl_percentile_sorted(const double *sorted, int n, double q)
{
    if (n <= 0) return 0.0;
    if (q <= 0) return sorted[0];
    if (q >= 1) return sorted[n - 1];
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    double frac = pos - lo;
    return lo + 1 < n ? sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]) : sorted[lo];
}

void sl_stats_compute(const double *x, int n, sl_stats *s)
{
    memset(s, 0, sizeof *s);
    s->rank_mean = NAN;
    if (n <= 0) return;
    double *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) SL_FATAL("malloc(%d doubles) for statistics failed", n);
    memcpy(sorted, x, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);

    double sum = 0;
    for (int i = 0; i < n; i++) sum += sorted[i];
    s->n = n;
    s->min = sorted[0];
    s->max = sorted[n - 1];
    s->mean = sum / n;
    s->median = sl_percentile_sorted(sorted, n, 0.5);
    s->p95 = sl_percentile_sorted(sorted, n, 0.95);
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (sorted[i] - s->mean) * (sorted[i] - s->mean);
    s->stddev = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
    s->cv = s->mean != 0 ? s->stddev / s->mean : 0.0;
    s->rank_mean = NAN;
    /* the sketch: the samples themselves while they fit, else evenly spaced order statistics
     * (quantile (i + 0.5) / K, the sample of rank floor(q n): no interpolation, so every value
     * is a measured one) */
    s->sketch_all = n <= SL_STATS_SKETCH;
    s->nsketch = s->sketch_all ? n : SL_STATS_SKETCH;
    for (int i = 0; i < s->nsketch; i++)
        s->sketch[i] = s->sketch_all ? x[i] : sorted[(int)((i + 0.5) / SL_STATS_SKETCH * n)];
    free(sorted);
}

void sl_stats_scale(sl_stats *s, double f)
{
    s->min *= f; s->median *= f; s->mean *= f; s->max *= f; s->p95 *= f; s->stddev *= f;
    s->rank_mean *= f;
    for (int i = 0; i < s->nsketch; i++) s->sketch[i] *= f;
}

void sl_stats_slowest_rank(const double *local, double *out, int n, MPI_Comm comm)
{
    if (n <= 0) return;
    SL_CHECK_MPI(MPI_Allreduce(local, out, n, MPI_DOUBLE, MPI_MAX, comm));
}

void sl_stats_over_ranks(const double *local, int n, MPI_Comm comm, sl_stats *s)
{
    if (n <= 0) {
        sl_stats_compute(local, 0, s);
        return;
    }
    double *slowest = malloc((size_t)n * sizeof *slowest);
    if (!slowest) SL_FATAL("out of memory for %d iteration times", n);
    sl_stats_slowest_rank(local, slowest, n, comm);
    sl_stats_compute(slowest, n, s);
    free(slowest);
    double mine = 0, sum = 0;
    for (int i = 0; i < n; i++) mine += local[i];
    mine /= n;
    int nranks;
    MPI_Comm_size(comm, &nranks);
    SL_CHECK_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm));
    s->rank_mean = sum / nranks;
}

/* minimise sum ((t_i - alpha - beta S_i) / t_i)^2: the normal equations of the weighted fit */
void sl_fit_alpha_beta(const double *S, const double *t, int n, double *alpha, double *beta, double *max_rel)
{
    double a11 = 0, a12 = 0, a22 = 0, b1 = 0, b2 = 0;
    for (int i = 0; i < n; i++) {
        double w = 1.0 / (t[i] * t[i]);
        a11 += w; a12 += w * S[i]; a22 += w * S[i] * S[i];
        b1 += w * t[i]; b2 += w * S[i] * t[i];
    }
    double det = a11 * a22 - a12 * a12;
    if (n < 2 || det == 0) {
        *alpha = *beta = *max_rel = NAN;
        return;
    }
    *alpha = (b1 * a22 - b2 * a12) / det;
    *beta = (a11 * b2 - a12 * b1) / det;
    *max_rel = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs(*alpha + *beta * S[i] - t[i]) / t[i];
        if (e > *max_rel) *max_rel = e;
    }
}
