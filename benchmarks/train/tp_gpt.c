/* tp_gpt.c — megatron_mlp --model gpt (and parallel3d's blocks): one rank's step of Megatron-LM's tensor-parallel GPT
 * (Shoeybi et al. 2019, section 3), plain variant, built from the GPT kernels (kernels/gpt.h).
 *
 * In a t-rank group each rank holds the slices of tp_gpt.h. Per block, with the conjugate
 * operators f (identity forward, all-reduce backward) and g (all-reduce forward, identity
 * backward) around each half:
 *   attention  ln1 (replicated) -> f -> QKV of this rank's NH/t heads (column-parallel) -> the
 *              causal attention of those heads alone -> their rows of the output projection
 *              (row-parallel: a partial sum of all of it) -> g -> bproj once -> residual
 *   MLP        ln2 -> f -> fc (column-parallel) -> GeLU -> fcproj (row-parallel) -> g ->
 *              bfcproj once -> residual
 * four all-reduces of N·C elements (N = b·s tokens) per block and step: two forward (g), two
 * backward (f). The layer norms, residual stream and row-parallel biases are whole on every
 * rank of the group and compute the same values, so their gradients need no sum in the group.
 * Vocabulary-parallel embedding: each rank looks its V/t rows up (a token it does not hold
 * reads a row of zeros), the partial lookups are summed by one all-reduce of N·C, then the
 * position embedding is added. Vocabulary-parallel LM head with Megatron-LM's parallel
 * cross-entropy: each rank's logits over its V/t words, and per token three all-reduces of one
 * f32 value (the max, the target's logit, the sum of exponentials), so the N·V logits are never
 * gathered; the head's input gradient is a partial sum over the vocabulary: one all-reduce of
 * N·C (its f). Across replicas, each rank's gradients are summed over the d ranks holding the
 * same slices. Every dtype: 16-bit weights and activations with f32 accumulation, an f32 master
 * copy and the loss scaler, as the serial GPT training (train_gpt.c) the check compares with.
 * Dropout (--dropout): every mask numbered as the serial model numbers it (gpt_model.c), the
 * attention probabilities' by the global head index (attention() below), so that the run draws
 * serial training's masks.
 *
 * Sequence parallelism (seqpar; Korthikanti et al. 2022, "Reducing Activation Recomputation in
 * Large Transformer Models", section 4.2.2): outside the tensor-parallel regions a rank holds
 * positions [r·s/t, (r+1)·s/t) of each sequence, so the layer norms, residual adds, row-parallel
 * biases and dropout (masks numbered by global position: drop_tokens) run on N/t tokens and keep
 * N/t. Each g all-reduce becomes a reduce-scatter (the row-parallel output summed and split by
 * positions) and each f an all-gather of the layer norm's output before the column-parallel
 * GEMM; in backward their conjugates (all-gather of the output gradient, reduce-scatter of the
 * input gradient), and each layer norm's output is all-gathered again for the weight gradient
 * (only the shard was kept). The embedding's all-reduce becomes a reduce-scatter forward and an
 * all-gather backward; the head gathers the final norm's output and reduce-scatters its
 * gradient. The layer norms' gradients, each rank's over its own tokens, are summed in one
 * all-reduce (norms_allreduce); the row-parallel biases' come from the gathered gradient whole.
 *
 * --no-vocab-parallel (the counter-example): the head's N·V/t logits all-gathered into the
 * whole N·V on every rank, the serial cross-entropy on them (gathered_xent). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "tp_gpt.h"
#include "tp_groups.h"

/* Pieces ----------------------------------------------------------------------------------- */

static int is_f32(const mg *s) { return s->dt == SL_F32; }
static void *at(const mg *s, const void *p, size_t i) { return (char *)p + i * sl_dtype_size(s->dt); }
/* Parameter i of layer l's local block (dt), and its f32 gradient. */
static void *P(const mg *s, int l, int i) { return at(s, s->w, s->lw[l] + s->boff[i]); }
static float *G(const mg *s, int l, int i) { return s->grads + s->lw[l] + s->boff[i]; }

/* Dropout site `site` of layer l over whole tensors of per_seq elements a sequence (the
 * embedding's and the residual adds' (N,C)), numbered as the serial model numbers them
 * (gpt_model.c): from the global number of the replica's first sequence of the step. */
static sl_dropout drop_at(sl_train *t, int l, int site, size_t per_seq)
{
    const sl_gpt_dims *g = &t->m->gpt;
    sl_dropout d = {g->dropout, 0, 0};
    if (d.p > 0) {
        d.key = sl_dropout_key(g->dropout_seed, l, site);
        d.first = sl_train_sample(t, t->lo) * per_seq;
    }
    return d;
}

/* A layer norm's gain and bias (2C consecutive, dt) as f32. */
static const float *ln_params(sl_train *t, mg *s, const void *wb)
{
    return sl_train_f32(t, wb, s->vec32, 2 * (size_t)s->C);
}

/* out (N,OC) = inp (N,K) W^T (+ b, where given), summed in f32 and rounded into dt once. */
static void lin_fwd(sl_train *t, mg *s, int K, int OC, const void *inp, const void *W, const void *b, void *out)
{
    const int N = s->N;
    float *r = sl_train_result(t, out, s->lin32);
    sl_k_gemm(t->be, 0, 1, N, OC, K, 1.0f, inp, K, W, K, 0.0f, r, OC, s->dt, SL_F32);
    if (b) sl_k_bias_add(t->be, N, OC, r, sl_train_f32(t, b, s->vec32, (size_t)OC));
    sl_train_round(t, r, out, (size_t)N * OC);
}

/* z (Nl,C) += b: the row-parallel bias, once, after its all-reduce (or reduce-scatter). */
static void bias_after(sl_train *t, mg *s, void *z, const void *b)
{
    const size_t NC = (size_t)s->Nl * s->C;
    float *r = sl_train_f32(t, z, s->lin32, NC);
    sl_k_bias_add(t->be, s->Nl, s->C, r, sl_train_f32(t, b, s->vec32, (size_t)s->C));
    sl_train_round(t, r, z, NC);
}

/* Rows [r0, r1) of dW (OC,K) += dout^T inp (f32). */
static void weight_grad_rows(sl_train *t, mg *s, int K, int OC, const void *dout, const void *inp, float *dW, int r0,
                             int r1)
{
    if (r1 > r0)
        sl_k_gemm(t->be, 1, 0, r1 - r0, K, s->N, 1.0f, at(s, dout, (size_t)r0), OC, inp, K, 1.0f, dW + (size_t)r0 * K,
                  K, s->dt, SL_F32);
}

