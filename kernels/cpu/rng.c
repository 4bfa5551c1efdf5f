/* cpu/rng.c — fills a tensor slice from the counter-based generator of sl_rng.h.
 *
 * On an AVX2 CPU (FMA too, checked with it) both fills run four values at a time: splitmix64's
 * 64-bit products from three 32-bit ones (AVX2 has no 64-bit multiply), the halves of the hash to
 * f64 exactly by placing them in the mantissa of 2^52. That part is integer arithmetic and gives
 * sl_rng_u64's bits. Normals then take log from glibc's libmvec and cos from cos_2pi below, and
 * keep sl_rng_normal's bits: the f64 Box-Muller value differs from the scalar one by a few f64 ulp
 * at most (libmvec's bound is 4 ulp, cos_2pi's 1), so it rounds to the same f32 unless it lies
 * within that of an f32 rounding boundary. A value within 2^-40 (relative, thousands of times the
 * bound) of one is recomputed by sl_rng_normal: one value in some 2^15 to 2^16. */
#include "cpu/cpu.h"
#include "sl_rng.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

#define SL_RNG_VEC 1
/* libmvec's AVX2 log (glibc's vector ABI name). */
__m256d _ZGVdN4v_log(__m256d x);

#define AVX2 __attribute__((target("avx2,fma"), always_inline)) static inline

/* The low 64 bits of a * b per lane: lo*lo + ((hi*lo + lo*hi) << 32). */
AVX2 __m256i mul64(__m256i a, __m256i b)
{
    __m256i ll = _mm256_mul_epu32(a, b);
    __m256i hl = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b);
    __m256i lh = _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32));
    return _mm256_add_epi64(ll, _mm256_slli_epi64(_mm256_add_epi64(hl, lh), 32));
}

/* sl_rng_mix, four lanes. */
AVX2 __m256i mix4(__m256i z)
{
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)),
              _mm256_set1_epi64x((long long)0xbf58476d1ce4e5b9ull));
    z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)),
              _mm256_set1_epi64x((long long)0x94d049bb133111ebull));
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

/* The counters of values i .. i+3 before mixing: mix(seed) + (i + 1) * golden ratio, as in
 * sl_rng_u64 (wrapping arithmetic, so stepping by 4 golden ratios gives the same words). */
#define SL_RNG_GOLDEN 0x9e3779b97f4a7c15ull
AVX2 __m256i counters4(uint64_t seed, uint64_t i)
{
    uint64_t c = sl_rng_mix(seed) + (i + 1) * SL_RNG_GOLDEN;
    return _mm256_set_epi64x((long long)(c + 3 * SL_RNG_GOLDEN), (long long)(c + 2 * SL_RNG_GOLDEN),
                             (long long)(c + SL_RNG_GOLDEN), (long long)c);
}

/* A value below 2^32 in each lane as f64, exactly: 2^52 + v has v as its low mantissa bits. */
AVX2 __m256d u32_to_f64(__m256i v)
{
    const __m256i two52 = _mm256_set1_epi64x(0x4330000000000000ll);
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(v, two52)),
                         _mm256_castsi256_pd(two52));
}

/* cos(a) for 0 <= a < 2 pi, the Box-Muller angle: a - k pi/2 in three parts of pi/2 (the
 * first two products by fused multiply-add, so r keeps its relative accuracy down to a = pi/2
 * itself, where cos is 6e-17), then fdlibm's sin and cos polynomials on |r| <= pi/4 and the
 * quadrant's sign. libmvec's cos handles any argument, and is a call that spills every vector
 * register. Error against libm's cos, measured on every one of the 2^32 angles: at most 2^-52
 * relative (the rounding guard in normal4_avx2 allows 2^-40). */
