/* train_step.c — the pieces of a training step, each recording its phase: the batch, forward
 * and backward over a layer range with per-layer hooks (pipeline stages run a range, ZeRO-3
 * gathers a layer's parameters before it, checkpointing recomputes a range, vDNN prefetches
 * the next layer's input), the loss and the optimizer, in the run's dtype (sl_acts: for the MLP
 * the f32 store sl_mlp_acts in f32, the 16-bit one sl_mixed otherwise; for the GPT its layers'
 * activations in any dtype, gpt_model.h), through the same loops. */
#include "sl_env_check.h"
#include "train_internal.h"

static const char *const phase_names[SL_NPHASES] = {
    "data", "compute", "comm", "exposed_comm", "bubble", "transfer", "recompute",
};
const char *sl_phase_name(sl_phase p) { return p < SL_NPHASES ? phase_names[p] : "?"; }

/* SL_NO_PHASES=1 (sl_env_check.h): nothing recorded, read once. */
static int phases_off(void)
{
    static int off = -1;
    if (off < 0) off = sl_no_phases();
    return off;
}

void sl_train_record(sl_train *t, sl_phase p, double seconds)
{
    if (phases_off()) return;
    t->phase[p] += seconds;
    t->phases_used |= 1u << p;
}

void sl_train_span(sl_train *t, sl_phase p, const char *name, double t0, double t1)
{
    if (phases_off()) return;
    sl_train_record(t, p, t1 - t0);
    int comm_row = p == SL_PHASE_COMM || p == SL_PHASE_EXPOSED || p == SL_PHASE_TRANSFER;
    sl_trace_event(name, p == SL_PHASE_EXPOSED ? "comm" : sl_phase_name(p), comm_row, t0, t1);
}

double sl_train_blocking(sl_train *t, const char *name, double t0)
{
    const double t1 = sl_now(); /* one reading for both: exposed == comm, exactly */
    sl_train_span(t, SL_PHASE_COMM, name, t0, t1);
    sl_train_record(t, SL_PHASE_EXPOSED, t1 - t0);
    return t1 - t0;
}

void sl_train_compute_span(sl_train *t, const char *name, double t0)
{
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
}

void *sl_train_alloc(sl_train *t, sl_mem_cat cat, size_t bytes) { return sl_k_malloc(t->be, cat, bytes ? bytes : 1); }

void sl_share(size_t n, int parts, int p, size_t *lo, size_t *hi)
{
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, up = (size_t)p;
    *lo = up * base + (up < extra ? up : extra);
    *hi = *lo + base + (up < extra);
}

void sl_train_coll_ok(int rc, const char *what)
{
    if (rc != SL_COLL_OK) SL_FATAL("%s failed: %s", what, sl_coll_strerror(rc));
}

uint64_t sl_train_sample(const sl_train *t, int first)
{
    return (uint64_t)t->step * (uint64_t)t->global_batch + (uint64_t)first;
}

void sl_train_load(sl_train *t, int first, int count, float *x, float *y)
{
    double t0 = sl_now();
    sl_task_batch(t->task, sl_train_sample(t, first), count, x, y);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());
}

void sl_train_load_tokens(sl_train *t, int first, int count, int32_t *tok, int32_t *tgt)
{
    double t0 = sl_now();
    sl_task_tokens(t->task, sl_train_sample(t, first), count, tok, tgt);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());
}

/* The layer loops, for every model and dtype alike: the hooks, the phases and the trace are the
 * same; only the kernel of a layer differs. */
static const void *layer_params(sl_train *t, const void *params, int l, int backward,
                                const sl_layer_hooks *h, size_t es)
{
    const void *lp = h && h->before ? h->before(t, l, backward) : NULL;
    return lp ? lp : (const char *)params + t->m->w_off[l] * es;
}

/* Layer l's kernel; with no output buffer, z alone (a recomputed segment's top layer). The
 * GPT's layers in every dtype through gpt_model.h. */
static void layer_forward(sl_train *t, sl_acts *a, int l, const void *lp)
{
    const sl_mlp *m = t->m;
    if (sl_mlp_is_gpt(m)) {
        sl_gpt_layer_forward(m, &a->g, l, lp);
        return;
    }
    sl_mlp_acts *f = t->dtype == SL_F32 ? &a->f : NULL;
    sl_mixed *mx = f ? NULL : &a->mx;
    const int in = m->dims[l], out = m->dims[l + 1];
    if (mx)
        sl_mixed_layer_forward(mx, l, lp);
    else if (f->x[l + 1])
        sl_mlp_layer_forward(m, l, f->batch, lp, f->x[l], f->z[l], f->x[l + 1]);
    else
        sl_linear_forward(t->be, f->batch, in, out, lp, (const float *)lp + (size_t)out * in, f->x[l], f->z[l]);
}

