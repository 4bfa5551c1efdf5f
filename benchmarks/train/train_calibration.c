/* train_calibration.c — --calibration DIR: the all-reduces' alpha-beta for the step's prediction
 * taken from an allreduce run's results (DIR/allreduce.jsonl, DESIGN.md's row format) instead of
 * the sweep train_perf.c runs at startup: the rows of the same algorithm (the row's collective,
 * the run's -C) on the same number of ranks, each size's median time, fitted with
 * sl_fit_alpha_beta over the sizes the step uses. Read once, at validation, so that a directory
 * that lacks what the run needs is a usage error before anything runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

enum { MAX_POINTS = 8192 };
typedef struct point {
    int impl;
    sl_dtype dt;
    double bytes, median;
} point;
static point pts[MAX_POINTS];
static int npts;

/* The text of key "key": in line at or after from, or NULL. */
static const char *after_key(const char *line, const char *from, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(from ? from : line, pat);
    return p ? p + strlen(pat) : NULL;
}

/* 1 when the row's string field `key` is `want`. */
static int str_is(const char *line, const char *key, const char *want)
{
    const char *v = after_key(line, NULL, key);
    const size_t n = strlen(want);
    return v && *v == '"' && !strncmp(v + 1, want, n) && v[1 + n] == '"';
}

/* One row of the file: kept when it is an all-reduce of a known algorithm on nranks ranks whose
 * check did not fail. */
static void take_row(const char *line, int nranks)
{
    if (!str_is(line, "benchmark", "allreduce") || !str_is(line, "op", "allreduce") || npts == MAX_POINTS) return;
    const char *ranks = after_key(line, NULL, "ranks"), *bytes = after_key(line, NULL, "bytes");
    const char *time = after_key(line, NULL, "time"), *med = time ? after_key(line, time, "median") : NULL;
    const char *check = after_key(line, NULL, "check");
    if (!ranks || atoi(ranks) != nranks || !bytes || !med || (check && after_key(line, check, "status") &&
                                                                 str_is(check, "status", "fail")))
        return;
    int impl = -1, dt = -1;
    for (int c = 0; c < SL_NCOLLS; c++)
        if (str_is(line, "collective", sl_coll_name((sl_coll)c))) impl = c;
    for (int d = 0; d < SL_NDTYPES; d++)
        if (str_is(line, "dtype", sl_dtype_name((sl_dtype)d))) dt = d;
    const double b = strtod(bytes, NULL), m = strtod(med, NULL);
    if (impl < 0 || dt < 0 || !(b > 0) || !(m > 0)) return;
    pts[npts++] = (point){impl, (sl_dtype)dt, b, m};
}

/* Distinct sizes of impl's rows (any dtype). */
static int sizes_of(int impl)
{
    int n = 0;
    for (int i = 0; i < npts; i++) {
        if (pts[i].impl != impl) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = pts[j].impl == impl && pts[j].bytes == pts[i].bytes;
        n += !seen;
    }
    return n;
}

void train_calibration_load(const char *dir, unsigned colls, int nranks)
{
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/allreduce.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        sl_usage_error("--calibration %s: no allreduce.jsonl there (expected the results directory of an allreduce "
                       "run, allreduce -o DIR)", dir);
    static char line[1 << 16];
    while (fgets(line, sizeof line, f)) take_row(line, nranks);
    fclose(f);
    if (nranks < 2) return; /* one rank: no all-reduce to fit (an in-place sum moves nothing) */
    for (int c = 0; c < SL_NCOLLS; c++)
        if ((colls >> c) & 1 && sizes_of(c) < 2)
            sl_usage_error("--calibration %s: allreduce.jsonl has %d sizes of collective %s on %d ranks, the fit needs "
                           "2 or more (run allreduce -C %s on %d ranks into it)",
                           dir, sizes_of(c), sl_coll_name((sl_coll)c), nranks, sl_coll_name((sl_coll)c), nranks);
}

int train_calibration_fit(sl_coll impl, sl_dtype dt, double lo, double hi, double *alpha, double *beta,
                          sl_dtype *from)
{
    double S[MAX_POINTS], T[MAX_POINTS];
    /* the run's dtype where DIR has it, else f32's rows (an all-reduce's cost is in its bytes) */
    int have = 0;
    for (int i = 0; i < npts && !have; i++) have = pts[i].impl == (int)impl && pts[i].dt == dt;
    *from = have ? dt : SL_F32;
    /* the sizes the step uses (a quarter below to four times above), where there are 2 of them;
     * else every size */
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int i = 0; i < npts; i++)
            if (pts[i].impl == (int)impl && pts[i].dt == *from &&
                (pass == 1 || (pts[i].bytes >= lo / 4 && pts[i].bytes <= 4 * hi)))
                S[n] = pts[i].bytes, T[n++] = pts[i].median;
        double rel;
        sl_fit_alpha_beta(S, T, n, alpha, beta, &rel);
        if (!isnan(*alpha) && *beta > 0) return 1;
    }
    return 0;
}
