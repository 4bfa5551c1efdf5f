/* cpu/rng.c — fills a tensor slice from the counter-based generator of sl_rng.h.
 *
 * Normals on an AVX2 CPU take log and cos four at a time from glibc's libmvec, and keep
 * sl_rng_normal's bits: the f64 Box-Muller value differs from the scalar one by a few f64 ulp
 * at most (libmvec's bound is 4 ulp), so it rounds to the same f32 unless it lies within that
 * of an f32 rounding boundary. A value within 2^-40 (relative, thousands of times the bound) of
 * one is recomputed by sl_rng_normal: one value in some 2^15 to 2^16. */
#include "cpu/cpu.h"
#include "sl_rng.h"

void sl_cpu_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi)
{
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * sl_rng_uniform(seed, first + i);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#define SL_RNG_VEC 1
/* libmvec's AVX2 variants (glibc's vector ABI names). */
__m256d _ZGVdN4v_log(__m256d x);
__m256d _ZGVdN4v_cos(__m256d x);

/* Normals i = first..first+n-1 (n a multiple of 4) as f32, sl_rng_normal's bits. */
__attribute__((target("avx2"))) static void normal4_avx2(uint64_t seed, uint64_t first, size_t n,
                                                         float *z)
{
    for (size_t i = 0; i < n; i += 4) {
        double u1[4], a[4];
        for (int l = 0; l < 4; l++) { /* as sl_rng_normal */
            uint64_t h = sl_rng_u64(seed, first + i + (size_t)l);
            u1[l] = ((double)(h >> 32) + 0.5) * 0x1p-32;
            a[l] = 6.283185307179586 * ((double)(h & 0xffffffffu) * 0x1p-32);
        }
        __m256d r = _mm256_mul_pd(_mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0),
                                                               _ZGVdN4v_log(_mm256_loadu_pd(u1)))),
                                  _ZGVdN4v_cos(_mm256_loadu_pd(a)));
        __m128 f = _mm256_cvtpd_ps(r);
        __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(r, _mm256_set1_pd(1.0 - 0x1p-40)));
        __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(r, _mm256_set1_pd(1.0 + 0x1p-40)));
        _mm_storeu_ps(z + i, f);
        int near = _mm_movemask_ps(_mm_or_ps(_mm_cmpneq_ps(lo, f), _mm_cmpneq_ps(hi, f)));
        for (int l = 0; l < 4; l++)
            if (near & (1 << l)) z[i + (size_t)l] = sl_rng_normal(seed, first + i + (size_t)l);
    }
}
#else
#define SL_RNG_VEC 0
#endif

void sl_cpu_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                       float stddev)
{
#if SL_RNG_VEC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        size_t blocks = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
        for (size_t b = 0; b < blocks; b++) {
            size_t lo = b * SL_CPU_VBLOCK, m = n - lo < SL_CPU_VBLOCK ? n - lo : SL_CPU_VBLOCK;
            size_t m4 = m & ~(size_t)3;
            float *y = x + lo;
            normal4_avx2(seed, first + lo, m4, y);
            for (size_t i = m4; i < m; i++) y[i] = sl_rng_normal(seed, first + lo + i);
            for (size_t i = 0; i < m; i++) y[i] = mean + stddev * y[i];
        }
        return;
    }
#endif
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = mean + stddev * sl_rng_normal(seed, first + i);
}
