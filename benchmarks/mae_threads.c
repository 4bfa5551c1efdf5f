/* mae_threads.c — threaded reductions: the mean absolute error of a linear model
 * f(x) = w·x over N samples × M features, summed by T threads in six ways.
 *
 *   serial    one thread, one running sum                       the reference timing
 *   racy      T threads, unsynchronised load-add-store on one shared sum: updates are lost
 *   mutex     T threads, a mutex around every update of the shared sum
 *   atomic    T threads, a C11 compare-and-swap loop on the shared sum
 *   partial   T threads, each sums its rows locally; one combine at the end
 *   openmp    an OpenMP parallel for with reduction(+:sum)
 *
 * Under MPI each rank takes a contiguous block of the N samples, its T threads split that
 * block, and one MPI_Allreduce combines the ranks' sums (ranks × threads workers in all).
 *
 * Data are integer-valued (x in [-8, 8], w in [-4, 4], y in [-64, 64]) and sums are kept in
 * double, so every partial sum is an integer below 2^53 and exact: a correct variant equals
 * the reference bit for bit whatever the order of its additions. The reference is computed
 * independently, in 64-bit integers, straight from the generator without the stored arrays.
 *
 * Bandwidth: every variant reads N·(M+1) elements; a STREAM-style read kernel over an array
 * of the same size, with the same thread count (kernels/probe.h), measures what the memory system can deliver
 * in the same run, so "partial reaches x% of read bandwidth" is a ratio from one run.
 */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scalelab.h"
#include "probe.h"
#include "sl_rng.h"

#define MAE_VARIANTS(X)                                                                    \
    X(V_SERIAL, "serial") X(V_RACY, "racy") X(V_MUTEX, "mutex") X(V_ATOMIC, "atomic")        \
    X(V_PARTIAL, "partial") X(V_OPENMP, "openmp")
SL_ENUM(mae_variant, MAE_VARIANTS, NVARIANTS);
static const char *const variant_names[NVARIANTS] = SL_ENUM_NAMES(MAE_VARIANTS);

/* Technique options (filled by the parser). */
static long long opt_samples = 4 << 20;
static long long opt_features = 8;
static sl_int_list opt_threads = {.is_max = 1};
static unsigned opt_variants = ~0u;

static const sl_opt extra_opts[] = {
    {"samples", 'N', SL_OPT_INT, &opt_samples, 1, 1LL << 36, NULL, 0,
     "N: samples in all, split across ranks (default 4194304)"},
    {"features", 'M', SL_OPT_INT, &opt_features, 1, 4096, NULL, 0, "M: features per sample (default 8)"},
    {"threads", 't', SL_OPT_INT_LIST, &opt_threads, 1, 1024, NULL, 1,
     "thread counts to sweep, e.g. 1,2,4; max = 1,2,4,... up to the CPUs this rank may use (default)"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(MAE_VARIANTS), 0,
     "variants to run (default all; serial always runs, as the baseline)"},
    {0},
};

static const sl_program program = {
    .name = "mae_threads",
    .summary = "mean absolute error summed by threads: race, mutex, atomic, partial sums, OpenMP",
    .uses = SL_USES_DTYPE,
    .dtypes = (1u << SL_F64) | (1u << SL_F32),
    .default_dtype = SL_F64,
    .default_iters = 10,
    .default_warmup = 2,
    .groups = {&sl_data_opts},
    .extra = extra_opts,
    /* worker threads run while the main thread may be in MPI (their sums are combined by it) */
    .mpi_thread = SL_MPI_THREAD_FUNNELED,
};

/* The data ------------------------------------------------------------------------------ */

/* Counter-based generation (kernels/sl_rng.h): value i of a stream depends on (seed, i) only,
 * so every rank generates its own block and the reference regenerates any element. */
static inline int64_t gen_int(uint64_t seed, uint64_t stream, uint64_t i, int64_t lo, int64_t hi)
{
    uint64_t h = sl_rng_u64(seed * 0x9e3779b97f4a7c15ull + stream, i);
    return lo + (int64_t)(h % (uint64_t)(hi - lo + 1));
}
enum { STREAM_X = 1, STREAM_Y = 2, STREAM_W = 3 };
static inline int64_t x_value(uint64_t s, uint64_t row, uint64_t col, uint64_t m)
{
    return gen_int(s, STREAM_X, row * m + col, -8, 8);
}
static inline int64_t y_value(uint64_t s, uint64_t row) { return gen_int(s, STREAM_Y, row, -64, 64); }
static inline int64_t w_value(uint64_t s, uint64_t col) { return gen_int(s, STREAM_W, col, -4, 4); }

