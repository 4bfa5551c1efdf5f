/* sl_train.h — the training layer: one driver that every training benchmark (ddp, zero,
 * pipeline, megatron_mlp, halo_conv, vdnn, checkpoint) runs on, and the table of
 * callbacks through which a technique plugs into it (in the style of nccl-tests' one callback
 * table per test).
 *
 * The driver owns what every technique shares:
 *   - the training options (--layers --width --inputs --outputs --batch --scaling --optim --lr
 *     --seed --baseline; -w/-n are the untimed and timed training steps), parsed once;
 *   - the model, the synthetic task and the optimizer;
 *   - the loop over collectives and variants, the timed steps and their named phases (data,
 *     compute, comm, exposed comm, bubble, transfer, recompute), each phase's median over the
 *     timed steps of the slowest rank;
 *   - the serial reference (cached per global batch), the check against it with the
 *     technique's tolerance, and the check that replicas are bit-identical;
 *   - the one-rank baseline for scaling efficiency (the same global batch on one rank);
 *   - sleep mode (--compute sleep, sl_compute.h) for a technique that sets .sleep_mode;
 *   - the common row: samples/s, TFLOP/s, memory by category as counted by the allocator (and
 *     the technique's analytic memory model beside it), bytes sent per step against the
 *     technique's model, the phases, the check.
 * A technique file holds the technique: what it partitions, what it communicates when, which
 * part of the weights each rank holds. The skeleton is in docs/adding-a-benchmark.md ("A
 * training technique").
 *
 *   static const sl_technique ddp = { .program = {...}, .setup = ..., .step = ..., ... };
 *   int main(int argc, char **argv) { return sl_train_main(&ddp, argc, argv); }
 */
#ifndef SL_TRAIN_H
#define SL_TRAIN_H

#include <stddef.h>

#include "gpt_model.h"
#include "kernels.h"
#include "loss_scale.h"
#include "mlp.h"
#include "mlp_mixed.h"
#include "perf_model.h"
#include "scalelab.h"
#include "sl_coll.h"
#include "train_ref.h"

/* The named phases of a step. A technique records only those it has; a phase never recorded
 * is absent from the row (null), not zero. */
typedef enum {
    SL_PHASE_DATA,      /* generating or loading the batch */
    SL_PHASE_COMPUTE,   /* forward, backward, optimizer */
    SL_PHASE_COMM,      /* communication in flight (overlapped or not) */
    SL_PHASE_EXPOSED,   /* the part of comm nothing overlapped: the step waited for it. At
                           most comm: the driver caps each step's exposed at its comm (a wait
                           is timed from before a collective's start or test to after it, and
                           the clock readings around it are not communication) */
    SL_PHASE_BUBBLE,    /* idle, waiting for another stage (pipelines) */
    SL_PHASE_TRANSFER,  /* host <-> device copies (offload) */
    SL_PHASE_RECOMPUTE, /* forward work done again in backward (checkpointing) */
    SL_NPHASES
} sl_phase;
/* The row's metric name: "data" "compute" "comm" "exposed_comm" "bubble" "transfer" "recompute". */
const char *sl_phase_name(sl_phase p);

/* The shared training options, after parsing. A technique may change the defaults before
 * sl_train_main (its --help then shows its own). */
typedef struct sl_train_options {
    long long layers, width, inputs, outputs;
    long long batch;     /* per rank (weak) or in all (strong) */
    int scaling;         /* 0 weak, 1 strong */
    int optim;           /* 0 sgd (momentum 0.9), 1 adamw */
    double lr;
    double weight_decay; /* AdamW's, decoupled (0.01; not an option: precision's scenario takes 0) */
    long long seed;
    long long baseline;  /* 1: measure the one-rank run for scaling efficiency */
    const char *calibration; /* --calibration DIR: the all-reduces' alpha-beta from an allreduce
                                run's rows (train_calibration.c); NULL: the startup sweep */
} sl_train_options;
extern sl_train_options sl_train_opt;
extern const sl_opt_group sl_train_option_group;
/* Without --layers --width --inputs --outputs: what a technique with its own model takes. */
extern const sl_opt_group sl_train_step_option_group;

/* The scaler state of a mixed-precision run, and the decision each step ends with. The training
 * layer keeps one in every sl_train (t->ms) and takes the decision itself (sl_train_decide,
 * below); a technique that keeps its own 16-bit model beside the layer's uses it directly:
 *   sl_train_mixed_init(&ms, t->dtype);
 *   each step: backward at ms.sc.scale -> unscale (counting inf/NaN here: mine) ->
 *              if (sl_train_mixed_decide(t, &ms, mine, &o)) optimizer step with o;  (else skipped)
 *   row: sl_train_mixed_row(t, &ms, res). */
typedef struct sl_train_mixed_state {
    sl_loss_scaler sc;    /* sl_train_scaler(dtype): dynamic for f16, none for bf16 */
    int applied;          /* optimizer steps taken (AdamW's count: a skipped step is not one) */
    long overflow_steps;  /* steps on which THIS rank saw inf/NaN itself (before the OR) */
    int alone;            /* decided by each rank alone (sl_train_decide_alone): no flag sent */
} sl_train_mixed_state;

/* What a 16-bit run lost to rounding, counted by the training layer for every model in the runs
 * of a technique with .precision (on cuda a count costs a reduction and a copy per layer), summed
 * over the run on this rank (a technique that reports them per step subtracts its last reading). */
typedef struct sl_train_counts {
    sl_cast_count wgrad;            /* the roundings of each layer's f32 weight gradient into
                                       t->dtype (underflow: nonzero values that became 0) */
    unsigned long long wgrad_n;     /* elements rounded */
    unsigned long long nonfinite;   /* unscaled gradient elements that were inf or NaN
                                       (sl_train_unscale: an overflow anywhere upstream) */
    unsigned long long lost_updates; /* without a master copy (t->master 0): weight updates that
                                       rounded back to the old 16-bit weight */
} sl_train_counts;

struct sl_technique;

/* One run of one variant on one communicator: what a technique's callbacks see. The driver
 * fills every field before setup; the technique reads them and keeps its own state in
 * `state`. */
