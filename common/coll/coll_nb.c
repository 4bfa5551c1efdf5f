/* coll_nb.c — the non-blocking engine: requests (start, test, wait), and the suite's
 * algorithms run as schedules so that they advance while the caller computes.
 *
 * Requests. Every operation in flight on a communicator is on its list (c->nb_active);
 * sl_coll_test and sl_coll_wait advance all of them, so a rank may wait for its requests in any
 * order without starving a schedule another rank is waiting on. What a request waits for is
 * set by whoever started it: MPI requests (the mpi implementation's MPI_I* calls, or the
 * point-to-point messages of slx_isend/slx_irecv), a device event (nccl), or a schedule; its
 * epilogue (a local copy, a staged copy to the device, the avg division) runs once, when it
 * completes.
 *
 * Schedules, in the manner of libNBC: at the start the algorithm writes this rank's steps
 * (slc_ring_schedule, ...: each one exchange with a peer); the engine posts a step's receive
 * and send together on the communicator's second duplicate, with the request's own tag, cut
 * into the communicator's segments as the blocking transport cuts them: each segment that has
 * arrived is reduced at the next test while the later ones are still on their way, and when
 * every segment has arrived and been sent the next step is posted. Steps may form a group
 * (slc_step.join): those are posted together, up to the group's window, and as the oldest
 * completes the next of the group takes its slot, as slx_fan runs a round of exchanges; so
 * direct keeps max_inflight exchanges in flight and the bidirectional torus both directions.
 * Whatever order messages arrive in, steps are completed and reduced oldest first, so that a
 * schedule's sums are taken in its blocking algorithm's order and give its bits. The
 * collective thus advances whenever the caller tests, which a training loop does between
 * layers. The dispatch (coll_comm.c) decides which operations run as schedules (host buffers)
 * and which complete inside the start call (see sl_coll.h). */
#include <stdlib.h>

#include "coll_internal.h"

struct sl_coll_req *slc_req_new(sl_comm *c, int collective, sl_dtype t, sl_redop op)
{
    sl_coll_req *q = calloc(1, sizeof *q);
    if (!q) SL_FATAL("out of memory for a request");
    q->c = c;
    q->kind = SLC_REQ_DONE;
    q->t = t;
    q->op = op;
    q->mq = q->mq2;
    q->mq2[0] = q->mq2[1] = MPI_REQUEST_NULL;
    /* Collectives in flight at once are told apart by tag; every rank starts them in the same
     * order, so the sequence number agrees. Point-to-point messages carry the user's tag. */
    if (collective) q->tag = 1 + (int)(c->nb_seq++ % 30000u);
    q->next = c->nb_active;
    c->nb_active = q;
    return q;
}

int sl_coll_iallreduce_overlaps(const sl_comm *c)
{
    if (c->impl == SL_COLL_MPI) return c->space == SL_MEM_HOST || c->mpi_device_ok;
    if (c->impl == SL_COLL_NCCL) return 1;
    if (c->impl == SL_COLL_SHM || c->impl == SL_COLL_HIER) return 0; /* loads and stores */
    return c->space == SL_MEM_HOST;
}

static const void *buf_of(const sl_coll_req *q, int which) { return which == SLC_BUF_S ? q->s : q->r; }

static size_t nsegs(const sl_coll_req *q, size_t len) { return (len + q->seg - 1) / q->seg; }
static size_t seg_len(const sl_coll_req *q, size_t len, size_t i)
{
    return len - i * q->seg < q->seg ? len - i * q->seg : q->seg;
}

/* Step j's segments: its receives, then its sends. */
static size_t recv_segs(const sl_coll_req *q, const slc_step *st)
{
    return st->from != MPI_PROC_NULL ? nsegs(q, st->recv_len) : 0;
}
static size_t send_segs(const sl_coll_req *q, const slc_step *st)
{
    return st->to != MPI_PROC_NULL ? nsegs(q, st->send_len) : 0;
}

/* Step j's slot: its requests, and the scratch a reducing step receives into (segment i at
 * offset i * seg until it is reduced). The steps in flight are consecutive and at most
 * q->slots, so no two share a slot. */
static MPI_Request *slot_req(const sl_coll_req *q, int j)
{
    return q->mq + (size_t)(j % q->slots) * q->per;
}
static char *slot_scratch(const sl_coll_req *q, int j)
{
    return (char *)q->scratch + (size_t)(j % q->slots) * q->room * sl_dtype_size(q->t);
}

/* Posts step j: its receive segments, then its send segments. */
static void post_step(sl_coll_req *q, int j)
{
    const slc_step *st = &q->steps[j];
    size_t es = sl_dtype_size(q->t);
    MPI_Comm comm = q->c->nb_comm;
    size_t nr = recv_segs(q, st), ns = send_segs(q, st);
    MPI_Request *rq = slot_req(q, j);
    char *into = st->reduce ? slot_scratch(q, j) : slc_at(q->r, st->recv_off, q->t);
    for (size_t i = 0; i < nr; i++)
        SL_CHECK_MPI(MPI_Irecv(into + i * q->seg * es, (int)(seg_len(q, st->recv_len, i) * es),
                               MPI_BYTE, st->from, q->tag, comm, &rq[i]));
    const char *from = ns ? slc_at(buf_of(q, st->send_buf), st->send_off, q->t) : NULL;
    for (size_t i = 0; i < ns; i++)
        SL_CHECK_MPI(MPI_Isend(from + i * q->seg * es, (int)(seg_len(q, st->send_len, i) * es),
                               MPI_BYTE, st->to, q->tag, comm, &rq[nr + i]));
    if (ns) q->c->bytes_sent += st->send_len * es;
}

