/* pass.c — vdnn's step on the model (the MLP, the GPT or the conv stack), a layer at a time,
 * every activation placed in the arena (sl_acts_map_input; the conv stack's layers are handed
 * their tensors), and its analytic memory model.
 *
 * Forward, layer l: its body and its output (the next layer's input) are taken from the arena
 * and the layer's range mapped onto them; an offloaded layer's input starts to the host before
 * the layer computes (it is final: the layer below wrote it), its body once the layer is done.
 * The input is released when its copy is; the body's copy runs under the next layer's forward
 * and the body is released after it. Backward, layer l from the top: its pieces are fetched
 * back into fresh arena blocks if they are on the host (the copy all exposed), and with
 * prefetch the nearest offloaded layer below it starts back while this one computes; the layer
 * is mapped again on wherever its pieces now are, back-propagated, and everything it kept
 * released with the gradient it read. */
#include <string.h>

#include "state.h"

int vd_offloaded(const vd *s, int l)
{
    return s->policy == VD_ALL || (s->policy == VD_CONV && l % 2 == 0); /* the conv stack's even layers */
}

size_t vd_io_bytes(const sl_train *t, const vd *s, int l)
{
    return s->conv ? s->conv->elems * sl_train_esize(t) : sl_acts_io_bytes(t, l, s->rows);
}

/* The nearest offloaded layer below l, or -1. */
static int next_offloaded(const vd *s, int l)
{
    for (int j = l - 1; j >= 0; j--)
        if (vd_offloaded(s, j)) return j;
    return -1;
}

static void *take(vd *s, arena_cat cat, size_t bytes) { return bytes ? arena_alloc(&s->a, cat, bytes) : NULL; }
static void give(vd *s, void **p)
{
    if (*p) arena_free(&s->a, *p);
    *p = NULL;
}
static int copy(vd *s, void *dst, const void *src, size_t bytes, sl_k_copy_kind kind)
{
    return bytes ? copier_start(s->cp, dst, src, bytes, kind) : -1;
}
static void wait(vd *s, int *tk)
{
    if (*tk >= 0) copier_wait(s->cp, *tk);
    *tk = -1;
}

/* Layer l back from the host into fresh arena blocks. */
static void fetch(vd *s, int l)
{
    vd_layer *y = &s->L[l];
    y->in = take(s, A_ACTIV, y->in_bytes);
    y->body = take(s, A_ACTIV, y->body_bytes);
    y->tk_in = copy(s, y->in, y->host_in, y->in_bytes, SL_K_H2D);
    y->tk_body = copy(s, y->body, y->host_body, y->body_bytes, SL_K_H2D);
    y->on = 1;
}

/* Where layer l's dL/d(input) goes: the MLP's gradient buffer l & 1 (both views), the GPT's. */
static void set_dx(sl_train *t, vd *s, sl_acts *a, int l, void *p)
{
    if (s->conv) return; /* handed to the layer */
    if (sl_mlp_is_gpt(t->m)) a->g.dres[l & 1] = p;
    else sl_acts_set(a, SL_ACTS_DBUF, l & 1, p);
}

static void forward(sl_train *t, vd *s, const void *params)
{
    const int N = s->N, gpt = !s->conv && sl_mlp_is_gpt(t->m);
    sl_acts *a = &s->rep.acts;
    int pending = -1; /* the layer whose body is on its way to the host */
    s->L[0].in = take(s, A_ACTIV, s->L[0].in_bytes);
    for (int l = 0; l < N; l++) {
        vd_layer *y = &s->L[l];
        y->on = 1;
        y->body = take(s, A_ACTIV, y->body_bytes);
        void *out = NULL, *dout = NULL;
        if (l < N - 1) out = s->L[l + 1].in = take(s, A_ACTIV, s->L[l + 1].in_bytes);
        else {
            if (!gpt) out = s->out = take(s, A_ACTIV, vd_io_bytes(t, s, N)); /* the loss reads it */
            dout = s->dout = take(s, A_WORKSPACE, vd_io_bytes(t, s, N));
        }
        if (!s->conv) sl_acts_map_input(t, a, l, l + 1, s->rows, y->in, y->body, out, dout);
        if (l == 0 && s->conv) { /* the images, in t->dtype */
            vd_conv_load(t, s, y->in);
        } else if (l == 0 && gpt) { /* the tokens are layer 0's input; dropout numbers from seq0 */
            sl_train_load_tokens(t, t->lo, s->rows, y->in, a->g.tgt);
            a->g.seq0 = sl_train_sample(t, t->lo);
        } else if (l == 0) {
            sl_acts_load(t, a, t->lo, s->rows);
        }
        const int off = vd_offloaded(s, l);
        if (off) y->tk_in = copy(s, y->host_in, y->in, y->in_bytes, SL_K_D2H);
        if (s->conv) vd_conv_forward(t, s, l, y->in, out);
        else sl_acts_forward(t, a, params, l, l + 1, NULL);
        if (off) {
            y->tk_body = copy(s, y->host_body, y->body, y->body_bytes, SL_K_D2H);
            wait(s, &y->tk_in);
            give(s, &y->in);
            y->on = 0;
        }
        if (pending >= 0) {
            wait(s, &s->L[pending].tk_body);
            give(s, &s->L[pending].body);
        }
        pending = off ? l : -1;
    }
    if (pending >= 0) {
        wait(s, &s->L[pending].tk_body);
        give(s, &s->L[pending].body);
    }
}

