/* arena.h — vdnn's device memory: one block of fixed capacity (device memory on cuda, host
 * memory standing in for it in the cpu emulation) that the program carves its tensors from,
 * counting the bytes live and their peak by category. A fixed capacity is what makes vDNN's
 * point: a model either fits in it or does not, and offloading is what makes it fit.
 * Offsets are handed out first fit, in multiples of ARENA_ALIGN; the counts are of those
 * rounded sizes, which the analytic model uses too. */
#ifndef VDNN_ARENA_H
#define VDNN_ARENA_H

#include <stddef.h>

#include "kernels.h"

#define ARENA_ALIGN 256

typedef enum { A_PARAMS, A_GRADS, A_OPTIM, A_ACTIV, A_WORKSPACE, A_DATA, A_NCATS } arena_cat;
extern const char *const arena_cat_names[A_NCATS]; /* "params" "grads" ... */

typedef struct arena_block {
    size_t off, bytes;
    arena_cat cat;
} arena_block;

typedef struct arena {
    sl_backend be;
    char *base;
    size_t capacity;
    arena_block *blocks; /* live, sorted by offset */
    int nblocks, maxblocks;
    size_t live[A_NCATS], peak[A_NCATS];
    size_t live_total, peak_total;
} arena;

size_t arena_round(size_t bytes);
/* Backend memory of `capacity` bytes, for up to maxblocks live tensors. */
void arena_open(arena *a, sl_backend be, size_t capacity, int maxblocks);
void arena_close(arena *a);
/* A tensor of `bytes` (zero-filled only the first time its memory is used: callers write
 * before they read). Running out is a runtime error: callers check the fit first, from the
 * model. */
void *arena_alloc(arena *a, arena_cat cat, size_t bytes);
void arena_free(arena *a, void *p);

#endif
