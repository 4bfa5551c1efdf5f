/* cuda/ops.cu — the cuda backend's table, device discovery, device memory (counted under
 * SL_MEM_DEVICE by category), copies and streams. Everything runs on the legacy default
 * stream except copies given a stream of their own. */
#include <mutex>
#include <stdio.h>
#include <string.h>
#include <unordered_map>
#include <utility>

#include "cuda/cuda_util.cuh"

/* Device discovery ------------------------------------------------------------------------ */

static int probed, ndev;
static char why_none[200];

static void probe(void)
{
    if (probed) return;
    probed = 1;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) {
        snprintf(why_none, sizeof why_none, "no CUDA device visible: %s", cudaGetErrorString(e));
        cudaGetLastError(); /* clear the sticky error so that later checks are not confused */
        ndev = 0;
    } else if (ndev == 0) {
        snprintf(why_none, sizeof why_none, "no CUDA device visible");
    }
}

/* sl_cuda_device_count() itself lives in common/ (sl_env.h): the harness needs it too. */

/* Memory ----------------------------------------------------------------------------------- */

/* Device pointers carry no header, so the size and category of each live allocation are kept
 * here for sl_mem_track at free time. */
static std::mutex live_mu;
static std::unordered_map<void *, std::pair<size_t, int>> live;

void *slk_malloc(sl_mem_cat cat, size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess)
        sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                 "out of device memory: cudaMalloc of %zu bytes for %s failed: %s", bytes,
                 sl_mem_cat_name(cat), cudaGetErrorString(e));
    SL_CHECK_CUDA(cudaMemset(p, 0, bytes ? bytes : 1));
    {
        std::lock_guard<std::mutex> g(live_mu);
        live[p] = std::make_pair(bytes, (int)cat);
    }
    sl_mem_track(SL_MEM_DEVICE, cat, (long long)bytes);
    return p;
}

void slk_free(void *p)
{
    std::pair<size_t, int> info;
    {
        std::lock_guard<std::mutex> g(live_mu);
        auto it = live.find(p);
        if (it == live.end())
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                     "sl_k_free: %p is not a live device allocation", p);
        info = it->second;
        live.erase(it);
    }
    SL_CHECK_CUDA(cudaFree(p));
    sl_mem_track(SL_MEM_DEVICE, (sl_mem_cat)info.second, -(long long)info.first);
}

/* Pinned host memory is counted as host memory of its category. */
static std::unordered_map<void *, std::pair<size_t, int>> pinned;

static void *host_alloc(sl_mem_cat cat, size_t bytes)
{
    void *p = NULL;
    SL_CHECK_CUDA(cudaMallocHost(&p, bytes ? bytes : 1));
    memset(p, 0, bytes ? bytes : 1);
    {
        std::lock_guard<std::mutex> g(live_mu);
        pinned[p] = std::make_pair(bytes, (int)cat);
    }
    sl_mem_track(SL_MEM_HOST, cat, (long long)bytes);
    return p;
}

static void host_free(void *p)
{
    std::pair<size_t, int> info;
    {
        std::lock_guard<std::mutex> g(live_mu);
        auto it = pinned.find(p);
        if (it == pinned.end())
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                     "sl_k_host_free: %p is not a live pinned allocation", p);
        info = it->second;
        pinned.erase(it);
    }
    SL_CHECK_CUDA(cudaFreeHost(p));
    sl_mem_track(SL_MEM_HOST, (sl_mem_cat)info.second, -(long long)info.first);
}

static cudaMemcpyKind kind_of(sl_k_copy_kind k)
{
    return k == SL_K_H2D ? cudaMemcpyHostToDevice
           : k == SL_K_D2H ? cudaMemcpyDeviceToHost
                           : cudaMemcpyDeviceToDevice;
}

static void dev_memcpy(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind)
{
    SL_CHECK_CUDA(cudaMemcpy(dst, src, bytes, kind_of(kind)));
}

static void dev_memset0(void *p, size_t bytes) { SL_CHECK_CUDA(cudaMemsetAsync(p, 0, bytes, 0)); }

static void dev_sync(void) { SL_CHECK_CUDA(cudaDeviceSynchronize()); }

/* Copy streams do not synchronise with the default stream, so a prefetch overlaps compute. */
static void *stream_create(void)
{
    cudaStream_t s;
    SL_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return (void *)s;
}
static void stream_destroy(void *s) { SL_CHECK_CUDA(cudaStreamDestroy((cudaStream_t)s)); }
static void memcpy_async(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind, void *s)
{
    SL_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, kind_of(kind), (cudaStream_t)s));
}
static void stream_sync(void *s) { SL_CHECK_CUDA(cudaStreamSynchronize((cudaStream_t)s)); }

