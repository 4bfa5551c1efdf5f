/* curve.h — the loss curves of precision.c's runs: in the terminal (`# loss curve` lines, and
 * every change of a dynamic loss scale on `# scale` lines) and in the results directory as
 * precision.curve.tsv, one line per sampled step of each run (results/schema.md). The curve
 * is a time series, not a measurement of its own: in the jsonl rows it would be two metrics per
 * point, and a row holds at most SL_MAX_METRICS. */
#ifndef PRECISION_CURVE_H
#define PRECISION_CURVE_H

#include "run.h"
#include "scalelab.h"

/* The sampled steps: 0, every, 2 every, ... and the last step; this returns the step after s
 * (steps when s is the last). */
int curve_next(int s, int every, int steps);

/* Rank 0 opens <out>/precision.curve.tsv (a header line when it is new); NULL elsewhere. */
FILE *curve_file_open(const sl_ctx *ctx, char *path, size_t pathlen);
/* Appends run r's sampled steps (variant, step, loss, scale), each line checked (exit 3 naming
 * the file when one cannot be written). Call it as each run ends. */
void curve_file_write(FILE *f, const char *path, const run_result *r, int every);
void curve_file_close(FILE *f, const char *path);

/* The terminal: one `# loss curve` line per run at the sampled steps, then, for each run with
 * dynamic scaling, a `# scale` summary line and one line per change of its scale (each backoff
 * and growth, with the step that caused it). */
void curve_print(const sl_ctx *ctx, const run_result *runs, int nruns, int every);

#endif
