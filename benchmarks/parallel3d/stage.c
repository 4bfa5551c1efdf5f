/* stage.c — a parallel3d rank's stage (state.h): its place in a layout (coordinates, layers, its
 * part of the flat vector, the replica's sequences and micro-batches, ZeRO's blocks), the
 * schedule's list for the stage and the slots of its micro-batches in flight, everything it
 * allocates (counted by category for the memory check), and the release. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "state.h"

/* In-flight micro-batches of a stage's list: the most forwards not yet matched by backwards
 * (interleaved: micro-batch chunks). */
static int inflight(const op *ops, int n)
{
    int cur = 0, most = 0;
    for (int i = 0; i < n; i++) {
        cur += ops[i].kind == 'F' ? 1 : -1;
        if (cur > most) most = cur;
    }
    return most;
}

/* Whether the stage holds layer l. */
static int holds(const p3 *q, int l)
{
    for (int k = 0; k < q->v; k++)
        if (l >= q->ch[k].l0 && l < q->ch[k].l1) return 1;
    return 0;
}

/* The stage's chunks (chunks.h) and its vector: the chunks' layers one after the other, each
 * in tp_gpt.c's layout (s.lw[l]: layer l's first element where the stage holds it). */
void p3_chunks(p3 *q)
{
    mg *s = &q->s;
    q->nb = 0;
    for (int k = 0; k < q->v; k++) {
        q->ch[k] = p3_chunk_of(s->L, q->P, q->v, q->p, k);
        q->nb += q->ch[k].b1 - q->ch[k].b0;
    }
    size_t n = 0;
    for (int l = 0; l <= s->L + 1; l++) {
        s->lw[l] = n;
        if (holds(q, l)) n += q->lw_full[l + 1] - q->lw_full[l];
    }
    s->lw[s->L + 2] = s->np = n;
}

typedef struct stage_runs {
    const p3 *q;
    const size_t *lw; /* the stage's layout */
    void (*fn)(size_t full, size_t local, size_t count, void *arg);
    void *arg;
} stage_runs;

/* mg_runs restricted to the stage's layers, with local offsets in the stage's vector (a run
 * lies in one layer: found by its offset in the whole tensor-parallel vector). */
static void stage_run(size_t full, size_t local, size_t count, int replicated, void *arg)
{
    (void)replicated;
    const stage_runs *r = arg;
    const size_t *lw = r->q->lw_full;
    int lo = 0, hi = r->q->s.L + 1; /* the last layer starting at or before local */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (lw[mid] <= local) lo = mid;
        else hi = mid - 1;
    }
    if (holds(r->q, lo)) r->fn(full, r->lw[lo] + (local - lw[lo]), count, r->arg);
}

void p3_for_stage_runs(const sl_train *t, p3 *q, int tr, void (*fn)(size_t, size_t, size_t, void *), void *arg)
{
    /* mg_runs reads the layout of the whole tensor-parallel vector: put it back for the call */
    size_t saved[SL_MLP_MAX_LAYERS + 3];
    memcpy(saved, q->s.lw, sizeof saved);
    memcpy(q->s.lw, q->lw_full, sizeof saved);
    stage_runs r = {q, saved, fn, arg};
    mg_runs(t->m, &q->s, tr, stage_run, &r);
    memcpy(q->s.lw, saved, sizeof saved);
}

typedef struct init_arg {
    const sl_mlp *m;
    float *local;
} init_arg;

static void init_run(size_t full, size_t local, size_t count, void *arg)
{
    const init_arg *a = arg;
    sl_mlp_init_params(a->m, (uint64_t)sl_train_opt.seed, full, count, a->local + local);
}


/* Rank `rank`'s place in layout L and what follows from it before anything is allocated: its
 * coordinates, the stage's L->v chunks and its part of the flat vector (p3_chunks), the
 * replica's sequences and micro-batches, ZeRO's blocks. p3_setup's first half, and the search's
 * memory model of a layout. */
