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
 * -d f16|bf16: mixed-precision data parallelism through the same step: the training layer
 * holds each replica's weights and gradients in the 16-bit type with f32 master weights and
 * optimizer state (sl_train.h), and every variant moves 16-bit gradients (ps: and weights) —
 * half the bytes of f32. Where the sum is done: MPI has no 16-bit floating type, so the suite's
 * collectives (and, for -C mpi, a user-defined MPI_Op on a 2-byte datatype) widen each pair of
 * operands to f32, add, and round the partial sum back into 16 bits at each hop; widening before
 * the all-reduce would double the bytes on the wire, which is what mixed-precision data
 * parallelism exists to save (PyTorch's fp16_compress_hook makes the same choice). After N ranks
 * a summed element carries at most about (N-1)·u of the partial sums' magnitude (u: 2^-11 for
 * f16, 2^-8 for bf16), the order of the rounding each rank's gradient already had; the check
 * against serial mixed-precision training bounds what that does to the weights
 * (SL_TRAIN_TOL_MIXED_*).
 */
#include <math.h>
#include <stdlib.h>

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
    sl_replica rep;         /* weights, gradients (t->dtype), f32 twins, optimizer state */
    void *ps_recv;          /* ps server: one worker's gradient shard */
    float *ps_view;         /* ps in 16 bits: the weights every rank holds, widened (the check) */
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
        r->nbuckets = make_buckets(t->m, opt_bucket_mb * 1048576.0, sl_train_esize(t), r->buckets);
    sl_replica_alloc(t, (local + r->micro - 1) / r->micro, &r->rep);
    if (is_server(t)) {
        size_t off, cnt;
        server_shard(t, t->rank - r->workers, &off, &cnt);
        r->ps_recv = sl_k_malloc(t->be, SL_MEM_COMM, cnt * sl_train_esize(t) + 1);
    }
    if (t->variant == V_PS) r->ps_view = sl_train_twin(t, SL_MEM_OTHER, t->m->nparams);
}

static void release(sl_train *t)
{
    replica *r = t->state;
    sl_replica_free(t, &r->rep);
    sl_k_free(t->be, r->ps_recv);
    sl_k_free(t->be, r->ps_view);
    free(r);
}

/* The steps --------------------------------------------------------------------------- */

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
            void *g = sl_train_at(t, r->rep.grads, bk->off);
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
    const size_t n = t->m->nparams;
    sl_replica_gradients(t, &r->rep, r->micro, t->variant == V_BUCKETED ? &bucket_hooks : NULL);
    double t0 = sl_now();
    if (t->variant == V_BUCKETED) {
        for (int b = 0; b < r->nbuckets; b++)
            if (r->buckets[b].req) bucket_poll(&r->buckets[b], 1);
        sl_train_span(t, SL_PHASE_EXPOSED, "wait for buckets", t0, sl_now());
        sl_train_record(t, SL_PHASE_COMM, buckets_span(r));
    } else {
        sl_train_coll_ok(sl_coll_allreduce(t->comm, r->rep.grads, r->rep.grads, n, t->dtype, SL_OP_SUM),
                         "sl_coll_allreduce");
        sl_train_blocking(t, "all-reduce (blocking)", t0);
    }
    /* after every bucket: the one unscale, overflow flag and loss-scale decision of the step */
    sl_replica_update(t, &r->rep, 0, n, r->rep.optim);
}

/* ps: workers compute and push gradient shards; each server sums its shard over the workers
 * in a fixed order (in t->dtype, rounded at each add as an all-reduce's hop is), steps its shard
 * of the master weights and sends it back to every worker. Every rank takes part in the step's
 * decision: the workers' loss scale follows the servers'. */
