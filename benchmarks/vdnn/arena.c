/* arena.c — first-fit offsets in one block of backend memory, with live and peak bytes by
 * category (arena.h). */
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "arena.h"

const char *const arena_cat_names[A_NCATS] = {"params", "grads", "optim", "activ", "workspace", "data"};

size_t arena_round(size_t bytes)
{
    return (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
}

void arena_open(arena *a, sl_backend be, size_t capacity, int maxblocks)
{
    memset(a, 0, sizeof *a);
    a->be = be;
    a->capacity = capacity / ARENA_ALIGN * ARENA_ALIGN;
    a->base = sl_k_malloc(be, SL_MEM_OTHER, a->capacity);
    a->maxblocks = maxblocks;
    a->blocks = calloc((size_t)maxblocks, sizeof *a->blocks);
    if (!a->blocks) SL_FATAL("out of memory for %d arena blocks", maxblocks);
}

void arena_close(arena *a)
{
    sl_k_free(a->be, a->base);
    free(a->blocks);
    memset(a, 0, sizeof *a);
}

void *arena_alloc(arena *a, arena_cat cat, size_t bytes)
{
    size_t need = arena_round(bytes ? bytes : 1), at = 0;
    int i = 0;
    /* the first gap that holds it: before block i, which starts at blocks[i].off */
    for (; i < a->nblocks; i++) {
        if (a->blocks[i].off - at >= need) break;
        at = a->blocks[i].off + a->blocks[i].bytes;
    }
    if (a->capacity - at < need || a->nblocks == a->maxblocks)
        SL_FATAL("device arena: no room for %zu bytes of %s (%zu of %zu bytes live, in %d blocks)",
                 need, arena_cat_names[cat], a->live_total, a->capacity, a->nblocks);
    memmove(a->blocks + i + 1, a->blocks + i, (size_t)(a->nblocks - i) * sizeof *a->blocks);
    a->blocks[i] = (arena_block){at, need, cat};
    a->nblocks++;
    a->live[cat] += need;
    a->live_total += need;
    if (a->live[cat] > a->peak[cat]) a->peak[cat] = a->live[cat];
    if (a->live_total > a->peak_total) a->peak_total = a->live_total;
    return a->base + at;
}

void arena_free(arena *a, void *p)
{
    if (!p) return;
    size_t off = (size_t)((char *)p - a->base);
    for (int i = 0; i < a->nblocks; i++)
        if (a->blocks[i].off == off) {
            a->live[a->blocks[i].cat] -= a->blocks[i].bytes;
            a->live_total -= a->blocks[i].bytes;
            memmove(a->blocks + i, a->blocks + i + 1, (size_t)(a->nblocks - i - 1) * sizeof *a->blocks);
            a->nblocks--;
            return;
        }
    SL_FATAL("device arena: %p is not a live tensor", p);
}
