/* probe.c — the read and copy bandwidth probes (probe.h): T host threads over their parts of
 * the arrays, or the backend's own read and copy kernels. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "cpu/cpu.h"
#include "sl_slowdown.h"

void sl_probe_init(sl_probe *p, sl_probe_kind kind, sl_backend be, size_t bytes, int threads)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->be = be;
    p->bytes = bytes;
    p->threads = threads;
    p->src = sl_k_malloc(be, SL_MEM_OTHER, bytes);
    sl_k_fill(be, SL_F64, bytes / sizeof(double), p->src, 1.0);
    if (kind == SL_PROBE_COPY) p->dst = sl_k_malloc(be, SL_MEM_OTHER, bytes);
}

void sl_probe_free(sl_probe *p)
{
    sl_k_free(p->be, p->src);
    sl_k_free(p->be, p->dst);
    p->src = p->dst = NULL;
}

/* One thread's part: bytes [lo, hi) (a read: whole doubles). */
typedef struct part {
    const sl_probe *p;
    size_t lo, hi;
    double sum;
    char pad[64]; /* each part's sum on its own cache line */
} part;

static void *part_main(void *arg)
{
    part *w = arg;
    const sl_probe *p = w->p;
    if (p->kind == SL_PROBE_COPY) {
        memcpy(p->dst + w->lo, p->src + w->lo, w->hi - w->lo);
        return NULL;
    }
    const double *a = (const double *)p->src + w->lo / sizeof(double);
    w->sum = sl_cpu_read_sum_1((w->hi - w->lo) / sizeof(double), a);
    return NULL;
}

static void probe_body(void *arg)
{
    sl_probe *p = arg;
    size_t unit = p->kind == SL_PROBE_READ ? sizeof(double) : 1, n = p->bytes / unit;
    if (p->threads <= 0) {
        if (p->kind == SL_PROBE_READ) p->sink += sl_k_read_sum(p->be, n, (const double *)p->src);
        else sl_k_memcpy(p->be, p->dst, p->src, p->bytes, SL_K_D2D);
        sl_k_sync(p->be);
        return;
    }
    int nt = p->threads;
    part *w = calloc((size_t)nt, sizeof *w);
    pthread_t *tid = calloc((size_t)nt, sizeof *tid);
    if (!w || !tid) SL_FATAL("out of memory for %d probe threads", nt);
    for (int t = 0; t < nt; t++) {
        w[t] = (part){.p = p, .lo = n * (size_t)t / (size_t)nt * unit,
                      .hi = n * (size_t)(t + 1) / (size_t)nt * unit};
        if (nt == 1) break; /* one part: this thread's own */
        int rc = pthread_create(&tid[t], NULL, part_main, &w[t]);
        if (rc) SL_FATAL("pthread_create (probe thread %d of %d) failed: %s", t, nt, strerror(rc));
    }
    if (nt == 1) part_main(&w[0]);
    for (int t = 0; t < nt; t++) {
        if (nt > 1) pthread_join(tid[t], NULL);
        p->sink += w[t].sum;
    }
    free(w);
    free(tid);
}

double sl_probe_run(sl_ctx *ctx, sl_probe *p, int warmup, int iters, sl_stats *st)
{
    sl_slowdown_ceiling(1); /* a probe is a ceiling: never slowed by SL_TEST_SLOWDOWN */
    sl_time_loop_n(ctx, warmup, iters, probe_body, p, st);
    sl_slowdown_ceiling(0);
    return p->kind == SL_PROBE_COPY ? 2.0 * (double)p->bytes : (double)p->bytes;
}

void sl_probe_result(sl_ctx *ctx, const sl_probe *p, const sl_stats *st, sl_result *r,
                     const char *variant, const char *metric, double gbps)
{
    sl_result_init(ctx, r, variant);
    r->backend = sl_backend_name(p->be);
    sl_result_set_time(r, st);
    sl_result_metric(r, metric, gbps, "GB/s");
    snprintf(r->headline, sizeof r->headline, "%s", metric);
    sl_result_check(r, SL_CHECK_NONE, 0, "bandwidth probe: nothing to check");
}
