/* check.c — megatron_mlp's checks and reference (tp.h): one step at the trained weights
 * against the serial model and an independent f32 reference (forward output, input gradient,
 * every weight gradient, the column-parallel half on its own), every rank's slices against
 * rank 0's, the variants against plain, and serial training of the whole model.
 *
 * The serial model is the technique's own code (mm_ops) at t = 1 and d = 1 on rank 0 alone:
 * the same blocks, a group of one rank, nothing communicated. So it answers whether the
 * distribution is right (a sum never made, b added t times, a slice off by one, a 16-bit
 * partial sum rounded wrongly) but not whether the blocks compute the model at all: a defect
 * in them (a wrong GEMM operand, a cast from the wrong buffer) would be in both. That is what
 * the independent reference is for: serial.h's f32 model built from the shared model's layers
 * (mlp.h, themselves checked against train_ref in t/unit), which shares no code with the
 * blocks beyond the kernels. Every run's step is compared with it, f32 runs to OUT_TOL and
 * 16-bit ones to F32_REF_UNITS (below). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* -d f16|bf16: the step against the serial model at the same weights (both
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

/* -d f16|bf16 against the independent f32 reference at the same weights: everything the 16-bit
 * step rounds, measured against not rounding at all. Each of U, Y, the partial and summed Z, the
 * stream X and every gradient tensor is rounded once per block (u relative to the element), and
 * the roundings compound through the L blocks forward and back. Measured on 2 and 4 ranks (t =
 * 1-4, d = 1-4, L = 2, h = 48-512, mpi and ring, every variant): f16 1.8u to 3.3u, bf16 2.0u to
 * 4.0u (f32_ref_err in every row). The bound is 32u (f16 1.6e-2, bf16 0.125): loose against
 * rounding, tight against what it is for, a block that computes another function (a wrong
 * operand or buffer: errors of order 1; t/integration/megatron_mlp_mixed.t injects one). */
#define F32_REF_UNITS 32

static double unit(sl_dtype dt) { return dt == SL_F16 ? 0x1p-11 : dt == SL_BF16 ? 0x1p-8 : 0; }
static double step_tol(sl_dtype dt) { return dt == SL_F32 ? OUT_TOL : MIXED_OUT_UNITS * unit(dt); }
static double f32_ref_tol(sl_dtype dt) { return dt == SL_F32 ? OUT_TOL : F32_REF_UNITS * unit(dt); }

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

/* The serial model: t's run as one process, the technique at t = 1 and d = 1 (setup's one-rank
 * layout: a group and a replica of one rank, nothing communicated), plain, in dt, on rank 0
 * alone; its phases and trace are nobody's (the caller turns the trace off). */
static sl_train serial_of(const sl_train *t, sl_dtype dt)
{
    sl_train r = *t;
    r.variant = V_PLAIN;
    r.dtype = dt;
    r.baseline = 1;
    r.rank = 0;
    r.size = 1;
    r.state = NULL;
    r.step = 0;
    r.loss = 0;
    return r;
}

/* The serial model's step at the full weights params (f32, backend memory) on step 0's tokens,
 * at the run's loss scale: output, dL/dx[0] and the gradients, unscaled (host memory, allocated
 * here). */
static void serial_pass(const sl_train *t, const mm_ops *ops, const float *params, float scale, float **out,
                        float **dx, float **grads)
{
    sl_train r = serial_of(t, t->dtype);
    ops->setup(&r);
    mm *s = r.state;
    const size_t nh = (size_t)s->n * s->h * sizeof(float);
    sl_k_memcpy(r.be, s->params, params, s->np * sizeof(float), SL_K_D2D);
    if (s->dt != SL_F32) {
        sl_k_cast(r.be, s->np, s->params, SL_F32, s->w, s->dt, NULL);
        s->ms.sc.scale = scale;
    }
    float *o, *d;
    ops->pass(&r, &o, &d);
    *out = sl_k_download(r.be, o, nh);
    *dx = sl_k_download(r.be, d, nh);
    *grads = sl_k_download(r.be, s->grads, s->np * sizeof(float));
    sl_k_free(r.be, o);
    sl_k_free(r.be, d);
    ops->release(&r);
}

