/* tap.h — a minimal Test Anything Protocol producer for scalelab's C unit tests.
 *
 * Header-only so that each test is one .c file. Output is read by `prove`.
 *
 *   plan(3);                      or run tests then done_testing();
 *   ok(x == 1, "x is one");
 *   is_int(got, want, "counts match");
 *   is_double(got, want, 1e-12, "mean");   tolerance is absolute
 *   diag("seen %d", n);           comment lines (to stderr, shown by prove -v)
 *   skip_all("no CUDA device");   prints "1..0 # SKIP reason" and exits 0
 *   return exit_status();         non-zero when any test failed
 */
#ifndef SL_TAP_H
#define SL_TAP_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_run_count;
static int tap_fail_count;
static int tap_planned = -1;

static inline void plan(int n)
{
    tap_planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("# ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static inline int tap_vok(int pass, const char *fmt, va_list ap)
{
    tap_run_count++;
    if (!pass) tap_fail_count++;
    printf("%sok %d - ", pass ? "" : "not ", tap_run_count);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    return pass;
}

static inline int ok(int pass, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vok(pass, fmt, ap);
    va_end(ap);
    return pass;
}

#define is_int(got, want, ...)                                                     \
    do {                                                                           \
        long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);           \
        if (!ok(tap_g_ == tap_w_, __VA_ARGS__))                                    \
            diag("  got: %lld, expected: %lld (%s:%d)", tap_g_, tap_w_, __FILE__, \
                 __LINE__);                                                        \
    } while (0)

#define is_double(got, want, tol, ...)                                                 \
    do {                                                                               \
        double tap_g_ = (double)(got), tap_w_ = (double)(want);                        \
        int tap_pass_ = (isnan(tap_g_) && isnan(tap_w_)) ||                           \
                        (tap_g_ == tap_w_) || fabs(tap_g_ - tap_w_) <= (double)(tol);  \
        if (!ok(tap_pass_, __VA_ARGS__))                                               \
            diag("  got: %.17g, expected: %.17g, tolerance %g (%s:%d)", tap_g_,        \
                 tap_w_, (double)(tol), __FILE__, __LINE__);                           \
    } while (0)

static inline void skip(int n, const char *reason)
{
    for (int i = 0; i < n; i++) {
        tap_run_count++;
        printf("ok %d # skip %s\n", tap_run_count, reason);
    }
    fflush(stdout);
}

static inline void skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    fflush(stdout);
    exit(0);
}

static inline void done_testing(void)
{
    if (tap_planned < 0) printf("1..%d\n", tap_run_count);
    fflush(stdout);
}

static inline int exit_status(void)
{
    if (tap_planned >= 0 && tap_planned != tap_run_count) {
        diag("planned %d tests but ran %d", tap_planned, tap_run_count);
        return 255;
    }
    return tap_fail_count > 255 ? 254 : tap_fail_count;
}

#endif
