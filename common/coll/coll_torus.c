/* coll_torus.c — the 2-D torus all-reduce: the ranks as an R x C grid, a ring reduce-scatter
 * along each row, then one along each column on the chunk the row left, then the all-gathers
 * back in the opposite order (the scheme of TPU pods, where each ring is a physical dimension
 * of the torus; here the grid is logical, laid over whatever network the ranks share).
 *
 * Rank r sits at row r % R, column r / R: a column is R consecutive ranks (on a cluster,
 * likely the ranks of one node), a row C ranks R apart. The vector is cut into R*C pieces
 * (an even split, or the blocks of reduce-scatter and all-gather); the row ring works on C
 * chunks, chunk j being the R pieces of column j, so that after it rank (i, j) holds chunk j
 * summed over its row; the column ring cuts that chunk into its R pieces, and rank r ends
 * with piece r summed over all. Bytes sent per rank: (C-1)/C S along the row plus (R-1)/R
 * S/C along the column, twice: 2(RC-1)/(RC) S, the ring's; steps: 2(C-1) + 2(R-1) instead of
 * the ring's 2(RC-1). A 1 x N grid is the ring.
 *
 * Bidirectional (c->torus_bidir, --torus-bidir): every ring sends the first half of each chunk
 * clockwise and the second half counter-clockwise in the same step, as a torus whose links
 * carry traffic both ways does: the same steps and bytes, half of each step's bytes on each
 * link direction. The non-blocking engine runs each such step as a group of two exchanges in
 * flight together (slc_ring_steps2). */
#include "coll_internal.h"

int sl_coll_torus_grid(int n, int *rows, int *cols)
{
    int r = 1;
    for (int d = 1; (long)d * d <= n; d++)
        if (n % d == 0) r = d;
    *rows = r;
    *cols = n > 0 ? n / r : 0;
    return n > 1 && r == 1; /* prime: only 1 x n */
}

/* This rank's row ring and column ring, and their layouts over the n = R*C pieces. */
typedef struct grid { slc_ring row, col; slc_layout lrow, lcol; } grid;

static grid grid_of(const sl_comm *c, size_t count, size_t block)
{
    int R = c->torus_rows, C = c->torus_cols, i = c->rank % R, j = c->rank / R;
    grid g;
    g.row = (slc_ring){.n = C, .pos = j, .right = i + (j + 1) % C * R,
                       .left = i + (j + C - 1) % C * R};
    g.col = (slc_ring){.n = R, .pos = i, .right = j * R + (i + 1) % R,
                       .left = j * R + (i + R - 1) % R};
    g.lrow = (slc_layout){.count = count, .block = block, .pieces = R * C, .group = R, .n = C};
    g.lcol = (slc_layout){.count = count, .block = block, .pieces = R * C, .first = j * R,
                          .group = 1, .n = R};
    return g;
}

/* Reduce-scatter over the grid: src the whole vector, work a whole-vector area for partial
 * sums, final where piece r goes. Where a dimension has one rank its ring does nothing, so
 * the other reads the input directly (C = 1) or writes the result directly (R = 1). */
static void torus_rs(sl_comm *c, const grid *g, const void *src, void *work, void *final,
                     sl_dtype t, sl_redop op)
{
    const void *col_src = g->row.n > 1 ? work : src;
    void *row_final = final;
    if (g->col.n > 1) row_final = slc_at(work, slc_layout_piece(&g->lrow, g->row.pos * g->col.n), t);
    void (*rs)(sl_comm *, const slc_ring *, const void *, void *, void *, const slc_layout *,
               sl_dtype, sl_redop, int) = c->torus_bidir ? slc_ring_rs2 : slc_ring_rs;
    rs(c, &g->row, src, work, row_final, &g->lrow, t, op, SL_TAG_TORUS);
    rs(c, &g->col, col_src, work, final, &g->lcol, t, op, SL_TAG_TORUS);
}

static void torus_ag(sl_comm *c, const grid *g, void *buf, sl_dtype t)
{
    void (*ag)(sl_comm *, const slc_ring *, void *, const slc_layout *, sl_dtype, int) =
        c->torus_bidir ? slc_ring_ag2 : slc_ring_ag;
    ag(c, &g->col, buf, &g->lcol, t, SL_TAG_TORUS);
    ag(c, &g->row, buf, &g->lrow, t, SL_TAG_TORUS);
}

int slc_torus_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    grid g = grid_of(c, n, 0);
    size_t off = slc_layout_piece(&g.lrow, c->rank);
    size_t len = slc_layout_piece(&g.lrow, c->rank + 1) - off;
    void *mine = slc_at(r, off, t);
    torus_rs(c, &g, s, r, mine, t, op);
    slc_finish_avg(c, mine, len, t, op); /* each rank divides only the piece it owns */
    torus_ag(c, &g, r, t);
    return SL_COLL_OK;
}

int slc_torus_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                             sl_redop op)
{
    grid g = grid_of(c, 0, n);
    /* partial sums of blocks this rank does not own need a whole-vector work area */
    void *work = slc_scratch(c, SLC_WORK, (size_t)c->size * n * sl_dtype_size(t));
    torus_rs(c, &g, s, work, r, t, op);
    slc_finish_avg(c, r, n, t, op);
    return SL_COLL_OK;
}

int slc_torus_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    grid g = grid_of(c, 0, n);
    slc_copy(c, slc_at(r, (size_t)c->rank * n, t), s, n * sl_dtype_size(t));
    torus_ag(c, &g, r, t);
    return SL_COLL_OK;
}

/* The same four rings as a schedule for the non-blocking engine; bidirectional, each ring
 * step a group of two exchanges (slc_ring_steps2), as slc_ring_rs2 and slc_ring_ag2 run them. */
int slc_torus_schedule(const sl_comm *c, size_t count, size_t block, int parts, slc_step *out)
{
    grid g = grid_of(c, count, block);
    int k = 0, row_only = g.col.n == 1;
    int (*steps)(const slc_ring *, const slc_layout *, int, int, int, slc_step *) =
        c->torus_bidir ? slc_ring_steps2 : slc_ring_steps;
    if (parts & SLC_PART_RS) {
        k += steps(&g.row, &g.lrow, SLC_PART_RS, SLC_BUF_S, row_only, out + k);
        k += steps(&g.col, &g.lcol, SLC_PART_RS, g.row.n > 1 ? SLC_BUF_R : SLC_BUF_S, 1, out + k);
    }
    if (parts & SLC_PART_AG) {
        k += steps(&g.col, &g.lcol, SLC_PART_AG, SLC_BUF_R, 0, out + k);
        k += steps(&g.row, &g.lrow, SLC_PART_AG, SLC_BUF_R, 0, out + k);
    }
    return k;
}
