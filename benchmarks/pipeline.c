/* pipeline.c — pipeline parallelism of the shared MLP, on the training layer.
 *
 * What is partitioned: the model's layers, into p contiguous ranges (stages; the first
 * L % p stages get one layer more, or --balance a,b,c), and each step's global batch, first
 * among --dp d replicas of the pipeline, then into --micro-batches m (uneven splits allowed).
 * Rank r*p + s is stage s of replica r. What is communicated: a micro-batch's boundary
 * activation forward and its gradient backward between neighbouring stages (non-blocking
 * point to point on the replica's stage communicator, receives posted at the start of the
 * step), and each stage's gradient, summed over the d replicas of that stage with the -C
 * collective before the optimizer step.
 *
 *   gpipe        every forward, then every backward; one optimizer step per batch
 *   1f1b         PipeDream-Flush: stage s runs min(p-s-1, m) warm-up forwards, then one
 *                forward and one backward in turn, then drains; one optimizer step per batch
 *   interleaved  Megatron's interleaved 1F1B: the layers in p*v chunks, stage s holding chunks
 *                s, s+p, ...; micro-batches go round the ring v times (--virtual v)
 *   pipedream    asynchronous 1F1B without a flush: the stream of micro-batches runs across
 *                steps, each stage updates its weights after every backward, and a
 *                micro-batch's backward uses the weights its forward used (weight stashing:
 *                stage s keeps p-s versions)
 *
 * Each stage's schedule is an explicit list of operations F(mb) / B(mb) (with a chunk for
 * interleaved), built by one function per schedule; the executor runs the list, and the same
 * list, timed by its dependencies (one unit per F, two per B, each stage in list order), is the
 * text timeline printed once per schedule.
 *
 * The check: gpipe, 1f1b and interleaved take one step per batch with the gradient summed over
 * every micro-batch and replica; the loss is normalised over the global batch, so that is the
 * serial full-batch step up to the order of floating-point additions (the driver's
 * SL_TRAIN_TOL_* apply). pipedream is checked against a one-process simulation of the same
 * schedule with the same weight versions; its distance from the serial run is reported
 * (drift), not checked.
 *
 * Every schedule trains in the run's dtype (-d f32|f16|bf16) through the same code: a stage
 * holds its weights, gradients, kept activations and boundary buffers in t->dtype and runs its
 * layers through the training layer (sl_acts_map, sl_acts_layer_*), so the boundary tensors
 * travel in t->dtype (16 bits: exactly half of f32's bytes) and so does the replicas'
 * all-reduce. In 16 bits the training layer keeps the f32 master weights and optimizer state,
 * the micro-batches' gradients are summed in f32 (the stage's f32 twin) and rounded once before
 * the all-reduce, and the step ends with sl_train_unscale / decide / apply: for the flushing
 * schedules the overflow flag is OR-ed over every stage and replica, as a step applied on some
 * stages and skipped on others would leave one model made of two steps. pipedream has no point
 * where the stages meet: each update is decided by its stage alone (sl_train_decide_alone; its
 * replicas see the same summed gradient, hence the same flag), and f16's loss scale stays
 * fixed, since a stage must unscale a micro-batch's gradient by the scale its loss was
 * multiplied with on the last stage. --compute sleep stays f32 (the training layer's rule).
 *
 * --compute sleep is the training layer's sleep mode (train/sl_compute.h): in the timed steps
 * each operation's forward or backward (its layers, and the loss) and the optimizer step are
 * replaced by one sleep of the durations measured for them (the shortest of the warm-up steps
 * and of calibrate, each rank computing alone; communication stays real), so the schedule's
 * shape shows on fewer cores than ranks. The driver then replays every step with real compute
 * from the initial weights (reset) for the check.
 *
 * The bubble (pipe_bubble, pipeline/bubble.c): the busiest stage's idle time over the pipeline
 * time of a step, stage 0's span from its first operation to its last; the mean over the stages
 * beside it; each stage's idle and stage 0's waits for gradients in a line before the row.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "sl_compute.h"
#include "sl_train.h"
#include "pipeline/bubble.h"
#include "pipe_schedule.h"

static long long opt_stages = 0, opt_dp = 1, opt_micro = 8, opt_virtual = 0;
static const char *opt_balance = NULL;
static int opt_recompute = 0;
static unsigned opt_schedules = ~0u;

static const sl_opt pipe_opts[] = {
    {"stages", 0, SL_OPT_INT, &opt_stages, 1, 1 << 16, NULL, 0, "pipeline stages p (default ranks / --dp)"},
    {"dp", 0, SL_OPT_INT, &opt_dp, 1, 1 << 16, NULL, 0, "data-parallel replicas d of the pipeline (default 1)"},
    {"micro-batches", 'm', SL_OPT_INT, &opt_micro, -(1LL << 30), 1 << 30, NULL, 0,
     "micro-batches m per replica and step (default 8)"},
    /* 0 stays "not given" (interleaved's default 2): the parser refuses 0 itself */
    {"virtual", 0, SL_OPT_INT, &opt_virtual, 1, 1 << 16, NULL, 0,
     "model chunks per stage for interleaved (default 2)"},
    {"balance", 0, SL_OPT_STRING, &opt_balance, 0, 0, NULL, 0,
     "layers per stage, a,b,c (interleaved: per chunk; default even, remainder first)"},
    {"recompute", 0, SL_OPT_FLAG, &opt_recompute, 0, 0, NULL, 0,
     "keep only each stage's input per micro-batch; recompute the forward before backward"},
    {"schedule", 0, SL_OPT_CHOICE_LIST, &opt_schedules, 0, 0, SL_ENUM_CHOICES(SCHEDULES), 0,
     "schedules to run (default all)"},
    {0},
};

/* One stage of one replica ------------------------------------------------------------ */

#define MAX_CHUNKS 64

typedef struct chunk {
    int l0, l1;      /* layers [l0, l1) */
    int global;      /* chunk index in the model: chunk * p + stage */
    size_t off;      /* in the stage's parameter buffer (elements) */
    size_t count;
} chunk;

typedef struct slot {  /* one micro-batch x chunk in flight */
    void *keep;        /* activations kept for backward (or only the input: --recompute) */
    sl_coll_req *rq_act, *rq_grad, *sq_act, *sq_grad;
} slot;

typedef struct stage {
    geometry g;
    int sched, s, nchunks, first_rep, nrep, d;
    int last;                /* holds the model's last chunk */
    chunk ch[MAX_CHUNKS];
    size_t nparams;          /* of the stage */
    void *params, *grads;    /* t->dtype */
    float *master, *g32;     /* their f32 twins (16 bits; NULL in f32): master weights, the
                                micro-batches' gradient sum and the unscaled gradient */
    float *optim;
    void **stash;            /* pipedream: p - s weight versions (t->dtype) */
    int nstash;
    int rows_max;
    size_t io_max;           /* bytes of the largest tensor between two layers (dbuf) */
    size_t in_row, out_row;  /* bytes of a sample's input and target as the task makes them */
    void *dbuf[2];           /* dL/dx between a chunk's layers (t->dtype) */
    void *xscratch;          /* the data no chunk reads */
    float *x32;              /* the MLP's input before its cast (16 bits) */
    void **target;           /* per slot, on the stage holding the model's last chunk */
    void **act_in, **act_out, **grad_in, **grad_out; /* per slot, boundary buffers (t->dtype) */
    sl_acts acts;            /* the layers' workspaces; each operation maps its block */
    int nb[MAX_CHUNKS];      /* this step's backwards per chunk so far (the f32 sum's first/last) */
    slot *slots;
    int nslots;              /* micro-batches x chunks with their own buffers */
    op *ops;
    int nops, pos;           /* pipedream: position in the stream */
    int updates;             /* pipedream optimizer steps */
    /* measured */
    int inflight, inflight_peak;
    double activ, activ_peak;
    sl_compute_clock clock;  /* sleep mode's pieces; busy: seconds of work (slept or real) so far */
    double *win, *work;      /* per step: first operation's start to last one's end; busy in it */
    double *wfirst, *wlater; /* per step: the wait for its first backward's gradient; before the later ones */
    double wait_b[2];        /* this step's so far: [0] first backward, [1] the later ones */
    int nbackward;           /* this step's backwards so far */
    int recording;           /* in the driver's steps (not sleep mode's replay) */
    size_t es;               /* bytes of an element of the run's dtype */
} stage;

typedef struct pline {
    stage st;
    int p, d, s, r;
    sl_comm *pipe_comm, *dp_comm;
    double sent;             /* bytes both communicators sent in the driver's steps */
    stage *ref;              /* reference simulation, rank 0 */
} pline;

/* What stages split: the MLP's layers, or the GPT's blocks. */
static long long units(void)
{
    return sl_gpt_selected() ? sl_gpt_resolve(&sl_gpt_opt).layers : sl_train_opt.layers;
}

/* --balance, parsed and checked by validate: layers per chunk of the run's nbalance chunks. */
static int balance[SL_MLP_MAX_LAYERS], nbalance;

/* Parses --balance: counts of at least 1 separated by single commas, nothing else (no empty
 * entry, sign or space). Returns how many, or -1. */