/* Posts what may be in flight now: the next step when nothing is, and after it the steps that
 * join its group (slc_step.join), up to the group's window. A step of the next group waits
 * until the whole group before it is complete: it may send what that group reduced. */
static void post_more(sl_coll_req *q)
{
    while (q->posted < q->nsteps) {
        const slc_step *st = &q->steps[q->posted];
        if (q->posted > q->step && (!st->join || q->posted - q->step >= st->window)) break;
        post_step(q, q->posted++);
    }
}

/* The request's messages are complete: its epilogue, once. */
static void finish(sl_coll_req *q)
{
    sl_comm *c = q->c;
    if (q->copy_bytes) slc_copy(c, q->copy_to, q->copy_from, q->copy_bytes);
    if (q->h2d_bytes) sl_cdev_memcpy(q->h2d_to, q->stage, q->h2d_bytes, SL_CDEV_H2D, c->stream);
    if (q->avg_n) slc_finish_avg(c, q->avg_buf, q->avg_n, q->t, q->op);
    q->kind = SLC_REQ_DONE;
}

/* Receive segment i of step j has arrived: reduce it into its place in R. */
static void reduce_segment(sl_coll_req *q, int j, size_t i)
{
    const slc_step *st = &q->steps[j];
    if (!st->reduce) return;
    size_t off = st->recv_off + i * q->seg;
    sl_reduce_host(slc_at(q->r, off, q->t), slc_at(buf_of(q, st->a_buf), off, q->t),
                   slot_scratch(q, j) + i * q->seg * sl_dtype_size(q->t),
                   seg_len(q, st->recv_len, i), q->t, q->op);
}

/* Every segment of the oldest step in flight has arrived (and been reduced) and been sent:
 * its avg range, then what may follow it. */
static void advance(sl_coll_req *q)
{
    const slc_step *st = &q->steps[q->step];
    if (st->avg_len) slc_finish_avg(q->c, slc_at(q->r, st->avg_off, q->t), st->avg_len, q->t, q->op);
    q->reduced = 0;
    if (++q->step < q->nsteps) post_more(q);
    else finish(q);
}

/* The reduce-scatter or all-gather half (parts) of c's algorithm on blocks of n elements. */
static int block_schedule(const sl_comm *c, size_t n, int parts, slc_step *out)
{
    switch (c->impl) {
    case SL_COLL_RING: return slc_ring_schedule(c, 0, n, parts, out);
    case SL_COLL_DIRECT: return slc_direct_schedule(c, 0, n, parts, out);
    case SL_COLL_TORUS: return slc_torus_schedule(c, 0, n, parts, out);
    default:
        return parts == SLC_PART_RS ? slc_rhd_rs_schedule(c, n, out) : slc_rhd_ag_schedule(c, n, out);
    }
}

void slc_nb_schedule(sl_coll_req *q, sl_collective w, const void *s, void *r, size_t n)
{
    sl_comm *c = q->c;
    size_t es = sl_dtype_size(q->t);
    q->s = s;
    q->r = r;
    q->steps = malloc((size_t)(4 * c->size + 64) * sizeof *q->steps);
    if (!q->steps) SL_FATAL("out of memory for a schedule");
    if (w == SL_CO_REDUCE_SCATTER) {
        /* Partial sums need the whole vector: R is a work vector, this rank's block of it is
         * copied to the result at the end (after the input has been read for the last time,
         * so in place works). */
        size_t total = (size_t)c->size * n;
        q->work = q->r = sl_alloc(SL_MEM_COMM, total * es);
        q->copy_from = slc_at(q->r, (size_t)c->rank * n, q->t);
        q->copy_to = r;
        q->copy_bytes = n * es;
        q->nsteps = block_schedule(c, n, SLC_PART_RS, q->steps);
    } else if (w == SL_CO_ALLGATHER) {
        slc_copy(c, slc_at(r, (size_t)c->rank * n, q->t), s, n * es); /* no-op in place */
        q->nsteps = block_schedule(c, n, SLC_PART_AG, q->steps);
    } else {
        switch (c->impl) {
        case SL_COLL_RING: q->nsteps = slc_ring_schedule(c, n, 0, SLC_PART_RS | SLC_PART_AG, q->steps); break;
        case SL_COLL_RHD: q->nsteps = slc_rhd_schedule(c, n, q->steps); break;
        case SL_COLL_TREE: q->nsteps = slc_tree_schedule(c, n, q->steps); break;
        case SL_COLL_DIRECT:
            q->nsteps = slc_direct_schedule(c, n, 0, SLC_PART_RS | SLC_PART_AG, q->steps);
            break;
        case SL_COLL_TORUS:
            q->nsteps = slc_torus_schedule(c, n, 0, SLC_PART_RS | SLC_PART_AG, q->steps);
            break;
        default: q->nsteps = slc_dbtree_schedule(c, n, q->steps); break;
        }
    }
    q->seg = slc_seg_elems(c, q->t);
    /* A slot per step that may be in flight (the widest group's window), each with room for
     * the largest step's requests and the largest reducing step's receive. */
    q->slots = 1;
    for (int i = 0; i < q->nsteps; i++) {
        const slc_step *st = &q->steps[i];
        if (st->join && st->window > q->slots) q->slots = st->window;
        if (st->reduce && st->recv_len > q->room) q->room = st->recv_len;
        size_t k = nsegs(q, st->recv_len) + nsegs(q, st->send_len);
        if (k > q->per) q->per = k;
    }
    if (q->slots > q->nsteps && q->nsteps > 0) q->slots = q->nsteps;
    q->scratch = sl_alloc(SL_MEM_COMM, (size_t)q->slots * q->room * es);
    size_t reqs = (size_t)q->slots * q->per;
    if (reqs > 2) {
        q->mq = malloc(reqs * sizeof *q->mq);
        if (!q->mq) SL_FATAL("out of memory for %zu requests", reqs);
    }
    q->kind = SLC_REQ_SCHED;
    q->nmq = 0;
    if (q->nsteps) post_more(q);
    else finish(q);
}

