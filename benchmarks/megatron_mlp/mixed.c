/* mixed.c — megatron_mlp -d f16|bf16: the tensor-parallel MLP blocks in Megatron-LM's mixed
 * precision (plain; overlap and seqpar at the end of the file; megatron_mlp.c has the f32
 * technique and its f / g operators).
 *
 * What each rank holds, as Megatron's fp16/bf16 mode (and kernels/mlp_mixed.h) does:
 *   its slices A_r, a_r, B_r, b in the 16-bit type, cast from an f32 master copy of the same
 *   slices, which the optimizer (and its f32 state) updates; activations and gradients in the
 *   16-bit type; every GEMM on 16-bit operands accumulating in f32, rounded once.
 * A rank's slices are themselves an MLP: the 2L layers h -> c -> h -> c ... -> h (c = f/t) of
 * kernels/mlp_mixed.h, whose flat layout is slices.h's. So the column-parallel layer
 * U_r = X·A_r^T + a_r, Y_r = GeLU(U_r) is that model's layer 2i, and its backward (dA_r, da_r and
 * the partial dX_r = dU_r·A_r) is the same layer's backward; the row-parallel layer is layer
 * 2i+1's backward (dB_r = dZ^T·Y_r, db, dY_r = dZ·B_r) but not its forward, which must leave b
 * out of the partial sums (below). What is communicated, in the 16-bit type:
 *   g forward   all-reduce of the partial Z = Y_r·B_r^T  [n, h]
 *   f backward  all-reduce of the partial dX_r            [n, h]
 *   replicas    all-reduce of the 16-bit gradient slices  [np]
 * so every collective moves 2 bytes an element: exactly half of the f32 run's bytes per block
 * (the row's tp_bytes_block beside tp_bytes_block_model, whose element size is the dtype's).
 * The sums widen each pair of 16-bit operands to f32 and round back at each hop, as ddp's 16-bit
 * gradient all-reduce does (ddp/mixed.c says why not widen before sending: it would double the
 * bytes). Then b is added once, and the residual X' = X + Z, in f32 from the 16-bit operands,
 * rounded once into the 16-bit stream.
 *
 * Loss scaling (f16): the loss's gradient is multiplied by the scale before backward; the
 * unscaled gradients are checked for inf/NaN on every rank, and the flags OR-ed over all ranks,
 * tensor-parallel and data-parallel alike (sl_train_overflow_any, through the world): a group's
 * ranks hold different slices, so one rank's overflow is invisible to the others, and a step
 * applied on some ranks and skipped on others would leave the slices of one model from two
 * different steps. Every rank applies or skips together.
 *
 * The serial reference is these functions with t = 1 on the whole model and the global batch
 * (tp NULL: nothing communicated), with the same scaler: the check (check.c) compares the
 * trained master weights with it, and one step at the trained weights (output, input gradient,
 * every weight gradient) with its step at the same weights, within bounds stated there.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixed.h"
#include "serial.h"
#include "slices.h"

static void *at(const sl_mixed *mx, const void *p, size_t off)
{
    return (char *)p + off * sl_dtype_size(mx->dt);
}

static void span(sl_train *t, const char *name, double t0)
{
    if (t) mm_compute_span(t, name, t0); /* serially (t NULL) nothing is recorded */
}

/* The overlap and seqpar variants' blocks (at the end of the file). */
static double variant_forward_backward(mm_mixed_net *b, sl_train *t, float norm, float scale, void **dx0);
static void seqpar_init(mm_mixed_net *b, int nloc);
static void seqpar_release(mm_mixed_net *b);
static const void *net_output(const mm_mixed_net *b);
static double seqpar_activ_delta(const mm_mixed_net *b, int n);

static void net_init(mm_mixed_net *b, const sl_mlp *m, sl_dtype dt, int n, uint64_t seed, const sl_optim *o)
{
    sl_mixed_init(&b->mx, m, dt, 1, n, seed, o);
    const size_t nh = (size_t)n * m->dims[0];
    b->dres = sl_k_malloc(m->be, SL_MEM_ACTIV, nh * sl_dtype_size(dt));
    b->x = sl_k_malloc(m->be, SL_MEM_DATA, nh * sizeof(float));
    b->y = sl_k_malloc(m->be, SL_MEM_DATA, nh * sizeof(float));
}

