/* tp_gpt.h — megatron_mlp --model gpt: Megatron-LM's tensor parallelism over the whole GPT
 * (kernels/gpt_model.h), what tp_gpt.c (the step), tp_gpt_slices.c (which elements a rank holds)
 * and megatron_mlp/gpt_row.c (models, row, checks) share; in the training layer so that
 * parallel3d runs the same blocks.
 *
 * A rank of a t-rank group holds, of the GPT's flat vector (gpt_model.h), with Vl = V/t, Cl = C/t:
 *   layer 0   wte rows [r·Vl, (r+1)·Vl) (vocabulary-parallel), then one row of zeros (the
 *             lookup of a token another rank holds: its gradient is dropped), then wpe whole
 *   block     ln1 whole; Wqkv's rows and bqkv's elements of its NH/t heads in each of q, k, v
 *             (column-parallel); Wproj's columns of those heads (row-parallel); bproj whole;
 *             ln2 whole; Wfc's rows [r·4Cl, (r+1)·4Cl) and bfc's (column-parallel); Wfcproj's
 *             columns of those (row-parallel); bfcproj whole
 *   head      lnf whole, whead rows [r·Vl, (r+1)·Vl) (vocabulary-parallel)
 * in the block order of gpt_ref.h with the local sizes. "Whole" parts are replicated in the
 * group, as Megatron-LM keeps them: the layer norms, the position table and the row-parallel
 * biases (added once, after their all-reduce). */
#ifndef SL_TP_GPT_H
#define SL_TP_GPT_H

#include "gpt_ref.h"
#include "sl_train.h"

typedef struct mg_block {
    void *ln1, *qkv, *att, *atty, *h, *ln2, *fc, *ge; /* dt: (N,C) (N,3Cl) (B,NHl,T,T) (N,Cl) (N,C) (N,C) (N,4Cl) x2 */
    float *m1, *r1, *m2, *r2;                         /* the layer norms' moments (N) */
} mg_block;

/* Bytes sent in the group (and between replicas) during the driver's steps, by region. With
 * sequence parallelism, MG_REGATHER is the blocks' second all-gather of each layer norm's
 * output in backward (kept as a shard, gathered again: Korthikanti et al. 2022, 4.2.2) and
 * MG_NORMS the all-reduce of the layer norms' gradients, each rank's over its own tokens. */
enum { MG_EMB, MG_BLOCKS, MG_HEAD, MG_DP, MG_REGATHER, MG_NORMS, MG_NREGIONS };

/* How a group splits what the plain variant leaves whole (mg_setup_opts). */
typedef struct mg_options {
    int sequence_parallel; /* layer norms, residuals, dropout on T/t positions of each sequence */
    int vocab_gather;      /* the head's logits all-gathered and a plain cross-entropy on every rank
                              (--no-vocab-parallel: the counter-example to the parallel one) */
    int overlap;           /* each backward all-reduce behind its weight-gradient GEMM */
} mg_options;

typedef struct mg {
    int t, d, tr, rep;        /* degrees, tensor-parallel rank, replica */
    int overlap;              /* each backward all-reduce behind its weight-gradient GEMM */
    int L, C, NH, T, V, maxT; /* the model */
    int Vl, Cl, NHl;          /* this rank's vocabulary rows, channels and heads */
    int B, N;                 /* the replica's sequences of a step, and tokens */
    int sp, vgather;          /* mg_options */
    int Tl, Nl, p0;           /* positions of a sequence and tokens held between layers (T/t and
                                 B·T/t with sequence parallelism, else T and N), first position */
    size_t boff[SL_GPT_NPARAMS + 1]; /* a local block's packing (gpt_ref.h's order, local sizes) */
    size_t lw[SL_MLP_MAX_LAYERS + 1]; /* layer l's first local element; lw[L + 2] = np */
    size_t np;                /* local parameters */
    MPI_Comm tp_mpi, dp_mpi;
    sl_comm *tp, *dp;
    sl_dtype dt;
    float *params, *grads, *optim; /* f32 (the master copy in f16/bf16), gradients, optimizer state */
    void *w, *g;              /* dt: the weights the layers read and the gradients communicated */
    /* activations (kept for backward) */
    int32_t *tok, *tgt, *tokl; /* (N): the tokens, the next tokens, the tokens in the local table */
    int32_t *htok, *htgt;      /* host copies */
    void *res[SL_MLP_MAX_LAYERS + 1];
    mg_block blk[SL_MLP_MAX_LAYERS];
    void *lnf;
    float *mf, *rf;
    /* work */
    void *dres[2], *dpart, *dh, *dqkv, *datty, *dfc, *dlog16, *zero_wpe;
    float *lin32, *vec32, *logits, *dlog, *rowmax, *rowtgt, *rowsum, *hlog;
    void *attn_work;
    void *full, *stage, *dshard; /* sequence parallel: a gathered (N,C), the collectives' rank-major
                                    (N,C), a reduced shard (Nl,C) */
    float *normg;             /* sequence parallel: the layer norms' gradients packed, (4L + 2)·C */
    float *glog, *gstage;     /* --no-vocab-parallel: the full logits (N,V) f32, gathered rank-major */
    double activ_block;       /* activation bytes a block keeps on this rank, as allocated */
    double head_logit_bytes;  /* bytes of logits and their gradient the head holds, as allocated */
    sl_train_mixed_state ms;
    int counting;             /* in a driver step: bytes are counted */
    double sent[MG_NREGIONS]; /* bytes sent over the counted steps */
    long tp_colls;            /* collectives in the group over the counted steps */
    long tp_overlapped;       /* of which run under the weight-gradient GEMMs (overlap) */
} mg;

