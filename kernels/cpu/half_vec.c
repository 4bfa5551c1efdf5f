/* cpu/half_vec.c — f32 <-> f16 conversion of whole arrays, with the x86 F16C instructions
 * where the CPU has them (chosen at run time) and sl_half.h otherwise; f32 <-> bf16 in portable
 * branch-free loops that the compiler vectorises.
 *
 * Narrowing f32 to f16 in software branches on the value's range, and on mixed data the
 * branches are mispredicted: casts and f16 axpby ran at a few percent of memory bandwidth.
 * VCVTPS2PH with an immediate rounding mode of 0 rounds to nearest even, produces subnormals
 * and infinities and quiets NaNs as sl_f32_to_f16 does, so both paths give the same bits
 * (test_casts checks every f16 pattern both ways and a dense sample of f32 ones). Both use
 * 256-bit F16C only, chosen at run time: the conversion runs at memory speed with it, so the
 * AVX-512 forms would add a variant to test and gain nothing, and a build for a CPU without
 * F16C (or not x86) keeps the portable loops. */
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

/* VCVTPH2PS quiets a signalling NaN (sets the f32 quiet bit) where sl_f16_to_f32 keeps its
 * payload as it is: the rare block holding one (exponent 31, quiet bit 0x200 clear, mantissa
 * nonzero) has those lanes redone by sl_f16_to_f32, so that the bits match every pattern. */
__attribute__((target("avx,f16c"))) static void widen_f16c(const uint16_t *src, float *dst,
                                                           size_t n)
{
    const __m128i expq = _mm_set1_epi16(0x7e00), snan_exp = _mm_set1_epi16(0x7c00);
    const __m128i mant = _mm_set1_epi16(0x1ff), zero = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
        __m128i snan = _mm_andnot_si128(_mm_cmpeq_epi16(_mm_and_si128(h, mant), zero),
                                        _mm_cmpeq_epi16(_mm_and_si128(h, expq), snan_exp));
        if (_mm_movemask_epi8(snan))
            for (size_t l = i; l < i + 8; l++) dst[l] = sl_f16_to_f32(src[l]);
    }
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

/* sl_f32_to_bf16's rounding with its NaN branch made a select: the same bits, and a loop of
 * them vectorises (the branch kept bf16 casts and axpby scalar, at a few percent of memory
 * bandwidth). Widening is a shift. */
static inline uint16_t f32_to_bf16_select(float f)
{
    uint32_t u = sl_f32_bits(f);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

SL_CPU_CLONES void sl_cpu_f32_to_bf16_n(const float *src, uint16_t *dst, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16_select(src[i]);
}

SL_CPU_CLONES void sl_cpu_bf16_to_f32_n(const uint16_t *src, float *dst, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dst[i] = sl_bits_f32((uint32_t)src[i] << 16);
}

const char *sl_cpu_f16_impl(void)
{
#if HAVE_X86
    if (have_f16c()) return "F16C";
#endif
    return "software (sl_half.h)";
}
