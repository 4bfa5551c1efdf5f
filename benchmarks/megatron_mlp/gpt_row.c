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

/* Per step, by region (gpt.c), on a ring: an all-reduce of n elements sends 2(t-1)/t·n, a
 * reduce-scatter or all-gather of n (t-1)/t·n ("a half").
 *   embedding  plain: one all-reduce of the N·C lookup; sequence parallel: its reduce-scatter
 *              forward and the all-gather of its gradient backward (two halves: the same)
 *   blocks     plain: four all-reduces of N·C (g forward, f backward, for attention and the
 *              MLP); sequence parallel: eight halves (all-gather before each column-parallel
 *              GEMM and reduce-scatter after each row-parallel one, forward; backward their
 *              conjugates): the same volume
 *   regather   sequence parallel: each layer norm's output all-gathered again in backward, two
 *              halves of N·C per block
 *   head       the three all-reduces of N f32 values of the parallel cross-entropy (or,
 *              --no-vocab-parallel, the all-gather of the N·V f32 logits) and the input
 *              gradient's all-reduce of N·C (sequence parallel: the all-gather of lnf's output
 *              forward and the reduce-scatter of its gradient: the same)
 *   norms      sequence parallel: one all-reduce of the (4L + 2)·C f32 layer-norm gradients
 *   replicas   one all-reduce of the rank's gradients (np elements of the dtype) over d
 * in the run's dtype except where f32 is said. */
double mg_bytes_region_model(const sl_train *t, int region)
{
    const mg *s = t->state;
    const double NC = (double)s->N * s->C, es = (double)sl_dtype_size(t->dtype);
    const double half = s->t > 1 ? (double)(s->t - 1) * ((double)s->Nl * s->C) * es : 0; /* sequence parallel */
    const double xent = s->vgather ? (double)(s->t - 1) * ((double)s->N * s->Vl) * 4
                                   : 3 * ring_allreduce(s->t, (double)s->N, 4);
    switch (region) {
    case MG_EMB: return s->sp ? 2 * half : ring_allreduce(s->t, NC, es);
    case MG_BLOCKS: return s->L * (s->sp ? 8 * half : 4 * ring_allreduce(s->t, NC, es));
    case MG_REGATHER: return s->sp ? s->L * 2 * half : 0;
    case MG_HEAD: return xent + (s->sp ? 2 * half : ring_allreduce(s->t, NC, es));
    case MG_NORMS: return s->sp ? ring_allreduce(s->t, (4.0 * s->L + 2) * s->C, 4) : 0;
    default: return ring_allreduce(s->d, (double)s->np, es);
    }
}

/* The group's collectives a step (gpt.c): the embedding's 1 (sequence parallel: 2), 4 a block
 * (sequence parallel: 4 forward, 6 backward with the two gathered again), the head's 3 + 1
 * (--no-vocab-parallel: 1 + 1; sequence parallel: one more), the norms' 1 (sequence parallel). */
