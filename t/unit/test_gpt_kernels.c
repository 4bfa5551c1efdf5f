/* test_gpt_kernels.c — the GPT kernels (gpt.h) against their naive double references
 * (gpt_ref.h) at small shapes in f32, f16 and bf16 on the cpu backend (and on cuda where a
 * device is visible), then one whole GPT block: the double reference's gradients against
 * central finite differences, and the block built from the f32 kernels against the reference.
 *
 * Tolerances are |got - want| <= K u (1 + |want|), u the unit roundoff of the storage dtype
 * (2^-24, 2^-11, 2^-8), K stated per check: results are rounded to the dtype once, but
 * attention and the LM head also round intermediate operands (probabilities, score
 * gradients) to it, and sums of C or T terms add a few u of f32 error each. */
#include "gpt.h"
#include "gpt_ref.h"
#include "test_kernels_util.h"

static const sl_dtype DTS[] = {SL_F32, SL_F16, SL_BF16};

static double unit(sl_dtype dt)
{
    return dt == SL_F16 ? 0x1p-11 : dt == SL_BF16 ? 0x1p-8 : 0x1p-24;
}

/* A random input: its values rounded to dt, packed (h) and in double (d). */
typedef struct {
    void *h;
    double *d;
    size_t n;
} tin;

static tin mk(sl_dtype dt, uint64_t seed, size_t n, float scale)
{
    float *f = t_randn(seed, n, scale);
    tin x = {t_pack(dt, f, n), t_xmalloc(n * sizeof(double)), n};
    for (size_t i = 0; i < n; i++) x.d[i] = t_load(dt, x.h, i);
    free(f);
    return x;
}
static void *up(sl_dtype dt, tin x) { return t_up(x.h, x.n * sl_dtype_size(dt)); }
static void tfree(tin x) { free(x.h), free(x.d); }

/* backend array of n dt values, widened to f32 on the host */
static float *down(sl_dtype dt, const void *dev, size_t n)
{
    void *h = sl_k_download(T_BE, dev, n * sl_dtype_size(dt));
    float *f = t_xmalloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = t_load(dt, h, i);
    free(h);
    return f;
}
static float *down32(const void *dev, size_t n) { return down(SL_F32, dev, n); }

static void *dalloc_be(sl_dtype dt, size_t n)
{
    return sl_k_malloc(T_BE, SL_MEM_OTHER, n * sl_dtype_size(dt));
}

/* f32 host copy of a double array (f32 parameters as the kernels take them) */
static float *tof(const double *d, size_t n)
{
    float *f = t_xmalloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = (float)d[i];
    return f;
}

/* dt names the kernel's dtype; tol_dt the dtype whose unit roundoff the bound counts in (f32
 * for the f32 outputs of a 16-bit kernel) */
static int close_to_u(const char *what, sl_dtype dt, sl_dtype tol_dt, const float *got,
                      const double *want, size_t n, double K)
{
    double tol = K * unit(tol_dt), r = t_ratio(got, want, n, tol, tol);
    return ok(r <= 1.0, "%s %s %s within %g u of %s (worst %.3g of the bound)",
              sl_backend_name(T_BE), sl_dtype_name(dt), what, K, sl_dtype_name(tol_dt), r);
}
static int close_to(const char *what, sl_dtype dt, const float *got, const double *want,
                    size_t n, double K)
{
    return close_to_u(what, dt, dt, got, want, n, K);
}

/* Layer norm ------------------------------------------------------------------------------- */

