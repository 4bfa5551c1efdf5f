/* check.c — megatron_mlp's checks and reference (tp.h): one step at the trained weights
 * against the serial blocks (forward output, input gradient, every weight gradient, the
 * column-parallel half on its own), every rank's slices against rank 0's, the variants against
 * plain, and serial training of the whole model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixed.h"
#include "serial.h"
#include "slices.h"
#include "tp.h"

/* The check of one step against the serial blocks. Why 1e-5 (largest element difference
 * relative to the tensor's largest): the sums of the row-parallel layer are made of t partial
 * sums of f/t products each instead of one of f, and the weight gradients' sums over tokens are
 * split over replicas: in f32 (eps 6e-8) that moves results by a few eps relative (3e-7 to
 * 9e-7 in the default runs, printed in every row: out_rel_err, dx_rel_err, grad_rel_err), and
 * the difference grows slowly with the widths and through the L blocks. The defects this
 * catches are large: a missing all-reduce leaves 1/t of a sum, the bias added on every rank
 * adds (t-1)·b, a slice off by one feature scrambles a column; all give errors of 1e-2 and
 * more.
 * Is the column-parallel half exact? U_r = X·A_r^T + a_r has the same inputs as the serial
 * layer and each of its elements is the same dot product over h, with no communication: in
 * exact arithmetic it is exact. Bit for bit it is only if the GEMM sums over h in the same order
 * whatever the number of output columns, which no BLAS promises (colpar_diff: block 0's U_r
 * against the serial layer on the same tokens). OpenBLAS here gives 0 at the default sizes, but
 * for small ones (--hidden 64) rounds an [n, f/t] product differently from the [n, f] one by a
 * unit in the last place (9.5e-7 at |U| ~ 10); cuBLAS picks its kernel, and a split reduction,
 * by shape. So it is checked against the same tolerance as the rest, and its difference is
 * reported. */
#define OUT_TOL 1e-5

/* -d f16|bf16: the step against the serial mixed-precision blocks at the same weights (both
 * 16-bit, f32 accumulation, the same loss scale). They differ where the row-parallel and the
 * input-gradient sums are rounded: serially each element of Z and dX is an f32 sum rounded once
 * into the 16-bit type; here each of t partial sums is rounded (u of a partial, u = 2^-11 for
 * f16, 2^-8 for bf16) and so is each hop's running sum of the all-reduce (t - 1 more): at most
 * (2t - 1)·u of the partials' magnitude, which cancellation can make larger than the sum's. A
 * rounding that differs by one unit in the stream X then shifts every later block's 16-bit
 * products by a unit too, and the weight gradients, sums over tokens of products of two such
 * tensors, carry both. With t <= 4 that is up to 7u per operator and a few more through the
 * blocks: the bound is 16u relative to the tensor's largest element (f16 7.8e-3, bf16 6.3e-2).
 * The defects the f32 check catches (a sum never made, b added t times, a slice off by one)
 * are of order 1 and fail it as they fail OUT_TOL. */
#define MIXED_OUT_UNITS 16

static double step_tol(sl_dtype dt)
{
    return dt == SL_F16 ? MIXED_OUT_UNITS * 0x1p-11 : dt == SL_BF16 ? MIXED_OUT_UNITS * 0x1p-8 : OUT_TOL;
}

/* Every rank's tokens of an [tokens, h] tensor (its nloc rows, from its first token; in plain
 * only tensor-parallel rank 0 of each replica sends, the others hold the same) into full
 * ([B, h], host, rank 0). */
static void gather_tokens_host(sl_train *t, const float *mine, float *full)
{
    mm *s = t->state;
    const int P = t->size, sends = t->variant == V_SEQPAR || s->tr == 0;
    int piece[2] = {sends ? s->first * s->h : 0, sends ? s->nloc * s->h : 0};
    int *pieces = malloc(2 * (size_t)P * sizeof *pieces), *displs = malloc((size_t)P * sizeof *displs),
        *counts = malloc((size_t)P * sizeof *counts);
    if (!pieces || !displs || !counts) SL_FATAL("out of memory");
    SL_CHECK_MPI(MPI_Gather(piece, 2, MPI_INT, pieces, 2, MPI_INT, 0, t->ctx->comm));
    for (int r = 0; r < P; r++) {
        displs[r] = pieces[2 * r];
        counts[r] = pieces[2 * r + 1];
    }
    float *host = sl_k_download(t->be, mine, (size_t)s->nloc * s->h * sizeof(float));
    SL_CHECK_MPI(MPI_Gatherv(host, piece[1], MPI_FLOAT, full, counts, displs, MPI_FLOAT, 0, t->ctx->comm));
    free(host);
    free(pieces);
    free(displs);
    free(counts);
}

