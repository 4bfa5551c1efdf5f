/* ddp.c — data-parallel training (DDP) of the shared MLP, on the training layer.
 *
 * What is replicated: every rank holds the whole model, its gradients and its optimizer state.
 * What is partitioned: each step's global batch of B samples; rank r trains on its contiguous
 * slice. What is communicated: the gradients, summed across ranks before every optimizer step,
 * so that all replicas take the same step and stay identical.
 *
 *   sync      backward completes, then the whole gradient is all-reduced, then the step
 *   bucketed  gradients grouped into buckets of --bucket-mb in reverse layer order; a bucket's
 *             all-reduce starts, non-blocking, as soon as the backward of its layers is done,
 *             and the rest of backward runs while it is in flight (progressed between layers)
 *   accum     gradient accumulation: --accum K micro-batches per step, one all-reduce after the
 *             last (K times fewer all-reduces per sample)
 *   ps        parameter server: the last --servers S ranks hold the weights, sharded, and apply
 *             the optimizer; the other ranks (workers) push gradients and pull weights
 *
 * The loss is normalised over the global batch (MSE mean over B·out elements), so a rank's
 * gradient is its share of the global gradient and a SUM all-reduce gives the global gradient
 * exactly, even when B does not divide evenly across ranks. The training layer checks the
 * weights against one process trained on the whole batch and the replicas against each other.
 *
 * -d f16|bf16: mixed-precision data parallelism (sync: ddp/mixed.c; bucketed and accum:
 * ddp/mixed_layers.c): each replica computes in the 16-bit type with f32 master weights, and
 * the all-reduces move 16-bit gradients — half the bytes of f32. ps trains in f32 only.
 */
#include <math.h>
#include <stdlib.h>

#include "ddp/mixed_layers.h"
#include "sl_train.h"

#define DDP_VARIANTS(X) X(V_SYNC, "sync") X(V_BUCKETED, "bucketed") X(V_ACCUM, "accum") X(V_PS, "ps")
SL_ENUM(ddp_variant, DDP_VARIANTS, NVARIANTS);
static const char *const variant_names[NVARIANTS] = SL_ENUM_NAMES(DDP_VARIANTS);

static long long opt_accum = 4, opt_servers = 1;
static double opt_bucket_mb = 25.0;
static unsigned opt_variants = ~0u;

static const sl_opt ddp_opts[] = {
    {"bucket-mb", 0, SL_OPT_DOUBLE, &opt_bucket_mb, 0, 0, NULL, 0, "bucket size in MiB (default 25)"},
    {"accum", 0, SL_OPT_INT, &opt_accum, 1, 1 << 16, NULL, 0, "micro-batches per step for accum (default 4)"},
    {"servers", 0, SL_OPT_INT, &opt_servers, 1, 1 << 16, NULL, 0, "parameter-server ranks for ps (default 1)"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(DDP_VARIANTS), 0,
     "variants to run (default all)"},
    {0},
};

/* One rank's replica ------------------------------------------------------------------- */

#define MAX_BUCKETS 256

typedef struct bucket {
    int l0, l1;          /* layers [l0, l1): a contiguous slice of the flat gradient */
    size_t off, count;   /* elements */
    sl_coll_req *req;
    double t_start, t_done;
} bucket;

typedef struct replica {
    sl_replica rep;         /* params, grads, optimizer state, activations (f32) */
    ddp_mixed mixed;        /* the 16-bit replica (-d f16|bf16) */
    float *micro_gw32;      /* accum -d f16|bf16: a micro-batch's layer gradient, f32 */
    float *ps_recv;         /* ps server: one worker's gradient shard */
    int micro;              /* micro-batches per step (accum), else 1 */
    int servers, workers;   /* ps */
    int nbuckets;
    bucket buckets[MAX_BUCKETS];
} replica;

static int is_server(const sl_train *t) { return t->variant == V_PS && t->rank >= t->data_ranks; }

/* Shard of the flat parameter vector owned by server s. */
static void server_shard(const sl_train *t, int s, size_t *off, size_t *count)
{
    size_t hi;
    sl_share(t->m->nparams, t->size - t->data_ranks, s, off, &hi);
    *count = hi - *off;
}

/* Buckets in reverse layer order: walk from the last layer down, closing a bucket once it
 * holds at least bucket_bytes. A layer is never split, so one larger than a bucket is a bucket
 * of its own (as in PyTorch DDP). */
