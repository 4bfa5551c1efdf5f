/* results.c — a measurement as a jsonl row (results/schema.md) and as a stdout table row. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_expected.h"
#include "sl_harness.h"
#include "sl_json.h"
#include "sl_sim.h"
#include "sl_results.h"

static const char *const check_names[] = {"pass", "fail", "skipped", "not_asserted", "none"};

const char *sl_check_status_name(sl_check_status s) { return check_names[s]; }

void sl_result_init(sl_ctx *ctx, sl_result *r, const char *variant)
{
    memset(r, 0, sizeof *r);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    r->iters = (int)ctx->opt.iters;
    r->warmup = (int)ctx->opt.warmup;
    r->check = ctx->opt.check ? SL_CHECK_NONE : SL_CHECK_SKIPPED;
}

static void copy_name(char *dst, size_t len, const char *src, const char *what)
{
    if (strlen(src) >= len) SL_FATAL("%s name '%s' is longer than %zu characters", what, src, len - 1);
    snprintf(dst, len, "%s", src);
}

void sl_result_param_num(sl_result *r, const char *name, double v)
{
    if (r->nparams == SL_MAX_PARAMS) SL_FATAL("more than %d parameters in one result", SL_MAX_PARAMS);
    sl_param *p = &r->params[r->nparams++];
    copy_name(p->name, sizeof p->name, name, "parameter");
    p->is_num = 1;
    p->num = v;
}

void sl_result_param_str(sl_result *r, const char *name, const char *v)
{
    if (r->nparams == SL_MAX_PARAMS) SL_FATAL("more than %d parameters in one result", SL_MAX_PARAMS);
    sl_param *p = &r->params[r->nparams++];
    copy_name(p->name, sizeof p->name, name, "parameter");
    snprintf(p->str, sizeof p->str, "%s", v ? v : "");
}

void sl_result_metric(sl_result *r, const char *name, double value, const char *unit)
{
    if (r->nmetrics == SL_MAX_METRICS) SL_FATAL("more than %d metrics in one result", SL_MAX_METRICS);
    sl_metric *m = &r->metrics[r->nmetrics++];
    copy_name(m->name, sizeof m->name, name, "metric");
    m->value = value;
    snprintf(m->unit, sizeof m->unit, "%s", unit ? unit : "");
}

double sl_result_get(const sl_result *r, const char *name)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) return r->metrics[i].value;
    for (int i = 0; i < r->nparams; i++)
        if (r->params[i].is_num && strcmp(r->params[i].name, name) == 0) return r->params[i].num;
    return NAN;
}

void sl_result_set_time(sl_result *r, const sl_stats *s)
{
    r->has_time = 1;
    r->time = *s;
    r->iters = s->n;
}

void sl_result_gate(sl_result *r, const char *metric)
{
    r->gate[0] = 0;
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, metric) == 0 && !isnan(r->metrics[i].value))
            copy_name(r->gate, sizeof r->gate, metric, "gate metric");
}

void sl_result_check(sl_result *r, sl_check_status status, double error, const char *fmt, ...)
{
    r->check = status;
    r->check_error = error;
    r->check_msg[0] = 0;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->check_msg, sizeof r->check_msg, fmt, ap);
        va_end(ap);
    }
}

void sl_result_to_json(const sl_ctx *ctx, const sl_result *r, sl_json *j)
{
    sl_json_obj_begin(j, NULL);
    sl_json_int(j, "schema_version", SL_SCHEMA_VERSION);
    sl_json_str(j, "run_id", ctx->run_id);
    sl_json_str(j, "benchmark", ctx->prog->name);
    sl_json_str(j, "variant", r->variant);
    sl_json_str(j, "backend", r->backend);
    sl_json_str(j, "collective", r->collective);
    sl_json_str(j, "dtype", r->dtype);
    sl_json_int(j, "ranks", ctx->nranks);
    sl_sim_json(j); /* "simulated": {...} under the simulator only */

    sl_json_obj_begin(j, "params");
    for (int i = 0; i < r->nparams; i++) {
        if (r->params[i].is_num)
            sl_json_num(j, r->params[i].name, r->params[i].num);
        else
            sl_json_str(j, r->params[i].name, r->params[i].str);
    }
    sl_json_obj_end(j);

    sl_json_obj_begin(j, "iterations");
    sl_json_int(j, "timed", r->iters);
    sl_json_int(j, "warmup", r->warmup);
    sl_json_obj_end(j);

    if (r->has_time) {
        sl_json_obj_begin(j, "time");
        sl_json_str(j, "unit", "s");
        sl_json_num(j, "min", r->time.min);
        sl_json_num(j, "median", r->time.median);
        sl_json_num(j, "mean", r->time.mean);
        sl_json_num(j, "max", r->time.max);
        sl_json_num(j, "p95", r->time.p95);
        sl_json_num(j, "cv", r->time.cv);
        sl_json_num(j, "rank_mean", r->time.rank_mean);
        sl_json_arr_begin(j, "samples");
        for (int i = 0; i < r->time.nsketch; i++) sl_json_num(j, NULL, r->time.sketch[i]);
        sl_json_arr_end(j);
        sl_json_str(j, "samples_kind", r->time.sketch_all ? "all" : "quantiles");
        sl_json_obj_end(j);
    } else {
        sl_json_null(j, "time");
    }

    sl_json_obj_begin(j, "metrics");
    for (int i = 0; i < r->nmetrics; i++) {
        sl_json_obj_begin(j, r->metrics[i].name);
        sl_json_num(j, "value", r->metrics[i].value);
        sl_json_str(j, "unit", r->metrics[i].unit);
        sl_json_obj_end(j);
    }
    sl_json_obj_end(j);
    sl_json_str(j, "headline", r->headline[0] ? r->headline : NULL);
    sl_json_str(j, "gate", r->gate[0] ? r->gate : NULL);

    sl_json_obj_begin(j, "check");
    sl_json_str(j, "status", check_names[r->check]);
    sl_json_num(j, "error", r->check_error);
    sl_json_str(j, "message", r->check_msg[0] ? r->check_msg : NULL);
    sl_json_obj_end(j);

    sl_json_obj_begin(j, "counters");
    for (int i = 0; i < r->ncounters; i++) sl_json_int(j, r->counter_names[i], r->counter_values[i]);
    sl_json_obj_end(j);
    sl_json_obj_end(j);
}

