/* coll_ring.c — ring algorithms: reduce-scatter and all-gather around the ring 0 -> 1 -> ...
 * -> n-1 -> 0, and the all-reduce made of the two (as in Baidu's ring all-reduce and NCCL).
 * Also a pipelined chain for broadcast and reduce, the ring opened at the root.
 *
 * The vector is cut into n chunks (sizes differ by at most one element, so any count works,
 * including count < n). Reduce-scatter: at step s (0..n-2) rank r sends chunk r-s-1 to r+1 and
 * receives chunk r-s-2 from r-1, adding its own contribution; after n-1 steps it holds chunk
 * r fully reduced. All-gather: at step s it forwards chunk r-s and receives chunk r-s-1.
 * Each rank sends 2(n-1)/n of the vector in 2(n-1) steps: bandwidth-optimal, latency linear
 * in n. Each step's chunk moves in pipelined segments (coll_xfer.c). */
#include "coll_internal.h"

/* Chunk i of the vector: an even split of `count`, or fixed blocks of `block` elements
 * (reduce-scatter and all-gather, where block i belongs to rank i). */
typedef struct layout { size_t count, block; int n; } layout;

static size_t off_of(const layout *L, int i)
{
    return L->block ? (size_t)i * L->block : slc_chunk_off(L->count, L->n, i);
}
static size_t len_of(const layout *L, int i)
{
    return L->block ? L->block : slc_chunk_len(L->count, L->n, i);
}

/* Ring reduce-scatter. src: this rank's contribution (whole vector); partial sums are written
 * into `work` (whole-vector layout) and the final chunk r into `final`. Reading the own
 * contribution from src at every step lets the out-of-place case run without first copying
 * src into the result. */
static void ring_rs(sl_comm *c, const void *src, void *work, void *final, const layout *L,
                    sl_dtype t, sl_redop op)
{
    int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s < n - 1; s++) {
        int si = slc_mod(r - s - 1, n), ri = slc_mod(r - s - 2, n);
        const void *sptr = slc_at(s == 0 ? src : work, off_of(L, si), t);
        void *dst = s == n - 2 ? final : slc_at(work, off_of(L, ri), t);
        slx_xchg(c, sptr, len_of(L, si), right, dst, slc_at(src, off_of(L, ri), t),
                 len_of(L, ri), left, t, op, SL_TAG_RING);
    }
}

/* Ring all-gather on buf, where this rank's chunk r is already in place. */
static void ring_ag(sl_comm *c, void *buf, const layout *L, sl_dtype t)
{
    int n = c->size, r = c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s < n - 1; s++) {
        int si = slc_mod(r - s, n), ri = slc_mod(r - s - 1, n);
        slx_xchg(c, slc_at(buf, off_of(L, si), t), len_of(L, si), right,
                 slc_at(buf, off_of(L, ri), t), NULL, len_of(L, ri), left, t, SL_NREDOPS,
                 SL_TAG_RING);
    }
}

int slc_ring_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    layout L = {.count = n, .n = c->size};
    void *mine = slc_at(r, off_of(&L, c->rank), t);
    ring_rs(c, s, r, mine, &L, t, op);
    /* avg: each rank divides only the chunk it owns, before it is gathered. */
    slc_finish_avg(c, mine, len_of(&L, c->rank), t, op);
    ring_ag(c, r, &L, t);
    return SL_COLL_OK;
}

int slc_ring_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op)
{
    layout L = {.block = n, .n = c->size};
    /* Partial sums of chunks this rank does not own need a whole-vector work area: the
     * result buffer holds one block, and the input is not ours to overwrite. */
    void *work = slc_scratch(c, SLC_WORK, (size_t)c->size * n * sl_dtype_size(t));
    ring_rs(c, s, work, r, &L, t, op);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_ring_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    layout L = {.block = n, .n = c->size};
    slc_copy(c, slc_at(r, off_of(&L, c->rank), t), s, n * sl_dtype_size(t));
    ring_ag(c, r, &L, t);
    return SL_COLL_OK;
}

/* Broadcast down the chain root, root+1, ..., root-1: at iteration i a rank receives segment
 * i from its predecessor while it forwards segment i-1 to its successor, so all links are busy
 * once the pipeline is full: time ~ (n-2 + S/seg) segment steps instead of (n-1) * S. */
