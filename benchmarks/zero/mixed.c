/* mixed.c — zero --precision mixed: ZeRO with the paper's mixed-precision Adam (Rajbhandari et
 * al., section 3.1): fp16 parameters (2Ψ) and gradients (2Ψ) for forward and backward, and
 * K = 12 bytes of optimizer states per parameter — the fp32 master weights, Adam's momentum and
 * variance (4 + 4 + 4; with SGD's momentum K = 8) — sharded exactly as zero.c shards f32:
 *
 *   stage0  2Ψ + 2Ψ + KΨ      stage1  2Ψ + 2Ψ + KΨ/Nd    stage2  2Ψ + (2 + K)Ψ/Nd
 *   stage3  (2 + 2 + K)Ψ/Nd   (Ψ/Nd counted at the padded shard size S, as zero.c does)
 *
 * The layers compute through kernels/mlp_mixed.h one at a time (f16 GEMM operands, f32
 * accumulation, f16 activations), with the weights and gradients placed by the stage:
 *   stage0  the f16 gradient is all-reduced; every rank steps every master weight
 *   stage1  each layer's f16 gradient is reduce-scattered; a rank steps its slice of the master
 *           weights and all-gathers the stepped slices, cast to f16, into its replica
 *   stage2  as stage 1, but each layer's gradient is reduce-scattered into the f16 gradient
 *           shard right after its backward, so the full gradient is never held
 *   stage3  the f16 parameter shard is all it holds of the weights: each layer is all-gathered
 *           (in f16) before its forward and again before its backward
 * Every collective moves f16 (2 bytes an element: half of zero's f32 bytes, the model says
 * so); sums widen each pair to f32 and round back at each hop (ddp/mixed.c says why not f32).
 * Unlike zero.c's f32 path the collectives here are blocking, one layer at a time: nothing is
 * overlapped (--bucket-mb and --prefetch do not apply), the memory is the same.
 *
 * Loss scaling: dynamic (GradScaler's defaults). After stage 1 no rank holds the whole
 * gradient, so no rank alone can tell whether the step overflowed: each checks the elements it
 * will step and the flags are OR-ed over the ranks (sl_train_overflow_any: 4 bytes, outside
 * the counted collectives); a step is applied or skipped everywhere. The checks read the f16
 * gradients twice (unscaled in f32 one layer at a time, for the flag, then for the
 * optimizer), so that no f32 copy of the gradient is held beyond one layer.
 *
 * The check: the master weights (gathered for stages 1-3) against one process training the
 * whole batch in f16 with the same scaler (sl_train_serial_mixed), within SL_TRAIN_TOL_MIXED_*
 * (sl_train.h); stage 0's replicas bit-identical.
 */
#include <string.h>

#include "mixed.h"

enum { ES = 2 }; /* bytes of an f16 element */

static void *at16(void *p, size_t off) { return (char *)p + off * ES; }

/* Elements of layer l that rank r steps, from element *first of the layer's block. */
static size_t own_elems(const sl_train *t, const zero_part *p, int l, size_t *first)
{
    const size_t size = sl_mlp_layer_size(t->m, l);
    if (p->stage == 0) {
        *first = 0;
        return size;
    }
    *first = (size_t)p->r * p->c[l];
    return *first >= size ? 0 : size - *first < p->c[l] ? size - *first : p->c[l];
}

/* Where layer l's stepped elements live in the optimizer states: the replica's flat offset
 * (stage 0) or the shard's. */
static size_t state_off(const sl_train *t, const zero_part *p, int l)
{
    return p->stage == 0 ? t->m->w_off[l] : p->soff[l];
}

/* The f16 gradients of the elements rank r steps in layer l. */
static void *own_grads(const sl_train *t, zero_mixed *d, int l)
{
    const zero_part *p = &d->p;
    if (p->stage >= 2) return at16(d->g16, p->soff[l]);
    return at16(d->g16, t->m->w_off[l] + (p->stage == 1 ? (size_t)p->r * p->c[l] : 0));
}

