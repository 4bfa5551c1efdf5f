/* kernels.c — a microbenchmark of every compute kernel of kernels.h, per dtype and backend,
 * placed on a roofline measured in the same run.
 *
 * Two probes come first and define the roof:
 *   peak_gemm   the f32 GEMM at --gemm-n (n x n x n): the FLOP/s this backend can reach;
 *   peak_copy   a device-to-device copy of --copy-bytes: the bandwidth it can reach
 *               (read + write counted, as STREAM's copy does).
 * A peak is the fastest iteration of its probe; every other figure is a median. As in STREAM,
 * the copy's bytes do not count the write-allocate read of its destination, so a kernel that
 * mostly reads or updates in place (bias_grad, bias_add, scale_check) can show more than 100%
 * of the memory roof.
 * Every kernel then reports its time, GFLOP/s and GB/s (minimum traffic: each operand read
 * or written once), its arithmetic intensity AI = flops / bytes, the roofline bound
 * min(peak FLOP/s, AI x peak GB/s), the fraction of that bound it attains, and which side of
 * the ridge it is on. FLOP counts of transcendental functions are nominal (one each).
 * Each kernel's output is checked, outside the timed loop, against a double-precision host
 * reference (all elements, or 64 sampled entries for GEMM and convolution).
 *
 * --train-steps N trains the shared MLP on the synthetic task for N AdamW steps instead and
 * prints the loss curve; with N >= 200 the check asks the loss to fall at least 10x.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "mlp.h"
#include "scalelab.h"
#include "sl_half.h"
#include "sl_rng.h"

#define KERNEL_LIST(X)                                                                        \
    X(K_GEMM, "gemm") X(K_BIAS, "bias_add") X(K_BIAS_GRAD, "bias_grad") X(K_RELU, "relu")       \
    X(K_GELU, "gelu") X(K_GELU_BWD, "gelu_bwd") X(K_MSE, "mse") X(K_XENT, "softmax_xent")       \
    X(K_SGD, "sgd") X(K_ADAMW, "adamw") X(K_CAST, "cast") X(K_SCALE, "scale_check")             \
    X(K_AXPBY, "axpby") X(K_CONV_FWD, "conv_fwd") X(K_CONV_BWD_DATA, "conv_bwd_data")          \
    X(K_CONV_BWD_FILTER, "conv_bwd_filter") X(K_RNG, "rng_normal")
SL_ENUM(kernel_id, KERNEL_LIST, NKERNELS);
static const char *const kernel_names[NKERNELS] = SL_ENUM_NAMES(KERNEL_LIST);

static long long opt_gemm_n = 2048;
static long long opt_elems = 16 << 20;
static size_t opt_copy_bytes = (size_t)256 << 20;
static unsigned opt_kernels = ~0u;
static long long opt_train_steps = 0;
static long long opt_seed = 42;

static const sl_opt extra_opts[] = {
    {"gemm-n", 0, SL_OPT_INT, &opt_gemm_n, 1, 65536, NULL, 0,
     "GEMM size n (n x n x n), also the FLOP/s probe (default 2048)"},
    {"elems", 0, SL_OPT_INT, &opt_elems, 1, 1LL << 32, NULL, 0,
     "elements of the element-wise kernels (default 16777216)"},
    {"copy-bytes", 0, SL_OPT_SIZE, &opt_copy_bytes, 8 << 20, 1LL << 40, NULL, 0,
     "bytes of the bandwidth probe copy (default 256M)"},
    {"kernels", 'k', SL_OPT_CHOICE_LIST, &opt_kernels, 0, 0, SL_ENUM_CHOICES(KERNEL_LIST), 0,
     "kernels to run (default all)"},
    {"train-steps", 0, SL_OPT_INT, &opt_train_steps, 0, 1000000, NULL, 0,
     "instead of the kernels, train the MLP this many steps and print the loss curve"},
    {"seed", 0, SL_OPT_INT, &opt_seed, 0, 1LL << 62, NULL, 0, "data seed (default 42)"},
    {0},
};

static const sl_program program = {
    .name = "kernels",
    .summary = "every compute kernel per dtype and backend, on a roofline measured in the same run",
    .uses = SL_USES_DTYPE | SL_USES_BACKEND,
    .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16),
    .default_dtype = SL_F32,
    .default_iters = 5,
    .default_warmup = 1,
    .extra = extra_opts,
};

static const sl_column columns[] = {
    {"kernel", "", "variant", 16, 0, 0},
    {"dtype", "", "dtype", 6, 0, 0},
    {"shape", "", "shape", 18, 0, 0},
    {"time", "ms", "time.median", 10, 3, 1e3},
    {"GFLOP/s", "", "gflops", 9, 1, 0},
    {"GB/s", "", "gbps", 8, 1, 0},
    {"AI", "flop/B", "ai", 8, 2, 0},
    {"roof", "%", "roof_fraction", 6, 1, 100},
    {"bound", "", "bound", 8, 0, 0},
    {"check", "", "check", 8, 0, 0},
};

/* The run ------------------------------------------------------------------------------- */