/* The local layout of s's shape (s->t, s->C, ...): boff, lw, np. */
void mg_layout(mg *s);
/* Calls fn for each run of rank r's local vector that is a run of the flat vector: flat
 * [full, full + count) is local [local, local + count); replicated says whether every rank of
 * the group holds it. The zero row is no run. */
typedef void (*mg_run_fn)(size_t full, size_t local, size_t count, int replicated, void *arg);
void mg_runs(const sl_mlp *m, const mg *s, int r, mg_run_fn fn, void *arg);
/* This rank's elements of sl_mlp_init_params(seed) into s->params, the zero row zero. */
void mg_init_params(const sl_mlp *m, mg *s, uint64_t seed);
/* Replica 0's group's vectors placed into full (host, m->nparams) on rank 0. Collective. */
void mg_gather(sl_train *t, float *full);

/* The step and its pieces (tp_gpt.c); overlap: the overlap variant (colpar_backward). */
void mg_setup_opts(sl_train *t, int tp, int dp, const mg_options *o);
void mg_step(sl_train *t);
void mg_free(sl_train *t);
const float *mg_weights(sl_train *t, size_t *first, size_t *count);

/* The layers one at a time (parallel3d's stages): the tokens of the micro-batch of s->B
 * sequences from t->lo; the embedding (layer 0: into res[1]); block l (res[l] -> res[l + 1]);
 * the head's forward and backward at once (res[L + 1] -> dx; returns the loss, unscaled); block
 * l's backward (dy = dL/d res[l + 1] -> dx = dL/d res[l]); the embedding's (dy overwritten).
 * Parameter gradients accumulate (+=) in s->grads (f32). */
void mg_load(sl_train *t, mg *s);
void mg_embedding_forward(sl_train *t, mg *s);
void mg_block_forward(sl_train *t, mg *s, int l);
/* Block l's attention forward again from its kept QKV, into its att and atty (the same bits):
 * selective recomputation's, before the block's backward (parallel3d --recompute selective). */
void mg_attention_again(sl_train *t, mg *s, int l);
double mg_head(sl_train *t, mg *s, float norm, float scale, void *dx);
void mg_block_backward(sl_train *t, mg *s, int l, const void *dy, void *dx);
void mg_embedding_backward(sl_train *t, mg *s, void *dy);

/* A block's kept tensors for s->B sequences (s->N tokens, s->Nl held between the tensor-parallel
 * regions), as activations; att, when not NULL, is the attention probabilities' buffer the block
 * shares with others (not allocated here, nor freed by mg_block_free given the same pointer). */
void mg_block_alloc(sl_train *t, const mg *s, mg_block *k, void *att);
void mg_block_free(sl_train *t, mg_block *k, const void *att);

/* Models, row, check (megatron_mlp/gpt_row.c). */
double mg_bytes_region_model(const sl_train *t, int region);
double mg_bytes_model(const sl_train *t);
void mg_memory_model(const sl_train *t, double bytes[SL_MEM_NCATS]);
size_t mg_params_model(const mg *s);
/* A block's activation bytes on this rank as the kernels keep them, and Korthikanti et al.'s
 * s·b·h·(34/t + 5as/(ht)) (sequence parallel) or s·b·h·(10 + 24/t + 5as/(ht)) (plain), 16-bit
 * (gpt_row.c says how the two differ). */
double mg_activ_block_model(const mg *s);
double mg_activ_block_korthikanti(const mg *s);
void mg_row(sl_train *t, sl_result *res);
int mg_check(sl_train *t, double *error, char *why, size_t len);

#endif
