/* conv.c — vdnn's program for the conv stack (--model conv; the MLP and the GPT train on the
 * training layer, vdnn.c): options, the configurations (policy x prefetch x dtype), the
 * host<->device bandwidth probe, the none run as the reference and the checks against it, and
 * the rows. The step and its model: conv_step.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "train_ref.h"
#include "conv.h"
#include "run.h"

static int opt_model, opt_offload = -1; /* -1: every policy */
static long long opt_prefetch = -1;
static size_t opt_device_mem = 16u << 20;
static long long opt_layers = 8, opt_batch = 16, opt_channels = 16, opt_image = 32;
static double opt_lr = 0.01;

static const char *const policy_names[NPOLICIES] = SL_ENUM_NAMES(POLICIES);

static const sl_opt vdnn_opts[] = {
    {"model", 0, SL_OPT_CHOICE, &opt_model, 0, 0, "conv", 0, "the conv stack (this program)"},
    {"offload", 0, SL_OPT_CHOICE, &opt_offload, 0, 0, SL_ENUM_CHOICES(POLICIES), 0,
     "whose inputs go to the host: none, all operations, conv only (default every policy)"},
    {"prefetch", 0, SL_OPT_INT, &opt_prefetch, 0, 1, NULL, 0,
     "1: fetch the next offloaded input during backward (default both 0 and 1)"},
    /* at least one unit of the arena: a smaller capacity would round down to 0 bytes */
    {"device-mem", 0, SL_OPT_SIZE, &opt_device_mem, ARENA_ALIGN, 1LL << 40, NULL, 0,
     "device (arena) capacity in bytes, K/M/G, at least 256 (default 16M: fits only with offload)"},
    {"layers", 'L', SL_OPT_INT, &opt_layers, 1, SL_MLP_MAX_LAYERS, NULL, 0,
     "layers: Linear or Conv, each but the last followed by a ReLU (default 8)"},
    {"batch", 0, SL_OPT_INT, &opt_batch, 1, 1 << 20, NULL, 0, "batch (default 16)"},
    {"channels", 0, SL_OPT_INT, &opt_channels, 1, 4096, NULL, 0, "conv channels (default 16)"},
    {"image", 0, SL_OPT_INT, &opt_image, 1, 4096, NULL, 0, "conv image height and width (default 32)"},
    {"lr", 0, SL_OPT_DOUBLE, &opt_lr, 0, 0, NULL, 0, "SGD learning rate, momentum 0.9 (default 0.01)"},
    {0},
};

static void validate(sl_ctx *ctx)
{
    /* a GPT shape option here is refused (the GPT trains without --model conv) */
    sl_gpt_opt.layers_opt = "layers", sl_gpt_opt.layers_src = &opt_layers;
    sl_gpt_opt.batch_opt = "batch", sl_gpt_opt.batch_src = &opt_batch;
    sl_gpt_gate(ctx);
    sl_gpt_analytic(ctx);
    if (opt_offload == P_NONE && opt_prefetch >= 0)
        sl_usage_error("--prefetch: only with --offload all|conv (nothing is offloaded with none)");
    if (!(opt_lr > 0) || opt_lr > 1e6) sl_usage_error("--lr: expected a learning rate in (0, 1e6], got %g", opt_lr);
    const double elems = (double)opt_batch * opt_channels * opt_image * opt_image;
    if (elems * 4 > 1u << 30)
        sl_usage_error("--batch/--channels/--image: one conv activation would be %.0f MiB; at most 1024 MiB",
                       elems * 4 / 1048576);
}

static const sl_program program = {
    .name = "vdnn",
    .summary = "vDNN: activations offloaded to pinned host memory after forward and prefetched "
               "for backward, in a device arena of fixed capacity; peak memory vs the model",
    .uses = SL_USES_BACKEND | SL_USES_DTYPE,
    .dtypes = 1u << SL_F32 | 1u << SL_F16 | 1u << SL_BF16, .default_dtype = SL_F32,
    .default_iters = 5, .default_warmup = 1,
    .groups = {&sl_data_opts, &sl_gpt_shape_option_group}, .extra = vdnn_opts, .validate = validate,
};

