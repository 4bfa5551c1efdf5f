/* train_precision.c — the run's precision, owned by the training layer: the activations in
 * t->dtype, the f32 twins a 16-bit run keeps (master weights, unscaled gradients), and the one
 * unscale -> decision -> optimizer sequence every technique's step ends with (sl_train.h).
 *
 * Why the decision is agreed over the ranks: with loss scaling a step whose gradients hold inf or
 * NaN must be skipped, and every rank must decide alike or the replicas (or the shards) part for
 * good. A sum carries inf and NaN to every rank, but a rank may see an overflow the sum does not
 * (its own cast into 16 bits), and a sharded technique's rank sees only its shard. So each rank
 * flags what it unscaled and the flags are OR-ed (sl_train_overflow_any, one int, outside the
 * technique's collective so that bytes_sent stays the gradients'). f32 has no scaler by default:
 * the decision is then 1 without communication, and the step is the f32 reference's, bit for bit
 * (a technique's power-of-two scaler in f32 changes no bit unless a step overflows). */
#include <string.h>

#include "sl_train.h"

size_t sl_train_esize(const sl_train *t) { return sl_dtype_size(t->dtype); }

void *sl_train_at(const sl_train *t, const void *p, size_t e)
{
    return (char *)p + e * sl_train_esize(t);
}

float *sl_train_twin(sl_train *t, sl_mem_cat cat, size_t n)
{
    return t->dtype == SL_F32 ? NULL : sl_k_malloc(t->be, cat, n * sizeof(float));
}

float *sl_train_f32(const sl_train *t, const void *p, float *ws, size_t n)
{
    if (t->dtype == SL_F32) return (float *)p;
    sl_k_cast(t->be, n, p, t->dtype, ws, SL_F32, NULL);
    return ws;
}

void sl_train_round(const sl_train *t, const float *r, void *p, size_t n)
{
    if ((const void *)r == p) return;
    if (t->dtype == SL_F32) sl_k_memcpy(t->be, p, r, n * sizeof(float), SL_K_D2D);
    else sl_k_cast(t->be, n, r, SL_F32, p, t->dtype, NULL);
}

const float *sl_train_widen(sl_train *t, const void *w, float *view, size_t n)
{
    if (t->dtype == SL_F32) return w;
    sl_k_cast(t->be, n, w, t->dtype, view, SL_F32, NULL);
    sl_k_sync(t->be);
    return view;
}

static size_t largest_layer(const sl_mlp *m)
{
    size_t big = 0;
    for (int l = 0; l < m->nlayers; l++) big = sl_mlp_layer_size(m, l) > big ? sl_mlp_layer_size(m, l) : big;
    return big;
}

/* The activations allocated (placed = 0) or left for the caller to place. */
static void acts_init(sl_train *t, int rows, sl_acts *a, int placed)
{
    const sl_mlp *m = t->m;
    memset(a, 0, sizeof *a);
    a->rows = rows > 0 ? rows : 1;
    a->first = a->last = 1;
    if (a->rows > t->act_rows) t->act_rows = a->rows;
    if (sl_mlp_is_gpt(m)) { /* placed: the workspaces, and the targets (the tokens head a range) */
        if (placed) sl_gpt_acts_alloc_work(m, t->dtype, a->rows, &a->g);
        else sl_gpt_acts_alloc(m, t->dtype, a->rows, &a->g);
        if (placed) a->g.tgt = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)a->rows * m->gpt.T * sizeof(int32_t));
        if (t->dtype != SL_F32) a->gw32 = sl_k_malloc(t->be, SL_MEM_OTHER, largest_layer(m) * sizeof(float));
        a->placed = placed;
        return;
    }
    a->y = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)a->rows * m->dims[m->nlayers] * sizeof(float));
    if (t->dtype == SL_F32) {
        if (!placed) sl_mlp_acts_alloc(m, a->rows, &a->f);
        a->x = a->f.x[0];
        return;
    }
    if (placed) sl_mixed_init_work(&a->mx, m, t->dtype, a->rows);
    else sl_mixed_init_layers(&a->mx, m, t->dtype, a->rows);
    a->x = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)a->rows * m->dims[0] * sizeof(float));
    a->gw32 = sl_k_malloc(t->be, SL_MEM_OTHER, largest_layer(m) * sizeof(float));
}

void sl_acts_alloc(sl_train *t, int rows, sl_acts *a) { acts_init(t, rows, a, 0); }
void sl_acts_place(sl_train *t, int rows, sl_acts *a) { acts_init(t, rows, a, 1); }