/* Events with timing; stream NULL is the legacy default stream, where the kernels run. */
static void *event_create(void)
{
    cudaEvent_t e;
    SL_CHECK_CUDA(cudaEventCreate(&e));
    return (void *)e;
}
static void event_destroy(void *e) { SL_CHECK_CUDA(cudaEventDestroy((cudaEvent_t)e)); }
static void event_record(void *e, void *s) { SL_CHECK_CUDA(cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s)); }
static void stream_wait_event(void *s, void *e)
{
    SL_CHECK_CUDA(cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
}
static void event_sync(void *e) { SL_CHECK_CUDA(cudaEventSynchronize((cudaEvent_t)e)); }
static double event_elapsed(void *a, void *b)
{
    float ms = 0;
    SL_CHECK_CUDA(cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    return ms * 1e-3;
}

/* Shared state ------------------------------------------------------------------------------ */

/* One cuBLAS handle and one scratch area for the process, made on first use by whichever
 * thread comes first: call_once, because OpenMP threads and a program's own threads may reach
 * them together, and two handles made in a race would leak one and split the settings. */
static std::once_flag cublas_once;
static cublasHandle_t cublas_h;
static int cublas_dev;

cublasHandle_t slk_cublas(void)
{
    std::call_once(cublas_once, [] {
        /* the device current now: the programs bind theirs (sl_coll_bind_device, in sl_init)
         * before their first GEMM */
        SL_CHECK_CUDA(cudaGetDevice(&cublas_dev));
        SL_CHECK_CUBLAS(cublasCreate(&cublas_h));
        SL_CHECK_CUBLAS(cublasSetStream(cublas_h, 0));
        /* Plain f32 arithmetic for f32 GEMM (no TF32), so figures compare with the CPU. */
        SL_CHECK_CUBLAS(cublasSetMathMode(cublas_h, CUBLAS_DEFAULT_MATH));
    });
    /* A handle works on the device it was made on only: a GEMM after a switch of device (or
     * from a thread whose current device is another) would fail inside cuBLAS far from the
     * cause, or touch the wrong GPU's memory. */
    int dev;
    SL_CHECK_CUDA(cudaGetDevice(&dev));
    if (dev != cublas_dev)
        sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                 "cuBLAS handle made on GPU %d, used on GPU %d: the device must be bound "
                 "(sl_coll_bind_device) before the first GEMM, and every thread must use it",
                 cublas_dev, dev);
    return cublas_h;
}

static std::once_flag scratch_once;
static double *scratch;

double *slk_scratch(void)
{
    std::call_once(scratch_once, [] {
        SL_CHECK_CUDA(cudaMalloc((void **)&scratch, SLK_RED_GROUPS * SLK_RED_BLOCKS * sizeof(double)));
    });
    return scratch;
}

/* The table ---------------------------------------------------------------------------------- */

static sl_kops table;

extern "C" const sl_kops *sl_cuda_ops(char *why, size_t whylen)
{
    probe();
    if (ndev == 0) {
        if (why && whylen) snprintf(why, whylen, "%s", why_none);
        return NULL;
    }
    if (!table.name) { /* filled field by field: designated initialisers are C++20 */
        table.sync = dev_sync;
        table.malloc = slk_malloc;
        table.free = slk_free;
        table.host_alloc = host_alloc;
        table.host_free = host_free;
        table.memcpy = dev_memcpy;
        table.memset0 = dev_memset0;
        table.stream_create = stream_create;
        table.stream_destroy = stream_destroy;
        table.memcpy_async = memcpy_async;
        table.stream_sync = stream_sync;
        table.event_create = event_create;
        table.event_destroy = event_destroy;
        table.event_record = event_record;
        table.stream_wait_event = stream_wait_event;
        table.event_sync = event_sync;
        table.event_elapsed = event_elapsed;
        table.gemm = slk_gemm;
        table.gemm_impl = slk_gemm_impl;
        table.bias_add = slk_bias_add;
        table.bias_grad = slk_bias_grad;
        table.act_forward = slk_act_forward;
        table.act_backward = slk_act_backward;
        table.mse = slk_mse;
        table.softmax_xent = slk_softmax_xent;
        table.sgd_step = slk_sgd_step;
        table.adamw_step = slk_adamw_step;
        table.cast = slk_cast;
        table.scale_check = slk_scale_check;
        table.cast_update = slk_cast_update;
        table.axpby = slk_axpby;
        table.fill = slk_fill;
        table.conv2d_forward = slk_conv2d_forward;
        table.conv2d_backward_data = slk_conv2d_backward_data;
        table.conv2d_backward_filter = slk_conv2d_backward_filter;
        table.copy_block = slk_copy_block;
        table.rng_uniform = slk_rng_uniform;
        table.rng_normal = slk_rng_normal;
        table.read_sum = slk_read_sum;
        table.name = "cuda";
    }
    return &table;
}
