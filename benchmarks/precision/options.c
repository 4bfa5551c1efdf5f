/* options.c — precision's shared options (options.h). */
#include <math.h>

#include "options.h"

const sl_dtype precision_dtype[NPRECISIONS] = {SL_F32, SL_F16, SL_BF16};

precision_options precision_opt = {
    .precisions = ~0u, .scalings = ~0u, .masters = 1u, /* master: fp32 */
    .scale = 1024, .init_scale = 65536, .growth = 2, .backoff = 0.5, .interval = 2000,
    .loss_weight = 0x1p-20, .curve_every = 0,
};

static const sl_opt opts[] = {
    {"precision", 0, SL_OPT_CHOICE_LIST, &precision_opt.precisions, 0, 0, SL_ENUM_CHOICES(PRECISIONS), 0,
     "precisions to train in (default all; fp32 always runs, as the reference)"},
    {"loss-scale", 0, SL_OPT_CHOICE_LIST, &precision_opt.scalings, 0, 0, "none|static|dynamic", 0,
     "loss scaling modes (default all)"},
    {"master", 0, SL_OPT_CHOICE_LIST, &precision_opt.masters, 0, 0, "fp32|none", 0,
     "fp32: an f32 master copy of the weights (default); none: the optimizer updates the 16-bit weights; all: both"},
    {"scale", 0, SL_OPT_DOUBLE, &precision_opt.scale, 0, 0, NULL, 0, "static loss scale, a power of two (default 1024)"},
    {"init-scale", 0, SL_OPT_DOUBLE, &precision_opt.init_scale, 0, 0, NULL, 0,
     "dynamic: initial scale, a power of two (default 65536, GradScaler's)"},
    {"growth-factor", 0, SL_OPT_DOUBLE, &precision_opt.growth, 0, 0, NULL, 0, "dynamic: growth, a power of two > 1 (default 2)"},
    {"backoff-factor", 0, SL_OPT_DOUBLE, &precision_opt.backoff, 0, 0, NULL, 0,
     "dynamic: backoff on inf/NaN, a power of two < 1 (default 0.5)"},
    {"growth-interval", 0, SL_OPT_INT, &precision_opt.interval, 1, 1LL << 40, NULL, 0,
     "dynamic: clean steps before growth (default 2000)"},
    {"loss-weight", 0, SL_OPT_DOUBLE, &precision_opt.loss_weight, 0, 0, NULL, 0,
     "the loss is this times the MSE (--model gpt: the cross-entropy): small weight, small gradients "
     "(default 2^-20 = 9.5367431640625e-07; --model gpt: 1)"},
    {"curve-every", 0, SL_OPT_INT, &precision_opt.curve_every, 0, 1 << 30, NULL, 0,
     "loss curve point every K steps, and the last, in precision.curve.tsv (default 0: a tenth of the steps)"},
    {0},
};
const sl_opt_group precision_option_group = {"mixed precision", opts};

static int power_of_two(double v)
{
    int e;
    return isfinite(v) && v > 0 && frexp(v, &e) == 0.5;
}

void precision_options_validate(void)
{
    const precision_options *o = &precision_opt;
    if (!power_of_two(o->scale) || o->scale > 0x1p100)
        sl_usage_error("--scale: expected a power of two in (0, 2^100] (so that scaling is exact), got %g", o->scale);
    if (!power_of_two(o->init_scale) || o->init_scale > 0x1p100)
        sl_usage_error("--init-scale: expected a power of two in (0, 2^100], got %g", o->init_scale);
    if (!power_of_two(o->growth) || o->growth <= 1)
        sl_usage_error("--growth-factor: expected a power of two > 1, got %g", o->growth);
    if (!power_of_two(o->backoff) || o->backoff >= 1)
        sl_usage_error("--backoff-factor: expected a power of two < 1, got %g", o->backoff);
    if (!(o->loss_weight > 0) || o->loss_weight > 1e30 || o->loss_weight < 1e-30)
        sl_usage_error("--loss-weight: expected a value in [1e-30, 1e30], got %g", o->loss_weight);
    if (!o->precisions) sl_usage_error("--precision: expected fp32|fp16|bf16|all");
    if (!o->scalings) sl_usage_error("--loss-scale: expected none|static|dynamic|all");
    if (!o->masters) sl_usage_error("--master: expected fp32|none|all");
}

int precision_curve_every(int steps)
{
    return precision_opt.curve_every > 0 ? (int)precision_opt.curve_every : (steps / 10 > 0 ? steps / 10 : 1);
}