void sl_acts_free(sl_train *t, sl_acts *a)
{
    if (sl_mlp_is_gpt(t->m)) {
        if (a->placed) { /* its pointers are into the technique's blocks: only what it holds here */
            sl_k_free(t->be, a->g.tgt);
            sl_acts_free_work(t, a);
            return;
        }
        sl_gpt_acts_free(&a->g);
        sl_k_free(t->be, a->gw32);
        return;
    }
    sl_k_free(t->be, a->y);
    if (t->dtype == SL_F32) {
        sl_mlp_acts_free(t->m, &a->f);
        return;
    }
    sl_mixed_free(&a->mx);
    sl_k_free(t->be, a->x);
    sl_k_free(t->be, a->gw32);
}

void sl_acts_alloc_work(sl_train *t, int rows, sl_acts *a)
{
    const sl_mlp *m = t->m;
    memset(a, 0, sizeof *a);
    a->rows = rows > 0 ? rows : 1;
    a->first = a->last = 1;
    if (sl_mlp_is_gpt(m)) {
        sl_gpt_acts_alloc_work(m, t->dtype, a->rows, &a->g);
        if (t->dtype != SL_F32) a->gw32 = sl_k_malloc(t->be, SL_MEM_OTHER, largest_layer(m) * sizeof(float));
        return;
    }
    if (t->dtype == SL_F32) return; /* the f32 kernels need no workspace */
    size_t w = 0;
    for (int l = 0; l <= m->nlayers; l++) w = (size_t)m->dims[l] > w ? (size_t)m->dims[l] : w;
    const size_t nout = (size_t)a->rows * m->dims[m->nlayers] * sizeof(float);
    a->mx.m = m;
    a->mx.be = t->be;
    a->mx.dt = t->dtype;
    a->mx.t0 = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)a->rows * w * sizeof(float));
    a->mx.t1 = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)a->rows * w * sizeof(float));
    a->mx.bias32 = sl_k_malloc(t->be, SL_MEM_OTHER, w * sizeof(float));
    a->mx.out32 = sl_k_malloc(t->be, SL_MEM_OTHER, nout);
    a->mx.dout32 = sl_k_malloc(t->be, SL_MEM_OTHER, nout);
    a->gw32 = sl_k_malloc(t->be, SL_MEM_OTHER, largest_layer(m) * sizeof(float));
}

void sl_acts_free_work(sl_train *t, sl_acts *a)
{
    if (sl_mlp_is_gpt(t->m)) sl_gpt_acts_free_work(&a->g);
    void *bufs[] = {a->mx.t0, a->mx.t1, a->mx.bias32, a->mx.out32, a->mx.dout32, a->gw32};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    memset(a, 0, sizeof *a);
}

void sl_acts_map(sl_train *t, sl_acts *a, int l0, int l1, int rows, void *block, void *out, void *dout)
{
    char *in = block; /* the input heads the block, the rest after it */
    sl_acts_map_input(t, a, l0, l1, rows, in, in + sl_acts_range_bytes(t, l0, l1, rows, 0), out, dout);
}

void sl_acts_map_input(sl_train *t, sl_acts *a, int l0, int l1, int rows, void *in, void *body, void *out,
                       void *dout)
{
    const sl_mlp *m = t->m;
    if (sl_mlp_is_gpt(m)) { /* the head's loss factor and scale, as sl_acts_load sets them */
        sl_gpt_acts_map_input(m, &a->g, l0, l1, rows, in, body, out, dout);
        a->g.norm = sl_task_loss_norm(t->task, t->global_batch);
        a->g.scale = (float)t->ms.sc.scale; /* 1 without a scaler */
        return;
    }
    const size_t es = sl_train_esize(t);
    const int f32 = t->dtype == SL_F32;
    char *base = body;
    void *x[SL_MLP_MAX_LAYERS + 1], *z[SL_MLP_MAX_LAYERS];
    for (int l = l0; l < l1; l++) {
        x[l] = l == l0 ? in : base;
        if (l > l0) base += (size_t)rows * m->dims[l] * es;
    }
    x[l1] = out;
    for (int l = l0; l < l1; l++) {
        z[l] = m->act[l] == SL_ACT_NONE ? x[l + 1] : base;
        if (m->act[l] != SL_ACT_NONE) base += (size_t)rows * m->dims[l + 1] * es;
    }
    for (int l = l0; l <= l1; l++) {
        if (f32) a->f.x[l] = x[l];
        else a->mx.x[l] = x[l];
        if (l == l1) break;
        if (f32) a->f.z[l] = z[l];
        else a->mx.z[l] = z[l];
    }
    a->f.batch = a->mx.batch = rows;
    if (l1 < m->nlayers) return;
    a->f.dbuf[m->nlayers & 1] = dout; /* where sl_acts_loss leaves dL/d(output) */
    a->mx.dbuf[m->nlayers & 1] = dout;
}