#define MIB (1.0 / 1048576)
static const sl_column columns[] = {
    SL_COL("model", "model", 5),
    SL_COL("policy", "variant", 9),
    SL_COL("dtype", "dtype", 5),
    SL_COL("device", "device", 8),
    {"step", "ms", "time.median", 8, 2, 1e3},
    {"overhead", "%", "overhead", 8, 1, 100},
    {"transfer", "ms", "transfer", 8, 2, 1e3},
    {"model", "ms", "transfer_model", 7, 2, 1e3},
    {"exposed", "ms", "exposed_transfer", 8, 2, 1e3},
    {"overlap", "%", "overlap", 7, 1, 100},
    {"activ", "MiB", "mem_activ", 7, 2, MIB},
    {"model", "MiB", "model_activ", 7, 2, MIB},
    {"peak", "MiB", "mem_peak", 7, 2, MIB},
    {"model", "MiB", "model_peak", 7, 2, MIB},
    {"d2h", "MiB/step", "bytes_d2h", 8, 2, MIB},
    {"h2d", "MiB/step", "bytes_h2d", 8, 2, MIB},
    {"link", "GB/s", "bw", 6, 2, 1e-9},
    SL_COL_CHECK(6),
    SL_COL("note", "note", 0),
};

/* One configuration of a model: what it is, its model, and once run its figures. */
typedef struct config {
    vdnn_run r;
    char name[32];
    const char *note;   /* for the row, or NULL */
    size_t model[A_NCATS], need, each;
    int fits;
    sl_stats st;        /* step times over the timed steps, slowest rank */
} config;

static const char *device_label(sl_backend be) { return be == SL_BACKEND_CUDA ? "cuda" : "emulated"; }

static void row_start(sl_ctx *ctx, sl_result *res, const vdnn_run *r, const char *variant)
{
    const net *n = r->n;
    sl_result_init(ctx, res, variant);
    res->backend = sl_backend_name(r->be);
    res->dtype = sl_dtype_name(r->dt);
    sl_result_param_str(res, "model", "conv");
    sl_result_param_str(res, "device", device_label(r->be));
    sl_result_param_num(res, "emulation", r->be != SL_BACKEND_CUDA);
    sl_result_param_str(res, "offload", policy_names[r->policy]);
    sl_result_param_num(res, "prefetch", r->prefetch);
    sl_result_param_num(res, "device_mem", (double)r->capacity);
    sl_result_param_num(res, "layers", n->layers);
    sl_result_param_num(res, "ops", n->nops);
    sl_result_param_num(res, "global_batch", n->batch);
    sl_result_param_num(res, "channels", n->cv.c);
    sl_result_param_num(res, "image", n->cv.h);
    sl_result_param_num(res, "params", (double)n->nparams);
    sl_result_param_num(res, "act_bytes", (double)r->act_bytes);
}

static void plan(config *c, net *n, sl_backend be, sl_dtype dt, int policy, int prefetch, size_t capacity,
                 const char *note)
{
    memset(c, 0, sizeof *c);
    c->r = (vdnn_run){.n = n, .be = be, .policy = policy, .prefetch = prefetch, .dt = dt,
                      .capacity = capacity / ARENA_ALIGN * ARENA_ALIGN,
                      .optim = {.kind = SL_OPTIM_SGD, .sgd = {.lr = (float)opt_lr, .momentum = 0.9f}},
                      .act_bytes = n->act_elems * sl_dtype_size(dt), .f32_bytes = net_act_bytes(n)};
    snprintf(c->name, sizeof c->name, policy == P_NONE ? "%s" : "%s/pf%d", policy_names[policy], prefetch);
    c->note = note;
    vdnn_models(&c->r, c->model, &c->each);
    c->need = vdnn_model_total(&c->r);
    c->fits = c->need <= c->r.capacity;
}

/* The configurations that fit train in turn, one step each round, so that a slow spell of a
 * shared machine falls on all of them alike; each step is timed on its own (barrier, host
 * clock, slowest rank), warm-up rounds first. */
