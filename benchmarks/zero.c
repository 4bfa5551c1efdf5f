/* zero.c — ZeRO (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
 * Parameter Models", 2020), stages 0-3, as data-parallel training of the shared MLP on the
 * training layer (AdamW by default; SGD with --optim sgd).
 *
 * Every rank trains on its contiguous slice of each step's global batch, as in ddp. The stages
 * differ in what a rank keeps of the model states and so in what it communicates:
 *   stage0  plain DDP: parameters, gradients and optimizer state replicated; the whole gradient
 *           is all-reduced after backward and every rank steps every parameter.
 *   stage1  optimizer state sharded (AdamW m and v; fp32 training has no separate master copy):
 *           after backward each layer's gradient is reduce-scattered, each rank steps its slice
 *           of the parameters with its slice of the state, and the slices are all-gathered back
 *           into every replica.
 *   stage2  gradients sharded too: backward writes into a bucket buffer (layers in reverse
 *           order, --bucket-mb) and the bucket is reduce-scattered into this rank's gradient
 *           shard as soon as its lowest layer is done (sl_layer_hooks.after, backward = 1); the
 *           full gradient is never held, only the bucket being filled, the one being reduced
 *           and the shard. Then as stage 1: step the slice, all-gather the parameters.
 *   stage3  parameters sharded too: each layer's parameters are all-gathered just before its
 *           forward and again before its backward (sl_layer_hooks.before returns the gathered
 *           block) and dropped after use; --prefetch 1 starts the next layer's gather before
 *           the current layer computes. Gradients as stage 2; each rank steps its shard, which
 *           is all it holds, so nothing is gathered after the step.
 *
 * Partitioning. A reduce-scatter or all-gather moves equal blocks, and stage 3 gathers one layer
 * at a time, so the model is sharded per layer, as PyTorch FSDP shards a flat parameter: layer
 * l's contiguous block (W_l then b_l: w_off[l], sl_mlp_layer_size) is padded with zeros to
 * Nd·c_l elements, c_l = ceil(size_l / Nd), and rank r owns [r·c_l, (r+1)·c_l) of it. A
 * rank's shard is its slices of every layer, one after another: S = sum_l c_l elements, at
 * offset soff[l] for layer l. Padding is zero, is never stepped and is not part of the weights
 * that are checked; the parameter count Ψ need not divide by Nd.
 *
 * Memory per rank, fp32, K = optimizer floats per parameter (AdamW m, v: 2, i.e. 8 bytes;
 * SGD momentum: 1), shards counted at their padded size S = Ψ_pad / Nd (Ψ_pad = sum_l Nd·c_l):
 *   stage0  4Ψ + 4Ψ + 4KΨ    stage1  4Ψ + 4Ψ + 4KS    stage2  4Ψ + 4S + 4KS    stage3  (4 + 4 + 4K)S
 * (with AdamW: 16Ψ, 8Ψ + 8Ψ/Nd, 4Ψ + 12Ψ/Nd, 16Ψ/Nd). The buffers outside that formula are
 * counted under SL_MEM_COMM and listed one by one in the row: stage 1's staging buffer (one
 * padded layer), stages 2-3's two bucket buffers (one when a single bucket holds the whole
 * model), stage 3's gathered-layer buffers (one, two
 * with --prefetch); mem_padding says how many of the formula's bytes are padding.
 *
 * Traffic, the busiest rank's bytes sent per step (ring: (N-1)/N of each reduce-scatter's or
 * all-gather's padded vector): stage0 2(N-1)/N·4Ψ (all-reduce of the unpadded gradient);
 * stages 1-2 2(N-1)/N·4Ψ_pad (reduce-scatter + all-gather); stage3 3(N-1)/N·4Ψ_pad (two
 * all-gathers, forward and backward, + one reduce-scatter): 1.5 times DDP's.
 *
 * The check: stages 0-2 hold full replicas (bit-identical across ranks, checked by the
 * driver) and stage 3 gathers its shards (dropping padding) for the check against serial
 * training on the whole batch, with the driver's tolerances.
 *
 * -d f16|bf16 trains the paper's mixed-precision way through the same step (--precision mixed
 * is -d f16): 16-bit parameters and gradients, and the f32 master weights counted with the
 * optimizer states (2 + 2 + 12 bytes per parameter with AdamW), sharded as above; every
 * collective, bucket and gathered layer holds 16-bit elements (half the bytes of f32). The
 * training layer keeps the f32 master and unscaled gradient of the elements this rank steps
 * (the latter outside the formula, category other) and takes the one loss-scale decision a
 * step, OR-ed over the ranks: after stage 1 no rank sees the whole gradient. A skipped step
 * all-gathers nothing in stages 1-2 (nothing was stepped).
 *
 * --analytic PARAMS --ranks N [--precision fp32|mixed] prints the per-device memory table of
 * the paper (mixed precision: 2 + 2 + 12 bytes per parameter) without running anything.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "sl_train.h"

enum { NSTAGES = 4 };
static const char *const stage_names[NSTAGES] = {"stage0", "stage1", "stage2", "stage3"};

static unsigned opt_stages = ~0u;
/* 4 MiB: each hidden layer of the default model (1024 x 1025 floats) closes a bucket; 25 MiB,
 * PyTorch DDP's default, would make the whole default model one bucket, reduced only after
 * backward ends. */
static double opt_bucket_mb = 4.0;
static long long opt_prefetch = 1, opt_ranks = 0;
static int opt_precision = 0; /* fp32 */

