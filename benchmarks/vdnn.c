/* vdnn.c — vDNN (Rhu et al., "vDNN: Virtualized Deep Neural Networks for Scalable,
 * Memory-Efficient Neural Network Design", 2016) on the training layer: a network whose
 * activations do not fit in device memory trains anyway, by moving what each layer keeps for
 * its backward to pinned host memory once its forward is done and bringing it back for its
 * backward. It trains the shared MLP (default), the GPT (--model gpt: offload per layer, the
 * embedding, each block, the head) or a conv stack (--model conv: halo_conv's convolutions on
 * whole images, each convolution and each ReLU a layer; vdnn/conv.c), in f32, f16 or bf16 (-d):
 * every activation is in the run's dtype, so 16 bits move half the bytes.
 *
 *   variants: none (everything stays on the device), all/pf0 (every layer's input and what its
 *             forward leaves for backward go to the host; each is fetched when its backward
 *             starts, the copy all exposed), all/pf1 (the same, and while layer l computes its
 *             backward the layer below is already coming back: prefetch one layer ahead);
 *             the conv stack also conv/pf0 and conv/pf1: only the convolutions' inputs go (the
 *             ReLUs' stay), whose compute hides the copy best.
 *
 * Device memory is --device-mem: the replica (weights, gradients, optimizer state and the
 * layers' workspaces, as the training layer places them) is resident, and the activations come
 * from an arena of what is left (vdnn/arena.h): on cuda device memory and a copy stream, in a
 * cpu build an emulation (host memory standing in for the device, a helper thread for the copy
 * engine), said so in every row. The arena's peaks by category are measured and put beside the
 * analytic model (vdnn/pass.c); a variant whose model does not fit --device-mem gets a "does
 * not fit" row and the run goes on. On several ranks each is a data-parallel replica of its
 * slice of the batch, the gradients summed with the -C collective.
 *
 * Checked (beside the driver's check against serial training; the conv stack's: halo_conv's
 * serial stack in the run's dtype): the first step's gradients and
 * the weights after training bit-identical to the none policy's (offloading moves bytes, never
 * changes them), the arena's peaks equal to the model to the byte, and the bytes moved each way
 * equal to the model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "vdnn/conv.h"
#include "vdnn/state.h"

static const char *const variant_names[] = {"none", "all/pf0", "all/pf1", "conv/pf0", "conv/pf1"};
enum { V_NONE, V_ALL0, V_ALL1, V_CONV0, V_CONV1, NVARIANTS };
static unsigned run_mask;
static int opt_offload = -1; /* -1: every policy */
static long long opt_prefetch = -1;
static size_t opt_device_mem = 16u << 20;
static long long opt_channels = 16, opt_image = 32;
static int emulated, conv_model; /* conv_model: --model conv */

static const sl_opt vd_opts[] = {
    {"offload", 0, SL_OPT_CHOICE, &opt_offload, 0, 0, "none|all|conv", 0,
     "whose activations go to the host: none, every layer's, conv: the convolutions' inputs (--model conv) "
     "(default every policy)"},
    {"prefetch", 0, SL_OPT_INT, &opt_prefetch, 0, 1, NULL, 0,
     "1: fetch the next offloaded layer during backward (default both 0 and 1)"},
    /* at least one unit of the arena: a smaller capacity would round down to 0 bytes */
    {"device-mem", 0, SL_OPT_SIZE, &opt_device_mem, ARENA_ALIGN, 1LL << 40, NULL, 0,
     "device capacity in bytes, K/M/G, at least 256: the replica, then the activations' arena "
     "(default 16M: the default MLP fits only with offload)"},
    {"channels", 0, SL_OPT_INT, &opt_channels, 1, 4096, NULL, 0, "--model conv: channels of every layer"},
    {"image", 0, SL_OPT_INT, &opt_image, 1, 4096, NULL, 0, "--model conv: image height and width"},
    {0},
};

static sl_mem_space space_of(sl_backend be) { return be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST; }

static size_t space_total(sl_mem_space sp)
{
    size_t total = 0;
    for (int c = 0; c < SL_MEM_NCATS; c++) total += sl_mem_current(sp, (sl_mem_cat)c);
    return total;
}