/* max |got - want| / max |want| over n elements (host). */
static double rel_err(const float *got, const float *want, size_t n)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - (double)want[i]);
        diff = e > diff || isnan(e) ? e : diff;
        scale = fabs((double)want[i]) > scale ? fabs((double)want[i]) : scale;
    }
    return scale > 0 ? diff / scale : diff;
}

typedef struct compare_arg {
    const float *local, *full;
    long long differ;
} compare_arg;

static void compare_run(size_t full, size_t local, size_t count, void *arg)
{
    compare_arg *a = arg;
    for (size_t i = 0; i < count; i++) a->differ += memcmp(a->local + local + i, a->full + full + i, sizeof(float)) != 0;
}

/* Every rank's whole vector against the same elements of rank 0's gathered weights (full, host,
 * broadcast here): replicas hold their slices, and a group's ranks b, bit-identically (the
 * driver's replica check covers only the first run of each rank). Elements that differ, over
 * all ranks. Collective. */
static long long slices_mismatched(sl_train *t, float *full)
{
    mm *s = t->state;
    SL_CHECK_MPI(MPI_Bcast(full, (int)t->m->nparams, MPI_FLOAT, 0, t->ctx->comm));
    float *mine = sl_k_download(t->be, s->params, s->np * sizeof(float));
    compare_arg a = {mine, full, 0};
    mm_slice_runs(t->m, s->t, s->tr, compare_run, &a);
    free(mine);
    long long all = 0;
    SL_CHECK_MPI(MPI_Allreduce(&a.differ, &all, 1, MPI_LONG_LONG, MPI_SUM, t->ctx->comm));
    return all;
}

/* The trained weights (full, host, rank 0) against the plain variant's of the same degrees,
 * batch and steps (kept from its run): the variants differ only in when and how the same sums
 * are communicated, so they must agree within the training tolerance. NaN where no plain run
 * came first. */
static double vs_plain(const sl_train *t, const float *params)
{
    static float *plain;
    static int plain_t, plain_d, plain_B, plain_steps, plain_dt;
    const mm *s = t->state;
    const size_t n = t->m->nparams;
    if (t->variant == V_PLAIN) {
        free(plain);
        plain = malloc(n * sizeof(float));
        if (!plain) SL_FATAL("out of memory");
        memcpy(plain, params, n * sizeof(float));
        plain_t = s->t;
        plain_d = s->d;
        plain_B = t->global_batch;
        plain_steps = t->nsteps;
        plain_dt = t->dtype;
        return 0;
    }
    if (!plain || plain_t != s->t || plain_d != s->d || plain_B != t->global_batch || plain_steps != t->nsteps ||
        plain_dt != (int)t->dtype)
        return NAN;
    return rel_err(params, plain, n);
}

/* One step at the trained weights, on step 0's tokens, against the serial blocks: forward
 * output, input gradient, every weight gradient (A, a, B, b of each block), and block 0's
 * column-parallel U_r against the serial U's columns. Collective; the verdict on rank 0. */
