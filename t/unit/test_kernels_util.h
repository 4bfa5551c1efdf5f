/* test_kernels_util.h — helpers shared by the kernel tests: the backend under test, copies
 * between host arrays and backend memory (sl_k_upload / sl_k_memcpy on that backend), random
 * host data and error measures. The references themselves are kernels/ref.h.
 *
 * The checks run through the public API with backend memory, so the same check code runs
 * against the cpu backend (test_kernels) and the cuda backend (test_kernels_cuda). */
#ifndef TEST_KERNELS_UTIL_H
#define TEST_KERNELS_UTIL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ref.h"
#include "sl_half.h"
#include "sl_rng.h"
#include "../tap.h"

static sl_backend T_BE = SL_BACKEND_CPU;

/* run() on the cpu backend, then cpu_only() (may be NULL: the checks with no device twin), then
 * run() again on cuda where a device is visible (else a diagnostic says it was not). */
static inline void t_each_backend(void (*run)(void), void (*cpu_only)(void))
{
    T_BE = SL_BACKEND_CPU;
    run();
    if (cpu_only) cpu_only();
    if (sl_k_backend_available(SL_BACKEND_CUDA)) {
        T_BE = SL_BACKEND_CUDA;
        run();
    } else {
        diag("cuda backend not available here: the cpu backend only");
    }
}

#define U32 0x1p-24 /* unit roundoff of f32 */

static inline void *t_up(const void *host, size_t bytes)
{
    return sl_k_upload(T_BE, SL_MEM_OTHER, host, bytes);
}

static inline void t_down(void *host, const void *dev, size_t bytes)
{
    sl_k_memcpy(T_BE, host, dev, bytes, SL_K_D2H);
}

static inline void t_free(void *d) { sl_k_free(T_BE, d); }

static inline void *t_xmalloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(3);
    }
    return p;
}

/* n normals (or uniforms in [-1,1) when uniform is set), seed chosen by the caller */
static inline float *t_randn(uint64_t seed, size_t n, float scale)
{
    float *x = t_xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * sl_rng_normal(seed, i);
    return x;
}

/* Store f32 values as dtype t (f32, f16, bf16) into a new host array. */
static inline void *t_pack(sl_dtype t, const float *x, size_t n)
{
    if (t == SL_F32) {
        float *y = t_xmalloc(n * 4);
        memcpy(y, x, n * 4);
        return y;
    }
    uint16_t *y = t_xmalloc(n * 2);
    for (size_t i = 0; i < n; i++) y[i] = t == SL_F16 ? sl_f32_to_f16(x[i]) : sl_f32_to_bf16(x[i]);
    return y;
}

static inline float t_load(sl_dtype t, const void *p, size_t i)
{
    if (t == SL_F16) return sl_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == SL_BF16) return sl_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* Largest |got - want| / (abs_tol + rel_tol |want|) over n values; <= 1 passes. NaN fails. */
static inline double t_ratio(const float *got, const double *want, size_t n, double abs_tol,
                      double rel_tol)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue; /* also when both are 0 and the tolerance is 0 */
        double r = fabs(got[i] - want[i]) / (abs_tol + rel_tol * fabs(want[i]));
        if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
    }
    return worst;
}

static inline double t_max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

#endif