typedef struct sl_train {
    sl_ctx *ctx;
    const struct sl_technique *tech;
    int variant;
    sl_backend be;
    const sl_mlp *m;
    sl_task *task;
    sl_optim optim;
    sl_comm *comm;          /* the ranks taking part: the world, or rank 0 alone (baseline) */
    int rank, size;         /* in comm */
    int global_batch;       /* B: samples per step over all data ranks */
    int data_ranks;         /* ranks that train on data (all but a parameter server's) */
    int lo, hi;             /* this rank's samples of a step: [lo, hi) of B (empty if none) */
    int step, nsteps;       /* the step being run (0-based) and warm-up + timed steps */
    int baseline;           /* 1 in the one-rank baseline run */
    size_t nparams;         /* the flat weight vector: m->nparams, or the technique's own model's */
    sl_dtype dtype;         /* f32, or f16/bf16: mixed-precision training (technique.dtypes) */
    double loss;            /* this rank's loss of the step being run (sl_train_loss adds to it) */
    int sleeping;           /* sleep mode's timed step: compute is slept (sl_compute.h) */
    int act_rows;           /* the most samples one sl_acts of this rank holds (sl_acts_alloc):
                               a micro-batch's under accumulation */
    int replaying;          /* sleep mode's replay of every step with real compute: not a driver
                               step (the technique records none of its figures) */
    void *state;            /* the technique's */
    /* driver-private */
    double phase[SL_NPHASES];
    unsigned phases_used;
    double *phase_log;      /* [nsteps][SL_NPHASES] */
    sl_train_mixed_state ms; /* the run's loss scaler and optimizer steps (train_precision.c) */
    size_t nonfinite;       /* inf/NaN this rank's unscaled gradients held this step */
    sl_optim optim_now;     /* the optimizer of the step sl_train_decide applied */
    int scaled;             /* steps went through sl_train_decide in 16 bits: the driver adds
                               precision "mixed" and the scaler's part (sl_train_mixed_row) to
                               the row */
    /* The run's precision as the technique chose it (technique.precision; 16 bits only): */
    int master;             /* 1 (default): an f32 master copy of the weights; 0: the optimizer
                               updates the t->dtype weights widened (sl_train_apply) */
    sl_loss_scaler scaler0; /* the scaler the run started with: its serial reference's */
    sl_train_counts cnt;    /* what rounding lost, counted by the model pieces */
    float *wide;            /* the f32 view of the weights without a master copy (sl_train_wide) */
    int planning;           /* set up only to have its step predicted: no step will run, and setup
                               records nothing of a run. 1: on the launched ranks, as a run
                               (sl_train_predict_plan); 2: as rank `rank` of `size` ranks that are
                               not launched (sl_train_predict_platform): setup places the rank and
                               fills what .schedule reads, allocates nothing and opens no groups */
} sl_train;

