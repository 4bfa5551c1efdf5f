/* train_replica.c — a full replica of the model on one rank, as data parallelism (ddp, ZeRO
 * stages 0-1, a parameter server's workers) holds it, in the run's dtype, and the
 * forward-loss-backward of a rank's samples on it over micro-batches.
 *
 * Where micro-batches' gradients are summed: in f32. In 16 bits that is what mixed-precision
 * training with an f32 master does in practice: under PyTorch autocast the parameters, hence
 * .grad, are f32, and accumulation under DDP's no_sync() adds into f32 (fp16_compress_hook
 * rounds to 16 bits only for the all-reduce); Megatron-LM keeps an f32 main_grad for its 16-bit
 * parameters, DeepSpeed's bf16 optimizer sums in f32 too. Summing in 16 bits would round the
 * running sum K times: in bf16 a micro-batch's contribution below 2^-9 of the sum so far
 * vanishes. Summed in f32 (in the replica's f32 twin, which receives the unscaled gradient
 * later anyway) it is rounded once into 16 bits after the last micro-batch, as the full batch's
 * gradient is in the serial reference. One loss scale for every micro-batch of a step; an inf
 * or NaN of any micro-batch survives the sum, so the one check after it sees it. */
#include <string.h>

#include "sl_train.h"

static void replica_init(sl_train *t, int rows, sl_replica *r, int placed)
{
    const sl_mlp *m = t->m;
    const size_t n = t->nparams, es = sl_train_esize(t);
    void (*own)(const sl_train *, float *) = t->tech->init_params;
    r->params = sl_k_malloc(t->be, SL_MEM_PARAMS, n * es);
    r->grads = sl_k_malloc(t->be, SL_MEM_GRADS, n * es);
    r->master = t->master ? sl_train_twin(t, SL_MEM_PARAMS, n) : NULL;
    r->g32 = sl_train_twin(t, SL_MEM_GRADS, n);
    /* + 1: SGD without momentum has no state, and a zero-byte allocation is not a buffer */
    r->optim = sl_k_malloc(t->be, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * n * sizeof(float) + 1);
    if (own) memset(&r->acts, 0, sizeof r->acts); /* the technique's own activations */
    else if (placed) sl_acts_place(t, rows, &r->acts);
    else sl_acts_alloc(t, rows, &r->acts);
    /* the weights from the seed, in f32: the master copy, the f32 weights, or (no master copy)
     * the workspace they are rounded from */
    float *w32 = r->master ? r->master : t->dtype == SL_F32 ? r->params : sl_train_wide(t);
    if (own) own(t, w32);
    else sl_mlp_init_params(m, (uint64_t)sl_train_opt.seed, 0, n, w32);
    if (w32 != r->params) sl_k_cast(t->be, n, w32, SL_F32, r->params, t->dtype, NULL);
}

void sl_replica_alloc(sl_train *t, int rows, sl_replica *r) { replica_init(t, rows, r, 0); }
void sl_replica_place(sl_train *t, int rows, sl_replica *r) { replica_init(t, rows, r, 1); }

void sl_replica_free(sl_train *t, sl_replica *r)
{
    if (!t->tech->init_params) sl_acts_free(t, &r->acts);
    void *bufs[] = {r->params, r->grads, r->master, r->g32, r->optim};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
}

void sl_replica_forward_backward(sl_train *t, sl_replica *r, int first, int count,
                                 const sl_layer_hooks *h)
{
    sl_acts_load(t, &r->acts, first, count);
    sl_acts_forward(t, &r->acts, r->params, 0, t->m->nlayers, h);
    sl_acts_loss(t, &r->acts);
    sl_acts_backward(t, &r->acts, r->params, r->grads, h);
}

void sl_replica_gradients(sl_train *t, sl_replica *r, int micro, const sl_layer_hooks *h)
{
    const sl_mlp *m = t->m;
    sl_acts *a = &r->acts;
    sl_k_memset0(t->be, r->grads, m->nparams * sl_train_esize(t));
    a->sum32 = micro > 1 ? r->g32 : NULL;
    int done = 0;
    for (int k = 0; k < micro; k++) {
        size_t lo, hi;
        sl_share((size_t)(t->hi - t->lo), micro, k, &lo, &hi);
        if (hi == lo) continue;
        a->first = !done++;
        a->last = k == micro - 1;
        sl_replica_forward_backward(t, r, t->lo + (int)lo, (int)(hi - lo), a->last ? h : NULL);
    }
    a->sum32 = NULL;
}

void sl_replica_update(sl_train *t, sl_replica *r, size_t off, size_t count, float *state)
{
    const float *g = sl_train_unscale(t, sl_train_at(t, r->grads, off), sl_f32_at(r->g32, off), count);
    if (sl_train_decide(t)) sl_train_apply(t, sl_train_at(t, r->params, off), sl_f32_at(r->master, off), g, state, count);
}

void sl_replica_memory_model(const sl_train *t, int rows, double bytes[SL_MEM_NCATS])
{
    const sl_mlp_bytes b = sl_replica_memory(t, rows);
    bytes[SL_MEM_PARAMS] = (double)b.params;
    bytes[SL_MEM_GRADS] = (double)b.grads;
    bytes[SL_MEM_OPTIM] = (double)b.optim;
    bytes[SL_MEM_ACTIV] = (double)b.activ;
}

sl_mlp_bytes sl_replica_memory(const sl_train *t, int rows)
{
    sl_mlp_bytes b = sl_mlp_memory(t->m, rows > 0 ? rows : 1, &t->optim);
    const double n = (double)t->m->nparams, es = (double)sl_train_esize(t);
    const size_t twin = t->dtype == SL_F32 ? 0 : (size_t)(4 * n); /* the f32 twins */
    b.params = (size_t)(n * es) + (t->master ? twin : 0);
    b.grads = (size_t)(n * es) + twin;
    b.activ = sl_acts_bytes(t, rows);
    return b;
}

void sl_replica_step(sl_train *t, sl_replica *r)
{
    const size_t n = t->nparams;
    if (t->size > 1) {
        const double t0 = sl_now();
        sl_train_coll_ok(sl_coll_allreduce(t->comm, r->grads, r->grads, n, t->dtype, SL_OP_SUM), "allreduce");
        sl_train_span(t, SL_PHASE_COMM, "allreduce", t0, sl_now());
    }
    sl_replica_update(t, r, 0, n, r->optim);
}

const float *sl_replica_weights(const sl_train *t, const sl_replica *r, size_t *first, size_t *count)
{
    if (first) *first = 0;
    if (count) *count = t->nparams;
    return r->master ? r->master : r->params;
}