static const sl_opt zero_opts[] = {
    {"stage", 0, SL_OPT_CHOICE_LIST, &opt_stages, 0, 0, "0|1|2|3", 0, "ZeRO stages to run (default all)"},
    {"bucket-mb", 0, SL_OPT_DOUBLE, &opt_bucket_mb, 0, 0, NULL, 0,
     "gradient bucket in MiB, reduce-scattered during backward (stages 2-3; default 4)"},
    {"prefetch", 0, SL_OPT_INT, &opt_prefetch, 0, 1, NULL, 0,
     "stage 3: gather the next layer while this one computes (default 1; stages 0-2 ignore it)"},
    {"precision", 0, SL_OPT_CHOICE, &opt_precision, 0, 0, "fp32|mixed", 0,
     "fp32, or mixed: the paper's fp16 parameters and gradients, fp32 master weights and optimizer states, "
     "i.e. -d f16 (default fp32)"},
    /* --analytic PARAMS is read before parsing (main); the table's entry is the training layer's
     * --analytic flag (the GPT shape's figures), whose help names both. */
    {"ranks", 0, SL_OPT_INT, &opt_ranks, 1, 1LL << 40, NULL, 0,
     "data-parallel ranks for --analytic PARAMS (the paper's per-stage memory table for PARAMS parameters; no run)"},
    {0},
};

/* Communication in flight ------------------------------------------------------------ */

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER };
static const char *const op_names[] = {"allreduce", "reduce_scatter", "allgather"};
enum { MAX_IV = 3 * SL_MLP_MAX_LAYERS + 4 }; /* collectives in one step, at most */

typedef struct op {
    sl_coll_req *req; /* NULL once complete (or when the call was blocking) */
    int live;         /* started, not yet seen complete */
    int iv;           /* its interval in the step's list */
    int kind;
} op;

typedef struct zero {
    int stage, nd, r, K;
    size_t c[SL_MLP_MAX_LAYERS];        /* slice of layer l per rank */
    size_t soff[SL_MLP_MAX_LAYERS + 1]; /* layer l's slice in a shard; soff[L] = S */
    /* The model states, in t->dtype (f32 twins: NULL in f32, where the weights are the master) */
    void *params;                       /* the replica [Ψ] (stages 0-2), the shard [S] (3) */
    void *grads;                        /* the full gradient [Ψ] (0-1), the shard [S] (2-3) */
    float *master;                      /* f32 master of the elements this rank steps: [Ψ]
                                           (stage 0) or [S] — an optimizer state (the paper's K) */
    float *g32;                         /* f32 unscaled gradient of the same elements */
    float *optim;                       /* K floats per stepped element */
    sl_acts acts;
    void *staging;                      /* stage 1: one padded layer */
    void *bucket[2];                    /* stages 2-3: filled / being reduced, alternately */
    size_t bucket_elems;
    int nbuckets, blo[SL_MLP_MAX_LAYERS], bhi[SL_MLP_MAX_LAYERS], bucket_of[SL_MLP_MAX_LAYERS];
    size_t bpos[SL_MLP_MAX_LAYERS];     /* layer l's padded block in its bucket's buffer */
    op rs[SL_MLP_MAX_LAYERS];           /* layer l's gradient reduce-scatter */
    void *slot[2];                      /* stage 3: gathered layers */
    int nslots, slot_use[2];            /* the use (below) a slot holds, -1 when free */
    op slot_op[2];
    sl_layer_hooks hooks;
    int niv;                            /* this step's collectives: [start, end] */
    double iv[MAX_IV][2];
    /* setup's allocations, measured */
    double held, mem_comm, mem_bucket, mem_staging, mem_gather;
} zero;

/* Closes o's interval if it has completed (wait: once it has). */
static void op_complete(zero *z, op *o, int wait)
{
    if (!o->live) return;
    int done = 1;
    if (o->req) {
        if (!wait) sl_train_coll_ok(sl_coll_test(o->req, &done), "sl_coll_test");
        if (done) sl_train_coll_ok(sl_coll_wait(o->req), "sl_coll_wait");
    }
    if (!done) return;
    o->req = NULL;
    o->live = 0;
    z->iv[o->iv][1] = sl_now();
    sl_trace_event(op_names[o->kind], "comm", 1, z->iv[o->iv][0], z->iv[o->iv][1]);
}

/* Starts a sum (all-reduce: stage 0, after backward, blocking) or a non-blocking reduce-scatter
 * or all-gather of n elements (t->dtype) per rank. The time inside is exposed communication; an
 * implementation that cannot progress in the background completes here, and no overlap is
 * credited to it. */
static void op_start(sl_train *t, op *o, int kind, const void *send, void *recv, size_t n)
{
    zero *z = t->state;
    const double t0 = sl_now();
    if (z->niv == MAX_IV) SL_FATAL("more than %d collectives in one step", MAX_IV);
    *o = (op){.live = 1, .iv = z->niv++, .kind = kind};
    z->iv[o->iv][0] = t0;
    int rc;
    if (kind == OP_ALLREDUCE)
        rc = sl_coll_allreduce(t->comm, send, recv, n, t->dtype, SL_OP_SUM);
    else if (kind == OP_REDUCE_SCATTER)
        rc = sl_coll_ireduce_scatter(t->comm, send, recv, n, t->dtype, SL_OP_SUM, &o->req);
    else
        rc = sl_coll_iallgather(t->comm, send, recv, n, t->dtype, &o->req);
    sl_train_coll_ok(rc, op_names[kind]);
    op_complete(z, o, 0);
    /* completed inside: the wait ends where its interval does (one clock reading) */
    sl_train_record(t, SL_PHASE_EXPOSED, (o->live ? sl_now() : z->iv[o->iv][1]) - t0);
}

