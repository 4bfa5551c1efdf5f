/* train_perf.c — the predicted step of a training row (perf_model.h): the model's GEMMs and
 * element-wise bytes a technique's .schedule states through the helpers here, the primitives
 * measured in the same run on the same ranks (each GEMM shape in the run's dtype, the
 * element-wise bandwidth, alpha-beta of each kind of operation the schedules use, fitted to a
 * short sweep on the run's communicator), and the row's prediction beside the measured step.
 *
 * Every figure is measured, never fitted to step times: GEMMs each as sl_k_gemm runs it, every
 * rank at once; the bandwidth as sl_k_axpby streams a vector as long as the model (x and y read,
 * y written: 12 bytes an f32 element); an operation at 4 sizes from the smallest the schedules
 * use (or 1/64 of the largest) to the largest, the slowest rank's. Each is the median of 3 timed
 * calls after an untimed one: the row's step is the median of its steps, and on a shared machine
 * a primitive's best call is what it reaches when nothing else runs, which the median step does
 * not (an all-reduce of 9 MiB on 2 ranks beside other builds: best 6.6 ms, median 14 ms). All
 * cached for the run (shapes, the vector length, the collective, operation and sizes), so
 * variants that share them measure once.
 * SL_NO_PREDICT=1 skips it all (the rows say params.predict "off"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_env_check.h"
#include "train_internal.h"

/* The model's work ------------------------------------------------------------------------ */

/* f32 accumulates dW into the gradient (beta 1); 16 bits writes an f32 dW, then rounds it */
static int dw_beta(const sl_train *t) { return t->dtype == SL_F32; }

/* One linear (N,K) -> (N,OC): forward GEMM and its bias; backward dW, db and (dx) dx. */
static void linear_fwd(const sl_train *t, sl_pm_sched *s, int N, int K, int OC)
{
    sl_pm_gemm(s, 0, 1, N, OC, K, 0, 1);
    sl_pm_bytes(s, 8.0 * N * OC + (t->dtype != SL_F32 ? 6.0 * N * OC : 0)); /* bias; 16 bits: the cast */
}
static void linear_bwd(const sl_train *t, sl_pm_sched *s, int N, int K, int OC, int dx)
{
    sl_pm_gemm(s, 1, 0, OC, K, N, dw_beta(t), 1);
    sl_pm_bytes(s, 4.0 * N * OC + (t->dtype != SL_F32 ? 6.0 * OC * K : 0)); /* db; 16 bits: dW rounded */
    if (dx) sl_pm_gemm(s, 0, 0, N, K, OC, 0, 1);
}

void sl_pm_load(const sl_train *t, sl_pm_sched *s, int rows)
{
    const sl_mlp *m = t->m;
    if (sl_mlp_is_gpt(m)) sl_pm_bytes(s, 8.0 * rows * m->gpt.T);
    else sl_pm_bytes(s, 4.0 * rows * (m->dims[0] + m->dims[m->nlayers]));
}

/* The GPT's layers: N = rows x T tokens; per block the element-wise kernels' bytes of f32
 * tensors (the 16-bit ones widen to f32 inside): two layer norms (8NC each), the bias adds
 * (8 x 9NC), the softmax over B·NH·T·T scores (8 each), two residual adds (12NC each), GELU on
 * 4NC (8 each): 144NC + 8BHT^2 forward; backward the norms (12NC each), the residuals' sums
 * (12NC each), the bias gradients (4 x 9NC), GELU (12 x 4NC), softmax (12BHT^2): 132NC + 12BHT^2. */
