/* coll_xfer.h — the transport layer of the communication layer: point-to-point messages on
 * the communicator's private MPI communicators, segmented, double-buffered and staged through
 * pinned host memory for device buffers that MPI cannot take. Built on coll_local.h only. */
#ifndef SL_COLL_XFER_H
#define SL_COLL_XFER_H

#include "coll_local.h"

/* Tags on the private communicator. Blocking collectives run one at a time, in the same order
 * on every rank, so one tag per kind of message is enough; point-to-point messages of the user
 * get SL_TAG_USER + tag so they can never match a collective's. */
enum {
    SL_TAG_RING = 1, SL_TAG_TREE, SL_TAG_DBTREE_UP, SL_TAG_DBTREE_DOWN = SL_TAG_DBTREE_UP + 2,
    SL_TAG_RHD = SL_TAG_DBTREE_DOWN + 2, SL_TAG_RHD_FOLD, SL_TAG_CHAIN,
    SL_TAG_USER = 1 << 10,
};

/* The transport every suite algorithm is written in (coll_xfer.c): sends sn elements of sbuf
 * to rank `to` while receiving rn elements from rank `from`. With op == SL_NREDOPS the received
 * data is stored in dst; otherwise dst = a op received (dst may be a). Either side may be
 * absent (count 0 or rank MPI_PROC_NULL). Messages are cut into segments of c->seg_bytes and
 * double-buffered so that segment i is reduced while segment i+1 arrives; both ends compute
 * the same segmentation from the count. Device buffers are staged through pinned host memory
 * when MPI cannot take them. Blocking. */
void slx_xchg(sl_comm *c, const void *sbuf, size_t sn, int to, void *dst, const void *a,
              size_t rn, int from, sl_dtype t, sl_redop op, int tag);
static inline void slx_send(sl_comm *c, const void *buf, size_t n, sl_dtype t, int to, int tag)
{
    slx_xchg(c, buf, n, to, NULL, NULL, 0, MPI_PROC_NULL, t, SL_NREDOPS, tag);
}
static inline void slx_recv(sl_comm *c, void *buf, size_t n, sl_dtype t, int from, int tag)
{
    slx_xchg(c, NULL, 0, MPI_PROC_NULL, buf, NULL, n, from, t, SL_NREDOPS, tag);
}
static inline void slx_recv_reduce(sl_comm *c, void *dst, const void *a, size_t n, sl_dtype t,
                                   sl_redop op, int from, int tag)
{
    slx_xchg(c, NULL, 0, MPI_PROC_NULL, dst, a, n, from, t, op, tag);
}

#endif
