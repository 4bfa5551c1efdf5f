/* options.h — the options precision takes whatever it trains (the MLP on sl_mixed, the GPT on the
 * training layer): which precisions, loss scalers and master choices run, the scalers' settings,
 * the loss weight and the curve's sampling; one group, checked once. */
#ifndef PRECISION_OPTIONS_H
#define PRECISION_OPTIONS_H

#include "scalelab.h"

#define PRECISIONS(X) X(P_FP32, "fp32") X(P_FP16, "fp16") X(P_BF16, "bf16")
SL_ENUM(precision_id, PRECISIONS, NPRECISIONS);
extern const sl_dtype precision_dtype[NPRECISIONS];

typedef struct precision_options {
    unsigned precisions, scalings, masters; /* bit per precision_id, sl_scale_mode, master (0 fp32, 1 none) */
    double scale, init_scale, growth, backoff;
    long long interval;
    double loss_weight;
    long long curve_every;
} precision_options;
extern precision_options precision_opt;
extern const sl_opt_group precision_option_group;

/* The group's checks (sl_usage_error on a bad value). */
void precision_options_validate(void);
/* The run's curve sampling: --curve-every, or a tenth of the steps (at least 1). */
int precision_curve_every(int steps);

#endif
