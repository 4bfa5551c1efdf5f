/* search.c — parallel3d --search: which layout trains this GPT fastest on these ranks.
 *
 * Every layout (D, T, P, micro-batches m, ZeRO stage, recomputation none|selective|full) with D·T·P = ranks, T
 * dividing the heads, the width and the vocabulary, P at most the blocks, D dividing the global
 * batch and m a replica's sequences, is a candidate. The memory model (model.c) drops those
 * whose busiest rank would hold more than the limit. The performance model predicts each of the
 * rest from primitives measured on these ranks now (sl_train_predict_plan: the code behind every
 * row's pred_step), each written to <out>/parallel3d.search.tsv as it is predicted. Then the
 * `top` fastest predictions run for real, and `sample` more spread evenly over the rest of the
 * predicted order (so that a prediction that ranks badly shows), each a full run of the program:
 * timed steps, the check against serial training, its row. The end prints the runs sorted by
 * measured step with the prediction beside each, whether the predicted best was the measured
 * best, and the median |measured / predicted - 1|.
 *
 * Under --schedule interleaved a layout is also its chunks a stage: each of the above with every
 * v >= 2 whose P·v divides the blocks, where m is a multiple of P (Megatron-LM's rules, as the
 * program's own --virtual checks). One whose P is 1 has no pipeline to go round and the program
 * refuses it: left out, counted with those whose P allows no v and whose m is no multiple of P.
 *
 * Every layout trains the same global batch (strong scaling), so their steps compare. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "search.h"
#include "sl_stats.h"

typedef struct cand {
    p3_layout l;
    double mem;     /* the busiest rank's bytes */
    int fits;       /* mem within the limit */
    sl_pm_pred pred; /* step NAN: not predicted */
    int rank;       /* 1: predicted fastest of those that fit; 0: not predicted */
    int pick;       /* 0 not run, 1 of the top predictions, 2 of the sample */
    double step;    /* the row's measured median step, NAN until run */
    double row_pred; /* the row's own pred_step */
    int check;      /* its row's sl_check_status */
} cand;

static cand *cands;
static int ncands, nfit;        /* layouts, those that fit */
static int uneven_d, uneven_m;  /* layouts left out: of grids whose D does not divide the batch (m from 1 to
                                   the fewest sequences a replica would hold), and those whose m does not
                                   divide a replica's sequences */
static int one_stage, no_v, m_not_p; /* interleaved, left out before v (each counted once): P 1, no v >= 2 with
                                        P·v dividing the blocks, m not a multiple of P */
static int *runs, nruns, running = -1;
static double plan_seconds;
static int unpredicted; /* layouts whose schedule overflowed the model's tables (prediction NAN) */

static void add(const p3_layout *l)
{
    cand *c = realloc(cands, (size_t)(ncands + 1) * sizeof *cands);
    if (!c) SL_FATAL("out of memory for the search's layouts");
    cands = c;
    memset(&cands[ncands], 0, sizeof *cands);
    cands[ncands].l = *l;
    cands[ncands].pred.step = cands[ncands].step = cands[ncands].row_pred = NAN;
    ncands++;
}

static void enumerate(const p3_search *cfg)
{
    const int R = cfg->ranks;
    ncands = nfit = uneven_d = uneven_m = one_stage = no_v = m_not_p = 0;
    for (int P = 1; P <= R && P <= cfg->layers; P++) {
        if (R % P) continue;
        int vs[P3_MAX_CHUNKS], nv = 0; /* the chunks a stage that P allows (1: not interleaved) */
        if (!cfg->interleaved) vs[nv++] = 1;
        else /* up to the most the program holds, --virtual's bound */
            for (int v = 2; v <= P3_MAX_CHUNKS && P * v <= cfg->layers; v++)
                if (P > 1 && cfg->layers % (P * v) == 0) vs[nv++] = v;
        for (int T = 1; T <= R / P; T++) {
            if ((R / P) % T || cfg->heads % T || cfg->d_model % T || cfg->vocab % T) continue;
            /* ZeRO over one replica: nothing. In f32, stage 2 holds and moves exactly what stage 1
             * does (the micro-batches accumulate in the whole f32 gradient either way): not tried. */
            const int D = R / P / T, zeros = D > 1 && cfg->zero_ok ? (cfg->dt == SL_F32 ? 2 : 3) : 1;
            if (cfg->global_batch % D) { /* replicas of unequal batches: the grid's layouts left out */
                uneven_d += cfg->global_batch / D * zeros * 3;
                continue;
            }
            const int Bd = cfg->global_batch / D;
            for (int m = 1; m <= Bd; m++) {
                if (Bd % m) { /* micro-batches of unequal sizes: left out */
                    uneven_m += zeros * 3;
                    continue;
                }
                int *left = NULL; /* interleaved's rules: left out, once whatever v */
                if (cfg->interleaved) left = P == 1 ? &one_stage : !nv ? &no_v : m % P ? &m_not_p : NULL;
                if (left) {
                    *left += zeros * 3;
                    continue;
                }
                for (int z = 0; z < zeros; z++)
                    for (int r = 0; r < 3; r++)
                        for (int k = 0; k < nv; k++) add(&(p3_layout){D, T, P, m, z, r, vs[k]});
            }
        }
    }
}