static void op_finish(sl_train *t, op *o)
{
    if (!o->live) return;
    const double t0 = sl_now();
    op_complete(t->state, o, 1);
    sl_train_record(t, SL_PHASE_EXPOSED, ((zero *)t->state)->iv[o->iv][1] - t0);
}

/* Tests everything in flight, so that the suite's own algorithms advance between layers. */
static void progress(sl_train *t)
{
    zero *z = t->state;
    const double t0 = sl_now();
    for (int l = 0; l < t->m->nlayers; l++) op_complete(z, &z->rs[l], 0);
    for (int s = 0; s < z->nslots; s++) op_complete(z, &z->slot_op[s], 0);
    sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
}

/* Time with at least one collective in flight: the union of the step's intervals, which start
 * in order. */
static double comm_time(const zero *z)
{
    double total = 0, covered = -INFINITY;
    for (int i = 0; i < z->niv; i++) {
        const double lo = fmax(z->iv[i][0], covered), hi = z->iv[i][1];
        total += hi > lo ? hi - lo : 0;
        covered = fmax(covered, hi);
    }
    return total;
}

/* The partition ---------------------------------------------------------------------- */

/* Elements of layer l that rank r's slice really holds (the rest is padding). */
static size_t real_elems(const sl_mlp *m, const zero *z, int l, int r)
{
    size_t size = sl_mlp_layer_size(m, l), first = (size_t)r * z->c[l];
    return first >= size ? 0 : size - first < z->c[l] ? size - first : z->c[l];
}

/* Layer l's elements this rank steps: from element *first of the layer's block (the whole
 * layer in stage 0), and their offset in the stepped elements' vectors (master, g32, optim). */
static size_t stepped(const sl_train *t, const zero *z, int l, size_t *first, size_t *off)
{
    if (z->stage == 0) {
        *first = 0;
        *off = t->m->w_off[l];
        return sl_mlp_layer_size(t->m, l);
    }
    *first = (size_t)z->r * z->c[l];
    *off = z->soff[l];
    return real_elems(t->m, z, l, z->r);
}

/* Copies layer l's block (t->dtype) into buf (Nd·c_l elements) and zeroes the padding after it. */
static void pad_copy(sl_train *t, void *buf, const void *block, int l)
{
    const zero *z = t->state;
    size_t size = sl_mlp_layer_size(t->m, l), padded = (size_t)z->nd * z->c[l];
    sl_k_memcpy(t->be, buf, block, size * sl_train_esize(t), SL_K_D2D);
    if (padded > size) sl_k_memset0(t->be, sl_train_at(t, buf, size), (padded - size) * sl_train_esize(t));
}

/* Gradient buckets of whole layers in reverse order, each closed once it holds bucket_bytes of
 * padded gradients in the run's type (a larger layer is a bucket of its own). Bucket b holds
 * layers [blo, bhi); the highest layer's block comes first in the buffer. */
static void make_buckets(zero *z, const sl_mlp *m, double bucket_bytes, size_t es)
{
    size_t fill = 0;
    z->nbuckets = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        const int b = z->nbuckets;
        if (fill == 0) z->bhi[b] = l + 1;
        z->bucket_of[l] = b;
        z->bpos[l] = fill;
        fill += (size_t)z->nd * z->c[l];
        if ((double)fill * (double)es >= bucket_bytes || l == 0) {
            z->blo[b] = l;
            z->nbuckets++;
            if (fill > z->bucket_elems) z->bucket_elems = fill;
            fill = 0;
        }
    }
}

static const void *gather_before(sl_train *t, int layer, int backward);
static void after_layer(sl_train *t, int layer, int backward);
static void *bucket_slot(sl_train *t, int layer);

static void *alloc_counted(sl_train *t, sl_mem_cat cat, size_t bytes, double *counter)
{
    if (counter) *counter += (double)bytes;
    return sl_k_malloc(t->be, cat, bytes);
}

