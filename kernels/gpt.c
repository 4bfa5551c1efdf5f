/* gpt.c — the backend-neutral entry points of gpt.h: check shapes once, then dispatch to the
 * cpu or cuda table (gpt_backend.h). Attention and the LM head are composed here from GEMMs and
 * the backends' softmax kernels, so both backends run the same algorithm. */
#include <math.h>
#include <stdio.h>

#include "gpt_backend.h"
#include "sl_error.h"

static const sl_gpt_kops *gops(sl_backend be)
{
    if (be == SL_BACKEND_CPU) return &sl_cpu_gpt_ops;
    if (be == SL_BACKEND_CUDA) {
        char why[256];
        if (sl_k_backend_resolve(SL_BACKEND_CUDA, why, sizeof why) != SL_BACKEND_CUDA)
            SL_FATAL("backend cuda: %s", why);
        const sl_gpt_kops *k = sl_cuda_gpt_ops();
        if (!k) SL_FATAL("backend cuda: no GPT kernels in this build");
        return k;
    }
    SL_FATAL("GPT kernels called with backend %d: resolve 'auto' first", (int)be);
}

static void check_dtype(const char *fn, sl_dtype dt)
{
    if (dt != SL_F32 && dt != SL_F16 && dt != SL_BF16)
        SL_FATAL("%s: unsupported dtype %s (f32, f16, bf16)", fn, sl_dtype_name(dt));
}

static void check_dims(const char *fn, int B, int T, int C)
{
    if (B <= 0 || T <= 0 || C <= 0) SL_FATAL("%s: bad shape B=%d T=%d C=%d", fn, B, T, C);
}

/* Layer norm */

void sl_k_layernorm_forward(sl_backend be, sl_dtype dt, int N, int C, const void *inp,
                            const float *w, const float *b, void *out, float *mean, float *rstd)
{
    check_dtype("sl_k_layernorm_forward", dt);
    check_dims("sl_k_layernorm_forward", N, 1, C);
    gops(be)->layernorm_forward(dt, N, C, inp, w, b, out, mean, rstd);
}

void sl_k_layernorm_backward(sl_backend be, sl_dtype dt, int N, int C, const void *dout,
                             const void *inp, const float *w, const float *mean,
                             const float *rstd, void *dinp, float *dw, float *db)
{
    check_dtype("sl_k_layernorm_backward", dt);
    check_dims("sl_k_layernorm_backward", N, 1, C);
    gops(be)->layernorm_backward(dt, N, C, dout, inp, w, mean, rstd, dinp, dw, db);
}

/* Attention */

static void check_attention(const char *fn, sl_dtype dt, int B, int T, int C, int NH)
{
    check_dtype(fn, dt);
    check_dims(fn, B, T, C);
    if (NH <= 0 || C % NH) SL_FATAL("%s: %d heads do not divide C=%d", fn, NH, C);
    if ((long long)3 * C > 0x7fffffff || (long long)T * T > 0x7fffffff)
        SL_FATAL("%s: C=%d or T=%d too large for int leading dimensions", fn, C, T);
}

size_t sl_k_attention_work_bytes(sl_dtype dt, int B, int NH, int T)
{
    size_t n = (size_t)B * NH * T * T;
    return n * 4 + (dt == SL_F32 ? 0 : n * sl_dtype_size(dt));
}

void sl_k_attention_cost(sl_dtype dt, int B, int T, int C, int NH, int backward, double *flops,
                         double *bytes)
{
    double es = (double)sl_dtype_size(dt), tt = (double)B * NH * T * T, btc = (double)B * T * C;
    /* forward: S = QK^T and O = PV, 2 T T d each per head; backward: dV, dP, dQ, dK */
    if (flops) *flops = (backward ? 8.0 : 4.0) * B * (double)T * T * C;
    /* forward: read qkv, write S (f32), read S, write P, read P, write out;
     * backward: read dout, qkv, P; write and read dP (f32) and dS (dt; f32 in place); write dqkv */
    if (bytes)
        *bytes = backward ? es * (btc + 3 * btc + tt + 3 * btc) + tt * 4 * 2 + tt * es * 2
                          : es * 3 * btc + tt * 4 * 2 + tt * es * 2 + es * btc;
}

/* The scratch of one call: the caller's, or allocated and released here. */
static void *work_get(sl_backend be, void *work, size_t bytes, int *owned)
{
    *owned = !work;
    return work ? work : sl_k_malloc(be, SL_MEM_OTHER, bytes);
}

void sl_k_attention_forward(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                            const void *qkv, void *att, void *out, void *work)
{
    sl_k_attention_forward_drop(be, dt, B, T, C, NH, qkv, att, out, work, NULL);
}

void sl_k_attention_backward(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                             const void *dout, const void *qkv, const void *att, void *dqkv,
                             void *work)
{
    sl_k_attention_backward_drop(be, dt, B, T, C, NH, dout, qkv, att, dqkv, work, NULL);
}

static int dropping(const sl_dropout *d) { return d && d->p > 0; }

