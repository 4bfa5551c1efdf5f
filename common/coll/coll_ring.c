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

size_t slc_layout_piece(const slc_layout *L, int p)
{
    return L->block ? (size_t)p * L->block : slc_chunk_off(L->count, L->pieces, p);
}
static size_t off_of(const slc_layout *L, int i) { return slc_layout_piece(L, L->first + i * L->group); }
static size_t len_of(const slc_layout *L, int i) { return off_of(L, i + 1) - off_of(L, i); }

/* The whole communicator as one ring, its vector cut into one chunk per rank. */
static slc_ring whole_ring(const sl_comm *c)
{
    return (slc_ring){.n = c->size, .pos = c->rank, .right = (c->rank + 1) % c->size,
                      .left = (c->rank + c->size - 1) % c->size};
}
static slc_layout whole_layout(const sl_comm *c, size_t count, size_t block)
{
    return (slc_layout){.count = count, .block = block, .pieces = c->size, .group = 1, .n = c->size};
}

/* Ring reduce-scatter. src: this rank's contribution; partial sums are written into `work`
 * (the layout's offsets) and the final chunk (the one at this rank's position) into `final`.
 * Reading the own contribution from src at every step lets the out-of-place case run without
 * first copying src into the result; src may be work (the torus's second dimension). */
void slc_ring_rs(sl_comm *c, const slc_ring *g, const void *src, void *work, void *final,
                 const slc_layout *L, sl_dtype t, sl_redop op, int tag)
{
    int n = g->n, r = g->pos;
    for (int s = 0; s < n - 1; s++) {
        int si = slc_mod(r - s - 1, n), ri = slc_mod(r - s - 2, n);
        const void *sptr = slc_at(s == 0 ? src : work, off_of(L, si), t);
        void *dst = s == n - 2 ? final : slc_at(work, off_of(L, ri), t);
        slx_xchg(c, sptr, len_of(L, si), g->right, dst, slc_at(src, off_of(L, ri), t),
                 len_of(L, ri), g->left, t, op, tag);
    }
}

/* Ring all-gather on buf, where the chunk at this rank's position is already in place. */
void slc_ring_ag(sl_comm *c, const slc_ring *g, void *buf, const slc_layout *L, sl_dtype t, int tag)
{
    int n = g->n, r = g->pos;
    for (int s = 0; s < n - 1; s++) {
        int si = slc_mod(r - s, n), ri = slc_mod(r - s - 1, n);
        slx_xchg(c, slc_at(buf, off_of(L, si), t), len_of(L, si), g->right,
                 slc_at(buf, off_of(L, ri), t), NULL, len_of(L, ri), g->left, t, SL_NREDOPS, tag);
    }
}

/* The bidirectional ring: each chunk cut in two halves, the first travelling the ring
 * clockwise (to the right, as above) and the second counter-clockwise, both at once, so every
 * step exchanges with both neighbours and sends half a chunk each way. The same n-1 steps and
 * the same bytes; the two halves of a chunk are summed in opposite orders around the ring. */
static void half(const slc_layout *L, int i, int ccw, size_t *off, size_t *len)
{
    size_t o = off_of(L, i), l = len_of(L, i), h = l - l / 2; /* clockwise takes the odd one */
    *off = ccw ? o + h : o;
    *len = ccw ? l / 2 : h;
}

void slc_ring_rs2(sl_comm *c, const slc_ring *g, const void *src, void *work, void *final,
                  const slc_layout *L, sl_dtype t, sl_redop op, int tag)
{
    int n = g->n, r = g->pos;
    for (int s = 0; s < n - 1; s++) {
        slx_msg m[2];
        for (int d = 0; d < 2; d++) { /* d = 0 clockwise, 1 counter-clockwise */
            int si = slc_mod(d ? r + s + 1 : r - s - 1, n), ri = slc_mod(d ? r + s + 2 : r - s - 2, n);
            size_t so, sn, ro, rn, fo, fn;
            half(L, si, d, &so, &sn);
            half(L, ri, d, &ro, &rn);
            half(L, r, d, &fo, &fn);
            void *dst = s == n - 2 ? slc_at(final, fo - off_of(L, r), t) : slc_at(work, ro, t);
            m[d] = (slx_msg){.sbuf = slc_at(s == 0 ? src : work, so, t), .sn = sn,
                             .to = d ? g->left : g->right, .dst = dst, .a = slc_at(src, ro, t),
                             .rn = rn, .from = d ? g->right : g->left};
        }
        slx_fan(c, m, 2, 2, t, op, tag);
    }
}

void slc_ring_ag2(sl_comm *c, const slc_ring *g, void *buf, const slc_layout *L, sl_dtype t, int tag)
{
    int n = g->n, r = g->pos;
    for (int s = 0; s < n - 1; s++) {
        slx_msg m[2];
        for (int d = 0; d < 2; d++) {
            int si = slc_mod(d ? r + s : r - s, n), ri = slc_mod(d ? r + s + 1 : r - s - 1, n);
            size_t so, sn, ro, rn;
            half(L, si, d, &so, &sn);
            half(L, ri, d, &ro, &rn);
            m[d] = (slx_msg){.sbuf = slc_at(buf, so, t), .sn = sn, .to = d ? g->left : g->right,
                             .dst = slc_at(buf, ro, t), .rn = rn, .from = d ? g->right : g->left};
        }
        slx_fan(c, m, 2, 2, t, SL_NREDOPS, tag);
    }
}