typedef struct run {
    sl_ctx *ctx;
    sl_backend be;
    double peak_flops, peak_bw; /* FLOP/s and B/s of the probes */
} run;

/* A timed call: fn(arg) then a wait for the backend, so device time is included. */
typedef struct timed {
    sl_backend be;
    void (*fn)(void *);
    void *arg;
} timed;

static void timed_body(void *p)
{
    timed *t = p;
    t->fn(t->arg);
    sl_k_sync(t->be);
}

static void measure(run *R, void (*fn)(void *), void *arg, sl_stats *st)
{
    timed t = {R->be, fn, arg};
    sl_time_loop(R->ctx, timed_body, &t, st);
}

/* Emits one kernel row: rates, roofline position and the check. flops may be NaN (not a
 * FLOP-counted kernel: no roofline position). */
static void emit(run *R, const char *kernel, sl_dtype dt, const char *shape, const sl_stats *st,
                 double flops, double bytes, double err, int pass, const char *msg)
{
    sl_result r;
    sl_result_init(R->ctx, &r, kernel);
    r.dtype = sl_dtype_name(dt);
    r.backend = sl_backend_name(R->be);
    sl_result_param_str(&r, "shape", shape);
    sl_result_set_time(&r, st);
    double t = st->median;
    sl_result_metric(&r, "gflops", flops / t / 1e9, "GFLOP/s");
    sl_result_metric(&r, "gbps", bytes / t / 1e9, "GB/s");
    double ai = flops / bytes;
    sl_result_metric(&r, "ai", ai, "flop/B");
    double roof = NAN;
    const char *bound = "n/a";
    if (!isnan(flops) && R->peak_flops > 0 && R->peak_bw > 0) {
        double mem_roof = ai * R->peak_bw;
        roof = mem_roof < R->peak_flops ? mem_roof : R->peak_flops;
        bound = mem_roof < R->peak_flops ? "memory" : "compute";
        /* a kernel with no arithmetic is placed by its bandwidth alone */
        sl_result_metric(&r, "roof_fraction", flops > 0 ? flops / t / roof : bytes / t / R->peak_bw,
                         "ratio");
    } else {
        sl_result_metric(&r, "roof_fraction", NAN, "ratio");
    }
    sl_result_metric(&r, "roof_gflops", roof / 1e9, "GFLOP/s");
    sl_result_metric(&r, "peak_gflops", R->peak_flops / 1e9, "GFLOP/s");
    sl_result_metric(&r, "peak_gbps", R->peak_bw / 1e9, "GB/s");
    sl_result_param_str(&r, "bound", bound);
    if (!R->ctx->opt.check) sl_result_check(&r, SL_CHECK_SKIPPED, 0, NULL);
    else if (pass < 0) sl_result_check(&r, SL_CHECK_NONE, 0, "%s", msg ? msg : "probe");
    else sl_result_check(&r, pass ? SL_CHECK_PASS : SL_CHECK_FAIL, err, "%s", msg ? msg : "");
    /* a memory-bound kernel (or a copy) is summarised by its bandwidth, the rest by FLOP/s */
    int by_bandwidth = isnan(flops) || flops == 0 || strcmp(bound, "memory") == 0;
    snprintf(r.headline, sizeof r.headline, by_bandwidth ? "gbps" : "gflops");
    sl_result_add_counters(R->ctx, &r);
    sl_result_emit(R->ctx, &r);
}

/* A row held back: the probes are emitted once both peaks are known, so that each is placed
 * on the finished roofline. */
typedef struct row {
    const char *kernel;
    sl_dtype dt;
    char shape[48], msg[160];
    sl_stats st;
    double flops, bytes, err;
    int pass;
} row;

static void emit_row(run *R, const row *w)
{
    emit(R, w->kernel, w->dt, w->shape, &w->st, w->flops, w->bytes, w->err, w->pass, w->msg);
}

/* Host <-> backend helpers ------------------------------------------------------------------ */

static void *dev(run *R, size_t bytes) { return sl_k_malloc(R->be, SL_MEM_OTHER, bytes); }
static void *host_copy(run *R, const void *d, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    if (!h) SL_FATAL("out of memory: %zu bytes for a check", bytes);
    sl_k_memcpy(R->be, h, d, bytes, SL_K_D2H);
    return h;
}
static float *dev_randn(run *R, uint64_t stream, size_t n, float scale)
{
    float *d = dev(R, n * sizeof(float));
    sl_k_rng_normal(R->be, (uint64_t)opt_seed ^ stream, 0, n, d, 0.0f, scale);
    return d;
}

/* GEMM and the FLOP/s probe ---------------------------------------------------------------- */

typedef struct gemm_args {
    sl_backend be;
    int n;
    sl_dtype dt;
    void *a, *b;
    float *c;
} gemm_args;

static void gemm_fn(void *p)
{
    gemm_args *g = p;
    sl_k_gemm(g->be, 0, 0, g->n, g->n, g->n, 1.0f, g->a, g->n, g->b, g->n, 0.0f, g->c, g->n,
              g->dt, SL_F32);
}

