/* precision.c — mixed-precision training: the shared MLP trained in fp32, fp16 and bf16, with
 * no, static or dynamic loss scaling, with or without an f32 master copy of the weights, and
 * every value the 16-bit types lose counted.
 *
 *   fp16  1 sign, 5 exponent, 10 mantissa bits: max 65504, smallest normal 2^-14, smallest
 *         subnormal 2^-24. Gradients smaller than that flush to zero: the layers below them
 *         learn nothing. Loss scaling multiplies the loss (so every gradient) by S before
 *         backward and divides the f32 gradients by S after: small gradients stay in range.
 *         Too large an S overflows to inf; dynamic scaling (PyTorch's GradScaler) skips such a
 *         step, halves S, and doubles it again after 2000 clean steps.
 *   bf16  1 sign, 8 exponent, 7 mantissa bits: f32's range, so nothing underflows that f32
 *         keeps, but each value is rounded 8 times more coarsely than in fp16.
 *   master weights: the optimizer updates an f32 copy and the 16-bit weights are cast from it
 *         each step. Without it an update smaller than half a unit in the last place of the
 *         weight rounds back to the old weight and is lost (counted: lost_updates).
 *
 * What runs (kernels/mlp_mixed.h): the layers' GEMMs take 16-bit operands and accumulate in f32
 * (cuBLAS tensor cores on cuda; on the cpu OpenBLAS's bf16 GEMM or the operands widened to f32),
 * activations and gradients are stored in the 16-bit type, the loss and the optimizer are f32.
 *
 * The scenario (default): the MLP regression task with AdamW and the loss weighted by
 * --loss-weight 2^-20 (as a loss averaged over a million times more elements would be), so
 * every gradient is 2^20 times smaller. In fp16 without scaling the gradient of the loss
 * underflows to zero and the run learns nothing; bf16 trains; fp16 with dynamic scaling tracks
 * fp32; AdamW's steps hardly depend on the gradients' scale, so fp32 trains. The outcome is
 * printed, and asserted under the parameters it was designed for (scenario.h; which ones, and
 * why, at scenario_params below): elsewhere it is a teaching expectation, not a correctness
 * check, and is reported.
 *
 * The checks (under any parameters): fp32 (with any power-of-two loss scale) reproduces the
 * serial reference (sl_train_serial) bit for bit; the 16-bit runs that should train (bf16, or
 * fp16 with a loss scaler, with master weights) end within LOSS_TOL of the fp32 run's loss (the
 * bound and why: precision/run.h); the runs whose failure is the lesson (fp16 without scaling,
 * no master copy) are reported, not asserted, and the scenario asserts what it teaches.
 *
 * The loss curves (every --curve-every steps) go to precision.curve.tsv and the terminal
 * (precision/curve.h), not into the rows.
 *
 * --model gpt trains the GPT on the training layer instead (precision/layer.c: a technique run by
 * sl_train_main, data-parallel over the ranks, its scaler and master choice told to the layer);
 * this file's MLP runs on kernels/mlp_mixed.h directly, for the counts sl_mixed keeps (forward
 * activations and activation gradients beside the weight gradients) and the scenario.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "loss_scale.h"
#include "mlp_mixed.h"
#include "precision/curve.h"
#include "precision/gemm_rate.h"
#include "precision/layer.h"
#include "precision/options.h"
#include "precision/range.h"
#include "precision/run.h"
#include "precision/scenario.h"
#include "scalelab.h"
#include "train_ref.h"

static long long opt_layers = 3, opt_width = 64, opt_inputs = 32, opt_outputs = 8, opt_batch = 64;
static int opt_optim = 1; /* adamw */
static double opt_lr = 1e-3;
static long long opt_gemm_n = 256;
static int opt_scenario = 0; /* underflow */