static void train_alternately(sl_ctx *ctx, config *cs, int nc)
{
    const int W = (int)ctx->opt.warmup, I = (int)ctx->opt.iters;
    double *times = calloc((size_t)nc * I, sizeof *times);
    if (!times) SL_FATAL("out of memory for %d x %d step times", nc, I);
    for (int k = 0; k < nc; k++) {
        if (!cs[k].fits) continue;
        cs[k].r.nsteps = W + I;
        cs[k].r.steps = calloc((size_t)(W + I), sizeof *cs[k].r.steps);
        if (!cs[k].r.steps) SL_FATAL("out of memory for %d steps", W + I);
        vdnn_setup(&cs[k].r);
    }
    for (int s = 0; s < W + I; s++)
        for (int k = 0; k < nc; k++) {
            if (!cs[k].fits) continue;
            sl_stats one;
            /* the resident run (none) is the offloading rows' ceiling: SL_TEST_SLOWDOWN leaves it */
            const int resident = cs[k].r.policy == P_NONE;
            if (resident) sl_slowdown_ceiling(1);
            sl_time_loop_n(ctx, 0, 1, vdnn_step, &cs[k].r, &one);
            if (resident) sl_slowdown_ceiling(0);
            if (s < W) continue;
            times[k * I + s - W] = one.median;
            cs[k].st.ncounters = one.ncounters; /* summed over the timed steps, as sl_time_loop does */
            for (int e = 0; e < one.ncounters; e++) cs[k].st.counters[e] += one.counters[e];
        }
    for (int k = 0; k < nc; k++) {
        if (!cs[k].fits) continue;
        sl_stats st;
        sl_stats_compute(times + k * I, I, &st);
        st.ncounters = cs[k].st.ncounters;
        memcpy(st.counters, cs[k].st.counters, sizeof st.counters);
        cs[k].st = st;
        sl_k_sync(cs[k].r.be);
    }
    free(times);
}

/* Median over the timed steps of the copy engine's transfer (field 0) or exposed (1) time;
 * the largest over ranks. */
static double median_of(sl_ctx *ctx, const vdnn_run *r, int field)
{
    const int first = (int)ctx->opt.warmup, k = r->nsteps - first;
    double *v = malloc((size_t)k * sizeof *v), out;
    if (!v) SL_FATAL("out of memory for %d step figures", k);
    for (int i = 0; i < k; i++) v[i] = field ? r->steps[first + i].exposed_s : r->steps[first + i].transfer_s;
    sl_stats s;
    sl_stats_compute(v, k, &s);
    free(v);
    SL_CHECK_MPI(MPI_Allreduce(&s.median, &out, 1, MPI_DOUBLE, MPI_MAX, ctx->comm));
    return out;
}

/* What every configuration of a model is compared with: the none run's results. */
typedef struct reference {
    float *params, *grads; /* host copies after the last step */
    double step_s;
} reference;

static void fmt_mib(char *buf, size_t len, double b) { snprintf(buf, len, "%.2f MiB", b / 1048576); }

/* Emits configuration c's row: the "does not fit" row, or its figures and checks. The first
 * configuration that ran is the reference (ref->params NULL): its results are kept in ref. */
