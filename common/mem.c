/* mem.c — allocation with accounting by category (see sl_mem.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_mem.h"

static const char *const cat_names[SL_MEM_NCATS] = {"params", "grads", "optim", "activ",
                                                    "comm",   "data",  "other"};

/* Counters are updated from the main thread of each rank only: allocation inside threaded
 * regions goes through plain malloc. */
static size_t current[SL_MEM_NSPACES][SL_MEM_NCATS], peak[SL_MEM_NSPACES][SL_MEM_NCATS];
static size_t total_current[SL_MEM_NSPACES], total_peak[SL_MEM_NSPACES];

const char *sl_mem_cat_name(sl_mem_cat c)
{
    return (unsigned)c < SL_MEM_NCATS ? cat_names[c] : "?";
}

void sl_mem_track(sl_mem_space space, sl_mem_cat cat, long long delta)
{
    if ((unsigned)space >= SL_MEM_NSPACES || (unsigned)cat >= SL_MEM_NCATS)
        SL_FATAL("sl_mem_track: bad space %d or category %d", (int)space, (int)cat);
    if (delta < 0 && (size_t)(-delta) > current[space][cat])
        SL_FATAL("sl_mem_track: freeing %lld bytes of %s, only %zu counted", -delta,
                 cat_names[cat], current[space][cat]);
    current[space][cat] += (size_t)delta; /* wraps correctly for negative deltas */
    total_current[space] += (size_t)delta;
    if (current[space][cat] > peak[space][cat]) peak[space][cat] = current[space][cat];
    if (total_current[space] > total_peak[space]) total_peak[space] = total_current[space];
}

/* Each block carries a 64-byte header (size and category) so that the payload stays 64-byte
 * aligned and sl_free needs no size. */
typedef struct header {
    size_t bytes;
    int cat;
    char pad[64 - sizeof(size_t) - sizeof(int)];
} header;

/* Bytes the kernel says can still be allocated without swapping (MemAvailable), or 0 when it
 * does not say. */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    fclose(f);
    return (size_t)kib * 1024;
}

void *sl_alloc(sl_mem_cat cat, size_t bytes)
{
    if ((unsigned)cat >= SL_MEM_NCATS) SL_FATAL("sl_alloc: bad category %d", (int)cat);
    if (bytes > SIZE_MAX - sizeof(header) - 64) SL_FATAL("sl_alloc: %zu bytes is too large", bytes);
    /* Linux overcommits: a request far beyond the free memory would "succeed" and the zero-fill
     * below would then be killed by the OOM killer without a word. Large requests are checked
     * against what is available first, so they fail as a runtime error naming the size. */
    if (bytes >= ((size_t)256 << 20)) {
        size_t avail = mem_available();
        if (avail && bytes > avail)
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                     "out of memory: %zu bytes for %s but only %zu are available on this node",
                     bytes, cat_names[cat], avail);
    }
    void *raw = NULL;
    size_t total = (sizeof(header) + bytes + 63) / 64 * 64;
    if (posix_memalign(&raw, 64, total) != 0)
        sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                 "out of memory: %zu bytes for %s (already holding %zu bytes on this rank)", bytes,
                 cat_names[cat], total_current[SL_MEM_HOST]);
    memset(raw, 0, total);
    header *h = raw;
    h->bytes = bytes;
    h->cat = cat;
    sl_mem_track(SL_MEM_HOST, cat, (long long)bytes);
    return h + 1;
}

void sl_free(void *p)
{
    if (!p) return;
    header *h = (header *)p - 1;
    sl_mem_track(SL_MEM_HOST, (sl_mem_cat)h->cat, -(long long)h->bytes);
    free(h);
}

size_t sl_mem_current(sl_mem_space s, sl_mem_cat c) { return current[s][c]; }
size_t sl_mem_peak(sl_mem_space s, sl_mem_cat c) { return peak[s][c]; }
size_t sl_mem_peak_total(sl_mem_space s) { return total_peak[s]; }

void sl_mem_reset_peaks(void)
{
    for (int s = 0; s < SL_MEM_NSPACES; s++) {
        for (int c = 0; c < SL_MEM_NCATS; c++) peak[s][c] = current[s][c];
        total_peak[s] = total_current[s];
    }
}