/* The callbacks of a technique. Only setup, step and weights are required. */
typedef struct sl_technique {
    /* The program: name, summary, uses (backend, collectives), defaults, its own options in
     * .extra and its .validate. The driver adds the training option group and runs its own
     * checks of the shared options before .validate. */
    sl_program program;
    const char *const *variants; /* names, for --variants and the rows */
    int nvariants;
    const unsigned *variant_mask; /* the program's --variants destination (bit per variant) */
    /* Variants that communicate point to point rather than through the -C collective: run once,
     * after the others, with the mpi implementation; their rows say collective "p2p". */
    unsigned p2p_variants;
    /* Variants that have no one-rank baseline (the efficiency is then n/a). */
    unsigned no_baseline_variants;
    /* Data-parallel techniques, where each sample's loss is computed on exactly one rank: the
     * row then carries final_loss, the sum over ranks of the last step's t->loss, beside the
     * serial references' (ref_final_loss in the row's dtype, f32_final_loss in f32). */
    int sums_loss;
    /* Training precisions beside f32 (program.dtypes lists what -d accepts): for each, the
     * driver runs every collective x variant with t->dtype set, the check's reference is
     * sl_train_serial_mixed in that dtype, with the technique's tolerances for that dtype
     * (SGD: largest element difference; AdamW: L2, in units of lr / rms(reference weights);
     * 0: the layer's data-parallel bounds, SL_TRAIN_TOL_MIXED_* below). */
    double tol_mixed_sgd_max[SL_NDTYPES], tol_mixed_adamw_l2[SL_NDTYPES];
    unsigned mixed_variants; /* the variants that train in f16/bf16; the others in f32 only */
    unsigned mixed_only_variants; /* of those, the ones that do not run in f32 (a loss scaler or
                                     the lack of a master copy, which f32 training has no use for) */
    /* Variants by precision where they differ (precision's MLP: "fp16/none" trains in f16 alone):
     * a nonzero dtype_variants[d] lists the variants that run in dtype d, in place of
     * mixed_variants and mixed_only_variants. */
    unsigned dtype_variants[SL_NDTYPES];
    /* The run's precision where it is not the layer's default (sl_train_scaler(t->dtype), an f32
     * master copy): called before setup, it may set t->ms.sc (the loss scaler: mode, scale,
     * growth) and, in 16 bits, t->master. The serial reference then trains with the same
     * (precision: its variants are scalers and master choices). In f32 a scaler multiplies the
     * loss and divides the gradients by its power-of-two scale, which changes no bit unless a
     * step overflows: the reference is f32 training unscaled. NULL: the default. */
    void (*precision)(sl_train *t);
    /* On one rank the f32 weights must equal the serial reference's bit for bit (precision: the
     * same kernels in the same order, a loss scale a power of two), not within a tolerance. */
    int exact_one_rank;

    /* Ranks of `nranks` that train on data (default: all). */
    int (*data_ranks)(int variant, int nranks);
    /* Allocates this rank's part of the model, gradients, optimizer state and buffers (with
     * sl_k_malloc and the right category: the driver reports what setup held) and initialises
     * the parameters it holds from sl_mlp_init_params(sl_train_opt.seed). */
    void (*setup)(sl_train *t);
    /* One training step of samples [step * B, (step + 1) * B); records its phases
     * (sl_train_span, sl_train_record). */
    void (*step)(sl_train *t);
    /* This rank's weights after training: *first is the first flat element they hold and
     * *count how many (the whole vector for a replica, a shard for a sharded technique, 0 if
     * none), in backend memory. Ranks holding the same elements must hold them bit-identically. */
    const float *(*weights)(sl_train *t, size_t *first, size_t *count);
    /* Sharded techniques: gathers the full weights into full (host memory, m->nparams floats)
     * on rank 0. Collective; called only when rank 0's weights() are not the whole vector. */
    void (*gather_weights)(sl_train *t, float *full);
    void (*free)(sl_train *t);

    /* Analytic models, reported beside the measurements: bytes this rank holds per category
     * (bytes[SL_MEM_PARAMS] ...; leave 0 what the model does not cover), and bytes the busiest
     * rank sends per step. Either may be NULL. */
    void (*memory_model)(const sl_train *t, double bytes[SL_MEM_NCATS]);
    double (*bytes_model)(const sl_train *t);
    /* The step as the performance model reads it (perf_model.h; train_perf.c's helpers below):
     * this rank's GEMMs, element-wise bytes and communication, in the order its step runs them.
     * The row then carries the step predicted from primitives measured in the run beside the
     * step measured (pred_step, step_vs_pred). May be NULL: no prediction. */
    void (*schedule)(const sl_train *t, sl_pm_sched *s);
    /* The layout the schedule states (degrees, a grid) is chosen for the launched ranks, so
     * --predict, which sets the technique up at rank counts not launched, refuses it. */
    int schedule_launched_only;
    /* Returns 1 where the technique's .sweep takes --predict FILE itself (parallel3d --search:
     * each layout predicted on the platform with sl_train_predict_platform): the driver then
     * neither refuses --predict for schedule_launched_only nor runs its own rows of it, and
     * begins no table. May be NULL. */
    int (*predicts_itself)(void);
    /* The technique's own parameters and metrics of the row. May be NULL. */
    void (*row)(sl_train *t, sl_result *r);
    /* The row as it is emitted, the check's verdict included, on every rank: a technique that
     * sums its runs up (parallel3d --search) keeps what it needs. May be NULL. */
    void (*row_done)(sl_train *t, const sl_result *r);

    /* The check: relative tolerances against the serial reference (0: the defaults below),
     * and a different reference where the technique's is not serial full-batch training
     * (params: backend memory, m->nparams floats, on rank 0; losses: host, t->nsteps: each
     * step's loss, for the check that the reference did not diverge, or left NAN throughout
     * where the reference does not know them). Called once per global batch and variant (it
     * may differ between variants: t->variant says which). */
    double tol_sgd_max, tol_adamw_l2;
    void (*reference)(sl_train *t, float *params, double *losses);
    /* The technique's own checks beside the weights' (halo_conv, megatron_mlp: one step's
     * output and gradients against the serial model, bytes against the model; checkpointing: gradients
     * and weights bit for bit against store-all, activation bytes against the model).
     * Collective, on every rank after the weights' check, outside the timed steps: returns 0
     * when it passes, else nonzero with the largest error in *error (NAN when it has none) and
     * a one-line reason in why. A failure on any rank fails the row, with the lowest failing
     * rank's reason. May be NULL. */
    int (*check)(sl_train *t, double *error, char *why, size_t whylen);
    /* A variant that cannot run as configured (vdnn: its memory model exceeds --device-mem):
     * called after setup on every rank (collective), returns a one-line reason, the same on
     * every rank; the driver then emits the row with that reason (check "none", the technique's
     * .row beside it), runs no step, and goes on. NULL, or returning NULL: the variant runs. */
    const char *(*cannot_run)(sl_train *t);

    /* A technique that trains a model of its own instead of the shared MLP (halo_conv's
     * convolutions): the length of its flat weight vector, and the FLOPs of one training step
     * at global batch B. Then .reference is required, the row's layers/width (the MLP's) are
     * left out and the driver prints no MLP line: the technique says what it trains (in its
     * .validate). NULL: the shared MLP. */
    size_t (*model_params)(void);
    double (*model_flops)(int global_batch);
    /* Its initial weights (f32, t->nparams): with it the technique's own model can be held in
     * an sl_replica (sl_replica_place: weights, gradients, twins and optimizer state; no
     * activations) and stepped by sl_replica_step. NULL: the replica is the shared model's. */
    void (*init_params)(const sl_train *t, float *w32);

    /* The model, where it is not the shared --layers/--width stack (megatron_mlp: blocks whose
     * two layers differ in width): fills m for backend be; returns 0, or -1 for an invalid
     * shape. The task then has m's input and output widths, and the program does not take
     * the stack's options (sl_train_step_option_group). NULL: the stack from the options. */
    int (*model)(sl_mlp *m, sl_backend be);
    /* The technique trains --model gpt (kernels/gpt_model.h: the layered GPT on the same flat
     * vector and per-layer hooks as the MLP). 0: --model gpt is taken with --analytic only. */
    int trains_gpt;
    /* A sweep of the technique's own around the collectives x variants (megatron_mlp: the
     * tensor-parallel degrees): before each pass the driver calls sweep(ctx, pass) for pass = 0,
     * 1, ..., and stops at the first that returns 0. NULL: one pass. */
    int (*sweep)(sl_ctx *ctx, int pass);

    /* Sleep mode (sl_compute.h, train_compute.c): the program takes --compute real|sleep.
     * reset (required then) returns to the initial weights and optimizer state for the replay
     * with real compute; calibrate (may be NULL) measures the rank's pieces alone, on each rank
     * in turn after the warm-up steps. */
    int sleep_mode;
    void (*reset)(sl_train *t);
    void (*calibrate)(sl_train *t);

    /* Around the training table: before (after the model's note) prints the technique's own
     * tables and notes; after, once every run has, what reads them all (precision: the loss
     * curves, its scenario). Either may be NULL. */
    void (*before)(sl_ctx *ctx, const sl_mlp *m);
    void (*after)(sl_ctx *ctx);

    /* The stdout table. */
    const sl_column *columns;
    int ncolumns;
} sl_technique;

/* What a training program's sl_program takes unless it says otherwise: -B, every collective of
 * -C, and -d f32 (the default), f16 or bf16. */
#define SL_TRAIN_PROGRAM_USES                                                                       \
    .uses = SL_USES_BACKEND | SL_USES_COLL | SL_USES_DTYPE, .colls = (1u << SL_NCOLLS) - 1,            \
    .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16), .default_dtype = SL_F32

/* Columns every training table shows, for a technique's column list: which run, the step and
 * its phases, the throughput and scaling; the bytes per step beside their model; the check. */
#define SL_TRAIN_COLUMNS_RUN                                                                        \
    SL_COL("variant", "variant", 9), SL_COL("coll", "collective", 7), SL_COL("batch", "global_batch", 7)