static void net_free(mm_mixed_net *b)
{
    const sl_backend be = b->m.be;
    sl_mixed_free(&b->mx);
    sl_k_free(be, b->dres);
    sl_k_free(be, b->x);
    sl_k_free(be, b->y);
}

/* Block i forward: x[2i] -> x[2i+2] (the mixed model's activations). */
static void block_forward(mm_mixed_net *b, sl_train *t, int i)
{
    sl_mixed *mx = &b->mx;
    const sl_mlp *m = &b->m;
    const int la = 2 * i, lb = la + 1, n = mx->batch, h = m->dims[0], c = m->dims[1];
    const size_t nh = (size_t)n * h;
    const sl_dtype dt = mx->dt;
    void *X = mx->x[la], *Z = mx->x[lb + 1];
    const void *B = at(mx, mx->w16, m->w_off[lb]), *bias = at(mx, mx->w16, m->b_off[lb]);
    double t0 = sl_now();
    /* column-parallel: U_r and Y_r, this rank's c features, nothing communicated */
    sl_mixed_layer_forward(mx, la, at(mx, mx->w16, m->w_off[la]));
    /* row-parallel: the partial Z = Y_r·B_r^T [n, h] in f32, rounded into dt to be summed */
    sl_k_gemm(m->be, 0, 1, n, h, c, 1.0f, mx->x[lb], c, B, c, 0.0f, mx->t0, h, dt, SL_F32);
    sl_k_cast(m->be, nh, mx->t0, SL_F32, Z, dt, &mx->cnt.act);
    mx->cnt.act_n += nh;
    span(t, "forward (16-bit)", t0);
    if (b->tp) {
        sl_k_sync(m->be);
        t0 = sl_now();
        mm_comm_span(t, sl_coll_allreduce(b->tp, Z, Z, nh, dt, SL_OP_SUM), "g: allreduce Z (16-bit)", t0);
    }
    /* b once, after the sum, and the residual: X' = X + Z + b in f32, rounded once */
    t0 = sl_now();
    sl_k_cast(m->be, nh, Z, dt, mx->t0, SL_F32, NULL);
    sl_k_cast(m->be, (size_t)h, bias, dt, mx->bias32, SL_F32, NULL);
    sl_k_bias_add(m->be, n, h, mx->t0, mx->bias32);
    sl_k_cast(m->be, nh, X, dt, mx->t1, SL_F32, NULL);
    sl_k_add(m->be, SL_F32, nh, mx->t1, mx->t0);
    sl_k_cast(m->be, nh, mx->t0, SL_F32, Z, dt, &mx->cnt.act);
    mx->cnt.act_n += nh;
    span(t, "residual (16-bit)", t0);
}

/* Block i backward from d = dL/dx[2i+2] (dt [n, h], kept): dL/dx[2i] into dprev. */
static void block_backward(mm_mixed_net *b, sl_train *t, int i, void *d, void *dprev)
{
    sl_mixed *mx = &b->mx;
    const sl_mlp *m = &b->m;
    const int la = 2 * i, lb = la + 1;
    const size_t nh = (size_t)mx->batch * m->dims[0];
    void *dy = mx->dbuf[1]; /* dY_r [n, c]: neither d nor dprev */
    double t0 = sl_now();
    /* g backward is the identity: dZ = d whole on every rank; dB_r, db, dY_r = dZ·B_r. The layer
     * has no activation, so d is read, not overwritten. */
    sl_mixed_layer_backward(mx, lb, d, dy, at(mx, mx->w16, m->w_off[lb]), mx->g32 + m->w_off[lb],
                            at(mx, mx->g16, m->w_off[lb]));
    /* dU_r = dY_r·GeLU'(U_r); dA_r, da_r; this rank's partial dX_r = dU_r·A_r */
    sl_mixed_layer_backward(mx, la, dy, dprev, at(mx, mx->w16, m->w_off[la]), mx->g32 + m->w_off[la],
                            at(mx, mx->g16, m->w_off[la]));
    span(t, "backward (16-bit)", t0);
    if (b->tp) {
        sl_k_sync(m->be);
        t0 = sl_now();
        mm_comm_span(t, sl_coll_allreduce(b->tp, dprev, dprev, nh, mx->dt, SL_OP_SUM), "f: allreduce dX (16-bit)",
                     t0);
    }
    t0 = sl_now();
    sl_k_add(m->be, mx->dt, nh, d, dprev); /* the residual's own path, widened and rounded once */
    span(t, "residual (16-bit)", t0);
}

