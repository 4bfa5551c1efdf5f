/* tp_groups.h — what megatron_mlp's MLP blocks (megatron_mlp.c) and its GPT (tp_gpt.c) share: the
 * tensor-parallel group and the replicas' communicators of a rank, and the row's metric
 * lookups. */
#ifndef SL_TP_GROUPS_H
#define SL_TP_GROUPS_H

#include "sl_train.h"

/* The ranks (the world, or rank 0 alone in the baseline) as groups of t consecutive ranks:
 * rank rep·t + tr is member tr of group rep (tp: the group; dp: the ranks of the same tr in
 * every group), with t's collective implementation. Collective. */
void mm_groups_open(sl_train *t, int rep, int tr, MPI_Comm *tp_mpi, MPI_Comm *dp_mpi, sl_comm **tp, sl_comm **dp);
void mm_groups_close(MPI_Comm *tp_mpi, MPI_Comm *dp_mpi, sl_comm *tp, sl_comm *dp);

/* The value of a metric already in the row (NAN if none), and a new value for it. */
double mm_metric_of(const sl_result *r, const char *name);
void mm_set_metric(sl_result *r, const char *name, double v);

#endif
