/* plan.c — checkpoint plans and their analytic costs (see plan.h for what is counted). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"

void ck_plan_every(ck_plan *p, int nlayers, int k)
{
    p->nseg = 0;
    for (int l = 0; l < nlayers; l += k) p->start[p->nseg++] = l;
    p->start[p->nseg] = nlayers;
}

/* Prefix sums of the sizes of plan.h, in bytes: X[i] = X_0 + ... + X_{i-1}, the same for Z. */
typedef struct sizes {
    double X[SL_MLP_MAX_LAYERS + 2], Z[SL_MLP_MAX_LAYERS + 1];
} sizes;

static double x_bytes(const sl_mlp *m, int rows, size_t es, int l) { return (double)es * rows * m->dims[l]; }
static double z_bytes(const sl_mlp *m, int rows, size_t es, int l)
{
    return m->act[l] == SL_ACT_NONE ? 0 : (double)es * rows * m->dims[l + 1];
}
static double g_bytes(const sl_mlp *m, int rows, size_t es, int l) { return l > 0 ? x_bytes(m, rows, es, l) : 0; }

static void prefix_sums(const sl_mlp *m, int rows, size_t es, sizes *s)
{
    s->X[0] = s->Z[0] = 0;
    for (int l = 0; l <= m->nlayers; l++) s->X[l + 1] = s->X[l] + x_bytes(m, rows, es, l);
    for (int l = 0; l < m->nlayers; l++) s->Z[l + 1] = s->Z[l] + z_bytes(m, rows, es, l);
}

/* The peak is the largest of these moments of the step, for each segment j = [a, b) with
 * C_j = X_{start[0]} + ... + X_{start[j]} (the checkpoints then live, its own input included):
 *   forward, j dropped, layer l:   C_j + X_l (unless l = a) + Z_l + X_{l+1}
 *                                  (the layer's input, its z and its output; the input of the
 *                                  layer before and its z are already freed)
 *   forward, last segment, layer l: C_j + X_{a+1..l+1} + Z_{a..l}   (everything kept)
 *   the loss:                      the last segment's forward + G_N (dL/d output)
 *   recompute of j, layer l:       C_j + X_{a+1..l} + Z_{a..l} + X_{l+1} (unless l + 1 = b:
 *                                  the segment's output is not needed again) + G_b (dy, held)
 *   backward of j, layer l:        C_j + X_{a+1..l} + Z_{a..l} + G_{l+1} + G_l
 *                                  (dy and dx; the layers above l and x_N already freed)
 * For a uniform MLP (every X, Z, G one tensor T) and k dividing N this is N/k + 2k tensors:
 * the N/k checkpoints, and a segment's k - 1 inner inputs, its k pre-activations and two
 * gradients (the last segment: one z fewer, the output and dL/d output instead). */
double ck_model_peak(const ck_plan *p, const sl_mlp *m, int rows, size_t es)
{
    sizes s;
    prefix_sums(m, rows, es, &s);
    const int N = m->nlayers, S = p->nseg;
    double peak = 0, C = 0;
#define MOMENT(v) (peak = fmax(peak, (v)))
    for (int j = 0; j < S; j++) {
        const int a = p->start[j], b = p->start[j + 1];
        C += x_bytes(m, rows, es, a);
        if (j < S - 1) {
            for (int l = a; l < b; l++) {
                MOMENT(C + (l > a ? x_bytes(m, rows, es, l) : 0) + z_bytes(m, rows, es, l) + x_bytes(m, rows, es, l + 1));
                MOMENT(C + (s.X[l + 1] - s.X[a + 1]) + (s.Z[l + 1] - s.Z[a]) +
                       (l + 1 < b ? x_bytes(m, rows, es, l + 1) : 0) + g_bytes(m, rows, es, b));
            }
        } else {
            const double kept = C + (s.X[N + 1] - s.X[a + 1]) + (s.Z[N] - s.Z[a]);
            MOMENT(kept);
            MOMENT(kept + g_bytes(m, rows, es, N));
        }
        for (int l = a; l < b; l++)
            MOMENT(C + (s.X[l + 1] - s.X[a + 1]) + (s.Z[l + 1] - s.Z[a]) + g_bytes(m, rows, es, l + 1) +
                   g_bytes(m, rows, es, l));
    }
#undef MOMENT
    return peak;
}

double ck_model_recompute_flops(const ck_plan *p, const sl_mlp *m, int rows)
{
    double f = 0;
    for (int l = 0; l < p->start[p->nseg - 1]; l++) f += 2.0 * rows * m->dims[l] * m->dims[l + 1];
    return f;
}

int ck_plan_longest(const ck_plan *p)
{
    int k = 0;
    for (int j = 0; j < p->nseg; j++) k = p->start[j + 1] - p->start[j] > k ? p->start[j + 1] - p->start[j] : k;
    return k;
}

