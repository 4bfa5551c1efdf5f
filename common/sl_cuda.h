/* sl_cuda.h — the error check for CUDA runtime, cuBLAS and NCCL calls, for .cu files.
 * A failure prints the call, file and line and ends every rank with exit 3. */
#ifndef SL_CUDA_H
#define SL_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "sl_error.h"

#define SL_CHECK_CUDA(call)                                                             \
    do {                                                                                \
        cudaError_t sl_e_ = (call);                                                     \
        if (sl_e_ != cudaSuccess)                                                       \
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, "%s failed: %s", #call,       \
                     cudaGetErrorString(sl_e_));                                        \
    } while (0)

/* After a kernel launch: a bad launch configuration is reported at once. Execution errors
 * (an illegal address) surface only at the next synchronising call, far from their kernel, so
 * a DEBUG=1 build also waits for every kernel and names the launch that failed. */
#if defined(SL_DEBUG) && SL_DEBUG
#define SL_CHECK_LAUNCH()                                                               \
    do {                                                                                \
        SL_CHECK_CUDA(cudaGetLastError());                                              \
        SL_CHECK_CUDA(cudaDeviceSynchronize());                                         \
    } while (0)
#else
#define SL_CHECK_LAUNCH() SL_CHECK_CUDA(cudaGetLastError())
#endif

#define SL_CHECK_CUBLAS(call)                                                           \
    do {                                                                                \
        cublasStatus_t sl_s_ = (call);                                                  \
        if (sl_s_ != CUBLAS_STATUS_SUCCESS)                                             \
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, "%s failed: %s (%s)", #call,  \
                     cublasGetStatusName(sl_s_), cublasGetStatusString(sl_s_));         \
    } while (0)

#define SL_CHECK_NCCL(call)                                                             \
    do {                                                                                \
        ncclResult_t sl_r_ = (call);                                                    \
        if (sl_r_ != ncclSuccess)                                                       \
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, "%s failed: %s", #call,       \
                     ncclGetErrorString(sl_r_));                                        \
    } while (0)

#endif
