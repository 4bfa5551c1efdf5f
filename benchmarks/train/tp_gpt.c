/* tp_gpt.c — megatron_mlp --model gpt (and parallel3d's blocks): one rank's step of Megatron-LM's tensor-parallel GPT
 * (Shoeybi et al. 2019, section 3), plain variant, built from the GPT kernels (kernels/gpt.h).
 *
 * In a t-rank group each rank holds the slices of gpt_tp.h. Per block, with the conjugate
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
 * serial training's masks. */
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

static void compute_span(sl_train *t, const char *name, double t0)
{
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, name, t0, sl_now());
}

/* A layer norm's gain and bias (2C consecutive, dt) as f32. */
static const float *ln_params(sl_train *t, mg *s, const void *wb)
{
    if (is_f32(s)) return wb;
    sl_k_cast(t->be, 2 * (size_t)s->C, wb, s->dt, s->vec32, SL_F32, NULL);
    return s->vec32;
}

/* out (N,OC) = inp (N,K) W^T (+ b, where given), summed in f32 and rounded into dt once. */
static void lin_fwd(sl_train *t, mg *s, int K, int OC, const void *inp, const void *W, const void *b, void *out)
{
    const int N = s->N;
    float *r = is_f32(s) ? out : s->lin32;
    sl_k_gemm(t->be, 0, 1, N, OC, K, 1.0f, inp, K, W, K, 0.0f, r, OC, s->dt, SL_F32);
    if (b) {
        if (!is_f32(s)) sl_k_cast(t->be, (size_t)OC, b, s->dt, s->vec32, SL_F32, NULL);
        sl_k_bias_add(t->be, N, OC, r, is_f32(s) ? b : s->vec32);
    }
    if (!is_f32(s)) sl_k_cast(t->be, (size_t)N * OC, r, SL_F32, out, s->dt, NULL);
}

