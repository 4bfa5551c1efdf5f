/* model.c — parallel3d's models of what a rank holds and sends (state.h), and its row: the
 * parameters of a stage, the bytes each group sends per step on the suite's ring, the memory by
 * category (the combined model, also the search's memory of a layout), and the row's figures:
 * each group's bytes measured beside their model, the layout, the loss. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

static const char *const recompute_names[] = {"none", "selective", "full"};

/* What a rank sends in an all-reduce of n elements of es bytes over k ranks on a ring, and in a
 * reduce-scatter or an all-gather of them (n: the whole vector, k blocks). */
static double ring_allreduce(int k, double n, double es) { return k > 1 ? 2.0 * (k - 1) / k * n * es : 0; }
static double ring_scatter(int k, double n, double es) { return k > 1 ? (double)(k - 1) / k * n * es : 0; }

/* --zero 1 and 2's block of the stage's model parameters np over D replicas (np itself with
 * --zero 0), and the padded vector D·S. */
static double shard_model(const p3 *q, double np) { return q->zero ? ceil(np / q->D) : np; }
static double padded_model(const p3 *q, double np) { return q->zero ? q->D * shard_model(q, np) : np; }

/* The parameters of a stage as Megatron-LM splits them (megatron_mlp's mg_params_model, for
 * the stage's layers): per block of its chunks (12C² + 7C)/T + 6C; stage 0 the embedding V·C/T
 * plus this program's zero row C and the position table max_T·C; the last stage the head
 * V·C/T + 2C. */
size_t p3_stage_params_model(const p3 *q)
{
    const mg *s = &q->s;
    const size_t C = (size_t)s->C, T = (size_t)q->T;
    size_t n = (size_t)q->nb * ((12 * C * C + 7 * C) / T + 6 * C);
    if (q->p == 0) n += (size_t)s->V * C / T + C + (size_t)s->maxT * C;
    if (last_stage(q)) n += (size_t)s->V * C / T + 2 * C;
    return n;
}

/* Bytes this rank sends per step in each group, on the suite's ring: tp, per micro-batch of N
 * tokens, the embedding's all-reduce of N·C (stage 0), four of N·C per block, the head's three
 * of N f32 and one of N·C (last stage); pp, the micro-batch's N·C boundary activation forward
 * (all but the last stage) and its gradient backward (all but the first); dp, the all-reduce of
 * the stage's slices, or with --zero 1 or 2 their reduce-scatter and the weights' all-gather (the
 * same bytes) on the steps that were applied (a 16-bit step every rank skipped gathers nothing).
 * Elements of the run's dtype. */