typedef struct dataset {
    sl_dtype dtype;
    size_t rows, m;       /* this rank's rows, features */
    size_t first_row;     /* global index of this rank's first row */
    void *x;              /* [rows][m] in dtype */
    void *y;              /* [rows] in dtype */
    double *w;            /* [m] */
} dataset;

static void dataset_fill(dataset *d, uint64_t seed)
{
    size_t esz = sl_dtype_size(d->dtype);
    d->x = sl_alloc(SL_MEM_DATA, d->rows * d->m * esz);
    d->y = sl_alloc(SL_MEM_DATA, d->rows * esz);
    d->w = sl_alloc(SL_MEM_PARAMS, d->m * sizeof(double));
    for (size_t j = 0; j < d->m; j++) d->w[j] = (double)w_value(seed, j);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < d->rows; i++) {
        size_t g = d->first_row + i;
        for (size_t j = 0; j < d->m; j++) {
            double v = (double)x_value(seed, g, j, d->m);
            if (d->dtype == SL_F32)
                ((float *)d->x)[i * d->m + j] = (float)v;
            else
                ((double *)d->x)[i * d->m + j] = v;
        }
        double yv = (double)y_value(seed, g);
        if (d->dtype == SL_F32)
            ((float *)d->y)[i] = (float)yv;
        else
            ((double *)d->y)[i] = yv;
    }
}

/* The reference: sum over this rank's rows of |y - w·x| in 64-bit integers, generated afresh
 * (it shares nothing with the stored arrays or the variants' arithmetic). */
static int64_t reference_sum(const dataset *d, uint64_t seed)
{
    int64_t total = 0;
    int64_t *w = malloc(d->m * sizeof *w);
    if (!w) SL_FATAL("out of memory for %zu weights", d->m);
    for (size_t j = 0; j < d->m; j++) w[j] = w_value(seed, j);
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (size_t i = 0; i < d->rows; i++) {
        size_t g = d->first_row + i;
        int64_t pred = 0;
        for (size_t j = 0; j < d->m; j++) pred += w[j] * x_value(seed, g, j, d->m);
        int64_t e = y_value(seed, g) - pred;
        total += e < 0 ? -e : e;
    }
    free(w);
    return total;
}

/* |y_i - w·x_i| for row i. Four independent accumulators let the loop run at memory speed
 * rather than at the latency of one dependent add chain; with integer data the order of the
 * additions cannot change the result. */
#define DEFINE_ROW_ERROR(T, NAME)                                                \
    static inline double NAME(const T *restrict x, double y, const double *restrict w, size_t m) \
    {                                                                            \
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                   \
        size_t j = 0;                                                            \
        for (; j + 4 <= m; j += 4) {                                             \
            a0 += w[j] * (double)x[j];                                           \
            a1 += w[j + 1] * (double)x[j + 1];                                   \
            a2 += w[j + 2] * (double)x[j + 2];                                   \
            a3 += w[j + 3] * (double)x[j + 3];                                   \
        }                                                                        \
        for (; j < m; j++) a0 += w[j] * (double)x[j];                            \
        return fabs(y - ((a0 + a1) + (a2 + a3))); /* fabs: branch-free on random signs */ \
    }
DEFINE_ROW_ERROR(double, row_error_f64)
DEFINE_ROW_ERROR(float, row_error_f32)

static inline double row_error(const dataset *d, size_t i)
{
    if (d->dtype == SL_F32)
        return row_error_f32((const float *)d->x + i * d->m, ((const float *)d->y)[i], d->w, d->m);
    return row_error_f64((const double *)d->x + i * d->m, ((const double *)d->y)[i], d->w, d->m);
}

/* Sum of the row errors over [lo, hi), in one running sum: the work of one thread. */
static double range_sum(const dataset *d, size_t lo, size_t hi)
{
    double s = 0;
    if (d->dtype == SL_F32) {
        const float *x = d->x, *y = d->y;
        for (size_t i = lo; i < hi; i++) s += row_error_f32(x + i * d->m, y[i], d->w, d->m);
    } else {
        const double *x = d->x, *y = d->y;
        for (size_t i = lo; i < hi; i++) s += row_error_f64(x + i * d->m, y[i], d->w, d->m);
    }
    return s;
}

/* The threaded variants ------------------------------------------------------------------ */

