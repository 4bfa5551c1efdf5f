/* sim.c — the simulator hooks of sl_sim.h: memory folding with SMPI's shared malloc, compute
 * sampling, and the platform description rows and manifest are marked with. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

#define MAX_SAMPLED 64

/* This rank's sampled blocks: (site, key), its timed runs and their total, the runs skipped. */
typedef struct {
    const char *site;
    size_t key;
    int runs;
    double total;
    long skipped;
} sampled_block;
static sampled_block sampled[MAX_SAMPLED];
static int nsampled, sampling_on;

int sl_sim_samples(void)
{
    const char *s = getenv("SL_SIM_SAMPLE");
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1000) SL_FATAL("SL_SIM_SAMPLE=%s: expected a number of samples, 0..1000", s);
    return (int)v;
}

void sl_sim_sampling(int on) { sampling_on = on; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

sl_sim_sample sl_sim_sample_begin(const char *site, size_t key)
{
    sl_sim_sample s = {.slot = -1, .state = 0, .t0 = 0};
    int n = sl_sim_samples();
    if (!n) return s;
    int i = 0;
    while (i < nsampled && !(sampled[i].key == key && !strcmp(sampled[i].site, site))) i++;
    if (i == nsampled) {
        if (nsampled == MAX_SAMPLED) return s; /* table full: run it, unsampled */
        sampled[nsampled++] = (sampled_block){.site = site, .key = key};
    }
    if (sampled[i].runs < n) { /* a sample: run and time it */
        s.slot = i;
        s.t0 = now();
        return s;
    }
    if (!sampling_on) return s; /* its results are read: run it */
    sampled[i].skipped++;
    if (getenv("SL_SIM_CHARGE") && !strcmp(getenv("SL_SIM_CHARGE"), "1"))
        smpi_execute_benched(sampled[i].total / sampled[i].runs);
    s.state = 1;
    return s;
}

void sl_sim_sample_end(sl_sim_sample *s)
{
    if (s->slot >= 0) {
        sampled[s->slot].total += now() - s->t0;
        sampled[s->slot].runs++;
    }
    s->state = 1;
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
    /* Sampling: how, and (on this rank, so far) which blocks, how often run and skipped. */
    if (sl_sim_samples()) {
        long runs = 0, skipped = 0;
        sl_json_obj_begin(j, "sampling");
        sl_json_int(j, "samples", sl_sim_samples());
        sl_json_str(j, "rule", "each block runs timed its first `samples` times per (site, key: "
                               "element count, type, op) on each rank, then, where no check reads "
                               "it, is skipped and the mean charged instead");
        sl_json_str(j, "charged", getenv("SL_SIM_CHARGE") && !strcmp(getenv("SL_SIM_CHARGE"), "1")
                                      ? "yes" : "no: this program's computation costs no simulated time");
        sl_json_arr_begin(j, "sites");
        for (int i = 0; i < nsampled; i++) {
            int first = 1;
            for (int k = 0; k < i; k++) first &= strcmp(sampled[k].site, sampled[i].site) != 0;
            if (first) sl_json_str(j, NULL, sampled[i].site);
            runs += sampled[i].runs;
            skipped += sampled[i].skipped;
        }
        sl_json_arr_end(j);
        sl_json_int(j, "timed_runs", runs);
        sl_json_int(j, "skipped_runs", skipped);
        sl_json_obj_end(j);
    }
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
void sl_sim_sampling(int on) { (void)on; }
int sl_sim_samples(void) { return 0; }

#endif
