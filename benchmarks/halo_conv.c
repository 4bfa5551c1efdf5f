/* halo_conv.c — spatially partitioned convolutions (halo exchange), on the training layer.
 *
 * The model: --conv-layers convolutions C -> C with F x F filters (--filter, odd; --dilation
 * d), stride 1, same padding, ReLU between, trained to reproduce its input (MSE) on --batch N
 * images of --channels C x --image H x W.
 *
 * What is partitioned: the image. The ranks form a px x py grid (--grid; 1 x p splits the
 * rows); each owns a tile of every image of the batch and the whole model. A convolution's
 * output pixel reads r = (F - 1) / 2 * d input pixels on each side, so before a layer each
 * rank needs a halo r rows and columns deep from its neighbours: faces from the four beside
 * it and, on a 2-D grid, r x r corners from the diagonal ones. Each rank keeps its tile padded
 * by r ("the ring"): the halo goes there, zeros stay at the image's edge (same padding), and
 * every convolution on the tile is one without padding.
 *
 * What is communicated when:
 *   forward          halos of each layer's input x;
 *   backward data    halos of dy (dL/d of the layer's output): dx on the tile reads dy up to
 *                    r pixels beyond it (not needed for the first layer's input in training);
 *   backward filter  dW from the tile alone (x's halo is still there from the forward), then
 *                    one all-reduce of all layers' dW over the ranks (the -C collective).
 * Variants:
 *   blocking  exchange the halos (faces and corners), wait, compute the whole tile;
 *   overlap   post the exchange, compute the interior that needs no halo (one image at a
 *             time, progressing the messages in between; dW needs none either), wait, then
 *             the border strips;
 *   data      the same global work split by batch instead: each rank whole images, no halo,
 *             the same all-reduce of dW (data parallelism, for comparison).
 *
 * Precision (-d f32,f16,bf16): the weights, their gradients, every activation and dy, and so
 * the halos, are stored in the run's dtype; a convolution reads its 16-bit window and weights
 * widened into f32 and accumulates in f32 (products of 16-bit values are exact in f32), its
 * result rounded once into the tile it goes to. Halos are packed, sent and unpacked in 16 bits:
 * half of f32's bytes. dW is all-reduced in the dtype; the training layer then unscales it
 * (f16: dynamic loss scaling), decides the step over the ranks and updates the f32 master
 * weights, rounded back into the dtype (train_precision.c), as every technique does.
 *
 * What is checked (by default): the weights after training against one process training the
 * serial stack on whole images (in the run's dtype: model.h); then, with the trained weights,
 * one pass's output, dL/d(input) and dW against the serial stack's; and every halo message's
 * bytes, as the communication layer counted them, against the model (faces r W_tile C N es,
 * corners r^2 C N es, es = 4 in f32 and 2 in 16 bits).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_train.h"
#include "halo_conv/exchange.h"
#include "halo_conv/grid.h"
#include "halo_conv/model.h"

#define HC_VARIANTS(X) X(V_BLOCKING, "blocking") X(V_OVERLAP, "overlap") X(V_DATA, "data")
SL_ENUM(hc_variant, HC_VARIANTS, NVARIANTS);
static const char *const variant_names[NVARIANTS] = SL_ENUM_NAMES(HC_VARIANTS);

static long long opt_layers = 4, opt_channels = 16, opt_filter = 3, opt_dilation = 1;
static const char *opt_image = "96x96", *opt_grid = NULL;
static unsigned opt_variants = ~0u;

static const sl_opt hc_opts[] = {
    {"conv-layers", 0, SL_OPT_INT, &opt_layers, 1, HC_MAX_LAYERS, NULL, 0, "convolution layers (default 4)"},
    {"channels", 0, SL_OPT_INT, &opt_channels, 1, 4096, NULL, 0, "channels C of every layer (default 16)"},
    {"image", 0, SL_OPT_STRING, &opt_image, 0, 0, NULL, 0, "image size HxW (default 96x96)"},
    {"filter", 0, SL_OPT_INT, &opt_filter, 1, 15, NULL, 0, "filter size F: odd, 1 to 15 (default 3)"},
    {"dilation", 0, SL_OPT_INT, &opt_dilation, 1, 64, NULL, 0, "filter dilation (default 1)"},
    {"grid", 0, SL_OPT_STRING, &opt_grid, 0, 0, NULL, 0,
     "ranks as PXxPY: PX columns of ranks split the width, PY rows of them the height "
     "(default: the squarest, PX <= PY; 1xP is the row split)"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(HC_VARIANTS), 0,
     "variants to run (default all)"},
    {0},
};

/* The problem (n: the global batch) and the world's grid, set by validate. */
static hc_geom problem;
static int grid_px = 1, grid_py = 1;

/* One rank's run ------------------------------------------------------------------------ */

typedef struct conv_run {
    sl_backend be;
    hc_geom g;           /* g.n: the images this rank computes (all, or its data-parallel share) */
    hc_tile tile;        /* its tile (the whole image for data, and on one rank) */
    int b0;              /* the first of its images in a step's batch */
    int hp, wp;          /* the padded tile */
    size_t plane, pplane; /* ht * wt, hp * wp */
    sl_dtype dt;         /* t->dtype: of the weights, gradients, activations and halos */
    void *w, *grads;     /* in dt (in f32, w is the master weights) */
    float *master, *g32; /* 16 bits: the f32 master weights and unscaled gradients (NULL in f32) */
    float *w32;          /* the weights as the f32 convolutions read them: w itself in f32 */
    float *gw32;         /* 16 bits: one layer's dW in f32 before it is rounded into grads */
    float *optim;
    void *xp[HC_MAX_LAYERS]; /* each layer's input, padded: the tile at (r, r), the ring around */
    void *y;             /* the last layer's output, [n, c, ht, wt] */
    float *target;       /* the target (the input before rounding into dt), [n, c, ht, wt] */
    float *dy;           /* dL/d(a layer's output) as dW reads it (f32), [n, c, ht, wt] */
    void *dyp, *dxp;     /* dy with its halo, and dL/d(a layer's input), padded */
    float *win, *out;    /* a region's input window and output, packed, f32 */
    float *work;         /* the convolutions' workspace: nothing is allocated in a step */
    hc_exchange ex;
    int has_halo;        /* 1 when this rank has a neighbour and r > 0 */
    int checking;        /* the check's pass: not logged */
    double flight, exposed, allreduce; /* this step's halo exchange and all-reduce */
    double *log;         /* [nsteps][3] of those */
    double exchange_bytes; /* one exchange's (a layer's halo: x's and dy's are the same strips),
                            * as the communication layer counted them */
    long long exchanges, wrong_bytes; /* exchanges, and those whose bytes were not the model's */
} conv_run;