static void setup(sl_train *t)
{
    const sl_mlp *m = t->m;
    const int L = m->nlayers;
    zero *z = calloc(1, sizeof *z);
    if (!z) SL_FATAL("out of memory");
    t->state = z;
    z->stage = t->variant;
    z->nd = t->size;
    z->r = t->rank;
    z->K = sl_optim_state_per_param(&t->optim);
    for (int l = 0; l < L; l++) {
        z->c[l] = (sl_mlp_layer_size(m, l) + (size_t)z->nd - 1) / (size_t)z->nd;
        z->soff[l + 1] = z->soff[l] + z->c[l];
    }
    const size_t n = m->nparams, S = z->soff[L], es = sl_train_esize(t), mine = z->stage ? S : n;
    const sl_mem_space space = t->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    const double comm0 = (double)sl_mem_current(space, SL_MEM_COMM);

    z->params = alloc_counted(t, SL_MEM_PARAMS, (z->stage < 3 ? n : S) * es, &z->held);
    z->grads = alloc_counted(t, SL_MEM_GRADS, (z->stage < 2 ? n : S) * es, &z->held);
    z->master = sl_train_twin(t, SL_MEM_OPTIM, mine);
    if (z->master) z->held += (double)mine * sizeof(float);
    /* the unscaled gradient the optimizer reads: outside the paper's formula (category other) */
    z->g32 = sl_train_twin(t, SL_MEM_OTHER, mine);
    if (z->K) z->optim = alloc_counted(t, SL_MEM_OPTIM, (size_t)z->K * mine * sizeof(float), &z->held);
    sl_acts_alloc(t, t->hi - t->lo, &z->acts);

    /* The weights from the seed, in f32 (the master, or the weights themselves in f32), then
     * the replica or shard cast from them. */
    const uint64_t seed = (uint64_t)sl_train_opt.seed;
    float *w32 = z->master ? z->master : z->params;
    if (z->stage == 0) {
        sl_mlp_init_params(m, seed, 0, n, w32);
    } else {
        if (z->master) sl_k_memset0(t->be, z->master, S * sizeof(float)); /* padding */
        for (int l = 0; l < L && (z->master || z->stage == 3); l++) {
            size_t own = real_elems(m, z, l, z->r);
            if (own) sl_mlp_init_params(m, seed, m->w_off[l] + (size_t)z->r * z->c[l], own, w32 + z->soff[l]);
        }
    }
    if (z->stage == 1 || z->stage == 2) { /* the whole replica */
        float *full = z->master ? sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float)) : z->params;
        sl_mlp_init_params(m, seed, 0, n, full);
        if (z->master) {
            sl_k_cast(t->be, n, full, SL_F32, z->params, t->dtype, NULL);
            sl_k_sync(t->be);
            sl_k_free(t->be, full);
        }
    } else if (z->master) {
        sl_k_cast(t->be, mine, z->master, SL_F32, z->params, t->dtype, NULL);
    }

    size_t widest = 0; /* the largest padded layer */
    for (int l = 0; l < L; l++) widest = (size_t)z->nd * z->c[l] > widest ? (size_t)z->nd * z->c[l] : widest;
    if (z->stage == 1) z->staging = alloc_counted(t, SL_MEM_COMM, widest * es, &z->mem_staging);
    if (z->stage >= 2) {
        z->hooks = (sl_layer_hooks){.before = z->stage == 3 ? gather_before : NULL, .after = after_layer,
                                    .grads = bucket_slot};
        make_buckets(z, m, opt_bucket_mb * 1048576.0, es);
        for (int i = 0; i < (z->nbuckets > 1 ? 2 : 1); i++)
            z->bucket[i] = alloc_counted(t, SL_MEM_COMM, z->bucket_elems * es, &z->mem_bucket);
    }
    if (z->stage == 3) {
        z->nslots = opt_prefetch ? 2 : 1;
        for (int s = 0; s < z->nslots; s++) {
            z->slot[s] = alloc_counted(t, SL_MEM_COMM, widest * es, &z->mem_gather);
            z->slot_use[s] = -1;
        }
    }
    z->mem_comm = (double)sl_mem_current(space, SL_MEM_COMM) - comm0;
}

