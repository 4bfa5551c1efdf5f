/* cpu/probe.c — the read of the read-bandwidth probe (probe.h): the sum of an array of
 * doubles, as STREAM's read kernels do it, on the OpenMP threads where the cpu backend uses
 * them (cpu/ops.c), vectorised. Twin of cuda/probe.cu. */
#include "cpu/cpu.h"

double sl_cpu_read_sum(size_t n, const double *x)
{
    double sum = 0;
#pragma omp parallel for simd if (sl_cpu_par(n)) schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += x[i];
    return sum;
}
