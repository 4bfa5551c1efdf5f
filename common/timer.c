/* timer.c — the host wall-clock timer (the device timer is in cuda/ or nocuda/). */
#include <time.h>

#include "sl_timer.h"

double sl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
