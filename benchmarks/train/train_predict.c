/* train_predict.c — `--predict FILE [--predict-ranks LIST]`: the performance model on a described
 * machine (pm_platform.h) instead of this one, at rank counts that are not launched.
 *
 * The program runs on one rank and trains nothing. For each dtype x collective x variant x rank
 * count N it sets the technique up as rank r of N would be (train_open_as: the technique's own
 * setup, its partition of the model and the batch for N ranks, on this process alone) and asks
 * the technique's own .schedule for the step, the same code that predicts a measured row; the
 * schedule is charged at the platform's primitives (GEMM rate per dtype and element-wise
 * bandwidth, or measured here with `compute = measured`; each operation's alpha-beta for N ranks
 * from the link's by the collective's cost model, pm_platform.c; host<->device copies at its
 * h2d_alpha and h2d_bw). Ranks 0 and N-1 are predicted,
 * the partition's two ends (the last rank holds the padding of a sharded layer, the smallest
 * slice of an uneven batch), and the row is the slower one's, as a measured step is the slowest
 * rank's. One row per configuration, in the results format, with time null (nothing was timed)
 * and check none (nothing was trained). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_shape.h"
#include "pm_platform.h"
#include "train_internal.h"

const char *train_predict_file;
sl_int_list train_predict_ranks;
static sl_pm_platform plat;
static int ranks_given_n = -1; /* --predict-ranks' values as given, before the defaults fill it */

static const long long default_ranks[] = {8, 16, 32, 64, 128, 256, 512, 1024};

void train_predict_validate(sl_ctx *ctx, const sl_technique *tech)
{
    if (!train_predict_file) {
        if (sl_option_given(&ctx->opt, "predict-ranks")) sl_usage_error("--predict-ranks: only with --predict FILE");
        return;
    }
    if (!tech->schedule)
        sl_usage_error("--predict: %s states no schedule to the performance model (sl_technique.schedule)",
                       tech->program.name);
    const int itself = tech->predicts_itself && tech->predicts_itself();
    if (tech->schedule_launched_only && !itself)
        sl_usage_error("--predict: %s's layout is chosen for the launched ranks; it is not predicted at other rank "
                       "counts (its rows carry the prediction for the ranks they ran on)",
                       tech->program.name);
    if (ctx->nranks != 1)
        sl_usage_error("--predict: runs on one rank (it builds the schedules of --predict-ranks without launching "
                       "them); launched on %d", ctx->nranks);
    char err[512];
    if (sl_pm_platform_load(train_predict_file, &plat, err, sizeof err)) sl_usage_error("--predict: %s", err);
    ranks_given_n = train_predict_ranks.n;
    if (!train_predict_ranks.n) {
        train_predict_ranks.n = (int)(sizeof default_ranks / sizeof *default_ranks);
        memcpy(train_predict_ranks.v, default_ranks, sizeof default_ranks);
    }
    for (int d = 0; d < SL_NDTYPES; d++)
        if ((ctx->opt.dtypes & (1u << d)) && !plat.measured && !(plat.gemm[d] > 0))
            sl_usage_error("--predict: %s gives no gemm_%s (FLOP/s) for -d %s", plat.path, sl_dtype_name((sl_dtype)d),
                           sl_dtype_name((sl_dtype)d));
    int collective = 0; /* a variant that uses the -C collective is asked for */
    for (int v = 0; v < tech->nvariants; v++)
        if ((*tech->variant_mask & (1u << v)) && !((tech->p2p_variants >> v) & 1)) collective = 1;
    for (int c = 0; c < SL_NCOLLS && collective; c++)
        if (ctx->opt.colls & (1u << c))
            if (sl_pm_platform_algo(&plat, sl_coll_name((sl_coll)c), err, sizeof err) < 0)
                sl_usage_error("--predict: %s", err);
    for (int i = 0; i < train_predict_ranks.n; i++)
        for (int v = 0; v < tech->nvariants; v++) {
            const int D = train_data_ranks(tech, v, (int)train_predict_ranks.v[i]);
            if ((*tech->variant_mask & (1u << v)) && sl_train_opt.scaling == 1 && D > 0 && sl_train_opt.batch < D)
                sl_usage_error("--predict-ranks %lld: --batch %lld cannot be split over %d data ranks (strong "
                               "scaling gives each at least one sample)", train_predict_ranks.v[i],
                               sl_train_opt.batch, D);
        }
}

