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
 * one for odd n. Each half is pipelined in chunks of one segment: chunks flow up their tree
 * (reduce) and, from each root, back down (broadcast); both trees' chunks are in flight at the
 * same time, so each rank's links carry both halves at once, and a chunk's broadcast overlaps
 * the next chunk's reduction. */
#include <stdio.h>
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

void sl_coll_dbtree_describe(int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = 0;
    char both[256] = "";
    size_t bl = 0;
    for (int w = 0; w < 2; w++) {
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%stree %d parents:",
                                 w ? "; " : "", w);
        for (int r = 0; r < n && used < len; r++) {
            int p, a, b;
            slc_dbtree_shape(n, r, w, &p, &a, &b);
            used += (size_t)snprintf(buf + used, len - used, " %d", p);
        }
    }
    for (int r = 0; r < n && bl < sizeof both; r++) { /* a rank with children in both trees */
        int inner = 1;
        for (int w = 0; w < 2; w++) {
            int p, a, b;
            slc_dbtree_shape(n, r, w, &p, &a, &b);
            inner = inner && (a >= 0 || b >= 0);
        }
        if (inner) bl += (size_t)snprintf(both + bl, sizeof both - bl, " %d", r);
    }
    if (used < len)
        snprintf(buf + used, len - used, " (-1: the root); inner in both trees:%s",
                 bl ? both : " none");
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

/* Both trees at once, with non-blocking messages, and the broadcast of chunk k-1 overlapped
 * with the reduction of chunk k (as NCCL's tree does). Iteration k posts, for each tree, the
 * receive of the reduced chunk k-1 from the parent and the receives of chunk k from the
 * children; each tree's chunk is passed on as soon as its own messages are in, and the root
 * of a tree starts broadcasting a chunk as soon as it has reduced it. Chunk k-1 lands where
 * this rank's partial sum of it was sent up from, so that send must be complete before the
 * receive is posted (it is, once the parent has it). A rank waits only for messages of
 * chunks k and k-1 whose senders need nothing from later iterations, and iteration k+1 starts
 * only when k is done on this rank: no wait can close a cycle. */
typedef struct dbt {
    sl_comm *c;
    const void *s;
    void *r;
    sl_dtype t;
    sl_redop op;
    size_t seg;
    half h[2];
    char *slot[2][2];         /* [tree][child]: one chunk each */
    MPI_Request up[2];        /* each tree's send of the latest chunk to the parent */
    MPI_Request *sends;       /* the broadcast's sends, in the order posted */
    size_t nsends, ndone;     /* posted; completed (the first ndone) */
} dbt;

static void down_done(dbt *d, int w, size_t off, size_t len)
{
    for (int i = 0; i < 2; i++) {
        if (d->h[w].child[i] < 0) continue;
        d->c->bytes_sent += len * sl_dtype_size(d->t);
        SL_CHECK_MPI(MPI_Isend(slc_at(d->r, off, d->t), (int)(len * sl_dtype_size(d->t)),
                               MPI_BYTE, d->h[w].child[i], SL_TAG_DBTREE_DOWN + w, d->c->comm,
                               &d->sends[d->nsends++]));
    }
}

/* Tree w's chunk has arrived from its children: add them to the own part and pass it up; at
 * the root, the chunk is complete: start its broadcast. */
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
        d->c->bytes_sent += len * sl_dtype_size(d->t);
        SL_CHECK_MPI(MPI_Isend(cur, (int)(len * sl_dtype_size(d->t)), MPI_BYTE, d->h[w].parent,
                               SL_TAG_DBTREE_UP + w, d->c->comm, &d->up[w]));
    } else {
        if (cur != acc) slc_copy(d->c, acc, cur, len * sl_dtype_size(d->t));
        slc_finish_avg(d->c, acc, len, d->t, d->op);
        down_done(d, w, off, len);
    }
}