static void coll(sl_train *t, int rc, const char *what, double t0)
{
    sl_train_coll_ok(rc, what);
    sl_train_blocking(t, what, t0);
}

static void *alloc_held(sl_train *t, sl_mem_cat cat, size_t bytes, double *counter)
{
    *counter += (double)bytes;
    return sl_k_malloc(t->be, cat, bytes);
}

void zero_mixed_setup(sl_train *t, zero_mixed *d, zero_part p)
{
    const sl_mlp *m = t->m;
    const int L = m->nlayers;
    const size_t n = m->nparams, S = p.soff[L], mine = p.stage ? S : n;
    memset(d, 0, sizeof *d);
    d->p = p;
    const int rows = t->hi - t->lo > 0 ? t->hi - t->lo : 1;
    sl_mixed_init_layers(&d->mx, m, t->dtype, rows);
    sl_train_scaler(t->dtype, &d->sc);
    d->w16 = alloc_held(t, SL_MEM_PARAMS, (p.stage == 3 ? S : n) * ES, &d->held);
    d->g16 = alloc_held(t, SL_MEM_GRADS, (p.stage >= 2 ? S : n) * ES, &d->held);
    d->opt = alloc_held(t, SL_MEM_OPTIM, (size_t)(1 + p.K) * mine * sizeof(float), &d->held);
    size_t widest = 0, biggest = 0; /* the largest padded layer, the largest layer */
    for (int l = 0; l < L; l++) {
        widest = (size_t)p.nd * p.c[l] > widest ? (size_t)p.nd * p.c[l] : widest;
        biggest = sl_mlp_layer_size(m, l) > biggest ? sl_mlp_layer_size(m, l) : biggest;
    }
    if (p.stage >= 1) d->layer16 = alloc_held(t, SL_MEM_COMM, widest * ES, &d->mem_comm);
    if (p.stage == 3) d->gather16 = alloc_held(t, SL_MEM_COMM, widest * ES, &d->mem_comm);
    d->gw32 = sl_k_malloc(t->be, SL_MEM_OTHER, biggest * sizeof(float));
    d->x = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[0] * sizeof(float));
    d->y = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[L] * sizeof(float));

    /* The master weights from the seed (this rank's slices, padding zero), their f16 copy. */
    const uint64_t seed = (uint64_t)sl_train_opt.seed;
    sl_k_memset0(t->be, d->opt, (size_t)(1 + p.K) * mine * sizeof(float));
    if (p.stage == 0) {
        sl_mlp_init_params(m, seed, 0, n, d->opt);
        sl_k_cast(t->be, n, d->opt, SL_F32, d->w16, t->dtype, NULL);
        return;
    }
    for (int l = 0; l < L; l++) {
        size_t first, own = own_elems(t, &d->p, l, &first);
        if (own) sl_mlp_init_params(m, seed, m->w_off[l] + first, own, d->opt + p.soff[l]);
    }
    if (p.stage == 3) {
        sl_k_cast(t->be, S, d->opt, SL_F32, d->w16, t->dtype, NULL);
        return;
    }
    float *full = sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float)); /* the replica's start */
    sl_mlp_init_params(m, seed, 0, n, full);
    sl_k_cast(t->be, n, full, SL_F32, d->w16, t->dtype, NULL);
    sl_k_sync(t->be);
    sl_k_free(t->be, full);
}

void zero_mixed_free(sl_train *t, zero_mixed *d)
{
    sl_mixed_free(&d->mx);
    void *bufs[] = {d->w16, d->g16, d->opt, d->layer16, d->gather16, d->gw32, d->x, d->y};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
}

/* Layer l's f16 parameters for its forward or backward: the replica's block, or (stage 3) the
 * block all-gathered from the shards now. */