static void release(sl_train *t)
{
    zero *z = t->state;
    sl_acts_free(t, &z->acts);
    void *bufs[] = {z->params, z->grads, z->master, z->g32, z->optim, z->staging,
                    z->bucket[0], z->bucket[1], z->slot[0], z->slot[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    free(z);
}

/* Stage 3's gathered layers ------------------------------------------------------------- */

/* A step uses each layer's parameters twice: use u = l in forward, u = 2L-1-l in backward. */
static int use_of(const sl_train *t, int layer, int backward)
{
    return backward ? 2 * t->m->nlayers - 1 - layer : layer;
}
static int layer_of_use(const sl_train *t, int u) { return u < t->m->nlayers ? u : 2 * t->m->nlayers - 1 - u; }

static int slot_holding(const zero *z, int u)
{
    for (int s = 0; s < z->nslots; s++)
        if (z->slot_use[s] == u) return s;
    return -1;
}

/* Starts gathering the parameters of use u into a free slot. */
static void gather_start(sl_train *t, int u)
{
    zero *z = t->state;
    const int s = slot_holding(z, -1), l = layer_of_use(t, u);
    if (s < 0) SL_FATAL("no free slot to gather layer %d", l);
    z->slot_use[s] = u;
    op_start(t, &z->slot_op[s], OP_ALLGATHER, sl_train_at(t, z->params, z->soff[l]), z->slot[s], z->c[l]);
}

/* Before a layer's forward or backward: its gathered parameters (padded layer block: W, b,
 * zeros), gathered now unless prefetched; with --prefetch the next use's gather starts first. */
static const void *gather_before(sl_train *t, int layer, int backward)
{
    zero *z = t->state;
    const int u = use_of(t, layer, backward);
    if (slot_holding(z, u) < 0) gather_start(t, u);
    if (z->nslots > 1 && u + 1 < 2 * t->m->nlayers) gather_start(t, u + 1);
    const int s = slot_holding(z, u);
    op_finish(t, &z->slot_op[s]);
    return z->slot[s];
}

/* After a layer: stage 3 drops its gathered parameters; in backward, the layer that completes
 * a bucket starts the reduce-scatter of each of the bucket's layers into the gradient shard. */
static void after_layer(sl_train *t, int layer, int backward)
{
    zero *z = t->state;
    if (z->stage == 3) z->slot_use[slot_holding(z, use_of(t, layer, backward))] = -1;
    progress(t);
    if (!backward || layer != z->blo[z->bucket_of[layer]]) return;
    const int b = z->bucket_of[layer];
    for (int l = z->blo[b]; l < z->bhi[b]; l++)
        op_start(t, &z->rs[l], OP_REDUCE_SCATTER, sl_train_at(t, z->bucket[b & 1], z->bpos[l]),
                 sl_train_at(t, z->grads, z->soff[l]), z->c[l]);
}

/* The steps ----------------------------------------------------------------------------- */

/* The grads hook of stages 2 and 3: layer l's gradients go to its slot of the bucket being
 * filled (two buffers alternate, so the full gradient is never held). Before a bucket's first
 * layer, the reduce-scatters that last used its buffer must be done. */
static void *bucket_slot(sl_train *t, int l)
{
    zero *z = t->state;
    const int b = z->bucket_of[l];
    void *buf = z->bucket[b & 1];
    if (l == z->bhi[b] - 1) {
        if (b >= 2)
            for (int k = z->blo[b - 2]; k < z->bhi[b - 2]; k++) op_finish(t, &z->rs[k]);
        sl_k_memset0(t->be, buf, z->bucket_elems * sl_train_esize(t));
    }
    return sl_train_at(t, buf, z->bpos[l]);
}

/* Layer l's gradient elements this rank steps: in the full gradient (stages 0-1, stage 1's
 * reduced slice put back in place) or the shard. */
static void *own_grads(sl_train *t, int l, size_t first)
{
    zero *z = t->state;
    return z->stage < 2 ? sl_train_at(t, z->grads, t->m->w_off[l] + first) : sl_train_at(t, z->grads, z->soff[l]);
}

/* ... and its weights: in the replica (stages 0-2) or the shard. */
static void *own_params(sl_train *t, int l, size_t first)
{
    zero *z = t->state;
    return z->stage < 3 ? sl_train_at(t, z->params, t->m->w_off[l] + first) : sl_train_at(t, z->params, z->soff[l]);
}

/* Stages 1-2: every rank's stepped slice of layer l into every replica (buf: Nd·c_l). */
static void gather_into_replica(sl_train *t, int l, void *buf)
{
    zero *z = t->state;
    void *block = sl_train_at(t, z->params, t->m->w_off[l]);
    pad_copy(t, buf, block, l);
    op o;
    op_start(t, &o, OP_ALLGATHER, sl_train_at(t, buf, (size_t)z->r * z->c[l]), buf, z->c[l]);
    op_finish(t, &o);
    sl_k_memcpy(t->be, block, buf, sl_mlp_layer_size(t->m, l) * sl_train_esize(t), SL_K_D2D);
}

static void step(sl_train *t)
{
    zero *z = t->state;
    const sl_mlp *m = t->m;
    const int L = m->nlayers;
    sl_acts *a = &z->acts;
    z->niv = 0;
    sl_acts_load(t, a, t->lo, t->hi - t->lo);
    if (z->stage < 2) {
        sl_k_memset0(t->be, z->grads, m->nparams * sl_train_esize(t));
        sl_acts_forward(t, a, z->params, 0, L, NULL);
        sl_acts_loss(t, a);
        sl_acts_backward(t, a, z->params, z->grads, NULL);
    } else {
        sl_acts_forward(t, a, z->stage == 3 ? NULL : z->params, 0, L, &z->hooks); /* 3: the hooks' */
        sl_acts_loss(t, a);
        sl_acts_backward(t, a, z->stage == 3 ? NULL : z->params, NULL, &z->hooks);
        for (int l = 0; l < L; l++) op_finish(t, &z->rs[l]);
    }
    op o;
    if (z->stage == 0) {
        op_start(t, &o, OP_ALLREDUCE, z->grads, z->grads, m->nparams);
        op_finish(t, &o);
    } else if (z->stage == 1) { /* layer by layer through one padded buffer, the slice kept in place */
        for (int l = 0; l < L; l++) {
            void *own = sl_train_at(t, z->staging, (size_t)z->r * z->c[l]);
            pad_copy(t, z->staging, sl_train_at(t, z->grads, m->w_off[l]), l);
            op_start(t, &o, OP_REDUCE_SCATTER, z->staging, own, z->c[l]);
            op_finish(t, &o);
            size_t first, off, cnt = stepped(t, z, l, &first, &off);
            sl_k_memcpy(t->be, own_grads(t, l, first), own, cnt * sl_train_esize(t), SL_K_D2D);
        }
    }
    /* the elements this rank steps, unscaled; one decision; the optimizer, layer by layer */
    const float *g32[SL_MLP_MAX_LAYERS];
    for (int l = 0; l < L; l++) {
        size_t first, off, cnt = stepped(t, z, l, &first, &off);
        g32[l] = cnt ? sl_train_unscale(t, own_grads(t, l, first), sl_f32_at(z->g32, off), cnt) : NULL;
    }
    if (sl_train_decide(t)) {
        for (int l = 0; l < L; l++) {
            size_t first, off, cnt = stepped(t, z, l, &first, &off);
            if (cnt)
                sl_train_apply(t, own_params(t, l, first), sl_f32_at(z->master, off), g32[l],
                               sl_f32_at(z->optim, (size_t)z->K * off), cnt);
            if (z->stage == 1 || z->stage == 2)
                gather_into_replica(t, l, z->stage == 1 ? z->staging : z->bucket[0]);
        }
    }
    sl_train_record(t, SL_PHASE_COMM, comm_time(z));
}

/* Weights: the f32 weights this rank holds whole — every stage 0 replica, stages 1-2's in f32
 * (in 16 bits their f32 master is sharded) — or none: then gather_weights. */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    zero *z = t->state;
    *first = 0;
    *count = z->stage == 0 || (z->stage < 3 && !z->master) ? t->m->nparams : 0;
    return z->master ? z->master : z->params;
}

/* Every layer's f32 shards gathered, padding dropped, on rank 0 (for the check). */
static void gather_weights(sl_train *t, float *full)
{
    zero *z = t->state;
    const sl_mlp *m = t->m;
    const float *shard = z->master ? z->master : z->params;
    float *buf = sl_k_malloc(t->be, SL_MEM_OTHER, (size_t)z->nd * z->soff[m->nlayers] * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        sl_train_coll_ok(sl_coll_allgather(t->comm, shard + z->soff[l], buf, z->c[l], SL_F32),
                         "allgather (weights for the check)");
        if (t->rank == 0)
            sl_k_memcpy(t->be, full + m->w_off[l], buf, sl_mlp_layer_size(m, l) * sizeof(float), SL_K_D2H);
    }
    sl_k_free(t->be, buf);
}

/* Models ---------------------------------------------------------------------------------- */

/* The step as the performance model reads it (perf_model.h), in step()'s order. Stage 0: the
 * gradient zeroed, forward, backward, one all-reduce, the optimizer on every element. Stage 1:
 * the same backward, then layer by layer the gradient copied (padded) into the staging buffer,
 * reduce-scattered and the slice copied back. Stages 2-3: backward into the buckets (each
 * zeroed before its first layer, after the reduce-scatters that last used its buffer), a
 * bucket's reduce-scatters started after its lowest layer's backward. Stage 3 gathers each use of
 * a layer's parameters before it, the next use's first with --prefetch. Stages 1-2 then step their
 * slice layer by layer and all-gather it back into the replica (copies around it). */
static void schedule(const sl_train *t, sl_pm_sched *s)
{
    const zero *z = t->state;
    const sl_mlp *m = t->m;
    const int L = m->nlayers, rows = t->hi - t->lo, U = 2 * L;
    const double es = (double)sl_train_esize(t);
    int rs[SL_MLP_MAX_LAYERS], gather[2 * SL_MLP_MAX_LAYERS];
    for (int u = 0; u < U; u++) gather[u] = -1;
    if (z->stage < 2) sl_pm_bytes(s, (double)m->nparams * es);
    sl_pm_load(t, s, rows);
    for (int u = 0; u < U; u++) {
        const int l = u < L ? u : U - 1 - u, backward = u >= L;
        if (z->stage == 3) {
            if (gather[u] < 0) gather[u] = sl_pm_start(s, SL_PM_IALLGATHER, (double)z->c[l]);
            if (z->nslots > 1 && u + 1 < U) gather[u + 1] = sl_pm_start(s, SL_PM_IALLGATHER, (double)z->c[layer_of_use(t, u + 1)]);
            sl_pm_wait(s, gather[u]);
        }
        if (!backward) {
            sl_pm_layer_forward(t, s, l, rows);
            if (l == L - 1) sl_pm_loss(t, s, rows);
            continue;
        }
        const int b = z->stage >= 2 ? z->bucket_of[l] : 0;
        if (z->stage >= 2 && l == z->bhi[b] - 1) {
            if (b >= 2)
                for (int k = z->blo[b - 2]; k < z->bhi[b - 2]; k++) sl_pm_wait(s, rs[k]);
            sl_pm_bytes(s, (double)z->bucket_elems * es);
        }
        sl_pm_layer_backward(t, s, l, rows);
        if (z->stage >= 2 && l == z->blo[b])
            for (int k = z->blo[b]; k < z->bhi[b]; k++) rs[k] = sl_pm_start(s, SL_PM_IREDUCE_SCATTER, (double)z->c[k]);
    }
    if (z->stage >= 2)
        for (int l = 0; l < L; l++) sl_pm_wait(s, rs[l]);
    if (z->stage == 0) sl_pm_comm(s, SL_PM_ALLREDUCE, (double)m->nparams);
    for (int l = 0; l < L && z->stage == 1; l++) {
        const double size = (double)sl_mlp_layer_size(m, l), padded = (double)z->nd * (double)z->c[l];
        sl_pm_bytes(s, (2 * size + (padded - size)) * es); /* the padded copy */
        sl_pm_comm(s, SL_PM_IREDUCE_SCATTER, (double)z->c[l]);
        sl_pm_bytes(s, 2.0 * (double)real_elems(m, z, l, z->r) * es);
    }
    for (int l = 0; l < L; l++) {
        sl_pm_optimizer(t, s, z->stage == 0 ? sl_mlp_layer_size(m, l) : real_elems(m, z, l, z->r));
        if (z->stage == 1 || z->stage == 2) {
            const double size = (double)sl_mlp_layer_size(m, l), padded = (double)z->nd * (double)z->c[l];
            sl_pm_bytes(s, (2 * size + (padded - size)) * es);
            sl_pm_comm(s, SL_PM_IALLGATHER, (double)z->c[l]);
            sl_pm_bytes(s, 2.0 * size * es);
        }
    }
}

/* Bytes per parameter of parameters, gradients and optimizer states: f32 4, 4, 4K; mixed
 * precision 2, 2 and 4 + 4K (the f32 master weights are an optimizer state: the paper's K = 12
 * with Adam). */
static void bytes_per_param(const sl_train *t, const zero *z, double pgo[3])
{
    pgo[0] = pgo[1] = (double)sl_train_esize(t);
    pgo[2] = 4.0 * z->K + (z->master ? 4.0 : 0.0);
}

/* The ZeRO formula for this run's stage (header), shards at their padded size S. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const zero *z = t->state;
    const double psi = (double)t->m->nparams, S = (double)z->soff[t->m->nlayers];
    double pgo[3];
    bytes_per_param(t, z, pgo);
    bytes[SL_MEM_PARAMS] = pgo[0] * (z->stage == 3 ? S : psi);
    bytes[SL_MEM_GRADS] = pgo[1] * (z->stage >= 2 ? S : psi);
    bytes[SL_MEM_OPTIM] = pgo[2] * (z->stage >= 1 ? S : psi);
    bytes[SL_MEM_ACTIV] = (double)sl_acts_bytes(t, z->acts.rows);
}

/* The busiest rank's bytes per step (header): the ring sends (N-1)/N of each vector, of
 * t->dtype elements. A step the loss scaler skips (f16) sends no all-gather of stepped
 * parameters (stages 1-2): the model is the mean over the run's steps, as the measurement is. */
static double bytes_model(const sl_train *t)
{
    const zero *z = t->state;
    const double N = t->size, padded = N * (double)z->soff[t->m->nlayers], es = (double)sl_dtype_size(t->dtype);
    if (z->stage == 0) return 2.0 * (N - 1) / N * es * (double)t->m->nparams;
    if (z->stage == 3) return 3.0 * (N - 1) / N * es * padded;
    const double applied = 1.0 - (double)t->ms.sc.skipped / t->nsteps;
    return (1.0 + applied) * (N - 1) / N * es * padded;
}

static void row(sl_train *t, sl_result *res)
{
    zero *z = t->state;
    const sl_mlp *m = t->m;
    sl_result_param_num(res, "stage", z->stage);
    if (!t->scaled) sl_result_param_str(res, "precision", "fp32"); /* else the driver's "mixed" */
    sl_result_param_num(res, "shard_elems", (double)z->soff[m->nlayers]);
    sl_result_param_num(res, "padded_params", (double)z->nd * (double)z->soff[m->nlayers]);
    if (z->stage >= 2) {
        sl_result_param_num(res, "bucket_mb", opt_bucket_mb);
        sl_result_param_num(res, "buckets", z->nbuckets);
    }
    if (z->stage == 3) sl_result_param_num(res, "prefetch", (double)opt_prefetch);
    sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(t->comm));
    double model[SL_MEM_NCATS] = {0};
    memory_model(t, model);
    sl_result_metric(res, "mem_model_total", model[SL_MEM_PARAMS] + model[SL_MEM_GRADS] + model[SL_MEM_OPTIM], "bytes");
    sl_result_metric(res, "mem_total", z->held, "bytes");
    /* What padding adds to the formula: its bytes beyond the paper's Ψ/Nd per shard, i.e.
     * (Ψ_pad - Ψ)/Nd elements per sharded category (a per-rank average: rank 0 holds none). */
    double pgo[3];
    bytes_per_param(t, z, pgo);
    const double per_elem = pgo[0] * (z->stage == 3) + pgo[1] * (z->stage >= 2) + pgo[2] * (z->stage >= 1);
    const double pad = ((double)z->nd * (double)z->soff[m->nlayers] - (double)m->nparams) / z->nd;
    sl_result_metric(res, "mem_padding", pad * per_elem, "bytes");
    sl_result_metric(res, "mem_comm", z->mem_comm, "bytes");
    sl_result_metric(res, "mem_staging", z->mem_staging, "bytes");
    sl_result_metric(res, "mem_bucket", z->mem_bucket, "bytes");
    sl_result_metric(res, "mem_gather", z->mem_gather, "bytes");
}

