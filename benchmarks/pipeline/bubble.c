/* bubble.c — the bubble figures of pipeline.c's rows from every rank's per-step records
 * (bubble.h). A stage is idle W less its work. The busiest stage idles only while the pipeline
 * fills and drains (and while messages travel): its idle over W is the bubble. A stage with
 * less work also waits for the busiest one at every micro-batch (load imbalance), which is in
 * its own idle and so in the mean over the stages, not in the bubble. */
#include <stdlib.h>

#include "bubble.h"
#include "sl_error.h"
#include "sl_stats.h"

static double median(const double *x, int n)
{
    sl_stats st;
    sl_stats_compute(x, n, &st);
    return st.median;
}

static double rec(const double *all, int rank, int k, int n, int step)
{
    return all[((size_t)rank * PB_NREC + k) * n + step];
}

void pipe_bubble_figures(const double *all, int p, int d, int n, int timed, pipe_bubble_figs *out)
{
    const int first = n - timed, ncol = 4 + 3 * p;
    double *col = malloc((size_t)ncol * timed * sizeof *col);
    out->stage_idle = calloc(3 * (size_t)p, sizeof *out->stage_idle);
    if (!col || !out->stage_idle) SL_FATAL("out of memory");
    out->wait_first_b = out->stage_idle + p;
    out->wait_later_b = out->stage_idle + 2 * p;
    for (int i = 0; i < timed; i++) {
        double ci = 0, cf = 0, cl = 0, cw = 0;
        double *si = col + (size_t)4 * timed, *wf = si + (size_t)p * timed, *wl = wf + (size_t)p * timed;
        for (int s = 0; s < p; s++) si[s * timed + i] = wf[s * timed + i] = wl[s * timed + i] = 0;
        for (int r = 0; r < d; r++) {
            const double w = rec(all, r * p, PB_WIN, n, first + i);
            double sum = 0, most = 0;
            for (int s = 0; s < p; s++) {
                const int rank = r * p + s;
                const double work = rec(all, rank, PB_WORK, n, first + i);
                sum += w - work;
                most = work > most ? work : most;
                if (w > 0 && (w - work) / w > si[s * timed + i]) si[s * timed + i] = (w - work) / w;
                const double f = rec(all, rank, PB_WAIT_FIRST_B, n, first + i), l = rec(all, rank, PB_WAIT_LATER_B, n, first + i);
                if (f > wf[s * timed + i]) wf[s * timed + i] = f;
                if (l > wl[s * timed + i]) wl[s * timed + i] = l;
            }
            if (w - most > ci) ci = w - most;
            if (w > 0 && (w - most) / w > cf) cf = (w - most) / w;
            if (w > 0 && sum / p / w > cl) cl = sum / p / w;
            if (w > cw) cw = w;
        }
        col[i] = ci;
        col[timed + i] = cf;
        col[2 * timed + i] = cl;
        col[3 * timed + i] = cw;
    }
    double *one[4] = {&out->idle, &out->frac, &out->mean, &out->span};
    for (int k = 0; k < 4; k++) *one[k] = median(col + (size_t)k * timed, timed);
    out->busiest = 0;
    for (int s = 0; s < p; s++) {
        const double *si = col + (size_t)(4 + s) * timed;
        out->stage_idle[s] = median(si, timed);
        out->wait_first_b[s] = median(si + (size_t)p * timed, timed);
        out->wait_later_b[s] = median(si + (size_t)2 * p * timed, timed);
        if (out->stage_idle[s] < out->stage_idle[out->busiest]) out->busiest = s;
    }
    free(col);
}

void pipe_bubble_free(pipe_bubble_figs *f)
{
    free(f->stage_idle);
    f->stage_idle = f->wait_first_b = f->wait_later_b = NULL;
}