AVX2 __m256d cos_2pi(__m256d a)
{
    __m256d k = _mm256_round_pd(_mm256_mul_pd(a, _mm256_set1_pd(0.63661977236758134308)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.921fb54442d18p0), a);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(0x1.1a62633145c07p-54), r);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(-0x1.f1976b7ed8fbcp-110), r);
    __m256d w = _mm256_mul_pd(r, r);
    __m256d s = _mm256_set1_pd(1.58969099521155010221e-10);
    s = _mm256_fmadd_pd(s, w, _mm256_set1_pd(-2.50507602534068634195e-08));
    s = _mm256_fmadd_pd(s, w, _mm256_set1_pd(2.75573137070700676789e-06));
    s = _mm256_fmadd_pd(s, w, _mm256_set1_pd(-1.98412698298579493134e-04));
    s = _mm256_fmadd_pd(s, w, _mm256_set1_pd(8.33333333332248946124e-03));
    s = _mm256_fmadd_pd(s, w, _mm256_set1_pd(-1.66666666666666324348e-01));
    s = _mm256_fmadd_pd(_mm256_mul_pd(s, w), r, r); /* sin r */
    __m256d c = _mm256_set1_pd(-1.13596475577881948265e-11);
    c = _mm256_fmadd_pd(c, w, _mm256_set1_pd(2.08757232129817482790e-09));
    c = _mm256_fmadd_pd(c, w, _mm256_set1_pd(-2.75573143513906633035e-07));
    c = _mm256_fmadd_pd(c, w, _mm256_set1_pd(2.48015872894767294178e-05));
    c = _mm256_fmadd_pd(c, w, _mm256_set1_pd(-1.38888888888741095749e-03));
    c = _mm256_fmadd_pd(c, w, _mm256_set1_pd(4.16666666666666019037e-02));
    c = _mm256_fmadd_pd(_mm256_mul_pd(c, w), w, _mm256_fnmadd_pd(_mm256_set1_pd(0.5), w,
                                                                  _mm256_set1_pd(1.0))); /* cos r */
    /* quadrant q = k mod 4 (k is 0 .. 4): cos a = cos r, -sin r, -cos r, sin r */
    __m256i q = _mm256_castpd_si256(_mm256_add_pd(k, _mm256_set1_pd(0x1p52))); /* k in low bits */
    __m256d odd = _mm256_castsi256_pd(
        _mm256_cmpeq_epi64(_mm256_and_si256(q, _mm256_set1_epi64x(1)), _mm256_set1_epi64x(1)));
    __m256i neg = _mm256_slli_epi64(_mm256_xor_si256(q, _mm256_srli_epi64(q, 1)), 63);
    return _mm256_xor_pd(_mm256_blendv_pd(c, s, odd), _mm256_castsi256_pd(neg));
}

/* Normals i = first..first+n-1 (n a multiple of 4) as f32, sl_rng_normal's bits. In stages over
 * blocks of NORMAL_BLOCK values (the hash and the cosine, then log, then the product and its
 * rounding), each a loop of independent vectors, where one loop doing all of it per vector
 * waited on its chain (hash, log, square root, conversions): 5.6 against 6.3 ns a value on one
 * loaded AVX2 core. The rest is arithmetic (about 150 operations per 4 values); the hash alone
 * (sl_cpu_rng_uniform) takes 1.1 ns a value there, a fifth of a copy's bandwidth. */
#define NORMAL_BLOCK 64
__attribute__((target("avx2,fma"))) static void normal4_avx2(uint64_t seed, uint64_t first,
                                                             size_t n, float *z)
{
    const __m256i step = _mm256_set1_epi64x((long long)(4 * SL_RNG_GOLDEN));
    const __m256i lo32 = _mm256_set1_epi64x(0xffffffffll);
    __m256i c = counters4(seed, first);
    double u1[NORMAL_BLOCK] __attribute__((aligned(32))), cs[NORMAL_BLOCK] __attribute__((aligned(32)));
    for (size_t i0 = 0; i0 < n; i0 += NORMAL_BLOCK) {
        size_t m = n - i0 < NORMAL_BLOCK ? n - i0 : NORMAL_BLOCK;
        for (size_t k = 0; k < m; k += 4, c = _mm256_add_epi64(c, step)) {
            __m256i h = mix4(c);
            /* as sl_rng_normal: u1 = (h_hi + 1/2) 2^-32, a = 2 pi h_lo 2^-32 */
            _mm256_store_pd(u1 + k, _mm256_mul_pd(_mm256_add_pd(u32_to_f64(_mm256_srli_epi64(h, 32)),
                                                                _mm256_set1_pd(0.5)),
                                                  _mm256_set1_pd(0x1p-32)));
            __m256d a = _mm256_mul_pd(_mm256_set1_pd(6.283185307179586),
                                      _mm256_mul_pd(u32_to_f64(_mm256_and_si256(h, lo32)),
                                                    _mm256_set1_pd(0x1p-32)));
            _mm256_store_pd(cs + k, cos_2pi(a));
        }
        for (size_t k = 0; k < m; k += 4)
            _mm256_store_pd(u1 + k, _ZGVdN4v_log(_mm256_load_pd(u1 + k)));
        for (size_t k = 0; k < m; k += 4) {
            size_t i = i0 + k;
            __m256d r = _mm256_mul_pd(
                _mm256_sqrt_pd(_mm256_mul_pd(_mm256_set1_pd(-2.0), _mm256_load_pd(u1 + k))),
                _mm256_load_pd(cs + k));
            __m128 f = _mm256_cvtpd_ps(r);
            __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(r, _mm256_set1_pd(1.0 - 0x1p-40)));
            __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(r, _mm256_set1_pd(1.0 + 0x1p-40)));
            _mm_storeu_ps(z + i, f);
            int near = _mm_movemask_ps(_mm_or_ps(_mm_cmpneq_ps(lo, f), _mm_cmpneq_ps(hi, f)));
            if (near) /* one vector in some 2^13 */
                for (int l = 0; l < 4; l++)
                    if (near & (1 << l)) z[i + (size_t)l] = sl_rng_normal(seed, first + i + (size_t)l);
        }
    }
}

