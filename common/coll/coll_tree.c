/* coll_tree.c — binomial trees: reduce to a root, broadcast from a root, and all-reduce as
 * the reduce to rank 0 followed by the broadcast from it.
 *
 * Ranks are renumbered relative to the root (v = rank - root mod n). In the reduce, at round k
 * a rank whose bit k is set sends its partial result to v - 2^k and leaves; the others receive
 * from v + 2^k (if it exists) and add. The broadcast runs the same tree backwards. Each takes
 * ceil(log2 n) rounds with the whole vector per message: latency-optimal for small messages,
 * but the root's links carry log2(n) full vectors, so it loses to the ring at large sizes.
 * Messages are still segmented (coll_xfer.c), so a child's reduction overlaps its arrival;
 * small all-reduces take a latency path instead (tree_allreduce_small). */
#include "coll_internal.h"

int slc_tree_reduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op,
                    int root)
{
    int size = c->size, v = slc_mod(c->rank - root, size);
    /* The running result: in r at the root, in a work vector elsewhere (r is not ours there).
     * Until the first child's data arrives it is just the own contribution s. */
    void *acc = v == 0 ? r : NULL;
    const void *cur = s;
    for (int mask = 1; mask < size; mask <<= 1) {
        if (v & mask) { /* our subtree is complete: hand it to the parent and stop */
            slx_send(c, cur, n, t, (v - mask + root) % size, SL_TAG_TREE);
            break;
        }
        if (v + mask < size) {
            if (!acc) acc = slc_scratch(c, SLC_WORK, n * sl_dtype_size(t));
            slx_recv_reduce(c, acc, cur, n, t, op, (v + mask + root) % size, SL_TAG_TREE);
            cur = acc;
        }
    }
    if (v == 0) {
        if (cur != r) slc_copy(c, r, cur, n * sl_dtype_size(t));
        slc_finish_avg(c, r, n, t, op);
    }
    return SL_COLL_OK;
}

int slc_tree_broadcast(sl_comm *c, void *buf, size_t n, sl_dtype t, int root)
{
    int size = c->size, v = slc_mod(c->rank - root, size), mask = 1;
    /* Receive from the parent: the rank that differs in our lowest set bit. */
    for (; mask < size; mask <<= 1) {
        if (v & mask) {
            slx_recv(c, buf, n, t, (v - mask + root) % size, SL_TAG_TREE);
            break;
        }
    }
    /* Send to the children below that bit, farthest (largest subtree) first. */
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < size) slx_send(c, buf, n, t, (v + mask + root) % size, SL_TAG_TREE);
    return SL_COLL_OK;
}

/* The latency path for small vectors on host buffers (SLC_TREE_LATENCY_BYTES): the same tree
 * and the same order of combination, but one message per edge and direction, with every
 * child's receive posted before the first arrives (no child waits for its elder sibling to be
 * served, and no message lands unexpected) and the broadcast's sends all in flight at once. */
static void tree_allreduce_small(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t,
                                 sl_redop op)
{
    int size = c->size, v = c->rank, nchild = 0, mask, child[32];
    size_t bytes = n * sl_dtype_size(t);
    for (mask = 1; mask < size && !(v & mask); mask <<= 1)
        if (v + mask < size) child[nchild++] = v + mask;
    int parent = mask < size ? v - mask : MPI_PROC_NULL;
    char *slot = nchild ? slc_scratch(c, SLC_SEG, (size_t)nchild * bytes) : NULL;
    MPI_Request rq[32];
    for (int k = 0; k < nchild; k++)
        SL_CHECK_MPI(MPI_Irecv(slot + (size_t)k * bytes, (int)bytes, MPI_BYTE, child[k],
                               SL_TAG_TREE, c->comm, &rq[k]));
    const void *cur = s;
    for (int k = 0; k < nchild; k++) { /* nearest child first, as the segmented path */
        SL_CHECK_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
        sl_reduce_host(r, cur, slot + (size_t)k * bytes, n, t, op);
        cur = r;
    }
    if (parent != MPI_PROC_NULL) {
        c->bytes_sent += bytes;
        SL_CHECK_MPI(MPI_Send(cur, (int)bytes, MPI_BYTE, parent, SL_TAG_TREE, c->comm));
        SL_CHECK_MPI(MPI_Recv(r, (int)bytes, MPI_BYTE, parent, SL_TAG_TREE, c->comm,
                              MPI_STATUS_IGNORE));
    } else {
        slc_finish_avg(c, r, n, t, op);
    }
    for (int k = nchild - 1; k >= 0; k--) { /* farthest (largest subtree) first */
        c->bytes_sent += bytes;
        SL_CHECK_MPI(MPI_Isend(r, (int)bytes, MPI_BYTE, child[k], SL_TAG_TREE, c->comm, &rq[k]));
    }
    SL_CHECK_MPI(MPI_Waitall(nchild, rq, MPI_STATUSES_IGNORE));
}

int slc_tree_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    if (c->space == SL_MEM_HOST && n * sl_dtype_size(t) <= SLC_TREE_LATENCY_BYTES) {
        tree_allreduce_small(c, s, r, n, t, op);
        return SL_COLL_OK;
    }
    slc_tree_reduce(c, s, r, n, t, op, 0); /* rank 0 also applies the avg division */
    return slc_tree_broadcast(c, r, n, t, 0);
}

/* The binomial all-reduce as a schedule for the non-blocking engine (coll_nb.c): the reduce
 * to rank 0 then the broadcast from it, one whole-vector message per step. */
int slc_tree_schedule(const sl_comm *c, size_t n, slc_step *out)
{
    int size = c->size, v = c->rank, k = 0, mask = 1, cur = SLC_BUF_S;
    for (; mask < size; mask <<= 1) {
        if (v & mask) {
            out[k++] = (slc_step){.to = v - mask, .from = MPI_PROC_NULL, .send_buf = cur,
                                  .send_len = n};
            break;
        }
        if (v + mask < size) {
            out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = v + mask, .recv_len = n,
                                  .reduce = 1, .a_buf = cur};
            cur = SLC_BUF_R;
        }
    }
    if (v == 0) out[k - 1].avg_len = n; /* the root's last child completes the sum */
    for (mask = 1; mask < size; mask <<= 1) {
        if (v & mask) {
            out[k++] = (slc_step){.to = MPI_PROC_NULL, .from = v - mask, .recv_len = n};
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < size)
            out[k++] = (slc_step){.to = v + mask, .from = MPI_PROC_NULL, .send_buf = SLC_BUF_R,
                                  .send_len = n};
    return k;
}
