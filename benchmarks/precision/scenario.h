/* scenario.h — precision.c's teaching scenario, judged from the runs: in the default run the
 * gradients lie below fp16's range, so fp16 without scaling fails to train while bf16 trains
 * and fp16 with dynamic scaling tracks fp32. The outcome holds under the parameters the
 * scenario was designed for (the defaults); under others it is reported, not asserted. */
#ifndef PRECISION_SCENARIO_H
#define PRECISION_SCENARIO_H

#include "run.h"
#include "scalelab.h"

/* A parameter the scenario depends on: its option, the value the scenario was designed for
 * and this run's value (a choice option's values as its index into `words`, "sgd|adamw"). */
typedef struct scenario_param {
    const char *opt;
    const char *words; /* NULL for a number */
    double designed, now;
} scenario_param;

/* The scenario row and its `# scenario:` notes. It needs fp16/none, bf16/none and fp16/dynamic
 * with master weights among runs[0..n) (runs[0] is fp32/none); without them it only says so.
 * Asserted (a different outcome fails: exit 1) when `assert_it` and every parameter of p[0..np)
 * is at its designed value; otherwise the outcome is reported (not_asserted), saying which
 * parameters differ and whether the scenario's expectation was met under them. */
void scenario_row(sl_ctx *ctx, const run_result *runs, int n, const scenario_param *p, int np, int assert_it);

#endif