/* The text of one table cell for column c. */
static void cell(const sl_result *r, const sl_column *c, char *buf, size_t len)
{
    const char *k = c->key;
    const char *s = NULL;
    if (strcmp(k, "variant") == 0) s = r->variant;
    else if (strcmp(k, "dtype") == 0) s = r->dtype;
    else if (strcmp(k, "backend") == 0) s = r->backend;
    else if (strcmp(k, "collective") == 0) s = r->collective;
    else if (strcmp(k, "check") == 0) s = check_names[r->check];
    if (s || strcmp(k, "variant") == 0 || strcmp(k, "dtype") == 0 || strcmp(k, "backend") == 0 ||
        strcmp(k, "collective") == 0) {
        snprintf(buf, len, "%s", s ? s : "-");
        return;
    }
    for (int i = 0; i < r->nparams; i++)
        if (!r->params[i].is_num && strcmp(r->params[i].name, k) == 0) {
            snprintf(buf, len, "%s", r->params[i].str);
            return;
        }

    double v = NAN;
    if (strcmp(k, "error") == 0) v = r->check_error;
    else if (strncmp(k, "time.", 5) == 0 && r->has_time) {
        const char *f = k + 5;
        v = !strcmp(f, "min") ? r->time.min : !strcmp(f, "median") ? r->time.median
          : !strcmp(f, "mean") ? r->time.mean : !strcmp(f, "max") ? r->time.max
          : !strcmp(f, "p95") ? r->time.p95 : !strcmp(f, "cv") ? r->time.cv
          : !strcmp(f, "rank_mean") ? r->time.rank_mean : NAN;
    } else
        v = sl_result_get(r, k);
    if (isnan(v)) {
        snprintf(buf, len, "n/a");
        return;
    }
    v *= c->scale != 0 ? c->scale : 1.0;
    if (c->prec < 0)
        snprintf(buf, len, "%.*g", -c->prec, v);
    else if (fabs(v) >= 1e9 || (v != 0 && fabs(v) < 1e-4 && c->prec > 0))
        snprintf(buf, len, "%.*e", c->prec > 0 ? c->prec : 2, v);
    else
        snprintf(buf, len, "%.*f", c->prec, v);
}