static int parse_balance(const char *s)
{
    int n = 0;
    for (const char *q = s;; q++) {
        const char *digits = q;
        long long v = 0;
        for (; *q >= '0' && *q <= '9'; q++)
            if ((v = v * 10 + (*q - '0')) > SL_MLP_MAX_LAYERS) return -1; /* more than --layers' bound */
        if (q == digits || v < 1 || n == SL_MLP_MAX_LAYERS) return -1;
        balance[n++] = (int)v;
        if (!*q) return n;
        if (*q != ',') return -1;
    }
}

/* Layers of global chunk c of G: --balance, or even with the remainder to the first. The
 * balance describes the run's p stages (x v chunks), and only a geometry of that many chunks:
 * the one-rank baseline runs the schedule on one stage (G = v), which trains the whole model,
 * split evenly. */
static void chunk_layers(int c, int G, int *l0, int *l1)
{
    if (G == nbalance) {
        int acc = 0;
        for (int i = 0; i < c; i++) acc += balance[i];
        *l0 = acc;
        *l1 = acc + balance[c];
        return;
    }
    size_t a, b;
    sl_share((size_t)units(), G, c, &a, &b);
    *l0 = (int)a;
    *l1 = (int)b;
}

/* The model's layers of global chunk c of G: the MLP's layers are chunk_layers' units; the GPT's
 * units are its blocks (layers 1..L), the embedding going with the first chunk and the LM head
 * with the last, so --balance and the even split count blocks. */
static void chunk_model_layers(int c, int G, int *l0, int *l1)
{
    chunk_layers(c, G, l0, l1);
    if (!sl_gpt_selected()) return;
    *l0 = c == 0 ? 0 : *l0 + 1;
    *l1 = c == G - 1 ? (int)units() + 2 : *l1 + 1;
}

/* Rows of micro-batch j (within its step) of the replicas the stage stands for, and the samples
 * of replica rr's part: [first, first + count) of the step's batch. */
static int mb_part(const sl_train *t, const stage *st, int rr, int j, int *first)
{
    size_t rlo, rhi, a, b;
    sl_share((size_t)t->global_batch, st->d, rr, &rlo, &rhi);
    sl_share(rhi - rlo, st->g.m, j, &a, &b);
    *first = (int)(rlo + a);
    return (int)(b - a);
}
static int mb_rows(const sl_train *t, const stage *st, int j)
{
    int rows = 0, first;
    for (int rr = st->first_rep; rr < st->first_rep + st->nrep; rr++) rows += mb_part(t, st, rr, j, &first);
    return rows;
}

/* What a chunk keeps per micro-batch (full) or its input alone (--recompute), in bytes. */
static size_t keep_bytes(const sl_train *t, const chunk *c, int rows, int full)
{
    return sl_acts_range_bytes(t, c->l0, c->l1, rows, full);
}

static void *activ_alloc(sl_train *t, stage *st, size_t bytes)
{
    st->activ += (double)bytes;
    if (st->activ > st->activ_peak) st->activ_peak = st->activ;
    return sl_k_malloc(t->be, SL_MEM_ACTIV, bytes + 1);
}
static void activ_free(sl_train *t, stage *st, void *p, size_t bytes)
{
    st->activ -= (double)bytes;
    sl_k_free(t->be, p);
}

static int progress(void *arg);

/* The stage's chunks' weights from the seed, in f32 (the master in 16 bits, cast into params). */
static void init_weights(sl_train *t, stage *st)
{
    const sl_mlp *m = t->m;
    float *w32 = st->master ? st->master : st->params;
    for (int c = 0; c < st->nchunks; c++)
        sl_mlp_init_params(m, (uint64_t)sl_train_opt.seed, m->w_off[st->ch[c].l0], st->ch[c].count,
                           w32 + st->ch[c].off);
    if (st->master) sl_k_cast(t->be, st->nparams, st->master, SL_F32, st->params, t->dtype, NULL);
}

/* Stage s's chunks in geometry g (global chunk c·p + s for c < v): their layers, offsets in the
 * stage's flat vector and sizes, their total into st->nparams. */
static void place_chunks(const sl_mlp *m, const geometry *g, int s, stage *st)
{
    st->nchunks = g->v;
    st->nparams = 0;
    for (int c = 0; c < g->v; c++) {
        chunk *ch = &st->ch[c];
        ch->global = c * g->p + s;
        chunk_model_layers(ch->global, g->p * g->v, &ch->l0, &ch->l1);
        /* the loss reads x[nlayers], which only the model's last chunk fills */
        if (ch->l0 < 0 || ch->l1 <= ch->l0 || ch->l1 > m->nlayers ||
            (ch->global == g->p * g->v - 1) != (ch->l1 == m->nlayers))
            SL_FATAL("stage %d: chunk %d of %d holds layers [%d, %d) of %d", s, ch->global, g->p * g->v,
                     ch->l0, ch->l1, m->nlayers);
        ch->off = st->nparams;
        ch->count = sl_mlp_range_size(m, ch->l0, ch->l1);
        st->nparams += ch->count;
    }
}

static void setup_stage(sl_train *t, stage *st, const geometry *g, int sched, int s, int first_rep, int nrep, int d)
{
    const sl_mlp *m = t->m;
    memset(st, 0, sizeof *st);
    st->g = *g;
    st->sched = sched;
    st->s = s;
    st->first_rep = first_rep;
    st->nrep = nrep;
    st->d = d;
    st->es = sl_dtype_size(t->dtype);
    sl_compute_clock_init(&st->clock, SL_COMPUTE_MLP_PIECES, progress, st);
    place_chunks(m, g, s, st);
    st->last = st->ch[g->v - 1].global == g->p * g->v - 1;
    st->params = sl_k_malloc(t->be, SL_MEM_PARAMS, st->nparams * st->es + 1);
    st->grads = sl_k_malloc(t->be, SL_MEM_GRADS, st->nparams * st->es + 1);
    st->master = sl_train_twin(t, SL_MEM_PARAMS, st->nparams);
    st->g32 = sl_train_twin(t, SL_MEM_GRADS, st->nparams);
    st->optim = sl_k_malloc(t->be, SL_MEM_OPTIM,
                            (size_t)sl_optim_state_per_param(&t->optim) * st->nparams * sizeof(float) + 1);
    if (sched == S_PIPEDREAM && s < g->p - 1) {
        st->nstash = g->p - s;
        st->stash = calloc((size_t)st->nstash, sizeof *st->stash);
        if (!st->stash) SL_FATAL("out of memory");
        for (int i = 0; i < st->nstash; i++)
            st->stash[i] = sl_k_malloc(t->be, SL_MEM_PARAMS, st->nparams * st->es + 1);
    }
    st->rows_max = mb_rows(t, st, 0); /* the first micro-batch is the largest */
    for (int c = 0; c < g->v; c++)
        for (int l = st->ch[c].l0; l <= st->ch[c].l1; l++) {
            const size_t b = sl_acts_io_bytes(t, l, st->rows_max);
            st->io_max = b > st->io_max ? b : st->io_max;
        }
    for (int i = 0; i < 2; i++) st->dbuf[i] = sl_k_malloc(t->be, SL_MEM_ACTIV, st->io_max + 1);
    /* the MLP's samples in f32 as the task makes them (cast into t->dtype on the first chunk),
     * the GPT's tokens and next tokens (int32) */
    const int gpt = sl_mlp_is_gpt(m);
    st->in_row = gpt ? (size_t)m->gpt.T * sizeof(int32_t) : (size_t)m->dims[0] * sizeof(float);
    st->out_row = gpt ? st->in_row : (size_t)m->dims[m->nlayers] * sizeof(float);
    const size_t scratch = st->in_row > st->out_row ? st->in_row : st->out_row;
    st->xscratch = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)st->rows_max * scratch + 1);
    st->x32 = gpt ? NULL : sl_train_twin(t, SL_MEM_DATA, (size_t)st->rows_max * m->dims[0]);
    sl_acts_alloc_work(t, st->rows_max, &st->acts);
    /* pipedream's stream keeps at most p micro-batches in flight beside a step's m */
    st->nslots = (g->m + (sched == S_PIPEDREAM ? g->m + g->p : 0)) * g->v;
    st->slots = calloc((size_t)st->nslots, sizeof *st->slots);
    /* the boundary buffers hold the run's dtype: 16-bit tensors are sent as they are */
    st->act_in = calloc(4 * (size_t)st->nslots, sizeof *st->act_in);
    if (!st->slots || !st->act_in) SL_FATAL("out of memory");
    st->act_out = st->act_in + st->nslots;
    st->grad_in = st->act_out + st->nslots;
    st->grad_out = st->grad_in + st->nslots;
    for (int k = 0; k < st->nslots; k++) {
        const chunk *ch = &st->ch[k % g->v];
        size_t in = sl_acts_io_bytes(t, ch->l0, st->rows_max), out = sl_acts_io_bytes(t, ch->l1, st->rows_max);
        st->act_in[k] = sl_k_malloc(t->be, SL_MEM_COMM, in + 1);
        st->grad_out[k] = sl_k_malloc(t->be, SL_MEM_COMM, in + 1);
        st->act_out[k] = sl_k_malloc(t->be, SL_MEM_COMM, out + 1);
        st->grad_in[k] = sl_k_malloc(t->be, SL_MEM_COMM, out + 1);
    }
    if (st->last) {
        st->target = calloc((size_t)st->nslots, sizeof *st->target);
        if (!st->target) SL_FATAL("out of memory");
        for (int k = 0; k < st->nslots; k++)
            st->target[k] = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)st->rows_max * st->out_row + 1);
    }
    st->ops = malloc((size_t)ops_capacity(g) * sizeof *st->ops);
    if (!st->ops) SL_FATAL("out of memory");
    st->nops = builders[sched](g, s, st->ops);
    init_weights(t, st);
    sl_k_memset0(t->be, st->grads, st->nparams * st->es);
}

