/* coll_nccl.c (no CUDA) — NCCL entry points in a build without CUDA: sl_nccl_built() is 0, so
 * sl_coll_available answers SL_COLL_ENOTBUILT for -C nccl and nothing below is reached. */
#include "coll_device.h"
#include "sl_error.h"

#define NOT_BUILT() SL_FATAL("NCCL not built (this build has no CUDA)")

int sl_nccl_built(void) { return 0; }
size_t sl_nccl_id_bytes(void) { return 0; }
void sl_nccl_get_id(void *id) { (void)id; NOT_BUILT(); }
void *sl_nccl_comm_init(int nranks, const void *id, int rank)
{
    (void)nranks; (void)id; (void)rank;
    NOT_BUILT();
}
void sl_nccl_comm_destroy(void *comm) { (void)comm; }

void sl_nccl_allreduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                       int op)
{
    (void)comm; (void)stream; (void)s; (void)r; (void)n; (void)t; (void)op;
    NOT_BUILT();
}

void sl_nccl_reduce_scatter(void *comm, void *stream, const void *s, void *r, size_t n,
                            sl_dtype t, int op)
{
    (void)comm; (void)stream; (void)s; (void)r; (void)n; (void)t; (void)op;
    NOT_BUILT();
}

void sl_nccl_allgather(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t)
{
    (void)comm; (void)stream; (void)s; (void)r; (void)n; (void)t;
    NOT_BUILT();
}

void sl_nccl_broadcast(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int root)
{
    (void)comm; (void)stream; (void)buf; (void)n; (void)t; (void)root;
    NOT_BUILT();
}

void sl_nccl_reduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                    int op, int root)
{
    (void)comm; (void)stream; (void)s; (void)r; (void)n; (void)t; (void)op; (void)root;
    NOT_BUILT();
}

void sl_nccl_send(void *comm, void *stream, const void *buf, size_t n, sl_dtype t, int peer)
{
    (void)comm; (void)stream; (void)buf; (void)n; (void)t; (void)peer;
    NOT_BUILT();
}

void sl_nccl_recv(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int peer)
{
    (void)comm; (void)stream; (void)buf; (void)n; (void)t; (void)peer;
    NOT_BUILT();
}

void sl_nccl_group_start(void) { NOT_BUILT(); }
void sl_nccl_group_end(void) { NOT_BUILT(); }