void ck_plan_describe(const ck_plan *p, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int j = 0; j < p->nseg && n < len;) {
        const int k = p->start[j + 1] - p->start[j];
        int r = 1;
        while (j + r < p->nseg && p->start[j + r + 1] - p->start[j + r] == k) r++;
        int w = r > 1 ? snprintf(buf + n, len - n, "%s%d(x%d)", n ? "," : "", k, r)
                      : snprintf(buf + n, len - n, "%s%d", n ? "," : "", k);
        if (w < 0 || (size_t)w >= len - n) { /* cut: end with "..." */
            if (len >= 4) snprintf(buf + len - 4, 4, "...");
            return;
        }
        n += (size_t)w;
        j += r;
    }
}

/* Chen et al., "Training Deep Nets with Sublinear Memory Cost" (2016), section 4.3, the greedy
 * plan for a segment budget B: walk the layers in order adding what each keeps for its backward
 * when its segment is stored (c->kept) to a running total; when the total exceeds B, the
 * layer's output becomes a checkpoint (a segment ends after it) and the total restarts at 0. */
static void plan_greedy(ck_plan *p, const ck_costs *c, double B)
{
    double temp = 0;
    p->nseg = 0;
    p->start[p->nseg++] = 0;
    for (int l = 0; l < c->nlayers - 1; l++) {
        temp += c->kept(l, c->ctx);
        if (temp > B) {
            p->start[p->nseg++] = l + 1;
            temp = 0;
        }
    }
    p->start[p->nseg] = c->nlayers;
}

/* Keeps cand in *best when it fits and recomputes less (ties: lower peak); tracks the least
 * peak of all plans in *least / *least_plan. */
static void consider(const ck_plan *cand, const ck_costs *c, double budget, ck_plan *best, double *best_cost,
                     double *best_peak, ck_plan *least_plan, double *least)
{
    const double peak = c->peak(cand, c->ctx), cost = c->recompute(cand, c->ctx);
    if (peak < *least) {
        *least = peak;
        *least_plan = *cand;
    }
    if (peak <= budget && (cost < *best_cost || (cost == *best_cost && peak < *best_peak))) {
        *best = *cand;
        *best_cost = cost;
        *best_peak = peak;
    }
}

/* The search, as Chen et al. search over B: the greedy plan changes only where B crosses the
 * total of some run of consecutive layers, so B takes each such total (and 0: every layer a
 * segment); every-k for k = 1..N joins them. Of the plans whose analytic peak fits the budget,
 * the one with the fewest recomputed FLOPs wins (a large budget: store-all, nothing
 * recomputed). */
int ck_plan_search(ck_plan *p, const ck_costs *c, double budget, double *least)
{
    const int N = c->nlayers;
    ck_plan cand, best, least_plan;
    double best_cost = INFINITY, best_peak = INFINITY;
    *least = INFINITY;
    for (int k = 1; k <= N; k++) {
        ck_plan_every(&cand, N, k);
        consider(&cand, c, budget, &best, &best_cost, &best_peak, &least_plan, least);
    }
    plan_greedy(&cand, c, 0);
    consider(&cand, c, budget, &best, &best_cost, &best_peak, &least_plan, least);
    for (int a = 0; a < N; a++) {
        double run = 0;
        for (int b = a; b < N; b++) {
            run += c->kept(b, c->ctx);
            plan_greedy(&cand, c, run);
            consider(&cand, c, budget, &best, &best_cost, &best_peak, &least_plan, least);
        }
    }
    if (isinf(best_cost)) {
        *p = least_plan;
        return -1;
    }
    *p = best;
    return 0;
}

/* The MLP's costs for the search. */
typedef struct mlp_ctx {
    const sl_mlp *m;
    int rows;
    size_t es;
} mlp_ctx;
static double mlp_peak(const ck_plan *p, const void *ctx)
{
    const mlp_ctx *c = ctx;
    return ck_model_peak(p, c->m, c->rows, c->es);
}
static double mlp_recompute(const ck_plan *p, const void *ctx)
{
    const mlp_ctx *c = ctx;
    return ck_model_recompute_flops(p, c->m, c->rows);
}
static double mlp_kept(int l, const void *ctx)
{
    const mlp_ctx *c = ctx;
    return x_bytes(c->m, c->rows, c->es, l) + z_bytes(c->m, c->rows, c->es, l);
}

int ck_plan_for_budget(ck_plan *p, const sl_mlp *m, int rows, size_t es, double budget, double *least)
{
    const mlp_ctx ctx = {m, rows, es};
    const ck_costs c = {.nlayers = m->nlayers, .peak = mlp_peak, .recompute = mlp_recompute, .kept = mlp_kept, .ctx = &ctx};
    return ck_plan_search(p, &c, budget, least);
}
