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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "gpt_ref.h"
#include "kernels.h"
#include "mlp.h"
#include "probe.h"
#include "ref.h"
#include "train_ref.h"
#include "scalelab.h"
#include "sl_env.h"
#include "sl_half.h"
#include "sl_rng.h"

#define KERNEL_LIST(X)                                                                        \
    X(K_GEMM, "gemm") X(K_BIAS, "bias_add") X(K_BIAS_GRAD, "bias_grad") X(K_RELU, "relu")       \
    X(K_GELU, "gelu") X(K_GELU_BWD, "gelu_bwd") X(K_MSE, "mse") X(K_XENT, "softmax_xent")       \
    X(K_SGD, "sgd") X(K_ADAMW, "adamw") X(K_CAST, "cast") X(K_SCALE, "scale_check")             \
    X(K_AXPBY, "axpby") X(K_CONV_FWD, "conv_fwd") X(K_CONV_BWD_DATA, "conv_bwd_data")          \
    X(K_CONV_BWD_FILTER, "conv_bwd_filter") X(K_RNG, "rng_normal") X(K_LN, "layernorm")       \
    X(K_LN_BWD, "layernorm_bwd") X(K_ATTN, "attention") X(K_ATTN_BWD, "attention_bwd")          \
    X(K_EMB, "embedding") X(K_EMB_BWD, "embedding_bwd") X(K_LMHEAD, "lmhead_xent")
SL_ENUM(kernel_id, KERNEL_LIST, NKERNELS);
static const char *const kernel_names[NKERNELS] = SL_ENUM_NAMES(KERNEL_LIST);

static long long opt_gemm_n = 2048;
static long long opt_elems = 16 << 20;
static size_t opt_copy_bytes = (size_t)256 << 20;
static unsigned opt_kernels = ~0u;
static long long opt_train_steps = 0;
static long long opt_gpt_batch = 4, opt_seq = 128, opt_d_model = 256, opt_heads = 4, opt_vocab = 1024;

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
    {"gpt-batch", 0, SL_OPT_INT, &opt_gpt_batch, 1, 4096, NULL, 0,
     "batch of the GPT block kernels (layernorm .. lmhead_xent; default 4)"},
    {"seq", 0, SL_OPT_INT, &opt_seq, 1, 65536, NULL, 0, "tokens per sequence of the GPT kernels (default 128)"},
    {"d-model", 0, SL_OPT_INT, &opt_d_model, 1, 65536, NULL, 0, "channels of the GPT kernels (default 256)"},
    {"heads", 0, SL_OPT_INT, &opt_heads, 1, 65536, NULL, 0,
     "attention heads of the GPT kernels, dividing --d-model (default 4)"},
    {"vocab", 0, SL_OPT_INT, &opt_vocab, 2, 1 << 24, NULL, 0, "vocabulary of the GPT kernels (default 1024)"},
    {0},
};

/* 16-bit variants exist for GEMM, axpby, casts, GELU and the GPT block kernels; cast has no f32
 * variant. */
static int is_gpt(int k) { return k >= K_LN && k <= K_LMHEAD; }
/* GELU in f16/bf16 is the GPT layer's sl_k_gelu_forward/backward (gpt.h), timed by bench_gpt */
static int is_gelu(int k) { return k == K_GELU || k == K_GELU_BWD; }
static int kernel_runs(int k, sl_dtype dt)
{
    int per_dtype = k == K_GEMM || k == K_AXPBY || k == K_CAST || is_gpt(k) || is_gelu(k);
    if (dt != SL_F32 && !per_dtype) return 0;
    return !(k == K_CAST && dt == SL_F32);
}

/* -k names kernels, not all of them (the default, or "all"). */
static int kernels_named(void)
{
    unsigned full = (1u << NKERNELS) - 1;
    return opt_kernels != ~0u && (opt_kernels & full) != full;
}

/* Bytes the element-wise kernels hold at once per element, at most (bench_ew): on the
 * backend x, y, z, v and w in f32 and the 16-bit pair of axpby and cast (8 bytes for an f32
 * axpby); on the host the check's copies of x, z, w, y and the output (4 + 2 for cast). */
enum { EW_BACKEND_BYTES = 20 + 8, EW_HOST_BYTES = 16 + 6 };

/* --elems must fit before the probes spend a minute: the element-wise kernels' buffers on this
 * node's ranks against the memory there is (the backend's too, on the cpu backend). */