/* db (OC) += the column sums of dout (f32). */
static void bias_grad(sl_train *t, mg *s, int OC, const void *dout, float *db)
{
    sl_k_bias_grad(t->be, s->N, OC, sl_train_f32(t, dout, s->lin32, (size_t)s->N * OC), db);
}

/* dinp (N,K) = dout W (dt). */
static void input_grad(sl_train *t, mg *s, int K, int OC, const void *dout, const void *W, void *dinp)
{
    sl_k_gemm(t->be, 0, 0, s->N, K, OC, 1.0f, dout, OC, W, K, 0.0f, dinp, K, s->dt, s->dt);
}

/* dW (OC,K) += dout^T inp, db (OC) += the column sums of dout (f32); dinp (N,K) = dout W (dt). */
static void lin_bwd(sl_train *t, mg *s, int K, int OC, const void *dout, const void *inp, const void *W, void *dinp,
                    float *dW, float *db)
{
    weight_grad_rows(t, s, K, OC, dout, inp, dW, 0, OC);
    bias_grad(t, s, OC, dout, db);
    input_grad(t, s, K, OC, dout, W, dinp);
}

/* The attention of this rank's NH/t heads, forward or backward, with dropout on the
 * probabilities numbered as the serial model's: element (b, h, t, s) of the global (B, NH, T, T)
 * tensor is its first + ((b·NH + h)·T + t)·T + s, and this rank's heads are h = tr·NH/t + j, so
 * each sequence's NH/t·T·T probabilities are one run of that numbering: one call a sequence,
 * each with its run's first element. Without dropout, one call for all. */
static void attention(sl_train *t, mg *s, int l, const void *datty, void *dqkv)
{
    mg_block *k = &s->blk[l - 1];
    const int T = s->T, Cl = s->Cl;
    const size_t tt = (size_t)T * T;
    sl_dropout d = drop_at(t, l, SL_DROP_ATTN, (size_t)s->NH * tt);
    if (!(d.p > 0)) {
        if (datty) sl_k_attention_backward(t->be, s->dt, s->B, T, Cl, s->NHl, datty, k->qkv, k->att, dqkv, s->attn_work);
        else sl_k_attention_forward(t->be, s->dt, s->B, T, Cl, s->NHl, k->qkv, k->att, k->atty, s->attn_work);
        return;
    }
    const uint64_t first = d.first + (uint64_t)s->tr * s->NHl * tt;
    for (int b = 0; b < s->B; b++) {
        const size_t tok = (size_t)b * T, att = (size_t)b * s->NHl * tt;
        d.first = first + (uint64_t)b * s->NH * tt;
        if (datty)
            sl_k_attention_backward_drop(t->be, s->dt, 1, T, Cl, s->NHl, at(s, datty, tok * Cl), at(s, k->qkv, tok * 3 * Cl),
                                         at(s, k->att, att), at(s, dqkv, tok * 3 * Cl), s->attn_work, &d);
        else
            sl_k_attention_forward_drop(t->be, s->dt, 1, T, Cl, s->NHl, at(s, k->qkv, tok * 3 * Cl), at(s, k->att, att),
                                        at(s, k->atty, tok * Cl), s->attn_work, &d);
    }
}

/* Communication ---------------------------------------------------------------------------- */

/* The group's (region < MG_DP or > MG_DP) or the replicas' collective of rc, begun at t0 after a
 * sync: blocking, its bytes counted under region in the driver's steps. */
static void counted(sl_train *t, mg *s, int rc, int region, const char *name, double t0, unsigned long long b0)
{
    sl_comm *c = region == MG_DP ? s->dp : s->tp;
    sl_train_coll_ok(rc, name);
    sl_train_blocking(t, name, t0);
    if (!s->counting) return;
    s->sent[region] += (double)(sl_comm_bytes_sent(c) - b0);
    if (region != MG_DP) s->tp_colls++;
}

/* An all-reduce of count elements of dtype in place, in the group or between replicas (region
 * MG_DP). A group or a set of replicas of one rank communicates nothing. */
static void allreduce(sl_train *t, mg *s, void *v, size_t count, sl_dtype dtype, sl_redop op, int region,
                      const char *name)
{
    sl_comm *c = region == MG_DP ? s->dp : s->tp;
    if ((region == MG_DP ? s->d : s->t) == 1) return;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(c);
    const double t0 = sl_now();
    counted(t, s, sl_coll_allreduce(c, v, v, count, dtype, op), region, name, t0, b0);
}

/* Sequence parallelism ------------------------------------------------------------------------
 * Between the tensor-parallel regions a rank holds positions [p0, p0 + Tl) of each of the B
 * sequences, (B, Tl, C): Nl = B·Tl tokens. The collectives move rank-major blocks, (t, B, Tl, C),
 * so a gathered (B, T, C) is that block permuted (one strided copy, through s->stage). */

/* The shards (Nl, C) of the group into full (N, C) (all-gather); returns full, or the shard
 * itself in a group of one. */
static const void *seq_gather(sl_train *t, mg *s, const void *shard, void *full, int region, const char *name)
{
    if (s->t == 1) return shard;
    const size_t count = (size_t)s->Nl * s->C, slab = (size_t)s->Tl * s->C;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(s->tp);
    const double t0 = sl_now();
    counted(t, s, sl_coll_allgather(s->tp, shard, s->stage, count, s->dt), region, name, t0, b0);
    const double c0 = sl_now();
    sl_k_copy_block_cast(t->be, s->t, s->B, (int)slab, s->stage, s->dt, count, slab, full, s->dt, slab,
                         (size_t)s->T * s->C);
    sl_train_compute_span(t, "sequence parallel: permute", c0);
    return full;
}

/* The partial sums full (N, C) of the group reduced, each rank keeping its shard (Nl, C)
 * (reduce-scatter); in a group of one a copy. full is not kept. */
static void seq_scatter(sl_train *t, mg *s, const void *full, void *shard, int region, const char *name)
{
    const size_t count = (size_t)s->Nl * s->C, slab = (size_t)s->Tl * s->C;
    if (s->t == 1) {
        sl_k_memcpy(t->be, shard, full, count * sl_dtype_size(s->dt), SL_K_D2D);
        return;
    }
    const double c0 = sl_now();
    sl_k_copy_block_cast(t->be, s->t, s->B, (int)slab, full, s->dt, slab, (size_t)s->T * s->C, s->stage, s->dt, count,
                         slab);
    sl_train_compute_span(t, "sequence parallel: permute", c0);
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(s->tp);
    const double t0 = sl_now();
    counted(t, s, sl_coll_reduce_scatter(s->tp, s->stage, shard, count, s->dt, SL_OP_SUM), region, name, t0, b0);
}