static void set_policy(vd *s, int variant)
{
    s->policy = variant == V_NONE ? VD_NONE : variant <= V_ALL1 ? VD_ALL : VD_CONV;
    s->prefetch = variant == V_ALL1 || variant == V_CONV1;
}

static void setup(sl_train *t)
{
    const sl_mlp *m = t->m;
    vd *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    s->rows = t->hi - t->lo;
    s->N = m->nlayers;
    set_policy(s, t->variant);
    /* none is the offloading rows' ceiling (vs_none): SL_TEST_SLOWDOWN leaves its steps alone */
    if (t->variant == V_NONE) sl_slowdown_ceiling(1);
    const sl_mem_space sp = space_of(t->be);
    const size_t before = space_total(sp);
    if (conv_model) vd_conv_setup(t, s); /* its workspaces, resident */
    sl_replica_place(t, s->rows, &s->rep);
    s->resident = space_total(sp) - before;
    vd_model(t, s);
    s->device_mem = opt_device_mem / ARENA_ALIGN * ARENA_ALIGN;
    const size_t need = s->resident + s->model_total;
    int fits = need <= s->device_mem, all = fits;
    if (!t->baseline) /* the one-rank baseline runs on rank 0 alone */
        SL_CHECK_MPI(MPI_Allreduce(&fits, &all, 1, MPI_INT, MPI_MIN, t->ctx->comm));
    /* the baseline (the whole global batch on one rank, for scaling_eff) is not a row: it runs
     * on a device big enough, an arena of exactly its need */
    s->fits = all || t->baseline;
    /* short enough for a row's param (its resident and activation bytes are metrics beside) */
    snprintf(s->why, sizeof s->why, "does not fit: needs %zu bytes, has %zu", need, s->device_mem);
    s->exposed = calloc((size_t)t->nsteps + 1, sizeof *s->exposed);
    if (!s->exposed) SL_FATAL("out of memory");
    if (!s->fits) return;
    arena_open(&s->a, t->be, all ? s->device_mem - s->resident : s->model_total, 2 * s->N + 8);
    for (int l = 0; l < s->N; l++) {
        vd_layer *y = &s->L[l];
        y->tk_in = y->tk_body = -1;
        if (!vd_offloaded(s, l)) continue;
        if (y->in_bytes) y->host_in = sl_k_host_alloc(t->be, SL_MEM_OTHER, y->in_bytes);
        if (y->body_bytes) y->host_body = sl_k_host_alloc(t->be, SL_MEM_OTHER, y->body_bytes);
    }
    s->cp = copier_open(t->be, 4 * s->N + 4);
}

static const char *cannot_run(sl_train *t)
{
    const vd *s = t->state;
    return s->fits ? NULL : s->why;
}

static void step(sl_train *t)
{
    vd *s = t->state;
    sl_k_memset0(t->be, s->rep.grads, t->nparams * sl_train_esize(t));
    vd_pass(t, s, s->rep.params, s->rep.grads);
    copier_step end;
    copier_step_end(s->cp, &end);
    if (s->policy != VD_NONE) sl_train_record(t, SL_PHASE_TRANSFER, end.transfer_s);
    if (t->step < t->nsteps) s->exposed[t->step] = end.exposed_s;
    s->last = end;
    memcpy(s->peak, s->a.peak, sizeof s->peak);
    s->peak_total = s->a.peak_total;
    sl_replica_step(t, &s->rep); /* the replicas' gradients summed, the update */
}

static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    return sl_replica_weights(t, &((vd *)t->state)->rep, first, count);
}

static void release(sl_train *t)
{
    vd *s = t->state;
    if (s->fits) {
        copier_close(s->cp);
        for (int l = 0; l < s->N; l++) {
            sl_k_host_free(t->be, s->L[l].host_in);
            sl_k_host_free(t->be, s->L[l].host_body);
        }
        arena_close(&s->a);
    }
    sl_replica_free(t, &s->rep);
    if (s->conv) vd_conv_free(t, s);
    if (t->variant == V_NONE) sl_slowdown_ceiling(0);
    free(s->exposed);
    free(s);
}

