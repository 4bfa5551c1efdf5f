/* coll_direct.c — the fully connected all-reduce: every rank exchanges with every other at once
 * (the scheme the Hot Chips tutorial sets beside the ring: "each worker communicates with
 * everyone else, so just two steps, but each with N-1 sub-steps").
 *
 * The vector is cut into n pieces (sizes differing by at most one element, or the blocks of
 * reduce-scatter and all-gather). Reduce-scatter: one step of n-1 simultaneous exchanges, in
 * the k-th of which rank r sends piece r+k to rank r+k and receives its own piece r from rank
 * r-k, adding it to its own contribution; the sums are taken in the order k = 1, 2, ... so every
 * run gives the same bits. All-gather: one step of n-1 exchanges, rank r sending its finished
 * piece to r+k and receiving piece r-k from r-k. Each rank sends 2(n-1)/n of the vector, as the
 * ring does, but in 2 steps rather than 2(n-1): alpha counts twice instead of 2(n-1) times, at the
 * price of n-1 messages in flight into each rank at once, which a switched network with all-to-all
 * bandwidth absorbs and a ring or torus of links does not. c->max_inflight (--max-inflight)
 * bounds the exchanges in flight, blocking and non-blocking alike: 1 is a pairwise exchange,
 * one peer after the other. */
#include <stdlib.h>

#include "coll_internal.h"

/* First element of piece p: an even split of count, or blocks of `block`. */
static size_t piece(const sl_comm *c, size_t count, size_t block, int p)
{
    return block ? (size_t)p * block : slc_chunk_off(count, c->size, p);
}
static size_t piece_len(const sl_comm *c, size_t count, size_t block, int p)
{
    return piece(c, count, block, p + 1) - piece(c, count, block, p);
}

static int window(const sl_comm *c)
{
    return c->max_inflight > 0 && c->max_inflight < c->size - 1 ? c->max_inflight : c->size - 1;
}

/* Reduce-scatter: src holds the whole vector; piece r, reduced, goes to `final`. */
static void direct_rs(sl_comm *c, const void *src, void *final, size_t count, size_t block,
                      sl_dtype t, sl_redop op)
{
    int n = c->size, r = c->rank;
    slx_msg *m = malloc((size_t)(n - 1) * sizeof *m);
    if (!m) SL_FATAL("out of memory for %d exchanges", n - 1);
    for (int k = 1; k < n; k++) {
        int to = (r + k) % n, from = (r + n - k) % n;
        m[k - 1] = (slx_msg){.sbuf = slc_at(src, piece(c, count, block, to), t),
                             .sn = piece_len(c, count, block, to), .to = to, .dst = final,
                             .a = k == 1 ? slc_at(src, piece(c, count, block, r), t) : final,
                             .rn = piece_len(c, count, block, r), .from = from};
    }
    slx_fan(c, m, n - 1, window(c), t, op, SL_TAG_DIRECT);
    free(m);
}

/* All-gather on buf, where piece r is already in place. */
static void direct_ag(sl_comm *c, void *buf, size_t count, size_t block, sl_dtype t)
{
    int n = c->size, r = c->rank;
    slx_msg *m = malloc((size_t)(n - 1) * sizeof *m);
    if (!m) SL_FATAL("out of memory for %d exchanges", n - 1);
    for (int k = 1; k < n; k++) {
        int to = (r + k) % n, from = (r + n - k) % n;
        m[k - 1] = (slx_msg){.sbuf = slc_at(buf, piece(c, count, block, r), t),
                             .sn = piece_len(c, count, block, r), .to = to,
                             .dst = slc_at(buf, piece(c, count, block, from), t),
                             .rn = piece_len(c, count, block, from), .from = from};
    }
    slx_fan(c, m, n - 1, window(c), t, SL_NREDOPS, SL_TAG_DIRECT);
    free(m);
}

int slc_direct_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    void *mine = slc_at(r, piece(c, n, 0, c->rank), t);
    size_t len = piece_len(c, n, 0, c->rank);
    /* A rank with no piece (count < ranks) receives nothing to add its own to. */
    direct_rs(c, s, mine, n, 0, t, op);
    slc_finish_avg(c, mine, len, t, op);
    direct_ag(c, r, n, 0, t);
    return SL_COLL_OK;
}

int slc_direct_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                              sl_redop op)
{
    direct_rs(c, s, r, 0, n, t, op);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_direct_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    slc_copy(c, slc_at(r, (size_t)c->rank * n, t), s, n * sl_dtype_size(t));
    direct_ag(c, r, 0, n, t);
    return SL_COLL_OK;
}

/* The schedule for the non-blocking engine: the same exchanges, one step per peer, the
 * reduce-scatter's n-1 steps one group and the all-gather's another (slc_step.join), so that
 * the engine keeps window(c) exchanges in flight as slx_fan does and reduces the received
 * copies in the same order k = 1, 2, ...: the same bits as the blocking algorithm. The
 * all-gather's group starts once the reduce-scatter's is complete: it sends the piece that
 * group summed. */
int slc_direct_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out)
{
    int n = c->size, r = c->rank, k = 0, w = window(c);
    size_t mine = piece(c, count, block, r), mlen = piece_len(c, count, block, r);
    for (int d = 1; (parts & SLC_PART_RS) && d < n; d++) {
        int to = (r + d) % n, from = (r + n - d) % n;
        slc_step st = {.to = to, .from = from, .send_buf = SLC_BUF_S,
                       .send_off = piece(c, count, block, to),
                       .send_len = piece_len(c, count, block, to),
                       .recv_off = mine, .recv_len = mlen, .reduce = 1,
                       .a_buf = d == 1 ? SLC_BUF_S : SLC_BUF_R, .join = d > 1, .window = w};
        if (d == n - 1) {
            st.avg_off = mine;
            st.avg_len = mlen;
        }
        out[k++] = st;
    }
    for (int d = 1; (parts & SLC_PART_AG) && d < n; d++) {
        int to = (r + d) % n, from = (r + n - d) % n;
        out[k++] = (slc_step){.to = to, .from = from, .send_buf = SLC_BUF_R, .send_off = mine,
                              .send_len = mlen, .recv_off = piece(c, count, block, from),
                              .recv_len = piece_len(c, count, block, from), .join = d > 1,
                              .window = w};
    }
    return k;
}