#define SL_TRAIN_COLUMNS_STEP                                                                       \
    {"step", "ms", "time.median", 10, 2, 1e3}, {"compute", "ms", "compute", 9, 2, 1e3},             \
    {"comm", "ms", "comm", 9, 2, 1e3}, {"exposed", "ms", "exposed_comm", 9, 2, 1e3},                \
    {"overlap", "%", "overlap", 8, 1, 100}, {"samples/s", "", "samples_per_s", 11, 1, 0},          \
    {"eff", "%", "scaling_eff", 7, 1, 100}
/* The step predicted from the run's primitives (a technique with .schedule; n/a without it). */
#define SL_TRAIN_COLUMNS_PRED {"pred", "ms", "pred_step", 9, 2, 1e3}
#define SL_TRAIN_COLUMNS_BYTES                                                                      \
    {"model", "MB/step", "bytes_model", 8, 2, 1e-6}, {"sent", "MB/step", "bytes_sent", 8, 2, 1e-6}
#define SL_TRAIN_COLUMNS_CHECK SL_COL_ERROR("error", "weight_rel_err", 10), SL_COL_CHECK(7)

/* Why 1e-4 (SGD, largest element difference relative to the largest weight): replicas and the
 * reference differ only in the order of floating-point additions (the batch is summed in
 * pieces, then across ranks). In f32 (eps 6e-8) that perturbs each step by ~1e-7 relative,
 * which a dozen or a hundred SGD steps keep well below 1e-5 (the measured error is printed in
 * every row). Real defects — a gradient never reduced, a stale gradient, averaging instead of
 * summing, a slice off by one sample — give errors of 1e-2 and more.
 * AdamW is checked in the L2 norm, to 1e-3: its update m/sqrt(v) has the same size whatever
 * the gradient's, so a weight whose gradient is at rounding level can move by +lr in one run
 * and -lr in the other; single weights then differ by O(lr), while the norm of the difference
 * stays near 1e-5 of the weights' norm unless the gradients are wrong wholesale. (Adam is
 * blind to a uniform scale of the gradient, so SGD, the default, is the stricter check.) */
#define SL_TRAIN_TOL_SGD_MAX 1e-4
#define SL_TRAIN_TOL_ADAMW_L2 1e-3

/* A run whose serial reference's loss rose this many times above its first step's (or became
 * inf/NaN) has diverged, and its check fails whatever the weights' errors: two diverged runs
 * agree or not by chance (rounding differences grow exponentially in both), so neither the
 * pass nor the fail would say anything about the technique. Measured on the synthetic task:
 * a step's loss moves with its batch, and AdamW at sl_optim_default_lr's rate can raise it
 * 2x in its first steps (3x at twice that rate); a diverging run rises 10 to 10^8 times
 * (AdamW at 0.01: 19x in 3 steps at 3 x 512, 1.5e8x in one step at 32 x 512). */
#define SL_TRAIN_DIVERGED_RISE 10.0

/* The bounds of a data-parallel mixed-precision run against one process training the whole
 * batch in the same precision with the same scaler (sl_train_serial_mixed). The two differ
 * where the batch's gradient is summed: the reference rounds the f32 GEMM sum over B samples
 * once into 16 bits; a distributed run rounds each rank's part, and its all-reduce or
 * reduce-scatter rounds at each hop. So a step's gradient differs from the reference's by a
 * few u of the partial gradients (u: the unit roundoff, 2^-11 for f16, 2^-8 for bf16), and once
 * a master weight differs its 16-bit copy can round to the neighbouring value, which perturbs
 * later gradients by O(u) too.
 *   SGD (largest element difference over the largest weight): a weight moves by lr times a
 *   momentum sum of gradients (at most 10|g|), so S steps differ by at most about
 *   S·lr·10·|g|·c·u; with lr 0.01, |g| <= 1, c a few and S up to ~50 that stays within about
 *   u of weights of order 0.1-1. Measured (ddp, 4 ranks, 4 x 256, 12 and 42 steps, mpi/ring/rhd):
 *   f16 4e-5 to 9e-5, bf16 3e-4 to 8e-4. The tolerances are 4u: 2e-3 (f16), 1.5e-2 (bf16).
 *   One step taken by the reference and skipped here is lr·|g| on every weight: ~1e-2 at the
 *   test's size, and fails (t/integration/ddp.t does it).
 *   AdamW (L2 of the difference over the reference's L2), in units of lr / rms(w_ref): its update
 *   lr·m/sqrt(v) is of size lr whatever the gradient's, so a weight whose gradient is within
 *   16-bit rounding of zero can step +lr in one run and -lr in the other, and 16-bit rounding
 *   leaves many more such weights than f32's. If a fraction f of the weights flip, the error is
 *   2·sqrt(f)·lr/rms(w): it grows with lr/rms(w), i.e. with the width (rms(w) ~ 1/sqrt(width)),
 *   so a fixed L2 bound would be loose for narrow models and fail wide ones. A step missed or
 *   taken twice moves every weight by about lr: 1 and more in these units (1.8 measured, the
 *   zero test's). Measured (ddp and zero, 2-4 ranks, widths 48-2048, 12-32 steps): f16 0.0015
 *   to 0.038, bf16 0.035 to 0.13. Tolerances 0.1 (f16) and 0.5 (bf16) times lr / rms(w_ref).
 *   (A gradient never all-reduced leaves the replicas different, which the driver's
 *   bit-for-bit check catches; the row's ref_weight_rms gives rms(w_ref).)
 */
#define SL_TRAIN_TOL_MIXED_SGD_F16 2e-3
#define SL_TRAIN_TOL_MIXED_SGD_BF16 1.5e-2
#define SL_TRAIN_TOL_MIXED_ADAMW_F16 0.1  /* x lr / rms(w_ref) */
#define SL_TRAIN_TOL_MIXED_ADAMW_BF16 0.5 /* x lr / rms(w_ref) */

/* Parses, runs every requested collective x variant, and finalises; returns main's status. */
int sl_train_main(const sl_technique *tech, int argc, char **argv);

