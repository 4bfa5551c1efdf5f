/* gpt_ref.h — naive double-precision references of the GPT kernels (gpt.h), loops written for
 * clarity, plus one whole GPT block forward and backward built from them: what the unit tests
 * check the kernels against, and the block the finite-difference gradient check differentiates.
 * Shapes as in gpt.h; every array here is double; gradients of parameters accumulate (+=),
 * gradients of inputs are assigned (=). */
#ifndef SL_KERNELS_GPT_REF_H
#define SL_KERNELS_GPT_REF_H

#include <stdint.h>

#include "sl_dropout.h"

/* inp, out (N,C); w, b (C); mean, rstd (N) */
void sl_ref_layernorm_forward(int N, int C, const double *inp, const double *w, const double *b,
                              double *out, double *mean, double *rstd);
/* recomputes the moments from inp; dinp (N,C) assigned, dw, db (C) += */
void sl_ref_layernorm_backward(int N, int C, const double *dout, const double *inp,
                               const double *w, double *dinp, double *dw, double *db);
/* qkv (B,T,3C) -> att (B,NH,T,T) probabilities, out (B,T,C) */
void sl_ref_attention_forward(int B, int T, int C, int NH, const double *qkv, double *att,
                              double *out);
/* dqkv (B,T,3C) assigned, from dout (B,T,C), qkv and att */
void sl_ref_attention_backward(int B, int T, int C, int NH, const double *dout,
                               const double *qkv, const double *att, double *dqkv);
/* v[i] *= dropout's factor for element i of site d (0, or the kernels' f32 1/(1 - p); d NULL or
 * p 0: none): sl_k_dropout in double. */
void sl_ref_dropout(const sl_dropout *d, size_t n, double *v);
/* The same with dropout on the probabilities (drop NULL: none): out = dropout(att) V, att kept
 * before it, element (b,h,t,s) numbered drop->first + ((b NH + h) T + t) T + s. */
void sl_ref_attention_forward_drop(int B, int T, int C, int NH, const double *qkv, double *att,
                                   double *out, const sl_dropout *drop);
void sl_ref_attention_backward_drop(int B, int T, int C, int NH, const double *dout,
                                    const double *qkv, const double *att, double *dqkv,
                                    const sl_dropout *drop);
/* out (N,OC) = inp (N,C) w^T + b, w (OC,C), b (OC) or NULL */
void sl_ref_linear_forward(int N, int C, int OC, const double *inp, const double *w,
                           const double *b, double *out);
/* dinp (N,C) assigned; dw (OC,C), db (OC) += (db may be NULL) */
void sl_ref_linear_backward(int N, int C, int OC, const double *dout, const double *inp,
                            const double *w, double *dinp, double *dw, double *db);
/* out (B,T,C) = wte[tok] + wpe[t];  dwte, dwpe += */
void sl_ref_embedding_forward(int B, int T, int C, const int32_t *tok, const double *wte,
                              const double *wpe, double *out);
void sl_ref_embedding_backward(int B, int T, int C, const int32_t *tok, const double *dout,
                               double *dwte, double *dwpe);
/* returns norm * sum_rows -log softmax(x wte^T)[target]; with dx non-NULL, dx = dL/dx
 * (assigned) and dwte += dL/dwte */
double sl_ref_lmhead_xent(int N, int C, int V, const double *x, const double *wte,
                          const int32_t *targets, double norm, double *dx, double *dwte);

/* One GPT block (pre-norm, as GPT-2):
 *   h = x + proj(attention(qkv(ln1(x))));  out = h + fcproj(gelu(fc(ln2(h))))
 * with the parameters packed in this order (sl_ref_gpt_block_params(C) doubles in all):
 *   ln1w C, ln1b C, wqkv 3C*C, bqkv 3C, wproj C*C, bproj C, ln2w C, ln2b C,
 *   wfc 4C*C, bfc 4C, wfcproj C*4C, bfcproj C. */
enum {
    SL_GPT_LN1W, SL_GPT_LN1B, SL_GPT_WQKV, SL_GPT_BQKV, SL_GPT_WPROJ, SL_GPT_BPROJ, SL_GPT_LN2W,
    SL_GPT_LN2B, SL_GPT_WFC, SL_GPT_BFC, SL_GPT_WFCPROJ, SL_GPT_BFCPROJ, SL_GPT_NPARAMS
};
/* Offsets (in elements) of the packed parameters, off[SL_GPT_NPARAMS] = the total. */
void sl_gpt_block_offsets(int C, size_t off[SL_GPT_NPARAMS + 1]);
size_t sl_ref_gpt_block_params(int C);
/* out (B,T,C) from x (B,T,C); when dout is not NULL also dx (assigned) and dp (+=, packed). */
void sl_ref_gpt_block(int B, int T, int C, int NH, const double *p, const double *x, double *out,
                      const double *dout, double *dx, double *dp);
/* The same with dropout (sl_dropout.h) at drop[0] the attention probabilities, drop[1] the
 * attention's output and drop[2] the MLP's before their residual adds (NULL: none), each
 * numbering its elements as the kernels do. */
void sl_ref_gpt_block_drop(int B, int T, int C, int NH, const double *p, const double *x, double *out,
                           const double *dout, double *dx, double *dp, const sl_dropout *drop);

#endif
