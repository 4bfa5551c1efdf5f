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
 * What runs (precision/layer.c, a technique of the training layer, sl_train.h): the layers' GEMMs
 * take 16-bit operands and accumulate in f32 (cuBLAS tensor cores on cuda; on the cpu OpenBLAS's
 * bf16 GEMM or the operands widened to f32), activations and gradients are stored in the 16-bit
 * type, the loss and the optimizer are f32. One rank trains the whole batch; several train it
 * data-parallel (--batch is the global batch: the rank count does not change what is computed
 * beyond rounding).
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
 * The checks (under any parameters): fp32 (with any power-of-two loss scale) reproduces serial
 * f32 training bit for bit on one rank (within the layer's tolerance on several); every 16-bit
 * run's weights equal serial training in its precision with its scaler and master choice (within
 * the layer's mixed-precision tolerances); the 16-bit runs that should train (bf16, or fp16 with a
 * loss scaler, with master weights) end within LOSS_TOL of the fp32 run's loss (the bound and
 * why: precision/run.h); the runs whose failure is the lesson (fp16 without scaling, no master
 * copy) are not asserted to train, and the scenario asserts what it teaches.
 *
 * The loss curves (every --curve-every steps) go to precision.curve.tsv and the terminal
 * (precision/curve.h), not into the rows.
 *
 * --model gpt trains the GPT on the same technique (precision/layer.c) instead of the MLP; this
 * file holds the MLP program's own parts: the range and GEMM tables before the runs, and the
 * scenario after them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "precision/curve.h"
#include "precision/gemm_rate.h"
#include "precision/layer.h"
#include "precision/options.h"
#include "precision/range.h"
#include "precision/run.h"
#include "precision/scenario.h"
#include "scalelab.h"
#include "sl_train.h"

enum { DEFAULT_ITERS = 290, DEFAULT_WARMUP = 10 };
static long long opt_gemm_n = 256;
static int opt_scenario = 0; /* underflow */

static const sl_opt precision_opts[] = {
    {"gemm-n", 0, SL_OPT_INT, &opt_gemm_n, 0, 1 << 14, NULL, 0, "GEMM throughput table at n x n x n (default 256; 0: none)"},
    {"scenario", 0, SL_OPT_CHOICE, &opt_scenario, 0, 0, "underflow|off", 0,
     "underflow: assert the scenario's outcome (fp16 without scaling fails, bf16 and fp16 with dynamic scaling "
     "track fp32) under the parameters it was designed for, report it under others; off: report only (default underflow)"},
    {0},
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
    X("--loss-weight", precision_opt.loss_weight, NULL) X("--seed", sl_train_opt.seed, NULL)                          \
    X("--inputs", o->inputs, NULL) X("--outputs", o->outputs, NULL) X("--batch", o->batch, NULL)             \
    X("--layers", o->layers, NULL) X("--width", o->width, NULL) X("--optim", o->optim, "sgd|adamw")          \
    X("--lr", o->lr, NULL) X("-n", iters, NULL) X("-w", warmup, NULL)                                          \
    X("--init-scale", precision_opt.init_scale, NULL) X("--growth-factor", precision_opt.growth, NULL)          \
    X("--backoff-factor", precision_opt.backoff, NULL) X("--growth-interval", precision_opt.interval, NULL)
#define SCENARIO_COUNT(o, v, w) +1
enum { NSCENARIO_PARAMS = 0 SCENARIO_PARAMS(SCENARIO_COUNT, 0, 0) };

/* The parameters' values now: as designed (the defaults) before the command line is parsed,
 * this run's after. */
static void scenario_params(scenario_param *p, int designed, long long iters, long long warmup)
{
    const sl_train_options *o = &sl_train_opt;
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

static scenario_param scen[NSCENARIO_PARAMS];

static void validate(sl_ctx *ctx) { scenario_params(scen, 0, ctx->opt.iters, ctx->opt.warmup); }

/* Before the runs: what this machine has for 16-bit arithmetic, each type's range, the GEMMs. */
static void before(sl_ctx *ctx, const sl_mlp *m)
{
    const precision_options *po = &precision_opt;
    if (m->be == SL_BACKEND_CPU) note_cpu_flags(ctx);
    sl_note(ctx, "loss weight %g, seed %lld; dynamic scaling: init %g, x%g after %lld clean steps, x%g and skip on "
                 "inf/NaN; %lld steps (%lld timed)",
            po->loss_weight, sl_train_opt.seed, po->init_scale, po->growth, po->interval, po->backoff,
            ctx->opt.warmup + ctx->opt.iters, ctx->opt.iters);
    sl_note(ctx, "range and precision of each type, measured from its bit patterns:");
    range_rows(ctx);
    if (opt_gemm_n > 0) {
        sl_note(ctx, "GEMM %lld^3, f32 accumulation; f16: %s; bf16: %s", opt_gemm_n, sl_k_gemm_impl(m->be, SL_F16),
                sl_k_gemm_impl(m->be, SL_BF16));
        sl_table_begin(ctx, gemm_columns, (int)(sizeof gemm_columns / sizeof gemm_columns[0]));
        gemm_rate_rows(ctx, m->be, (int)opt_gemm_n);
    }
}

/* After them: the loss curves and the scenario, from every run. */
static void after(sl_ctx *ctx, const run_result *runs, int n)
{
    if (n == 0) return;
    curve_print(ctx, runs, n, precision_curve_every(runs[0].steps));
    scenario_row(ctx, runs, n, scen, NSCENARIO_PARAMS, opt_scenario == 0);
}

int main(int argc, char **argv)
{
    if (precision_trains_gpt(argc, argv)) return precision_layer_main(argc, argv, NULL);
    /* the MLP's defaults: the scenario's (a small model, AdamW at 0.001 without weight decay,
     * which would step weights whose gradients all underflowed, the global batch fixed) */
    sl_train_options *o = &sl_train_opt;
    o->layers = 3, o->width = 64, o->inputs = 32, o->outputs = 8, o->batch = 64;
    o->optim = 1, o->lr = 1e-3, o->weight_decay = 0, o->seed = 42, o->scaling = 1;
    scenario_params(scen, 1, DEFAULT_ITERS, DEFAULT_WARMUP);
    static const precision_mlp mlp = {.extra = precision_opts, .default_iters = DEFAULT_ITERS,
                                      .default_warmup = DEFAULT_WARMUP, .validate = validate,
                                      .before = before, .after = after};
    return precision_layer_main(argc, argv, &mlp);
}