static int by_pred(const void *a, const void *b)
{
    const cand *x = &cands[*(const int *)a], *y = &cands[*(const int *)b];
    const double u = isnan(x->pred.step) ? INFINITY : x->pred.step, v = isnan(y->pred.step) ? INFINITY : y->pred.step;
    return u < v ? -1 : u > v ? 1 : *(const int *)a - *(const int *)b;
}

static int by_step(const void *a, const void *b)
{
    const cand *x = &cands[*(const int *)a], *y = &cands[*(const int *)b];
    const double u = isnan(x->step) ? INFINITY : x->step, v = isnan(y->step) ? INFINITY : y->step;
    return u < v ? -1 : u > v ? 1 : x->rank - y->rank;
}

static const char *const rc_text[] = {"", " sel", " full"}, *const rc_names[] = {"none", "selective", "full"};

static void layout_text(const p3_layout *l, char *buf, size_t len)
{
    char v[16] = ""; /* the chunks a stage, where there are several (interleaved) */
    if (l->v > 1) snprintf(v, sizeof v, " v%d", l->v);
    snprintf(buf, len, "%dx%dx%d m%d%s z%d%s", l->D, l->T, l->P, l->m, v, l->zero, rc_text[l->recompute]);
}

/* Every layout and its memory; the least of them (INFINITY: no layout). */
static double enumerate_memory(const p3_search *cfg)
{
    enumerate(cfg);
    double least = INFINITY;
    for (int i = 0; i < ncands; i++) {
        cands[i].mem = cfg->memory(&cands[i].l);
        least = fmin(least, cands[i].mem);
    }
    return least;
}

void p3_search_validate(const p3_search *cfg, int limit_given)
{
    const double least = enumerate_memory(cfg);
    if (!ncands && one_stage + no_v + m_not_p)
        sl_usage_error("--schedule interleaved: --search finds no layout of %d ranks with P >= 2 stages, P x v "
                       "dividing --layers %d for some v >= 2 and micro-batches a multiple of P (--batch %d)",
                       cfg->ranks, cfg->layers, cfg->global_batch);
    if (!ncands)
        sl_usage_error("--batch %d: --search finds no layout of %d ranks whose replicas split it equally (D must "
                       "divide the global batch)", cfg->global_batch, cfg->ranks);
    if (limit_given && least > cfg->mem_limit)
        sl_usage_error("--mem-limit %.0f: none of the %d layouts fits; the smallest needs %.0f bytes a rank",
                       cfg->mem_limit, ncands, least);
}