static void check_layernorm(sl_dtype dt)
{
    int N = 6, C = 40; /* C not a multiple of the warp */
    tin x = mk(dt, 11, (size_t)N * C, 2.0f), g = mk(dt, 12, (size_t)N * C, 1.0f);
    tin w = mk(SL_F32, 13, C, 1.0f), b = mk(SL_F32, 14, C, 1.0f);
    double *out = t_xmalloc(N * C * 8), *mean = t_xmalloc(N * 8), *rstd = t_xmalloc(N * 8);
    double *dinp = t_xmalloc(N * C * 8), *dw = t_xmalloc(C * 8), *db = t_xmalloc(C * 8);
    for (int j = 0; j < C; j++) dw[j] = db[j] = 0.5; /* gradients accumulate */
    sl_ref_layernorm_forward(N, C, x.d, w.d, b.d, out, mean, rstd);
    sl_ref_layernorm_backward(N, C, g.d, x.d, w.d, dinp, dw, db);

    float half[64];
    for (int j = 0; j < C; j++) half[j] = 0.5f;
    void *dx = up(dt, x), *dg = up(dt, g), *dout = dalloc_be(dt, N * C), *ddin = dalloc_be(dt, N * C);
    float *dwv = t_up(w.h, C * 4), *dbv = t_up(b.h, C * 4), *dm = dalloc_be(SL_F32, N),
          *dr = dalloc_be(SL_F32, N), *ddw = t_up(half, C * 4), *ddb = t_up(half, C * 4);
    sl_k_layernorm_forward(T_BE, dt, N, C, dx, dwv, dbv, dout, dm, dr);
    sl_k_layernorm_backward(T_BE, dt, N, C, dg, dx, dwv, dm, dr, ddin, ddw, ddb);
    float *o = down(dt, dout, N * C), *m = down32(dm, N), *r = down32(dr, N);
    float *di = down(dt, ddin, N * C), *gw = down32(ddw, C), *gb = down32(ddb, C);
    close_to("layernorm forward out", dt, o, out, N * C, 8);
    close_to_u("layernorm forward mean", dt, SL_F32, m, mean, N, 64);
    close_to_u("layernorm forward rstd", dt, SL_F32, r, rstd, N, 64);
    close_to("layernorm backward dinp", dt, di, dinp, N * C, 16);
    /* dw, db: sums of N products of dt-rounded inputs, accumulated in f32 */
    close_to_u("layernorm backward dw", dt, SL_F32, gw, dw, C, 256);
    close_to_u("layernorm backward db", dt, SL_F32, gb, db, C, 256);
    free(o), free(m), free(r), free(di), free(gw), free(gb);
    t_free(dx), t_free(dg), t_free(dout), t_free(ddin), t_free(dwv), t_free(dbv), t_free(dm);
    t_free(dr), t_free(ddw), t_free(ddb);
    free(out), free(mean), free(rstd), free(dinp), free(dw), free(db);
    tfree(x), tfree(g), tfree(w), tfree(b);
}

/* The cpu backend sums a row in 16 fixed lanes (kernels/cpu/vsum.h: element j into partial sum
 * j % 16, folded halves first), so that its vectorised loops, the loop's remainder and every
 * ISA clone give the same bits. The same order in plain scalar C here must match the kernel
 * bit for bit, on rows of 40 (two whole blocks of 16 and a remainder of 8). */