/* Sleep mode: back to the initial weights for the replay with real compute. */
static void reset(sl_train *t)
{
    stage *st = &((pline *)t->state)->st;
    init_weights(t, st);
    sl_k_memset0(t->be, st->optim, (size_t)sl_optim_state_per_param(&t->optim) * st->nparams * sizeof(float));
    st->pos = 0;
    st->updates = 0;
}

static void free_stage(sl_train *t, stage *st)
{
    sl_acts_free_work(t, &st->acts);
    sl_compute_clock_free(&st->clock);
    for (int k = 0; k < st->nslots; k++) {
        sl_k_free(t->be, st->act_in[k]);
        sl_k_free(t->be, st->act_out[k]);
        sl_k_free(t->be, st->grad_in[k]);
        sl_k_free(t->be, st->grad_out[k]);
    }
    for (int i = 0; i < st->nstash; i++) sl_k_free(t->be, st->stash[i]);
    for (int i = 0; i < 2; i++) sl_k_free(t->be, st->dbuf[i]);
    sl_k_free(t->be, st->xscratch);
    sl_k_free(t->be, st->x32);
    sl_k_free(t->be, st->master);
    sl_k_free(t->be, st->g32);
    for (int k = 0; st->target && k < st->nslots; k++) sl_k_free(t->be, st->target[k]);
    free(st->target);
    sl_k_free(t->be, st->params);
    sl_k_free(t->be, st->grads);
    sl_k_free(t->be, st->optim);
    free(st->stash);
    free(st->slots);
    free(st->act_in);
    free(st->ops);
}

/* Compute, real or slept ---------------------------------------------------------------- */

/* Advances the stage's messages in flight: a large message moves only while its sender and
 * its receiver are inside the MPI library, so a stage computing (or sleeping) would hold back
 * its neighbour. Called between layers, as a framework's communication thread would. Returns
 * how many sends are still in flight. */
static int progress(void *arg)
{
    stage *st = arg;
    int pending = 0;
    for (int k = 0; k < st->nslots; k++) {
        sl_coll_req **q[2] = {&st->slots[k].sq_act, &st->slots[k].sq_grad};
        for (int i = 0; i < 2; i++) {
            int done = 0;
            if (!*q[i]) continue;
            sl_train_coll_ok(sl_coll_test(*q[i], &done), "sl_coll_test");
            pending += !done;
            if (!done) continue;
            sl_train_coll_ok(sl_coll_wait(*q[i]), "sl_coll_wait");
            *q[i] = NULL;
        }
    }
    /* Receives too: a message above the eager limit arrives as a request to send, which the
     * receiver must answer inside MPI (testing one request advances all on the communicator);
     * answered only in wait_recv, each cost the receiver a poll more, some 50 us a forward. */
    for (int k = 0; !pending && k < st->nslots; k++) {
        sl_coll_req *r = st->slots[k].rq_act ? st->slots[k].rq_act : st->slots[k].rq_grad;
        int done;
        if (r) {
            sl_train_coll_ok(sl_coll_test(r, &done), "sl_coll_test");
            break;
        }
    }
    return pending;
}

/* Parameter (or gradient) block of layer l of chunk c in a stage buffer of t->dtype. */
static void *layer_block(const sl_train *t, const void *buf, const chunk *c, int l)
{
    return sl_train_at(t, buf, c->off + (t->m->w_off[l] - t->m->w_off[c->l0]));
}

/* The chunk's layers on its mapped block (sl_acts_map), one timed piece each. */
static void chunk_forward(sl_train *t, stage *st, const chunk *c, const void *params, sl_phase phase)
{
    /* slept: the operation's layers as one sleep (one wake-up, each erring by microseconds) */
    const char *name = phase == SL_PHASE_RECOMPUTE ? "recompute" : "forward";
    if (sl_compute_sleep_layers(t, &st->clock, c->l0, c->l1, 0, 0, phase, name)) return;
    for (int l = c->l0; l < c->l1; l++)
        SL_COMPUTE_PIECE(t, &st->clock, SL_COMPUTE_FORWARD(l), phase, name,
                         sl_acts_layer_forward(t, &st->acts, l, layer_block(t, params, c, l)));
}

/* dy: dL/d(x[l1]) (overwritten); dx0: where dL/d(x[l0]) goes (NULL for the model's input).
 * sum: the f32 accumulator of the step's micro-batches (16 bits, flushing schedules), or NULL. */
static void chunk_backward(sl_train *t, stage *st, const chunk *c, const void *params, void *dy, void *dx0,
                           float *sum)
{
    if (sl_compute_sleep_layers(t, &st->clock, c->l0, c->l1, 1, 0, SL_PHASE_COMPUTE, "backward")) return;
    for (int l = c->l1 - 1; l >= c->l0; l--) {
        const size_t o = c->off + (t->m->w_off[l] - t->m->w_off[c->l0]);
        void *dx = l > c->l0 ? st->dbuf[l & 1] : dx0;
        SL_COMPUTE_PIECE(t, &st->clock, SL_COMPUTE_BACKWARD(l), SL_PHASE_COMPUTE, "backward",
                         sl_acts_layer_backward(t, &st->acts, l, dy, dx, layer_block(t, params, c, l),
                                                layer_block(t, st->grads, c, l), sl_f32_at(sum, o)));
        dy = dx;
    }
}

static int slot_of(const stage *st, const op *o) { return (o->mb % (st->nslots / st->g.v)) * st->g.v + o->chunk; }
static int step_mb(const stage *st, const op *o) { return o->mb % st->g.m; }

/* The step's samples of micro-batch j for the replicas the stage stands for, into x and y (the
 * GPT's: its tokens and their next tokens). */
static void load_mb(sl_train *t, stage *st, const op *o, void *x, void *y)
{
    const int j = o->mb % st->g.m, saved = t->step;
    int row = 0;
    if (st->sched == S_PIPEDREAM) t->step = o->mb / st->g.m; /* the stream runs ahead of the steps */
    for (int rr = st->first_rep; rr < st->first_rep + st->nrep; rr++) {
        int first, count = mb_part(t, st, rr, j, &first);
        void *xr = (char *)x + (size_t)row * st->in_row, *yr = (char *)y + (size_t)row * st->out_row;
        if (sl_mlp_is_gpt(t->m)) sl_train_load_tokens(t, first, count, xr, yr);
        else sl_train_load(t, first, count, xr, yr);
        row += count;
    }
    t->step = saved;
}

/* The data of a forward on the model's first chunk (its input, into act_in) or last (its
 * target): loaded before the step's operations run, as a data loader has the batch ready, so
 * that the first and last stages' operations are the layers' work alone (phase data). */
static void prefetch(sl_train *t, stage *st, const op *o)
{
    const chunk *c = &st->ch[o->chunk];
    const int k = slot_of(st, o), first = c->global == 0, last = c->global == st->g.p * st->g.v - 1;
    if (o->kind != 'F' || (!first && !last)) return;
    /* the input as the task makes it: into act_in itself, or (the MLP's in 16 bits) into x32 and cast */
    void *x = !first ? st->xscratch : st->x32 ? (void *)st->x32 : st->act_in[k];
    load_mb(t, st, o, x, last ? st->target[k] : st->xscratch);
    if (first && st->x32)
        sl_k_cast(t->be, (size_t)mb_rows(t, st, step_mb(st, o)) * t->m->dims[0], x, SL_F32, st->act_in[k],
                  t->dtype, NULL);
}

/* The parts of an operation around its communication ---------------------------------- */


static void note_inflight(stage *st, int delta)
{
    st->inflight += delta;
    if (st->inflight > st->inflight_peak) st->inflight_peak = st->inflight;
}

/* After a forward: its activations block (the input first, full bytes) kept for the backward,
 * or only the input (in bytes) with --recompute. */
static void keep_for_backward(sl_train *t, stage *st, int k, void *work, size_t full, size_t in)
{
    if (opt_recompute) {
        st->slots[k].keep = activ_alloc(t, st, in);
        sl_k_memcpy(t->be, st->slots[k].keep, work, in, SL_K_D2D);
        activ_free(t, st, work, full);
    } else {
        st->slots[k].keep = work;
    }
    note_inflight(st, 1);
}

/* The global number of micro-batch o's first sequence, from which the GPT's dropout numbers its
 * elements (sl_dropout.h): the rows of a stage standing for one replica are contiguous in the
 * step's batch (pipedream's reference with --dp > 1 is refused with dropout: validate). */