/* Pass 0: every layout predicted, the runs chosen. */
static void plan(sl_ctx *ctx, const p3_search *cfg)
{
    const double least = enumerate_memory(cfg);
    for (int i = 0; i < ncands; i++) {
        cands[i].fits = cands[i].mem <= cfg->mem_limit;
        nfit += cands[i].fits;
    }
    if (!nfit) /* the machine's own limit (an explicit one is checked up front) */
        sl_usage_error("--mem-limit: none of the %d layouts fits %s; the smallest needs %.0f bytes a rank", ncands,
                       cfg->mem_source, least);
    char rules[256] = "";
    if (cfg->interleaved)
        snprintf(rules, sizeof rules, ", %d of one stage (interleaved needs P >= 2), %d whose P x v divides the %d "
                 "layers for no v >= 2, %d whose m is no multiple of P; each left out once, the others once a v",
                 one_stage, no_v, cfg->layers, m_not_p);
    sl_note(ctx, "search: %d layouts of %d ranks (%d more left out: %d whose D does not divide the batch of %d, %d "
                 "whose m does not divide a replica's sequences%s), %d fit in memory (%s); predicting each %s",
            ncands, cfg->ranks, uneven_d + uneven_m + one_stage + no_v + m_not_p, uneven_d, cfg->global_batch,
            uneven_m, rules, nfit, cfg->mem_source,
            cfg->mode == P3_SEARCH_PLATFORM ? "on the platform" : "from primitives measured now");
    char path[PATH_MAX + 64], line[512];
    FILE *f = ctx->rank == 0 ? sl_results_file_open(ctx, "search.tsv", path, sizeof path) : NULL;
    if (f)
        sl_results_append_line(f, path, "run_id\tdp\ttp\tpp\tmicro_batches\tvirtual\tzero\trecompute\tmem_model\tfits\tpred_step"
                                        "\tpred_compute\tpred_exposed\tpred_idle\tpred_dominant");
    const double t0 = sl_now();
    for (int i = 0; i < ncands; i++) {
        cand *c = &cands[i];
        if (c->fits) {
            cfg->use(&c->l);
            char fit[512];
            const int rc =
                cfg->mode == P3_SEARCH_PLATFORM
                    ? sl_train_predict_platform(ctx, cfg->variant, cfg->dt, cfg->impl, cfg->ranks, &c->pred)
                    : sl_train_predict_plan(ctx, cfg->variant, cfg->dt, cfg->impl, &c->pred, fit, sizeof fit);
            if (rc != 0)
                SL_FATAL("--search: the performance model predicted nothing (SL_NO_PREDICT is checked up front)");
            unpredicted += isnan(c->pred.step);
        }
        if (!f) continue;
        const p3_layout *l = &c->l;
        snprintf(line, sizeof line, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.0f\t%d\t%.9g\t%.9g\t%.9g\t%.9g\t%s",
                 ctx->run_id, l->D, l->T, l->P, l->m, l->v, l->zero, rc_names[l->recompute], c->mem, c->fits, c->pred.step,
                 c->pred.compute, c->pred.exposed, c->pred.idle, c->fits ? sl_pm_dominant(&c->pred) : "-");
        sl_results_append_line(f, path, line);
    }
    if (f && fclose(f) != 0) SL_FATAL("cannot close %s", path);
    plan_seconds = sl_now() - t0;

    int *order = malloc((size_t)nfit * sizeof *order);
    runs = malloc((size_t)nfit * sizeof *runs);
    if (!order || !runs) SL_FATAL("out of memory for the search's order");
    int n = 0;
    for (int i = 0; i < ncands; i++)
        if (cands[i].fits) order[n++] = i;
    qsort(order, (size_t)n, sizeof *order, by_pred);
    for (int k = 0; k < n; k++) cands[order[k]].rank = k + 1;
    const int top = cfg->top < n ? cfg->top : n, rest = n - top;
    for (int k = 0; k < top; k++) cands[order[k]].pick = 1, runs[nruns++] = order[k];
    const int sample = cfg->sample < rest ? cfg->sample : rest;
    for (int k = 0; k < sample; k++) { /* the middles of `sample` equal parts of the rest */
        const int at = top + (int)((k + 0.5) * rest / sample);
        cands[order[at]].pick = 2, runs[nruns++] = order[at];
    }
    char best[64];
    layout_text(&cands[order[0]].l, best, sizeof best);
    if (unpredicted)
        sl_note(ctx, "search: %d layouts not predicted: their schedules (micro-batches x stages) overflow the "
                     "model's %d events", unpredicted, SL_PM_MAX_EVENTS);
    sl_note(ctx, "search: %d layouts predicted in %.1f s; predicted fastest %s at %.2f ms (%.1f samples/s)%s",
            n - unpredicted, plan_seconds, best, 1e3 * cands[order[0]].pred.step,
            cfg->global_batch / cands[order[0]].pred.step,
            cfg->mode == P3_SEARCH_RUN ? "" : "; nothing is run");
    if (cfg->mode == P3_SEARCH_RUN)
        sl_note(ctx, "search: running the %d fastest predictions and %d more spread over the rest", top, sample);
    free(order);
}

/* Predicting only: the chosen layouts in predicted order, what each spends its step on. */
static void predicted_table(sl_ctx *ctx, const p3_search *cfg)
{
    sl_note(ctx, "search: the %d fastest predictions and %d more spread over the rest, by predicted step (D x T x P, "
                 "m micro-batches,%s zero stage z, recomputation sel(ective) or full; rank of %d)",
            cfg->top < nruns ? cfg->top : nruns, nruns > cfg->top ? nruns - cfg->top : 0,
            cfg->interleaved ? " v chunks a stage," : "", nfit);
    sl_note(ctx, "  %-22s %5s %11s %11s %11s %11s %-12s %9s", "layout", "rank", "pred ms", "compute ms", "exposed ms",
            "idle ms", "dominant", "mem GiB");
    for (int k = 0; k < nruns; k++) {
        const cand *c = &cands[runs[k]];
        char text[64];
        layout_text(&c->l, text, sizeof text);
        sl_note(ctx, "  %-22s %5d %11.3f %11.3f %11.3f %11.3f %-12s %9.2f", text, c->rank, 1e3 * c->pred.step,
                1e3 * c->pred.compute, 1e3 * c->pred.exposed, 1e3 * c->pred.idle, sl_pm_dominant(&c->pred),
                c->mem / 1073741824.0);
    }
}

