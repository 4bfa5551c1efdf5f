/* grid.c — parallel3d's rank grid (state.h): the order of its dimensions (--order), a rank's
 * coordinates (d, t, p) and the rank at given coordinates, the three groups of a rank (tp: same
 * d, p; dp: same t, p; pp: same d, t), and the grid recorded once per layout run. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "sl_env.h"
#include "state.h"

static const char *const dim_names[NDIMS] = {"tp", "dp", "pp"};
static int order[NDIMS] = {DIM_TP, DIM_DP, DIM_PP}; /* fastest first */

/* --order: a permutation of tp, dp, pp joined by '-' or ','; 0 or -1. */
int p3_parse_order(const char *s)
{
    int seen = 0, n = 0;
    while (*s && n < NDIMS) {
        int k = -1;
        for (int i = 0; i < NDIMS; i++)
            if (strncmp(s, dim_names[i], 2) == 0) k = i;
        if (k < 0 || (seen >> k & 1)) return -1;
        seen |= 1 << k;
        order[n++] = k;
        s += 2;
        if (*s == '-' || *s == ',') s++;
        else if (*s) return -1;
    }
    return n == NDIMS && !*s ? 0 : -1;
}

/* Rank r's coordinates (c[DIM_TP], c[DIM_DP], c[DIM_PP]) in a grid of n[dim]. */
void p3_coords_of(int r, const int n[NDIMS], int c[NDIMS])
{
    for (int i = 0; i < NDIMS; i++) {
        c[order[i]] = r % n[order[i]];
        r /= n[order[i]];
    }
}

/* The rank at coordinates c (p3_coords_of's inverse). */
int p3_rank_of(const int n[NDIMS], const int c[NDIMS])
{
    int r = 0;
    for (int i = NDIMS - 1; i >= 0; i--) r = r * n[order[i]] + c[order[i]];
    return r;
}

/* The order as --order writes it, fastest first (e.g. tp-dp-pp). */
void p3_order_name(char *buf, size_t len)
{
    snprintf(buf, len, "%s-%s-%s", dim_names[order[0]], dim_names[order[1]], dim_names[order[2]]);
}

void p3_open_groups(sl_train *t, p3 *q)
{
    MPI_Comm world = t->baseline ? MPI_COMM_SELF : t->ctx->comm;
    const sl_mem_space space = sl_comm_space(t->comm);
    const sl_coll impl = sl_comm_impl(t->comm);
    SL_CHECK_MPI(MPI_Comm_split(world, q->d * q->P + q->p, q->tr, &q->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, q->tr * q->P + q->p, q->d, &q->dp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, q->d * q->T + q->tr, q->p, &q->pp_mpi));
    sl_train_coll_ok(sl_comm_create(&q->s.tp, q->tp_mpi, impl, space), "sl_comm_create (tp)");
    sl_train_coll_ok(sl_comm_create(&q->s.dp, q->dp_mpi, impl, space), "sl_comm_create (dp)");
    sl_train_coll_ok(sl_comm_create(&q->pp, q->pp_mpi, impl, space), "sl_comm_create (pp)");
}

/* The grid, once per layout run: every rank's (d, t, p) and host, as a note and in
 * <out>/parallel3d.grid.tsv (a header, then one line per rank and layout). */
void p3_record_grid(sl_train *t, const p3 *q)
{
    static int header, D, T, P; /* the grid last recorded (the search runs several) */
    if (t->baseline || (header && D == q->D && T == q->T && P == q->P)) return;
    D = q->D, T = q->T, P = q->P;
    const int first = !header;
    header = 1;
    sl_env_local e;
    sl_env_local_capture(&e);
    const int n = t->ctx->nranks;
    char *hosts = t->rank == 0 ? sl_alloc(SL_MEM_OTHER, (size_t)n * sizeof e.host) : NULL;
    SL_CHECK_MPI(MPI_Gather(e.host, (int)sizeof e.host, MPI_CHAR, hosts, (int)sizeof e.host, MPI_CHAR, 0,
                            t->ctx->comm));
    if (t->rank != 0) return;
    char path[PATH_MAX + 64], line[512], ord[16];
    p3_order_name(ord, sizeof ord);
    FILE *f = sl_results_file_open(t->ctx, "grid.tsv", path, sizeof path);
    if (first) sl_results_append_line(f, path, "run_id\trank\thost\td\tt\tp\tdp\ttp\tpp\torder");
    const int dims[NDIMS] = {q->T, q->D, q->P};
    for (int r = 0; r < n; r++) {
        int c[NDIMS];
        p3_coords_of(r, dims, c);
        char *h = hosts + (size_t)r * sizeof e.host;
        h[sizeof e.host - 1] = 0;
        snprintf(line, sizeof line, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s", t->ctx->run_id, r, h, c[DIM_DP],
                 c[DIM_TP], c[DIM_PP], q->D, q->T, q->P, ord);
        sl_results_append_line(f, path, line);
        if (r < 16) sl_note(t->ctx, "rank %d: (d, t, p) = (%d, %d, %d) on %s", r, c[DIM_DP], c[DIM_TP], c[DIM_PP], h);
    }
    if (fclose(f) != 0) SL_FATAL("cannot close %s", path);
    sl_free(hosts);
}
