/* mixed.c — ddp -d f16|bf16: mixed-precision data parallelism, the sync variant.
 *
 * Each rank holds a replica of kernels/mlp_mixed.h: 16-bit weights cast from an f32 master
 * copy, 16-bit activations and gradients, GEMMs accumulating in f32. A step:
 *
 *   forward/backward on the rank's slice, loss * scale    (gradients g16: 2 bytes each)
 *   all-reduce SUM of g16 in the 16-bit type              (2Ψ bytes on the wire, half of f32)
 *   g32 = g16 / scale, counting inf/NaN                   (in f32)
 *   found = OR over ranks of (inf/NaN seen here)          (MPI_Allreduce of one int)
 *   scaler.update(found): apply on the f32 master and cast back to 16 bits, or skip
 *
 * Where the sum is done. MPI has no 16-bit floating type: the suite's collectives (and, for
 * -C mpi, a user-defined MPI_Op on a 2-byte datatype, common/coll/coll_mpi.c) widen each pair
 * of operands to f32, add, and round the partial sum back into the 16-bit type at every hop.
 * We keep that rather than widen the gradient to f32 before the all-reduce: widening doubles the
 * bytes on the wire, which is what mixed-precision data parallelism exists to save (PyTorch's
 * fp16_compress_hook makes the same choice). The price is one rounding per hop: after N ranks
 * a summed element carries at most about (N-1)·u of the partial sums' magnitude (u: 2^-11 for
 * f16, 2^-8 for bf16), the same order as the rounding each rank's gradient already had when it
 * was cast to 16 bits; the check below bounds what that does to the weights.
 *
 * Why the overflow flag is all-reduced. With loss scaling a step whose gradients hold inf or
 * NaN must be skipped, and every replica must make the same decision or they diverge for good.
 * inf and NaN do travel through a sum, so a correct all-reduce already gives every rank the
 * same non-finite elements; but nothing in MPI promises that every rank of an all-reduce gets
 * the same bits, and a rank may see an overflow the sum does not (its own 16-bit cast). So the
 * decision is taken on the OR of every rank's flag: one int per step through the MPI library
 * on the world communicator, outside the gradient collective, so that bytes_sent stays the
 * gradient's (the row says so: overflow_flag_bytes, 4 per rank per step).
 *
 * The check's bounds (DDP_MIXED_TOL_*, mixed.h), against one process training the whole batch
 * in the same precision with the same scaler (sl_train_serial_mixed). The two differ where the
 * batch's gradient is summed: the reference rounds the f32 GEMM sum over B samples once into
 * 16 bits; here each rank rounds its part and the all-reduce rounds at each hop. So a step's
 * gradient differs from the reference's by a few u of the partial gradients (u: the unit
 * roundoff, 2^-11 for f16, 2^-8 for bf16), and once a master weight differs its 16-bit copy can
 * round to the neighbouring value, which perturbs later gradients by O(u) too.
 *   SGD (largest element difference over the largest weight): a weight moves by lr times a
 *   momentum sum of gradients (at most 10|g|), so S steps differ by at most about
 *   S·lr·10·|g|·c·u; with lr 0.01, |g| <= 1, c a few and S up to ~50 that stays within about
 *   u of weights of order 0.1-1. Measured (4 ranks, 4 x 256, 12 and 42 steps, mpi/ring/rhd):
 *   f16 4e-5 to 9e-5, bf16 3e-4 to 8e-4. The tolerances are 4u: 2e-3 (f16), 1.5e-2 (bf16).
 *   One step taken by the reference and skipped here is lr·|g| on every weight: ~1e-2 at the
 *   test's size, and fails (t/integration/ddp.t does it).
 *   AdamW (L2): its update lr·m/sqrt(v) is of size lr whatever the gradient's, so a weight whose
 *   gradient is within 16-bit rounding of zero can step +lr in one run and -lr in the other;
 *   16-bit rounding leaves many more such weights than f32's. Measured, same runs: f16 8e-4 to
 *   1.1e-3, bf16 4.2e-3 to 4.5e-3. Tolerances 1e-2 (f16), 3e-2 (bf16); a missing or doubled
 *   step moves every weight by lr, an L2 error of lr/rms(w) ~ 0.1 and more. (A gradient never
 *   all-reduced leaves the replicas different, which the driver's bit-for-bit check catches.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixed.h"

void ddp_mixed_setup(sl_train *t, ddp_mixed *d)
{
    const sl_mlp *m = t->m;
    const int rows = t->hi - t->lo > 0 ? t->hi - t->lo : 1;
    memset(d, 0, sizeof *d);
    sl_mixed_init(&d->mx, m, t->dtype, 1, rows, (uint64_t)sl_train_opt.seed, &t->optim);
    sl_train_scaler(t->dtype, &d->sc);
    d->x = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[0] * sizeof(float));
    d->y = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[m->nlayers] * sizeof(float));
}

void ddp_mixed_free(sl_train *t, ddp_mixed *d)
{
    sl_mixed_free(&d->mx);
    sl_k_free(t->be, d->x);
    sl_k_free(t->be, d->y);
}

/* For the test of the overflow flag: SL_TEST_CORRUPT=1 makes the last rank alone find an inf
 * in its unscaled gradients at step 0, as if its own cast had overflowed. Every rank must then
 * skip the step (the replicas stay identical), and the weights, one step short of the
 * reference's, must fail the check. */
