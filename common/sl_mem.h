/* sl_mem.h — memory accounting by category, with peaks.
 *
 * Training techniques are judged by what they keep resident (ZeRO shards, vDNN offload,
 * checkpointing): every large buffer is allocated through sl_alloc with a category, so the
 * current and peak bytes per category (and their total) can be reported and compared with
 * the analytic model. Device allocations are counted the same way under SL_MEM_DEVICE.
 */
#ifndef SL_MEM_H
#define SL_MEM_H

#include <stddef.h>

typedef enum {
    SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV, SL_MEM_COMM, SL_MEM_DATA,
    SL_MEM_OTHER, SL_MEM_NCATS
} sl_mem_cat;

typedef enum { SL_MEM_HOST, SL_MEM_DEVICE, SL_MEM_NSPACES } sl_mem_space;

const char *sl_mem_cat_name(sl_mem_cat c); /* "params", "grads", ... */

/* Zero-filled host allocation, 64-byte aligned, and page-aligned from a page (4096 B) up, as
 * OSU and nccl-tests allocate buffers (mem.c says why); out of memory is a runtime error
 * (exit 3) naming the category and size. sl_free(NULL) is a no-op. */
void *sl_alloc(sl_mem_cat cat, size_t bytes);
void sl_free(void *p);

/* For allocators outside sl_alloc (device memory): record +bytes or -bytes. */
void sl_mem_track(sl_mem_space space, sl_mem_cat cat, long long delta);

size_t sl_mem_current(sl_mem_space space, sl_mem_cat cat);
size_t sl_mem_peak(sl_mem_space space, sl_mem_cat cat);
size_t sl_mem_peak_total(sl_mem_space space); /* peak of the sum, not the sum of peaks */
void sl_mem_reset_peaks(void);                /* peaks := current */

/* Bytes this process can still allocate, as sl_alloc judges a request: the node's
 * MemAvailable, or less where the memory cgroup's limit leaves less room; SIZE_MAX where
 * neither is known. For checking a size option before anything is measured. */
size_t sl_mem_available(void);

/* The memory cgroup limit of the process whose /proc/<pid>/cgroup is proc_cgroup, with the
 * cgroup file system at root (normally /sys/fs/cgroup): v2 memory.max (the smallest from the
 * cgroup up), else v1 memory.limit_in_bytes. Returns 1 with *limit, the anonymous memory the
 * cgroup uses in *used and the file in which, or 0 where there is no limit. sl_alloc refuses a
 * request that would not fit: exit 3, "needs X, limit Y (cgroup)". */
int sl_mem_cgroup_limit(const char *proc_cgroup, const char *root, size_t *limit, size_t *used,
                        char *which, size_t len);

#endif
