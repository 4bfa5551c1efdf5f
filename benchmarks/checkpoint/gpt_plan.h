/* gpt_plan.h — the analytic costs of a checkpoint plan on the GPT (kernels/gpt_model.h: layer 0
 * the embedding, layers 1..L the blocks, layer L + 1 the final norm and LM head), as
 * gpt_pass.c runs it; plan.h has the MLP's. Nothing here runs the model.
 *
 * What is counted (bytes; rows = the rank's sequences, dt the run's element type):
 *   I_j   segment j's input, its checkpoint: the tokens (j = 0) or the residual stream, one
 *         piece of sl_gpt_range_bytes(..., SL_GPT_KEEP_INPUT) (64-byte aligned)
 *   B_j   everything else segment j's layers keep for their backward, one block: the residual
 *         stream into each layer above the first, a block's tensors and layer-norm moments,
 *         the head's final-norm output, moments and weight gradient (V x C f32, which its
 *         forward computes with the loss); without the blocks' attention core when selective
 *   G_l   the gradient dL/d(input of layer l) flowing backward (G_0 = 0: never computed); G_N
 *         (N = L + 2) is dL/d(final norm output), which the head's forward leaves
 *   K     selective: one block's attention core (att B·NH·T·T and atty B·T·C), taken while
 *         the block runs forward or backward and given back after
 * Workspaces (the kernels', the backward's internal gradients), parameters, gradients of the
 * weights, optimizer state and the targets are not activations and are not counted. */
#ifndef CHECKPOINT_GPT_PLAN_H
#define CHECKPOINT_GPT_PLAN_H

#include "gpt_model.h"
#include "plan.h"

/* The peak of live activation bytes under plan p, the largest of these moments for each
 * segment j = [a, b) with C_j = I_0 + ... + I_j (the checkpoints then live) and K_l = K for a
 * block when selective, else 0:
 *   forward of j:       C_j + B_j + (I_{j+1}, or G_N for the last) + max K_l over its layers
 *   recompute of j:     C_j + G_b (dy, held) + B_j + max K_l      (every segment but the last)
 *   backward, layer l:  C_j + B_j + G_{l+1} + G_l + K_l           (dy and dx)
 * The last segment is kept from its forward to its backward, the others recomputed. */
double ck_gpt_model_peak(const ck_plan *p, const sl_mlp *m, sl_dtype dt, int rows, int selective);

/* Forward FLOPs recomputed (sl_gpt_layer_flops' count: GEMMs and attention products, the
 * embedding none): every layer of every segment but the last, less the top layer's last linear
 * (sl_gpt_flops_out: its output is the next checkpoint, not needed again); selective: every
 * block's attention core once more (sl_gpt_flops_core), in its backward. */
double ck_gpt_recompute_flops(const ck_plan *p, const sl_mlp *m, int rows, int selective);

/* The costs for ck_plan_search at (m, dt, rows), not selective: ctx must outlive c. */
typedef struct ck_gpt_ctx {
    const sl_mlp *m;
    sl_dtype dt;
    int rows;
} ck_gpt_ctx;
void ck_gpt_costs(ck_costs *c, const ck_gpt_ctx *ctx);

#endif
