/* exchange.c — the halo exchange of exchange.h. Tags are the direction the message travels
 * (from the sender's side), so a receive from the neighbour in direction d waits for tag
 * 8 - d: the two messages a pair of diagonal or facing ranks send each other never match the
 * wrong receive, whatever order they arrive in. */
#include "exchange.h"
#include "scalelab.h"

enum { TAG_BASE = 4200 };

static void ok(int rc, const char *what)
{
    if (rc != SL_COLL_OK) SL_FATAL("halo exchange: %s failed: %s", what, sl_coll_strerror(rc));
}

/* The strip q of a padded tile as a block: images x channels, rows, columns. */
static void block_copy(const hc_exchange *x, hc_rect q, const void *from, int from_padded,
                       void *to)
{
    const size_t plane = (size_t)x->hp * x->wp, rows = (size_t)(q.y1 - q.y0), cols = (size_t)(q.x1 - q.x0);
    const size_t at = (size_t)q.y0 * x->wp + q.x0;
    const int nz = x->g.n * x->g.c;
    const size_t es = (size_t)x->g.es;
    if (from_padded) /* pack: tile strip -> message */
        sl_k_copy_block_cast(x->be, nz, (int)rows, (int)cols, (const char *)from + at * es, x->dt, plane,
                             (size_t)x->wp, to, x->dt, rows * cols, cols);
    else /* unpack: message -> ring strip */
        sl_k_copy_block_cast(x->be, nz, (int)rows, (int)cols, from, x->dt, rows * cols, cols,
                             (char *)to + at * es, x->dt, plane, (size_t)x->wp);
}

void hc_exchange_init(hc_exchange *x, sl_backend be, sl_comm *comm, const hc_geom *g,
                      const hc_tile *tile, sl_dtype dt)
{
    *x = (hc_exchange){.be = be, .comm = comm, .g = *g, .dt = dt, .tile = *tile};
    x->g.es = (int)sl_dtype_size(dt);
    x->hp = tile->ht + 2 * g->r, x->wp = tile->wt + 2 * g->r;
    for (int d = 0; d < HC_DIRS; d++) {
        if (tile->nbr[d] < 0 || g->r == 0) continue;
        hc_rect q = hc_halo_send(g, tile, d);
        x->count[d] = (size_t)g->n * g->c * (size_t)(q.y1 - q.y0) * (size_t)(q.x1 - q.x0);
        x->send[d] = sl_k_malloc(be, SL_MEM_COMM, x->count[d] * (size_t)x->g.es);
        /* what the opposite neighbour sends has the same shape as what goes back to it */
        x->recv[d] = sl_k_malloc(be, SL_MEM_COMM, x->count[d] * (size_t)x->g.es);
    }
}

void hc_exchange_free(hc_exchange *x)
{
    for (int d = 0; d < HC_DIRS; d++) {
        sl_k_free(x->be, x->send[d]);
        sl_k_free(x->be, x->recv[d]);
    }
}

void hc_exchange_start(hc_exchange *x, void *padded)
{
    double t0 = sl_now();
    x->padded = padded;
    x->active = 1;
    x->done = 0;
    x->t_start = t0;
    unsigned long long sent0 = sl_comm_bytes_sent(x->comm);
    for (int d = 0; d < HC_DIRS; d++) /* receives first: every message finds its buffer */
        if (x->count[d])
            ok(sl_coll_irecv(x->comm, x->recv[d], x->count[d], x->dt, x->tile.nbr[d],
                             TAG_BASE + (8 - d), &x->req[HC_DIRS + d]), "irecv");
    for (int d = 0; d < HC_DIRS; d++)
        if (x->count[d]) block_copy(x, hc_halo_send(&x->g, &x->tile, d), padded, 1, x->send[d]);
    sl_k_sync(x->be); /* packed before the transport reads the messages */
    for (int d = 0; d < HC_DIRS; d++)
        if (x->count[d])
            ok(sl_coll_isend(x->comm, x->send[d], x->count[d], x->dt, x->tile.nbr[d], TAG_BASE + d,
                             &x->req[d]), "isend");
    x->bytes = sl_comm_bytes_sent(x->comm) - sent0;
    x->exposed = sl_now() - t0;
}

int hc_exchange_test(hc_exchange *x)
{
    if (!x->active || x->done) return 1;
    double t0 = sl_now();
    int all = 1;
    for (int i = 0; i < 2 * HC_DIRS; i++) {
        if (!x->req[i]) continue;
        int done = 0;
        ok(sl_coll_test(x->req[i], &done), "test");
        if (done) {
            ok(sl_coll_wait(x->req[i]), "wait");
            x->req[i] = NULL;
        } else {
            all = 0;
        }
    }
    double t1 = sl_now();
    if (all) x->done = 1, x->t_done = t1;
    x->exposed += t1 - t0;
    return all;
}

void hc_exchange_finish(hc_exchange *x)
{
    double t0 = sl_now();
    ok(sl_coll_waitall(2 * HC_DIRS, x->req), "waitall");
    double tw = sl_now();
    if (!x->done) x->done = 1, x->t_done = tw;
    for (int d = 0; d < HC_DIRS; d++)
        if (x->count[d]) block_copy(x, hc_halo_recv(&x->g, &x->tile, d), x->recv[d], 0, x->padded);
    sl_k_sync(x->be);
    double t1 = sl_now();
    /* in flight from the packing until the messages were seen complete, then the unpacking */
    x->in_flight = (x->t_done - x->t_start) + (t1 - tw);
    x->exposed += t1 - t0;
    x->active = 0;
}
