/* gpt.h — the kernels of a GPT (decoder-only transformer) block, in the style of llm.c: layer
 * norm, causal multi-head attention, GELU, residual add, token + position embedding and the LM
 * head with cross-entropy over the vocabulary, forward and backward.
 *
 * Same conventions as kernels.h (backend first, backend pointers, row-major), plus:
 *   - dt is the storage dtype of activations and of the GEMM operands (f32, f16, bf16); every
 *     sum (GEMM products, layer-norm moments, softmax) is accumulated in f32 or wider and each
 *     result is rounded to dt once;
 *   - layer-norm weights/biases, the saved mean/rstd, the attention scores workspace, logits and
 *     every parameter gradient are f32; the embedding tables (wte also serves as the LM head,
 *     tied) are stored in dt;
 *   - parameter gradients ACCUMULATE (+=); gradients with respect to inputs are assigned (=);
 *   - shapes: B batch, T tokens, C channels, NH heads (head size d = C / NH), V vocabulary;
 *     N = B * T rows.
 * Each kernel has a naive double-precision reference in gpt_ref.h.
 */
#ifndef SL_KERNELS_GPT_H
#define SL_KERNELS_GPT_H

#include "kernels.h"
#include "sl_dropout.h"

/* Layer norm over the last dimension -------------------------------------------------------- */

/* out = (inp - mean) * rstd * w + b per row; mean[N], rstd[N] = 1/sqrt(var + 1e-5) are saved
 * for the backward pass.
 * inp, out (N,C) dt;  w, b (C) f32;  mean, rstd (N) f32 */
void sl_k_layernorm_forward(sl_backend be, sl_dtype dt, int N, int C, const void *inp,
                            const float *w, const float *b, void *out, float *mean, float *rstd);
/* dinp = dL/dinp (assigned); dw, db += dL/dw, dL/db.
 * dout, inp, dinp (N,C) dt;  w, dw, db (C) f32;  mean, rstd (N) f32 */
void sl_k_layernorm_backward(sl_backend be, sl_dtype dt, int N, int C, const void *dout,
                             const void *inp, const float *w, const float *mean,
                             const float *rstd, void *dinp, float *dw, float *db);

/* Causal multi-head self-attention ---------------------------------------------------------- */

/* Bytes of the workspace the attention kernels take (backend memory, owned by the caller):
 * the f32 scores (B,NH,T,T), plus for a 16-bit dt the score gradients rounded to dt (GEMM
 * operands share one dtype). */
size_t sl_k_attention_work_bytes(sl_dtype dt, int B, int NH, int T);
/* For each batch row b and head h, with Q, K, V the (T,d) slices of qkv:
 *   att = softmax(Q K^T / sqrt(d) with s > t masked),  out = att V.
 * qkv (B,T,3C) dt: [q | k | v] per token, head h at columns h*d .. h*d+d-1 of each;
 * att (B,NH,T,T) dt: the probabilities, saved for backward (zero above the diagonal);
 * out (B,T,C) dt;  work: sl_k_attention_work_bytes, or NULL (the call allocates its own).
 * Computed as B strided-batched GEMMs over the NH heads (no permute: the heads are read in
 * place with leading dimension 3C). FLOPs as computed (full T x T products, the masked half
 * included): 4 B T^2 C forward, 8 B T^2 C backward; sl_k_attention_cost gives the figures. */
void sl_k_attention_forward(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                            const void *qkv, void *att, void *out, void *work);
/* dqkv (B,T,3C) dt = dL/dqkv (assigned) from dout (B,T,C), qkv and the saved att. */
void sl_k_attention_backward(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                             const void *dout, const void *qkv, const void *att, void *dqkv,
                             void *work);
/* The same with dropout on the probabilities (drop NULL or p 0: none): out = dropout(att) V,
 * att kept before the dropout, whose mask the backward draws again (sl_dropout.h: element
 * (b,h,t,s) is drop->first + ((b NH + h) T + t) T + s). No more workspace. */