/* A step predicted, not run (train_plan.c), for a technique that chooses what to run from
 * predictions (parallel3d --search, from its .sweep): the technique set up on the world as its
 * options stand now, exactly as a run of `variant` in dt over impl would set it up (t->planning
 * set), its .schedule charged at primitives measured on the world now (the code and caches behind
 * every row's pred_step: a layout run afterwards is predicted from the same figures), then freed.
 * Collective over the world, from inside sl_train_main. 0 with the slowest rank's prediction in
 * *out and the operations' alpha-beta in fit (as the rows' pred_fit); -1 where nothing is
 * predicted (the technique states no schedule, or SL_NO_PREDICT=1). */
int sl_train_predict_plan(sl_ctx *ctx, int variant, sl_dtype dt, sl_coll impl, sl_pm_pred *out, char *fit,
                          size_t fitlen);
/* The same on the machine --predict FILE describes, at `nranks` ranks that are not launched
 * (train_predict.c): the technique set up as ranks 0 and nranks-1 would be (t->planning 2), each
 * schedule charged at the platform's primitives, the slower of the two into *out, as --predict's
 * rows are. On this process alone. -1 without --predict or a schedule. */
int sl_train_predict_platform(sl_ctx *ctx, int variant, sl_dtype dt, sl_coll impl, int nranks, sl_pm_pred *out);
/* --predict's platform: its name, or NULL without --predict; its ranks (--predict-ranks: the one
 * given, 0 when none was, -1 when several were). */
const char *sl_train_predict_platform_name(void);
int sl_train_predict_ranks(void);

/* Phases ------------------------------------------------------------------------------------ */

/* Adds seconds to phase p of the current step. */
void sl_train_record(sl_train *t, sl_phase p, double seconds);
/* Adds t1 - t0 to phase p and puts the span on the trace (communication phases on their own
 * row, tid 1). */
void sl_train_span(sl_train *t, sl_phase p, const char *name, double t0, double t1);
/* A blocking communication that began at t0 and has just returned: comm and exposed alike,
 * from one reading of the clock, on the trace as `name`. Returns its seconds. */
double sl_train_blocking(sl_train *t, const char *name, double t0);
/* Compute begun at t0 and just issued: the backend synced (so that the span holds the kernels'
 * time, not their launch), then t0 to now in phase compute, on the trace as `name`. */
void sl_train_compute_span(sl_train *t, const char *name, double t0);

/* Model pieces with phases recorded ------------------------------------------------------- */

/* Called before and after each layer of a range, forward (backward = 0) or backward (1).
 * `before` may return the parameter block the layer should use (a gathered copy: ZeRO-3), or
 * NULL for params + m->w_off[l]. `grads`, in backward after `before`, may return the block
 * layer l's gradients go to (a slot of a communication bucket: ZeRO-2/3, which never hold the
 * full gradient), or NULL for grads + m->w_off[l]. Blocks are in the run's dtype (t->dtype).
 * Any may be NULL. */
typedef struct sl_layer_hooks {
    const void *(*before)(sl_train *t, int layer, int backward);
    void (*after)(sl_train *t, int layer, int backward);
    void *(*grads)(sl_train *t, int layer);
} sl_layer_hooks;

/* The run's number of sample `first` of the current step's batch: step x global batch + first
 * (the task's index of a sample, and the GPT's dropout numbering of a sequence). */
uint64_t sl_train_sample(const sl_train *t, int first);
/* Samples [first, first + count) of the current step's batch into x[count, in] and
 * y[count, out] (backend memory). Phase data. */
void sl_train_load(sl_train *t, int first, int count, float *x, float *y);
/* The GPT's: sequences [first, first + count) of the step as tokens and next tokens
 * (count,T int32, backend memory). Phase data. */
void sl_train_load_tokens(sl_train *t, int first, int count, int32_t *tok, int32_t *tgt);
/* One optimizer step on flat elements [off, off + count) with state for that slice.
 * Phase compute. */
void sl_train_optimize(sl_train *t, float *params, const float *grads, float *state, size_t off,
                       size_t count);

/* Mixed precision (train_mixed.c) ------------------------------------------------------------ */

/* The loss scaler a run in dtype dt uses: f16 PyTorch GradScaler's dynamic scaling with its
 * defaults (2^16, x2 after 2000 clean steps, x0.5 and skip on inf/NaN), since f16's range
 * loses small gradients; bf16 (f32's range) and f32 none. */
void sl_train_scaler(sl_dtype dt, sl_loss_scaler *s);
/* The serial reference of mixed-precision training: one process, the whole global batch,
 * sl_mixed in dt with the loss scaler sc (copied; sl_train_scaler(dt) by default) and an f32
 * master copy (master 1) or none (0), for `steps` steps from sl_mlp_init_params(seed). params
 * (backend memory, m->nparams) gets the master weights (without one: the dt weights widened),
 * losses[s] (host, may be NULL) step s's loss; returns the steps the scaler skipped. */
long sl_train_serial_mixed(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt,
                           const sl_loss_scaler *sc, int master, int batch, int steps, uint64_t seed,
                           float *params, double *losses);
/* The same for the GPT (train_gpt.c), in any dtype (f32: no scaler, no master copy; sc ignored):
 * one process, the whole global batch, the layers of gpt_model.h. Returns the steps skipped. */
long sl_train_serial_gpt(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt,
                         const sl_loss_scaler *sc, int master, int batch, int steps, uint64_t seed,
                         float *params, double *losses);
/* Serial full-batch training of the run's model (the MLP in f32 or 16 bits, the GPT in any
 * dtype, with the run's scaler and master choice in t->dtype) at t's global batch for t->nsteps
 * steps: the driver's reference, for a technique's .reference to start from. Returns the steps
 * the scaler skipped. */
long sl_train_serial_run(sl_train *t, sl_dtype dt, float *params, double *losses);
/* A loss-scaled step is applied or skipped on every rank alike: returns the OR over the ranks
 * of `mine` (this rank saw inf/NaN in the gradient elements it holds), through one int's
 * MPI_Allreduce on the world — outside the technique's communicator, so its bytes_sent stays
 * the gradients' (the row's overflow_flag_bytes says so). Adds mine to *seen. Collective;
 * phase comm. SL_TEST_CORRUPT=1 (tests) makes the last rank alone report an overflow at step 0. */
int sl_train_overflow_any(sl_train *t, int mine, long *seen);
/* The scaler's part of the row: loss_scale, skipped_steps, final_scale, overflow_flag_bytes, and
 * overflow_seen (the sum over ranks of their *seen: rank-steps). Collective. */
void sl_train_scaler_row(sl_train *t, const sl_loss_scaler *s, long seen, sl_result *res);