/* The analytic table --------------------------------------------------------------------- */

static int analytic_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "zero: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return SL_EXIT_USAGE;
}

static int analytic(int argc, char **argv)
{
    double psi = NAN;
    long long nd = 0;
    int which = -1; /* both */
    for (int i = 1; i < argc; i++) {
        char name[32];
        const char *arg = argv[i], *eq = strchr(arg, '='), *val;
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
        if (strcmp(name, "--analytic") && strcmp(name, "--ranks") && strcmp(name, "--precision"))
            return analytic_error("--analytic: prints the memory table and takes only --ranks N and "
                                  "--precision fp32|mixed beside it, not '%s'", arg);
        val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : "";
        char *end;
        if (!strcmp(name, "--analytic")) {
            psi = strtod(val, &end);
            if (end == val || *end || !(psi >= 1 && psi < 1e18))
                return analytic_error("--analytic: expected a parameter count such as 7.5e9, got '%s'", val);
        } else if (!strcmp(name, "--ranks")) {
            nd = strtoll(val, &end, 10);
            if (end == val || *end || nd < 1 || nd > (1LL << 40))
                return analytic_error("--ranks: expected the data-parallel rank count (an integer >= 1), got '%s'", val);
        } else if (!strcmp(val, "fp32") || !strcmp(val, "mixed")) {
            which = !strcmp(val, "mixed") ? 0 : 1;
        } else {
            return analytic_error("--precision: expected fp32|mixed, got '%s'", val);
        }
    }
    if (nd == 0) return analytic_error("--ranks: --analytic needs the data-parallel rank count, e.g. --ranks 64%s", "");
    static const double pgo[2][3] = {{2, 2, 12}, {4, 4, 8}};
    static const char *const formula[2][NSTAGES] = {
        {"16Psi", "4Psi + 12Psi/Nd", "2Psi + 14Psi/Nd", "16Psi/Nd"},
        {"16Psi", "8Psi + 8Psi/Nd", "4Psi + 12Psi/Nd", "16Psi/Nd"},
    };
    static const char *const what[NSTAGES] = {"nothing (DDP)", "optimizer states", "+ gradients", "+ parameters"};
    printf("# ZeRO model states per device: Psi = %.4g parameters, Nd = %lld data-parallel ranks, GB = 1e9 bytes\n",
           psi, nd);
    printf("# mixed: fp16 parameters 2 + fp16 gradients 2 + fp32 master, momentum, variance 12 bytes per parameter\n"
           "# fp32:  parameters 4 + gradients 4 + Adam momentum, variance 8 bytes per parameter\n"
           "# activations, communication buffers and fragmentation are not included\n");
    printf("%-7s %-17s", "#stage", "partitioned");
    if (which != 1) printf(" %-17s %9s", "mixed formula", "mixed GB");
    if (which != 0) printf(" %-17s %9s", "fp32 formula", "fp32 GB");
    printf("\n");
    for (int s = 0; s < NSTAGES; s++) {
        printf("%-7s %-17s", stage_names[s], what[s]);
        for (int p = 0; p < 2; p++) {
            if (which >= 0 && which != p) continue;
            /* to 0.1 GB, halves rounded up as the paper's table does (1.875 -> 1.9) */
            double gb = round(sl_zero_states(s, psi, (double)nd, pgo[p]) / 1e8) / 10;
            printf(" %-17s %9.1f", formula[p][s], gb);
        }
        printf("\n");
    }
    return 0;
}