static uint64_t mb_seq0(const sl_train *t, const stage *st, const op *o)
{
    int first;
    mb_part(t, st, st->first_rep, o->mb % st->g.m, &first);
    const int step = st->sched == S_PIPEDREAM ? o->mb / st->g.m : t->step; /* the stream runs ahead */
    return (uint64_t)step * (uint64_t)t->global_batch + (uint64_t)first;
}

/* The target of slot k's micro-batch for the loss on the model's last chunk: the MLP's after
 * its layers, the GPT's inside its head's forward. */
static void set_target(sl_train *t, stage *st, int k)
{
    if (sl_mlp_is_gpt(t->m)) st->acts.g.tgt = st->target[k];
    else st->acts.y = st->target[k];
}

/* F: input in act_in[k] (received, or loaded on the first chunk); output in act_out[k] (to be
 * sent), or, on the model's last chunk, the loss gradient in grad_in[k]. */
static void do_forward(sl_train *t, stage *st, const op *o)
{
    const chunk *c = &st->ch[o->chunk];
    const int k = slot_of(st, o), rows = mb_rows(t, st, step_mb(st, o));
    const int last = c->global == st->g.p * st->g.v - 1;
    if (st->stash && o->chunk == 0) /* the version this micro-batch's backward will use */
        sl_k_memcpy(t->be, st->stash[o->mb % st->nstash], st->params, st->nparams * st->es, SL_K_D2D);
    size_t full = keep_bytes(t, c, rows, 1), in = keep_bytes(t, c, rows, 0);
    void *work = activ_alloc(t, st, full);
    sl_acts_map(t, &st->acts, c->l0, c->l1, rows, work, st->act_out[k], st->grad_in[k]);
    st->acts.g.seq0 = mb_seq0(t, st, o);
    sl_k_memcpy(t->be, work, st->act_in[k], sl_acts_io_bytes(t, c->l0, rows), SL_K_D2D); /* the input heads the block */
    if (last) set_target(t, st, k);
    if (sl_compute_sleep_layers(t, &st->clock, c->l0, c->l1, 0, last, SL_PHASE_COMPUTE, "forward")) {
    } else if (chunk_forward(t, st, c, st->params, SL_PHASE_COMPUTE), last) {
        SL_COMPUTE_PIECE(t, &st->clock, SL_COMPUTE_LOSS, SL_PHASE_COMPUTE, "loss", sl_acts_loss(t, &st->acts));
    }
    keep_for_backward(t, st, k, work, full, in);
}

/* B: dL/d(output) in grad_in[k]; dL/d(input) into grad_out[k] (to be sent). The flushing
 * schedules sum a chunk's micro-batches (in f32 in 16 bits: first and last of the step's
 * backwards of the chunk); pipedream's update takes one micro-batch's gradient. */
static void do_backward(sl_train *t, stage *st, const op *o)
{
    const chunk *c = &st->ch[o->chunk];
    const int k = slot_of(st, o), rows = mb_rows(t, st, step_mb(st, o));
    const void *w = st->stash ? st->stash[o->mb % st->nstash] : st->params;
    size_t full = keep_bytes(t, c, rows, 1), in = keep_bytes(t, c, rows, 0);
    void *block = st->slots[k].keep;
    if (opt_recompute) {
        block = activ_alloc(t, st, full);
        sl_acts_map(t, &st->acts, c->l0, c->l1, rows, block, st->act_out[k], st->grad_in[k]);
        st->acts.g.seq0 = mb_seq0(t, st, o);
        sl_k_memcpy(t->be, block, st->slots[k].keep, in, SL_K_D2D);
        /* the GPT's head recomputes its loss's gradient (the same, into grad_in[k]) */
        if (c->global == st->g.p * st->g.v - 1) set_target(t, st, k);
        chunk_forward(t, st, c, w, SL_PHASE_RECOMPUTE);
        activ_free(t, st, st->slots[k].keep, in);
    } else {
        sl_acts_map(t, &st->acts, c->l0, c->l1, rows, block, st->act_out[k], st->grad_in[k]);
        st->acts.g.seq0 = mb_seq0(t, st, o);
    }
    const int pipedream = st->sched == S_PIPEDREAM, nb = st->nb[o->chunk]++;
    st->acts.first = pipedream || nb == 0;
    st->acts.last = pipedream || nb == st->g.m - 1;
    chunk_backward(t, st, c, w, st->grad_in[k], c->global > 0 ? st->grad_out[k] : NULL,
                   pipedream ? NULL : st->g32);
    activ_free(t, st, block, full);
    st->slots[k].keep = NULL;
    note_inflight(st, -1);
}

/* The optimizer step of the stage's slice once its gradients are summed: unscale, the verdict
 * (the step's over every rank; pipedream's: the stage's own, alone), the optimizer on the master
 * and the cast back (a timed piece, slept in sleep mode). Leaves the gradients zeroed. */
static void stage_update(sl_train *t, stage *st, int alone)
{
    const float *g = sl_train_unscale(t, st->grads, st->g32, st->nparams);
    if (alone ? sl_train_decide_alone(t) : sl_train_decide(t)) {
        if (t->sleeping) {
            sl_compute_sleep_span(t, &st->clock, st->clock.shortest[SL_COMPUTE_OPTIM], SL_PHASE_COMPUTE, "optimizer");
        } else {
            const double t0 = sl_now();
            sl_train_apply(t, st->params, st->master, g, st->optim, st->nparams); /* records its span */
            st->clock.busy += sl_now() - t0;
            sl_compute_measured(&st->clock, SL_COMPUTE_OPTIM, sl_now() - t0);
            progress(st);
        }
    }
    sl_k_memset0(t->be, st->grads, st->nparams * st->es);
}

/* The distributed executor ---------------------------------------------------------------- */

/* A message is named by its micro-batch, the global chunk that receives it and its direction. */
static int tag_of(const stage *st, int mb, int global, int grad)
{
    return (int)((((long long)mb * st->g.p * st->g.v + global) * 2 + grad) % (1 << 19));
}

/* Elements of t->dtype of the tensor crossing the boundary before layer l (never the model's
 * first or last: those are the data and the loss). */
static size_t boundary_elems(const sl_train *t, const stage *st, int l, int rows)
{
    return sl_acts_io_bytes(t, l, rows) / st->es;
}

/* Receives of an operation, posted ahead; on the last chunk there is none. */
static void post_recv(sl_train *t, pline *pp, const op *o)
{
    stage *st = &pp->st;
    const chunk *c = &st->ch[o->chunk];
    const int k = slot_of(st, o), rows = mb_rows(t, st, step_mb(st, o)), G = st->g.p * st->g.v;
    if (o->kind == 'F' && c->global > 0)
        sl_train_coll_ok(sl_coll_irecv(pp->pipe_comm, st->act_in[k], boundary_elems(t, st, c->l0, rows), t->dtype,
                                       (c->global - 1) % pp->p, tag_of(st, o->mb, c->global, 0), &st->slots[k].rq_act),
                         "irecv activation");
    if (o->kind == 'B' && c->global < G - 1)
        sl_train_coll_ok(sl_coll_irecv(pp->pipe_comm, st->grad_in[k], boundary_elems(t, st, c->l1, rows), t->dtype,
                                       (c->global + 1) % pp->p, tag_of(st, o->mb, c->global, 1), &st->slots[k].rq_grad),
                         "irecv gradient");
}

/* Waits for a posted receive: the time is the bubble (the stage has nothing else to do). While
 * sleeping stands in for compute, the wait sleeps between polls too: a rank spinning in MPI would
 * take the core a waking neighbour needs when there are more ranks than cores. Returns the time
 * waited. */
static double wait_recv(sl_train *t, stage *st, sl_coll_req **rq)
{
    if (!*rq) return 0;
    double t0 = sl_now();
    for (int done = 0; t->sleeping && !done;) {
        sl_train_coll_ok(sl_coll_test(*rq, &done), "poll a boundary receive");
        if (!done) sl_compute_nap(&st->clock);
    }
    sl_train_coll_ok(sl_coll_wait(*rq), "wait for a boundary receive");
    *rq = NULL;
    const double t1 = sl_now();
    sl_train_span(t, SL_PHASE_BUBBLE, "wait", t0, t1);
    return t1 - t0;
}

static void start_send(sl_train *t, pline *pp, void *buf, size_t count, int peer, int tag, sl_coll_req **rq)
{
    double t0 = sl_now();
    if (*rq) sl_train_coll_ok(sl_coll_wait(*rq), "wait for an earlier send");
    sl_train_coll_ok(sl_coll_isend(pp->pipe_comm, buf, count, t->dtype, peer, tag, rq), "isend");
    sl_train_span(t, SL_PHASE_COMM, "send", t0, sl_now());
}

