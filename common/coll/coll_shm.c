/* coll_shm.c — all-reduce through memory the ranks of a node share: an MPI-3 shared-memory
 * window (MPI_Comm_split_type SHARED + MPI_Win_allocate_shared), no messages.
 *
 * The vector is cut into L slices, L the ranks of the node; rank l owns slice l. Per chunk:
 *
 *   1. each rank copies the slices it does not own into its part of the window (a rank's own
 *      buffers are private: the window is the one place peers can read them);
 *   2. node barrier;
 *   3. the owner of slice l reduces it straight from its own send buffer and every peer's
 *      window (l+1, l+2, ... so that owners do not all read the same peer at once), into its
 *      result, and copies the result into its window (the between hook runs here: hier's
 *      inter-node all-reduce of the slice);
 *   4. node barrier;
 *   5. each rank copies the other slices' results from their owners' windows.
 *
 * Bytes each rank reads and writes, for S bytes on L ranks: copy-in 2 (L-1)/L S, reduce S read
 * and 2 S/L written (result, window), gather 2 (L-1)/L S: (5 - 2/L) S in all
 * (sl_coll_shm_traffic). Not all of it reaches memory: the window's part of a chunk is at most
 * L segments (4 MiB) per rank and is read back by the peers right after it is written, so while
 * the window's two halves fit in the last-level cache (L x 2 chunks: 2 MiB on 2 ranks at the
 * default 256 KiB segment) the (3 - 2/L) S that pass through it stay in cache. What must reach
 * memory is the input, read once, and the result, written once: 2 S per rank
 * (sl_coll_shm_memory_traffic), the bytes of one memcpy of the vector. At a copy bandwidth B
 * (reads plus writes per second, all ranks copying at once) no all-reduce that reads its input
 * from and writes its result to memory runs faster than 2 S / B: the bound the benchmark
 * reports. Counting all (5 - 2/L) S at B instead gave a "bound" that runs beat by 10-40 %.
 *
 * The window has two halves used by alternate chunks, so a rank may start the next chunk while
 * its peers still gather from the last one: the barrier of the chunk after that orders the
 * reuse. The barrier is a counter per rank in the window (store-release, load-acquire), which
 * yields the core while it waits, since ranks may outnumber cores.
 *
 * A chunk holds one segment per slice (sl_comm_segment, at least 64 bytes), at most half the
 * window (4 MiB): the chunk bounds the window, and small segments exercise many chunks in the
 * tests. Host buffers only. */
#include <sched.h>
#include <stdlib.h>

#include "coll_internal.h"

#define HALF_BYTES ((size_t)4 << 20) /* window bytes per half, per rank */
#define CTRL_BYTES 64                /* the barrier counter, on its own cache line */
#define MIN_SLICE_BYTES 64

struct slc_node {
    MPI_Comm comm;     /* the ranks sharing the window */
    int lrank, lsize;
    int nslices;       /* slices per chunk (hier: the largest node's rank count) */
    MPI_Win win;
    char **base;       /* base[p]: rank p's part of the window (its control line first) */
    unsigned long long epoch; /* barriers passed */
    int half;          /* the half the next chunk uses */
};

static unsigned long long *ctrl(const slc_node *nd, int p)
{
    return (unsigned long long *)(void *)nd->base[p];
}

static char *half_of(const slc_node *nd, int p, int h)
{
    return nd->base[p] + CTRL_BYTES + (size_t)h * HALF_BYTES;
}

