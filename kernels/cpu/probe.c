/* cpu/probe.c — the read of the read-bandwidth probe (probe.h): the sum of an array of
 * doubles, as STREAM's read kernels do it, on the OpenMP threads where the cpu backend uses
 * them (cpu/ops.c), or on one thread (sl_cpu_read_sum_1, for probe.c's own threads). Twin of
 * cuda/probe.cu. */
#include <omp.h>

#include "cpu/cpu.h"

/* Eight independent accumulators: a single running sum (even a vector one) is one chain of
 * dependent adds, each waiting the add's latency, and caps the read at 16 bytes per 3-4 cycles
 * (about 12 GB/s) — below what one core can draw from memory, so the probe would measure the
 * add chain, not the memory, and a program with more accumulators would "beat" it. */
double sl_cpu_read_sum_1(size_t n, const double *x)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += x[i];
        a1 += x[i + 1];
        a2 += x[i + 2];
        a3 += x[i + 3];
        a4 += x[i + 4];
        a5 += x[i + 5];
        a6 += x[i + 6];
        a7 += x[i + 7];
    }
    for (; i < n; i++) a0 += x[i];
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

double sl_cpu_read_sum(size_t n, const double *x)
{
    double sum = 0;
#pragma omp parallel if (sl_cpu_par(n)) reduction(+ : sum)
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t lo = n * t / nt, hi = n * (t + 1) / nt; /* contiguous parts, as schedule(static) */
        sum += sl_cpu_read_sum_1(hi - lo, x + lo);
    }
    return sum;
}
