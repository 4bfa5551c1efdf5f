/* ddp.c — data-parallel training (DDP) of the shared MLP.
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
 * exactly, even when B does not divide evenly across ranks.
 *
 * Check: after the run, every rank's weights must equal those of one process that trained on
 * the whole global batch for the same steps (kernels/train_ref.c), to a relative tolerance
 * (see CHECK_TOLERANCE_SGD), and all replicas must be bit-identical to each other.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "mlp.h"
#include "scalelab.h"
#include "sl_coll.h"
#include "train_ref.h"

/* Why 1e-4 (SGD, largest element difference relative to the largest weight): replicas and the
 * reference differ only in the order of floating-point additions (the batch is summed in
 * pieces, then across ranks). In f32 (eps 6e-8) that perturbs each step by ~1e-7 relative,
 * which a dozen or a hundred SGD steps keep well below 1e-5 (the measured error is printed in
 * every row). Real defects — a bucket never reduced, a stale gradient, averaging instead of
 * summing, a slice off by one sample — give errors of 1e-2 and more.
 * AdamW is checked in the L2 norm, to 1e-3: its update m/sqrt(v) has the same size whatever
 * the gradient's, so a weight whose gradient is at rounding level can move by +lr in one run
 * and -lr in the other; single weights then differ by O(lr), while the norm of the difference
 * stays near 1e-5 of the weights' norm unless the gradients are wrong wholesale. (Adam is
 * blind to a uniform scale of the gradient, so SGD, the default, is the stricter check.) */
#define CHECK_TOLERANCE_SGD 1e-4
#define CHECK_TOLERANCE_ADAMW_L2 1e-3

enum { V_SYNC, V_BUCKETED, V_ACCUM, V_PS, NVARIANTS };
static const char *const variant_names[NVARIANTS] = {"sync", "bucketed", "accum", "ps"};

static long long opt_layers = 6, opt_width = 2048, opt_in = 256, opt_out = 64;
static long long opt_batch = 32, opt_accum = 4, opt_servers = 1, opt_seed = 1234;
static long long opt_baseline = 1;
static double opt_bucket_mb = 25.0, opt_lr = 0.01;
static int opt_scaling = 0; /* 0 weak, 1 strong */
static int opt_optim = 0;   /* 0 sgd, 1 adamw */
static unsigned opt_variants = ~0u;

static const sl_opt extra_opts[] = {
    {"layers", 'L', SL_OPT_INT, &opt_layers, 1, SL_MLP_MAX_LAYERS, NULL, 0, "Linear layers (default 6)"},
    {"width", 0, SL_OPT_INT, &opt_width, 1, 1 << 16, NULL, 0, "hidden width (default 2048)"},
    {"inputs", 0, SL_OPT_INT, &opt_in, 1, 1 << 16, NULL, 0, "input features (default 256)"},
    {"outputs", 0, SL_OPT_INT, &opt_out, 1, 1 << 16, NULL, 0, "outputs (default 64)"},
    {"batch", 0, SL_OPT_INT, &opt_batch, 1, 1 << 20, NULL, 0,
     "samples per rank (weak scaling) or in all (strong) per step (default 32)"},
    {"scaling", 0, SL_OPT_CHOICE, &opt_scaling, 0, 0, "weak|strong", 0,
     "keep the per-rank (weak, default) or the global (strong) batch fixed"},
    {"bucket-mb", 0, SL_OPT_DOUBLE, &opt_bucket_mb, 0, 0, NULL, 0, "bucket size in MiB (default 25)"},
    {"accum", 0, SL_OPT_INT, &opt_accum, 1, 1 << 16, NULL, 0, "micro-batches per step for accum (default 4)"},
    {"servers", 0, SL_OPT_INT, &opt_servers, 1, 1 << 16, NULL, 0, "parameter-server ranks for ps (default 1)"},
    {"optim", 0, SL_OPT_CHOICE, &opt_optim, 0, 0, "sgd|adamw", 0, "optimizer (default sgd, momentum 0.9)"},
    {"lr", 0, SL_OPT_DOUBLE, &opt_lr, 0, 0, NULL, 0, "learning rate (default 0.01)"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, "sync|bucketed|accum|ps", 0,
     "variants to run (default all)"},
    {"baseline", 0, SL_OPT_INT, &opt_baseline, 0, 1, NULL, 0,
     "measure the one-rank run for scaling efficiency (default 1)"},
    {"seed", 0, SL_OPT_INT, &opt_seed, 0, 1LL << 62, NULL, 0, "initialisation and data seed"},
    {0},
};

