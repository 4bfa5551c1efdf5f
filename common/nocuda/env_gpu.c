/* nocuda/env_gpu.c — GPU facts for a build without CUDA: none, and why. */
#include <stdio.h>
#include <string.h>

#include "sl_env.h"

void sl_env_gpu_capture(sl_env_gpu *g)
{
    memset(g, 0, sizeof *g);
    snprintf(g->note, sizeof g->note, "CUDA support was not built (nvcc/cuBLAS not found, or CUDA=0)");
}

int sl_cuda_device_count(void) { return 0; }

long long sl_cuda_device_used(void) { return -1; }
long long sl_cuda_device_free(void) { return -1; }