/* z (N,C) += b: the row-parallel bias, once, after its all-reduce. */
static void bias_after(sl_train *t, mg *s, void *z, const void *b)
{
    const size_t NC = (size_t)s->N * s->C;
    if (is_f32(s)) {
        sl_k_bias_add(t->be, s->N, s->C, z, b);
        return;
    }
    sl_k_cast(t->be, NC, z, s->dt, s->lin32, SL_F32, NULL);
    sl_k_cast(t->be, (size_t)s->C, b, s->dt, s->vec32, SL_F32, NULL);
    sl_k_bias_add(t->be, s->N, s->C, s->lin32, s->vec32);
    sl_k_cast(t->be, NC, s->lin32, SL_F32, z, s->dt, NULL);
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
    if (is_f32(s)) {
        sl_k_bias_grad(t->be, s->N, OC, dout, db);
        return;
    }
    sl_k_cast(t->be, (size_t)s->N * OC, dout, s->dt, s->lin32, SL_F32, NULL);
    sl_k_bias_grad(t->be, s->N, OC, s->lin32, db);
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

/* An all-reduce of count elements of dtype in place, in the group (region < MG_DP) or between
 * replicas, blocking; its bytes counted under region in the driver's steps. A group or a set of
 * replicas of one rank communicates nothing. */
static void allreduce(sl_train *t, mg *s, void *v, size_t count, sl_dtype dtype, sl_redop op, int region,
                      const char *name)
{
    sl_comm *c = region == MG_DP ? s->dp : s->tp;
    if ((region == MG_DP ? s->d : s->t) == 1) return;
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(c);
    const double t0 = sl_now();
    sl_train_coll_ok(sl_coll_allreduce(c, v, v, count, dtype, op), name);
    sl_train_blocking(t, name, t0);
    if (!s->counting) return;
    s->sent[region] += (double)(sl_comm_bytes_sent(c) - b0);
    if (region != MG_DP) s->tp_colls++;
}

/* The backward of a column-parallel layer (dout (N,OC) this rank's columns, inp (N,K) whole)
 * and f, the all-reduce of its partial input gradient dinp (N,K), named name. plain: the
 * gradients, then the all-reduce. overlap (Megatron-LM's asynchronous gradient all-reduce): dinp
 * first, its all-reduce started non-blocking, then dW computed in pieces of its rows, testing
 * the all-reduce between them so that the suite's own algorithms advance while the GEMMs run,
 * then db, then the wait. dW and db (may be NULL: the head has no bias) accumulate in f32. */
static void colpar_backward(sl_train *t, mg *s, int K, int OC, const void *dout, const void *inp, const void *W,
                            void *dinp, float *dW, float *db, int region, const char *name, const char *what)
{
    const size_t count = (size_t)s->N * K;
    double t0 = sl_now();
    if (!s->overlap || s->t == 1) {
        weight_grad_rows(t, s, K, OC, dout, inp, dW, 0, OC);
        if (db) bias_grad(t, s, OC, dout, db);
        input_grad(t, s, K, OC, dout, W, dinp);
        compute_span(t, what, t0);
        allreduce(t, s, dinp, count, s->dt, SL_OP_SUM, region, name);
        return;
    }
    input_grad(t, s, K, OC, dout, W, dinp);
    compute_span(t, what, t0);
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
        compute_span(t, what, c0);
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
        compute_span(t, what, c0);
    }
    const double w0 = sl_now();
    sl_train_coll_ok(sl_coll_wait(req), "sl_coll_wait");
    const double w1 = sl_now();
    sl_train_record(t, SL_PHASE_EXPOSED, w1 - w0);
    sl_train_span(t, SL_PHASE_COMM, name, t0, done ? t_done : w1);
    if (!s->counting) return;
    s->sent[region] += (double)(sl_comm_bytes_sent(s->tp) - b0);
    s->tp_colls++;
    s->tp_overlapped++;
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

static void embedding_forward(sl_train *t, mg *s)
{
    const size_t C = (size_t)s->C, TC = (size_t)s->T * C;
    double t0 = sl_now();
    sl_k_embedding_forward(t->be, s->dt, s->B, s->T, s->C, s->Vl + 1, s->tokl, s->w, s->zero_wpe, s->res[1]);
    compute_span(t, "embedding", t0);
    allreduce(t, s, s->res[1], (size_t)s->N * C, s->dt, SL_OP_SUM, MG_EMB, "embedding: allreduce lookup");
    t0 = sl_now();
    const void *wpe = at(s, s->w, ((size_t)s->Vl + 1) * C);
    for (int b = 0; b < s->B; b++) sl_k_add(t->be, s->dt, TC, wpe, at(s, s->res[1], (size_t)b * TC));
    const sl_dropout d = drop_at(t, 0, SL_DROP_EMBED, TC);
    if (d.p > 0) sl_k_dropout(t->be, s->dt, (size_t)s->N * C, s->res[1], s->res[1], &d);
    compute_span(t, "embedding", t0);
}

static void block_forward(sl_train *t, mg *s, int l)
{
    mg_block *k = &s->blk[l - 1];
    const void *x = s->res[l];
    void *out = s->res[l + 1];
    const int N = s->N, C = s->C, Cl = s->Cl;
    const size_t NC = (size_t)N * C;
    double t0 = sl_now();
    const float *ln = ln_params(t, s, P(s, l, SL_GPT_LN1W));
    sl_k_layernorm_forward(t->be, s->dt, N, C, x, ln, ln + C, k->ln1, k->m1, k->r1);
    lin_fwd(t, s, C, 3 * Cl, k->ln1, P(s, l, SL_GPT_WQKV), P(s, l, SL_GPT_BQKV), k->qkv);
    attention(t, s, l, NULL, NULL);
    lin_fwd(t, s, Cl, C, k->atty, P(s, l, SL_GPT_WPROJ), NULL, k->h);
    compute_span(t, "attention", t0);
    allreduce(t, s, k->h, NC, s->dt, SL_OP_SUM, MG_BLOCKS, "g: allreduce attention");
    t0 = sl_now();
    bias_after(t, s, k->h, P(s, l, SL_GPT_BPROJ));
    const size_t TC = (size_t)s->T * C;
    const sl_dropout da = drop_at(t, l, SL_DROP_RESID_ATTN, TC), dm = drop_at(t, l, SL_DROP_RESID_MLP, TC);
    if (da.p > 0) sl_k_dropout(t->be, s->dt, NC, k->h, k->h, &da);
    sl_k_residual_forward(t->be, s->dt, NC, x, k->h, k->h);
    ln = ln_params(t, s, P(s, l, SL_GPT_LN2W));
    sl_k_layernorm_forward(t->be, s->dt, N, C, k->h, ln, ln + C, k->ln2, k->m2, k->r2);
    lin_fwd(t, s, C, 4 * Cl, k->ln2, P(s, l, SL_GPT_WFC), P(s, l, SL_GPT_BFC), k->fc);
    sl_k_gelu_forward(t->be, s->dt, (size_t)N * 4 * Cl, k->fc, k->ge);
    lin_fwd(t, s, 4 * Cl, C, k->ge, P(s, l, SL_GPT_WFCPROJ), NULL, out);
    compute_span(t, "mlp", t0);
    allreduce(t, s, out, NC, s->dt, SL_OP_SUM, MG_BLOCKS, "g: allreduce mlp");
    t0 = sl_now();
    bias_after(t, s, out, P(s, l, SL_GPT_BFCPROJ));
    if (dm.p > 0) sl_k_dropout(t->be, s->dt, NC, out, out, &dm);
    sl_k_residual_forward(t->be, s->dt, NC, k->h, out, out);
    compute_span(t, "residual", t0);
}

/* The head's forward and backward at once (the logits are not kept): final norm, this rank's
 * logits, the parallel cross-entropy, dlogits into dwhead and the partial dL/d(lnf), its
 * all-reduce, and the final norm's backward into dx. Returns the loss (unscaled). */
static double head(sl_train *t, mg *s, float norm, float scale, void *dx)
{
    const int N = s->N, C = s->C, Vl = s->Vl, l = s->L + 1;
    const void *whead = at(s, s->w, s->lw[l] + 2 * (size_t)C);
    float *gl = s->grads + s->lw[l];
    double t0 = sl_now();
    const float *ln = ln_params(t, s, at(s, s->w, s->lw[l]));
    sl_k_layernorm_forward(t->be, s->dt, N, C, s->res[l], ln, ln + C, s->lnf, s->mf, s->rf);
    sl_k_gemm(t->be, 0, 1, N, Vl, C, 1.0f, s->lnf, C, whead, C, 0.0f, s->logits, Vl, s->dt, SL_F32);
    compute_span(t, "head", t0);
    const double loss = parallel_xent(t, s, norm, scale);
    t0 = sl_now();
    const void *dl = s->dlog;
    if (!is_f32(s)) { /* GEMM operands share a dtype, as the serial head's */
        sl_k_cast(t->be, (size_t)N * Vl, s->dlog, SL_F32, s->dlog16, s->dt, NULL);
        dl = s->dlog16;
    }
    compute_span(t, "head", t0);
    colpar_backward(t, s, C, Vl, dl, s->lnf, whead, s->dpart, gl + 2 * C, NULL, MG_HEAD, "f: allreduce head dx",
                    "head backward");
    t0 = sl_now();
    ln = ln_params(t, s, at(s, s->w, s->lw[l]));
    sl_k_layernorm_backward(t->be, s->dt, N, C, s->dpart, s->res[l], ln, s->mf, s->rf, dx, gl, gl + C);
    compute_span(t, "head", t0);
    return loss;
}

static void block_backward(sl_train *t, mg *s, int l, const void *dy, void *dx)
{
    mg_block *k = &s->blk[l - 1];
    const int N = s->N, C = s->C, Cl = s->Cl;
    const size_t NC = (size_t)N * C;
    double t0 = sl_now();
    const size_t TC = (size_t)s->T * C;
    const sl_dropout da = drop_at(t, l, SL_DROP_RESID_ATTN, TC), dm = drop_at(t, l, SL_DROP_RESID_MLP, TC);
    /* MLP: g backward is the identity (dy whole on every rank); through its dropout first (the
     * mask again, into dh: free until ln2's backward) */
    const void *dmlp = dy;
    if (dm.p > 0) sl_k_dropout(t->be, s->dt, NC, dy, s->dh, &dm), dmlp = s->dh;
    lin_bwd(t, s, 4 * Cl, C, dmlp, k->ge, P(s, l, SL_GPT_WFCPROJ), s->dfc, G(s, l, SL_GPT_WFCPROJ),
            G(s, l, SL_GPT_BFCPROJ));
    sl_k_gelu_backward(t->be, s->dt, (size_t)N * 4 * Cl, k->fc, s->dfc, s->dfc);
    compute_span(t, "mlp backward", t0);
    colpar_backward(t, s, C, 4 * Cl, s->dfc, k->ln2, P(s, l, SL_GPT_WFC), s->dpart, G(s, l, SL_GPT_WFC),
                    G(s, l, SL_GPT_BFC), MG_BLOCKS, "f: allreduce mlp dx", "mlp backward");
    t0 = sl_now();
    const float *ln = ln_params(t, s, P(s, l, SL_GPT_LN2W));
    sl_k_layernorm_backward(t->be, s->dt, N, C, s->dpart, k->h, ln, k->m2, k->r2, s->dh, G(s, l, SL_GPT_LN2W),
                            G(s, l, SL_GPT_LN2B));
    sl_k_add(t->be, s->dt, NC, dy, s->dh);
    /* attention, through its output's dropout (into dpart: free until the QKV's input gradient) */
    const void *dattn = s->dh;
    if (da.p > 0) sl_k_dropout(t->be, s->dt, NC, s->dh, s->dpart, &da), dattn = s->dpart;
    lin_bwd(t, s, Cl, C, dattn, k->atty, P(s, l, SL_GPT_WPROJ), s->datty, G(s, l, SL_GPT_WPROJ),
            G(s, l, SL_GPT_BPROJ));
    attention(t, s, l, s->datty, s->dqkv);
    compute_span(t, "attention backward", t0);
    colpar_backward(t, s, C, 3 * Cl, s->dqkv, k->ln1, P(s, l, SL_GPT_WQKV), s->dpart, G(s, l, SL_GPT_WQKV),
                    G(s, l, SL_GPT_BQKV), MG_BLOCKS, "f: allreduce attention dx", "attention backward");
    t0 = sl_now();
    ln = ln_params(t, s, P(s, l, SL_GPT_LN1W));
    sl_k_layernorm_backward(t->be, s->dt, N, C, s->dpart, s->res[l], ln, k->m1, k->r1, dx, G(s, l, SL_GPT_LN1W),
                            G(s, l, SL_GPT_LN1B));
    sl_k_add(t->be, s->dt, NC, s->dh, dx);
    compute_span(t, "residual", t0);
}

static void embedding_backward(sl_train *t, mg *s, void *dy)
{
    const size_t C = (size_t)s->C;
    const double t0 = sl_now();
    const sl_dropout d = drop_at(t, 0, SL_DROP_EMBED, (size_t)s->T * C);
    if (d.p > 0) sl_k_dropout(t->be, s->dt, (size_t)s->N * C, dy, dy, &d); /* dy is not kept */
    /* this rank's rows, the zero row and wpe; the zero row's gradient (the other ranks'
     * tokens) is dropped, so that it stays zero */
    sl_k_embedding_backward(t->be, s->dt, s->B, s->T, s->C, s->Vl + 1, s->tokl, dy, s->grads,
                            s->grads + ((size_t)s->Vl + 1) * C);
    sl_k_memset0(t->be, s->grads + (size_t)s->Vl * C, C * sizeof(float));
    compute_span(t, "embedding backward", t0);
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
    compute_span(t, "zero grads", t0);
    embedding_forward(t, s);
    for (int l = 1; l <= s->L; l++) block_forward(t, s, l);
    const double loss = head(t, s, sl_task_loss_norm(t->task, t->global_batch), scale, s->dres[0]);
    if (s->tr == 0) t->loss += loss; /* every rank of a group has it: counted once */
    int cur = 0;
    for (int l = s->L; l >= 1; l--, cur = !cur) block_backward(t, s, l, s->dres[cur], s->dres[!cur]);
    embedding_backward(t, s, s->dres[cur]);
    if (!is_f32(s)) { /* the gradient as the serial run keeps it: rounded into dt once */
        t0 = sl_now();
        sl_k_cast(t->be, s->np, s->grads, SL_F32, s->g, s->dt, NULL);
        compute_span(t, "round grads", t0);
    }
    allreduce(t, s, s->g, s->np, s->dt, SL_OP_SUM, MG_DP, "allreduce (replicas)");
    if (is_f32(s)) {
        sl_train_optimize(t, s->params, s->grads, s->optim, 0, s->np);
    } else {
        /* the overflow flag OR-ed over every rank: a group's slices are one model */
        t0 = sl_now();
        sl_k_cast(t->be, s->np, s->g, s->dt, s->grads, SL_F32, NULL);
        const size_t bad = sl_k_scale_check(t->be, s->np, s->grads, 1.0f / scale);
        sl_optim o;
        if (sl_train_mixed_decide(t, &s->ms, bad > 0, &o)) {
            sl_optim_step(t->be, &o, s->np, s->params, s->grads, s->optim);
            sl_k_cast(t->be, s->np, s->params, SL_F32, s->w, s->dt, NULL);
        }
        compute_span(t, "unscale + optimizer (f32 master)", t0);
    }
    s->counting = 0;
}

/* Setup ------------------------------------------------------------------------------------- */

static void *alloc(sl_train *t, sl_mem_cat cat, size_t bytes) { return sl_k_malloc(t->be, cat, bytes ? bytes : 1); }

void mg_setup(sl_train *t, int tp, int dp, int overlap)
{
    mg *s = calloc(1, sizeof *s);
    if (!s) SL_FATAL("out of memory");
    t->state = s;
    const sl_gpt_dims *g = &t->m->gpt;
    s->t = t->baseline ? 1 : tp;
    s->d = t->baseline ? 1 : dp;
    s->overlap = overlap;
    s->rep = t->rank / s->t;
    s->tr = t->rank % s->t;
    s->L = g->layers, s->C = g->C, s->NH = g->NH, s->T = g->T, s->V = g->V, s->maxT = g->max_T;
    s->Vl = s->V / s->t, s->Cl = s->C / s->t, s->NHl = s->NH / s->t;
    s->dt = t->dtype;
    mg_layout(s);

    mm_groups_open(t, s->rep, s->tr, &s->tp_mpi, &s->dp_mpi, &s->tp, &s->dp);

    size_t lo, hi; /* the replica's sequences of each step */
    sl_share((size_t)t->global_batch, s->d, s->rep, &lo, &hi);
    t->lo = (int)lo, t->hi = (int)hi;
    s->B = (int)(hi - lo);
    s->N = s->B * s->T;

    const size_t np = s->np, f4 = sizeof(float), es = sl_dtype_size(s->dt), N = (size_t)s->N, C = (size_t)s->C;
    const size_t Cl = (size_t)s->Cl, NC = N * C, NV = N * (size_t)s->Vl;
    s->params = alloc(t, SL_MEM_PARAMS, np * f4);
    s->grads = alloc(t, SL_MEM_GRADS, np * f4);
    s->optim = alloc(t, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(&t->optim) * np * f4);
    mg_init_params(t->m, s, (uint64_t)sl_train_opt.seed);
    s->w = is_f32(s) ? (void *)s->params : alloc(t, SL_MEM_PARAMS, np * es);
    s->g = is_f32(s) ? (void *)s->grads : alloc(t, SL_MEM_GRADS, np * es);
    if (!is_f32(s)) {
        sl_k_cast(t->be, np, s->params, SL_F32, s->w, s->dt, NULL);
        sl_train_mixed_init(&s->ms, s->dt);
    }
    /* kept for backward */
    for (int l = 1; l <= s->L + 1; l++) s->res[l] = alloc(t, SL_MEM_ACTIV, NC * es);
    for (int b = 0; b < s->L; b++) {
        mg_block *k = &s->blk[b];
        k->ln1 = alloc(t, SL_MEM_ACTIV, NC * es), k->qkv = alloc(t, SL_MEM_ACTIV, 3 * N * Cl * es);
        k->att = alloc(t, SL_MEM_ACTIV, (size_t)s->B * s->NHl * s->T * s->T * es);
        k->atty = alloc(t, SL_MEM_ACTIV, N * Cl * es), k->h = alloc(t, SL_MEM_ACTIV, NC * es);
        k->ln2 = alloc(t, SL_MEM_ACTIV, NC * es), k->fc = alloc(t, SL_MEM_ACTIV, 4 * N * Cl * es);
        k->ge = alloc(t, SL_MEM_ACTIV, 4 * N * Cl * es);
        k->m1 = alloc(t, SL_MEM_ACTIV, N * f4), k->r1 = alloc(t, SL_MEM_ACTIV, N * f4);
        k->m2 = alloc(t, SL_MEM_ACTIV, N * f4), k->r2 = alloc(t, SL_MEM_ACTIV, N * f4);
    }
    s->lnf = alloc(t, SL_MEM_ACTIV, NC * es);
    s->mf = alloc(t, SL_MEM_ACTIV, N * f4), s->rf = alloc(t, SL_MEM_ACTIV, N * f4);
    /* the tokens; the gradients between layers and the partial sums the group all-reduces */
    s->tok = alloc(t, SL_MEM_DATA, N * sizeof(int32_t)), s->tgt = alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
    s->tokl = alloc(t, SL_MEM_DATA, N * sizeof(int32_t));
    s->htok = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1), s->htgt = sl_alloc(SL_MEM_DATA, N * sizeof(int32_t) + 1);
    s->dres[0] = alloc(t, SL_MEM_COMM, NC * es), s->dres[1] = alloc(t, SL_MEM_COMM, NC * es);
    s->dpart = alloc(t, SL_MEM_COMM, NC * es);
    s->rowmax = alloc(t, SL_MEM_COMM, N * f4), s->rowtgt = alloc(t, SL_MEM_COMM, N * f4);
    s->rowsum = alloc(t, SL_MEM_COMM, N * f4);
    /* the backward's scratch and the kernels' workspaces */
    s->dh = alloc(t, SL_MEM_OTHER, NC * es), s->dqkv = alloc(t, SL_MEM_OTHER, 3 * N * Cl * es);
    s->datty = alloc(t, SL_MEM_OTHER, N * Cl * es), s->dfc = alloc(t, SL_MEM_OTHER, 4 * N * Cl * es);
    s->zero_wpe = alloc(t, SL_MEM_OTHER, (size_t)s->T * C * es);
    sl_k_memset0(t->be, s->zero_wpe, (size_t)s->T * C * es);
    const size_t widest = 4 * Cl > C ? 4 * Cl : C;
    if (!is_f32(s)) {
        s->lin32 = alloc(t, SL_MEM_OTHER, N * widest * f4);
        s->dlog16 = alloc(t, SL_MEM_OTHER, NV * es);
    }
    s->vec32 = alloc(t, SL_MEM_OTHER, 4 * C * f4);
    s->logits = alloc(t, SL_MEM_OTHER, NV * f4), s->dlog = alloc(t, SL_MEM_OTHER, NV * f4);
    if (t->be != SL_BACKEND_CPU) s->hlog = sl_alloc(SL_MEM_OTHER, (2 * NV + 3 * N) * f4);
    s->attn_work = alloc(t, SL_MEM_OTHER, sl_k_attention_work_bytes(s->dt, s->B, s->NHl, s->T));
}