static float lane_sum(const float *t, int n)
{
    float a[16] = {0};
    for (int j = 0; j < n; j++) a[j % 16] += t[j];
    for (int w = 8; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

static void check_layernorm_lanes(void)
{
    enum { N = 3, C = 40 };
    tin x = mk(SL_F32, 21, N * C, 2.0f), w = mk(SL_F32, 22, C, 1.0f), b = mk(SL_F32, 23, C, 1.0f);
    const float *xs = x.h, *ws = w.h, *bs = b.h;
    float out[N * C], mean[N], rstd[N], d[C];
    for (int i = 0; i < N; i++) {
        const float *xi = xs + i * C;
        float m = lane_sum(xi, C) / C;
        for (int j = 0; j < C; j++) d[j] = (xi[j] - m) * (xi[j] - m);
        float s = 1.0f / sqrtf(lane_sum(d, C) / C + 1e-5f);
        for (int j = 0; j < C; j++) out[i * C + j] = (xi[j] - m) * s * ws[j] + bs[j];
        mean[i] = m, rstd[i] = s;
    }
    float *dx = up(SL_F32, x), *dwv = up(SL_F32, w), *dbv = up(SL_F32, b);
    float *dout = dalloc_be(SL_F32, N * C), *dm = dalloc_be(SL_F32, N), *dr = dalloc_be(SL_F32, N);
    sl_k_layernorm_forward(T_BE, SL_F32, N, C, dx, dwv, dbv, dout, dm, dr);
    float *o = down32(dout, N * C), *m = down32(dm, N), *r = down32(dr, N);
    ok(!memcmp(o, out, sizeof out) && !memcmp(m, mean, sizeof mean) && !memcmp(r, rstd, sizeof rstd),
       "cpu layernorm forward: the bits of the fixed 16-lane order, row of %d", C);
    free(o), free(m), free(r);
    t_free(dx), t_free(dwv), t_free(dbv), t_free(dout), t_free(dm), t_free(dr);
    tfree(x), tfree(w), tfree(b);
}

/* Attention -------------------------------------------------------------------------------- */

/* drop_p > 0: with dropout on the probabilities (numbered from 1000, as a later micro-batch's) */
static void check_attention(sl_dtype dt, int B, int T, int C, int NH, float drop_p)
{
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    tin qkv = mk(dt, 21, nq, 1.0f), g = mk(dt, 22, no, 1.0f);
    const sl_dropout drop = {drop_p, 4242, 1000};
    double *att = t_xmalloc(na * 8), *out = t_xmalloc(no * 8), *dqkv = t_xmalloc(nq * 8);
    sl_ref_attention_forward_drop(B, T, C, NH, qkv.d, att, out, &drop);
    sl_ref_attention_backward_drop(B, T, C, NH, g.d, qkv.d, att, dqkv, &drop);

    void *dq = up(dt, qkv), *dg = up(dt, g), *da = dalloc_be(dt, na), *dout = dalloc_be(dt, no);
    void *ddq = dalloc_be(dt, nq);
    void *work = sl_k_malloc(T_BE, SL_MEM_OTHER, sl_k_attention_work_bytes(dt, B, NH, T));
    sl_k_attention_forward_drop(T_BE, dt, B, T, C, NH, dq, da, dout, work, &drop);
    sl_k_attention_backward_drop(T_BE, dt, B, T, C, NH, dg, dq, da, ddq, NULL, &drop);
    float *a = down(dt, da, na), *o = down(dt, dout, no), *d = down(dt, ddq, nq);
    char what[96];
    snprintf(what, sizeof what, "attention B=%d T=%d C=%d NH=%d%s", B, T, C, NH, drop_p > 0 ? " dropout 0.2" : "");
    char w1[128], w2[128], w3[128];
    snprintf(w1, sizeof w1, "%s probabilities", what);
    snprintf(w2, sizeof w2, "%s out", what);
    snprintf(w3, sizeof w3, "%s dqkv", what);
    close_to(w1, dt, a, att, na, 8);
    close_to(w2, dt, o, out, no, 16);
    /* dS rounded to dt before the dQ, dK GEMMs; T-term sums */
    close_to(w3, dt, d, dqkv, nq, 48);
    int masked = 0;
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++)
            for (int u = t + 1; u < T; u++) masked += a[((size_t)bh * T + t) * T + u] != 0.0f;
    ok(!masked, "%s %s %s: no weight above the diagonal (%d)", sl_backend_name(T_BE),
       sl_dtype_name(dt), what, masked);
    free(a), free(o), free(d);
    t_free(dq), t_free(dg), t_free(da), t_free(dout), t_free(ddq), t_free(work);
    free(att), free(out), free(dqkv);
    tfree(qkv), tfree(g);
}

/* Dropout: each element kept exactly where sl_dropout_keep says, scaled by 1/(1 - p) and
 * rounded to dt once, the rest 0; in place the same; about p of them dropped. */
static void check_dropout(sl_dtype dt)
{
    const size_t n = 20000;
    const sl_dropout d = {0.3f, 99, 123456};
    tin x = mk(dt, 35, n, 1.0f);
    void *dx = up(dt, x), *dy = dalloc_be(dt, n);
    sl_k_dropout(T_BE, dt, n, dx, dy, &d);
    sl_k_dropout(T_BE, dt, n, dx, dx, &d);
    float *y = down(dt, dy, n), *yi = down(dt, dx, n);
    size_t wrong = 0, dropped = 0;
    for (size_t i = 0; i < n; i++) {
        const int keep = sl_dropout_keep(d.key, d.first + i, d.p);
        const float want = keep ? sl_round_to(dt, (float)x.d[i] * sl_dropout_scale(d.p)) : 0.0f;
        wrong += y[i] != want || yi[i] != want;
        dropped += !keep;
    }
    const double frac = (double)dropped / n;
    ok(!wrong && fabs(frac - d.p) < 0.02, "%s %s dropout p 0.3: every element as the mask says (%zu wrong), in place "
       "too; %.3f dropped", sl_backend_name(T_BE), sl_dtype_name(dt), wrong, frac);
    free(y), free(yi);
    t_free(dx), t_free(dy);
    tfree(x);
}

/* GELU, residual ---------------------------------------------------------------------------- */

static void check_elementwise(sl_dtype dt)
{
    size_t n = 5000; /* more than one block of the cpu loops */
    tin x = mk(dt, 31, n, 2.0f), g = mk(dt, 32, n, 1.0f);
    double *y = t_xmalloc(n * 8), *dx = t_xmalloc(n * 8), *s = t_xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        y[i] = sl_ref_gelu(x.d[i]);
        dx[i] = g.d[i] * sl_ref_gelu_grad(x.d[i]);
        s[i] = x.d[i] + g.d[i];
    }
    void *bx = up(dt, x), *bg = up(dt, g), *by = dalloc_be(dt, n), *bd = dalloc_be(dt, n);
    void *bs = dalloc_be(dt, n);
    sl_k_gelu_forward(T_BE, dt, n, bx, by);
    sl_k_gelu_backward(T_BE, dt, n, bx, bg, bd);
    sl_k_residual_forward(T_BE, dt, n, bx, bg, bs);
    float *fy = down(dt, by, n), *fd = down(dt, bd, n), *fs = down(dt, bs, n);
    close_to("gelu forward", dt, fy, y, n, 8);
    /* gelu' has a cancelling sum (0.5 (1 + t) + ...): a few more roundings of f32 */
    close_to("gelu backward", dt, fd, dx, n, 32);
    close_to("residual add", dt, fs, s, n, 1);
    sl_k_residual_forward(T_BE, dt, n, bx, bg, bg); /* out may be an input */
    free(fs);
    fs = down(dt, bg, n);
    close_to("residual add in place", dt, fs, s, n, 1);
    free(fy), free(fd), free(fs), free(y), free(dx), free(s);
    t_free(bx), t_free(bg), t_free(by), t_free(bd), t_free(bs);
    tfree(x), tfree(g);
}