static const void *layer_params(sl_train *t, zero_mixed *d, int l)
{
    if (d->p.stage < 3) return at16(d->w16, t->m->w_off[l]);
    const double t0 = sl_now();
    coll(t, sl_coll_allgather(t->comm, at16(d->w16, d->p.soff[l]), d->gather16, d->p.c[l], t->dtype),
         "all-gather layer (f16)", t0);
    return d->gather16;
}

/* Zeroes layer16 beyond layer l's size (the padding that reduce-scatters and gathers carry). */
static void zero_padding(sl_train *t, zero_mixed *d, int l)
{
    const size_t size = sl_mlp_layer_size(t->m, l), padded = (size_t)d->p.nd * d->p.c[l];
    if (padded > size) sl_k_memset0(t->be, at16(d->layer16, size), (padded - size) * ES);
}

/* Forward, loss and backward on the rank's samples; the gradients, reduced, where the stage
 * keeps them. */
static void forward_backward(sl_train *t, zero_mixed *d, float scale)
{
    const sl_mlp *m = t->m;
    const int L = m->nlayers;
    const zero_part *p = &d->p;
    double c0 = sl_now();
    sl_mixed_input(&d->mx, d->x);
    for (int l = 0; l < L; l++) {
        const void *wl = layer_params(t, d, l);
        c0 = sl_now();
        sl_mixed_layer_forward(&d->mx, l, wl);
        sl_k_sync(t->be);
        sl_train_span(t, SL_PHASE_COMPUTE, "forward (f16)", c0, sl_now());
    }
    c0 = sl_now();
    t->loss += sl_mixed_loss(&d->mx, d->y, sl_task_loss_norm(t->task, t->global_batch), scale);
    void *dy = sl_mixed_dout(&d->mx);
    for (int l = L - 1; l >= 0; l--) {
        const void *wl = layer_params(t, d, l);
        void *dx = sl_mixed_dx(&d->mx, l);
        /* stages 2-3: into the staging buffer, reduce-scattered into the shard at once */
        void *g = p->stage >= 2 ? d->layer16 : at16(d->g16, m->w_off[l]);
        c0 = sl_now();
        sl_mixed_layer_backward(&d->mx, l, dy, dx, wl, d->gw32, g);
        sl_k_sync(t->be);
        sl_train_span(t, SL_PHASE_COMPUTE, "backward (f16)", c0, sl_now());
        dy = dx;
        if (p->stage >= 2) {
            zero_padding(t, d, l);
            c0 = sl_now();
            coll(t, sl_coll_reduce_scatter(t->comm, d->layer16, at16(d->g16, p->soff[l]), p->c[l], t->dtype, SL_OP_SUM),
                 "reduce-scatter layer gradient (f16)", c0);
        }
    }
    c0 = sl_now();
    if (p->stage == 0) {
        coll(t, sl_coll_allreduce(t->comm, d->g16, d->g16, m->nparams, t->dtype, SL_OP_SUM),
             "all-reduce gradient (f16)", c0);
    } else if (p->stage == 1) { /* layer by layer: reduce in place, keep this rank's slice */
        for (int l = 0; l < L; l++) {
            const size_t size = sl_mlp_layer_size(m, l);
            void *own = at16(d->layer16, (size_t)p->r * p->c[l]);
            sl_k_memcpy(t->be, d->layer16, at16(d->g16, m->w_off[l]), size * ES, SL_K_D2D);
            zero_padding(t, d, l);
            c0 = sl_now();
            coll(t, sl_coll_reduce_scatter(t->comm, d->layer16, own, p->c[l], t->dtype, SL_OP_SUM),
                 "reduce-scatter layer gradient (f16)", c0);
            size_t first, n = own_elems(t, p, l, &first);
            if (n) sl_k_memcpy(t->be, own_grads(t, d, l), own, n * ES, SL_K_D2D);
        }
    }
}

/* Layer l's own gradient elements unscaled into gw32; returns how many are inf or NaN. */
static size_t unscale(sl_train *t, zero_mixed *d, int l, size_t own, float scale)
{
    sl_k_cast(t->be, own, own_grads(t, d, l), t->dtype, d->gw32, SL_F32, NULL);
    return sl_k_scale_check(t->be, own, d->gw32, 1.0f / scale);
}

