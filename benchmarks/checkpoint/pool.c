/* pool.c — the caching pool of activation buffers (see pool.h). */
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "sl_error.h"

void ck_pool_init(ck_pool *pl, sl_backend be)
{
    memset(pl, 0, sizeof *pl);
    pl->be = be;
    pl->space = be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
}

/* Moves a block's bytes between the cache and the live activations. */
static void count_as(ck_pool *pl, size_t bytes, int live)
{
    const long long b = (long long)bytes;
    sl_mem_track(pl->space, SL_MEM_ACTIV, live ? b : -b);
    sl_mem_track(pl->space, SL_MEM_OTHER, live ? -b : b);
}

void ck_pool_begin(ck_pool *pl)
{
    pl->activ0 = (long long)sl_mem_current(pl->space, SL_MEM_ACTIV);
    pl->peak = 0;
}

long long ck_pool_live(const ck_pool *pl) { return (long long)sl_mem_current(pl->space, SL_MEM_ACTIV) - pl->activ0; }

/* A buffer handed out: counted live, and the peak read. */
static void *hand_out(ck_pool *pl, ck_block *b)
{
    b->used = 1;
    count_as(pl, b->bytes, 1);
    const double live = (double)ck_pool_live(pl);
    if (live > pl->peak) pl->peak = live;
    return b->p;
}

void *ck_pool_get(ck_pool *pl, size_t bytes)
{
    for (int i = 0; i < pl->n; i++) /* a few hundred blocks at most: a scan is enough */
        if (!pl->blk[i].used && pl->blk[i].bytes == bytes) return hand_out(pl, &pl->blk[i]);
    if (pl->n == pl->cap) {
        pl->cap = pl->cap ? 2 * pl->cap : 64;
        ck_block *grown = realloc(pl->blk, (size_t)pl->cap * sizeof *grown);
        if (!grown) SL_FATAL("out of memory for %d pool blocks", pl->cap);
        pl->blk = grown;
    }
    ck_block *b = &pl->blk[pl->n++];
    *b = (ck_block){.p = sl_k_malloc(pl->be, SL_MEM_OTHER, bytes), .bytes = bytes};
    pl->held += bytes;
    return hand_out(pl, b);
}

void ck_pool_put(ck_pool *pl, void *p)
{
    for (int i = 0; i < pl->n; i++)
        if (pl->blk[i].p == p) {
            if (!pl->blk[i].used) SL_FATAL("activation buffer %p put back twice", p);
            pl->blk[i].used = 0;
            count_as(pl, pl->blk[i].bytes, 0);
            return;
        }
    SL_FATAL("activation buffer %p is not the pool's", p);
}

void ck_pool_free(ck_pool *pl)
{
    for (int i = 0; i < pl->n; i++) {
        if (pl->blk[i].used) SL_FATAL("activation buffer %p still in use when the pool is freed", pl->blk[i].p);
        sl_k_free(pl->be, pl->blk[i].p);
    }
    free(pl->blk);
    memset(pl, 0, sizeof *pl);
}
