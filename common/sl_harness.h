/* sl_harness.h — the life of a scalelab program: parse the command line, start MPI, open the
 * results directory (manifest.json once per run, <benchmark>.jsonl), time iterations, emit
 * results, finish with a verdict and an exit status.
 *
 *   static const sl_program prog = { .name = "mae_threads", ... };
 *   int main(int argc, char **argv) {
 *       sl_ctx ctx;
 *       sl_init(&ctx, &prog, argc, argv);
 *       ... sl_time_loop(&ctx, body, arg, &stats); sl_result_emit(&ctx, &r); ...
 *       return sl_finalize(&ctx);
 *   }
 */
#ifndef SL_HARNESS_H
#define SL_HARNESS_H

#include <limits.h>
#include <mpi.h>
#include <stdio.h>

#include "sl_error.h"
#include "sl_options.h"
#include "sl_papi.h"
#include "sl_results.h"
#include "sl_stats.h"

typedef struct sl_ctx {
    const sl_program *prog;
    sl_options opt;
    MPI_Comm comm;
    int rank, nranks;
    char run_id[96];
    char out_dir[PATH_MAX];
    FILE *jsonl;             /* rank 0 only */
    char jsonl_path[PATH_MAX + 64]; /* its path, for messages */
    const sl_column *cols;   /* the stdout table */
    int ncols;
    int status;              /* exit status so far: 0, or 1 once a check failed */
    int nrows, nfailed;
    sl_papi papi;
    char cmdline[1024];
    int node_ranks;          /* ranks on the busiest node, and the CPUs they may use there */
    int node_cpus;
    sl_mpi_thread mpi_thread_requested, mpi_thread_provided; /* in the manifest */
} sl_ctx;

/* Parses the command line (usage error: message, exit 2; --help/--version: print, exit 0),
 * initialises MPI, creates the results directory, writes manifest.json if this run has none
 * yet, opens <benchmark>.jsonl and prints the run header. */
void sl_init(sl_ctx *ctx, const sl_program *prog, int argc, char **argv);

/* Rank 0: opens <out_dir>/<benchmark>.<suffix> of the results directory for appending (the
 * jsonl, or a program's side file such as precision.curve.tsv), its path into `path`; never
 * through a symbolic link. Exit 3 naming the file when it cannot be opened. Write to it with
 * sl_results_append_line. */
FILE *sl_results_file_open(const sl_ctx *ctx, const char *suffix, char *path, size_t pathlen);

/* Prints the verdict line, writes the trace if --trace, finalises MPI and returns the exit
 * status for main: 0, or 1 if any check failed on any rank. */
int sl_finalize(sl_ctx *ctx);

/* Placement (placement.c): sl_init fills node_ranks and node_cpus. A program is oversubscribed
 * when node_ranks x threads_per_rank > node_cpus; sl_init notes it for one thread per rank, and
 * a program that runs more threads per rank notes it with its own count. */
void sl_placement_capture(sl_ctx *ctx); /* collective */
int sl_oversubscribed(const sl_ctx *ctx, int threads_per_rank);
void sl_note_oversubscription(const sl_ctx *ctx, int threads_per_rank);

/* printf on rank 0 only (and not under --quiet). */
void sl_print(const sl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note that is printed even under --quiet, on rank 0, prefixed with "# ". */
void sl_note(const sl_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs body(arg) opt.warmup times untimed, then opt.iters times, each iteration between a
 * barrier and a host timestamp on every rank; stats are over each iteration's slowest rank.
 * PAPI counters (--papi) are read around the timed iterations into ctx->papi and into stats,
 * and so reach every row whose time these stats are (sl_result_emit). */
typedef void (*sl_body_fn)(void *arg);
void sl_time_loop(sl_ctx *ctx, sl_body_fn body, void *arg, sl_stats *stats);
/* The same with explicit counts (iters >= 1). */
void sl_time_loop_n(sl_ctx *ctx, int warmup, int iters, sl_body_fn body, void *arg,
                    sl_stats *stats);
/* The timed iterations of sl_time_loop_n alone (no warm-up, no statistics): this rank's time
 * of each into local[0..iters), the PAPI counters read around them added to counters[] (NULL:
 * not kept). For a loop timed in chunks that alternate with another loop's, so that both see
 * the same machine (allreduce's reference loop); its statistics are then taken over all its
 * chunks (sl_stats_over_ranks), and sl_stats_add_counters puts the counters' sums in them. */
void sl_time_iterations(sl_ctx *ctx, int iters, sl_body_fn body, void *arg, double *local,
                        long long *counters);
void sl_stats_add_counters(const sl_ctx *ctx, const long long *counters, sl_stats *stats);

/* Waits for an MPI request without spinning: tests it, sleeping poll_ns between tests. For
 * ranks that wait while others are measured, or while more ranks than cores share a node: a
 * rank spinning in MPI holds a core that the rank being waited for needs. */
void sl_mpi_wait_quietly(MPI_Request *req, long poll_ns);

#endif
