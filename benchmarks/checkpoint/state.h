/* state.h — what one checkpoint run holds (checkpoint.c), shared with the GPT's step
 * (gpt_pass.c), whose layer hooks read it through t->state as the MLP's do. */
#ifndef CHECKPOINT_STATE_H
#define CHECKPOINT_STATE_H

#include "sl_train.h"
#include "plan.h"
#include "pool.h"

typedef struct ck {
    ck_plan plan;
    int rows;
    int selective_run;       /* the GPT's selective variant: no block keeps its attention core */
    int selective;           /* ... in the pass running (the check's store-all passes are not) */
    double budget;           /* the budget variant's activation bytes */
    sl_replica rep;          /* weights and gradients in t->dtype, f32 twins, optimizer state; its
                                activations placed while alive (a slot is NULL otherwise) */
    ck_pool pool;            /* every activation buffer comes from it; its peak is this pass's */
    size_t pool_held;        /* what it held after the training steps */
    sl_layer_hooks hooks;
    int seg_lo, keep;        /* the segment running forward; whether it is kept */
    void *core[SL_MLP_MAX_LAYERS]; /* selective: block l's attention core while placed */
    double step_peak;        /* the most live activation bytes of any training step */
    double recomputed;       /* forward FLOPs recomputed in this pass, as executed */
    double step_recomputed;  /* ... in the last training step */
    int corrupt;             /* SL_TEST_CORRUPT=1: recomputation spoils one element */
} ck;

/* SL_TEST_CORRUPT: element 0 of p (t->dtype, backend memory) plus 1, for the test of the check. */
void ck_spoil(sl_train *t, void *p);

/* One forward and backward of the GPT on this rank's samples under plan p (gpt_pass.c),
 * gradients (t->dtype, loss-scaled in 16 bits) into grads. */
void ck_gpt_pass(sl_train *t, const ck_plan *p, const void *params, void *grads);

#endif