void sl_train_mixed_init(sl_train_mixed_state *ms, sl_dtype dt);
/* The step's verdict: the OR over every rank of `mine` (sl_train_overflow_any), fed to the
 * scaler. Returns 1 when the step is applied, with *o the optimizer for it (the step count
 * of the steps applied so far), 0 when every rank skips it. Collective. */
int sl_train_mixed_decide(sl_train *t, sl_train_mixed_state *ms, int mine, sl_optim *o);
/* The optimizer step of such a technique, over its n elements: in f32, sl_train_optimize of params
 * (the weights themselves) from grads; in 16 bits, the gradient g (t->dtype, scaled by ms's scale)
 * unscaled into grads (f32), the decision (sl_train_mixed_decide: the overflow flag OR-ed over
 * every rank, so that a model split over ranks steps all its parts or none) and, when the step is
 * applied, the optimizer on the f32 master params and the weights w (t->dtype) cast from it.
 * Returns 1 when the step was applied (always in f32), 0 when every rank skipped it. A slice
 * [off, off + n) of a larger vector is stepped with every pointer offset to it. Collective in
 * 16 bits; phase compute. */
int sl_train_mixed_step(sl_train *t, sl_train_mixed_state *ms, const void *g, float *grads, float *params,
                        float *optim, void *w, size_t n);
/* sl_train_scaler_row of the state. Collective. */
void sl_train_mixed_row(sl_train *t, const sl_train_mixed_state *ms, sl_result *res);

/* The model in the run's precision (train_step.c, train_precision.c) -------------------------
 *
 * Precision is a property of the pieces below, not of the technique: a technique holds its
 * weights and gradients in t->dtype (f32, f16 or bf16), communicates them in t->dtype, and the
 * same step runs in every dtype. In 16 bits the layers compute through kernels/mlp_mixed.h
 * (16-bit operands, f32 accumulation), an f32 master copy of the weights and f32 optimizer state
 * are kept, the loss is scaled (sl_train_scaler) and a step is applied or skipped on every rank
 * alike. In f32 the same calls are the f32 reference's operations, with no copy: the "f32
 * twins" below are NULL and the 16-bit buffers are the f32 ones.
 *
 * A step, in every dtype:
 *   load, forward, loss, backward (sl_acts_*: the gradient in t->dtype, loss-scaled)
 *   communicate the gradients (t->dtype elements: sl_train_esize)
 *   g32 = sl_train_unscale(t, g, twin, n)  for each slice this rank steps (counts inf/NaN)
 *   if (sl_train_decide(t))                 the OR of the flags over the ranks, the scaler
 *       sl_train_apply(t, w, master, g32, state, n)  for each slice: optimizer, cast back */

/* Bytes of one element of t->dtype, and element e of a buffer of t->dtype. */
size_t sl_train_esize(const sl_train *t);
void *sl_train_at(const sl_train *t, const void *p, size_t e);
/* An f32 twin of n elements (the master weights, the unscaled gradients) that only a 16-bit
 * run needs, under category cat: NULL in f32. sl_f32_at(twin, off) offsets one (NULL stays). */
float *sl_train_twin(sl_train *t, sl_mem_cat cat, size_t n);
static inline float *sl_f32_at(float *p, size_t off) { return p ? p + off : NULL; }
/* w[n] (t->dtype) as f32: w itself in f32, else widened into the f32 twin view. */
const float *sl_train_widen(sl_train *t, const void *w, float *view, size_t n);
/* For pieces that hold tensors in t->dtype and compute in f32, each result rounded once (in f32
 * the tensor itself, and nothing to do; no sync): the f32 values of p[n] (p itself, else
 * widened into the workspace ws); where an f32 result that ends in p is computed (p itself,
 * else ws); that result r[n] rounded into p (nothing where r is p). */
float *sl_train_f32(const sl_train *t, const void *p, float *ws, size_t n);
static inline float *sl_train_result(const sl_train *t, void *p, float *ws) { return t->dtype == SL_F32 ? p : ws; }
void sl_train_round(const sl_train *t, const float *r, void *p, size_t n);

/* The activations of up to `rows` samples in t->dtype, the samples themselves (f32, as the task
 * makes them) and, in 16 bits, the f32 workspaces of the layers. */
typedef struct sl_acts {
    int rows;
    float *x, *y;     /* input and target of the samples loaded (x is f.x[0] in f32) */
    sl_mlp_acts f;    /* f32: the store-all activations */
    sl_mixed mx;      /* 16-bit: the activations in t->dtype, the layers' f32 workspaces */
    sl_gpt_acts g;    /* --model gpt, every dtype: the blocks' activations (gpt_model.h); f, mx
                         and x, y are then unused */
    float *gw32;      /* 16-bit: one layer's weight gradient in f32 before it is rounded */
    /* Micro-batches (16-bit): their gradients are summed in f32 into sum32 (the flat f32
     * twin, NULL with one micro-batch) and rounded into t->dtype after the last. In f32 the
     * gradients accumulate in place (+=), as the f32 reference's. */
    float *sum32;
    int first, last;
    int placed;       /* sl_acts_place: the GPT's pointers are into the technique's blocks */
} sl_acts;
void sl_acts_alloc(sl_train *t, int rows, sl_acts *a);
void sl_acts_free(sl_train *t, sl_acts *a);
/* sl_acts_alloc without the activation buffers, for a caller that places each one itself while
 * it is alive (checkpointing: from its pool), with sl_acts_set: slot x[l], z[l] or dbuf[i] in
 * both views (a->f read in f32, a->mx in 16 bits), p in t->dtype or NULL. sl_acts_free frees
 * only what is still set. The GPT's: the workspaces and the targets a->g.tgt, its ranges placed
 * with sl_acts_map_input, the gradient between layers l and l + 1 at a->g.dres[(l + 1) & 1]. */