static void validate(sl_ctx *ctx);
static const sl_program program = {
    .name = "ddp",
    .summary = "data-parallel training: per-step, bucketed+overlapped, accumulated, parameter server",
    .uses = SL_USES_BACKEND | SL_USES_COLL,
    .colls = (1u << SL_NCOLLS) - 1,
    .default_coll = SL_COLL_MPI,
    .default_iters = 10,
    .default_warmup = 2,
    .extra = extra_opts,
    .validate = validate,
};

/* One rank's replica and its training run --------------------------------------------- */

#define MAX_BUCKETS 256

typedef struct bucket {
    int l0, l1;          /* layers [l0, l1): a contiguous slice of the flat gradient */
    size_t off, count;   /* elements */
    sl_coll_req *req;
    double t_start, t_done;
} bucket;

typedef struct step_times { /* seconds, this rank, one step */
    double data, compute, comm, exposed;
} step_times;

typedef struct ddp_run {
    sl_ctx *ctx;
    int variant;
    sl_backend be;
    const sl_mlp *m;
    sl_task *task;
    sl_optim optim;
    sl_comm *comm;          /* the ranks taking part (world, or one rank for the baseline) */
    int rank, size;
    int global_batch;       /* B */
    int lo, hi;             /* this rank's samples within a step: [lo, hi) of B */
    int micro;              /* micro-batches per step (accum), else 1 */
    int servers, workers;   /* ps */
    float *params, *grads, *state, *target;
    float *ps_recv;         /* ps server: one worker's gradient shard */
    sl_mlp_acts acts;
    int nbuckets;
    bucket buckets[MAX_BUCKETS];
    int step, nsteps;
    step_times *times;      /* [nsteps] */
} ddp_run;

/* Contiguous share [lo, hi) of n items for part p of parts: the first n % parts get one more. */
static void share(int n, int parts, int p, int *lo, int *hi)
{
    int base = n / parts, extra = n % parts;
    *lo = p * base + (p < extra ? p : extra);
    *hi = *lo + base + (p < extra);
}

/* Shard of the flat parameter vector owned by server s. */
static void shard(size_t n, int servers, int s, size_t *off, size_t *count)
{
    size_t base = n / (size_t)servers, extra = n % (size_t)servers, us = (size_t)s;
    *off = us * base + (us < extra ? us : extra);
    *count = base + (us < extra);
}

/* Buckets in reverse layer order: walk from the last layer down, closing a bucket once it
 * holds at least bucket_bytes. A layer is never split, so one larger than a bucket is a bucket
 * of its own (as in PyTorch DDP). */
