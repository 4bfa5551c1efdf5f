/* cpu/vsum.h — sums over a row in a fixed number of lanes, for loops that vectorise and give the
 * same bits on every ISA.
 *
 * `#pragma omp simd reduction(+ : s)` keeps one partial sum per vector lane, so the order of the
 * additions, and the bits of the sum, follow the vector width: a function cloned for AVX-512,
 * AVX2 and SSE2 (cpu.h's SL_CPU_CLONES) would give three results. Here element j always joins
 * partial sum j % SL_LANES, the vector body and the scalar remainder alike, and the partial sums
 * are folded in one fixed tree: the result depends on the row only. 16 lanes are one AVX-512
 * vector of f32, two of AVX2 and four of SSE2, so each ISA's loop body is whole vectors. */
#ifndef SL_CPU_VSUM_H
#define SL_CPU_VSUM_H

#define SL_LANES 16

/* Runs the statements (...) for j = 0 .. n-1 with l = j % SL_LANES: the whole blocks of
 * SL_LANES under `omp simd`, the rest scalar. The statements add into acc[l] of arrays of
 * SL_LANES partial sums, zeroed by the caller. */
#define SL_LANE_LOOP(n, j, l, ...)                                                             \
    do {                                                                                       \
        int n_ = (n), j0_ = 0;                                                                 \
        for (; j0_ + SL_LANES <= n_; j0_ += SL_LANES) {                                        \
            _Pragma("omp simd") for (int l = 0; l < SL_LANES; l++)                             \
            {                                                                                  \
                int j = j0_ + l;                                                               \
                __VA_ARGS__                                                                    \
            }                                                                                  \
        }                                                                                      \
        for (int l = 0; l < n_ - j0_; l++) {                                                   \
            int j = j0_ + l;                                                                   \
            __VA_ARGS__                                                                        \
        }                                                                                      \
    } while (0)

/* The partial sums folded pairwise, halves first (the array is overwritten). */
static inline float sl_lanes_fold(float *a)
{
    for (int w = SL_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

static inline double sl_lanes_fold_d(double *a)
{
    for (int w = SL_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

#endif