/* Dropout site `site` of layer l on this rank's tokens (Nl, C), x into y: numbered by each
 * element's global position (drop_at), so one call per sequence where the rank holds a slab of
 * it. Returns whether a mask was applied (p > 0). */
static int drop_tokens(sl_train *t, mg *s, int l, int site, const void *x, void *y)
{
    sl_dropout d = drop_at(t, l, site, (size_t)s->T * s->C);
    if (!(d.p > 0)) return 0;
    const size_t slab = (size_t)s->Tl * s->C;
    if (s->Tl == s->T) {
        sl_k_dropout(t->be, s->dt, (size_t)s->Nl * s->C, x, y, &d);
        return 1;
    }
    const uint64_t first = d.first + (uint64_t)s->p0 * s->C;
    for (int b = 0; b < s->B; b++) {
        d.first = first + (uint64_t)b * s->T * s->C;
        sl_k_dropout(t->be, s->dt, slab, at(s, x, (size_t)b * slab), at(s, y, (size_t)b * slab), &d);
    }
    return 1;
}

/* The backward of a column-parallel layer (dout (N,OC) this rank's columns, inp (N,K) whole)
 * and f, the all-reduce of its partial input gradient dinp (N,K), named name. plain: the
 * gradients, then the all-reduce. overlap (Megatron-LM's asynchronous gradient all-reduce): dinp
 * first, its all-reduce started non-blocking, then dW computed in pieces of its rows, testing
 * the all-reduce between them so that the suite's own algorithms advance while the GEMMs run,
 * then db, then the wait. dW and db (may be NULL: the head has no bias) accumulate in f32.
 * Sequence parallel: f's backward is a reduce-scatter instead, into s->dshard (this rank's
 * tokens). Returns the summed input gradient: dinp, or s->dshard. */
static const void *colpar_backward(sl_train *t, mg *s, int K, int OC, const void *dout, const void *inp, const void *W,
                            void *dinp, float *dW, float *db, int region, const char *name, const char *what)
{
    const size_t count = (size_t)s->N * K;
    double t0 = sl_now();
    if (!s->overlap || s->t == 1) {
        weight_grad_rows(t, s, K, OC, dout, inp, dW, 0, OC);
        if (db) bias_grad(t, s, OC, dout, db);
        input_grad(t, s, K, OC, dout, W, dinp);
        sl_train_compute_span(t, what, t0);
        if (s->sp) {
            seq_scatter(t, s, dinp, s->dshard, region, name);
            return s->dshard;
        }
        allreduce(t, s, dinp, count, s->dt, SL_OP_SUM, region, name);
        return dinp;
    }
    input_grad(t, s, K, OC, dout, W, dinp);
    sl_train_compute_span(t, what, t0);
    const unsigned long long b0 = sl_comm_bytes_sent(s->tp);
    t0 = sl_now();
    sl_coll_req *req = NULL;
    sl_train_coll_ok(sl_coll_iallreduce(s->tp, dinp, dinp, count, s->dt, SL_OP_SUM, &req), name);
    sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
    int done = 0;
    double t_done = 0;
    enum { PIECES = 4 };
    for (int p = 0; p < PIECES; p++) {
        double c0 = sl_now();
        weight_grad_rows(t, s, K, OC, dout, inp, dW, (int)((long long)OC * p / PIECES),
                         (int)((long long)OC * (p + 1) / PIECES));
        sl_train_compute_span(t, what, c0);
        if (done) continue;
        c0 = sl_now();
        sl_train_coll_ok(sl_coll_test(req, &done), "sl_coll_test");
        const double c1 = sl_now();
        sl_train_record(t, SL_PHASE_EXPOSED, c1 - c0);
        if (done) t_done = c1;
    }
    if (db) {
        const double c0 = sl_now();
        bias_grad(t, s, OC, dout, db);
        sl_train_compute_span(t, what, c0);
    }
    const double w0 = sl_now();
    sl_train_coll_ok(sl_coll_wait(req), "sl_coll_wait");
    const double w1 = sl_now();
    sl_train_record(t, SL_PHASE_EXPOSED, w1 - w0);
    sl_train_span(t, SL_PHASE_COMM, name, t0, done ? t_done : w1);
    if (s->counting) {
        s->sent[region] += (double)(sl_comm_bytes_sent(s->tp) - b0);
        s->tp_colls++;
        s->tp_overlapped++;
    }
    return dinp;
}

/* The host view of n floats of backend memory p: p itself on the CPU, else copied into h. */
static float *host_of(sl_train *t, const float *p, float *h, size_t n)
{
    if (t->be == SL_BACKEND_CPU) return (float *)p;
    sl_k_memcpy(t->be, h, p, n * sizeof(float), SL_K_D2H);
    return h;
}

static void to_backend(sl_train *t, float *p, const float *h, size_t n)
{
    if ((const float *)p != h) sl_k_memcpy(t->be, p, h, n * sizeof(float), SL_K_H2D);
}

/* Megatron-LM's vocabulary-parallel cross-entropy on this rank's logits (N, Vl) f32: the row
 * max, the target's logit (held by one rank, 0 on the others) and the sum of exponentials each
 * all-reduced once over the group (N f32 values); then every rank has each token's loss, and
 * its own columns of dlogits = norm·scale·(softmax − onehot) (s->dlog, f32). Returns the loss
 * summed over tokens times norm (unscaled). The arithmetic is the serial kernel's
 * (cpu/loss.c): exponentials and their sum in double, the max and the logits f32. */