static int make_buckets(const sl_mlp *m, double bucket_bytes, size_t elem_bytes, bucket *b)
{
    int n = 0, l1 = m->nlayers;
    size_t bytes = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        bytes += sl_mlp_layer_size(m, l) * elem_bytes;
        if ((double)bytes >= bucket_bytes || l == 0) {
            b[n] = (bucket){.l0 = l, .l1 = l1, .off = m->w_off[l], .count = sl_mlp_range_size(m, l, l1)};
            n++;
            l1 = l;
            bytes = 0;
            if (n == MAX_BUCKETS && l > 0) { /* fold what is left into the last bucket */
                b[n - 1].l0 = 0;
                b[n - 1].off = 0;
                b[n - 1].count = sl_mlp_range_size(m, 0, b[n - 1].l1);
                break;
            }
        }
    }
    return n;
}

static int data_ranks(int variant, int nranks) { return variant == V_PS ? nranks - (int)opt_servers : nranks; }

static void setup(sl_train *t)
{
    replica *r = calloc(1, sizeof *r);
    if (!r) SL_FATAL("out of memory");
    t->state = r;
    r->micro = t->variant == V_ACCUM ? (int)opt_accum : 1;
    r->workers = t->data_ranks;
    r->servers = t->size - t->data_ranks;
    int local = t->hi - t->lo;
    /* bucket sizes in bytes of the gradient's type, as PyTorch DDP's bucket_cap_mb */
    if (t->variant == V_BUCKETED)
        r->nbuckets = make_buckets(t->m, opt_bucket_mb * 1048576.0, sl_dtype_size(t->dtype), r->buckets);
    if (t->dtype != SL_F32) { /* sync, bucketed, accum (mixed_variants) */
        ddp_mixed_setup(t, &r->mixed, r->micro);
        if (r->micro > 1) r->micro_gw32 = ddp_mixed_layer_workspace(t);
        return;
    }
    sl_replica_alloc(t, (local + r->micro - 1) / r->micro, &r->rep);
    if (is_server(t)) {
        size_t off, cnt;
        server_shard(t, t->rank - r->workers, &off, &cnt);
        r->ps_recv = sl_k_malloc(t->be, SL_MEM_COMM, cnt * sizeof(float) + 1);
    }
}

static void release(sl_train *t)
{
    replica *r = t->state;
    if (t->dtype != SL_F32) {
        ddp_mixed_free(t, &r->mixed);
        sl_k_free(t->be, r->micro_gw32);
        free(r);
        return;
    }
    sl_replica_free(t, &r->rep);
    sl_k_free(t->be, r->ps_recv);
    free(r);
}

/* The steps --------------------------------------------------------------------------- */

/* The gradient the collectives move: the f32 replica's, or the 16-bit one's (-d f16|bf16). */
static void *grads_of(const sl_train *t, replica *r)
{
    return t->dtype == SL_F32 ? (void *)r->rep.grads : r->mixed.mx.g16;
}

/* Progresses bucket bk's all-reduce; records when it is seen complete. */
static void bucket_poll(bucket *bk, int wait)
{
    int done = 1;
    if (!wait) sl_train_coll_ok(sl_coll_test(bk->req, &done), "sl_coll_test");
    if (!done) return;
    sl_train_coll_ok(sl_coll_wait(bk->req), "sl_coll_wait");
    bk->req = NULL;
    bk->t_done = sl_now();
    char name[64]; /* layers counted from 1, as a student reads them */
    snprintf(name, sizeof name, "all-reduce bucket, layers %d-%d", bk->l0 + 1, bk->l1);
    sl_trace_event(name, "comm", 1, bk->t_start, bk->t_done);
}

/* bucketed, after each layer's backward: start the all-reduce of the bucket whose lowest layer
 * this is; progress the others. The time spent here is communication the step waits for. */
static void bucket_hook(sl_train *t, int layer, int backward)
{
    replica *r = t->state;
    if (!backward) return;
    double t0 = sl_now();
    for (int b = 0; b < r->nbuckets; b++) {
        bucket *bk = &r->buckets[b];
        if (bk->req) bucket_poll(bk, 0);
        if (bk->l0 == layer) {
            bk->t_start = sl_now();
            bk->t_done = 0;
            void *g = (char *)grads_of(t, r) + bk->off * sl_dtype_size(t->dtype);
            sl_train_coll_ok(sl_coll_iallreduce(t->comm, g, g, bk->count, t->dtype, SL_OP_SUM, &bk->req),
                             "sl_coll_iallreduce");
            /* An implementation that cannot overlap finishes inside the start: record its end
             * now, not at the next layer, so no overlap is credited to it. */
            bucket_poll(bk, 0);
        }
    }
    sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
}
static const sl_layer_hooks bucket_hooks = {.after = bucket_hook};