void sl_k_attention_forward_drop(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                                 const void *qkv, void *att, void *out, void *work,
                                 const sl_dropout *drop);
void sl_k_attention_backward_drop(sl_backend be, sl_dtype dt, int B, int T, int C, int NH,
                                  const void *dout, const void *qkv, const void *att, void *dqkv,
                                  void *work, const sl_dropout *drop);
/* FLOPs and minimum memory traffic (bytes) of one forward or backward call: the GEMMs' 2mnk
 * over the full T x T scores, and each operand read and each result written once (qkv, out,
 * att in dt; the f32 scores written and read once). */
void sl_k_attention_cost(sl_dtype dt, int B, int T, int C, int NH, int backward, double *flops,
                         double *bytes);

/* Element-wise ------------------------------------------------------------------------------ */

/* y = gelu(x), the tanh form of kernels.h (sl_k_act_forward for f32); x, y (n) dt; y may be x */
void sl_k_gelu_forward(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y);
/* dx = dy * gelu'(x); x, dy, dx (n) dt; dx may be dy */
void sl_k_gelu_backward(sl_backend be, sl_dtype dt, size_t n, const void *x, const void *dy,
                        void *dx);
/* y = dropout(x) (n) dt, element i numbered drop->first + i: kept and scaled by 1/(1 - p), or
 * 0 (sl_dropout.h). Its backward is the same call on the gradient (the same mask and scale).
 * y may be x; drop->p 0 copies. */
void sl_k_dropout(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y, const sl_dropout *drop);
/* out = a + b (n) dt: the residual connection. Its backward is the identity: da = db = dout,
 * so a caller adds dout into the gradient of each branch (sl_k_add). out may be a or b. */
void sl_k_residual_forward(sl_backend be, sl_dtype dt, size_t n, const void *a, const void *b,
                           void *out);

/* Embeddings -------------------------------------------------------------------------------- */

/* out[b,t,:] = wte[tok[b,t],:] + wpe[t,:].
 * tok (B,T) int32 in [0,V) (on the backend; range-checked there only by the cuda backend of a
 * DEBUG=1 build, where an id outside is otherwise an out-of-bounds access far from its cause);
 * wte (V,C) dt; wpe (>= T,C) dt; out (B,T,C) dt */
void sl_k_embedding_forward(sl_backend be, sl_dtype dt, int B, int T, int C, int V,
                            const int32_t *tok, const void *wte, const void *wpe, void *out);
/* dwte[tok[b,t],:] += dout[b,t,:] (a scatter-add: repeated tokens add up, in row order, so the
 * bits do not depend on threads);  dwpe[t,:] += sum_b dout[b,t,:].
 * dout (B,T,C) dt;  dwte (V,C), dwpe (T,C) f32 */
void sl_k_embedding_backward(sl_backend be, sl_dtype dt, int B, int T, int C, int V,
                             const int32_t *tok, const void *dout, float *dwte, float *dwpe);

/* LM head with cross-entropy ------------------------------------------------------------------ */

/* Bytes of the workspace of sl_k_lmhead_xent: logits and their gradient, (N,V) f32 each. */
size_t sl_k_lmhead_work_bytes(int N, int V);
/* logits = x wte^T (N,V) (f32 accumulation and storage); returns
 * norm * sum_rows -log softmax(logits)[target], and when dx is not NULL also does the backward:
 * dlogits = norm (softmax - onehot), dx = dlogits wte (assigned), dwte += dlogits^T x.
 * x (N,C) dt;  wte (V,C) dt;  targets (N) int32 in [0,V) on the backend;  dx (N,C) dt or NULL;
 * dwte (V,C) f32 (only with dx);  work: sl_k_lmhead_work_bytes, or NULL (allocated per call).
 * For a 16-bit dt, dlogits is rounded to dt before the two backward GEMMs. */
double sl_k_lmhead_xent(sl_backend be, sl_dtype dt, int N, int C, int V, const void *x,
                        const void *wte, const int32_t *targets, void *dx, float *dwte,
                        float norm, void *work);

#endif