static double parallel_xent(sl_train *t, mg *s, float norm, float scale)
{
    const int N = s->N, Vl = s->Vl, v0 = s->tr * Vl;
    const size_t NV = (size_t)N * Vl;
    float *hz = host_of(t, s->logits, s->hlog, NV);
    float *hd = t->be == SL_BACKEND_CPU ? s->dlog : s->hlog + NV;
    float *hrow = t->be == SL_BACKEND_CPU ? NULL : s->hlog + 2 * NV; /* max, target, sum: 3N */
    float *hm = hrow ? hrow : s->rowmax, *ht = hrow ? hrow + N : s->rowtgt, *hs = hrow ? hrow + 2 * N : s->rowsum;
    for (int i = 0; i < N; i++) {
        const float *z = hz + (size_t)i * Vl;
        float m = z[0];
        for (int j = 1; j < Vl; j++) m = z[j] > m ? z[j] : m;
        hm[i] = m;
        const int y = s->htgt[i] - v0;
        ht[i] = y >= 0 && y < Vl ? z[y] : 0.0f;
    }
    to_backend(t, s->rowmax, hm, (size_t)N);
    to_backend(t, s->rowtgt, ht, (size_t)N);
    allreduce(t, s, s->rowmax, (size_t)N, SL_F32, SL_OP_MAX, MG_HEAD, "xent: allreduce max");
    allreduce(t, s, s->rowtgt, (size_t)N, SL_F32, SL_OP_SUM, MG_HEAD, "xent: allreduce target logit");
    hm = host_of(t, s->rowmax, hm, (size_t)N);
    ht = host_of(t, s->rowtgt, ht, (size_t)N);
    for (int i = 0; i < N; i++) {
        const float *z = hz + (size_t)i * Vl;
        float *dz = hd + (size_t)i * Vl;
        double se = 0;
        for (int j = 0; j < Vl; j++) {
            const double e = exp((double)z[j] - hm[i]);
            se += e;
            dz[j] = (float)e;
        }
        hs[i] = (float)se;
    }
    to_backend(t, s->rowsum, hs, (size_t)N);
    allreduce(t, s, s->rowsum, (size_t)N, SL_F32, SL_OP_SUM, MG_HEAD, "xent: allreduce sum exp");
    hs = host_of(t, s->rowsum, hs, (size_t)N);
    double loss = 0;
    const float ns = norm * scale;
    for (int i = 0; i < N; i++) {
        const double inv = 1.0 / hs[i];
        const int y = s->htgt[i] - v0;
        float *dz = hd + (size_t)i * Vl;
        for (int j = 0; j < Vl; j++) dz[j] = ns * (float)(dz[j] * inv - (j == y));
        loss += hm[i] + log((double)hs[i]) - ht[i];
    }
    to_backend(t, s->dlog, hd, NV);
    return norm * loss;
}

/* Layers ------------------------------------------------------------------------------------- */

/* The step's tokens, and each as a row of this rank's table: its own V/t words at 0..Vl-1,
 * every other word at Vl, the row of zeros. */
static void load(sl_train *t, mg *s)
{
    sl_train_load_tokens(t, t->lo, s->B, s->tok, s->tgt);
    const double t0 = sl_now();
    const size_t bytes = (size_t)s->N * sizeof(int32_t);
    sl_k_memcpy(t->be, s->htok, s->tok, bytes, SL_K_D2H);
    sl_k_memcpy(t->be, s->htgt, s->tgt, bytes, SL_K_D2H);
    int32_t *loc = malloc(bytes ? bytes : 1);
    if (!loc) SL_FATAL("out of memory");
    for (int i = 0; i < s->N; i++) {
        const int32_t v = s->htok[i] - s->tr * s->Vl;
        loc[i] = v >= 0 && v < s->Vl ? v : s->Vl;
    }
    sl_k_memcpy(t->be, s->tokl, loc, bytes, SL_K_H2D);
    sl_k_sync(t->be);
    free(loc);
    sl_train_span(t, SL_PHASE_DATA, "data", t0, sl_now());
}

/* The lookup of this rank's V/t rows for every token of the replica, completed by an all-reduce
 * (sequence parallel: a reduce-scatter, each rank keeping its positions), then the position
 * embedding and dropout on the tokens held. */
static void embedding_forward(sl_train *t, mg *s)
{
    const size_t C = (size_t)s->C, slab = (size_t)s->Tl * C;
    void *look = s->sp ? s->dpart : s->res[1];
    double t0 = sl_now();
    sl_k_embedding_forward(t->be, s->dt, s->B, s->T, s->C, s->Vl + 1, s->tokl, s->w, s->zero_wpe, look);
    sl_train_compute_span(t, "embedding", t0);
    if (s->sp) seq_scatter(t, s, look, s->res[1], MG_EMB, "embedding: reduce-scatter lookup");
    else allreduce(t, s, s->res[1], (size_t)s->N * C, s->dt, SL_OP_SUM, MG_EMB, "embedding: allreduce lookup");
    t0 = sl_now();
    const void *wpe = at(s, s->w, ((size_t)s->Vl + 1 + s->p0) * C);
    for (int b = 0; b < s->B; b++) sl_k_add(t->be, s->dt, slab, wpe, at(s, s->res[1], (size_t)b * slab));
    drop_tokens(t, s, 0, SL_DROP_EMBED, s->res[1], s->res[1]);
    sl_train_compute_span(t, "embedding", t0);
}

/* res[l] -> res[l + 1], on the tokens held (Nl): the layer norms, the row-parallel biases, the
 * residual adds and dropout; the column-parallel GEMMs and the attention on all N tokens of
 * the replica. Plain: g is an all-reduce of the row-parallel output. Sequence parallel: each
 * layer norm's output is all-gathered before its column-parallel GEMM (f forward) and the
 * row-parallel output reduce-scattered (g forward). */
