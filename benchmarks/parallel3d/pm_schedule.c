/* pm_schedule.c — parallel3d's step as the performance model reads it (perf_model.h): every
 * stage p of this rank's replica on lane p, running its list of the pipeline schedule
 * (pipe_schedule.c's builders, as step() runs them) on its layers:
 *   forward   the micro-batch's tokens loaded (first and last stage), the embedding (stage 0)
 *             or the activation received from stage p - 1, the stage's blocks, the output sent
 *             to stage p + 1 (N·C elements)
 *   backward  the blocks' forward again (--recompute full), the head (last stage) or the gradient
 *             received from stage p + 1, the blocks' backward (--recompute selective: each
 *             after its attention forward again), the embedding's (stage 0) or the
 *             input gradient sent to stage p - 1
 * each layer as tp_gpt_schedule.c states it (the tensor-parallel group's all-reduces inside);
 * then the 16-bit rounding, the replicas' all-reduce of the stage's slices and the optimizer
 * on them (--zero 1 or 2: a reduce-scatter of the padded vector, the optimizer on this replica's
 * block, an all-gather of the blocks: zero_update). The bubble is the lanes' waits in sl_pm_recv, from the neighbours' predicted compute
 * and the exchanges' alpha-beta. */
#include <stdlib.h>

#include "buckets.h"
#include "pm_schedule.h"
#include "pipe_schedule.h"
#include "tp_gpt_schedule.h"

static int tag(int mb, int grad) { return 2 * mb + grad; } /* pass.c's */

/* --zero 1 and 2 (replicas.c's p3_update): the padded gradient rounded into dt, reduce-scattered
 * over the replicas (S elements a rank), the unscale and the optimizer on this replica's block of
 * S, the blocks all-gathered back into every replica's weights. (--zero 2 rounds in place, with
 * one more copy of a block's 16-bit values: left out.) */
static void zero_update(const sl_train *t, const mg *s, size_t S, sl_pm_sched *sc)
{
    const int f32 = s->dt == SL_F32;
    const double padded = (double)S * s->d;
    if (!f32) sl_pm_bytes(sc, 6.0 * padded);
    sl_pm_group(sc, MG_PM_DP, "dp", s->dp, s->d);
    sl_pm_wait(sc, sl_pm_start(sc, SL_PM_IREDUCE_SCATTER, (double)S));
    sl_pm_group(sc, 0, NULL, NULL, 0);
    if (!f32) sl_pm_bytes(sc, 8.0 * (double)S); /* the unscale's overflow check */
    sl_pm_optimizer(t, sc, S);
    sl_pm_group(sc, MG_PM_DP, "dp", s->dp, s->d);
    sl_pm_wait(sc, sl_pm_start(sc, SL_PM_IALLGATHER, (double)S));
    sl_pm_group(sc, 0, NULL, NULL, 0);
}

/* --bucket-mb, in the stage's last backward: the bucket that layer l ends, if any, rounded into
 * dt and its all-reduce over the replicas started (replicas.c's p3_gradient_done). */
static void bucket_start(const mg *s, const p3_bucket *b, int n, int l, int *ids, sl_pm_sched *sc)
{
    for (int k = 0; k < n; k++) {
        if (b[k].lo != l) continue;
        if (s->dt != SL_F32) sl_pm_bytes(sc, 6.0 * (double)b[k].count);
        sl_pm_group(sc, MG_PM_DP, "dp", s->dp, s->d);
        ids[k] = sl_pm_start(sc, SL_PM_IALLREDUCE, (double)b[k].count);
        sl_pm_group(sc, 0, NULL, NULL, 0);
    }
}

void p3_pm_schedule(const sl_train *t, const mg *s, const p3_pm_grid *g, sl_pm_sched *sc)
{
    const geometry geo = {.p = g->P, .v = 1, .m = g->m, .nsteps = 1};
    op *ops = calloc((size_t)ops_capacity(&geo), sizeof *ops);
    if (!ops) SL_FATAL("out of memory");
    const double NC1 = (double)s->T * s->C; /* a sequence's boundary tensor */
    for (int p = 0; p < g->P; p++) {
        size_t blo, bhi;
        sl_share((size_t)s->L, g->P, p, &blo, &bhi);
        const int b0 = (int)blo + 1, b1 = (int)bhi + 1, last_stage = p == g->P - 1;
        const int l0 = p == 0 ? 0 : b0, l1 = last_stage ? s->L + 2 : b1;
        const size_t np = g->lw[l1] - g->lw[l0];
        sl_pm_lane(sc, p);
        sl_pm_bytes(sc, 4.0 * (double)np); /* the gradients zeroed */
        const int n = builders[g->sched](&geo, p, ops);
        p3_bucket b[P3_MAX_BUCKETS];
        int ids[P3_MAX_BUCKETS], last = -1;
        const int nb = g->bucket_bytes > 0 ? p3_buckets(g->lw, l0, l1, sl_dtype_size(s->dt), g->bucket_bytes, b) : 0;
        for (int i = 0; i < n; i++)
            if (ops[i].kind == 'B') last = i;
        for (int i = 0; i < n; i++) {
            const int mb = ops[i].mb;
            size_t lo, hi;
            sl_share((size_t)g->Bd, g->m, mb, &lo, &hi);
            const int B = (int)(hi - lo);
            if (ops[i].kind == 'F') {
                if (p == 0 || last_stage) mg_pm_load(t, s, B, sc);
                if (p == 0) mg_pm_embedding_forward(t, s, B, sc);
                else sl_pm_recv(sc, p - 1, tag(mb, 0));
                for (int l = b0; l < b1; l++) mg_pm_block_forward(t, s, B, sc);
                if (!last_stage) sl_pm_send(sc, p + 1, tag(mb, 0), B * NC1);
                continue;
            }
            if (g->recompute == 2) /* full */
                for (int l = b0; l < b1; l++) mg_pm_block_forward(t, s, B, sc);
            const int bk = i == last ? nb : 0; /* buckets start in the last backward */
            if (last_stage) {
                mg_pm_head(t, s, B, sc);
                bucket_start(s, b, bk, s->L + 1, ids, sc);
            } else {
                sl_pm_recv(sc, p + 1, tag(mb, 1));
            }
            for (int l = b1 - 1; l >= b0; l--) {
                if (g->recompute == 1) mg_pm_attention_forward(t, s, B, sc); /* selective */
                mg_pm_block_backward(t, s, B, sc);
                bucket_start(s, b, bk, l, ids, sc);
            }
            if (p == 0) {
                mg_pm_embedding_backward(t, s, B, sc);
                bucket_start(s, b, bk, 0, ids, sc);
            } else {
                sl_pm_send(sc, p - 1, tag(mb, 1), B * NC1);
            }
        }
        if (g->zero) {
            zero_update(t, s, (np + (size_t)s->d - 1) / (size_t)s->d, sc);
        } else if (nb) { /* the buckets waited for, then the optimizer */
            for (int k = 0; k < nb; k++) sl_pm_wait(sc, ids[k]);
            if (s->dt != SL_F32) sl_pm_bytes(sc, 8.0 * (double)np); /* the unscale's overflow check */
            sl_pm_optimizer(t, sc, np);
        } else {
            mg_pm_update(t, s, np, sc);
        }
    }
    free(ops);
}