/* Forward, the loss (norm · sum of squares over the net's tokens) and backward from its
 * gradient times scale: the scaled 16-bit gradient slices in g16. Returns the loss and, in
 * *dx0, dL/dx[0] (dt, scaled). */
static double net_forward_backward(mm_mixed_net *b, sl_train *t, float norm, float scale, void **dx0)
{
    sl_mixed *mx = &b->mx;
    const int L = b->m.nlayers / 2;
    sl_mixed_input(mx, b->x);
    for (int i = 0; i < L; i++) block_forward(b, t, i);
    double t0 = sl_now();
    const double loss = sl_mixed_loss(mx, b->y, norm, scale);
    span(t, "loss", t0);
    void *d = sl_mixed_dout(mx), *dprev = b->dres; /* dout is dbuf[0]: dbuf[1] is dY's */
    for (int i = L - 1; i >= 0; i--) {
        block_backward(b, t, i, d, dprev);
        void *swap = d;
        d = dprev;
        dprev = swap;
    }
    *dx0 = d;
    return loss;
}

/* The distributed step ------------------------------------------------------------------ */

void mm_mixed_setup(sl_train *t, mm *s)
{
    mm_mixed *d = calloc(1, sizeof *d);
    if (!d) SL_FATAL("out of memory");
    s->mixed = d;
    mm_mixed_net *b = &d->net;
    if (mm_model_init(&b->m, t->be, s->L, s->h, s->c)) SL_FATAL("megatron_mlp: slices %d x %d", s->h, s->c);
    if (b->m.nparams != s->np) SL_FATAL("megatron_mlp: slice model %zu elements, slices %zu", b->m.nparams, s->np);
    net_init(b, &b->m, t->dtype, s->n, (uint64_t)sl_train_opt.seed, &t->optim);
    b->tp = s->tp;
    if (t->variant == V_SEQPAR) seqpar_init(b, s->nloc);
    /* the master copy: this rank's slices of the whole model's initial weights, and their cast */
    mm_slice_init(t->m, s->t, s->tr, (uint64_t)sl_train_opt.seed, b->mx.master);
    sl_k_cast(t->be, s->np, b->mx.master, SL_F32, b->mx.w16, t->dtype, NULL);
    s->params = b->mx.master;
    s->grads = b->mx.g32;
    s->optim = b->mx.state;
    sl_train_mixed_init(&d->ms, t->dtype);
}

void mm_mixed_free(sl_train *t, mm *s)
{
    (void)t;
    seqpar_release(&s->mixed->net);
    net_free(&s->mixed->net);
    free(s->mixed);
    s->mixed = NULL;
    s->params = s->grads = s->optim = NULL;
}

/* Forward and backward on this rank's tokens of step t->step; the gradient slices summed over
 * the replicas (16-bit); dL/dx[0] (dt, scaled) returned. */
static void *forward_backward(sl_train *t, mm *s, float scale, double *loss)
{
    mm_mixed_net *b = &s->mixed->net;
    sl_train_load(t, s->first, s->nloc, b->x, b->y);
    void *dx0;
    *loss = variant_forward_backward(b, t, 1.0f / ((float)t->global_batch * (float)s->h), scale, &dx0);
    if (s->d > 1) {
        sl_k_sync(t->be);
        const double t0 = sl_now();
        mm_replicas_span(t, sl_coll_allreduce(s->dp, b->mx.g16, b->mx.g16, s->np, t->dtype, SL_OP_SUM),
                         "allreduce (replicas, 16-bit)", t0);
    }
    return dx0;
}

void mm_mixed_step(sl_train *t, mm *s)
{
    mm_mixed *d = s->mixed;
    sl_mixed *mx = &d->net.mx;
    const float scale = (float)d->ms.sc.scale;
    double loss;
    forward_backward(t, s, scale, &loss);
    if (s->tr == 0 || t->variant == V_SEQPAR) t->loss += loss; /* plain's group shares one loss: counted once */
    double t0 = sl_now();
    sl_optim o;
    if (sl_train_mixed_decide(t, &d->ms, sl_mixed_unscale(mx, scale) > 0, &o)) sl_mixed_apply(mx, &o);
    mm_compute_span(t, "unscale + optimizer (f32 master)", t0);
}