static void gpt_layer(const sl_train *t, sl_pm_sched *s, int l, int rows, int backward)
{
    const sl_gpt_dims *g = &t->m->gpt;
    const int N = rows * g->T, C = g->C, T = g->T, d = C / g->NH, L = g->layers;
    const double NC = (double)N * C, att = (double)rows * g->NH * T * T;
    const double heads = (double)rows * g->NH;
    if (l == 0) { /* the embeddings: a lookup of wte and wpe rows, or their gradients added */
        sl_pm_bytes(s, 12.0 * NC);
        return;
    }
    if (l == L + 1) { /* the final norm, the head's GEMMs and the softmax cross-entropy over V */
        if (!backward) {
            sl_pm_bytes(s, 8.0 * NC);
            sl_pm_gemm(s, 0, 1, N, g->V, C, 0, 1);
            sl_pm_bytes(s, 8.0 * N * g->V);
        } else {
            sl_pm_gemm(s, 0, 0, N, C, g->V, 0, 1);
            sl_pm_gemm(s, 1, 0, g->V, C, N, dw_beta(t), 1);
            sl_pm_bytes(s, 12.0 * NC);
        }
        return;
    }
    if (!backward) {
        linear_fwd(t, s, N, C, 3 * C);
        sl_pm_gemm(s, 0, 1, T, T, d, 0, heads); /* scores = Q K^T, per head */
        sl_pm_gemm(s, 0, 0, T, d, T, 0, heads); /* out = att V */
        linear_fwd(t, s, N, C, C);
        linear_fwd(t, s, N, C, 4 * C);
        linear_fwd(t, s, N, 4 * C, C);
        sl_pm_bytes(s, (144.0 - 8 * 9) * NC + 8.0 * att); /* the bias adds are linear_fwd's */
        return;
    }
    linear_bwd(t, s, N, 4 * C, C, 1);
    linear_bwd(t, s, N, C, 4 * C, 1);
    linear_bwd(t, s, N, C, C, 1);
    sl_pm_gemm(s, 1, 0, T, d, T, 0, heads); /* dV = att^T dout */
    sl_pm_gemm(s, 0, 1, T, T, d, 0, heads); /* datt = dout V^T */
    sl_pm_gemm(s, 0, 0, T, d, T, 0, heads); /* dQ = dS K */
    sl_pm_gemm(s, 1, 0, T, d, T, 0, heads); /* dK = dS^T Q */
    linear_bwd(t, s, N, C, 3 * C, 1);
    sl_pm_bytes(s, (132.0 - 4 * 9) * NC + 12.0 * att); /* the bias gradients are linear_bwd's */
}

void sl_pm_layer_forward(const sl_train *t, sl_pm_sched *s, int l, int rows)
{
    const sl_mlp *m = t->m;
    if (rows <= 0) return;
    if (sl_mlp_is_gpt(m)) {
        gpt_layer(t, s, l, rows, 0);
        return;
    }
    const int in = m->dims[l], out = m->dims[l + 1];
    linear_fwd(t, s, rows, in, out);
    if (m->act[l] != SL_ACT_NONE) sl_pm_bytes(s, 8.0 * rows * out); /* z read, x written */
}

void sl_pm_layer_backward(const sl_train *t, sl_pm_sched *s, int l, int rows)
{
    const sl_mlp *m = t->m;
    if (rows <= 0) return;
    if (sl_mlp_is_gpt(m)) {
        gpt_layer(t, s, l, rows, 1);
        return;
    }
    const int in = m->dims[l], out = m->dims[l + 1];
    if (m->act[l] != SL_ACT_NONE) sl_pm_bytes(s, 12.0 * rows * out); /* z and dy read, dz written */
    linear_bwd(t, s, rows, in, out, l > 0);
}

void sl_pm_loss(const sl_train *t, sl_pm_sched *s, int rows)
{
    if (!sl_mlp_is_gpt(t->m)) sl_pm_bytes(s, 12.0 * rows * t->m->dims[t->m->nlayers]);
}

void sl_pm_forward_backward(const sl_train *t, sl_pm_sched *s, int rows)
{
    const int L = t->m->nlayers;
    sl_pm_load(t, s, rows);
    for (int l = 0; l < L; l++) sl_pm_layer_forward(t, s, l, rows);
    sl_pm_loss(t, s, rows);
    for (int l = L - 1; l >= 0; l--) sl_pm_layer_backward(t, s, l, rows);
}

/* The optimizer reads the weights, the gradient and K states and writes the weights and the
 * states (f32: SGD with momentum 20 bytes an element, AdamW 28); 16 bits unscales the gradient
 * into f32 first (2 read, 4 written) and casts the master back (4 read, 2 written). */
void sl_pm_optimizer(const sl_train *t, sl_pm_sched *s, size_t n)
{
    const double K = sl_optim_state_per_param(&t->optim);
    sl_pm_bytes(s, (double)n * (4.0 * (3 + 2 * K) + (t->dtype != SL_F32 ? 12.0 : 0)));
}

/* The primitives ------------------------------------------------------------------------ */

