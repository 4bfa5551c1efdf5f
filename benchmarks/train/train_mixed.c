/* train_mixed.c — what mixed-precision training shares across techniques: the loss scaler a
 * precision uses and the serial reference that a distributed mixed-precision run is checked
 * against (one process, the whole global batch, the same kernels and scaler). */
#include <stdlib.h>
#include <string.h>

#include "mlp_mixed.h"
#include "sl_train.h"

void sl_train_scaler(sl_dtype dt, sl_loss_scaler *s)
{
    if (dt == SL_F16)
        sl_loss_scaler_init(s, SL_SCALE_DYNAMIC, 65536.0, 2.0, 0.5, 2000);
    else
        sl_loss_scaler_init(s, SL_SCALE_NONE, 1.0, 2.0, 0.5, 2000);
}

long sl_train_serial_mixed(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt,
                           const sl_loss_scaler *sc0, int master, int batch, int steps, uint64_t seed,
                           float *params, double *losses)
{
    const sl_backend be = m->be;
    const int in = m->dims[0], out = m->dims[m->nlayers];
    sl_mixed mx;
    sl_mixed_init(&mx, m, dt, master, batch, seed, o);
    sl_loss_scaler sc = *sc0;
    float *x = sl_k_malloc(be, SL_MEM_OTHER, (size_t)batch * in * sizeof(float));
    float *y = sl_k_malloc(be, SL_MEM_OTHER, (size_t)batch * out * sizeof(float));
    int applied = 0; /* AdamW's step count: a skipped step is not one */
    for (int s = 0; s < steps; s++) {
        sl_task_batch(task, (uint64_t)s * (uint64_t)batch, batch, x, y);
        double loss = sl_mixed_forward_backward(&mx, x, y, sl_task_loss_norm(task, batch), (float)sc.scale);
        if (losses) losses[s] = loss;
        size_t bad = sl_mixed_unscale(&mx, (float)sc.scale);
        if (sl_loss_scaler_update(&sc, bad > 0)) {
            sl_optim os = sl_optim_for_step(o, applied++);
            sl_mixed_apply(&mx, &os);
        }
    }
    sl_k_memcpy(be, params, sl_mixed_weights(&mx), m->nparams * sizeof(float), SL_K_D2D);
    sl_k_sync(be);
    sl_k_free(be, x);
    sl_k_free(be, y);
    sl_mixed_free(&mx);
    return sc.skipped;
}

/* For the tests of the flag: SL_TEST_CORRUPT=1 makes the last rank alone find an inf at step 0,
 * as if its own cast had overflowed. Every rank must then skip the step (replicas stay
 * identical), and the weights, one step short of the reference's, must fail the check. */
static int injected_overflow(const sl_train *t)
{
    return sl_test_corrupt() && t->step == 0 && t->size > 1 && t->rank == t->size - 1;
}

int sl_train_overflow_any(sl_train *t, int mine, long *seen)
{
    mine = mine || injected_overflow(t);
    *seen += mine;
    if (t->size == 1) return mine; /* the one-rank baseline runs on rank 0 alone */
    int found = mine;
    const double t0 = sl_now();
    SL_CHECK_MPI(MPI_Allreduce(&mine, &found, 1, MPI_INT, MPI_LOR, t->ctx->comm));
    sl_train_blocking(t, "overflow flag", t0);
    return found;
}

void sl_train_scaler_row(sl_train *t, const sl_loss_scaler *s, long seen, sl_result *res)
{
    sl_result_param_str(res, "loss_scale", sl_scale_mode_name(s->mode));
    sl_result_param_num(res, "overflow_flag_bytes", t->size > 1 && !t->ms.alone ? (double)sizeof(int) : 0);
    sl_result_metric(res, "skipped_steps", (double)s->skipped, "steps");
    sl_result_metric(res, "final_scale", s->scale, "scale");
    long all = 0;
    SL_CHECK_MPI(MPI_Allreduce(&seen, &all, 1, MPI_LONG, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "overflow_seen", (double)all, "rank-steps");
}

void sl_train_mixed_init(sl_train_mixed_state *ms, sl_dtype dt)
{
    memset(ms, 0, sizeof *ms);
    sl_train_scaler(dt, &ms->sc);
}

int sl_train_mixed_step(sl_train *t, sl_train_mixed_state *ms, const void *g, float *grads, float *params,
                        float *optim, void *w, size_t n)
{
    if (t->dtype == SL_F32) {
        sl_train_optimize(t, params, grads, optim, 0, n);
        return 1;
    }
    const double t0 = sl_now();
    sl_k_cast(t->be, n, g, t->dtype, grads, SL_F32, NULL);
    const size_t bad = sl_k_scale_check(t->be, n, grads, 1.0f / (float)ms->sc.scale); /* exact: powers of two */
    sl_optim o;
    const int applied = sl_train_mixed_decide(t, ms, bad > 0, &o);
    if (applied) {
        sl_optim_step(t->be, &o, n, params, grads, optim);
        sl_k_cast(t->be, n, params, SL_F32, w, t->dtype, NULL);
    }
    sl_train_compute_span(t, "unscale + optimizer (f32 master)", t0);
    return applied;
}

int sl_train_mixed_decide(sl_train *t, sl_train_mixed_state *ms, int mine, sl_optim *o)
{
    const int found = sl_train_overflow_any(t, mine, &ms->overflow_steps);
    if (!sl_loss_scaler_update(&ms->sc, found)) return 0;
    *o = sl_optim_for_step(&t->optim, ms->applied++);
    return 1;
}

void sl_train_mixed_row(sl_train *t, const sl_train_mixed_state *ms, sl_result *res)
{
    sl_train_scaler_row(t, &ms->sc, ms->overflow_steps, res);
}