static int make_buckets(const sl_mlp *m, double bucket_bytes, bucket *b)
{
    int n = 0, l1 = m->nlayers;
    size_t bytes = 0;
    for (int l = m->nlayers - 1; l >= 0; l--) {
        bytes += sl_mlp_layer_size(m, l) * sizeof(float);
        if ((double)bytes >= bucket_bytes || l == 0) {
            b[n].l0 = l;
            b[n].l1 = l1;
            b[n].off = m->w_off[l];
            b[n].count = sl_mlp_range_size(m, l, l1);
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

static void run_setup(ddp_run *r, sl_ctx *ctx, int variant, sl_comm *comm, const sl_mlp *m,
                      sl_task *task, const sl_optim *o, int global_batch, int nsteps)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->variant = variant;
    r->be = m->be;
    r->m = m;
    r->task = task;
    r->optim = *o;
    r->comm = comm;
    r->rank = sl_comm_rank(comm);
    r->size = sl_comm_size(comm);
    r->global_batch = global_batch;
    r->micro = variant == V_ACCUM ? (int)opt_accum : 1;
    r->nsteps = nsteps;
    r->times = calloc((size_t)nsteps, sizeof *r->times);
    if (!r->times) SL_FATAL("out of memory for %d step timings", nsteps);

    int data_ranks = r->size, data_rank = r->rank;
    if (variant == V_PS) {
        r->servers = (int)opt_servers;
        r->workers = r->size - r->servers;
        data_ranks = r->workers;
    }
    if (variant != V_PS || data_rank < r->workers) {
        share(global_batch, data_ranks, data_rank, &r->lo, &r->hi);
    }

    size_t n = m->nparams;
    r->params = sl_k_malloc(r->be, SL_MEM_PARAMS, n * sizeof(float));
    r->grads = sl_k_malloc(r->be, SL_MEM_GRADS, n * sizeof(float));
    r->state = sl_k_malloc(r->be, SL_MEM_OPTIM, (size_t)sl_optim_state_per_param(o) * n * sizeof(float) + 1);
    sl_mlp_init_params(m, (uint64_t)opt_seed, 0, n, r->params);
    int local = r->hi - r->lo, mb = (local + r->micro - 1) / r->micro;
    if (mb < 1) mb = 1;
    r->target = sl_k_malloc(r->be, SL_MEM_DATA, (size_t)mb * m->dims[m->nlayers] * sizeof(float));
    sl_mlp_acts_alloc(m, mb, &r->acts);
    if (variant == V_PS && r->rank >= r->workers) {
        size_t off, cnt;
        shard(n, r->servers, r->rank - r->workers, &off, &cnt);
        r->ps_recv = sl_k_malloc(r->be, SL_MEM_COMM, cnt * sizeof(float) + 1);
    }
    if (variant == V_BUCKETED) r->nbuckets = make_buckets(m, opt_bucket_mb * 1048576.0, r->buckets);
}

static void run_free(ddp_run *r)
{
    sl_mlp_acts_free(r->m, &r->acts);
    sl_k_free(r->be, r->params);
    sl_k_free(r->be, r->grads);
    sl_k_free(r->be, r->state);
    sl_k_free(r->be, r->target);
    sl_k_free(r->be, r->ps_recv);
    free(r->times);
}

static void coll_check(int rc, const char *what)
{
    if (rc != SL_COLL_OK) SL_FATAL("%s failed: %s", what, sl_coll_strerror(rc));
}

/* The steps --------------------------------------------------------------------------- */

/* The buffer that receives dL/d(output): the gradient buffer the last layer does NOT write its
 * dL/dx into (layer l writes dbuf[l & 1]), so backward never reads and writes one buffer. */
static float *dout_buffer(ddp_run *r) { return r->acts.dbuf[r->m->nlayers & 1]; }

/* Forward and loss of micro-batch [first, first + count) of this step; leaves dL/dout in
 * dout_buffer(). Returns seconds spent generating the data. */
static double forward_micro(ddp_run *r, int first, int count)
{
    const sl_mlp *m = r->m;
    const int out = m->dims[m->nlayers];
    double t0 = sl_now();
    r->acts.batch = count;
    sl_task_batch(r->task, (uint64_t)r->step * (uint64_t)r->global_batch + (uint64_t)first, count,
                  r->acts.x[0], r->target);
    double t1 = sl_now();
    sl_mlp_forward(m, &r->acts, r->params);
    sl_k_mse(r->be, (size_t)count * out, r->acts.x[m->nlayers], r->target, dout_buffer(r),
             1.0f / ((float)r->global_batch * (float)out));
    sl_trace_event("forward", "compute", 0, t1, sl_now());
    return t1 - t0;
}

/* Backward one layer at a time; after each layer, `after_layer` may start or progress
 * communication (the DDP hook). */
typedef void (*layer_hook)(ddp_run *r, int layer, step_times *t);
static void backward_layers(ddp_run *r, layer_hook after_layer, step_times *t)
{
    const sl_mlp *m = r->m;
    float *dy = dout_buffer(r);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        float *dx = l > 0 ? r->acts.dbuf[l & 1] : NULL;
        double t0 = sl_now();
        sl_mlp_layer_backward(m, l, r->acts.batch, r->params + m->w_off[l], r->acts.x[l],
                              r->acts.z[l], dy, r->grads + m->w_off[l], dx);
        sl_k_sync(r->be); /* the layer's gradients are final before communication reads them */
        double t1 = sl_now();
        t->compute += t1 - t0;
        sl_trace_event("backward", "compute", 0, t0, t1);
        if (after_layer) after_layer(r, l, t);
        dy = dx;
    }
}

/* Progresses bucket bk's all-reduce; records when it is seen complete. */
static void bucket_poll(bucket *bk)
{
    int done = 0;
    coll_check(sl_coll_test(bk->req, &done), "sl_coll_test");
    if (!done) return;
    coll_check(sl_coll_wait(bk->req), "sl_coll_wait");
    bk->req = NULL;
    bk->t_done = sl_now();
    sl_trace_event("allreduce bucket", "comm", 1, bk->t_start, bk->t_done);
}

/* bucketed: start a bucket's all-reduce once its lowest layer is done; progress the others. */
static void bucket_hook(ddp_run *r, int layer, step_times *t)
{
    double t0 = sl_now();
    for (int b = 0; b < r->nbuckets; b++) {
        bucket *bk = &r->buckets[b];
        if (bk->req) bucket_poll(bk);
        if (bk->l0 == layer) {
            bk->t_start = sl_now();
            bk->t_done = 0;
            float *g = r->grads + bk->off;
            coll_check(sl_coll_iallreduce(r->comm, g, g, bk->count, SL_F32, SL_OP_SUM, &bk->req),
                       "sl_coll_iallreduce");
            /* An implementation that cannot overlap finishes inside the start: record its end
             * now, not at the next layer, so no overlap is credited to it. */
            bucket_poll(bk);
        }
    }
    t->exposed += sl_now() - t0;
}

/* Time during which at least one bucket was in flight (the union of their intervals; buckets
 * start in order, so a running maximum suffices). */
static double buckets_span(const ddp_run *r)
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

static void optimizer_step(ddp_run *r, size_t off, size_t count, float *state, step_times *t)
{
    double t0 = sl_now();
    sl_optim so = sl_optim_for_step(&r->optim, r->step);
    sl_optim_step(r->be, &so, count, r->params + off, r->grads + off, state);
    sl_k_sync(r->be);
    t->compute += sl_now() - t0;
}

static void step_allreduce_variants(ddp_run *r, step_times *t)
{
    const sl_mlp *m = r->m;
    sl_k_memset0(r->be, r->grads, m->nparams * sizeof(float));
    int local = r->hi - r->lo;
    for (int k = 0; k < r->micro; k++) {
        int a, b;
        share(local, r->micro, k, &a, &b);
        if (b == a) continue;
        double t0 = sl_now();
        t->data += forward_micro(r, r->lo + a, b - a);
        t->compute += sl_now() - t0;
        int last = k == r->micro - 1;
        backward_layers(r, r->variant == V_BUCKETED && last ? bucket_hook : NULL, t);
    }
    t->compute -= t->data; /* the forward timing above included generating the batch */
    double t0 = sl_now();
    if (r->variant == V_BUCKETED) {
        for (int b = 0; b < r->nbuckets; b++) {
            bucket *bk = &r->buckets[b];
            if (!bk->req) continue;
            coll_check(sl_coll_wait(bk->req), "sl_coll_wait");
            bk->req = NULL;
            bk->t_done = sl_now();
            sl_trace_event("allreduce bucket", "comm", 1, bk->t_start, bk->t_done);
        }
        t->exposed += sl_now() - t0;
        t->comm = buckets_span(r);
    } else {
        coll_check(sl_coll_allreduce(r->comm, r->grads, r->grads, m->nparams, SL_F32, SL_OP_SUM),
                   "sl_coll_allreduce");
        double t1 = sl_now();
        t->comm = t->exposed = t1 - t0;
        sl_trace_event("allreduce", "comm", 1, t0, t1);
    }
    optimizer_step(r, 0, m->nparams, r->state, t);
}

/* ps: workers compute and push gradient shards; each server sums its shard over the workers
 * in a fixed order, steps its shard of the master weights and sends it back to every worker. */
static void step_ps(ddp_run *r, step_times *t)
{
    const sl_mlp *m = r->m;
    const size_t n = m->nparams;
    if (r->rank < r->workers) {
        sl_k_memset0(r->be, r->grads, n * sizeof(float));
        double t0 = sl_now();
        t->data += forward_micro(r, r->lo, r->hi - r->lo);
        t->compute += sl_now() - t0 - t->data;
        backward_layers(r, NULL, t);
        double c0 = sl_now();
        for (int s = 0; s < r->servers; s++) {
            size_t off, cnt;
            shard(n, r->servers, s, &off, &cnt);
            coll_check(sl_coll_send(r->comm, r->grads + off, cnt, SL_F32, r->workers + s, 1), "push");
        }
        for (int s = 0; s < r->servers; s++) {
            size_t off, cnt;
            shard(n, r->servers, s, &off, &cnt);
            coll_check(sl_coll_recv(r->comm, r->params + off, cnt, SL_F32, r->workers + s, 2), "pull");
        }
        double c1 = sl_now();
        t->comm = t->exposed = c1 - c0;
        sl_trace_event("push+pull", "comm", 1, c0, c1);
    } else {
        size_t off, cnt;
        shard(n, r->servers, r->rank - r->workers, &off, &cnt);
        sl_k_memset0(r->be, r->grads + off, cnt * sizeof(float));
        double c0 = sl_now();
        for (int w = 0; w < r->workers; w++) {
            double r0 = sl_now();
            coll_check(sl_coll_recv(r->comm, r->ps_recv, cnt, SL_F32, w, 1), "push (server)");
            double a0 = sl_now();
            t->comm += a0 - r0;
            sl_k_add(r->be, SL_F32, cnt, r->ps_recv, r->grads + off);
            sl_k_sync(r->be);
            t->compute += sl_now() - a0;
        }
        /* the server's optimizer state covers its shard only */
        optimizer_step(r, off, cnt, r->state, t);
        double s0 = sl_now();
        for (int w = 0; w < r->workers; w++)
            coll_check(sl_coll_send(r->comm, r->params + off, cnt, SL_F32, w, 2), "pull (server)");
        double s1 = sl_now();
        t->comm += s1 - s0;
        t->exposed = t->comm;
        sl_trace_event("serve", "comm", 1, c0, s1);
    }
}

static void ddp_step(void *arg)
{
    ddp_run *r = arg;
    step_times t = {0};
    if (r->variant == V_PS)
        step_ps(r, &t);
    else
        step_allreduce_variants(r, &t);
    if (r->step < r->nsteps) r->times[r->step] = t;
    r->step++;
}

/* Results ------------------------------------------------------------------------------ */

/* Median over the timed steps of each component's slowest rank. */
static step_times median_times(ddp_run *r, int timed, MPI_Comm comm)
{
    int first = r->nsteps - timed;
    double *loc = malloc(4 * (size_t)timed * sizeof(double)), *mx = malloc(4 * (size_t)timed * sizeof(double));
    if (!loc || !mx) SL_FATAL("out of memory");
    for (int i = 0; i < timed; i++) {
        loc[4 * i + 0] = r->times[first + i].data;
        loc[4 * i + 1] = r->times[first + i].compute;
        loc[4 * i + 2] = r->times[first + i].comm;
        loc[4 * i + 3] = r->times[first + i].exposed;
    }
    sl_stats_slowest_rank(loc, mx, 4 * timed, comm);
    step_times med;
    double col[timed];
    sl_stats s;
    double *out[4] = {&med.data, &med.compute, &med.comm, &med.exposed};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < timed; i++) col[i] = mx[4 * i + k];
        sl_stats_compute(col, timed, &s);
        *out[k] = s.median;
    }
    free(loc);
    free(mx);
    return med;
}