/* compute = measured: the primitives timed on this thread's CPU clock, as SMPI charges a
 * simulated rank's compute (its CPU time, on one GEMM thread: scripts/simulate sets
 * OMP_NUM_THREADS=1), so that other tenants of a shared machine, which stretch the wall time of
 * a call that is preempted, do not stretch them. The best of 3, each over enough calls to run
 * about 20 ms; cached by shape for the run. */
enum { CPU_REPS = 3 };

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_gemm_seconds(sl_backend be, const sl_pm_gemm_shape *g)
{
    static sl_pm_prims cache; /* its GEMM table only */
    const double known = sl_pm_gemm_seconds(&cache, g);
    if (!isnan(known)) return known;
    const size_t es = sl_dtype_size(g->dt);
    void *a = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->m * g->k * es), *b = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->k * g->n * es);
    float *c = sl_k_malloc(be, SL_MEM_OTHER, (size_t)g->m * g->n * sizeof(float));
    sl_k_fill(be, g->dt, (size_t)g->m * g->k, a, 0.5f);
    sl_k_fill(be, g->dt, (size_t)g->k * g->n, b, 0.25f);
    sl_k_memset0(be, c, (size_t)g->m * g->n * sizeof(float));
    const double flops = 2.0 * g->m * g->n * (double)g->k;
    const int calls = flops >= 2e8 ? 1 : (int)ceil(2e8 / flops) > 1000 ? 1000 : (int)ceil(2e8 / flops);
    double best = INFINITY;
    for (int r = 0; r <= CPU_REPS; r++) { /* the first untimed */
        const double t0 = cpu_now();
        for (int i = 0; i < calls; i++)
            sl_k_gemm(be, g->ta, g->tb, g->m, g->n, g->k, 1.0f, a, g->ta ? g->m : g->k, b, g->tb ? g->k : g->n,
                      (float)g->beta, c, g->n, g->dt, SL_F32);
        sl_k_sync(be);
        const double dt = (cpu_now() - t0) / calls;
        if (r > 0 && dt < best) best = dt;
    }
    sl_k_free(be, a), sl_k_free(be, b), sl_k_free(be, c);
    if (cache.ngemm < SL_PM_MAX_GEMMS) cache.gemm[cache.ngemm] = *g, cache.gemm_s[cache.ngemm++] = best;
    return best;
}

/* Bytes (read + written) per second of sl_k_axpby over n f32 elements. */
static double cpu_bw(sl_backend be, size_t n)
{
    float *x = sl_k_malloc(be, SL_MEM_OTHER, n * sizeof(float)), *y = sl_k_malloc(be, SL_MEM_OTHER, n * sizeof(float));
    sl_k_fill(be, SL_F32, n, x, 1.0);
    sl_k_fill(be, SL_F32, n, y, 0.0);
    const int calls = n >= (1u << 22) ? 2 : (int)((1u << 23) / n);
    double best = INFINITY;
    for (int r = 0; r <= CPU_REPS; r++) {
        const double t0 = cpu_now();
        for (int i = 0; i < calls; i++) sl_k_axpby(be, SL_F32, n, 0.5, x, 0.5, y);
        sl_k_sync(be);
        const double dt = (cpu_now() - t0) / calls;
        if (r > 0 && dt < best) best = dt;
    }
    sl_k_free(be, x), sl_k_free(be, y);
    return 12.0 * (double)n / best;
}

static void cpu_compute(const sl_train *t, const sl_pm_sched *s, sl_pm_prims *p)
{
    p->ngemm = 0;
    for (int i = 0; i < s->nshapes; i++)
        p->gemm[p->ngemm] = s->shapes[i], p->gemm_s[p->ngemm++] = cpu_gemm_seconds(t->be, &s->shapes[i]);
    /* over 64 MiB a vector, beyond the last-level cache: a simulated rank's buffers are evicted
     * by the other ranks' between two of its kernels, so its element-wise work streams from memory */
    static size_t bw_n;
    static double bw;
    const size_t n = t->nparams > (1u << 24) ? t->nparams : (1u << 24);
    if (n != bw_n) bw_n = n, bw = cpu_bw(t->be, n);
    p->bw = bw;
}