static int is_spatial(int variant) { return variant != V_DATA; }

/* The grid of a run: the world's, or one rank's (the baseline), or none (data). */
static void run_grid(const sl_train *t, int *px, int *py)
{
    *px = *py = 1;
    if (is_spatial(t->variant) && t->size > 1) *px = grid_px, *py = grid_py;
}

static int data_ranks(int variant, int nranks)
{
    /* spatial ranks all compute every image of the batch: to the driver's batch split they
     * are one data rank (each rank's share is the whole batch) */
    return is_spatial(variant) ? 1 : nranks;
}

static void setup(sl_train *t)
{
    conv_run *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    const sl_backend be = s->be = t->be;
    s->g = problem;
    s->g.n = t->global_batch;
    int px, py;
    run_grid(t, &px, &py);
    hc_tile_of(&s->g, px, py, is_spatial(t->variant) ? t->rank : 0, &s->tile);
    if (!is_spatial(t->variant)) {
        size_t lo, hi;
        sl_share((size_t)t->global_batch, t->size, t->rank, &lo, &hi);
        s->b0 = (int)lo;
        s->g.n = (int)(hi - lo);
    }
    const hc_geom *g = &s->g;
    const int r = g->r;
    s->hp = s->tile.ht + 2 * r, s->wp = s->tile.wt + 2 * r;
    s->plane = (size_t)s->tile.ht * s->tile.wt, s->pplane = (size_t)s->hp * s->wp;

    const size_t np = t->nparams, nc = (size_t)g->n * g->c, es = sl_train_esize(t);
    s->dt = t->dtype;
    s->g.es = (int)es;
    s->w = sl_k_malloc(be, SL_MEM_PARAMS, np * es);
    s->master = sl_train_twin(t, SL_MEM_PARAMS, np);
    s->grads = sl_k_malloc(be, SL_MEM_GRADS, np * es);
    s->g32 = sl_train_twin(t, SL_MEM_GRADS, np);
    s->optim = sl_k_malloc(be, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * np * sizeof(float));
    hc_init_params(be, g, (uint64_t)sl_train_opt.seed, s->master ? s->master : s->w);
    if (s->master) { /* the 16-bit weights, and their f32 values for the convolutions */
        sl_k_cast(be, np, s->master, SL_F32, s->w, s->dt, NULL);
        s->w32 = sl_k_malloc(be, SL_MEM_OTHER, np * sizeof(float));
        s->gw32 = sl_k_malloc(be, SL_MEM_OTHER, hc_layer_params(g) * sizeof(float));
    }
    s->w32 = (float *)sl_train_widen(t, s->w, s->w32, np);
    for (int l = 0; l < g->layers; l++) s->xp[l] = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->pplane * es);
    s->y = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->plane * es);
    s->target = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->plane * sizeof(float));
    s->dy = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->plane * sizeof(float));
    s->dyp = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->pplane * es);
    s->dxp = sl_k_malloc(be, SL_MEM_ACTIV, nc * s->pplane * es);
    s->win = sl_k_malloc(be, SL_MEM_OTHER, nc * s->pplane * sizeof(float));
    s->out = sl_k_malloc(be, SL_MEM_OTHER, nc * s->plane * sizeof(float));
    /* the largest im2col: backward data of the whole tile reads the padded tile's hp x wp */
    s->work = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->c * g->f * g->f * s->pplane * sizeof(float));
    hc_exchange_init(&s->ex, be, t->comm, g, &s->tile, s->dt);
    for (int d = 0; d < HC_DIRS; d++) s->has_halo |= s->ex.count[d] > 0;
    s->log = calloc((size_t)t->nsteps * 3, sizeof *s->log);
    if (!s->log) SL_FATAL("out of memory");
}

static void release(sl_train *t)
{
    conv_run *s = t->state;
    const sl_backend be = t->be;
    hc_exchange_free(&s->ex);
    for (int l = 0; l < s->g.layers; l++) sl_k_free(be, s->xp[l]);
    void *bufs[] = {s->w, s->master, s->grads, s->g32, s->w32 != s->w ? s->w32 : NULL, s->gw32, s->optim, s->y,
                    s->target, s->dy, s->dyp, s->dxp, s->win, s->out, s->work};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(be, bufs[i]);
    free(s->log);
    free(s);
}

/* The halo exchange, timed and its bytes compared with the model ------------------------ */

static void exchange_start(conv_run *s, void *padded)
{
    hc_exchange_start(&s->ex, padded);
    if (s->checking) return;
    hc_halo_model m = hc_halo_model_of(&s->g, &s->tile);
    s->exchanges++;
    s->wrong_bytes += (double)s->ex.bytes != m.faces + m.corners;
}

static void exchange_finish(sl_train *t, conv_run *s, const char *name)
{
    hc_exchange_finish(&s->ex);
    s->flight += s->ex.in_flight;
    s->exposed += s->ex.exposed;
    sl_train_record(t, SL_PHASE_COMM, s->ex.in_flight);
    sl_train_record(t, SL_PHASE_EXPOSED, s->ex.exposed);
    sl_trace_event(name, "comm", 1, s->ex.t_start, s->ex.t_start + s->ex.in_flight);
}

/* Regions of the tile ------------------------------------------------------------------- */

/* The output pixels whose inputs are all this rank's own (or the zeros at the image's edge):
 * r rows or columns in from each side that has a neighbour. Empty when the tile is thinner
 * than 2r there. */
static hc_rect interior(const conv_run *s)
{
    const int r = s->g.r;
    const int *nb = s->tile.nbr;
    hc_rect q = {nb[1] >= 0 ? r : 0, s->tile.ht - (nb[7] >= 0 ? r : 0), nb[3] >= 0 ? r : 0,
                 s->tile.wt - (nb[5] >= 0 ? r : 0)};
    if (q.y1 <= q.y0 || q.x1 <= q.x0) q = (hc_rect){0, 0, 0, 0};
    return q;
}

/* The rest of the tile around the interior: the strips above and below it (full width) and
 * those to its left and right. */
