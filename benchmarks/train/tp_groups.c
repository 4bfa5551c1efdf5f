/* tp_groups.c — the communicators of a tensor-parallel rank and the row's metric lookups (tp_groups.h). */
#include <math.h>
#include <string.h>

#include "tp_groups.h"

void mm_groups_open(sl_train *t, int rep, int tr, MPI_Comm *tp_mpi, MPI_Comm *dp_mpi, sl_comm **tp, sl_comm **dp)
{
    MPI_Comm world = t->baseline ? MPI_COMM_SELF : t->ctx->comm;
    const sl_mem_space space = sl_comm_space(t->comm);
    SL_CHECK_MPI(MPI_Comm_split(world, rep, tr, tp_mpi));
    SL_CHECK_MPI(MPI_Comm_split(world, tr, rep, dp_mpi));
    sl_train_coll_ok(sl_comm_create(tp, *tp_mpi, sl_comm_impl(t->comm), space), "sl_comm_create (tensor-parallel)");
    sl_train_coll_ok(sl_comm_create(dp, *dp_mpi, sl_comm_impl(t->comm), space), "sl_comm_create (replicas)");
}

void mm_groups_close(MPI_Comm *tp_mpi, MPI_Comm *dp_mpi, sl_comm *tp, sl_comm *dp)
{
    sl_comm_destroy(tp);
    sl_comm_destroy(dp);
    SL_CHECK_MPI(MPI_Comm_free(tp_mpi));
    SL_CHECK_MPI(MPI_Comm_free(dp_mpi));
}

double mm_metric_of(const sl_result *r, const char *name)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) return r->metrics[i].value;
    return NAN;
}

void mm_set_metric(sl_result *r, const char *name, double v)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) r->metrics[i].value = v;
}
