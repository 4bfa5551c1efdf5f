/* cpu/rng.c — fills a tensor slice from the counter-based generator of sl_rng.h. */
#include "cpu/cpu.h"
#include "sl_rng.h"

void sl_cpu_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi)
{
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * sl_rng_uniform(seed, first + i);
}

void sl_cpu_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                       float stddev)
{
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = mean + stddev * sl_rng_normal(seed, first + i);
}
