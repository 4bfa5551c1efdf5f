/* pm_schedule.h — parallel3d's step as the performance model reads it (pm_schedule.c). */
#ifndef P3_PM_SCHEDULE_H
#define P3_PM_SCHEDULE_H

#include "perf_model.h"
#include "tp_gpt.h"

/* What of parallel3d's grid the schedule needs besides the tensor-parallel state. */
typedef struct p3_pm_grid {
    int P, v, m, Bd;  /* stages, model chunks a stage (chunks.h), micro-batches, the replica's sequences */
    int sched;        /* pipe_schedule.h's schedule (S_1F1B, S_GPIPE, S_INTERLEAVED) */
    int recompute;    /* --recompute: 0 none, 1 selective, 2 full */
    double bucket_bytes; /* --bucket-mb's bytes (buckets.h), or 0: one all-reduce after the step */
    int zero;         /* --zero 1 or 2 on D > 1 replicas (a stage's vector in D blocks of ceil(np/D));
                         0: the stage's slices all-reduced (mg_pm_update) */
    const size_t *lw; /* the tensor-parallel rank's whole vector: layer l's first element */
} p3_pm_grid;

/* Every stage of this rank's replica on a lane of its own (sl_technique.schedule). */
void p3_pm_schedule(const sl_train *t, const mg *s, const p3_pm_grid *g, sl_pm_sched *sc);

#endif
