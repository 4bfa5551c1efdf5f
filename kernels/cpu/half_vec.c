/* cpu/half_vec.c — f32 <-> f16 conversion of whole arrays, with the x86 F16C instructions
 * where the CPU has them (chosen at run time) and sl_half.h otherwise.
 *
 * Narrowing f32 to f16 in software branches on the value's range, and on mixed data the
 * branches are mispredicted: casts and f16 axpby ran at a few percent of memory bandwidth.
 * VCVTPS2PH with an immediate rounding mode of 0 rounds to nearest even, produces subnormals
 * and infinities and quiets NaNs as sl_f32_to_f16 does, so both paths give the same bits
 * (test_casts checks every f16 pattern and a dense sample of f32 ones). */
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "sl_half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1

__attribute__((target("avx,f16c"))) static void narrow_f16c(const float *src, uint16_t *dst,
                                                             size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = sl_f32_to_f16(src[i]);
}

__attribute__((target("avx,f16c"))) static void widen_f16c(const uint16_t *src, float *dst,
                                                           size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = sl_f16_to_f32(src[i]);
}

/* Decided once at load time, before any thread can ask. */
static int f16c_ok;
__attribute__((constructor)) static void detect_f16c(void)
{
    __builtin_cpu_init();
    f16c_ok = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}
static int have_f16c(void) { return f16c_ok; }
#else
#define HAVE_X86 0
#endif

void sl_cpu_f32_to_f16_n(const float *src, uint16_t *dst, size_t n)
{
#if HAVE_X86
    if (have_f16c()) {
        narrow_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = sl_f32_to_f16(src[i]);
}

void sl_cpu_f16_to_f32_n(const uint16_t *src, float *dst, size_t n)
{
#if HAVE_X86
    if (have_f16c()) {
        widen_f16c(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = sl_f16_to_f32(src[i]);
}

const char *sl_cpu_f16_impl(void)
{
#if HAVE_X86
    if (have_f16c()) return "F16C";
#endif
    return "software (sl_half.h)";
}
