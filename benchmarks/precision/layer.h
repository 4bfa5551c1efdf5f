/* layer.h — precision on the training layer (sl_train.h): the MLP, or the GPT (--model gpt),
 * trained in fp32, fp16 and bf16 with each loss scaler and master choice, data-parallel over the
 * ranks, through the layer's model pieces, by its one driver. */
#ifndef PRECISION_LAYER_H
#define PRECISION_LAYER_H

#include "run.h"
#include "sl_train.h"

/* The MLP's program around the layer's runs (precision.c): its own options, its checks after
 * the shared ones, its tables before the training table, and what reads every run after it (the
 * runs in the order they ran, fp32/none first, their logs summed over the ranks). */
typedef struct precision_mlp {
    const sl_opt *extra;
    int default_iters, default_warmup;
    void (*validate)(sl_ctx *ctx);
    void (*before)(sl_ctx *ctx, const sl_mlp *m);
    void (*after)(sl_ctx *ctx, const run_result *runs, int n);
} precision_mlp;

/* Whether the command line asks for the GPT (--model gpt, or --preset). Read before any parsing. */
int precision_trains_gpt(int argc, char **argv);
/* sl_train_main with the precision technique for the MLP (m: its program) or the GPT (m NULL):
 * main's status. */
int precision_layer_main(int argc, char **argv, const precision_mlp *m);

#endif