/* The program ---------------------------------------------------------------------------- */

static void validate(sl_ctx *ctx)
{
    if (!(opt_bucket_mb > 0)) sl_usage_error("--bucket-mb: expected a size in MiB > 0, got %g", opt_bucket_mb);
    if (opt_precision == 1) { /* the paper's fp16: -d f16 (the driver runs the rows in this dtype) */
        if (sl_option_given(&ctx->opt, "dtype"))
            sl_usage_error("--precision: mixed is the paper's fp16 training, i.e. -d f16; give one of them");
        ctx->opt.dtypes = 1u << SL_F16;
        sl_note(ctx, "--precision mixed: fp16 parameters and gradients, fp32 master weights and optimizer "
                     "states (as -d f16)");
    }
    if (opt_ranks) sl_usage_error("--ranks: only with --analytic PARAMS (the run's ranks are the launcher's)");
    if (sl_option_given(&ctx->opt, "prefetch") && (opt_stages & 7u))
        sl_note(ctx, "--prefetch applies to stage 3 only; stages 0-2 hold every parameter and ignore it "
                     "(it is accepted for them so that one command line sweeps every stage)");
}

/* The run, the step, this rank's model states (measured, and by the formula), the bytes, the
 * check (the L2 error too: AdamW, the default, is checked in L2). */