static void forward_layers(sl_train *t, sl_acts *a, const void *params, int l0, int l1,
                           const sl_layer_hooks *h)
{
    const int f32 = t->dtype == SL_F32;
    for (int l = l0; l < l1; l++) {
        const void *lp = layer_params(t, params, l, 0, h, sl_train_esize(t));
        double t0 = sl_now();
        layer_forward(t, a, l, lp);
        sl_k_sync(t->be);
        char name[40]; /* named by layer, counted from 1, so the trace reads as the model */
        snprintf(name, sizeof name, "forward L%d%s", l + 1, f32 ? "" : " (16-bit)");
        sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
        if (h && h->after) h->after(t, l, 0);
    }
}

/* A 16-bit layer's f32 dW, for every model: with one micro-batch (sum NULL) it goes to gw32 and
 * is rounded into lg at once; with several it goes to sum (the layer's block of the f32
 * accumulator) for the first micro-batch and to gw32, then added to sum, for the later ones, and
 * the sum is rounded into lg after the last. dw32_of says where the kernel writes; sum_micro
 * does the rest once it has. */
static float *dw32_of(sl_acts *a, float *sum) { return sum && a->first ? sum : a->gw32; }

static void sum_micro(sl_train *t, sl_acts *a, size_t size, void *lg, float *sum)
{
    if (sum && !a->first) sl_k_add(t->be, SL_F32, size, a->gw32, sum);
    if (sum && !a->last) return;
    /* the one rounding of the layer's gradient into t->dtype: what it loses is counted where the
     * technique reports it (.precision; on cuda a count is a reduction and a copy to the host) */
    const int count = t->tech->precision != NULL;
    sl_k_cast(t->be, size, sum ? sum : a->gw32, SL_F32, lg, t->dtype, count ? &t->cnt.wgrad : NULL);
    if (count) t->cnt.wgrad_n += size;
}

/* The MLP's 16-bit layer (sl_mixed writes its f32 dW, and rounds it into lg itself, counting:
 * with one micro-batch that is all, and its count is the run's). */
static void backward16(sl_train *t, sl_acts *a, int l, void *dy, void *dx, const void *lp, void *lg,
                       float *sum)
{
    const sl_cast_count c0 = a->mx.cnt.wgrad;
    const unsigned long long n0 = a->mx.cnt.wgrad_n;
    sl_mixed_layer_backward(&a->mx, l, dy, dx, lp, dw32_of(a, sum), lg);
    if (sum) {
        sum_micro(t, a, sl_mlp_layer_size(t->m, l), lg, sum);
        return;
    }
    const sl_cast_count *c = &a->mx.cnt.wgrad;
    t->cnt.wgrad.underflow += c->underflow - c0.underflow;
    t->cnt.wgrad.overflow += c->overflow - c0.overflow;
    t->cnt.wgrad.subnormal += c->subnormal - c0.subnormal;
    t->cnt.wgrad.zero += c->zero - c0.zero;
    t->cnt.wgrad_n += a->mx.cnt.wgrad_n - n0;
}

/* A GPT layer's backward: in f32 its gradient accumulated in place (lg is then f32, and
 * micro-batches add up there as the MLP's do); in 16 bits accumulated into a zeroed f32 block
 * (dw32_of) and rounded as sum_micro says. */
static void backward_gpt(sl_train *t, sl_acts *a, int l, void *dy, void *dx, const void *lp, void *lg,
                         float *sum)
{
    if (t->dtype == SL_F32) {
        sl_gpt_layer_backward(t->m, &a->g, l, dy, dx, lp, lg);
        return;
    }
    const size_t size = sl_mlp_layer_size(t->m, l);
    float *g32 = dw32_of(a, sum);
    sl_k_memset0(t->be, g32, size * sizeof(float));
    sl_gpt_layer_backward(t->m, &a->g, l, dy, dx, lp, g32);
    sum_micro(t, a, size, lg, sum);
}

/* A layer's backward kernel on the f32 store or in 16 bits (sum: see backward16). */
static void layer_backward(sl_train *t, sl_acts *a, int l, void *dy, void *dx, const void *lp, void *lg,
                           float *sum)
{
    if (sl_mlp_is_gpt(t->m))
        backward_gpt(t, a, l, dy, dx, lp, lg, sum);
    else if (t->dtype != SL_F32)
        backward16(t, a, l, dy, dx, lp, lg, sum);
    else
        sl_mlp_layer_backward(t->m, l, a->f.batch, lp, a->f.x[l], a->f.z[l], dy, lg, dx);
}

/* Where layer l's dL/dx goes (NULL for the first layer). */
static void *layer_dx(sl_train *t, sl_acts *a, int l)
{
    if (sl_mlp_is_gpt(t->m)) return sl_gpt_dx(&a->g, l);
    if (t->dtype != SL_F32) return sl_mixed_dx(&a->mx, l);
    return l > 0 ? a->f.dbuf[l & 1] : NULL;
}

