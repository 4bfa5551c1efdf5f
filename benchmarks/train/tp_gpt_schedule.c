/* tp_gpt_schedule.c — the tensor-parallel GPT's layers (tp_gpt.c) as the performance model reads
 * them, function by function and call by call, on a micro-batch of B sequences (N = B·T tokens,
 * Nl of them held between the tensor-parallel regions):
 *   GEMMs   as sl_k_gemm takes them: each linear's forward X W^T (N, OC, K) into f32; backward
 *           the weight gradient dout^T X (OC, K, N, accumulated: beta 1), then dX = dout W; the
 *           attention core per head of this rank's NH/t (scores T·T·d, out T·d·T; backward four);
 *           the vocabulary-parallel head's N·V/t logits and their two gradients
 *   bytes   each element-wise kernel's reads and writes, counted on f32 elements as
 *           train_perf.c counts the serial GPT's (the 16-bit tensors widen inside the kernels),
 *           and the 16-bit casts around the GEMMs (4 read + 2 written an element)
 *   comm    in the tensor-parallel group (MG_PM_TP): f and g as all-reduces of N·C (plain), the
 *           overlap variant's backward f started after dX and waited for after the weight
 *           gradient's four pieces and the bias gradient; sequence parallelism's all-gathers
 *           of Nl·C a rank and reduce-scatters, each with its permute (2 N·C elements copied);
 *           the embedding's all-reduce; the parallel cross-entropy's three all-reduces of N f32
 *           (or --no-vocab-parallel's all-gather of the logits); the replicas' all-reduce in
 *           their group (MG_PM_DP)
 * Every blocking collective is stated as a start and a wait at once (sl_pm_comm); the suite's
 * blocking all-gather and reduce-scatter are charged at their non-blocking fits (the same
 * algorithms). Vectors of C elements (the layer norms' parameters cast to f32, a bias) are left
 * out. On cuda the cross-entropy runs on the host: its logits' copy down and dlogits' copy up
 * are stated as copies. */
#include "tp_gpt_schedule.h"

typedef struct pm {
    const sl_train *t;
    const mg *s;
    sl_pm_sched *sc;
    double N, Nl, NC, NlC, es; /* tokens, tokens held, their N·C and Nl·C, bytes of an element of dt */
    int B, f32, drop;          /* sequences; dt is f32; dropout on */
} pm;

static pm pm_of(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    pm p = {.t = t, .s = s, .sc = sc, .B = B, .f32 = s->dt == SL_F32, .drop = t->m->gpt.dropout > 0};
    p.N = (double)B * s->T;
    p.Nl = s->sp ? p.N / s->t : p.N;
    p.NC = p.N * s->C, p.NlC = p.Nl * s->C;
    p.es = (double)sl_dtype_size(s->dt);
    return p;
}

/* A blocking operation of count elements of dt in the group (a group of one: nothing). */
static void group_comm(const pm *p, sl_pm_op op, double count)
{
    if (p->s->t == 1) return;
    sl_pm_group(p->sc, MG_PM_TP, "tp", p->s->tp, p->s->t);
    sl_pm_comm(p->sc, op, count);
    sl_pm_group(p->sc, 0, NULL, NULL, 0);
}

/* n f32 values as a count of dt elements (the cross-entropy's and the norms' sums are f32). */
static double f32_count(const pm *p, double n) { return n * 4.0 / p->es; }

static void dropout(const pm *p, double elems)
{
    if (p->drop) sl_pm_bytes(p->sc, 8.0 * elems);
}

/* seq_gather: the shards all-gathered, then permuted into (B, T, C); a group of one: nothing. */
static void seq_gather(const pm *p)
{
    if (p->s->t == 1) return;
    group_comm(p, SL_PM_IALLGATHER, p->NlC);
    sl_pm_bytes(p->sc, 2.0 * p->NC * p->es);
}

