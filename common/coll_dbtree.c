/* coll_dbtree.c — double binary tree all-reduce (Sanders, Speck and Träff 2009; the shape
 * NCCL uses for its tree all-reduce).
 *
 * A binary tree has about half of its ranks as leaves, which only send and receive once, and
 * the other half as inner nodes, which do two receives and a send each way: the inner nodes'
 * links carry twice what the leaves' do. The double binary tree builds a second tree in which
 * (for even n) the leaves of the first are the inner nodes, and sends half the vector through
 * each: every rank then moves about the same volume, with log2(n) depth.
 *
 * Tree 0 numbers the ranks so that the odd ones are leaves: a rank's parent is found by
 * clearing its lowest set bit and setting the next one up, falling back to clearing only if
 * that leaves the range. Tree 1 is tree 0 mirrored (rank -> n-1-rank) for even n, shifted by
 * one for odd n. Each half is pipelined in chunks of one segment: all chunks flow up their
 * tree (reduce), then all flow down (broadcast). Every rank handles chunk k of tree 0, then
 * chunk k of tree 1, then chunk k+1 ...: one global order in which a rank only ever waits for a
 * message of the chunk it is on, from a neighbour in that chunk's tree, so the blocking
 * exchanges cannot deadlock even where two ranks are parent and child in both trees. */
#include "coll_internal.h"

/* Tree 0: binary tree over 0..n-1 rooted at 0, whose root has a single child. */
static void btree(int n, int rank, int *parent, int *c0, int *c1)
{
    int bit = 1;
    while (bit < n && !(rank & bit)) bit <<= 1; /* lowest set bit (n's power of two for 0) */
    if (rank == 0) {
        *parent = -1;
        *c0 = -1;
        *c1 = n > 1 ? bit >> 1 : -1;
        return;
    }
    int up = (rank ^ bit) | (bit << 1);
    *parent = up < n ? up : rank ^ bit;
    int low = bit >> 1;
    *c0 = low ? rank - low : -1;
    while (low && rank + low >= n) low >>= 1; /* the right child may fall outside: go lower */
    *c1 = low ? rank + low : -1;
}

void slc_dbtree_shape(int n, int rank, int which, int *parent, int *c0, int *c1)
{
    if (which == 0) {
        btree(n, rank, parent, c0, c1);
        return;
    }
    int p, a, b;
    if (n % 2 == 0) { /* mirror: tree 0's leaves (odd) become the even ranks, inner in tree 0 */
        btree(n, n - 1 - rank, &p, &a, &b);
        *parent = p < 0 ? -1 : n - 1 - p;
        *c0 = a < 0 ? -1 : n - 1 - a;
        *c1 = b < 0 ? -1 : n - 1 - b;
    } else { /* shift by one: mirroring would map odd to even only for even n */
        btree(n, (rank + n - 1) % n, &p, &a, &b);
        *parent = p < 0 ? -1 : (p + 1) % n;
        *c0 = a < 0 ? -1 : (a + 1) % n;
        *c1 = b < 0 ? -1 : (b + 1) % n;
    }
}

typedef struct half {
    size_t off, len;          /* the half of the vector this tree carries */
    int parent, child[2];
} half;

/* The part of chunk k that falls in half h: [*off, *off + return). */
static size_t chunk_of(const half *h, size_t k, size_t seg, size_t *off)
{
    size_t start = k * seg;
    *off = h->off + start;
    if (start >= h->len) return 0;
    return h->len - start < seg ? h->len - start : seg;
}

int slc_dbtree_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                         sl_redop op)
{
    half h[2];
    for (int w = 0; w < 2; w++) {
        h[w].off = slc_chunk_off(n, 2, w);
        h[w].len = slc_chunk_len(n, 2, w);
        slc_dbtree_shape(c->size, c->rank, w, &h[w].parent, &h[w].child[0], &h[w].child[1]);
    }
    size_t seg = slc_seg_elems(c, t), nk = (h[0].len + seg - 1) / seg, esize = sl_dtype_size(t);

    /* Up: each rank adds its children's partial sums of the chunk to its own and passes the
     * result to its parent; the root of each tree ends with that half's total. */
    for (size_t k = 0; k < nk; k++) {
        for (int w = 0; w < 2; w++) {
            size_t off, len = chunk_of(&h[w], k, seg, &off);
            if (!len) continue;
            const void *cur = slc_at(s, off, t);
            void *acc = slc_at(r, off, t);
            for (int i = 0; i < 2; i++) {
                if (h[w].child[i] < 0) continue;
                slx_recv_reduce(c, acc, cur, len, t, op, h[w].child[i], SL_TAG_DBTREE_UP + w);
                cur = acc;
            }
            if (h[w].parent >= 0) {
                slx_send(c, cur, len, t, h[w].parent, SL_TAG_DBTREE_UP + w);
            } else {
                if (cur != acc) slc_copy(c, acc, cur, len * esize);
                slc_finish_avg(c, acc, len, t, op);
            }
        }
    }
    /* Down: the totals flow back from each root to every rank. */
    for (size_t k = 0; k < nk; k++) {
        for (int w = 0; w < 2; w++) {
            size_t off, len = chunk_of(&h[w], k, seg, &off);
            if (!len) continue;
            void *p = slc_at(r, off, t);
            if (h[w].parent >= 0) slx_recv(c, p, len, t, h[w].parent, SL_TAG_DBTREE_DOWN + w);
            for (int i = 0; i < 2; i++)
                if (h[w].child[i] >= 0)
                    slx_send(c, p, len, t, h[w].child[i], SL_TAG_DBTREE_DOWN + w);
        }
    }
    return SL_COLL_OK;
}