static const sl_opt precision_opts[] = {
    {"layers", 0, SL_OPT_INT, &opt_layers, 1, SL_MLP_MAX_LAYERS, NULL, 0, "MLP layers (default 3)"},
    {"width", 0, SL_OPT_INT, &opt_width, 1, 1 << 16, NULL, 0, "hidden width (default 64)"},
    {"inputs", 0, SL_OPT_INT, &opt_inputs, 1, 1 << 16, NULL, 0, "input width (default 32)"},
    {"outputs", 0, SL_OPT_INT, &opt_outputs, 1, 1 << 16, NULL, 0, "output width (default 8)"},
    {"batch", 0, SL_OPT_INT, &opt_batch, 1, 1 << 20, NULL, 0, "samples per step (default 64)"},
    {"optim", 0, SL_OPT_CHOICE, &opt_optim, 0, 0, "sgd|adamw", 0, "optimizer (default adamw; sgd has momentum 0.9)"},
    {"lr", 0, SL_OPT_DOUBLE, &opt_lr, 0, 0, NULL, 0, "learning rate (default 0.001)"},
    {"gemm-n", 0, SL_OPT_INT, &opt_gemm_n, 0, 1 << 14, NULL, 0, "GEMM throughput table at n x n x n (default 256; 0: none)"},
    {"scenario", 0, SL_OPT_CHOICE, &opt_scenario, 0, 0, "underflow|off", 0,
     "underflow: assert the scenario's outcome (fp16 without scaling fails, bf16 and fp16 with dynamic scaling "
     "track fp32) under the parameters it was designed for, report it under others; off: report only (default underflow)"},
    {0},
};

static void validate(sl_ctx *ctx)
{
    /* the GPT's shape for --analytic (--model gpt without it trains: precision/layer.c): L from
     * --layers, b from --batch */
    sl_gpt_opt.layers_opt = "layers", sl_gpt_opt.layers_src = &opt_layers;
    sl_gpt_opt.batch_opt = "batch", sl_gpt_opt.batch_src = &opt_batch;
    sl_gpt_gate(ctx);
    sl_gpt_analytic(ctx);
    precision_options_validate();
    if (!(opt_lr > 0) || opt_lr > 1e6) sl_usage_error("--lr: expected a learning rate in (0, 1e6], got %g", opt_lr);
    if (ctx->opt.iters < 1) sl_usage_error("-n/--iters: expected at least 1 timed training step");
}

static const sl_program program = {
    .name = "precision",
    .summary = "mixed-precision training: fp32, fp16, bf16; no, static, dynamic loss scaling; f32 master weights",
    .uses = SL_USES_BACKEND,
    .default_iters = 290,
    .default_warmup = 10,
    .groups = {&sl_data_opts, &sl_gpt_option_group, &precision_option_group},
    .extra = precision_opts,
    .validate = validate,
};

/* Tables ------------------------------------------------------------------------------------- */

static const sl_column range_columns[] = {
    SL_COL("dtype", "dtype", 6), SL_COL("exp", "exponent_bits", 4), SL_COL("man", "mantissa_bits", 4),
    {"max", "", "max", 11, 4, 0}, {"min normal", "", "min_normal", 11, 3, 0},
    {"min subnorm", "", "min_subnormal", 11, 3, 0}, {"eps", "(gap at 1)", "eps", 13, 7, 0},
    {"gap at 1000", "", "gap_1000", 11, 3, 0}, SL_COL_CHECK(7),
};

static const sl_column gemm_columns[] = {
    SL_COL("gemm", "dtype", 6), SL_COL("n", "n", 6), SL_COL_TIME("ms", 1e3, 3, 9),
    {"rate", "GFLOP/s", "gflops", 9, 2, 0}, {"vs f32", "x", "vs_f32", 7, 2, 0}, SL_COL_CHECK(7),
};

static const sl_column run_columns[] = {
    SL_COL("variant", "variant", 22),
    {"loss", "final", "final_loss", 10, 3, 0}, {"vs fp32", "x", "loss_vs_fp32", 8, 2, 0},
    {"underflow", "% grads", "underflow_frac", 9, 2, 100}, {"subnormal", "% grads", "subnormal_frac", 9, 2, 100},
    {"zero dW", "% dW", "wgrad_zero_frac", 8, 1, 100}, {"overflow", "max/step", "overflow_max", 8, 0, 0},
    {"skipped", "steps", "skipped", 7, 0, 0}, {"scale", "final", "final_scale", 8, 0, 0},
    {"lost upd", "% w/step", "lost_updates_frac", 8, 2, 100},
    {"states", "B/param", "state_bytes_per_param", 7, 0, 0}, {"activ", "KiB", "mem_activ", 7, 1, 1.0 / 1024},
    {"samples/s", "", "samples_per_s", 10, 0, 0}, {"vs fp32", "x", "speed_vs_fp32", 7, 2, 0},
    SL_COL_CHECK(13),
};

