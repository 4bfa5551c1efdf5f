/* buckets.h — parallel3d --bucket-mb: a stage's gradient cut into buckets of consecutive layers
 * in the order backward completes them (the stage's highest layer first), each all-reduced over
 * the replicas as soon as its lowest layer's gradient is complete in the stage's last backward,
 * as DDP's buckets are (Li et al., PyTorch Distributed, 2020). What replicas.c runs and
 * pm_schedule.c predicts, cut by the same rule. */
#ifndef P3_BUCKETS_H
#define P3_BUCKETS_H

#include <stddef.h>

enum { P3_MAX_BUCKETS = 64 };

typedef struct p3_bucket {
    int hi, lo;          /* its layers [lo, hi], hi first in backward */
    size_t off, count;   /* its elements of the stage's vector: [off, off + count) */
} p3_bucket;

/* The buckets of layers [l0, l1) of a stage whose layer l starts at element lw[l] (lw[l1]: the
 * stage's end): each at least `bytes` of elements of es bytes, but the last (the stage's lowest
 * layers); one layer a bucket where the stage has more layers than P3_MAX_BUCKETS allows
 * otherwise. Returns how many, into b. */
int p3_buckets(const size_t *lw, int l0, int l1, size_t es, double bytes, p3_bucket *b);

#endif