void sl_acts_place(sl_train *t, int rows, sl_acts *a);
typedef enum { SL_ACTS_X, SL_ACTS_Z, SL_ACTS_DBUF } sl_acts_slot;
static inline void **sl_acts_slot_mx(sl_acts *a, sl_acts_slot s, int i)
{
    return s == SL_ACTS_X ? &a->mx.x[i] : s == SL_ACTS_Z ? &a->mx.z[i] : &a->mx.dbuf[i];
}
static inline void sl_acts_set(sl_acts *a, sl_acts_slot s, int i, void *p)
{
    *sl_acts_slot_mx(a, s, i) = p;
    float **f = s == SL_ACTS_X ? &a->f.x[i] : s == SL_ACTS_Z ? &a->f.z[i] : &a->f.dbuf[i];
    *f = p;
}
static inline void *sl_acts_get(sl_acts *a, sl_acts_slot s, int i) { return *sl_acts_slot_mx(a, s, i); }
/* What sl_acts_alloc holds under activ (the model's: sl_mlp_acts_bytes or sl_mixed_memory, or
 * the GPT's sl_gpt_acts_bytes). */
size_t sl_acts_bytes(const sl_train *t, int rows);
/* Samples [first, first + count) of the step into a (phase data; the cast into t->dtype is
 * compute). */
void sl_acts_load(sl_train *t, sl_acts *a, int first, int count);
/* Forward of layers [l0, l1), params in t->dtype (or the hooks' blocks). Phase compute. */
void sl_acts_forward(sl_train *t, sl_acts *a, const void *params, int l0, int l1,
                     const sl_layer_hooks *h);
/* The loss of the output against the target, times the loss scale into dL/d(output) in
 * t->dtype; returns the unscaled loss (added to t->loss). Phase compute. */
double sl_acts_loss(sl_train *t, sl_acts *a);
/* Backward of layers [0, nlayers) from the loss's gradient into grads (t->dtype, or the hooks'
 * blocks): in f32 accumulated in place; in 16 bits each layer's f32 gradient rounded into grads
 * once, or with micro-batches (a->sum32) summed in f32 and rounded after the last.
 * Each layer is synced before `after` runs, so its gradients are final there. Phase compute. */
void sl_acts_backward(sl_train *t, sl_acts *a, const void *params, void *grads,
                      const sl_layer_hooks *h);
/* The same over layers [l0, l1) from dy = dL/d(x[l1]) (t->dtype, overwritten); returns
 * dL/d(x[l0]), or NULL when l0 == 0. */
void *sl_acts_backward_range(sl_train *t, sl_acts *a, const void *params, void *grads, void *dy,
                             int l0, int l1, const sl_layer_hooks *h);

/* Activations a technique keeps itself (pipeline stages: one block per micro-batch in flight),
 * run a layer at a time. sl_acts_alloc_work holds only the layers' workspaces for up to `rows`
 * samples (none in f32; in 16 bits the f32 ones and one layer's f32 dW); sl_acts_map points
 * layers [l0, l1) at a block in t->dtype (their inputs x[l0..l1), then the pre-activations of
 * those with an activation), their output x[l1] at out, on `rows` samples, and, when l1 is the
 * model's last layer, dL/d(output) of sl_acts_loss (whose target is a->y) at dout.
 * sl_acts_map_input is the same with the input at `in` and the rest at `body` (a block of
 * sl_acts_range_bytes(full) - sl_acts_range_bytes(0) bytes): the input kept apart, as a
 * checkpoint is while the rest of its range is dropped (checkpointing). out NULL: the range's
 * top layer computes only what its backward reads (x[l1] NULL above; the GPT's: gpt_model.h). */
void sl_acts_alloc_work(sl_train *t, int rows, sl_acts *a);
void sl_acts_free_work(sl_train *t, sl_acts *a);
void sl_acts_map(sl_train *t, sl_acts *a, int l0, int l1, int rows, void *block, void *out, void *dout);
void sl_acts_map_input(sl_train *t, sl_acts *a, int l0, int l1, int rows, void *in, void *body, void *out,
                       void *dout);
/* The bytes of such a block for layers [l0, l1) at `rows` samples: everything they keep for
 * backward (full = 1), or their input alone (full = 0: what a recomputing technique keeps; it
 * heads the block); for the GPT, full = 2 (SL_GPT_KEEP_SELECTIVE) is all but the blocks'
 * attention core. The GPT's block is gpt_model.h's sl_gpt_acts_map_input: the tokens or the
 * residual stream first, then the blocks' tensors; its last layer's target is a->g.tgt, the
 * MLP's a->y. */
size_t sl_acts_range_bytes(const sl_train *t, int l0, int l1, int rows, int full);
/* Bytes of the tensor entering layer l (0 <= l <= nlayers) at `rows` samples, as a range's input
 * or output (the GPT's layer 0: its tokens, int32; its l = nlayers: dL/d(final norm output),
 * which the head's forward leaves where sl_acts_map's dout says). */
size_t sl_acts_io_bytes(const sl_train *t, int l, int rows);
/* Layer l's kernels alone, with its parameter block lp (t->dtype); no hooks, no phase recorded
 * and no sync: the caller times the layer (pipeline stages, checkpointing's recomputation).
 * Forward; with slot x[l + 1] NULL only z[l] is computed (a recomputed segment's top layer).
 * Backward from dy into dx (NULL: not computed) with its weight gradient into lg: accumulated
 * (+=) in f32; in 16 bits rounded into lg, or, with sum (the layer's block of an f32
 * accumulator), summed there over micro-batches as sl_acts_backward does (a->first, a->last). */
void sl_acts_layer_forward(sl_train *t, sl_acts *a, int l, const void *lp);
void sl_acts_layer_backward(sl_train *t, sl_acts *a, int l, void *dy, void *dx, const void *lp, void *lg,
                            float *sum);

/* The unscaled f32 gradient of g[n] (t->dtype) for the optimizer: in 16 bits g / scale into
 * g32 (an f32 twin), counting inf/NaN into the step's flag; in f32 g itself (g32 NULL).
 * Phase compute. */
const float *sl_train_unscale(sl_train *t, const void *g, float *g32, size_t n);
/* The step's verdict, once a step after every sl_train_unscale: in 16 bits the OR over the ranks
 * of their flags (sl_train_overflow_any: collective, the world) fed to the loss scaler; in f32
 * always 1, without communication. 1: apply the step (sl_train_apply), 0: every rank skips it. */
int sl_train_decide(sl_train *t);
/* The verdict of a rank whose updates are its own, at its own times (pipedream's stages step
 * after each backward, with no point where all ranks meet): from this rank's flag alone,
 * without communication. 16 bits: a step with inf/NaN is skipped, and the loss scale never
 * changes (every stage must unscale a micro-batch's gradient by the scale its loss was
 * multiplied with). f32: sl_train_decide. */