int slc_chain_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    int v = slc_mod(c->rank - root, c->size), size = c->size;
    int prev = v > 0 ? (c->rank + size - 1) % size : MPI_PROC_NULL;
    int next = v < size - 1 ? (c->rank + 1) % size : MPI_PROC_NULL;
    size_t seg = slc_seg_elems(c, t), nseg = (n + seg - 1) / seg;
    int lag = v > 0; /* the root sends segment i at iteration i; the others forward it at i+1 */
    for (size_t i = 0; i < nseg + (size_t)lag; i++) {
        size_t si = i - (size_t)lag, sn = 0, rn = 0; /* si: the segment sent (if any) */
        const void *sp = NULL;
        void *rp = NULL;
        if (i >= (size_t)lag && si < nseg) {
            sn = si + 1 < nseg ? seg : n - si * seg;
            sp = slc_at(buf, si * seg, t);
        }
        if (v > 0 && i < nseg) {
            rn = i + 1 < nseg ? seg : n - i * seg;
            rp = slc_at(buf, i * seg, t);
        }
        slx_xchg(c, sp, sn, next, rp, NULL, rn, prev, t, SL_NREDOPS, SL_TAG_CHAIN);
    }
    return SL_COLL_OK;
}

/* Reduce up the same chain, from the far end to the root: at iteration i a rank receives the
 * partial result of segment i from its successor and adds its own, while it passes segment
 * i-1 on to its predecessor. The root accumulates into r; the others into a work vector. */
int slc_chain_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                     int root)
{
    int v = slc_mod(c->rank - root, c->size), size = c->size;
    int towards = v > 0 ? (c->rank + size - 1) % size : MPI_PROC_NULL; /* nearer the root */
    int from = v < size - 1 ? (c->rank + 1) % size : MPI_PROC_NULL;
    int tail = v == size - 1;
    void *acc = v == 0 ? r : (tail ? NULL : slc_scratch(c, SLC_WORK, n * sl_dtype_size(t)));
    const void *out = tail ? s : acc; /* what is sent towards the root */
    size_t seg = slc_seg_elems(c, t), nseg = (n + seg - 1) / seg;
    int lag = !tail;
    for (size_t i = 0; i < nseg + (size_t)lag; i++) {
        size_t si = i - (size_t)lag, sn = 0, rn = 0; /* si: the segment sent (if any) */
        const void *sp = NULL, *ap = NULL;
        void *rp = NULL;
        if (v > 0 && i >= (size_t)lag && si < nseg) {
            sn = si + 1 < nseg ? seg : n - si * seg;
            sp = slc_at(out, si * seg, t);
        }
        if (!tail && i < nseg) {
            rn = i + 1 < nseg ? seg : n - i * seg;
            rp = slc_at(acc, i * seg, t);
            ap = slc_at(s, i * seg, t);
        }
        slx_xchg(c, sp, sn, towards, rp, ap, rn, from, t, op, SL_TAG_CHAIN);
    }
    if (v == 0) slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

/* The ring as a schedule for the non-blocking engine (coll_nb.c): the same steps as
 * ring_rs and ring_ag, one chunk per step (the engine cuts it into segments). The all-reduce
 * is both halves over an even split; the reduce-scatter is the first half and the all-gather
 * the second over blocks. */
int slc_ring_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out)
{
    layout L = {.count = count, .block = block, .n = c->size};
    int p = c->size, r = c->rank, right = (r + 1) % p, left = (r + p - 1) % p, k = 0;
    int first = parts & SLC_PART_RS ? 0 : p - 1, last = parts & SLC_PART_AG ? 2 * (p - 1) : p - 1;
    for (int s = first; s < last; s++) {
        int rs = s < p - 1, j = rs ? s : s - (p - 1);
        int si = slc_mod(rs ? r - j - 1 : r - j, p), ri = slc_mod(rs ? r - j - 2 : r - j - 1, p);
        slc_step st = {.to = right, .from = left, .send_buf = s == 0 ? SLC_BUF_S : SLC_BUF_R,
                       .send_off = off_of(&L, si), .send_len = len_of(&L, si),
                       .recv_off = off_of(&L, ri), .recv_len = len_of(&L, ri),
                       .reduce = rs, .a_buf = SLC_BUF_S};
        if (s == p - 2) { /* the last reduce-scatter step completes chunk r */
            st.avg_off = st.recv_off;
            st.avg_len = st.recv_len;
        }
        out[k++] = st;
    }
    return k;
}