/* Embeddings, LM head ------------------------------------------------------------------------ */

static void check_embedding(sl_dtype dt)
{
    int B = 3, T = 5, C = 70, V = 7; /* 15 tokens over 7 ids: repeats */
    size_t no = (size_t)B * T * C;
    int32_t tok[15];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)((i * 5 + 3) % V);
    tin wte = mk(dt, 41, (size_t)V * C, 1.0f), wpe = mk(dt, 42, (size_t)T * C, 1.0f);
    tin g = mk(dt, 43, no, 1.0f);
    double *out = t_xmalloc(no * 8), *dwte = t_xmalloc((size_t)V * C * 8),
           *dwpe = t_xmalloc((size_t)T * C * 8);
    float *one = t_xmalloc((size_t)V * C * 4);
    for (size_t i = 0; i < (size_t)V * C; i++) dwte[i] = one[i] = 1.0f;
    for (size_t i = 0; i < (size_t)T * C; i++) dwpe[i] = 1.0;
    sl_ref_embedding_forward(B, T, C, tok, wte.d, wpe.d, out);
    sl_ref_embedding_backward(B, T, C, tok, g.d, dwte, dwpe);
    int32_t *btok = t_up(tok, sizeof tok);
    void *bte = up(dt, wte), *bpe = up(dt, wpe), *bg = up(dt, g), *bo = dalloc_be(dt, no);
    float *gte = t_up(one, (size_t)V * C * 4), *gpe = t_up(one, (size_t)T * C * 4);
    sl_k_embedding_forward(T_BE, dt, B, T, C, V, btok, bte, bpe, bo);
    sl_k_embedding_backward(T_BE, dt, B, T, C, V, btok, bg, gte, gpe);
    float *o = down(dt, bo, no), *fte = down32(gte, (size_t)V * C), *fpe = down32(gpe, (size_t)T * C);
    close_to("embedding forward", dt, o, out, no, 1);
    close_to_u("embedding backward dwte (scatter-add)", dt, SL_F32, fte, dwte, (size_t)V * C, 8);
    close_to_u("embedding backward dwpe", dt, SL_F32, fpe, dwpe, (size_t)T * C, 8);
    free(o), free(fte), free(fpe), free(one), free(out), free(dwte), free(dwpe);
    t_free(btok), t_free(bte), t_free(bpe), t_free(bg), t_free(bo), t_free(gte), t_free(gpe);
    tfree(wte), tfree(wpe), tfree(g);
}

