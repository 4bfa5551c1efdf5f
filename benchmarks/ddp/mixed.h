/* mixed.h — ddp -d f16|bf16: one data-parallel replica trained in mixed precision (16-bit
 * compute and gradients, f32 master weights, loss scaling for f16) whose 16-bit gradients are
 * all-reduced. See mixed.c. */
#ifndef DDP_MIXED_H
#define DDP_MIXED_H

#include "mlp_mixed.h"
#include "sl_train.h"

typedef struct ddp_mixed {
    sl_mixed mx;          /* 16-bit weights, gradients and activations; f32 master, optimizer */
    sl_train_mixed_state ms; /* the loss scaler (dynamic for f16, none for bf16), steps applied */
    float *x, *y;         /* this rank's samples of the step (f32, as the task makes them) */
} ddp_mixed;

/* Activations for the largest of `micro` micro-batches of the rank's samples (sync: 1). */
void ddp_mixed_setup(sl_train *t, ddp_mixed *d, int micro);
void ddp_mixed_free(sl_train *t, ddp_mixed *d);
/* One step: forward/backward in 16 bits on the rank's slice, all-reduce of the 16-bit
 * gradients, unscale, the overflow flag OR-ed over the ranks, the optimizer step (or skip). */
void ddp_mixed_step(sl_train *t, ddp_mixed *d);
/* After the 16-bit gradient's all-reduce: unscale into f32, OR the overflow flag over the ranks,
 * and the one loss-scale decision of the step: the optimizer on the f32 master, or a skip. */
void ddp_mixed_update(sl_train *t, ddp_mixed *d);
/* What the replica holds by category (sl_mixed_memory). */
sl_mlp_bytes ddp_mixed_memory(const sl_train *t, const ddp_mixed *d);
/* The scaler's record: mode, skipped steps, final scale. */
void ddp_mixed_row(sl_train *t, ddp_mixed *d, sl_result *res);

#endif