/* State shared by the threads of one run. The shared sum and counter are _Atomic so that the
 * racy variant can perform a genuine unsynchronised load-add-store (relaxed atomic load, then
 * relaxed atomic store: the same instructions as a plain `+=`, and the same lost updates)
 * without undefined behaviour. */
typedef struct shared_state {
    const dataset *d;
    int variant, nthreads;
    _Atomic double sum;
    /* racy only: updates that survived, counted the same racy way; it races beside the sum, not
     * with it (a thread descheduled between the two stores loses counts, not sum) */
    _Atomic long long updates;
    pthread_mutex_t lock;
} shared_state;

typedef struct worker {
    shared_state *sh;
    size_t lo, hi;
    double partial;
    char pad[64]; /* keep each worker's partial on its own cache line */
} worker;

static void *worker_main(void *arg)
{
    worker *wk = arg;
    shared_state *sh = wk->sh;
    const dataset *d = sh->d;
    switch (sh->variant) {
    case V_RACY:
        for (size_t i = wk->lo; i < wk->hi; i++) {
            double v = row_error(d, i);
            double s = atomic_load_explicit(&sh->sum, memory_order_relaxed);
            long long c = atomic_load_explicit(&sh->updates, memory_order_relaxed);
            atomic_store_explicit(&sh->sum, s + v, memory_order_relaxed);
            atomic_store_explicit(&sh->updates, c + 1, memory_order_relaxed);
        }
        break;
    case V_MUTEX:
        for (size_t i = wk->lo; i < wk->hi; i++) {
            double v = row_error(d, i);
            pthread_mutex_lock(&sh->lock);
            double s = atomic_load_explicit(&sh->sum, memory_order_relaxed);
            atomic_store_explicit(&sh->sum, s + v, memory_order_relaxed);
            pthread_mutex_unlock(&sh->lock);
        }
        break;
    case V_ATOMIC:
        for (size_t i = wk->lo; i < wk->hi; i++) {
            double v = row_error(d, i);
            double old = atomic_load_explicit(&sh->sum, memory_order_relaxed);
            /* retry until no other thread changed the sum between our load and our store */
            while (!atomic_compare_exchange_weak_explicit(&sh->sum, &old, old + v,
                                                          memory_order_relaxed, memory_order_relaxed))
                ;
        }
        break;
    case V_PARTIAL:
        wk->partial = range_sum(d, wk->lo, wk->hi);
        break;
    }
    return NULL;
}

typedef struct run_result {
    double sum;         /* this rank's sum */
    long long updates;  /* racy: surviving updates on this rank */
} run_result;

static run_result run_threads(const dataset *d, int variant, int nthreads)
{
    shared_state sh = {.d = d, .variant = variant, .nthreads = nthreads};
    atomic_init(&sh.sum, 0.0);
    atomic_init(&sh.updates, 0);
    pthread_mutex_init(&sh.lock, NULL);
    worker *wk = calloc((size_t)nthreads, sizeof *wk);
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    if (!wk || !tid) SL_FATAL("out of memory for %d threads", nthreads);
    for (int t = 0; t < nthreads; t++) {
        wk[t] = (worker){.sh = &sh, .lo = d->rows * (size_t)t / (size_t)nthreads,
                         .hi = d->rows * (size_t)(t + 1) / (size_t)nthreads};
        int rc = pthread_create(&tid[t], NULL, worker_main, &wk[t]);
        if (rc) SL_FATAL("pthread_create (thread %d of %d) failed: %s", t, nthreads, strerror(rc));
    }
    for (int t = 0; t < nthreads; t++) pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&sh.lock);

    run_result r = {0};
    if (variant == V_PARTIAL)
        for (int t = 0; t < nthreads; t++) r.sum += wk[t].partial; /* the one combine */
    else
        r.sum = atomic_load(&sh.sum);
    r.updates = atomic_load(&sh.updates);
    free(wk);
    free(tid);
    return r;
}

static run_result run_variant(const dataset *d, int variant, int nthreads)
{
    run_result r = {0};
    if (variant == V_SERIAL) {
        r.sum = range_sum(d, 0, d->rows);
    } else if (variant == V_OPENMP) {
        double s = 0;
        const long long rows = (long long)d->rows;
#pragma omp parallel for num_threads(nthreads) reduction(+ : s) schedule(static)
        for (long long i = 0; i < rows; i++) s += row_error(d, (size_t)i);
        r.sum = s;
    } else {
        r = run_threads(d, variant, nthreads);
    }
    return r;
}

