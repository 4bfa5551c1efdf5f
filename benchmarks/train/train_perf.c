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

/* GEMM seconds measured in this run, by shape and dtype. */
static sl_pm_prims gemm_cache;

static void calibrate_gemms(const sl_train *t, const sl_pm_sched *s)
{
    const sl_pm_gemm_shape *todo[SL_PM_MAX_GEMMS];
    int mine = 0, most = 0;
    for (int i = 0; i < s->nshapes; i++)
        if (isnan(sl_pm_gemm_seconds(&gemm_cache, &s->shapes[i]))) todo[mine++] = &s->shapes[i];
    SL_CHECK_MPI(MPI_Allreduce(&mine, &most, 1, MPI_INT, MPI_MAX, t->ctx->comm));
    for (int i = 0; i < most; i++) { /* the ranks' i-th shapes at once; one with none waits */
        double sec;
        train_gemm_seconds(t->be, i < mine ? todo[i] : NULL, REPS, i < mine, t->ctx->comm, &sec);
        if (i < mine && gemm_cache.ngemm < SL_PM_MAX_GEMMS) {
            gemm_cache.gemm[gemm_cache.ngemm] = *todo[i];
            gemm_cache.gemm_s[gemm_cache.ngemm++] = sec;
        }
    }
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
static double time_op(const sl_train *t, sl_pm_op op, void *a, void *b, size_t bytes)
{
    const sl_dtype dt = t->dtype;
    const size_t n = bytes / sl_dtype_size(dt);
    sl_coll_req *req = NULL;
    SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
    const double t0 = sl_now();
    switch (op) {
    case SL_PM_ALLREDUCE:
        sl_train_coll_ok(sl_coll_allreduce(t->comm, a, a, n, dt, SL_OP_SUM), "allreduce (calibration)");
        break;
    case SL_PM_IALLREDUCE:
        sl_train_coll_ok(sl_coll_iallreduce(t->comm, a, a, n, dt, SL_OP_SUM, &req), "iallreduce (calibration)");
        break;
    case SL_PM_IREDUCE_SCATTER:
        sl_train_coll_ok(sl_coll_ireduce_scatter(t->comm, a, b, n, dt, SL_OP_SUM, &req), "ireduce_scatter (calibration)");
        break;
    case SL_PM_IALLGATHER:
        sl_train_coll_ok(sl_coll_iallgather(t->comm, a, b, n, dt, &req), "iallgather (calibration)");
        break;
    case SL_PM_P2P:
    default: {
        const int last = t->size - 1;
        if (t->rank == 0 && last > 0) {
            sl_train_coll_ok(sl_coll_send(t->comm, a, n, dt, last, 7), "send (calibration)");
            sl_train_coll_ok(sl_coll_recv(t->comm, b, n, dt, last, 7), "recv (calibration)");
        } else if (t->rank == last && last > 0) {
            sl_train_coll_ok(sl_coll_recv(t->comm, b, n, dt, 0, 7), "recv (calibration)");
            sl_train_coll_ok(sl_coll_send(t->comm, a, n, dt, 0, 7), "send (calibration)");
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

enum { NSIZES = 4, MAX_FITS = 32 };
typedef struct fit {
    sl_coll impl;
    sl_pm_op op;
    sl_dtype dt;
    int size;
    double lo, hi, alpha, beta;
} fit;
static fit fits[MAX_FITS];
static int nfits;

/* alpha-beta of op over [lo, hi] bytes on the run's communicator (cached). */
static void fit_op(const sl_train *t, sl_coll impl, sl_pm_op op, double lo, double hi, double *alpha, double *beta)
{
    for (int i = 0; i < nfits; i++)
        if (fits[i].impl == impl && fits[i].op == op && fits[i].dt == t->dtype && fits[i].size == t->size &&
            fits[i].lo == lo && fits[i].hi == hi) {
            *alpha = fits[i].alpha, *beta = fits[i].beta;
            return;
        }
    const size_t es = sl_dtype_size(t->dtype);
    /* the largest buffer: an all-gather's receive holds every rank's part */
    const size_t most = (size_t)hi * (op == SL_PM_IALLGATHER || op == SL_PM_IREDUCE_SCATTER ? (size_t)t->size : 1) + es;
    void *a = sl_k_malloc(t->be, SL_MEM_OTHER, most), *b = sl_k_malloc(t->be, SL_MEM_OTHER, most);
    sl_k_memset0(t->be, a, most);
    sl_k_memset0(t->be, b, most);
    double S[NSIZES], tm[NSIZES], rel;
    for (int i = 0; i < NSIZES; i++) {
        S[i] = floor(lo * pow(hi / lo, (double)i / (NSIZES - 1)) / (double)es) * (double)es;
        if (S[i] < (double)es) S[i] = (double)es;
        double times[REPS + 1];
        for (int r = 0; r <= REPS; r++) times[r] = time_op(t, op, a, b, (size_t)S[i]);
        tm[i] = median_of(times + 1);
    }
    sl_k_free(t->be, a), sl_k_free(t->be, b);
    sl_fit_alpha_beta(S, tm, NSIZES, alpha, beta, &rel);
    /* no fit, or one that is not a cost (beta <= 0: on a loaded machine a larger size can time
     * faster than a smaller one): the largest size's seconds per byte, with no alpha */
    if (isnan(*alpha) || !(*beta > 0)) *alpha = 0, *beta = tm[NSIZES - 1] / S[NSIZES - 1];
    if (nfits < MAX_FITS) fits[nfits++] = (fit){impl, op, t->dtype, t->size, lo, hi, *alpha, *beta};
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

    calibrate_gemms(t, s);
    sl_pm_prims p = gemm_cache;
    p.bw = measure_bw(t, t->nparams > (1u << 20) ? t->nparams : (1u << 20));
    /* the operations this rank's schedule uses, their smallest and largest, over the ranks */
    double lo[SL_PM_NOPS], hi[SL_PM_NOPS];
    for (int o = 0; o < SL_PM_NOPS; o++) lo[o] = INFINITY, hi[o] = 0;
    for (int i = 0; i < s->nev; i++)
        if (s->ev[i].kind == SL_PM_EV_START && s->ev[i].amount > 0) {
            const sl_pm_event *e = &s->ev[i];
            lo[e->op] = fmin(lo[e->op], e->amount), hi[e->op] = fmax(hi[e->op], e->amount);
        }
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, lo, SL_PM_NOPS, MPI_DOUBLE, MPI_MIN, t->ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, hi, SL_PM_NOPS, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    char *f = out->fit;
    size_t left = sizeof out->fit;
    for (int o = 0; o < SL_PM_NOPS; o++) {
        /* one rank: no peer to exchange with, and an in-place sum moves nothing (p.alpha and
         * p.beta stay 0); its reduce-scatter and all-gather copy, and are fitted */
        if (!(hi[o] > 0) || (t->size < 2 && (o == SL_PM_P2P || o == SL_PM_ALLREDUCE || o == SL_PM_IALLREDUCE))) continue;
        const double from = fmin(lo[o], hi[o] / 64);
        fit_op(t, p2p ? SL_COLL_MPI : impl, (sl_pm_op)o, from, hi[o], &p.alpha[o], &p.beta[o]);
        int w = snprintf(f, left, "%s%s %.1f us + %.3f GB/s", f == out->fit ? "" : "; ", sl_pm_op_name((sl_pm_op)o),
                         p.alpha[o] * 1e6, 1e-9 / p.beta[o]);
        if (w > 0 && (size_t)w < left) f += w, left -= (size_t)w;
    }
    /* On the cpu backend nothing progresses a collective but the calls of the rank that started
     * it (no progress thread; the rank's core is in its GEMMs between them), so an operation is
     * charged in full where it starts; a device's collectives run beside its kernels. */
    p.background = t->be == SL_BACKEND_CUDA && sl_coll_iallreduce_overlaps(t->comm);
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
    sl_result_metric(res, "step_vs_pred", step / p->pred.step, "ratio");
    sl_result_metric(res, "pred_bw", p->bw / 1e9, "GB/s");
    sl_result_metric(res, "pred_calibration", p->calibration, "s");
    sl_result_param_str(res, "pred_dominant", sl_pm_dominant(&p->pred));
    if (p->fit[0]) sl_result_param_str(res, "pred_fit", p->fit);
}
