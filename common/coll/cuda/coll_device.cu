/* coll_device.cu — the device side of the communication layer: device and pinned memory,
 * copies, and the element-wise reduction kernel that the suite's own algorithms use on device
 * buffers (dst = a op b, 16-bit types combined in f32 and rounded once, as on the host). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "coll_device.h"

extern "C" void sl_fatal(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#define CUDA_OK(call)                                                                   \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess)                                                          \
            sl_fatal(3, __FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

/* Element types: storage T, arithmetic in W. */
struct F32 { typedef float T; __device__ static float in(T x) { return x; } __device__ static T out(float w) { return w; } };
struct F64 { typedef double T; __device__ static double in(T x) { return x; } __device__ static T out(double w) { return w; } };
struct F16 {
    typedef uint16_t T;
    __device__ static float in(T x) { return __half2float(__ushort_as_half(x)); }
    __device__ static T out(float w) { return __half_as_ushort(__float2half_rn(w)); }
};
struct BF16 {
    typedef uint16_t T;
    __device__ static float in(T x) { return __uint_as_float((unsigned)x << 16); }
    __device__ static T out(float w) { return __bfloat16_as_ushort(__float2bfloat16_rn(w)); }
};

/* op values are those of sl_redop: 0 sum, 1 max, 2 min, 3 avg (combined as a sum). */
template <class E, int OP>
__global__ void k_reduce(typename E::T *d, const typename E::T *a, const typename E::T *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        auto x = E::in(a[i]), y = E::in(b[i]);
        d[i] = E::out(OP == 1 ? (x > y ? x : y) : OP == 2 ? (x < y ? x : y) : x + y);
    }
}

template <class E>
__global__ void k_divide(typename E::T *p, size_t n, int divisor)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = E::out(E::in(p[i]) / (decltype(E::in(p[i])))divisor);
}

static unsigned grid_for(size_t n)
{
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 4096 ? (g ? g : 1) : 4096);
}

template <class E>
static void launch_reduce(void *d, const void *a, const void *b, size_t n, int op, cudaStream_t s)
{
    typedef typename E::T T;
    T *dd = (T *)d;
    const T *aa = (const T *)a, *bb = (const T *)b;
    unsigned g = grid_for(n);
    if (op == 1) k_reduce<E, 1><<<g, 256, 0, s>>>(dd, aa, bb, n);
    else if (op == 2) k_reduce<E, 2><<<g, 256, 0, s>>>(dd, aa, bb, n);
    else k_reduce<E, 0><<<g, 256, 0, s>>>(dd, aa, bb, n);
}

extern "C" {

int sl_cdev_built(void) { return 1; }

int sl_cdev_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* no driver or no device: not an error here */
        return 0;
    }
    return n;
}

void sl_cdev_set(int dev) { CUDA_OK(cudaSetDevice(dev)); }

int sl_cdev_current(void)
{
    int dev = 0;
    CUDA_OK(cudaGetDevice(&dev));
    return dev;
}

void *sl_cdev_malloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes));
    return p;
}

void sl_cdev_free(void *p)
{
    if (p) CUDA_OK(cudaFree(p));
}

void *sl_cdev_host_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMallocHost(&p, bytes));
    return p;
}

void sl_cdev_host_free(void *p)
{
    if (p) CUDA_OK(cudaFreeHost(p));
}

void *sl_cdev_stream_create(void)
{
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (void *)s;
}

void sl_cdev_stream_destroy(void *stream)
{
    if (stream) CUDA_OK(cudaStreamDestroy((cudaStream_t)stream));
}

void sl_cdev_stream_sync(void *stream) { CUDA_OK(cudaStreamSynchronize((cudaStream_t)stream)); }

int sl_cdev_stream_done(void *stream)
{
    cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
    if (e == cudaErrorNotReady) return 0;
    CUDA_OK(e);
    return 1;
}

void *sl_cdev_event_record(void *stream)
{
    cudaEvent_t e;
    CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_OK(cudaEventRecord(e, (cudaStream_t)stream));
    return (void *)e;
}

int sl_cdev_event_done(void *event)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) return 0;
    CUDA_OK(e);
    return 1;
}

void sl_cdev_event_destroy(void *event)
{
    if (event) CUDA_OK(cudaEventDestroy((cudaEvent_t)event));
}

void sl_cdev_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
    cudaMemcpyKind k = kind == SL_CDEV_H2D   ? cudaMemcpyHostToDevice
                       : kind == SL_CDEV_D2H ? cudaMemcpyDeviceToHost
                                             : cudaMemcpyDeviceToDevice;
    CUDA_OK(cudaMemcpyAsync(dst, src, bytes, k, (cudaStream_t)stream));
    CUDA_OK(cudaStreamSynchronize((cudaStream_t)stream));
}

void sl_cdev_reduce(void *dst, const void *a, const void *b, size_t n, sl_dtype t, int op,
                    void *stream)
{
    if (n == 0) return;
    cudaStream_t s = (cudaStream_t)stream;
    switch (t) {
    case SL_F32: launch_reduce<F32>(dst, a, b, n, op, s); break;
    case SL_F64: launch_reduce<F64>(dst, a, b, n, op, s); break;
    case SL_F16: launch_reduce<F16>(dst, a, b, n, op, s); break;
    default: launch_reduce<BF16>(dst, a, b, n, op, s); break;
    }
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(s));
}

void sl_cdev_divide(void *buf, size_t n, sl_dtype t, int divisor, void *stream)
{
    if (n == 0) return;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned g = grid_for(n);
    switch (t) {
    case SL_F32: k_divide<F32><<<g, 256, 0, s>>>((float *)buf, n, divisor); break;
    case SL_F64: k_divide<F64><<<g, 256, 0, s>>>((double *)buf, n, divisor); break;
    case SL_F16: k_divide<F16><<<g, 256, 0, s>>>((uint16_t *)buf, n, divisor); break;
    default: k_divide<BF16><<<g, 256, 0, s>>>((uint16_t *)buf, n, divisor); break;
    }
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(s));
}

} /* extern "C" */
