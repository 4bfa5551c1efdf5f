/* coll_xfer.c — the point-to-point transport under the suite's own algorithms: one exchange
 * step (send to one rank, receive from another, optionally reduce what arrived) cut into
 * segments and double-buffered.
 *
 * Why segments: a ring or tree step that moves a large chunk would otherwise receive it whole
 * and only then reduce it; with segments the reduction of segment i overlaps the arrival of
 * segment i+1, and scratch stays at two segments whatever the message size. Both ends derive
 * the segmentation from the element count, so no sizes travel with the data.
 *
 * Device buffers: when MPI can take device pointers the segments go straight from and into
 * device memory; otherwise each outgoing segment is copied to pinned host memory before its
 * send, and each incoming one lands in pinned memory and is copied up to the device, where a
 * CUDA kernel reduces it. */
#include <limits.h>
#include <stdlib.h>

#include "coll_xfer.h"

typedef struct xfer {
    sl_comm *c;
    sl_dtype t;
    size_t esize, seg; /* bytes per element, elements per segment */
    int staged;        /* device buffers that MPI cannot take */
    char *slot[2];     /* receive slots for reductions (buffers' space) */
    char *stage_s[2], *stage_r[2]; /* pinned host staging when staged */
} xfer;

static size_t nsegs(const xfer *x, size_t n) { return (n + x->seg - 1) / x->seg; }
static size_t seg_len(const xfer *x, size_t n, size_t i)
{
    size_t left = n - i * x->seg;
    return left < x->seg ? left : x->seg;
}

/* Where segment i of the incoming data is received: a pinned stage, a scratch slot (to be
 * reduced) or its final place in dst. */
static void *recv_target(xfer *x, void *dst, int reduce, size_t i)
{
    if (x->staged) return x->stage_r[i % 2];
    if (reduce) return x->slot[i % 2];
    return (char *)dst + i * x->seg * x->esize;
}

static void post_recv(xfer *x, void *dst, int reduce, size_t rn, int from, int tag, size_t i,
                      MPI_Request *req)
{
    size_t len = seg_len(x, rn, i);
    SL_CHECK_MPI(MPI_Irecv(recv_target(x, dst, reduce, i), (int)(len * x->esize), MPI_BYTE,
                           from, tag, x->c->comm, req));
}

/* Segment i has arrived: move it up to the device if staged, reduce it if asked. */
static void complete_recv(xfer *x, void *dst, const void *a, sl_redop op, size_t rn, size_t i)
{
    size_t len = seg_len(x, rn, i), off = i * x->seg * x->esize;
    char *d = (char *)dst + off;
    int reduce = op != SL_NREDOPS;
    if (x->staged) {
        void *to = reduce ? (void *)x->slot[i % 2] : (void *)d;
        sl_cdev_memcpy(to, x->stage_r[i % 2], len * x->esize, SL_CDEV_H2D, x->c->stream);
    }
    if (reduce) slc_reduce(x->c, d, (const char *)a + off, x->slot[i % 2], len, x->t, op);
}

void slx_xchg(sl_comm *c, const void *sbuf, size_t sn, int to, void *dst, const void *a,
              size_t rn, int from, sl_dtype t, sl_redop op, int tag)
{
    if (to == MPI_PROC_NULL) sn = 0;
    if (from == MPI_PROC_NULL) rn = 0;
    if (sn == 0 && rn == 0) return;
    xfer x = {.c = c, .t = t, .esize = sl_dtype_size(t)};
    x.seg = slc_seg_elems(c, t);
    x.staged = c->space == SL_MEM_DEVICE && !c->mpi_device_ok;
    size_t segb = x.seg * x.esize;
    int reduce = op != SL_NREDOPS;
    if (reduce && rn) {
        char *s = slc_scratch(c, SLC_SEG, 2 * segb);
        x.slot[0] = s;
        x.slot[1] = s + segb;
    }
    if (x.staged) {
        char *s = slc_scratch(c, SLC_STAGE, 4 * segb);
        for (int k = 0; k < 2; k++) {
            x.stage_s[k] = s + (size_t)k * segb;
            x.stage_r[k] = s + (size_t)(2 + k) * segb;
        }
    }

    size_t ns = nsegs(&x, sn), nr = nsegs(&x, rn), steps = ns > nr ? ns : nr;
    MPI_Request rreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Request sreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (size_t i = 0; i < 2 && i < nr; i++) post_recv(&x, dst, reduce, rn, from, tag, i, &rreq[i]);
    for (size_t i = 0; i < steps; i++) {
        if (i < ns) {
            /* The slot's previous send (segment i-2) must be done before it is reused. */
            SL_CHECK_MPI(MPI_Wait(&sreq[i % 2], MPI_STATUS_IGNORE));
            size_t len = seg_len(&x, sn, i);
            const char *src = (const char *)sbuf + i * segb;
            if (x.staged) {
                sl_cdev_memcpy(x.stage_s[i % 2], src, len * x.esize, SL_CDEV_D2H, c->stream);
                src = x.stage_s[i % 2];
            }
            c->bytes_sent += len * x.esize;
            SL_CHECK_MPI(MPI_Isend(src, (int)(len * x.esize), MPI_BYTE, to, tag, c->comm,
                                   &sreq[i % 2]));
        }
        if (i < nr) {
            SL_CHECK_MPI(MPI_Wait(&rreq[i % 2], MPI_STATUS_IGNORE));
            complete_recv(&x, dst, a, op, rn, i);
            if (i + 2 < nr) post_recv(&x, dst, reduce, rn, from, tag, i + 2, &rreq[i % 2]);
        }
    }
    SL_CHECK_MPI(MPI_Waitall(2, sreq, MPI_STATUSES_IGNORE));
}