static void block_forward(sl_train *t, mg *s, int l)
{
    mg_block *k = &s->blk[l - 1];
    const void *x = s->res[l];
    void *out = s->res[l + 1];
    const int N = s->N, Nl = s->Nl, C = s->C, Cl = s->Cl;
    const size_t NC = (size_t)N * C, NlC = (size_t)Nl * C;
    double t0 = sl_now();
    const float *ln = ln_params(t, s, P(s, l, SL_GPT_LN1W));
    sl_k_layernorm_forward(t->be, s->dt, Nl, C, x, ln, ln + C, k->ln1, k->m1, k->r1);
    sl_train_compute_span(t, "attention", t0);
    const void *in = s->sp ? seq_gather(t, s, k->ln1, s->full, MG_BLOCKS, "f: all-gather ln1") : k->ln1;
    t0 = sl_now();
    lin_fwd(t, s, C, 3 * Cl, in, P(s, l, SL_GPT_WQKV), P(s, l, SL_GPT_BQKV), k->qkv);
    attention(t, s, l, NULL, NULL);
    void *part = s->sp ? s->dpart : k->h;
    lin_fwd(t, s, Cl, C, k->atty, P(s, l, SL_GPT_WPROJ), NULL, part);
    sl_train_compute_span(t, "attention", t0);
    if (s->sp) seq_scatter(t, s, part, k->h, MG_BLOCKS, "g: reduce-scatter attention");
    else allreduce(t, s, k->h, NC, s->dt, SL_OP_SUM, MG_BLOCKS, "g: allreduce attention");
    t0 = sl_now();
    bias_after(t, s, k->h, P(s, l, SL_GPT_BPROJ));
    drop_tokens(t, s, l, SL_DROP_RESID_ATTN, k->h, k->h);
    sl_k_residual_forward(t->be, s->dt, NlC, x, k->h, k->h);
    ln = ln_params(t, s, P(s, l, SL_GPT_LN2W));
    sl_k_layernorm_forward(t->be, s->dt, Nl, C, k->h, ln, ln + C, k->ln2, k->m2, k->r2);
    sl_train_compute_span(t, "mlp", t0);
    in = s->sp ? seq_gather(t, s, k->ln2, s->full, MG_BLOCKS, "f: all-gather ln2") : k->ln2;
    t0 = sl_now();
    lin_fwd(t, s, C, 4 * Cl, in, P(s, l, SL_GPT_WFC), P(s, l, SL_GPT_BFC), k->fc);
    sl_k_gelu_forward(t->be, s->dt, (size_t)N * 4 * Cl, k->fc, k->ge);
    part = s->sp ? s->dpart : out;
    lin_fwd(t, s, 4 * Cl, C, k->ge, P(s, l, SL_GPT_WFCPROJ), NULL, part);
    sl_train_compute_span(t, "mlp", t0);
    if (s->sp) seq_scatter(t, s, part, out, MG_BLOCKS, "g: reduce-scatter mlp");
    else allreduce(t, s, out, NC, s->dt, SL_OP_SUM, MG_BLOCKS, "g: allreduce mlp");
    t0 = sl_now();
    bias_after(t, s, out, P(s, l, SL_GPT_BFCPROJ));
    drop_tokens(t, s, l, SL_DROP_RESID_MLP, out, out);
    sl_k_residual_forward(t->be, s->dt, NlC, k->h, out, out);
    sl_train_compute_span(t, "residual", t0);
}

/* --no-vocab-parallel: the group's logits (N, V/t) each all-gathered into the full (N, V) on
 * every rank, the serial model's cross-entropy on them (every rank computes all of it), and
 * this rank's columns of dlogits kept. Returns the loss (unscaled). */
static double gathered_xent(sl_train *t, mg *s, float norm, float scale)
{
    const int N = s->N, Vl = s->Vl, V = s->V;
    const size_t NVl = (size_t)N * Vl;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(s->tp);
    double t0 = sl_now();
    counted(t, s, sl_coll_allgather(s->tp, s->logits, s->gstage, NVl, SL_F32), MG_HEAD, "head: all-gather logits",
            t0, b0);
    t0 = sl_now();
    sl_k_copy_block_cast(t->be, s->t, N, Vl, s->gstage, SL_F32, NVl, (size_t)Vl, s->glog, SL_F32, (size_t)Vl,
                         (size_t)V);
    /* dlogits (N, V) into the rank-major buffer, free now; this rank's columns into s->dlog */
    const double loss = sl_k_softmax_xent(t->be, N, V, s->glog, s->tgt, s->gstage, norm * scale);
    sl_k_copy_block_cast(t->be, 1, N, Vl, s->gstage + (size_t)s->tr * Vl, SL_F32, 0, (size_t)V, s->dlog, SL_F32, 0,
                         (size_t)Vl);
    sl_train_compute_span(t, "head: cross-entropy (whole vocabulary)", t0);
    return loss / scale; /* scale is a power of two: exact */
}

/* The head's forward and backward at once (the logits are not kept): final norm (on the tokens
 * held; sequence parallel: its output all-gathered), this rank's logits, the parallel
 * cross-entropy (or, --no-vocab-parallel, the gathered one), dlogits into dwhead and the
 * partial dL/d(lnf), its all-reduce (sequence parallel: reduce-scatter), and the final norm's
 * backward into dx. Returns the loss (unscaled). */
static double head(sl_train *t, mg *s, float norm, float scale, void *dx)
{
    const int N = s->N, Nl = s->Nl, C = s->C, Vl = s->Vl, l = s->L + 1;
    const void *whead = at(s, s->w, s->lw[l] + 2 * (size_t)C);
    float *gl = s->grads + s->lw[l];
    double t0 = sl_now();
    const float *ln = ln_params(t, s, at(s, s->w, s->lw[l]));
    sl_k_layernorm_forward(t->be, s->dt, Nl, C, s->res[l], ln, ln + C, s->lnf, s->mf, s->rf);
    sl_train_compute_span(t, "head", t0);
    const void *in = s->sp ? seq_gather(t, s, s->lnf, s->full, MG_HEAD, "f: all-gather lnf") : s->lnf;
    t0 = sl_now();
    sl_k_gemm(t->be, 0, 1, N, Vl, C, 1.0f, in, C, whead, C, 0.0f, s->logits, Vl, s->dt, SL_F32);
    sl_train_compute_span(t, "head", t0);
    const double loss = s->vgather && s->t > 1 ? gathered_xent(t, s, norm, scale) : parallel_xent(t, s, norm, scale);
    t0 = sl_now();
    const void *dl = s->dlog;
    if (!is_f32(s)) { /* GEMM operands share a dtype, as the serial head's */
        sl_k_cast(t->be, (size_t)N * Vl, s->dlog, SL_F32, s->dlog16, s->dt, NULL);
        dl = s->dlog16;
    }
    sl_train_compute_span(t, "head", t0);
    const void *dlnf = colpar_backward(t, s, C, Vl, dl, in, whead, s->dpart, gl + 2 * C, NULL, MG_HEAD,
                                       s->sp ? "f: reduce-scatter head dx" : "f: allreduce head dx", "head backward");
    t0 = sl_now();
    ln = ln_params(t, s, at(s, s->w, s->lw[l]));
    sl_k_layernorm_backward(t->be, s->dt, Nl, C, dlnf, s->res[l], ln, s->mf, s->rf, dx, gl, gl + C);
    sl_train_compute_span(t, "head", t0);
    return loss;
}

/* dy = dL/dres[l + 1] -> dx = dL/dres[l], on the tokens held. Sequence parallel: g's backward
 * all-gathers each half's output gradient, each layer norm's output is all-gathered again for
 * its column-parallel layer's weight gradient (only its shard was kept), and f's backward
 * reduce-scatters the partial input gradient. The row-parallel biases' gradients come from the
 * gathered (whole) output gradient, so they are complete; the layer norms' are each rank's
 * part, summed in mg_step. */
