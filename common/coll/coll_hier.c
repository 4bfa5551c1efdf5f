/* coll_hier.c — the hierarchical all-reduce of real clusters: inside each node a reduce-scatter
 * through shared memory, across nodes an all-reduce of each slice among the ranks that own it
 * (one per node, the ranks with the same local index), inside each node an all-gather through
 * shared memory (coll_shm.c runs the node part, this file the step between).
 *
 *   node 0: ranks 0 1 2      slices 0 1 2 owned by local ranks 0 1 2
 *   node 1: ranks 3 4 5      slice j: all-reduce among ranks j, 3 + j (rhd over the network)
 *
 * Only 1/L of the vector crosses the network per rank, and each node's L ranks drive its links
 * at once. Nodes may differ in size: the vector is cut into as many slices as the largest node
 * has ranks, dealt round-robin over each node's ranks, so a rank of a smaller node owns
 * several slices and takes part in several inter-node all-reduces, in slice order on every
 * rank (so they cannot wait on each other in a cycle).
 *
 * The inter-node step is Rabenseifner's all-reduce (coll_rhd.c; recursive doubling for small
 * slices) on a communicator per slice. Node boundaries are MPI's shared-memory domains; for
 * tests on one host, SL_COLL_RANKS_PER_NODE=k cuts each of them into virtual nodes of k
 * consecutive ranks (a testing aid: the "network" is then shared memory too). */
#include <stdlib.h>

#include "coll_internal.h"

struct slc_hier {
    int nslices;
    sl_comm **inter; /* [slice]: the owners of the slice across nodes; NULL where this rank
                        does not own it or there is one node */
};

int sl_coll_env_ranks_per_node(int *k)
{
    *k = 0;
    const char *e = getenv("SL_COLL_RANKS_PER_NODE");
    if (!e || !*e) return 0;
    char *end;
    long v = strtol(e, &end, 10);
    if (*end || v < 1 || v > (1 << 20)) return -1;
    *k = (int)v;
    return 0;
}

int slc_hier_init(sl_comm *c)
{
    MPI_Comm shared, node;
    SL_CHECK_MPI(MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared));
    int k, local;
    sl_coll_env_ranks_per_node(&k); /* malformed: programs refuse it first (sl_init) */
    MPI_Comm_rank(shared, &local);
    SL_CHECK_MPI(MPI_Comm_split(shared, k ? local / k : 0, local, &node));
    MPI_Comm_free(&shared);

    int lrank, lsize, nslices, leader, nnodes;
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &lsize);
    SL_CHECK_MPI(MPI_Allreduce(&lsize, &nslices, 1, MPI_INT, MPI_MAX, c->comm));
    leader = lrank == 0;
    SL_CHECK_MPI(MPI_Allreduce(&leader, &nnodes, 1, MPI_INT, MPI_SUM, c->comm));

    struct slc_hier *h = calloc(1, sizeof *h);
    if (h) h->inter = calloc((size_t)nslices, sizeof *h->inter);
    if (!h || !h->inter) SL_FATAL("out of memory for a hierarchical communicator");
    h->nslices = nslices;
    c->hier = h;
    for (int j = 0; nnodes > 1 && j < nslices; j++) {
        MPI_Comm owners;
        int mine = j % lsize == lrank;
        SL_CHECK_MPI(MPI_Comm_split(c->comm, mine ? 0 : MPI_UNDEFINED, c->rank, &owners));
        if (!mine) continue;
        int rc = sl_comm_create(&h->inter[j], owners, SL_COLL_RHD, SL_MEM_HOST);
        MPI_Comm_free(&owners);
        if (rc)
            SL_FATAL("hier: the inter-node communicator of slice %d: %s", j, sl_coll_strerror(rc));
    }
    return slc_node_create(node, nslices, &c->node);
}

void slc_hier_free(sl_comm *c)
{
    struct slc_hier *h = c->hier;
    if (!h) return;
    for (int j = 0; j < h->nslices; j++) sl_comm_destroy(h->inter[j]);
    free(h->inter);
    free(h);
    c->hier = NULL;
}

/* Between the node's reduce-scatter and its all-gather: slice j, reduced over this node, is
 * summed with the other nodes' (avg: summed here, divided once by all ranks afterwards). */
static void across_nodes(sl_comm *c, int j, void *buf, size_t n, sl_dtype t, sl_redop op)
{
    sl_comm *inter = c->hier->inter[j];
    if (!inter) return;
    unsigned long long before = inter->bytes_sent;
    slc_rhd_allreduce(inter, buf, buf, n, t, op == SL_OP_AVG ? SL_OP_SUM : op);
    c->bytes_sent += inter->bytes_sent - before; /* what crossed the network */
}

int slc_hier_allreduce(sl_comm *c, const void *s, void *r, size_t n, sl_dtype t, sl_redop op)
{
    slc_node_allreduce(c, c->node, s, r, n, t, op, across_nodes);
    return SL_COLL_OK;
}