static void *backward_layers(sl_train *t, sl_acts *a, const void *params, void *grads, void *dy, int l0,
                             int l1, const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    const size_t es = sl_train_esize(t);
    const int f32 = t->dtype == SL_F32;
    for (int l = l1 - 1; l >= l0; l--) {
        const void *lp = layer_params(t, params, l, 1, h, es);
        void *lg = h && h->grads ? h->grads(t, l) : NULL;
        if (!lg) lg = (char *)grads + m->w_off[l] * es;
        void *dx = layer_dx(t, a, l);
        double t0 = sl_now();
        layer_backward(t, a, l, dy, dx, lp, lg, f32 ? NULL : sl_f32_at(a->sum32, m->w_off[l]));
        sl_k_sync(t->be); /* the layer's gradients are final before a hook communicates them */
        char name[40];
        snprintf(name, sizeof name, "backward L%d%s", l + 1, f32 ? "" : " (16-bit)");
        sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
        if (h && h->after) h->after(t, l, 1);
        dy = dx;
    }
    return dy;
}

static float *dout_f32(const sl_train *t, sl_mlp_acts *a) { return a->dbuf[t->m->nlayers & 1]; }

double train_loss_f32(sl_train *t, sl_mlp_acts *a, const float *y)
{
    const sl_mlp *m = t->m;
    const int out = m->dims[m->nlayers];
    double t0 = sl_now();
    /* a loss scale (technique.precision) rides on the norm: a power of two, exact */
    const double scale = t->ms.sc.scale;
    double loss = sl_k_mse(t->be, (size_t)a->batch * out, a->x[m->nlayers], y, dout_f32(t, a),
                           (float)(sl_task_loss_norm(t->task, t->global_batch) * scale)) / scale;
    sl_train_span(t, SL_PHASE_COMPUTE, "loss", t0, sl_now());
    t->loss += loss;
    return loss;
}

/* The model in t->dtype (sl_acts) ------------------------------------------------------------ */

void sl_acts_load(sl_train *t, sl_acts *a, int first, int count)
{
    if (count > a->rows) SL_FATAL("%d samples on activations sized for %d", count, a->rows);
    if (sl_mlp_is_gpt(t->m)) { /* the tokens; the loss's factor and scale for the head */
        a->g.B = count;
        a->g.norm = sl_task_loss_norm(t->task, t->global_batch);
        a->g.scale = (float)t->ms.sc.scale; /* 1 without a scaler */
        a->g.seq0 = sl_train_sample(t, first);
        sl_train_load_tokens(t, first, count, a->g.tok, a->g.tgt);
        return;
    }
    a->f.batch = a->mx.batch = count;
    sl_train_load(t, first, count, t->dtype == SL_F32 ? a->f.x[0] : a->x, a->y); /* f32: the layers' input */
    if (t->dtype == SL_F32) return; /* the input is the layers' */
    double t0 = sl_now();
    sl_mixed_input(&a->mx, a->x);
    sl_train_compute_span(t, "input (16-bit)", t0);
}

void sl_acts_forward(sl_train *t, sl_acts *a, const void *params, int l0, int l1,
                     const sl_layer_hooks *h)
{
    forward_layers(t, a, params, l0, l1, h);
}

void sl_acts_layer_forward(sl_train *t, sl_acts *a, int l, const void *lp) { layer_forward(t, a, l, lp); }

double sl_acts_loss(sl_train *t, sl_acts *a)
{
    if (sl_mlp_is_gpt(t->m)) { /* computed by the head's forward, which needs its weights */
        t->loss += a->g.loss;
        return a->g.loss;
    }
    if (t->dtype == SL_F32) return train_loss_f32(t, &a->f, a->y);
    double t0 = sl_now();
    /* normalised over the global batch: micro-batches and ranks sum to its gradient */
    double loss = sl_mixed_loss(&a->mx, a->y, sl_task_loss_norm(t->task, t->global_batch), (float)t->ms.sc.scale);
    sl_train_compute_span(t, "loss", t0);
    t->loss += loss;
    return loss;
}

void *sl_acts_backward_range(sl_train *t, sl_acts *a, const void *params, void *grads, void *dy,
                             int l0, int l1, const sl_layer_hooks *h)
{
    return backward_layers(t, a, params, grads, dy, l0, l1, h);
}

void sl_acts_backward(sl_train *t, sl_acts *a, const void *params, void *grads,
                      const sl_layer_hooks *h)
{
    void *dout = sl_mlp_is_gpt(t->m)     ? sl_gpt_dout(&a->g, t->m)
                 : t->dtype == SL_F32 ? (void *)dout_f32(t, &a->f)
                                      : sl_mixed_dout(&a->mx);
    sl_acts_backward_range(t, a, params, grads, dout, 0, t->m->nlayers, h);
}

void sl_acts_layer_backward(sl_train *t, sl_acts *a, int l, void *dy, void *dx, const void *lp, void *lg,
                            float *sum)
{
    layer_backward(t, a, l, dy, dx, lp, lg, sum);
}

void sl_train_optimize(sl_train *t, float *params, const float *grads, float *state, size_t off,
                       size_t count)
{
    double t0 = sl_now();
    sl_optim so = sl_optim_for_step(&t->optim, t->step);
    sl_optim_step(t->be, &so, count, params + off, grads + off, state);
    sl_train_compute_span(t, "optimizer", t0);
}