/* The pass after the last: the runs sorted by measured step, the prediction beside each. */
static void summary(sl_ctx *ctx, const p3_search *cfg)
{
    int *order = malloc((size_t)nruns * sizeof *order + 1);
    if (!order) SL_FATAL("out of memory");
    memcpy(order, runs, (size_t)nruns * sizeof *order);
    qsort(order, (size_t)nruns, sizeof *order, by_step);
    sl_note(ctx, "search: the %d layouts run, by measured step (D x T x P, m micro-batches,%s zero stage z, rc: "
                 "recomputation sel(ective) or full; rank: by prediction, of %d)", nruns,
            cfg->interleaved ? " v chunks a stage," : "", nfit);
    sl_note(ctx, "  %-22s %5s %10s %10s %9s %-12s %-6s %s", "layout", "rank", "step ms", "pred ms", "step/pred",
            "dominant", "check", "picked");
    double *err = malloc((size_t)nruns * sizeof *err + 1);
    if (!err) SL_FATAL("out of memory");
    int nerr = 0;
    for (int k = 0; k < nruns; k++) {
        const cand *c = &cands[order[k]];
        char text[64];
        layout_text(&c->l, text, sizeof text);
        const double ratio = c->step / c->pred.step;
        if (isfinite(ratio)) err[nerr++] = fabs(ratio - 1);
        sl_note(ctx, "  %-22s %5d %10.2f %10.2f %9.2f %-12s %-6s %s", text, c->rank, 1e3 * c->step,
                1e3 * c->pred.step, ratio, sl_pm_dominant(&c->pred), sl_check_status_name((sl_check_status)c->check),
                c->pick == 1 ? "top" : "sample");
    }
    const cand *measured = &cands[order[0]];
    int predicted = runs[0];
    for (int k = 0; k < nruns; k++)
        if (cands[runs[k]].rank == 1) predicted = runs[k];
    char a[64], b[64];
    layout_text(&cands[predicted].l, a, sizeof a);
    layout_text(&measured->l, b, sizeof b);
    sl_stats st;
    if (nerr) sl_stats_compute(err, nerr, &st);
    if (measured == &cands[predicted])
        sl_note(ctx, "search: the predicted best, %s, was the measured best; median |step/pred - 1| over the %d runs "
                     "%.2f", a, nruns, nerr ? st.median : NAN);
    else
        sl_note(ctx, "search: the predicted best, %s, was not the measured best: %s (predicted rank %d) was %.1f%% "
                     "faster; median |step/pred - 1| over the %d runs %.2f",
                a, b, measured->rank, 100 * (cands[predicted].step / measured->step - 1), nruns,
                nerr ? st.median : NAN);
    free(err);
    free(order);
}

int p3_search_sweep(sl_ctx *ctx, int pass, const p3_search *cfg)
{
    if (pass == 0) plan(ctx, cfg);
    if (cfg->mode != P3_SEARCH_RUN) {
        predicted_table(ctx, cfg);
        return 0;
    }
    if (pass < nruns) {
        running = runs[pass];
        cfg->use(&cands[running].l);
        char text[64];
        layout_text(&cands[running].l, text, sizeof text);
        sl_note(ctx, "search: run %d of %d, %s (predicted rank %d, %.2f ms)", pass + 1, nruns, text,
                cands[running].rank, 1e3 * cands[running].pred.step);
        return 1;
    }
    summary(ctx, cfg);
    running = -1;
    return 0;
}

void p3_search_row(sl_result *res)
{
    if (running < 0) return;
    const cand *c = &cands[running];
    sl_result_param_num(res, "search_rank", c->rank);
    sl_result_param_num(res, "search_layouts", nfit);
    sl_result_param_str(res, "search_pick", c->pick == 1 ? "top" : "sample");
    sl_result_metric(res, "search_pred", c->pred.step, "s");
}

void p3_search_done(const sl_result *res)
{
    if (running < 0) return;
    cand *c = &cands[running];
    c->step = res->has_time ? res->time.median : NAN;
    c->row_pred = sl_result_get(res, "pred_step");
    c->check = (int)res->check;
}
