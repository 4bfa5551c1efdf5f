/* cpu/loss.c — MSE and softmax cross-entropy with their gradients.
 *
 * Loss sums are accumulated in double over a fixed number of chunks and the chunks added in
 * order, so that the reported loss does not depend on the number of OpenMP threads. */
#include <math.h>

#include "cpu/cpu.h"

#define NCHUNK 64

double sl_cpu_mse(size_t n, const float *y, const float *t, float *dy, float norm)
{
    double part[NCHUNK] = {0};
    size_t per = (n + NCHUNK - 1) / NCHUNK;
#pragma omp parallel for if (n > SL_CPU_PAR_MIN) schedule(static)
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

/* One row, in the numerically safe form: with m = max(z), lse = m + log sum exp(z - m);
 * loss = lse - z[label]; dz = norm (exp(z - lse) - onehot). */
static double xent_row(const float *z, int classes, int label, float *dz, float norm)
{
    float m = z[0];
    for (int j = 1; j < classes; j++) m = z[j] > m ? z[j] : m;
    double se = 0.0;
    for (int j = 0; j < classes; j++) se += exp((double)z[j] - m);
    double lse = m + log(se);
    if (dz)
        for (int j = 0; j < classes; j++) dz[j] = norm * (float)(exp(z[j] - lse) - (j == label));
    return lse - z[label];
}

double sl_cpu_softmax_xent(int rows, int classes, const float *logits, const int32_t *labels,
                           float *dlogits, float norm)
{
    double part[NCHUNK] = {0};
    int per = (rows + NCHUNK - 1) / NCHUNK;
#pragma omp parallel for if ((size_t)rows * classes > SL_CPU_PAR_MIN) schedule(static)
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
