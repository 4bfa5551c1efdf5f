/* coll_rhd.c — Rabenseifner's all-reduce: a reduce-scatter by recursive halving followed by an
 * all-gather by recursive doubling (Rabenseifner 2004; Thakur, Rabenseifner and Gropp 2005, as
 * in MPICH). Also the reduce-scatter and the all-gather on their own.
 *
 * Recursive halving over p = 2^k ranks: at the step with distance d (p/2, p/4, ..., 1) a rank
 * exchanges half of its current window with the rank d away, keeps the half its bit selects
 * and adds the partner's copy of it; after log2 p steps it owns 1/p of the vector, reduced.
 * Recursive doubling runs the steps backwards, doubling the window each time. Cost per rank:
 * 2 log2 p messages and 2 (p-1)/p of the vector: the ring's volume with logarithmic latency.
 *
 * Rank counts that are not a power of two are folded first: with p the largest power of two
 * below n and rem = n - p, each even rank below 2 rem hands its whole vector to the odd rank
 * above it and sits out; the p survivors run the power-of-two algorithm; at the end each odd
 * rank below 2 rem hands the result back. The survivors are numbered 0..p-1 ("new ranks").
 *
 * Small vectors take recursive doubling instead (all-reduce only): at distance 1, 2, 4, ... each
 * survivor exchanges its whole partial result with new rank ^ d and combines the two, so after
 * log2 p steps every survivor holds the sum. log2 p messages where Rabenseifner sends 2 log2 p,
 * at log2 p times the vector's bytes: it wins while a message costs its latency rather than its
 * bytes (SLC_RHD_DOUBLING_BYTES, from the crossover measured by the allreduce benchmark). The
 * two operands of each combination are the same on both partners, in either order, so every
 * rank ends with the same bits. */
#include "coll_internal.h"

typedef struct rhd {
    int p, rem, newrank; /* newrank -1: this rank sat out the fold */
    size_t count, block; /* all-reduce: even split of count over p groups; else n blocks */
} rhd;

static void rhd_setup(const sl_comm *c, rhd *h, size_t count, size_t block)
{
    int n = c->size, r = c->rank;
    h->p = 1;
    while (h->p * 2 <= n) h->p *= 2;
    h->rem = n - h->p;
    h->count = count;
    h->block = block;
    if (r < 2 * h->rem) h->newrank = r % 2 ? r / 2 : -1;
    else h->newrank = r - h->rem;
}

static int real_rank(const rhd *h, int newrank)
{
    return newrank < h->rem ? newrank * 2 + 1 : newrank + h->rem;
}

/* First element of group g (0 <= g <= p). In block mode group g is new rank g's real blocks:
 * two for a survivor of the fold (its own and its folded neighbour's), one otherwise. */
static size_t goff(const rhd *h, int g)
{
    if (!h->block) return slc_chunk_off(h->count, h->p, g);
    size_t first = g < h->rem ? (size_t)g * 2 : (size_t)(g + h->rem);
    return first * h->block;
}

/* Recursive halving on acc, where src is the own contribution until the first step has
 * written acc. After it new rank g owns group g of acc. */
static void halving(sl_comm *c, const rhd *h, const void *src, void *acc, sl_dtype t,
                    sl_redop op)
{
    const void *cur = src;
    for (int d = h->p / 2; d >= 1; d /= 2) {
        int partner = h->newrank ^ d;
        int keep = h->newrank & ~(d - 1), give = partner & ~(d - 1);
        size_t k0 = goff(h, keep), k1 = goff(h, keep + d), g0 = goff(h, give), g1 = goff(h, give + d);
        slx_xchg(c, slc_at(cur, g0, t), g1 - g0, real_rank(h, partner), slc_at(acc, k0, t),
                 slc_at(cur, k0, t), k1 - k0, real_rank(h, partner), t, op, SL_TAG_RHD);
        cur = acc;
    }
}

/* Recursive doubling on buf, where new rank g holds group g. */
static void doubling(sl_comm *c, const rhd *h, void *buf, sl_dtype t)
{
    for (int d = 1; d < h->p; d *= 2) {
        int partner = h->newrank ^ d;
        int mine = h->newrank & ~(d - 1), theirs = partner & ~(d - 1);
        size_t m0 = goff(h, mine), m1 = goff(h, mine + d), o0 = goff(h, theirs), o1 = goff(h, theirs + d);
        slx_xchg(c, slc_at(buf, m0, t), m1 - m0, real_rank(h, partner), slc_at(buf, o0, t), NULL,
                 o1 - o0, real_rank(h, partner), t, SL_NREDOPS, SL_TAG_RHD);
    }
}

/* Recursive doubling over the survivors: src holds this rank's partial result; the result ends
 * in r. Each step combines into the buffer not being sent (r and a work vector in turn), since
 * a send buffer must not change while it is in flight. */