/* seq_scatter: the permute into rank-major blocks, the reduce-scatter; a group of one: a copy. */
static void seq_scatter(const pm *p)
{
    if (p->s->t == 1) {
        sl_pm_bytes(p->sc, 2.0 * p->NlC * p->es);
        return;
    }
    sl_pm_bytes(p->sc, 2.0 * p->NC * p->es);
    group_comm(p, SL_PM_IREDUCE_SCATTER, p->NlC);
}

/* lin_fwd: (N, K) -> (N, OC) into f32, its bias added there, rounded into dt once. */
static void lin_fwd(const pm *p, int K, int OC, int bias)
{
    const double n = p->N * OC;
    sl_pm_gemm(p->sc, 0, 1, (int)p->N, OC, K, 0, 1);
    sl_pm_bytes(p->sc, (bias ? 8.0 * n : 0) + (p->f32 ? 0 : 6.0 * n));
}

/* bias_after: the row-parallel bias on the tokens held (16 bits: through f32 and back). */
static void bias_after(const pm *p) { sl_pm_bytes(p->sc, (p->f32 ? 8.0 : 20.0) * p->NlC); }

static void weight_grad_rows(const pm *p, int K, int r0, int r1)
{
    if (r1 > r0) sl_pm_gemm(p->sc, 1, 0, r1 - r0, K, (int)p->N, 1, 1);
}

static void bias_grad(const pm *p, int OC) { sl_pm_bytes(p->sc, (p->f32 ? 4.0 : 10.0) * p->N * OC); }

static void input_grad(const pm *p, int K, int OC) { sl_pm_gemm(p->sc, 0, 0, (int)p->N, K, OC, 0, 1); }

static void lin_bwd(const pm *p, int K, int OC)
{
    weight_grad_rows(p, K, 0, OC);
    bias_grad(p, OC);
    input_grad(p, K, OC);
}

/* colpar_backward: the gradients and f (all-reduce; sequence parallel: reduce-scatter); overlap:
 * dX first, its all-reduce started, the weight gradient in four pieces, the bias's, the wait. */
static void colpar_backward(const pm *p, int K, int OC, int bias)
{
    const mg *s = p->s;
    if (!s->overlap || s->t == 1) {
        weight_grad_rows(p, K, 0, OC);
        if (bias) bias_grad(p, OC);
        input_grad(p, K, OC);
        if (s->sp) seq_scatter(p);
        else group_comm(p, SL_PM_ALLREDUCE, p->N * K);
        return;
    }
    input_grad(p, K, OC);
    sl_pm_group(p->sc, MG_PM_TP, "tp", s->tp, s->t);
    const int id = sl_pm_start(p->sc, SL_PM_IALLREDUCE, p->N * K);
    sl_pm_group(p->sc, 0, NULL, NULL, 0);
    enum { PIECES = 4 }; /* tp_gpt.c's */
    for (int k = 0; k < PIECES; k++)
        weight_grad_rows(p, K, (int)((long long)OC * k / PIECES), (int)((long long)OC * (k + 1) / PIECES));
    if (bias) bias_grad(p, OC);
    sl_pm_wait(p->sc, id);
}

/* The attention core of the rank's heads: per head two GEMMs forward, four backward, and the
 * causal softmax over B·NH/t·T·T scores. */
static void attention(const pm *p, int backward)
{
    const mg *s = p->s;
    const int T = s->T, d = s->C / s->NH;
    const double heads = (double)p->B * s->NHl, att = heads * T * T;
    if (!backward) {
        sl_pm_gemm(p->sc, 0, 1, T, T, d, 0, heads); /* scores = Q K^T */
        sl_pm_bytes(p->sc, 8.0 * att + (p->drop ? 8.0 * att : 0));
        sl_pm_gemm(p->sc, 0, 0, T, d, T, 0, heads); /* out = att V */
        return;
    }
    sl_pm_gemm(p->sc, 1, 0, T, d, T, 0, heads); /* dV = att^T dout */
    sl_pm_gemm(p->sc, 0, 1, T, T, d, 0, heads); /* datt = dout V^T */
    sl_pm_bytes(p->sc, 12.0 * att + (p->drop ? 8.0 * att : 0));
    sl_pm_gemm(p->sc, 0, 0, T, d, T, 0, heads); /* dQ = dS K */
    sl_pm_gemm(p->sc, 1, 0, T, d, T, 0, heads); /* dK = dS^T Q */
}

