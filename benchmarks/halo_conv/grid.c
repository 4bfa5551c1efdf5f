/* grid.c — the decomposition of grid.h: tiles, neighbours, halo regions and their model. */
#include <stdio.h>

#include "grid.h"

void hc_geom_init(hc_geom *g)
{
    g->r = (g->f - 1) / 2 * g->dil;
    if (!g->es) g->es = 4;
}

/* Block p of `parts` over n items: the first n % parts blocks get one more. */
static void split(int n, int parts, int p, int *lo, int *hi)
{
    int base = n / parts, extra = n % parts;
    *lo = p * base + (p < extra ? p : extra);
    *hi = *lo + base + (p < extra);
}

void hc_tile_of(const hc_geom *g, int px, int py, int rank, hc_tile *t)
{
    t->px = px, t->py = py;
    t->ix = rank % px, t->iy = rank / px;
    split(g->h, py, t->iy, &t->h0, &t->h1);
    split(g->w, px, t->ix, &t->w0, &t->w1);
    t->ht = t->h1 - t->h0, t->wt = t->w1 - t->w0;
    for (int d = 0; d < HC_DIRS; d++) {
        int x = t->ix + hc_dir_dx(d), y = t->iy + hc_dir_dy(d);
        t->nbr[d] = d != HC_SELF && x >= 0 && x < px && y >= 0 && y < py ? y * px + x : -1;
    }
}

int hc_grid_parse(const char *s, int *px, int *py)
{
    int a, b, used = 0;
    if (sscanf(s, "%d%*[xX]%d%n", &a, &b, &used) != 2 || s[used] || a < 1 || b < 1) return -1;
    *px = a, *py = b;
    return 0;
}

void hc_grid_squarest(int p, int *px, int *py)
{
    int best = 1;
    for (int a = 1; (long long)a * a <= p; a++)
        if (p % a == 0) best = a;
    *px = best, *py = p / best;
}

void hc_grid_smallest_tile(const hc_geom *g, int px, int py, int *rows, int *cols)
{
    *rows = g->h / py; /* the last blocks are the small ones */
    *cols = g->w / px;
}

/* Along one axis of n owned items: the strip sent towards direction component k (-1, 0, 1)
 * in owned coordinates, and the strip received from it in padded coordinates. */
static void send_span(int k, int n, int r, int *lo, int *hi)
{
    *lo = k < 0 ? 0 : k == 0 ? 0 : n - r;
    *hi = k < 0 ? r : n;
}
static void recv_span(int k, int n, int r, int *lo, int *hi)
{
    *lo = k < 0 ? 0 : k == 0 ? r : r + n;
    *hi = k < 0 ? r : k == 0 ? r + n : n + 2 * r;
}

hc_rect hc_halo_send(const hc_geom *g, const hc_tile *t, int d)
{
    hc_rect q;
    send_span(hc_dir_dy(d), t->ht, g->r, &q.y0, &q.y1);
    send_span(hc_dir_dx(d), t->wt, g->r, &q.x0, &q.x1);
    q.y0 += g->r, q.y1 += g->r, q.x0 += g->r, q.x1 += g->r; /* owned -> padded */
    return q;
}

hc_rect hc_halo_recv(const hc_geom *g, const hc_tile *t, int d)
{
    hc_rect q;
    recv_span(hc_dir_dy(d), t->ht, g->r, &q.y0, &q.y1);
    recv_span(hc_dir_dx(d), t->wt, g->r, &q.x0, &q.x1);
    return q;
}

hc_halo_model hc_halo_model_of(const hc_geom *g, const hc_tile *t)
{
    hc_halo_model m = {0, 0, 0};
    const double plane = (double)g->n * g->c * g->es; /* bytes per pixel of all images */
    for (int d = 0; d < HC_DIRS; d++) {
        if (t->nbr[d] < 0 || g->r == 0) continue;
        int dy = hc_dir_dy(d), dx = hc_dir_dx(d);
        if (dy && dx) m.corners += (double)g->r * g->r * plane;
        else if (dy) m.faces += (double)g->r * t->wt * plane;
        else m.faces += (double)t->ht * g->r * plane;
        m.neighbours++;
    }
    return m;
}