int mm_check_step(sl_train *t, double *error, char *why, size_t len)
{
    mm *s = t->state;
    const sl_mlp *m = t->m;
    const int B = t->global_batch, h = s->h, f = s->f;
    const size_t nparams = m->nparams, Bh = (size_t)B * h;
    const double tol = step_tol(t->dtype);
    sl_train quiet = *t; /* its phases and step are nobody's, nor on the timeline */
    quiet.step = 0;
    const int tracing = sl_trace_enabled();
    sl_trace_enable(0);
    const float *my_out, *dx;
    float *mixed_out = NULL, *mixed_dx = NULL; /* 16-bit: widened (and dx unscaled) into f32 */
    if (s->mixed) {
        mm_mixed_check_pass(&quiet, s, &mixed_out, &mixed_dx);
        my_out = mixed_out;
        dx = mixed_dx;
    } else {
        dx = mm_forward_backward(&quiet, s);
        my_out = s->x[s->L];
    }
    sl_trace_enable(tracing);

    float *out = NULL, *dxin = NULL, *grads = NULL;
    float *params = sl_alloc(SL_MEM_OTHER, nparams * sizeof(float));
    if (t->rank == 0) {
        out = sl_alloc(SL_MEM_OTHER, Bh * sizeof(float));
        dxin = sl_alloc(SL_MEM_OTHER, Bh * sizeof(float));
        grads = sl_alloc(SL_MEM_OTHER, nparams * sizeof(float));
    }
    gather_tokens_host(t, my_out, out);
    gather_tokens_host(t, dx, dxin);
    sl_k_free(t->be, mixed_out);
    sl_k_free(t->be, mixed_dx);
    mm_gather_slices(t, s->grads, grads);
    mm_gather_slices(t, s->params, params);
    const long long mismatched = slices_mismatched(t, params);
    int failed = 0;
    if (t->rank == 0) {
        const sl_backend be = t->be;
        float *p = sl_k_upload(be, SL_MEM_OTHER, params, nparams * sizeof(float));
        float *hout, *hdx, *hg, *hu = NULL, *mu = NULL;
        if (s->mixed) {
            mm_mixed_serial_pass(m, t->task, t->dtype, B, p, (float)s->mixed->ms.sc.scale, &hout, &hdx, &hg);
        } else {
            mm_serial_acts a;
            mm_serial_acts_alloc(m, B, &a);
            float *target = sl_k_malloc(be, SL_MEM_OTHER, Bh * sizeof(float));
            float *dout = sl_k_malloc(be, SL_MEM_OTHER, Bh * sizeof(float));
            float *g = sl_k_malloc(be, SL_MEM_OTHER, nparams * sizeof(float));
            sl_task_batch(t->task, 0, B, a.x[0], target);
            mm_serial_forward(m, &a, p);
            sl_k_mse(be, Bh, a.x[s->L], target, dout, 1.0f / ((float)B * (float)h));
            const float *want_dx = mm_serial_backward(m, &a, p, g, dout);
            hout = sl_k_download(be, a.x[s->L], Bh * sizeof(float));
            hdx = sl_k_download(be, want_dx, Bh * sizeof(float));
            hg = sl_k_download(be, g, nparams * sizeof(float));
            /* the column-parallel half alone: the serial layer A on rank 0's own tokens (the same
             * rows, so only the number of output columns differs from U_r's GEMM) */
            float *u_full = sl_k_malloc(be, SL_MEM_OTHER, (size_t)s->n * f * sizeof(float));
            sl_linear_forward(be, s->n, h, f, p + m->w_off[0], p + m->b_off[0], a.x[0], u_full);
            hu = sl_k_download(be, u_full, (size_t)s->n * f * sizeof(float));
            mu = sl_k_download(be, s->u[0], (size_t)s->n * s->c * sizeof(float));
            float *dev[] = {u_full, target, dout, g};
            for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) sl_k_free(be, dev[i]);
            mm_serial_acts_free(m, &a);
        }
        s->out_err = rel_err(out, hout, Bh);
        s->dx_err = rel_err(dxin, hdx, Bh);
        s->grad_err = 0;
        for (int l = 0; l < m->nlayers; l++) { /* W_l and b_l of each layer on their own */
            const size_t w = (size_t)m->dims[l] * m->dims[l + 1];
            const double ew = rel_err(grads + m->w_off[l], hg + m->w_off[l], w);
            const double eb = rel_err(grads + m->b_off[l], hg + m->b_off[l], (size_t)m->dims[l + 1]);
            const char *const names = "AaBb";
            for (int k = 0; k < 2; k++) {
                const double e = k ? eb : ew;
                if (e > s->grad_err || isnan(e)) {
                    s->grad_err = e;
                    snprintf(s->grad_worst, sizeof s->grad_worst, "d%c of block %d", names[(l % 2) * 2 + k], l / 2);
                }
            }
        }
        /* rank 0's U_r against the first c columns (f32; the 16-bit check has no U in f32: NaN) */
        s->colpar_diff = mu ? 0 : NAN;
        for (int j = 0; mu && j < s->n; j++)
            for (int k = 0; k < s->c; k++) {
                const double e = fabs((double)mu[(size_t)j * s->c + k] - (double)hu[(size_t)j * f + k]);
                s->colpar_diff = e > s->colpar_diff || isnan(e) ? e : s->colpar_diff;
            }
        if (!(s->out_err <= tol))
            snprintf(why, len, "forward output differs from the serial blocks' by %.3g (tolerance %g)", s->out_err, tol);
        else if (!(s->dx_err <= tol))
            snprintf(why, len, "input gradient differs from the serial blocks' by %.3g (tolerance %g)", s->dx_err, tol);
        else if (!(s->grad_err <= tol))
            snprintf(why, len, "weight gradient %s differs from the serial blocks' by %.3g (tolerance %g)",
                     s->grad_worst, s->grad_err, tol);
        else if (mismatched)
            snprintf(why, len, "%lld parameters differ between ranks holding the same slice (replicas, or b in a "
                     "group)", mismatched);
        failed = !(s->out_err <= tol && s->dx_err <= tol && s->grad_err <= tol) || mismatched;
        s->vs_plain = vs_plain(t, params);
        void *host[] = {hout, hdx, hg, hu, mu};
        for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
        sl_k_free(be, p);
        sl_free(out);
        sl_free(dxin);
        sl_free(grads);
    }
    sl_free(params);
    double errs[5] = {s->out_err, s->dx_err, s->grad_err, s->colpar_diff, s->vs_plain};
    SL_CHECK_MPI(MPI_Bcast(errs, 5, MPI_DOUBLE, 0, t->ctx->comm));
    s->out_err = errs[0];
    s->dx_err = errs[1];
    s->grad_err = errs[2];
    s->colpar_diff = errs[3];
    s->vs_plain = errs[4];
    s->check_step = 1;
    *error = fmax(s->out_err, fmax(s->dx_err, s->grad_err)); /* fmax: a NaN loses to a number */
    if (isnan(s->out_err) || isnan(s->dx_err) || isnan(s->grad_err)) *error = NAN;
    return failed;
}

