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
 * tree (reduce), then all flow down (broadcast), the two trees' chunks in flight at the same
 * time, so each rank's links carry both halves at once. (NCCL also overlaps the broadcast of
 * the first chunks with the reduction of the later ones; here the phases are separate.) */
#include <stdlib.h>

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

/* Both trees at once, with non-blocking messages: for each chunk the receives of both trees
 * are posted together and each tree's chunk is reduced and passed on as soon as its own
 * children's data is in, so a rank's links carry tree 0's and tree 1's halves at the same
 * time. A tree's step waits only for that tree's messages of the same chunk, and a chunk is
 * started only when both trees are done with the previous one: no wait can close a cycle. */
typedef struct dbt {
    sl_comm *c;
    const void *s;
    void *r;
    sl_dtype t;
    sl_redop op;
    size_t seg;
    half h[2];
    char *slot[2][2];         /* [tree][child]: one chunk each */
    MPI_Request *sends;       /* sends in flight (completed at the end of each phase) */
    size_t nsends;
} dbt;

static void isend(dbt *d, const void *buf, size_t len, int to, int tag)
{
    SL_CHECK_MPI(MPI_Isend(buf, (int)(len * sl_dtype_size(d->t)), MPI_BYTE, to, tag, d->c->comm,
                           &d->sends[d->nsends++]));
}

/* Tree w's chunk k has arrived from its children: add them to the own part, pass it up. */
static void up_done(dbt *d, int w, size_t off, size_t len)
{
    const void *cur = slc_at(d->s, off, d->t);
    void *acc = slc_at(d->r, off, d->t);
    for (int i = 0; i < 2; i++) {
        if (d->h[w].child[i] < 0) continue;
        slc_reduce(d->c, acc, cur, d->slot[w][i], len, d->t, d->op);
        cur = acc;
    }
    if (d->h[w].parent >= 0) {
        isend(d, cur, len, d->h[w].parent, SL_TAG_DBTREE_UP + w);
    } else {
        if (cur != acc) slc_copy(d->c, acc, cur, len * sl_dtype_size(d->t));
        slc_finish_avg(d->c, acc, len, d->t, d->op);
    }
}

static void down_done(dbt *d, int w, size_t off, size_t len)
{
    for (int i = 0; i < 2; i++)
        if (d->h[w].child[i] >= 0)
            isend(d, slc_at(d->r, off, d->t), len, d->h[w].child[i], SL_TAG_DBTREE_DOWN + w);
}

static void finish_sends(dbt *d)
{
    SL_CHECK_MPI(MPI_Waitall((int)d->nsends, d->sends, MPI_STATUSES_IGNORE));
    d->nsends = 0;
}

static void dbtree_concurrent(dbt *d, size_t nk)
{
    size_t es = sl_dtype_size(d->t);
    for (int phase = 0; phase < 2; phase++) { /* 0: up (reduce), 1: down (broadcast) */
        for (size_t k = 0; k < nk; k++) {
            MPI_Request rq[4] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                                 MPI_REQUEST_NULL};
            size_t off[2], len[2];
            int waiting[2] = {0, 0};
            for (int w = 0; w < 2; w++) {
                len[w] = chunk_of(&d->h[w], k, d->seg, &off[w]);
                if (!len[w]) continue;
                int bytes = (int)(len[w] * es);
                if (phase == 0) {
                    for (int i = 0; i < 2; i++) {
                        if (d->h[w].child[i] < 0) continue;
                        SL_CHECK_MPI(MPI_Irecv(d->slot[w][i], bytes, MPI_BYTE, d->h[w].child[i],
                                               SL_TAG_DBTREE_UP + w, d->c->comm, &rq[2 * w + i]));
                        waiting[w]++;
                    }
                    if (!waiting[w]) up_done(d, w, off[w], len[w]); /* a leaf: send at once */
                } else if (d->h[w].parent >= 0) {
                    SL_CHECK_MPI(MPI_Irecv(slc_at(d->r, off[w], d->t), bytes, MPI_BYTE,
                                           d->h[w].parent, SL_TAG_DBTREE_DOWN + w, d->c->comm,
                                           &rq[2 * w]));
                    waiting[w] = 1;
                } else {
                    down_done(d, w, off[w], len[w]); /* the root starts the broadcast */
                }
            }
            /* Handle each tree as soon as all of its receives for this chunk are in. */
            while (waiting[0] || waiting[1]) {
                int nd, idx[4];
                SL_CHECK_MPI(MPI_Waitsome(4, rq, &nd, idx, MPI_STATUSES_IGNORE));
                for (int j = 0; j < nd; j++) {
                    int w = idx[j] / 2;
                    if (--waiting[w]) continue;
                    if (phase == 0) up_done(d, w, off[w], len[w]);
                    else down_done(d, w, off[w], len[w]);
                }
            }
        }
        /* Up-phase sends read chunks the down phase will overwrite: finish them first. */
        finish_sends(d);
    }
}

