/* mlp.h — the model every training benchmark shares: a stack of Linear(+bias) + activation
 * layers, a regression loss, optimizers, and a synthetic task whose loss falls.
 *
 * What the techniques need from it, and how it is provided:
 *   - forward and backward ONE LAYER AT A TIME with explicit inputs and outputs, so a pipeline
 *     stage runs its own layer range, checkpointing drops and recomputes activations, vDNN
 *     moves them, Megatron builds a layer from its own weight slices (sl_linear_*);
 *   - ONE flat parameter vector and one flat gradient vector with per-layer offsets; layer l
 *     owns the contiguous block [w_off[l], w_off[l] + layer_size(l)) = W_l[out, in] then
 *     b_l[out], so a layer range is contiguous (pipeline), DDP buckets and ZeRO shards are
 *     plain slices, and every element-wise/optimizer kernel applies to any slice;
 *   - the sizes and FLOPs of a step, for the analytic models (ZeRO memory, bubble time);
 *   - deterministic initialisation and data from the counter RNG: element i of the flat
 *     parameter vector and sample s of the data stream are the same on every rank and backend.
 * Weights use PyTorch's layout: W_l is [out, in] and z = x W^T + b.
 * All pointers are backend memory (kernels.h); gradients accumulate (+=).
 */
#ifndef SL_MLP_H
#define SL_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

#define SL_MLP_MAX_LAYERS 256

/* A GPT's shape (gpt_model.h): L blocks of width C with NH heads, T tokens per sequence, a
 * position table of max_T rows, a vocabulary of V; dropout's probability and its masks' seed
 * (sl_dropout.h). All zero for the MLP. */
typedef struct sl_gpt_dims {
    int layers, C, NH, T, max_T, V;
    float dropout;
    uint64_t dropout_seed;
} sl_gpt_dims;

typedef struct sl_mlp {
    sl_backend be;
    int nlayers;
    int dims[SL_MLP_MAX_LAYERS + 1]; /* dims[0] = input width, dims[nlayers] = output width */
    sl_act act[SL_MLP_MAX_LAYERS];   /* after each layer; the last layer's is none */
    size_t w_off[SL_MLP_MAX_LAYERS]; /* W_l in the flat vector (elements) */
    size_t b_off[SL_MLP_MAX_LAYERS]; /* b_l = w_off[l] + dims[l + 1] * dims[l] */
    size_t nparams;
    sl_gpt_dims gpt;                 /* gpt.layers > 0: a GPT (gpt_model.h), whose layers are the
                                        embeddings, the blocks and the head; dims, act and b_off
                                        are then unused, and w_off[nlayers] = nparams */
} sl_mlp;

/* The model is a GPT (gpt_model.h), not the stack of Linear layers. */
static inline int sl_mlp_is_gpt(const sl_mlp *m) { return m->gpt.layers > 0; }

/* nlayers Linear layers in -> hidden -> ... -> hidden -> out, `act` after every layer but the
 * last (nlayers 1 is a single in -> out layer). Returns 0, or -1 for an invalid shape. */
int sl_mlp_init(sl_mlp *m, sl_backend be, int nlayers, int in, int hidden, int out, sl_act act);

/* Elements of layer l's block (W and b), and of the blocks of layers [l0, l1). */
size_t sl_mlp_layer_size(const sl_mlp *m, int l);
size_t sl_mlp_range_size(const sl_mlp *m, int l0, int l1);

/* Deterministic initialisation of flat elements [first, first + count) into dst (backend
 * memory holding exactly that slice): W_l ~ N(0, gain / in_l) with gain 2 before a ReLU/GeLU
 * (He) and 1 before none; biases 0. Element e depends only on (seed, e). */
void sl_mlp_init_params(const sl_mlp *m, uint64_t seed, size_t first, size_t count, float *dst);

/* Costs of one training step at a given batch (forward, backward = dW + dx except layer 0's
 * dx, which is not computed; element-wise work not counted). */
double sl_mlp_flops_forward(const sl_mlp *m, int batch);
double sl_mlp_flops_backward(const sl_mlp *m, int batch);

/* One layer ------------------------------------------------------------------------------- */

/* z[batch, out] = x[batch, in] W[out, in]^T + b[out] */
void sl_linear_forward(sl_backend be, int batch, int in, int out, const float *W,
                       const float *b, const float *x, float *z);
/* dW[out, in] += dz^T x;  db[out] += sum_rows dz;  dx[batch, in] = dz W (skipped if NULL).
 * db may be NULL (a layer without bias). */
void sl_linear_backward(sl_backend be, int batch, int in, int out, const float *W,
                        const float *x, const float *dz, float *dW, float *db, float *dx);

/* Layer l with its parameter block lp (= params + w_off[l] in the full vector):
 * z = x W^T + b, y = act(z). For act none, y may be z (then only one buffer is needed). */
void sl_mlp_layer_forward(const sl_mlp *m, int l, int batch, const float *lp, const float *x,
                          float *z, float *y);
/* The reverse: dy (dL/dy, [batch, out]) is overwritten with dL/dz; the gradient block lg
 * (= grads + w_off[l]) accumulates dW and db; dx = dL/dx unless NULL. z is the stored
 * pre-activation (for act none it may be NULL). */
