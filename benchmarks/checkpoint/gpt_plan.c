/* gpt_plan.c — checkpoint plans' analytic costs on the GPT (see gpt_plan.h for what is
 * counted and the moments). */
#include <math.h>

#include "gpt_plan.h"

static int is_block(const sl_mlp *m, int l) { return l >= 1 && l <= m->gpt.layers; }

/* G_l: the gradient into layer l as gpt_pass.c takes it (sl_gpt_io_bytes, unaligned). */
static double grad_bytes(const sl_mlp *m, sl_dtype dt, int rows, int l)
{
    return l > 0 ? (double)sl_gpt_io_bytes(m, dt, rows, l) : 0;
}

double ck_gpt_model_peak(const ck_plan *p, const sl_mlp *m, sl_dtype dt, int rows, int selective)
{
    const int N = m->nlayers, S = p->nseg, keep = selective ? SL_GPT_KEEP_SELECTIVE : SL_GPT_KEEP_ALL;
    const double K = selective ? (double)sl_gpt_core_bytes(m, dt, rows) : 0;
    double peak = 0, C = 0;
#define MOMENT(v) (peak = fmax(peak, (v)))
    for (int j = 0; j < S; j++) {
        const int a = p->start[j], b = p->start[j + 1];
        const double in = (double)sl_gpt_range_bytes(m, dt, rows, a, b, SL_GPT_KEEP_INPUT);
        const double body = (double)sl_gpt_range_bytes(m, dt, rows, a, b, keep) - in;
        double core = 0;
        for (int l = a; l < b; l++) core = is_block(m, l) ? K : core;
        C += in;
        const double next = j < S - 1 ? (double)sl_gpt_range_bytes(m, dt, rows, b, p->start[j + 2], SL_GPT_KEEP_INPUT)
                                      : grad_bytes(m, dt, rows, N);
        MOMENT(C + body + next + core);
        if (j < S - 1) MOMENT(C + grad_bytes(m, dt, rows, b) + body + core);
        for (int l = a; l < b; l++)
            MOMENT(C + body + grad_bytes(m, dt, rows, l + 1) + grad_bytes(m, dt, rows, l) + (is_block(m, l) ? K : 0));
    }
#undef MOMENT
    return peak;
}

double ck_gpt_recompute_flops(const ck_plan *p, const sl_mlp *m, int rows, int selective)
{
    double f = 0;
    for (int j = 0; j < p->nseg - 1; j++)
        for (int l = p->start[j]; l < p->start[j + 1]; l++)
            f += sl_gpt_layer_flops(m, l, rows) - (l == p->start[j + 1] - 1 && is_block(m, l) ? sl_gpt_flops_out(m, rows) : 0);
    return f + (selective ? m->gpt.layers * sl_gpt_flops_core(m, rows) : 0);
}

static double gpt_peak(const ck_plan *p, const void *ctx)
{
    const ck_gpt_ctx *c = ctx;
    return ck_gpt_model_peak(p, c->m, c->dt, c->rows, 0);
}
static double gpt_recompute(const ck_plan *p, const void *ctx)
{
    const ck_gpt_ctx *c = ctx;
    return ck_gpt_recompute_flops(p, c->m, c->rows, 0);
}
/* Layer l's input and everything it keeps for its backward. */
static double gpt_kept(int l, const void *ctx)
{
    const ck_gpt_ctx *c = ctx;
    return (double)sl_gpt_range_bytes(c->m, c->dt, c->rows, l, l + 1, SL_GPT_KEEP_ALL);
}

void ck_gpt_costs(ck_costs *c, const ck_gpt_ctx *ctx)
{
    *c = (ck_costs){.nlayers = ctx->m->nlayers, .peak = gpt_peak, .recompute = gpt_recompute, .kept = gpt_kept, .ctx = ctx};
}
