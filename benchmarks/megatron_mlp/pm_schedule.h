/* pm_schedule.h — megatron_mlp's step as the performance model reads it (pm_schedule.c). */
#ifndef MEGATRON_PM_SCHEDULE_H
#define MEGATRON_PM_SCHEDULE_H

#include "sl_train.h"

/* sl_technique.schedule of the MLP blocks (every variant). The GPT, and degrees with both
 * t and d above 1, state no step: the prediction is NAN (n/a) there. */
void mm_pm_schedule(const sl_train *t, sl_pm_sched *sc);

#endif
