/* sim.c — the simulator hooks of sl_sim.h: memory folding with SMPI's partially shared malloc,
 * and the platform description rows and manifest are marked with. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "sl_error.h"
#include "sl_json.h"
#include "sl_sim.h"

#if SL_SMPI
#include <smpi/smpi.h>

#define MAX_FOLDED 64

/* This rank's folded allocations (SMPI privatises globals per rank). */
static struct { char *base, *end; size_t note; } folded[MAX_FOLDED];

int sl_sim_active(void) { return 1; }

const char *sl_sim_platform(void)
{
    const char *p = getenv("SL_SIM_PLATFORM");
    return p ? p : "";
}

void sl_sim_json(sl_json *j)
{
    char fold[64] = "none";
    if (sl_sim_fold_bytes())
        snprintf(fold, sizeof fold, "allocations over %zu bytes shared by all ranks", sl_sim_fold_bytes());
    sl_json_obj_begin(j, "simulated");
    sl_json_str(j, "simulator", "SimGrid SMPI");
    sl_json_str(j, "platform", *sl_sim_platform() ? sl_sim_platform() : NULL);
    sl_json_str(j, "folding", fold);
    sl_json_obj_end(j);
}

size_t sl_sim_fold_bytes(void)
{
    const char *s = getenv("SL_SIM_FOLD");
    if (!s || !*s) return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end) SL_FATAL("SL_SIM_FOLD=%s: expected a number of bytes", s);
    return (size_t)v;
}

int sl_sim_folds(size_t bytes)
{
    size_t keep = sl_sim_fold_bytes();
    return keep && bytes > keep;
}

void *sl_sim_alloc(size_t bytes, size_t total, size_t note)
{
    if (!sl_sim_folds(bytes)) return NULL; /* small enough to be real */
    int slot = 0;
    while (slot < MAX_FOLDED && folded[slot].base) slot++;
    if (slot == MAX_FOLDED) return NULL;
    /* The whole block is shared: SMPI 3.32 does not copy messages out of the private part of
     * a partially shared block (SMPI_PARTIAL_SHARED_MALLOC), so a private prefix would not
     * carry real data either. */
    char *p = SMPI_SHARED_MALLOC(total);
    if (!p) SL_FATAL("out of memory: folded allocation of %zu bytes", total);
    folded[slot].base = p;
    folded[slot].end = p + total;
    folded[slot].note = note;
    return p;
}

int sl_sim_free(void *p, size_t *note)
{
    for (int i = 0; i < MAX_FOLDED; i++)
        if (folded[i].base && folded[i].base == (char *)p) {
            *note = folded[i].note;
            SMPI_SHARED_FREE(p);
            folded[i].base = NULL;
            return 1;
        }
    return 0;
}

int sl_sim_real(const void *p, size_t len)
{
    const char *a = p, *b = a + len;
    for (int i = 0; i < MAX_FOLDED; i++)
        if (folded[i].base && a < folded[i].end && b > folded[i].base) return 0;
    return 1;
}

#else

int sl_sim_active(void) { return 0; }
const char *sl_sim_platform(void) { return NULL; }
void sl_sim_json(sl_json *j) { (void)j; }
size_t sl_sim_fold_bytes(void) { return 0; }
int sl_sim_folds(size_t bytes) { (void)bytes; return 0; }
void *sl_sim_alloc(size_t bytes, size_t total, size_t note)
{
    (void)bytes, (void)total, (void)note;
    return NULL;
}
int sl_sim_free(void *p, size_t *note) { (void)p; (void)note; return 0; }
int sl_sim_real(const void *p, size_t len) { (void)p; (void)len; return 1; }

#endif