/* Times C = A B at n x n x n with A, B of dtype dt and C f32; checks 64 sampled entries
 * against double dot products within the (n + 2) u sum |a b| bound. Returns the FLOP/s of
 * the fastest iteration. As the probe (probe != NULL) the row is returned, not emitted. */
static double bench_gemm(run *R, sl_dtype dt, row *probe)
{
    int n = (int)opt_gemm_n;
    size_t nn = (size_t)n * n;
    float *a32 = dev_randn(R, 1, nn, 1.0f), *b32 = dev_randn(R, 2, nn, 1.0f);
    gemm_args g = {R->be, n, dt, a32, b32, dev(R, nn * sizeof(float))};
    if (dt != SL_F32) {
        g.a = dev(R, nn * 2), g.b = dev(R, nn * 2);
        sl_k_cast(R->be, nn, a32, SL_F32, g.a, dt, NULL);
        sl_k_cast(R->be, nn, b32, SL_F32, g.b, dt, NULL);
    }
    sl_stats st;
    measure(R, gemm_fn, &g, &st);
    double flops = 2.0 * n * (double)n * n;
    double err = 0;
    int pass = 1;
    if (R->ctx->opt.check) {
        /* the reference reads the operands as the kernel saw them (rounded to dt) */
        float *a = host_copy(R, a32, nn * 4), *b = host_copy(R, b32, nn * 4), *c = host_copy(R, g.c, nn * 4);
        for (int s = 0; s < 64; s++) {
            size_t i = sl_rng_u64(7, 2 * s) % n, j = sl_rng_u64(7, 2 * s + 1) % n;
            double want = 0, mag = 0;
            for (int p = 0; p < n; p++) {
                double x = dt == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(a[i * n + p]))
                           : dt == SL_BF16 ? sl_bf16_to_f32(sl_f32_to_bf16(a[i * n + p])) : a[i * n + p];
                double y = dt == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(b[(size_t)p * n + j]))
                           : dt == SL_BF16 ? sl_bf16_to_f32(sl_f32_to_bf16(b[(size_t)p * n + j])) : b[(size_t)p * n + j];
                want += x * y, mag += fabs(x * y);
            }
            double e = fabs(c[i * n + j] - want) / ((n + 2) * 0x1p-24 * mag);
            if (!(e <= err)) err = isnan(e) ? INFINITY : e;
        }
        pass = err <= 1.0;
        free(a), free(b), free(c);
    }
    row w = {.kernel = probe ? "peak_gemm" : "gemm", .dt = dt, .st = st, .flops = flops,
             .bytes = (2.0 * sl_dtype_size(dt) + 4.0) * nn, .err = err, .pass = pass};
    snprintf(w.shape, sizeof w.shape, "%dx%dx%d", n, n, n);
    snprintf(w.msg, sizeof w.msg, "%s; 64 entries, error / bound %.3g", sl_k_gemm_impl(R->be, dt), err);
    if (probe) *probe = w;
    else emit_row(R, &w);
    if (dt != SL_F32) sl_k_free(R->be, g.a), sl_k_free(R->be, g.b);
    sl_k_free(R->be, a32), sl_k_free(R->be, b32), sl_k_free(R->be, g.c);
    return flops / st.min; /* as a peak: the fastest iteration */
}

typedef struct copy_args {
    sl_backend be;
    void *dst, *src;
    size_t bytes;
} copy_args;

static void copy_fn(void *p)
{
    copy_args *c = p;
    sl_k_memcpy(c->be, c->dst, c->src, c->bytes, SL_K_D2D);
}

static double bench_copy(run *R, row *probe)
{
    copy_args c = {R->be, dev(R, opt_copy_bytes), dev(R, opt_copy_bytes), opt_copy_bytes};
    sl_k_fill(R->be, SL_F32, opt_copy_bytes / 4, c.src, 1.0);
    sl_stats st;
    measure(R, copy_fn, &c, &st);
    row w = {.kernel = "peak_copy", .dt = SL_F32, .st = st, .flops = 0.0,
             .bytes = 2.0 * opt_copy_bytes, .pass = -1};
    snprintf(w.shape, sizeof w.shape, "%zu MiB", opt_copy_bytes >> 20);
    snprintf(w.msg, sizeof w.msg, "bandwidth probe");
    *probe = w;
    /* a peak is the best the machine did: the fastest iteration, not the median */
    R->peak_bw = w.bytes / st.min;
    sl_k_free(R->be, c.dst), sl_k_free(R->be, c.src);
    return R->peak_bw;
}

/* Element-wise kernels ------------------------------------------------------------------------ */

/* Inputs and outputs of the element-wise kernels: n elements each, plus rows x cols views. */
typedef struct ew {
    sl_backend be;
    int kernel;
    sl_dtype dt;
    size_t n;
    int rows, cols;
    float *x, *y, *z, *w, *v; /* f32 operands */
    void *hx, *hy;            /* dtype operands of axpby and cast */
    int32_t *labels;
    double loss;
    size_t bad;
} ew;

