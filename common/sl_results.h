/* sl_results.h — one measurement, written as a jsonl row and as a line of the stdout table.
 *
 * A benchmark fills an sl_result (what was run, its time statistics, its metrics with units,
 * its check) and calls sl_result_emit: rank 0 appends one JSON object to
 * <out>/<benchmark>.jsonl and flushes it at once (a crash later loses nothing already
 * measured), then prints the row of the fixed-column table. The format is results/schema.md.
 */
#ifndef SL_RESULTS_H
#define SL_RESULTS_H

#include <stdio.h>

#include "sl_stats.h"

#define SL_SCHEMA_VERSION 2
#define SL_MAX_PARAMS 48 /* a pipeline row with the step prediction has 32 */
#define SL_MAX_METRICS 96 /* megatron_mlp --model gpt seqpar with the step prediction has 70 */
#define SL_MAX_COUNTERS 8

typedef enum {
    SL_CHECK_PASS,         /* agreed with the reference */
    SL_CHECK_FAIL,         /* disagreed: the program exits 1 */
    SL_CHECK_SKIPPED,      /* --check 0 */
    SL_CHECK_NOT_ASSERTED, /* reported but by design not a pass/fail (e.g. the racy variant) */
    SL_CHECK_NONE,         /* nothing to check (a bandwidth probe) */
} sl_check_status;

/* "pass" "fail" "skipped" "not_asserted" "none": the row's check.status */
const char *sl_check_status_name(sl_check_status s);

typedef struct sl_param {
    char name[32];
    int is_num;
    double num;
    char str[192]; /* pred_fit: an alpha-beta for each operation and group of a step */
} sl_param;

typedef struct sl_metric {
    char name[32];
    double value; /* NaN: not applicable (written as null) */
    char unit[16];
} sl_metric;

typedef struct sl_result {
    char variant[48];
    const char *backend, *collective, *dtype; /* NULL -> null in the row */
    int iters, warmup;
    int has_time;
    sl_stats time; /* seconds, per iteration, slowest rank */
    int nparams, nmetrics, ncounters;
    sl_param params[SL_MAX_PARAMS];
    sl_metric metrics[SL_MAX_METRICS];
    char counter_names[SL_MAX_COUNTERS][64];
    long long counter_values[SL_MAX_COUNTERS];
    char headline[32]; /* name of the metric that summarises this row */
    char gate[32];     /* the metric a regression gate compares (sl_result_gate); "" -> null */
    sl_check_status check;
    double check_error;  /* largest difference from the reference (0 when exact) */
    char check_msg[160]; /* what disagreed, or a note */
} sl_result;

struct sl_ctx;

/* Starts a result for `variant` with the run's iteration counts and check setting; the
 * benchmark sets backend, collective and dtype itself. */
void sl_result_init(struct sl_ctx *ctx, sl_result *r, const char *variant);
void sl_result_param_num(sl_result *r, const char *name, double v);
void sl_result_param_str(sl_result *r, const char *name, const char *v);
void sl_result_metric(sl_result *r, const char *name, double value, const char *unit);
/* Looks a metric or parameter up by name; NaN when absent. */
double sl_result_get(const sl_result *r, const char *name);
void sl_result_set_time(sl_result *r, const sl_stats *s);
/* Names the row's gate metric (results/schema.md, "gate"): a ratio, higher is better, of this
 * row's performance to a ceiling measured in the same run of the same program, so that a
 * machine slower overall does not move it. Set only when the row holds that metric with a
 * value (not NaN): a row whose ceiling was not measured keeps a null gate. Call it after the
 * metric. */
void sl_result_gate(sl_result *r, const char *metric);
void sl_result_check(sl_result *r, sl_check_status status, double error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Rank 0 writes and flushes the jsonl row and prints the table row; a failed check sets the
 * program's exit status to 1. Must be called on every rank (only rank 0 writes). A row with a
 * time from sl_time_loop and no counters of its own carries that loop's --papi counters. */
void sl_result_emit(struct sl_ctx *ctx, const sl_result *r);

/* Appends `line` and a newline to f (a results file: the jsonl, or a program's side file) and
 * flushes it, so that a later crash or hang loses nothing written; a line that cannot be
 * written whole is cut back off and the program stops, exit 3 naming `path` and the reason. */
void sl_results_append_line(FILE *f, const char *path, const char *line);

/* Serialises r as one JSON object (no newline) into j; used by emit and by the tests. */
struct sl_json;
void sl_result_to_json(const struct sl_ctx *ctx, const sl_result *r, struct sl_json *j);

/* A column of the stdout table. key selects what it shows:
 *   "variant" "dtype" "backend" "collective" "check" "error"
 *   "time.min" "time.median" "time.mean" "time.max" "time.p95" "time.cv"
 *   any parameter or metric name.
 * Numbers are multiplied by scale (e.g. 1e3 to show seconds as ms), printed with prec
 * decimals, or with SL_COL_SIG(n) as prec, n significant digits; NaN prints as "n/a". */
typedef struct sl_column {
    const char *title;
    const char *unit; /* the units row; "" for none */
    const char *key;
    int width;
    int prec;     /* decimals, or SL_COL_SIG(n) */
    double scale; /* 0 means 1 */
} sl_column;
/* n significant digits (%.ng): for figures that range over decades and are read against a
 * bound, as errors are, where a fixed number of decimals prints 0.004 against 1e-3 as "0.00". */
#define SL_COL_SIG(n) (-(n))

/* The columns most tables share, written once: a name or count without unit, the median and
 * p95 times in a unit (scale: seconds to that unit), the check. */
#define SL_COL(title, key, width) {title, "", key, width, 0, 0}
#define SL_COL_TIME(unit, scale, prec, width) {"time", unit, "time.median", width, prec, scale}
#define SL_COL_P95(unit, scale, prec, width) {"p95", unit, "time.p95", width, prec, scale}
#define SL_COL_CHECK(width) {"check", "", "check", width, 0, 0}
/* A relative error, in 3 significant digits. */
#define SL_COL_ERROR(title, key, width) {title, "rel", key, width, SL_COL_SIG(3), 0}

/* Declares the table of this program; prints the header and units rows (rank 0). */
void sl_table_begin(struct sl_ctx *ctx, const sl_column *cols, int ncols);

#endif
