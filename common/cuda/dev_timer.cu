/* cuda/dev_timer.cu — a device timer from a pair of CUDA events, so that GPU work is timed on
 * the GPU's own clock rather than by host synchronisation. */
#include <stdlib.h>

#include "sl_cuda.h"
extern "C" {
#include "sl_timer.h"
}

struct sl_dev_timer {
    cudaEvent_t start, stop;
};

extern "C" sl_dev_timer *sl_dev_timer_create(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return NULL;
    }
    sl_dev_timer *t = (sl_dev_timer *)calloc(1, sizeof *t);
    if (!t) SL_FATAL("out of memory for a device timer");
    SL_CHECK_CUDA(cudaEventCreate(&t->start));
    SL_CHECK_CUDA(cudaEventCreate(&t->stop));
    return t;
}

extern "C" void sl_dev_timer_start(sl_dev_timer *t, void *stream)
{
    if (t) SL_CHECK_CUDA(cudaEventRecord(t->start, (cudaStream_t)stream));
}

extern "C" void sl_dev_timer_stop(sl_dev_timer *t, void *stream)
{
    if (t) SL_CHECK_CUDA(cudaEventRecord(t->stop, (cudaStream_t)stream));
}

extern "C" double sl_dev_timer_seconds(sl_dev_timer *t)
{
    if (!t) return 0.0;
    float ms = 0;
    SL_CHECK_CUDA(cudaEventSynchronize(t->stop));
    SL_CHECK_CUDA(cudaEventElapsedTime(&ms, t->start, t->stop));
    return 1e-3 * ms;
}

extern "C" void sl_dev_timer_destroy(sl_dev_timer *t)
{
    if (!t) return;
    cudaEventDestroy(t->start);
    cudaEventDestroy(t->stop);
    free(t);
}
