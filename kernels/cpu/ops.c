/* cpu/ops.c — the cpu backend's table: host memory (counted by sl_alloc), memcpy "copies",
 * and the kernels of the other cpu/ files. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu/cpu.h"
#include "sl_error.h"
#include "sl_mem.h"
#include "sl_timer.h"

/* When to use OpenMP threads -----------------------------------------------------------------
 *
 * OpenBLAS (the pthreads build distributions ship) runs its GEMMs on its own threads. After an
 * OpenMP parallel region, libgomp's threads spin for a while (milliseconds, by default) before
 * they sleep; a GEMM that follows then shares its cores with spinning threads. Measured on 2
 * cores: a 4-layer MLP step of width 1024 took 10x longer with OpenMP element-wise kernels
 * between the GEMMs than with single-threaded ones. So the kernels use OpenMP threads only
 * where that cannot happen: OMP_WAIT_POLICY=passive (threads sleep at once), or OpenBLAS or
 * OpenMP on one thread. Both libraries read their environment when they are loaded, so it is
 * read here at load time too. */
#define PAR_MIN 16384 /* shorter loops run on one thread: a parallel region costs more */

static int threads_ok;

__attribute__((constructor)) static void decide_threads(void)
{
    const char *wp = getenv("OMP_WAIT_POLICY");
    threads_ok = (wp && strcasecmp(wp, "passive") == 0) || openblas_get_num_threads() == 1 ||
                 omp_get_max_threads() == 1;
}

int sl_cpu_par(size_t n) { return threads_ok && n > PAR_MIN; }

int sl_k_cpu_threads(void) { return openblas_get_num_threads(); }

const char *sl_k_cpu_threading(void)
{
    return threads_ok ? "element-wise kernels on OpenMP threads, GEMMs on OpenBLAS threads"
                      : "element-wise kernels on one thread (OMP_WAIT_POLICY is not passive: "
                        "spinning OpenMP threads would slow OpenBLAS's GEMMs), GEMMs on "
                        "OpenBLAS threads";
}

static void cpu_sync(void) {}
static void *cpu_malloc(sl_mem_cat cat, size_t bytes) { return sl_alloc(cat, bytes); }
static void cpu_free(void *p) { sl_free(p); }
/* Large copies are split across the OpenMP threads: one thread cannot draw the memory
 * bandwidth of a socket, and the kernels benchmark uses this copy as its bandwidth probe.
 * Overlapping buffers are copied by one memmove. */
static void cpu_memcpy(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind)
{
    (void)kind;
    char *d = dst;
    const char *s = src;
    if (!sl_cpu_par(bytes / 256) || (d < s + bytes && s < d + bytes)) { /* < 4 MiB: one thread */
        memmove(dst, src, bytes);
        return;
    }
#pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), t = (size_t)omp_get_thread_num();
        size_t lo = bytes * t / nt / 64 * 64, hi = t + 1 == nt ? bytes : bytes * (t + 1) / nt / 64 * 64;
        memcpy(d + lo, s + lo, hi - lo);
    }
}
static void cpu_memset0(void *p, size_t bytes) { memset(p, 0, bytes); }

/* A cpu "stream" does nothing; a non-NULL address tells it from "no stream". */
static char cpu_stream_token;
static void *cpu_stream_create(void) { return &cpu_stream_token; }
static void cpu_stream_destroy(void *s) { (void)s; }
static void cpu_memcpy_async(void *dst, const void *src, size_t bytes, sl_k_copy_kind kind,
                             void *s)
{
    (void)s;
    cpu_memcpy(dst, src, bytes, kind);
}
static void cpu_stream_sync(void *s) { (void)s; }
/* A cpu event is the host time at which it was recorded: every copy is done by then. */
static void *cpu_event_create(void)
{
    double *e = calloc(1, sizeof *e);
    if (!e) SL_FATAL("out of memory for an event");
    return e;
}
static void cpu_event_destroy(void *e) { free(e); }
static void cpu_event_record(void *e, void *s)
{
    (void)s;
    *(double *)e = sl_now();
}
static void cpu_stream_wait_event(void *s, void *e) { (void)s, (void)e; }
static void cpu_event_sync(void *e) { (void)e; }
static double cpu_event_elapsed(void *a, void *b) { return *(double *)b - *(double *)a; }

const sl_kops sl_cpu_ops = {
    .name = "cpu",
    .sync = cpu_sync,
    .malloc = cpu_malloc,
    .free = cpu_free,
    .host_alloc = cpu_malloc,
    .host_free = cpu_free,
    .memcpy = cpu_memcpy,
    .memset0 = cpu_memset0,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .memcpy_async = cpu_memcpy_async,
    .stream_sync = cpu_stream_sync,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_elapsed = cpu_event_elapsed,
    .gemm = sl_cpu_gemm,
    .gemm_impl = sl_cpu_gemm_impl,
    .bias_add = sl_cpu_bias_add,
    .bias_grad = sl_cpu_bias_grad,
    .act_forward = sl_cpu_act_forward,
    .act_backward = sl_cpu_act_backward,
    .mse = sl_cpu_mse,
    .softmax_xent = sl_cpu_softmax_xent,
    .sgd_step = sl_cpu_sgd_step,
    .adamw_step = sl_cpu_adamw_step,
    .cast = sl_cpu_cast,
    .scale_check = sl_cpu_scale_check,
    .cast_update = sl_cpu_cast_update,
    .axpby = sl_cpu_axpby,
    .fill = sl_cpu_fill,
    .conv2d_forward = sl_cpu_conv2d_forward,
    .conv2d_backward_data = sl_cpu_conv2d_backward_data,
    .conv2d_backward_filter = sl_cpu_conv2d_backward_filter,
    .copy_block = sl_cpu_copy_block,
    .rng_uniform = sl_cpu_rng_uniform,
    .rng_normal = sl_cpu_rng_normal,
    .read_sum = sl_cpu_read_sum,
};
