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
    SL_TAG_RHD = SL_TAG_DBTREE_DOWN + 2, SL_TAG_RHD_FOLD, SL_TAG_CHAIN, SL_TAG_DIRECT,
    SL_TAG_TORUS,
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

/* A round of exchanges with several peers at once (the fully connected algorithm): exchange k
 * sends m[k].sn elements of m[k].sbuf to rank m[k].to while receiving m[k].rn elements from
 * m[k].from, into m[k].dst, or with op != SL_NREDOPS as dst = a op received. At most `window`
 * exchanges are in flight; the received data are combined in the order k = 0, 1, ... whatever
 * the order of arrival, so that the result's bits do not depend on timing. Every message is
 * cut into the communicator's segments, all posted at once. Blocking. */
typedef struct slx_msg {
    const void *sbuf;
    size_t sn;
    int to;
    void *dst;
    const void *a;
    size_t rn;
    int from;
} slx_msg;
void slx_fan(sl_comm *c, const slx_msg *m, int nm, int window, sl_dtype t, sl_redop op, int tag);

/* An operation in flight (sl_coll_req of sl_coll.h): the MPI requests it waits for, or the
 * device event, or the schedule it runs (coll_nb.c), and what is left to do once its messages
 * have arrived, in this order: a local copy, a copy from a pinned stage up to the device, the
 * avg division; then the stage and the work vector are freed. */
enum { SLC_REQ_DONE, SLC_REQ_MPI, SLC_REQ_NCCL, SLC_REQ_NCCL_PENDING, SLC_REQ_SCHED };
struct slc_step;
struct sl_coll_req {
    sl_comm *c;
    struct sl_coll_req *next;      /* c->nb_active */
    struct sl_coll_req *pnext;     /* c->nccl_pending */
    int kind, tag;
    sl_dtype t;
    sl_redop op;
    const void *s;                 /* schedule: the send buffer S and the result R */
    void *r;
    MPI_Request *mq, mq2[2];       /* mq: mq2, or an array of nmq for many segments */
    int nmq;
    struct slc_step *steps;        /* schedule (coll_nb.c) */
    int nsteps, step, posted;      /* steps [step, posted) are in flight, one group's */
    size_t seg;                    /* schedule: elements per segment of a step's messages */
    int slots;                     /* schedule: step j uses slot j % slots of mq and scratch */
    size_t per, room;              /* requests per slot (receives first, then sends), and
                                      elements of scratch per slot */
    int reduced;                   /* receive segments of step `step` reduced so far */
    void *scratch;                 /* where a reducing step receives */
    const void *copy_from;         /* epilogue */
    void *copy_to;
    size_t copy_bytes;
    void *h2d_to;
    size_t h2d_bytes;
    void *avg_buf;
    size_t avg_n;
    void *stage;                   /* pinned host memory (sl_cdev_host_alloc) */
    void *work;                    /* host memory (sl_alloc) */
    void *event;                   /* nccl: recorded after the operation on the stream */
    int p2p_send, p2p_peer;        /* nccl isend/irecv waiting for the group (coll_nccl.c) */
    const void *p2p_buf;
    size_t p2p_n;
};

/* Non-blocking point to point on the private communicator (the one slx_send/slx_recv use, cut
 * into the same segments so that either end may be blocking): posts the messages into q
 * (q->mq, kind SLC_REQ_MPI). Device buffers that MPI cannot take are staged through pinned
 * host memory: a send copies the whole message first; a receive lands in the stage and q's
 * epilogue copies it to the device. */
void slx_isend(sl_comm *c, const void *buf, size_t n, sl_dtype t, int to, int tag,
               struct sl_coll_req *q);
void slx_irecv(sl_comm *c, void *buf, size_t n, sl_dtype t, int from, int tag,
               struct sl_coll_req *q);

#endif