void mm_mixed_check_pass(sl_train *t, mm *s, float **out, float **dx)
{
    mm_mixed *d = s->mixed;
    sl_mixed *mx = &d->net.mx;
    const float scale = (float)d->ms.sc.scale;
    const size_t nh = (size_t)s->nloc * s->h;
    double loss;
    void *dx0 = forward_backward(t, s, scale, &loss);
    sl_mixed_unscale(mx, scale);
    *out = sl_k_malloc(t->be, SL_MEM_OTHER, nh * sizeof(float));
    *dx = sl_k_malloc(t->be, SL_MEM_OTHER, nh * sizeof(float));
    sl_k_cast(t->be, nh, net_output(&d->net), t->dtype, *out, SL_F32, NULL);
    sl_k_cast(t->be, nh, dx0, t->dtype, *dx, SL_F32, NULL);
    sl_k_scale(t->be, SL_F32, nh, *dx, 1.0 / scale);
    sl_k_sync(t->be);
}

/* The serial blocks ---------------------------------------------------------------------- */

/* The whole model in dt on B tokens, from the seed's weights; the run's scaler. */
static void serial_init(mm_mixed_net *b, const sl_mlp *m, sl_dtype dt, int B, uint64_t seed, const sl_optim *o)
{
    memset(b, 0, sizeof *b);
    b->m = *m;
    net_init(b, &b->m, dt, B, seed, o);
}

void mm_mixed_serial_pass(const sl_mlp *m, sl_task *task, sl_dtype dt, int B, const float *params,
                          float scale, float **out, float **dx, float **grads)
{
    const sl_optim none = {0};
    mm_mixed_net b;
    serial_init(&b, m, dt, B, 0, &none);
    const size_t nh = (size_t)B * m->dims[0];
    sl_k_memcpy(m->be, b.mx.master, params, m->nparams * sizeof(float), SL_K_D2D);
    sl_k_cast(m->be, m->nparams, params, SL_F32, b.mx.w16, dt, NULL);
    sl_task_batch(task, 0, B, b.x, b.y);
    void *dx0;
    net_forward_backward(&b, NULL, 1.0f / ((float)B * (float)m->dims[0]), scale, &dx0);
    sl_mixed_unscale(&b.mx, scale);
    float *o32 = sl_k_malloc(m->be, SL_MEM_OTHER, nh * sizeof(float));
    float *d32 = sl_k_malloc(m->be, SL_MEM_OTHER, nh * sizeof(float));
    sl_k_cast(m->be, nh, b.mx.x[m->nlayers], dt, o32, SL_F32, NULL);
    sl_k_cast(m->be, nh, dx0, dt, d32, SL_F32, NULL);
    sl_k_scale(m->be, SL_F32, nh, d32, 1.0 / scale);
    *out = sl_k_download(m->be, o32, nh * sizeof(float));
    *dx = sl_k_download(m->be, d32, nh * sizeof(float));
    *grads = sl_k_download(m->be, b.mx.g32, m->nparams * sizeof(float));
    sl_k_free(m->be, o32);
    sl_k_free(m->be, d32);
    net_free(&b);
}

double mm_mixed_serial_train(const sl_mlp *m, sl_task *task, const sl_optim *o, sl_dtype dt, int B,
                             int steps, uint64_t seed, float *params, long *skipped)
{
    mm_mixed_net b;
    serial_init(&b, m, dt, B, seed, o);
    sl_loss_scaler sc;
    sl_train_scaler(dt, &sc);
    int applied = 0;
    double loss = NAN;
    for (int s = 0; s < steps; s++) {
        sl_task_batch(task, (uint64_t)s * (uint64_t)B, B, b.x, b.y);
        void *dx0;
        loss = net_forward_backward(&b, NULL, 1.0f / ((float)B * (float)m->dims[0]), (float)sc.scale, &dx0);
        const size_t bad = sl_mixed_unscale(&b.mx, (float)sc.scale);
        if (sl_loss_scaler_update(&sc, bad > 0)) {
            const sl_optim os = sl_optim_for_step(o, applied++);
            sl_mixed_apply(&b.mx, &os);
        }
    }
    sl_k_memcpy(m->be, params, b.mx.master, m->nparams * sizeof(float), SL_K_D2D);
    sl_k_sync(m->be);
    net_free(&b);
    *skipped = sc.skipped;
    return loss;
}

/* The row and the model -------------------------------------------------------------------- */

