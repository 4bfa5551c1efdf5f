/* gpt_pass.c — checkpoint.c's step on the GPT (--model gpt): the plan's segments over its
 * L + 2 layers (the embedding, the blocks, the final norm and LM head), each segment's
 * activations one block from the pool (gpt_plan.h counts them).
 *
 * Forward: a segment's input is its checkpoint, a buffer of its own; what its layers keep
 * besides is one block (sl_acts_map_input), given back after the segment's forward unless the
 * segment is the last, which is kept whole (PyTorch's checkpoint_sequential does the same: it
 * would be recomputed at once). The segment's output is the next one's checkpoint. Backward,
 * from the top: the last segment's block is there; every other segment's is taken again and
 * its forward recomputed from the checkpoint (phase recompute), its top layer skipping its
 * output (the next checkpoint, already back-propagated through). Each layer's dL/d(input) is
 * taken when its backward produces it and given back once the layer below has used it.
 *
 * Selective (Korthikanti et al. 2022): no block keeps its attention core (att, atty: the
 * s²-sized part); a block takes a core for its forward and gives it back after, and takes one
 * again before its backward, recomputed from the kept qkv (phase recompute). */
#include "state.h"

/* A buffer from the pool, or none for zero bytes (the embedding alone keeps nothing beside its
 * input). */
static void *take(ck *s, size_t bytes) { return bytes ? ck_pool_get(&s->pool, bytes) : NULL; }
static void give(ck *s, void *p)
{
    if (p) ck_pool_put(&s->pool, p);
}

static int is_block(const sl_mlp *m, int l) { return l >= 1 && l <= m->gpt.layers; }

/* Selective: block l's core taken (and, before its backward, recomputed) or given back. */
static void core_take(sl_train *t, int l, int backward)
{
    ck *s = t->state;
    if (!s->selective || !is_block(t->m, l)) return;
    sl_gpt_acts *a = &s->rep.acts.g;
    s->core[l] = take(s, sl_gpt_core_bytes(t->m, t->dtype, s->rows));
    sl_gpt_core_map(t->m, a, l, s->core[l]);
    if (!backward) return;
    const double t0 = sl_now();
    sl_gpt_core_recompute(t->m, a, l);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_RECOMPUTE, "recompute attention", t0, sl_now());
    s->recomputed += sl_gpt_flops_core(t->m, s->rows);
    if (s->corrupt) ck_spoil(t, a->blk[l - 1].att); /* for the test of the check itself */
}

static void core_give(sl_train *t, int l)
{
    ck *s = t->state;
    if (!s->selective || !is_block(t->m, l)) return;
    give(s, s->core[l]);
    s->core[l] = NULL;
    sl_gpt_core_map(t->m, &s->rep.acts.g, l, NULL);
}

/* Backward: before layer l its dL/d(input) (none for the embedding); after it, its dy. */
static const void *before_layer(sl_train *t, int l, int backward)
{
    ck *s = t->state;
    if (backward && l > 0) s->rep.acts.g.dres[l & 1] = take(s, sl_acts_io_bytes(t, l, s->rows));
    core_take(t, l, backward);
    return NULL; /* the layer's own parameters */
}

static void after_layer(sl_train *t, int l, int backward)
{
    ck *s = t->state;
    core_give(t, l);
    if (!backward) return;
    sl_gpt_acts *a = &s->rep.acts.g;
    give(s, a->dres[(l + 1) & 1]);
    a->dres[(l + 1) & 1] = NULL;
}

/* Segment [lo, hi)'s forward again from its checkpoint, on its block mapped without an output. */
static void recompute(sl_train *t, const void *params, int lo, int hi, void *body)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    for (int l = lo; l < hi; l++) {
        core_take(t, l, 0);
        const double t0 = sl_now();
        sl_acts_layer_forward(t, &s->rep.acts, l, sl_train_at(t, params, m->w_off[l]));
        sl_k_sync(t->be);
        sl_train_span(t, SL_PHASE_RECOMPUTE, "recompute", t0, sl_now());
        s->recomputed += sl_gpt_layer_flops(m, l, s->rows) - (l == hi - 1 && is_block(m, l) ? sl_gpt_flops_out(m, s->rows) : 0);
        core_give(t, l);
    }
    if (s->corrupt && body) ck_spoil(t, body); /* for the test of the check itself */
}

void ck_gpt_pass(sl_train *t, const ck_plan *p, const void *params, void *grads)
{
    ck *s = t->state;
    const sl_mlp *m = t->m;
    sl_acts *a = &s->rep.acts;
    const int N = m->nlayers, S = p->nseg, rows = s->rows;
    const int keep = s->selective ? SL_GPT_KEEP_SELECTIVE : SL_GPT_KEEP_ALL;
    const sl_layer_hooks hooks = {.before = before_layer, .after = after_layer};
    void *ckpt[SL_MLP_MAX_LAYERS + 1], *body[SL_MLP_MAX_LAYERS + 1];
    size_t in[SL_MLP_MAX_LAYERS + 1] = {0}, rest[SL_MLP_MAX_LAYERS + 1] = {0};
    for (int j = 0; j < S; j++) {
        in[j] = sl_acts_range_bytes(t, p->start[j], p->start[j + 1], rows, 0);
        rest[j] = sl_acts_range_bytes(t, p->start[j], p->start[j + 1], rows, keep) - in[j];
    }
    a->g.selective = s->selective;

    ckpt[0] = take(s, in[0]); /* the first checkpoint: the tokens */
    sl_train_load_tokens(t, t->lo, rows, ckpt[0], a->g.tgt);
    a->g.seq0 = sl_train_sample(t, t->lo); /* dropout's numbering */
    void *dout = NULL;
    for (int j = 0; j < S; j++) {
        body[j] = take(s, rest[j]);
        void *out = NULL;
        if (j < S - 1) out = ckpt[j + 1] = take(s, in[j + 1]);
        else dout = a->g.dres[N & 1] = take(s, sl_acts_io_bytes(t, N, rows)); /* dL/d(final norm output) */
        sl_acts_map_input(t, a, p->start[j], p->start[j + 1], rows, ckpt[j], body[j], out, dout);
        sl_acts_forward(t, a, params, p->start[j], p->start[j + 1], &hooks);
        if (j < S - 1) give(s, body[j]);
    }
    sl_acts_loss(t, a); /* the head's forward computed it */
    void *dy = dout;
    for (int j = S - 1; j >= 0; j--) { /* each segment from the top, dy its output's gradient */
        if (j < S - 1) {
            body[j] = take(s, rest[j]);
            sl_acts_map_input(t, a, p->start[j], p->start[j + 1], rows, ckpt[j], body[j], NULL, NULL);
            recompute(t, params, p->start[j], p->start[j + 1], body[j]);
        }
        dy = sl_acts_backward_range(t, a, params, grads, dy, p->start[j], p->start[j + 1], &hooks);
        give(s, body[j]);
        give(s, ckpt[j]);
    }
}
