/* pool.h — the activation buffers of checkpoint.c, through a caching pool as a framework's
 * caching allocator keeps them: a buffer given back is kept for the next request of the same
 * size, so that steady-state steps do no cudaMalloc/cudaFree (each of which would cost more
 * than a small layer's GEMM, and cudaFree synchronises the device) and no zero-fill.
 *
 * The accounting stays exact: a buffer counts as an activation (SL_MEM_ACTIV) only while it is
 * handed out, and as SL_MEM_OTHER while it waits in the pool, so the allocator's activation
 * count is the live activation bytes at every moment and the cache is visible beside it.
 * The pool reads that count after each buffer it hands out: the most since ck_pool_begin is
 * the peak of live activation bytes (every buffer is taken through it, so the count only
 * rises at a take). */
#ifndef CHECKPOINT_POOL_H
#define CHECKPOINT_POOL_H

#include <stddef.h>

#include "kernels.h"

typedef struct ck_block {
    void *p;
    size_t bytes;
    int used;
} ck_block;

typedef struct ck_pool {
    sl_backend be;
    sl_mem_space space;
    ck_block *blk;
    int n, cap;
    size_t held; /* bytes of every block, handed out or not */
    long long activ0; /* the allocator's activation bytes at ck_pool_begin */
    double peak;      /* the most live activation bytes above activ0 since then */
} ck_pool;

void ck_pool_init(ck_pool *pl, sl_backend be);
/* A buffer of `bytes` (contents undefined), counted as an activation until put back. */
void *ck_pool_get(ck_pool *pl, size_t bytes);
void ck_pool_put(ck_pool *pl, void *p);
/* Starts a peak: activ0 the allocator's activation bytes now, peak 0. */
void ck_pool_begin(ck_pool *pl);
/* Live activation bytes above activ0 now. */
long long ck_pool_live(const ck_pool *pl);
/* Frees every block; all must have been put back. */
void ck_pool_free(ck_pool *pl);

#endif
