/* pm_schedule.c — megatron_mlp's step as the performance model reads it (perf_model.h), in
 * forward_backward's order, block by block: the column-parallel GEMM X·A_r^T [n, c] with its
 * bias and GeLU, the row-parallel Y_r·B_r^T [n, h], then g (the all-reduce of Z, or seqpar's
 * reduce-scatter), the bias and the residual; backward dB_r, dY_r, GeLU', then dA_r and dX_r
 * with f (the all-reduce of dX_r; overlap: started after dX_r, waited for after dA_r's eight
 * pieces; seqpar: the all-gathers of dZ and X and the reduce-scatter of dX_r); then the replicas'
 * all-reduce and the optimizer on this rank's slices.
 *
 * The group's operations are fitted on the group's communicator (t ranks), the replicas' on
 * theirs (d ranks): sl_pm_group. --model gpt: tp_gpt_schedule.c's step (the same layers as
 * parallel3d's stages). */
#include "pm_schedule.h"
#include "tp.h"
#include "tp_gpt_schedule.h"

/* A blocking operation in the group (MG_PM_TP, as the GPT's), started or waited for. */
static void in_group(const mm *s, sl_pm_sched *sc) { sl_pm_group(sc, MG_PM_TP, "tp", s->tp, s->t); }
static void out_of_group(sl_pm_sched *sc) { sl_pm_group(sc, 0, NULL, NULL, 0); }

/* 16 bits: a GEMM's f32 result rounded into dt (4 read, 2 written) and widened back to f32
 * where the element-wise kernels read it (2 read, 4 written). */
static double casts(const mm *s, double elems) { return s->dt == SL_F32 ? 0 : 12.0 * elems; }

static void group_sum(const mm *s, sl_pm_sched *sc, int seqpar)
{
    if (s->t == 1) {
        if (seqpar) sl_pm_bytes(sc, 2.0 * s->nloc * s->h * sl_dtype_size(s->dt)); /* a copy */
        return;
    }
    in_group(s, sc);
    if (seqpar) sl_pm_comm(sc, SL_PM_IREDUCE_SCATTER, (double)s->nloc * s->h);
    else sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)s->n * s->h);
    out_of_group(sc);
}

static void gather(const mm *s, sl_pm_sched *sc)
{
    if (s->t == 1) sl_pm_bytes(sc, 2.0 * s->nloc * s->h * sl_dtype_size(s->dt));
    else {
        in_group(s, sc);
        sl_pm_comm(sc, SL_PM_IALLGATHER, (double)s->nloc * s->h);
        out_of_group(sc);
    }
}

void mm_pm_schedule(const sl_train *t, sl_pm_sched *sc)
{
    if (sl_mlp_is_gpt(t->m)) {
        mg_pm_step(t, sc);
        return;
    }
    const mm *s = t->state;
    const int n = s->n, h = s->h, c = s->c, seqpar = t->variant == V_SEQPAR, overlap = t->variant == V_OVERLAP;
    const double nc = (double)n * c, nh = (double)n * h, nlh = (double)s->nloc * h;
    sl_pm_bytes(sc, 8.0 * nlh + casts(s, nlh)); /* the tokens and targets loaded */
    for (int i = 0; i < s->L; i++) {
        if (seqpar) gather(s, sc);
        sl_pm_gemm(sc, 0, 1, n, c, h, 0, 1);
        sl_pm_bytes(sc, 8.0 * nc + 8.0 * nc + 2 * casts(s, nc)); /* bias, GeLU */
        sl_pm_gemm(sc, 0, 1, n, h, c, 0, 1);
        sl_pm_bytes(sc, casts(s, nh));
        group_sum(s, sc, seqpar);
        sl_pm_bytes(sc, 8.0 * nlh + 12.0 * nlh + casts(s, 2 * nlh)); /* b, the residual */
    }
    sl_pm_bytes(sc, 12.0 * nlh + casts(s, nlh)); /* the loss and its gradient */
    for (int i = s->L - 1; i >= 0; i--) {
        if (seqpar) gather(s, sc);
        /* dB_r = dZ^T Y_r, db, dY_r = dZ B_r */
        sl_pm_gemm(sc, 1, 0, h, c, n, 0, 1);
        sl_pm_bytes(sc, 4.0 * nh + casts(s, nh + (double)h * c));
        sl_pm_gemm(sc, 0, 0, n, c, h, 0, 1);
        sl_pm_bytes(sc, 12.0 * nc + 2 * casts(s, nc)); /* GeLU' */
        if (seqpar) gather(s, sc);
        if (overlap) {
            sl_pm_gemm(sc, 0, 0, n, h, c, 0, 1); /* dX_r first */
            in_group(s, sc);
            const int id = s->t > 1 ? sl_pm_start(sc, SL_PM_IALLREDUCE, nh) : -1;
            out_of_group(sc);
            enum { PIECES = 8 }; /* weight_grad_overlapped's pieces of A_r's rows */
            for (int p = 0; p < PIECES; p++)
                sl_pm_gemm(sc, 1, 0, (int)((long long)c * (p + 1) / PIECES) - (int)((long long)c * p / PIECES), h, n, 0, 1);
            sl_pm_bytes(sc, 4.0 * nc + casts(s, nc + (double)c * h));
            if (id >= 0) sl_pm_wait(sc, id);
        } else {
            sl_pm_gemm(sc, 1, 0, c, h, n, 0, 1);
            sl_pm_bytes(sc, 4.0 * nc + casts(s, nc + (double)c * h));
            sl_pm_gemm(sc, 0, 0, n, h, c, 0, 1);
            sl_pm_bytes(sc, casts(s, nh));
            group_sum(s, sc, seqpar);
        }
        sl_pm_bytes(sc, 3.0 * nlh * sl_dtype_size(s->dt)); /* the residual's own path */
    }
    if (s->d > 1) {
        sl_pm_group(sc, MG_PM_DP, "dp", s->dp, s->d);
        sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)s->np);
        out_of_group(sc);
    }
    sl_pm_optimizer(t, sc, s->np);
}