static void check_lmhead(sl_dtype dt)
{
    int N = 6, C = 16, V = 50;
    int32_t tgt[6] = {0, 49, 7, 7, 23, 1};
    float norm = 1.0f / N;
    tin x = mk(dt, 51, (size_t)N * C, 1.0f), wte = mk(dt, 52, (size_t)V * C, 0.5f);
    double *dx = t_xmalloc((size_t)N * C * 8), *dwte = t_xmalloc((size_t)V * C * 8);
    double want = sl_ref_lmhead_xent(N, C, V, x.d, wte.d, tgt, norm, dx, dwte);
    int32_t *bt = t_up(tgt, sizeof tgt);
    void *bx = up(dt, x), *bw = up(dt, wte), *bdx = dalloc_be(dt, (size_t)N * C);
    float *bdw = dalloc_be(SL_F32, (size_t)V * C);
    double got = sl_k_lmhead_xent(T_BE, dt, N, C, V, bx, bw, bt, bdx, bdw, norm, NULL);
    double fwd = sl_k_lmhead_xent(T_BE, dt, N, C, V, bx, bw, bt, NULL, NULL, norm, NULL);
    float *fdx = down(dt, bdx, (size_t)N * C), *fdw = down32(bdw, (size_t)V * C);
    /* logits are f32 sums of C products of dt values: the loss sees f32 error only */
    ok(fabs(got - want) <= 64 * 0x1p-24 * (1 + fabs(want)) && got == fwd,
       "%s %s lmhead loss %.9g vs %.9g (forward only: %.9g)", sl_backend_name(T_BE),
       sl_dtype_name(dt), got, want, fwd);
    close_to("lmhead dx", dt, fdx, dx, (size_t)N * C, 16);
    close_to("lmhead dwte", dt, fdw, dwte, (size_t)V * C, 8);
    free(fdx), free(fdw), free(dx), free(dwte);
    t_free(bt), t_free(bx), t_free(bw), t_free(bdx), t_free(bdw);
    tfree(x), tfree(wte);
}

/* The whole block ------------------------------------------------------------------------------ */

enum { BB = 2, BT = 4, BC = 8, BNH = 2 };

/* parameters near a trained block's: layer-norm gains around 1, small weights */
static double *block_params(void)
{
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(BC, off);
    double *p = t_xmalloc(off[SL_GPT_NPARAMS] * 8);
    for (size_t i = 0; i < off[SL_GPT_NPARAMS]; i++) p[i] = 0.3 * sl_rng_normal(61, i);
    for (int j = 0; j < BC; j++) {
        p[off[SL_GPT_LN1W] + j] += 1.0;
        p[off[SL_GPT_LN2W] + j] += 1.0;
    }
    return p;
}

