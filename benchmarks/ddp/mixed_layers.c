/* mixed_layers.c — ddp -d f16|bf16, the bucketed and accum variants: the 16-bit replica of
 * mixed.c stepped a layer at a time.
 *
 *   bucketed  one micro-batch; after each layer's backward its 16-bit gradient is final, and
 *             ddp.c's bucket hook starts the all-reduce of a bucket whose layers are all done
 *             (2-byte elements: a bucket of --bucket-mb holds twice the parameters of f32's, as
 *             PyTorch DDP sizes buckets in bytes of the gradient's type)
 *   accum     K micro-batches, their gradients summed, one all-reduce of 16-bit gradients after
 *             the last, one loss-scale decision per step
 * Then, once per step after every bucket: unscale in f32, the overflow flag OR-ed over the ranks
 * (sl_train_overflow_any), and the optimizer on the f32 master or a skip (mixed.c says why
 * the flag is agreed and why the sum is done in the 16-bit type on the wire).
 *
 * Where the micro-batches' gradients are summed: in f32. That is what mixed-precision training
 * with an f32 master does in practice: under PyTorch autocast the parameters, hence .grad, are
 * f32, and accumulation under DDP's no_sync() adds into f32 (fp16_compress_hook rounds to 16
 * bits only for the all-reduce); Megatron-LM keeps an f32 main_grad for its 16-bit parameters
 * (--accumulate-allreduce-grads-in-fp32, forced for bf16), DeepSpeed's bf16 optimizer sums in
 * f32 too. Summing in 16 bits would round the running sum K times: in bf16 (8 bits) a
 * micro-batch's contribution below 2^-9 of the sum so far vanishes, and the accumulated
 * gradient drifts from the full batch's, which is what the step is meant to compute. Summed in
 * f32 it is rounded once into 16 bits after the last micro-batch, as the full batch's gradient
 * is in the serial reference. The cost is small here: the sum lives in the replica's f32
 * gradient (mx.g32, which holds the unscaled gradients later anyway), plus one layer's f32
 * workspace; the wire still carries 2 bytes an element.
 *
 * One scale for every micro-batch of a step (GradScaler's scale changes only in update()); an
 * inf or NaN of any micro-batch survives the f32 sum, its rounding and the all-reduce, so the
 * single check after the all-reduce sees it.
 */
#include "mixed_layers.h"

/* Element off of a 16-bit (or f32) array of type dt. */
static void *elem(void *p, size_t off, sl_dtype dt) { return (char *)p + off * sl_dtype_size(dt); }

float *ddp_mixed_layer_workspace(sl_train *t)
{
    size_t biggest = 0;
    for (int l = 0; l < t->m->nlayers; l++)
        if (sl_mlp_layer_size(t->m, l) > biggest) biggest = sl_mlp_layer_size(t->m, l);
    return sl_k_malloc(t->be, SL_MEM_OTHER, biggest * sizeof(float));
}

/* One micro-batch's backward, layer by layer: first (k = 0) writes the f32 sum, later ones add
 * to it; last rounds the sum into 16 bits and hands each layer to the hook. */
static void backward(sl_train *t, ddp_mixed *d, float *gw32, int first, int last, const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    sl_mixed *mx = &d->mx;
    void *dy = sl_mixed_dout(mx);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        const size_t size = sl_mlp_layer_size(m, l);
        float *sum = mx->g32 + m->w_off[l];
        void *g16 = elem(mx->g16, m->w_off[l], t->dtype), *dx = sl_mixed_dx(mx, l);
        double t0 = sl_now();
        /* the layer also rounds this micro-batch's gradient into g16: overwritten below */
        sl_mixed_layer_backward(mx, l, dy, dx, elem(mx->w16, m->w_off[l], t->dtype), first ? sum : gw32, g16);
        if (!first) sl_k_add(t->be, SL_F32, size, gw32, sum);
        if (last && !first) sl_k_cast(t->be, size, sum, SL_F32, g16, t->dtype, NULL);
        sl_k_sync(t->be); /* the layer's gradients are final before a hook communicates them */
        char name[40];
        snprintf(name, sizeof name, "backward L%d (16-bit)", l + 1);
        sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
        if (last && h && h->after) h->after(t, l, 1);
        dy = dx;
    }
}

void ddp_mixed_backward(sl_train *t, ddp_mixed *d, int micro, float *gw32, const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    sl_mixed *mx = &d->mx;
    const int rows = mx->batch; /* what the activations were allocated for */
    const float scale = (float)d->ms.sc.scale;
    if (micro > 1 && !gw32) SL_FATAL("ddp_mixed_backward: %d micro-batches need a workspace", micro);
    int done = 0;
    for (int k = 0; k < micro; k++) {
        size_t a, b;
        sl_share((size_t)(t->hi - t->lo), micro, k, &a, &b);
        if (b == a) continue;
        if ((int)(b - a) > rows) SL_FATAL("%d samples on a replica sized for %d", (int)(b - a), rows);
        const int last = k == micro - 1;
        mx->batch = (int)(b - a);
        sl_train_load(t, t->lo + (int)a, mx->batch, d->x, d->y);
        double t0 = sl_now();
        sl_mixed_input(mx, d->x);
        for (int l = 0; l < m->nlayers; l++) {
            sl_mixed_layer_forward(mx, l, elem(mx->w16, m->w_off[l], t->dtype));
            sl_k_sync(t->be);
            char name[40];
            snprintf(name, sizeof name, "forward L%d (16-bit)", l + 1);
            sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
            if (last && h && h->after) h->after(t, l, 0);
            t0 = sl_now();
        }
        /* normalised over the global batch: micro-batches and ranks sum to its gradient */
        t->loss += sl_mixed_loss(mx, d->y, sl_task_loss_norm(t->task, t->global_batch), scale);
        sl_train_span(t, SL_PHASE_COMPUTE, "loss", t0, sl_now());
        backward(t, d, gw32, !done, last, h);
        done++;
    }
    mx->batch = rows;
    if (!done) sl_k_memset0(t->be, mx->g16, m->nparams * sl_dtype_size(t->dtype)); /* no samples here */
}
