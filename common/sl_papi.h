/* sl_papi.h — hardware counters around a timed region, the same API with or without PAPI.
 *
 * sl_papi_init parses "--papi EVENTS" (comma-separated PAPI preset or native names). Where
 * PAPI was not built, or the kernel exposes no counters, it returns 0 and explains why in
 * `note`; start/stop are then no-ops, so benchmarks contain no #ifdef. Counters are those of
 * the calling (main) thread of each rank.
 */
#ifndef SL_PAPI_H
#define SL_PAPI_H

#include <stddef.h>

#define SL_PAPI_MAX_EVENTS 8

typedef struct sl_papi {
    int active;                          /* counters are being read */
    int nevents;
    char names[SL_PAPI_MAX_EVENTS][64];
    long long values[SL_PAPI_MAX_EVENTS]; /* of the last start..stop */
    int eventset;
} sl_papi;

/* Returns 1 when counting is set up, 0 (with a reason in note) when it is not possible. A
 * malformed or unknown event name is a usage error reported in note with return -1. */
int sl_papi_init(sl_papi *p, const char *events, char *note, size_t notelen);
void sl_papi_start(sl_papi *p);
void sl_papi_stop(sl_papi *p);
void sl_papi_shutdown(sl_papi *p);

#endif