void p3_place(p3 *q, const sl_gpt_dims *g, sl_dtype dt, int global_batch, const p3_layout *L, int sched, int rank)
{
    mg *s = &q->s;
    q->D = L->D, q->T = L->T, q->P = L->P;
    const int dims[NDIMS] = {q->T, q->D, q->P};
    int c[NDIMS];
    p3_coords_of(rank, dims, c);
    q->d = c[DIM_DP], q->tr = c[DIM_TP], q->p = c[DIM_PP];
    s->t = q->T, s->d = q->D, s->tr = q->tr, s->rep = q->d;
    s->L = g->layers, s->C = g->C, s->NH = g->NH, s->T = g->T, s->V = g->V, s->maxT = g->max_T;
    s->Vl = s->V / s->t, s->Cl = s->C / s->t, s->NHl = s->NH / s->t;
    s->dt = dt;
    mg_layout(s);
    memcpy(q->lw_full, s->lw, sizeof q->lw_full);
    q->v = L->v;
    p3_chunks(q);
    /* the replica's sequences and its micro-batches */
    size_t lo, hi;
    sl_share((size_t)global_batch, q->D, q->d, &lo, &hi);
    q->lo = (int)lo;
    q->Bd = (int)(hi - lo);
    q->m = L->m;
    if (q->m > q->Bd) q->m = q->Bd > 0 ? q->Bd : 1;
    q->Bmax = (q->Bd + q->m - 1) / q->m;
    s->B = q->Bmax, s->N = s->B * s->T;
    s->Tl = s->T, s->Nl = s->N, s->p0 = 0; /* no sequence parallelism: every position held */
    /* --zero 1 and 2: the vectors the replicas exchange padded to D equal blocks (the reduce-scatter
     * and the all-gather move equal blocks; the padding stays zero), the optimizer state and
     * the f32 master (16 bits) of block d alone */
    q->zero = L->zero;
    q->S = q->zero ? (s->np + (size_t)q->D - 1) / (size_t)q->D : s->np;
    q->npad = q->zero ? (size_t)q->D * q->S : s->np;
    q->recompute = L->recompute;
    q->sched = sched;
}