static void ew_fn(void *p)
{
    ew *e = p;
    sl_adamw aw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f, .step = 1};
    sl_sgd sg = {.lr = 1e-3f, .momentum = 0.9f, .weight_decay = 0.01f};
    switch (e->kernel) {
    case K_BIAS: sl_k_bias_add(e->be, e->rows, e->cols, e->y, e->w); break;
    case K_BIAS_GRAD: sl_k_bias_grad(e->be, e->rows, e->cols, e->x, e->w); break;
    case K_RELU: sl_k_act_forward(e->be, SL_ACT_RELU, e->n, e->x, e->y); break;
    case K_GELU: sl_k_act_forward(e->be, SL_ACT_GELU, e->n, e->x, e->y); break;
    case K_GELU_BWD: sl_k_act_backward(e->be, SL_ACT_GELU, e->n, e->x, e->z, e->y); break;
    case K_MSE: e->loss = sl_k_mse(e->be, e->n, e->x, e->z, e->y, 1.0f / e->n); break;
    case K_XENT:
        e->loss = sl_k_softmax_xent(e->be, e->rows, e->cols, e->x, e->labels, e->y, 1.0f / e->rows);
        break;
    case K_SGD: sl_k_sgd_step(e->be, &sg, e->n, e->y, e->x, e->v); break;
    case K_ADAMW: sl_k_adamw_step(e->be, &aw, e->n, e->y, e->x, e->v, e->w); break;
    case K_CAST: sl_k_cast(e->be, e->n, e->x, SL_F32, e->hy, e->dt, NULL); break;
    case K_SCALE: e->bad = sl_k_scale_check(e->be, e->n, e->y, 1.0f); break;
    case K_AXPBY: sl_k_axpby(e->be, e->dt, e->n, 1.0, e->hx, 1.0, e->hy); break;
    case K_RNG: sl_k_rng_normal(e->be, 9, 0, e->n, e->y, 0.0f, 1.0f); break;
    }
}

