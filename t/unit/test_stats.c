/* test_stats.c — statistics of per-iteration times against hand-computed values. */
#include <math.h>

#include "../tap.h"
#include "sl_stats.h"

int main(void)
{
    sl_stats s;

    double one[] = {2.5};
    sl_stats_compute(one, 1, &s);
    is_int(s.n, 1, "one sample: n");
    is_double(s.min, 2.5, 0, "one sample: min");
    is_double(s.median, 2.5, 0, "one sample: median");
    is_double(s.p95, 2.5, 0, "one sample: p95");
    is_double(s.stddev, 0, 0, "one sample: stddev is 0");
    is_double(s.cv, 0, 0, "one sample: cv is 0");

    /* unsorted input: the function must sort a copy and leave the input alone */
    double x[] = {5, 1, 4, 2, 3};
    sl_stats_compute(x, 5, &s);
    is_double(s.min, 1, 0, "min");
    is_double(s.max, 5, 0, "max");
    is_double(s.mean, 3, 1e-15, "mean");
    is_double(s.median, 3, 0, "median of an odd count");
    /* p95 by linear interpolation: position 0.95 * 4 = 3.8 -> 4 + 0.8 * (5 - 4) */
    is_double(s.p95, 4.8, 1e-12, "p95 interpolates between order statistics");
    is_double(s.stddev, sqrt(2.5), 1e-12, "sample stddev (n-1)");
    is_double(s.cv, sqrt(2.5) / 3, 1e-12, "cv = stddev / mean");
    is_double(x[0], 5, 0, "input left unsorted");

    double even[] = {4, 1, 3, 2};
    sl_stats_compute(even, 4, &s);
    is_double(s.median, 2.5, 1e-15, "median of an even count is the mean of the middle two");

    double zeros[] = {0, 0, 0};
    sl_stats_compute(zeros, 3, &s);
    is_double(s.cv, 0, 0, "cv of a zero mean is 0, not NaN");

    sl_stats_compute(x, 0, &s);
    is_int(s.n, 0, "no samples: n is 0");
    is_double(s.median, 0, 0, "no samples: zeros");

    double sorted[] = {10, 20, 30, 40};
    is_double(sl_percentile_sorted(sorted, 4, 0), 10, 0, "p0 is the minimum");
    is_double(sl_percentile_sorted(sorted, 4, 1), 40, 0, "p100 is the maximum");
    is_double(sl_percentile_sorted(sorted, 4, 0.5), 25, 1e-12, "p50 of four");

    /* the sketch: up to 32 samples all of them, in iteration order */
    sl_stats_compute(x, 5, &s);
    ok(s.nsketch == 5 && s.sketch_all && s.sketch[0] == 5 && s.sketch[1] == 1 && s.sketch[4] == 3,
       "5 samples: all kept, in iteration order");
    double many[40];
    for (int i = 0; i < 40; i++) many[i] = 40 - i; /* descending: sorted, 1 .. 40 */
    sl_stats_compute(many, 32, &s);
    ok(s.nsketch == 32 && s.sketch_all && s.sketch[0] == 40 && s.sketch[31] == 9, "32 samples: still all");
    sl_stats_compute(many, 40, &s);
    ok(s.nsketch == 32 && !s.sketch_all, "40 samples: 32 quantiles");
    /* quantile (i + 0.5) / 32 is the sample of rank floor(q n): i = 0 -> rank 0 (1), i = 1 ->
     * floor(1.875) = 1 (2), i = 16 -> floor(20.625) = 20 (21), i = 31 -> floor(39.375) = 39 (40) */
    ok(s.sketch[0] == 1 && s.sketch[1] == 2 && s.sketch[16] == 21 && s.sketch[31] == 40,
       "quantiles are the order statistics of rank floor((i + 0.5) / 32 * n)");
    sl_stats_scale(&s, 0.5);
    ok(s.sketch[31] == 20 && s.max == 20 && s.min == 0.5, "sl_stats_scale scales the sketch with the statistics");

    /* the slowest rank: with one process, the elementwise max over ranks is the input */
    MPI_Init(NULL, NULL);
    double local[] = {1, 3, 2}, out[3] = {0};
    sl_stats_slowest_rank(local, out, 3, MPI_COMM_WORLD);
    ok(out[0] == 1 && out[1] == 3 && out[2] == 2, "slowest rank on one rank is the local times");
    MPI_Finalize();

    done_testing();
    return exit_status();
}