static int border(const conv_run *s, hc_rect in, hc_rect strips[4])
{
    const int ht = s->tile.ht, wt = s->tile.wt;
    if (in.y1 <= in.y0) { /* no interior: the whole tile */
        strips[0] = (hc_rect){0, ht, 0, wt};
        return 1;
    }
    hc_rect all[4] = {{0, in.y0, 0, wt}, {in.y1, ht, 0, wt}, {in.y0, in.y1, 0, in.x0}, {in.y0, in.y1, in.x1, wt}};
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (all[i].y1 > all[i].y0 && all[i].x1 > all[i].x0) strips[n++] = all[i];
    return n;
}

static sl_conv2d conv_of(const conv_run *s, int nimg, int h, int w, int pad)
{
    sl_conv2d cv = {.n = nimg, .c = s->g.c, .h = h, .w = w, .k = s->g.c, .r = s->g.f, .s = s->g.f,
                    .pad_h = pad, .pad_w = pad, .stride_h = 1, .stride_w = 1,
                    .dil_h = s->g.dil, .dil_w = s->g.dil, .work = s->work};
    if (sl_conv2d_init(&cv) != 0) SL_FATAL("halo_conv: invalid convolution %dx%d pad %d", h, w, pad);
    return cv;
}

/* The window of padded array a (dt; images [i0, i1)) that output region q reads, in f32: rows
 * [y0, y1 + 2r) and columns [x0, x1 + 2r) of the padded tile; a itself when that is all of it
 * in f32, else packed (and widened) into s->win. */
static const float *window(sl_train *t, conv_run *s, const void *a, int i0, int i1, hc_rect q)
{
    const int r = s->g.r, wh = q.y1 - q.y0 + 2 * r, ww = q.x1 - q.x0 + 2 * r;
    const void *at = sl_train_at(t, a, (size_t)i0 * s->g.c * s->pplane);
    if (wh == s->hp && ww == s->wp && s->dt == SL_F32) return at;
    sl_k_copy_block_cast(s->be, (i1 - i0) * s->g.c, wh, ww, sl_train_at(t, at, (size_t)q.y0 * s->wp + q.x0), s->dt,
                         s->pplane, (size_t)s->wp, s->win, SL_F32, (size_t)wh * ww, (size_t)ww);
    return s->win;
}

/* Puts a region's output (s->out, f32 [images, c, rows, cols]) at q of the tile in dst (dt:
 * rounded there), whose planes are dst_z apart with rows dst_y apart. */
static void place(sl_train *t, conv_run *s, int nimg, hc_rect q, void *dst, size_t dst_z, size_t dst_y)
{
    const int rows = q.y1 - q.y0, cols = q.x1 - q.x0;
    sl_k_copy_block_cast(s->be, nimg * s->g.c, rows, cols, s->out, SL_F32, (size_t)rows * cols, (size_t)cols,
                         sl_train_at(t, dst, (size_t)q.y0 * dst_y + q.x0), s->dt, dst_z, dst_y);
}

/* Layer l's output at region q of images [i0, i1): its window of the padded input convolved
 * without padding (the ring holds the halo, or the image edge's zeros), into the next layer's
 * padded input (or the model output). */
static void forward_region(sl_train *t, conv_run *s, int l, int i0, int i1, hc_rect q)
{
    const int r = s->g.r, rows = q.y1 - q.y0, cols = q.x1 - q.x0, nimg = i1 - i0;
    if (rows <= 0 || cols <= 0 || nimg <= 0) return;
    double t0 = sl_now();
    const float *in = window(t, s, s->xp[l], i0, i1, q);
    sl_conv2d cv = conv_of(s, nimg, rows + 2 * r, cols + 2 * r, 0);
    sl_k_conv2d_forward(s->be, &cv, in, s->w32 + (size_t)l * hc_layer_params(&s->g), s->out);
    const size_t first = (size_t)i0 * s->g.c;
    if (l == s->g.layers - 1) {
        place(t, s, nimg, q, sl_train_at(t, s->y, first * s->plane), s->plane, (size_t)s->tile.wt);
    } else { /* ReLU on the f32 result, then rounded: the same values as rounding first */
        sl_k_act_forward(s->be, SL_ACT_RELU, (size_t)nimg * s->g.c * rows * cols, s->out, s->out);
        place(t, s, nimg, q, sl_train_at(t, s->xp[l + 1], first * s->pplane + (size_t)r * s->wp + r), s->pplane,
              (size_t)s->wp);
    }
    sl_train_compute_span(t, "forward", t0);
}

/* dL/d(layer l's input) at region q of images [i0, i1), from dy with its halo: the window of
 * dyp through the backward-data pass of a convolution whose input is the region padded by 2r
 * (the filter's reach on both sides), whose output is exactly that window. Into dxp's tile;
 * for l > 0 times ReLU' of that input (x > 0 exactly where its pre-activation is): dy of the
 * layer below. */
static void backward_data_region(sl_train *t, conv_run *s, int l, int i0, int i1, hc_rect q)
{
    const int r = s->g.r, rows = q.y1 - q.y0, cols = q.x1 - q.x0, nimg = i1 - i0;
    if (rows <= 0 || cols <= 0 || nimg <= 0) return;
    double t0 = sl_now();
    const float *dy = window(t, s, s->dyp, i0, i1, q);
    sl_conv2d cv = conv_of(s, nimg, rows, cols, 2 * r);
    sl_k_conv2d_backward_data(s->be, &cv, dy, s->w32 + (size_t)l * hc_layer_params(&s->g), s->out);
    const size_t first = (size_t)i0 * s->g.c * s->pplane + (size_t)r * s->wp + r;
    if (l > 0) { /* the region of x (this layer's input) into win, which the convolution is done with */
        sl_k_copy_block_cast(s->be, nimg * s->g.c, rows, cols,
                             sl_train_at(t, s->xp[l], first + (size_t)q.y0 * s->wp + q.x0), s->dt, s->pplane,
                             (size_t)s->wp, s->win, SL_F32, (size_t)rows * cols, (size_t)cols);
        sl_k_act_backward(s->be, SL_ACT_RELU, (size_t)nimg * s->g.c * rows * cols, s->win, s->out, s->out);
    }
    place(t, s, nimg, q, sl_train_at(t, s->dxp, first), s->pplane, (size_t)s->wp);
    sl_train_compute_span(t, "backward data", t0);
}

/* dW of layer l from the tile alone: x's halo is still in xp[l] from the forward. In 16 bits
 * x is widened into win, dW summed in f32 (gw32) and rounded into the layer's gradients. */