void p3_group_bytes_model(const sl_train *t, double b[NGROUPS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    const double es = (double)sl_dtype_size(t->dtype), C = s->C;
    b[G_TP] = b[G_PP] = 0;
    for (int k = 0; k < q->m; k++) {
        int first, count;
        micro(q, k, &first, &count);
        const double N = (double)count * s->T;
        if (q->p == 0) b[G_TP] += ring_allreduce(q->T, N * C, es);
        /* four all-reduces a block; --recompute full: its forward's two again (selective repeats
         * the attention alone, which communicates nothing) */
        b[G_TP] += q->nb * (q->recompute == RC_FULL ? 6 : 4) * ring_allreduce(q->T, N * C, es);
        if (last_stage(q)) b[G_TP] += 3 * ring_allreduce(q->T, N, 4) + ring_allreduce(q->T, N * C, es);
        /* interleaved: each chunk of the stage's, but the model's first input and last output */
        for (int c = 0; c < q->v; c++) b[G_PP] += (!first_chunk(q, c) + !last_chunk(q, c)) * N * C * es;
    }
    if (q->zero) {
        const sl_loss_scaler *sc = &s->ms.sc;
        const double applied = is_f32(q) || sc->steps == 0 ? 1 : (double)(sc->steps - sc->skipped) / sc->steps;
        const double npad = padded_model(q, (double)p3_stage_params_model(q));
        b[G_DP] = ring_scatter(q->D, npad, es) * (1 + applied);
    } else if (q->nbuckets) {
        b[G_DP] = 0;
        for (int k = 0; k < q->nbuckets; k++) b[G_DP] += ring_allreduce(q->D, (double)q->buckets[k].count, es);
    } else {
        b[G_DP] = ring_allreduce(q->D, (double)s->np, es);
    }
}

double p3_bytes_model(const sl_train *t)
{
    double b[NGROUPS];
    p3_group_bytes_model(t, b);
    return b[G_TP] + b[G_PP] + b[G_DP];
}

/* Memory of this rank, the combined model: the stage's 1/T slices (f32, with their 16-bit copy
 * in f16/bf16) and as many gradients, the optimizer state of those (--zero 1: the vectors padded
 * to D blocks of S, the optimizer state and a 16-bit run's f32 master of one block: 1/D; --zero 2
 * on D > 1 replicas: the 16-bit gradient too, S, beside the whole f32 accumulation of the
 * micro-batches that the reduce-scatter waits for); activations: the micro-batches the
 * schedule keeps in flight on stage p (1F1B: min(m, P - p); GPipe: m), each with, per block,
 * megatron_mlp's 3NC + 12N·C/T + b·(a/T)·s² values and 4N f32 moments plus the residual
 * stream into each block (NC), and on the last stage the stream into the head; the head's final
 * norm once (its forward and backward run together). --recompute full: each
 * micro-batch in flight keeps the stage's input (NC) alone, and one set of the rest serves the
 * micro-batch being recomputed; selective: the blocks keep all but the b·(a/T)·s² probabilities,
 * of which the stage holds one block's. */
void p3_memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    const double np = (double)p3_stage_params_model(q), es = (double)sl_dtype_size(s->dt);
    const double S = shard_model(q, np), n = padded_model(q, np);
    const double copy = s->dt == SL_F32 ? 0 : es * n;
    bytes[SL_MEM_PARAMS] = 4 * (q->zero && s->dt != SL_F32 ? S : n) + copy;
    bytes[SL_MEM_GRADS] = 4 * n + (s->dt == SL_F32 ? 0 : es * (q->zero == 2 && q->D > 1 ? S : n));
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * 4 * S;
    /* interleaved: micro-batch chunks of nb blocks in flight, min(m·v, 2(P − p − 1) + (v − 1)P + 1)
     * (Megatron's warm-up forwards and one); on the last stage a chunk's output kept (the stream
     * into the head, or with --recompute full and v > 1 a send from the slot's own buffer) */
    const int P = q->P, p = q->p, m = q->m, v = q->v, nb = q->nb / v; /* a chunk's blocks */
    const double flight = q->sched == S_GPIPE         ? m
                          : q->sched == S_INTERLEAVED ? fmin(m * v, 2 * (P - p - 1) + (v - 1) * P + 1)
                                                      : (m < P - p ? m : P - p);
    const double N = (double)q->Bmax * s->T, NC = N * s->C, NCl = NC / q->T;
    const double att = (double)q->Bmax * (s->NH / q->T) * s->T * s->T * es; /* a block's probabilities */
    const double block = (3 * NC + 12 * NCl) * es + att + 4 * N * 4;
    const double head = last_stage(q) ? NC * es + 2 * N * 4 : 0, out = last_stage(q) ? NC * es : 0;
    if (q->recompute == RC_FULL) /* each micro-batch's input, and one set of the rest for the one recomputed */
        bytes[SL_MEM_ACTIV] = flight * (NC * es + (v > 1 ? out : 0)) + nb * block + (nb - 1) * NC * es +
                              (v > 1 ? 0 : out) + head;
    else if (q->recompute == RC_SELECTIVE) /* no block keeps its probabilities: one buffer serves them all */
        bytes[SL_MEM_ACTIV] = flight * (nb * (block - att + NC * es) + out) + head + (nb > 0 ? att : 0);
    else
        bytes[SL_MEM_ACTIV] = flight * (nb * (block + NC * es) + out) + head;
}