void mm_mixed_memory(const sl_train *t, const mm *s, double bytes[SL_MEM_NCATS])
{
    const mm_mixed_net *b = &s->mixed->net;
    const sl_mlp_bytes mb = sl_mixed_memory(&b->m, t->dtype, 1, s->n, &t->optim);
    bytes[SL_MEM_PARAMS] = (double)mb.params; /* 2 (16-bit) + 4 (master) bytes per element */
    bytes[SL_MEM_GRADS] = (double)mb.grads;   /* 2 (16-bit) + 4 (unscaled f32) */
    bytes[SL_MEM_OPTIM] = (double)mb.optim;
    bytes[SL_MEM_ACTIV] = (double)mb.activ + (double)s->n * s->h * (double)sl_dtype_size(t->dtype); /* + dres */
    bytes[SL_MEM_ACTIV] += seqpar_activ_delta(b, s->n);
}

void mm_mixed_row(sl_train *t, mm *s, sl_result *res)
{
    sl_result_param_str(res, "precision", "mixed");
    sl_result_param_str(res, "tp_allreduce",
                        t->variant == V_SEQPAR
                            ? "16-bit reduce-scatters and all-gathers, summed pairwise in f32 and rounded at each hop"
                            : "16-bit, summed pairwise in f32 and rounded at each hop");
    sl_train_mixed_row(t, &s->mixed->ms, res);
}

/* The overlap variant ---------------------------------------------------------------------- */

/* Block i backward as block_backward, but f's all-reduce of the partial dX_r (16-bit) started
 * non-blocking as soon as dX_r = dU_r·A_r is rounded, and dA_r = dU_r^T·X computed in pieces of
 * A_r's rows meanwhile, testing the all-reduce between them (megatron_mlp.c's overlap, on the
 * 16-bit operands). The operations and their roundings are sl_mixed_layer_backward's, in
 * another order: dX first, then dW, db and their rounding into g16. */
static void block_backward_overlap(mm_mixed_net *b, sl_train *t, int i, void *d, void *dprev)
{
    enum { PIECES = 8 };
    sl_mixed *mx = &b->mx;
    const sl_mlp *m = &b->m;
    const sl_backend be = m->be;
    const sl_dtype dt = mx->dt;
    const int la = 2 * i, lb = la + 1, n = mx->batch, h = m->dims[0], c = m->dims[1];
    const size_t nh = (size_t)n * h, nc = (size_t)n * c;
    void *du = mx->dbuf[1]; /* dY_r, then dU_r [n, c] */
    const void *A = at(mx, mx->w16, m->w_off[la]);
    float *dA = mx->g32 + m->w_off[la], *da = mx->g32 + m->b_off[la];
    double t0 = sl_now();
    sl_mixed_layer_backward(mx, lb, d, du, at(mx, mx->w16, m->w_off[lb]), mx->g32 + m->w_off[lb],
                            at(mx, mx->g16, m->w_off[lb]));
    /* dU_r = dY_r·GeLU'(U_r) in f32 from the 16-bit operands, rounded once */
    sl_k_cast(be, nc, du, dt, mx->t0, SL_F32, NULL);
    sl_k_cast(be, nc, mx->z[la], dt, mx->t1, SL_F32, NULL);
    sl_k_act_backward(be, m->act[la], nc, mx->t1, mx->t0, mx->t0);
    sl_k_cast(be, nc, mx->t0, SL_F32, du, dt, &mx->cnt.agrad);
    /* this rank's partial dX_r = dU_r·A_r [n, h] first: it is what the group waits for */
    sl_k_gemm(be, 0, 0, n, h, c, 1.0f, du, c, A, h, 0.0f, mx->t1, h, dt, SL_F32);
    sl_k_cast(be, nh, mx->t1, SL_F32, dprev, dt, &mx->cnt.agrad);
    mx->cnt.agrad_n += nc + nh;
    span(t, "backward dX (16-bit)", t0);
    t0 = sl_now();
    sl_coll_req *req;
    int done = 0;
    double t_done = 0;
    sl_train_coll_ok(sl_coll_iallreduce(b->tp, dprev, dprev, nh, dt, SL_OP_SUM, &req), "f: iallreduce dX (16-bit)");
    sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);
    /* dA_r [c, h] = dU_r^T·X, f32 accumulation, a piece of rows at a time */
    for (int p = 0; p < PIECES; p++) {
        const int r0 = (int)((long long)c * p / PIECES), r1 = (int)((long long)c * (p + 1) / PIECES);
        double g0 = sl_now();
        if (r1 > r0)
            sl_k_gemm(be, 1, 0, r1 - r0, h, n, 1.0f, at(mx, du, (size_t)r0), c, mx->x[la], h, 0.0f,
                      dA + (size_t)r0 * h, h, dt, SL_F32);
        span(t, "backward dA (16-bit)", g0);
        if (!done) {
            g0 = sl_now();
            sl_train_coll_ok(sl_coll_test(req, &done), "sl_coll_test");
            const double g1 = sl_now();
            sl_train_record(t, SL_PHASE_EXPOSED, g1 - g0);
            if (done) t_done = g1;
        }
    }
    /* da_r = sum over tokens of dU_r, then the layer's dA_r, da_r rounded into g16 */
    double g0 = sl_now();
    sl_k_cast(be, nc, du, dt, mx->t0, SL_F32, NULL);
    sl_k_memset0(be, da, (size_t)c * sizeof(float));
    sl_k_bias_grad(be, n, c, mx->t0, da);
    const size_t nb = sl_mlp_layer_size(m, la);
    sl_k_cast(be, nb, dA, SL_F32, at(mx, mx->g16, m->w_off[la]), dt, &mx->cnt.wgrad);
    mx->cnt.wgrad_n += nb;
    span(t, "backward da (16-bit)", g0);
    const double w0 = sl_now();
    sl_train_coll_ok(sl_coll_wait(req), "sl_coll_wait");
    const double w1 = sl_now();
    sl_train_record(t, SL_PHASE_EXPOSED, w1 - w0);
    mm_overlapped_span(t, "f: allreduce dX (16-bit, overlapped)", t0, done ? t_done : w1);
    t0 = sl_now();
    sl_k_add(be, dt, nh, d, dprev); /* the residual's own path */
    span(t, "residual (16-bit)", t0);
}

