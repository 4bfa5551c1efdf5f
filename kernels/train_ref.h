/* train_ref.h — the serial reference that distributed training techniques are checked
 * against: one process training the shared MLP on the whole global batch, and the comparison
 * of two weight vectors.
 *
 * Step s of every technique trains on samples [s * B, (s + 1) * B) of the synthetic task
 * (B = global batch) with the loss normalised over the global batch (MSE mean over B * out
 * elements), so that a distributed step whose gradient pieces are summed is, up to the order
 * of floating-point additions, the same step as this one.
 */
#ifndef SL_TRAIN_REF_H
#define SL_TRAIN_REF_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

/* The optimizer for training step s (0-based): AdamW needs its 1-based step count. */
sl_optim sl_optim_for_step(const sl_optim *o, int step);

/* Trains m from sl_mlp_init_params(seed) for `steps` steps at global batch `batch`; params
 * (backend memory, m->nparams floats) receives the final weights and losses[s] (host, may be
 * NULL) the loss of step s. */
void sl_train_serial(const sl_mlp *m, sl_task *task, const sl_optim *o, int batch, int steps,
                     uint64_t seed, float *params, double *losses);

typedef struct sl_weight_diff {
    double max_abs;  /* max |got - want| */
    double max_rel;  /* max_abs / max |want| (a norm-wise relative error) */
    double l2_rel;   /* ||got - want||_2 / ||want||_2 */
    size_t worst;    /* index of the largest difference */
    int nonfinite;   /* got holds NaN or inf */
    int ref_nonfinite; /* want holds NaN or inf: the reference run itself diverged */
} sl_weight_diff;

/* Compares n weights (backend memory). */
sl_weight_diff sl_weights_compare(sl_backend be, size_t n, const float *got, const float *want);

#endif