/* slx_fan: one slot per exchange in flight, each with the requests of its segments (receives
 * first) and, where needed, room for the received data and pinned stages. */
typedef struct fan {
    xfer x;
    int window;
    size_t per;          /* requests per slot */
    MPI_Request *req;    /* window * per */
    char *slot, *stage;  /* window x maxr elements (reductions); window x (maxr + maxs) staged */
    size_t maxr, maxs;
} fan;

static void fan_post(fan *f, const slx_msg *m, int k, int tag, int reduce)
{
    xfer *x = &f->x;
    int w = k % f->window;
    MPI_Request *rq = f->req + (size_t)w * f->per;
    for (size_t i = 0; i < f->per; i++) rq[i] = MPI_REQUEST_NULL;
    char *rbase = x->staged ? f->stage + (size_t)w * (f->maxr + f->maxs) * x->esize
                  : reduce ? f->slot + (size_t)w * f->maxr * x->esize : (char *)m->dst;
    size_t nr = m->from == MPI_PROC_NULL ? 0 : nsegs(x, m->rn);
    size_t ns = m->to == MPI_PROC_NULL ? 0 : nsegs(x, m->sn);
    for (size_t i = 0; i < nr; i++)
        SL_CHECK_MPI(MPI_Irecv(rbase + i * x->seg * x->esize, (int)(seg_len(x, m->rn, i) * x->esize),
                               MPI_BYTE, m->from, tag, x->c->comm, &rq[i]));
    const char *src = m->sbuf;
    if (ns && x->staged) {
        char *st = f->stage + ((size_t)w * (f->maxr + f->maxs) + f->maxr) * x->esize;
        sl_cdev_memcpy(st, src, m->sn * x->esize, SL_CDEV_D2H, x->c->stream);
        src = st;
    }
    for (size_t i = 0; i < ns; i++)
        SL_CHECK_MPI(MPI_Isend(src + i * x->seg * x->esize, (int)(seg_len(x, m->sn, i) * x->esize),
                               MPI_BYTE, m->to, tag, x->c->comm, &rq[nr + i]));
    if (ns) x->c->bytes_sent += m->sn * x->esize;
}