/* alpha and 1/beta of each operation the schedule uses, as the measured rows' pred_fit says them. */
static void fit_text(const sl_pm_sched *s, const sl_pm_prims *p, char *out, size_t len)
{
    int used[SL_PM_NOPS] = {0};
    for (int i = 0; i < s->nev; i++)
        if (s->ev[i].kind == SL_PM_EV_START) used[s->ev[i].op] = 1;
    out[0] = 0;
    size_t at = 0;
    for (int o = 0; o < SL_PM_NOPS; o++) {
        if (!used[o] || !(p->beta[o] > 0)) continue;
        const int w = snprintf(out + at, len - at, "%s%s %.2f us + %.3f GB/s", at ? "; " : "",
                               sl_pm_op_name((sl_pm_op)o), p->alpha[o] * 1e6, 1e-9 / p->beta[o]);
        if (w < 0 || (size_t)w >= len - at) break;
        at += (size_t)w;
    }
}

/* What a platform prediction gives a row. */
typedef struct platform_pred {
    sl_pm_pred pred;
    double bw;
    int rank_batch;
    char fit[512];
} platform_pred;

/* The predicted step of variant v at N ranks on the platform: the slower of ranks 0 and N-1.
 * planning: how the technique is set up (0 as a run; 2 placed only, sl_train.planning). */
static platform_pred platform_step(sl_ctx *ctx, const sl_technique *tech, int v, sl_dtype dt, sl_coll impl, int p2p,
                                   int algo, int N, const sl_mlp *m, sl_task *task, const sl_optim *o,
                                   sl_comm *self, int planning)
{
    const int B = train_global_batch(tech, v, N);
    sl_pm_sched *s = malloc(sizeof *s);
    if (!s) SL_FATAL("out of memory for a schedule");
    platform_pred out;
    memset(&out, 0, sizeof out);
    int have = 0;
    const int who[2] = {0, N - 1};
    for (int i = 0; i < (N > 1 ? 2 : 1); i++) {
        sl_train t;
        train_planning = planning;
        train_open_as(&t, ctx, tech, v, dt, self, who[i], N, m, task, o, B, 1, 0);
        train_planning = 0;
        sl_pm_init(s, dt);
        tech->schedule(&t, s);
        sl_pm_prims p;
        memset(&p, 0, sizeof p);
        sl_pm_platform_prims(&plat, (sl_pm_algo)algo, N, &p);
        if (plat.measured)
            cpu_compute(&t, s, &p);
        else if (sl_pm_platform_gemms(&plat, s, &p))
            SL_FATAL("--predict: no GEMM rate for %s (checked before the run)", sl_dtype_name(dt));
        /* the additions run a segment at a time: measured over one segment's floats */
        static double seg_bw; /* measured once */
        if (plat.measured && !seg_bw) seg_bw = cpu_bw(t.be, plat.segment > 0 ? (size_t)(plat.segment / 4) : 65536);
        const double reduce_bw = plat.measured ? seg_bw : plat.reduce_bw > 0 ? plat.reduce_bw : plat.bw;
        if (!p2p) sl_pm_platform_gamma((sl_pm_algo)algo, N, reduce_bw, &p);
        /* a group's operations (sl_pm_group) at its own rank count, on the same links (its ranks
         * taken as consecutive: a tensor-parallel group's are, a data-parallel one's are not) */
        for (int g = 1; g < SL_PM_MAX_GROUPS; g++) {
            if (s->group_size[g] < 1) continue;
            sl_pm_prims pg;
            memset(&pg, 0, sizeof pg);
            sl_pm_platform_prims(&plat, (sl_pm_algo)algo, s->group_size[g], &pg);
            if (!p2p) sl_pm_platform_gamma((sl_pm_algo)algo, s->group_size[g], reduce_bw, &pg);
            memcpy(p.group_alpha[g], pg.alpha, sizeof pg.alpha);
            memcpy(p.group_beta[g], pg.beta, sizeof pg.beta);
        }
        for (int e = 0; e < s->nev; e++)
            if (s->ev[e].kind == SL_PM_EV_START && s->ev[e].op == SL_PM_H2D && s->ev[e].amount > 0 && !(plat.h2d_bw > 0))
                sl_usage_error("--predict: %s gives no h2d_bw (a host<->device copy's bytes/s each way) for %s %s's "
                               "copies; without it they would be charged nothing",
                               plat.path, tech->program.name, tech->variants[v]);
        for (int e = 0; e < s->nev; e++)
            if (s->ev[e].kind == SL_PM_EV_START &&
                isnan(s->ev[e].group ? p.group_alpha[s->ev[e].group][s->ev[e].op] : p.alpha[s->ev[e].op]))
                sl_usage_error("--predict: -C %s: the %s algorithm has no %s (no cost model for it)",
                               sl_coll_name(impl), sl_pm_algo_name((sl_pm_algo)algo), sl_pm_op_name(s->ev[e].op));
        const sl_pm_pred r = sl_pm_predict(s, &p);
        if (!have || r.step > out.pred.step || isnan(r.step)) {
            out.pred = r, out.bw = p.bw, out.rank_batch = t.hi - t.lo, have = 1;
            fit_text(s, &p, out.fit, sizeof out.fit);
        }
        train_close(&t);
    }
    free(s);
    return out;
}

