/* run.h — one configuration of the conv stack (policy x prefetch x arena x dtype) as
 * conv_step.c trains it, and the entry points between the step (conv_step.c) and its program
 * (conv.c: options, the loop over configurations, the reference, the probe, the rows). */
#ifndef VDNN_RUN_H
#define VDNN_RUN_H

#include "scalelab.h"
#include "sl_enum.h"
#include "arena.h"
#include "copier.h"
#include "net.h"

#define POLICIES(X) X(P_NONE, "none") X(P_ALL, "all") X(P_CONV, "conv")
SL_ENUM(vdnn_policy, POLICIES, NPOLICIES);

typedef struct vdnn_run {
    net *n;
    sl_backend be;
    int policy, prefetch;
    sl_dtype dt;             /* of the activations t[i] (and their host copies): f32, f16, bf16 */
    size_t capacity;         /* the arena's bytes */
    sl_optim optim;
    size_t act_bytes;        /* every tensor t[i], in dt */
    size_t f32_bytes;        /* a tensor's size in f32: the target, gradients, workspaces */
    arena a;
    copier *cp;
    float *params, *grads, *optim_state, *target, *dbuf[2];
    float *wide;                 /* 16 bits: an f32 workspace an input is widened into; else NULL */
    void *t[NET_MAX_OPS + 1];    /* on the device, or NULL while on the host */
    void *host[NET_MAX_OPS];     /* pinned copies of the offloaded inputs */
    int ticket[NET_MAX_OPS + 1]; /* the fetch op i's backward waits for, or -1 */
    int step, nsteps;
    copier_step *steps;          /* [nsteps] */
    double loss;
} vdnn_run;

/* conv_step.c */
void vdnn_models(const vdnn_run *r, size_t model[A_NCATS], size_t *bytes_each_way);
size_t vdnn_model_total(const vdnn_run *r);
void vdnn_setup(vdnn_run *r);
/* One training step of r (an sl_body_fn). */
void vdnn_step(void *r);
void vdnn_teardown(vdnn_run *r);

#endif