static void backward_filter(sl_train *t, conv_run *s, int l)
{
    double t0 = sl_now();
    const size_t lp = hc_layer_params(&s->g);
    sl_conv2d cv = conv_of(s, s->g.n, s->hp, s->wp, 0);
    const float *x = sl_train_widen(t, s->xp[l], s->win, (size_t)s->g.n * s->g.c * s->pplane);
    float *dw = s->gw32 ? s->gw32 : (float *)s->grads + (size_t)l * lp;
    if (s->gw32) sl_k_memset0(s->be, s->gw32, lp * sizeof(float));
    sl_k_conv2d_backward_filter(s->be, &cv, x, s->dy, dw);
    if (s->gw32) sl_k_cast(s->be, lp, s->gw32, SL_F32, sl_train_at(t, s->grads, (size_t)l * lp), s->dt, NULL);
    sl_train_compute_span(t, "backward filter", t0);
}

typedef void (*region_fn)(sl_train *t, conv_run *s, int l, int i0, int i1, hc_rect q);
typedef void (*layer_fn)(sl_train *t, conv_run *s, int l);

/* One layer's pass over the tile, reading the halo of padded array a, with `meanwhile` (work
 * of the layer that needs no halo; may be NULL): blocking exchanges the halo, then computes
 * everything; overlap posts the exchange, does `meanwhile` and the interior, an image at a
 * time with the messages progressed between, waits, then computes the border. */
static void halo_pass(sl_train *t, conv_run *s, int l, void *a, region_fn fn, layer_fn meanwhile,
                      const char *name)
{
    const hc_rect whole = {0, s->tile.ht, 0, s->tile.wt};
    if (!s->has_halo || t->variant != V_OVERLAP) {
        if (s->has_halo) {
            exchange_start(s, a);
            exchange_finish(t, s, name);
        }
        if (meanwhile) meanwhile(t, s, l);
        fn(t, s, l, 0, s->g.n, whole);
        return;
    }
    exchange_start(s, a);
    if (meanwhile) {
        meanwhile(t, s, l);
        hc_exchange_test(&s->ex);
    }
    hc_rect in = interior(s), strips[4];
    for (int i = 0; i < s->g.n; i++) {
        fn(t, s, l, i, i + 1, in);
        hc_exchange_test(&s->ex);
    }
    exchange_finish(t, s, name);
    int n = border(s, in, strips);
    for (int k = 0; k < n; k++) fn(t, s, l, 0, s->g.n, strips[k]);
}

/* The step ------------------------------------------------------------------------------ */

/* Forward and backward of this rank's part of samples [sample0, sample0 + n): gradients of
 * its tile summed into s->grads (zeroed first); dL/d(input) in dxp's tile when want_dx. */
static void pass(sl_train *t, conv_run *s, uint64_t sample0, int want_dx)
{
    const hc_geom *g = &s->g;
    const int r = g->r, L = g->layers;
    const size_t nc = (size_t)g->n * g->c;
    sl_k_memset0(s->be, s->grads, hc_params(g) * sl_train_esize(t));

    double t0 = sl_now();
    const hc_rect own = {s->tile.h0, s->tile.h1, s->tile.w0, s->tile.w1};
    const size_t ring = (size_t)r * s->wp + r; /* the owned tile's first element in a padded array */
    hc_load(s->be, g, (uint64_t)sl_train_opt.seed, sample0, g->n, own, s->target, s->plane, (size_t)s->tile.wt);
    sl_k_copy_block_cast(s->be, (int)nc, s->tile.ht, s->tile.wt, s->target, SL_F32, s->plane, (size_t)s->tile.wt,
                         sl_train_at(t, s->xp[0], ring), s->dt, s->pplane, (size_t)s->wp); /* the target is the input */
    sl_k_sync(s->be);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());

    for (int l = 0; l < L; l++) halo_pass(t, s, l, s->xp[l], forward_region, NULL, "halo x");
    t0 = sl_now();
    /* dy times the loss scale (1 but in f16), into the padded array whose halo backward data
     * exchanges */
    sl_k_mse(s->be, nc * s->plane, sl_train_widen(t, s->y, s->out, nc * s->plane), s->target, s->dy,
             1.0f / ((float)t->global_batch * g->c * g->h * g->w) * (float)t->ms.sc.scale);
    sl_k_copy_block_cast(s->be, (int)nc, s->tile.ht, s->tile.wt, s->dy, SL_F32, s->plane, (size_t)s->tile.wt,
                         sl_train_at(t, s->dyp, ring), s->dt, s->pplane, (size_t)s->wp);
    sl_train_compute_span(t, "loss", t0);

    for (int l = L - 1; l >= 0; l--) {
        const int need_dx = l > 0 || want_dx;
        /* dyp holds this layer's dy (from the layer above, or the loss's rounded into dt): dW
         * needs it packed, as the backward data pass reads it */
        t0 = sl_now();
        sl_k_copy_block_cast(s->be, (int)nc, s->tile.ht, s->tile.wt, sl_train_at(t, s->dyp, ring), s->dt,
                             s->pplane, (size_t)s->wp, s->dy, SL_F32, s->plane, (size_t)s->tile.wt);
        sl_train_compute_span(t, "pack dy", t0);
        if (!need_dx) { /* the first layer in training: dW only, no halo of dy */
            backward_filter(t, s, l);
            continue;
        }
        halo_pass(t, s, l, s->dyp, backward_data_region, backward_filter, "halo dy");
        if (l > 0) { /* dxp holds the layer below's dy: it becomes dyp. The rings of both are
                      * zero at the image's edge (never written) and refilled by the exchange
                      * elsewhere before they are read */
            void *next = s->dxp;
            s->dxp = s->dyp, s->dyp = next;
        }
    }
}

static void allreduce_grads(sl_train *t, conv_run *s)
{
    double t0 = sl_now();
    sl_train_coll_ok(sl_coll_allreduce(t->comm, s->grads, s->grads, t->nparams, t->dtype, SL_OP_SUM),
                     "all-reduce of dW");
    s->allreduce += sl_train_blocking(t, "allreduce dW", t0);
}

/* The training layer's end of a step: unscale (16 bits), the decision over the ranks, the
 * optimizer on the master weights and their rounding into dt; then the f32 view refreshed. */