/* Advances q as far as it can without waiting. */
static void progress(sl_coll_req *q)
{
    int flag = 0;
    switch (q->kind) {
    case SLC_REQ_MPI:
        SL_CHECK_MPI(MPI_Testall(q->nmq, q->mq, &flag, MPI_STATUSES_IGNORE));
        if (flag) finish(q);
        break;
    case SLC_REQ_NCCL:
        if (sl_cdev_event_done(q->event)) finish(q);
        break;
    case SLC_REQ_SCHED:
        /* Through as many segments and steps as have arrived, oldest step first, whatever the
         * order of arrival: the reductions happen in the schedule's order, so the result's
         * bits do not depend on timing (direct's sums in the order k = 1, 2, ... as the
         * blocking slx_fan takes them). */
        while (q->kind == SLC_REQ_SCHED) {
            const slc_step *st = &q->steps[q->step];
            MPI_Request *rq = slot_req(q, q->step);
            int nr = (int)recv_segs(q, st), ns = (int)send_segs(q, st);
            while (q->reduced < nr) { /* in order: one sender's segments arrive in order */
                SL_CHECK_MPI(MPI_Test(&rq[q->reduced], &flag, MPI_STATUS_IGNORE));
                if (!flag) break;
                reduce_segment(q, q->step, (size_t)q->reduced++);
            }
            if (q->reduced < nr) break;
            SL_CHECK_MPI(MPI_Testall(ns, rq + nr, &flag, MPI_STATUSES_IGNORE)); /* the sends */
            if (!flag) break;
            advance(q);
        }
        break;
    default: break; /* done, or an nccl isend/irecv not yet enqueued */
    }
}

/* Every operation in flight on c. */
static void progress_all(sl_comm *c)
{
    if (c->nccl_pending) slc_nccl_flush(c);
    for (sl_coll_req *q = c->nb_active; q; q = q->next) progress(q);
}

static void release(sl_coll_req *q)
{
    sl_comm *c = q->c;
    for (sl_coll_req **p = &c->nb_active; *p; p = &(*p)->next)
        if (*p == q) {
            *p = q->next;
            break;
        }
    if (q->stage) sl_cdev_host_free(q->stage);
    if (q->event) sl_cdev_event_destroy(q->event);
    if (q->mq != q->mq2) free(q->mq);
    sl_free(q->work);
    sl_free(q->scratch);
    free(q->steps);
    free(q);
}

int sl_coll_test(sl_coll_req *q, int *done)
{
    if (!q || !done) return SL_COLL_EINVAL;
    progress_all(q->c);
    *done = q->kind == SLC_REQ_DONE;
    return SL_COLL_OK;
}

int sl_coll_wait(sl_coll_req *q)
{
    if (!q) return SL_COLL_EINVAL;
    /* Polling every request in flight, not blocking on this one: another rank may be waiting
     * for a step of a schedule this rank only posts when it advances that request. */
    while (q->kind != SLC_REQ_DONE) progress_all(q->c);
    release(q);
    return SL_COLL_OK;
}

int sl_coll_waitall(int n, sl_coll_req **reqs)
{
    if (n < 0 || (n > 0 && !reqs)) return SL_COLL_EINVAL;
    int rc = SL_COLL_OK;
    for (int i = 0; i < n; i++) {
        if (!reqs[i]) continue;
        int r = sl_coll_wait(reqs[i]);
        if (r && !rc) rc = r;
        reqs[i] = NULL;
    }
    return rc;
}