static double overlap_forward_backward(mm_mixed_net *b, sl_train *t, float norm, float scale, void **dx0)
{
    sl_mixed *mx = &b->mx;
    const int L = b->m.nlayers / 2;
    sl_mixed_input(mx, b->x);
    for (int i = 0; i < L; i++) block_forward(b, t, i); /* forward is plain's */
    double t0 = sl_now();
    const double loss = sl_mixed_loss(mx, b->y, norm, scale);
    span(t, "loss", t0);
    void *d = sl_mixed_dout(mx), *dprev = b->dres;
    for (int i = L - 1; i >= 0; i--) {
        block_backward_overlap(b, t, i, d, dprev);
        void *swap = d;
        d = dprev;
        dprev = swap;
    }
    *dx0 = d;
    return loss;
}

/* The seqpar variant ----------------------------------------------------------------------- */

/* Sequence parallelism in 16 bits: between blocks a rank keeps only its nloc = n/t tokens of the
 * residual stream (xs, dgs: 2-byte elements). Before each block the shards are all-gathered
 * into one [n, h] buffer, which every block's input x[2i] is (dbuf[0]: the widest gradient
 * buffer, free at those moments), so the n-token inputs the plain blocks keep are not kept:
 *   forward   all-gather X -> column-parallel U_r, Y_r -> partial Z [n, h] (rounded into dt)
 *             -> reduce-scatter Z -> + b, + the residual shard (f32, rounded once)
 *   backward  all-gather dZ -> dB_r, db, dY_r -> all-gather X again -> dA_r, da_r, partial dX_r
 *             -> reduce-scatter dX -> + the residual's gradient shard
 * five collectives of (t-1)/t·n·h 2-byte elements per block, as megatron_mlp.c's f32 seqpar's
 * five of 4-byte ones. The sums of the reduce-scatters round at each hop like the all-reduces'. */
static void seqpar_init(mm_mixed_net *b, int nloc)
{
    sl_mixed *mx = &b->mx;
    const int L = b->m.nlayers / 2;
    const size_t shard = (size_t)nloc * b->m.dims[0] * sl_dtype_size(mx->dt);
    b->nloc = nloc;
    for (int i = 0; i <= L; i++) {
        sl_k_free(b->m.be, mx->x[2 * i]); /* the n-token inputs: replaced by the gathered one */
        mx->x[2 * i] = mx->dbuf[0];
        if (i > 0) mx->z[2 * i - 1] = mx->dbuf[0]; /* z of a layer without activation is x[l + 1] */
        b->xs[i] = sl_k_malloc(b->m.be, SL_MEM_ACTIV, shard);
    }
    /* work buffers, not kept for backward: counted as f32 seqpar's dg (comm) */
    for (int k = 0; k < 2; k++) b->dgs[k] = sl_k_malloc(b->m.be, SL_MEM_COMM, shard);
}