static void update(sl_train *t, conv_run *s)
{
    const float *g = sl_train_unscale(t, s->grads, s->g32, t->nparams);
    if (!sl_train_decide(t)) return;
    sl_train_apply(t, s->w, s->master, g, s->optim, t->nparams);
    sl_train_widen(t, s->w, s->w32, t->nparams);
}

static void step(sl_train *t)
{
    conv_run *s = t->state;
    s->flight = s->exposed = s->allreduce = 0;
    pass(t, s, sl_train_sample(t, s->b0), 0);
    allreduce_grads(t, s);
    update(t, s);
    if (t->step < t->nsteps) {
        double *e = s->log + (size_t)t->step * 3;
        e[0] = s->flight, e[1] = s->exposed, e[2] = s->allreduce;
    }
    if (t->step == t->nsteps - 1) s->exchange_bytes = (double)s->ex.bytes; /* the step's last */
}

static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    *first = 0;
    *count = t->nparams; /* every rank holds the whole model */
    conv_run *s = t->state;
    return s->master ? s->master : s->w;
}

/* The models and the row ------------------------------------------------------------------- */

/* The halo model of the rank that sends the most per exchange (pure arithmetic over every
 * rank's tile: the same on every rank). */
static hc_halo_model busiest_model(const sl_train *t, const conv_run *s)
{
    hc_halo_model best = {0, 0, 0};
    int px, py;
    run_grid(t, &px, &py);
    for (int q = 0; q < px * py; q++) {
        hc_tile tile;
        hc_tile_of(&s->g, px, py, q, &tile);
        hc_halo_model m = hc_halo_model_of(&s->g, &tile);
        if (m.faces + m.corners > best.faces + best.corners) best = m;
    }
    return best;
}

/* Bytes the busiest rank sends per step: a halo per layer forward and per layer but the first
 * backward, and the ring all-reduce's 2 (P - 1) / P of dW. */
static double bytes_model(const sl_train *t)
{
    const conv_run *s = t->state;
    hc_halo_model m = busiest_model(t, s);
    double psi = (double)t->nparams * s->g.es;
    double ar = t->size > 1 ? 2.0 * (t->size - 1) / t->size * psi : 0.0;
    return (m.faces + m.corners) * (2 * s->g.layers - 1) + ar;
}

/* What setup holds: the whole model and its gradients in dt (in 16 bits with their f32 twins),
 * the optimizer state (f32); each layer's padded input, the output on the tile, dy and dx
 * padded, in dt; the target and the packed dy on the tile, in f32. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const conv_run *s = t->state;
    const double np = (double)t->nparams, nc = (double)s->g.n * s->g.c, es = s->g.es;
    const double twin = s->master ? 4 * np : 0;
    bytes[SL_MEM_PARAMS] = es * np + twin;
    bytes[SL_MEM_GRADS] = es * np + twin;
    bytes[SL_MEM_OPTIM] = 4 * np * sl_optim_state_per_param(&t->optim);
    bytes[SL_MEM_ACTIV] = nc * (es * ((s->g.layers + 2) * (double)s->pplane + s->plane) + 4 * 2 * (double)s->plane);
}

/* Median over the timed steps of the slowest rank's value of column k of the log. */
static double log_median(const sl_train *t, const conv_run *s, int k)
{
    const int timed = (int)t->ctx->opt.iters, first = t->nsteps - timed;
    double *mine = malloc((size_t)timed * sizeof *mine), *slow = malloc((size_t)timed * sizeof *slow);
    if (!mine || !slow) SL_FATAL("out of memory");
    for (int i = 0; i < timed; i++) mine[i] = s->log[(size_t)(first + i) * 3 + k];
    sl_stats_slowest_rank(mine, slow, timed, t->ctx->comm);
    sl_stats st;
    sl_stats_compute(slow, timed, &st);
    free(mine);
    free(slow);
    return st.median;
}

static void row(sl_train *t, sl_result *res)
{
    conv_run *s = t->state;
    const hc_geom *g = &s->g;
    int px, py;
    run_grid(t, &px, &py);
    char grid[32], tile[32];
    snprintf(grid, sizeof grid, "%dx%d", px, py);
    snprintf(tile, sizeof tile, "%dx%d", s->tile.ht, s->tile.wt);
    sl_result_param_str(res, "grid", grid);
    sl_result_param_str(res, "tile", tile); /* rank 0's */
    sl_result_param_str(res, "image", opt_image);
    sl_result_param_num(res, "conv_layers", g->layers);
    sl_result_param_num(res, "channels", g->c);
    sl_result_param_num(res, "filter", g->f);
    sl_result_param_num(res, "dilation", g->dil);
    sl_result_param_num(res, "halo", g->r);

    /* halo bytes per exchange (one layer): measured by the transport on every rank, beside
     * the model; the busiest rank's and the sum over ranks */
    MPI_Comm world = t->ctx->comm;
    hc_halo_model mine = hc_halo_model_of(g, &s->tile), busiest = busiest_model(t, s);
    double m_mine = mine.faces + mine.corners, meas_max = 0, meas_sum = 0, model_sum = 0;
    SL_CHECK_MPI(MPI_Allreduce(&s->exchange_bytes, &meas_max, 1, MPI_DOUBLE, MPI_MAX, world));
    SL_CHECK_MPI(MPI_Allreduce(&s->exchange_bytes, &meas_sum, 1, MPI_DOUBLE, MPI_SUM, world));
    SL_CHECK_MPI(MPI_Allreduce(&m_mine, &model_sum, 1, MPI_DOUBLE, MPI_SUM, world));
    sl_result_metric(res, "halo_bytes", meas_max, "bytes");
    sl_result_metric(res, "halo_model", busiest.faces + busiest.corners, "bytes");
    sl_result_metric(res, "halo_faces_model", busiest.faces, "bytes");
    sl_result_metric(res, "halo_corners_model", busiest.corners, "bytes");
    sl_result_metric(res, "halo_bytes_all_ranks", meas_sum, "bytes");
    sl_result_metric(res, "halo_model_all_ranks", model_sum, "bytes");
    /* surface to volume: the busiest rank's halo against its tile, per layer */
    sl_result_metric(res, "halo_per_tile", (busiest.faces + busiest.corners) /
                     ((double)g->es * g->n * g->c * (double)s->tile.ht * s->tile.wt), "ratio");

    double flight = log_median(t, s, 0), exposed = log_median(t, s, 1), ar = log_median(t, s, 2);
    sl_result_metric(res, "halo_comm", flight, "s");
    sl_result_metric(res, "halo_exposed", exposed, "s");
    double ovl = flight > 0 ? 1.0 - exposed / flight : NAN;
    if (!isnan(ovl)) ovl = ovl < 0 ? 0 : ovl;
    sl_result_metric(res, "halo_overlap", ovl, "fraction");
    sl_result_metric(res, "allreduce", ar, "s");

    /* spatial against data parallelism at the same global work: the data row (run last) says
     * how it compares with the spatial rows of the same collective */
    static double step_of[NVARIANTS];
    step_of[t->variant] = res->time.median;
    if (t->variant == V_DATA && (step_of[V_BLOCKING] > 0 || step_of[V_OVERLAP] > 0)) {
        char spatial[128] = "";
        double best = INFINITY;
        for (int v = V_BLOCKING; v <= V_OVERLAP; v++)
            if (step_of[v] > 0) {
                size_t used = strlen(spatial);
                snprintf(spatial + used, sizeof spatial - used, "%s %.2f ms, ", variant_names[v], step_of[v] * 1e3);
                best = fmin(best, step_of[v]);
            }
        sl_note(t->ctx, "same global work (%d images of %dx%d): %sdata %.2f ms per step; the best spatial "
                        "step is %.2fx data's", t->global_batch, problem.h, problem.w, spatial,
                res->time.median * 1e3, best / res->time.median);
        sl_result_metric(res, "best_spatial_over_data", best / res->time.median, "ratio");
    }
    if (t->variant == V_DATA) memset(step_of, 0, sizeof step_of);
}