/* The run's own figures against the model (the conv stack's resident bytes too: with them every
 * byte of its run is modelled); then the first step's gradients and the weights after the run
 * against the none policy's, bit for bit, trained here from the initial weights (the same
 * samples, all-reduce and, in 16 bits, a loss scaler of its own from its start) in an arena
 * that holds none's activations (a device big enough). */
static int check(sl_train *t, double *error, char *why, size_t len)
{
    vd *s = t->state;
    const size_t n = t->nparams, es = sl_train_esize(t);
    *error = NAN;
    if (s->conv && s->resident != vd_conv_resident(t, s)) {
        snprintf(why, len, "resident bytes %zu, model %zu", s->resident, vd_conv_resident(t, s));
        return 1;
    }
    for (int c = 0; c < A_NCATS; c++)
        if (s->peak[c] != s->model[c]) {
            snprintf(why, len, "peak %s bytes %zu, model %zu", arena_cat_names[c], s->peak[c], s->model[c]);
            return 1;
        }
    if (s->peak_total != s->model_total) {
        snprintf(why, len, "peak arena bytes %zu, model %zu", s->peak_total, s->model_total);
        return 1;
    }
    if (s->last.bytes_d2h != s->moved || s->last.bytes_h2d != s->moved) {
        snprintf(why, len, "bytes per step d2h %zu h2d %zu, model %zu", s->last.bytes_d2h, s->last.bytes_h2d, s->moved);
        return 1;
    }
    const int steps_run = t->step, policy = s->policy, prefetch = s->prefetch;
    const size_t mine = s->model_total;
    sl_train_saved run;
    sl_train_aside(t, &run);
    s->policy = VD_NONE;
    s->prefetch = 0;
    vd_model(t, s);
    const arena run_arena = s->a;
    /* one pass at a time: the larger of the two needs */
    arena_open(&s->a, t->be, s->model_total > mine ? s->model_total : mine, 2 * s->N + 8);
    sl_replica ref;
    sl_replica_place(t, s->rows, &ref);
    void *g = sl_k_malloc(t->be, SL_MEM_OTHER, n * es);
    sl_k_memset0(t->be, g, n * es);
    sl_k_memset0(t->be, ref.grads, n * es);
    t->step = 0;
    s->policy = policy, s->prefetch = prefetch;
    vd_pass(t, s, ref.params, g);
    s->policy = VD_NONE, s->prefetch = 0;
    vd_pass(t, s, ref.params, ref.grads);
    const long long grad_diff = sl_bit_differences(t->be, n, es, g, ref.grads);
    sl_k_memset0(t->be, ref.optim, (size_t)sl_optim_state_per_param(&t->optim) * n * sizeof(float));
    for (t->step = 0; t->step < steps_run; t->step++) {
        sl_k_memset0(t->be, ref.grads, n * es);
        vd_pass(t, s, ref.params, ref.grads);
        sl_replica_step(t, &ref);
    }
    const long long weight_diff = sl_bit_differences(t->be, n, sizeof(float), sl_replica_weights(t, &s->rep, NULL, NULL), sl_replica_weights(t, &ref, NULL, NULL));
    copier_step discard;
    copier_step_end(s->cp, &discard);
    sl_replica_free(t, &ref);
    sl_k_free(t->be, g);
    arena_close(&s->a);
    s->a = run_arena;
    s->policy = policy, s->prefetch = prefetch;
    vd_model(t, s);
    sl_train_back(t, &run);
    *error = (double)(grad_diff + weight_diff); /* elements that differ: 0 when bit-identical */
    if (grad_diff)
        snprintf(why, len, "first step: %lld of %zu gradient elements differ from none's", grad_diff, n);
    else if (weight_diff)
        snprintf(why, len, "after %d steps: %lld of %zu weights differ from none's training", steps_run, weight_diff, n);
    else
        return 0;
    return 1;
}