static void dbtree_concurrent(dbt *d, size_t nk)
{
    size_t es = sl_dtype_size(d->t);
    d->up[0] = d->up[1] = MPI_REQUEST_NULL;
    size_t began[3] = {0, 0, 0}; /* nsends when iterations k-3, k-2, k-1 began (by k % 3) */
    for (size_t k = 0; k <= nk; k++) {
        /* The broadcast's sends posted before iteration k-3 (chunks k-4 and older) are completed
         * now, not all at the end: a child posts the receive of chunk j before it sends chunk
         * j+1 up, which this rank has had since iteration k-1, so this waits for nothing that
         * is not already under way; and the sends in flight stay a few chunks' worth whatever
         * the vector's size (each pending request costs something in the library: SMPI walks a
         * list of them at every completion, and 256 MiB on 16 ranks took minutes). */
        if (k >= 3) {
            size_t upto = began[k % 3]; /* when iteration k-3 began */
            SL_CHECK_MPI(MPI_Waitall((int)(upto - d->ndone), d->sends + d->ndone, MPI_STATUSES_IGNORE));
            d->ndone = upto;
        }
        began[k % 3] = d->nsends;
        /* rq[3w], rq[3w+1]: chunk k from tree w's children; rq[3w+2]: chunk k-1 from its parent */
        MPI_Request rq[6];
        for (int i = 0; i < 6; i++) rq[i] = MPI_REQUEST_NULL;
        size_t uoff[2], ulen[2], doff[2], dlen[2];
        int waiting[2][2] = {{0, 0}, {0, 0}}; /* [tree][0: up, 1: down] */
        for (int w = 0; w < 2; w++) {
            ulen[w] = k < nk ? chunk_of(&d->h[w], k, d->seg, &uoff[w]) : 0;
            dlen[w] = k > 0 ? chunk_of(&d->h[w], k - 1, d->seg, &doff[w]) : 0;
            if (dlen[w] && d->h[w].parent >= 0) {
                SL_CHECK_MPI(MPI_Wait(&d->up[w], MPI_STATUS_IGNORE)); /* chunk k-1 went up */
                SL_CHECK_MPI(MPI_Irecv(slc_at(d->r, doff[w], d->t), (int)(dlen[w] * es), MPI_BYTE,
                                       d->h[w].parent, SL_TAG_DBTREE_DOWN + w, d->c->comm,
                                       &rq[3 * w + 2]));
                waiting[w][1] = 1;
            }
        }
        for (int w = 0; w < 2; w++) {
            if (!ulen[w]) continue;
            for (int i = 0; i < 2; i++) {
                if (d->h[w].child[i] < 0) continue;
                SL_CHECK_MPI(MPI_Irecv(d->slot[w][i], (int)(ulen[w] * es), MPI_BYTE,
                                       d->h[w].child[i], SL_TAG_DBTREE_UP + w, d->c->comm,
                                       &rq[3 * w + i]));
                waiting[w][0]++;
            }
            if (!waiting[w][0]) up_done(d, w, uoff[w], ulen[w]); /* a leaf: send at once */
        }
        /* One completion at a time: MPI_Waitsome would do the same, but in SMPI 3.32 each call
         * leaves state behind that later completions walk (the wall time grows with the square
         * of the calls; simulated times are the same either way). */
        while (waiting[0][0] || waiting[0][1] || waiting[1][0] || waiting[1][1]) {
            int i;
            SL_CHECK_MPI(MPI_Waitany(6, rq, &i, MPI_STATUS_IGNORE));
            int w = i / 3, down = i % 3 == 2;
            if (--waiting[w][down]) continue;
            if (down) down_done(d, w, doff[w], dlen[w]);
            else up_done(d, w, uoff[w], ulen[w]);
        }
    }
    SL_CHECK_MPI(MPI_Waitall(2, d->up, MPI_STATUSES_IGNORE));
    SL_CHECK_MPI(MPI_Waitall((int)(d->nsends - d->ndone), d->sends + d->ndone, MPI_STATUSES_IGNORE));
    d->nsends = d->ndone = 0;
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
    /* The broadcast sends at most two messages per tree per chunk. */
    d.sends = malloc(4 * (nk ? nk : 1) * sizeof *d.sends);
    if (!d.sends) SL_FATAL("out of memory for %zu requests", 4 * nk);
    dbtree_concurrent(&d, nk);
    free(d.sends);
    return SL_COLL_OK;
}

/* The double binary tree as a schedule for the non-blocking engine (coll_nb.c), one exchange
 * per step and each half as one piece: tree 0's reduction, tree 1's, then the two broadcasts.
 * Every rank walks the phases in that order, so messages between two ranks that are
 * neighbours in both trees are sent and received in the same order. */
int slc_dbtree_schedule(const sl_comm *c, size_t n, slc_step *out)
{
    half h[2];
    int k = 0;
    for (int w = 0; w < 2; w++) {
        h[w].off = slc_chunk_off(n, 2, w);
        h[w].len = slc_chunk_len(n, 2, w);
        slc_dbtree_shape(c->size, c->rank, w, &h[w].parent, &h[w].child[0], &h[w].child[1]);
        int cur = SLC_BUF_S;
        for (int i = 0; i < 2; i++) {
            if (h[w].child[i] < 0) continue;
            out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = h[w].child[i],
                                  .recv_off = h[w].off, .recv_len = h[w].len, .reduce = 1,
                                  .a_buf = cur};
            cur = SLC_BUF_R;
        }
        if (h[w].parent >= 0) {
            out[k++] = (slc_step){.to = h[w].parent, .from = MPI_PROC_NULL, .send_buf = cur,
                                  .send_off = h[w].off, .send_len = h[w].len};
        } else { /* the root (it has a child when n > 1): its half is complete */
            out[k - 1].avg_off = h[w].off;
            out[k - 1].avg_len = h[w].len;
        }
    }
    for (int w = 0; w < 2; w++) {
        if (h[w].parent >= 0)
            out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = h[w].parent,
                                  .recv_off = h[w].off, .recv_len = h[w].len};
        for (int i = 0; i < 2; i++)
            if (h[w].child[i] >= 0)
                out[k++] = (slc_step){.to = h[w].child[i], .from = MPI_PROC_NULL,
                                      .send_buf = SLC_BUF_R, .send_off = h[w].off,
                                      .send_len = h[w].len};
    }
    return k;
}
