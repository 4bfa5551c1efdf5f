/* pm_schedule.c — parallel3d's step as the performance model reads it (perf_model.h): every
 * stage p of this rank's replica on lane p, running its list of the pipeline schedule
 * (pipe_schedule.c's builders, as step() runs them) on its chunks' layers (chunks.h; one chunk
 * but with interleaved):
 *   forward   the micro-batch's tokens loaded (the model's first and last chunk), the embedding
 *             (its first chunk) or the activation received from the previous stage, the chunk's
 *             blocks, the output sent to the next stage (N·C elements; round the ring of stages
 *             with interleaved)
 *   backward  the blocks' forward again (--recompute full), the head (the model's last chunk) or
 *             the gradient received from the next stage, the blocks' backward (--recompute
 *             selective: each after its attention forward again), the embedding's (the first
 *             chunk) or the input gradient sent to the previous stage
 * each layer as tp_gpt_schedule.c states it (the tensor-parallel group's all-reduces inside);
 * then the 16-bit rounding, the replicas' all-reduce of the stage's slices and the optimizer
 * on them (--zero 1 or 2: a reduce-scatter of the padded vector, the optimizer on this replica's
 * block, an all-gather of the blocks: zero_update). The bubble is the lanes' waits in sl_pm_recv, from the neighbours' predicted compute
 * and the exchanges' alpha-beta. */
#include <stdlib.h>

#include "buckets.h"
#include "chunks.h"
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
    const int P = g->P, v = g->v;
    const geometry geo = {.p = P, .v = v, .m = g->m, .nsteps = 1};
    op *ops = calloc((size_t)ops_capacity(&geo), sizeof *ops);
    if (!ops) SL_FATAL("out of memory");
    const double NC1 = (double)s->T * s->C; /* a sequence's boundary tensor */
    for (int p = 0; p < P; p++) {
        p3_chunk ch[P3_MAX_CHUNKS];
        size_t np = 0;
        for (int k = 0; k < v; k++) {
            ch[k] = p3_chunk_of(s->L, P, v, p, k);
            np += g->lw[ch[k].l1] - g->lw[ch[k].l0];
        }
        const int next = (p + 1) % P, prev = (p + P - 1) % P, G = P * v;
        sl_pm_lane(sc, p);
        sl_pm_bytes(sc, 4.0 * (double)np); /* the gradients zeroed */
        const int n = builders[g->sched](&geo, p, ops);
        p3_bucket b[P3_MAX_BUCKETS];
        int ids[P3_MAX_BUCKETS], last = -1;
        const int nb = g->bucket_bytes > 0 /* one chunk (parallel3d.c's validate) */
                           ? p3_buckets(g->lw, ch[0].l0, ch[0].l1, sl_dtype_size(s->dt), g->bucket_bytes, b)
                           : 0;
        for (int i = 0; i < n; i++)
            if (ops[i].kind == 'B') last = i;
        for (int i = 0; i < n; i++) {
            const int mb = ops[i].mb, k = ops[i].chunk, c = k * P + p, b0 = ch[k].b0, b1 = ch[k].b1;
            const int first = c == 0, final = c == G - 1; /* the model's first chunk, its last */
            size_t lo, hi;
            sl_share((size_t)g->Bd, g->m, mb, &lo, &hi);
            const int B = (int)(hi - lo);
            if (ops[i].kind == 'F') {
                if (first || final) mg_pm_load(t, s, B, sc);
                if (first) mg_pm_embedding_forward(t, s, B, sc);
                else sl_pm_recv(sc, prev, tag(mb * v + k, 0)); /* = chunks.h's p3_tag(mb, v, k, 0) */
                for (int l = b0; l < b1; l++) mg_pm_block_forward(t, s, B, sc);
                if (!final) sl_pm_send(sc, next, tag(mb * v + (p == P - 1 ? k + 1 : k), 0), B * NC1);
                continue;
            }
            if (g->recompute == 2) /* full */
                for (int l = b0; l < b1; l++) mg_pm_block_forward(t, s, B, sc);
            const int bk = i == last ? nb : 0; /* buckets start in the last backward */
            if (final) {
                mg_pm_head(t, s, B, sc);
                bucket_start(s, b, bk, s->L + 1, ids, sc);
            } else {
                sl_pm_recv(sc, next, tag(mb * v + k, 1));
            }
            for (int l = b1 - 1; l >= b0; l--) {
                if (g->recompute == 1) mg_pm_attention_forward(t, s, B, sc); /* selective */
                mg_pm_block_backward(t, s, B, sc);
                bucket_start(s, b, bk, l, ids, sc);
            }
            if (first) {
                mg_pm_embedding_backward(t, s, B, sc);
                bucket_start(s, b, bk, 0, ids, sc);
            } else {
                sl_pm_send(sc, prev, tag(mb * v + (p == 0 ? k - 1 : k), 1), B * NC1);
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