/* The checks --------------------------------------------------------------------------- */

/* Why 1e-4 (the largest difference relative to the largest element, as for the weights):
 * the tiles compute the same products as the serial stack; only the order of additions
 * differs (dW is summed per tile and then across ranks; GEMMs of another width may block the
 * sums differently), which in f32 moves a sum of n terms by about sqrt(n) u relative — 1e-6
 * for the sizes here (the errors are printed in every note line; 1e-7 to 5e-7 seen). That
 * holds for the forward, a continuous function of the sums, and for the backward given the
 * same activations (see check: not for two backwards whose ReLUs differ). A defect moves
 * whole pixels: a halo row or corner missed or misplaced, a tile's dW not reduced, a border
 * strip not computed give relative errors of 1e-2 and more (the corners not unpacked: layer
 * outputs 0.29; dy's halo not exchanged: dx 0.69). */
#define HC_TOL 1e-4
/* In 16 bits (per dtype; u = 2^-11 for f16, 2^-8 for bf16): the serial stack rounds at the
 * same points (model.h), so the two still differ only by the order of f32 additions, but a
 * value within that of a rounding boundary of the dtype then rounds to the neighbouring 16-bit
 * value: a difference of one unit (u relative) in that element, which the next layers carry
 * on (a filter sums C F^2 inputs of which few are off), and the all-reduce rounds each rank's
 * partial dW and each hop's sum into the dtype (a few u of the partials). So a few u of the
 * largest element: the tolerance is 8u, 4e-3 (f16) and 3e-2 (bf16); measured 0 for the layer
 * outputs and dx, and 6e-4 to 7e-4 (f16), 2.8e-3 to 5.6e-3 (bf16) for dW (2 and 4 ranks: the
 * all-reduce's rounding). The defects measured in f32 above move whole pixels by 0.29 and
 * 0.69, an order of magnitude beyond even bf16's bound. */
#define HC_TOL_F16 4e-3
#define HC_TOL_BF16 3e-2
static double hc_tol(sl_dtype dt) { return dt == SL_F16 ? HC_TOL_F16 : dt == SL_BF16 ? HC_TOL_BF16 : HC_TOL; }

/* Rank q's part of the run: its tile and its images [*b0, *b0 + *nimg) of the batch. */
static void part_of(const sl_train *t, const conv_run *s, int q, hc_tile *tile, int *b0, int *nimg)
{
    int px, py;
    run_grid(t, &px, &py);
    hc_geom g = s->g;
    if (is_spatial(t->variant)) {
        hc_tile_of(&g, px, py, q, tile);
        *b0 = 0, *nimg = t->global_batch;
    } else {
        size_t lo, hi;
        sl_share((size_t)t->global_batch, t->size, q, &lo, &hi);
        hc_tile_of(&g, 1, 1, 0, tile);
        *b0 = (int)lo, *nimg = (int)(hi - lo);
    }
}

/* Every rank's part of a tiled array (backend memory, dt: planes src_z apart, rows src_y apart)
 * into full[B, c, H, W] (host, f32) on rank 0. */
static void gather(sl_train *t, conv_run *s, const void *src, size_t src_z, size_t src_y, float *full)
{
    const hc_geom *g = &s->g;
    const int ht = s->tile.ht, wt = s->tile.wt;
    sl_k_copy_block_cast(s->be, g->n * g->c, ht, wt, src, s->dt, src_z, src_y, s->out, SL_F32, s->plane, (size_t)wt);
    float *mine = sl_k_download(s->be, s->out, (size_t)g->n * g->c * s->plane * sizeof(float));
    MPI_Comm world = t->ctx->comm;
    if (t->rank != 0) {
        SL_CHECK_MPI(MPI_Send(mine, (int)((size_t)g->n * g->c * s->plane), MPI_FLOAT, 0, 77, world));
        free(mine);
        return;
    }
    for (int q = 0; q < t->size; q++) {
        hc_tile tq;
        int b0, nimg;
        part_of(t, s, q, &tq, &b0, &nimg);
        size_t n = (size_t)nimg * g->c * tq.ht * tq.wt;
        float *part = mine;
        if (q) {
            part = malloc(n * sizeof *part + 1);
            if (!part) SL_FATAL("out of memory");
            SL_CHECK_MPI(MPI_Recv(part, (int)n, MPI_FLOAT, q, 77, world, MPI_STATUS_IGNORE));
        }
        for (size_t zc = 0; zc < (size_t)nimg * g->c; zc++)
            for (int h = 0; h < tq.ht; h++)
                memcpy(full + ((size_t)b0 * g->c + zc) * g->h * g->w + (size_t)(tq.h0 + h) * g->w + tq.w0,
                       part + (zc * tq.ht + h) * tq.wt, (size_t)tq.wt * sizeof(float));
        if (q) free(part);
    }
    free(mine);
}