void sl_k_attention_forward_drop(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                                 const void *qkv, void *att, void *out, void *work,
                                 const sl_dropout *drop)
{
    check_attention("sl_k_attention_forward", dt, B, T, C, NH);
    const sl_gpt_kops *k = gops(be);
    int owned, d = C / NH;
    size_t es = sl_dtype_size(dt);
    float *scores = work_get(be, work, sl_k_attention_work_bytes(dt, B, NH, T), &owned);
    float scale = 1.0f / sqrtf((float)d);
    long long tt = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const char *q = (const char *)qkv + (size_t)b * T * 3 * C * es;
        /* scores[h] (T,T) = scale Q_h (T,d) K_h^T (d,T): heads d columns apart, rows 3C apart */
        k->gemm_batched(0, 1, T, T, d, scale, q, 3 * C, d, q + (size_t)C * es, 3 * C, d, 0.0f,
                        scores + (size_t)b * NH * tt, T, tt, NH, dt, SL_F32);
    }
    k->softmax_causal_forward(dt, (long long)B * NH * T, T, scores, att);
    /* the probabilities V multiplies: att itself, or (dropout) att dropped into the scores'
     * place, which the softmax has read (dt fits in the f32 scores' bytes) */
    const void *p = att;
    if (dropping(drop)) {
        k->dropout(dt, (size_t)B * NH * tt, att, scores, drop->p, drop->key, drop->first);
        p = scores;
    }
    for (int b = 0; b < B; b++) {
        const char *v = (const char *)qkv + ((size_t)b * T * 3 * C + 2 * (size_t)C) * es;
        /* out_h (T,d) = att_h (T,T) V_h (T,d), written in place into (B,T,C) */
        k->gemm_batched(0, 0, T, d, T, 1.0f, (const char *)p + (size_t)b * NH * tt * es, T,
                        tt, v, 3 * C, d, 0.0f, (char *)out + (size_t)b * T * C * es, C, d, NH,
                        dt, dt);
    }
    if (owned) sl_k_free(be, scores);
}

void sl_k_attention_backward_drop(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                                  const void *dout, const void *qkv, const void *att, void *dqkv,
                                  void *work, const sl_dropout *drop)
{
    check_attention("sl_k_attention_backward", dt, B, T, C, NH);
    const sl_gpt_kops *k = gops(be);
    int owned, d = C / NH;
    size_t es = sl_dtype_size(dt);
    long long tt = (long long)T * T;
    float *datt = work_get(be, work, sl_k_attention_work_bytes(dt, B, NH, T), &owned);
    /* dS in dt: in place over dP for f32, after it in the workspace for 16 bits */
    void *dpre = dt == SL_F32 ? (void *)datt : (void *)(datt + (size_t)B * NH * tt);
    float scale = 1.0f / sqrtf((float)d);
    const int drops = dropping(drop);
    for (int b = 0; b < B; b++) {
        const char *qb = (const char *)qkv + (size_t)b * T * 3 * C * es;
        const char *ab = (const char *)att + (size_t)b * NH * tt * es;
        const char *gb = (const char *)dout + (size_t)b * T * C * es;
        char *dqb = (char *)dqkv + (size_t)b * T * 3 * C * es;
        float *db = datt + (size_t)b * NH * tt;
        if (drops) { /* the forward's dropped probabilities again, in batch b's part of dP, which
                        the GEMM below overwrites only once dV has read them */
            k->dropout(dt, (size_t)NH * tt, ab, db, drop->p, drop->key, drop->first + (uint64_t)b * NH * tt);
            ab = (const char *)db;
        }
        /* dV_h (T,d) = att_h^T (T,T) dout_h (T,d) */
        k->gemm_batched(1, 0, T, d, T, 1.0f, ab, T, tt, gb, C, d, 0.0f, dqb + 2 * (size_t)C * es,
                        3 * C, d, NH, dt, dt);
        /* datt_h (T,T) = dout_h (T,d) V_h^T (d,T) */
        k->gemm_batched(0, 1, T, T, d, 1.0f, gb, C, d, qb + 2 * (size_t)C * es, 3 * C, d, 0.0f,
                        db, T, tt, NH, dt, SL_F32);
    }
    /* through the dropout: the same mask and scale on dL/d(probabilities) */
    if (drops) k->dropout(SL_F32, (size_t)B * NH * tt, datt, datt, drop->p, drop->key, drop->first);
    k->softmax_causal_backward(dt, (long long)B * NH * T, T, att, datt, dpre);
    for (int b = 0; b < B; b++) {
        const char *qb = (const char *)qkv + (size_t)b * T * 3 * C * es;
        const char *pb = (const char *)dpre + (size_t)b * NH * tt * es;
        char *dqb = (char *)dqkv + (size_t)b * T * 3 * C * es;
        /* dQ_h (T,d) = scale dS_h (T,T) K_h (T,d);  dK_h (T,d) = scale dS_h^T Q_h */
        k->gemm_batched(0, 0, T, d, T, scale, pb, T, tt, qb + (size_t)C * es, 3 * C, d, 0.0f,
                        dqb, 3 * C, d, NH, dt, dt);
        k->gemm_batched(1, 0, T, d, T, scale, pb, T, tt, qb, 3 * C, d, 0.0f,
                        dqb + (size_t)C * es, 3 * C, d, NH, dt, dt);
    }
    if (owned) sl_k_free(be, datt);
}

