/* chunks.h — which layers a parallel3d stage holds: the L blocks cut into P·v model chunks in
 * order (v = 1 but with --schedule interleaved, Narayanan et al. 2021: v = --virtual), stage p
 * holding chunks p, p + P, ..., p + (v−1)·P, the embedding with the model's first chunk and the
 * LM head with its last. What stage.c places, pass.c runs and pm_schedule.c predicts, by one rule. */
#ifndef P3_CHUNKS_H
#define P3_CHUNKS_H

#include "sl_train.h"

enum { P3_MAX_CHUNKS = 64 };

typedef struct p3_chunk {
    int b0, b1; /* its blocks [b0, b1) (layers 1..L) */
    int l0, l1; /* its layers [l0, l1): 0 the embedding (the model's first chunk), L + 1 the head (its last) */
} p3_chunk;

/* Chunk k of stage p of P with v chunks a stage, of L blocks: the model's chunk c = k·P + p of
 * P·v, its blocks by sl_share (even, the first L % (P·v) chunks one more; validate makes them
 * equal for interleaved, as Megatron-LM does). */
static inline p3_chunk p3_chunk_of(int L, int P, int v, int p, int k)
{
    const int G = P * v, c = k * P + p;
    size_t lo, hi;
    sl_share((size_t)L, G, c, &lo, &hi);
    p3_chunk ch = {(int)lo + 1, (int)hi + 1, (int)lo + 1, (int)hi + 1};
    if (c == 0) ch.l0 = 0;
    if (c == G - 1) ch.l1 = L + 2;
    return ch;
}

/* The tag of a boundary tensor of micro-batch mb between neighbouring stages: the receiving
 * stage's chunk k and the direction (0 the activation forward, 1 its gradient backward). With
 * v = 1: 2·mb + grad. */
static inline int p3_tag(int mb, int v, int k, int grad) { return 2 * (mb * v + k) + grad; }

#endif
