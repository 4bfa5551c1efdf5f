/* gpt_ref.c — naive double-precision references of the GPT kernels and one whole block
 * (gpt_ref.h): plain loops in the order of the formulas, nothing fused or blocked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_ref.h"
#include "ref.h"
#include "sl_error.h"

#define LN_EPS 1e-5

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p) SL_FATAL("out of memory: %zu doubles for a GPT reference", n);
    return p;
}

void sl_ref_layernorm_forward(int N, int C, const double *inp, const double *w, const double *b,
                              double *out, double *mean, double *rstd)
{
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C;
        double m = 0, v = 0;
        for (int j = 0; j < C; j++) m += x[j];
        m /= C;
        for (int j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        double s = 1.0 / sqrt(v / C + LN_EPS);
        for (int j = 0; j < C; j++) out[(size_t)i * C + j] = (x[j] - m) * s * w[j] + b[j];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = s;
    }
}

void sl_ref_layernorm_backward(int N, int C, const double *dout, const double *inp,
                               const double *w, double *dinp, double *dw, double *db)
{
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
        double m = 0, v = 0;
        for (int j = 0; j < C; j++) m += x[j];
        m /= C;
        for (int j = 0; j < C; j++) v += (x[j] - m) * (x[j] - m);
        double s = 1.0 / sqrt(v / C + LN_EPS), s1 = 0, s2 = 0;
        for (int j = 0; j < C; j++) {
            double xh = (x[j] - m) * s;
            s1 += g[j] * w[j];
            s2 += g[j] * w[j] * xh;
            dw[j] += g[j] * xh;
            db[j] += g[j];
        }
        s1 /= C;
        s2 /= C;
        for (int j = 0; j < C; j++)
            dinp[(size_t)i * C + j] = s * (g[j] * w[j] - s1 - (x[j] - m) * s * s2);
    }
}

/* The factor element i of a dropout site multiplies by: 0, or the kernels' 1/(1 - p) (f32);
 * 1 without dropout. */
static double drop_factor(const sl_dropout *d, uint64_t i)
{
    if (!d || d->p == 0) return 1.0;
    return sl_dropout_keep(d->key, d->first + i, d->p) ? (double)sl_dropout_scale(d->p) : 0.0;
}

void sl_ref_attention_forward(int B, int T, int C, int NH, const double *qkv, double *att,
                              double *out)
{
    sl_ref_attention_forward_drop(B, T, C, NH, qkv, att, out, NULL);
}

void sl_ref_attention_backward(int B, int T, int C, int NH, const double *dout,
                               const double *qkv, const double *att, double *dqkv)
{
    sl_ref_attention_backward_drop(B, T, C, NH, dout, qkv, att, dqkv, NULL);
}

void sl_ref_attention_forward_drop(int B, int T, int C, int NH, const double *qkv, double *att,
                                   double *out, const sl_dropout *drop)
{
    int d = C / NH;
    double scale = 1.0 / sqrt((double)d);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * d;
                double *a = att + (((size_t)b * NH + h) * T + t) * T, m = -INFINITY, s = 0;
                for (int u = 0; u < T; u++) {
                    if (u > t) {
                        a[u] = 0;
                        continue;
                    }
                    const double *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * d;
                    double dot = 0;
                    for (int i = 0; i < d; i++) dot += q[i] * k[i];
                    a[u] = dot * scale;
                    m = a[u] > m ? a[u] : m;
                }
                for (int u = 0; u <= t; u++) s += a[u] = exp(a[u] - m);
                for (int u = 0; u <= t; u++) a[u] /= s;
                double *o = out + ((size_t)b * T + t) * C + h * d;
                const uint64_t row = (((uint64_t)b * NH + h) * T + t) * T;
                for (int i = 0; i < d; i++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++)
                        acc += a[u] * drop_factor(drop, row + u) * qkv[((size_t)b * T + u) * 3 * C + 2 * C + h * d + i];
                    o[i] = acc;
                }
            }
}