void slx_fan(sl_comm *c, const slx_msg *m, int nm, int window, sl_dtype t, sl_redop op, int tag)
{
    if (nm <= 0) return;
    fan f = {.x = {.c = c, .t = t, .esize = sl_dtype_size(t)}};
    f.x.seg = slc_seg_elems(c, t);
    f.x.staged = c->space == SL_MEM_DEVICE && !c->mpi_device_ok;
    f.window = window < 1 ? 1 : window > nm ? nm : window;
    int reduce = op != SL_NREDOPS;
    for (int k = 0; k < nm; k++) {
        if (m[k].rn > f.maxr) f.maxr = m[k].rn;
        if (m[k].sn > f.maxs) f.maxs = m[k].sn;
    }
    f.per = nsegs(&f.x, f.maxr) + nsegs(&f.x, f.maxs);
    if (f.per == 0) return;
    f.req = malloc((size_t)f.window * f.per * sizeof *f.req);
    if (!f.req) SL_FATAL("out of memory for %zu requests", (size_t)f.window * f.per);
    if (reduce && f.maxr) f.slot = slc_scratch(c, SLC_SEG, (size_t)f.window * f.maxr * f.x.esize);
    if (f.x.staged)
        f.stage = slc_scratch(c, SLC_STAGE, (size_t)f.window * (f.maxr + f.maxs) * f.x.esize);

    for (int k = 0; k < f.window; k++) fan_post(&f, &m[k], k, tag, reduce);
    for (int k = 0; k < nm; k++) {
        int w = k % f.window;
        MPI_Request *rq = f.req + (size_t)w * f.per;
        size_t nr = m[k].from == MPI_PROC_NULL ? 0 : nsegs(&f.x, m[k].rn);
        SL_CHECK_MPI(MPI_Waitall((int)nr, rq, MPI_STATUSES_IGNORE));
        if (nr) {
            size_t bytes = m[k].rn * f.x.esize;
            char *slot = reduce ? f.slot + (size_t)w * f.maxr * f.x.esize : NULL;
            if (f.x.staged) /* up to the device: into the slot to be reduced, or its place */
                sl_cdev_memcpy(reduce ? (void *)slot : m[k].dst,
                               f.stage + (size_t)w * (f.maxr + f.maxs) * f.x.esize, bytes,
                               SL_CDEV_H2D, c->stream);
            if (reduce) slc_reduce(c, m[k].dst, m[k].a, slot, m[k].rn, t, op);
        }
        SL_CHECK_MPI(MPI_Waitall((int)(f.per - nr), rq + nr, MPI_STATUSES_IGNORE));
        if (k + f.window < nm) fan_post(&f, &m[k + f.window], k + f.window, tag, reduce);
    }
    free(f.req);
}

/* Room for the requests of nseg segments in q. */
static MPI_Request *req_slots(struct sl_coll_req *q, size_t nseg)
{
    if (nseg > (size_t)INT_MAX) SL_FATAL("%zu segments in one message", nseg);
    q->nmq = (int)nseg;
    q->mq = nseg <= 2 ? q->mq2 : malloc(nseg * sizeof *q->mq);
    if (!q->mq) SL_FATAL("out of memory for %zu requests", nseg);
    for (size_t i = 0; i < nseg; i++) q->mq[i] = MPI_REQUEST_NULL;
    q->kind = SLC_REQ_MPI;
    return q->mq;
}

void slx_isend(sl_comm *c, const void *buf, size_t n, sl_dtype t, int to, int tag,
               struct sl_coll_req *q)
{
    size_t es = sl_dtype_size(t), seg = slc_seg_elems(c, t), nseg = (n + seg - 1) / seg;
    const char *src = buf;
    if (c->space == SL_MEM_DEVICE && !c->mpi_device_ok) {
        q->stage = sl_cdev_host_alloc(n * es);
        sl_cdev_memcpy(q->stage, buf, n * es, SL_CDEV_D2H, c->stream);
        src = q->stage;
    }
    MPI_Request *rq = req_slots(q, nseg);
    c->bytes_sent += n * es;
    for (size_t i = 0; i < nseg; i++) {
        size_t len = i + 1 < nseg ? seg : n - i * seg;
        SL_CHECK_MPI(MPI_Isend(src + i * seg * es, (int)(len * es), MPI_BYTE, to, tag, c->comm,
                               &rq[i]));
    }
}

void slx_irecv(sl_comm *c, void *buf, size_t n, sl_dtype t, int from, int tag,
               struct sl_coll_req *q)
{
    size_t es = sl_dtype_size(t), seg = slc_seg_elems(c, t), nseg = (n + seg - 1) / seg;
    char *dst = buf;
    if (c->space == SL_MEM_DEVICE && !c->mpi_device_ok) {
        q->stage = sl_cdev_host_alloc(n * es);
        q->h2d_to = buf;
        q->h2d_bytes = n * es;
        dst = q->stage;
    }
    MPI_Request *rq = req_slots(q, nseg);
    for (size_t i = 0; i < nseg; i++) {
        size_t len = i + 1 < nseg ? seg : n - i * seg;
        SL_CHECK_MPI(MPI_Irecv(dst + i * seg * es, (int)(len * es), MPI_BYTE, from, tag, c->comm,
                               &rq[i]));
    }
}
