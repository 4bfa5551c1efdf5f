/* cuda/env_gpu.cu — CUDA runtime, driver, cuBLAS and NCCL versions and the GPU models. Works
 * on a machine without a GPU (it then says so): the build links CUDA everywhere it is found. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#if SL_HAVE_NCCL
#include <nccl.h>
#endif

extern "C" {
#include "sl_env.h"
}

static void version_string(int v, char *buf, size_t len)
{
    snprintf(buf, len, "%d.%d", v / 1000, (v % 1000) / 10);
}

extern "C" int sl_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" void sl_env_gpu_capture(sl_env_gpu *g)
{
    memset(g, 0, sizeof *g);
    g->built = 1;
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess) version_string(v, g->cuda_runtime, sizeof g->cuda_runtime);
    if (cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
        version_string(v, g->cuda_driver, sizeof g->cuda_driver);
    snprintf(g->cublas, sizeof g->cublas, "%d.%d.%d", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
#if SL_HAVE_NCCL
    if (ncclGetVersion(&v) == ncclSuccess)
        snprintf(g->nccl, sizeof g->nccl, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
#endif
    cudaError_t e = cudaGetDeviceCount(&g->ndevices);
    if (e != cudaSuccess) {
        g->ndevices = 0;
        snprintf(g->note, sizeof g->note, "no CUDA device: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return;
    }
    if (g->ndevices == 0)
        snprintf(g->note, sizeof g->note, "no CUDA device visible (cudaGetDeviceCount found 0)");
    for (int i = 0; i < g->ndevices && i < 4; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
            snprintf(g->models[i], sizeof g->models[i], "%.80s (sm_%d%d, %.0f GiB)", p.name, p.major,
                     p.minor, p.totalGlobalMem / 1073741824.0);
    }
}

extern "C" long long sl_cuda_device_used(void)
{
    size_t free_b = 0, total_b = 0;
    if (sl_cuda_device_count() == 0 || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return -1;
    return (long long)(total_b - free_b);
}

extern "C" long long sl_cuda_device_free(void)
{
    size_t free_b = 0, total_b = 0;
    if (sl_cuda_device_count() == 0 || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return -1;
    return (long long)free_b;
}
