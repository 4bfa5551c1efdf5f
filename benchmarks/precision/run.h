/* run.h — one training run of precision (precision/layer.c runs it on the training layer): the
 * model trained in one precision with one loss scaling mode, with or without an f32 master copy,
 * and everything it lost on the way, step by step, with the figures read from that log. */
#ifndef PRECISION_RUN_H
#define PRECISION_RUN_H

#include "loss_scale.h"
#include "mlp_mixed.h"

typedef struct run_config {
    sl_dtype dt;        /* f32, f16, bf16 */
    sl_scale_mode mode; /* loss scaling */
    int master;         /* an f32 master copy of the weights */
    const char *model;  /* NULL: the MLP; "gpt": its runs' names start "gpt/" (the curve file
                           holds both models' runs when run_all.sh runs the two) */
} run_config;

/* Per step: what the curve and the row report. */
typedef struct step_log {
    double loss, scale; /* the loss and the scale the step ran with */
    int skipped;
    sl_mixed_counts cnt;
} step_log;

typedef struct run_result {
    run_config cfg;
    int steps;
    step_log *log;        /* [steps], summed over the ranks */
    long skipped, growths, backoffs;
    double final_scale;
} run_result;

/* The bound on a 16-bit run that should train (bf16, or fp16 with a loss scaler, with master
 * weights): its final loss within LOSS_TOL of the fp32 run's, relative.
 *
 * Why 0.25 (relative to fp32's final loss, itself the mean over the last tenth of the steps so
 * that one batch does not decide): a 16-bit run follows another trajectory than the fp32 run
 * (every activation and gradient rounded to 2^-11 (fp16) or 2^-8 (bf16) relative), and the
 * difference of the final losses is rounding noise carried through training, not an error that
 * shrinks. In the scenario the runs that train end within 0.1% of fp32 (fp16/static 1.0004x,
 * the others 1.0000x), while the failures the program teaches end far out: fp16 without scaling
 * at 5.1x (gradients flushed to zero), bf16 without a master copy at 1.5x (80% of updates lost
 * each step). 0.25 lies between with room on either side: rounding noise of a few percent on
 * another model passes, a run that stops learning or loses its updates does not. */
#define LOSS_TOL 0.25

/* "fp32/none", "fp16/none", "bf16/dynamic", "fp16/none/no-master" — the MLP row's variant — or
 * "gpt/fp16/none" ... for the GPT's runs (the curve's name; their rows' variant is "none" ...
 * beside their dtype). */
void run_name(const run_config *c, char *buf, size_t len);
/* The final loss: the mean over the last tenth of the steps (at least one), so that one
 * batch's noise does not decide a comparison. */
double run_final_loss(const run_result *r);
/* Fractions over all steps: gradient elements (activation and weight gradients together)
 * that underflowed to zero / became subnormal when rounded into the 16-bit type, of the
 * nonzero gradient values rounded (a zero that arrived from upstream, where an earlier
 * gradient underflowed, is not counted again); weight gradients that are zero in the 16-bit
 * type, of all weight gradients (what the optimizer then gets). */
double run_underflow_frac(const run_result *r);
double run_subnormal_frac(const run_result *r);
double run_wgrad_zero_frac(const run_result *r);
/* What the training layer counts for every model: the weight gradients' nonzero values that
 * underflowed to zero, of the nonzero values rounded; the most unscaled gradient elements that
 * were inf or NaN in one step (an overflow anywhere before them). */
double run_wgrad_underflow_frac(const run_result *r);
double run_nonfinite_max(const run_result *r);
/* Per step (over all steps): gradient elements that overflowed to infinity, mean and max;
 * weight updates lost to rounding (no master copy), as a fraction of the parameters. */
double run_overflow_mean(const run_result *r);
double run_overflow_max(const run_result *r);
double run_lost_frac(const run_result *r, size_t nparams);

#endif