size_t sl_acts_range_bytes(const sl_train *t, int l0, int l1, int rows, int full)
{
    const sl_mlp *m = t->m;
    if (sl_mlp_is_gpt(m)) return sl_gpt_range_bytes(m, t->dtype, rows, l0, l1, full);
    size_t e = 0; /* x[l0 .. l1), and z[l] where layer l has an activation */
    for (int l = l0; l < (full ? l1 : l0 + 1); l++) {
        e += (size_t)m->dims[l];
        if (full && m->act[l] != SL_ACT_NONE) e += (size_t)m->dims[l + 1];
    }
    return e * (size_t)rows * sl_train_esize(t);
}

size_t sl_acts_io_bytes(const sl_train *t, int l, int rows)
{
    if (sl_mlp_is_gpt(t->m)) return sl_gpt_io_bytes(t->m, t->dtype, rows, l);
    return (size_t)rows * (size_t)t->m->dims[l] * sl_train_esize(t);
}

size_t sl_acts_bytes(const sl_train *t, int rows)
{
    rows = rows > 0 ? rows : 1;
    if (sl_mlp_is_gpt(t->m)) return sl_gpt_acts_bytes(t->m, t->dtype, rows);
    return t->dtype == SL_F32 ? sl_mlp_acts_bytes(t->m, rows)
                              : sl_mixed_memory(t->m, t->dtype, 1, rows, &t->optim).activ;
}

const float *sl_train_unscale(sl_train *t, const void *g, float *g32, size_t n)
{
    const int f32 = t->dtype == SL_F32;
    if (f32 && t->ms.sc.mode == SL_SCALE_NONE) return g;
    if (f32) g32 = (float *)g; /* a loss-scaled f32 run: unscaled in place */
    if (!g32) SL_FATAL("sl_train_unscale: a %s run needs an f32 twin", sl_dtype_name(t->dtype));
    const double t0 = sl_now();
    if (!f32) sl_k_cast(t->be, n, g, t->dtype, g32, SL_F32, NULL);
    /* 1/scale is exact for the powers of two scalers use */
    const size_t bad = sl_k_scale_check(t->be, n, g32, 1.0f / (float)t->ms.sc.scale);
    t->nonfinite += bad;
    t->cnt.nonfinite += bad;
    sl_train_compute_span(t, "unscale, inf/NaN check", t0);
    return g32;
}

int sl_train_decide(sl_train *t)
{
    if (t->dtype == SL_F32 && t->ms.sc.mode == SL_SCALE_NONE) {
        t->optim_now = sl_optim_for_step(&t->optim, t->ms.applied++);
        return 1;
    }
    t->scaled = 1;
    const int mine = t->nonfinite > 0;
    t->nonfinite = 0;
    return sl_train_mixed_decide(t, &t->ms, mine, &t->optim_now);
}

int sl_train_decide_alone(sl_train *t)
{
    if (t->dtype == SL_F32 && t->ms.sc.mode == SL_SCALE_NONE) return sl_train_decide(t);
    t->scaled = 1;
    t->ms.alone = 1;
    if (t->ms.sc.mode == SL_SCALE_DYNAMIC) t->ms.sc.mode = SL_SCALE_STATIC; /* the row says so */
    const int mine = t->nonfinite > 0;
    t->nonfinite = 0;
    t->ms.overflow_steps += mine;
    t->ms.sc.steps++;
    if (mine) {
        t->ms.sc.skipped++;
        return 0;
    }
    t->optim_now = sl_optim_for_step(&t->optim, t->ms.applied++);
    return 1;
}

float *sl_train_wide(sl_train *t)
{
    if (!t->wide) t->wide = sl_k_malloc(t->be, SL_MEM_OTHER, t->nparams * sizeof(float));
    return t->wide;
}

void sl_train_apply(sl_train *t, void *w, float *master, const float *g32, float *state, size_t n)
{
    const double t0 = sl_now();
    if (!master && t->dtype != SL_F32) { /* no master copy: the update is kept only if it survives
                                            rounding into t->dtype */
        float *wide = sl_train_wide(t);
        sl_k_cast(t->be, n, w, t->dtype, wide, SL_F32, NULL);
        sl_optim_step(t->be, &t->optim_now, n, wide, g32, state);
        t->cnt.lost_updates += sl_k_cast_update(t->be, t->dtype, n, wide, w);
        sl_train_compute_span(t, "optimizer (no master copy)", t0);
        return;
    }
    sl_optim_step(t->be, &t->optim_now, n, master ? master : (float *)w, g32, state);
    if (master) sl_k_cast(t->be, n, master, SL_F32, w, t->dtype, NULL);
    sl_train_compute_span(t, "optimizer", t0);
}
