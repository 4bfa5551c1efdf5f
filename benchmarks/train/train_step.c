/* train_step.c — the pieces of a training step, each recording its phase: the batch, forward
 * and backward over a layer range with per-layer hooks (pipeline stages run a range, ZeRO-3
 * gathers a layer's parameters before it, checkpointing recomputes a range, vDNN prefetches
 * the next layer's input), the loss and the optimizer. */
#include "sl_env_check.h"
#include "sl_train.h"

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

void sl_train_load(sl_train *t, int first, int count, float *x, float *y)
{
    double t0 = sl_now();
    sl_task_batch(t->task, (uint64_t)t->step * (uint64_t)t->global_batch + (uint64_t)first, count, x, y);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());
}

static const float *layer_params(sl_train *t, const float *params, int l, int backward,
                                 const sl_layer_hooks *h)
{
    const float *lp = h && h->before ? h->before(t, l, backward) : NULL;
    return lp ? lp : params + t->m->w_off[l];
}

void sl_train_forward(sl_train *t, sl_mlp_acts *a, const float *params, int l0, int l1,
                      const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    for (int l = l0; l < l1; l++) {
        const float *lp = layer_params(t, params, l, 0, h);
        double t0 = sl_now();
        sl_mlp_layer_forward(m, l, a->batch, lp, a->x[l], a->z[l], a->x[l + 1]);
        sl_k_sync(t->be);
        char name[32]; /* named by layer, counted from 1, so the trace reads as the model */
        snprintf(name, sizeof name, "forward L%d", l + 1);
        sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
        if (h && h->after) h->after(t, l, 0);
    }
}

float *sl_train_dout(const sl_train *t, sl_mlp_acts *a) { return a->dbuf[t->m->nlayers & 1]; }

double sl_train_loss(sl_train *t, sl_mlp_acts *a, const float *y)
{
    const sl_mlp *m = t->m;
    const int out = m->dims[m->nlayers];
    double t0 = sl_now();
    double loss = sl_k_mse(t->be, (size_t)a->batch * out, a->x[m->nlayers], y, sl_train_dout(t, a),
                           sl_task_loss_norm(t->task, t->global_batch));
    sl_train_span(t, SL_PHASE_COMPUTE, "loss", t0, sl_now());
    t->loss += loss;
    return loss;
}

float *sl_train_backward(sl_train *t, sl_mlp_acts *a, const float *params, float *grads,
                         float *dy, int l0, int l1, const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    for (int l = l1 - 1; l >= l0; l--) {
        const float *lp = layer_params(t, params, l, 1, h);
        float *lg = h && h->grads ? h->grads(t, l) : NULL;
        if (!lg) lg = grads + m->w_off[l];
        float *dx = l > 0 ? a->dbuf[l & 1] : NULL;
        double t0 = sl_now();
        sl_mlp_layer_backward(m, l, a->batch, lp, a->x[l], a->z[l], dy, lg, dx);
        sl_k_sync(t->be); /* the layer's gradients are final before a hook communicates them */
        char name[32];
        snprintf(name, sizeof name, "backward L%d", l + 1);
        sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
        if (h && h->after) h->after(t, l, 1);
        dy = dx;
    }
    return dy;
}

void sl_train_optimize(sl_train *t, float *params, const float *grads, float *state, size_t off,
                       size_t count)
{
    double t0 = sl_now();
    sl_optim so = sl_optim_for_step(&t->optim, t->step);
    sl_optim_step(t->be, &so, count, params + off, grads + off, state);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, "optimizer", t0, sl_now());
}
