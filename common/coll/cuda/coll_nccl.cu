/* coll_nccl.cu — the nccl implementation of the communication layer: thin wrappers that map
 * the suite's types and ops to NCCL's and enqueue on the communicator's stream. Built only
 * when the Makefile found NCCL (SL_HAVE_NCCL); otherwise every entry says "NCCL not built". */
#include <stddef.h>

#include "coll_device.h"

extern "C" void sl_fatal(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

#if SL_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

/* ncclGetErrorString says only the class ("invalid usage"); NCCL's last message says what was
 * wrong (a duplicate GPU, a mismatched count), which otherwise only NCCL_DEBUG=WARN prints. */
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
#define NCCL_LAST() ncclGetLastError(NULL)
#else
#define NCCL_LAST() "NCCL_DEBUG=WARN prints the cause"
#endif
#define NCCL_OK(call)                                                                   \
    do {                                                                                \
        ncclResult_t r_ = (call);                                                       \
        if (r_ != ncclSuccess)                                                          \
            sl_fatal(3, __FILE__, __LINE__, "%s failed: %s (%s)", #call,                \
                     ncclGetErrorString(r_), NCCL_LAST());                              \
    } while (0)

static ncclDataType_t ty(sl_dtype t)
{
    switch (t) {
    case SL_F32: return ncclFloat32;
    case SL_F64: return ncclFloat64;
    case SL_F16: return ncclFloat16;
    default: return ncclBfloat16;
    }
}

/* avg never arrives here: the layer asks for a sum and divides once (coll_comm.c). */
static ncclRedOp_t rop(int op)
{
    switch (op) {
    case 1: return ncclMax;
    case 2: return ncclMin;
    default: return ncclSum;
    }
}

#define COMM(c) ((ncclComm_t)(c))
#define STREAM(s) ((cudaStream_t)(s))

extern "C" {
int sl_nccl_built(void) { return 1; }
size_t sl_nccl_id_bytes(void) { return sizeof(ncclUniqueId); }
void sl_nccl_get_id(void *id) { NCCL_OK(ncclGetUniqueId((ncclUniqueId *)id)); }

void *sl_nccl_comm_init(int nranks, const void *id, int rank)
{
    ncclComm_t comm;
    ncclUniqueId u = *(const ncclUniqueId *)id;
    NCCL_OK(ncclCommInitRank(&comm, nranks, u, rank));
    return (void *)comm;
}

void sl_nccl_comm_destroy(void *comm) { NCCL_OK(ncclCommDestroy(COMM(comm))); }

void sl_nccl_allreduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                       int op)
{
    NCCL_OK(ncclAllReduce(s, r, n, ty(t), rop(op), COMM(comm), STREAM(stream)));
}

void sl_nccl_reduce_scatter(void *comm, void *stream, const void *s, void *r, size_t n,
                            sl_dtype t, int op)
{
    NCCL_OK(ncclReduceScatter(s, r, n, ty(t), rop(op), COMM(comm), STREAM(stream)));
}

void sl_nccl_allgather(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t)
{
    NCCL_OK(ncclAllGather(s, r, n, ty(t), COMM(comm), STREAM(stream)));
}

void sl_nccl_broadcast(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int root)
{
    NCCL_OK(ncclBroadcast(buf, buf, n, ty(t), root, COMM(comm), STREAM(stream)));
}

void sl_nccl_reduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                    int op, int root)
{
    NCCL_OK(ncclReduce(s, r, n, ty(t), rop(op), root, COMM(comm), STREAM(stream)));
}

void sl_nccl_send(void *comm, void *stream, const void *buf, size_t n, sl_dtype t, int peer)
{
    NCCL_OK(ncclSend(buf, n, ty(t), peer, COMM(comm), STREAM(stream)));
}

void sl_nccl_recv(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int peer)
{
    NCCL_OK(ncclRecv(buf, n, ty(t), peer, COMM(comm), STREAM(stream)));
}

void sl_nccl_group_start(void) { NCCL_OK(ncclGroupStart()); }
void sl_nccl_group_end(void) { NCCL_OK(ncclGroupEnd()); }
} /* extern "C" */

#else /* CUDA without NCCL: the nccl implementation reports that it was not built */

#define NOT_BUILT() sl_fatal(3, __FILE__, __LINE__, "NCCL not built (nccl.h/libnccl not found)")

extern "C" {
int sl_nccl_built(void) { return 0; }
size_t sl_nccl_id_bytes(void) { return 0; }
void sl_nccl_get_id(void *) { NOT_BUILT(); }
void *sl_nccl_comm_init(int, const void *, int) { NOT_BUILT(); }
void sl_nccl_comm_destroy(void *) {}
void sl_nccl_allreduce(void *, void *, const void *, void *, size_t, sl_dtype, int) { NOT_BUILT(); }
void sl_nccl_reduce_scatter(void *, void *, const void *, void *, size_t, sl_dtype, int) { NOT_BUILT(); }
void sl_nccl_allgather(void *, void *, const void *, void *, size_t, sl_dtype) { NOT_BUILT(); }
void sl_nccl_broadcast(void *, void *, void *, size_t, sl_dtype, int) { NOT_BUILT(); }
void sl_nccl_reduce(void *, void *, const void *, void *, size_t, sl_dtype, int, int) { NOT_BUILT(); }
void sl_nccl_send(void *, void *, const void *, size_t, sl_dtype, int) { NOT_BUILT(); }
void sl_nccl_recv(void *, void *, void *, size_t, sl_dtype, int) { NOT_BUILT(); }
void sl_nccl_group_start(void) { NOT_BUILT(); }
void sl_nccl_group_end(void) { NOT_BUILT(); }
}
#endif