/* Median over the timed steps of the seconds the step waited for a copy, the slowest rank's. */
static double exposed_median(sl_train *t)
{
    vd *s = t->state;
    const int timed = (int)t->ctx->opt.iters, first = t->nsteps - timed;
    sl_stats st;
    sl_stats_compute(s->exposed + first, timed, &st);
    double out;
    SL_CHECK_MPI(MPI_Allreduce(&st.median, &out, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    return out;
}

static double none_time = NAN; /* none's step in this collective and dtype, for the overhead */
static const char *none_coll, *none_dtype;

static void row(sl_train *t, sl_result *res)
{
    vd *s = t->state;
    static const char *const policy_names[] = {"none", "all", "conv"};
    sl_result_param_str(res, "offload", policy_names[s->policy]);
    if (s->conv) { /* what the training layer's row says of the MLP's shape */
        sl_result_param_str(res, "model", "conv");
        sl_result_param_num(res, "layers", s->conv->g.layers);
        sl_result_param_num(res, "ops", s->N);
        sl_result_param_num(res, "channels", s->conv->g.c);
        sl_result_param_num(res, "image", s->conv->g.h);
        sl_result_param_num(res, "act_bytes", (double)vd_io_bytes(t, s, 0));
    }
    sl_result_param_num(res, "prefetch", s->prefetch);
    sl_result_param_num(res, "device_mem", (double)s->device_mem);
    sl_result_param_str(res, "device", emulated ? "emulated" : "cuda");
    sl_result_param_num(res, "emulation", emulated);
    sl_result_param_str(res, "note", s->fits ? "" : s->why);
    sl_result_metric(res, "resident", (double)s->resident, "bytes");
    sl_result_metric(res, "model_arena_activ", (double)s->model[A_ACTIV], "bytes");
    sl_result_metric(res, "model_arena_workspace", (double)s->model[A_WORKSPACE], "bytes");
    sl_result_metric(res, "model_arena_peak", (double)s->model_total, "bytes");
    sl_result_metric(res, "model_device", (double)(s->resident + s->model_total), "bytes");
    sl_result_metric(res, "moved_model", (double)s->moved, "bytes");
    size_t host = 0;
    for (int l = 0; l < s->N; l++)
        host += (s->L[l].host_in ? s->L[l].in_bytes : 0) + (s->L[l].host_body ? s->L[l].body_bytes : 0);
    sl_result_metric(res, "host_activ", s->fits ? (double)host : NAN, "bytes");
    if (!s->fits) return;
    sl_result_metric(res, "arena_activ", (double)s->peak[A_ACTIV], "bytes");
    sl_result_metric(res, "arena_workspace", (double)s->peak[A_WORKSPACE], "bytes");
    sl_result_metric(res, "arena_peak", (double)s->peak_total, "bytes");
    sl_result_metric(res, "bytes_d2h", (double)s->last.bytes_d2h, "bytes");
    sl_result_metric(res, "bytes_h2d", (double)s->last.bytes_h2d, "bytes");
    sl_result_metric(res, "exposed_transfer", exposed_median(t), "s");
    if (t->variant == V_NONE) {
        none_time = res->time.median;
        none_coll = res->collective, none_dtype = res->dtype;
    }
    const int same = none_coll && !strcmp(none_coll, res->collective) && !strcmp(none_dtype, res->dtype);
    sl_result_metric(res, "overhead", same ? res->time.median / none_time - 1 : NAN, "fraction");
    /* The regression gate's figure (docs/ci-gate.md): the resident run's step over this one's,
     * both measured in this run, so the machine's speed cancels out of it. An offloading row
     * only, and only where none fitted beside it (1: offloading costs nothing). */
    if (same && t->variant != V_NONE) {
        sl_result_metric(res, "vs_none", none_time / res->time.median, "ratio");
        sl_result_gate(res, "vs_none");
    }
}

/* The training layer's options as vdnn sets them, before the command line. */
static sl_train_options defaults;

static void validate(sl_ctx *ctx)
{
    if (opt_offload == VD_CONV && !conv_model)
        sl_usage_error("--offload conv: only the conv stack has convolutions; use --model conv, or --offload none|all");
    if (opt_offload == VD_NONE && opt_prefetch >= 0)
        sl_usage_error("--prefetch: only with --offload all|conv (nothing is offloaded with none)");
    const sl_train_options *o = &sl_train_opt;
    if (conv_model && sl_gpt_selected()) sl_usage_error("--model: one model, mlp, conv or gpt");
    if (conv_model && (o->width != defaults.width || o->inputs != defaults.inputs || o->outputs != defaults.outputs))
        sl_usage_error("--width/--inputs/--outputs: --model conv trains a conv stack: use --layers, --channels "
                       "and --image");
    if (!conv_model && (sl_option_given(&ctx->opt, "channels") || sl_option_given(&ctx->opt, "image")))
        sl_usage_error("--channels/--image: only with --model conv");
    if (conv_model) vd_conv_validate(ctx, opt_channels, opt_image);
    run_mask = 1u << V_NONE; /* every policy's overhead is over none's */
    for (int p = VD_ALL; p <= (conv_model ? VD_CONV : VD_ALL); p++) {
        if (opt_offload >= 0 && opt_offload != p) continue;
        const int v0 = p == VD_ALL ? V_ALL0 : V_CONV0;
        if (opt_prefetch != 1) run_mask |= 1u << v0;
        if (opt_prefetch != 0) run_mask |= 1u << (v0 + 1);
    }
    char why[256];
    const int be = sl_k_backend_resolve(ctx->opt.backend, why, sizeof why);
    emulated = be != SL_BACKEND_CUDA;
    if (!emulated)
        sl_note(ctx, "device: cuda; the arena is device memory, copies run on a copy stream to pinned host memory");
    else
        sl_note(ctx, "device: EMULATED: the arena is host memory standing in for a device and a helper thread is "
                     "the copy engine (memcpy); build with CUDA and run -B cuda for the real thing");
    sl_note(ctx, "device memory: %zu bytes (--device-mem): the replica resident, the activations in an arena of the "
                 "rest, every tensor in multiples of %d bytes",
            opt_device_mem / ARENA_ALIGN * ARENA_ALIGN, ARENA_ALIGN);
}

/* The step as the performance model reads it (perf_model.h), in vd_pass's order: an offloaded
 * layer's input starts to the host before its forward and its body after it (host<->device
 * copies, SL_PM_H2D, on the copy engine's timeline beside the compute), the input's copy waited
 * for after the layer and the body's after the next; backward from the top, a layer not on the
 * device fetched (both pieces) and waited for at once, with prefetch the layer below fetched
 * while this one computes. Then the replicas' all-reduce and the optimizer (sl_replica_step).
 * On the cpu backend the device is emulated: the copies are memcpy on a helper thread, and
 * their alpha-beta is fitted to that memcpy. */
static void schedule(const sl_train *t, sl_pm_sched *sc)
{
    const vd *s = t->state;
    const int N = s->N;
    int tk_in[VD_MAX_LAYERS], tk_body[VD_MAX_LAYERS], on[VD_MAX_LAYERS];
    const double T = (double)vd_io_bytes(t, s, 0); /* the conv stack's tensor */
    sl_pm_bytes(sc, (double)t->nparams * sl_train_esize(t)); /* the gradient zeroed */
    if (s->conv) sl_pm_bytes(sc, T / sl_train_esize(t) * 4 + T); /* the images, rounded into the input */
    else sl_pm_load(t, sc, s->rows);
    int pending = -1;
    for (int l = 0; l < N; l++) {
        const int off = vd_offloaded(s, l);
        if (off) tk_in[l] = sl_pm_copy(sc, (double)s->L[l].in_bytes);
        if (s->conv) vd_conv_pm(t, s, sc, l, 0);
        else sl_pm_layer_forward(t, sc, l, s->rows);
        if (off) {
            tk_body[l] = sl_pm_copy(sc, (double)s->L[l].body_bytes);
            sl_pm_wait(sc, tk_in[l]);
        }
        if (pending >= 0) sl_pm_wait(sc, tk_body[pending]);
        pending = off ? l : -1;
        on[l] = !off;
    }
    if (pending >= 0) sl_pm_wait(sc, tk_body[pending]);
    if (s->conv) sl_pm_bytes(sc, 3 * T / sl_train_esize(t) * 4); /* output, target read, dout written */
    else sl_pm_loss(t, sc, s->rows);
    for (int l = N - 1; l >= 0; l--) {
        for (int j = l; j >= 0 && j >= l - (s->prefetch ? 1 : 0); j--) /* this layer, and the one below ahead */
            if (!on[j] && vd_offloaded(s, j)) {
                tk_in[j] = sl_pm_copy(sc, (double)s->L[j].in_bytes);
                tk_body[j] = sl_pm_copy(sc, (double)s->L[j].body_bytes);
                on[j] = 1;
            }
        if (vd_offloaded(s, l)) {
            sl_pm_wait(sc, tk_in[l]);
            sl_pm_wait(sc, tk_body[l]);
        }
        if (s->conv) vd_conv_pm(t, s, sc, l, 1);
        else sl_pm_layer_backward(t, sc, l, s->rows);
    }
    if (t->size > 1) sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)t->nparams);
    sl_pm_optimizer(t, sc, t->nparams);
}