static void block_backward(sl_train *t, mg *s, int l, const void *dy, void *dx)
{
    mg_block *k = &s->blk[l - 1];
    const int N = s->N, Nl = s->Nl, C = s->C, Cl = s->Cl;
    const size_t NlC = (size_t)Nl * C;
    double t0 = sl_now();
    /* MLP: through its dropout first (the mask again, into dh: free until ln2's backward) */
    const void *dmlp = dy;
    if (drop_tokens(t, s, l, SL_DROP_RESID_MLP, dy, s->dh)) dmlp = s->dh;
    sl_train_compute_span(t, "mlp backward", t0);
    /* g backward: the identity (dy whole on every rank), or the all-gather of the shards */
    if (s->sp) dmlp = seq_gather(t, s, dmlp, s->full, MG_BLOCKS, "g: all-gather mlp dy");
    t0 = sl_now();
    lin_bwd(t, s, 4 * Cl, C, dmlp, k->ge, P(s, l, SL_GPT_WFCPROJ), s->dfc, G(s, l, SL_GPT_WFCPROJ),
            G(s, l, SL_GPT_BFCPROJ));
    sl_k_gelu_backward(t->be, s->dt, (size_t)N * 4 * Cl, k->fc, s->dfc, s->dfc);
    sl_train_compute_span(t, "mlp backward", t0);
    const void *in = s->sp ? seq_gather(t, s, k->ln2, s->full, MG_REGATHER, "all-gather ln2 again") : k->ln2;
    const void *dln = colpar_backward(t, s, C, 4 * Cl, s->dfc, in, P(s, l, SL_GPT_WFC), s->dpart, G(s, l, SL_GPT_WFC),
                                      G(s, l, SL_GPT_BFC), MG_BLOCKS,
                                      s->sp ? "f: reduce-scatter mlp dx" : "f: allreduce mlp dx", "mlp backward");
    t0 = sl_now();
    const float *ln = ln_params(t, s, P(s, l, SL_GPT_LN2W));
    sl_k_layernorm_backward(t->be, s->dt, Nl, C, dln, k->h, ln, k->m2, k->r2, s->dh, G(s, l, SL_GPT_LN2W),
                            G(s, l, SL_GPT_LN2B));
    sl_k_add(t->be, s->dt, NlC, dy, s->dh);
    /* attention, through its output's dropout (into the free shard buffer; plain: into dpart,
     * free until the QKV's input gradient) */
    const void *dattn = s->dh;
    if (drop_tokens(t, s, l, SL_DROP_RESID_ATTN, s->dh, s->sp ? s->dshard : s->dpart))
        dattn = s->sp ? s->dshard : s->dpart;
    sl_train_compute_span(t, "attention backward", t0);
    if (s->sp) dattn = seq_gather(t, s, dattn, s->full, MG_BLOCKS, "g: all-gather attention dy");
    t0 = sl_now();
    lin_bwd(t, s, Cl, C, dattn, k->atty, P(s, l, SL_GPT_WPROJ), s->datty, G(s, l, SL_GPT_WPROJ),
            G(s, l, SL_GPT_BPROJ));
    attention(t, s, l, s->datty, s->dqkv);
    sl_train_compute_span(t, "attention backward", t0);
    in = s->sp ? seq_gather(t, s, k->ln1, s->full, MG_REGATHER, "all-gather ln1 again") : k->ln1;
    dln = colpar_backward(t, s, C, 3 * Cl, s->dqkv, in, P(s, l, SL_GPT_WQKV), s->dpart, G(s, l, SL_GPT_WQKV),
                          G(s, l, SL_GPT_BQKV), MG_BLOCKS,
                          s->sp ? "f: reduce-scatter attention dx" : "f: allreduce attention dx", "attention backward");
    t0 = sl_now();
    ln = ln_params(t, s, P(s, l, SL_GPT_LN1W));
    sl_k_layernorm_backward(t->be, s->dt, Nl, C, dln, s->res[l], ln, k->m1, k->r1, dx, G(s, l, SL_GPT_LN1W),
                            G(s, l, SL_GPT_LN1B));
    sl_k_add(t->be, s->dt, NlC, s->dh, dx);
    sl_train_compute_span(t, "residual", t0);
}

/* dy (the tokens held; not kept) through the embedding's dropout; sequence parallel: the
 * shards all-gathered (the conjugate of the forward's reduce-scatter), so that every rank has
 * each token's gradient for its own rows and the whole position table's. */
static void embedding_backward(sl_train *t, mg *s, void *dy)
{
    const size_t C = (size_t)s->C;
    double t0 = sl_now();
    drop_tokens(t, s, 0, SL_DROP_EMBED, dy, dy);
    sl_train_compute_span(t, "embedding backward", t0);
    const void *d = s->sp ? seq_gather(t, s, dy, s->full, MG_EMB, "embedding: all-gather dy") : dy;
    t0 = sl_now();
    /* this rank's rows, the zero row and wpe; the zero row's gradient (the other ranks'
     * tokens) is dropped, so that it stays zero */
    sl_k_embedding_backward(t->be, s->dt, s->B, s->T, s->C, s->Vl + 1, s->tokl, d, s->grads,
                            s->grads + ((size_t)s->Vl + 1) * C);
    sl_k_memset0(t->be, s->grads + (size_t)s->Vl * C, C * sizeof(float));
    sl_train_compute_span(t, "embedding backward", t0);
}

/* Sequence parallel: the layer norms' gradients (ln1, ln2 of each block, lnf; f32), each rank's
 * over its own tokens, summed over the group in one all-reduce of (4L + 2)·C f32 values. */
static void norms_allreduce(sl_train *t, mg *s)
{
    if (!s->sp || s->t == 1) return;
    const size_t C2 = 2 * (size_t)s->C, b2 = C2 * sizeof(float);
    double t0 = sl_now();
    float *p = s->normg;
    for (int l = 1; l <= s->L; l++, p += 2 * C2) {
        sl_k_memcpy(t->be, p, G(s, l, SL_GPT_LN1W), b2, SL_K_D2D);
        sl_k_memcpy(t->be, p + C2, G(s, l, SL_GPT_LN2W), b2, SL_K_D2D);
    }
    sl_k_memcpy(t->be, p, s->grads + s->lw[s->L + 1], b2, SL_K_D2D);
    sl_train_compute_span(t, "layer norms' gradients: pack", t0);
    allreduce(t, s, s->normg, (4 * (size_t)s->L + 2) * s->C, SL_F32, SL_OP_SUM, MG_NORMS,
              "sequence parallel: allreduce layer norms' gradients");
    t0 = sl_now();
    p = s->normg;
    for (int l = 1; l <= s->L; l++, p += 2 * C2) {
        sl_k_memcpy(t->be, G(s, l, SL_GPT_LN1W), p, b2, SL_K_D2D);
        sl_k_memcpy(t->be, G(s, l, SL_GPT_LN2W), p + C2, b2, SL_K_D2D);
    }
    sl_k_memcpy(t->be, s->grads + s->lw[s->L + 1], p, b2, SL_K_D2D);
    sl_train_compute_span(t, "layer norms' gradients: unpack", t0);
}