static void step_ps(sl_train *t)
{
    replica *r = t->state;
    sl_replica *rep = &r->rep;
    size_t off, cnt;
    if (!is_server(t)) {
        sl_replica_gradients(t, rep, 1, NULL);
        double c0 = sl_now();
        for (int s = 0; s < r->servers; s++) {
            server_shard(t, s, &off, &cnt);
            sl_train_coll_ok(sl_coll_send(t->comm, sl_train_at(t, rep->grads, off), cnt, t->dtype, r->workers + s, 1),
                             "push");
        }
        sl_train_blocking(t, "push", c0);
        const int applied = sl_train_decide(t);
        (void)applied; /* the servers send the weights either way: stepped, or as they were */
        c0 = sl_now();
        for (int s = 0; s < r->servers; s++) {
            server_shard(t, s, &off, &cnt);
            sl_train_coll_ok(sl_coll_recv(t->comm, sl_train_at(t, rep->params, off), cnt, t->dtype, r->workers + s, 2),
                             "pull");
        }
        sl_train_blocking(t, "pull", c0);
        return;
    }
    server_shard(t, t->rank - r->workers, &off, &cnt);
    void *g = sl_train_at(t, rep->grads, off);
    sl_k_memset0(t->be, g, cnt * sl_train_esize(t));
    double c0 = sl_now(), comm = 0;
    for (int w = 0; w < r->workers; w++) {
        double r0 = sl_now();
        sl_train_coll_ok(sl_coll_recv(t->comm, r->ps_recv, cnt, t->dtype, w, 1), "push (server)");
        double a0 = sl_now();
        comm += a0 - r0;
        sl_k_add(t->be, t->dtype, cnt, r->ps_recv, g);
        sl_k_sync(t->be);
        sl_train_record(t, SL_PHASE_COMPUTE, sl_now() - a0);
    }
    /* the server's optimizer state covers its shard only */
    sl_replica_update(t, rep, off, cnt, rep->optim);
    double s0 = sl_now();
    for (int w = 0; w < r->workers; w++)
        sl_train_coll_ok(sl_coll_send(t->comm, sl_train_at(t, rep->params, off), cnt, t->dtype, w, 2), "pull (server)");
    double s1 = sl_now();
    comm += s1 - s0;
    sl_train_record(t, SL_PHASE_COMM, comm);
    sl_train_record(t, SL_PHASE_EXPOSED, comm);
    sl_trace_event("serve", "comm", 1, c0, s1);
}

/* The f32 weights: every worker's whole model, a server's shard. The master copy in 16 bits;
 * but a ps worker holds only the 16-bit weights the servers send (its master is never stepped),
 * so ps gives the 16-bit weights, widened, on every rank: identical bits on workers and servers. */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    replica *r = t->state;
    *first = 0;
    *count = t->m->nparams;
    if (is_server(t)) server_shard(t, t->rank - r->workers, first, count);
    if (t->variant == V_PS)
        return sl_train_widen(t, sl_train_at(t, r->rep.params, *first), sl_f32_at(r->ps_view, *first), *count);
    return (r->rep.master ? r->rep.master : (const float *)r->rep.params) + *first;
}

/* Bytes the busiest rank sends per step by the textbook volume: ring all-reduce sends
 * 2(N-1)/N of the gradient; a parameter-server worker pushes the whole gradient, a server sends
 * its shard of the weights (the first is the largest) back to every worker. Elements of
 * t->dtype: 2 bytes with -d f16|bf16. */
static double bytes_model(const sl_train *t)
{
    double psi = (double)t->m->nparams * (double)sl_dtype_size(t->dtype);
    if (t->variant != V_PS) return t->size > 1 ? 2.0 * (t->size - 1) / t->size * psi : 0.0;
    size_t off, cnt;
    server_shard(t, 0, &off, &cnt);
    double server = (double)t->data_ranks * (double)cnt * (double)sl_train_esize(t);
    return server > psi ? server : psi;
}

/* The step as the performance model reads it (perf_model.h): the gradient zeroed, each
 * micro-batch's forward and backward, the buckets' all-reduces started after the backward of
 * their lowest layer (the last micro-batch's) and waited for after backward, or one all-reduce
 * of the whole gradient; then the optimizer on every element.
 * ps, from the last worker's side, which waits longest: its forward and backward; its push,
 * received by a server after the other workers' (each push one exchange of the shard, each
 * added into the sum); the server's optimizer on its shard; the weights sent back to every
 * worker in turn. With several servers each does this for its shard at once: the largest
 * shard's. */