void sl_table_begin(sl_ctx *ctx, const sl_column *cols, int ncols)
{
    ctx->cols = cols;
    ctx->ncols = ncols;
    if (ctx->rank != 0 || ctx->opt.quiet) return;
    char line[1024];
    size_t used = 0;
    for (int i = 0; i < ncols && used < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, " %*s", cols[i].width, cols[i].title);
    line[0] = '#'; /* the title and units rows are comments for awk '!/^#/' */
    printf("%s\n", line);
    used = 0;
    for (int i = 0; i < ncols && used < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, " %*s", cols[i].width,
                                 cols[i].unit && cols[i].unit[0] ? cols[i].unit : "");
    line[0] = '#';
    printf("%s\n", line);
    fflush(stdout);
}

/* The counters of the timed loop that r's time comes from (sl_stats), named after the run's
 * --papi events, unless the row has counters of its own: every program's rows carry them
 * without asking. */
static void attach_counters(const sl_ctx *ctx, sl_result *r)
{
    if (r->ncounters || !r->has_time) return;
    for (int i = 0; i < r->time.ncounters && i < ctx->papi.nevents && i < SL_MAX_COUNTERS; i++) {
        snprintf(r->counter_names[i], sizeof r->counter_names[0], "%s", ctx->papi.names[i]);
        r->counter_values[i] = r->time.counters[i];
        r->ncounters = i + 1;
    }
}

/* Appends one row (a jsonl row, or a line of a side file) and its newline and flushes it. A row
 * that cannot be written whole (a full disk, a quota, an I/O error) is cut back off the file,
 * so that every line in it is a whole row, and the program stops: exit 3 naming the file and
 * the reason. It never goes on measuring into rows that are lost. */
void sl_results_append_line(FILE *f, const char *path, const char *row)
{
    struct stat st;
    int fd = fileno(f);
    /* Straight to the file descriptor, not through stdio: a buffer that failed to flush would be
     * written again (in part) at exit, after the cut below. */
    off_t before = fflush(f) == 0 && fstat(fd, &st) == 0 ? st.st_size : -1;
    if (before < 0) SL_FATAL("cannot write %s: %s", path, strerror(errno));
    size_t len = strlen(row), done = 0;
    char *line = malloc(len + 1);
    if (!line) SL_FATAL("out of memory for a result row of %zu bytes", len + 1);
    memcpy(line, row, len);
    line[len++] = '\n';
    int err = 0;
    while (done < len) {
        ssize_t n = write(fd, line + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)n;
    }
    free(line);
    if (err) {
        /* drop what the failed write left behind: a partial row would read as a broken line */
        if (done && ftruncate(fd, before) != 0)
            SL_FATAL("cannot write a result row to %s: %s; and cannot cut the partial row off: %s",
                     path, strerror(err), strerror(errno));
        SL_FATAL("cannot write a result row to %s: %s; stopping (the rows already written are "
                 "whole)", path, strerror(err));
    }
}

void sl_result_emit(sl_ctx *ctx, const sl_result *row)
{
    sl_result full = *row, *r = &full;
    attach_counters(ctx, r);
    if (r->check == SL_CHECK_FAIL) {
        ctx->status = SL_EXIT_CHECK;
        ctx->nfailed++;
    }
    ctx->nrows++;
    if (ctx->rank != 0) return;
    /* beside the measured figure, what this hardware should give (results/expected) */
    int multi_host = ctx->node_ranks > 0 && ctx->node_ranks < ctx->nranks;
    sl_expected_apply(sl_expected_here(), ctx->prog->name, multi_host, ctx->nranks, r);

    sl_json j;
    sl_json_init(&j);
    sl_result_to_json(ctx, r, &j);
    if (ctx->jsonl)
        sl_results_append_line(ctx->jsonl, ctx->jsonl_path[0] ? ctx->jsonl_path : "the results file (jsonl)", j.buf);
    sl_json_free(&j);

    if (ctx->ncols && !ctx->opt.quiet) {
        char line[1024], c[64];
        size_t used = 0;
        for (int i = 0; i < ctx->ncols && used < sizeof line; i++) {
            cell(r, &ctx->cols[i], c, sizeof c);
            /* a space before every cell: a value wider than its column cannot run into the next */
            used += (size_t)snprintf(line + used, sizeof line - used, " %*s", ctx->cols[i].width, c);
        }
        printf("%s\n", line);
    }
    if (r->check == SL_CHECK_FAIL)
        fprintf(stderr, "%s: CHECK FAILED: %s: %s\n", ctx->prog->name, r->variant,
                r->check_msg[0] ? r->check_msg : "result differs from the reference");
    fflush(stdout);
}