void sl_mlp_layer_backward(const sl_mlp *m, int l, int batch, const float *lp, const float *x,
                           const float *z, float *dy, float *lg, float *dx);

/* The activation store ------------------------------------------------------------------- */

/* Everything a store-all backward pass keeps, in backend memory counted as "activ":
 * x[l] is layer l's input ([batch, dims[l]]; x[0] is the model input, x[nlayers] the
 * output), z[l] its pre-activation (the same buffer as x[l + 1] when act is none), and two
 * [batch, max width] buffers for the gradient flowing backward. */
typedef struct sl_mlp_acts {
    int batch;
    float *x[SL_MLP_MAX_LAYERS + 1];
    float *z[SL_MLP_MAX_LAYERS];
    float *dbuf[2];
} sl_mlp_acts;

void sl_mlp_acts_alloc(const sl_mlp *m, int batch, sl_mlp_acts *a);
void sl_mlp_acts_free(const sl_mlp *m, sl_mlp_acts *a);
/* Bytes sl_mlp_acts_alloc holds (activations kept for backward + the two gradient buffers). */
size_t sl_mlp_acts_bytes(const sl_mlp *m, int batch);

/* The whole model, store-all: forward from a->x[0]; backward from dout = dL/d(output)
 * ([batch, out], overwritten), accumulating into grads (the full flat vector). */
void sl_mlp_forward(const sl_mlp *m, sl_mlp_acts *a, const float *params);
void sl_mlp_backward(const sl_mlp *m, sl_mlp_acts *a, const float *params, float *grads,
                     float *dout);

/* Optimizers over a flat vector or any slice of it ---------------------------------------- */

typedef enum { SL_OPTIM_SGD, SL_OPTIM_ADAMW, SL_NOPTIMS } sl_optim_kind;

typedef struct sl_optim {
    sl_optim_kind kind;
    sl_sgd sgd;
    sl_adamw adamw; /* adamw.step: set by the caller (1 for the first update) */
} sl_optim;

const char *sl_optim_name(sl_optim_kind k); /* "sgd" "adamw" */
/* Optimizer state floats per parameter: 1 for SGD with momentum (0 without), 2 for AdamW. */
int sl_optim_state_per_param(const sl_optim *o);
/* w[n] updated from g[n]; state holds sl_optim_state_per_param * n floats ([m | v] for
 * AdamW), zero before the first step. */
void sl_optim_step(sl_backend be, const sl_optim *o, size_t n, float *w, const float *g,
                   float *state);

/* The learning rate an optimizer of kind k takes on model m when none is given: 0.01 for SGD
 * (with momentum 0.9); for AdamW min(0.01, 2*sqrt(2) / sum over layers of sqrt(in_l * out_l)),
 * which falls with width and depth (mlp.c says why). */
double sl_optim_default_lr(const sl_mlp *m, sl_optim_kind k);

/* Model memory for the analytic models (bytes, f32 everywhere). */
typedef struct sl_mlp_bytes {
    size_t params, grads, optim, activ;
} sl_mlp_bytes;
sl_mlp_bytes sl_mlp_memory(const sl_mlp *m, int batch, const sl_optim *o);

/* The synthetic task ----------------------------------------------------------------------- */

/* Regression onto a fixed random teacher network: inputs are N(0, 1), sample s's input is
 * flat RNG elements [s * in, (s + 1) * in) of the data stream, its target is the teacher's
 * output. Any rank can generate any samples of any step; a student trained on it reaches a
 * loss far below its starting one (the teacher is a one-hidden-layer GeLU network of width
 * 8, smaller than any student). Costs one teacher forward per batch. */
typedef struct sl_task {
    sl_backend be;
    uint64_t seed;
    sl_mlp teacher;
    float *teacher_params;
    sl_mlp_acts tacts; /* teacher activations for up to max_batch samples */
    int max_batch;
    float loss_weight; /* the loss is this times the MSE (1 after sl_task_init): an objective
                          whose gradients are all this much smaller, as a weighted term of a
                          larger loss is (precision.c's underflow scenario) */
    int seq, vocab;    /* the GPT's next-token task (sl_task_init_gpt): T and V; 0 for the MLP's */
} sl_task;

void sl_task_init(sl_task *t, sl_backend be, int in, int out, uint64_t seed, int max_batch);
/* The GPT's task instead: next-token prediction on sequences of seq tokens from a vocabulary of
 * vocab (gpt_model.h's sl_gpt_task_tokens). A sample is a sequence; its loss is the mean
 * cross-entropy over its tokens. */
void sl_task_init_gpt(sl_task *t, sl_backend be, int seq, int vocab, uint64_t seed);
/* Sequences [first, first + count): tokens and next tokens, (count, seq) int32 each. */
void sl_task_tokens(sl_task *t, uint64_t first, int count, int32_t *tok, int32_t *tgt);
void sl_task_free(sl_task *t);
/* The factor of the MSE over a batch of `batch` samples: loss_weight / (batch * outputs); for
 * the GPT's task, of the cross-entropy summed over its tokens: loss_weight / (batch * seq). */
float sl_task_loss_norm(const sl_task *t, int batch);
/* x[count, in] and y[count, out] (backend memory) for samples [first, first + count). */
void sl_task_batch(sl_task *t, uint64_t first, int count, float *x, float *y);

#endif