static size_t injected_overflow(const sl_train *t)
{
    const char *c = getenv("SL_TEST_CORRUPT");
    return c && !strcmp(c, "1") && t->step == 0 && t->size > 1 && t->rank == t->size - 1;
}

void ddp_mixed_step(sl_train *t, ddp_mixed *d)
{
    sl_mixed *mx = &d->mx;
    const int count = t->hi - t->lo;
    const float scale = (float)d->sc.scale;
    sl_train_load(t, t->lo, count, d->x, d->y);

    double t0 = sl_now();
    /* the loss is normalised over the global batch, so the ranks' gradients sum to its gradient */
    t->loss += sl_mixed_forward_backward(mx, d->x, d->y, sl_task_loss_norm(t->task, t->global_batch), scale);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, "forward+backward (16-bit)", t0, sl_now());

    t0 = sl_now();
    sl_train_coll_ok(sl_coll_allreduce(t->comm, mx->g16, mx->g16, t->m->nparams, t->dtype, SL_OP_SUM),
                     "sl_coll_allreduce (16-bit gradients)");
    sl_train_span(t, SL_PHASE_COMM, "all-reduce 16-bit gradients", t0, sl_now());
    sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - t0);

    t0 = sl_now();
    size_t bad = sl_mixed_unscale(mx, scale) + injected_overflow(t);
    int mine = bad > 0, found = mine;
    d->overflow_steps += mine;
    if (t->size > 1) { /* the one-rank baseline runs on rank 0 alone */
        double f0 = sl_now();
        SL_CHECK_MPI(MPI_Allreduce(&mine, &found, 1, MPI_INT, MPI_LOR, t->ctx->comm));
        sl_train_span(t, SL_PHASE_COMM, "overflow flag", f0, sl_now());
        sl_train_record(t, SL_PHASE_EXPOSED, sl_now() - f0);
    }
    if (sl_loss_scaler_update(&d->sc, found)) {
        sl_optim o = sl_optim_for_step(&t->optim, d->applied++);
        sl_mixed_apply(mx, &o);
    }
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, "unscale + optimizer (f32 master)", t0, sl_now());
}

sl_mlp_bytes ddp_mixed_memory(const sl_train *t, const ddp_mixed *d)
{
    return sl_mixed_memory(t->m, t->dtype, 1, d->mx.batch, &t->optim);
}

void ddp_mixed_row(sl_train *t, ddp_mixed *d, sl_result *res)
{
    sl_result_param_str(res, "precision", "mixed");
    sl_result_param_str(res, "loss_scale", sl_scale_mode_name(d->sc.mode));
    sl_result_param_str(res, "grad_allreduce", "16-bit, summed pairwise in f32 and rounded at each hop");
    sl_result_param_num(res, "overflow_flag_bytes", t->size > 1 ? (double)sizeof(int) : 0);
    sl_result_metric(res, "skipped_steps", (double)d->sc.skipped, "steps");
    sl_result_metric(res, "final_scale", d->sc.scale, "scale");
    long seen = 0;
    SL_CHECK_MPI(MPI_Allreduce(&d->overflow_steps, &seen, 1, MPI_LONG, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "overflow_seen", (double)seen, "rank-steps");
}