int sl_train_decide_alone(sl_train *t);
/* The optimizer on master[n] (f32 twin; NULL in f32: w itself) from g32 with state, then the
 * weights w (t->dtype) cast from it. Without a master copy (16 bits, master NULL: t->master 0)
 * the optimizer runs on w widened into sl_train_wide and the result is rounded back into w,
 * counting the updates lost (t->cnt.lost_updates). Phase compute. */
void sl_train_apply(sl_train *t, void *w, float *master, const float *g32, float *state, size_t n);
/* An f32 workspace of t->nparams (SL_MEM_OTHER), allocated at the first call and freed with the
 * run: where a run without a master copy widens its weights. */
float *sl_train_wide(sl_train *t);

/* A full replica ------------------------------------------------------------------------- */

/* What data parallelism holds on a rank: the weights (initialised from the seed) and their
 * gradients in t->dtype with their f32 twins (master weights, unscaled gradients: NULL in
 * f32; master NULL too without a master copy, t->master 0), the optimizer state (f32), and the
 * activations of up to `rows` samples, each counted under its category. */
typedef struct sl_replica {
    void *params, *grads;
    float *master, *g32;
    float *optim;
    sl_acts acts;
} sl_replica;
void sl_replica_alloc(sl_train *t, int rows, sl_replica *r);
/* The same with the activations left to place (sl_acts_place); a technique with its own model
 * (.init_params) places none. */
void sl_replica_place(sl_train *t, int rows, sl_replica *r);
void sl_replica_free(sl_train *t, sl_replica *r);
/* Load samples [first, first + count) of the step, forward, loss, and backward into r->grads
 * (accumulated in f32: see sl_acts_backward), with the hooks on every layer both ways. */
void sl_replica_forward_backward(sl_train *t, sl_replica *r, int first, int count,
                                 const sl_layer_hooks *h);
/* This rank's samples of the step, [t->lo, t->hi), in `micro` micro-batches of at most the
 * replica's rows: forward, loss, backward, the gradients summed (in f32) into r->grads; the
 * hooks run on every layer of the last micro-batch. */
void sl_replica_gradients(sl_train *t, sl_replica *r, int micro, const sl_layer_hooks *h);
/* The update of flat elements [off, off + count) after their gradients are summed: unscale,
 * the decision, the optimizer (state: that slice's). Collective in 16 bits (the decision). */
void sl_replica_update(sl_train *t, sl_replica *r, size_t off, size_t count, float *state);
/* Data parallelism's step on a replica: its gradients summed over t->comm in t->dtype when it
 * has several ranks (phase comm), then sl_replica_update of the whole vector with r->optim. */
void sl_replica_step(sl_train *t, sl_replica *r);
/* The replica's weights in f32 (the master copy, or the weights themselves in f32), the whole
 * vector: *first 0, *count its length (either may be NULL), for a technique's .weights. */
const float *sl_replica_weights(const sl_train *t, const sl_replica *r, size_t *first, size_t *count);
/* The replica's bytes by category (params, grads, optim: the whole vector's; activ: rows'). */
sl_mlp_bytes sl_replica_memory(const sl_train *t, int rows);
/* The same as a technique's memory_model gives it (bytes[SL_MEM_PARAMS .. SL_MEM_ACTIV]). */
void sl_replica_memory_model(const sl_train *t, int rows, double bytes[SL_MEM_NCATS]);

/* The step as the performance model reads it (train_perf.c) --------------------------------
 *
 * A technique's .schedule states its step with these, in its step's order, and with
 * perf_model.h's sl_pm_start / sl_pm_wait / sl_pm_comm for what it communicates (counts of
 * t->dtype elements, as sl_coll_* takes them). The layers' GEMMs are the model's own (the MLP's
 * Linear layers; the GPT's four linears a block, its attention core as per-head GEMMs, its head),
 * in the run's dtype: a forward's one per linear, a backward's two (dW, accumulated, and dx, none
 * for the first layer); element-wise work is counted as the bytes its kernels read and write. */

/* Loading `rows` samples: the batch's bytes (phase data). */
void sl_pm_load(const sl_train *t, sl_pm_sched *s, int rows);
/* Layer l's forward, and backward, on `rows` samples (the GPT's last layer: its loss too). */
void sl_pm_layer_forward(const sl_train *t, sl_pm_sched *s, int l, int rows);
void sl_pm_layer_backward(const sl_train *t, sl_pm_sched *s, int l, int rows);
/* The loss's element-wise work on `rows` samples (none for the GPT: its last layer's). */
void sl_pm_loss(const sl_train *t, sl_pm_sched *s, int rows);
/* The load, forward, loss and backward of every layer on `rows` samples. */
void sl_pm_forward_backward(const sl_train *t, sl_pm_sched *s, int rows);
/* The optimizer step on n elements (16 bits: the unscale and the cast back too). */
void sl_pm_optimizer(const sl_train *t, sl_pm_sched *s, size_t n);

/* Helpers ------------------------------------------------------------------------------- */

/* A technique's check that trains a reference of its own after the run (checkpointing's
 * store-all, vdnn's none): sl_train_aside keeps the run's step, loss scaler and verdict aside,
 * starts a fresh scaler for t->dtype and leaves the trace off (the check is not part of the
 * timeline); sl_train_back puts them back. */
typedef struct sl_train_saved {
    int step, tracing, scaled;
    sl_train_mixed_state ms;
    sl_optim optim_now;
    size_t nonfinite;
} sl_train_saved;
void sl_train_aside(sl_train *t, sl_train_saved *sv);
void sl_train_back(sl_train *t, const sl_train_saved *sv);
/* Elements of es bytes of a[n] and b[n] (backend memory) whose bits differ. */
long long sl_bit_differences(sl_backend be, size_t n, size_t es, const void *a, const void *b);

/* Contiguous share [lo, hi) of n items for part p of parts: the first n % parts get one more. */
void sl_share(size_t n, int parts, int p, size_t *lo, size_t *hi);
/* A communication call that must succeed: anything but SL_COLL_OK is fatal, naming `what`. */
void sl_train_coll_ok(int rc, const char *what);
/* sl_k_malloc on t's backend under cat, one byte where bytes is 0 (a rank's empty slice still
 * gets a buffer of its own, which sl_k_free takes like any other). */
void *sl_train_alloc(sl_train *t, sl_mem_cat cat, size_t bytes);

#endif