static void run_op(sl_train *t, pline *pp, const op *o)
{
    stage *st = &pp->st;
    const chunk *c = &st->ch[o->chunk];
    const int k = slot_of(st, o), rows = mb_rows(t, st, step_mb(st, o)), G = st->g.p * st->g.v;
    if (o->kind == 'F') {
        wait_recv(t, st, &st->slots[k].rq_act);
        do_forward(t, st, o);
        if (c->global < G - 1)
            start_send(t, pp, st->act_out[k], boundary_elems(t, st, c->l1, rows), (c->global + 1) % pp->p,
                       tag_of(st, o->mb, c->global + 1, 0), &st->slots[k].sq_act);
        return;
    }
    st->wait_b[st->nbackward++ > 0] += wait_recv(t, st, &st->slots[k].rq_grad);
    do_backward(t, st, o);
    if (c->global > 0)
        start_send(t, pp, st->grad_out[k], boundary_elems(t, st, c->l0, rows), (c->global - 1) % pp->p,
                   tag_of(st, o->mb, c->global - 1, 1), &st->slots[k].sq_grad);
    if (st->sched == S_PIPEDREAM) { /* update after every backward, summed over the replicas */
        if (pp->d > 1) {
            double t0 = sl_now();
            sl_train_coll_ok(sl_coll_allreduce(pp->dp_comm, st->grads, st->grads, st->nparams, t->dtype, SL_OP_SUM),
                             "allreduce (replicas)");
            sl_train_span(t, SL_PHASE_COMM, "allreduce", t0, sl_now());
        }
        stage_update(t, st, 1);
        st->updates++;
    }
}

static void wait_sends(sl_train *t, stage *st)
{
    double t0 = sl_now();
    for (int k = 0; t->sleeping && k < st->nslots; k++) /* without spinning (wait_recv) */
        while (st->slots[k].sq_act || st->slots[k].sq_grad) {
            progress(st);
            if (st->slots[k].sq_act || st->slots[k].sq_grad) sl_compute_nap(&st->clock);
        }
    for (int k = 0; k < st->nslots; k++) {
        sl_coll_req *q[2] = {st->slots[k].sq_act, st->slots[k].sq_grad};
        sl_train_coll_ok(sl_coll_waitall(2, q), "wait for sends");
        st->slots[k].sq_act = st->slots[k].sq_grad = NULL;
    }
    sl_train_span(t, SL_PHASE_COMM, "sends", t0, sl_now());
}

static void pipe_step(sl_train *t, pline *pp)
{
    stage *st = &pp->st;
    int first = 0, count = st->nops;
    if (st->sched == S_PIPEDREAM) { /* this step's share of the stream: 2m operations */
        first = st->pos;
        count = 2 * st->g.m;
        st->pos += count;
    }
    for (int i = first; i < first + count; i++) prefetch(t, st, &st->ops[i]);
    for (int i = first; i < first + count; i++) post_recv(t, pp, &st->ops[i]);
    const double w0 = sl_now(), b0 = st->clock.busy;
    st->wait_b[0] = st->wait_b[1] = 0;
    st->nbackward = 0;
    memset(st->nb, 0, sizeof st->nb);
    for (int i = first; i < first + count; i++) run_op(t, pp, &st->ops[i]);
    if (st->recording && t->step < t->nsteps) {
        st->win[t->step] = sl_now() - w0;
        st->work[t->step] = st->clock.busy - b0;
        st->wfirst[t->step] = st->wait_b[0];
        st->wlater[t->step] = st->wait_b[1];
    }
    /* pipedream: a send may be received only in the next step */
    if (st->sched != S_PIPEDREAM || t->step == t->nsteps - 1) wait_sends(t, st);
    if (st->sched == S_PIPEDREAM) return;
    if (pp->d > 1) {
        double t0 = sl_now();
        sl_train_coll_ok(sl_coll_allreduce(pp->dp_comm, st->grads, st->grads, st->nparams, t->dtype, SL_OP_SUM),
                         "allreduce (replicas)");
        sl_train_blocking(t, "allreduce", t0);
    }
    stage_update(t, st, 0);
}

/* The technique's callbacks ------------------------------------------------------------- */

static int virtual_of(int sched) { return sched == S_INTERLEAVED ? (opt_virtual > 0 ? (int)opt_virtual : 2) : 1; }

static int data_ranks(int variant, int nranks)
{
    (void)variant;
    (void)nranks;
    return (int)opt_dp;
}

static void make_geometry(const sl_train *t, int p, geometry *g)
{
    g->p = p;
    g->v = virtual_of(t->variant);
    g->m = (int)opt_micro;
    g->nsteps = t->nsteps;
}

/* Layers the one-rank baseline's stage held, per schedule (rank 0 runs it): the row's
 * one_rank_layers, which says that scaling_eff compares with the whole model. */
static int one_rank_layers[NSCHEDULES];

static void setup(sl_train *t)
{
    pline *pp = calloc(1, sizeof *pp);
    if (!pp) SL_FATAL("out of memory");
    t->state = pp;
    pp->d = t->baseline ? 1 : (int)opt_dp;
    pp->p = t->size / pp->d;
    pp->r = t->rank / pp->p;
    pp->s = t->rank % pp->p;
    geometry g;
    make_geometry(t, pp->p, &g);
    MPI_Comm split;
    MPI_Comm world = t->baseline ? MPI_COMM_SELF : t->ctx->comm;
    sl_mem_space space = sl_comm_space(t->comm);
    SL_CHECK_MPI(MPI_Comm_split(world, pp->r, pp->s, &split));
    sl_train_coll_ok(sl_comm_create(&pp->pipe_comm, split, SL_COLL_MPI, space), "sl_comm_create (stages)");
    SL_CHECK_MPI(MPI_Comm_free(&split));
    SL_CHECK_MPI(MPI_Comm_split(world, pp->s, pp->r, &split));
    sl_train_coll_ok(sl_comm_create(&pp->dp_comm, split, sl_comm_impl(t->comm), space), "sl_comm_create (replicas)");
    SL_CHECK_MPI(MPI_Comm_free(&split));
    setup_stage(t, &pp->st, &g, t->variant, pp->s, pp->r, 1, pp->d);
    if (t->baseline) {
        one_rank_layers[t->variant] = 0;
        for (int c = 0; c < g.v; c++) one_rank_layers[t->variant] += pp->st.ch[c].l1 - pp->st.ch[c].l0;
    }
    pp->st.win = calloc(PB_NREC * (size_t)t->nsteps, sizeof *pp->st.win); /* bubble.h's records */
    if (!pp->st.win) SL_FATAL("out of memory");
    pp->st.work = pp->st.win + (size_t)PB_WORK * t->nsteps;
    pp->st.wfirst = pp->st.win + (size_t)PB_WAIT_FIRST_B * t->nsteps;
    pp->st.wlater = pp->st.win + (size_t)PB_WAIT_LATER_B * t->nsteps;
    size_t lo, hi;
    sl_share((size_t)t->global_batch, pp->d, pp->r, &lo, &hi);
    t->lo = (int)lo; /* the replica's samples (the row's rank_batch) */
    t->hi = (int)hi;
    static unsigned shown;
    if (t->rank == 0 && !t->baseline && !((shown >> t->variant) & 1)) {
        shown |= 1u << t->variant;
        print_timeline(&g, t->variant, 2 * g.m);
    }
}

/* Sleep mode's calibration (the driver runs it on each rank in turn, the others waiting): the
 * stage's chunks, its loss if it holds the last, and its optimizer step, on the largest
 * micro-batch. */
static void calibrate(sl_train *t)
{
    stage *st = &((pline *)t->state)->st;
    int l0[MAX_CHUNKS], l1[MAX_CHUNKS];
    const float *params[MAX_CHUNKS];
    for (int c = 0; c < st->nchunks; c++) {
        l0[c] = st->ch[c].l0;
        l1[c] = st->ch[c].l1;
        params[c] = (const float *)st->params + st->ch[c].off; /* sleep mode is f32's */
    }
    sl_compute_calibrate_mlp(t, &st->clock, st->nchunks, l0, l1, params, st->rows_max, st->last, st->nparams);
}

/* A step of the driver's, or of sleep mode's replay (which records none of the row's figures). */
static void step(sl_train *t)
{
    pline *pp = t->state;
    pp->st.recording = !t->replaying;
    pipe_step(t, pp);
    pp->st.recording = 0;
    if (!t->replaying) pp->sent = (double)(sl_comm_bytes_sent(pp->pipe_comm) + sl_comm_bytes_sent(pp->dp_comm));
}

/* The stage's first chunk: [w_off[l0], w_off[l1]) (interleaved: its first chunk only). */
static const float *weights(sl_train *t, size_t *first, size_t *count)
{
    pline *pp = t->state;
    *first = t->m->w_off[pp->st.ch[0].l0];
    *count = pp->st.ch[0].count;
    return pp->st.master ? pp->st.master : pp->st.params;
}