static void doubling_whole(sl_comm *c, const rhd *h, const void *src, void *r, size_t n,
                           sl_dtype t, sl_redop op)
{
    size_t bytes = n * sl_dtype_size(t);
    void *work = h->p > 1 ? slc_scratch(c, SLC_WORK, bytes) : NULL;
    const void *cur = src;
    for (int d = 1; d < h->p; d *= 2) {
        int peer = real_rank(h, h->newrank ^ d);
        void *into = cur == r ? work : r;
        slx_xchg(c, cur, n, peer, into, cur, n, peer, t, op, SL_TAG_RHD);
        cur = into;
    }
    if (cur != r) slc_copy(c, r, cur, bytes);
}

int slc_rhd_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    rhd h;
    rhd_setup(c, &h, n, 0);
    const void *src = s;
    int small = n * sl_dtype_size(t) <= SLC_RHD_DOUBLING_BYTES;
    if (c->rank < 2 * h.rem) { /* fold: even ranks give their vector to the odd neighbour */
        if (h.newrank < 0) {
            slx_send(c, s, n, t, c->rank + 1, SL_TAG_RHD_FOLD);
        } else {
            slx_recv_reduce(c, r, s, n, t, op, c->rank - 1, SL_TAG_RHD_FOLD);
            src = r;
        }
    }
    if (h.newrank >= 0 && small) {
        doubling_whole(c, &h, src, r, n, t, op);
        slc_finish_avg(c, r, n, t, op);
    } else if (h.newrank >= 0) {
        halving(c, &h, src, r, t, op);
        size_t g0 = goff(&h, h.newrank), g1 = goff(&h, h.newrank + 1);
        slc_finish_avg(c, slc_at(r, g0, t), g1 - g0, t, op);
        doubling(c, &h, r, t);
    }
    if (c->rank < 2 * h.rem) { /* unfold: hand the result back */
        if (h.newrank < 0) slx_recv(c, r, n, t, c->rank + 1, SL_TAG_RHD_FOLD);
        else slx_send(c, r, n, t, c->rank - 1, SL_TAG_RHD_FOLD);
    }
    return SL_COLL_OK;
}

int slc_rhd_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op)
{
    rhd h;
    rhd_setup(c, &h, 0, n);
    size_t esize = sl_dtype_size(t), total = (size_t)c->size * n;
    /* The halving needs a whole vector to add into; the input is not ours to overwrite and
     * the output holds one block. */
    void *work = slc_scratch(c, SLC_WORK, total * esize);
    const void *src = s;
    if (c->rank < 2 * h.rem) {
        if (h.newrank < 0) {
            slx_send(c, s, total, t, c->rank + 1, SL_TAG_RHD_FOLD);
        } else {
            slx_recv_reduce(c, work, s, total, t, op, c->rank - 1, SL_TAG_RHD_FOLD);
            src = work;
        }
    }
    if (h.newrank >= 0) {
        halving(c, &h, src, work, t, op);
        /* A survivor of the fold owns two blocks: the lower one is its neighbour's. */
        if (h.newrank < h.rem)
            slx_send(c, slc_at(work, (size_t)(c->rank - 1) * n, t), n, t, c->rank - 1,
                     SL_TAG_RHD_FOLD);
        slc_copy(c, r, slc_at(work, (size_t)c->rank * n, t), n * esize);
    } else {
        slx_recv(c, r, n, t, c->rank + 1, SL_TAG_RHD_FOLD);
    }
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_rhd_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    rhd h;
    rhd_setup(c, &h, 0, n);
    size_t total = (size_t)c->size * n;
    void *mine = slc_at(r, (size_t)c->rank * n, t);
    slc_copy(c, mine, s, n * sl_dtype_size(t));
    if (c->rank < 2 * h.rem) { /* fold: the odd neighbour collects the pair's two blocks */
        if (h.newrank < 0) slx_send(c, mine, n, t, c->rank + 1, SL_TAG_RHD_FOLD);
        else slx_recv(c, slc_at(r, (size_t)(c->rank - 1) * n, t), n, t, c->rank - 1,
                      SL_TAG_RHD_FOLD);
    }
    if (h.newrank >= 0) doubling(c, &h, r, t);
    if (c->rank < 2 * h.rem) {
        if (h.newrank < 0) slx_recv(c, r, total, t, c->rank + 1, SL_TAG_RHD_FOLD);
        else slx_send(c, r, total, t, c->rank - 1, SL_TAG_RHD_FOLD);
    }
    return SL_COLL_OK;
}

/* The pieces of the schedules below (the non-blocking engine, coll_nb.c), one exchange per
 * step. Each appends to out[k..) and returns the new k; *cur is the buffer holding this rank's
 * partial result (S until something has been reduced into R). */

/* Fold: the even rank of each of the first 2·rem pairs sends its len elements to the odd one,
 * which reduces them into R. */
static int fold_steps(const rhd *h, int r, size_t len, slc_step *out, int k, int *cur)
{
    if (r >= 2 * h->rem) return k;
    if (h->newrank < 0) {
        out[k++] = (slc_step){.to = r + 1, .from = MPI_PROC_NULL, .send_buf = SLC_BUF_S, .send_len = len};
    } else {
        out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = r - 1, .recv_len = len, .reduce = 1,
                              .a_buf = SLC_BUF_S};
        *cur = SLC_BUF_R;
    }
    return k;
}