static double gelu_d(double x)
{
    return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_d(double x)
{
    double t = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

/* One element-wise kernel: set up, time, then check one fresh call against double. Kernels
 * that update in place (bias, sgd, adamw, axpby, scale) are checked on a call from known
 * inputs after the timing. */
static void bench_ew(run *R, int kernel, sl_dtype dt)
{
    size_t n = (size_t)opt_elems;
    ew e = {.be = R->be, .kernel = kernel, .dt = dt, .n = n};
    e.cols = kernel == K_XENT ? 1000 : 1024;
    e.rows = (int)(n / e.cols);
    if (e.rows < 1) e.rows = 1;
    int rowwise = kernel == K_XENT || kernel == K_BIAS || kernel == K_BIAS_GRAD;
    if (rowwise) e.n = n = (size_t)e.rows * e.cols;
    e.x = dev_randn(R, 11, n, 2.0f), e.y = dev_randn(R, 12, n, 1.0f), e.z = dev_randn(R, 13, n, 1.0f);
    size_t nw = kernel == K_BIAS || kernel == K_BIAS_GRAD ? (size_t)e.cols : n;
    e.w = dev_randn(R, 14, nw, 1.0f);
    e.v = dev(R, n * 4);
    size_t es = sl_dtype_size(dt);
    if (kernel == K_AXPBY || kernel == K_CAST) {
        e.hx = dev(R, n * es), e.hy = dev(R, n * es);
        sl_k_cast(R->be, n, e.x, SL_F32, e.hx, dt, NULL);
        sl_k_cast(R->be, n, e.y, SL_F32, e.hy, dt, NULL);
    }
    if (kernel == K_XENT) {
        int32_t *lab = malloc((size_t)e.rows * sizeof *lab);
        if (!lab) SL_FATAL("out of memory for labels");
        for (int r = 0; r < e.rows; r++) lab[r] = (int32_t)(sl_rng_u64(3, r) % e.cols);
        e.labels = dev(R, (size_t)e.rows * sizeof *lab);
        sl_k_memcpy(R->be, e.labels, lab, (size_t)e.rows * sizeof *lab, SL_K_H2D);
        free(lab);
    }
    if (kernel == K_ADAMW) sl_k_memset0(R->be, e.w, n * 4); /* v >= 0, as in training */
    sl_stats st;
    measure(R, ew_fn, &e, &st);

    /* flops and minimum bytes per call (f32 = 4 B) */
    double fl = 0, by = 0;
    switch (kernel) {
    case K_BIAS: fl = n, by = 8.0 * n + 4.0 * e.cols; break;
    case K_BIAS_GRAD: fl = n, by = 4.0 * n + 8.0 * e.cols; break;
    case K_RELU: fl = n, by = 8.0 * n; break;
    case K_GELU: fl = 9.0 * n, by = 8.0 * n; break;
    case K_GELU_BWD: fl = 17.0 * n, by = 12.0 * n; break;
    case K_MSE: fl = 5.0 * n, by = 12.0 * n; break;
    case K_XENT: fl = 5.0 * n, by = 8.0 * n; break;
    case K_SGD: fl = 5.0 * n, by = 20.0 * n; break;
    case K_ADAMW: fl = 16.0 * n, by = 28.0 * n; break;
    case K_CAST: fl = 0, by = (4.0 + es) * n; break;
    case K_SCALE: fl = n, by = 8.0 * n; break;
    case K_AXPBY: fl = 3.0 * n, by = 3.0 * es * n; break;
    case K_RNG: fl = NAN, by = 4.0 * n; break;
    }

    /* The check: restore known inputs, one call, compare every element with double. */
    float *x = host_copy(R, e.x, n * 4), *z = host_copy(R, e.z, n * 4);
    if (kernel == K_BIAS_GRAD) sl_k_memset0(R->be, e.w, nw * 4); /* accumulates: from zero */
    float *w0 = host_copy(R, e.w, nw * 4);
    sl_k_rng_normal(R->be, (uint64_t)opt_seed ^ 12, 0, n, e.y, 0.0f, 1.0f); /* y as generated */
    float *y0 = host_copy(R, e.y, n * 4);
    sl_k_memset0(R->be, e.v, n * 4);
    if (e.hx) sl_k_cast(R->be, n, e.y, SL_F32, e.hy, dt, NULL);
    if (kernel == K_ADAMW) sl_k_memset0(R->be, e.w, n * 4);
    ew_fn(&e);
    sl_k_sync(R->be);
    float *out = e.hy && kernel != K_CAST ? NULL : host_copy(R, e.y, n * 4);
    void *hout = e.hy ? host_copy(R, e.hy, n * es) : NULL;
    double worst = 0, tol = 1e-5; /* relative to max(1, |want|): f32 formulas, a few roundings */
    int32_t *lab = kernel == K_XENT ? host_copy(R, e.labels, (size_t)e.rows * 4) : NULL;
    double loss_want = 0;
    for (size_t i = 0; i < n; i++) {
        double want = 0, got = out ? out[i] : 0;
        switch (kernel) {
        case K_BIAS: want = (double)y0[i] + w0[i % e.cols]; break;
        case K_BIAS_GRAD: want = got; break; /* its output is the bias: checked below */
        case K_RELU: want = x[i] > 0 ? x[i] : 0; break;
        case K_GELU: want = gelu_d(x[i]); break;
        case K_GELU_BWD: want = z[i] * gelu_grad_d(x[i]); break;
        case K_MSE:
            want = 2.0 / n * ((double)x[i] - z[i]);
            loss_want += ((double)x[i] - z[i]) * ((double)x[i] - z[i]) / n;
            break;
        case K_XENT: {
            size_t r = i / e.cols;
            if (i % e.cols == 0) { /* this row's log-sum-exp, once */
                double m = x[i], s = 0;
                for (int j = 1; j < e.cols; j++) m = fmax(m, x[i + j]);
                for (int j = 0; j < e.cols; j++) s += exp(x[i + j] - m);
                loss_want += (m + log(s) - x[r * e.cols + lab[r]]) / e.rows;
                z[i] = (float)(m + log(s)); /* keep lse for the row in z[row start] */
            }
            double lse = z[r * e.cols];
            want = (exp(x[i] - lse) - ((int)(i % e.cols) == lab[r])) / e.rows;
            break;
        }
        case K_SGD: want = y0[i] - 1e-3 * (x[i] + (double)0.01f * y0[i]); break;
        case K_ADAMW: {
            /* the first step from zero state: mhat = g, vhat = g^2 */
            double g = x[i];
            want = y0[i] - (double)1e-3f * ((double)0.01f * y0[i] + g / (fabs(g) + 1e-8));
            break;
        }
        case K_CAST: {
            float xr = dt == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(x[i])) : sl_bf16_to_f32(sl_f32_to_bf16(x[i]));
            want = xr, got = dt == SL_F16 ? sl_f16_to_f32(((uint16_t *)hout)[i]) : sl_bf16_to_f32(((uint16_t *)hout)[i]);
            break;
        }
        case K_SCALE: want = y0[i]; break;
        case K_AXPBY: {
            double xs = dt == SL_F32 ? x[i] : dt == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(x[i])) : sl_bf16_to_f32(sl_f32_to_bf16(x[i]));
            double ys = dt == SL_F32 ? y0[i] : dt == SL_F16 ? sl_f16_to_f32(sl_f32_to_f16(y0[i])) : sl_bf16_to_f32(sl_f32_to_bf16(y0[i]));
            want = xs + ys;
            got = dt == SL_F32 ? ((float *)hout)[i] : dt == SL_F16 ? sl_f16_to_f32(((uint16_t *)hout)[i]) : sl_bf16_to_f32(((uint16_t *)hout)[i]);
            /* one rounding in the dtype: 2^-11 (f16) or 2^-8 (bf16) relative */
            if (dt != SL_F32) tol = dt == SL_F16 ? 0x1p-11 : 0x1p-8;
            break;
        }
        case K_RNG: want = sl_rng_normal(9, i); break;
        }
        double err = fabs(got - want) / fmax(1.0, fabs(want));
        if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
    }
    if (kernel == K_BIAS_GRAD) {
        /* column sums of x from zero: within (rows + 1) u sum |x| of the exact sums */
        float *db = host_copy(R, e.w, nw * 4);
        for (int j = 0; j < e.cols; j++) {
            double sum = 0, mag = 0;
            for (int r = 0; r < e.rows; r++) sum += x[(size_t)r * e.cols + j], mag += fabs(x[(size_t)r * e.cols + j]);
            double err = fabs(db[j] - sum) / ((e.rows + 1) * 0x1p-24 * mag + 1e-30) * tol;
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
        }
        free(db);
    }
    char msg[160] = "";
    if (kernel == K_MSE || kernel == K_XENT) {
        double le = fabs(e.loss - loss_want) / fmax(1.0, fabs(loss_want));
        if (!(le <= worst)) worst = isnan(le) ? INFINITY : le;
        snprintf(msg, sizeof msg, "loss %.6g, reference %.6g", e.loss, loss_want);
    }
    if (kernel == K_SCALE && e.bad != 0) worst = INFINITY;
    char shape[48];
    if (rowwise) snprintf(shape, sizeof shape, "%dx%d", e.rows, e.cols);
    else snprintf(shape, sizeof shape, "%zu", n);
    emit(R, kernel_names[kernel], dt, shape, &st, fl, by, worst / tol, worst <= tol, msg);
    free(x), free(z), free(w0), free(y0), free(out), free(hout), free(lab);
    sl_k_free(R->be, e.x), sl_k_free(R->be, e.y), sl_k_free(R->be, e.z), sl_k_free(R->be, e.w);
    sl_k_free(R->be, e.v), sl_k_free(R->be, e.hx), sl_k_free(R->be, e.hy), sl_k_free(R->be, e.labels);
}