/* Uniforms i = first..first+n-1 (n a multiple of 4) in [lo, hi), sl_cpu_rng_uniform's scalar
 * bits: the top 24 bits of the hash convert to f32 exactly, and the rest is the same f32
 * operations in the same order (no contraction: the kernels are built without it). */
__attribute__((target("avx2,fma"))) static void uniform4_avx2(uint64_t seed, uint64_t first,
                                                          size_t n, float *x, float lo, float hi)
{
    const __m256i step = _mm256_set1_epi64x((long long)(4 * SL_RNG_GOLDEN));
    const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    const __m128 vlo = _mm_set1_ps(lo), vw = _mm_set1_ps(hi - lo), s24 = _mm_set1_ps(0x1p-24f);
    __m256i c = counters4(seed, first);
    for (size_t i = 0; i < n; i += 4, c = _mm256_add_epi64(c, step)) {
        __m256i top = _mm256_srli_epi64(mix4(c), 40); /* < 2^24 in the low word of each lane */
        __m128i t = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(top, pick));
        __m128 u = _mm_mul_ps(_mm_cvtepi32_ps(t), s24);
        _mm_storeu_ps(x + i, _mm_add_ps(vlo, _mm_mul_ps(vw, u)));
    }
}

static int have_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
#define SL_RNG_VEC 0
#endif

/* The slice's blocks of SL_CPU_VBLOCK, over the OpenMP threads: fill(a, o, m) fills elements
 * o .. o+m-1 of the request a. */
typedef struct {
    uint64_t seed, first;
    float *x, p, q; /* lo and hi, or mean and stddev */
} request;

static void by_blocks(size_t n, const request *a, void (*fill)(const request *, size_t, size_t))
{
    size_t blocks = (n + SL_CPU_VBLOCK - 1) / SL_CPU_VBLOCK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        size_t o = b * SL_CPU_VBLOCK;
        fill(a, o, n - o < SL_CPU_VBLOCK ? n - o : SL_CPU_VBLOCK);
    }
}

#if SL_RNG_VEC
static void uniform_block(const request *a, size_t o, size_t m)
{
    size_t m4 = m & ~(size_t)3;
    uniform4_avx2(a->seed, a->first + o, m4, a->x + o, a->p, a->q);
    for (size_t i = o + m4; i < o + m; i++)
        a->x[i] = a->p + (a->q - a->p) * sl_rng_uniform(a->seed, a->first + i);
}

static void normal_block(const request *a, size_t o, size_t m)
{
    size_t m4 = m & ~(size_t)3;
    float *y = a->x + o;
    normal4_avx2(a->seed, a->first + o, m4, y);
    for (size_t i = m4; i < m; i++) y[i] = sl_rng_normal(a->seed, a->first + o + i);
    for (size_t i = 0; i < m; i++) y[i] = a->p + a->q * y[i];
}
#endif

void sl_cpu_rng_uniform(uint64_t seed, uint64_t first, size_t n, float *x, float lo, float hi)
{
#if SL_RNG_VEC
    if (have_avx2_fma()) {
        by_blocks(n, &(request){seed, first, x, lo, hi}, uniform_block);
        return;
    }
#endif
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * sl_rng_uniform(seed, first + i);
}

void sl_cpu_rng_normal(uint64_t seed, uint64_t first, size_t n, float *x, float mean,
                       float stddev)
{
#if SL_RNG_VEC
    if (have_avx2_fma()) {
        by_blocks(n, &(request){seed, first, x, mean, stddev}, normal_block);
        return;
    }
#endif
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = mean + stddev * sl_rng_normal(seed, first + i);
}
