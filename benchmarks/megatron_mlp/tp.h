/* tp.h — what megatron_mlp.c (the technique) and check.c (its checks) share: the variants and
 * the state of one rank of a tensor-parallel group. */
#ifndef MEGATRON_TP_H
#define MEGATRON_TP_H

#include "sl_train.h"

#define MM_VARIANTS(X) X(V_PLAIN, "plain") X(V_OVERLAP, "overlap") X(V_SEQPAR, "seqpar")
SL_ENUM(mm_variant, MM_VARIANTS, NVARIANTS);

#define MM_MAX_COLLS 12

typedef struct mm {
    int t, d, tr, rep;       /* degrees, tensor-parallel rank, replica */
    int n, nloc, first;      /* replica's tokens, tokens held between blocks (n or n/t), first token held */
    int h, f, c, L;
    size_t per_block, np;    /* local parameters per block and in all */
    MPI_Comm tp_mpi, dp_mpi;
    sl_comm *tp, *dp;
    float *params, *grads, *optim;
    float **x, **u, **y;     /* x[0..L] [nloc, h]; u[i], y[i] [n, c] */
    float *target;           /* [nloc, h] */
    float *zfull, *dxpart;   /* [n, h]: partial Z / gathered X or dZ; partial dX (seqpar) */
    float *dg[2], *dy;       /* [nloc, h] gradient between blocks; [n, c] */
    double sent_tp, sent_dp; /* bytes sent in the steps */
    /* the collectives of the steps, by the name of their span (the trace's): how many, whether
     * in the group (else between replicas), whether overlapped with compute */
    int counting, ncolls;
    const char *coll_name[MM_MAX_COLLS];
    long coll_count[MM_MAX_COLLS];
    unsigned char coll_group[MM_MAX_COLLS], coll_overlapped[MM_MAX_COLLS];
    struct mm_mixed *mixed;  /* -d f16|bf16 (mixed.h): the 16-bit blocks; params, grads, optim its f32 master,
                                unscaled gradients and state; x, u, y and the f32 buffers unused */
    int check_step;          /* the step check ran: its findings below are set */
    /* the check's findings */
    double out_err, dx_err, grad_err, colpar_diff, vs_plain;
    char grad_worst[48];
} mm;

/* One step's forward, loss and backward on this rank's tokens of step t->step, the gradient
 * summed over the replicas; returns dL/dx[0] (this rank's tokens). */
float *mm_forward_backward(sl_train *t, mm *s);
/* The slices `local` (backend memory) of replica 0's group, placed into full (host, rank 0).
 * Collective. */
void mm_gather_slices(sl_train *t, const float *local, float *full);

/* Spans of a step (megatron_mlp.c): compute, synced; a blocking collective of the group, all of
 * it exposed; the same between replicas; a group's collective that ran under compute from t0
 * to t1. The collectives are counted by name in the driver's steps (mm.coll_*). */
void mm_compute_span(sl_train *t, const char *name, double t0);
void mm_comm_span(sl_train *t, int rc, const char *name, double t0);
void mm_replicas_span(sl_train *t, int rc, const char *name, double t0);
void mm_overlapped_span(sl_train *t, const char *name, double t0, double t1);

/* sl_technique.check: one step at the trained weights against the serial blocks (check.c). */
int mm_check_step(sl_train *t, double *error, char *why, size_t len);
/* sl_technique.reference: serial training of the whole model on the global batch, in t->dtype
 * (f16/bf16: the serial mixed-precision blocks of mixed.h). */
void mm_reference(sl_train *t, float *params, double *losses);
/* The last step's loss of the serial training mm_reference ran for t's batch and steps in dt
 * (rank 0; NAN where it has not run). */
double mm_reference_loss(const sl_train *t, sl_dtype dt);

#endif
