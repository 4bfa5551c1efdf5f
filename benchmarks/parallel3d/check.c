/* check.c — what parallel3d's results are checked with (state.h): a run of weights every rank
 * holds whole (the driver compares it bit for bit across the world), replica 0's vectors
 * gathered into the flat vector for the comparison with serial training, and the program's own
 * checks: every rank's vector bit-identical across its replicas, the parameters and the memory
 * it holds and the bytes each group sends against their models (model.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

/* A run every rank of the world holds whole, for the driver's bit-for-bit comparison: stage
 * 0's position table, the other stages' first layer norm (replicated in the tensor-parallel
 * group; the replicas' copies are compared in full by p3_check()). */
const float *p3_weights(sl_train *t, size_t *first, size_t *count)
{
    p3 *q = t->state;
    const mg *s = &q->s;
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(s->C, off);
    if (q->zero && !is_f32(q)) { /* the f32 master is sharded: none held whole (gather_weights) */
        *first = *count = 0;
        return s->params;
    }
    if (q->p == 0) {
        *first = (size_t)s->V * s->C, *count = (size_t)s->maxT * s->C;
        return s->params + ((size_t)s->Vl + 1) * s->C;
    }
    const int b0 = q->ch[0].b0; /* the stage's first block */
    *first = t->m->w_off[b0] + off[SL_GPT_LN1W];
    *count = off[SL_GPT_LN1B + 1] - off[SL_GPT_LN1W];
    return s->params + s->lw[b0] + s->boff[SL_GPT_LN1W];
}

typedef struct place_arg {
    const float *local;
    float *full;
} place_arg;

static void place_run(size_t full, size_t local, size_t count, void *arg)
{
    const place_arg *a = arg;
    memcpy(a->full + full, a->local + local, count * sizeof(float));
}

/* Replica 0's ranks' vectors placed into the flat vector on rank 0 (the grid's (0, 0, 0)). */
void p3_gather_weights(sl_train *t, float *full)
{
    p3 *q = t->state;
    const int n = t->ctx->nranks;
    int mine = q->d == 0 ? (int)q->s.np : 0;
    if (q->s.np > (size_t)1 << 30) SL_FATAL("parallel3d: %zu parameters on a rank: too many to gather", q->s.np);
    int *counts = t->rank == 0 ? calloc((size_t)n, sizeof *counts) : NULL, *displs = NULL;
    SL_CHECK_MPI(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, t->ctx->comm));
    float *all = NULL;
    if (t->rank == 0) {
        displs = calloc((size_t)n, sizeof *displs);
        if (!counts || !displs) SL_FATAL("out of memory");
        size_t total = 0;
        for (int r = 0; r < n; r++) displs[r] = (int)total, total += (size_t)counts[r];
        all = sl_alloc(SL_MEM_OTHER, total * sizeof(float) + 1);
    }
    /* a sharded f32 master (--zero 1 or 2, 16 bits): the replicas' blocks gathered first */
    const float *vec = q->s.params;
    float *blocks = NULL;
    if (q->zero && !is_f32(q)) {
        blocks = sl_k_malloc(t->be, SL_MEM_OTHER, q->npad * sizeof(float));
        sl_train_coll_ok(sl_coll_allgather(q->s.dp, q->s.params, blocks, q->S, SL_F32), "allgather (weights for the check)");
        vec = blocks;
    }
    float *host = sl_alloc(SL_MEM_OTHER, q->s.np * sizeof(float) + 1);
    sl_k_memcpy(t->be, host, vec, q->s.np * sizeof(float), SL_K_D2H);
    if (blocks) sl_k_free(t->be, blocks);
    SL_CHECK_MPI(MPI_Gatherv(host, mine, MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, t->ctx->comm));
    if (t->rank == 0) {
        const int dims[NDIMS] = {q->T, q->D, q->P};
        p3 other = *q; /* rank r's stage, from its coordinates */
        for (int r = 0; r < n; r++) {
            if (!counts[r]) continue;
            int c[NDIMS];
            p3_coords_of(r, dims, c);
            other.p = c[DIM_PP];
            p3_chunks(&other);
            place_arg a = {all + displs[r], full};
            p3_for_stage_runs(t, &other, c[DIM_TP], place_run, &a);
        }
    }
    sl_free(host);
    if (all) sl_free(all);
    free(counts), free(displs);
}