static void backward(sl_train *t, vd *s, const void *params, void *grads)
{
    const int N = s->N;
    sl_acts *a = &s->rep.acts;
    void *dy = s->dout;
    for (int l = N - 1; l >= 0; l--) {
        vd_layer *y = &s->L[l];
        if (!y->on) fetch(s, l); /* not prefetched: the copy is all exposed */
        const int p = s->prefetch ? next_offloaded(s, l) : -1;
        if (p >= 0 && !s->L[p].on) fetch(s, p); /* one ahead, while layer l computes */
        void *dx = l > 0 ? take(s, A_WORKSPACE, vd_io_bytes(t, s, l)) : NULL;
        if (l > 0) set_dx(t, s, a, l, dx);
        wait(s, &y->tk_in);
        wait(s, &y->tk_body);
        if (s->conv) {
            vd_conv_backward(t, s, l, y->in, dy, dx, grads);
        } else {
            sl_acts_map_input(t, a, l, l + 1, s->rows, y->in, y->body, NULL, l == N - 1 ? s->dout : NULL);
            sl_acts_backward_range(t, a, params, grads, dy, l, l + 1, NULL);
        }
        give(s, &dy);
        give(s, &y->in);
        give(s, &y->body);
        y->on = 0;
        dy = dx;
    }
    s->dout = NULL;
}

/* The MLP's slots point nowhere once their blocks are released (sl_acts_free frees what is
 * still set); the GPT's placed pointers are never freed by it. */
static void unmap(sl_train *t, vd *s, sl_acts *a)
{
    if (s->conv || sl_mlp_is_gpt(t->m)) return;
    for (int l = 0; l <= t->m->nlayers; l++) {
        sl_acts_set(a, SL_ACTS_X, l, NULL);
        if (l < t->m->nlayers) sl_acts_set(a, SL_ACTS_Z, l, NULL);
    }
    sl_acts_set(a, SL_ACTS_DBUF, 0, NULL);
    sl_acts_set(a, SL_ACTS_DBUF, 1, NULL);
}

void vd_pass(sl_train *t, vd *s, const void *params, void *grads)
{
    if (s->conv) vd_conv_widen(t, s, params);
    forward(t, s, params);
    if (s->conv) vd_conv_loss(t, s, s->out, s->dout);
    else sl_acts_loss(t, &s->rep.acts); /* the MLP's from its output; the GPT's head computed it */
    give(s, &s->out);
    backward(t, s, params, grads);
    unmap(t, s, &s->rep.acts);
    if (s->a.live_total != 0)
        SL_FATAL("vdnn: %zu arena bytes still held after backward", s->a.live_total);
}

/* The model ----------------------------------------------------------------------------------
 *
 * Every buffer is taken just before a layer computes and released just after, so the arena's
 * peaks (by category and in all) are reached at those moments, with I_l and B_l layer l's input
 * and body, G_l the gradient entering layer l from above (G_N dL/d(output)), O the MLP's output
 * (the GPT's head leaves none), K_l the pieces of the layers below l that stay (none offloaded),
 * each rounded to the arena's unit:
 *   forward l:   activ  K_l + B_{l-1} if layer l - 1 is offloaded (its copy still running)
 *                       + I_l + B_l + (I_{l+1}, or O for the top layer)
 *                workspace  G_N for the top layer, else 0
 *   backward l:  activ  K_l + I_l + B_l + (with prefetch: the nearest offloaded layer's below l)
 *                workspace  G_{l+1} + G_l (none for l = 0)
 * Bytes moved each way: I_l + B_l of every offloaded layer. */

static size_t r(size_t b) { return b ? arena_round(b) : 0; }

void vd_model(sl_train *t, vd *s)
{
    const int N = s->N, gpt = !s->conv && sl_mlp_is_gpt(t->m);
    for (int l = 0; l < N; l++) {
        vd_layer *y = &s->L[l];
        y->in_bytes = s->conv ? vd_io_bytes(t, s, l) : sl_acts_range_bytes(t, l, l + 1, s->rows, 0);
        y->body_bytes = s->conv ? 0 : sl_acts_range_bytes(t, l, l + 1, s->rows, 1) - y->in_bytes;
    }
    const size_t O = gpt ? 0 : r(vd_io_bytes(t, s, N));
    size_t act = 0, work = 0, total = 0, K = 0;
    s->moved = 0;
#define MOMENT(A, W) (act = (A) > act ? (A) : act, work = (W) > work ? (W) : work, \
                      total = (A) + (W) > total ? (A) + (W) : total)
    for (int l = 0; l < N; l++) {
        const vd_layer *y = &s->L[l];
        const size_t mine = r(y->in_bytes) + r(y->body_bytes);
        const size_t copying = l > 0 && vd_offloaded(s, l - 1) ? r(s->L[l - 1].body_bytes) : 0;
        const size_t up = l < N - 1 ? r(s->L[l + 1].in_bytes) : O;
        MOMENT(K + copying + mine + up, l == N - 1 ? r(vd_io_bytes(t, s, N)) : 0);
        if (vd_offloaded(s, l)) s->moved += y->in_bytes + y->body_bytes;
        else K += mine;
    }
    for (int l = N - 1; l >= 0; l--) {
        const vd_layer *y = &s->L[l];
        const size_t mine = r(y->in_bytes) + r(y->body_bytes);
        if (!vd_offloaded(s, l)) K -= mine; /* K_l: the layers below l */
        const int p = s->prefetch ? next_offloaded(s, l) : -1;
        const size_t ahead = p >= 0 ? r(s->L[p].in_bytes) + r(s->L[p].body_bytes) : 0;
        const size_t G = r(vd_io_bytes(t, s, l + 1)) + (l > 0 ? r(vd_io_bytes(t, s, l)) : 0);
        MOMENT(K + mine + ahead, G);
    }
#undef MOMENT
    memset(s->model, 0, sizeof s->model);
    s->model[A_ACTIV] = act;
    s->model[A_WORKSPACE] = work;
    s->model_total = total;
}
