/* train_internal.h — what the files of the training layer share; techniques use sl_train.h. */
#ifndef SL_TRAIN_INTERNAL_H
#define SL_TRAIN_INTERNAL_H

#include "perf_model.h"
#include "sl_train.h"

/* The f32 loss (train_step.c): MSE against y of the model output a->x[nlayers], normalised over
 * the global batch, so that gradients summed over ranks are the global batch's; dL/d(output)
 * into a->dbuf[nlayers & 1], the buffer the last layer does not write its dL/dx into. Returns
 * the loss (added to t->loss). Phase compute. */
double train_loss_f32(sl_train *t, sl_mlp_acts *a, const float *y);

/* The check of one run (train_check.c). */
typedef struct train_check {
    sl_weight_diff diff;           /* full weights vs the serial reference (from rank 0) */
    long long replica_mismatches;  /* elements that differ from rank 0's, over all ranks */
    int tech_failed;               /* the technique's own check failed on some rank ... */
    double tech_error;             /* ... its largest error over the ranks ... */
    char tech_why[256];            /* ... and why (the lowest failing rank's reason) */
    double ref_loss, f32_loss;     /* the last step's loss of the reference in the run's dtype
                                      and of the f32 serial reference */
    double ref_first_loss;         /* the reference's loss at step 0 (NAN where unknown) ... */
    double ref_peak_loss;          /* ... its largest (inf where one was inf/NaN) ... */
    int ref_peak_step;             /* ... and at which step */
    long ref_skipped;              /* steps the reference's loss scaler skipped */
    double ref_rms;                /* the reference weights' root mean square */
} train_check;
/* Collective; the reference is computed on rank 0 at the first run of each global batch. */
train_check train_check_run(sl_train *t);
/* The check's bound for a 16-bit run in dt (SGD, or AdamW's in units of lr / rms(w_ref)): the
 * technique's, else the layer's SL_TRAIN_TOL_MIXED_*; 0 for a dtype that has none. */
double train_mixed_tol(const sl_technique *tech, sl_dtype dt, int adamw);
void train_check_verdict(const sl_train *t, const train_check *c, sl_result *res);
void train_references_free(void);

/* Variant v is in mask (the variants asked for) and trains in dt (sl_train_main's rows, and
 * --predict's). */
int train_runs(const sl_technique *tech, unsigned mask, int v, sl_dtype dt);

/* Ranks of nranks that train on data (the technique's .data_ranks, else all), and the global
 * batch of a run of variant on nranks (--batch per data rank, or in all: --scaling). */
int train_data_ranks(const sl_technique *tech, int variant, int nranks);
int train_global_batch(const sl_technique *tech, int variant, int nranks);

/* A run of one variant on comm (train_run.c): the sl_train is set up, ready for steps;
 * baseline 1 for the one-rank run. */
void train_open(sl_train *t, sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                sl_comm *comm, const sl_mlp *m, sl_task *task, const sl_optim *o, int global_batch,
                int nsteps, int baseline);
/* The same as rank `rank` of `size` ranks whatever comm holds: the prediction's schedules of ranks
 * that are not launched (train_predict.c; setup then runs on this process alone). */
void train_open_as(sl_train *t, sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                   sl_comm *comm, int rank, int size, const sl_mlp *m, sl_task *task, const sl_optim *o,
                   int global_batch, int nsteps, int baseline);
void train_close(sl_train *t);
/* What sl_train_predict_plan and sl_train_predict_platform open their sl_train with (its
 * planning), 0 otherwise: train_open_as copies it. */
extern int train_planning;
/* What sl_train_predict_plan sets techniques up with: sl_train_main's model, task and optimizer. */
void train_plan_bind(const sl_technique *tech, const sl_mlp *m, sl_task *task, const sl_optim *o);
void train_plan_bound(const sl_technique **tech, const sl_mlp **m, sl_task **task, const sl_optim **o);
/* The step as the timing loop's body: phases zeroed, the technique's step, phases logged. */
void train_step_body(void *arg);
/* Median over the timed steps of each phase's slowest rank; used is the union over ranks of
 * the phases recorded (collective over comm). Both the slowest rank and the median keep order:
 * a phase no larger than another at every step on every rank (exposed and comm) stays so. */
void train_phase_medians(const sl_train *t, int timed, MPI_Comm comm, double med[SL_NPHASES],
                         unsigned *used);