static void report(sl_ctx *ctx, config *c, reference *ref, const double bw[2])
{
    vdnn_run *r = &c->r;
    const net *n = r->n;
    sl_result res;
    row_start(ctx, &res, r, c->name);
    for (int k = 0; k < A_NCATS; k++) {
        char key[32];
        snprintf(key, sizeof key, "model_%s", arena_cat_names[k]);
        sl_result_metric(&res, key, (double)c->model[k], "bytes");
    }
    sl_result_metric(&res, "model_peak", (double)c->need, "bytes");
    sl_result_metric(&res, "bytes_model", (double)c->each, "bytes");
    sl_result_metric(&res, "transfer_model", (double)c->each / bw[0] + (double)c->each / bw[1], "s");
    if (!c->fits) {
        char a[32], b[32], line[96];
        fmt_mib(a, sizeof a, (double)c->need);
        fmt_mib(b, sizeof b, (double)r->capacity);
        snprintf(line, sizeof line, "does not fit: needs %s, has %s", a, b);
        sl_result_param_str(&res, "note", line);
        sl_result_check(&res, SL_CHECK_NONE, NAN, "%s", line);
        sl_result_emit(ctx, &res);
        return;
    }
    sl_result_param_str(&res, "note", c->note ? c->note : "");

    const size_t np = n->nparams;
    float *params = sl_k_download(r->be, r->params, np * sizeof(float));
    float *grads = sl_k_download(r->be, r->grads, np * sizeof(float));
    const double transfer = median_of(ctx, r, 0), exposed = median_of(ctx, r, 1);
    const copier_step *last = &r->steps[r->nsteps - 1];

    sl_result_set_time(&res, &c->st);
    sl_result_metric(&res, "samples_per_s", n->batch / c->st.median, "samples/s");
    snprintf(res.headline, sizeof res.headline, "samples_per_s");
    sl_result_metric(&res, "overhead", ref->params ? c->st.median / ref->step_s - 1 : 0, "fraction");
    if (ref->params) { /* the gate: samples/s against the resident run's, timed alternately with it */
        sl_result_metric(&res, "vs_resident", ref->step_s / c->st.median, "ratio");
        sl_result_gate(&res, "vs_resident");
    }
    sl_result_metric(&res, "transfer", transfer, "s");
    sl_result_metric(&res, "exposed_transfer", exposed, "s");
    sl_result_metric(&res, "overlap", transfer > 0 ? 1 - fmin(exposed / transfer, 1) : NAN, "fraction");
    sl_result_metric(&res, "bytes_d2h", (double)last->bytes_d2h, "bytes");
    sl_result_metric(&res, "bytes_h2d", (double)last->bytes_h2d, "bytes");
    sl_result_metric(&res, "loss", r->loss, "");
    for (int k = 0; k < A_NCATS; k++) {
        char key[32];
        snprintf(key, sizeof key, "mem_%s", arena_cat_names[k]);
        sl_result_metric(&res, key, (double)r->a.peak[k], "bytes");
    }
    sl_result_metric(&res, "mem_peak", (double)r->a.peak_total, "bytes");
    size_t host = 0;
    for (int i = 0; i < n->nops; i++) host += r->host[i] ? r->act_bytes : 0;
    sl_result_metric(&res, "host_activ", (double)host, "bytes");

    /* The checks: memory and bytes as the model says, results as the reference's. */
    char why[160] = "";
    int bad = 0;
    for (int k = 0; k < A_NCATS && !bad; k++)
        if (r->a.peak[k] != c->model[k]) {
            snprintf(why, sizeof why, "peak %s bytes %zu, model %zu", arena_cat_names[k], r->a.peak[k], c->model[k]);
            bad = 1;
        }
    if (!bad && r->a.peak_total != c->need) {
        snprintf(why, sizeof why, "peak bytes %zu, model %zu", r->a.peak_total, c->need);
        bad = 1;
    }
    if (!bad && (last->bytes_d2h != c->each || last->bytes_h2d != c->each)) {
        snprintf(why, sizeof why, "bytes per step d2h %zu h2d %zu, model %zu", last->bytes_d2h, last->bytes_h2d, c->each);
        bad = 1;
    }
    double err = 0;
    if (!bad && ref->params &&
        (memcmp(params, ref->params, np * sizeof(float)) || memcmp(grads, ref->grads, np * sizeof(float)))) {
        sl_weight_diff d = sl_weights_compare(SL_BACKEND_CPU, np, params, ref->params);
        err = d.max_rel;
        snprintf(why, sizeof why, "weights or gradients not bit-identical to none (weights max rel %.3g)", d.max_rel);
        bad = 1;
    }
    if (!ctx->opt.check) sl_result_check(&res, SL_CHECK_SKIPPED, NAN, NULL);
    else if (bad) sl_result_check(&res, SL_CHECK_FAIL, err, "%s", why);
    else sl_result_check(&res, SL_CHECK_PASS, err, NULL);
    sl_result_metric(&res, "weight_rel_err", err, "ratio");
    sl_result_emit(ctx, &res);

    if (!ref->params) {
        ref->params = params;
        ref->grads = grads;
        ref->step_s = c->st.median;
    } else {
        free(params);
        free(grads);
    }
}

/* The copy engine's bandwidth each way on tensors of this model's size, as rows; bw[0] is
 * device to host, bw[1] host to device. */
static void probe(sl_ctx *ctx, net *n, sl_backend be, double bw[2])
{
    const size_t bytes = net_act_bytes(n);
    copier *cp = copier_open(be, 16);
    void *dev = sl_k_malloc(be, SL_MEM_OTHER, bytes), *host = sl_k_host_alloc(be, SL_MEM_OTHER, bytes);
    static const char *const names[2] = {"probe d2h", "probe h2d"};
    for (int k = 0; k < 2; k++) {
        const sl_k_copy_kind kind = k ? SL_K_H2D : SL_K_D2H;
        copier_probe(cp, dev, host, bytes, kind, 2); /* warm */
        bw[k] = copier_probe(cp, dev, host, bytes, kind, 10);
        vdnn_run shape = {.n = n, .be = be, .capacity = opt_device_mem / ARENA_ALIGN * ARENA_ALIGN,
                          .act_bytes = bytes, .f32_bytes = bytes, .policy = P_NONE, .dt = SL_F32};
        sl_result res;
        row_start(ctx, &res, &shape, names[k]);
        sl_result_param_str(&res, "note", be == SL_BACKEND_CUDA ? "pinned, copy stream" : "memcpy, copy thread");
        sl_result_metric(&res, "bw", bw[k], "B/s");
        snprintf(res.headline, sizeof res.headline, "bw");
        sl_result_emit(ctx, &res);
    }
    sl_k_host_free(be, host);
    sl_k_free(be, dev);
    copier_close(cp);
}