static void seqpar_release(mm_mixed_net *b)
{
    if (!b->xs[0]) return;
    sl_mixed *mx = &b->mx;
    const int L = b->m.nlayers / 2;
    for (int i = 0; i <= L; i++) { /* dbuf[0] is sl_mixed_free's to free, once */
        mx->x[2 * i] = NULL;
        if (i > 0) mx->z[2 * i - 1] = NULL;
        sl_k_free(b->m.be, b->xs[i]);
        b->xs[i] = NULL;
    }
    for (int k = 0; k < 2; k++) sl_k_free(b->m.be, b->dgs[k]);
}

static const void *net_output(const mm_mixed_net *b)
{
    return b->xs[0] ? b->xs[b->m.nlayers / 2] : b->mx.x[b->m.nlayers];
}

/* Activation bytes seqpar holds short of sl_mixed_memory's at n tokens: the L + 1 block inputs
 * of n tokens become shards of nloc (negative). */
static double seqpar_activ_delta(const mm_mixed_net *b, int n)
{
    if (!b->xs[0]) return 0;
    const double row = (double)b->m.dims[0] * (double)sl_dtype_size(b->mx.dt);
    return (b->m.nlayers / 2 + 1.0) * ((double)b->nloc - n) * row;
}

/* The group's shards [nloc, h] gathered into [n, h] in token order, 16-bit. */
static void seqpar_gather(mm_mixed_net *b, sl_train *t, const void *shard, void *full, const char *name)
{
    sl_k_sync(b->m.be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_allgather(b->tp, shard, full, (size_t)b->nloc * b->m.dims[0], b->mx.dt), name, t0);
}

/* Partial sums [n, h] reduced, each rank keeping its own tokens' [nloc, h], 16-bit. */
static void seqpar_scatter(mm_mixed_net *b, sl_train *t, const void *full, void *shard, const char *name)
{
    sl_k_sync(b->m.be);
    const double t0 = sl_now();
    mm_comm_span(t, sl_coll_reduce_scatter(b->tp, full, shard, (size_t)b->nloc * b->m.dims[0], b->mx.dt, SL_OP_SUM),
                 name, t0);
}

/* Block i forward: xs[i] -> xs[i + 1]. */
static void seqpar_block_forward(mm_mixed_net *b, sl_train *t, int i)
{
    sl_mixed *mx = &b->mx;
    const sl_mlp *m = &b->m;
    const int la = 2 * i, lb = la + 1, n = mx->batch, h = m->dims[0], c = m->dims[1];
    const size_t nh = (size_t)n * h, nlh = (size_t)b->nloc * h;
    const sl_dtype dt = mx->dt;
    seqpar_gather(b, t, b->xs[i], mx->x[la], "all-gather X (16-bit)");
    double t0 = sl_now();
    sl_mixed_layer_forward(mx, la, at(mx, mx->w16, m->w_off[la]));
    /* the partial Z = Y_r·B_r^T [n, h] in f32, rounded into dt to be summed */
    sl_k_gemm(m->be, 0, 1, n, h, c, 1.0f, mx->x[lb], c, at(mx, mx->w16, m->w_off[lb]), c, 0.0f, mx->t0, h, dt,
              SL_F32);
    sl_k_cast(m->be, nh, mx->t0, SL_F32, b->dres, dt, &mx->cnt.act);
    mx->cnt.act_n += nh;
    span(t, "forward (16-bit)", t0);
    seqpar_scatter(b, t, b->dres, b->xs[i + 1], "reduce-scatter Z (16-bit)");
    /* b once, after the sum, and the residual on this rank's tokens, in f32, rounded once */
    t0 = sl_now();
    sl_k_cast(m->be, nlh, b->xs[i + 1], dt, mx->t0, SL_F32, NULL);
    sl_k_cast(m->be, (size_t)h, at(mx, mx->w16, m->b_off[lb]), dt, mx->bias32, SL_F32, NULL);
    sl_k_bias_add(m->be, b->nloc, h, mx->t0, mx->bias32);
    sl_k_cast(m->be, nlh, b->xs[i], dt, mx->t1, SL_F32, NULL);
    sl_k_add(m->be, SL_F32, nlh, mx->t1, mx->t0);
    sl_k_cast(m->be, nlh, mx->t0, SL_F32, b->xs[i + 1], dt, &mx->cnt.act);
    mx->cnt.act_n += nlh;
    span(t, "residual (16-bit)", t0);
}