int slc_ring_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    slc_ring g = whole_ring(c);
    slc_layout L = whole_layout(c, n, 0);
    void *mine = slc_at(r, off_of(&L, c->rank), t);
    slc_ring_rs(c, &g, s, r, mine, &L, t, op, SL_TAG_RING);
    /* avg: each rank divides only the chunk it owns, before it is gathered. */
    slc_finish_avg(c, mine, len_of(&L, c->rank), t, op);
    slc_ring_ag(c, &g, r, &L, t, SL_TAG_RING);
    return SL_COLL_OK;
}

int slc_ring_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op)
{
    slc_ring g = whole_ring(c);
    slc_layout L = whole_layout(c, 0, n);
    /* Partial sums of chunks this rank does not own need a whole-vector work area: the
     * result buffer holds one block, and the input is not ours to overwrite. */
    void *work = slc_scratch(c, SLC_WORK, (size_t)c->size * n * sl_dtype_size(t));
    slc_ring_rs(c, &g, s, work, r, &L, t, op, SL_TAG_RING);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_ring_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    slc_ring g = whole_ring(c);
    slc_layout L = whole_layout(c, 0, n);
    slc_copy(c, slc_at(r, off_of(&L, c->rank), t), s, n * sl_dtype_size(t));
    slc_ring_ag(c, &g, r, &L, t, SL_TAG_RING);
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

/* A ring's steps as a schedule for the non-blocking engine (coll_nb.c): the same steps as
 * slc_ring_rs and slc_ring_ag, one chunk per step (the engine cuts it into segments). The own
 * contribution is read from buffer `own` (SLC_BUF_S, or SLC_BUF_R where an earlier phase left
 * it in the result); with `avg`, the chunk the reduce-scatter completes is divided. */
int slc_ring_steps(const slc_ring *g, const slc_layout *L, int parts, int own, int avg, slc_step *out)
{
    int p = g->n, r = g->pos, k = 0;
    int first = parts & SLC_PART_RS ? 0 : p - 1, last = parts & SLC_PART_AG ? 2 * (p - 1) : p - 1;
    for (int s = first; s < last; s++) {
        int rs = s < p - 1, j = rs ? s : s - (p - 1);
        int si = slc_mod(rs ? r - j - 1 : r - j, p), ri = slc_mod(rs ? r - j - 2 : r - j - 1, p);
        slc_step st = {.to = g->right, .from = g->left, .send_buf = s == 0 ? own : SLC_BUF_R,
                       .send_off = off_of(L, si), .send_len = len_of(L, si),
                       .recv_off = off_of(L, ri), .recv_len = len_of(L, ri),
                       .reduce = rs, .a_buf = own};
        if (s == p - 2 && avg) { /* the last reduce-scatter step completes chunk r */
            st.avg_off = st.recv_off;
            st.avg_len = st.recv_len;
        }
        out[k++] = st;
    }
    return k;
}

/* The bidirectional ring's steps: step s of slc_ring_rs2 / slc_ring_ag2 as a group of two,
 * its clockwise exchange (d = 0) then its counter-clockwise one, in flight together. The
 * halves are disjoint, so the order in which they are reduced does not change the bits; where
 * the ring has two members (left = right) the two exchanges go to the same peer under the
 * same tag, and match because both ends post them in the same order. */
int slc_ring_steps2(const slc_ring *g, const slc_layout *L, int parts, int own, int avg, slc_step *out)
{
    int p = g->n, r = g->pos, k = 0;
    int first = parts & SLC_PART_RS ? 0 : p - 1, last = parts & SLC_PART_AG ? 2 * (p - 1) : p - 1;
    for (int s = first; s < last; s++) {
        int rs = s < p - 1, j = rs ? s : s - (p - 1);
        for (int d = 0; d < 2; d++) {
            int si = slc_mod(d ? r + j + rs : r - j - rs, p), ri = slc_mod(d ? r + j + rs + 1 : r - j - rs - 1, p);
            slc_step st = {.to = d ? g->left : g->right, .from = d ? g->right : g->left,
                           .send_buf = s == 0 ? own : SLC_BUF_R, .reduce = rs, .a_buf = own,
                           .join = d, .window = 2};
            half(L, si, d, &st.send_off, &st.send_len);
            half(L, ri, d, &st.recv_off, &st.recv_len);
            if (s == p - 2 && avg) { /* the last reduce-scatter step completes chunk r */
                st.avg_off = st.recv_off;
                st.avg_len = st.recv_len;
            }
            out[k++] = st;
        }
    }
    return k;
}

/* The ring all-reduce (both halves over an even split), reduce-scatter (the first half over
 * blocks) or all-gather (the second half over blocks) as a schedule. */
int slc_ring_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out)
{
    slc_ring g = whole_ring(c);
    slc_layout L = whole_layout(c, count, block);
    return slc_ring_steps(&g, &L, parts, SLC_BUF_S, 1, out);
}