int slc_node_create(MPI_Comm node, int nslices, slc_node **out)
{
    slc_node *nd = calloc(1, sizeof *nd);
    if (!nd) SL_FATAL("out of memory for a shared-memory window");
    nd->comm = node;
    MPI_Comm_rank(node, &nd->lrank);
    MPI_Comm_size(node, &nd->lsize);
    nd->nslices = nslices;
    nd->base = calloc((size_t)nd->lsize, sizeof *nd->base);
    if (!nd->base) SL_FATAL("out of memory for a shared-memory window");
    MPI_Info info;
    SL_CHECK_MPI(MPI_Info_create(&info));
    SL_CHECK_MPI(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    char *mine;
    SL_CHECK_MPI(MPI_Win_allocate_shared((MPI_Aint)(CTRL_BYTES + 2 * HALF_BYTES), 1, info, node,
                                         &mine, &nd->win));
    MPI_Info_free(&info);
    for (int p = 0; p < nd->lsize; p++) {
        MPI_Aint size;
        int unit;
        SL_CHECK_MPI(MPI_Win_shared_query(nd->win, p, &size, &unit, &nd->base[p]));
    }
    __atomic_store_n(ctrl(nd, nd->lrank), 0ULL, __ATOMIC_RELEASE);
    SL_CHECK_MPI(MPI_Barrier(node)); /* every counter is zero before anyone waits on one */
    *out = nd;
    return SL_COLL_OK;
}

void slc_node_free(slc_node *nd)
{
    if (!nd) return;
    MPI_Win_free(&nd->win);
    MPI_Comm_free(&nd->comm);
    free(nd->base);
    free(nd);
}

/* Every rank of the node has reached this barrier: what each wrote to the window before it is
 * visible to all after it, and what each read before it is done. */
static void node_barrier(slc_node *nd)
{
    unsigned long long e = ++nd->epoch;
    __atomic_store_n(ctrl(nd, nd->lrank), e, __ATOMIC_RELEASE);
    for (int k = 1; k < nd->lsize; k++) {
        int p = (nd->lrank + k) % nd->lsize;
        for (int spins = 0; __atomic_load_n(ctrl(nd, p), __ATOMIC_ACQUIRE) < e; spins++)
            if (spins >= 64) sched_yield(); /* the rank we wait for may need this core */
    }
}

double sl_coll_shm_traffic(int l, double bytes) { return (5.0 - 2.0 / l) * bytes; }
double sl_coll_shm_memory_traffic(double bytes) { return 2.0 * bytes; }

/* The node's owner of slice j: slices are dealt round-robin over the node's ranks. */
static int owner(const slc_node *nd, int j) { return j % nd->lsize; }

void slc_node_allreduce(sl_comm *c, slc_node *nd, const void *s, void *r, size_t n, sl_dtype t,
                        sl_redop op, slc_slice_fn between)
{
    size_t es = sl_dtype_size(t), L = (size_t)nd->nslices;
    size_t slice_bytes = c->seg_bytes > MIN_SLICE_BYTES ? c->seg_bytes : MIN_SLICE_BYTES;
    size_t chunk = slice_bytes < HALF_BYTES / L ? slice_bytes * L / es : HALF_BYTES / es;
    if (chunk == 0) chunk = 1;
    for (size_t off = 0; off < n; off += chunk) {
        size_t m = n - off < chunk ? n - off : chunk;
        const char *src = (const char *)s + off * es;
        char *dst = (char *)r + off * es;
        int h = nd->half;
        nd->half ^= 1;
        char *mine = half_of(nd, nd->lrank, h);
        for (int j = 0; j < nd->nslices; j++) /* 1: the slices peers reduce */
            if (owner(nd, j) != nd->lrank) {
                size_t so = slc_chunk_off(m, nd->nslices, j) * es;
                memcpy(mine + so, src + so, slc_chunk_len(m, nd->nslices, j) * es);
            }
        node_barrier(nd);
        for (int j = nd->lrank; j < nd->nslices; j += nd->lsize) { /* 3: the slices we own */
            size_t so = slc_chunk_off(m, nd->nslices, j), len = slc_chunk_len(m, nd->nslices, j);
            if (!len) continue;
            const void *acc = src + so * es;
            for (int k = 1; k < nd->lsize; k++) {
                int p = (nd->lrank + k) % nd->lsize;
                sl_reduce_host(dst + so * es, acc, half_of(nd, p, h) + so * es, len, t, op);
                acc = dst + so * es;
            }
            if (acc != dst + so * es) memcpy(dst + so * es, acc, len * es); /* one rank */
            if (between) between(c, j, dst + so * es, len, t, op);
            slc_finish_avg(c, dst + so * es, len, t, op);
            memcpy(mine + so * es, dst + so * es, len * es);
        }
        node_barrier(nd);
        for (int j = 0; j < nd->nslices; j++) /* 5: the others' results */
            if (owner(nd, j) != nd->lrank) {
                size_t so = slc_chunk_off(m, nd->nslices, j) * es;
                memcpy(dst + so, half_of(nd, owner(nd, j), h) + so,
                       slc_chunk_len(m, nd->nslices, j) * es);
            }
    }
}

/* shm: one window over the node, which must be the whole communicator. */
int slc_shm_init(sl_comm *c)
{
    MPI_Comm node;
    SL_CHECK_MPI(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int lsize, whole, all;
    MPI_Comm_size(node, &lsize);
    whole = lsize == c->size;
    SL_CHECK_MPI(MPI_Allreduce(&whole, &all, 1, MPI_INT, MPI_MIN, c->comm));
    if (!all) { /* ranks on several nodes: that is hier's job */
        MPI_Comm_free(&node);
        return SL_COLL_ENOTSUP;
    }
    return slc_node_create(node, lsize, &c->node);
}

int slc_shm_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    slc_node_allreduce(c, c->node, s, r, n, t, op, NULL);
    return SL_COLL_OK;
}