void sl_k_dropout(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y, const sl_dropout *drop)
{
    check_dtype("sl_k_dropout", dt);
    if (!(drop->p >= 0 && drop->p < 1)) SL_FATAL("sl_k_dropout: p %g outside [0, 1)", (double)drop->p);
    if (!n) return;
    if (drop->p == 0) {
        if (x != y) sl_k_memcpy(be, y, x, n * sl_dtype_size(dt), SL_K_D2D);
        return;
    }
    gops(be)->dropout(dt, n, x, y, drop->p, drop->key, drop->first);
}

/* Element-wise */

void sl_k_gelu_forward(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y)
{
    check_dtype("sl_k_gelu_forward", dt);
    if (n) gops(be)->gelu_forward(dt, n, x, y);
}

void sl_k_gelu_backward(sl_backend be, sl_dtype dt, size_t n, const void *x, const void *dy,
                        void *dx)
{
    check_dtype("sl_k_gelu_backward", dt);
    if (n) gops(be)->gelu_backward(dt, n, x, dy, dx);
}

void sl_k_residual_forward(sl_backend be, sl_dtype dt, size_t n, const void *a, const void *b,
                           void *out)
{
    check_dtype("sl_k_residual_forward", dt);
    if (!n) return;
    if (out == b) {
        sl_k_add(be, dt, n, a, out);
        return;
    }
    if (out != a) sl_k_memcpy(be, out, a, n * sl_dtype_size(dt), SL_K_D2D);
    sl_k_add(be, dt, n, b, out);
}

/* Embeddings */

void sl_k_embedding_forward(sl_backend be, sl_dtype dt, int B, int T, int C, int V,
                            const int32_t *tok, const void *wte, const void *wpe, void *out)
{
    check_dtype("sl_k_embedding_forward", dt);
    check_dims("sl_k_embedding_forward", B, T, C);
    if (V <= 0) SL_FATAL("sl_k_embedding_forward: bad vocabulary V=%d", V);
    gops(be)->embedding_forward(dt, B, T, C, V, tok, wte, wpe, out);
}

void sl_k_embedding_backward(sl_backend be, sl_dtype dt, int B, int T, int C, int V,
                             const int32_t *tok, const void *dout, float *dwte, float *dwpe)
{
    check_dtype("sl_k_embedding_backward", dt);
    check_dims("sl_k_embedding_backward", B, T, C);
    if (V <= 0) SL_FATAL("sl_k_embedding_backward: bad vocabulary V=%d", V);
    gops(be)->embedding_backward(dt, B, T, C, V, tok, dout, dwte, dwpe);
}

/* LM head */

size_t sl_k_lmhead_work_bytes(int N, int V) { return (size_t)N * V * 4 * 2; }

double sl_k_lmhead_xent(sl_backend be, sl_dtype dt, int N, int C, int V, const void *x,
                        const void *wte, const int32_t *targets, void *dx, float *dwte,
                        float norm, void *work)
{
    check_dtype("sl_k_lmhead_xent", dt);
    check_dims("sl_k_lmhead_xent", N, 1, C);
    if (V < 2) SL_FATAL("sl_k_lmhead_xent: vocabulary V=%d below 2", V);
    if (dx && !dwte) SL_FATAL("sl_k_lmhead_xent: a backward pass (dx) needs dwte");
    int owned;
    float *logits = work_get(be, work, sl_k_lmhead_work_bytes(N, V), &owned);
    float *dlogits = logits + (size_t)N * V;
    /* logits (N,V) = x (N,C) wte^T (C,V) */
    sl_k_gemm(be, 0, 1, N, V, C, 1.0f, x, C, wte, C, 0.0f, logits, V, dt, SL_F32);
    double loss = sl_k_softmax_xent(be, N, V, logits, targets, dx ? dlogits : NULL, norm);
    if (dx) {
        const void *g = dlogits;
        if (dt != SL_F32) { /* GEMM operands share a dtype: dlogits rounded into logits' room */
            sl_k_cast(be, (size_t)N * V, dlogits, SL_F32, logits, dt, NULL);
            g = logits;
        }
        /* dx (N,C) = dlogits (N,V) wte (V,C);  dwte (V,C) += dlogits^T (V,N) x (N,C) */
        sl_k_gemm(be, 0, 0, N, C, V, 1.0f, g, V, wte, C, 0.0f, dx, C, dt, dt);
        sl_k_gemm(be, 1, 0, V, C, N, 1.0f, g, V, x, C, 1.0f, dwte, C, dt, SL_F32);
    }
    if (owned) sl_k_free(be, logits);
    return loss;
}
