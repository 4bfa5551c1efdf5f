/* mixed.h — ddp -d f16|bf16: one data-parallel replica trained in mixed precision (16-bit
 * compute and gradients, f32 master weights, loss scaling for f16) whose 16-bit gradients are
 * all-reduced. See mixed.c. */
#ifndef DDP_MIXED_H
#define DDP_MIXED_H

#include "mlp_mixed.h"
#include "sl_train.h"

typedef struct ddp_mixed {
    sl_mixed mx;          /* 16-bit weights, gradients and activations; f32 master, optimizer */
    sl_loss_scaler sc;    /* sl_train_scaler(dtype): dynamic for f16, none for bf16 */
    float *x, *y;         /* this rank's samples of the step (f32, as the task makes them) */
    int applied;          /* optimizer steps taken (AdamW's count: a skipped step is not one) */
    long overflow_steps;  /* steps on which THIS rank saw inf/NaN itself (before the OR) */
} ddp_mixed;

/* Activations for the largest of `micro` micro-batches of the rank's samples (sync: 1). */
void ddp_mixed_setup(sl_train *t, ddp_mixed *d, int micro);
void ddp_mixed_free(sl_train *t, ddp_mixed *d);
/* One step: forward/backward in 16 bits on the rank's slice, all-reduce of the 16-bit
 * gradients, unscale, the overflow flag OR-ed over the ranks, the optimizer step (or skip). */
void ddp_mixed_step(sl_train *t, ddp_mixed *d);
/* What the replica holds by category (sl_mixed_memory). */
sl_mlp_bytes ddp_mixed_memory(const sl_train *t, const ddp_mixed *d);
/* The scaler's record: mode, skipped steps, final scale. */
void ddp_mixed_row(sl_train *t, ddp_mixed *d, sl_result *res);

#endif