/* The independent f32 reference's step (serial.h) at params on step 0's B tokens: output,
 * dL/dx[0], the gradients (host, allocated here) and U of the first layer on the first n
 * tokens (host, [n, f]). */
static void f32_reference(const sl_train *t, const float *p, int n, float **out, float **dx, float **grads,
                          float **u)
{
    const sl_mlp *m = t->m;
    const sl_backend be = t->be;
    const int B = t->global_batch, h = m->dims[0], f = m->dims[1], L = m->nlayers / 2;
    const size_t Bh = (size_t)B * h;
    mm_serial_acts a;
    mm_serial_acts_alloc(m, B, &a);
    float *target = sl_k_malloc(be, SL_MEM_OTHER, Bh * sizeof(float));
    float *dout = sl_k_malloc(be, SL_MEM_OTHER, Bh * sizeof(float));
    float *g = sl_k_malloc(be, SL_MEM_OTHER, m->nparams * sizeof(float));
    sl_k_memset0(be, g, m->nparams * sizeof(float));
    sl_task_batch(t->task, 0, B, a.x[0], target);
    mm_serial_forward(m, &a, p);
    sl_k_mse(be, Bh, a.x[L], target, dout, 1.0f / ((float)B * (float)h));
    const float *want_dx = mm_serial_backward(m, &a, p, g, dout);
    *out = sl_k_download(be, a.x[L], Bh * sizeof(float));
    *dx = sl_k_download(be, want_dx, Bh * sizeof(float));
    *grads = sl_k_download(be, g, m->nparams * sizeof(float));
    /* the column-parallel half alone: the serial layer A on rank 0's own tokens (the same rows,
     * so only the number of output columns differs from U_r's GEMM) */
    float *u_full = sl_k_malloc(be, SL_MEM_OTHER, (size_t)n * f * sizeof(float));
    sl_linear_forward(be, n, h, f, p + m->w_off[0], p + m->b_off[0], a.x[0], u_full);
    *u = sl_k_download(be, u_full, (size_t)n * f * sizeof(float));
    float *dev[] = {u_full, target, dout, g};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) sl_k_free(be, dev[i]);
    mm_serial_acts_free(m, &a);
}

/* The largest rel_err of the weight gradients, W_l and b_l of each layer on their own; worst
 * names it. */
static double grads_err(const sl_mlp *m, const float *got, const float *want, char *worst, size_t len)
{
    double err = 0;
    for (int l = 0; l < m->nlayers; l++) {
        const size_t w = (size_t)m->dims[l] * m->dims[l + 1];
        const double ew = rel_err(got + m->w_off[l], want + m->w_off[l], w);
        const double eb = rel_err(got + m->b_off[l], want + m->b_off[l], (size_t)m->dims[l + 1]);
        const char *const names = "AaBb";
        for (int k = 0; k < 2; k++) {
            const double e = k ? eb : ew;
            if (e > err || isnan(e)) {
                err = e;
                if (worst) snprintf(worst, len, "d%c of block %d", names[(l % 2) * 2 + k], l / 2);
            }
        }
    }
    return err;
}

/* One step at the trained weights, on step 0's tokens: forward output, input gradient, every
 * weight gradient (A, a, B, b of each block) against the serial model's in the run's dtype and
 * against the independent f32 reference's (in f32 the two are one comparison: the reference),
 * and block 0's column-parallel U_r (f32) against the reference U's columns. Collective; the
 * verdict on rank 0. */