static void range_rows(sl_ctx *ctx)
{
    static const sl_dtype types[] = {SL_F32, SL_F16, SL_BF16};
    sl_table_begin(ctx, range_columns, (int)(sizeof range_columns / sizeof range_columns[0]));
    for (int i = 0; i < 3; i++) {
        type_range got = range_measure(types[i]), want = range_expected(types[i]);
        sl_result r;
        sl_result_init(ctx, &r, "range");
        r.dtype = sl_dtype_name(types[i]);
        sl_result_metric(&r, "exponent_bits", got.exponent_bits, "bits");
        sl_result_metric(&r, "mantissa_bits", got.mantissa_bits, "bits");
        sl_result_metric(&r, "max", got.max, "");
        sl_result_metric(&r, "min_normal", got.min_normal, "");
        sl_result_metric(&r, "min_subnormal", got.min_subnormal, "");
        sl_result_metric(&r, "eps", got.eps, "");
        sl_result_metric(&r, "gap_1000", got.gap_1000, "");
        snprintf(r.headline, sizeof r.headline, "eps");
        /* exact: these are powers of two and (2 - 2^-p) 2^e, all exactly representable */
        const char *bad = got.max != want.max ? "max" : got.min_normal != want.min_normal ? "min normal"
                        : got.min_subnormal != want.min_subnormal ? "min subnormal" : got.eps != want.eps ? "eps"
                        : got.gap_1000 != want.gap_1000 ? "gap at 1000"
                        : got.exponent_bits != want.exponent_bits || got.mantissa_bits != want.mantissa_bits ? "field widths" : NULL;
        if (bad) sl_result_check(&r, SL_CHECK_FAIL, 1, "%s: measured %s differs from the standard's", r.dtype, bad);
        else sl_result_check(&r, SL_CHECK_PASS, 0, NULL);
        sl_result_emit(ctx, &r);
    }
}

/* Runs ---------------------------------------------------------------------------------------- */

/* Whether a run is expected to train as fp32 does (and so is asserted to): master weights, and
 * a type whose range holds the gradients — bf16, or fp16 with a scaler. */
static int should_track(const run_config *c)
{
    return c->dt == SL_F32 || (c->master && (c->dt == SL_BF16 || c->mode != SL_SCALE_NONE));
}