/* Time during which at least one bucket was in flight (the union of their intervals; buckets
 * start in order, so a running maximum suffices). */
static double buckets_span(const replica *r)
{
    double span = 0, reach = 0;
    for (int b = 0; b < r->nbuckets; b++) {
        const bucket *bk = &r->buckets[b];
        double s = bk->t_start > reach ? bk->t_start : reach;
        if (bk->t_done > s) span += bk->t_done - s;
        if (bk->t_done > reach) reach = bk->t_done;
    }
    return span;
}

static void step_ps(sl_train *t);
static void step(sl_train *t)
{
    if (t->variant == V_PS) { /* the parameter server communicates point to point */
        step_ps(t);
        return;
    }
    replica *r = t->state;
    if (t->dtype != SL_F32 && t->variant == V_SYNC) {
        ddp_mixed_step(t, &r->mixed);
        return;
    }
    const size_t n = t->m->nparams;
    if (t->dtype != SL_F32) { /* 16-bit gradients, summed in f32 over micro-batches (ddp/mixed_layers.c) */
        ddp_mixed_backward(t, &r->mixed, r->micro, r->micro_gw32, t->variant == V_BUCKETED ? &bucket_hooks : NULL);
    } else {
        sl_k_memset0(t->be, r->rep.grads, n * sizeof(float));
        for (int k = 0; k < r->micro; k++) {
            size_t a, b;
            sl_share((size_t)(t->hi - t->lo), r->micro, k, &a, &b);
            if (b == a) continue;
            int last = k == r->micro - 1;
            sl_replica_forward_backward(t, &r->rep, t->lo + (int)a, (int)(b - a),
                                        t->variant == V_BUCKETED && last ? &bucket_hooks : NULL);
        }
    }
    double t0 = sl_now();
    if (t->variant == V_BUCKETED) {
        for (int b = 0; b < r->nbuckets; b++)
            if (r->buckets[b].req) bucket_poll(&r->buckets[b], 1);
        sl_train_span(t, SL_PHASE_EXPOSED, "wait for buckets", t0, sl_now());
        sl_train_record(t, SL_PHASE_COMM, buckets_span(r));
    } else {
        void *g = grads_of(t, r);
        sl_train_coll_ok(sl_coll_allreduce(t->comm, g, g, n, t->dtype, SL_OP_SUM), "sl_coll_allreduce");
        sl_train_blocking(t, "all-reduce (blocking)", t0);
    }
    /* after every bucket: the one unscale, overflow flag and loss-scale decision of the step */
    if (t->dtype != SL_F32)
        ddp_mixed_update(t, &r->mixed);
    else
        sl_train_optimize(t, r->rep.params, r->rep.grads, r->rep.optim, 0, n);
}

/* ps: workers compute and push gradient shards; each server sums its shard over the workers
 * in a fixed order, steps its shard of the master weights and sends it back to every worker. */
static void step_ps(sl_train *t)
{
    replica *r = t->state;
    size_t off, cnt;
    if (!is_server(t)) {
        sl_k_memset0(t->be, r->rep.grads, t->m->nparams * sizeof(float));
        sl_replica_forward_backward(t, &r->rep, t->lo, t->hi - t->lo, NULL);
        double c0 = sl_now();
        for (int s = 0; s < r->servers; s++) {
            server_shard(t, s, &off, &cnt);
            sl_train_coll_ok(sl_coll_send(t->comm, r->rep.grads + off, cnt, SL_F32, r->workers + s, 1), "push");
        }
        for (int s = 0; s < r->servers; s++) {
            server_shard(t, s, &off, &cnt);
            sl_train_coll_ok(sl_coll_recv(t->comm, r->rep.params + off, cnt, SL_F32, r->workers + s, 2), "pull");
        }
        sl_train_blocking(t, "push+pull", c0);
        return;
    }
    server_shard(t, t->rank - r->workers, &off, &cnt);
    sl_k_memset0(t->be, r->rep.grads + off, cnt * sizeof(float));
    double c0 = sl_now(), comm = 0;
    for (int w = 0; w < r->workers; w++) {
        double r0 = sl_now();
        sl_train_coll_ok(sl_coll_recv(t->comm, r->ps_recv, cnt, SL_F32, w, 1), "push (server)");
        double a0 = sl_now();
        comm += a0 - r0;
        sl_k_add(t->be, SL_F32, cnt, r->ps_recv, r->rep.grads + off);
        sl_k_sync(t->be);
        sl_train_record(t, SL_PHASE_COMPUTE, sl_now() - a0);
    }
    /* the server's optimizer state covers its shard only */
    sl_train_optimize(t, r->rep.params, r->rep.grads, r->rep.optim, off, cnt);
    double s0 = sl_now();
    for (int w = 0; w < r->workers; w++)
        sl_train_coll_ok(sl_coll_send(t->comm, r->rep.params + off, cnt, SL_F32, w, 2), "pull (server)");
    double s1 = sl_now();
    comm += s1 - s0;
    sl_train_record(t, SL_PHASE_COMM, comm);
    sl_train_record(t, SL_PHASE_EXPOSED, comm);
    sl_trace_event("serve", "comm", 1, c0, s1);
}