static void check_elems_fit(const sl_ctx *ctx, int elementwise)
{
    if (!elementwise || opt_train_steps > 0) return;
    const size_t per_elem = EW_HOST_BYTES + (ctx->opt.backend == SL_BACKEND_CPU ? EW_BACKEND_BYTES : 0);
    const int ranks = ctx->node_ranks > 0 ? ctx->node_ranks : 1;
    const size_t avail = sl_mem_available();
    if (avail == SIZE_MAX || (double)opt_elems * per_elem * ranks <= (double)avail) return;
    sl_usage_error("--elems %lld: the element-wise kernels hold up to %zu bytes an element on each of "
                   "this node's %d rank%s (%.1f GiB in all), and %.1f GiB is available: expected at "
                   "most %zu", opt_elems, per_elem, ranks, ranks == 1 ? "" : "s",
                   (double)opt_elems * per_elem * ranks / (1u << 30), (double)avail / (1u << 30),
                   avail / per_elem / (size_t)ranks);
}

static void validate(sl_ctx *ctx)
{
    if (opt_train_steps > 0 && kernels_named())
        sl_usage_error("--kernels (-k) does not apply with --train-steps (which trains the MLP "
                       "and runs no kernel); give one or the other");
    int runnable = 0, elementwise = 0;
    for (int t = 0; t < SL_NDTYPES; t++)
        for (int k = 0; k < NKERNELS; k++) {
            int runs = (ctx->opt.dtypes & (1u << t)) && (opt_kernels & (1u << k)) &&
                       kernel_runs(k, (sl_dtype)t);
            runnable += runs;
            elementwise |= runs && k != K_GEMM && k != K_CONV_FWD && k != K_CONV_BWD_DATA &&
                           k != K_CONV_BWD_FILTER && !is_gpt(k);
        }
    if (opt_d_model % opt_heads)
        sl_usage_error("--heads %lld does not divide --d-model %lld: expected a divisor of it",
                       opt_heads, opt_d_model);
    if ((double)opt_gpt_batch * opt_seq > 0x7fffffff || 3.0 * opt_d_model * opt_gpt_batch * opt_seq > 1e12)
        sl_usage_error("--gpt-batch %lld x --seq %lld: expected fewer than 2^31 tokens", opt_gpt_batch, opt_seq);
    if (opt_train_steps == 0 && runnable == 0)
        sl_usage_error("--kernels (-k): none of the requested kernels has a variant for the "
                       "requested --dtype (-d); 16-bit (f16, bf16) variants exist for gemm, axpby, "
                       "cast, gelu, gelu_bwd and the GPT kernels only, and cast has no f32 variant");
    check_elems_fit(ctx, elementwise);
}

static const sl_program program = {
    .name = "kernels",
    .validate = validate,
    .summary = "every compute kernel per dtype and backend, on a roofline measured in the same run",
    .uses = SL_USES_DTYPE | SL_USES_BACKEND,
    .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16),
    .default_dtype = SL_F32,
    .default_iters = 5,
    .default_warmup = 1,
    .groups = {&sl_data_opts},
    .extra = extra_opts,
};

