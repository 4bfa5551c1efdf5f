/* gpt_model.h — the GPT (decoder-only transformer) as a model the training layer trains: the
 * same flat, layered shape as the MLP (mlp.h), so that every technique that partitions the
 * MLP's layers and flat vector (DDP buckets, ZeRO shards, ...) partitions the GPT's alike.
 *
 * Layers of the flat parameter vector (sl_mlp with m->gpt set; nlayers = L + 2):
 *   layer 0        token embedding wte (V,C), then position embedding wpe (max_T,C)
 *   layers 1..L    one block each, packed as gpt_ref.h's sl_gpt_block_offsets (12C^2 + 13C)
 *   layer L + 1    final layer norm (lnfw C, lnfb C), then the LM head whead (V,C)
 * The LM head is NOT tied to wte here, unlike GPT-2 (and sl_gpt_params' analytic count): a tied
 * head would make the last layer's weights part of the first layer's block, so a pipeline's
 * first and last stages, or ZeRO-3's per-layer gather, would each need the other's; Megatron-LM
 * keeps the two copies and all-reduces their gradients between the stages. Untied, every
 * layer's parameters are its own block. The row says tied_embeddings 0. (ZeRO-3 gathers a layer's
 * block for its backward too, where the embeddings' backward reads none of it and the head's
 * only the final norm's 2C: bytes its model counts, not a saving this layout makes.)
 *
 * The data between layers is the residual stream (B,T,C) in the run's dtype dt; layer 0 reads
 * the tokens, and the last layer's forward ends with the loss: final layer norm, logits,
 * cross-entropy against the next tokens and dL/d(the final norm's output) at once (the LM
 * head's logits are (B*T,V) f32, too large to keep), leaving the head's weight gradient for its
 * backward. So the loss is known after forward, and the last layer's parameters are used only
 * inside it (ZeRO-3 gathers them for forward and, for the final norm, for backward).
 *
 * Precision (llm.c's floatX): activations and the GEMMs' operands are dt (f32, f16, bf16),
 * every sum is accumulated in f32, and parameter gradients are accumulated (+=) in f32 blocks
 * that the caller rounds into dt where it keeps them in dt. Parameters are read in dt from the
 * flat vector; layer-norm gains and biases are widened to f32 for the kernels.
 * All pointers are backend memory. Shapes: B sequences, T tokens, N = B*T rows. */
#ifndef SL_KERNELS_GPT_MODEL_H
#define SL_KERNELS_GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "mlp.h"

/* m as a GPT of shape g for backend be: the layers, offsets and nparams above. Returns 0, or -1
 * for a shape the kernels cannot run (heads not dividing C, T above max_T, V < 2, too many
 * blocks for SL_MLP_MAX_LAYERS). */
int sl_gpt_model_init(sl_mlp *m, sl_backend be, const sl_gpt_dims *g);

/* Elements of layer l's block. */
size_t sl_gpt_layer_size(const sl_mlp *m, int l);
/* GPT-2's initialisation of flat elements [first, first + count) into dst (f32): weights, the
 * token embedding and the LM head N(0, 0.02), the position embedding N(0, 0.01), the two projections into the residual stream N(0, 0.02/sqrt(2L)),
 * layer-norm gains 1, biases 0. Element e depends only on (seed, e). */
void sl_gpt_init_params(const sl_mlp *m, uint64_t seed, size_t first, size_t count, float *dst);
/* FLOPs of one step's forward on `batch` sequences, as the kernels compute them (the full TxT
 * attention products, the LM head over the whole vocabulary); backward is twice it. It is the
 * sum of sl_gpt_layer_flops: none for the embedding (lookups), 24NC^2 (the four GEMMs) plus
 * the attention core for a block, 2NCV for the head. Two parts of a block's, for what a
 * recomputation repeats: sl_gpt_flops_core, the attention core (QK^T and att V, 4BT^2C), and
 * sl_gpt_flops_out, the MLP's second linear (8NC^2), which a block without an output skips. */
double sl_gpt_flops_forward(const sl_mlp *m, int batch);
double sl_gpt_layer_flops(const sl_mlp *m, int l, int batch);
double sl_gpt_flops_core(const sl_mlp *m, int batch);
double sl_gpt_flops_out(const sl_mlp *m, int batch);

/* The activations of up to `rows` sequences, and the workspaces of the layers ------------ */
typedef struct sl_gpt_block_acts {
    void *ln1, *qkv, *att, *atty, *h, *ln2, *fc, *ge; /* dt */
    float *m1, *r1, *m2, *r2;                         /* layer-norm moments (N) */
} sl_gpt_block_acts;

