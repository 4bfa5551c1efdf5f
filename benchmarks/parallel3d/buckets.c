/* buckets.c — the rule that cuts a stage's gradient into buckets (buckets.h). */
#include "buckets.h"

int p3_buckets(const size_t *lw, int l0, int l1, size_t es, double bytes, p3_bucket *b)
{
    int n = 0;
    for (int l = l1 - 1; l >= l0; l--) {
        if (n == 0 || (double)b[n - 1].count * (double)es >= bytes) { /* the open one is full: a new one */
            if (n == P3_MAX_BUCKETS) { /* no room: the last takes the rest */
                b[n - 1].lo = l, b[n - 1].off = lw[l], b[n - 1].count = lw[b[n - 1].hi + 1] - lw[l];
                continue;
            }
            b[n++] = (p3_bucket){.hi = l, .lo = l, .off = lw[l], .count = lw[l + 1] - lw[l]};
            continue;
        }
        b[n - 1].lo = l, b[n - 1].off = lw[l], b[n - 1].count += lw[l + 1] - lw[l];
    }
    return n;
}