static long tp_colls_model(const mg *s)
{
    if (s->t == 1) return 0;
    return (s->sp ? 2 : 1) + (long)s->L * (s->sp ? 10 : 4) + (s->vgather ? 1 : 3) + (s->sp ? 2 : 1) + (s->sp ? 1 : 0);
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

/* A block's kept activations on this rank (gpt.c's setup), in bytes: on the Nl tokens held
 * (N; sequence parallel N/t) its input, ln1's output, the attention's residual sum (ln2's input)
 * and ln2's output, 4·Nl·C values, and the two norms' f32 moments, 4·Nl; on all N tokens the
 * tensor-parallel parts, q k v, the heads' output, the MLP's GeLU input and output, 12·N·C/t
 * values, and the heads' probabilities b·(a/t)·s², in the run's dtype. In Korthikanti et al.'s
 * terms (s·b = N, 16-bit): s·b·h·(32/t + 2as/(ht)) + 16sb/t sequence parallel, and
 * s·b·h·(8 + 24/t + 2as/(ht)) + 16sb plain. */
double mg_activ_block_model(const mg *s)
{
    const double es = (double)sl_dtype_size(s->dt), Nl = s->Nl, N = s->N;
    return (4 * Nl * s->C + 12 * N * s->Cl + (double)s->B * s->NHl * s->T * s->T) * es + 4 * Nl * 4;
}

/* Korthikanti et al. 2022 (section 4.2), per block at 16 bits, scaled to the run's element size
 * (its 1-byte masks too) as the training layer's activ_block_formula: s·b·h·(34/t + 5as/(ht))
 * with sequence parallelism, s·b·h·(10 + 24/t + 5as/(ht)) with tensor parallelism alone. The
 * difference from mg_activ_block_model: the formula keeps dropout's masks (the two residual
 * branches' sbh bytes and the probabilities' as²b) and the dropped probabilities (2as²b), which
 * these kernels draw again from the mask's counter and recompute in backward; it leaves out
 * the layer norms' moments, which these keep (16sb/t bytes). */
double mg_activ_block_korthikanti(const mg *s)
{
    const double sb = (double)s->N, h = s->C, a = s->NH, seq = s->T, t = s->t;
    const double per = s->sp ? 34 / t : 10 + 24 / t;
    return sb * h * (per + 5 * a * seq / (h * t)) * (double)sl_dtype_size(s->dt) / 2;
}

/* What setup allocates per category: the local vector in f32 (f16/bf16: its 16-bit copy
 * beside) for parameters and gradients, the optimizer state; kept activations: L blocks
 * (mg_activ_block_model), the residual stream out of the last block and the final norm's output
 * (Nl·C each) and its moments (2·Nl f32). */
void mg_memory_model(const sl_train *t, double bytes[SL_MEM_NCATS])
{
    const mg *s = t->state;
    const double np = (double)s->np, es = (double)sl_dtype_size(s->dt), copy = s->dt == SL_F32 ? 0 : es * np;
    const double Nl = s->Nl;
    bytes[SL_MEM_PARAMS] = 4 * np + copy;
    bytes[SL_MEM_GRADS] = 4 * np + copy;
    bytes[SL_MEM_OPTIM] = sl_optim_state_per_param(&t->optim) * 4 * np;
    bytes[SL_MEM_ACTIV] = s->L * mg_activ_block_model(s) + 2 * Nl * s->C * es + 2 * Nl * 4;
}

/* The head's logits and their gradient as held (f32; a 16-bit copy of the gradient beside in
 * f16/bf16): N·V/t each, and with --no-vocab-parallel two more of the whole vocabulary's N·V
 * (the gathered logits, and the rank-major gather that then holds the gradient). */
static double head_logit_model(const mg *s)
{
    const double NVl = (double)s->N * s->Vl, es = (double)sl_dtype_size(s->dt);
    return 2 * NVl * 4 + (s->dt == SL_F32 ? 0 : NVl * es) + (s->vgather && s->t > 1 ? 2.0 * s->N * s->V * 4 : 0);
}

/* The plain rows' measured activ_block of this process, by t, d and dtype, for the sequence-
 * parallel rows after them (the variants run in order: plain first). */
enum { PLAIN_SEEN = 16 };
static struct { int t, d; sl_dtype dt; double activ; } plain_seen[PLAIN_SEEN];
static int nplain_seen;

static double plain_activ_of(const mg *s)
{
    for (int i = 0; i < nplain_seen; i++)
        if (plain_seen[i].t == s->t && plain_seen[i].d == s->d && plain_seen[i].dt == s->dt) return plain_seen[i].activ;
    return NAN;
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
    sl_result_param_num(res, "sequence_parallel", s->sp);
    sl_result_param_num(res, "vocab_parallel", !s->vgather);
    if (s->sp) {
        sl_result_metric(res, "regather_bytes", op ? NAN : most[MG_REGATHER], "bytes");
        sl_result_metric(res, "regather_bytes_model", mg_bytes_region_model(t, MG_REGATHER), "bytes");
        sl_result_metric(res, "norms_bytes", op ? NAN : most[MG_NORMS], "bytes");
        sl_result_metric(res, "norms_bytes_model", mg_bytes_region_model(t, MG_NORMS), "bytes");
    }
    /* the head's logits held, as allocated, against the model */
    sl_result_metric(res, "head_logit_mem", s->head_logit_bytes, "bytes");
    sl_result_metric(res, "head_logit_mem_model", head_logit_model(s), "bytes");
    /* a block's activations on this rank as allocated, this kernel's count and Korthikanti's */
    sl_result_metric(res, "tp_activ_block", s->activ_block, "bytes");
    sl_result_metric(res, "tp_activ_block_model", mg_activ_block_model(s), "bytes");
    sl_result_metric(res, "tp_activ_block_korthikanti", mg_activ_block_korthikanti(s), "bytes");
    /* over the serial block's on the group's tokens (the training layer's activ_block): 1/t
     * when everything a block keeps is split, as with sequence parallelism */
    sl_result_metric(res, "activ_frac", s->activ_block / mm_metric_of(res, "activ_block"), "fraction");
    sl_result_param_str(res, "tp_activ_note",
                        s->sp ? "kept: 16sbh/t + as^2b/t values + 16sb/t bytes of f32 layer-norm moments (at 16 bits "
                                "sbh(32/t + 2as/(ht)) + 16sb/t); Korthikanti's sbh(34/t + 5as/(ht)) also holds the "
                                "masks of dropout (2sbh/t + as^2b/t bytes) and its output on the probabilities "
                                "(2as^2b/t), which these kernels draw again and recompute"
                              : "kept: sbh(4 + 12/t) + as^2b/t values + 16sb bytes of f32 layer-norm moments (at 16 "
                                "bits sbh(8 + 24/t + 2as/(ht)) + 16sb); Korthikanti's sbh(10 + 24/t + 5as/(ht)) also "
                                "holds the masks of dropout (2sbh + as^2b/t bytes) and its output on the "
                                "probabilities (2as^2b/t), which these kernels draw again and recompute");
    if (t->variant == V_PLAIN && nplain_seen < PLAIN_SEEN && isnan(plain_activ_of(s)))
        plain_seen[nplain_seen].t = s->t, plain_seen[nplain_seen].d = s->d, plain_seen[nplain_seen].dt = s->dt,
        plain_seen[nplain_seen++].activ = s->activ_block;
    if (s->sp) { /* against plain's, measured earlier in this run where it ran */
        const double plain = plain_activ_of(s);
        sl_result_metric(res, "activ_block_plain", plain, "bytes");
        sl_result_metric(res, "activ_saving", 1 - s->activ_block / plain, "fraction");
    }
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
    if (s->sp)
        sl_note(t->ctx, "gpt, %s, t = %d, d = %d, %s%s: %g collectives per step in each group (2 embedding, 10 per "
                        "block x %d, %d head, 1 layer norms' gradients)", t->tech->variants[t->variant], s->t, s->d,
                sl_dtype_name(t->dtype), s->vgather ? ", logits gathered" : "", colls, s->L, s->vgather ? 3 : 5);
    else
        sl_note(t->ctx, "gpt, %s, t = %d, d = %d, %s%s: %g collectives per step in each group (1 embedding, 4 per "
                        "block x %d, %d head), %g of them under the weight-gradient GEMMs", t->tech->variants[t->variant],
                s->t, s->d, sl_dtype_name(t->dtype), s->vgather ? ", logits gathered" : "", colls, s->L,
                s->vgather ? 2 : 4, (double)s->tp_overlapped / t->nsteps);
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
    if (s->activ_block != mg_activ_block_model(s) || s->head_logit_bytes != head_logit_model(s)) {
        snprintf(why, len, "a block keeps %.0f activation bytes and the head %.0f of logits, the models say %.0f and "
                 "%.0f", s->activ_block, s->head_logit_bytes, mg_activ_block_model(s), head_logit_model(s));
        return 1;
    }
    const long colls = (long)t->nsteps * tp_colls_model(s);
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
    static const char *const names[MG_NREGIONS] = {"embedding", "blocks", "head", "replicas", "regather",
                                                   "layer norms"};
    const int exact[MG_NREGIONS] = {1, 1, s->vgather || ring_exact(s->t, (size_t)s->N), ring_exact(s->d, s->np), 1, 1};
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
