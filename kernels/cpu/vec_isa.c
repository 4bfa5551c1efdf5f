/* cpu/vec_isa.c — which of the SL_CPU_CLONES variants (cpu.h) this CPU runs: the loader's
 * choice, asked the same way, so that the manifest and the notes can say it. */
#include "cpu/cpu.h"
#include "kernels.h"

const char *sl_k_cpu_vec_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? "avx2" : "sse2";
#else
    return "baseline";
#endif
}