/* One timed iteration: the variant on this rank, then the combine across ranks. */
typedef struct iteration {
    sl_ctx *ctx;
    const dataset *d;
    int variant, nthreads;
    int count, capacity;
    double *values;         /* global result of each iteration, checked after the loop */
    long long *updates;     /* racy: global surviving updates of each iteration */
    double *combine_s;      /* the MPI_Allreduce of the ranks' sums, each iteration */
    char span[48];          /* trace name of the compute span: variant and thread count */
} iteration;

static void iteration_body(void *arg)
{
    iteration *it = arg;
    double t0 = sl_now();
    run_result r = run_variant(it->d, it->variant, it->nthreads);
    double t1 = sl_now();
    double global = 0;
    long long upd = 0;
    SL_CHECK_MPI(MPI_Allreduce(&r.sum, &global, 1, MPI_DOUBLE, MPI_SUM, it->ctx->comm));
    double t2 = sl_now();
    sl_trace_event(it->span, "compute", 0, t0, t1);
    sl_trace_event("combine (MPI_Allreduce)", "comm", 0, t1, t2);
    /* the surviving-update count is the racy variant's instrument, not part of the work */
    if (it->variant == V_RACY)
        SL_CHECK_MPI(MPI_Allreduce(&r.updates, &upd, 1, MPI_LONG_LONG, MPI_SUM, it->ctx->comm));
    if (it->count < it->capacity) {
        it->values[it->count] = global;
        it->updates[it->count] = upd;
        it->combine_s[it->count] = t2 - t1;
        it->count++;
    }
}

/* Runs the read probe (kernels/probe.h) with nt threads, emits its row and returns its
 * bandwidth (GB/s, all ranks together). */
static double measure_read_bw(sl_ctx *ctx, sl_probe *probe, int nt, sl_dtype block)
{
    sl_stats st;
    probe->threads = nt;
    double bytes = sl_probe_run(ctx, probe, (int)ctx->opt.warmup, (int)ctx->opt.iters, &st) * ctx->nranks;
    double read_bw = bytes / st.median / 1e9;
    sl_result r;
    sl_probe_result(ctx, probe, &st, &r, "stream_read", "read_bw", read_bw);
    /* the row belongs to the block it is the ceiling of (f32 or f64); the probe itself always
     * sums doubles, which the param says */
    r.dtype = sl_dtype_name(block);
    sl_result_param_str(&r, "probe_reads", "f64");
    sl_result_param_num(&r, "threads", nt);
    sl_result_param_num(&r, "bytes", bytes);
    sl_result_emit(ctx, &r);
    return read_bw;
}

/* The sweep ------------------------------------------------------------------------------ */

static const sl_column columns[] = {
    SL_COL("dtype", "dtype", 6),
    SL_COL("threads", "threads", 8),
    SL_COL("variant", "variant", 12),
    SL_COL_TIME("ms", 1e3, 3, 10),
    SL_COL_P95("ms", 1e3, 3, 10),
    {"speedup", "x", "speedup", 9, 2, 0},
    {"ns/upd", "ns", "ns_per_update", 8, 2, 1e9},
    {"combine", "us", "combine_time", 9, 1, 1e6},
    {"eff_bw", "GB/s", "eff_bw", 9, 2, 0},
    {"read_bw", "GB/s", "read_bw", 9, 2, 0},
    {"of_read", "%", "bw_fraction", 8, 1, 100},
    {"value", "sum|e|", "value", 14, 0, 0},
    {"diff", "", "diff_from_serial", 12, 0, 0},
    {"lost", "%", "lost_updates", 7, 2, 100},
    {"wrong", "iters", "wrong_iterations", 6, 0, 0},
    SL_COL_CHECK(13),
};

/* Thread counts: the list given, or 1, 2, 4, ... up to the CPUs this rank may use. */
static int thread_counts(int *out, int max_out, int bound_cpus)
{
    int n = 0;
    if (opt_threads.is_max) {
        int cap = bound_cpus > 0 ? bound_cpus : 1;
        for (int t = 1; t < cap && n < max_out - 1; t *= 2) out[n++] = t;
        out[n++] = cap;
    }
    for (int i = 0; i < opt_threads.n && n < max_out; i++) {
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= out[k] == (int)opt_threads.v[i];
        if (!dup) out[n++] = (int)opt_threads.v[i];
    }
    return n;
}

