/* scenario.c — the teaching scenario of precision.c, judged from its runs (see scenario.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"

/* fp16 without scaling fails visibly when its final loss is at least FAIL_RATIO times fp32's
 * (and a measured share of its gradients underflowed). */
#define FAIL_RATIO 2.0

static const run_result *find(const run_result *runs, int n, sl_dtype dt, sl_scale_mode mode, int master)
{
    for (int i = 0; i < n; i++)
        if (runs[i].cfg.dt == dt && runs[i].cfg.mode == mode && runs[i].cfg.master == master) return &runs[i];
    return NULL;
}

/* Word k of "a|b|c" into buf. */
static const char *word(const char *words, int k, char *buf, size_t len)
{
    for (; k > 0 && words; k--) words = strchr(words, '|') ? strchr(words, '|') + 1 : NULL;
    snprintf(buf, len, "%.*s", words ? (int)strcspn(words, "|") : 1, words ? words : "?");
    return buf;
}

static void value(const scenario_param *p, double v, char *buf, size_t len)
{
    if (p->words) word(p->words, (int)v, buf, len);
    else snprintf(buf, len, "%.15g", v); /* 2^-20 as 9.5367431640625e-07, 0.001 as 0.001 */
}

/* "--lr 0.0001 (designed for 0.001), -n 20 (290)" for the parameters that differ; 0 if none. */
static int changed_params(const scenario_param *p, int np, char *buf, size_t len)
{
    int changed = 0;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < np && used < len; i++) {
        if (p[i].now == p[i].designed) continue;
        char now[32], designed[32];
        value(&p[i], p[i].now, now, sizeof now);
        value(&p[i], p[i].designed, designed, sizeof designed);
        int k = snprintf(buf + used, len - used, "%s%s %s (%s%s)", changed ? ", " : "", p[i].opt, now,
                         changed ? "" : "designed for ", designed);
        used += k > 0 ? (size_t)k : 0;
        changed++;
    }
    return changed;
}

void scenario_row(sl_ctx *ctx, const run_result *runs, int n, const scenario_param *p, int np, int assert_it)
{
    const run_result *f32 = &runs[0], *f16 = find(runs, n, SL_F16, SL_SCALE_NONE, 1),
                     *bf = find(runs, n, SL_BF16, SL_SCALE_NONE, 1), *dyn = find(runs, n, SL_F16, SL_SCALE_DYNAMIC, 1);
    if (!f16 || !bf || !dyn) {
        sl_note(ctx, "scenario: needs fp16/none, bf16/none and fp16/dynamic with master weights (run with the defaults)");
        return;
    }
    char changed[512];
    const int nchanged = changed_params(p, np, changed, sizeof changed);
    if (nchanged)
        sl_note(ctx, "scenario: designed for the default parameters; this run changes %s: its outcome is reported, not "
                     "asserted", changed);
    double l32 = run_final_loss(f32);
    double r16 = run_final_loss(f16) / l32, rbf = run_final_loss(bf) / l32, rdyn = run_final_loss(dyn) / l32;
    double uf = run_underflow_frac(f16), zf = run_wgrad_zero_frac(f16);
    int fails = r16 >= FAIL_RATIO && uf > 0, bf_ok = fabs(rbf - 1) <= LOSS_TOL, dyn_ok = fabs(rdyn - 1) <= LOSS_TOL;
    sl_note(ctx, "scenario: fp16 without scaling: %.1f%% of gradient elements underflowed to zero, %.1f%% of weight "
                 "gradients were zero; final loss %.2fx fp32's: %s",
            100 * uf, 100 * zf, r16, fails ? "FAILS TO TRAIN (as taught)" : "below the scenario's 2x failure mark");
    sl_note(ctx, "scenario: bf16 without scaling: %.1f%% underflowed; final loss %.2fx fp32's: %s", 100 * run_underflow_frac(bf),
            rbf, bf_ok ? "trains" : "does not track fp32");
    sl_note(ctx, "scenario: fp16 with dynamic scaling (scale %g at the end, %ld steps skipped): %.2f%% underflowed; "
                 "final loss %.2fx fp32's: %s",
            dyn->final_scale, dyn->skipped, 100 * run_underflow_frac(dyn), rdyn, dyn_ok ? "tracks fp32" : "does not track fp32");
    const int good = fails && bf_ok && dyn_ok;
    if (nchanged || !assert_it) {
        char why[256];
        snprintf(why, sizeof why, "%s%s%s", fails ? "" : "; fp16 without scaling did not end 2x above fp32's loss",
                 bf_ok ? "" : "; bf16 without scaling did not track fp32",
                 dyn_ok ? "" : "; fp16 with dynamic scaling did not track fp32");
        sl_note(ctx, "scenario: %s%s", good ? "its expectation holds under these parameters too"
                                            : "its expectation was not met under these parameters", why);
    }

    sl_result r;
    sl_result_init(ctx, &r, "scenario");
    sl_result_metric(&r, "fp16_none_vs_fp32", r16, "ratio");
    sl_result_metric(&r, "fp16_none_underflow_frac", uf, "fraction");
    sl_result_metric(&r, "fp16_none_wgrad_zero_frac", zf, "fraction");
    sl_result_metric(&r, "bf16_none_vs_fp32", rbf, "ratio");
    sl_result_metric(&r, "fp16_dynamic_vs_fp32", rdyn, "ratio");
    sl_result_metric(&r, "fp16_dynamic_skipped", (double)dyn->skipped, "steps");
    sl_result_metric(&r, "params_changed", nchanged, "");
    snprintf(r.headline, sizeof r.headline, "fp16_none_vs_fp32");
    const char *met = good ? "expectation met" : "expectation not met";
    if (!ctx->opt.check)
        sl_result_check(&r, SL_CHECK_SKIPPED, NAN, NULL);
    else if (!assert_it)
        sl_result_check(&r, SL_CHECK_NOT_ASSERTED, r16, "--scenario off: outcome reported only (%s)", met);
    else if (nchanged)
        sl_result_check(&r, SL_CHECK_NOT_ASSERTED, r16, "reported, not asserted: %s under %s", met, changed);
    else if (good)
        sl_result_check(&r, SL_CHECK_PASS, r16, NULL);
    else
        sl_result_check(&r, SL_CHECK_FAIL, r16, "the scenario's outcome differs from what it teaches (see the notes)");
    sl_result_emit(ctx, &r);
}
