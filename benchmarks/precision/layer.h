/* layer.h — precision on the training layer (sl_train.h): the GPT (--model gpt) trained in
 * fp32, fp16 and bf16 with each loss scaler and master choice, data-parallel over the ranks,
 * through the layer's model pieces, by its one driver. */
#ifndef PRECISION_LAYER_H
#define PRECISION_LAYER_H

/* Whether the command line asks for a model that trains on the training layer (--model gpt or
 * --preset, without --analytic, which the MLP program answers). Read before any parsing. */
int precision_on_layer(int argc, char **argv);
/* sl_train_main with the precision technique: main's status. */
int precision_layer_main(int argc, char **argv);

#endif
