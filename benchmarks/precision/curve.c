/* curve.c — the loss curves of precision.c's runs, in the terminal and in precision.curve.tsv
 * (see curve.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "curve.h"

int curve_next(int s, int every, int steps)
{
    if (s + every < steps) return s + every;
    return s < steps - 1 ? steps - 1 : steps; /* the last step ends the curve, sampled or not */
}

FILE *curve_file_open(const sl_ctx *ctx, char *path, size_t pathlen)
{
    if (ctx->rank != 0) return NULL;
    FILE *f = sl_results_file_open(ctx, "curve.tsv", path, pathlen);
    /* appended to like the jsonl: the header only in a new file */
    struct stat st;
    if (fstat(fileno(f), &st) != 0) SL_FATAL("cannot write %s: %s", path, strerror(errno));
    if (st.st_size == 0) sl_results_append_line(f, path, "variant\tstep\tloss\tscale");
    return f;
}

void curve_file_write(FILE *f, const char *path, const run_result *r, int every)
{
    if (!f) return;
    char name[48], line[160];
    run_name(&r->cfg, name, sizeof name);
    for (int s = 0; s < r->steps; s = curve_next(s, every, r->steps)) {
        snprintf(line, sizeof line, "%s\t%d\t%.17g\t%.17g", name, s, r->log[s].loss, r->log[s].scale);
        sl_results_append_line(f, path, line);
    }
}

void curve_file_close(FILE *f, const char *path)
{
    if (f && fclose(f) != 0) SL_FATAL("cannot close %s: %s", path, strerror(errno));
}

/* "2^16" for a power of two (a loss scale always is one: the options require it), else %g. */
static const char *pow2(double v, char *buf, size_t len)
{
    int e;
    if (isfinite(v) && v > 0 && frexp(v, &e) == 0.5) snprintf(buf, len, "2^%d", e - 1);
    else snprintf(buf, len, "%g", v);
    return buf;
}

/* Each change of a dynamic run's scale, from the scale every step ran with and the final one:
 * a fall is a backoff (the step overflowed and was skipped), a rise a growth. */
static void print_scale_changes(const sl_ctx *ctx, const run_result *r)
{
    char name[48], a[32], b[32];
    run_name(&r->cfg, name, sizeof name);
    sl_print(ctx, "# scale      %-22s %s at step 0, %s after the last step (%.17g): %ld backoffs (%ld steps skipped), "
                  "%ld growths%s\n", name, pow2(r->log[0].scale, a, sizeof a), pow2(r->final_scale, b, sizeof b),
             r->final_scale, r->backoffs, r->skipped, r->growths, r->backoffs + r->growths ? "; each change:" : "");
    for (int s = 0; s < r->steps; s++) {
        double now = r->log[s].scale, next = s + 1 < r->steps ? r->log[s + 1].scale : r->final_scale;
        if (next == now) continue;
        pow2(now, a, sizeof a), pow2(next, b, sizeof b);
        if (next < now)
            sl_print(ctx, "# scale      %-22s   after step %5d: backoff %s -> %s (inf/NaN gradients%s)\n", name, s, a, b,
                     r->log[s].skipped ? ": the step was skipped" : "");
        else
            sl_print(ctx, "# scale      %-22s   after step %5d: growth  %s -> %s (--growth-interval clean steps in a row)\n", name, s, a, b);
    }
}

/* One terminal line: `head` then the sampled steps of r (its losses, or the step numbers when
 * r is NULL), as many as fit; the file has them all. */
static void print_curve_line(const sl_ctx *ctx, const char *head, const run_result *r, int steps, int every)
{
    char line[2048];
    int used = snprintf(line, sizeof line, "%s", head), s = 0;
    for (; s < steps && used < (int)sizeof line - 16; s = curve_next(s, every, steps))
        used += r ? snprintf(line + used, sizeof line - used, " %9.3e", r->log[s].loss)
                  : snprintf(line + used, sizeof line - used, " %9d", s);
    sl_print(ctx, "%s%s\n", line, s < steps ? " ... (every point: precision.curve.tsv)" : "");
}

void curve_print(const sl_ctx *ctx, const run_result *runs, int nruns, int every)
{
    char head[64], name[48];
    snprintf(head, sizeof head, "# loss curve %-22s", "(step)");
    print_curve_line(ctx, head, NULL, runs[0].steps, every);
    for (int i = 0; i < nruns; i++) {
        run_name(&runs[i].cfg, name, sizeof name);
        snprintf(head, sizeof head, "#            %-22s", name);
        print_curve_line(ctx, head, &runs[i], runs[i].steps, every);
    }
    for (int i = 0; i < nruns; i++)
        if (runs[i].cfg.mode == SL_SCALE_DYNAMIC) print_scale_changes(ctx, &runs[i]);
}
