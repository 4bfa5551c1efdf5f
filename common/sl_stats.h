/* sl_stats.h — summary statistics of per-iteration times.
 *
 * Every figure scalelab reports is computed from per-iteration samples in which each
 * iteration's time is the slowest rank's (sl_stats_slowest_rank), because a collective step
 * is only done when its last rank is done.
 */
#ifndef SL_STATS_H
#define SL_STATS_H

#include <mpi.h>

#define SL_STATS_MAX_COUNTERS 8
#define SL_STATS_SKETCH 32 /* samples kept in a row: enough for a rank test between two runs */

typedef struct sl_stats {
    int n;                 /* samples */
    double min, median, mean, max;
    double p95;            /* linear interpolation between order statistics (R type 7) */
    double stddev;         /* sample standard deviation (n-1); 0 for n < 2 */
    double cv;             /* stddev / mean; 0 when the mean is 0 */
    /* OSU's statistic, from the same samples: the mean over the iterations on each rank,
     * averaged over the ranks (osu_allreduce's "Avg Latency"; nccl-tests' time with its
     * default -a 1). Lower than the median of the slowest rank: it leaves out the skew with
     * which ranks leave the barrier. NaN where the samples were not per rank. */
    double rank_mean;
    /* The hardware counters (--papi) read around the timed loop these statistics come from
     * (sl_time_loop), in the order of the run's events; none when ncounters is 0. A result
     * row given these statistics carries them (sl_result_emit). */
    int ncounters;
    long long counters[SL_STATS_MAX_COUNTERS];
    /* A compact sketch of the samples, for a rank test between runs (results/schema.md,
     * time.samples): all of them in iteration order when n <= SL_STATS_SKETCH
     * (sketch_all = 1), else SL_STATS_SKETCH order statistics at the quantiles
     * (i + 0.5) / SL_STATS_SKETCH of the sorted samples (sketch_all = 0). nsketch =
     * min(n, SL_STATS_SKETCH). */
    int nsketch, sketch_all;
    double sketch[SL_STATS_SKETCH];
} sl_stats;

/* Fills s from x[0..n) (x is not modified), the sketch included. n == 0 gives all zeros. */
void sl_stats_compute(const double *x, int n, sl_stats *s);

/* Multiplies every time in s by f (the sketch too): per-operation times from a loop's. */
void sl_stats_scale(sl_stats *s, double f);

/* Percentile q in [0,1] of sorted[0..n), linear interpolation. */
double sl_percentile_sorted(const double *sorted, int n, double q);

/* out[i] = max over ranks of local[i]: each iteration's time is its slowest rank's. */
void sl_stats_slowest_rank(const double *local, double *out, int n, MPI_Comm comm);

/* The statistics of a timed loop from this rank's n iteration times (collective over comm):
 * min, median, ... over each iteration's slowest rank, and rank_mean over the same samples. */
void sl_stats_over_ranks(const double *local, int n, MPI_Comm comm, sl_stats *s);

/* t = alpha + beta * S fitted to n points by least squares on the relative error, so that
 * microsecond latencies at small sizes weigh as much as milliseconds at large ones; *max_rel is
 * the largest relative error of the fit at the points. Fewer than 2 distinct sizes: NAN. */
void sl_fit_alpha_beta(const double *S, const double *t, int n, double *alpha, double *beta, double *max_rel);

#endif
