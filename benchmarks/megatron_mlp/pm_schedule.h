/* pm_schedule.h — megatron_mlp's step as the performance model reads it (pm_schedule.c). */
#ifndef MEGATRON_PM_SCHEDULE_H
#define MEGATRON_PM_SCHEDULE_H

#include "sl_train.h"

/* sl_technique.schedule of every variant: the MLP blocks, or the GPT (tp_gpt_schedule.c). */
void mm_pm_schedule(const sl_train *t, sl_pm_sched *sc);

#endif
