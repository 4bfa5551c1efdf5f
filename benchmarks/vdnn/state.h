/* state.h — what one vdnn run on the training layer holds (vdnn.c), shared with its offloading
 * pass and the pass's memory model (pass.c), and the conv stack's layers (conv.c).
 *
 * A layer of the model (an MLP layer; the GPT's embedding, each block, the head; an operation of
 * the conv stack) keeps two things for its backward: its input ("in": the batch, the tokens, the
 * residual stream, the image) and what its forward leaves beside it ("body": the MLP's
 * pre-activation z, a block's tensors and layer-norm moments, the head's final norm and weight
 * gradient; nothing for a convolution or a ReLU), the two pieces sl_acts_range_bytes counts and
 * sl_acts_map_input places. Both come from the arena; an offloaded layer's go to pinned host
 * memory after its forward and come back for its backward. */
#ifndef VDNN_STATE_H
#define VDNN_STATE_H

#include "sl_train.h"
#include "../halo_conv/model.h"
#include "arena.h"
#include "copier.h"

/* none, all, conv: only the convolutions' inputs (the conv stack) */
enum { VD_NONE, VD_ALL, VD_CONV };
#define VD_MAX_LAYERS (2 * SL_MLP_MAX_LAYERS) /* the conv stack's operations: 2 L - 1 */

/* The conv stack (--model conv, conv.c): halo_conv's model (model.h: 3x3 convolutions C -> C,
 * same padding, ReLU between, reproducing its input) on whole images, each convolution and
 * each ReLU a layer of the pass; its buffers outside the arena, resident. */
typedef struct vd_conv {
    hc_geom g;                   /* g.n: this rank's images */
    sl_conv2d cv;                /* every convolution's shape, its im2col workspace */
    size_t elems;                /* of one activation tensor: n c h w */
    float *target;               /* the images before rounding into t->dtype (f32) */
    float *w32;                  /* the weights as the convolutions read them (f32) */
    float *ws[3], *gw32;         /* 16 bits: f32 workspaces of a tensor, of a layer's dW */
} vd_conv;

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
    int N;                       /* layers of the pass */
    vd_conv *conv;               /* the conv stack, or NULL: the training layer's model */
    sl_replica rep;              /* weights and gradients in t->dtype, f32 twins, optimizer state,
                                    the workspaces: outside the arena, resident */
    size_t resident;             /* bytes setup's replica holds (the allocator's count) */
    size_t device_mem;           /* --device-mem, in the arena's unit */
    arena a;                     /* the activations: --device-mem less the resident bytes */
    copier *cp;
    vd_layer L[VD_MAX_LAYERS];
    void *out, *dout;            /* the MLP's output x[N]; dL/d(output) */
    size_t model[A_NCATS], model_total; /* the arena's peaks by the model (pass.c) */
    size_t moved;                /* bytes each way per step by the model */
    int fits;                    /* resident + model_total <= device_mem on every rank */
    char why[128];               /* ... else the "does not fit" line */
    size_t peak[A_NCATS], peak_total; /* the arena's peaks over the training steps */
    copier_step last;            /* the last training step's copies */
    double *exposed;             /* [nsteps]: each step's seconds waiting for a copy */
} vd;

/* Offloaded under the pass's policy: every layer with all, the convolutions with conv. */
int vd_offloaded(const vd *s, int l);
/* One forward and backward of this rank's samples through the arena, gradients (t->dtype,
 * loss-scaled in 16 bits) into grads; the copies on s->cp. Every buffer is back in the arena
 * or freed after it. */
void vd_pass(sl_train *t, vd *s, const void *params, void *grads);
/* The piece sizes of every layer at s->rows, then the arena's peaks by category and the bytes
 * moved each way under the pass's policy into s->model, s->model_total, s->moved. */
void vd_model(sl_train *t, vd *s);
/* Bytes of the tensor entering layer l (l = N: the output) at s->rows samples. */
size_t vd_io_bytes(const sl_train *t, const vd *s, int l);

/* The conv stack's pieces (conv.c): its buffers above (s->conv, and s->N); the weights the
 * layers read, from params; this rank's images into the target and the input x (t->dtype);
 * layer l forward from x into y; the loss of the output into dL/d(output) (t->dtype,
 * loss-scaled), added to t->loss; layer l backward from dy into dx (NULL for l = 0) and its dW
 * into grads. */
void vd_conv_setup(sl_train *t, vd *s);
/* The resident bytes of the conv stack's run by its model: its buffers and its replica. */
size_t vd_conv_resident(const sl_train *t, const vd *s);
void vd_conv_free(sl_train *t, vd *s);
void vd_conv_widen(sl_train *t, vd *s, const void *params);
void vd_conv_load(sl_train *t, vd *s, void *x);
void vd_conv_forward(sl_train *t, vd *s, int l, const void *x, void *y);
void vd_conv_loss(sl_train *t, vd *s, const void *out, void *dout);
void vd_conv_backward(sl_train *t, vd *s, int l, const void *x, const void *dy, void *dx, void *grads);
/* Layer l of the conv stack as the performance model reads it (perf_model.h). */
void vd_conv_pm(const sl_train *t, const vd *s, sl_pm_sched *sc, int l, int backward);

#endif