/* Stages of replica 0 send their chunks to rank 0 (host copies). */
static void gather_weights(sl_train *t, float *full)
{
    pline *pp = t->state;
    stage *st = &pp->st;
    MPI_Comm world = t->ctx->comm;
    if (pp->r == 0 && pp->s > 0) {
        float *host = sl_alloc(SL_MEM_OTHER, st->nparams * sizeof(float) + 1);
        sl_k_memcpy(t->be, host, st->master ? st->master : st->params, st->nparams * sizeof(float), SL_K_D2H);
        SL_CHECK_MPI(MPI_Send(host, (int)st->nparams, MPI_FLOAT, 0, 77, world));
        sl_free(host);
    }
    if (t->rank != 0) return;
    for (int s = 0; s < pp->p; s++) {
        stage other;
        place_chunks(t->m, &st->g, s, &other);
        const size_t n = other.nparams;
        float *host = sl_alloc(SL_MEM_OTHER, n * sizeof(float) + 1);
        if (s == 0) sl_k_memcpy(t->be, host, st->master ? st->master : st->params, n * sizeof(float), SL_K_D2H);
        else SL_CHECK_MPI(MPI_Recv(host, (int)n, MPI_FLOAT, s, 77, world, MPI_STATUS_IGNORE));
        for (int c = 0; c < other.nchunks; c++)
            memcpy(full + t->m->w_off[other.ch[c].l0], host + other.ch[c].off, other.ch[c].count * sizeof(float));
        sl_free(host);
    }
}

/* Serial full-batch training in the run's dtype: the flushing schedules' reference, and the
 * run pipedream's drift is measured from. */
static void serial(sl_train *t, float *params, double *losses)
{
    sl_train_serial_run(t, t->dtype, params, losses);
}

/* pipedream's reference: all p stages in one process, every replica's part of a micro-batch
 * in one, each stage running its own list in the order the timeline gives them, in the run's
 * dtype with the same kernels and verdicts (each stage its own: sl_train_decide_alone); the
 * other schedules: serial full-batch training.
 * pipedream's tolerance in 16 bits is the driver's SL_TRAIN_TOL_MIXED_* (sl_train.h): with one
 * replica the simulation runs each stage's operations as the distributed run does, on the same
 * 16-bit tensors (bit for bit in practice); with d replicas it runs a micro-batch's rows of all
 * replicas as one GEMM, rounded once into 16 bits, where the run rounds each replica's part and
 * sums them in 16 bits: the split-and-rounded gradient sum those tolerances bound for ddp. */
static void reference(sl_train *t, float *params, double *losses)
{
    if (t->variant != S_PIPEDREAM) {
        serial(t, params, losses);
        return;
    }
    pline *pp = t->state;
    const int p = pp->p, d = pp->d;
    /* a run per stage (its own optimizer count and overflow flag); their phases are nobody's */
    sl_train *tr = malloc((size_t)p * sizeof *tr);
    stage *st = calloc((size_t)p, sizeof *st);
    op **ops = malloc((size_t)p * sizeof *ops);
    int *n = malloc((size_t)p * sizeof *n), **start = malloc((size_t)p * sizeof *start);
    if (!tr || !st || !ops || !n || !start) SL_FATAL("out of memory");
    for (int s = 0; s < p; s++) {
        tr[s] = *t;
        tr[s].nonfinite = 0;
        sl_train_mixed_init(&tr[s].ms, t->dtype);
        setup_stage(&tr[s], &st[s], &pp->st.g, S_PIPEDREAM, s, 0, d, d);
        ops[s] = st[s].ops;
        n[s] = st[s].nops;
        start[s] = malloc((size_t)n[s] * sizeof **start);
        if (!start[s]) SL_FATAL("out of memory");
    }
    int span = simulate(&pp->st.g, ops, n, start);
    if (span < 0) SL_FATAL("pipedream reference: the schedule deadlocks");
    /* run the operations in time order (stage order within a unit): every input is ready */
    int *next = calloc((size_t)p, sizeof *next);
    if (!next) SL_FATAL("out of memory");
    for (int tu = 0; tu <= span; tu++)
        for (int s = 0; s < p; s++) {
            while (next[s] < n[s] && start[s][next[s]] == tu) {
                const op *o = &ops[s][next[s]++];
                sl_train *ts = &tr[s];
                const int k = slot_of(&st[s], o), rows = mb_rows(ts, &st[s], step_mb(&st[s], o));
                if (o->kind == 'F') {
                    prefetch(ts, &st[s], o);
                    if (s > 0) sl_k_memcpy(ts->be, st[s].act_in[k], st[s - 1].act_out[slot_of(&st[s - 1], o)],
                                           sl_acts_io_bytes(ts, st[s].ch[0].l0, rows), SL_K_D2D);
                    do_forward(ts, &st[s], o);
                } else {
                    if (s < p - 1) sl_k_memcpy(ts->be, st[s].grad_in[k], st[s + 1].grad_out[slot_of(&st[s + 1], o)],
                                               sl_acts_io_bytes(ts, st[s].ch[0].l1, rows), SL_K_D2D);
                    do_backward(ts, &st[s], o);
                    stage_update(ts, &st[s], 1);
                    st[s].updates++;
                }
            }
        }
    for (int s = 0; s < p; s++) {
        sl_k_memcpy(t->be, params + t->m->w_off[st[s].ch[0].l0], st[s].master ? st[s].master : st[s].params,
                    st[s].nparams * sizeof(float), SL_K_D2D);
        free_stage(&tr[s], &st[s]);
        free(start[s]);
    }
    void *lists[] = {next, st, ops, n, start, tr};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) free(lists[i]);
}

static void release(sl_train *t)
{
    pline *pp = t->state;
    free(pp->st.win);
    free_stage(t, &pp->st);
    sl_comm_destroy(pp->pipe_comm);
    sl_comm_destroy(pp->dp_comm);
    free(pp);
}

/* The busiest stage's bytes per step: a middle stage sends each micro-batch's activation
 * forward and its gradient back, 2 x rows x boundary width x element size (4 bytes, 2 in
 * f16/bf16; interleaved: per chunk), plus its share of the replicas' all-reduce (ring volume
 * 2(d-1)/d of its parameters, in the same type). */
static double bytes_model(const sl_train *t)
{
    const pline *pp = t->state;
    const double es = (double)sl_dtype_size(t->dtype); /* 16-bit runs send 16-bit tensors */
    double most = 0;
    for (int s = 0; s < pp->p; s++) {
        geometry g = pp->st.g;
        double b = 0, np = 0;
        for (int c = 0; c < g.v; c++) {
            int gl = c * g.p + s, l0, l1;
            chunk_model_layers(gl, g.p * g.v, &l0, &l1);
            np += (double)sl_mlp_range_size(t->m, l0, l1);
            for (int j = 0; j < g.m; j++) {
                int rows = mb_rows(t, &pp->st, j);
                if (gl < g.p * g.v - 1) b += (double)sl_acts_io_bytes(t, l1, rows);
                if (gl > 0) b += (double)sl_acts_io_bytes(t, l0, rows);
            }
        }
        int updates = pp->st.sched == S_PIPEDREAM ? g.m : 1;
        if (pp->d > 1) b += updates * 2.0 * (pp->d - 1) / pp->d * np * es;
        most = b > most ? b : most;
    }
    return most;
}

/* Formulas per stage: micro-batches in flight and stashed versions. */
static int inflight_model(const pline *pp, int s)
{
    const geometry *g = &pp->st.g;
    switch (pp->st.sched) {
    case S_GPIPE: return g->m;
    case S_INTERLEAVED: {
        int w = (g->p - s - 1) * 2 + (g->v - 1) * g->p + 1;
        return w < g->m * g->v ? w : g->m * g->v;
    }
    case S_PIPEDREAM: return g->p - s < g->nsteps * g->m ? g->p - s : g->nsteps * g->m;
    default: return g->p - s < g->m ? g->p - s : g->m;
    }
}

/* pipedream: how far its weights are from the synchronous (serial) run's (collective). */
static double drift_from_serial(sl_train *t)
{
    pline *pp = t->state;
    const size_t n = t->m->nparams;
    float *full = sl_alloc(SL_MEM_OTHER, n * sizeof(float) + 1);
    if (pp->p > 1) gather_weights(t, full);
    else if (t->rank == 0)
        sl_k_memcpy(t->be, full, pp->st.master ? pp->st.master : pp->st.params, n * sizeof(float), SL_K_D2H);
    double drift = 0;
    if (t->rank == 0) {
        float *ref = sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float)), *host = sl_alloc(SL_MEM_OTHER, n * sizeof(float));
        serial(t, ref, NULL);
        sl_k_memcpy(t->be, host, ref, n * sizeof(float), SL_K_D2H);
        drift = sl_weights_compare(SL_BACKEND_CPU, n, full, host).max_rel;
        sl_k_free(t->be, ref);
        sl_free(host);
    }
    SL_CHECK_MPI(MPI_Bcast(&drift, 1, MPI_DOUBLE, 0, t->ctx->comm));
    sl_free(full);
    return drift;
}

/* The bubble of the timed steps. A step's pipeline time W is stage 0's span from its first
 * operation's start to its last one's end (the first forward there starts the step's work and
 * the last backward there ends it: the part of the step the formula covers; the data loaded
 * before it, the replicas' all-reduce and the optimizer step after it are not in W). Stage s
 * is idle W - work_s, work_s being its time in forward and backward (real or slept). Per step
 * and replica: the busiest stage's idle and idle / W (the bubble: in the formula's pipeline
 * every stage idles (p-1)/(m+p-1) of W; with unequal stages the others also wait for the
 * busiest, which is load imbalance, not the schedule's fill and drain), and the mean over the
 * stages of idle / W (the idle fraction, imbalance included); the largest over the replicas;
 * and each stage's own idle and waits for gradients (bubble.c). Outputs: the medians over the
 * timed steps. Collective. */
