/* pm_platform.h — a described machine for the performance model (perf_model.h): the primitives
 * a step's schedule is charged at, read from a small platform file rather than measured here,
 * so that a configuration can be predicted on a machine (or a rank count) this one is not
 * (`--predict FILE --predict-ranks LIST` on every training program with a schedule).
 *
 * The file format (docs/predict.md): one `key = value` a line, `#` starts a comment.
 *   name, source          what the figures describe and where they come from (required)
 *   compute = measured    GEMMs and element-wise bandwidth measured on this rank, as the
 *                         simulator charges compute as timed on this machine; or:
 *   gemm_f32, gemm_f16, gemm_bf16   GEMM rate, FLOP/s (a GEMM of m n k costs 2mnk / rate)
 *   bw                    element-wise bytes (read + written) per second
 *   reduce_bw             the same for a collective's additions (default bw)
 *   group                 ranks on the fast level (a node, a leaf switch); 0: one level
 *   alpha, link_bw        a message's latency (s) and a rank's link (bytes/s each way) in a group
 *   alpha_far, link_bw_far  the same between groups (required where group > 0)
 *   segment               bytes an algorithm cuts a step's message into, each paying alpha (0: none)
 *   mpi, nccl             the algorithm (ring|rhd|tree) `-C mpi` / `-C nccl` stands for (optional)
 *   background            1: operations progress while the rank computes; 0: where started
 *   h2d_bw, h2d_alpha     a host<->device copy's bytes/s (each way) and latency (s, default 0):
 *                         the copies of an offload (vdnn); a schedule with copies refuses a file
 *                         without h2d_bw rather than charge them nothing
 *
 * From link alpha and beta = 1 / link_bw, each operation of p ranks gets its alpha-beta by the
 * algorithm's cost model (pm_platform.c says which), in the form perf_model.h charges:
 * t = alpha_op + beta_op x bytes of the operation as the schedule states it. */
#ifndef SL_PM_PLATFORM_H
#define SL_PM_PLATFORM_H

#include <stddef.h>

#include "perf_model.h"

typedef enum { SL_PMA_RING, SL_PMA_RHD, SL_PMA_TREE, SL_PMA_N } sl_pm_algo;
/* "ring" "rhd" "tree" */
const char *sl_pm_algo_name(sl_pm_algo a);

typedef struct sl_pm_platform {
    char path[256];
    char name[64], source[200];
    int measured;                  /* compute = measured */
    double gemm[SL_NDTYPES];       /* FLOP/s; 0: not given */
    double bw, reduce_bw;           /* reduce_bw < 0: bw */
    long group;
    double alpha, link_bw, alpha_far, link_bw_far, segment;
    int mpi, nccl;                 /* sl_pm_algo, or -1: not stated */
    int background;
    double h2d_alpha, h2d_bw;      /* host<->device copies; h2d_bw < 0: not given */
} sl_pm_platform;

/* Reads path into pl. 0, or -1 with one line in err naming the file (and line) and what is wrong. */
int sl_pm_platform_load(const char *path, sl_pm_platform *pl, char *err, size_t errlen);

/* The algorithm the suite's collective `coll` (its -C name) runs on pl, or -1 (with why in err). */
int sl_pm_platform_algo(const sl_pm_platform *pl, const char *coll, char *err, size_t errlen);

/* prims's communication for p ranks running algorithm a (alpha, beta of every operation), its
 * element-wise bandwidth and background flag from pl, and the host<->device copies' alpha-beta
 * (on a copy engine beside the compute: background_ops, as a measured run charges them).
 * GEMMs: sl_pm_platform_gemms. */
void sl_pm_platform_prims(const sl_pm_platform *pl, sl_pm_algo a, int p, sl_pm_prims *out);

/* The reductions' additions (gamma) added to io's beta of each reducing operation, at reduce_bw
 * bytes (read + written) per second: the platform's reduce_bw or bw, or measured. */
void sl_pm_platform_gamma(sl_pm_algo a, int p, double reduce_bw, sl_pm_prims *io);

/* Each shape of s at 2mnk / pl's rate for its dtype into out's GEMM table; -1 when pl gives no
 * rate for s's dtype. */
int sl_pm_platform_gemms(const sl_pm_platform *pl, const sl_pm_sched *s, sl_pm_prims *out);

#endif