/* Layers ------------------------------------------------------------------------------------ */

void mg_pm_load(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    (void)s;
    sl_pm_load(t, sc, B);
}

void mg_pm_embedding_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    sl_pm_bytes(sc, 12.0 * p.NC); /* this rank's rows looked up (the zero row elsewhere) */
    if (s->sp) seq_scatter(&p);
    else group_comm(&p, SL_PM_ALLREDUCE, p.NC);
    sl_pm_bytes(sc, 12.0 * p.NlC); /* + wpe */
    dropout(&p, p.NlC);
}

void mg_pm_block_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    const int C = s->C, Cl = s->Cl;
    sl_pm_bytes(sc, 8.0 * p.NlC); /* ln1 */
    if (s->sp) seq_gather(&p);
    lin_fwd(&p, C, 3 * Cl, 1); /* QKV, column-parallel */
    attention(&p, 0);
    lin_fwd(&p, Cl, C, 0); /* the output projection, row-parallel: a partial sum */
    if (s->sp) seq_scatter(&p);
    else group_comm(&p, SL_PM_ALLREDUCE, p.NC); /* g */
    bias_after(&p);
    dropout(&p, p.NlC);
    sl_pm_bytes(sc, 12.0 * p.NlC + 8.0 * p.NlC); /* the residual, ln2 */
    if (s->sp) seq_gather(&p);
    lin_fwd(&p, C, 4 * Cl, 1); /* fc, column-parallel */
    sl_pm_bytes(sc, 8.0 * p.N * 4 * Cl); /* GeLU */
    lin_fwd(&p, 4 * Cl, C, 0); /* fcproj, row-parallel */
    if (s->sp) seq_scatter(&p);
    else group_comm(&p, SL_PM_ALLREDUCE, p.NC); /* g */
    bias_after(&p);
    dropout(&p, p.NlC);
    sl_pm_bytes(sc, 12.0 * p.NlC); /* the residual */
}

void mg_pm_attention_forward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    attention(&p, 0);
}

void mg_pm_head(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    const int C = s->C, Vl = s->Vl;
    const double NV = p.N * Vl;
    sl_pm_bytes(sc, 8.0 * p.NlC); /* lnf */
    if (s->sp) seq_gather(&p);
    sl_pm_gemm(sc, 0, 1, (int)p.N, Vl, C, 0, 1); /* this rank's logits (f32) */
    const int host = t->be != SL_BACKEND_CPU;
    if (s->vgather && s->t > 1) { /* gathered_xent: the whole N·V on every rank */
        group_comm(&p, SL_PM_IALLGATHER, f32_count(&p, NV));
        sl_pm_bytes(sc, 8.0 * p.N * s->V * 2 + 8.0 * NV); /* permute, softmax + cross-entropy, own columns */
    } else { /* parallel_xent, on the host: the max, the exponentials, dlogits */
        if (host) sl_pm_wait(sc, sl_pm_copy(sc, 4.0 * NV));
        sl_pm_bytes(sc, 4.0 * NV);
        group_comm(&p, SL_PM_ALLREDUCE, f32_count(&p, p.N)); /* max */
        group_comm(&p, SL_PM_ALLREDUCE, f32_count(&p, p.N)); /* target's logit */
        sl_pm_bytes(sc, 8.0 * NV);
        group_comm(&p, SL_PM_ALLREDUCE, f32_count(&p, p.N)); /* sum of exponentials */
        sl_pm_bytes(sc, 8.0 * NV);
        if (host) sl_pm_wait(sc, sl_pm_copy(sc, 4.0 * NV));
    }
    if (!p.f32) sl_pm_bytes(sc, 6.0 * NV); /* dlogits into dt */
    colpar_backward(&p, C, Vl, 0);
    sl_pm_bytes(sc, 12.0 * p.NlC); /* lnf's backward */
}