/* The sum over the world's ranks of the GEMM rate (TFLOP/s) each reaches at the model's largest
 * GEMM on `rows` samples in the run's dtype, measured now on every rank at once (cached per dtype
 * and shape); its shape n x m x k into shape. Collective over the world (train_gemm_peak.c). */
double train_gemm_peak(const sl_train *t, int rows, char *shape, size_t len);
/* The best of reps (at most 64) timings of GEMM g after an untimed one, the ranks of comm at
 * once (a barrier before each; a rank with active 0 only joins them): seconds of one call (a
 * GEMM under 2e8 FLOPs timed over up to 1000 calls in a row); their median into *median (may be
 * NULL). */
double train_gemm_seconds(sl_backend be, const sl_pm_gemm_shape *g, int reps, int active, MPI_Comm comm,
                          double *median);

/* The one-rank run behind scaling_eff: what it measured and the work it did, for the row. */
typedef struct train_baseline {
    double step;         /* median step time (0: not measured yet) */
    double batch;        /* samples it trained per step: the run's global batch */
    double mem_params;   /* parameter bytes its setup held: the whole model */
} train_baseline;
/* The one-rank run of a variant (rank 0 alone, the others wait) at the run's global batch:
 * the same global work as the run, so that scaling_eff is the speedup over it divided by the
 * ranks, whatever the technique partitions. On every rank. */
train_baseline train_one_rank_step(sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                                   const sl_mlp *m, sl_task *task, const sl_optim *o, int global_batch);

/* Sleep mode (train_compute.c): the option group a .sleep_mode technique's program gets; the
 * Open MPI setting made before MPI_Init; the option's checks; around each step (the step
 * slept or not, the barriers, the calibration after the warm-up steps); the replay. */
extern const sl_opt_group train_compute_option_group;
void train_compute_env(int argc, char **argv);
void train_compute_validate(sl_ctx *ctx);
void train_compute_before_step(sl_train *t);
void train_compute_after_step(sl_train *t);
void train_compute_replay(sl_train *t);

/* --calibration DIR (train_calibration.c): reads DIR/allreduce.jsonl's all-reduce rows on nranks
 * ranks; exits 2 naming the option where DIR lacks them for a collective in colls (bit per
 * sl_coll). Then the fit of impl's all-reduce over the step's sizes [lo, hi] bytes from the rows
 * of dt (else f32's: *from says which); 0 when they give none. */
void train_calibration_load(const char *dir, unsigned colls, int nranks);
int train_calibration_fit(sl_coll impl, sl_dtype dt, double lo, double hi, double *alpha, double *beta,
                          sl_dtype *from);

/* The step predicted from primitives measured in the run (train_perf.c). */
typedef struct train_prediction {
    sl_pm_pred pred;  /* the slowest rank's */
    double bw;        /* element-wise bytes per second */
    double calibration; /* seconds the measuring took (rank 0's): ~0 where all was cached */
    char fit[512];    /* alpha-beta of each operation used, for the row */
} train_prediction;
/* Measures what t's schedule needs (cached for the run) and predicts its step; 0 when the
 * technique states no schedule or SL_NO_PREDICT=1. Collective over the world, after the timed
 * steps (its operations are not in the row's bytes). p2p: the variant communicates point to point. */
int train_predict(sl_train *t, sl_coll impl, int p2p, train_prediction *out);
/* --predict FILE --predict-ranks LIST (train_predict.c): the options, their checks (in sl_init's
 * validate), and the run that replaces the measured one: a row per variant and rank count. */
extern const char *train_predict_file;
extern sl_int_list train_predict_ranks;
void train_predict_validate(sl_ctx *ctx, const sl_technique *tech);
int train_predict_main(sl_ctx *ctx, const sl_technique *tech, const sl_mlp *m, sl_task *task, const sl_optim *o);
/* The row's pred_* fields and step_vs_pred (measured step / predicted), or params.predict "off". */
void train_prediction_row(const train_prediction *p, double step, sl_result *res);

/* Runs variant `variant` over collective impl on the world and emits its row; baselines[v]
 * caches variant v's one-rank run. */
void train_run_variant(sl_ctx *ctx, const sl_technique *tech, int variant, sl_dtype dtype,
                       sl_coll impl, const sl_mlp *m, sl_task *task, const sl_optim *o,
                       train_baseline *baselines);

#endif