static void pipe_bubble(sl_train *t, pipe_bubble_figs *f)
{
    pline *pp = t->state;
    const int P = t->size, n = t->nsteps;
    double *all = malloc((size_t)PB_NREC * P * n * sizeof *all);
    if (!all) SL_FATAL("out of memory");
    SL_CHECK_MPI(MPI_Allgather(pp->st.win, PB_NREC * n, MPI_DOUBLE, all, PB_NREC * n, MPI_DOUBLE, t->ctx->comm));
    pipe_bubble_figures(all, pp->p, pp->d, n, (int)t->ctx->opt.iters, f);
    free(all);
}

/* v[0..n) times scale, comma-separated, with prec decimals. */
static void list_str(char *buf, size_t len, const double *v, int n, double scale, int prec)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%.*f", i ? "," : "", prec, v[i] * scale);
}

/* Each stage's idle and stage 0's waits for gradients: in the row, and as a line before it, so
 * that which stage is the busiest, and whether the others wait for it, needs no trace viewer. */
static void stage_figures(sl_train *t, const pipe_bubble_figs *bf, sl_result *res)
{
    const pline *pp = t->state;
    char buf[512];
    list_str(buf, sizeof buf, bf->stage_idle, pp->p, 100, 1);
    sl_result_param_str(res, "idle_stages", buf);
    sl_result_metric(res, "busiest_stage", bf->busiest, "stage");
    sl_result_metric(res, "s0_wait_first_backward", bf->wait_first_b[0], "s");
    sl_result_metric(res, "s0_wait_later_backwards", bf->wait_later_b[0], "s");
    if (pp->p > 1)
        sl_note(t->ctx, "%s: idle %% of W by stage %s (busiest s%d); stage 0 waited %.2f ms for its first "
                        "backward's gradient, %.2f ms before its later ones (medians over the timed steps)",
                schedule_names[pp->st.sched], buf, bf->busiest, bf->wait_first_b[0] * 1e3,
                bf->wait_later_b[0] * 1e3);
}

static void row(sl_train *t, sl_result *res)
{
    pline *pp = t->state;
    stage *st = &pp->st;
    const geometry *g = &st->g;
    const int p = pp->p;
    /* per stage (max over replicas): in flight, activation peak, stash bytes, bytes sent */
    double *mine = calloc(4 * (size_t)p, sizeof *mine), *all = calloc(4 * (size_t)p, sizeof *all);
    if (!mine || !all) SL_FATAL("out of memory");
    mine[pp->s] = st->inflight_peak;
    mine[p + pp->s] = st->activ_peak;
    mine[2 * p + pp->s] = (double)st->nstash * st->nparams * st->es;
    mine[3 * p + pp->s] = pp->sent;
    SL_CHECK_MPI(MPI_Allreduce(mine, all, 4 * p, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    double *model = calloc((size_t)p, sizeof *model), peak = 0, pmodel = 0, activ = 0, stash = 0, sent = 0;
    if (!model) SL_FATAL("out of memory");
    for (int s = 0; s < p; s++) {
        model[s] = inflight_model(pp, s);
        peak = all[s] > peak ? all[s] : peak;
        pmodel = model[s] > pmodel ? model[s] : pmodel;
        activ = all[p + s] > activ ? all[p + s] : activ;
        stash += all[2 * p + s];
        sent = all[3 * p + s] > sent ? all[3 * p + s] : sent;
    }
    char buf[512];
    sl_result_param_str(res, "schedule", schedule_names[st->sched]);
    sl_result_param_num(res, "stages", p);
    sl_result_param_num(res, "dp", pp->d);
    sl_result_param_num(res, "micro_batches", g->m);
    sl_result_param_num(res, "virtual", g->v);
    sl_result_param_num(res, "recompute", opt_recompute);
    int base = one_rank_layers[st->sched]; /* rank 0's; 0 where no baseline ran */
    SL_CHECK_MPI(MPI_Bcast(&base, 1, MPI_INT, 0, t->ctx->comm));
    if (base) sl_result_param_num(res, "one_rank_layers", base);
    list_str(buf, sizeof buf, all, p, 1, 0);
    sl_result_param_str(res, "inflight_stages", buf);
    list_str(buf, sizeof buf, model, p, 1, 0);
    sl_result_param_str(res, "inflight_formula", buf);
    list_str(buf, sizeof buf, all + p, p, 1, 0);
    sl_result_param_str(res, "activ_peak_stages", buf);
    /* the driver's phase bubble (the slowest rank's time blocked on a receive, over the step)
     * is replaced by the busiest stage's idle time in W */
    pipe_bubble_figs bf;
    pipe_bubble(t, &bf);
    for (int i = 0; i < res->nmetrics; i++)
        if (strcmp(res->metrics[i].name, "bubble") == 0) res->metrics[i].value = bf.idle;
    sl_result_metric(res, "bubble_frac", bf.frac, "fraction");
    sl_result_metric(res, "idle_frac", bf.mean, "fraction");
    sl_result_metric(res, "pipe_time", bf.span, "s");
    stage_figures(t, &bf, res);
    pipe_bubble_free(&bf);
    double formula = st->sched == S_PIPEDREAM ? 0 : (double)(p - 1) / (g->v * g->m + p - 1);
    sl_result_metric(res, "bubble_formula", formula, "fraction");
    sl_result_metric(res, "inflight_peak", peak, "micro-batches");
    sl_result_metric(res, "inflight_formula", pmodel, "micro-batches");
    sl_result_metric(res, "activ_peak", activ, "bytes");
    if (st->sched == S_PIPEDREAM) {
        double want = 0;
        for (int s = 0; s < p - 1; s++) {
            int gl0, gl1;
            chunk_model_layers(s, p, &gl0, &gl1);
            want += (double)(p - s) * sl_mlp_range_size(t->m, gl0, gl1) * sl_train_esize(t);
        }
        sl_result_metric(res, "stash_bytes", stash, "bytes");
        sl_result_metric(res, "drift", drift_from_serial(t), "ratio");
        sl_result_metric(res, "stash_formula", want, "bytes");
    }
    /* The stage and replica communicators are the technique's, so the driver's count (of its own
     * communicator) is replaced by theirs; the MPI library's and NCCL's all-reduce between
     * replicas cannot be observed (n/a). */
    sl_coll impl = sl_comm_impl(pp->dp_comm);
    if (pp->d > 1 && (impl == SL_COLL_MPI || impl == SL_COLL_NCCL)) sent = NAN;
    for (int i = 0; i < res->nmetrics; i++)
        if (strcmp(res->metrics[i].name, "bytes_sent") == 0) res->metrics[i].value = sent / t->nsteps;
    /* the last step's loss over the global batch (the last stages' parts): f32 beside f16/bf16;
     * none in sleep mode, whose timed steps compute no loss (n/a) */
    double loss = 0;
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "final_loss", sl_compute_sleep_mode() ? NAN : loss, "loss");
    free(mine);
    free(all);
    free(model);
}

static void validate(sl_ctx *ctx)
{
    const int P = ctx->nranks;
    if (sl_gpt_selected() && sl_compute_sleep_mode())
        sl_usage_error("--compute sleep: calibrates the MLP's layers; with --model gpt use --compute real");
    if (sl_gpt_selected() && sl_gpt_resolve(&sl_gpt_opt).dropout > 0 && opt_dp > 1 &&
        (opt_schedules & (1u << S_PIPEDREAM)))
        sl_usage_error("--dropout: pipedream's reference runs its --dp %lld replicas' rows as one batch, whose "
                       "dropout masks differ from the run's; use --dp 1 or --schedule without pipedream", opt_dp);
    if (opt_micro < 1) sl_usage_error("--micro-batches %lld: expected at least 1", opt_micro);
    if (opt_stages == 0) opt_stages = P / opt_dp > 0 ? P / opt_dp : 1;
    if (opt_stages * opt_dp != P)
        sl_usage_error("--stages %lld x --dp %lld = %lld ranks, but %d are running", opt_stages, opt_dp,
                       opt_stages * opt_dp, P);
    if (opt_virtual > 0 && !(opt_schedules & (1u << S_INTERLEAVED)))
        sl_usage_error("--virtual: only the interleaved schedule has chunks (--schedule interleaved)");
    const long long L = units();
    if (opt_stages > L) sl_usage_error("--stages %lld: more stages than --layers %lld", opt_stages, L);
    if ((opt_schedules & (1u << S_INTERLEAVED)) && opt_stages * virtual_of(S_INTERLEAVED) > L) {
        if (opt_schedules == (1u << S_INTERLEAVED) || opt_virtual > 0)
            sl_usage_error("--virtual %d: %lld stages x %d chunks is more than --layers %lld",
                           virtual_of(S_INTERLEAVED), opt_stages, virtual_of(S_INTERLEAVED), L);
        opt_schedules &= ~(1u << S_INTERLEAVED);
        sl_note(ctx, "skipping interleaved: %lld stages x %d chunks need more than --layers %lld", opt_stages,
                virtual_of(S_INTERLEAVED), L);
    }
    if (opt_balance) {
        long long sum = 0, n = parse_balance(opt_balance);
        if (n < 0)
            sl_usage_error("--balance %s: expected a comma-separated list of layer counts, each at least 1 "
                           "(a,b,c; no empty entry)", opt_balance);
        for (int i = 0; i < n; i++) sum += balance[i];
        nbalance = (int)n;
        long long want = opt_stages * ((opt_schedules & (1u << S_INTERLEAVED)) ? virtual_of(S_INTERLEAVED) : 1);
        if (n != want || sum != L)
            sl_usage_error("--balance %s: expected %lld counts (stages%s) summing to --layers %lld", opt_balance,
                           want, want > opt_stages ? " x chunks" : "", L);
        if (want > opt_stages && (opt_schedules & ~(1u << S_INTERLEAVED)))
            sl_usage_error("--balance: per-chunk counts need --schedule interleaved alone");
    }
    const long long B = sl_train_opt.scaling == 1 ? sl_train_opt.batch : sl_train_opt.batch * opt_dp;
    if (B / opt_dp < opt_micro)
        sl_usage_error("--micro-batches %lld: a replica's %lld samples of the batch are fewer", opt_micro, B / opt_dp);
}

/* The step as the performance model reads it (perf_model.h): every stage of this rank's replica
 * on a lane of its own, running its list as pipe_step does — a forward's layers (the first
 * chunk's input loaded before the list; the input copied to the head of the kept block; only
 * that input kept with --recompute), a backward's layers (the forward again first with
 * --recompute), each waiting for its neighbour's activation or gradient and sending its own.
 * The bubble is then the lanes' waits, from the neighbours' predicted compute and the
 * exchanges' alpha-beta. The step ends with the replicas' all-reduce (--dp) and the optimizer;
 * pipedream's step is a middle one of its stream (operations [k 2m, (k+1) 2m) of each list),
 * updating after every backward, what earlier steps sent already there at its start. */
static int pm_tag(const geometry *g, int mb, int global, int grad) { return (mb * g->p * g->v + global) * 2 + grad; }

/* Position of operation (kind, mb, chunk) in a list, or -1. */
static int pm_find(const op *ops, int n, char kind, int mb, int chunk)
{
    for (int i = 0; i < n; i++)
        if (ops[i].kind == kind && ops[i].mb == mb && ops[i].chunk == chunk) return i;
    return -1;
}

static void pm_schedule(const sl_train *t, sl_pm_sched *sc)
{
    const pline *pp = t->state;
    const stage *me = &pp->st;
    const geometry *g = &me->g;
    const int p = g->p, G = p * g->v, pipedream = me->sched == S_PIPEDREAM;
    const double es = (double)me->es;
    const int cap = ops_capacity(g);
    op *ops = malloc((size_t)p * (size_t)cap * sizeof *ops);
    int *n = malloc((size_t)p * sizeof *n);
    if (!ops || !n) SL_FATAL("out of memory");
    for (int s = 0; s < p; s++) n[s] = builders[me->sched](g, s, ops + (size_t)s * cap);
    const int k = t->nsteps / 2, lo = pipedream ? 2 * g->m * k : 0;
    for (int s = 0; s < p; s++) {
        const op *list = ops + (size_t)s * cap;
        const int hi = pipedream ? lo + 2 * g->m : n[s];
        stage cs; /* stage s's chunks */
        place_chunks(t->m, g, s, &cs);
        const size_t nparams = cs.nparams;
        sl_pm_lane(sc, s);
        for (int i = lo; i < hi && i < n[s]; i++) /* the data, loaded before the list runs */
            if (list[i].kind == 'F' && list[i].chunk == 0 && s == 0) sl_pm_load(t, sc, mb_rows(t, me, list[i].mb % g->m));
        for (int i = lo; i < hi && i < n[s]; i++) {
            const op *o = &list[i];
            const int c = o->chunk, gc = c * p + s, rows = mb_rows(t, me, o->mb % g->m);
            const double in = (double)sl_acts_io_bytes(t, cs.ch[c].l0, rows);
            /* a neighbour's message: waited for unless an earlier step of the stream sent it */
            const int from = o->kind == 'F' ? gc - 1 : gc + 1;
            if (from >= 0 && from < G && (o->kind == 'F' || gc < G - 1)) {
                const op *peer = ops + (size_t)(from % p) * cap;
                const int at = pm_find(peer, n[from % p], o->kind, o->mb, from / p);
                if (!pipedream || at >= lo) sl_pm_recv(sc, from % p, pm_tag(g, o->mb, gc, o->kind == 'B'));
            }
            if (o->kind == 'F') {
                if (pipedream && c == 0 && s < p - 1) sl_pm_bytes(sc, 2.0 * (double)nparams * es); /* the stash */
                sl_pm_bytes(sc, 2.0 * in);
                for (int l = cs.ch[c].l0; l < cs.ch[c].l1; l++) sl_pm_layer_forward(t, sc, l, rows);
                if (gc == G - 1) sl_pm_loss(t, sc, rows);
                if (opt_recompute) sl_pm_bytes(sc, 2.0 * in);
                if (gc < G - 1)
                    sl_pm_send(sc, (gc + 1) % p, pm_tag(g, o->mb, gc + 1, 0),
                               (double)boundary_elems(t, me, cs.ch[c].l1, rows));
                continue;
            }
            if (opt_recompute) {
                sl_pm_bytes(sc, 2.0 * in);
                for (int l = cs.ch[c].l0; l < cs.ch[c].l1; l++) sl_pm_layer_forward(t, sc, l, rows);
            }
            for (int l = cs.ch[c].l1 - 1; l >= cs.ch[c].l0; l--) sl_pm_layer_backward(t, sc, l, rows);
            if (gc > 0)
                sl_pm_send(sc, (gc - 1) % p, pm_tag(g, o->mb, gc - 1, 1),
                           (double)boundary_elems(t, me, cs.ch[c].l0, rows));
            if (pipedream) {
                if (pp->d > 1) sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)nparams);
                sl_pm_optimizer(t, sc, nparams);
                sl_pm_bytes(sc, (double)nparams * es); /* the gradient zeroed */
            }
        }
        if (pipedream) continue;
        if (pp->d > 1) sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)nparams);
        sl_pm_optimizer(t, sc, nparams);
        sl_pm_bytes(sc, (double)nparams * es);
    }
    free(ops);
    free(n);
}