/* The optimizer on this rank's elements of every layer, and the f16 weights refreshed. */
static void apply(sl_train *t, zero_mixed *d, float scale)
{
    const sl_mlp *m = t->m;
    const zero_part *p = &d->p;
    const size_t mine = p->stage ? p->soff[m->nlayers] : m->nparams;
    float *master = d->opt, *state = d->opt + mine;
    const sl_optim o = sl_optim_for_step(&t->optim, d->applied++);
    for (int l = 0; l < m->nlayers; l++) {
        size_t first, own = own_elems(t, p, l, &first);
        const size_t off = state_off(t, p, l);
        double c0 = sl_now();
        if (own) {
            unscale(t, d, l, own, scale);
            sl_optim_step(t->be, &o, own, master + off, d->gw32, state + (size_t)p->K * off);
        }
        if (p->stage == 0) {
            sl_k_cast(t->be, own, master + off, SL_F32, at16(d->w16, off), t->dtype, NULL);
        } else if (p->stage == 3) {
            if (own) sl_k_cast(t->be, own, master + off, SL_F32, at16(d->w16, off), t->dtype, NULL);
        } else { /* every rank's stepped slice, in f16, into every replica */
            sl_k_memset0(t->be, d->layer16, (size_t)p->nd * p->c[l] * ES);
            if (own) sl_k_cast(t->be, own, master + off, SL_F32, at16(d->layer16, first), t->dtype, NULL);
            sl_k_sync(t->be);
            sl_train_span(t, SL_PHASE_COMPUTE, "optimizer (f32 master)", c0, sl_now());
            c0 = sl_now();
            coll(t, sl_coll_allgather(t->comm, at16(d->layer16, first), d->layer16, p->c[l], t->dtype),
                 "all-gather stepped parameters (f16)", c0);
            sl_k_memcpy(t->be, at16(d->w16, m->w_off[l]), d->layer16, sl_mlp_layer_size(m, l) * ES, SL_K_D2D);
            continue;
        }
        sl_k_sync(t->be);
        sl_train_span(t, SL_PHASE_COMPUTE, "optimizer (f32 master)", c0, sl_now());
    }
}

void zero_mixed_step(sl_train *t, zero_mixed *d)
{
    const float scale = (float)d->sc.scale;
    sl_train_load(t, t->lo, t->hi - t->lo, d->x, d->y);
    forward_backward(t, d, scale);

    /* Did any rank's elements overflow? Each looks at what it will step. */
    double c0 = sl_now();
    size_t bad = 0;
    for (int l = 0; l < t->m->nlayers; l++) {
        size_t first, own = own_elems(t, &d->p, l, &first);
        if (own) bad += unscale(t, d, l, own, scale);
    }
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, "unscale, inf/NaN check", c0, sl_now());
    if (sl_loss_scaler_update(&d->sc, sl_train_overflow_any(t, bad > 0, &d->overflow_steps))) apply(t, d, scale);
}

void zero_mixed_gather(sl_train *t, zero_mixed *d, float *full)
{
    const sl_mlp *m = t->m;
    const zero_part *p = &d->p;
    size_t widest = 0;
    for (int l = 0; l < m->nlayers; l++) widest = (size_t)p->nd * p->c[l] > widest ? (size_t)p->nd * p->c[l] : widest;
    float *buf = sl_k_malloc(t->be, SL_MEM_OTHER, widest * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        sl_train_coll_ok(sl_coll_allgather(t->comm, d->opt + p->soff[l], buf, p->c[l], SL_F32),
                         "allgather (master weights for the check)");
        if (t->rank == 0)
            sl_k_memcpy(t->be, full + m->w_off[l], buf, sl_mlp_layer_size(m, l) * sizeof(float), SL_K_D2H);
    }
    sl_k_free(t->be, buf);
}