void mg_pm_block_backward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    const int C = s->C, Cl = s->Cl;
    dropout(&p, p.NlC);
    if (s->sp) seq_gather(&p); /* g backward */
    lin_bwd(&p, 4 * Cl, C); /* fcproj */
    sl_pm_bytes(sc, 12.0 * p.N * 4 * Cl); /* GeLU' */
    if (s->sp) seq_gather(&p); /* ln2 again */
    colpar_backward(&p, C, 4 * Cl, 1); /* fc, and f */
    sl_pm_bytes(sc, 12.0 * p.NlC + 12.0 * p.NlC); /* ln2's backward, the residual's sum */
    dropout(&p, p.NlC);
    if (s->sp) seq_gather(&p);
    lin_bwd(&p, Cl, C); /* the output projection */
    attention(&p, 1);
    if (s->sp) seq_gather(&p); /* ln1 again */
    colpar_backward(&p, C, 3 * Cl, 1); /* QKV, and f */
    sl_pm_bytes(sc, 12.0 * p.NlC + 12.0 * p.NlC); /* ln1's backward, the residual's sum */
}

void mg_pm_embedding_backward(const sl_train *t, const mg *s, int B, sl_pm_sched *sc)
{
    const pm p = pm_of(t, s, B, sc);
    dropout(&p, p.NlC);
    if (s->sp) seq_gather(&p);
    sl_pm_bytes(sc, 12.0 * p.NC); /* this rank's rows' and wpe's gradients */
}

void mg_pm_norms_allreduce(const sl_train *t, const mg *s, sl_pm_sched *sc)
{
    if (!s->sp || s->t == 1) return;
    const pm p = pm_of(t, s, 0, sc);
    const double n = (4.0 * s->L + 2) * s->C;
    sl_pm_bytes(sc, 8.0 * n); /* packed */
    group_comm(&p, SL_PM_ALLREDUCE, f32_count(&p, n));
    sl_pm_bytes(sc, 8.0 * n); /* unpacked */
}

void mg_pm_update(const sl_train *t, const mg *s, size_t n, sl_pm_sched *sc)
{
    const int f32 = s->dt == SL_F32;
    if (!f32) sl_pm_bytes(sc, 6.0 * (double)n); /* the gradient rounded into dt */
    if (s->d > 1) {
        sl_pm_group(sc, MG_PM_DP, "dp", s->dp, s->d);
        sl_pm_comm(sc, SL_PM_ALLREDUCE, (double)n);
        sl_pm_group(sc, 0, NULL, NULL, 0);
    }
    if (!f32) sl_pm_bytes(sc, 8.0 * (double)n); /* the unscale's overflow check */
    sl_pm_optimizer(t, sc, n);
}

void mg_pm_step(const sl_train *t, sl_pm_sched *sc)
{
    const mg *s = t->state;
    mg_pm_load(t, s, s->B, sc);
    sl_pm_bytes(sc, 4.0 * (double)s->np); /* the gradients zeroed */
    mg_pm_embedding_forward(t, s, s->B, sc);
    for (int l = 1; l <= s->L; l++) mg_pm_block_forward(t, s, s->B, sc);
    mg_pm_head(t, s, s->B, sc);
    for (int l = s->L; l >= 1; l--) mg_pm_block_backward(t, s, s->B, sc);
    mg_pm_embedding_backward(t, s, s->B, sc);
    mg_pm_norms_allreduce(t, s, sc);
    mg_pm_update(t, s, s->np, sc);
}