/* The busiest rank's figures, per step. Collective. */
static void most_per_step(sl_train *t, const double *mine, double *most, int n)
{
    double per[NGROUPS + 1];
    for (int i = 0; i < n; i++) per[i] = mine[i] / t->nsteps;
    SL_CHECK_MPI(MPI_Allreduce(per, most, n, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
}

void p3_measured(sl_train *t, double sent[NGROUPS])
{
    const p3 *q = t->state;
    const mg *s = &q->s;
    sent[G_TP] = s->sent[MG_EMB] + s->sent[MG_BLOCKS] + s->sent[MG_HEAD];
    sent[G_PP] = q->sent_pp;
    sent[G_DP] = q->sent_dp;
}

static int opaque(const p3 *q)
{
    const sl_coll impl = sl_comm_impl(q->s.tp);
    return impl == SL_COLL_MPI || impl == SL_COLL_NCCL;
}

/* sl_technique.row, the schedule by its name. */
void p3_row(sl_train *t, sl_result *res, const char *schedule)
{
    p3 *q = t->state;
    double sent[NGROUPS], model[NGROUPS], most[NGROUPS], most_model[NGROUPS];
    p3_measured(t, sent);
    p3_group_bytes_model(t, model);
    for (int i = 0; i < NGROUPS; i++) model[i] *= t->nsteps; /* per step below */
    most_per_step(t, sent, most, NGROUPS);
    most_per_step(t, model, most_model, NGROUPS);
    char ord[16];
    p3_order_name(ord, sizeof ord);
    sl_result_param_num(res, "dp", q->D);
    sl_result_param_num(res, "tp", q->T);
    sl_result_param_num(res, "pp", q->P);
    sl_result_param_str(res, "order", ord);
    sl_result_param_num(res, "micro_batches", q->m);
    sl_result_param_str(res, "schedule", schedule);
    sl_result_param_num(res, "virtual", q->v);
    sl_result_param_str(res, "recompute", recompute_names[q->recompute]);
    sl_result_param_num(res, "zero", q->zero);
    sl_result_param_num(res, "dp_buckets", q->nbuckets);
    if (q->zero) sl_result_param_num(res, "shard_elems", (double)q->S);
    const int op = opaque(q);
    static const char *const names[NGROUPS][2] = {
        {"tp_bytes", "tp_bytes_model"}, {"pp_bytes", "pp_bytes_model"}, {"dp_bytes", "dp_bytes_model"}};
    for (int i = 0; i < NGROUPS; i++) {
        /* the pipeline's sends are the suite's own on every implementation */
        sl_result_metric(res, names[i][0], op && i != G_PP ? NAN : most[i], "bytes");
        sl_result_metric(res, names[i][1], most_model[i], "bytes");
    }
    long long peak = q->inflight_peak, all_peak = 0;
    SL_CHECK_MPI(MPI_Allreduce(&peak, &all_peak, 1, MPI_LONG_LONG, MPI_MAX, t->ctx->comm));
    sl_result_metric(res, "inflight_peak", (double)all_peak, "micro-batches");
    const double serial = (double)t->m->nparams * sizeof(float);
    double mine = (double)q->s.np, most_np = 0;
    SL_CHECK_MPI(MPI_Allreduce(&mine, &most_np, 1, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
    sl_result_metric(res, "params_frac", most_np * sizeof(float) / serial, "fraction");
    if (q->s.dt != SL_F32) {
        sl_result_param_str(res, "precision", "mixed");
        sl_train_mixed_row(t, &q->s.ms, res);
    }
    double loss = 0;
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "final_loss", loss, "loss");
}

/* A layout's memory for the search: the busiest rank's bytes by the combined model
 * (p3_memory_model: parameters, gradients, optimizer state, activations; the stage's L->v chunks
 * under sched), plus the last stage's head logits and their gradient (f32, and a 16-bit copy of
 * the gradient): the largest buffers the four categories leave out. */
double p3_layout_memory(const p3_layout *L, const sl_gpt_dims *g, sl_dtype dt, int global_batch, int sched,
                        sl_optim_kind optim)
{
    sl_train t;
    memset(&t, 0, sizeof t);
    t.optim.kind = optim;
    t.dtype = dt;
    p3 *q = malloc(sizeof *q);
    if (!q) SL_FATAL("out of memory");
    const double es = (double)sl_dtype_size(dt);
    double most = 0;
    for (int p = 0; p < L->P; p++) { /* the replicas hold equal batches (D divides it): stage p's ranks alike */
        const int dims[NDIMS] = {L->T, L->D, L->P}, c[NDIMS] = {[DIM_TP] = 0, [DIM_DP] = 0, [DIM_PP] = p};
        memset(q, 0, sizeof *q);
        p3_place(q, g, dt, global_batch, L, sched, p3_rank_of(dims, c));
        t.state = q;
        double mem[SL_MEM_NCATS] = {0};
        p3_memory_model(&t, mem);
        double sum = mem[SL_MEM_PARAMS] + mem[SL_MEM_GRADS] + mem[SL_MEM_OPTIM] + mem[SL_MEM_ACTIV];
        if (last_stage(q)) sum += (double)q->s.N * q->s.Vl * (8 + (dt == SL_F32 ? 0 : es));
        if (sum > most) most = sum;
    }
    free(q);
    return most;
}
