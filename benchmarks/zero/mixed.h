/* mixed.h — zero --precision mixed: ZeRO stages 0-3 with the paper's mixed-precision Adam
 * (fp16 parameters and gradients, fp32 master weights and optimizer state), on the sharding of
 * zero.c. See mixed.c. */
#ifndef ZERO_MIXED_H
#define ZERO_MIXED_H

#include "mlp_mixed.h"
#include "sl_train.h"

/* The partition zero.c computes: layer l's padded block is nd·c[l] elements, rank r owns
 * [r·c[l], (r+1)·c[l]) of it, at soff[l] in its shard (soff[L] = S). */
typedef struct zero_part {
    int stage, nd, r, K;  /* K: optimizer floats per parameter (AdamW 2) */
    const size_t *c, *soff;
} zero_part;

typedef struct zero_mixed {
    zero_part p;
    sl_mixed mx;          /* the layers' activations and workspaces (sl_mixed_init_layers) */
    sl_loss_scaler sc;    /* f16: dynamic, GradScaler's defaults */
    int applied;          /* optimizer steps taken (AdamW's count) */
    void *w16;            /* params: stages 0-2 the replica [Ψ], stage 3 the shard [S] (f16) */
    void *g16;            /* grads: stages 0-1 [Ψ], stages 2-3 the shard [S] (f16) */
    float *opt;           /* optimizer states: f32 master then K floats per element, of [Ψ]
                             (stage 0) or the shard [S] (1-3): 4 + 4K bytes each */
    void *layer16;        /* one padded layer in f16: staging of reduce-scatters and gathers */
    void *gather16;       /* stage 3: the gathered layer the forward or backward uses */
    float *gw32;          /* one layer in f32: its dW before rounding, then unscaled slices */
    float *x, *y;         /* the rank's samples */
    long overflow_steps;  /* steps this rank saw inf/NaN in its own gradient elements */
    double held, mem_comm; /* params + grads + optimizer states; the f16 staging buffers */
} zero_mixed;

void zero_mixed_setup(sl_train *t, zero_mixed *d, zero_part p);
void zero_mixed_free(sl_train *t, zero_mixed *d);
void zero_mixed_step(sl_train *t, zero_mixed *d);
/* Rank 0's full f32 master weights (host memory, m->nparams), gathered. Collective. */
void zero_mixed_gather(sl_train *t, zero_mixed *d, float *full);

#endif
