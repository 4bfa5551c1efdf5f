/* test_rng_normal.c — the cpu backend's rng_normal (vectorised where the CPU has AVX2: the
 * hash four lanes at a time, libmvec's log and cos) gives sl_rng_normal's bits, the stream every
 * other backend and the training programs' references use: every element of slices of several
 * lengths (vector blocks, their 4-wide remainders, odd tails, one element), from odd and large
 * offsets, for two seeds, with mean 0 / stddev 1 and with a shift and scale. rng_uniform, which
 * shares the vectorised hash, against its scalar formula likewise. */
#include <stdint.h>
#include <string.h>

#include "test_kernels_util.h"

/* Whether normal i's f64 value lies within 2^-40 (relative) of an f32 rounding boundary: one
 * the vectorised kernel recomputes by sl_rng_normal (cpu/rng.c). Counted, so that the output
 * shows that path ran. */
static int near_boundary(uint64_t seed, uint64_t i)
{
    uint64_t h = sl_rng_u64(seed, i);
    double u1 = ((double)(h >> 32) + 0.5) * 0x1p-32, u2 = (double)(h & 0xffffffffu) * 0x1p-32;
    double r = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    return (float)(r * (1.0 - 0x1p-40)) != (float)r || (float)(r * (1.0 + 0x1p-40)) != (float)r;
}

static void check(uint64_t seed, uint64_t first, size_t n, float mean, float stddev)
{
    float *x = t_xmalloc(n * sizeof *x);
    float *d = t_up(x, n * sizeof *x);
    sl_k_rng_normal(T_BE, seed, first, n, d, mean, stddev);
    t_down(x, d, n * sizeof *x);
    size_t bad = 0, near = 0;
    for (size_t i = 0; i < n; i++) {
        near += (size_t)near_boundary(seed, first + i);
        float want = mean + stddev * sl_rng_normal(seed, first + i);
        if (memcmp(&want, &x[i], sizeof want) != 0) {
            if (!bad) diag("element %zu: kernel %a, sl_rng_normal %a", i, x[i], want);
            bad++;
        }
    }
    ok(bad == 0, "rng_normal seed %llu first %llu n %zu mean %g stddev %g: %zu of %zu differ (%zu near "
       "an f32 boundary)", (unsigned long long)seed, (unsigned long long)first, n, mean, stddev, bad, n, near);
    t_free(d);
    free(x);
}

/* rng_uniform's AVX2 path (the same vectorised hash) against the scalar formula it replaces. */
static void check_uniform(uint64_t seed, uint64_t first, size_t n, float lo, float hi)
{
    float *x = t_xmalloc(n * sizeof *x);
    float *d = t_up(x, n * sizeof *x);
    sl_k_rng_uniform(T_BE, seed, first, n, d, lo, hi);
    t_down(x, d, n * sizeof *x);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = lo + (hi - lo) * sl_rng_uniform(seed, first + i);
        if (memcmp(&want, &x[i], sizeof want) != 0) {
            if (!bad) diag("element %zu: kernel %a, sl_rng_uniform %a", i, x[i], want);
            bad++;
        }
    }
    ok(bad == 0, "rng_uniform seed %llu first %llu n %zu [%g, %g): %zu of %zu differ",
       (unsigned long long)seed, (unsigned long long)first, n, lo, hi, bad, n);
    t_free(d);
    free(x);
}

int main(void)
{
    static const size_t sizes[] = {1, 3, 4, 7, 4095, 4097, 100003, 2000001};
    static const uint64_t firsts[] = {0, 5, 12345678901ull};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++)
            check(s % 2 ? 42 : 7, firsts[f], sizes[s], 0.0f, 1.0f);
    check(3, 77, 100003, 0.5f, 0.02f);
    static const size_t usizes[] = {1, 7, 4097, 100003};
    for (size_t s = 0; s < sizeof usizes / sizeof usizes[0]; s++)
        check_uniform(s % 2 ? 42 : 7, s % 2 ? 12345678901ull : 5, usizes[s], -0.5f, 1.5f);
    done_testing();
    return exit_status();
}