/* Bytes a rank sends per step by the textbook volume: ring all-reduce moves 2(N-1)/N of the
 * gradient; a parameter-server worker pushes and pulls the whole model. */
static double model_bytes(int variant, int nranks, size_t nparams, int workers)
{
    double psi = (double)nparams * sizeof(float);
    if (variant == V_PS) return 2.0 * psi * (workers > 0 ? 1 : 0);
    return nranks > 1 ? 2.0 * (nranks - 1) / nranks * psi : 0.0;
}

/* One-rank run of the same variant (rank 0 alone, the others wait) for scaling efficiency:
 * weak scaling keeps the per-rank batch, strong the global batch. */
static double one_rank_step_time(sl_ctx *ctx, int variant, const sl_mlp *m, sl_task *task,
                                 const sl_optim *o, int batch)
{
    double median = 0;
    int tracing = sl_trace_enabled();
    sl_trace_enable(0); /* the one-rank run is not part of the timeline */
    if (ctx->rank == 0) {
        sl_comm *self;
        coll_check(sl_comm_create(&self, MPI_COMM_SELF, SL_COLL_MPI,
                                m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST),
                   "sl_comm_create (one rank)");
        ddp_run r;
        int steps = (int)ctx->opt.warmup + (int)ctx->opt.iters;
        run_setup(&r, ctx, variant, self, m, task, o, batch, steps);
        double t[steps];
        for (int s = 0; s < steps; s++) {
            double t0 = sl_now();
            ddp_step(&r);
            t[s] = sl_now() - t0;
        }
        sl_stats st;
        sl_stats_compute(t + ctx->opt.warmup, (int)ctx->opt.iters, &st);
        median = st.median;
        run_free(&r);
        sl_comm_destroy(self);
    }
    sl_trace_enable(tracing);
    /* The other ranks wait without polling (a busy MPI_Bcast would take the cores rank 0 is
     * being measured on). */
    MPI_Request req;
    SL_CHECK_MPI(MPI_Ibcast(&median, 1, MPI_DOUBLE, 0, ctx->comm, &req));
    for (int done = 0; !done;) {
        SL_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (!done) nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return median;
}

/* Reference weights for a global batch, computed once per batch on every rank's behalf by
 * rank 0 and kept there. */
typedef struct reference {
    int batch;
    float *params; /* rank 0 only */
} reference;

static const float *reference_for(sl_ctx *ctx, reference *refs, int *nrefs, const sl_mlp *m,
                                  sl_task *task, const sl_optim *o, int batch, int steps)
{
    for (int i = 0; i < *nrefs; i++)
        if (refs[i].batch == batch) return refs[i].params;
    reference *ref = &refs[(*nrefs)++];
    ref->batch = batch;
    ref->params = NULL;
    if (ctx->rank == 0) {
        ref->params = sl_k_malloc(m->be, SL_MEM_OTHER, m->nparams * sizeof(float));
        sl_train_serial(m, task, o, batch, steps, (uint64_t)opt_seed, ref->params, NULL);
    }
    return ref->params;
}

static const sl_column columns[] = {
    {"variant", "", "variant", 9, 0, 0},
    {"coll", "", "collective", 7, 0, 0},
    {"batch", "", "global_batch", 7, 0, 0},
    {"step", "ms", "time.median", 10, 2, 1e3},
    {"compute", "ms", "compute", 9, 2, 1e3},
    {"comm", "ms", "comm", 9, 2, 1e3},
    {"exposed", "ms", "exposed_comm", 9, 2, 1e3},
    {"overlap", "%", "overlap", 8, 1, 100},
    {"samples/s", "", "samples_per_s", 11, 1, 0},
    {"eff", "%", "scaling_eff", 7, 1, 100},
    {"model", "MB/step", "bytes_model", 8, 2, 1e-6},
    {"sent", "MB/step", "bytes_sent", 8, 2, 1e-6},
    {"activ", "MB", "mem_activ", 8, 2, 1e-6},
    {"error", "rel", "weight_rel_err", 10, 2, 0},
    {"check", "", "check", 7, 0, 0},
};

static void run_variant(sl_ctx *ctx, int variant, sl_coll impl, const sl_mlp *m, sl_task *task,
                        const sl_optim *o, reference *refs, int *nrefs, double *baselines)
{
    const int P = ctx->nranks;
    const int workers = variant == V_PS ? P - (int)opt_servers : P;
    const int B = opt_scaling == 0 ? (int)opt_batch * workers : (int)opt_batch;
    const int steps = (int)ctx->opt.warmup + (int)ctx->opt.iters;
    sl_mem_space space = m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;

    sl_comm *comm;
    coll_check(sl_comm_create(&comm, ctx->comm, impl, space), "sl_comm_create");
    /* what one replica holds, by category, as counted by the allocator */
    static const sl_mem_cat held_cats[] = {SL_MEM_PARAMS, SL_MEM_GRADS, SL_MEM_OPTIM, SL_MEM_ACTIV};
    static const char *const held_names[] = {"mem_params", "mem_grads", "mem_optim", "mem_activ"};
    double held[4];
    for (int k = 0; k < 4; k++) held[k] = -(double)sl_mem_current(space, held_cats[k]);
    ddp_run r;
    run_setup(&r, ctx, variant, comm, m, task, o, B, steps);
    for (int k = 0; k < 4; k++) held[k] += (double)sl_mem_current(space, held_cats[k]);

    sl_stats st;
    unsigned long long sent0 = sl_comm_bytes_sent(comm);
    sl_time_loop(ctx, ddp_step, &r, &st);
    /* Bytes sent per step, measured where the suite's own transport carries them (the MPI
     * library's collectives are opaque: n/a); the busiest rank's figure. */
    double sent = (double)(sl_comm_bytes_sent(comm) - sent0) / steps, sent_max = 0;
    SL_CHECK_MPI(MPI_Allreduce(&sent, &sent_max, 1, MPI_DOUBLE, MPI_MAX, ctx->comm));
    int opaque = variant != V_PS && (impl == SL_COLL_MPI || impl == SL_COLL_NCCL);
    step_times med = median_times(&r, (int)ctx->opt.iters, ctx->comm);

    /* Check, outside the timed region: against the serial reference, and replicas equal. */
    sl_weight_diff d = {0};
    int src = 0; /* a rank holding the full weights: rank 0 (a worker also under ps) */
    if (ctx->opt.check) {
        const float *ref = reference_for(ctx, refs, nrefs, m, task, o, B, steps);
        if (ctx->rank == src) d = sl_weights_compare(m->be, m->nparams, r.params, ref);
    }
    float *bcast = sl_k_host_alloc(SL_BACKEND_CPU, SL_MEM_OTHER, m->nparams * sizeof(float));
    float *mine = sl_k_host_alloc(SL_BACKEND_CPU, SL_MEM_OTHER, m->nparams * sizeof(float));
    sl_k_memcpy(m->be, mine, r.params, m->nparams * sizeof(float), SL_K_D2H);
    if (ctx->rank == src) memcpy(bcast, mine, m->nparams * sizeof(float));
    SL_CHECK_MPI(MPI_Bcast(bcast, (int)m->nparams, MPI_FLOAT, src, ctx->comm));
    /* every rank's full replica (ps: every worker; a server checks its own shard) */
    size_t lo = 0, hi = m->nparams;
    if (variant == V_PS && ctx->rank >= r.workers) {
        size_t off, cnt;
        shard(m->nparams, r.servers, ctx->rank - r.workers, &off, &cnt);
        lo = off;
        hi = off + cnt;
    }
    long long mismatched = 0, total_mismatched = 0;
    for (size_t i = lo; i < hi && ctx->opt.check; i++)
        mismatched += memcmp(&mine[i], &bcast[i], sizeof(float)) != 0;
    SL_CHECK_MPI(MPI_Allreduce(&mismatched, &total_mismatched, 1, MPI_LONG_LONG, MPI_SUM, ctx->comm));
    SL_CHECK_MPI(MPI_Bcast(&d, (int)sizeof d, MPI_BYTE, src, ctx->comm));
    sl_k_host_free(SL_BACKEND_CPU, bcast);
    sl_k_host_free(SL_BACKEND_CPU, mine);

    double t1 = NAN;
    if (P == 1) {
        t1 = st.median; /* this run is the one-rank run */
    } else if (opt_baseline && variant != V_PS) {
        if (baselines[variant] == 0) { /* once per variant: on one rank the collective is moot */
            int b1 = opt_scaling == 0 ? (int)opt_batch : B;
            baselines[variant] = one_rank_step_time(ctx, variant, m, task, o, b1);
        }
        t1 = baselines[variant];
    }
    double eff = NAN;
    if (!isnan(t1)) eff = opt_scaling == 0 ? t1 / st.median : t1 / (P * st.median);

    sl_result res;
    sl_result_init(ctx, &res, variant_names[variant]);
    res.backend = sl_backend_name(m->be);
    res.collective = variant == V_PS ? "p2p" : sl_coll_name(impl);
    res.dtype = "f32";
    sl_result_param_num(&res, "global_batch", B);
    sl_result_param_num(&res, "rank_batch", r.hi - r.lo);
    sl_result_param_str(&res, "scaling", opt_scaling ? "strong" : "weak");
    sl_result_param_num(&res, "layers", (double)opt_layers);
    sl_result_param_num(&res, "width", (double)opt_width);
    sl_result_param_num(&res, "params", (double)m->nparams);
    if (variant == V_BUCKETED) {
        sl_result_param_num(&res, "bucket_mb", opt_bucket_mb);
        sl_result_param_num(&res, "buckets", r.nbuckets);
        sl_result_param_num(&res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(comm));
    }
    if (variant == V_ACCUM) sl_result_param_num(&res, "accum", (double)opt_accum);
    if (variant == V_PS) sl_result_param_num(&res, "servers", (double)opt_servers);
    sl_result_set_time(&res, &st);
    sl_result_metric(&res, "samples_per_s", B / st.median, "samples/s");
    sl_result_metric(&res, "compute", med.compute, "s");
    sl_result_metric(&res, "data", med.data, "s");
    sl_result_metric(&res, "comm", med.comm, "s");
    sl_result_metric(&res, "exposed_comm", med.exposed, "s");
    double overlap = med.comm > 0 ? 1.0 - med.exposed / med.comm : NAN;
    if (!isnan(overlap)) overlap = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
    sl_result_metric(&res, "overlap", overlap, "fraction");
    sl_result_metric(&res, "scaling_eff", eff, "fraction");
    sl_result_metric(&res, "one_rank_step", t1, "s");
    sl_result_metric(&res, "bytes_model", model_bytes(variant, P, m->nparams, r.workers), "bytes");
    sl_result_metric(&res, "bytes_sent", opaque ? NAN : sent_max, "bytes");
    sl_result_metric(&res, "tflops", 3.0 * sl_mlp_flops_forward(m, B) / st.median / 1e12, "TFLOP/s");
    sl_result_metric(&res, "weight_rel_err", d.max_rel, "ratio");
    sl_result_metric(&res, "weight_l2_err", d.l2_rel, "ratio");
    for (int k = 0; k < 4; k++) sl_result_metric(&res, held_names[k], held[k], "bytes");
    snprintf(res.headline, sizeof res.headline, "samples_per_s");
    if (!ctx->opt.check)
        sl_result_check(&res, SL_CHECK_SKIPPED, d.max_rel, NULL);
    else if (d.ref_nonfinite)
        sl_result_check(&res, SL_CHECK_FAIL, NAN,
                        "the serial reference itself diverged (non-finite weights): lower --lr");
    else {
        int adamw = o->kind == SL_OPTIM_ADAMW;
        double err = adamw ? d.l2_rel : d.max_rel;
        double tol = adamw ? CHECK_TOLERANCE_ADAMW_L2 : CHECK_TOLERANCE_SGD;
        if (d.nonfinite || err > tol || total_mismatched)
            sl_result_check(&res, SL_CHECK_FAIL, err,
                            "weights differ from the serial reference by %.3g (%s; tolerance %g; "
                            "worst element %zu); %lld elements differ between replicas",
                            err, adamw ? "L2" : "max", tol, d.worst, total_mismatched);
        else
            sl_result_check(&res, SL_CHECK_PASS, err, NULL);
    }
    sl_result_emit(ctx, &res);

    run_free(&r);
    sl_comm_destroy(comm);
}

/* What cannot be run is said once, up front, with the option that asks for it (called by
 * sl_init before the results directory is created). */
static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    if (opt_bucket_mb <= 0) sl_usage_error("--bucket-mb: expected a size in MiB > 0, got %g", opt_bucket_mb);
    if (!(opt_lr > 0) || opt_lr > 1e6)
        sl_usage_error("--lr: expected a learning rate in (0, 1e6], got %g", opt_lr);
    int workers_ps = P - (int)opt_servers;
    if (opt_scaling == 1) {
        if (opt_batch < P)
            sl_usage_error("--batch %lld cannot be split over %d ranks (strong scaling gives each "
                           "rank at least one sample): use --batch >= %d",
                           opt_batch, P, P);
        if ((opt_variants & (1u << V_ACCUM)) && opt_batch / P < opt_accum) {
            if (opt_variants != ~0u)
                sl_usage_error("--accum %lld: a rank's share of --batch %lld is %lld samples, fewer "
                               "than the micro-batches", opt_accum, opt_batch, opt_batch / P);
            opt_variants &= ~(1u << V_ACCUM);
            sl_note(ctx, "skipping accum: a rank's share of --batch %lld is smaller than --accum %lld",
                    opt_batch, opt_accum);
        }
    } else if ((opt_variants & (1u << V_ACCUM)) && opt_batch < opt_accum) {
        if (opt_variants != ~0u) /* asked for by name: say what is wrong */
            sl_usage_error("--accum %lld: more micro-batches than --batch %lld samples per rank",
                           opt_accum, opt_batch);
        opt_variants &= ~(1u << V_ACCUM);
        sl_note(ctx, "skipping accum: --batch %lld per rank is smaller than --accum %lld", opt_batch,
                opt_accum);
    }
    if ((opt_variants & (1u << V_PS)) && opt_variants != (1u << V_PS) && workers_ps < 1) {
        opt_variants &= ~(1u << V_PS);
        sl_note(ctx, "skipping ps: it needs more ranks than --servers %lld (one worker at least)", opt_servers);
    } else if (opt_variants == (1u << V_PS) && workers_ps < 1) {
        sl_usage_error("--servers %lld: ps needs at least one worker rank beside the servers (%d ranks)",
                       opt_servers, P);
    } else if ((opt_variants & (1u << V_PS)) && opt_scaling == 1 && opt_batch < workers_ps) {
        sl_usage_error("--batch %lld cannot be split over %d ps workers", opt_batch, workers_ps);
    }
}

