/* corelat.c — the round trip of one cache line between ranks 0 and 1 (see sl_corelat.h). */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sl_corelat.h"
#include "sl_error.h"
#include "sl_sim.h"
#include "sl_stats.h"
#include "sl_timer.h"

#define LINE 64

void sl_corelat_open(sl_corelat *c, MPI_Comm comm)
{
    memset(c, 0, sizeof *c);
    c->comm = comm;
    int size;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &size);
    if (size < 2 || sl_sim_active()) return; /* a simulated node has no cores to measure */
    /* ranks 0 and 1 on one node: rank 1's node rank in rank 0's node communicator, told to all */
    SL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c->node));
    MPI_Group g, ng;
    int world[2] = {0, 1}, in_node[2];
    SL_CHECK_MPI(MPI_Comm_group(comm, &g));
    SL_CHECK_MPI(MPI_Comm_group(c->node, &ng));
    SL_CHECK_MPI(MPI_Group_translate_ranks(g, 2, world, ng, in_node));
    MPI_Group_free(&g);
    MPI_Group_free(&ng);
    int together = in_node[0] == 0 && in_node[1] != MPI_UNDEFINED;
    SL_CHECK_MPI(MPI_Bcast(&together, 1, MPI_INT, 0, comm));
    /* every node allocates (the call is collective on each); only rank 0's node uses it */
    unsigned long long *mine;
    int lrank;
    MPI_Comm_rank(c->node, &lrank);
    SL_CHECK_MPI(MPI_Win_allocate_shared(lrank == 0 ? 2 * LINE : 0, 1, MPI_INFO_NULL, c->node,
                                         &mine, &c->win));
    MPI_Aint bytes;
    int unit;
    char *base;
    SL_CHECK_MPI(MPI_Win_shared_query(c->win, 0, &bytes, &unit, &base));
    c->ping = (unsigned long long *)base;
    c->pong = (unsigned long long *)(base + LINE);
    if (lrank == 0) {
        __atomic_store_n(c->ping, 0ULL, __ATOMIC_RELEASE);
        __atomic_store_n(c->pong, 0ULL, __ATOMIC_RELEASE);
    }
    SL_CHECK_MPI(MPI_Barrier(comm)); /* both lines zero before anyone waits on one */
    c->active = together;
}

/* Waits until *p holds v; yields the core now and then, since on an oversubscribed node the
 * rank that will write it may need this one. */
static void wait_for(unsigned long long *p, unsigned long long v)
{
    for (unsigned spins = 0; __atomic_load_n(p, __ATOMIC_ACQUIRE) != v; spins++)
        if (spins % 4096 == 4095) sched_yield();
}

double sl_corelat_measure(sl_corelat *c, int n)
{
    double med = NAN;
    if (!c->active || n < 1) return med;
    SL_CHECK_MPI(MPI_Barrier(c->comm));
    if (c->rank == 0) {
        double *rt = malloc((size_t)n * sizeof *rt);
        if (!rt) SL_FATAL("out of memory for %d round trips", n);
        for (int i = 0; i < n; i++) {
            unsigned long long k = ++c->seq;
            double t0 = sl_now();
            __atomic_store_n(c->ping, k, __ATOMIC_RELEASE);
            wait_for(c->pong, k);
            rt[i] = sl_now() - t0;
        }
        sl_stats s;
        sl_stats_compute(rt, n, &s);
        med = s.median;
        free(rt);
    } else if (c->rank == 1) {
        for (int i = 0; i < n; i++) {
            unsigned long long k = ++c->seq;
            wait_for(c->ping, k);
            __atomic_store_n(c->pong, k, __ATOMIC_RELEASE);
        }
    }
    SL_CHECK_MPI(MPI_Bcast(&med, 1, MPI_DOUBLE, 0, c->comm));
    return med;
}

void sl_corelat_close(sl_corelat *c)
{
    if (c->node != MPI_COMM_NULL && c->node) {
        MPI_Win_free(&c->win);
        MPI_Comm_free(&c->node);
    }
    memset(c, 0, sizeof *c);
}
