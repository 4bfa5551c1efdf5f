/* train_own_check.c — what a technique's own check (sl_technique.check) uses when it trains a
 * reference of its own after the run and compares bit for bit (checkpointing against store-all,
 * vdnn against none): the run's state kept aside meanwhile, and the count of differing elements. */
#include <stdlib.h>
#include <string.h>

#include "sl_train.h"

void sl_train_aside(sl_train *t, sl_train_saved *sv)
{
    *sv = (sl_train_saved){.step = t->step, .tracing = sl_trace_enabled(), .scaled = t->scaled, .ms = t->ms,
                           .optim_now = t->optim_now, .nonfinite = t->nonfinite};
    sl_trace_enable(0);
    sl_train_mixed_init(&t->ms, t->dtype);
}

void sl_train_back(sl_train *t, const sl_train_saved *sv)
{
    t->step = sv->step;
    t->ms = sv->ms;
    t->optim_now = sv->optim_now;
    t->nonfinite = sv->nonfinite;
    t->scaled = sv->scaled;
    sl_trace_enable(sv->tracing);
}

long long sl_bit_differences(sl_backend be, size_t n, size_t es, const void *a, const void *b)
{
    char *ha = sl_k_download(be, a, n * es), *hb = sl_k_download(be, b, n * es);
    long long d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(ha + i * es, hb + i * es, es) != 0;
    free(ha);
    free(hb);
    return d;
}
