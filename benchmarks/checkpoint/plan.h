/* plan.h — checkpoint plans for checkpoint.c: which layers start a segment, and the analytic
 * model of what a plan costs, in activation bytes held at the step's peak and in forward FLOPs
 * recomputed. Nothing here runs the model; checkpoint.c runs a plan and measures it.
 *
 * A plan cuts the N layers into segments [start[j], start[j+1]). The step (checkpoint.c) keeps
 * each segment's input (its checkpoint) through the forward pass and drops everything else,
 * except in the last segment, which it keeps whole, as PyTorch's checkpoint_sequential does;
 * in backward it recomputes each earlier segment from its checkpoint just before back-
 * propagating through it. Store-all is the plan with one segment.
 *
 * What is counted (in elements of es bytes: 4 in f32, 2 in f16/bf16; rows = the rank's samples,
 * d_l = dims[l]):
 *   X_l = rows·d_l      layer l's input x_l (x_0 the model input, x_N the output)
 *   Z_l = rows·d_{l+1}  layer l's pre-activation z_l, kept for the GeLU's backward
 *                       (0 for the output layer, whose z is its output)
 *   G_l = rows·d_l      the gradient dL/dx_l flowing backward (G_0 = 0: never computed)
 * Every one of these is allocated when it is produced and freed when nothing needs it any
 * more; parameters, gradients of the weights, optimizer state and the target are not
 * activations and are not counted.
 */
#ifndef CHECKPOINT_PLAN_H
#define CHECKPOINT_PLAN_H

#include <stddef.h>

#include "mlp.h"

typedef struct ck_plan {
    int nseg;
    int start[SL_MLP_MAX_LAYERS + 1]; /* segment j is layers [start[j], start[j + 1]); start[nseg] = N */
} ck_plan;

/* Segments of k layers from the first layer on; the last one holds what is left (1 to k). */
void ck_plan_every(ck_plan *p, int nlayers, int k);

/* The analytic peak: the most activation bytes the step holds at once under plan p (see
 * plan.c for the moments it takes the maximum over). */
double ck_model_peak(const ck_plan *p, const sl_mlp *m, int rows, size_t es);

/* Forward FLOPs recomputed in backward: every layer outside the last segment, 2·rows·d_l·d_{l+1}
 * each (its GEMM; element-wise work is not counted, as in sl_mlp_flops_forward). */
double ck_model_recompute_flops(const ck_plan *p, const sl_mlp *m, int rows);

/* A model's costs for the budget search: the analytic peak and recomputed FLOPs of a plan, and
 * what layer l keeps for its backward when its segment is stored (Chen et al.'s greedy walk). */
typedef struct ck_costs {
    int nlayers;
    double (*peak)(const ck_plan *p, const void *ctx);
    double (*recompute)(const ck_plan *p, const void *ctx);
    double (*kept)(int l, const void *ctx);
    const void *ctx;
} ck_costs;

/* The plan for an activation budget (bytes): Chen et al.'s greedy segmentation for every
 * segment budget that gives a different plan, and every-k for k = 1..N; of those whose peak
 * fits, the one that recomputes least (plan.c says exactly). Returns 0 with *p, or -1 when
 * none fits, with *p the plan of least peak and *least that peak. ck_plan_for_budget is the
 * search on the MLP's costs above (the GPT's: gpt_plan.h). */
int ck_plan_search(ck_plan *p, const ck_costs *c, double budget, double *least);
int ck_plan_for_budget(ck_plan *p, const sl_mlp *m, int rows, size_t es, double budget, double *least);

/* Layers in the longest segment. */
int ck_plan_longest(const ck_plan *p);

/* The segment lengths, run-length coded: "8x8", "13x4,12", "64". */
void ck_plan_describe(const ck_plan *p, char *buf, size_t len);

#endif
