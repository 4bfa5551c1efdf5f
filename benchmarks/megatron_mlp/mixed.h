/* mixed.h — megatron_mlp -d f16|bf16: the tensor-parallel blocks in Megatron-LM's mixed
 * precision (16-bit weights, activations and gradients; f32 master weights and optimizer; f16's
 * dynamic loss scaling), and the same blocks serially: the reference. See mixed.c. */
#ifndef MEGATRON_MIXED_H
#define MEGATRON_MIXED_H

#include "mlp_mixed.h"
#include "tp.h"

/* L blocks as kernels/mlp_mixed.h's 2L-layer model h -> c -> h -> ... -> h: a rank's slices
 * (c = f/t: slices.h's layout is that model's flat layout), or the whole model (c = f). */
typedef struct mm_mixed_net {
    sl_mlp m;          /* the model of the slices (or the whole model) */
    sl_mixed mx;       /* 16-bit w16, g16, activations; f32 master, g32, optimizer state */
    void *dres;        /* [n, h] in dt: the third gradient buffer the residual needs */
    float *x, *y;      /* [n, h] f32: the tokens and their targets */
    sl_comm *tp;       /* the tensor-parallel group; NULL: the serial blocks */
    /* seqpar (mixed.c's sequence-parallel blocks): the residual stream between blocks as this
     * rank's nloc tokens only; NULL otherwise */
    int nloc;
    void *xs[SL_MLP_MAX_LAYERS / 2 + 1]; /* [nloc, h] in dt: block i's input shard, xs[L] the output */
    void *dgs[2];                        /* [nloc, h] in dt: the gradient shards between blocks */
} mm_mixed_net;

typedef struct mm_mixed {
    mm_mixed_net net;
    sl_train_mixed_state ms; /* the loss scaler (dynamic for f16, none for bf16), steps applied */
} mm_mixed;

/* Replaces setup's f32 state: s->params, s->grads, s->optim become the net's master weights,
 * unscaled gradients and optimizer state (this rank's slices). */
void mm_mixed_setup(sl_train *t, mm *s);
void mm_mixed_free(sl_train *t, mm *s);
/* One training step (16-bit forward/backward in t->variant's tensor-parallel collectives, the
 * replicas' 16-bit all-reduce, unscale, the overflow flag OR-ed over every rank, the optimizer
 * or a skip). */
void mm_mixed_step(sl_train *t, mm *s);
/* The check's step at the trained weights, on step 0's tokens, at the scaler's scale: out
 * ([nloc, h]), the input gradient dL/dx[0] unscaled ([nloc, h]) into f32 buffers it allocates
 * (backend memory, freed by the caller), and the unscaled gradient slices in s->grads. */
void mm_mixed_check_pass(sl_train *t, mm *s, float **out, float **dx);
/* The serial blocks' same step on all B tokens of step 0 at the full weights params (f32,
 * backend memory): output, dL/dx[0] (both [B, h]) and the gradients, unscaled (host memory,
 * allocated here). scale: the run's. */
void mm_mixed_serial_pass(const sl_mlp *m, sl_task *task, sl_dtype dt, int B, const float *params,
                          float scale, float **out, float **dx, float **grads);
/* Serial mixed-precision training of the whole model on the global batch, with the run's
 * scaler: params gets the master weights; returns the last step's loss, *skipped the steps
 * skipped. */
double mm_mixed_serial_train(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt, int B,
                             int steps, uint64_t seed, float *params, long *skipped);
/* What the 16-bit blocks hold by category (sl_mixed_memory of the slices plus dres). */
void mm_mixed_memory(const sl_train *t, const mm *s, double bytes[SL_MEM_NCATS]);
/* The scaler's record. Collective. */
void mm_mixed_row(sl_train *t, mm *s, sl_result *res);

#endif