/* Every worker holds the whole model; a server its shard. */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    replica *r = t->state;
    *first = 0;
    *count = t->m->nparams;
    if (t->dtype != SL_F32) return r->mixed.mx.master;
    if (is_server(t)) server_shard(t, t->rank - r->workers, first, count);
    return r->rep.params + *first;
}

/* Bytes the busiest rank sends per step by the textbook volume: ring all-reduce sends
 * 2(N-1)/N of the gradient (2-byte elements with -d f16|bf16); a parameter-server worker
 * pushes the whole gradient, a server sends its shard (the first is the largest) back to
 * every worker. */
static double bytes_model(const sl_train *t)
{
    double psi = (double)t->m->nparams * (double)sl_dtype_size(t->dtype);
    if (t->variant != V_PS) return t->size > 1 ? 2.0 * (t->size - 1) / t->size * psi : 0.0;
    size_t off, cnt;
    server_shard(t, 0, &off, &cnt);
    double server = (double)t->data_ranks * (double)cnt * sizeof(float);
    return server > psi ? server : psi;
}

/* A replica holds the whole model, its gradients, its optimizer state and the activations of
 * one (micro-)batch. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const replica *r = t->state;
    sl_mlp_bytes b = t->dtype != SL_F32 ? ddp_mixed_memory(t, &r->mixed) : sl_mlp_memory(t->m, r->rep.rows, &t->optim);
    bytes[SL_MEM_PARAMS] = (double)b.params;
    bytes[SL_MEM_GRADS] = (double)b.grads;
    bytes[SL_MEM_OPTIM] = (double)b.optim;
    bytes[SL_MEM_ACTIV] = (double)b.activ;
}

static void row(sl_train *t, sl_result *res)
{
    replica *r = t->state;
    if (t->dtype != SL_F32) ddp_mixed_row(t, &r->mixed, res);
    if (t->variant == V_BUCKETED) {
        sl_result_param_num(res, "bucket_mb", opt_bucket_mb);
        sl_result_param_num(res, "buckets", r->nbuckets);
        sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(t->comm));
    }
    if (t->variant == V_ACCUM) sl_result_param_num(res, "accum", (double)opt_accum);
    if (t->variant == V_ACCUM && t->dtype != SL_F32) /* ddp/mixed_layers.c says why f32 */
        sl_result_param_str(res, "accum_sum", "f32, rounded once into 16 bits for the all-reduce");
    if (t->variant == V_PS) sl_result_param_num(res, "servers", (double)opt_servers);
}