typedef struct sl_gpt_acts {
    sl_backend be;
    sl_dtype dt;
    int rows, B;             /* capacity and the sequences loaded */
    uint64_t seq0;           /* the global number of the first sequence loaded (the step's first
                                + its place in the global batch): dropout numbers its elements
                                from it (sl_dropout.h), so that every partition draws alike */
    int32_t *tok, *tgt;      /* (B,T): the tokens and the next tokens */
    void *res[SL_MLP_MAX_LAYERS + 1]; /* res[l]: layer l's input for l = 1..L+1 (B,T,C) dt */
    sl_gpt_block_acts blk[SL_MLP_MAX_LAYERS];
    void *lnf;               /* (N,C) dt: the final layer norm's output */
    float *mf, *rf;
    /* backward */
    void *dres[2];           /* (N,C) dt: dL/d(residual stream), ping-pong over the layers */
    void *dlnf;              /* (N,C) dt: where the head's forward leaves dL/d(the final norm's
                                output): dres[(L + 2) & 1], or a technique's buffer (sl_gpt_acts_map_input) */
    void *dfc, *dc, *dh, *dqkv; /* a block's internal gradients, dt: (N,4C) (N,C) (N,C) (N,3C) */
    float *dwhead;           /* (V,C) f32: the head's weight gradient, from the forward */
    double loss;             /* the last forward's loss, unscaled */
    float norm, scale;       /* the loss's factor (per token) and the loss scale, set by the caller */
    /* workspaces */
    float *lin32;            /* (N,4C) f32: a 16-bit linear's product before the bias and the cast */
    float *vec32;            /* (4C) f32: a bias or layer-norm parameters widened */
    void *attn_work, *head_work;
    /* Selective recomputation (Korthikanti et al. 2022): a mapped range keeps no attention core
     * (att, atty); the technique places one per block while it is needed (sl_gpt_core_map)
     * and, before a block's backward, computes it again from the kept qkv
     * (sl_gpt_core_recompute). */
    int selective;
} sl_gpt_acts;

void sl_gpt_acts_alloc(const sl_mlp *m, sl_dtype dt, int rows, sl_gpt_acts *a);
void sl_gpt_acts_free(sl_gpt_acts *a);

/* Activations a technique places itself, a layer range at a time (a pipeline stage keeps one
 * block per micro-batch in flight; checkpointing recomputes a range into a block it frees
 * after the range's backward). sl_gpt_acts_alloc_work holds only the workspaces (SL_MEM_OTHER:
 * the backward's scratch, the kernels' workspaces) for up to `rows` sequences.
 * sl_gpt_range_bytes is the size of a block that holds what layers [l0, l1) keep for their
 * backward at `rows` sequences (full = 1), or their input alone (full = 0: what a recomputing
 * technique keeps); sl_gpt_acts_map_input points them into such a block, with each piece aligned to
 * 64 bytes:
 *   the range's input first: the tokens (rows,T) int32 when l0 = 0, else res[l0] (rows,T,C) dt
 *     (the caller copies it in);
 *   then, for each layer of the range: its input res[l] (l > l0), a block's tensors and
 *     layer-norm moments, and for the head the final norm's output and moments and its weight
 *     gradient dwhead (V,C) f32 (the head's forward computes it and its backward adds it:
 *     kept in between, as a framework keeps the logits).
 * The range's output res[l1] is `out` (l1 <= L + 1), and the head's dL/d(final norm output)
 * goes to `dout` (l1 = L + 2). The targets a->tgt are the caller's (the head's forward only).
 * out NULL: the range's top layer computes what its backward reads and not its output (a
 * recomputed range, whose output was kept as the next range's input and is not needed again).
 * full: SL_GPT_KEEP_INPUT (0), SL_GPT_KEEP_ALL (1), or SL_GPT_KEEP_SELECTIVE (2: all but the
 * blocks' attention core; a mapping with a->selective set lays the block out so).
 * sl_gpt_acts_map_input places the input at `in` and the rest at `body`, a block of
 * sl_gpt_range_bytes(full) - sl_gpt_range_bytes(SL_GPT_KEEP_INPUT) bytes: on one block, body is
 * in + sl_gpt_range_bytes(SL_GPT_KEEP_INPUT); apart, the input is a checkpoint kept while
 * what the range keeps besides is dropped. */
enum { SL_GPT_KEEP_INPUT = 0, SL_GPT_KEEP_ALL = 1, SL_GPT_KEEP_SELECTIVE = 2 };
void sl_gpt_acts_alloc_work(const sl_mlp *m, sl_dtype dt, int rows, sl_gpt_acts *a);
void sl_gpt_acts_free_work(sl_gpt_acts *a);
size_t sl_gpt_range_bytes(const sl_mlp *m, sl_dtype dt, int rows, int l0, int l1, int full);
void sl_gpt_acts_map_input(const sl_mlp *m, sl_gpt_acts *a, int l0, int l1, int rows, void *in, void *body,
                           void *out, void *dout);