/* sl_technique.setup for layout L under pipeline schedule sched; bucket_mb: --bucket-mb. */
void p3_setup(sl_train *t, const p3_layout *L, int sched, double bucket_mb)
{
    p3 *q = calloc(1, sizeof *q);
    if (!q) SL_FATAL("out of memory");
    t->state = q;
    mg *s = &q->s;
    const sl_mem_space space = t->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    for (int k = 0; k < SL_MEM_NCATS; k++) q->held[k] = -(double)sl_mem_current(space, (sl_mem_cat)k);
    p3_place(q, &t->m->gpt, t->dtype, t->global_batch, L, sched, t->rank);
    q->bucket_bytes = !t->baseline && bucket_mb > 0 && q->D > 1 && !q->zero ? bucket_mb * 1048576 : 0;
    t->lo = q->lo, t->hi = q->lo + q->Bd;
    if (t->planning == 2) return; /* a rank not launched: what the schedule reads, and no more */
    if (!t->planning) p3_record_grid(t, q);
    p3_open_groups(t, q);

    /* the schedule's list for this stage and the slots its in-flight micro-batches need (each
     * slot holds one chunk's; interleaved's chunks are of equal blocks, so any slot any chunk) */
    const geometry geo = {.p = q->P, .v = q->v, .m = q->m, .nsteps = 1};
    q->ops = calloc((size_t)ops_capacity(&geo), sizeof *q->ops);
    q->slot_of = calloc((size_t)q->m * q->v, sizeof *q->slot_of);
    if (!q->ops || !q->slot_of) SL_FATAL("out of memory");
    q->nops = builders[q->sched](&geo, q->p, q->ops);
    q->nslots = inflight(q->ops, q->nops);
    for (int i = 0; i < q->nops; i++)
        if (q->ops[i].kind == 'B') q->last_mb = q->ops[i].mb;
    if (q->bucket_bytes > 0) /* one chunk (validate): layers [l0, l1) */
        q->nbuckets = p3_buckets(s->lw, q->ch[0].l0, q->ch[0].l1, sl_dtype_size(s->dt), q->bucket_bytes, q->buckets);
    q->slots = calloc((size_t)q->nslots, sizeof *q->slots);
    if (!q->slots) SL_FATAL("out of memory");
    /* --search ranking the layouts: the schedule reads the groups and the sizes above, nothing
     * below, so nothing is allocated (p3_release frees none of it). A layout the memory model
     * fits but this machine does not then fails when it runs (exit 3, naming the bytes), not while
     * the layouts are ranked. */
    if (t->planning) return;

    const size_t f4 = sizeof(float), es = sl_dtype_size(s->dt), N = (size_t)s->N, C = (size_t)s->C;
    const size_t Cl = (size_t)s->Cl, NC = N * C, NV = N * (size_t)s->Vl;
    const size_t npad = q->npad, master = q->zero && !is_f32(q) ? q->S : npad;
    s->params = sl_train_alloc(t, SL_MEM_PARAMS, master * f4);
    s->grads = sl_train_alloc(t, SL_MEM_GRADS, npad * f4);
    s->optim = sl_train_alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * q->S * f4);
    /* the stage's f32 weights from the seed (a sharded master takes its block of them) */
    float *init = master < npad ? sl_train_alloc(t, SL_MEM_OTHER, npad * f4) : s->params;
    sl_k_memset0(t->be, init, npad * f4); /* the embedding's zero row, the padding */
    init_arg ia = {t->m, init};
    p3_for_stage_runs(t, q, q->tr, init_run, &ia);
    sl_k_sync(t->be);
    s->w = is_f32(q) ? (void *)s->params : sl_train_alloc(t, SL_MEM_PARAMS, npad * es);
    s->g = is_f32(q) ? (void *)s->grads : sl_train_alloc(t, SL_MEM_GRADS, grad16_elems(q) * es);
    if (!is_f32(q)) {
        sl_k_cast(t->be, npad, init, SL_F32, s->w, s->dt, NULL);
        sl_train_mixed_init(&s->ms, s->dt);
    }
    if (init != s->params) {
        sl_k_memcpy(t->be, s->params, init + (size_t)q->d * q->S, q->S * f4, SL_K_D2D);
        sl_k_sync(t->be);
        sl_k_free(t->be, init);
    }
    /* per slot, of the chunk it holds (its blocks i = 0..nbc-1, as res[i] and blk[i]): the
     * residual stream into each block (kept), the chunk's output res[nbc] (sent; on the last
     * stage kept: the stream into the head, or v > 1 a send), the blocks' tensors, the tokens
     * (stage 0 and the last) and the input gradient sent back. --recompute full: a slot keeps its
     * input and output only, the rest is one set of a chunk's tensors */
    const int nbc = q->ch[0].b1 - q->ch[0].b0; /* a chunk's blocks */
    for (int k = 1; k < q->v; k++)
        if (q->ch[k].b1 - q->ch[k].b0 != nbc) SL_FATAL("parallel3d: stage %d's chunks differ in blocks", q->p);
    const int tokens = q->p == 0 || last_stage(q), full = q->recompute == RC_FULL;
    const int own_out = !last_stage(q) || q->v > 1; /* the output sent from a slot's own buffer */
    if (q->recompute == RC_SELECTIVE && q->nb > 0) /* one attention-probability buffer for the stage */
        q->att = sl_train_alloc(t, SL_MEM_ACTIV, (size_t)s->B * s->NHl * s->T * s->T * es);
    for (int k = -1; k < q->nslots; k++) {
        slot *sl = k < 0 ? &q->shared : &q->slots[k];
        if (k < 0 && !full) continue;
        sl->mb = -1;
        for (int i = 0; i <= nbc; i++) {
            const int own = i == 0 || (i == nbc && own_out);
            if (full && k >= 0 && !own) sl->res[i] = q->shared.res[i];
            else if (!(full && k < 0 && own))
                sl->res[i] = sl_train_alloc(t, i == nbc && !last_stage(q) ? SL_MEM_COMM : SL_MEM_ACTIV, NC * es);
        }
        if (full && k >= 0) memcpy(sl->blk, q->shared.blk, sizeof sl->blk);
        for (int i = 0; i < nbc && !(full && k >= 0); i++) mg_block_alloc(t, s, &sl->blk[i], q->att);
        if (k < 0) continue;
        if (tokens) {
            sl->tok = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t)), sl->tgt = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
            sl->tokl = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
            sl->htok = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
            sl->htgt = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
        }
        if (q->p > 0 || q->v > 1) sl->dsend = sl_train_alloc(t, SL_MEM_COMM, NC * es);
    }
    if (last_stage(q)) { /* the head's forward and backward run at once: not kept across operations */
        s->lnf = sl_train_alloc(t, SL_MEM_ACTIV, NC * es);
        s->mf = sl_train_alloc(t, SL_MEM_ACTIV, N * f4), s->rf = sl_train_alloc(t, SL_MEM_ACTIV, N * f4);
    }
    s->dres[0] = sl_train_alloc(t, SL_MEM_COMM, NC * es), s->dres[1] = sl_train_alloc(t, SL_MEM_COMM, NC * es);
    s->dpart = sl_train_alloc(t, SL_MEM_COMM, NC * es);
    s->rowmax = sl_train_alloc(t, SL_MEM_COMM, N * f4), s->rowtgt = sl_train_alloc(t, SL_MEM_COMM, N * f4);
    s->rowsum = sl_train_alloc(t, SL_MEM_COMM, N * f4);
    s->dh = sl_train_alloc(t, SL_MEM_OTHER, NC * es), s->dqkv = sl_train_alloc(t, SL_MEM_OTHER, 3 * N * Cl * es);
    s->datty = sl_train_alloc(t, SL_MEM_OTHER, N * Cl * es), s->dfc = sl_train_alloc(t, SL_MEM_OTHER, 4 * N * Cl * es);
    s->zero_wpe = sl_train_alloc(t, SL_MEM_OTHER, (size_t)s->T * C * es);
    sl_k_memset0(t->be, s->zero_wpe, (size_t)s->T * C * es);
    const size_t widest = 4 * Cl > C ? 4 * Cl : C;
    if (!is_f32(q)) {
        s->lin32 = sl_train_alloc(t, SL_MEM_OTHER, N * widest * f4);
        if (last_stage(q)) s->dlog16 = sl_train_alloc(t, SL_MEM_OTHER, NV * es);
    }
    s->vec32 = sl_train_alloc(t, SL_MEM_OTHER, 4 * C * f4);
    if (last_stage(q)) {
        s->logits = sl_train_alloc(t, SL_MEM_OTHER, NV * f4), s->dlog = sl_train_alloc(t, SL_MEM_OTHER, NV * f4);
        if (t->be != SL_BACKEND_CPU) s->hlog = sl_alloc(SL_MEM_OTHER, (2 * NV + 3 * N) * f4);
    }
    s->attn_work = sl_train_alloc(t, SL_MEM_OTHER, sl_k_attention_work_bytes(s->dt, s->B, s->NHl, s->T));
    for (int k = 0; k < SL_MEM_NCATS; k++) q->held[k] += (double)sl_mem_current(space, (sl_mem_cat)k);
}