static double block_loss(const double *p, const double *x, const double *r, const sl_dropout *drop)
{
    size_t n = (size_t)BB * BT * BC;
    double *out = t_xmalloc(n * 8), s = 0;
    sl_ref_gpt_block_drop(BB, BT, BC, BNH, p, x, out, NULL, NULL, NULL, drop);
    for (size_t i = 0; i < n; i++) s += out[i] * r[i];
    free(out);
    return s;
}

/* |fd - an| <= 1e-8 + 1e-7 |an| for every parameter and input, with L = sum(out * r); with
 * dropout p (its masks fixed by their keys, as every pass of a step draws them) too */
static void check_block_fd(float p_drop)
{
    size_t np = sl_ref_gpt_block_params(BC), n = (size_t)BB * BT * BC;
    double *p = block_params(), *x = t_xmalloc(n * 8), *r = t_xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) x[i] = sl_rng_normal(62, i), r[i] = sl_rng_normal(63, i);
    double *out = t_xmalloc(n * 8), *dx = t_xmalloc(n * 8), *dp = t_xmalloc(np * 8);
    const sl_dropout drop[3] = {{p_drop, 11, 0}, {p_drop, 12, 5}, {p_drop, 13, 9}};
    sl_ref_gpt_block_drop(BB, BT, BC, BNH, p, x, out, r, dx, dp, drop);
    double h = 1e-5, worst = 0, worst_rel = 0;
    for (size_t i = 0; i < np + n; i++) {
        double *v = i < np ? &p[i] : &x[i - np], an = i < np ? dp[i] : dx[i - np], keep = *v;
        *v = keep + h;
        double lp = block_loss(p, x, r, drop);
        *v = keep - h;
        double lm = block_loss(p, x, r, drop);
        *v = keep;
        double fd = (lp - lm) / (2 * h), e = fabs(fd - an) / (1e-8 + 1e-7 * fabs(an));
        if (!(e <= worst)) worst = e;
        double rel = fabs(fd - an) / (fabs(an) > 1e-3 ? fabs(an) : 1e-3);
        if (rel > worst_rel) worst_rel = rel;
    }
    ok(worst <= 1.0,
       "f64 GPT block (B=%d T=%d C=%d heads=%d, dropout %g): %zu parameter and %zu input gradients match "
       "central differences (h=1e-5) within 1e-8 + 1e-7 |g| (worst %.3g of the bound, "
       "relative error %.2g)", BB, BT, BC, BNH, (double)p_drop, np, n, worst, worst_rel);
    free(p), free(x), free(r), free(out), free(dx), free(dp);
}

/* max |got - want| over max |want|, per tensor */
static double normwise(const float *got, const double *want, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= e)) e = d;
        if (fabs(want[i]) > m) m = fabs(want[i]);
    }
    return m > 0 ? e / m : e;
}

