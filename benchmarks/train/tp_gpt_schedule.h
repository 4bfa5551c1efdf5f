/* tp_gpt_schedule.h — the tensor-parallel GPT's layers (tp_gpt.c) as the performance model reads
 * them (perf_model.h): one function per layer function of tp_gpt.h, stating what that function
 * runs on one rank of a t-rank group, in the order it runs, for a micro-batch of B sequences;
 * megatron_mlp --model gpt states its step with mg_pm_step, parallel3d its stages with the
 * layers (p3_schedule.c). */
#ifndef SL_TP_GPT_SCHEDULE_H
#define SL_TP_GPT_SCHEDULE_H

#include "perf_model.h"
#include "tp_gpt.h"

/* The groups the operations run on (sl_pm_group): the tensor-parallel group and the replicas of
 * a rank's slices; each fitted on its own communicator. */
enum { MG_PM_TP = 1, MG_PM_DP = 2 };

void mg_pm_load(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
void mg_pm_embedding_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
void mg_pm_block_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
/* The attention of a block alone, forward (selective recomputation repeats it before the backward). */
void mg_pm_attention_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
void mg_pm_head(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
void mg_pm_block_backward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
void mg_pm_embedding_backward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc);
/* Sequence parallelism's all-reduce of the layer norms' gradients (none without it). */
void mg_pm_norms_allreduce(const sl_train *t, const mg *s, sl_pm_sched *sc);
/* After the gradients: the 16-bit rounding, the replicas' all-reduce of n elements (d > 1) and
 * the optimizer on them (16 bits: the unscale and its check, the cast back). */
void mg_pm_update(const sl_train *t, const mg *s, size_t n, sl_pm_sched *sc);
/* mg_step: megatron_mlp --model gpt's .schedule. */
void mg_pm_step(const sl_train *t, sl_pm_sched *sc);

#endif
