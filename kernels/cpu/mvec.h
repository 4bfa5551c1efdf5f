/* cpu/mvec.h — expf declared with GCC's vector ABI, so that `#pragma omp simd` loops
 * call glibc's libmvec variants (4, 8 or 16 lanes for SSE, AVX2 and AVX-512, by the clone).
 *
 * math.h declares them so only under -ffast-math, whose other licences (no NaN, no inf,
 * reassociation) the kernels must not take; this header declares the vector ABI alone. The
 * calls need -fno-math-errno (the Makefile's CPU_KERNEL_CFLAGS, for kernels/cpu/ only): errno
 * is a scalar side effect. A vector variant's result need not be the scalar call's bits, so a
 * loop whose remainder iterations call the scalar function gives bits that depend on where the
 * loop starts; the users say how they avoid that or why it does not matter.
 * SLEEF (libsleef-dev 3.5) was measured beside it on one AVX2 core: its expf8_u10 (FMA) took
 * 0.63 ns a value against libmvec's 0.42, 0.95 ulp at worst against 2.46; both are within the
 * kernels' 4 ulp (t/unit/test_vmath.c), so the faster one, which glibc ships, is used. */
#ifndef SL_CPU_MVEC_H
#define SL_CPU_MVEC_H

#include <math.h>

/* GCC on x86-64, where glibc's libmvec has the variants; elsewhere the loops call the scalar
 * functions. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((simd("notinbranch"))) float expf(float);
#endif

#endif