static const sl_column columns[] = {
    SL_TRAIN_COLUMNS_RUN,
    SL_COL("dtype", "dtype", 5),
    {"m", "", "micro_batches", 4, 0, 0},
    SL_TRAIN_COLUMNS_STEP,
    SL_TRAIN_COLUMNS_PRED,
    {"bubble", "ms", "bubble", 9, 2, 1e3},
    {"bubble", "%", "bubble_frac", 7, 1, 100},
    {"formula", "%", "bubble_formula", 8, 1, 100},
    {"idle", "%", "idle_frac", 7, 1, 100},
    {"inflight", "mb", "inflight_peak", 9, 0, 0},
    {"activ", "MB", "activ_peak", 8, 3, 1e-6},
    SL_TRAIN_COLUMNS_BYTES,
    {"loss", "", "final_loss", 10, 6, 0},
    SL_COL("skipped", "skipped_steps", 7),
    SL_TRAIN_COLUMNS_CHECK,
};

static const sl_technique pipeline = {
    .program = {.name = "pipeline", .extra = pipe_opts, .validate = validate,
                .summary = "pipeline parallelism: GPipe, 1F1B, interleaved 1F1B, PipeDream (weight stashing)",
                SL_TRAIN_PROGRAM_USES, .default_coll = SL_COLL_MPI, .default_iters = 10, .default_warmup = 2},
    /* every schedule trains in f16/bf16 (pipedream: checked against its own simulation, in the
     * run's dtype, with the same tolerances: reference() says why) */
    .mixed_variants = (1u << S_GPIPE) | (1u << S_1F1B) | (1u << S_INTERLEAVED) | (1u << S_PIPEDREAM),
    .variants = schedule_names, .nvariants = NSCHEDULES, .variant_mask = &opt_schedules,
    .data_ranks = data_ranks, .setup = setup, .step = step, .free = release,
    .weights = weights, .gather_weights = gather_weights, .reference = reference,
    .bytes_model = bytes_model, .schedule = pm_schedule, .schedule_launched_only = 1, .row = row,
    /* --compute sleep: the layers, the loss and the optimizer step slept in the timed steps */
    .sleep_mode = 1, .reset = reset, .calibrate = calibrate,
    .trains_gpt = 1, /* blocks per stage; the embedding on the first, the LM head on the last */
    .columns = columns, .ncolumns = (int)(sizeof columns / sizeof columns[0]),
};

/* Equal stages by default (8 layers of one width, inputs and outputs as wide), so that the
 * bubble is the formula's on 2, 4 or 8 stages. */
int main(int argc, char **argv)
{
    sl_train_opt.layers = 8;
    sl_train_opt.width = sl_train_opt.inputs = sl_train_opt.outputs = 1024;
    sl_train_opt.batch = 128;
    sl_gpt_opt.stages = &opt_stages; /* a stage holds whole GPT blocks */
    return sl_train_main(&pipeline, argc, argv);
}
