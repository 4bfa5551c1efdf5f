/* search.h — parallel3d --search: every layout of the GPT on the launched ranks predicted by the
 * performance model, the most promising ones run, and the table of both (search.c). What
 * parallel3d.c hands it: the model's and the run's constraints, the memory model of a layout, and
 * a way to set the program's options to one; the search sits below the program and calls back
 * only through these. */
#ifndef P3_SEARCH_H
#define P3_SEARCH_H

#include "sl_train.h"

/* One layout: D x T x P ranks, m micro-batches a replica, ZeRO stage, recomputation (0 none,
 * 1 selective, 2 full: parallel3d's --recompute), v model chunks a stage (--virtual: 1 but under
 * the interleaved schedule). */
typedef struct p3_layout {
    int D, T, P, m, zero, recompute, v;
} p3_layout;

/* What the search does with the layouts it predicts. */
typedef enum {
    P3_SEARCH_RUN,      /* runs the fastest predictions and a sample (--search) */
    P3_SEARCH_PREDICT,  /* predicts on the launched ranks, runs none (--search --predict-only) */
    P3_SEARCH_PLATFORM, /* predicts on --predict FILE's machine at --predict-ranks, runs none */
} p3_search_mode;

typedef struct p3_search {
    p3_search_mode mode;
    int ranks;                  /* D·T·P of every layout */
    int layers, heads, d_model, vocab; /* the GPT: T divides heads, d_model and vocab; P <= layers */
    int global_batch;           /* sequences a step, the same in every layout (strong scaling) */
    int zero_ok;                /* the collective provides reduce-scatter and all-gather */
    int top, sample;            /* --search-top, --search-sample */
    double mem_limit;           /* bytes a rank may hold (INFINITY: no limit known) */
    char mem_source[96];        /* where that limit comes from */
    int variant;                /* the pipeline schedule */
    int interleaved;            /* it is interleaved 1F1B: each layout once per v >= 2 with P·v dividing the
                                   layers, where m is a multiple of P; P 1 left out */
    sl_dtype dt;
    sl_coll impl;
    double (*memory)(const p3_layout *l); /* the busiest rank's bytes by the memory model */
    void (*use)(const p3_layout *l);      /* sets the program's options to l */
} p3_search;

/* The checks the options allow before anything runs (in validate; exit 2 naming the option): some
 * layout splits the batch (and under interleaved keeps its rules), and with limit_given some layout fits cfg->mem_limit. */
void p3_search_validate(const p3_search *cfg, int limit_given);
/* sl_technique.sweep under --search. Pass 0 enumerates every layout, keeps those whose memory
 * fits, predicts each (sl_train_predict_plan, or sl_train_predict_platform) into
 * <out>/parallel3d.search.tsv and sets the options to the first to run; each later pass the next;
 * the pass after the last prints the table sorted by measured step and returns 0. Predicting
 * only, pass 0 prints the predicted table and returns 0. */
int p3_search_sweep(sl_ctx *ctx, int pass, const p3_search *cfg);
/* The running layout's place in the search (its row's params), and its finished row. */
void p3_search_row(sl_result *res);
void p3_search_done(const sl_result *res);

#endif