void mg_free(sl_train *t)
{
    mg *s = t->state;
    for (int l = 1; l <= s->L + 1; l++) sl_k_free(t->be, s->res[l]);
    for (int b = 0; b < s->L; b++) {
        mg_block *k = &s->blk[b];
        void *p[] = {k->ln1, k->qkv, k->att, k->atty, k->h, k->ln2, k->fc, k->ge, k->m1, k->r1, k->m2, k->r2};
        for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(t->be, p[i]);
    }
    void *p[] = {s->params, s->grads, s->optim, is_f32(s) ? NULL : s->w, is_f32(s) ? NULL : s->g, s->lnf, s->mf,
                 s->rf, s->tok, s->tgt, s->tokl, s->dres[0], s->dres[1], s->dpart, s->rowmax, s->rowtgt, s->rowsum,
                 s->dh, s->dqkv, s->datty, s->dfc, s->zero_wpe, s->lin32, s->dlog16, s->vec32, s->logits, s->dlog,
                 s->attn_work};
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
double mg_head(sl_train *t, mg *s, float norm, float scale, void *dx) { return head(t, s, norm, scale, dx); }
void mg_block_backward(sl_train *t, mg *s, int l, const void *dy, void *dx) { block_backward(t, s, l, dy, dx); }
void mg_embedding_backward(sl_train *t, mg *s, void *dy) { embedding_backward(t, s, dy); }