enum { REPS = 3 }; /* timed calls of a primitive, after one untimed: their median */

/* The median of REPS times. */
static double median_of(const double *x)
{
    sl_stats st;
    sl_stats_compute(x, REPS, &st);
    return st.median;
}

/* GEMM seconds measured in this run, by shape and dtype: pages of sl_pm_prims' tables, as many as
 * the shapes need (a search predicts dozens of layouts, each with shapes of its own). */
static sl_pm_prims *gemm_pages;
static int npages;

static double cached_gemm(const sl_pm_gemm_shape *g)
{
    for (int i = 0; i < npages; i++) {
        const double sec = sl_pm_gemm_seconds(&gemm_pages[i], g);
        if (!isnan(sec)) return sec;
    }
    return NAN;
}

static void cache_gemm(const sl_pm_gemm_shape *g, double sec)
{
    if (!npages || gemm_pages[npages - 1].ngemm == SL_PM_MAX_GEMMS) {
        sl_pm_prims *more = realloc(gemm_pages, (size_t)(npages + 1) * sizeof *gemm_pages);
        if (!more) SL_FATAL("out of memory for the GEMM times");
        gemm_pages = more;
        memset(&gemm_pages[npages++], 0, sizeof *gemm_pages);
    }
    sl_pm_prims *p = &gemm_pages[npages - 1];
    p->gemm[p->ngemm] = *g;
    p->gemm_s[p->ngemm++] = sec;
}

/* The schedule's shapes measured (those not yet), and their seconds into p's table. */
static void calibrate_gemms(const sl_train *t, const sl_pm_sched *s, sl_pm_prims *p)
{
    const sl_pm_gemm_shape *todo[SL_PM_MAX_GEMMS];
    int mine = 0, most = 0;
    for (int i = 0; i < s->nshapes; i++)
        if (isnan(cached_gemm(&s->shapes[i]))) todo[mine++] = &s->shapes[i];
    SL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, t->ctx->comm));
    for (int i = 0; i < most; i++) { /* the ranks' i-th shapes at once; one with none waits */
        double sec;
        train_gemm_seconds(t->be, i < mine ? todo[i] : NULL, REPS, i < mine, t->ctx->comm, &sec);
        if (i < mine) cache_gemm(todo[i], sec);
    }
    p->ngemm = s->nshapes;
    for (int i = 0; i < s->nshapes; i++) p->gemm[i] = s->shapes[i], p->gemm_s[i] = cached_gemm(&s->shapes[i]);
}

