/* mlp_mixed.h — mixed-precision training of the shared MLP (mlp.h): the layers compute in a
 * 16-bit type (f16 or bf16), the optimizer in f32.
 *
 * What is held in which type, as in PyTorch's autocast + GradScaler recipe:
 *   weights the layers use      w16 [nparams]   dt     cast from the master copy each step
 *   master weights              master [nparams] f32   updated by the optimizer (or absent:
 *                                                       then the optimizer updates w16 itself
 *                                                       and rounding may throw updates away)
 *   activations kept for backward x[l], z[l]     dt     inputs and pre-activations
 *   activation gradients        dbuf[2]         dt     dL/dy and dL/dz flowing backward
 *   weight gradients            g16 [nparams]   dt     dW, db of the step
 *   unscaled gradients          g32 [nparams]   f32    what the optimizer reads
 * Every GEMM takes dt operands and accumulates in f32 (sl_k_gemm: cblas_sbgemm or widened on
 * the cpu, cublasGemmEx with tensor cores on cuda); the result is rounded once into dt. The
 * bias add, the activation and the loss compute in f32 on values widened from dt. Each
 * rounding into dt is counted (sl_cast_count): forward activations, activation gradients and
 * weight gradients separately — the counts loss scaling is about.
 *
 * With dt = f32 every cast is a copy and the step is, operation for operation, the serial
 * reference's (train_ref.h: sl_train_serial): the same bits, which the benchmark checks.
 *
 * One step:  sl_mixed_forward_backward (loss * scale) -> sl_mixed_unscale (gradients / scale,
 * counting inf/NaN) -> the loss scaler decides -> sl_mixed_apply (or skip).
 */
#ifndef SL_MLP_MIXED_H
#define SL_MLP_MIXED_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

/* What one step lost to rounding into the 16-bit type (reset by sl_mixed_forward_backward). */
typedef struct sl_mixed_counts {
    sl_cast_count act;       /* forward activations (and the input) */
    sl_cast_count agrad;     /* activation gradients: dL/d(output), dL/dz, dL/dx */
    sl_cast_count wgrad;     /* weight and bias gradients */
    unsigned long long act_n, agrad_n, wgrad_n; /* elements cast in each */
    size_t nonfinite;        /* unscaled gradients that are inf or NaN (sl_mixed_unscale) */
    size_t lost_updates;     /* weight updates rounding threw away (no master copy) */
} sl_mixed_counts;

typedef struct sl_mixed {
    const sl_mlp *m;
    sl_backend be;
    sl_dtype dt;             /* f16, bf16, or f32 (the reference path) */
    int batch;
    void *w16, *g16;         /* [nparams] in dt */
    float *master;           /* [nparams] f32, or NULL without a master copy */
    float *wide;             /* [nparams] f32: without a master copy, the weights being updated */
    float *g32;              /* [nparams] f32: weight gradients before rounding, then unscaled */
    float *state;            /* optimizer state */
    void *x[SL_MLP_MAX_LAYERS + 1], *z[SL_MLP_MAX_LAYERS]; /* activations in dt */
    void *dbuf[2];           /* [batch, max width] in dt */
    float *t0, *t1;          /* [batch, max width] f32 workspaces */
    float *bias32;           /* [max width] f32: a layer's bias widened */
    float *out32, *dout32;   /* [batch, out] f32: the output and dL/d(output) */
    sl_mixed_counts cnt;
} sl_mixed;

/* Allocates everything for `batch` rows and initialises the weights from
 * sl_mlp_init_params(seed), rounded into dt. master: keep an f32 master copy. o: the optimizer
 * (for the size of its state). */
void sl_mixed_init(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int master, int batch,
                   uint64_t seed, const sl_optim *o);
void sl_mixed_free(sl_mixed *mx);

/* Forward on x[batch, in] (f32, backend memory), the loss norm * sum (out - y)^2 against
 * y[batch, out] (norm: sl_task_loss_norm, as sl_train_serial), backward from
 * dL/d(output) * scale. Leaves the scaled weight gradients in g16 and this step's counts in
 * mx->cnt. Returns the (unscaled) loss. */
double sl_mixed_forward_backward(sl_mixed *mx, const float *x, const float *y, float norm,
                                 float scale);
/* The same step a piece at a time, for techniques that place the weights and gradients
 * themselves (ZeRO: gathered layers, gradient buckets). sl_mixed_init_layers allocates only
 * what the layers need (activations, workspaces; w16, g16, g32, master, state stay NULL).
 * sl_mixed_forward_backward is: input(x); layer_forward(l, w16 + w_off[l]) for l = 0..L-1;
 * loss; dy = dout; for l = L-1..0: layer_backward(l, dy, dx(l), w16 + w_off[l],
 * g32 + w_off[l], g16 + w_off[l]), dy = dx(l).
 *   wl    layer l's parameter block in dt (W[out, in] then b[out])
 *   gw32  f32 workspace of the block's size: the GEMM's dW and db before rounding
 *   g16l  the block's gradients in dt (what is communicated) */
void sl_mixed_init_layers(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int batch);
/* The f32 workspaces alone: x, z and dbuf stay NULL for the caller to place (checkpointing takes
 * each activation from its pool when it is produced); sl_mixed_free frees only what is set. */
void sl_mixed_init_work(sl_mixed *mx, const sl_mlp *m, sl_dtype dt, int batch);
void sl_mixed_input(sl_mixed *mx, const float *x);  /* x[batch, in] f32 -> x[0]; resets mx->cnt */
/* With x[l + 1] NULL only z[l] is computed (a recomputed segment's top layer: its output, the
 * next checkpoint, is not needed again). */
void sl_mixed_layer_forward(sl_mixed *mx, int l, const void *wl);
/* The loss of the output against y (f32), returned unscaled; dL/d(output) * scale into
 * sl_mixed_dout(mx) in dt. */
double sl_mixed_loss(sl_mixed *mx, const float *y, float norm, float scale);
void *sl_mixed_dout(sl_mixed *mx);
void *sl_mixed_dx(sl_mixed *mx, int l); /* where layer l's dL/dx goes (NULL for l = 0) */
void sl_mixed_layer_backward(sl_mixed *mx, int l, void *dy, void *dx, const void *wl, float *gw32,
                             void *g16l);

/* g32 = g16 / scale (in f32). Returns how many are inf or NaN (also in mx->cnt.nonfinite). */
size_t sl_mixed_unscale(sl_mixed *mx, float scale);
/* The optimizer step from g32: on the master copy then cast to w16, or (no master) on w16
 * widened, rounded back, counting updates lost (mx->cnt.lost_updates). */
void sl_mixed_apply(sl_mixed *mx, const sl_optim *o);
/* The current weights in f32 (backend memory, nparams): the master copy, or w16 widened. */
const float *sl_mixed_weights(sl_mixed *mx);

/* What sl_mixed_init holds by category (the allocator's params, grads, optim, activ), for the
 * memory beside the measurement:
 *   params  2Ψ 16-bit weights + 4Ψ master (f32: 4Ψ, the weights are the master copy)
 *   grads   2Ψ 16-bit gradients + 4Ψ unscaled f32 ones (f32: 4Ψ)
 *   optim   4KΨ (K optimizer floats per parameter)
 *   activ   batch x (every layer's input and output, pre-activations where an activation
 *           follows, two gradient buffers of the widest layer) in the 16-bit type
 * Without a master copy the f32 update workspace (4Ψ) is counted under "other", as are the f32
 * workspaces of the layers. */
sl_mlp_bytes sl_mixed_memory(const sl_mlp *m, sl_dtype dt, int master, int batch, const sl_optim *o);

#endif