int mm_check_step(sl_train *t, const mm_ops *ops, double *error, char *why, size_t len)
{
    mm *s = t->state;
    const sl_mlp *m = t->m;
    const int B = t->global_batch, f = s->f, mixed = t->dtype != SL_F32;
    const size_t nparams = m->nparams, Bh = (size_t)B * s->h;
    const double tol = step_tol(t->dtype), ref_tol = f32_ref_tol(t->dtype);
    const float scale = mixed ? (float)s->ms.sc.scale : 1.0f;
    sl_train quiet = *t; /* its phases and step are nobody's, nor on the timeline */
    quiet.step = 0;
    const int tracing = sl_trace_enabled();
    sl_trace_enable(0);
    float *my_out, *dx;
    ops->pass(&quiet, &my_out, &dx);

    float *out = NULL, *dxin = NULL, *grads = NULL;
    float *params = sl_alloc(SL_MEM_OTHER, nparams * sizeof(float));
    if (t->rank == 0) {
        out = sl_alloc(SL_MEM_OTHER, Bh * sizeof(float));
        dxin = sl_alloc(SL_MEM_OTHER, Bh * sizeof(float));
        grads = sl_alloc(SL_MEM_OTHER, nparams * sizeof(float));
    }
    gather_tokens_host(t, my_out, out);
    gather_tokens_host(t, dx, dxin);
    sl_k_free(t->be, my_out);
    sl_k_free(t->be, dx);
    mm_gather_slices(t, s->grads, grads);
    mm_gather_slices(t, s->params, params);
    const long long mismatched = slices_mismatched(t, params);
    int failed = 0;
    if (t->rank == 0) {
        const sl_backend be = t->be;
        float *p = sl_k_upload(be, SL_MEM_OTHER, params, nparams * sizeof(float));
        float *rout, *rdx, *rg, *hu, *hout = NULL, *hdx = NULL, *hg = NULL;
        f32_reference(t, p, s->n, &rout, &rdx, &rg, &hu);
        if (mixed) serial_pass(t, ops, p, scale, &hout, &hdx, &hg);
        /* against the serial model: in f32 the reference is it (the same operations) */
        s->out_err = rel_err(out, mixed ? hout : rout, Bh);
        s->dx_err = rel_err(dxin, mixed ? hdx : rdx, Bh);
        s->grad_err = grads_err(m, grads, mixed ? hg : rg, s->grad_worst, sizeof s->grad_worst);
        s->f32_ref_err = fmax(rel_err(out, rout, Bh), fmax(rel_err(dxin, rdx, Bh), grads_err(m, grads, rg, NULL, 0)));
        /* rank 0's U_r against the first c columns (f32; a 16-bit run has no U in f32: NaN) */
        float *mu = mixed ? NULL : sl_k_download(be, s->u[0], (size_t)s->n * s->c * sizeof(float));
        s->colpar_diff = mu ? 0 : NAN;
        for (int j = 0; mu && j < s->n; j++)
            for (int k = 0; k < s->c; k++) {
                const double e = fabs((double)mu[(size_t)j * s->c + k] - (double)hu[(size_t)j * f + k]);
                s->colpar_diff = e > s->colpar_diff || isnan(e) ? e : s->colpar_diff;
            }
        const char *against = mixed ? "the serial model's" : "the serial reference's";
        if (!(s->out_err <= tol))
            snprintf(why, len, "forward output differs from %s by %.3g (tolerance %g)", against, s->out_err, tol);
        else if (!(s->dx_err <= tol))
            snprintf(why, len, "input gradient differs from %s by %.3g (tolerance %g)", against, s->dx_err, tol);
        else if (!(s->grad_err <= tol))
            snprintf(why, len, "weight gradient %s differs from %s by %.3g (tolerance %g)", s->grad_worst, against,
                     s->grad_err, tol);
        else if (!(s->f32_ref_err <= ref_tol))
            snprintf(why, len, "the step differs from the independent f32 reference's by %.3g (tolerance %g)",
                     s->f32_ref_err, ref_tol);
        else if (mismatched)
            snprintf(why, len, "%lld parameters differ between ranks holding the same slice (replicas, or b in a "
                     "group)", mismatched);
        failed = !(s->out_err <= tol && s->dx_err <= tol && s->grad_err <= tol && s->f32_ref_err <= ref_tol) ||
                 mismatched;
        s->vs_plain = vs_plain(t, params);
        void *host[] = {rout, rdx, rg, hu, mu, hout, hdx, hg};
        for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
        sl_k_free(be, p);
        sl_free(out);
        sl_free(dxin);
        sl_free(grads);
    }
    sl_trace_enable(tracing);
    sl_free(params);
    double errs[6] = {s->out_err, s->dx_err, s->grad_err, s->colpar_diff, s->vs_plain, s->f32_ref_err};
    SL_CHECK_MPI(MPI_Bcast(errs, 6, MPI_DOUBLE, 0, t->ctx->comm));
    s->out_err = errs[0];
    s->dx_err = errs[1];
    s->grad_err = errs[2];
    s->colpar_diff = errs[3];
    s->vs_plain = errs[4];
    s->f32_ref_err = errs[5];
    s->check_step = 1;
    *error = fmax(s->out_err, fmax(s->dx_err, s->grad_err)); /* fmax: a NaN loses to a number */
    if (isnan(s->out_err) || isnan(s->dx_err) || isnan(s->grad_err)) *error = NAN;
    return failed;
}

