/* mixed_layers.h — ddp -d f16|bf16, bucketed and accum: the 16-bit replica's forward and
 * backward a layer at a time, so that a bucket's all-reduce can start as soon as its layers'
 * gradients exist, over micro-batches whose gradients are summed in f32. See mixed_layers.c. */
#ifndef DDP_MIXED_LAYERS_H
#define DDP_MIXED_LAYERS_H

#include "mixed.h"

/* An f32 workspace for one layer's gradient (the largest layer's size), where a micro-batch
 * after the first puts its gradient before it is added to the sum. Category other. */
float *ddp_mixed_layer_workspace(sl_train *t);
/* This rank's samples of the step in `micro` micro-batches of at most d->mx.batch rows: forward,
 * loss * scale, backward a layer at a time, the weight gradients summed in f32 over the
 * micro-batches (the first into mx.g32, the others through gw32, NULL when micro is 1) and
 * rounded once into the 16-bit mx.g16 after the last. On the last micro-batch h->after(t, l, b)
 * runs after layer l's forward (b = 0) and backward (b = 1), when its 16-bit gradient is final. */
void ddp_mixed_backward(sl_train *t, ddp_mixed *d, int micro, float *gw32, const sl_layer_hooks *h);

#endif