/* out (N,OC) = inp (N,C) w^T + b, f32 kernels */
static void lin_f(int N, int C, int OC, const float *inp, const float *w, const float *b,
                  float *out)
{
    sl_k_sgemm(T_BE, 0, 1, N, OC, C, 1.0f, inp, C, w, C, 0.0f, out, OC);
    sl_k_bias_add(T_BE, N, OC, out, b);
}
static void lin_b(int N, int C, int OC, const float *dout, const float *inp, const float *w,
                  float *dinp, float *dw, float *db)
{
    sl_k_sgemm(T_BE, 0, 0, N, C, OC, 1.0f, dout, OC, w, C, 0.0f, dinp, C);
    sl_k_sgemm(T_BE, 1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    sl_k_bias_grad(T_BE, N, OC, dout, db);
}

/* The block from the f32 kernels against the double reference: out, dx and every parameter
 * gradient within 1e-5 of the tensor's largest value. */
static void check_block_kernels(void)
{
    const int N = BB * BT, C = BC;
    size_t off[SL_GPT_NPARAMS + 1], n = (size_t)N * C;
    sl_gpt_block_offsets(C, off);
    size_t np = off[SL_GPT_NPARAMS];
    double *p = block_params(), *x = t_xmalloc(n * 8), *r = t_xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) x[i] = sl_rng_normal(62, i), r[i] = sl_rng_normal(63, i);
    double *out = t_xmalloc(n * 8), *dx = t_xmalloc(n * 8), *dp = t_xmalloc(np * 8);
    sl_ref_gpt_block(BB, BT, C, BNH, p, x, out, r, dx, dp);

    float *hp = tof(p, np), *hx = tof(x, n), *hr = tof(r, n);
    float *P = t_up(hp, np * 4), *X = t_up(hx, n * 4), *R = t_up(hr, n * 4);
    float *DP = dalloc_be(SL_F32, np);
#define PW(i) (P + off[i])
#define GW(i) (DP + off[i])
    float *ln1 = dalloc_be(SL_F32, n), *m1 = dalloc_be(SL_F32, N), *r1 = dalloc_be(SL_F32, N);
    float *qkv = dalloc_be(SL_F32, 3 * n), *att = dalloc_be(SL_F32, (size_t)BB * BNH * BT * BT);
    float *y = dalloc_be(SL_F32, n), *h = dalloc_be(SL_F32, n), *ln2 = dalloc_be(SL_F32, n);
    float *m2 = dalloc_be(SL_F32, N), *r2 = dalloc_be(SL_F32, N);
    float *fc = dalloc_be(SL_F32, 4 * n), *ge = dalloc_be(SL_F32, 4 * n), *o = dalloc_be(SL_F32, n);
    sl_k_layernorm_forward(T_BE, SL_F32, N, C, X, PW(SL_GPT_LN1W), PW(SL_GPT_LN1B), ln1, m1, r1);
    lin_f(N, C, 3 * C, ln1, PW(SL_GPT_WQKV), PW(SL_GPT_BQKV), qkv);
    sl_k_attention_forward(T_BE, SL_F32, BB, BT, C, BNH, qkv, att, y, NULL);
    lin_f(N, C, C, y, PW(SL_GPT_WPROJ), PW(SL_GPT_BPROJ), h);
    sl_k_residual_forward(T_BE, SL_F32, n, X, h, h);
    sl_k_layernorm_forward(T_BE, SL_F32, N, C, h, PW(SL_GPT_LN2W), PW(SL_GPT_LN2B), ln2, m2, r2);
    lin_f(N, C, 4 * C, ln2, PW(SL_GPT_WFC), PW(SL_GPT_BFC), fc);
    sl_k_gelu_forward(T_BE, SL_F32, 4 * n, fc, ge);
    lin_f(N, 4 * C, C, ge, PW(SL_GPT_WFCPROJ), PW(SL_GPT_BFCPROJ), o);
    sl_k_residual_forward(T_BE, SL_F32, n, h, o, o);
    /* backward, dout = r */
    float *dge = dalloc_be(SL_F32, 4 * n), *dln2 = dalloc_be(SL_F32, n), *dh = dalloc_be(SL_F32, n);
    float *dy = dalloc_be(SL_F32, n), *dqkv = dalloc_be(SL_F32, 3 * n), *dln1 = dalloc_be(SL_F32, n);
    float *DX = dalloc_be(SL_F32, n);
    lin_b(N, 4 * C, C, R, ge, PW(SL_GPT_WFCPROJ), dge, GW(SL_GPT_WFCPROJ), GW(SL_GPT_BFCPROJ));
    sl_k_gelu_backward(T_BE, SL_F32, 4 * n, fc, dge, dge);
    lin_b(N, C, 4 * C, dge, ln2, PW(SL_GPT_WFC), dln2, GW(SL_GPT_WFC), GW(SL_GPT_BFC));
    sl_k_layernorm_backward(T_BE, SL_F32, N, C, dln2, h, PW(SL_GPT_LN2W), m2, r2, dh,
                            GW(SL_GPT_LN2W), GW(SL_GPT_LN2B));
    sl_k_add(T_BE, SL_F32, n, R, dh); /* the residual's gradient passes through */
    lin_b(N, C, C, dh, y, PW(SL_GPT_WPROJ), dy, GW(SL_GPT_WPROJ), GW(SL_GPT_BPROJ));
    sl_k_attention_backward(T_BE, SL_F32, BB, BT, C, BNH, dy, qkv, att, dqkv, NULL);
    lin_b(N, C, 3 * C, dqkv, ln1, PW(SL_GPT_WQKV), dln1, GW(SL_GPT_WQKV), GW(SL_GPT_BQKV));
    sl_k_layernorm_backward(T_BE, SL_F32, N, C, dln1, X, PW(SL_GPT_LN1W), m1, r1, DX,
                            GW(SL_GPT_LN1W), GW(SL_GPT_LN1B));
    sl_k_add(T_BE, SL_F32, n, dh, DX);
    float *fo = down32(o, n), *fdx = down32(DX, n), *fdp = down32(DP, np);
    static const char *const names[SL_GPT_NPARAMS] = {
        "ln1w", "ln1b", "wqkv", "bqkv", "wproj", "bproj", "ln2w", "ln2b", "wfc", "bfc",
        "wfcproj", "bfcproj"};
    double e_out = normwise(fo, out, n), e_dx = normwise(fdx, dx, n), e_p = 0;
    const char *worst = names[0];
    for (int i = 0; i < SL_GPT_NPARAMS; i++) {
        double e = normwise(fdp + off[i], dp + off[i], off[i + 1] - off[i]);
        if (!(e <= e_p)) e_p = e, worst = names[i];
    }
    ok(e_out <= 1e-5 && e_dx <= 1e-5 && e_p <= 1e-5,
       "%s f32 GPT block from the kernels matches the f64 reference within 1e-5 of each "
       "tensor's largest value (out %.2g, dx %.2g, parameters %.2g at %s)",
       sl_backend_name(T_BE), e_out, e_dx, e_p, worst);
#undef PW
#undef GW
    free(fo), free(fdx), free(fdp), free(hp), free(hx), free(hr);
    float *all[] = {P, X, R, DP, ln1, m1, r1, qkv, att, y, h, ln2, m2, r2, fc, ge, o,
                    dge, dln2, dh, dy, dqkv, dln1, DX};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) t_free(all[i]);
    free(p), free(x), free(r), free(out), free(dx), free(dp);
}