int sl_train_predict_platform(sl_ctx *ctx, int variant, sl_dtype dt, sl_coll impl, int nranks, sl_pm_pred *out)
{
    const sl_technique *tech;
    const sl_mlp *m;
    sl_task *task;
    const sl_optim *o;
    train_plan_bound(&tech, &m, &task, &o);
    if (!train_predict_file || !tech->schedule) return -1;
    char err[256];
    const int p2p = (tech->p2p_variants >> variant) & 1;
    const int algo = p2p ? SL_PMA_RING : sl_pm_platform_algo(&plat, sl_coll_name(impl), err, sizeof err);
    if (algo < 0) sl_usage_error("--predict: %s", err);
    const sl_mem_space space = m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    sl_comm *self;
    sl_train_coll_ok(sl_comm_create(&self, MPI_COMM_SELF, SL_COLL_MPI, space), "sl_comm_create (prediction)");
    *out = platform_step(ctx, tech, variant, dt, p2p ? SL_COLL_MPI : impl, p2p, algo, nranks, m, task, o, self, 2).pred;
    sl_comm_destroy(self);
    return 0;
}

const char *sl_train_predict_platform_name(void) { return train_predict_file ? plat.name : NULL; }
int sl_train_predict_ranks(void)
{
    const int n = ranks_given_n >= 0 ? ranks_given_n : train_predict_ranks.n; /* parsed, defaults not filled yet */
    return n == 0 ? 0 : n == 1 ? (int)train_predict_ranks.v[0] : -1;
}

/* The row of variant v at N ranks on the platform. */
static void predict_one(sl_ctx *ctx, const sl_technique *tech, int v, sl_dtype dt, sl_coll impl, int p2p,
                        int algo, int N, const sl_mlp *m, sl_task *task, const sl_optim *o, sl_comm *self)
{
    const int B = train_global_batch(tech, v, N);
    const platform_pred pp = platform_step(ctx, tech, v, dt, impl, p2p, algo, N, m, task, o, self, 0);
    const sl_pm_pred best = pp.pred;
    const double bw = pp.bw;
    const int rank_batch = pp.rank_batch;
    const char *fit = pp.fit;

    sl_result res;
    sl_result_init(ctx, &res, tech->variants[v]);
    res.iters = res.warmup = 0; /* nothing was timed */
    res.backend = sl_backend_name(m->be);
    res.collective = p2p ? "p2p" : sl_coll_name(impl);
    res.dtype = sl_dtype_name(dt);
    sl_result_param_num(&res, "global_batch", B);
    sl_result_param_num(&res, "rank_batch", rank_batch);
    sl_result_param_str(&res, "scaling", sl_train_opt.scaling ? "strong" : "weak");
    if (sl_mlp_is_gpt(m)) {
        sl_result_param_str(&res, "model", "gpt");
        sl_result_param_num(&res, "layers", m->gpt.layers);
        sl_result_param_num(&res, "d_model", m->gpt.C);
        sl_result_param_num(&res, "heads", m->gpt.NH);
        sl_result_param_num(&res, "seq", m->gpt.T);
        sl_result_param_num(&res, "vocab", m->gpt.V);
    } else if (!tech->model_params) {
        sl_result_param_num(&res, "layers", (double)sl_train_opt.layers);
        sl_result_param_num(&res, "width", (double)sl_train_opt.width);
    }
    sl_result_param_num(&res, "params", (double)(tech->model_params ? tech->model_params() : m->nparams));
    sl_result_param_str(&res, "predict", "platform");
    sl_result_param_str(&res, "predict_platform", plat.name);
    sl_result_param_num(&res, "pred_ranks", N);
    if (!p2p) sl_result_param_str(&res, "pred_algo", sl_pm_algo_name((sl_pm_algo)algo));
    sl_result_param_str(&res, "pred_dominant", sl_pm_dominant(&best));
    if (fit[0]) sl_result_param_str(&res, "pred_fit", fit);
    sl_result_metric(&res, "pred_step", best.step, "s");
    sl_result_metric(&res, "pred_compute", best.compute, "s");
    sl_result_metric(&res, "pred_gemm", best.gemm, "s");
    sl_result_metric(&res, "pred_comm", best.comm, "s");
    sl_result_metric(&res, "pred_exposed", best.exposed, "s");
    sl_result_metric(&res, "pred_bw", bw / 1e9, "GB/s");
    sl_result_metric(&res, "pred_samples_per_s", B / best.step, "samples/s");
    sl_result_check(&res, SL_CHECK_NONE, NAN, "predicted on %s: nothing was run", plat.name);
    /* the row describes N ranks, not the one this program runs on */
    const int launched = ctx->nranks;
    ctx->nranks = N;
    sl_result_emit(ctx, &res);
    ctx->nranks = launched;
}