/* Serial training of the whole model on the global batch in each precision; the same for every
 * variant and degree, so it is kept (host) for the next run with the same batch and steps. */
typedef struct kept_run {
    float *w;
    double *losses;
    int B, steps;
} kept_run;
static kept_run kept[SL_NDTYPES];

/* dt's serial training for t's batch and steps: the serial model's steps 0 .. nsteps - 1. */
static const kept_run *serial_run(const sl_train *t, const mm_ops *ops, sl_dtype dt)
{
    kept_run *k = &kept[dt];
    if (k->w && k->B == t->global_batch && k->steps == t->nsteps) return k;
    const int tracing = sl_trace_enabled();
    sl_trace_enable(0);
    sl_train r = serial_of(t, dt);
    ops->setup(&r);
    free(k->losses);
    k->losses = malloc((size_t)t->nsteps * sizeof *k->losses);
    if (!k->losses) SL_FATAL("out of memory");
    for (int step = 0; step < t->nsteps; step++) {
        r.step = step;
        r.loss = 0;
        ops->step(&r);
        k->losses[step] = r.loss;
    }
    const mm *s = r.state;
    free(k->w);
    k->w = sl_k_download(r.be, s->params, s->np * sizeof(float)); /* t = 1: the flat vector */
    k->B = t->global_batch;
    k->steps = t->nsteps;
    ops->release(&r);
    sl_trace_enable(tracing);
    return k;
}

void mm_reference(sl_train *t, const mm_ops *ops, float *params, double *losses)
{
    const kept_run *k = serial_run(t, ops, t->dtype);
    sl_k_memcpy(t->be, params, k->w, t->m->nparams * sizeof(float), SL_K_H2D);
    memcpy(losses, k->losses, (size_t)t->nsteps * sizeof *losses);
    if (t->dtype != SL_F32) serial_run(t, ops, SL_F32); /* the loss a 16-bit row is read against */
}

double mm_reference_loss(const sl_train *t, sl_dtype dt)
{
    const kept_run *k = &kept[dt];
    return k->w && k->B == t->global_batch && k->steps == t->nsteps ? k->losses[k->steps - 1] : NAN;
}

void mm_gather_slices(sl_train *t, const float *local, float *full)
{
    mm *s = t->state;
    if (s->rep != 0) return;
    float *mine = sl_k_download(t->be, local, s->np * sizeof(float));
    float *all = t->rank == 0 ? malloc((size_t)s->t * s->np * sizeof(float)) : NULL;
    if (t->rank == 0 && !all) SL_FATAL("out of memory");
    SL_CHECK_MPI(MPI_Gather(mine, (int)s->np, MPI_FLOAT, all, (int)s->np, MPI_FLOAT, 0, s->tp_mpi));
    for (int r = 0; t->rank == 0 && r < s->t; r++) mm_slice_scatter(t->m, s->t, r, all + (size_t)r * s->np, full);
    free(mine);
    free(all);
}
