/* tp.h — what megatron_mlp.c (the technique) and check.c (its checks, below it) share: the
 * variants, the state of one rank of a tensor-parallel group, and the technique's entry points
 * that the checks run it through (mm_ops: their serial model is the technique at t = 1). */
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
    sl_dtype dt;             /* the run's: of w, g and every activation and work buffer below */
    float *params, *grads, *optim; /* f32: the slices (f16/bf16: their master copy), their gradients
                                      (unscaled), optimizer state */
    void *w, *g;             /* the slices the blocks use and the gradients they produce, in dt
                                (f32: params and grads themselves) */
    void **x, **u, **y;      /* x[0..L] [nloc, h]; u[i], y[i] [n, c] */
    float *target;           /* [nloc, h] */
    void *zfull, *dxpart;    /* [n, h]: partial Z / gathered X or dZ; partial dX (seqpar) */
    void *dg[2], *dy;        /* [nloc, h] gradient between blocks; [n, c] */
    float *w0, *w1, *bias32; /* f16/bf16: f32 values of 16-bit operands, [n, max(h, c)] and
                                [max(h, c)]; NULL in f32 */
    sl_train_mixed_state ms; /* f16/bf16: the loss scaler */
    int spoil;               /* SL_TEST_CORRUPT=1 in f32 (the tests of the check): the blocks leave
                                the column-parallel bias gradients da_r zero, a defect of the
                                blocks that the serial model, the same code, shares */
    double sent_tp, sent_dp; /* bytes sent in the steps */
    /* the collectives of the steps, by the name of their span (the trace's): how many, whether
     * in the group (else between replicas), whether overlapped with compute */
    int counting, ncolls;
    const char *coll_name[MM_MAX_COLLS];
    long coll_count[MM_MAX_COLLS];
    unsigned char coll_group[MM_MAX_COLLS], coll_overlapped[MM_MAX_COLLS];
    int check_step;          /* the step check ran: its findings below are set */
    /* the check's findings */
    double out_err, dx_err, grad_err, colpar_diff, vs_plain, f32_ref_err;
    char grad_worst[48];
} mm;

/* The technique's callbacks (megatron_mlp.c), for the checks to run it on a private sl_train. */
typedef struct mm_ops {
    void (*setup)(sl_train *t);
    void (*step)(sl_train *t);
    void (*release)(sl_train *t);
    /* One forward and backward at the current weights on this rank's tokens of step t->step, at
     * the loss scaler's scale: the output and dL/dx[0] unscaled in f32 ([nloc, h], backend
     * memory the caller frees), the unscaled gradient slices (summed over replicas) in
     * s->grads. Collective over the technique's ranks. */
    void (*pass)(sl_train *t, float **out, float **dx);
} mm_ops;

/* The slices `local` (backend memory) of replica 0's group, placed into full (host, rank 0).
 * Collective. */
void mm_gather_slices(sl_train *t, const float *local, float *full);
/* sl_technique.check: one step at the trained weights against the serial model and the
 * independent f32 reference (check.c). */
int mm_check_step(sl_train *t, const mm_ops *ops, double *error, char *why, size_t len);
/* sl_technique.reference: serial training of the whole model on the global batch in t->dtype
 * (the technique at t = 1; rank 0 alone). */
void mm_reference(sl_train *t, const mm_ops *ops, float *params, double *losses);
/* The last step's loss of the serial training mm_reference ran for t's batch and steps in dt
 * (rank 0; NAN where it has not run). */
double mm_reference_loss(const sl_train *t, sl_dtype dt);

#endif
