/* test_kernels.c — the cpu backend of kernels.h against double-precision references
 * (checks in test_kernels_checks.h), plus what only concerns backend selection. */
#include <string.h>

#include "test_kernels_checks.h"

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
    done_testing();
    return exit_status();
}
