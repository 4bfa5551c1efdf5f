/* mem.c — allocation with accounting by category (see sl_mem.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_mem.h"
#include "sl_sim.h"

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

/* Each block carries a 64-byte header (size, category, and where the block malloc returned
 * starts) just below the payload, so that sl_free needs no size. A payload of a page or more
 * starts on a page (the header at the end of the page before it), as OSU and nccl-tests
 * allocate their buffers: where a buffer starts within its page and its cache lines is then the
 * same in every run and for every size, rather than 64 bytes into a heap block for a small -e and
 * 128 bytes into a mapping for a large one (allreduce's sweep allocates for its largest size). A
 * smaller payload is 64-byte aligned. */
typedef struct header {
    size_t bytes;
    int cat;
    unsigned lead; /* bytes from the start of the malloc'd block to this header */
    char pad[64 - sizeof(size_t) - 2 * sizeof(int)];
} header;
_Static_assert(sizeof(header) == 64, "the header keeps the payload 64-byte aligned");

#define PAGE 4096

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

/* The first number in a file (a cgroup control file), in *v; 0 when it reads one. "max" (v2's
 * "no limit") reads as SIZE_MAX. */
static int read_number(const char *path, size_t *v)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = "";
    int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    if (strncmp(buf, "max", 3) == 0) {
        *v = SIZE_MAX;
        return 0;
    }
    unsigned long long x;
    if (sscanf(buf, "%llu", &x) != 1) return -1;
    *v = x >= (1ull << 60) ? SIZE_MAX : (size_t)x; /* v1 says "no limit" with a huge number */
    return 0;
}

/* A line "name value" of a memory.stat file. */
static size_t stat_field(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256], key[128];
    unsigned long long v = 0, x;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %llu", key, &x) == 2 && strcmp(key, name) == 0) {
            v = x;
            break;
        }
    fclose(f);
    return (size_t)v;
}

int sl_mem_cgroup_limit(const char *proc_cgroup, const char *root, size_t *limit, size_t *used,
                        char *which, size_t len)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f) return 0;
    char line[1024], v2[512] = "", v1[512] = "";
    int have_v2 = 0, have_v1 = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (strcmp(line, "0") == 0 && !*ctrls) {
            snprintf(v2, sizeof v2, "%s", path);
            have_v2 = 1;
        }
        /* v1: a hierarchy whose controllers include memory */
        char list[256];
        snprintf(list, sizeof list, ",%s,", ctrls);
        if (strstr(list, ",memory,")) {
            snprintf(v1, sizeof v1, "%s", path);
            have_v1 = 1;
        }
    }
    fclose(f);
    *limit = SIZE_MAX;
    *used = 0;
    char file[2048], dir[1024];
    /* v2: the smallest memory.max from this cgroup up to the root (a parent's limit binds too);
     * also where the v2 hierarchy is mounted at root/unified (a hybrid host) */
    const char *mounts[] = {"", "/unified"};
    for (int m = 0; have_v2 && m < 2 && *limit == SIZE_MAX; m++) {
        snprintf(dir, sizeof dir, "%s%s%s", root, mounts[m], v2);
        for (;;) {
            size_t v;
            snprintf(file, sizeof file, "%s/memory.max", dir);
            if (read_number(file, &v) == 0 && v < *limit) {
                *limit = v;
                snprintf(file, sizeof file, "%s/memory.stat", dir);
                *used = stat_field(file, "anon");
                snprintf(which, len, "cgroup v2 %s/memory.max", dir);
            }
            size_t l = strlen(dir), rl = strlen(root) + strlen(mounts[m]);
            if (l <= rl) break;
            char *slash = strrchr(dir + rl, '/');
            if (!slash) break;
            *slash = 0;
        }
    }
    /* v1: memory.limit_in_bytes of the cgroup (or of the mount's top, where the container's
     * view of the hierarchy starts at its own cgroup) */
    for (int k = 0; have_v1 && k < 2 && *limit == SIZE_MAX; k++) {
        snprintf(dir, sizeof dir, "%s/memory%s", root, k == 0 ? v1 : "");
        size_t v;
        snprintf(file, sizeof file, "%s/memory.limit_in_bytes", dir);
        if (read_number(file, &v) == 0 && v < *limit) {
            *limit = v;
            snprintf(file, sizeof file, "%s/memory.stat", dir);
            *used = stat_field(file, "total_rss");
            snprintf(which, len, "cgroup v1 %s/memory.limit_in_bytes", dir);
        }
    }
    return *limit != SIZE_MAX;
}