void p3_release(sl_train *t)
{
    p3 *q = t->state;
    mg *s = &q->s;
    if (t->planning == 2) {
        free(q);
        return;
    }
    /* planning 1: the slots and buffers below were never allocated (NULL, freed as nothing) */
    for (int k = -1; k < q->nslots; k++) {
        slot *sl = k < 0 ? &q->shared : &q->slots[k];
        for (int l = 0; l <= SL_MLP_MAX_LAYERS; l++)
            if (k < 0 || q->recompute != RC_FULL || sl->res[l] != q->shared.res[l]) sl_k_free(t->be, sl->res[l]);
        for (int i = 0; i < q->ch[0].b1 - q->ch[0].b0 && !(k >= 0 && q->recompute == RC_FULL); i++)
            mg_block_free(t, &sl->blk[i], q->att);
        sl_k_free(t->be, sl->tok), sl_k_free(t->be, sl->tgt), sl_k_free(t->be, sl->tokl), sl_k_free(t->be, sl->dsend);
        if (sl->htok) sl_free(sl->htok), sl_free(sl->htgt);
    }
    void *p[] = {q->att, s->params, s->grads, s->optim, is_f32(q) ? NULL : s->w, is_f32(q) ? NULL : s->g, s->lnf, s->mf,
                 s->rf, s->dres[0], s->dres[1], s->dpart, s->rowmax, s->rowtgt, s->rowsum, s->dh, s->dqkv,
                 s->datty, s->dfc, s->zero_wpe, s->lin32, s->dlog16, s->vec32, s->logits, s->dlog, s->attn_work};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(t->be, p[i]);
    if (s->hlog) sl_free(s->hlog);
    sl_comm_destroy(s->tp), sl_comm_destroy(s->dp), sl_comm_destroy(q->pp);
    SL_CHECK_MPI(MPI_Comm_free(&q->tp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(&q->dp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(&q->pp_mpi));
    free(q->ops), free(q->slot_of), free(q->slots);
    free(q);
}

