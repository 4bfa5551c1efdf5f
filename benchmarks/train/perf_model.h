/* perf_model.h — a training step's predicted time from primitives measured in the same run: the
 * arithmetic of the model, apart from the measuring (train_perf.c), so that a test can check it
 * on hand-computed cases.
 *
 * A technique states its step as a schedule (sl_technique.schedule), in the order its code runs
 * on one rank:
 *   sl_pm_gemm(s, ta, tb, m, n, k, beta, count)  a GEMM as sl_k_gemm takes it, `count` times
 *   sl_pm_bytes(s, bytes)                        element-wise work: bytes read + written
 *   id = sl_pm_start(s, op, count)               a collective or point-to-point exchange of
 *                                                `count` elements of the run's dtype (the count
 *                                                sl_coll_* takes) is started here ...
 *   sl_pm_wait(s, id)                            ... and the compute after this waits for it
 *   sl_pm_comm(s, op, count)                     start + wait: a blocking call
 * Every operation not waited for is waited for at the end of the step.
 *
 * The primitives (sl_pm_prims): the seconds of each GEMM shape (measured per shape and dtype),
 * the element-wise bandwidth, and t = alpha + beta * bytes for each kind of operation (fitted to
 * a sweep on the run's communicator). The prediction runs the schedule on two timelines: compute
 * (GEMMs and element-wise work, one after the other) and communication (operations one after
 * another, in the order started; an operation starts when it is started and the previous one is
 * done). Where operations progress in the background (prims.background), compute runs on while
 * they are in flight and a wait costs only what the operation extends past the compute before
 * it; where they do not (a collective on host buffers advances only inside the calls of the rank
 * that started it, which is busy with its GEMMs), an operation runs in full where it is started.
 *   compute  = sum of the GEMMs' and element-wise seconds
 *   comm     = sum of the operations' alpha + beta * bytes
 *   exposed  = the time the compute timeline waited for communication
 *   step     = compute + exposed
 *
 * How the techniques not stating a schedule yet would, with the same calls: a pipeline stage its
 * micro-batches' GEMMs with SL_PM_P2P exchanges of activations, and its bubble as sl_pm_idle (the
 * (p-1) slots it waits for its peers' compute, seconds the stage's own GEMMs give); checkpointing
 * its recomputed forward GEMMs a second time; Megatron its column- and row-parallel GEMMs with the
 * all-reduces of f and g; vDNN its offload copies as operations of a host<->device kind (one more
 * sl_pm_op, its alpha-beta fitted to copies as the collectives' are to a sweep). */
#ifndef SL_PERF_MODEL_H
#define SL_PERF_MODEL_H

#include <stddef.h>

#include "sl_types.h"

typedef enum {
    SL_PM_ALLREDUCE,       /* sl_coll_allreduce (blocking) */
    SL_PM_IALLREDUCE,      /* sl_coll_iallreduce, waited for */
    SL_PM_IREDUCE_SCATTER, /* sl_coll_ireduce_scatter: count per rank */
    SL_PM_IALLGATHER,      /* sl_coll_iallgather: count per rank */
    SL_PM_P2P,             /* sl_coll_send to a peer, received there */
    SL_PM_NOPS
} sl_pm_op;
/* "allreduce" "iallreduce" "ireduce_scatter" "iallgather" "p2p" */
const char *sl_pm_op_name(sl_pm_op op);

/* A GEMM as sl_k_gemm takes it (operands of dtype dt; beta 1 reads C too). */
typedef struct sl_pm_gemm_shape {
    int ta, tb, m, n, k, beta;
    sl_dtype dt;
} sl_pm_gemm_shape;

enum { SL_PM_MAX_GEMMS = 64, SL_PM_MAX_EVENTS = 4096 };

typedef struct sl_pm_prims {
    int ngemm;
    sl_pm_gemm_shape gemm[SL_PM_MAX_GEMMS];
    double gemm_s[SL_PM_MAX_GEMMS]; /* seconds of one call */
    double bw;                      /* element-wise bytes per second */
    double alpha[SL_PM_NOPS], beta[SL_PM_NOPS]; /* seconds, seconds per byte */
    int background;                 /* operations progress while the rank computes */
} sl_pm_prims;

typedef enum { SL_PM_EV_GEMM, SL_PM_EV_BYTES, SL_PM_EV_START, SL_PM_EV_WAIT, SL_PM_EV_IDLE } sl_pm_ev_kind;
typedef struct sl_pm_event {
    sl_pm_ev_kind kind;
    int shape;          /* GEMM: index in the schedule's shapes */
    sl_pm_op op;        /* START */
    int id;             /* WAIT: the START's event index */
    double amount;      /* GEMM: calls; BYTES: bytes; START: bytes of the operation; IDLE: seconds */
} sl_pm_event;

typedef struct sl_pm_sched {
    sl_dtype dt;        /* the run's: GEMM operands and the operations' elements */
    int nshapes;
    sl_pm_gemm_shape shapes[SL_PM_MAX_GEMMS];
    int nev;
    sl_pm_event ev[SL_PM_MAX_EVENTS];
    int overflow;       /* more events or shapes than fit: the prediction is NAN */
} sl_pm_sched;

void sl_pm_init(sl_pm_sched *s, sl_dtype dt);
void sl_pm_gemm(sl_pm_sched *s, int ta, int tb, int m, int n, int k, int beta, double count);
void sl_pm_bytes(sl_pm_sched *s, double bytes);
/* Seconds this rank waits for another's compute (a pipeline stage's peer). */
void sl_pm_idle(sl_pm_sched *s, double seconds);
int sl_pm_start(sl_pm_sched *s, sl_pm_op op, double count);
void sl_pm_wait(sl_pm_sched *s, int id);
void sl_pm_comm(sl_pm_sched *s, sl_pm_op op, double count);

/* Seconds of one operation of `bytes` by the fit: alpha + beta * bytes (0 for 0 bytes, and
 * where a fit to noise makes it negative). */
double sl_pm_op_seconds(const sl_pm_prims *p, sl_pm_op op, double bytes);
/* The calibrated seconds of a shape, or NAN when prims does not hold it. */
double sl_pm_gemm_seconds(const sl_pm_prims *p, const sl_pm_gemm_shape *g);

typedef struct sl_pm_pred {
    double step, compute, gemm, bytes, comm, exposed, idle;
} sl_pm_pred;
/* The schedule on the primitives (above). NAN throughout when a shape is not calibrated or the
 * schedule overflowed. */
sl_pm_pred sl_pm_predict(const sl_pm_sched *s, const sl_pm_prims *p);
/* The largest term of a prediction: "gemm", "elementwise", "exposed_comm" or "idle". */
const char *sl_pm_dominant(const sl_pm_pred *p);

#endif
