/* cpu/loss.c — MSE and softmax cross-entropy with their gradients.
 *
 * Loss sums are accumulated in double over a fixed number of chunks and the chunks added in
 * order, so that the reported loss does not depend on the number of OpenMP threads. */
#include <math.h>

#include "cpu/cpu.h"
#include "cpu/mvec.h"
#include "cpu/vsum.h"

#define NCHUNK 64

double sl_cpu_mse(size_t n, const float *y, const float *t, float *dy, float norm)
{
    double part[NCHUNK] = {0};
    size_t per = (n + NCHUNK - 1) / NCHUNK;
#pragma omp parallel for if (sl_cpu_par(n)) schedule(static)
    for (int c = 0; c < NCHUNK; c++) {
        size_t lo = (size_t)c * per, hi = lo + per < n ? lo + per : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) {
            float d = y[i] - t[i];
            s += (double)d * d;
            if (dy) dy[i] = 2.0f * norm * d;
        }
        part[c] = s;
    }
    double s = 0.0;
    for (int c = 0; c < NCHUNK; c++) s += part[c];
    return norm * s;
}

/* One row, in the numerically safe form: with m = max(z), se = sum exp(z - m), loss = m + log(se)
 * - z[label]; dz = norm (exp(z - m) / se - onehot). Each exponential is computed once, in f32 by
 * libmvec's expf (cpu/mvec.h: eight lanes on AVX2, where the f64 exp it replaces ran four and
 * kept the row 3.5 times slower than its memory traffic), and parked in dz until se is known.
 * se is summed in double in vsum.h's fixed lanes, so the loss's error is the exponentials' own:
 * expf's (t/unit/test_vmath.c holds it to 4 ulp, 2^-21 relative) and the f32 rounding of z - m,
 * which moves exp(z - m) by |z - m| 2^-24 relative, at most about ln(classes) 2^-24 of se in
 * all; a row's loss is within 2^-21 + ln(classes) 2^-24 of the exact one, absolutely (the f64
 * exp gave 1e-12; t/unit/test_kernels_checks.h asserts the new bound). The gradient is
 * exp(z - m) times norm / se rounded once to f32 (eight lanes, no conversions); the label's
 * entry, which subtracts, in double. The row's remainder after its whole blocks of SL_LANES
 * takes the scalar expf, so a row's bits depend on its length and the CPU's vector variant,
 * never on the threads or the rank that computes it. */
SL_CPU_CLONES static double xent_row(const float *z, int classes, int label, float *dz, float norm)
{
    float m = z[0];
#pragma omp simd reduction(max : m)
    for (int j = 1; j < classes; j++) m = z[j] > m ? z[j] : m;
    double a[SL_LANES] = {0};
    if (dz) {
        SL_LANE_LOOP(classes, j, l, float e = expf(z[j] - m); a[l] += e; dz[j] = e;);
        double se = sl_lanes_fold_d(a);
        float c = (float)(norm / se), el = dz[label];
#pragma omp simd
        for (int j = 0; j < classes; j++) dz[j] *= c;
        dz[label] = (float)(norm * (el / se - 1.0));
        return m + log(se) - z[label];
    }
    SL_LANE_LOOP(classes, j, l, a[l] += expf(z[j] - m););
    return m + log(sl_lanes_fold_d(a)) - z[label];
}

double sl_cpu_softmax_xent(int rows, int classes, const float *logits, const int32_t *labels,
                           float *dlogits, float norm)
{
    double part[NCHUNK] = {0};
    int per = (rows + NCHUNK - 1) / NCHUNK;
#pragma omp parallel for if (sl_cpu_par((size_t)rows * classes)) schedule(static)
    for (int c = 0; c < NCHUNK; c++) {
        int lo = c * per, hi = lo + per < rows ? lo + per : rows;
        double s = 0.0;
        for (int r = lo; r < hi; r++)
            s += xent_row(logits + (size_t)r * classes, classes, labels[r],
                          dlogits ? dlogits + (size_t)r * classes : NULL, norm);
        part[c] = s;
    }
    double s = 0.0;
    for (int c = 0; c < NCHUNK; c++) s += part[c];
    return norm * s;
}