static const sl_column columns[] = {
    SL_TRAIN_COLUMNS_RUN, SL_COL("dtype", "dtype", 5), SL_TRAIN_COLUMNS_STEP, SL_TRAIN_COLUMNS_PRED,
    {"p+g+o", "MB", "mem_total", 8, 2, 1e-6}, {"formula", "MB", "mem_model_total", 8, 2, 1e-6},
    SL_TRAIN_COLUMNS_BYTES, SL_COL_ERROR("L2 err", "weight_l2_err", 9), SL_TRAIN_COLUMNS_CHECK,
};

static sl_technique zero_technique = {
    .trains_gpt = 1,
    .program = {.name = "zero",
                .summary = "ZeRO stages 0-3: optimizer state, gradients and parameters sharded over data-parallel ranks",
                .uses = SL_USES_BACKEND | SL_USES_COLL | SL_USES_DTYPE, .default_coll = SL_COLL_MPI, /* .colls: main */
                .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16), .default_dtype = SL_F32,
                .default_iters = 10, .default_warmup = 2, .extra = zero_opts, .validate = validate},
    .variants = stage_names, .nvariants = NSTAGES, .variant_mask = &opt_stages,
    .setup = setup, .step = step, .weights = weights, .gather_weights = gather_weights, .free = release,
    .memory_model = memory_model, .bytes_model = bytes_model, .schedule = schedule, .row = row,
    .sums_loss = 1, .mixed_variants = (1u << NSTAGES) - 1,
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        /* --analytic PARAMS (a value follows); the flag alone is the GPT shape's (gpt_shape.h) */
        if ((!strncmp(argv[i], "--analytic=", 11)) ||
            (!strcmp(argv[i], "--analytic") && i + 1 < argc && argv[i + 1][0] != '-'))
            return analytic(argc, argv);
    /* A model whose AdamW state is worth sharding, small enough for a 2-core machine. */
    sl_train_opt.optim = 1;
    sl_train_opt.layers = 4;
    sl_train_opt.width = 1024;
    sl_train_opt.batch = 16;
    /* Collectives that have both halves of the sharded step. */
    for (int c = 0; c < SL_NCOLLS; c++)
        if (sl_coll_supports((sl_coll)c, SL_CO_REDUCE_SCATTER) && sl_coll_supports((sl_coll)c, SL_CO_ALLGATHER))
            zero_technique.program.colls |= 1u << c;
    return sl_train_main(&zero_technique, argc, argv);
}
