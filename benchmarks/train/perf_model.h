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
 * a sweep on the run's communicator, or on a group's: sl_pm_group). The prediction runs the schedule on two timelines: compute
 * (GEMMs and element-wise work, one after the other) and communication (operations one after
 * another, in the order started; an operation starts when it is started and the previous one is
 * done). Where operations progress in the background (prims.background), compute runs on while
 * they are in flight and a wait costs only what the operation extends past the compute before
 * it (host<->device copies have a timeline of their own, a copy engine's, beside the network's,
 * and progress in the background where prims.background_ops says so); where they do not (a collective on host buffers advances only inside the calls of the rank
 * that started it, which is busy with its GEMMs), an operation runs in full where it is started.
 *   compute  = sum of the GEMMs' and element-wise seconds
 *   comm     = sum of the operations' alpha + beta * bytes
 *   exposed  = the time the compute timeline waited for communication
 *   step     = compute + exposed
 *
 * A pipeline states every stage of its replica, each on a lane (sl_pm_lane), its micro-batches'
 * GEMMs with the activations and gradients sent to the neighbouring lanes (sl_pm_send/recv): the
 * bubble is then the time a lane waits in sl_pm_recv, from its peers' predicted compute and the
 * exchanges' alpha-beta, never from a measured step. Checkpointing states its recomputed forward
 * GEMMs a second time; Megatron its column- and row-parallel GEMMs with the all-reduces of f and
 * g (the GPT's layers in tp_gpt_schedule.c, which parallel3d's stages reuse, one lane each); vDNN its offload and prefetch copies as SL_PM_H2D operations (alpha-beta fitted to copies
 * measured in the run). */
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
    SL_PM_H2D,             /* a copy between host and device memory (either way): count bytes
                              (sl_pm_copy), not elements */
    SL_PM_NOPS
} sl_pm_op;
/* "allreduce" "iallreduce" "ireduce_scatter" "iallgather" "p2p" "h2d" */
const char *sl_pm_op_name(sl_pm_op op);

/* A GEMM as sl_k_gemm takes it (operands of dtype dt; beta 1 reads C too). */
typedef struct sl_pm_gemm_shape {
    int ta, tb, m, n, k, beta;
    sl_dtype dt;
} sl_pm_gemm_shape;

enum { SL_PM_MAX_GEMMS = 64, SL_PM_MAX_EVENTS = 1 << 16, SL_PM_MAX_LANES = 64, SL_PM_MAX_GROUPS = 4 };

typedef struct sl_pm_prims {
    int ngemm;
    sl_pm_gemm_shape gemm[SL_PM_MAX_GEMMS];
    double gemm_s[SL_PM_MAX_GEMMS]; /* seconds of one call */
    double bw;                      /* element-wise bytes per second */
    double alpha[SL_PM_NOPS], beta[SL_PM_NOPS]; /* seconds, seconds per byte */
    /* the same for the operations of group g (sl_pm_group; g >= 1), fitted on its communicator */
    double group_alpha[SL_PM_MAX_GROUPS][SL_PM_NOPS], group_beta[SL_PM_MAX_GROUPS][SL_PM_NOPS];
    int background;                 /* operations progress while the rank computes */
    unsigned background_ops;        /* bit per sl_pm_op: these progress while the rank computes
                                       whatever `background` says (SL_PM_H2D: a copy engine) */
} sl_pm_prims;

typedef enum { SL_PM_EV_GEMM, SL_PM_EV_BYTES, SL_PM_EV_START, SL_PM_EV_WAIT, SL_PM_EV_RECV } sl_pm_ev_kind;
typedef struct sl_pm_event {
    sl_pm_ev_kind kind;
    int shape;          /* GEMM: index in the schedule's shapes */
    sl_pm_op op;        /* START */
    int id;             /* WAIT: the START's event index */
    int lane;           /* the timeline it is on (sl_pm_lane; 0 unless the schedule has several) */
    int peer, tag;      /* START by sl_pm_send: the receiving lane (else -1); RECV: the sending lane */
    int group;          /* START: the communicator it runs on (sl_pm_group; 0: the run's) */
    double amount;      /* GEMM: calls; BYTES: bytes; START: bytes of the operation; IDLE: seconds */
} sl_pm_event;

typedef struct sl_pm_sched {
    sl_dtype dt;        /* the run's: GEMM operands and the operations' elements */
    int nshapes;
    sl_pm_gemm_shape shapes[SL_PM_MAX_GEMMS];
    int nev;
    sl_pm_event ev[SL_PM_MAX_EVENTS];
    int overflow;       /* more events or shapes than fit: the prediction is NAN */
    int lane, nlanes;   /* the lane events go to now; lanes used */
    int group;          /* the group operations go to now (sl_pm_group) */
    struct sl_comm *group_comm[SL_PM_MAX_GROUPS]; /* group g's communicator (0: the run's, NULL) */
    int group_size[SL_PM_MAX_GROUPS];             /* its ranks */
    char group_name[SL_PM_MAX_GROUPS][8];         /* "tp", "dp", ... (the rows' pred_fit) */
} sl_pm_sched;

void sl_pm_init(sl_pm_sched *s, sl_dtype dt);
void sl_pm_gemm(sl_pm_sched *s, int ta, int tb, int m, int n, int k, int beta, double count);
void sl_pm_bytes(sl_pm_sched *s, double bytes);
int sl_pm_start(sl_pm_sched *s, sl_pm_op op, double count);
void sl_pm_wait(sl_pm_sched *s, int id);
void sl_pm_comm(sl_pm_sched *s, sl_pm_op op, double count);
/* A host<->device copy of `bytes` (SL_PM_H2D), started here; wait for it with sl_pm_wait. */
int sl_pm_copy(sl_pm_sched *s, double bytes);

/* A technique whose operations run on sub-communicators (a tensor-parallel group, the replicas of
 * a slice) says so before them: the operations after sl_pm_group(s, g, name, comm, size) run on
 * comm, of `size` ranks, and are charged at group g's alpha-beta (g 1..SL_PM_MAX_GROUPS-1, fitted
 * on that communicator, every rank on its own group at once); sl_pm_group(s, 0, NULL, NULL, 0)
 * goes back to the run's communicator. */
void sl_pm_group(sl_pm_sched *s, int g, const char *name, struct sl_comm *comm, int size);
/* Seconds of an operation of `bytes` on group g (0: sl_pm_op_seconds). */
double sl_pm_group_op_seconds(const sl_pm_prims *p, int g, sl_pm_op op, double bytes);

/* Several ranks in one schedule (a pipeline's stages): each lane is a timeline of its own, with
 * its own compute and communication, and lanes meet only where one receives what another sent.
 *   sl_pm_lane(s, lane)                 the events after this are lane's (0..SL_PM_MAX_LANES-1)
 *   id = sl_pm_send(s, to, tag, count)  an SL_PM_P2P of `count` elements to lane `to`, started
 *                                       here (wait for it as for any operation)
 *   sl_pm_recv(s, from, tag)            the compute after this waits until lane `from`'s send
 *                                       with this tag has arrived (its START's end): the wait is
 *                                       idle (a pipeline's bubble), derived from the sender's
 *                                       predicted compute and the exchange's alpha-beta
 * Every lane starts at 0 (the step's barrier); the step is the lane that ends last, and the
 * prediction's terms are that lane's. A receive with no matching send, or lanes that wait for
 * each other, make the prediction NAN. */
void sl_pm_lane(sl_pm_sched *s, int lane);
int sl_pm_send(sl_pm_sched *s, int to, int tag, double count);
void sl_pm_recv(sl_pm_sched *s, int from, int tag);

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
