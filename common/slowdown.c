/* slowdown.c — SL_TEST_SLOWDOWN, the injected regression of the gate's tests (sl_slowdown.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_env.h"
#include "sl_error.h"
#include "sl_slowdown.h"
#include "sl_timer.h"

static double fraction; /* 0: off */
static int ceiling;     /* depth of sl_slowdown_ceiling(1) */

/* Whether the first len characters of name are one of the suite's programs: a misspelt
 * program would leave the switch silently off in every program. */
static int is_program(const char *name, size_t len)
{
    for (const char *p = sl_build_programs; *p;) {
        size_t l = strcspn(p, "|");
        if (l == len && strncmp(p, name, len) == 0) return 1;
        p += l + (p[l] == '|');
    }
    return 0;
}

void sl_slowdown_init(const char *program)
{
    const char *v = getenv("SL_TEST_SLOWDOWN");
    fraction = 0;
    if (!v || !*v) return;
    const char *colon = strchr(v, ':');
    char *end;
    errno = 0;
    double f = colon ? strtod(colon + 1, &end) : NAN;
    if (!colon || !is_program(v, (size_t)(colon - v)) || errno || end == colon + 1 || *end ||
        !(f > 0 && f <= 10))
        sl_usage_error("SL_TEST_SLOWDOWN '%.64s': expected PROGRAM:FRACTION with PROGRAM one of %s "
                       "and a fraction in (0, 10] (e.g. ddp:0.2)", v, sl_build_programs);
    if ((size_t)(colon - v) == strlen(program) && strncmp(v, program, strlen(program)) == 0) fraction = f;
}

double sl_slowdown_fraction(void) { return fraction; }

void sl_slowdown_ceiling(int on) { ceiling += on ? 1 : -1; }

void sl_slowdown_pad(double t0)
{
    if (fraction <= 0 || ceiling > 0) return;
    const double end = t0 + (sl_now() - t0) * (1 + fraction);
    while (sl_now() < end) {
    } /* a busy wait: the time is spent on a core, as slower code would spend it */
}