/* What cannot be run is said once, up front, with the option that asks for it. */
static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    const long long batch = sl_train_opt.batch;
    if (opt_bucket_mb <= 0) sl_usage_error("--bucket-mb: expected a size in MiB > 0, got %g", opt_bucket_mb);
    /* ps stays f32: its servers own the weights, which in 16 bits would be an f32 master shard
     * per server and 16-bit copies on the workers, not the replica the other variants share */
    if ((ctx->opt.dtypes & ~(1u << SL_F32)) && (opt_variants & (1u << V_PS))) {
        const int f32 = (ctx->opt.dtypes >> SL_F32) & 1;
        if (opt_variants != ~0u && !f32)
            sl_usage_error("-d: ddp's ps variant trains in f32 only (sync, bucketed and accum train in "
                           "f16/bf16); drop ps from --variants, or add f32 to -d");
        sl_note(ctx, f32 ? "-d f16/bf16: sync, bucketed and accum train in 16 bits; ps runs in f32 only"
                         : "-d f16/bf16: sync, bucketed and accum train in 16 bits; ps trains in f32 only "
                           "and is not run (add f32 to -d)");
        if (!f32) opt_variants &= ~(1u << V_PS);
    }
    /* A variant that cannot run is a usage error when it was asked for: named in --variants,
     * or its own option given (which would otherwise be silently unused); a note when it came
     * only with the defaults. */
    const int all = opt_variants == ~0u;
    long long share = sl_train_opt.scaling == 1 ? batch / P : batch; /* the smallest rank's */
    if ((opt_variants & (1u << V_ACCUM)) && share >= 1 && share < opt_accum) {
        if (!all || sl_option_given(&ctx->opt, "accum"))
            sl_usage_error("--accum %lld: expected micro-batches in [1, %lld], the samples of a rank's "
                           "share of --batch %lld (%s scaling, %d rank%s)", opt_accum, share, batch,
                           sl_train_opt.scaling == 1 ? "strong" : "weak", P, P == 1 ? "" : "s");
        opt_variants &= ~(1u << V_ACCUM);
        sl_note(ctx, "skipping accum: a rank's share of --batch %lld is smaller than --accum %lld",
                batch, opt_accum);
    }
    if ((opt_variants & (1u << V_PS)) && P - opt_servers < 1) {
        const int servers_given = sl_option_given(&ctx->opt, "servers");
        if (servers_given && P > 1)
            sl_usage_error("--servers %lld: expected servers in [1, %d]: ps needs at least one worker "
                           "rank beside them (%d ranks)", opt_servers, P - 1, P);
        if (servers_given || !all)
            sl_usage_error("%s: ps needs at least %lld ranks (--servers %lld and one worker), %d given",
                           servers_given ? "--servers" : "--variants", opt_servers + 1, opt_servers, P);
        opt_variants &= ~(1u << V_PS);
        sl_note(ctx, "skipping ps: it needs more ranks than --servers %lld (one worker at least)", opt_servers);
    }
}

/* The precision, and the loss of the last step beside the serial f32 run's: what mixed
 * precision costs. */
static const sl_column columns[] = {
    SL_TRAIN_COLUMNS_RUN, SL_COL("dtype", "dtype", 5), SL_TRAIN_COLUMNS_STEP, SL_TRAIN_COLUMNS_BYTES,
    {"activ", "MB", "mem_activ", 8, 2, 1e-6}, SL_COL("buckets", "buckets", 7),
    {"loss", "", "final_loss", 10, 6, 0}, {"vs f32", "%", "loss_vs_f32", 8, 3, 100},
    SL_COL("skipped", "skipped_steps", 7),
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_technique ddp = {
    .program = {
        .name = "ddp",
        .summary = "data-parallel training: per-step, bucketed+overlapped, accumulated, parameter server",
        .uses = SL_USES_BACKEND | SL_USES_COLL | SL_USES_DTYPE,
        .colls = (1u << SL_NCOLLS) - 1,
        .default_coll = SL_COLL_MPI,
        .default_iters = 10,
        .default_warmup = 2,
        .dtypes = (1u << SL_F32) | (1u << SL_F16) | (1u << SL_BF16),
        .default_dtype = SL_F32,
        .extra = ddp_opts,
        .validate = validate,
    },
    .variants = variant_names,
    .nvariants = NVARIANTS,
    .variant_mask = &opt_variants,
    .p2p_variants = 1u << V_PS,
    .no_baseline_variants = 1u << V_PS,
    .sums_loss = 1,
    .mixed_variants = (1u << V_SYNC) | (1u << V_BUCKETED) | (1u << V_ACCUM),
    .tol_mixed_sgd_max = {[SL_F16] = SL_TRAIN_TOL_MIXED_SGD_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_SGD_BF16},
    .tol_mixed_adamw_l2 = {[SL_F16] = SL_TRAIN_TOL_MIXED_ADAMW_F16, [SL_BF16] = SL_TRAIN_TOL_MIXED_ADAMW_BF16},
    .data_ranks = data_ranks,
    .setup = setup,
    .step = step,
    .weights = weights,
    .free = release,
    .memory_model = memory_model,
    .bytes_model = bytes_model,
    .row = row,
    .columns = columns,
    .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv) { return sl_train_main(&ddp, argc, argv); }
