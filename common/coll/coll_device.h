/* coll_device.h — what the communication layer needs from the device: memory, copies,
 * element-wise reductions on device buffers, streams, and NCCL.
 *
 * Defined in common/coll/cuda/coll_device.cu and coll_nccl.cu when CUDA is built, and
 * as stubs in common/coll/nocuda/ otherwise, so the C files of the layer contain no #if. This
 * header is plain C without mpi.h because nvcc compiles its users without MPI's include path;
 * reduction ops are passed as int (values of sl_redop). */
#ifndef SL_COLL_DEVICE_H
#define SL_COLL_DEVICE_H

#include <stddef.h>
#include "sl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SL_CDEV_H2D, SL_CDEV_D2H, SL_CDEV_D2D };

int sl_cdev_built(void);   /* CUDA compiled in */
int sl_cdev_count(void);   /* visible devices (0 without CUDA or without a GPU) */
void sl_cdev_set(int dev); /* make `dev` this process's current device */
int sl_cdev_current(void); /* this process's current device */
void *sl_cdev_malloc(size_t bytes);
void sl_cdev_free(void *p);
void *sl_cdev_host_alloc(size_t bytes); /* pinned host memory */
void sl_cdev_host_free(void *p);
void *sl_cdev_stream_create(void);
void sl_cdev_stream_destroy(void *stream);
void sl_cdev_stream_sync(void *stream);
int sl_cdev_stream_done(void *stream);  /* 1 when all work queued on it has finished */
/* An event recorded on `stream` after the work queued so far; done: 1 once that work finished. */
void *sl_cdev_event_record(void *stream);
int sl_cdev_event_done(void *event);
void sl_cdev_event_destroy(void *event);
/* Copies on `stream` and waits for them. */
void sl_cdev_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream);
/* dst[i] = a[i] op b[i] (dst may equal a or b), 16-bit types through f32; waits. */
void sl_cdev_reduce(void *dst, const void *a, const void *b, size_t n, sl_dtype t, int op,
                    void *stream);
/* buf[i] /= divisor (for avg); waits. */
void sl_cdev_divide(void *buf, size_t n, sl_dtype t, int divisor, void *stream);

/* NCCL. sl_nccl_built() is 0 when NCCL (or CUDA) is not compiled in; the others then report
 * "NCCL not built" as a runtime error. Collective calls are enqueued on `stream` and return
 * at once, as NCCL's do. */
int sl_nccl_built(void);
size_t sl_nccl_id_bytes(void);
void sl_nccl_get_id(void *id);
void *sl_nccl_comm_init(int nranks, const void *id, int rank);
void sl_nccl_comm_destroy(void *comm);
void sl_nccl_allreduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                       int op);
void sl_nccl_reduce_scatter(void *comm, void *stream, const void *s, void *r, size_t n,
                            sl_dtype t, int op);
void sl_nccl_allgather(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t);
void sl_nccl_broadcast(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int root);
void sl_nccl_reduce(void *comm, void *stream, const void *s, void *r, size_t n, sl_dtype t,
                    int op, int root);
void sl_nccl_send(void *comm, void *stream, const void *buf, size_t n, sl_dtype t, int peer);
void sl_nccl_recv(void *comm, void *stream, void *buf, size_t n, sl_dtype t, int peer);
/* ncclGroupStart / ncclGroupEnd: the calls between them are enqueued as one (send/recv pairs
 * with several peers cannot then deadlock in stream order). */
void sl_nccl_group_start(void);
void sl_nccl_group_end(void);

#ifdef __cplusplus
}
#endif

#endif
