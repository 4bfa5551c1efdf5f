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
 * was cast to 16 bits; the check (below) bounds what that does to the weights.
 *
 * Why the overflow flag is all-reduced. With loss scaling a step whose gradients hold inf or
 * NaN must be skipped, and every replica must make the same decision or they diverge for good.
 * inf and NaN do travel through a sum, so a correct all-reduce already gives every rank the
 * same non-finite elements; but nothing in MPI promises that every rank of an all-reduce gets
 * the same bits, and a rank may see an overflow the sum does not (its own 16-bit cast). So the
 * decision is taken on the OR of every rank's flag (sl_train_overflow_any): one int per step
 * through the MPI library, outside the gradient collective, so that bytes_sent stays the
 * gradient's (the row says so: overflow_flag_bytes, 4 per rank per step).
 *
 * The check: the replicas bit for bit, and the weights against one process training the whole
 * batch in the same precision with the same scaler (sl_train_serial_mixed), within the bounds
 * SL_TRAIN_TOL_MIXED_* that sl_train.h justifies.
 */
#include <string.h>

#include "mixed.h"

void ddp_mixed_setup(sl_train *t, ddp_mixed *d, int micro)
{
    const sl_mlp *m = t->m;
    const int rows = t->hi - t->lo > micro ? (t->hi - t->lo + micro - 1) / micro : 1;
    memset(d, 0, sizeof *d);
    sl_mixed_init(&d->mx, m, t->dtype, 1, rows, (uint64_t)sl_train_opt.seed, &t->optim);
    sl_train_mixed_init(&d->ms, t->dtype);
    d->x = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[0] * sizeof(float));
    d->y = sl_k_malloc(t->be, SL_MEM_DATA, (size_t)rows * m->dims[m->nlayers] * sizeof(float));
}

void ddp_mixed_free(sl_train *t, ddp_mixed *d)
{
    sl_mixed_free(&d->mx);
    sl_k_free(t->be, d->x);
    sl_k_free(t->be, d->y);
}

void ddp_mixed_step(sl_train *t, ddp_mixed *d)
{
    sl_mixed *mx = &d->mx;
    const int count = t->hi - t->lo;
    const float scale = (float)d->ms.sc.scale;
    sl_train_load(t, t->lo, count, d->x, d->y);

    double t0 = sl_now();
    /* the loss is normalised over the global batch, so the ranks' gradients sum to its gradient */
    t->loss += sl_mixed_forward_backward(mx, d->x, d->y, sl_task_loss_norm(t->task, t->global_batch), scale);
    sl_k_sync(t->be);
    sl_train_span(t, SL_PHASE_COMPUTE, "forward+backward (16-bit)", t0, sl_now());

    t0 = sl_now();
    sl_train_coll_ok(sl_coll_allreduce(t->comm, mx->g16, mx->g16, t->m->nparams, t->dtype, SL_OP_SUM),
                     "sl_coll_allreduce (16-bit gradients)");
    sl_train_blocking(t, "all-reduce 16-bit gradients", t0);

    ddp_mixed_update(t, d);
}

void ddp_mixed_update(sl_train *t, ddp_mixed *d)
{
    double t0 = sl_now();
    sl_optim o;
    if (sl_train_mixed_decide(t, &d->ms, sl_mixed_unscale(&d->mx, (float)d->ms.sc.scale) > 0, &o))
        sl_mixed_apply(&d->mx, &o);
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
    sl_result_param_str(res, "grad_allreduce", "16-bit, summed pairwise in f32 and rounded at each hop");
    sl_train_mixed_row(t, &d->ms, res);
}