/* Element-wise bytes per second: sl_k_axpby over n f32 elements, the slowest rank's median. */
static double measure_bw(const sl_train *t, size_t n)
{
    static size_t cached_n;
    static double cached_bw;
    if (n == cached_n) return cached_bw;
    float *x = sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float)), *y = sl_k_malloc(t->be, SL_MEM_OTHER, n * sizeof(float));
    sl_k_fill(t->be, SL_F32, n, x, 1.0);
    sl_k_fill(t->be, SL_F32, n, y, 0.0);
    double times[REPS + 1];
    for (int r = 0; r <= REPS; r++) {
        SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
        const double t0 = sl_now();
        sl_k_axpby(t->be, SL_F32, n, 0.5, x, 0.5, y);
        sl_k_sync(t->be);
        times[r] = sl_now() - t0;
    }
    sl_k_free(t->be, x), sl_k_free(t->be, y);
    double med = median_of(times + 1), slowest = 0;
    SL_CHECK_MPI(MPI_Allreduce(&med, &slowest, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    cached_n = n, cached_bw = 12.0 * (double)n / slowest;
    return cached_bw;
}

/* One operation of `bytes` on comm, the slowest rank's seconds: the all-reduces in place, as the
 * techniques sum their gradients. P2P: a ping-pong between the first and the last rank, half its
 * round trip (the others wait). */
static double time_op(const sl_train *t, sl_comm *c, sl_pm_op op, void *a, void *b, size_t bytes)
{
    const sl_dtype dt = t->dtype;
    const size_t n = bytes / sl_dtype_size(dt);
    const int me = sl_comm_rank(c), last = sl_comm_size(c) - 1;
    sl_coll_req *req = NULL;
    SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
    const double t0 = sl_now();
    switch (op) {
    case SL_PM_ALLREDUCE:
        sl_train_coll_ok(sl_coll_allreduce(c, a, a, n, dt, SL_OP_SUM), "allreduce (calibration)");
        break;
    case SL_PM_IALLREDUCE:
        sl_train_coll_ok(sl_coll_iallreduce(c, a, a, n, dt, SL_OP_SUM, &req), "iallreduce (calibration)");
        break;
    case SL_PM_IREDUCE_SCATTER:
        sl_train_coll_ok(sl_coll_ireduce_scatter(c, a, b, n, dt, SL_OP_SUM, &req), "ireduce_scatter (calibration)");
        break;
    case SL_PM_IALLGATHER:
        sl_train_coll_ok(sl_coll_iallgather(c, a, b, n, dt, &req), "iallgather (calibration)");
        break;
    case SL_PM_H2D: /* every rank its own copy, host (b) to device (a), as an offload's fetch */
        sl_k_memcpy(t->be, a, b, bytes, SL_K_H2D);
        sl_k_sync(t->be);
        break;
    case SL_PM_P2P:
    default: {
        if (me == 0 && last > 0) {
            sl_train_coll_ok(sl_coll_send(c, a, n, dt, last, 7), "send (calibration)");
            sl_train_coll_ok(sl_coll_recv(c, b, n, dt, last, 7), "recv (calibration)");
        } else if (me == last && last > 0) {
            sl_train_coll_ok(sl_coll_recv(c, b, n, dt, 0, 7), "recv (calibration)");
            sl_train_coll_ok(sl_coll_send(c, a, n, dt, 0, 7), "send (calibration)");
        }
        break;
    }
    }
    if (req) sl_train_coll_ok(sl_coll_wait(req), "wait (calibration)");
    double mine = sl_now() - t0, slowest = 0;
    if (op == SL_PM_P2P) mine /= 2;
    SL_CHECK_MPI(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    return slowest;
}

enum { NSIZES = 4 };
typedef struct fit {
    sl_coll impl;
    sl_pm_op op;
    sl_dtype dt;
    int size;
    char group[8]; /* "" the run's communicator, else the group's name (sl_pm_group) */
    double lo, hi, alpha, beta;
} fit;
static fit *fits;
static int nfits;

/* alpha-beta of op over [lo, hi] bytes on communicator c (the run's, or every rank's own group
 * of `size` ranks at once), cached by the group's name and size: groups of one size but another
 * name are other ranks (a tensor-parallel group's are adjacent, a data-parallel one's strided),
 * on a cluster other links. */
static void fit_op(const sl_train *t, sl_comm *c, const char *group, int size, sl_coll impl, sl_pm_op op, double lo,
                   double hi, double *alpha, double *beta)
{
    for (int i = 0; i < nfits; i++)
        if (fits[i].impl == impl && fits[i].op == op && fits[i].dt == t->dtype && fits[i].size == size &&
            strcmp(fits[i].group, group) == 0 && fits[i].lo == lo && fits[i].hi == hi) {
            *alpha = fits[i].alpha, *beta = fits[i].beta;
            return;
        }
    const size_t es = sl_dtype_size(t->dtype);
    /* the largest buffer: an all-gather's receive holds every rank's part */
    size_t most = (size_t)hi * (op == SL_PM_IALLGATHER || op == SL_PM_IREDUCE_SCATTER ? (size_t)size : 1) + es;
    /* A step's copies each move memory not touched since its forward: the timed copies go
     * round `slots` places of a region beyond the caches (64 MiB at least), not over one
     * buffer the caches hold (1 MiB copied from L2: 30 GB/s where the step's reach 4). */
    const size_t one = (most + 4095) / 4096 * 4096;
    const size_t slots = op == SL_PM_H2D ? (one >= (64u << 20) ? 2 : (size_t)(64u << 20) / one + 1) : 1;
    most = one * slots;
    /* a copy's source is host memory the backend copies from fastest (pinned on cuda) */
    void *a = sl_k_malloc(t->be, SL_MEM_OTHER, most);
    void *b = op == SL_PM_H2D ? sl_k_host_alloc(t->be, SL_MEM_OTHER, most) : sl_k_malloc(t->be, SL_MEM_OTHER, most);
    sl_k_memset0(t->be, a, most);
    if (op == SL_PM_H2D) memset(b, 0, most);
    else sl_k_memset0(t->be, b, most);
    double S[NSIZES], tm[NSIZES], rel;
    for (int i = 0; i < NSIZES; i++) {
        S[i] = floor(lo * pow(hi / lo, (double)i / (NSIZES - 1)) / (double)es) * (double)es;
        if (S[i] < (double)es) S[i] = (double)es;
        double times[REPS + 1];
        for (int r = 0; r <= REPS; r++) {
            const size_t at = (size_t)(i * (REPS + 1) + r) % slots * one;
            times[r] = time_op(t, c, op, (char *)a + at, (char *)b + at, (size_t)S[i]);
        }
        tm[i] = median_of(times + 1);
    }
    sl_k_free(t->be, a);
    if (op == SL_PM_H2D) sl_k_host_free(t->be, b);
    else sl_k_free(t->be, b);
    sl_fit_alpha_beta(S, tm, NSIZES, alpha, beta, &rel);
    /* no fit, or one that is not a cost (beta <= 0: on a loaded machine a larger size can time
     * faster than a smaller one): the largest size's seconds per byte, with no alpha */
    if (isnan(*alpha) || !(*beta > 0)) *alpha = 0, *beta = tm[NSIZES - 1] / S[NSIZES - 1];
    fit *more = realloc(fits, (size_t)(nfits + 1) * sizeof *fits);
    if (!more) SL_FATAL("out of memory for the operations' fits");
    fits = more;
    fits[nfits] = (fit){impl, op, t->dtype, size, "", lo, hi, *alpha, *beta};
    snprintf(fits[nfits++].group, sizeof fits->group, "%s", group);
}

/* The prediction of one run ------------------------------------------------------------- */

int train_predict(sl_train *t, sl_coll impl, int p2p, train_prediction *out)
{
    memset(out, 0, sizeof *out);
    if (!t->tech->schedule || sl_no_predict()) return 0;
    const int tracing = sl_trace_enabled();
    sl_trace_enable(0); /* the calibration is not part of the timeline */
    const double c0 = sl_now();
    sl_pm_sched *s = malloc(sizeof *s);
    if (!s) SL_FATAL("out of memory for the step's schedule");
    sl_pm_init(s, t->dtype);
    t->tech->schedule(t, s);

    sl_pm_prims p;
    memset(&p, 0, sizeof p);
    calibrate_gemms(t, s, &p);
    p.bw = measure_bw(t, t->nparams > (1u << 20) ? t->nparams : (1u << 20));
    /* the operations this rank's schedule uses on each group, their smallest and largest, over
     * the ranks; a group fitted where every rank has one of the same size (a rank's own) */
    enum { G = SL_PM_MAX_GROUPS };
    double lo[G][SL_PM_NOPS], hi[G][SL_PM_NOPS];
    int size_lo[G], size_hi[G];
    for (int g = 0; g < G; g++) {
        size_lo[g] = size_hi[g] = g == 0 ? t->size : s->group_comm[g] ? s->group_size[g] : -1;
        for (int o = 0; o < SL_PM_NOPS; o++) lo[g][o] = INFINITY, hi[g][o] = 0;
    }
    for (int i = 0; i < s->nev; i++)
        if (s->ev[i].kind == SL_PM_EV_START && s->ev[i].amount > 0) {
            const sl_pm_event *e = &s->ev[i];
            lo[e->group][e->op] = fmin(lo[e->group][e->op], e->amount);
            hi[e->group][e->op] = fmax(hi[e->group][e->op], e->amount);
        }
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, lo, G * SL_PM_NOPS, MPI_DOUBLE, MPI_MIN, t->ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, hi, G * SL_PM_NOPS, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, size_lo, G, MPI_INT, MPI_MIN, t->ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, size_hi, G, MPI_INT, MPI_MAX, t->ctx->comm));
    char *f = out->fit;
    size_t left = sizeof out->fit;
    for (int g = 0; g < G; g++)
        for (int o = 0; o < SL_PM_NOPS; o++) {
            double *alpha = g ? &p.group_alpha[g][o] : &p.alpha[o], *beta = g ? &p.group_beta[g][o] : &p.beta[o];
            const int size = size_lo[g];
            if (!(hi[g][o] > 0)) continue;
            if (size < 1 || size != size_hi[g]) { /* groups of different sizes: not one fit */
                *alpha = *beta = NAN;
                continue;
            }
            /* one rank: no peer to exchange with, and an in-place sum moves nothing (alpha and
             * beta stay 0); its reduce-scatter and all-gather copy, and are fitted */
            if (size < 2 && (o == SL_PM_P2P || o == SL_PM_ALLREDUCE || o == SL_PM_IALLREDUCE)) continue;
            const double from = fmin(lo[g][o], hi[g][o] / 64);
            /* --calibration: an all-reduce's alpha-beta from the allreduce run's rows (the run's
             * communicator: those rows are at its rank count) */
            sl_dtype rows_dt = t->dtype;
            const int given = g == 0 && sl_train_opt.calibration && !p2p &&
                              (o == SL_PM_ALLREDUCE || o == SL_PM_IALLREDUCE) &&
                              train_calibration_fit(impl, t->dtype, from, hi[g][o], alpha, beta, &rows_dt);
            if (!given)
                fit_op(t, g ? s->group_comm[g] : t->comm, g ? s->group_name[g] : "", size,
                       p2p ? SL_COLL_MPI : impl, (sl_pm_op)o, from, hi[g][o], alpha, beta);
            int w = snprintf(f, left, "%s%s%s%s %.1f us + %.3f GB/s%s%s%s", f == out->fit ? "" : "; ",
                             g ? s->group_name[g] : "", g ? " " : "", sl_pm_op_name((sl_pm_op)o), *alpha * 1e6,
                             1e-9 / *beta, given ? " (--calibration, " : "", given ? sl_dtype_name(rows_dt) : "",
                             given ? " rows)" : "");
            if (w > 0 && (size_t)w < left) f += w, left -= (size_t)w;
        }
    /* On the cpu backend nothing progresses a collective but the calls of the rank that started
     * it (no progress thread; the rank's core is in its GEMMs between them), so an operation is
     * charged in full where it starts; a device's collectives run beside its kernels. */
    p.background = t->be == SL_BACKEND_CUDA && sl_coll_iallreduce_overlaps(t->comm);
    /* Host<->device copies run on a copy engine beside the compute: a copy stream on cuda, on
     * the cpu backend vdnn's emulation, a helper thread doing memcpy (the copy's fit is the same
     * memcpy, timed on the rank's own thread) */
    p.background_ops = 1u << SL_PM_H2D;
    const sl_pm_pred mine = sl_pm_predict(s, &p);
    free(s);
    /* the slowest rank's prediction, as the measured step is the slowest rank's */
    struct { double v; int r; } in = {isnan(mine.step) ? INFINITY : mine.step, t->rank}, top;
    SL_CHECK_MPI(MPI_Allreduce(&in, &top, 1, MPI_DOUBLE_INT, MPI_MAXLOC, t->ctx->comm));
    double v[7] = {mine.step, mine.compute, mine.gemm, mine.bytes, mine.comm, mine.exposed, mine.idle};
    SL_CHECK_MPI(MPI_Bcast(v, 7, MPI_DOUBLE, top.r, t->ctx->comm));
    out->pred = (sl_pm_pred){v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
    out->bw = p.bw;
    out->calibration = sl_now() - c0;
    SL_CHECK_MPI(MPI_Bcast(&out->calibration, 1, MPI_DOUBLE, 0, t->ctx->comm));
    sl_trace_enable(tracing);
    return 1;
}

void train_prediction_row(const train_prediction *p, double step, sl_result *res)
{
    if (sl_no_predict()) {
        sl_result_param_str(res, "predict", "off");
        return;
    }
    sl_result_metric(res, "pred_step", p->pred.step, "s");
    sl_result_metric(res, "pred_compute", p->pred.compute, "s");
    sl_result_metric(res, "pred_gemm", p->pred.gemm, "s");
    sl_result_metric(res, "pred_comm", p->pred.comm, "s");
    sl_result_metric(res, "pred_exposed", p->pred.exposed, "s");
    sl_result_metric(res, "pred_idle", p->pred.idle, "s");
    sl_result_metric(res, "step_vs_pred", step / p->pred.step, "ratio");
    sl_result_metric(res, "pred_bw", p->bw / 1e9, "GB/s");
    sl_result_metric(res, "pred_calibration", p->calibration, "s");
    sl_result_param_str(res, "pred_dominant", sl_pm_dominant(&p->pred));
    if (p->fit[0]) sl_result_param_str(res, "pred_fit", p->fit);
}
