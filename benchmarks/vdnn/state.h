/* state.h — what one vdnn run on the training layer holds (vdnn.c), shared with its offloading
 * pass and the pass's memory model (pass.c).
 *
 * A layer of the training layer's model (an MLP layer; the GPT's embedding, each block, the head)
 * keeps two things for its backward: its input ("in": the batch, the tokens or the residual
 * stream) and what its forward leaves beside it ("body": the MLP's pre-activation z, a block's
 * tensors and layer-norm moments, the head's final norm and weight gradient), the two pieces
 * sl_acts_range_bytes counts and sl_acts_map_input places. Both come from the arena; an
 * offloaded layer's go to pinned host memory after its forward and come back for its backward. */
#ifndef VDNN_STATE_H
#define VDNN_STATE_H

#include "sl_train.h"
#include "arena.h"
#include "copier.h"

enum { VD_NONE, VD_ALL }; /* the policies of the training layer's models */

typedef struct vd_layer {
    size_t in_bytes, body_bytes; /* as sl_acts_range_bytes counts them */
    void *in, *body;             /* in the arena, or NULL while on the host (or not yet made) */
    void *host_in, *host_body;   /* pinned copies (offloaded layers) */
    int tk_in, tk_body;          /* the copy the compute stream waits for next, or -1 */
    int on;                      /* 1 while in and body are on the device */
} vd_layer;

typedef struct vd {
    int policy, prefetch;        /* of the pass running (the check's none passes change them) */
    int rows;                    /* this rank's samples */
    sl_replica rep;              /* weights and gradients in t->dtype, f32 twins, optimizer state,
                                    the workspaces: outside the arena, resident */
    size_t resident;             /* bytes setup's replica holds (the allocator's count) */
    size_t device_mem;           /* --device-mem, in the arena's unit */
    arena a;                     /* the activations: --device-mem less the resident bytes */
    copier *cp;
    vd_layer L[SL_MLP_MAX_LAYERS];
    void *out, *dout;            /* the MLP's output x[N]; dL/d(output) */
    size_t model[A_NCATS], model_total; /* the arena's peaks by the model (pass.c) */
    size_t moved;                /* bytes each way per step by the model */
    int fits;                    /* resident + model_total <= device_mem on every rank */
    char why[128];               /* ... else the "does not fit" line */
    size_t peak[A_NCATS], peak_total; /* the arena's peaks over the training steps */
    copier_step last;            /* the last training step's copies */
    double *exposed;             /* [nsteps]: each step's seconds waiting for a copy */
} vd;

/* Offloaded under the pass's policy: every layer with policy all. */
int vd_offloaded(const vd *s, int l);
/* One forward and backward of this rank's samples through the arena, gradients (t->dtype,
 * loss-scaled in 16 bits) into grads; the copies on s->cp. Every buffer is back in the arena
 * or freed after it. */
void vd_pass(sl_train *t, vd *s, const void *params, void *grads);
/* The piece sizes of every layer at s->rows, then the arena's peaks by category and the bytes
 * moved each way under the pass's policy into s->model, s->model_total, s->moved. */
void vd_model(sl_train *t, vd *s);

#endif