static void print_summary(sl_ctx *ctx, const char *model, sl_dtype dt, const config *cs, int nc)
{
    sl_print(ctx, "# %s%s%s: peak device bytes by category, MiB measured / model\n", model,
             dt == SL_F32 ? "" : " ", dt == SL_F32 ? "" : sl_dtype_name(dt));
    sl_print(ctx, "# %-9s", "policy");
    for (int k = 0; k < A_NCATS; k++) sl_print(ctx, " %15s", arena_cat_names[k]);
    sl_print(ctx, " %15s\n", "total");
    for (int i = 0; i < nc; i++) {
        const config *c = &cs[i];
        sl_print(ctx, "# %-9s", c->note ? "none(ref)" : c->name);
        for (int k = 0; k <= A_NCATS; k++) {
            const size_t model = k < A_NCATS ? c->model[k] : c->need;
            const size_t meas = k < A_NCATS ? c->r.a.peak[k] : c->r.a.peak_total;
            char cell[40];
            if (c->fits) snprintf(cell, sizeof cell, "%.2f/%.2f", meas * MIB, model * MIB);
            else snprintf(cell, sizeof cell, "-/%.2f", model * MIB);
            sl_print(ctx, " %15s", cell);
        }
        sl_print(ctx, "%s\n", c->fits ? "" : "  (does not fit)");
    }
}

/* Every configuration of a model with its activations in dt, against that dtype's none run. */
static void run_dtype(sl_ctx *ctx, net *np, sl_backend be, sl_dtype dt, const double bw[2])
{
    /* The reference is the none policy. When the arena cannot hold it, the none row says so,
     * and the reference runs in an arena of exactly its need (a device big enough). */
    config cs[2 + 2 * (NPOLICIES - 1)];
    int nc = 0;
    const size_t cap = opt_device_mem;
    plan(&cs[nc], np, be, dt, P_NONE, 0, cap, NULL);
    if (!cs[nc++].fits) {
        plan(&cs[nc], np, be, dt, P_NONE, 0, cs[0].need, "reference: arena = its need");
        nc++;
    }
    for (int p = P_ALL; p < NPOLICIES; p++) {
        if (opt_offload >= 0 && opt_offload != p) continue;
        for (int pf = 0; pf <= 1; pf++)
            if (opt_prefetch < 0 || opt_prefetch == pf) plan(&cs[nc++], np, be, dt, p, pf, cap, NULL);
    }
    train_alternately(ctx, cs, nc);
    reference ref = {0};
    for (int i = 0; i < nc; i++) report(ctx, &cs[i], &ref, bw);
    print_summary(ctx, "conv", dt, cs, nc);
    for (int i = 0; i < nc; i++)
        if (cs[i].fits) {
            vdnn_teardown(&cs[i].r);
            free(cs[i].r.steps);
        }
    free(ref.params);
    free(ref.grads);
}

static void run_model(sl_ctx *ctx, sl_backend be)
{
    net n;
    if (net_init(&n, be, (int)opt_layers, (int)opt_batch, (int)opt_channels,
                 (int)opt_image, (unsigned long long)sl_opt_seed))
        SL_FATAL("vdnn: the conv stack cannot be built with these shapes");
    double bw[2];
    probe(ctx, &n, be, bw);
    for (int t = 0; t < SL_NDTYPES; t++)
        if (ctx->opt.dtypes & (1u << t)) run_dtype(ctx, &n, be, (sl_dtype)t, bw);
}

int vdnn_conv_asked(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--model=conv") || (!strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "conv")))
            return 1;
    return 0;
}

int vdnn_conv_main(int argc, char **argv)
{
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);
    char why[256];
    int be = sl_k_backend_resolve(ctx.opt.backend, why, sizeof why);
    if (be < 0) SL_FATAL("-B %s: %s", sl_backend_name(ctx.opt.backend), why);
    if (be == SL_BACKEND_CUDA)
        sl_note(&ctx, "device: cuda; the arena is device memory, copies run on a copy stream to pinned host memory");
    else
        sl_note(&ctx, "device: EMULATED: the arena is host memory standing in for a device and a helper "
                      "thread is the copy engine (memcpy); build with CUDA and run -B cuda for the real thing");
    sl_note(&ctx, "device arena: %zu bytes (--device-mem); every tensor and the model in multiples of %d bytes",
            opt_device_mem / ARENA_ALIGN * ARENA_ALIGN, ARENA_ALIGN);
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));
    run_model(&ctx, (sl_backend)be);
    return sl_finalize(&ctx);
}