void sl_ref_attention_backward_drop(int B, int T, int C, int NH, const double *dout,
                                    const double *qkv, const double *att, double *dqkv,
                                    const sl_dropout *drop)
{
    int d = C / NH;
    double scale = 1.0 / sqrt((double)d);
    double *da = dalloc(T);
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *a = att + (((size_t)b * NH + h) * T + t) * T;
                const double *g = dout + ((size_t)b * T + t) * C + h * d;
                double s = 0;
                const uint64_t row = (((uint64_t)b * NH + h) * T + t) * T;
                for (int u = 0; u <= t; u++) {
                    double *dv = dqkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * d;
                    const double *v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * d;
                    const double f = drop_factor(drop, row + u);
                    da[u] = 0;
                    for (int i = 0; i < d; i++) {
                        dv[i] += a[u] * f * g[i];
                        da[u] += g[i] * v[i];
                    }
                    da[u] *= f; /* through the dropout to the probabilities */
                    s += a[u] * da[u];
                }
                const double *q = qkv + ((size_t)b * T + t) * 3 * C + h * d;
                double *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * d;
                for (int u = 0; u <= t; u++) {
                    double ds = a[u] * (da[u] - s) * scale;
                    const double *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * d;
                    double *dk = dqkv + ((size_t)b * T + u) * 3 * C + C + h * d;
                    for (int i = 0; i < d; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
    free(da);
}

void sl_ref_linear_forward(int N, int C, int OC, const double *inp, const double *w,
                           const double *b, double *out)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (int j = 0; j < C; j++) s += inp[(size_t)i * C + j] * w[(size_t)o * C + j];
            out[(size_t)i * OC + o] = s;
        }
}

void sl_ref_linear_backward(int N, int C, int OC, const double *dout, const double *inp,
                            const double *w, double *dinp, double *dw, double *db)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int o = 0; o < OC; o++) s += dout[(size_t)i * OC + o] * w[(size_t)o * C + j];
            dinp[(size_t)i * C + j] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int i = 0; i < N; i++) s += dout[(size_t)i * OC + o] * inp[(size_t)i * C + j];
            dw[(size_t)o * C + j] += s;
        }
        if (db)
            for (int i = 0; i < N; i++) db[o] += dout[(size_t)i * OC + o];
    }
}

void sl_ref_embedding_forward(int B, int T, int C, const int32_t *tok, const double *wte,
                              const double *wpe, double *out)
{
    for (int i = 0; i < B * T; i++)
        for (int j = 0; j < C; j++)
            out[(size_t)i * C + j] = wte[(size_t)tok[i] * C + j] + wpe[(size_t)(i % T) * C + j];
}

void sl_ref_embedding_backward(int B, int T, int C, const int32_t *tok, const double *dout,
                               double *dwte, double *dwpe)
{
    for (int i = 0; i < B * T; i++)
        for (int j = 0; j < C; j++) {
            dwte[(size_t)tok[i] * C + j] += dout[(size_t)i * C + j];
            dwpe[(size_t)(i % T) * C + j] += dout[(size_t)i * C + j];
        }
}

double sl_ref_lmhead_xent(int N, int C, int V, const double *x, const double *wte,
                          const int32_t *targets, double norm, double *dx, double *dwte)
{
    double *z = dalloc(V), loss = 0;
    for (int i = 0; i < N; i++) {
        const double *xi = x + (size_t)i * C;
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) {
            z[v] = 0;
            for (int j = 0; j < C; j++) z[v] += xi[j] * wte[(size_t)v * C + j];
            m = z[v] > m ? z[v] : m;
        }
        for (int v = 0; v < V; v++) s += exp(z[v] - m);
        double lse = m + log(s);
        loss += lse - z[targets[i]];
        if (!dx) continue;
        for (int j = 0; j < C; j++) dx[(size_t)i * C + j] = 0;
        for (int v = 0; v < V; v++) {
            double g = norm * (exp(z[v] - lse) - (v == targets[i]));
            for (int j = 0; j < C; j++) {
                dx[(size_t)i * C + j] += g * wte[(size_t)v * C + j];
                dwte[(size_t)v * C + j] += g * xi[j];
            }
        }
    }
    free(z);
    return norm * loss;
}

void sl_gpt_block_offsets(int C, size_t off[SL_GPT_NPARAMS + 1])
{
    size_t c = (size_t)C, n[SL_GPT_NPARAMS] = {c, c, 3 * c * c, 3 * c, c * c, c,
                                               c, c, 4 * c * c, 4 * c, 4 * c * c, c};
    off[0] = 0;
    for (int i = 0; i < SL_GPT_NPARAMS; i++) off[i + 1] = off[i] + n[i];
}

size_t sl_ref_gpt_block_params(int C)
{
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(C, off);
    return off[SL_GPT_NPARAMS];
}

void sl_ref_gpt_block(int B, int T, int C, int NH, const double *p, const double *x, double *out,
                      const double *dout, double *dx, double *dp)
{
    sl_ref_gpt_block_drop(B, T, C, NH, p, x, out, dout, dx, dp, NULL);
}

void sl_ref_dropout(const sl_dropout *d, size_t n, double *v)
{
    for (size_t i = 0; d && d->p > 0 && i < n; i++) v[i] *= drop_factor(d, i);
}