/* max |got - want| / max |want| */
static double rel_err(size_t n, const float *got, const float *want)
{
    double diff = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= diff)) diff = isnan(d) ? INFINITY : d;
        if (fabs(want[i]) > top) top = fabs(want[i]);
    }
    return top > 0 ? diff / top : diff;
}

/* One pass with the trained weights on step 0's samples against the serial stack with the
 * same weights: every layer's output (the forward); then dL/d(input) and dW (all-reduced)
 * against the serial backward run on this pass's own activations; then the halo bytes.
 *
 * Why the serial backward takes this pass's activations: ReLU' is a step. Among the 10^6 and
 * more hidden units of a pass, a pre-activation within rounding of zero comes out on either
 * side of it in two correct computations whose sums are ordered differently (the tiles'
 * GEMMs are narrower than the whole image's, and with some BLAS kernels — OpenBLAS's AVX2
 * one, not its AVX-512 one — a pixel's sum depends on the GEMM's width). That unit then
 * passes its gradient in one and not in the other: dL/dx differs over its receptive field by
 * its whole share (0.017 of the largest element with one such unit, at 7e-8 from zero), dW
 * by 2e-4 — a difference no tolerance for rounding can tell from a defect, which appears or
 * not with the weights of this step count and this machine's BLAS. Given the same
 * activations, both backwards take the same ReLU' and differ by rounding only; the forward,
 * a continuous function, is compared on its own. The units whose ReLU went the other way are
 * counted in the note. */
static int check(sl_train *t, double *error, char *why, size_t whylen)
{
    conv_run *s = t->state;
    MPI_Comm world = t->ctx->comm;
    const int B = t->global_batch, L = s->g.layers;
    s->checking = 1;
    pass(t, s, (uint64_t)s->b0, 1);
    allreduce_grads(t, s);
    sl_k_sync(s->be);
    s->checking = 0;
    const double tol = hc_tol(s->dt);
    const float scale = (float)t->ms.sc.scale; /* the pass's dy and dW are scaled by it */

    const hc_geom *g = &s->g;
    const size_t nfull = (size_t)B * g->c * g->h * g->w;
    /* x[l]: layer l's output (after its ReLU) on whole images, x[L] the model's output */
    float *x[HC_MAX_LAYERS + 1] = {0}, *dx = NULL;
    if (t->rank == 0)
        for (int l = 1; l <= L + 1; l++) {
            float **to = l <= L ? &x[l] : &dx;
            if (!(*to = malloc(nfull * sizeof **to)))
                SL_FATAL("out of memory for the check's %zu-element images", nfull);
        }
    const size_t ring = (size_t)g->r * s->wp + g->r;
    for (int l = 1; l < L; l++) gather(t, s, sl_train_at(t, s->xp[l], ring), s->pplane, (size_t)s->wp, x[l]);
    gather(t, s, s->y, s->plane, (size_t)s->tile.wt, x[L]);
    gather(t, s, sl_train_at(t, s->dxp, ring), s->pplane, (size_t)s->wp, dx);
    const float *dw_run = sl_train_widen(t, s->grads, s->g32, t->nparams); /* the all-reduced dW, in f32 */

    long long wrong = 0, exchanges = 0;
    SL_CHECK_MPI(MPI_Allreduce(&s->wrong_bytes, &wrong, 1, MPI_LONG_LONG, MPI_SUM, world));
    SL_CHECK_MPI(MPI_Allreduce(&s->exchanges, &exchanges, 1, MPI_LONG_LONG, MPI_SUM, world));
    int failed = 0;
    *error = 0;
    if (t->rank == 0) {
        hc_geom whole = problem;
        whole.n = B;
        hc_serial ref;
        hc_serial_init(&ref, s->be, &whole, s->dt);
        hc_serial_forward(&ref, s->w32, (uint64_t)sl_train_opt.seed, 0); /* the weights the pass used */
        double ey = 0;
        long long flipped = 0;
        for (int l = 1; l <= L; l++) {
            float *want = sl_k_download(s->be, ref.x[l], nfull * sizeof(float));
            ey = fmax(ey, rel_err(nfull, x[l], want));
            for (size_t i = 0; l < L && i < nfull; i++) flipped += (x[l][i] > 0) != (want[i] > 0);
            free(want);
            sl_k_memcpy(s->be, ref.x[l], x[l], nfull * sizeof(float), SL_K_H2D);
        }
        float *grads = sl_k_malloc(s->be, SL_MEM_OTHER, t->nparams * sizeof(float));
        hc_serial_backward(&ref, s->w32, grads, 1, B, scale);
        float *rdx = sl_k_download(s->be, ref.dx, nfull * sizeof(float));
        float *rdw = sl_k_download(s->be, grads, t->nparams * sizeof(float));
        float *dw = sl_k_download(s->be, dw_run, t->nparams * sizeof(float));
        double edx = rel_err(nfull, dx, rdx), edw = rel_err(t->nparams, dw, rdw);
        *error = fmax(ey, fmax(edx, edw));
        if (!(*error <= tol)) {
            failed = 1;
            snprintf(why, whylen, "against the serial stack: layer outputs %.3g, dx %.3g, dW %.3g (tolerance %g in %s)",
                     ey, edx, edw, tol, sl_dtype_name(s->dt));
        } else if (wrong) {
            failed = 1;
            snprintf(why, whylen, "%lld of %lld halo exchanges sent other bytes than the model's", wrong, exchanges);
        }
        sl_note(t->ctx, "%s %s: one pass with the trained weights against the serial stack: layer outputs %.2g, "
                        "dx %.2g, dW %.2g (max relative; tolerance %g; the backward given this pass's "
                        "activations, of which %lld of %zu hidden units were on the other side of 0 than "
                        "the serial's); %lld halo exchanges, %lld not the model's bytes",
                t->tech->variants[t->variant], sl_dtype_name(s->dt), ey, edx, edw, tol, flipped,
                (size_t)(L - 1) * nfull, exchanges, wrong);
        free(rdx), free(rdw), free(dw);
        sl_k_free(s->be, grads);
        hc_serial_free(&ref);
    }
    for (int l = 1; l <= L; l++) free(x[l]);
    free(dx);
    return failed;
}

/* The weights after training: one process training the serial stack on whole images, in the
 * run's dtype (the f32 master weights). */
static void reference(sl_train *t, float *params, double *losses)
{
    (void)losses; /* the conv stack's serial training does not report its loss */
    hc_reference(t, &problem, params);
}

/* Options ------------------------------------------------------------------------------- */

