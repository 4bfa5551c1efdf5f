/* papi.c — hardware counters through PAPI where it was built; the same calls do nothing, with
 * a note saying why, where it was not or where the kernel exposes no counters. */
#include <stdio.h>
#include <string.h>

#include "sl_papi.h"

#if SL_HAVE_PAPI
#include <papi.h>

int sl_papi_init(sl_papi *p, const char *events, char *note, size_t notelen)
{
    memset(p, 0, sizeof *p);
    p->eventset = PAPI_NULL;
    if (!events) return 0;
    int rc = PAPI_library_init(PAPI_VER_CURRENT);
    if (rc != PAPI_VER_CURRENT) {
        snprintf(note, notelen, "--papi: PAPI could not start (%s); running without counters",
                 rc > 0 ? "version mismatch" : PAPI_strerror(rc));
        return 0;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", events);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int code;
        if (p->nevents == SL_PAPI_MAX_EVENTS) {
            snprintf(note, notelen, "--papi: at most %d events", SL_PAPI_MAX_EVENTS);
            return -1;
        }
        if (PAPI_event_name_to_code(tok, &code) != PAPI_OK) {
            snprintf(note, notelen, "--papi: unknown event '%s' (papi_avail lists them)", tok);
            return -1;
        }
        snprintf(p->names[p->nevents++], sizeof p->names[0], "%s", tok);
    }
    if (PAPI_num_components() <= 0 || PAPI_num_hwctrs() <= 0) {
        snprintf(note, notelen,
                 "--papi: this kernel exposes no hardware counters (perf_event_paranoid, a VM or a "
                 "container?); running without counters");
        return 0;
    }
    if (PAPI_create_eventset(&p->eventset) != PAPI_OK) {
        snprintf(note, notelen, "--papi: cannot create an event set; running without counters");
        return 0;
    }
    for (int i = 0; i < p->nevents; i++) {
        int code;
        PAPI_event_name_to_code(p->names[i], &code);
        rc = PAPI_add_event(p->eventset, code);
        if (rc != PAPI_OK) {
            snprintf(note, notelen, "--papi: cannot count %s here (%s); running without counters",
                     p->names[i], PAPI_strerror(rc));
            PAPI_cleanup_eventset(p->eventset);
            PAPI_destroy_eventset(&p->eventset);
            return 0;
        }
    }
    p->active = 1;
    return 1;
}

void sl_papi_start(sl_papi *p)
{
    if (p->active && PAPI_start(p->eventset) != PAPI_OK) p->active = 0;
}

void sl_papi_stop(sl_papi *p)
{
    if (p->active && PAPI_stop(p->eventset, p->values) != PAPI_OK) p->active = 0;
}

void sl_papi_shutdown(sl_papi *p)
{
    if (p->eventset != PAPI_NULL) {
        PAPI_cleanup_eventset(p->eventset);
        PAPI_destroy_eventset(&p->eventset);
    }
    p->active = 0;
}

#else

int sl_papi_init(sl_papi *p, const char *events, char *note, size_t notelen)
{
    memset(p, 0, sizeof *p);
    if (events)
        snprintf(note, notelen,
                 "--papi: PAPI support was not built (install libpapi-dev and rebuild); running "
                 "without counters");
    return 0;
}
void sl_papi_start(sl_papi *p) { (void)p; }
void sl_papi_stop(sl_papi *p) { (void)p; }
void sl_papi_shutdown(sl_papi *p) { (void)p; }

#endif