void sl_ref_gpt_block_drop(int B, int T, int C, int NH, const double *p, const double *x, double *out,
                           const double *dout, double *dx, double *dp, const sl_dropout *drop)
{
    const sl_dropout *da = drop ? &drop[0] : NULL, *dr1 = drop ? &drop[1] : NULL, *dr2 = drop ? &drop[2] : NULL;
    size_t off[SL_GPT_NPARAMS + 1], N = (size_t)B * T;
    sl_gpt_block_offsets(C, off);
#define P(i) (p + off[i])
#define DP(i) (dp + off[i])
    double *ln1 = dalloc(N * C), *qkv = dalloc(N * 3 * C), *att = dalloc((size_t)B * NH * T * T);
    double *y = dalloc(N * C), *h = dalloc(N * C), *ln2 = dalloc(N * C);
    double *fc = dalloc(N * 4 * C), *ge = dalloc(N * 4 * C);
    sl_ref_layernorm_forward((int)N, C, x, P(SL_GPT_LN1W), P(SL_GPT_LN1B), ln1, NULL, NULL);
    sl_ref_linear_forward((int)N, C, 3 * C, ln1, P(SL_GPT_WQKV), P(SL_GPT_BQKV), qkv);
    sl_ref_attention_forward_drop(B, T, C, NH, qkv, att, y, da);
    sl_ref_linear_forward((int)N, C, C, y, P(SL_GPT_WPROJ), P(SL_GPT_BPROJ), h);
    sl_ref_dropout(dr1, N * C, h);
    for (size_t i = 0; i < N * C; i++) h[i] += x[i];
    sl_ref_layernorm_forward((int)N, C, h, P(SL_GPT_LN2W), P(SL_GPT_LN2B), ln2, NULL, NULL);
    sl_ref_linear_forward((int)N, C, 4 * C, ln2, P(SL_GPT_WFC), P(SL_GPT_BFC), fc);
    for (size_t i = 0; i < N * 4 * C; i++) ge[i] = sl_ref_gelu(fc[i]);
    sl_ref_linear_forward((int)N, 4 * C, C, ge, P(SL_GPT_WFCPROJ), P(SL_GPT_BFCPROJ), out);
    sl_ref_dropout(dr2, N * C, out);
    for (size_t i = 0; i < N * C; i++) out[i] += h[i];
    if (dout) {
        double *dge = dalloc(N * 4 * C), *dln2 = dalloc(N * C), *dh = dalloc(N * C);
        double *dy = dalloc(N * C), *dqkv = dalloc(N * 3 * C), *dln1 = dalloc(N * C);
        double *dmlp = dalloc(N * C), *dattn = dalloc(N * C);
        memcpy(dmlp, dout, N * C * sizeof *dmlp);
        sl_ref_dropout(dr2, N * C, dmlp);
        sl_ref_linear_backward((int)N, 4 * C, C, dmlp, ge, P(SL_GPT_WFCPROJ), dge,
                               DP(SL_GPT_WFCPROJ), DP(SL_GPT_BFCPROJ));
        for (size_t i = 0; i < N * 4 * C; i++) dge[i] *= sl_ref_gelu_grad(fc[i]);
        sl_ref_linear_backward((int)N, C, 4 * C, dge, ln2, P(SL_GPT_WFC), dln2, DP(SL_GPT_WFC),
                               DP(SL_GPT_BFC));
        sl_ref_layernorm_backward((int)N, C, dln2, h, P(SL_GPT_LN2W), dh, DP(SL_GPT_LN2W),
                                  DP(SL_GPT_LN2B));
        for (size_t i = 0; i < N * C; i++) dh[i] += dout[i]; /* the residual */
        memcpy(dattn, dh, N * C * sizeof *dattn);
        sl_ref_dropout(dr1, N * C, dattn);
        sl_ref_linear_backward((int)N, C, C, dattn, y, P(SL_GPT_WPROJ), dy, DP(SL_GPT_WPROJ),
                               DP(SL_GPT_BPROJ));
        sl_ref_attention_backward_drop(B, T, C, NH, dy, qkv, att, dqkv, da);
        sl_ref_linear_backward((int)N, C, 3 * C, dqkv, ln1, P(SL_GPT_WQKV), dln1,
                               DP(SL_GPT_WQKV), DP(SL_GPT_BQKV));
        sl_ref_layernorm_backward((int)N, C, dln1, x, P(SL_GPT_LN1W), dx, DP(SL_GPT_LN1W),
                                  DP(SL_GPT_LN1B));
        for (size_t i = 0; i < N * C; i++) dx[i] += dh[i];
        free(dge), free(dln2), free(dh), free(dy), free(dqkv), free(dln1), free(dmlp), free(dattn);
    }
#undef P
#undef DP
    free(ln1), free(qkv), free(att), free(y), free(h), free(ln2), free(fc), free(ge);
}