static const sl_column columns[] = {
    SL_COL("variant", "variant", 9), SL_COL("coll", "collective", 7), SL_COL("dtype", "dtype", 5),
    {"ranks", "", "pred_ranks", 6, 0, 0}, SL_COL("batch", "global_batch", 7),
    {"pred", "ms", "pred_step", 10, 3, 1e3}, {"compute", "ms", "pred_compute", 10, 3, 1e3},
    {"gemm", "ms", "pred_gemm", 10, 3, 1e3}, {"comm", "ms", "pred_comm", 10, 3, 1e3},
    {"exposed", "ms", "pred_exposed", 10, 3, 1e3}, {"samples/s", "", "pred_samples_per_s", 11, 1, 0},
    SL_COL("dominant", "pred_dominant", 12),
};

int train_predict_main(sl_ctx *ctx, const sl_technique *tech, const sl_mlp *m, sl_task *task, const sl_optim *o)
{
    sl_note(ctx, "predicted on %s (%s): nothing is run; each row is the step the technique's schedule gives "
                 "rank 0 or rank N-1 of N, whichever is slower, at the platform's primitives",
            plat.name, plat.source);
    if (plat.measured)
        sl_note(ctx, "compute = measured: each GEMM shape and the element-wise bandwidth timed on this thread's CPU "
                     "clock (%d GEMM thread%s; the simulator charges one thread's CPU time)",
                sl_k_cpu_threads(), sl_k_cpu_threads() == 1 ? "" : "s");
    sl_table_begin(ctx, columns, (int)(sizeof columns / sizeof *columns));
    const sl_mem_space space = m->be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    sl_comm *self;
    sl_train_coll_ok(sl_comm_create(&self, MPI_COMM_SELF, SL_COLL_MPI, space), "sl_comm_create (prediction)");
    char err[512];
    for (int d = 0; d < SL_NDTYPES; d++) {
        if (!(ctx->opt.dtypes & (1u << d))) continue;
        for (int c = 0; c <= SL_NCOLLS; c++) { /* SL_NCOLLS: the point-to-point variants, once */
            const int p2p = c == SL_NCOLLS;
            if (!p2p && !(ctx->opt.colls & (1u << c))) continue;
            const int algo = p2p ? SL_PMA_RING : sl_pm_platform_algo(&plat, sl_coll_name((sl_coll)c), err, sizeof err);
            for (int v = 0; v < tech->nvariants; v++) {
                if (!train_runs(tech, *tech->variant_mask, v, (sl_dtype)d) || p2p != (int)((tech->p2p_variants >> v) & 1))
                    continue;
                for (int i = 0; i < train_predict_ranks.n; i++)
                    predict_one(ctx, tech, v, (sl_dtype)d, p2p ? SL_COLL_MPI : (sl_coll)c, p2p, algo,
                                (int)train_predict_ranks.v[i], m, task, o, self);
            }
        }
    }
    sl_comm_destroy(self);
    return 0;
}
