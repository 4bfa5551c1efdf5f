/* train_options.c — the options every training benchmark shares, written once as an option
 * group (sl_opt_group) that sl_train_main adds to the technique's program, and the checks of
 * them that need the rank count. */
#include <math.h>

#include "train_internal.h"

/* The defaults are those of the ddp lab: a model big enough that a step is mostly GEMM time,
 * small enough for a 2-core machine. A technique may change them before sl_train_main. The
 * learning rate is NAN until sl_train_main sets it: without --lr it depends on the model and the
 * optimizer (sl_optim_default_lr; the parser takes only finite numbers, so NAN means not given). */
sl_train_options sl_train_opt = {
    .layers = 6, .width = 2048, .inputs = 256, .outputs = 64, .batch = 32,
    .scaling = 0, .optim = 0, .lr = NAN, .weight_decay = 0.01, .seed = 1234, .baseline = 1,
};

/* Help texts give no default: --help prints the current value, so a technique's own default
 * shows there. */
static const sl_opt train_opts[] = {
    {"layers", 'L', SL_OPT_INT, &sl_train_opt.layers, 1, SL_MLP_MAX_LAYERS, NULL, 0, "Linear layers"},
    {"width", 0, SL_OPT_INT, &sl_train_opt.width, 1, 1 << 16, NULL, 0, "hidden width"},
    {"inputs", 0, SL_OPT_INT, &sl_train_opt.inputs, 1, 1 << 16, NULL, 0, "input features"},
    {"outputs", 0, SL_OPT_INT, &sl_train_opt.outputs, 1, 1 << 16, NULL, 0, "outputs"},
    {"batch", 0, SL_OPT_INT, &sl_train_opt.batch, 1, 1 << 20, NULL, 0,
     "samples per step: per data rank (weak scaling) or in all (strong)"},
    {"scaling", 0, SL_OPT_CHOICE, &sl_train_opt.scaling, 0, 0, "weak|strong", 0,
     "keep the per-rank (weak) or the global (strong) batch fixed as ranks grow"},
    {"optim", 0, SL_OPT_CHOICE, &sl_train_opt.optim, 0, 0, "sgd|adamw", 0,
     "optimizer (sgd has momentum 0.9; adamw betas 0.9/0.999, weight decay 0.01; default the program's, "
     "adamw with --model gpt)"},
    {"lr", 0, SL_OPT_DOUBLE, &sl_train_opt.lr, 0, 0, NULL, 0,
     "learning rate (default: sgd 0.01; adamw from the MLP's width and depth, at most 0.01, or 0.001 "
     "for the GPT; printed on the model's note line)"},
    {"seed", 0, SL_OPT_INT, &sl_train_opt.seed, 0, 1LL << 62, NULL, 0, "initialisation and data seed"},
    {"baseline", 0, SL_OPT_INT, &sl_train_opt.baseline, 0, 1, NULL, 0,
     "measure the one-rank run for scaling efficiency (1) or not (0)"},
    {"calibration", 0, SL_OPT_STRING, &sl_train_opt.calibration, 0, 0, NULL, 0,
     "results directory of an allreduce run: the step prediction's all-reduce alpha-beta from its rows "
     "(the same algorithm on as many ranks) instead of a sweep at startup"},
    {"predict", 0, SL_OPT_STRING, &train_predict_file, 0, 0, NULL, 0,
     "platform file: run nothing, predict the step on that machine at each of --predict-ranks (one rank; "
     "docs/predict.md)"},
    {"predict-ranks", 0, SL_OPT_INT_LIST, &train_predict_ranks, 1, 1 << 20, NULL, 0,
     "rank counts --predict builds the schedules of (default 8,16,32,64,128,256,512,1024)"},
    {0},
};

const sl_opt_group sl_train_option_group = {"training (-w/-n: untimed and timed steps)", train_opts};
/* The same without the stack's shape (the first four), for a technique with its own model. */
const sl_opt_group sl_train_step_option_group = {"training (-w/-n: untimed and timed steps)", train_opts + 4};