static void schedule(const sl_train *t, sl_pm_sched *s)
{
    const replica *r = t->state;
    const size_t n = t->m->nparams;
    const int L = t->m->nlayers, rows = t->hi - t->lo;
    if (t->variant == V_PS) {
        size_t off, cnt;
        server_shard(t, 0, &off, &cnt);
        size_t lo, hi; /* the last worker's samples */
        sl_share((size_t)t->global_batch, r->workers, r->workers - 1, &lo, &hi);
        sl_pm_bytes(s, (double)n * sl_train_esize(t));
        sl_pm_forward_backward(t, s, (int)(hi - lo));
        for (int w = 0; w < r->workers; w++) {
            sl_pm_comm(s, SL_PM_P2P, (double)cnt);
            sl_pm_bytes(s, 3.0 * (double)cnt * sl_train_esize(t)); /* sl_k_add: two read, one written */
        }
        sl_pm_optimizer(t, s, cnt);
        for (int w = 0; w < r->workers; w++) sl_pm_comm(s, SL_PM_P2P, (double)cnt);
        return;
    }
    sl_pm_bytes(s, (double)n * sl_train_esize(t)); /* the gradient zeroed */
    int ids[MAX_BUCKETS];
    for (int k = 0; k < r->micro; k++) {
        size_t lo, hi;
        sl_share((size_t)rows, r->micro, k, &lo, &hi);
        const int mb = (int)(hi - lo), last = k == r->micro - 1;
        sl_pm_load(t, s, mb);
        for (int l = 0; l < L; l++) sl_pm_layer_forward(t, s, l, mb);
        sl_pm_loss(t, s, mb);
        for (int l = L - 1; l >= 0; l--) {
            sl_pm_layer_backward(t, s, l, mb);
            for (int b = 0; last && t->variant == V_BUCKETED && b < r->nbuckets; b++)
                if (r->buckets[b].l0 == l) ids[b] = sl_pm_start(s, SL_PM_IALLREDUCE, (double)r->buckets[b].count);
        }
    }
    if (t->variant == V_BUCKETED)
        for (int b = 0; b < r->nbuckets; b++) sl_pm_wait(s, ids[b]);
    else
        sl_pm_comm(s, SL_PM_ALLREDUCE, (double)n);
    sl_pm_optimizer(t, s, n);
}

/* A replica holds the whole model, its gradients, its optimizer state and the activations of
 * one (micro-)batch. */
static void memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    sl_replica_memory_model(t, ((const replica *)t->state)->rep.acts.rows, bytes);
}

static void row(sl_train *t, sl_result *res)
{
    replica *r = t->state;
    if (t->dtype != SL_F32) /* as the f32 sum is not: say where the 16-bit one rounds */
        sl_result_param_str(res, "grad_allreduce", "16-bit, summed pairwise in f32 and rounded at each hop");
    if (t->variant == V_BUCKETED) {
        sl_result_param_num(res, "bucket_mb", opt_bucket_mb);
        sl_result_param_num(res, "buckets", r->nbuckets);
        sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(t->comm));
    }
    if (t->variant == V_ACCUM) sl_result_param_num(res, "accum", (double)opt_accum);
    if (t->variant == V_ACCUM && t->dtype != SL_F32) /* train_replica.c says why f32 */
        sl_result_param_str(res, "accum_sum", "f32, rounded once into 16 bits for the all-reduce");
    if (t->variant == V_PS) sl_result_param_num(res, "servers", (double)opt_servers);
}

/* What cannot be run is said once, up front, with the option that asks for it. */
static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    const long long batch = sl_train_opt.batch;
    if (opt_bucket_mb <= 0) sl_usage_error("--bucket-mb: expected a size in MiB > 0, got %g", opt_bucket_mb);
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
    SL_TRAIN_COLUMNS_RUN, SL_COL("dtype", "dtype", 5), SL_TRAIN_COLUMNS_STEP, SL_TRAIN_COLUMNS_PRED, SL_TRAIN_COLUMNS_BYTES,
    {"activ", "MB", "mem_activ", 8, 2, 1e-6}, SL_COL("buckets", "buckets", 7),
    {"loss", "", "final_loss", 10, 6, 0}, {"vs f32", "%", "loss_vs_f32", 8, 3, 100},
    SL_COL("skipped", "skipped_steps", 7),
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_technique ddp = {
    .trains_gpt = 1,
    .program = {
        .name = "ddp",
        .summary = "data-parallel training: per-step, bucketed+overlapped, accumulated, parameter server",
        SL_TRAIN_PROGRAM_USES,
        .default_coll = SL_COLL_MPI,
        .default_iters = 10,
        .default_warmup = 2,
        .extra = ddp_opts,
        .validate = validate,
    },
    .variants = variant_names,
    .nvariants = NVARIANTS,
    .variant_mask = &opt_variants,
    .p2p_variants = 1u << V_PS,
    .no_baseline_variants = 1u << V_PS,
    .sums_loss = 1,
    .mixed_variants = (1u << NVARIANTS) - 1,
    .data_ranks = data_ranks,
    .setup = setup,
    .step = step,
    .weights = weights,
    .free = release,
    .memory_model = memory_model,
    .bytes_model = bytes_model,
    .schedule = schedule,
    .row = row,
    .columns = columns,
    .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

int main(int argc, char **argv) { return sl_train_main(&ddp, argc, argv); }