/* Block i backward from the shard d = dL/dxs[i + 1] (kept): dL/dxs[i] into the shard dprev. */
static void seqpar_block_backward(mm_mixed_net *b, sl_train *t, int i, void *d, void *dprev)
{
    sl_mixed *mx = &b->mx;
    const sl_mlp *m = &b->m;
    const int la = 2 * i, lb = la + 1;
    void *full = mx->dbuf[0], *dy = mx->dbuf[1];
    seqpar_gather(b, t, d, full, "all-gather dZ (16-bit)");
    double t0 = sl_now();
    sl_mixed_layer_backward(mx, lb, full, dy, at(mx, mx->w16, m->w_off[lb]), mx->g32 + m->w_off[lb],
                            at(mx, mx->g16, m->w_off[lb]));
    span(t, "backward (16-bit)", t0);
    /* dZ is spent: the same buffer takes X again (x[la] is it), for dA_r = dU_r^T·X */
    seqpar_gather(b, t, b->xs[i], full, "all-gather X (16-bit)");
    t0 = sl_now();
    sl_mixed_layer_backward(mx, la, dy, b->dres, at(mx, mx->w16, m->w_off[la]), mx->g32 + m->w_off[la],
                            at(mx, mx->g16, m->w_off[la]));
    span(t, "backward (16-bit)", t0);
    seqpar_scatter(b, t, b->dres, dprev, "reduce-scatter dX (16-bit)");
    t0 = sl_now();
    sl_k_add(m->be, mx->dt, (size_t)b->nloc * m->dims[0], d, dprev); /* the residual's own path */
    span(t, "residual (16-bit)", t0);
}

/* Forward on this rank's nloc tokens (b->x, b->y), their loss, backward from its gradient
 * times scale. */
static double seqpar_forward_backward(mm_mixed_net *b, sl_train *t, float norm, float scale, void **dx0)
{
    sl_mixed *mx = &b->mx;
    const int L = b->m.nlayers / 2;
    const size_t nlh = (size_t)b->nloc * b->m.dims[0];
    memset(&mx->cnt, 0, sizeof mx->cnt);
    sl_k_cast(b->m.be, nlh, b->x, SL_F32, b->xs[0], mx->dt, &mx->cnt.act);
    mx->cnt.act_n += nlh;
    for (int i = 0; i < L; i++) seqpar_block_forward(b, t, i);
    double t0 = sl_now();
    /* the loss in f32 from the rounded output, its gradient scaled then rounded (sl_mixed_loss
     * on the shard) */
    sl_k_cast(b->m.be, nlh, b->xs[L], mx->dt, mx->out32, SL_F32, NULL);
    const double loss = sl_k_mse(b->m.be, nlh, mx->out32, b->y, mx->dout32, norm);
    if (scale != 1.0f) sl_k_scale(b->m.be, SL_F32, nlh, mx->dout32, scale);
    sl_k_cast(b->m.be, nlh, mx->dout32, SL_F32, b->dgs[0], mx->dt, &mx->cnt.agrad);
    mx->cnt.agrad_n += nlh;
    span(t, "loss", t0);
    void *d = b->dgs[0], *dprev = b->dgs[1];
    for (int i = L - 1; i >= 0; i--) {
        seqpar_block_backward(b, t, i, d, dprev);
        void *swap = d;
        d = dprev;
        dprev = swap;
    }
    *dx0 = d;
    return loss;
}

/* The distributed step's forward and backward in t->variant's collectives (plain: the blocks
 * above). */
static double variant_forward_backward(mm_mixed_net *b, sl_train *t, float norm, float scale, void **dx0)
{
    if (t->variant == V_SEQPAR) return seqpar_forward_backward(b, t, norm, scale, dx0);
    if (t->variant == V_OVERLAP && b->tp) return overlap_forward_backward(b, t, norm, scale, dx0);
    return net_forward_backward(b, t, norm, scale, dx0);
}
