/* train_ref.c — serial reference training and weight comparison (see train_ref.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "train_ref.h"

sl_optim sl_optim_for_step(const sl_optim *o, int step)
{
    sl_optim s = *o;
    s.adamw.step = step + 1;
    return s;
}

void sl_train_serial(const sl_mlp *m, sl_task *task, const sl_optim *o, int batch, int steps,
                     uint64_t seed, float *params, double *losses)
{
    const sl_backend be = m->be;
    const int out = m->dims[m->nlayers];
    float *grads = sl_k_malloc(be, SL_MEM_GRADS, m->nparams * sizeof(float));
    float *state = sl_k_malloc(be, SL_MEM_OPTIM,
                               (size_t)sl_optim_state_per_param(o) * m->nparams * sizeof(float) + 1);
    float *target = sl_k_malloc(be, SL_MEM_DATA, (size_t)batch * out * sizeof(float));
    sl_mlp_acts a;
    sl_mlp_acts_alloc(m, batch, &a);
    sl_mlp_init_params(m, seed, 0, m->nparams, params);

    for (int s = 0; s < steps; s++) {
        sl_task_batch(task, (uint64_t)s * (uint64_t)batch, batch, a.x[0], target);
        sl_k_memset0(be, grads, m->nparams * sizeof(float));
        sl_mlp_forward(m, &a, params);
        float *dout = a.dbuf[m->nlayers & 1]; /* not the buffer the last layer's dx goes to */
        double loss = sl_k_mse(be, (size_t)batch * out, a.x[m->nlayers], target, dout,
                               sl_task_loss_norm(task, batch));
        if (losses) losses[s] = loss;
        sl_mlp_backward(m, &a, params, grads, dout);
        sl_optim so = sl_optim_for_step(o, s);
        sl_optim_step(be, &so, m->nparams, params, grads, state);
    }
    sl_k_sync(be);
    sl_mlp_acts_free(m, &a);
    sl_k_free(be, target);
    sl_k_free(be, state);
    sl_k_free(be, grads);
}

sl_weight_diff sl_weights_compare(sl_backend be, size_t n, const float *got, const float *want)
{
    sl_weight_diff d = {0};
    const float *g = got, *w = want;
    float *hg = NULL, *hw = NULL;
    if (be != SL_BACKEND_CPU) { /* compare on the host */
        g = hg = sl_k_download(be, got, n * sizeof(float));
        w = hw = sl_k_download(be, want, n * sizeof(float));
    }
    double scale = 0, diff2 = 0, want2 = 0;
    for (size_t i = 0; i < n; i++) {
        diff2 += ((double)g[i] - (double)w[i]) * ((double)g[i] - (double)w[i]);
        want2 += (double)w[i] * (double)w[i];
        if (!isfinite(g[i])) d.nonfinite = 1;
        if (!isfinite(w[i])) d.ref_nonfinite = 1;
        double e = fabs((double)g[i] - (double)w[i]);
        if (e > d.max_abs || isnan(e)) {
            d.max_abs = isnan(e) ? INFINITY : e;
            d.worst = i;
        }
        if (fabs(w[i]) > scale) scale = fabs(w[i]);
    }
    d.max_rel = scale > 0 ? d.max_abs / scale : d.max_abs;
    d.l2_rel = want2 > 0 ? sqrt(diff2 / want2) : sqrt(diff2);
    free(hg);
    free(hw);
    return d;
}
