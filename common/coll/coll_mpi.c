/* coll_mpi.c — the MPI library's collectives behind the suite's API: the reference every
 * other implementation is compared with, and what most training codes use on CPUs.
 *
 * MPI has no 16-bit floating types, so f16 and bf16 travel as a 2-byte contiguous datatype
 * with user-defined ops that widen to f32, combine and round once (the same kernel as the
 * suite's own algorithms). MPI has no average either: avg is MPI_SUM followed by a division.
 * Device buffers go to MPI directly when it is CUDA-aware, otherwise they are staged whole
 * through pinned host memory. */
#include "coll_internal.h"

#define HALF_OP(NAME, T, OP)                                                          \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt)               \
    {                                                                                 \
        (void)dt;                                                                     \
        sl_reduce_host(inout, inout, in, (size_t)*len, T, OP);                        \
    }
HALF_OP(f16_sum, SL_F16, SL_OP_SUM)
HALF_OP(f16_max, SL_F16, SL_OP_MAX)
HALF_OP(f16_min, SL_F16, SL_OP_MIN)
HALF_OP(bf16_sum, SL_BF16, SL_OP_SUM)
HALF_OP(bf16_max, SL_BF16, SL_OP_MAX)
HALF_OP(bf16_min, SL_BF16, SL_OP_MIN)

int slc_mpi_init(sl_comm *c)
{
    static MPI_User_function *const fns[2][3] = {{f16_sum, f16_max, f16_min},
                                                  {bf16_sum, bf16_max, bf16_min}};
    SL_CHECK_MPI(MPI_Type_contiguous(2, MPI_BYTE, &c->mpi_half));
    SL_CHECK_MPI(MPI_Type_commit(&c->mpi_half));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) SL_CHECK_MPI(MPI_Op_create(fns[i][j], 1, &c->mpi_ops[i][j]));
    return SL_COLL_OK;
}

void slc_mpi_free(sl_comm *c)
{
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            if (c->mpi_ops[i][j] != MPI_OP_NULL && c->mpi_ops[i][j]) MPI_Op_free(&c->mpi_ops[i][j]);
    if (c->mpi_half != MPI_DATATYPE_NULL) MPI_Type_free(&c->mpi_half);
}

MPI_Datatype slc_mpi_type(const sl_comm *c, sl_dtype t)
{
    switch (t) {
    case SL_F32: return MPI_FLOAT;
    case SL_F64: return MPI_DOUBLE;
    default: return c->mpi_half;
    }
}

MPI_Op slc_mpi_op(const sl_comm *c, sl_dtype t, sl_redop op)
{
    int k = op == SL_OP_MAX ? 1 : op == SL_OP_MIN ? 2 : 0; /* avg is a sum, then a division */
    if (t == SL_F16 || t == SL_BF16) return c->mpi_ops[t == SL_BF16][k];
    return k == 1 ? MPI_MAX : k == 2 ? MPI_MIN : MPI_SUM;
}

/* Device buffers that MPI cannot read are copied whole to pinned host memory. */
static int staged(const sl_comm *c) { return c->space == SL_MEM_DEVICE && !c->mpi_device_ok; }

static void *to_host(sl_comm *c, void *h, const void *d, size_t bytes)
{
    sl_cdev_memcpy(h, d, bytes, SL_CDEV_D2H, c->stream);
    return h;
}

static void to_device(sl_comm *c, void *d, const void *h, size_t bytes)
{
    sl_cdev_memcpy(d, h, bytes, SL_CDEV_H2D, c->stream);
}

static void avg(sl_comm *c, void *buf, size_t n, sl_dtype t, sl_redop op, int on_host)
{
    if (op != SL_OP_AVG) return;
    if (on_host) sl_divide_host(buf, n, t, c->size);
    else slc_finish_avg(c, buf, n, t, op);
}

int slc_mpi_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    size_t bytes = n * sl_dtype_size(t);
    MPI_Datatype ty = slc_mpi_type(c, t);
    MPI_Op mop = slc_mpi_op(c, t, op);
    if (staged(c)) {
        void *h = to_host(c, slc_scratch(c, SLC_WORK_HOST, bytes), s, bytes);
        SL_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, h, (int)n, ty, mop, c->comm));
        avg(c, h, n, t, op, 1);
        to_device(c, r, h, bytes);
        return SL_COLL_OK;
    }
    SL_CHECK_MPI(MPI_Allreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, ty, mop, c->comm));
    avg(c, r, n, t, op, 0);
    return SL_COLL_OK;
}

int slc_mpi_reduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                           sl_redop op)
{
    size_t esize = sl_dtype_size(t), bytes = n * esize, total = (size_t)c->size * bytes;
    MPI_Datatype ty = slc_mpi_type(c, t);
    MPI_Op mop = slc_mpi_op(c, t, op);
    if (staged(c)) {
        char *h = to_host(c, slc_scratch(c, SLC_WORK_HOST, total), s, total);
        SL_CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, h, (int)n, ty, mop, c->comm));
        avg(c, h, n, t, op, 1);
        to_device(c, r, h, bytes);
        return SL_COLL_OK;
    }
    if (r == slc_at(s, (size_t)c->rank * n, t)) {
        /* In place (NCCL's convention): MPI leaves the result at the start of the buffer; move
         * it to this rank's block. The rest of the input is left undefined, as in MPI. */
        SL_CHECK_MPI(MPI_Reduce_scatter_block(MPI_IN_PLACE, (void *)(uintptr_t)s, (int)n, ty,
                                              mop, c->comm));
        slc_copy(c, r, s, bytes);
    } else {
        SL_CHECK_MPI(MPI_Reduce_scatter_block(s, r, (int)n, ty, mop, c->comm));
    }
    avg(c, r, n, t, op, 0);
    return SL_COLL_OK;
}