/* The training options as the training layer sets them, before the command line. */
static sl_train_options mlp_defaults;

static size_t model_params(void) { return hc_params(&problem); }
static double model_flops(int batch) { return hc_flops_step(&problem, batch); }

static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    int h, w;
    if (hc_grid_parse(opt_image, &h, &w) != 0 || h > 65536 || w > 65536) /* "AxB" as (A, B) */
        sl_usage_error("--image: expected HxW with H and W in 1..65536 (e.g. 128x128), got '%s'", opt_image);
    /* the training layer's MLP options mean nothing here: say so rather than ignore them */
    const sl_train_options *o = &sl_train_opt, *d = &mlp_defaults;
    if (o->layers != d->layers || o->width != d->width || o->inputs != d->inputs || o->outputs != d->outputs)
        sl_usage_error("--layers/--width/--inputs/--outputs: halo_conv trains a convolution stack, not the MLP: "
                       "use --conv-layers, --channels and --image");
    if (opt_filter % 2 == 0) sl_usage_error("--filter: expected an odd filter size (1, 3, 5, 7, ...), got %lld", opt_filter);
    if (sl_train_opt.scaling != 1)
        sl_usage_error("--scaling: halo_conv compares every variant at the same global work: only strong "
                       "(--batch is the global batch)");
    problem = (hc_geom){.n = (int)sl_train_opt.batch, .c = (int)opt_channels, .h = h, .w = w,
                        .f = (int)opt_filter, .dil = (int)opt_dilation, .layers = (int)opt_layers};
    hc_geom_init(&problem);
    if (opt_grid) {
        if (hc_grid_parse(opt_grid, &grid_px, &grid_py) != 0)
            sl_usage_error("--grid: expected PXxPY (e.g. 2x2, 1x4), got '%s'", opt_grid);
        if ((long long)grid_px * grid_py != P)
            sl_usage_error("--grid %s: a grid of %lld ranks, but this run has %d", opt_grid,
                           (long long)grid_px * grid_py, P);
    } else {
        hc_grid_squarest(P, &grid_px, &grid_py);
    }
    const unsigned spatial = (1u << V_BLOCKING) | (1u << V_OVERLAP);
    if ((opt_variants & spatial) && P > 1) {
        int rows, cols;
        hc_grid_smallest_tile(&problem, grid_px, grid_py, &rows, &cols);
        if ((grid_py > 1 && rows < problem.r) || (grid_px > 1 && cols < problem.r) || rows < 1 || cols < 1)
            sl_usage_error("--grid %dx%d: the smallest tile of the %dx%d --image is %dx%d, thinner than the "
                           "halo of %d (--filter %lld --dilation %lld): use fewer ranks along the thin side "
                           "or a larger --image", grid_px, grid_py, h, w, rows, cols, problem.r, opt_filter,
                           opt_dilation);
    }
    if ((opt_variants & (1u << V_DATA)) && sl_train_opt.batch < P) {
        if (opt_variants == (1u << V_DATA))
            sl_usage_error("--batch %lld: data parallelism needs an image per rank (%d ranks)", sl_train_opt.batch, P);
        opt_variants &= ~(1u << V_DATA);
        sl_note(ctx, "skipping data: --batch %lld has fewer images than the %d ranks", sl_train_opt.batch, P);
    }
    hc_halo_model m0;
    hc_tile t0;
    hc_tile_of(&problem, grid_px, grid_py, 0, &t0);
    m0 = hc_halo_model_of(&problem, &t0);
    sl_note(ctx, "conv stack: %d layers of %d->%d channels, %dx%d filters, dilation %d (halo %d deep), "
                 "%lld images of %dx%d, %zu weights, %s; grid %dx%d, rank 0's tile %dx%d and its halo "
                 "%.0f bytes per layer (%.0f faces + %.0f corners)",
            problem.layers, problem.c, problem.c, problem.f, problem.f, problem.dil, problem.r,
            sl_train_opt.batch, h, w, hc_params(&problem), sl_train_opt.optim ? "adamw" : "sgd", grid_px,
            grid_py, t0.ht, t0.wt, m0.faces + m0.corners, m0.faces, m0.corners);
}

static const sl_column columns[] = {
    SL_COL("variant", "variant", 9),
    SL_COL("dtype", "dtype", 5),
    SL_COL("grid", "grid", 5),
    SL_COL("coll", "collective", 5),
    {"step", "ms", "time.median", 9, 2, 1e3},
    {"compute", "ms", "compute", 9, 2, 1e3},
    {"halo", "ms", "halo_comm", 8, 2, 1e3},
    {"exposed", "ms", "halo_exposed", 8, 2, 1e3},
    {"overlap", "%", "halo_overlap", 8, 1, 100},
    {"allred", "ms", "allreduce", 7, 2, 1e3},
    {"eff", "%", "scaling_eff", 6, 1, 100},
    {"halo", "KB/layer", "halo_bytes", 9, 1, 1e-3},
    {"model", "KB/layer", "halo_model", 9, 1, 1e-3},
    {"halo/tile", "%", "halo_per_tile", 9, 1, 100},
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_technique halo_conv = {
    .program = {
        .name = "halo_conv",
        .summary = "spatially partitioned convolutions: halo exchange blocking or overlapped with the "
                   "interior, against data parallelism",
        SL_TRAIN_PROGRAM_USES,
        .default_coll = SL_COLL_MPI,
        .default_iters = 5,
        .default_warmup = 1,
        .extra = hc_opts,
        .validate = validate,
    },
    .variants = variant_names,
    .nvariants = NVARIANTS,
    .variant_mask = &opt_variants,
    .mixed_variants = (1u << NVARIANTS) - 1,
    /* 16-bit training is checked to the training layer's bounds (sl_train.h; no .tol_mixed_*): the
     * weights differ from the serial stack's by the order of f32 additions flipping 16-bit
     * roundings, as there */
    .data_ranks = data_ranks,
    .setup = setup,
    .step = step,
    .weights = weights,
    .free = release,
    .memory_model = memory_model,
    .bytes_model = bytes_model,
    .row = row,
    .reference = reference,
    .check = check,
    .model_params = model_params,
    .model_flops = model_flops,
    .columns = columns,
    .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    mlp_defaults = sl_train_opt;
    sl_train_opt.batch = 4;    /* the global batch: every variant does the same work */
    sl_train_opt.scaling = 1;
    return sl_train_main(&halo_conv, argc, argv);
}