static void sweep_dtype(sl_ctx *ctx, sl_dtype dtype, const int *threads, int nthreads_counts)
{
    uint64_t seed = (uint64_t)sl_opt_seed;
    size_t n = (size_t)opt_samples, m = (size_t)opt_features;
    dataset d = {.dtype = dtype, .m = m};
    d.first_row = n * (size_t)ctx->rank / (size_t)ctx->nranks;
    d.rows = n * (size_t)(ctx->rank + 1) / (size_t)ctx->nranks - d.first_row;
    dataset_fill(&d, seed);
    double bytes_read = (double)n * (double)(m + 1) * (double)sl_dtype_size(dtype); /* all ranks */

    /* The exact global reference, outside every timed region. */
    long long ref_local = reference_sum(&d, seed), ref = 0;
    SL_CHECK_MPI(MPI_Allreduce(&ref_local, &ref, 1, MPI_LONG_LONG, MPI_SUM, ctx->comm));

    /* The read-bandwidth probe array: as many bytes as the data, at least 64 MiB so that it
     * streams from memory rather than from cache. */
    size_t probe_n = (size_t)(bytes_read / ctx->nranks / sizeof(double));
    if (probe_n < ((size_t)64 << 20) / sizeof(double)) probe_n = ((size_t)64 << 20) / sizeof(double);
    sl_probe probe;
    sl_probe_init(&probe, SL_PROBE_READ, SL_BACKEND_CPU, probe_n * sizeof(double), 1);

    int cap = (int)ctx->opt.warmup + (int)ctx->opt.iters;
    iteration it = {.ctx = ctx, .d = &d, .capacity = cap};
    it.values = malloc((size_t)cap * sizeof *it.values);
    it.updates = malloc((size_t)cap * sizeof *it.updates);
    it.combine_s = malloc((size_t)cap * sizeof *it.combine_s);
    double *combine_slowest = malloc((size_t)cap * sizeof *combine_slowest);
    if (!it.values || !it.updates || !it.combine_s || !combine_slowest) SL_FATAL("out of memory for %d iteration results", cap);

    /* serial is compared with the one-thread probe, measured first if 1 is not in the list */
    double serial_median = 0, read_bw_1 = NAN;
    if (threads[0] != 1) read_bw_1 = measure_read_bw(ctx, &probe, 1, dtype);
    sl_stats st;
    sl_result r;
    for (int ti = 0; ti < nthreads_counts; ti++) {
        int nt = threads[ti];
        double read_bw = measure_read_bw(ctx, &probe, nt, dtype);
        if (nt == 1) read_bw_1 = read_bw;

        for (int v = 0; v < NVARIANTS; v++) {
            /* serial is the baseline: measured once, at the first thread count */
            if (v == V_SERIAL ? ti != 0 : !(opt_variants & (1u << v))) continue;
            int workers = v == V_SERIAL ? 1 : nt;
            it.variant = v;
            it.nthreads = workers;
            it.count = 0;
            snprintf(it.span, sizeof it.span, "%s, %d thread%s", variant_names[v], workers,
                     workers == 1 ? "" : "s");
            sl_time_loop(ctx, iteration_body, &it, &st);
            if (v == V_SERIAL) serial_median = st.median;

            sl_result_init(ctx, &r, variant_names[v]);
            r.dtype = sl_dtype_name(dtype);
            r.backend = "cpu";
            sl_result_param_num(&r, "threads", workers);
            sl_result_param_num(&r, "samples", (double)n);
            sl_result_param_num(&r, "features", (double)m);
            sl_result_set_time(&r, &st);
            double eff_bw = bytes_read / st.median / 1e9;
            double probe_bw = v == V_SERIAL ? read_bw_1 : read_bw; /* same thread count */
            sl_result_metric(&r, "speedup", serial_median / st.median, "x");
            sl_result_metric(&r, "eff_bw", eff_bw, "GB/s");
            sl_result_metric(&r, "read_bw", probe_bw, "GB/s");
            sl_result_metric(&r, "bw_fraction", eff_bw / probe_bw, "ratio");
            /* value, diff and lost all describe the last timed iteration, and wrong counts the
             * timed iterations only (warm-up excluded), so that the row agrees with itself */
            int first_timed = it.count - (int)ctx->opt.iters, timed = it.count - first_timed;
            double last = it.values[it.count - 1];
            sl_result_metric(&r, "ns_per_update", st.median / (double)n, "s");
            /* the combine's time in each timed iteration is its slowest rank's, as the step's */
            sl_stats cst;
            sl_stats_slowest_rank(it.combine_s + first_timed, combine_slowest, timed, ctx->comm);
            sl_stats_compute(combine_slowest, timed, &cst);
            sl_result_metric(&r, "combine_time", cst.median, "s");
            sl_result_metric(&r, "value", last, "sum|e|");
            sl_result_metric(&r, "mae", last / (double)n, "");
            sl_result_metric(&r, "diff_from_serial", last - (double)ref, "");
            snprintf(r.headline, sizeof r.headline, "eff_bw");
            sl_result_gate(&r, "bw_fraction"); /* against this run's read probe */

            /* every timed iteration's value, not just the last, must equal the reference (the
             * warm-up's too, for the correct variants: a wrong warm-up is still wrong) */
            int wrong = 0, wrong_timed = 0;
            double worst = 0;
            for (int k = 0; k < it.count; k++) {
                double e = it.values[k] - (double)ref;
                if (e != 0) wrong++, wrong_timed += k >= first_timed;
                if (e * e > worst * worst) worst = e;
            }
            sl_result_metric(&r, "wrong_iterations", wrong_timed, "");
            if (v == V_RACY) {
                double lost = 1.0 - (double)it.updates[it.count - 1] / (double)n, lost_sum = 0;
                for (int k = first_timed; k < it.count; k++) lost_sum += 1.0 - (double)it.updates[k] / (double)n;
                sl_result_metric(&r, "lost_updates", lost, "fraction");
                sl_result_metric(&r, "lost_updates_mean", lost_sum / timed, "fraction");
                sl_result_check(&r, SL_CHECK_NOT_ASSERTED, worst,
                                "racy by design: wrong in %d of %d timed iterations, %.4f%% of "
                                "updates lost on average", wrong_timed, timed, 100 * lost_sum / timed);
            } else if (!ctx->opt.check) {
                sl_result_check(&r, SL_CHECK_SKIPPED, 0, NULL);
            } else if (wrong) {
                sl_result_check(&r, SL_CHECK_FAIL, worst,
                                "%d of %d iterations differ from the reference %lld (worst by %.17g)",
                                wrong, it.count, ref, worst);
            } else {
                sl_result_check(&r, SL_CHECK_PASS, 0, NULL);
            }
            sl_result_emit(ctx, &r);
            if (v == V_RACY)
                sl_note(ctx, "racy, %d thread%s x %d rank%s: wrong in %d of %d iterations (not asserted)",
                        workers, workers == 1 ? "" : "s", ctx->nranks, ctx->nranks == 1 ? "" : "s",
                        wrong_timed, timed);
        }
    }
    free(it.values);
    free(it.updates);
    free(it.combine_s);
    free(combine_slowest);
    sl_probe_free(&probe);
    sl_free(d.x);
    sl_free(d.y);
    sl_free(d.w);
}

