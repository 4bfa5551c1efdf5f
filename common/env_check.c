/* env_check.c — the environment variables checked at start-up (sl_env_check.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_env_check.h"
#include "sl_error.h"

/* A whole number of threads in [1, SL_MAX_ENV_THREADS], digits only and no leading zero (as
 * scripts/sl-launch reads it), from s to *end. */
static int parse_threads(const char *s, const char **end)
{
    if (*s < '1' || *s > '9') return 0;
    errno = 0;
    char *e;
    long v = strtol(s, &e, 10);
    *end = e;
    return !errno && v >= 1 && v <= SL_MAX_ENV_THREADS;
}

/* OMP_NUM_THREADS: one count, or a comma-separated list of them (one per nesting level). */
static int omp_threads_ok(const char *v)
{
    for (const char *p = v;;) {
        if (!parse_threads(p, &p)) return 0;
        if (!*p) return 1;
        if (*p++ != ',') return 0;
    }
}

static int one_count_ok(const char *v)
{
    const char *end;
    return parse_threads(v, &end) && !*end;
}

int sl_env_check(char *err, size_t len)
{
    /* empty reads as unset, as sl-launch reads it */
    const char *v = getenv("OMP_NUM_THREADS");
    if (v && *v && !omp_threads_ok(v)) {
        snprintf(err, len, "OMP_NUM_THREADS '%.64s': expected a number of threads in [1, %d], or a "
                 "comma-separated list of them (one per nesting level)", v, SL_MAX_ENV_THREADS);
        return SL_EXIT_USAGE;
    }
    v = getenv("OPENBLAS_NUM_THREADS");
    if (v && *v && !one_count_ok(v)) {
        snprintf(err, len, "OPENBLAS_NUM_THREADS '%.64s': expected a number of threads in [1, %d]",
                 v, SL_MAX_ENV_THREADS);
        return SL_EXIT_USAGE;
    }
    v = getenv("SL_TEST_CORRUPT");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        snprintf(err, len, "SL_TEST_CORRUPT '%.64s': expected 1 (spoil one result, for the tests "
                 "of the checks) or 0 (off)", v);
        return SL_EXIT_USAGE;
    }
    v = getenv("SL_NO_PHASES");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        snprintf(err, len, "SL_NO_PHASES '%.64s': expected 1 (the training programs record no "
                 "phases, to measure what recording them costs) or 0 (record them)", v);
        return SL_EXIT_USAGE;
    }
    v = getenv("SL_NO_PREDICT");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
        snprintf(err, len, "SL_NO_PREDICT '%.64s': expected 1 (the training programs neither "
                 "calibrate nor predict the step) or 0 (predict it)", v);
        return SL_EXIT_USAGE;
    }
    return 0;
}

int sl_test_corrupt(void)
{
    const char *v = getenv("SL_TEST_CORRUPT");
    return v && strcmp(v, "1") == 0;
}

int sl_no_phases(void)
{
    const char *v = getenv("SL_NO_PHASES");
    return v && strcmp(v, "1") == 0;
}

int sl_no_predict(void)
{
    const char *v = getenv("SL_NO_PREDICT");
    return v && strcmp(v, "1") == 0;
}