/* The step ---------------------------------------------------------------------------------- */

static float loss_scale(const mg *s) { return is_f32(s) ? 1.0f : (float)s->ms.sc.scale; }

void mg_step(sl_train *t)
{
    mg *s = t->state;
    s->counting = 1;
    const float scale = loss_scale(s);
    load(t, s);
    double t0 = sl_now();
    sl_k_memset0(t->be, s->grads, s->np * sizeof(float));
    sl_train_compute_span(t, "zero grads", t0);
    embedding_forward(t, s);
    for (int l = 1; l <= s->L; l++) block_forward(t, s, l);
    const double loss = head(t, s, sl_task_loss_norm(t->task, t->global_batch), scale, s->dres[0]);
    if (s->tr == 0) t->loss += loss; /* every rank of a group has it: counted once */
    int cur = 0;
    for (int l = s->L; l >= 1; l--, cur = !cur) block_backward(t, s, l, s->dres[cur], s->dres[!cur]);
    embedding_backward(t, s, s->dres[cur]);
    norms_allreduce(t, s);
    if (!is_f32(s)) { /* the gradient as the serial run keeps it: rounded into dt once */
        t0 = sl_now();
        sl_k_cast(t->be, s->np, s->grads, SL_F32, s->g, s->dt, NULL);
        sl_train_compute_span(t, "round grads", t0);
    }
    allreduce(t, s, s->g, s->np, s->dt, SL_OP_SUM, MG_DP, "allreduce (replicas)");
    /* 16 bits: the overflow flag OR-ed over every rank, as a group's slices are one model */
    sl_train_mixed_step(t, &s->ms, s->g, s->grads, s->params, s->optim, s->w, s->np);
    s->counting = 0;
}

/* Setup ------------------------------------------------------------------------------------- */

/* The bytes of category cat allocated so far in the backend's space (the driver's accounting). */
static double held(sl_train *t, sl_mem_cat cat)
{
    return (double)sl_mem_current(t->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST, cat);
}

void mg_block_alloc(sl_train *t, const mg *s, mg_block *k, void *att)
{
    const size_t f4 = sizeof(float), es = sl_dtype_size(s->dt), N = (size_t)s->N, Nl = (size_t)s->Nl;
    const size_t NlC = Nl * (size_t)s->C, NCl = N * (size_t)s->Cl;
    k->ln1 = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es), k->qkv = sl_train_alloc(t, SL_MEM_ACTIV, 3 * NCl * es);
    k->att = att ? att : sl_train_alloc(t, SL_MEM_ACTIV, (size_t)s->B * s->NHl * s->T * s->T * es);
    k->atty = sl_train_alloc(t, SL_MEM_ACTIV, NCl * es), k->h = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es);
    k->ln2 = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es), k->fc = sl_train_alloc(t, SL_MEM_ACTIV, 4 * NCl * es);
    k->ge = sl_train_alloc(t, SL_MEM_ACTIV, 4 * NCl * es);
    k->m1 = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4), k->r1 = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4);
    k->m2 = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4), k->r2 = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4);
}

void mg_block_free(sl_train *t, mg_block *k, const void *att)
{
    void *p[] = {k->ln1, k->qkv, k->att == att ? NULL : k->att, k->atty, k->h, k->ln2, k->fc, k->ge,
                 k->m1, k->r1, k->m2, k->r2};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(t->be, p[i]);
}

