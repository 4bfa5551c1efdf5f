/* test_slowest.c — the slowest-rank rule on several ranks: each iteration's time is the
 * maximum over ranks (not the sum, the minimum or rank 0's), and the statistics are taken over
 * those maxima; and OSU's statistic (the mean of the per-rank means) from the same samples.
 * Run under 3 ranks by slowest.t; only rank 0 writes TAP. */
#include <math.h>
#include <stdio.h>

#include "../tap.h"
#include "sl_stats.h"

int main(void)
{
    MPI_Init(NULL, NULL);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;

    /* iteration 0: rank r took r + 1 s (slowest: the last rank); iteration 1: rank r took
     * 10 - r s (slowest: rank 0); iteration 2: every rank 5 s */
    double local[3] = {rank + 1.0, 10.0 - rank, 5.0}, out[3] = {0};
    sl_stats_slowest_rank(local, out, 3, MPI_COMM_WORLD);
    is_int(size >= 2, 1, "run on several ranks (%d)", size);
    is_double(out[0], (double)size, 0, "iteration 0: the last rank's time");
    is_double(out[1], 10.0, 0, "iteration 1: rank 0's time");
    is_double(out[2], 5.0, 0, "iteration 2: equal times");
    sl_stats s;
    sl_stats_compute(out, 3, &s);
    double a = size, b = 10, c = 5; /* the median of three, by hand */
    double median = a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
    is_double(s.median, median, 0, "median over the slowest-rank times");
    is_double(s.max, 10.0, 0, "max over the slowest-rank times");

    /* The headline and OSU's statistic from the same samples (sl_stats_over_ranks): rank r
     * took {r + 1, 2r + 1, 4} s. Slowest rank per iteration: {n, 2n - 1, 4}; OSU: the mean
     * of each rank's mean r + 2, i.e. (n - 1) / 2 + 2. On 3 ranks: median 4, OSU 3. */
    double mine[3] = {rank + 1.0, 2.0 * rank + 1, 4.0};
    sl_stats o;
    sl_stats_over_ranks(mine, 3, MPI_COMM_WORLD, &o);
    double x = size, y = 2.0 * size - 1, z = 4;
    double med = x > y ? (y > z ? y : x > z ? z : x) : (x > z ? x : y > z ? z : y);
    is_double(o.median, med, 0, "over ranks: median of the slowest-rank times");
    is_double(o.max, y > x ? (y > z ? y : z) : (x > z ? x : z), 0,
              "over ranks: max of the slowest-rank times");
    is_double(o.mean, (x + y + z) / 3, 1e-12, "over ranks: mean of the slowest-rank times");
    is_double(o.rank_mean, (size - 1) / 2.0 + 2, 1e-12, "over ranks: OSU's mean of per-rank means");
    if (size == 3) {
        is_double(o.median, 4.0, 0, "3 ranks: the headline is 4 s");
        is_double(o.rank_mean, 3.0, 1e-12, "3 ranks: OSU's statistic is 3 s");
    }
    sl_stats_compute(out, 3, &s);
    ok(isnan(s.rank_mean), "statistics of one series have no per-rank mean (null in a row)");

    MPI_Finalize();
    done_testing();
    return exit_status();
}