/* Serial training of the whole model on the global batch in each precision; the same for every
 * variant and degree, so it is kept (host) for the next run with the same batch and steps. */
typedef struct kept_run {
    float *w;
    int B, steps;
    double loss;
} kept_run;
static kept_run kept[SL_NDTYPES];

/* dt's serial run for t's batch and steps, its weights into params (backend memory; NULL: not
 * wanted). */
static void serial_run(const sl_train *t, sl_dtype dt, float *params)
{
    kept_run *k = &kept[dt];
    const size_t bytes = t->m->nparams * sizeof(float);
    if (k->w && k->B == t->global_batch && k->steps == t->nsteps) {
        if (params) sl_k_memcpy(t->be, params, k->w, bytes, SL_K_H2D);
        return;
    }
    float *dev = params ? params : sl_k_malloc(t->be, SL_MEM_OTHER, bytes);
    const uint64_t seed = (uint64_t)sl_train_opt.seed;
    long skipped = 0;
    k->loss = dt == SL_F32 ? mm_serial_train(t->m, t->task, &t->optim, t->global_batch, t->nsteps, seed, dev)
                           : mm_mixed_serial_train(t->m, t->task, &t->optim, dt, t->global_batch, t->nsteps, seed,
                                                   dev, &skipped);
    free(k->w);
    k->w = sl_k_download(t->be, dev, bytes);
    k->B = t->global_batch;
    k->steps = t->nsteps;
    if (!params) sl_k_free(t->be, dev);
}

void mm_reference(sl_train *t, float *params, double *losses)
{
    (void)losses; /* the serial blocks report only their last step's loss (mm_reference_loss) */
    serial_run(t, t->dtype, params);
    if (t->dtype != SL_F32) serial_run(t, SL_F32, NULL); /* the loss a 16-bit row is read against */
}

double mm_reference_loss(const sl_train *t, sl_dtype dt)
{
    const kept_run *k = &kept[dt];
    return k->w && k->B == t->global_batch && k->steps == t->nsteps ? k->loss : NAN;
}