static void run_backend(void)
{
    for (int i = 0; i < 3; i++) {
        sl_dtype dt = DTS[i];
        check_layernorm(dt);
        check_attention(dt, 2, 5, 16, 2, 0);
        check_attention(dt, 2, 37, 24, 3, 0); /* rows longer than a warp */
        check_attention(dt, 2, 37, 24, 3, 0.2f);
        check_dropout(dt);
        check_elementwise(dt);
        check_embedding(dt);
        check_lmhead(dt);
    }
    check_block_kernels();
}

/* The attention's stated cost at a shape small enough to count by hand: B=1, T=2, C=4, 2 heads
 * (B T C = 8 activations, B NH T T = 8 scores). */
static void check_attention_cost(void)
{
    double fl, by, flb, byb;
    sl_k_attention_cost(SL_F32, 1, 2, 4, 2, 0, &fl, &by);
    sl_k_attention_cost(SL_BF16, 1, 2, 4, 2, 1, &flb, &byb);
    /* forward: 4 B T^2 C; qkv 24 + out 8 values, scores 8 f32 written and read, att 8 written
     * and read. backward: 8 B T^2 C; dout 8 + qkv 24 + att 8 + dqkv 24 values in bf16, dP 8
     * f32 written and read, dS 8 bf16 written and read */
    ok(fl == 64 && by == 4 * 32 + 64 + 64 && flb == 128 && byb == 2 * 64 + 64 + 32,
       "attention cost: forward %.0f FLOP %.0f B, bf16 backward %.0f FLOP %.0f B", fl, by, flb,
       byb);
}

/* The checks of the cpu kernels alone: their summation order, and the f64 block's gradients. */
static void cpu_only(void)
{
    check_layernorm_lanes();
    check_block_fd(0);
    check_block_fd(0.3f);
}

int main(void)
{
    check_attention_cost();
    t_each_backend(run_backend, cpu_only);
    done_testing();
    return exit_status();
}