static const sl_column columns[] = {
    SL_COL("kernel", "variant", 16),
    SL_COL("dtype", "dtype", 6),
    SL_COL("shape", "shape", 18),
    SL_COL_TIME("ms", 1e3, 3, 10),
    {"GFLOP/s", "", "gflops", 9, 1, 0},
    {"GB/s", "", "gbps", 8, 1, 0},
    {"AI", "flop/B", "ai", 8, 2, 0},
    {"roof", "%", "roof_fraction", 6, 1, 100},
    SL_COL("bound", "bound", 8),
    SL_COL_CHECK(8),
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
    /* the gate: a kernel's place under the roof drawn by this run's probes; the probes are the
     * roof itself (no gate) */
    if (strncmp(kernel, "peak_", 5) != 0 && isnan(flops)) {
        /* no FLOP count (rng_normal): no roofline position, but its bandwidth against the copy
         * probe's is still a ratio to this run's ceiling */
        sl_result_metric(&r, "copy_fraction", R->peak_bw > 0 ? bytes / t / R->peak_bw : NAN, "ratio");
        sl_result_gate(&r, "copy_fraction");
    } else if (strncmp(kernel, "peak_", 5) != 0) {
        sl_result_gate(&r, "roof_fraction");
    }
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
static void *host_copy(run *R, const void *d, size_t bytes) { return sl_k_download(R->be, d, bytes); }
static float *dev_randn(run *R, uint64_t stream, size_t n, float scale)
{
    float *d = dev(R, n * sizeof(float));
    sl_k_rng_normal(R->be, (uint64_t)sl_opt_seed ^ stream, 0, n, d, 0.0f, scale);
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
        for (size_t i = 0; i < nn; i++) a[i] = sl_round_to(dt, a[i]), b[i] = sl_round_to(dt, b[i]);
        for (int s = 0; s < 64; s++) {
            int i = (int)(sl_rng_u64(7, 2 * s) % n), j = (int)(sl_rng_u64(7, 2 * s + 1) % n);
            double mag, want = sl_ref_gemm_at(0, 0, n, a, n, b, n, i, j, &mag);
            double e = fabs(c[(size_t)i * n + j] - want) / ((n + 2) * 0x1p-24 * mag);
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

/* The bandwidth probe: a copy in the backend's memory by its own copy (kernels/probe.h). */
static double bench_copy(run *R, row *probe)
{
    sl_probe p;
    sl_probe_init(&p, SL_PROBE_COPY, R->be, opt_copy_bytes, 0);
    sl_stats st;
    row w = {.kernel = "peak_copy", .dt = SL_F32, .flops = 0.0, .pass = -1};
    w.bytes = sl_probe_run(R->ctx, &p, (int)R->ctx->opt.warmup, (int)R->ctx->opt.iters, &st);
    w.st = st;
    snprintf(w.shape, sizeof w.shape, "%zu MiB", opt_copy_bytes >> 20);
    snprintf(w.msg, sizeof w.msg, "bandwidth probe");
    *probe = w;
    /* a peak is the best the machine did: the fastest iteration, not the median */
    R->peak_bw = w.bytes / st.min;
    sl_probe_free(&p);
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

/* The optimizers' settings: one step from zero state, as the reference takes it too. */
static const sl_adamw ew_adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                                  .weight_decay = 0.01f, .step = 1};
static const sl_sgd ew_sgd = {.lr = 1e-3f, .momentum = 0.9f, .weight_decay = 0.01f};

static void ew_fn(void *p)
{
    ew *e = p;
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
    case K_SGD: sl_k_sgd_step(e->be, &ew_sgd, e->n, e->y, e->x, e->v); break;
    case K_ADAMW: sl_k_adamw_step(e->be, &ew_adamw, e->n, e->y, e->x, e->v, e->w); break;
    case K_CAST: sl_k_cast(e->be, e->n, e->x, SL_F32, e->hy, e->dt, NULL); break;
    case K_SCALE: e->bad = sl_k_scale_check(e->be, e->n, e->y, 1.0f); break;
    case K_AXPBY: sl_k_axpby(e->be, e->dt, e->n, 1.0, e->hx, 1.0, e->hy); break;
    case K_RNG: sl_k_rng_normal(e->be, 9, 0, e->n, e->y, 0.0f, 1.0f); break;
    }
}

/* Elements per block of the reference (a whole number of softmax rows of 1000 classes). */
#define EW_CHUNK 8000

/* The double-precision reference (ref.h) of e's kernel for elements [lo, lo + m), from host
 * copies of its inputs as the checked call saw them, into want[0, m) (want has room for
 * 3 EW_CHUNK: optimizer state). Returns the part of the loss these elements carry. */
static double ew_reference(const ew *e, size_t lo, size_t m, const float *x, const float *z,
                           const float *y0, const float *w0, const int32_t *lab, double *want)
{
    double loss = 0, *s1 = want + EW_CHUNK, *s2 = want + 2 * EW_CHUNK;
    for (size_t k = 0; k < m; k++) {
        size_t i = lo + k;
        switch (e->kernel) {
        case K_BIAS: want[k] = (double)y0[i] + w0[i % e->cols]; break;
        case K_RELU: want[k] = sl_ref_act(SL_ACT_RELU, x[i]); break;
        case K_GELU: want[k] = sl_ref_act(SL_ACT_GELU, x[i]); break;
        case K_GELU_BWD: want[k] = z[i] * sl_ref_act_grad(SL_ACT_GELU, x[i]); break;
        case K_SGD: case K_ADAMW: want[k] = y0[i], s1[k] = s2[k] = 0; break; /* zero state */
        case K_CAST: case K_AXPBY: /* the operands as the dtype holds them */
            want[k] = (double)sl_round_to(e->dt, x[i]) + (e->kernel == K_AXPBY ? sl_round_to(e->dt, y0[i]) : 0);
            break;
        case K_SCALE: want[k] = y0[i]; break; /* scaled by 1 */
        case K_RNG: want[k] = sl_rng_normal(9, i); break;
        default: break;
        }
    }
    if (e->kernel == K_MSE) loss = sl_ref_mse(m, x + lo, z + lo, (double)(1.0f / e->n), want);
    if (e->kernel == K_SGD) sl_ref_sgd_step(&ew_sgd, m, want, x + lo, s1);
    if (e->kernel == K_ADAMW) sl_ref_adamw_step(&ew_adamw, m, want, x + lo, s1, s2);
    for (size_t r = lo / e->cols; e->kernel == K_XENT && r < (lo + m) / e->cols; r++)
        loss += sl_ref_softmax_xent_row(e->cols, x + r * e->cols, lab[r], 1.0 / e->rows,
                                        want + (r * e->cols - lo)) / e->rows;
    return loss;
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
        e.labels = sl_k_upload(R->be, SL_MEM_OTHER, lab, (size_t)e.rows * sizeof *lab);
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
    sl_k_rng_normal(R->be, (uint64_t)sl_opt_seed ^ 12, 0, n, e.y, 0.0f, 1.0f); /* y as generated */
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
    double loss_want = 0, *want = malloc(3 * EW_CHUNK * sizeof *want);
    if (!want) SL_FATAL("out of memory for the reference");
    if (kernel == K_AXPBY && dt != SL_F32) tol = dt == SL_F16 ? 0x1p-11 : 0x1p-8; /* one rounding in dt */
    for (size_t lo = 0; lo < n; lo += EW_CHUNK) {
        size_t m = n - lo < EW_CHUNK ? n - lo : EW_CHUNK;
        loss_want += ew_reference(&e, lo, m, x, z, y0, w0, lab, want);
        for (size_t k = 0; k < m; k++) {
            size_t i = lo + k;
            double got = hout ? sl_elem_get(hout, i, dt) : out[i];
            if (kernel == K_BIAS_GRAD) want[k] = got; /* its output is the bias: checked below */
            double err = fabs(got - want[k]) / fmax(1.0, fabs(want[k]));
            if (!(err <= worst)) worst = isnan(err) ? INFINITY : err;
        }
    }
    free(want);
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

/* GPT block kernels (gpt.h) -------------------------------------------------------------------- */

/* The shape of the GPT rows: --gpt-batch x --seq tokens of --d-model channels, --heads heads,
 * --vocab classes; every operand in the row's dtype (parameters and gradients in f32). */
typedef struct gpt_args {
    sl_backend be;
    int kernel;
    sl_dtype dt;
    int B, T, C, NH, V;
    void *x, *g, *y, *qkv, *att, *wte, *wpe, *work;
    float *w, *b, *mean, *rstd, *dw, *db, *dwte;
    int32_t *tok;
    double loss;
} gpt_args;

static void gpt_fn(void *p)
{
    gpt_args *a = p;
    int N = a->B * a->T;
    switch (a->kernel) {
    case K_LN: sl_k_layernorm_forward(a->be, a->dt, N, a->C, a->x, a->w, a->b, a->y, a->mean, a->rstd); break;
    case K_LN_BWD:
        sl_k_layernorm_backward(a->be, a->dt, N, a->C, a->g, a->x, a->w, a->mean, a->rstd, a->y,
                                a->dw, a->db);
        break;
    case K_ATTN: sl_k_attention_forward(a->be, a->dt, a->B, a->T, a->C, a->NH, a->qkv, a->att, a->y, a->work); break;
    case K_ATTN_BWD:
        sl_k_attention_backward(a->be, a->dt, a->B, a->T, a->C, a->NH, a->g, a->qkv, a->att,
                                a->x, a->work);
        break;
    case K_EMB: sl_k_embedding_forward(a->be, a->dt, a->B, a->T, a->C, a->V, a->tok, a->wte, a->wpe, a->y); break;
    case K_EMB_BWD: sl_k_embedding_backward(a->be, a->dt, a->B, a->T, a->C, a->V, a->tok, a->g, a->dwte, a->dw); break;
    case K_GELU: sl_k_gelu_forward(a->be, a->dt, (size_t)N * a->C, a->x, a->y); break;
    case K_GELU_BWD: sl_k_gelu_backward(a->be, a->dt, (size_t)N * a->C, a->x, a->g, a->y); break;
    case K_LMHEAD:
        a->loss = sl_k_lmhead_xent(a->be, a->dt, N, a->C, a->V, a->x, a->wte, a->tok, a->y,
                                   a->dwte, 1.0f / N, a->work);
        break;
    }
}

/* n random normals of dtype dt on the backend (generated in f32, rounded once) */
static void *gpt_rand(run *R, sl_dtype dt, uint64_t stream, size_t n, float scale)
{
    float *f = dev_randn(R, stream, n, scale);
    if (dt == SL_F32) return f;
    void *h = dev(R, n * sl_dtype_size(dt));
    sl_k_cast(R->be, n, f, SL_F32, h, dt, NULL);
    sl_k_free(R->be, f);
    return h;
}

/* a backend array of dtype dt as doubles on the host */
static double *gpt_host(run *R, const void *d, size_t n, sl_dtype dt)
{
    void *h = host_copy(R, d, n * sl_dtype_size(dt));
    double *x = malloc((n ? n : 1) * sizeof *x);
    if (!x) SL_FATAL("out of memory for the reference");
    for (size_t i = 0; i < n; i++) x[i] = sl_elem_get(h, i, dt);
    free(h);
    return x;
}

/* max |got - want| / (1 + |want|) over n */
static double gpt_err(const double *got, const double *want, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / (1.0 + fabs(want[i]));
        if (!(e <= w)) w = isnan(e) ? INFINITY : e;
    }
    return w;
}

static void bench_gpt(run *R, int kernel, sl_dtype dt)
{
    gpt_args a = {.be = R->be, .kernel = kernel, .dt = dt, .B = (int)opt_gpt_batch,
                  .T = (int)opt_seq, .C = (int)opt_d_model, .NH = (int)opt_heads, .V = (int)opt_vocab};
    const int B = a.B, T = a.T, C = a.C, NH = a.NH, V = a.V, N = B * T;
    const size_t nc = (size_t)N * C, es = sl_dtype_size(dt), natt = (size_t)B * NH * T * T;
    a.x = gpt_rand(R, dt, 31, (kernel == K_ATTN_BWD ? 3 : 1) * nc, 1.0f);
    a.g = gpt_rand(R, dt, 32, nc, 1.0f);
    a.y = dev(R, nc * es);
    a.w = dev_randn(R, 33, C, 1.0f), a.b = dev_randn(R, 34, C, 1.0f);
    a.dw = dev(R, (size_t)T * C * 4), a.db = dev(R, (size_t)C * 4);
    a.mean = dev(R, (size_t)N * 4), a.rstd = dev(R, (size_t)N * 4);
    if (kernel == K_ATTN || kernel == K_ATTN_BWD) {
        a.qkv = gpt_rand(R, dt, 35, 3 * nc, 1.0f);
        a.att = dev(R, natt * es);
        a.work = dev(R, sl_k_attention_work_bytes(dt, B, NH, T));
        if (kernel == K_ATTN_BWD) /* the probabilities it differentiates */
            sl_k_attention_forward(R->be, dt, B, T, C, NH, a.qkv, a.att, a.y, a.work);
    }
    if (kernel == K_EMB || kernel == K_EMB_BWD || kernel == K_LMHEAD) {
        int32_t *tok = malloc((size_t)N * sizeof *tok);
        if (!tok) SL_FATAL("out of memory for %d tokens", N);
        for (int i = 0; i < N; i++) tok[i] = (int32_t)(sl_rng_u64(36, (uint64_t)i) % (uint64_t)V);
        a.tok = sl_k_upload(R->be, SL_MEM_OTHER, tok, (size_t)N * 4);
        free(tok);
        a.wte = gpt_rand(R, dt, 37, (size_t)V * C, 0.1f);
        a.wpe = gpt_rand(R, dt, 38, (size_t)T * C, 0.1f);
        a.dwte = dev(R, (size_t)V * C * 4);
        if (kernel == K_LMHEAD) a.work = dev(R, sl_k_lmhead_work_bytes(N, V));
    }
    if (kernel == K_LN_BWD) sl_k_layernorm_forward(R->be, dt, N, C, a.x, a.w, a.b, a.y, a.mean, a.rstd);
    sl_stats st;
    measure(R, gpt_fn, &a, &st);

    /* flops (nominal for the element-wise ones) and minimum bytes per call */
    double fl = 0, by = 0, tn = (double)nc;
    switch (kernel) {
    case K_LN: fl = 8 * tn, by = 2 * es * tn + 8.0 * C + 8.0 * N; break;
    case K_LN_BWD: fl = 12 * tn, by = 3 * es * tn + 12.0 * C + 8.0 * N; break;
    case K_ATTN: case K_ATTN_BWD: sl_k_attention_cost(dt, B, T, C, NH, kernel == K_ATTN_BWD, &fl, &by); break;
    case K_GELU: fl = 9 * tn, by = 2 * es * tn; break; /* as the f32 rows count them */
    case K_GELU_BWD: fl = 17 * tn, by = 3 * es * tn; break;
    case K_EMB: fl = tn, by = 2 * es * tn + es * (double)T * C + 4.0 * N; break;
    case K_EMB_BWD: fl = 2 * tn, by = es * tn + 8 * tn + 8.0 * T * C + 4.0 * N; break;
    case K_LMHEAD: fl = 6.0 * N * (double)V * C, by = es * (2 * tn + (double)V * C) + 16.0 * N * V + 8.0 * V * C; break;
    }

    /* The check, one call from known state, against gpt_ref.h in double:
     * |got - want| <= tol (1 + |want|), tol 64 u of the dtype (at least 1e-5) */
    double tol = dt == SL_F16 ? 64 * 0x1p-11 : dt == SL_BF16 ? 64 * 0x1p-8 : 1e-5, worst = 0;
    char msg[160] = "";
    if (kernel == K_ATTN_BWD) tol *= 4; /* score gradients rounded to dt before two more GEMMs */
    sl_k_memset0(R->be, a.dw, (size_t)T * C * 4), sl_k_memset0(R->be, a.db, (size_t)C * 4);
    if (a.dwte) sl_k_memset0(R->be, a.dwte, (size_t)V * C * 4);
    gpt_fn(&a);
    sl_k_sync(R->be);
    int32_t *tok = a.tok ? host_copy(R, a.tok, (size_t)N * 4) : NULL;
    if (kernel == K_LN || kernel == K_LN_BWD) {
        double *x = gpt_host(R, a.x, nc, dt), *w = gpt_host(R, a.w, C, SL_F32);
        double *b = gpt_host(R, a.b, C, SL_F32), *got = gpt_host(R, a.y, nc, dt);
        double *want = malloc(nc * 8), *dw = calloc(C, 8), *db = calloc(C, 8);
        if (!want || !dw || !db) SL_FATAL("out of memory for the reference");
        if (kernel == K_LN) {
            sl_ref_layernorm_forward(N, C, x, w, b, want, NULL, NULL);
        } else {
            double *g = gpt_host(R, a.g, nc, dt), *gw = gpt_host(R, a.dw, C, SL_F32);
            double *gb = gpt_host(R, a.db, C, SL_F32);
            sl_ref_layernorm_backward(N, C, g, x, w, want, dw, db);
            /* dw, db: sums over N rows, relative to the sum of magnitudes ~ sqrt(N) */
            double ew = gpt_err(gw, dw, C) / sqrt(N), eb = gpt_err(gb, db, C) / sqrt(N);
            worst = ew > eb ? ew : eb;
            free(g), free(gw), free(gb);
        }
        double e = gpt_err(got, want, nc);
        if (!(e <= worst)) worst = e;
        free(x), free(w), free(b), free(got), free(want), free(dw), free(db);
    } else if (kernel == K_ATTN || kernel == K_ATTN_BWD) {
        double *qkv = gpt_host(R, a.qkv, 3 * nc, dt), *att = malloc(natt * 8), *out = malloc(nc * 8);
        if (!att || !out) SL_FATAL("out of memory for the reference");
        sl_ref_attention_forward(B, T, C, NH, qkv, att, out);
        if (kernel == K_ATTN) {
            double *got = gpt_host(R, a.y, nc, dt), *gatt = gpt_host(R, a.att, natt, dt);
            worst = gpt_err(got, out, nc);
            double e = gpt_err(gatt, att, natt);
            if (!(e <= worst)) worst = e;
            free(got), free(gatt);
        } else {
            double *g = gpt_host(R, a.g, nc, dt), *got = gpt_host(R, a.x, 3 * nc, dt);
            double *want = malloc(3 * nc * 8);
            if (!want) SL_FATAL("out of memory for the reference");
            sl_ref_attention_backward(B, T, C, NH, g, qkv, att, want);
            worst = gpt_err(got, want, 3 * nc);
            free(g), free(got), free(want);
        }
        snprintf(msg, sizeof msg, "%.3g GFLOP, %.3g MB a call (full T x T scores)", fl / 1e9, by / 1e6);
        free(qkv), free(att), free(out);
    } else if (kernel == K_EMB || kernel == K_EMB_BWD) {
        double *wte = gpt_host(R, a.wte, (size_t)V * C, dt), *wpe = gpt_host(R, a.wpe, (size_t)T * C, dt);
        if (kernel == K_EMB) {
            double *got = gpt_host(R, a.y, nc, dt), *want = malloc(nc * 8);
            if (!want) SL_FATAL("out of memory for the reference");
            sl_ref_embedding_forward(B, T, C, tok, wte, wpe, want);
            worst = gpt_err(got, want, nc);
            free(got), free(want);
        } else {
            double *g = gpt_host(R, a.g, nc, dt), *gte = gpt_host(R, a.dwte, (size_t)V * C, SL_F32);
            double *gpe = gpt_host(R, a.dw, (size_t)T * C, SL_F32);
            double *te = calloc((size_t)V * C, 8), *pe = calloc((size_t)T * C, 8);
            if (!te || !pe) SL_FATAL("out of memory for the reference");
            sl_ref_embedding_backward(B, T, C, tok, g, te, pe);
            double e1 = gpt_err(gte, te, (size_t)V * C), e2 = gpt_err(gpe, pe, (size_t)T * C);
            worst = e1 > e2 ? e1 : e2;
            free(g), free(gte), free(gpe), free(te), free(pe);
        }
        free(wte), free(wpe);
    } else if (is_gelu(kernel)) {
        double *x = gpt_host(R, a.x, nc, dt), *g = gpt_host(R, a.g, nc, dt);
        double *got = gpt_host(R, a.y, nc, dt);
        for (size_t i = 0; i < nc; i++)
            x[i] = kernel == K_GELU ? sl_ref_gelu(x[i]) : g[i] * sl_ref_gelu_grad(x[i]);
        worst = gpt_err(got, x, nc);
        free(x), free(g), free(got);
    } else if (kernel == K_LMHEAD) {
        /* the loss over every row; dx of 8 sampled rows (row i's dx depends on row i only) */
        double *x = gpt_host(R, a.x, nc, dt), *wte = gpt_host(R, a.wte, (size_t)V * C, dt);
        double *dx = gpt_host(R, a.y, nc, dt), *rdx = malloc((size_t)C * 8), *rdw = malloc((size_t)V * C * 8);
        if (!rdx || !rdw) SL_FATAL("out of memory for the reference");
        double want = sl_ref_lmhead_xent(N, C, V, x, wte, tok, 1.0 / N, NULL, NULL);
        worst = fabs(a.loss - want) / (1 + fabs(want));
        for (int s = 0; s < 8 && s < N; s++) {
            int i = (int)(sl_rng_u64(39, (uint64_t)s) % (uint64_t)N);
            sl_ref_lmhead_xent(1, C, V, x + (size_t)i * C, wte, tok + i, 1.0 / N, rdx, rdw);
            /* dx entries are O(1/N): measured against the row's largest */
            double m = 0, e = 0;
            for (int j = 0; j < C; j++) m = fmax(m, fabs(rdx[j]));
            for (int j = 0; j < C; j++) e = fmax(e, fabs(dx[(size_t)i * C + j] - rdx[j]) / (m + 1e-30));
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
        }
        snprintf(msg, sizeof msg, "loss %.6g, reference %.6g", a.loss, want);
        free(x), free(wte), free(dx), free(rdx), free(rdw);
    }
    char shape[48];
    if (kernel == K_LMHEAD || kernel == K_EMB || kernel == K_EMB_BWD)
        snprintf(shape, sizeof shape, "%dx%dx%d V%d", B, T, C, V);
    else if (kernel == K_ATTN || kernel == K_ATTN_BWD)
        snprintf(shape, sizeof shape, "%dx%dx%d h%d", B, T, C, NH);
    else snprintf(shape, sizeof shape, "%dx%d", N, C);
    emit(R, kernel_names[kernel], dt, shape, &st, fl, by, worst / tol, worst <= tol, msg);
    free(tok);
    void *all[] = {a.x, a.g, a.y, a.qkv, a.att, a.wte, a.wpe, a.work, a.w, a.b, a.mean, a.rstd,
                   a.dw, a.db, a.dwte, a.tok};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) sl_k_free(R->be, all[i]);
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
    c.cv.work = dev(R, sl_conv2d_work_bytes(cv)); /* the timed calls allocate nothing */
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
        double want, mag, terms;
        size_t idx;
        if (pass == K_CONV_FWD) { /* y was overwritten by the forward: recomputed from x and w */
            idx = sl_rng_u64(31, s) % ny;
            want = sl_ref_conv2d_forward_at(cv, x, w, idx, &mag, &terms);
        } else if (pass == K_CONV_BWD_DATA) {
            idx = sl_rng_u64(32, s) % nx;
            want = sl_ref_conv2d_backward_data_at(cv, y, w, idx, &mag, &terms);
        } else {
            idx = sl_rng_u64(33, s) % nw;
            want = sl_ref_conv2d_backward_filter_at(cv, x, y, idx, &mag, &terms);
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
        sl_k_free(R->be, c.dw), sl_k_free(R->be, c.cv.work);
}

/* Training demonstration ---------------------------------------------------------------------- */

static void train_demo(run *R, int steps)
{
    const int in = 32, hidden = 64, out = 8, layers = 3, batch = 32;
    sl_backend be = R->be;
    sl_mlp m;
    sl_mlp_init(&m, be, layers, in, hidden, out, SL_ACT_RELU);
    float *p = sl_k_malloc(be, SL_MEM_PARAMS, m.nparams * 4);
    sl_optim o = {.kind = SL_OPTIM_ADAMW, .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    sl_task task;
    sl_task_init(&task, be, in, out, (uint64_t)sl_opt_seed, batch);
    double *curve = malloc((size_t)steps * sizeof *curve);
    if (!curve) SL_FATAL("out of memory for the loss curve");
    sl_note(R->ctx, "training a %d-layer %d-%d-%d ReLU MLP, batch %d, AdamW lr 1e-2, on the synthetic task (seed %lld)",
            layers, in, hidden, out, batch, sl_opt_seed);
    double t0 = sl_now();
    sl_train_serial(&m, &task, &o, batch, steps, (uint64_t)sl_opt_seed, p, curve); /* train_ref.h */
    double elapsed = sl_now() - t0;
    for (int s = 0; s < steps; s++)
        if (s % (steps >= 10 ? steps / 10 : 1) == 0 || s == steps - 1)
            sl_note(R->ctx, "step %5d  loss %.6f", s, curve[s]);
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
    sl_task_free(&task);
    sl_k_free(be, p);
}

/* The instruction set the cloned kernels run and the CPU flags beside it (the manifest's
 * cpu_isa), so that a figure is read with the ISA that made it. */
static void note_cpu_isa(const sl_ctx *ctx)
{
    const char *flags[SL_ENV_ISA_FLAGS_MAX];
    int n = sl_env_cpu_isa_flags(flags, SL_ENV_ISA_FLAGS_MAX);
    char list[96] = "";
    for (int i = 0; i < n; i++) snprintf(list + strlen(list), sizeof list - strlen(list), " %s", flags[i]);
    sl_note(ctx, "vector math (gelu, gelu_bwd, softmax_xent, attention): %s; CPU flags:%s", sl_env_cpu_vec_isa(),
            n < 0 ? " none listed in /proc/cpuinfo" : n == 0 ? " none of avx2 fma avx512f f16c avx512_bf16" : list);
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
    if (R.be == SL_BACKEND_CPU) {
        sl_note(&ctx, "threads: %s", sl_k_cpu_threading());
        note_cpu_isa(&ctx);
    }
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));
    row copy_row, gemm_row;
    bench_copy(&R, &copy_row);
    sl_slowdown_ceiling(1); /* the peaks are the gate's ceilings: SL_TEST_SLOWDOWN leaves them */
    R.peak_flops = bench_gemm(&R, SL_F32, &gemm_row);
    sl_slowdown_ceiling(0);
    emit_row(&R, &copy_row);
    emit_row(&R, &gemm_row);
    for (int t = 0; t < SL_NDTYPES; t++) {
        if (!(ctx.opt.dtypes & (1u << t))) continue;
        sl_dtype dt = (sl_dtype)t;
        for (int k = 0; k < NKERNELS; k++) {
            if (!(opt_kernels & (1u << k))) continue;
            if (!kernel_runs(k, dt)) {
                /* a kernel asked for by name is never skipped in silence */
                if (kernels_named())
                    sl_note(&ctx, "skipping %s for %s: it has no %s variant (16-bit variants: gemm, "
                            "axpby, cast, gelu, gelu_bwd, the GPT kernels; cast has no f32)", kernel_names[k], sl_dtype_name(dt),
                            sl_dtype_name(dt));
                continue;
            }
            if (k == K_GEMM) bench_gemm(&R, dt, NULL);
            else if (k >= K_CONV_FWD && k <= K_CONV_BWD_FILTER) bench_conv(&R, k);
            else if (is_gpt(k) || (is_gelu(k) && dt != SL_F32)) bench_gpt(&R, k, dt);
            else bench_ew(&R, k, dt);
        }
    }
    return sl_finalize(&ctx);
}