/* Selective recomputation (a->selective): the bytes of one block's attention core at `rows`
 * sequences (att (B,NH,T,T) and atty (B,T,C) of dt, each aligned), placing one for layer l
 * (1..L) at `core` (NULL: none), and computing it again from the block's kept qkv, as its
 * forward did (call it before the block's backward, with a core placed). */
size_t sl_gpt_core_bytes(const sl_mlp *m, sl_dtype dt, int rows);
void sl_gpt_core_map(const sl_mlp *m, sl_gpt_acts *a, int l, void *core);
void sl_gpt_core_recompute(const sl_mlp *m, sl_gpt_acts *a, int l);
/* Bytes of the tensor that enters layer l (0 <= l <= L + 2) at `rows` sequences: the tokens
 * (int32) for l = 0, else (rows,T,C) of dt (for l = L + 2: dL/d(final norm output)). */
size_t sl_gpt_io_bytes(const sl_mlp *m, sl_dtype dt, int rows, int l);
/* What sl_gpt_acts_alloc holds under SL_MEM_ACTIV: the activations kept for backward (every
 * block's, the residual stream's, the final norm's) and the backward's two gradient buffers;
 * the workspaces are SL_MEM_OTHER and the tokens SL_MEM_DATA. */
/* One block's share of them: what it keeps for its backward and its input (the residual
 * stream), (16sbh + as^2b) elements of dt and the layer norms' 4sb f32 moments, as Korthikanti
 * et al. count a block (their 34sbh + 5as^2b bytes at 16 bits also hold dropout's masks and
 * the attention dropout's output, which this model does not keep: its masks are drawn again
 * from their counter in backward, and the dropped probabilities recomputed from the kept). */
size_t sl_gpt_block_kept_bytes(const sl_mlp *m, sl_dtype dt, int rows);
/* The same without the attention core (att and atty), which selective recomputation drops:
 * 15sbh values of dt and the moments. */
size_t sl_gpt_block_kept_selective_bytes(const sl_mlp *m, sl_dtype dt, int rows);
size_t sl_gpt_acts_bytes(const sl_mlp *m, sl_dtype dt, int rows);

/* Layer l forward with its parameter block lp (dt). Layer 0 reads a->tok; the last layer also
 * computes the loss against a->tgt at a->norm * a->scale (a->loss: unscaled), dL/d(the final
 * norm's output) into sl_gpt_dout and the head's weight gradient into a->dwhead. With its output
 * res[l + 1] NULL, a block stops before its last linear and the embedding does nothing. */
void sl_gpt_layer_forward(const sl_mlp *m, sl_gpt_acts *a, int l, const void *lp);
/* Layer l backward from dy = dL/d(its output) (dt; for the last layer sl_gpt_dout, where its
 * forward left the loss's gradient) into dx = dL/d(its input) (dt; NULL for layer 0, which has none), accumulating its
 * parameter gradients into g32 (f32, the layer's block). dy is not kept. */
void sl_gpt_layer_backward(const sl_mlp *m, sl_gpt_acts *a, int l, void *dy, void *dx,
                           const void *lp, float *g32);
/* Where the last layer's forward leaves dL/d(the final norm's output), and where layer l's
 * backward should put its dx (NULL for l = 0): buffers that alternate, so dy and dx never coincide. */
void *sl_gpt_dout(sl_gpt_acts *a, const sl_mlp *m);
void *sl_gpt_dx(sl_gpt_acts *a, int l);

/* The synthetic next-token task ------------------------------------------------------------- */

/* Sequence s (T + 1 tokens, deterministic from (seed, s)): the first token uniform, then each
 * next token the fixed successor of the one before (a random table of the seed) with probability
 * 3/4, else uniform. A model that learns the table reaches a loss of about
 * -(3/4 + 1/(4V)) ln(3/4 + 1/(4V)) - (V - 1)/(4V) ln(1/(4V)) nats from ln V; attention is not
 * needed for it, which keeps the task learnable in a few hundred steps by a small model. tok and
 * tgt (count, T) int32, backend memory: tokens 0..T-1 and 1..T of sequences [first, first+count). */
void sl_gpt_task_tokens(sl_backend be, uint64_t seed, int T, int V, uint64_t first, int count,
                        int32_t *tok, int32_t *tgt);
/* The loss the task's best predictor reaches (nats per token). */
double sl_gpt_task_floor(int V);

#endif
