/* gpt_row.c — megatron_mlp --model gpt: the analytic models beside the measurements (bytes per
 * block, embedding, head and step; memory per rank), the row, and the technique's own check
 * that the measured bytes equal the models and that a rank holds what the memory model says. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tp_gpt.h"
#include "tp_groups.h"
#include "tp.h" /* the variants */

/* What one rank sends in an all-reduce of n elements of es bytes over k ranks on a ring:
 * 2(k-1)/k·n·es, exactly when k divides n (the ring's chunks are then equal). */
static double ring_allreduce(int k, double n, double es) { return k > 1 ? 2.0 * (k - 1) / k * n * es : 0; }
static int ring_exact(int k, size_t n) { return k == 1 || n % (size_t)k == 0; }

/* Per step, by region (gpt.c): the embedding's one all-reduce of the N·C lookup; per block four
 * of N·C (g forward and f backward, for attention and the MLP) in the run's dtype; the head's
 * three of N f32 values (max, target logit, sum of exponentials) and one of N·C (its input
 * gradient); between replicas one of the rank's gradients (np elements of the dtype). */
double mg_bytes_region_model(const sl_train *t, int region)
{
    const mg *s = t->state;
    const double NC = (double)s->N * s->C, es = (double)sl_dtype_size(t->dtype);
    switch (region) {
    case MG_EMB: return ring_allreduce(s->t, NC, es);
    case MG_BLOCKS: return s->L * 4 * ring_allreduce(s->t, NC, es);
    case MG_HEAD: return 3 * ring_allreduce(s->t, (double)s->N, 4) + ring_allreduce(s->t, NC, es);
    default: return ring_allreduce(s->d, (double)s->np, es);
    }
}

double mg_bytes_model(const sl_train *t)
{
    double b = 0;
    for (int r = 0; r < MG_NREGIONS; r++) b += mg_bytes_region_model(t, r);
    return b;
}

/* The parameters a rank holds, as Megatron-LM splits them: 1/t of every weight matrix and of
 * the column-parallel biases, the layer norms and the row-parallel biases whole (6C a block,
 * 2C the final norm), the position table whole, plus this program's row of zeros (C): per
 * block (12C² + 7C)/t + 6C; the embedding V·C/t + C + max_T·C; the head V·C/t + 2C. */
size_t mg_params_model(const mg *s)
{
    const size_t C = (size_t)s->C, t = (size_t)s->t;
    return (size_t)s->L * ((12 * C * C + 7 * C) / t + 6 * C) + (size_t)s->V * C / t + C + (size_t)s->maxT * C +
           (size_t)s->V * C / t + 2 * C;
}

/* What setup allocates per category: the local vector in f32 (f16/bf16: its 16-bit copy
 * beside) for parameters and gradients, the optimizer state; kept activations per block
 * 3NC + 12N·C/t + b·(NH/t)·T² values of dt and 4N f32 moments, the residual stream into layers
 * 1..L+1 and the final norm's output (NC each) and its moments. */
void mg_memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const mg *s = t->state;
    const double np = (double)s->np, es = (double)sl_dtype_size(s->dt), copy = s->dt == SL_F32 ? 0 : es * np;
    const double N = s->N, NC = N * s->C, NCl = N * s->Cl;
    bytes[SL_MEM_PARAMS] = 4 * np + copy;
    bytes[SL_MEM_GRADS] = 4 * np + copy;
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * 4 * np;
    const double block = (3 * NC + 12 * NCl + (double)s->B * s->NHl * s->T * s->T) * es + 4 * N * 4;
    bytes[SL_MEM_ACTIV] = s->L * block + (s->L + 2) * NC * es + 2 * N * 4;
}

/* The busiest rank's bytes per step of each region. Collective. */
static void sent_per_step(sl_train *t, double most[MG_NREGIONS])
{
    const mg *s = t->state;
    double mine[MG_NREGIONS];
    for (int r = 0; r < MG_NREGIONS; r++) mine[r] = s->sent[r] / t->nsteps;
    SL_CHECK_MPI(MPI_Allreduce(mine, most, MG_NREGIONS, MPI_DOUBLE, MPI_MAX, t->ctx->comm));
}

static int opaque(const mg *s)
{
    const sl_coll impl = sl_comm_impl(s->tp);
    return impl == SL_COLL_MPI || impl == SL_COLL_NCCL;
}

