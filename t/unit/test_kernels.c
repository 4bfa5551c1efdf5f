/* test_kernels.c — the cpu backend of kernels.h against double-precision references
 * (checks in test_kernels_checks.h), plus what only concerns backend selection. */
#include <string.h>

#include "test_kernels_checks.h"
#include "cpu/cpu.h"

/* The read probe's sum (cpu/probe.c): every element once, whatever n is modulo the eight
 * accumulators, on one thread and on the OpenMP threads. */
static void check_read_sum(void)
{
    size_t big = ((size_t)1 << 20) + 7;
    double *x = t_xmalloc(big * sizeof *x);
    for (size_t i = 0; i < big; i++) x[i] = (double)(i % 1000);
    int bad = 0;
    for (size_t n = 0; n <= 40; n++) {
        double want = 0;
        for (size_t i = 0; i < n; i++) want += x[i];
        bad += sl_cpu_read_sum_1(n, x) != want;
    }
    ok(!bad, "sl_cpu_read_sum_1 sums every element for n = 0..40 (%d wrong)", bad);
    double want = 0;
    for (size_t i = 0; i < big; i++) want += x[i];
    ok(sl_k_read_sum(SL_BACKEND_CPU, big, x) == want && sl_cpu_read_sum_1(big, x) == want,
       "the read probe's sum of 2^20 + 7 elements is exact");
    free(x);
}

int main(void)
{
    T_BE = SL_BACKEND_CPU;
    char why[256];
    ok(sl_k_backend_resolve(SL_BACKEND_CPU, why, sizeof why) == SL_BACKEND_CPU,
       "the cpu backend is always available");
    int cuda = sl_k_backend_resolve(SL_BACKEND_CUDA, why, sizeof why);
    ok(cuda == SL_BACKEND_CUDA || (cuda == -1 && why[0]),
       "cuda is available or the reason is given (%s)", cuda == -1 ? why : "available");
    int aut = sl_k_backend_resolve(SL_BACKEND_AUTO, why, sizeof why);
    ok(aut == (cuda == SL_BACKEND_CUDA ? SL_BACKEND_CUDA : SL_BACKEND_CPU),
       "auto resolves to %s", sl_backend_name((sl_backend)aut));
    diag("bf16 GEMM on cpu: %s", sl_k_gemm_impl(SL_BACKEND_CPU, SL_BF16));
    run_all_checks();
    check_read_sum();
    done_testing();
    return exit_status();
}