int main(int argc, char **argv)
{
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);

    sl_env_local me;
    sl_env_local_capture(&me);
    int threads[SL_MAX_LIST + 8];
    int nthreads_counts = thread_counts(threads, SL_MAX_LIST + 8, me.nbound_cpus);
    int most = 0;
    for (int i = 0; i < nthreads_counts; i++) most = threads[i] > most ? threads[i] : most;

    /* Threads beyond the CPUs a rank is bound to time-share them: say so rather than let a
     * flat speedup be read as a property of the variant. */
    int min_bound = me.nbound_cpus;
    SL_CHECK_MPI(MPI_Allreduce(&me.nbound_cpus, &min_bound, 1, MPI_INT, MPI_MIN, ctx.comm));
    if (!sl_oversubscribed(&ctx, 1)) sl_note_oversubscription(&ctx, most); /* else said already */
    if (most > min_bound && !sl_oversubscribed(&ctx, most))
        sl_note(&ctx, "up to %d threads per rank, but a rank may run on only %d CPU%s: threads will "
                      "time-share (launch with --bind-to none, as scripts/sl-launch does)",
                most, min_bound, min_bound == 1 ? "" : "s");
    sl_note(&ctx, "N = %lld samples x M = %lld features over %d rank%s; sums are exact (integer data)",
            opt_samples, opt_features, ctx.nranks, ctx.nranks == 1 ? "" : "s");
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));

    for (int t = 0; t < SL_NDTYPES; t++)
        if (ctx.opt.dtypes & (1u << t)) sweep_dtype(&ctx, (sl_dtype)t, threads, nthreads_counts);
    return sl_finalize(&ctx);
}