void mg_row(sl_train *t, sl_result *res)
{
    mg *s = t->state;
    double most[MG_NREGIONS];
    sent_per_step(t, most);
    const int op = opaque(s);
    sl_result_param_num(res, "tp", s->t);
    sl_result_param_num(res, "dp", s->d);
    sl_result_param_num(res, "tokens_per_group", s->N);
    double colls = (double)s->tp_colls / t->nsteps, total = 0;
    for (int r = 0; r < MG_NREGIONS; r++) total += most[r];
    sl_result_metric(res, "tp_collectives", colls, "per step");
    sl_result_metric(res, "tp_collectives_overlapped", (double)s->tp_overlapped / t->nsteps, "per step");
    if (t->variant == V_OVERLAP) sl_result_param_num(res, "nonblocking_overlaps", sl_coll_iallreduce_overlaps(s->tp));
    mm_set_metric(res, "bytes_sent", op ? NAN : total);
    sl_result_metric(res, "tp_bytes_block", op ? NAN : most[MG_BLOCKS] / s->L, "bytes");
    sl_result_metric(res, "tp_bytes_block_model", mg_bytes_region_model(t, MG_BLOCKS) / s->L, "bytes");
    sl_result_metric(res, "emb_bytes", op ? NAN : most[MG_EMB], "bytes");
    sl_result_metric(res, "emb_bytes_model", mg_bytes_region_model(t, MG_EMB), "bytes");
    sl_result_metric(res, "head_bytes", op ? NAN : most[MG_HEAD], "bytes");
    sl_result_metric(res, "head_bytes_model", mg_bytes_region_model(t, MG_HEAD), "bytes");
    sl_result_metric(res, "dp_bytes", op ? NAN : most[MG_DP], "bytes");
    sl_result_metric(res, "tflops_rank", mm_metric_of(res, "tflops") / t->size, "TFLOP/s");
    const double serial = (double)t->m->nparams * sizeof(float);
    sl_result_metric(res, "serial_params", serial, "bytes");
    sl_result_metric(res, "params_frac", mm_metric_of(res, "mem_params") / serial, "fraction");
    sl_result_metric(res, "params_frac_model", (double)mg_params_model(s) / (double)t->m->nparams, "fraction");
    sl_result_metric(res, "inv_tp", 1.0 / s->t, "fraction");
    if (s->dt != SL_F32) {
        sl_result_param_str(res, "precision", "mixed");
        sl_result_param_str(res, "tp_allreduce", "16-bit activations and gradients, summed pairwise in f32 and "
                                                 "rounded at each hop; the cross-entropy's three in f32");
        sl_train_mixed_row(t, &s->ms, res);
    }
    double loss = 0;
    SL_CHECK_MPI(MPI_Allreduce(&t->loss, &loss, 1, MPI_DOUBLE, MPI_SUM, t->ctx->comm));
    sl_result_metric(res, "final_loss", loss, "loss");
    sl_note(t->ctx, "gpt, %s, t = %d, d = %d, %s: %g collectives per step in each group (1 embedding, 4 per block x "
                    "%d, 4 head), %g of them under the weight-gradient GEMMs", t->tech->variants[t->variant], s->t, s->d,
            sl_dtype_name(t->dtype), colls, s->L, (double)s->tp_overlapped / t->nsteps);
}

/* The check beside the weights': the local vector's length against the memory model, and, on
 * a ring, each region's measured bytes per step against its model exactly (where the counts
 * divide into equal chunks; otherwise reported only). */
int mg_check(sl_train *t, double *error, char *why, size_t len)
{
    mg *s = t->state;
    double most[MG_NREGIONS];
    sent_per_step(t, most);
    *error = NAN;
    if (s->np != mg_params_model(s)) {
        snprintf(why, len, "a rank holds %zu parameters, the model says %zu", s->np, mg_params_model(s));
        return 1;
    }
    /* one embedding all-reduce, four per block, four in the head (gpt.c) */
    const long colls = s->t == 1 ? 0 : (long)t->nsteps * (1 + 4 * s->L + 4);
    if (s->tp_colls != colls) {
        snprintf(why, len, "%ld collectives in the group over %d steps, expected %ld", s->tp_colls, t->nsteps, colls);
        return 1;
    }
    /* overlap: the f of each block's two column-parallel layers and of the head */
    const long overlapped = t->variant == V_OVERLAP && s->t > 1 ? (long)t->nsteps * (2 * s->L + 1) : 0;
    if (s->tp_overlapped != overlapped) {
        snprintf(why, len, "%ld all-reduces overlapped over %d steps, expected %ld", s->tp_overlapped, t->nsteps,
                 overlapped);
        return 1;
    }
    if (sl_comm_impl(s->tp) != SL_COLL_RING) return 0;
    static const char *const names[MG_NREGIONS] = {"embedding", "blocks", "head", "replicas"};
    const int exact[MG_NREGIONS] = {1, 1, ring_exact(s->t, (size_t)s->N), ring_exact(s->d, s->np)};
    for (int r = 0; r < MG_NREGIONS; r++) {
        const double model = mg_bytes_region_model(t, r);
        if (exact[r] && most[r] != model) {
            *error = fabs(most[r] - model);
            snprintf(why, len, "%s: %.0f bytes sent per step, the model says %.0f", names[r], most[r], model);
            return 1;
        }
    }
    return 0;
}