int slc_mpi_allgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t)
{
    size_t bytes = n * sl_dtype_size(t), total = (size_t)c->size * bytes;
    MPI_Datatype ty = slc_mpi_type(c, t);
    if (staged(c)) {
        char *h = slc_scratch(c, SLC_WORK_HOST, total);
        to_host(c, h + (size_t)c->rank * bytes, s, bytes);
        SL_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, (int)n, ty, c->comm));
        to_device(c, r, h, total);
        return SL_COLL_OK;
    }
    if (s == slc_at(r, (size_t)c->rank * n, t))
        SL_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)n, ty, c->comm));
    else
        SL_CHECK_MPI(MPI_Allgather(s, (int)n, ty, r, (int)n, ty, c->comm));
    return SL_COLL_OK;
}

int slc_mpi_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    size_t bytes = n * sl_dtype_size(t);
    MPI_Datatype ty = slc_mpi_type(c, t);
    if (staged(c)) {
        void *h = slc_scratch(c, SLC_WORK_HOST, bytes);
        if (c->rank == root) to_host(c, h, buf, bytes);
        SL_CHECK_MPI(MPI_Bcast(h, (int)n, ty, root, c->comm));
        if (c->rank != root) to_device(c, buf, h, bytes);
        return SL_COLL_OK;
    }
    SL_CHECK_MPI(MPI_Bcast(buf, (int)n, ty, root, c->comm));
    return SL_COLL_OK;
}

int slc_mpi_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                   int root)
{
    size_t bytes = n * sl_dtype_size(t);
    MPI_Datatype ty = slc_mpi_type(c, t);
    MPI_Op mop = slc_mpi_op(c, t, op);
    int at_root = c->rank == root;
    if (staged(c)) {
        void *h = to_host(c, slc_scratch(c, SLC_WORK_HOST, bytes), s, bytes);
        SL_CHECK_MPI(MPI_Reduce(at_root ? MPI_IN_PLACE : h, at_root ? h : NULL, (int)n, ty, mop,
                                root, c->comm));
        if (at_root) {
            avg(c, h, n, t, op, 1);
            to_device(c, r, h, bytes);
        }
        return SL_COLL_OK;
    }
    const void *send = at_root && s == r ? MPI_IN_PLACE : s;
    SL_CHECK_MPI(MPI_Reduce(send, at_root ? r : NULL, (int)n, ty, mop, root, c->comm));
    if (at_root) avg(c, r, n, t, op, 0);
    return SL_COLL_OK;
}

/* ---- non-blocking, on buffers MPI can take (the dispatch runs the others to completion) --- */

int slc_mpi_iallreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                       struct sl_coll_req *q)
{
    SL_CHECK_MPI(MPI_Iallreduce(s == r ? MPI_IN_PLACE : s, r, (int)n, slc_mpi_type(c, t),
                                slc_mpi_op(c, t, op), c->nb_comm, &q->mq[0]));
    q->nmq = 1;
    q->kind = SLC_REQ_MPI;
    q->avg_buf = r; /* avg: divided at completion (the epilogue skips other ops) */
    q->avg_n = n;
    return SL_COLL_OK;
}

int slc_mpi_ireduce_scatter(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                            sl_redop op, struct sl_coll_req *q)
{
    MPI_Datatype ty = slc_mpi_type(c, t);
    MPI_Op mop = slc_mpi_op(c, t, op);
    if (r == slc_at(s, (size_t)c->rank * n, t)) {
        /* In place: MPI leaves the result at the start of the buffer; the epilogue moves it to
         * this rank's block, as the blocking call does. */
        SL_CHECK_MPI(MPI_Ireduce_scatter_block(MPI_IN_PLACE, (void *)(uintptr_t)s, (int)n, ty,
                                               mop, c->nb_comm, &q->mq[0]));
        q->copy_from = s;
        q->copy_to = r;
        q->copy_bytes = n * sl_dtype_size(t);
    } else {
        SL_CHECK_MPI(MPI_Ireduce_scatter_block(s, r, (int)n, ty, mop, c->nb_comm, &q->mq[0]));
    }
    q->nmq = 1;
    q->kind = SLC_REQ_MPI;
    q->avg_buf = r;
    q->avg_n = n;
    return SL_COLL_OK;
}

int slc_mpi_iallgather(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                       struct sl_coll_req *q)
{
    MPI_Datatype ty = slc_mpi_type(c, t);
    if (s == slc_at(r, (size_t)c->rank * n, t))
        SL_CHECK_MPI(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, (int)n, ty,
                                    c->nb_comm, &q->mq[0]));
    else
        SL_CHECK_MPI(MPI_Iallgather(s, (int)n, ty, r, (int)n, ty, c->nb_comm, &q->mq[0]));
    q->nmq = 1;
    q->kind = SLC_REQ_MPI;
    return SL_COLL_OK;
}
