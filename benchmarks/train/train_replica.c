/* train_replica.c — a full replica of the model on one rank, as data parallelism (ddp, ZeRO
 * stage 0, a pipeline stage's data-parallel copy) holds it, and the forward-loss-backward of
 * some of a step's samples on it. */
#include "sl_train.h"

void sl_replica_alloc(sl_train *t, int rows, sl_replica *r)
{
    const sl_mlp *m = t->m;
    const size_t n = m->nparams;
    r->rows = rows > 0 ? rows : 1;
    r->params = sl_k_malloc(t->be, SL_MEM_PARAMS, n * sizeof(float));
    r->grads = sl_k_malloc(t->be, SL_MEM_GRADS, n * sizeof(float));
    /* + 1: SGD without momentum has no state, and a zero-byte allocation is not a buffer */
    r->optim = sl_k_malloc(t->be, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * n * sizeof(float) + 1);
    r->target = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)r->rows * m->dims[m->nlayers] * sizeof(float));
    sl_mlp_acts_alloc(m, r->rows, &r->acts);
    sl_mlp_init_params(m, (uint64_t)sl_train_opt.seed, 0, n, r->params);
}

void sl_replica_free(sl_train *t, sl_replica *r)
{
    sl_mlp_acts_free(t->m, &r->acts);
    sl_k_free(t->be, r->params);
    sl_k_free(t->be, r->grads);
    sl_k_free(t->be, r->optim);
    sl_k_free(t->be, r->target);
}

void sl_replica_forward_backward(sl_train *t, sl_replica *r, int first, int count,
                                 const sl_layer_hooks *h)
{
    const int L = t->m->nlayers;
    if (count > r->rows) SL_FATAL("%d samples on a replica sized for %d", count, r->rows);
    r->acts.batch = count;
    sl_train_load(t, first, count, r->acts.x[0], r->target);
    sl_train_forward(t, &r->acts, r->params, 0, L, h);
    sl_train_loss(t, &r->acts, r->target);
    sl_train_backward(t, &r->acts, r->params, r->grads, sl_train_dout(t, &r->acts), 0, L, h);
}