/* The check beside the weights': every rank's whole vector bit-identical across its replicas,
 * the parameters it holds against the model, its memory per category against the combined
 * model, and, on the suite's ring, each group's bytes per
 * step against its model where the ring's chunks are equal. Collective. */
int p3_check(sl_train *t, double *error, char *why, size_t len)
{
    p3 *q = t->state;
    const mg *s = &q->s;
    *error = NAN;
    int bad = 0;
    if (s->np != p3_stage_params_model(q)) {
        snprintf(why, len, "stage %d holds %zu parameters, the model says %zu", q->p, s->np, p3_stage_params_model(q));
        bad = 1;
    }
    /* replicas: replica 0's vector sent to the others, compared bit for bit (the f32 weights; a
     * 16-bit run's dt weights where --zero shards its f32 master) */
    const int dt_copy = q->zero && !is_f32(q);
    const size_t es = dt_copy ? sl_dtype_size(s->dt) : sizeof(float);
    char *mine = sl_alloc(SL_MEM_OTHER, s->np * es + 1), *ref = sl_alloc(SL_MEM_OTHER, s->np * es + 1);
    sl_k_memcpy(t->be, mine, dt_copy ? s->w : (void *)s->params, s->np * es, SL_K_D2H);
    memcpy(ref, mine, s->np * es);
    if (s->np * es > (size_t)1 << 30) SL_FATAL("parallel3d: %zu parameters on a rank: too many to compare", s->np);
    SL_CHECK_MPI(MPI_Bcast(ref, (int)(s->np * es), MPI_BYTE, 0, q->dp_mpi));
    long long differ = 0;
    for (size_t i = 0; i < s->np; i++) differ += memcmp(mine + i * es, ref + i * es, es) != 0;
    sl_free(mine), sl_free(ref);
    if (!bad && differ) {
        snprintf(why, len, "replica %d of (t, p) = (%d, %d) differs from replica 0 in %lld of %zu weights", q->d, q->tr,
                 q->p, differ, s->np);
        *error = (double)differ;
        bad = 1;
    }
    /* this rank's memory, every stage's, against the combined model (the row has rank 0's) */
    double mem[SL_MEM_NCATS] = {0};
    p3_memory_model(t, mem);
    static const sl_mem_cat cats[] = {SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV};
    static const char *const cat_names[] = {"parameters", "gradients", "optimizer state", "activations"};
    for (size_t k = 0; k < sizeof cats / sizeof *cats && !bad; k++)
        if (q->held[cats[k]] != mem[cats[k]]) {
            *error = fabs(q->held[cats[k]] - mem[cats[k]]);
            snprintf(why, len, "rank %d (stage %d): %.0f bytes of %s held, the model says %.0f", t->rank, q->p,
                     q->held[cats[k]], cat_names[k], mem[cats[k]]);
            bad = 1;
        }
    double sent[NGROUPS], model[NGROUPS];
    p3_measured(t, sent);
    p3_group_bytes_model(t, model);
    const int ring = sl_comm_impl(s->tp) == SL_COLL_RING;
    /* exact where every count divides into T (tp) or D (dp) equal chunks */
    int exact[NGROUPS] = {ring && (size_t)q->Bmax * s->T % (size_t)q->T == 0 && q->Bd % q->m == 0, 1,
                          ring && (q->zero || s->np % (size_t)q->D == 0)};
    for (int k = 0; k < q->nbuckets; k++) exact[G_DP] &= q->buckets[k].count % (size_t)q->D == 0;
    static const char *const gname[NGROUPS] = {"tp", "pp", "dp"};
    for (int i = 0; i < NGROUPS && !bad; i++) {
        const double per = sent[i] / t->nsteps;
        if (exact[i] && per != model[i]) {
            *error = fabs(per - model[i]);
            snprintf(why, len, "%s group: %.0f bytes sent per step by rank %d, the model says %.0f", gname[i], per,
                     t->rank, model[i]);
            bad = 1;
        }
    }
    return bad;
}
