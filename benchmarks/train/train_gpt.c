/* train_gpt.c — the serial reference of GPT training that a distributed run is checked against:
 * one process, the whole global batch, the layers of gpt_model.h in the run's dtype, with the
 * same precision steps as the training layer's (train_precision.c): each layer's gradient
 * accumulated in f32 and rounded once into dt, unscaled and checked for inf/NaN in f32, the
 * optimizer on the f32 master weights, the dt weights cast from them (or, without a master copy,
 * on the dt weights widened and rounded back); in f32 none of the copies, the optimizer on the
 * weights themselves. */
#include "sl_train.h"

long sl_train_serial_gpt(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt,
                         const sl_loss_scaler *sc0, int keep_master, int batch, int steps, uint64_t seed,
                         float *params, double *losses)
{
    const sl_backend be = m->be;
    const size_t n = m->nparams, es = sl_dtype_size(dt);
    const int f32 = dt == SL_F32;
    /* 16 bits: the master weights, or without one the dt weights widened for the optimizer */
    float *master = f32 ? params : sl_k_malloc(be, SL_MEM_OTHER, n * sizeof(float));
    void *w = f32 ? (void *)params : sl_k_malloc(be, SL_MEM_OTHER, n * es);
    float *g32 = sl_k_malloc(be, SL_MEM_OTHER, n * sizeof(float));
    void *g = f32 ? NULL : sl_k_malloc(be, SL_MEM_OTHER, n * es);
    float *state = sl_k_malloc(be, SL_MEM_OTHER, (size_t)sl_optim_state_per_param(o) * n * sizeof(float) + 1);
    sl_gpt_acts a;
    sl_gpt_acts_alloc(m, dt, batch, &a);
    sl_mlp_init_params(m, seed, 0, n, master);
    if (!f32) sl_k_cast(be, n, master, SL_F32, w, dt, NULL);
    sl_loss_scaler sc;
    if (f32) sl_train_scaler(dt, &sc);
    else sc = *sc0;
    int applied = 0; /* AdamW's step count: a skipped step is not one */
    for (int s = 0; s < steps; s++) {
        a.B = batch;
        a.seq0 = (uint64_t)s * (uint64_t)batch; /* dropout's numbering, as sl_acts_load's */
        a.norm = sl_task_loss_norm(task, batch);
        a.scale = (float)sc.scale;
        sl_task_tokens(task, (uint64_t)s * (uint64_t)batch, batch, a.tok, a.tgt);
        sl_k_memset0(be, g32, n * sizeof(float));
        for (int l = 0; l < m->nlayers; l++) sl_gpt_layer_forward(m, &a, l, (const char *)w + m->w_off[l] * es);
        if (losses) losses[s] = a.loss;
        void *dy = sl_gpt_dout(&a, m);
        for (int l = m->nlayers - 1; l >= 0; l--) {
            void *dx = sl_gpt_dx(&a, l);
            sl_gpt_layer_backward(m, &a, l, dy, dx, (const char *)w + m->w_off[l] * es, g32 + m->w_off[l]);
            dy = dx;
        }
        size_t bad = 0;
        if (!f32) { /* the gradient as a run keeps it (dt), then unscaled in f32 */
            sl_k_cast(be, n, g32, SL_F32, g, dt, NULL);
            sl_k_cast(be, n, g, dt, g32, SL_F32, NULL);
            bad = sl_k_scale_check(be, n, g32, 1.0f / (float)sc.scale);
        }
        if (!sl_loss_scaler_update(&sc, bad > 0)) continue;
        sl_optim so = sl_optim_for_step(o, applied++);
        if (!f32 && !keep_master) sl_k_cast(be, n, w, dt, master, SL_F32, NULL);
        sl_optim_step(be, &so, n, master, g32, state);
        if (!f32 && keep_master) sl_k_cast(be, n, master, SL_F32, w, dt, NULL);
        if (!f32 && !keep_master) sl_k_cast_update(be, dt, n, master, w);
    }
    if (!f32 && !keep_master) sl_k_cast(be, n, w, dt, master, SL_F32, NULL);
    if (!f32) sl_k_memcpy(be, params, master, n * sizeof(float), SL_K_D2D);
    sl_k_sync(be);
    sl_gpt_acts_free(&a);
    if (!f32) {
        sl_k_free(be, master);
        sl_k_free(be, w);
        sl_k_free(be, g);
    }
    sl_k_free(be, g32);
    sl_k_free(be, state);
    return sc.skipped;
}
