/* grid.h — halo_conv's spatial decomposition: the px x py grid of ranks over an H x W image,
 * the tile each rank owns, its eight neighbours, the regions a halo exchange sends and
 * receives, and the analytic model of its bytes. Pure arithmetic on the options: no MPI, no
 * memory, so that the program's option checks and its test of the model use the same rules. */
#ifndef HALO_CONV_GRID_H
#define HALO_CONV_GRID_H

#include <stddef.h>

/* The problem: a stack of `layers` convolutions C -> C with F x F filters, stride 1, same
 * padding, on n images of c x h x w. */
typedef struct hc_geom {
    int n, c, h, w;
    int f, dil, layers;
    int r;  /* halo width: (f - 1) / 2 * dil rows (and columns) on each side */
    int es; /* bytes of an activation element: 4 (f32), 2 (f16, bf16); 0 is read as 4 */
} hc_geom;
/* Fills r (and es when 0). */
void hc_geom_init(hc_geom *g);

/* Directions: d = (dy + 1) * 3 + (dx + 1) for dy, dx in {-1, 0, 1}; dy -1 is the neighbour
 * above (smaller rows), dx -1 the one to the left; d = 4 is the tile itself; 8 - d is the
 * opposite direction. */
enum { HC_DIRS = 9, HC_SELF = 4 };
static inline int hc_dir_dy(int d) { return d / 3 - 1; }
static inline int hc_dir_dx(int d) { return d % 3 - 1; }

/* Rank (ix, iy) = iy * px + ix of a px x py grid owns rows [h0, h1) and columns [w0, w1):
 * the image split into py row blocks and px column blocks, the first ones one row (column)
 * larger where the split is uneven. 1 x p is the row split, p x 1 the column split. */
typedef struct hc_tile {
    int px, py, ix, iy;
    int h0, h1, w0, w1;
    int ht, wt;          /* h1 - h0, w1 - w0 */
    int nbr[HC_DIRS];    /* the neighbour's rank in each direction, -1 at the image's edge */
} hc_tile;
void hc_tile_of(const hc_geom *g, int px, int py, int rank, hc_tile *t);

/* "PXxPY" (e.g. "2x2"); returns 0, or -1 when malformed. */
int hc_grid_parse(const char *s, int *px, int *py);
/* The squarest grid of p ranks: px <= py, px the largest divisor of p not above sqrt(p)
 * (2 -> 1x2, the row split; 4 -> 2x2; 6 -> 2x3). */
void hc_grid_squarest(int p, int *px, int *py);
/* The smallest tile's rows and columns; 0 when the grid has more rows (columns) of ranks than
 * the image has rows (columns). */
void hc_grid_smallest_tile(const hc_geom *g, int px, int py, int *rows, int *cols);

/* A region of a tile: rows [y0, y1) and columns [x0, x1). */
typedef struct hc_rect {
    int y0, y1, x0, x1;
} hc_rect;
/* The halo exchanged with the neighbour in direction d, in the padded tile (ht + 2r) x
 * (wt + 2r) whose owned part starts at (r, r): what this rank sends (a strip of r rows and/or
 * columns of its own tile, the face or corner that neighbour needs) and where what it
 * receives goes (the ring outside its own tile). */
hc_rect hc_halo_send(const hc_geom *g, const hc_tile *t, int d);
hc_rect hc_halo_recv(const hc_geom *g, const hc_tile *t, int d);

/* The model of one exchange's bytes sent by a rank, per layer, with es bytes an element (4 in
 * f32, 2 in f16 and bf16): faces r * wt * C * N * es to the neighbours above and below,
 * ht * r * C * N * es to the left and right, and corners r * r * C * N * es to the diagonal
 * neighbours (2-D grids), for the neighbours that exist. */
typedef struct hc_halo_model {
    double faces, corners; /* bytes */
    int neighbours;        /* messages */
} hc_halo_model;
hc_halo_model hc_halo_model_of(const hc_geom *g, const hc_tile *t);

#endif
