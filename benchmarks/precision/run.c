/* run.c — the figures of a precision run read from its log of steps (see run.h). */
#include <stdio.h>

#include "run.h"

void run_name(const run_config *c, char *buf, size_t len)
{
    const char *p = c->dt == SL_F16 ? "fp16" : c->dt == SL_BF16 ? "bf16" : "fp32";
    snprintf(buf, len, "%s%s%s/%s%s", c->model ? c->model : "", c->model ? "/" : "", p, sl_scale_mode_name(c->mode),
             c->master ? "" : "/no-master");
}

double run_final_loss(const run_result *r)
{
    int n = r->steps / 10 > 0 ? r->steps / 10 : 1;
    double s = 0;
    for (int i = r->steps - n; i < r->steps; i++) s += r->log[i].loss;
    return s / n;
}

/* Sum over steps of a count, and of the elements it is out of. */
#define SUM_OVER_STEPS(r, expr, total)                                  \
    do {                                                                \
        for (int i_ = 0; i_ < (r)->steps; i_++) {                        \
            const sl_mixed_counts *c = &(r)->log[i_].cnt;               \
            total += (double)(expr);                                    \
        }                                                               \
    } while (0)

static double grad_frac(const run_result *r, int subnormal)
{
    double lost = 0, n = 0;
    SUM_OVER_STEPS(r, subnormal ? c->agrad.subnormal + c->wgrad.subnormal
                                : c->agrad.underflow + c->wgrad.underflow, lost);
    /* out of the nonzero values rounded: a zero made upstream was not lost here */
    SUM_OVER_STEPS(r, c->agrad_n + c->wgrad_n - c->agrad.zero - c->wgrad.zero, n);
    return n > 0 ? lost / n : 0;
}

double run_underflow_frac(const run_result *r) { return grad_frac(r, 0); }
double run_subnormal_frac(const run_result *r) { return grad_frac(r, 1); }

double run_wgrad_zero_frac(const run_result *r)
{
    double z = 0, n = 0;
    SUM_OVER_STEPS(r, c->wgrad.underflow + c->wgrad.zero, z);
    SUM_OVER_STEPS(r, c->wgrad_n, n);
    return n > 0 ? z / n : 0;
}

double run_wgrad_underflow_frac(const run_result *r)
{
    double u = 0, n = 0;
    SUM_OVER_STEPS(r, c->wgrad.underflow, u);
    SUM_OVER_STEPS(r, c->wgrad_n - c->wgrad.zero, n);
    return n > 0 ? u / n : 0;
}

double run_nonfinite_max(const run_result *r)
{
    double mx = 0;
    for (int i = 0; i < r->steps; i++) {
        const double o = (double)r->log[i].cnt.nonfinite;
        mx = o > mx ? o : mx;
    }
    return mx;
}

double run_overflow_mean(const run_result *r)
{
    double o = 0;
    SUM_OVER_STEPS(r, c->agrad.overflow + c->wgrad.overflow, o);
    return o / r->steps;
}

double run_overflow_max(const run_result *r)
{
    double mx = 0;
    for (int i = 0; i < r->steps; i++) {
        const sl_mixed_counts *c = &r->log[i].cnt;
        double o = (double)(c->agrad.overflow + c->wgrad.overflow);
        mx = o > mx ? o : mx;
    }
    return mx;
}

double run_lost_frac(const run_result *r, size_t nparams)
{
    double l = 0;
    SUM_OVER_STEPS(r, c->lost_updates, l);
    return l / ((double)r->steps * (double)nparams);
}
