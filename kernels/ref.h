/* ref.h — the double-precision CPU references of the kernels of kernels.h, written once: the
 * kernels benchmark checks its rows against them and the unit tests (t/unit/test_kernels*,
 * test_mlp) check every backend against them.
 *
 * Inputs are the f32 (or rounded 16-bit, sl_round_to) values a kernel saw; results are in
 * double. Where a rounding-error bound needs them, a reference also returns the sum of the
 * absolute values of its terms (mag) and how many terms there were (terms); either pointer
 * may be NULL. */
#ifndef SL_KERNELS_REF_H
#define SL_KERNELS_REF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* Activations: act(x) and act'(x); GeLU is the tanh approximation of kernels.h. */
double sl_ref_gelu(double x);
double sl_ref_gelu_grad(double x);
double sl_ref_act(sl_act a, double x);
double sl_ref_act_grad(sl_act a, double x); /* relu'(0) is 0 */

/* Entry (i, j) of op(A) op(B) (k terms; row-major, lda/ldb as sl_k_gemm). */
double sl_ref_gemm_at(int transa, int transb, int k, const float *a, int lda, const float *b,
                      int ldb, int i, int j, double *mag);

/* MSE over n: returns norm * sum d^2 and writes dy[i] = 2 norm d (dy may be NULL), where
 * d = y - t rounded once to f32, as the kernels compute it. */
double sl_ref_mse(size_t n, const float *y, const float *t, double norm, double *dy);
/* Softmax cross-entropy of one row of `classes` logits: returns log-sum-exp(z) - z[label]
 * (unnormalised) and writes dz[j] = norm (softmax(z)_j - [j == label]) (dz may be NULL). */
double sl_ref_softmax_xent_row(int classes, const float *z, int label, double norm, double *dz);

/* One optimizer step in double on w, v (and m), with the f32 hyper-parameters of o. */
void sl_ref_sgd_step(const sl_sgd *o, size_t n, double *w, const float *g, double *v);
void sl_ref_adamw_step(const sl_adamw *o, size_t n, double *w, const float *g, double *m,
                       double *v);

/* Convolution entries (NCHW, any padding and stride), by flat index: y[idx] of the forward,
 * dx[idx] of the backward data pass, dw[idx] of the backward filter pass (what one call adds). */
double sl_ref_conv2d_forward_at(const sl_conv2d *cv, const float *x, const float *w, size_t idx,
                                double *mag, double *terms);
double sl_ref_conv2d_backward_data_at(const sl_conv2d *cv, const float *dy, const float *w,
                                      size_t idx, double *mag, double *terms);
double sl_ref_conv2d_backward_filter_at(const sl_conv2d *cv, const float *x, const float *dy,
                                        size_t idx, double *mag, double *terms);

#endif