int main(int argc, char **argv)
{
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);
    const int P = ctx.nranks;
    const sl_backend be = ctx.opt.backend;

    sl_mlp m;
    if (sl_mlp_init(&m, be, (int)opt_layers, (int)opt_in, (int)opt_width, (int)opt_out, SL_ACT_GELU))
        sl_usage_error("--layers/--width/--inputs/--outputs: not a valid MLP shape");
    sl_optim o = {0};
    o.kind = opt_optim ? SL_OPTIM_ADAMW : SL_OPTIM_SGD;
    o.sgd = (sl_sgd){.lr = (float)opt_lr, .momentum = 0.9f, .weight_decay = 0.0f};
    o.adamw = (sl_adamw){.lr = (float)opt_lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                         .weight_decay = 0.01f};
    int max_b = opt_scaling == 0 ? (int)opt_batch * P : (int)opt_batch;
    sl_task task;
    sl_task_init(&task, be, (int)opt_in, (int)opt_out, (uint64_t)opt_seed, max_b);

    sl_note(&ctx, "MLP %lld x %lld wide (%zu parameters, %.1f MiB of f32 gradients), %s scaling, "
                  "batch %lld %s, %s",
            opt_layers, opt_width, m.nparams, m.nparams * 4.0 / 1048576, opt_scaling ? "strong" : "weak",
            opt_batch, opt_scaling ? "in all" : "per rank", sl_optim_name(o.kind));
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));

    reference refs[8];
    int nrefs = 0;
    double baselines[NVARIANTS] = {0};
    for (int c = 0; c < SL_NCOLLS; c++) {
        if (!(ctx.opt.colls & (1u << c))) continue;
        for (int v = 0; v < V_PS; v++)
            if (opt_variants & (1u << v)) run_variant(&ctx, v, (sl_coll)c, &m, &task, &o, refs, &nrefs, baselines);
    }
    if (opt_variants & (1u << V_PS)) run_variant(&ctx, V_PS, SL_COLL_MPI, &m, &task, &o, refs, &nrefs, baselines);

    for (int i = 0; i < nrefs; i++) sl_k_free(be, refs[i].params);
    sl_task_free(&task);
    return sl_finalize(&ctx);
}