/* This process's cgroup memory limit, looked up once; its anonymous memory in use (all ranks
 * of the job in it), read again for each large request. */
static int cgroup_limit(size_t *limit, size_t *used, int refresh_used)
{
    static int looked = 0, have = 0;
    static size_t lim, use;
    static char which[2300];
    if (!looked || refresh_used) {
        const char *root = getenv("SL_CGROUP_ROOT"); /* tests: a cgroup tree elsewhere */
        have = sl_mem_cgroup_limit("/proc/self/cgroup", root && *root ? root : "/sys/fs/cgroup",
                                   &lim, &use, which, sizeof which);
        looked = 1;
    }
    *limit = lim;
    *used = use;
    return have;
}

size_t sl_mem_available(void)
{
    size_t avail = mem_available(), limit, used;
    if (!avail) avail = SIZE_MAX;
    if (cgroup_limit(&limit, &used, 1)) {
        size_t held = total_current[SL_MEM_HOST], base = used > held ? used : held;
        size_t room = limit > base ? limit - base : 0;
        if (room < avail) avail = room;
    }
    return avail;
}

static void human(size_t b, char *buf, size_t len)
{
    if (b >= ((size_t)1 << 30)) snprintf(buf, len, "%.2f GiB", (double)b / (1 << 30));
    else snprintf(buf, len, "%.1f MiB", (double)b / (1 << 20));
}

void *sl_alloc(sl_mem_cat cat, size_t bytes)
{
    if ((unsigned)cat >= SL_MEM_NCATS) SL_FATAL("sl_alloc: bad category %d", (int)cat);
    if (bytes > SIZE_MAX - 2 * PAGE) SL_FATAL("sl_alloc: %zu bytes is too large", bytes);
    const size_t align = bytes >= PAGE ? PAGE : 64, lead = align - sizeof(header);
    size_t total = (align + bytes + 63) / 64 * 64;
    /* Under the simulator a large block may be folded (sl_sim.h): it is no memory of this
     * rank, so it is neither checked against the limits nor zeroed, and its size and category
     * are kept by the simulator's table (the header is shared with other ranks' blocks). */
    void *raw = sl_sim_alloc(bytes, total, bytes * SL_MEM_NCATS + (size_t)cat);
    size_t at = 0; /* where the header goes in raw: a folded block's starts it */
    if (raw) goto folded;
    /* Linux overcommits: a request far beyond the free memory would "succeed" and the zero-fill
     * below would then be killed by the OOM killer without a word. Requests are checked first,
     * so that they fail as a runtime error naming the size: against the memory cgroup's limit
     * (Slurm, containers) with what this rank holds, or what the cgroup's processes already
     * use, whichever is more; large ones also against what the node has available. */
    size_t limit, used;
    if (bytes >= ((size_t)1 << 20) && cgroup_limit(&limit, &used, bytes >= ((size_t)32 << 20))) {
        size_t held = total_current[SL_MEM_HOST];
        size_t base = used > held ? used : held;
        if (base + bytes > limit) {
            char need[32], lim[32], have[32];
            human(base + bytes, need, sizeof need);
            human(limit, lim, sizeof lim);
            human(base, have, sizeof have);
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                     "out of memory: %zu bytes for %s needs %s (%s held already), limit %s "
                     "(cgroup)", bytes, cat_names[cat], need, have, lim);
        }
    }
    if (bytes >= ((size_t)256 << 20)) {
        size_t avail = mem_available();
        if (avail && bytes > avail)
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                     "out of memory: %zu bytes for %s but only %zu are available on this node",
                     bytes, cat_names[cat], avail);
    }
    if (posix_memalign(&raw, align, total) != 0)
        sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__,
                 "out of memory: %zu bytes for %s (already holding %zu bytes on this rank)", bytes,
                 cat_names[cat], total_current[SL_MEM_HOST]);
    memset(raw, 0, total);
    at = lead;
folded:;
    header *h = (header *)((char *)raw + at);
    h->bytes = bytes;
    h->cat = cat;
    h->lead = (unsigned)at;
    sl_mem_track(SL_MEM_HOST, cat, (long long)bytes);
    return h + 1;
}

void sl_free(void *p)
{
    if (!p) return;
    header *h = (header *)p - 1;
    size_t note;
    if (sl_sim_free(h, &note)) {
        sl_mem_track(SL_MEM_HOST, (sl_mem_cat)(note % SL_MEM_NCATS),
                     -(long long)(note / SL_MEM_NCATS));
        return;
    }
    sl_mem_track(SL_MEM_HOST, (sl_mem_cat)h->cat, -(long long)h->bytes);
    free((char *)h - h->lead);
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
