/* run.c — one training run of precision.c (see run.h): the step of mixed-precision
 * training with a loss scaler, as PyTorch writes it with autocast and GradScaler:
 *
 *   loss = model(x) vs y            (layers in the 16-bit type, loss in f32)
 *   backward(loss * scale)          (gradients in the 16-bit type: where they underflow)
 *   g = g16 / scale in f32          (any inf/NaN?)
 *   if the scaler agrees: optimizer step on the f32 master weights, cast back to 16 bits
 *   scaler.update()                 (dynamic: back off on inf/NaN, grow after a clean run)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "sl_error.h"
#include "sl_mem.h"
#include "sl_slowdown.h"
#include "sl_timer.h"
#include "train_ref.h"

void run_name(const run_config *c, char *buf, size_t len)
{
    const char *p = c->dt == SL_F16 ? "fp16" : c->dt == SL_BF16 ? "bf16" : "fp32";
    snprintf(buf, len, "%s%s%s/%s%s", c->model ? c->model : "", c->model ? "/" : "", p, sl_scale_mode_name(c->mode),
             c->master ? "" : "/no-master");
}

void run_train(const sl_mlp *m, sl_task *task, const run_config *cfg, const run_setup *su,
               run_result *r)
{
    const sl_backend be = m->be;
    const int B = su->batch, in = m->dims[0], out = m->dims[m->nlayers];
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->steps = su->steps;
    r->log = calloc((size_t)su->steps, sizeof *r->log);
    double *times = malloc((size_t)su->steps * sizeof *times);
    if (!r->log || !times) SL_FATAL("out of memory for %d steps' logs", su->steps);

    static const sl_mem_cat cats[4] = {SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV};
    const sl_mem_space space = be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    for (int k = 0; k < 4; k++) r->mem[k] = -(double)sl_mem_current(space, cats[k]);
    sl_mixed mx;
    sl_mixed_init(&mx, m, cfg->dt, cfg->master, B, su->seed, su->optim);
    for (int k = 0; k < 4; k++) r->mem[k] += (double)sl_mem_current(space, cats[k]);
    sl_loss_scaler sc;
    double scale0 = cfg->mode == SL_SCALE_STATIC ? su->static_scale : su->init_scale;
    sl_loss_scaler_init(&sc, cfg->mode, scale0, su->growth, su->backoff, su->interval);
    float *x = sl_k_malloc(be, SL_MEM_DATA, (size_t)B * in * sizeof(float));
    float *y = sl_k_malloc(be, SL_MEM_DATA, (size_t)B * out * sizeof(float));
    int applied = 0; /* optimizer steps taken: AdamW's step count (a skipped step is not one) */

    for (int s = 0; s < su->steps; s++) {
        sl_task_batch(task, (uint64_t)s * (uint64_t)B, B, x, y);
        sl_k_sync(be);
        step_log *lg = &r->log[s];
        lg->scale = sc.scale;
        double t0 = sl_now();
        lg->loss = sl_mixed_forward_backward(&mx, x, y, sl_task_loss_norm(task, B), (float)sc.scale);
        size_t bad = sl_mixed_unscale(&mx, (float)sc.scale);
        if (sl_loss_scaler_update(&sc, bad > 0)) {
            sl_optim o = sl_optim_for_step(su->optim, applied++);
            sl_mixed_apply(&mx, &o);
        } else {
            lg->skipped = 1;
        }
        sl_k_sync(be);
        sl_slowdown_pad(t0); /* SL_TEST_SLOWDOWN (precision.c leaves the fp32 runs alone) */
        times[s] = sl_now() - t0;
        lg->cnt = mx.cnt;
    }
    sl_stats_compute(times + su->warmup, su->steps - su->warmup, &r->time);
    r->skipped = sc.skipped;
    r->growths = sc.growths;
    r->backoffs = sc.backoffs;
    r->final_scale = sc.scale;
    r->weights = sl_k_download(be, sl_mixed_weights(&mx), m->nparams * sizeof(float));
    free(times);
    sl_k_free(be, x);
    sl_k_free(be, y);
    sl_mixed_free(&mx);
}

void run_free(run_result *r)
{
    free(r->log);
    free(r->weights);
    memset(r, 0, sizeof *r);
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