static void run_row(sl_ctx *ctx, const sl_mlp *m, const sl_optim *optim, const run_result *r,
                    const run_result *ref32, const float *serial, int B, int every)
{
    char name[48];
    run_name(&r->cfg, name, sizeof name);
    sl_result row;
    sl_result_init(ctx, &row, name);
    row.backend = sl_backend_name(m->be);
    row.dtype = sl_dtype_name(r->cfg.dt);
    row.iters = (int)ctx->opt.iters;
    row.warmup = (int)ctx->opt.warmup;
    sl_result_param_str(&row, "loss_scale", sl_scale_mode_name(r->cfg.mode));
    sl_result_param_str(&row, "master", r->cfg.master ? "fp32" : "none");
    sl_result_param_num(&row, "steps", r->steps);
    sl_result_param_num(&row, "batch", B);
    sl_result_param_num(&row, "params", (double)m->nparams);
    sl_result_param_num(&row, "curve_every", every);
    sl_result_set_time(&row, &r->time);
    double fl = run_final_loss(r), fl32 = run_final_loss(ref32);
    sl_result_metric(&row, "final_loss", fl, "");
    sl_result_metric(&row, "loss_vs_fp32", fl / fl32, "ratio");
    sl_result_metric(&row, "underflow_frac", run_underflow_frac(r), "fraction");
    sl_result_metric(&row, "subnormal_frac", run_subnormal_frac(r), "fraction");
    sl_result_metric(&row, "wgrad_zero_frac", run_wgrad_zero_frac(r), "fraction");
    sl_result_metric(&row, "wgrad_underflow_frac", run_wgrad_underflow_frac(r), "fraction");
    sl_result_metric(&row, "nonfinite_max", run_nonfinite_max(r), "elements/step");
    sl_result_metric(&row, "overflow_mean", run_overflow_mean(r), "elements/step");
    sl_result_metric(&row, "overflow_max", run_overflow_max(r), "elements/step");
    sl_result_metric(&row, "skipped", (double)r->skipped, "steps");
    sl_result_metric(&row, "backoffs", (double)r->backoffs, "");
    sl_result_metric(&row, "growths", (double)r->growths, "");
    sl_result_metric(&row, "final_scale", r->final_scale, "");
    sl_result_metric(&row, "lost_updates_frac", r->cfg.master ? NAN : run_lost_frac(r, m->nparams), "fraction/step");
    /* memory: what the allocator counted beside the model (mlp_mixed.h) */
    sl_mlp_bytes model = sl_mixed_memory(m, r->cfg.dt, r->cfg.master, B, optim);
    const double want[4] = {(double)model.params, (double)model.grads, (double)model.optim, (double)model.activ};
    static const char *const mem_names[4] = {"mem_params", "mem_grads", "mem_optim", "mem_activ"};
    static const char *const model_names[4] = {"model_params", "model_grads", "model_optim", "model_activ"};
    double states = 0;
    for (int k = 0; k < 4; k++) {
        sl_result_metric(&row, mem_names[k], r->mem[k], "bytes");
        sl_result_metric(&row, model_names[k], want[k], "bytes");
        if (k < 3) states += r->mem[k];
    }
    sl_result_metric(&row, "state_bytes_per_param", states / (double)m->nparams, "bytes");
    sl_result_metric(&row, "samples_per_s", B / r->time.median, "samples/s");
    sl_result_metric(&row, "speed_vs_fp32", ref32->time.median / r->time.median, "ratio");
    if (r->cfg.dt != SL_F32) sl_result_gate(&row, "speed_vs_fp32"); /* fp32 is the ceiling */
    sl_result_metric(&row, "loss_last", r->log[r->steps - 1].loss, ""); /* the curve: precision.curve.tsv */
    snprintf(row.headline, sizeof row.headline, "final_loss");

    if (!ctx->opt.check) {
        sl_result_check(&row, SL_CHECK_SKIPPED, NAN, NULL);
    } else if (r->cfg.dt == SL_F32) {
        sl_weight_diff d = sl_weights_compare(SL_BACKEND_CPU, m->nparams, r->weights, serial);
        if (d.max_abs == 0 && !d.nonfinite)
            sl_result_check(&row, SL_CHECK_PASS, 0, NULL);
        else
            sl_result_check(&row, SL_CHECK_FAIL, d.max_rel,
                            "fp32 weights differ from the serial reference (max %.3g relative, element %zu%s)",
                            d.max_rel, d.worst, r->skipped ? "; steps were skipped" : "");
    } else if (should_track(&r->cfg)) {
        double err = fabs(fl - fl32) / fl32;
        if (err <= LOSS_TOL) sl_result_check(&row, SL_CHECK_PASS, err, NULL);
        else sl_result_check(&row, SL_CHECK_FAIL, err, "final loss %.4g is %.3g from fp32's %.4g (relative; bound %g)",
                             fl, err, fl32, LOSS_TOL);
    } else {
        sl_result_check(&row, SL_CHECK_NOT_ASSERTED, fabs(fl - fl32) / fl32,
                        r->cfg.master ? "fp16 without loss scaling: its failure is the lesson (the scenario asserts it)"
                                      : "no master copy: lost updates are the lesson");
    }
    sl_result_emit(ctx, &row);
}

/* The scenario's parameters ------------------------------------------------------------------- */

/* The parameters the scenario depends on: those that set how small the gradients are and how
 * far fp32 trains in the run, which decide whether fp16 without scaling ends 2x above fp32 —
 * the task (--loss-weight, --seed, --inputs, --outputs, --batch), the model (--layers,
 * --width), the optimizer (--optim, --lr) and the run's length (-n, -w; all steps train) — and
 * the dynamic scaler fp16/dynamic runs with (--init-scale, --growth-factor, --backoff-factor,
 * --growth-interval). At other values the outcome may differ without anything being wrong
 * (-n 20: in 30 steps fp32 has not yet pulled 2x ahead of fp16/none; --loss-weight 1: 0.1% of
 * the gradients underflow and fp16/none trains; --lr 1e-4: fp32 learns less in 300 steps):
 * the scenario is then reported (exit 0), not asserted. Not among them: --scale (no run
 * of the scenario has a static scale), --precision, --loss-scale and --master (they choose the
 * runs; without the scenario's three there is no scenario row), --gemm-n, --curve-every, the
 * backend and the rank count (they do not change what is computed, or not beyond rounding).
 * What the scenario asserts of bf16/none and fp16/dynamic their own rows check under any
 * parameters; what it adds, fp16/none's failure, is the lesson, not a correctness check. */
