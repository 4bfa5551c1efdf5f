/* placement.c — how many ranks share each node and how many CPUs they may run on, so that a
 * program can say when it is oversubscribed (more ranks × threads than CPUs): its times then
 * include the scheduler's time slices, and binding each rank to its own cores is not possible. */
#include <sched.h>
#include <string.h>

#include "sl_error.h"
#include "sl_harness.h"

void sl_placement_capture(sl_ctx *ctx)
{
    MPI_Comm node;
    SL_CHECK_MPI(MPI_Comm_split_type(ctx->comm, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node));
    SL_CHECK_MPI(MPI_Comm_size(node, &ctx->node_ranks));
    /* the CPUs of the node are those any of its ranks may use: the union of their affinity
     * masks (the whole machine under mpirun --bind-to none, the allocation under Slurm) */
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
    SL_CHECK_MPI(MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, node));
    ctx->node_cpus = CPU_COUNT(&all);
    /* the busiest node decides: every rank reports the same figures */
    int local[2] = {ctx->node_ranks, -ctx->node_cpus}, worst[2];
    SL_CHECK_MPI(MPI_Allreduce(local, worst, 2, MPI_INT, MPI_MAX, ctx->comm));
    SL_CHECK_MPI(MPI_Comm_free(&node));
    ctx->node_ranks = worst[0];
    ctx->node_cpus = -worst[1];
}

int sl_oversubscribed(const sl_ctx *ctx, int threads_per_rank)
{
    return (long long)ctx->node_ranks * threads_per_rank > ctx->node_cpus;
}

void sl_note_oversubscription(const sl_ctx *ctx, int threads_per_rank)
{
    if (!sl_oversubscribed(ctx, threads_per_rank)) return;
    if (threads_per_rank > 1)
        sl_note(ctx, "oversubscribed: %d rank%s x %d threads on a node with %d CPU%s; threads "
                     "time-share cores, so times include scheduler delays and binding each "
                     "rank to its own cores is not possible",
                ctx->node_ranks, ctx->node_ranks == 1 ? "" : "s", threads_per_rank, ctx->node_cpus,
                ctx->node_cpus == 1 ? "" : "s");
    else
        sl_note(ctx, "oversubscribed: %d ranks on a node with %d CPU%s; ranks time-share cores, "
                     "so times include scheduler delays and binding to cores is not possible",
                ctx->node_ranks, ctx->node_cpus, ctx->node_cpus == 1 ? "" : "s");
}
