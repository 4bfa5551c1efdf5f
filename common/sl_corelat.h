/* sl_corelat.h — the machine's core-to-core latency between ranks 0 and 1: the round trip of one
 * cache line between them through a shared window, with no MPI call in it.
 *
 * Why: on a node whose CPUs are virtual, the hypervisor may move them to cores that share less
 * cache for seconds at a time, and every small message then costs more. On a 2-vCPU VM this
 * round trip was found to switch between 0.15 and 0.55 us within one run, and the median of an
 * 8-byte MPI_Allreduce between the same two ranks switched with it (0.40 and 0.68 us,
 * correlation 0.88 to 0.97 over 2,000 alternating blocks). A latency row that carries the round
 * trip measured beside it says which of those machines it was timed on; nothing the program
 * does chooses it.
 *
 *   sl_corelat cl;
 *   sl_corelat_open(&cl, comm);              collective; inactive unless ranks 0 and 1 share a node
 *   double rtt = sl_corelat_measure(&cl, 200);   collective; the median round trip, NaN if inactive
 *   sl_corelat_close(&cl);
 */
#ifndef SL_CORELAT_H
#define SL_CORELAT_H

#include <mpi.h>

typedef struct sl_corelat {
    int active;            /* ranks 0 and 1 share a node (and this is no simulation) */
    int rank;
    MPI_Comm comm, node;
    MPI_Win win;
    unsigned long long *ping, *pong; /* one cache line each, in rank 0's part of the window */
    unsigned long long seq;
} sl_corelat;

void sl_corelat_open(sl_corelat *c, MPI_Comm comm);
/* Ranks 0 and 1 bounce the line n times (the others wait at a barrier); every rank returns
 * rank 0's median round trip in seconds, NaN where inactive. */
double sl_corelat_measure(sl_corelat *c, int n);
void sl_corelat_close(sl_corelat *c);

#endif