void mg_setup_opts(sl_train *t, int tp, int dp, const mg_options *o)
{
    mg *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    const sl_gpt_dims *g = &t->m->gpt;
    s->t = t->baseline ? 1 : tp;
    s->d = t->baseline ? 1 : dp;
    s->overlap = o->overlap;
    s->rep = t->rank / s->t;
    s->tr = t->rank % s->t;
    s->L = g->layers, s->C = g->C, s->NH = g->NH, s->T = g->T, s->V = g->V, s->maxT = g->max_T;
    s->Vl = s->V / s->t, s->Cl = s->C / s->t, s->NHl = s->NH / s->t;
    s->dt = t->dtype;
    s->sp = o->sequence_parallel;
    s->vgather = o->vocab_gather;
    mg_layout(s);

    mm_groups_open(t, s->rep, s->tr, &s->tp_mpi, &s->dp_mpi, &s->tp, &s->dp);

    size_t lo, hi; /* the replica's sequences of each step */
    sl_share((size_t)t->global_batch, s->d, s->rep, &lo, &hi);
    t->lo = (int)lo, t->hi = (int)hi;
    s->B = (int)(hi - lo);
    s->N = s->B * s->T;
    s->Tl = s->sp ? s->T / s->t : s->T; /* validate: t divides T */
    s->Nl = s->B * s->Tl;
    s->p0 = s->sp ? s->tr * s->Tl : 0;

    const size_t np = s->np, f4 = sizeof(float), es = sl_dtype_size(s->dt), N = (size_t)s->N, C = (size_t)s->C;
    const size_t Cl = (size_t)s->Cl, NC = N * C, NV = N * (size_t)s->Vl, Nl = (size_t)s->Nl, NlC = Nl * C;
    s->params = sl_train_alloc(t, SL_MEM_PARAMS, np * f4);
    s->grads = sl_train_alloc(t, SL_MEM_GRADS, np * f4);
    s->optim = sl_train_alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * np * f4);
    mg_init_params(t->m, s, (uint64_t)sl_train_opt.seed);
    s->w = is_f32(s) ? (void *)s->params : sl_train_alloc(t, SL_MEM_PARAMS, np * es);
    s->g = is_f32(s) ? (void *)s->grads : sl_train_alloc(t, SL_MEM_GRADS, np * es);
    if (!is_f32(s)) {
        sl_k_cast(t->be, np, s->params, SL_F32, s->w, s->dt, NULL);
        sl_train_mixed_init(&s->ms, s->dt);
    }
    /* kept for backward: per block its input res[l] and what it keeps, on the tokens held
     * (Nl: the layer norms' inputs, outputs and moments) or on all N (the tensor-parallel
     * parts); the accounting's count of them is the row's measured activ_block */
    const double a0 = held(t, SL_MEM_ACTIV);
    for (int b = 0; b < s->L; b++) {
        s->res[b + 1] = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es);
        mg_block_alloc(t, s, &s->blk[b], NULL);
    }
    s->activ_block = s->L ? (held(t, SL_MEM_ACTIV) - a0) / s->L : 0;
    s->res[s->L + 1] = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es);
    s->lnf = sl_train_alloc(t, SL_MEM_ACTIV, NlC * es);
    s->mf = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4), s->rf = sl_train_alloc(t, SL_MEM_ACTIV, Nl * f4);
    /* the tokens; the gradients between layers and the partial sums the group reduces */
    s->tok = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
    s->tgt = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
    s->tokl = sl_train_alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
    s->htok = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1), s->htgt = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
    s->dres[0] = sl_train_alloc(t, SL_MEM_COMM, NlC * es), s->dres[1] = sl_train_alloc(t, SL_MEM_COMM, NlC * es);
    s->dpart = sl_train_alloc(t, SL_MEM_COMM, NC * es);
    s->rowmax = sl_train_alloc(t, SL_MEM_COMM, N * f4), s->rowtgt = sl_train_alloc(t, SL_MEM_COMM, N * f4);
    s->rowsum = sl_train_alloc(t, SL_MEM_COMM, N * f4);
    if (s->sp) {
        s->full = sl_train_alloc(t, SL_MEM_COMM, NC * es), s->stage = sl_train_alloc(t, SL_MEM_COMM, NC * es);
        s->dshard = sl_train_alloc(t, SL_MEM_COMM, NlC * es);
        s->normg = sl_train_alloc(t, SL_MEM_COMM, (4 * (size_t)s->L + 2) * C * f4);
    }
    /* the backward's scratch and the kernels' workspaces */
    s->dh = sl_train_alloc(t, SL_MEM_OTHER, NlC * es), s->dqkv = sl_train_alloc(t, SL_MEM_OTHER, 3 * N * Cl * es);
    s->datty = sl_train_alloc(t, SL_MEM_OTHER, N * Cl * es), s->dfc = sl_train_alloc(t, SL_MEM_OTHER, 4 * N * Cl * es);
    s->zero_wpe = sl_train_alloc(t, SL_MEM_OTHER, (size_t)s->T * C * es);
    sl_k_memset0(t->be, s->zero_wpe, (size_t)s->T * C * es);
    const size_t widest = 4 * Cl > C ? 4 * Cl : C;
    if (!is_f32(s)) s->lin32 = sl_train_alloc(t, SL_MEM_OTHER, N * widest * f4);
    s->vec32 = sl_train_alloc(t, SL_MEM_OTHER, 4 * C * f4);
    /* the head's logits and their gradient (f32, and a 16-bit copy of the gradient), and with
     * --no-vocab-parallel the whole vocabulary's, gathered: counted as allocated */
    const double h0 = held(t, SL_MEM_OTHER);
    if (!is_f32(s)) s->dlog16 = sl_train_alloc(t, SL_MEM_OTHER, NV * es);
    s->logits = sl_train_alloc(t, SL_MEM_OTHER, NV * f4), s->dlog = sl_train_alloc(t, SL_MEM_OTHER, NV * f4);
    if (s->vgather && s->t > 1) {
        s->glog = sl_train_alloc(t, SL_MEM_OTHER, N * (size_t)s->V * f4);
        s->gstage = sl_train_alloc(t, SL_MEM_OTHER, N * (size_t)s->V * f4);
    }
    s->head_logit_bytes = held(t, SL_MEM_OTHER) - h0;
    if (t->be != SL_BACKEND_CPU) s->hlog = sl_alloc(SL_MEM_OTHER, (2 * NV + 3 * N) * f4);
    s->attn_work = sl_train_alloc(t, SL_MEM_OTHER, sl_k_attention_work_bytes(s->dt, s->B, s->NHl, s->T));
}

void mg_free(sl_train *t)
{
    mg *s = t->state;
    for (int l = 1; l <= s->L + 1; l++) sl_k_free(t->be, s->res[l]);
    for (int b = 0; b < s->L; b++) mg_block_free(t, &s->blk[b], NULL);
    void *p[] = {s->params, s->grads, s->optim, is_f32(s) ? NULL : s->w, is_f32(s) ? NULL : s->g, s->lnf, s->mf,
                 s->rf, s->tok, s->tgt, s->tokl, s->dres[0], s->dres[1], s->dpart, s->rowmax, s->rowtgt, s->rowsum,
                 s->dh, s->dqkv, s->datty, s->dfc, s->zero_wpe, s->lin32, s->dlog16, s->vec32, s->logits, s->dlog,
                 s->attn_work, s->full, s->stage, s->dshard, s->normg, s->glog, s->gstage};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(t->be, p[i]);
    sl_free(s->htok);
    sl_free(s->htgt);
    if (s->hlog) sl_free(s->hlog);
    mm_groups_close(&s->tp_mpi, &s->dp_mpi, s->tp, s->dp);
    free(s);
}

/* The position table: replicated on every rank, so bit-identical across the world. */
const float *mg_weights(sl_train *t, size_t *first, size_t *count)
{
    mg *s = t->state;
    *first = (size_t)s->V * s->C;
    *count = (size_t)s->maxT * s->C;
    return s->params + ((size_t)s->Vl + 1) * s->C;
}

/* The layers one at a time, for a pipeline stage that holds some of them (parallel3d): the
 * same code as mg_step's, on the activations the caller has placed in s (res, blk, the tokens)
 * for the micro-batch of s->B sequences starting at t->lo. */
void mg_load(sl_train *t, mg *s) { load(t, s); }
void mg_embedding_forward(sl_train *t, mg *s) { embedding_forward(t, s); }
void mg_block_forward(sl_train *t, mg *s, int l) { block_forward(t, s, l); }
void mg_attention_again(sl_train *t, mg *s, int l)
{
    const double t0 = sl_now();
    attention(t, s, l, NULL, NULL);
    sl_train_compute_span(t, "attention (recomputed)", t0);
}
double mg_head(sl_train *t, mg *s, float norm, float scale, void *dx) { return head(t, s, norm, scale, dx); }
void mg_block_backward(sl_train *t, mg *s, int l, const void *dy, void *dx) { block_backward(t, s, l, dy, dx); }
void mg_embedding_backward(sl_train *t, mg *s, void *dy) { embedding_backward(t, s, dy); }
