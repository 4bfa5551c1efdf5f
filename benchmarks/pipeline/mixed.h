/* mixed.h — pipeline -d f16|bf16: one pipeline stage trained in mixed precision (16-bit
 * weights, activations and gradients, f32 master weights and optimizer, f16's dynamic loss
 * scaling), whose boundary activations and gradients travel in the 16-bit type. See mixed.c. */
#ifndef PIPE_MIXED_H
#define PIPE_MIXED_H

#include "mlp_mixed.h"
#include "sl_train.h"

typedef struct pipe_mixed {
    sl_mixed mx;              /* the layer kernels' state: workspaces only; x, z, batch per op */
    sl_train_mixed_state ms;  /* the loss scaler, steps applied and overflows seen */
    size_t nparams;           /* the stage's (all its chunks) */
    void *w16;                /* [nparams] dt: what the layers use, cast from the master */
    void *g16;                /* [nparams] dt: the step's gradients, as the replicas sum them */
    float *gw32;              /* [largest layer block] f32: one layer's dW, db of one micro-batch */
    void *dbuf[2];            /* [rows_max, width_max] dt: dL/dx between a chunk's layers */
} pipe_mixed;

/* 16-bit state of a stage of nparams elements whose f32 master weights (initialised) are
 * master; rows_max x width_max bounds an operation's activations, block_max a layer's
 * parameter block. */
void pipe_mixed_setup(sl_train *t, pipe_mixed *pm, const float *master, size_t nparams, int rows_max,
                      int width_max, size_t block_max);
void pipe_mixed_free(sl_train *t, pipe_mixed *pm);

/* The layers [l0, l1) of a chunk whose parameters start at element off of the stage's, on rows
 * samples. block: the kept activations (16-bit, keep_elems' layout: x[l0] first, already
 * there); out: x[l1], the chunk's output (the boundary buffer). */
void pipe_mixed_forward(pipe_mixed *pm, int l0, int l1, size_t off, int rows, void *block, void *out);
/* The model's last chunk: the loss of out against y (f32) normalised over the global batch,
 * returned unscaled; dL/d(out) times the scale into dout (16-bit). */
double pipe_mixed_loss(sl_train *t, pipe_mixed *pm, int rows, void *out, const float *y, void *dout);
/* Backward of the chunk from dy = dL/d(out) (16-bit, overwritten): each layer's weight
 * gradients (f32) added into grads + its offset, the f32 accumulator of the step's
 * micro-batches; dL/d(x[l0]) into dx0 (16-bit; NULL on the model's first chunk). */
void pipe_mixed_backward(pipe_mixed *pm, int l0, int l1, size_t off, int rows, void *block, void *out,
                         float *grads, void *dy, void *dx0);
/* The end of a step: the accumulated gradients rounded once into 16 bits, summed over the d
 * replicas of the stage (dp, 16-bit, when d > 1), unscaled into grads (f32); the overflow
 * flag OR-ed over every rank; the optimizer on the master and its cast into w16, or a skip.
 * Leaves grads zeroed for the next step. Collective. */
void pipe_mixed_update(sl_train *t, pipe_mixed *pm, sl_comm *dp, int d, float *master, float *grads,
                       float *state);
/* precision, the scaler's record. Collective. */
void pipe_mixed_row(sl_train *t, pipe_mixed *pm, sl_result *res);

#endif