#define SCENARIO_PARAMS(X, iters, warmup)                                                                      \
    X("--loss-weight", precision_opt.loss_weight, NULL) X("--seed", sl_opt_seed, NULL)                          \
    X("--inputs", opt_inputs, NULL) X("--outputs", opt_outputs, NULL) X("--batch", opt_batch, NULL)             \
    X("--layers", opt_layers, NULL) X("--width", opt_width, NULL) X("--optim", opt_optim, "sgd|adamw")          \
    X("--lr", opt_lr, NULL) X("-n", iters, NULL) X("-w", warmup, NULL)                                          \
    X("--init-scale", precision_opt.init_scale, NULL) X("--growth-factor", precision_opt.growth, NULL)          \
    X("--backoff-factor", precision_opt.backoff, NULL) X("--growth-interval", precision_opt.interval, NULL)
#define SCENARIO_COUNT(o, v, w) +1
enum { NSCENARIO_PARAMS = 0 SCENARIO_PARAMS(SCENARIO_COUNT, 0, 0) };

/* The parameters' values now: as designed (the defaults) before the command line is parsed,
 * this run's after. */
static void scenario_params(scenario_param *p, int designed, long long iters, long long warmup)
{
    int i = 0;
#define SCENARIO_VALUE(o, v, w)                                   \
    p[i].opt = o, p[i].words = w;                                 \
    *(designed ? &p[i].designed : &p[i].now) = (double)(v), i++;
    SCENARIO_PARAMS(SCENARIO_VALUE, iters, warmup)
#undef SCENARIO_VALUE
}

/* The CPU's flags for 16-bit arithmetic, as lscpu names them: what this machine has, printed
 * rather than assumed (the lab sheet points at this line). */
static void note_cpu_flags(const sl_ctx *ctx)
{
    static const char *const flags[] = {"f16c", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16"};
    char has[128] = "", lacks[128] = "";
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        int h = sl_env_cpu_has_flag(flags[i]);
        if (h < 0) {
            sl_note(ctx, "CPU flags for 16-bit arithmetic: /proc/cpuinfo lists no x86 flags here");
            return;
        }
        char *to = h ? has : lacks;
        snprintf(to + strlen(to), sizeof has - strlen(to), " %s", flags[i]);
    }
    sl_note(ctx, "CPU flags for 16-bit arithmetic (/proc/cpuinfo): has%s; lacks%s", has[0] ? has : " none",
            lacks[0] ? lacks : " none");
}

