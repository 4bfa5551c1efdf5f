/* tp_gpt_slices.c — which elements of the GPT's flat vector a tensor-parallel rank holds and where
 * in its own vector (tp_gpt.h): the layout, its runs, the initial weights taken from the same
 * flat initialisation as the serial model's (so that the check compares weights), and the
 * gather of a group's vectors back into the flat one. */
#include <string.h>

#include "tp_gpt.h"

void mg_layout(mg *s)
{
    const size_t C = (size_t)s->C, Cl = (size_t)s->Cl;
    const size_t size[SL_GPT_NPARAMS] = {
        [SL_GPT_LN1W] = C, [SL_GPT_LN1B] = C, [SL_GPT_WQKV] = 3 * Cl * C, [SL_GPT_BQKV] = 3 * Cl,
        [SL_GPT_WPROJ] = C * Cl, [SL_GPT_BPROJ] = C, [SL_GPT_LN2W] = C, [SL_GPT_LN2B] = C,
        [SL_GPT_WFC] = 4 * Cl * C, [SL_GPT_BFC] = 4 * Cl, [SL_GPT_WFCPROJ] = C * 4 * Cl, [SL_GPT_BFCPROJ] = C};
    s->boff[0] = 0;
    for (int i = 0; i < SL_GPT_NPARAMS; i++) s->boff[i + 1] = s->boff[i] + size[i];
    s->lw[0] = 0;
    s->lw[1] = ((size_t)s->Vl + 1) * C + (size_t)s->maxT * C; /* wte rows, the zero row, wpe */
    for (int l = 2; l <= s->L + 1; l++) s->lw[l] = s->lw[l - 1] + s->boff[SL_GPT_NPARAMS];
    s->lw[s->L + 2] = s->lw[s->L + 1] + 2 * C + (size_t)s->Vl * C; /* lnf, whead rows */
    s->np = s->lw[s->L + 2];
}

void mg_runs(const sl_mlp *m, const mg *s, int r, mg_run_fn fn, void *arg)
{
    const size_t C = (size_t)s->C, Cl = (size_t)s->Cl, VlC = (size_t)s->Vl * C, c0 = (size_t)r * Cl;
    fn((size_t)r * VlC, 0, VlC, 0, arg);                                          /* wte rows */
    fn((size_t)s->V * C, VlC + C, (size_t)s->maxT * C, 1, arg);                     /* wpe */
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(s->C, off);
    for (int l = 1; l <= s->L; l++) {
        const size_t F = m->w_off[l], Lb = s->lw[l];
        static const int whole[] = {SL_GPT_LN1W, SL_GPT_LN1B, SL_GPT_BPROJ, SL_GPT_LN2W, SL_GPT_LN2B, SL_GPT_BFCPROJ};
        for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
            fn(F + off[whole[i]], Lb + s->boff[whole[i]], off[whole[i] + 1] - off[whole[i]], 1, arg);
        for (size_t j = 0; j < 3; j++) { /* q, k, v: the rows and biases of this rank's heads */
            fn(F + off[SL_GPT_WQKV] + (j * C + c0) * C, Lb + s->boff[SL_GPT_WQKV] + j * Cl * C, Cl * C, 0, arg);
            fn(F + off[SL_GPT_BQKV] + j * C + c0, Lb + s->boff[SL_GPT_BQKV] + j * Cl, Cl, 0, arg);
        }
        for (size_t i = 0; i < C; i++) /* Wproj's columns of those heads, one run per row */
            fn(F + off[SL_GPT_WPROJ] + i * C + c0, Lb + s->boff[SL_GPT_WPROJ] + i * Cl, Cl, 0, arg);
        fn(F + off[SL_GPT_WFC] + 4 * c0 * C, Lb + s->boff[SL_GPT_WFC], 4 * Cl * C, 0, arg);
        fn(F + off[SL_GPT_BFC] + 4 * c0, Lb + s->boff[SL_GPT_BFC], 4 * Cl, 0, arg);
        for (size_t i = 0; i < C; i++) /* Wfcproj's columns of this rank's inner features */
            fn(F + off[SL_GPT_WFCPROJ] + i * 4 * C + 4 * c0, Lb + s->boff[SL_GPT_WFCPROJ] + i * 4 * Cl, 4 * Cl, 0,
               arg);
    }
    const size_t F = m->w_off[s->L + 1], Lh = s->lw[s->L + 1];
    fn(F, Lh, 2 * C, 1, arg);                             /* lnf */
    fn(F + 2 * C + (size_t)r * VlC, Lh + 2 * C, VlC, 0, arg); /* whead rows */
}

typedef struct init_arg {
    const sl_mlp *m;
    uint64_t seed;
    float *local;
} init_arg;

static void init_run(size_t full, size_t local, size_t count, int replicated, void *arg)
{
    (void)replicated;
    const init_arg *a = arg;
    sl_mlp_init_params(a->m, a->seed, full, count, a->local + local); /* element e from (seed, e) alone */
}

void mg_init_params(const sl_mlp *m, mg *s, uint64_t seed)
{
    sl_k_memset0(m->be, s->params, s->np * sizeof(float)); /* the zero row */
    init_arg a = {m, seed, s->params};
    mg_runs(m, s, s->tr, init_run, &a);
    sl_k_sync(m->be);
}

typedef struct place_arg {
    const float *local;
    float *full;
} place_arg;

static void place_run(size_t full, size_t local, size_t count, int replicated, void *arg)
{
    (void)replicated;
    const place_arg *a = arg;
    memcpy(a->full + full, a->local + local, count * sizeof(float));
}

void mg_gather(sl_train *t, float *full)
{
    const mg *s = t->state;
    if (s->rep != 0) return; /* the replicas are checked bit for bit by the driver */
    float *mine = sl_alloc(SL_MEM_OTHER, s->np * sizeof(float));
    sl_k_memcpy(t->be, mine, s->params, s->np * sizeof(float), SL_K_D2H);
    float *all = s->tr == 0 ? sl_alloc(SL_MEM_OTHER, (size_t)s->t * s->np * sizeof(float)) : NULL;
    if (s->np > (size_t)1 << 30) SL_FATAL("megatron_mlp: %zu local parameters: too many to gather", s->np);
    SL_CHECK_MPI(MPI_Gather(mine, (int)s->np, MPI_FLOAT, all, (int)s->np, MPI_FLOAT, 0, s->tp_mpi));
    if (s->tr == 0)
        for (int r = 0; r < s->t; r++) {
            place_arg a = {all + (size_t)r * s->np, full};
            mg_runs(t->m, s, r, place_run, &a);
        }
    sl_free(mine);
    if (all) sl_free(all);
}