/* Convolution --------------------------------------------------------------------------------- */

typedef struct conv_args {
    sl_backend be;
    int pass;
    sl_conv2d cv;
    float *x, *w, *y, *dx, *dw;
} conv_args;

static void conv_fn(void *p)
{
    conv_args *c = p;
    if (c->pass == K_CONV_FWD) sl_k_conv2d_forward(c->be, &c->cv, c->x, c->w, c->y);
    else if (c->pass == K_CONV_BWD_DATA) sl_k_conv2d_backward_data(c->be, &c->cv, c->y, c->w, c->dx);
    else sl_k_conv2d_backward_filter(c->be, &c->cv, c->x, c->y, c->dw);
}

static void bench_conv(run *R, int pass)
{
    conv_args c = {.be = R->be, .pass = pass};
    c.cv = (sl_conv2d){.n = 8, .c = 64, .h = 32, .w = 32, .k = 64, .r = 3, .s = 3, .pad_h = 1,
                       .pad_w = 1, .stride_h = 1, .stride_w = 1};
    sl_conv2d_init(&c.cv);
    const sl_conv2d *cv = &c.cv;
    size_t nx = (size_t)cv->n * cv->c * cv->h * cv->w, nw = (size_t)cv->k * cv->c * cv->r * cv->s,
           ny = (size_t)cv->n * cv->k * cv->p * cv->q;
    c.x = dev_randn(R, 21, nx, 1), c.w = dev_randn(R, 22, nw, 1), c.y = dev_randn(R, 23, ny, 1);
    c.dx = dev(R, nx * 4), c.dw = dev(R, nw * 4);
    sl_stats st;
    measure(R, conv_fn, &c, &st);
    /* check: the forward output, dx, or dw from zero, at 64 sampled entries, against direct
     * sums in double within (terms + 2) u sum |terms| */
    sl_k_memset0(R->be, c.dw, nw * 4);
    conv_fn(&c);
    sl_k_sync(R->be);
    float *x = host_copy(R, c.x, nx * 4), *w = host_copy(R, c.w, nw * 4), *y = host_copy(R, c.y, ny * 4);
    float *out = host_copy(R, pass == K_CONV_FWD ? c.y : pass == K_CONV_BWD_DATA ? c.dx : c.dw,
                           (pass == K_CONV_FWD ? ny : pass == K_CONV_BWD_DATA ? nx : nw) * 4);
    double worst = 0;
    for (int s = 0; s < 64; s++) {
        double want = 0, mag = 0, terms = 0;
        size_t idx;
        if (pass == K_CONV_FWD) {
            idx = sl_rng_u64(31, s) % ny;
            int q = idx % cv->q, p = idx / cv->q % cv->p, k = idx / ((size_t)cv->p * cv->q) % cv->k,
                b = idx / ((size_t)cv->p * cv->q * cv->k);
            /* y was overwritten by the forward: recompute from x and w */
            for (int ci = 0; ci < cv->c; ci++)
                for (int i = 0; i < cv->r; i++)
                    for (int j = 0; j < cv->s; j++) {
                        int h = p - cv->pad_h + i, ww = q - cv->pad_w + j;
                        if (h < 0 || h >= cv->h || ww < 0 || ww >= cv->w) continue;
                        double t = (double)x[(((size_t)b * cv->c + ci) * cv->h + h) * cv->w + ww] *
                                   w[(((size_t)k * cv->c + ci) * cv->r + i) * cv->s + j];
                        want += t, mag += fabs(t), terms++;
                    }
        } else if (pass == K_CONV_BWD_DATA) {
            idx = sl_rng_u64(32, s) % nx;
            int ww = idx % cv->w, h = idx / cv->w % cv->h, ci = idx / ((size_t)cv->w * cv->h) % cv->c,
                b = idx / ((size_t)cv->w * cv->h * cv->c);
            for (int k = 0; k < cv->k; k++)
                for (int i = 0; i < cv->r; i++)
                    for (int j = 0; j < cv->s; j++) {
                        int p = h + cv->pad_h - i, q = ww + cv->pad_w - j; /* stride 1 */
                        if (p < 0 || p >= cv->p || q < 0 || q >= cv->q) continue;
                        double t = (double)y[(((size_t)b * cv->k + k) * cv->p + p) * cv->q + q] *
                                   w[(((size_t)k * cv->c + ci) * cv->r + i) * cv->s + j];
                        want += t, mag += fabs(t), terms++;
                    }
        } else {
            idx = sl_rng_u64(33, s) % nw;
            int j = idx % cv->s, i = idx / cv->s % cv->r, ci = idx / ((size_t)cv->s * cv->r) % cv->c,
                k = idx / ((size_t)cv->s * cv->r * cv->c);
            for (int b = 0; b < cv->n; b++)
                for (int p = 0; p < cv->p; p++)
                    for (int q = 0; q < cv->q; q++) {
                        int h = p - cv->pad_h + i, ww = q - cv->pad_w + j;
                        if (h < 0 || h >= cv->h || ww < 0 || ww >= cv->w) continue;
                        double t = (double)x[(((size_t)b * cv->c + ci) * cv->h + h) * cv->w + ww] *
                                   y[(((size_t)b * cv->k + k) * cv->p + p) * cv->q + q];
                        want += t, mag += fabs(t), terms++;
                    }
        }
        double e = fabs(out[idx] - want) / ((terms + 2) * 0x1p-24 * mag + 1e-30);
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    char shape[48], msg[96];
    snprintf(shape, sizeof shape, "%dx%dx%dx%d k%d %dx%d", cv->n, cv->c, cv->h, cv->w, cv->k, cv->r, cv->s);
    snprintf(msg, sizeof msg, "im2col + GEMM; 64 entries, error / bound %.3g", worst);
    emit(R, kernel_names[pass], SL_F32, shape, &st, sl_conv2d_flops(cv), 4.0 * (nx + nw + ny), worst,
         worst <= 1.0, msg);
    free(x), free(w), free(y), free(out);
    sl_k_free(R->be, c.x), sl_k_free(R->be, c.w), sl_k_free(R->be, c.y), sl_k_free(R->be, c.dx),
        sl_k_free(R->be, c.dw);
}

/* Training demonstration ---------------------------------------------------------------------- */

static void train_demo(run *R, int steps)
{
    const int in = 32, hidden = 64, out = 8, layers = 3, batch = 32;
    sl_backend be = R->be;
    sl_mlp m;
    sl_mlp_init(&m, be, layers, in, hidden, out, SL_ACT_RELU);
    float *p = sl_k_malloc(be, SL_MEM_PARAMS, m.nparams * 4), *g = sl_k_malloc(be, SL_MEM_GRADS, m.nparams * 4);
    sl_optim o = {.kind = SL_OPTIM_ADAMW, .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    float *state = sl_k_malloc(be, SL_MEM_OPTIM, m.nparams * 4 * sl_optim_state_per_param(&o));
    sl_mlp_init_params(&m, (uint64_t)opt_seed, 0, m.nparams, p);
    sl_task task;
    sl_task_init(&task, be, in, out, (uint64_t)opt_seed, batch);
    sl_mlp_acts a;
    sl_mlp_acts_alloc(&m, batch, &a);
    float *y = sl_k_malloc(be, SL_MEM_DATA, (size_t)batch * out * 4), *dout = sl_k_malloc(be, SL_MEM_ACTIV, (size_t)batch * out * 4);
    double *curve = malloc((size_t)steps * sizeof *curve);
    if (!curve) SL_FATAL("out of memory for the loss curve");
    sl_note(R->ctx, "training a %d-layer %d-%d-%d ReLU MLP, batch %d, AdamW lr 1e-2, on the synthetic task (seed %lld)",
            layers, in, hidden, out, batch, opt_seed);
    double t0 = sl_now();
    for (int s = 0; s < steps; s++) {
        sl_task_batch(&task, (uint64_t)s * batch, batch, a.x[0], y);
        sl_mlp_forward(&m, &a, p);
        curve[s] = sl_k_mse(be, (size_t)batch * out, a.x[layers], y, dout, 1.0f / (batch * out));
        sl_k_memset0(be, g, m.nparams * 4);
        sl_mlp_backward(&m, &a, p, g, dout);
        o.adamw.step = s + 1;
        sl_optim_step(be, &o, m.nparams, p, g, state);
        if (s % (steps >= 10 ? steps / 10 : 1) == 0 || s == steps - 1)
            sl_note(R->ctx, "step %5d  loss %.6f", s, curve[s]);
    }
    sl_k_sync(be);
    double elapsed = sl_now() - t0;
    /* the first and last ten steps averaged, so that one batch decides nothing */
    int k = steps < 10 ? steps : 10;
    double first = 0, last = 0;
    for (int s = 0; s < k; s++) first += curve[s] / k, last += curve[steps - k + s] / k;
    sl_result r;
    sl_result_init(R->ctx, &r, "train_mlp");
    r.dtype = "f32";
    r.backend = sl_backend_name(be);
    sl_result_param_num(&r, "steps", steps);
    sl_result_param_num(&r, "batch", batch);
    sl_result_param_num(&r, "params", (double)m.nparams);
    sl_result_metric(&r, "loss_first", first, "");
    sl_result_metric(&r, "loss_last", last, "");
    sl_result_metric(&r, "loss_reduction", first / last, "x");
    sl_result_metric(&r, "samples_per_s", steps * (double)batch / elapsed, "samples/s");
    snprintf(r.headline, sizeof r.headline, "loss_reduction");
    if (!R->ctx->opt.check) sl_result_check(&r, SL_CHECK_SKIPPED, 0, NULL);
    else if (steps < 200)
        sl_result_check(&r, SL_CHECK_NOT_ASSERTED, 0, "fewer than 200 steps: the 10x target is not asserted");
    else
        sl_result_check(&r, first / last >= 10 ? SL_CHECK_PASS : SL_CHECK_FAIL, first / last,
                        "loss fell %.1fx over %d steps (target >= 10x)", first / last, steps);
    sl_result_emit(R->ctx, &r);
    sl_note(R->ctx, "loss %.5f (first 10 steps) -> %.5f (last 10): %.1fx lower", first, last, first / last);
    free(curve);
    sl_mlp_acts_free(&m, &a);
    sl_task_free(&task);
    sl_k_free(be, p), sl_k_free(be, g), sl_k_free(be, state), sl_k_free(be, y), sl_k_free(be, dout);
}

int main(int argc, char **argv)
{
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);
    char why[256];
    int be = sl_k_backend_resolve(ctx.opt.backend, why, sizeof why);
    if (be < 0) SL_FATAL("backend %s: %s", sl_backend_name(ctx.opt.backend), why);
    if (why[0]) sl_note(&ctx, "%s", why);
    run R = {.ctx = &ctx, .be = (sl_backend)be};

    if (opt_train_steps > 0) {
        static const sl_column train_cols[] = {
            {"run", "", "variant", 10, 0, 0},      {"steps", "", "steps", 7, 0, 0},
            {"loss0", "", "loss_first", 10, 5, 0}, {"lossN", "", "loss_last", 10, 5, 0},
            {"lower", "x", "loss_reduction", 8, 1, 0}, {"rate", "samples/s", "samples_per_s", 11, 0, 0},
            {"check", "", "check", 8, 0, 0}};
        sl_table_begin(&ctx, train_cols, (int)(sizeof train_cols / sizeof train_cols[0]));
        train_demo(&R, (int)opt_train_steps);
        return sl_finalize(&ctx);
    }

    sl_note(&ctx, "backend %s; roof = min(peak_gemm FLOP/s, AI x peak_copy GB/s), both measured below",
            sl_backend_name(R.be));
    if (R.be == SL_BACKEND_CPU) sl_note(&ctx, "threads: %s", sl_k_cpu_threading());
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));
    row copy_row, gemm_row;
    bench_copy(&R, &copy_row);
    R.peak_flops = bench_gemm(&R, SL_F32, &gemm_row);
    emit_row(&R, &copy_row);
    emit_row(&R, &gemm_row);
    for (int t = 0; t < SL_NDTYPES; t++) {
        if (!(ctx.opt.dtypes & (1u << t))) continue;
        sl_dtype dt = (sl_dtype)t;
        for (int k = 0; k < NKERNELS; k++) {
            if (!(opt_kernels & (1u << k))) continue;
            /* 16-bit variants exist for GEMM, axpby and casts; cast has no f32 variant */
            int per_dtype = k == K_GEMM || k == K_AXPBY || k == K_CAST;
            if (dt != SL_F32 && !per_dtype) continue;
            if (k == K_CAST && dt == SL_F32) continue;
            if (k == K_GEMM) bench_gemm(&R, dt, NULL);
            else if (k >= K_CONV_FWD && k <= K_CONV_BWD_FILTER) bench_conv(&R, k);
            else bench_ew(&R, k, dt);
        }
    }
    return sl_finalize(&ctx);
}