int main(int argc, char **argv)
{
    if (precision_on_layer(argc, argv)) return precision_layer_main(argc, argv); /* the GPT */
    scenario_param scen[NSCENARIO_PARAMS];
    scenario_params(scen, 1, program.default_iters, program.default_warmup);
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);
    scenario_params(scen, 0, ctx.opt.iters, ctx.opt.warmup);
    char why[256];
    int be_ok = sl_k_backend_resolve(ctx.opt.backend, why, sizeof why);
    if (be_ok < 0) SL_FATAL("-B %s: %s", sl_backend_name(ctx.opt.backend), why);
    if (why[0]) sl_note(&ctx, "%s", why);
    const sl_backend be = (sl_backend)be_ok;
    const int B = (int)opt_batch, steps = (int)(ctx.opt.warmup + ctx.opt.iters);
    const int every = precision_curve_every(steps);

    if (be == SL_BACKEND_CPU) note_cpu_flags(&ctx);
    sl_note(&ctx, "range and precision of each type, measured from its bit patterns:");
    range_rows(&ctx);
    if (opt_gemm_n > 0) {
        sl_note(&ctx, "GEMM %lld^3, f32 accumulation; f16: %s; bf16: %s", opt_gemm_n, sl_k_gemm_impl(be, SL_F16),
                sl_k_gemm_impl(be, SL_BF16));
        sl_table_begin(&ctx, gemm_columns, (int)(sizeof gemm_columns / sizeof gemm_columns[0]));
        gemm_rate_rows(&ctx, be, (int)opt_gemm_n);
    }

    sl_mlp m;
    if (sl_mlp_init(&m, be, (int)opt_layers, (int)opt_inputs, (int)opt_width, (int)opt_outputs, SL_ACT_GELU))
        sl_usage_error("--layers/--width/--inputs/--outputs: not a valid MLP shape");
    sl_optim optim = {0};
    optim.kind = opt_optim ? SL_OPTIM_ADAMW : SL_OPTIM_SGD;
    optim.sgd = (sl_sgd){.lr = (float)opt_lr, .momentum = 0.9f};
    optim.adamw = (sl_adamw){.lr = (float)opt_lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    sl_task task;
    sl_task_init(&task, be, (int)opt_inputs, (int)opt_outputs, (uint64_t)sl_opt_seed, B);
    task.loss_weight = (float)precision_opt.loss_weight;
    const precision_options *po = &precision_opt;
    run_setup su = {.static_scale = po->scale, .init_scale = po->init_scale, .growth = po->growth,
                    .backoff = po->backoff, .interval = (long)po->interval, .steps = steps,
                    .warmup = (int)ctx.opt.warmup, .batch = B, .seed = (uint64_t)sl_opt_seed, .optim = &optim};
    sl_note(&ctx, "MLP %lld layers %lld-%lld-%lld (%zu parameters), batch %d, %s lr %g, %d steps (%lld timed), loss weight %g, "
                  "seed %lld; dynamic scaling: init %g, x%g after %lld clean steps, x%g and skip on inf/NaN",
            opt_layers, opt_inputs, opt_width, opt_outputs, m.nparams, B, sl_optim_name(optim.kind), opt_lr, steps,
            ctx.opt.iters, po->loss_weight, sl_opt_seed, po->init_scale, po->growth, po->interval, po->backoff);

    /* The serial reference the fp32 runs must reproduce, outside every timed region. */
    float *serial = NULL;
    if (ctx.opt.check) {
        float *dev = sl_k_malloc(be, SL_MEM_OTHER, m.nparams * sizeof(float));
        sl_train_serial(&m, &task, &optim, B, steps, (uint64_t)sl_opt_seed, dev, NULL);
        serial = sl_k_download(be, dev, m.nparams * sizeof(float));
        sl_k_free(be, dev);
    }

    /* fp32 without scaling first: every row compares with it. */
    enum { MAXRUNS = NPRECISIONS * SL_NSCALES * 2 };
    run_config cfgs[MAXRUNS];
    int n = 0;
    cfgs[n++] = (run_config){SL_F32, SL_SCALE_NONE, 1, NULL};
    for (int p = 0; p < NPRECISIONS; p++)
        for (int s = 0; s < SL_NSCALES; s++)
            for (int k = 0; k < 2; k++) {
                int master = k == 0;
                if (!(po->precisions & (1u << p)) || !(po->scalings & (1u << s)) || !(po->masters & (1u << k))) continue;
                if (p == P_FP32 && (!master || s == SL_SCALE_NONE)) continue; /* fp32 is its own master */
                cfgs[n++] = (run_config){precision_dtype[p], (sl_scale_mode)s, master, NULL};
            }
    sl_table_begin(&ctx, run_columns, (int)(sizeof run_columns / sizeof run_columns[0]));
    run_result *runs = calloc((size_t)n, sizeof *runs);
    if (!runs) SL_FATAL("out of memory");
    char curve_path[PATH_MAX + 64];
    FILE *curve = curve_file_open(&ctx, curve_path, sizeof curve_path);
    for (int i = 0; i < n; i++) {
        /* the fp32 runs are the gate's ceiling: SL_TEST_SLOWDOWN slows the 16-bit ones only */
        if (cfgs[i].dt == SL_F32) sl_slowdown_ceiling(1);
        run_train(&m, &task, &cfgs[i], &su, &runs[i]);
        if (cfgs[i].dt == SL_F32) sl_slowdown_ceiling(0);
        run_row(&ctx, &m, &optim, &runs[i], &runs[0], serial, B, every);
        curve_file_write(curve, curve_path, &runs[i], every);
    }
    curve_file_close(curve, curve_path);
    curve_print(&ctx, runs, n, every);
    scenario_row(&ctx, runs, n, scen, NSCENARIO_PARAMS, opt_scenario == 0);

    for (int i = 0; i < n; i++) run_free(&runs[i]);
    free(runs);
    free(serial);
    sl_task_free(&task);
    return sl_finalize(&ctx);
}