/* One tree after the other, chunk by chunk, with the blocking transport: the path for device
 * buffers that must be staged through host memory (coll_xfer.c does the staging). The order
 * (chunk k of tree 0, then of tree 1, then chunk k+1) is the same on every rank, and a rank
 * only waits for a message of the chunk and tree it is on, so the blocking calls cannot
 * deadlock even where two ranks are parent and child in both trees. */
static void dbtree_staged(dbt *d, size_t nk)
{
    sl_comm *c = d->c;
    sl_dtype t = d->t;
    size_t esize = sl_dtype_size(t);
    for (size_t k = 0; k < nk; k++) {
        for (int w = 0; w < 2; w++) {
            size_t off, len = chunk_of(&d->h[w], k, d->seg, &off);
            if (!len) continue;
            const void *cur = slc_at(d->s, off, t);
            void *acc = slc_at(d->r, off, t);
            for (int i = 0; i < 2; i++) {
                if (d->h[w].child[i] < 0) continue;
                slx_recv_reduce(c, acc, cur, len, t, d->op, d->h[w].child[i], SL_TAG_DBTREE_UP + w);
                cur = acc;
            }
            if (d->h[w].parent >= 0) {
                slx_send(c, cur, len, t, d->h[w].parent, SL_TAG_DBTREE_UP + w);
            } else {
                if (cur != acc) slc_copy(c, acc, cur, len * esize);
                slc_finish_avg(c, acc, len, t, d->op);
            }
        }
    }
    for (size_t k = 0; k < nk; k++) {
        for (int w = 0; w < 2; w++) {
            size_t off, len = chunk_of(&d->h[w], k, d->seg, &off);
            if (!len) continue;
            void *p = slc_at(d->r, off, t);
            if (d->h[w].parent >= 0) slx_recv(c, p, len, t, d->h[w].parent, SL_TAG_DBTREE_DOWN + w);
            for (int i = 0; i < 2; i++)
                if (d->h[w].child[i] >= 0)
                    slx_send(c, p, len, t, d->h[w].child[i], SL_TAG_DBTREE_DOWN + w);
        }
    }
}

int slc_dbtree_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                         sl_redop op)
{
    dbt d = {.c = c, .s = s, .r = r, .t = t, .op = op, .seg = slc_seg_elems(c, t)};
    for (int w = 0; w < 2; w++) {
        d.h[w].off = slc_chunk_off(n, 2, w);
        d.h[w].len = slc_chunk_len(n, 2, w);
        slc_dbtree_shape(c->size, c->rank, w, &d.h[w].parent, &d.h[w].child[0],
                         &d.h[w].child[1]);
    }
    size_t nk = (d.h[0].len + d.seg - 1) / d.seg; /* half 0 is the longer one */
    if (c->space == SL_MEM_DEVICE && !c->mpi_device_ok) {
        dbtree_staged(&d, nk);
        return SL_COLL_OK;
    }
    size_t cb = d.seg * sl_dtype_size(t);
    char *slots = slc_scratch(c, SLC_SEG, 4 * cb);
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < 2; i++) d.slot[w][i] = slots + (size_t)(2 * w + i) * cb;
    /* At most two sends per tree per chunk in either phase. */
    d.sends = malloc(4 * (nk ? nk : 1) * sizeof *d.sends);
    if (!d.sends) SL_FATAL("out of memory for %zu requests", 4 * nk);
    dbtree_concurrent(&d, nk);
    free(d.sends);
    return SL_COLL_OK;
}