/* Recursive halving: keep the half holding this rank's group, reduce the partner's copy of it
 * into R; the last step completes the group, so it carries the avg range. */
static int halving_steps(const rhd *h, slc_step *out, int k, int *cur)
{
    for (int d = h->p / 2; d >= 1; d /= 2) {
        int partner = h->newrank ^ d, peer = real_rank(h, partner);
        int keep = h->newrank & ~(d - 1), give = partner & ~(d - 1);
        size_t k0 = goff(h, keep), g0 = goff(h, give);
        out[k++] = (slc_step){.to = peer, .from = peer, .send_buf = *cur, .send_off = g0,
                              .send_len = goff(h, give + d) - g0, .recv_off = k0,
                              .recv_len = goff(h, keep + d) - k0, .reduce = 1, .a_buf = *cur};
        *cur = SLC_BUF_R;
    }
    size_t o0 = goff(h, h->newrank);
    out[k - 1].avg_off = o0;
    out[k - 1].avg_len = goff(h, h->newrank + 1) - o0;
    return k;
}

/* Recursive doubling: exchange the groups gathered so far with a partner at distance d. */
static int doubling_steps(const rhd *h, slc_step *out, int k)
{
    for (int d = 1; d < h->p; d *= 2) {
        int partner = h->newrank ^ d, peer = real_rank(h, partner);
        int mine = h->newrank & ~(d - 1), theirs = partner & ~(d - 1);
        size_t m0 = goff(h, mine), t0 = goff(h, theirs);
        out[k++] = (slc_step){.to = peer, .from = peer, .send_buf = SLC_BUF_R, .send_off = m0,
                              .send_len = goff(h, mine + d) - m0, .recv_off = t0,
                              .recv_len = goff(h, theirs + d) - t0};
    }
    return k;
}

/* Unfold: the odd rank of each folded pair sends the first len elements of R back. */
static int unfold_steps(const rhd *h, int r, size_t len, slc_step *out, int k)
{
    if (r >= 2 * h->rem) return k;
    if (h->newrank < 0)
        out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = r + 1, .recv_len = len};
    else
        out[k++] = (slc_step){.to = r - 1, .from = MPI_PROC_NULL, .send_buf = SLC_BUF_R, .send_len = len};
    return k;
}

/* Rabenseifner's all-reduce as a schedule: fold, recursive halving, recursive doubling, unfold. */
int slc_rhd_schedule(const sl_comm *c, size_t n, slc_step *out)
{
    rhd h;
    rhd_setup(c, &h, n, 0);
    int cur = SLC_BUF_S, k = fold_steps(&h, c->rank, n, out, 0, &cur);
    if (h.newrank >= 0) {
        k = halving_steps(&h, out, k, &cur);
        k = doubling_steps(&h, out, k);
    }
    return unfold_steps(&h, c->rank, n, out, k);
}

/* The reduce-scatter on blocks of n as a schedule: the steps of slc_rhd_reduce_scatter, with R
 * the whole vector (the engine copies this rank's block of R to the result). */
int slc_rhd_rs_schedule(const sl_comm *c, size_t n, slc_step *out)
{
    rhd h;
    rhd_setup(c, &h, 0, n);
    const int r = c->rank;
    int cur = SLC_BUF_S, k = fold_steps(&h, r, (size_t)c->size * n, out, 0, &cur);
    if (h.newrank < 0) /* this rank's block comes back from its folded neighbour */
        out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = r + 1, .recv_off = (size_t)r * n, .recv_len = n};
    else {
        k = halving_steps(&h, out, k, &cur); /* its group: two blocks after a fold */
        if (h.newrank < h.rem) /* the lower block is the folded neighbour's: hand it over */
            out[k++] = (slc_step){.to = r - 1, .from = MPI_PROC_NULL, .send_buf = SLC_BUF_R,
                                  .send_off = (size_t)(r - 1) * n, .send_len = n};
    }
    return k;
}

/* The all-gather on blocks of n as a schedule (R the result, this rank's block already in
 * place): the steps of slc_rhd_allgather. */
int slc_rhd_ag_schedule(const sl_comm *c, size_t n, slc_step *out)
{
    rhd h;
    rhd_setup(c, &h, 0, n);
    const int r = c->rank;
    int k = 0;
    if (r < 2 * h.rem) { /* fold: the odd neighbour collects the pair's two blocks */
        if (h.newrank < 0)
            out[k++] = (slc_step){.to = r + 1, .from = MPI_PROC_NULL, .send_buf = SLC_BUF_R,
                                  .send_off = (size_t)r * n, .send_len = n};
        else
            out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = r - 1,
                                  .recv_off = (size_t)(r - 1) * n, .recv_len = n};
    }
    if (h.newrank >= 0) k = doubling_steps(&h, out, k);
    return unfold_steps(&h, r, (size_t)c->size * n, out, k);
}
