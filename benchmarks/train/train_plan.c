/* train_plan.c — a step predicted without being run (sl_train_predict_plan), for a technique that
 * chooses its runs from predictions: parallel3d --search predicts every layout this way, then
 * runs the most promising. The technique is set up on the world exactly as a run would set it up
 * (its own setup, with t->planning so that it records nothing of a run), and its step is
 * predicted by train_predict, the code behind every row's pred_step, with the same caches of
 * GEMM times and alpha-beta fits: a layout that is run afterwards is predicted in its row from
 * the very figures that ranked it. */
#include <string.h>

#include "sl_env_check.h"
#include "train_internal.h"

int train_planning;

static const sl_technique *plan_tech;
static const sl_mlp *plan_m;
static sl_task *plan_task;
static sl_optim plan_optim;

void train_plan_bind(const sl_technique *tech, const sl_mlp *m, sl_task *task, const sl_optim *o)
{
    plan_tech = tech, plan_m = m, plan_task = task, plan_optim = *o;
}

void train_plan_bound(const sl_technique **tech, const sl_mlp **m, sl_task **task, const sl_optim **o)
{
    if (!plan_tech) SL_FATAL("a planned prediction outside sl_train_main");
    *tech = plan_tech, *m = plan_m, *task = plan_task, *o = &plan_optim;
}

int sl_train_predict_plan(sl_ctx *ctx, int variant, sl_dtype dt, sl_coll impl, sl_pm_pred *out, char *fit,
                          size_t fitlen)
{
    if (!plan_tech) SL_FATAL("sl_train_predict_plan: called outside sl_train_main");
    if (!plan_tech->schedule || sl_no_predict()) return -1;
    const sl_mem_space space = plan_m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    const int p2p = (plan_tech->p2p_variants >> variant) & 1;
    sl_comm *comm;
    sl_train_coll_ok(sl_comm_create(&comm, ctx->comm, p2p ? SL_COLL_MPI : impl, space), "sl_comm_create (plan)");
    sl_train t;
    train_planning = 1;
    train_open(&t, ctx, plan_tech, variant, dt, comm, plan_m, plan_task, &plan_optim,
               train_global_batch(plan_tech, variant, ctx->nranks), 1, 0);
    train_planning = 0;
    train_prediction pred;
    const int predicted = train_predict(&t, p2p ? SL_COLL_MPI : impl, p2p, &pred);
    train_close(&t);
    sl_comm_destroy(comm);
    if (!predicted) return -1;
    *out = pred.pred;
    if (fit && fitlen) {
        strncpy(fit, pred.fit, fitlen - 1);
        fit[fitlen - 1] = 0;
    }
    return 0;
}