static const sl_column columns[] = {
    SL_COL("variant", "variant", 8), SL_COL("dtype", "dtype", 5), SL_COL("coll", "collective", 5),
    {"step", "ms", "time.median", 9, 2, 1e3},
    SL_TRAIN_COLUMNS_PRED,
    {"transfer", "ms", "transfer", 9, 2, 1e3},
    {"exposed", "ms", "exposed_transfer", 8, 2, 1e3},
    {"+step", "%", "overhead", 7, 1, 100},
    {"moved", "MB", "bytes_d2h", 8, 3, 1e-6},
    {"model", "MB", "moved_model", 8, 3, 1e-6},
    {"arena", "MB", "arena_peak", 8, 3, 1e-6},
    {"model", "MB", "model_arena_peak", 8, 3, 1e-6},
    {"device", "MB", "model_device", 8, 3, 1e-6},
    SL_COL_CHECK(6),
    SL_COL("note", "note", 0),
};

static sl_technique vdnn = {
    .program = {.name = "vdnn",
                .summary = "vDNN: activations offloaded to pinned host memory after forward and fetched (or "
                           "prefetched) for backward; peak device bytes and bytes moved against the model. "
                           "--model conv: a conv stack (--layers convolutions, --channels, --image)",
                SL_TRAIN_PROGRAM_USES, .default_coll = SL_COLL_MPI, .default_iters = 5, .default_warmup = 1,
                .extra = vd_opts, .validate = validate},
    .variants = variant_names, .nvariants = NVARIANTS, .variant_mask = &run_mask,
    .mixed_variants = ~0u,
    .trains_gpt = 1,
    .setup = setup, .step = step, .weights = weights, .free = release,
    .check = check, .row = row, .cannot_run = cannot_run, .schedule = schedule,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    /* 8 layers of 256 on 1024 samples: a 1 MiB tensor per activation, so that the default
     * --device-mem (16M) holds the offloading policies and not none */
    sl_train_opt.layers = 8;
    sl_train_opt.width = sl_train_opt.inputs = sl_train_opt.outputs = 256;
    sl_train_opt.batch = 1024;
    /* --model conv: the training layer's --model takes mlp|gpt; conv is vdnn's own model, taken
     * off the command line here and put on the technique */
    int n = 1;
    for (int i = 1; i < argc; i++) {
        const int two = !strcmp(argv[i], "--model") && i + 1 < argc && !strcmp(argv[i + 1], "conv");
        if (two || !strcmp(argv[i], "--model=conv")) {
            conv_model = 1;
            i += two;
        } else {
            argv[n++] = argv[i];
        }
    }
    argv[n] = NULL;
    if (conv_model) { /* 8 layers, 16 images of 16 x 32 x 32 (f32: 256 KiB a tensor) */
        sl_train_opt.batch = 16;
        vdnn.model_params = vd_conv_params, vdnn.model_flops = vd_conv_flops;
        vdnn.init_params = vd_conv_init_params, vdnn.reference = vd_conv_reference;
    }
    defaults = sl_train_opt;
    return sl_train_main(&vdnn, n, argv);
}
