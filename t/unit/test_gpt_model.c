/* test_gpt_model.c — the GPT as the training layer trains it (gpt_model.h): its layout and
 * initialisation, the synthetic next-token task, and one whole forward and backward through the
 * layers (embeddings, blocks, final norm and LM head with the loss) in f32, f16 and bf16 against
 * the same model composed from the naive double references of gpt_ref.h, on the cpu backend
 * (and cuda where a device is visible).
 *
 * Tolerances: normwise, the largest difference over the tensor's largest value, per layer. The
 * f32 model differs from the double one by f32 rounding of sums of at most C, T or N terms
 * (measured 3e-7 on the gradients, 1e-8 on the loss): bounds 1e-5 and 1e-6. In 16 bits every
 * activation and GEMM operand is rounded to the dtype (unit u) at each of the ~10 kernels of a
 * block, and the gradients pass back through all of them (measured: f16 1.5u, bf16 2.4u on the
 * gradients, under u on the loss): bounds 8u and 4u. A residual's gradient left out, or one
 * kernel's gradient lost, gives errors of order 1. */
#include <math.h>

#include "gpt_model.h"
#include "gpt_ref.h"
#include "test_kernels_util.h"

enum { L = 2, C = 16, NH = 2, T = 7, MAXT = 9, V = 13, B = 3 };

static double unit(sl_dtype dt) { return dt == SL_F16 ? 0x1p-11 : dt == SL_BF16 ? 0x1p-8 : 0x1p-24; }

enum { DROP_SEED = 77 };

/* The test's GPT, with dropout p (its masks keyed by DROP_SEED). */
static sl_mlp model_p(float p)
{
    sl_mlp m;
    const sl_gpt_dims g = {.layers = L, .C = C, .NH = NH, .T = T, .max_T = MAXT, .V = V, .dropout = p,
                           .dropout_seed = DROP_SEED};
    if (sl_gpt_model_init(&m, T_BE, &g) != 0) {
        diag("sl_gpt_model_init refused a valid shape");
        exit(1);
    }
    return m;
}
static sl_mlp model(void) { return model_p(0); }

static void check_layout(void)
{
    sl_mlp m = model();
    const size_t block = 12 * C * C + 13 * C, want = (size_t)(V + MAXT) * C + L * block + 2 * C + (size_t)V * C;
    ok(m.nlayers == L + 2 && m.nparams == want && sl_mlp_layer_size(&m, 1) == block &&
           sl_mlp_range_size(&m, 0, m.nlayers) == want && m.w_off[L + 1] == (size_t)(V + MAXT) * C + L * block,
       "layout: %d layers (embeddings, %d blocks, head), %zu parameters, blocks of 12C^2 + 13C", m.nlayers, L,
       m.nparams);
#define SHAPE(l, nh, t, v, p) {.layers = l, .C = C, .NH = nh, .T = t, .max_T = MAXT, .V = v, .dropout = p}
    sl_gpt_dims bad[] = {SHAPE(L, 3, T, V, 0), SHAPE(L, NH, 10, V, 0), SHAPE(L, NH, T, 1, 0),
                         SHAPE(SL_MLP_MAX_LAYERS - 2, NH, T, V, 0), SHAPE(L, NH, T, V, 1), SHAPE(L, NH, T, V, -0.1f)};
#undef SHAPE
    int refused = 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) refused += sl_gpt_model_init(&m, T_BE, &bad[i]) == -1;
    ok(refused == 6, "shapes the kernels cannot run are refused: heads not dividing C, T > max_T, V < 2, "
                     "too many blocks, dropout 1 or below 0 (%d of 6)", refused);
    /* per block: 24 N C^2 + 4 B T^2 C; the head 2 N C V */
    const double N = B * T, fl = L * (24.0 * N * C * C + 4.0 * B * T * T * C) + 2.0 * N * C * V;
    m = model();
    ok(sl_mlp_flops_forward(&m, B) == fl && sl_mlp_flops_backward(&m, B) == 2 * fl,
       "FLOPs of a step as the kernels compute them: forward %.0f, backward twice it", fl);
}

static void check_init(void)
{
    sl_mlp m = model();
    const size_t n = m.nparams, first = 1000, count = 2345;
    float *all = t_xmalloc(n * 4), *part = t_xmalloc(count * 4);
    float *d = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_gpt_init_params(&m, 7, 0, n, d);
    t_down(all, d, n * 4);
    sl_gpt_init_params(&m, 7, first, count, d);
    t_down(part, d, count * 4);
    ok(memcmp(all + first, part, count * 4) == 0, "initialisation: a slice [%zu, %zu) equals the whole vector's",
       first, first + count);
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(C, off);
    const float *b1 = all + m.w_off[1];
    int gains = 1;
    for (int i = 0; i < C; i++) gains &= b1[off[SL_GPT_LN1W] + i] == 1.0f && b1[off[SL_GPT_LN1B] + i] == 0.0f;
    double s2 = 0, p2 = 0;
    const size_t nq = off[SL_GPT_WQKV + 1] - off[SL_GPT_WQKV], np = off[SL_GPT_WFCPROJ + 1] - off[SL_GPT_WFCPROJ];
    for (size_t i = 0; i < nq; i++) s2 += (double)b1[off[SL_GPT_WQKV] + i] * b1[off[SL_GPT_WQKV] + i];
    for (size_t i = 0; i < np; i++) p2 += (double)b1[off[SL_GPT_WFCPROJ] + i] * b1[off[SL_GPT_WFCPROJ] + i];
    const double sq = sqrt(s2 / nq), sp = sqrt(p2 / np), want_p = 0.02 / sqrt(2.0 * L);
    ok(gains && fabs(sq - 0.02) < 0.002 && fabs(sp - want_p) < 0.1 * want_p,
       "GPT-2's initialisation: layer-norm gains 1 and biases 0, qkv std %.4f (0.02), residual projection std "
       "%.4f (0.02/sqrt(2L) = %.4f)", sq, sp, want_p);
    free(all), free(part), t_free(d);
}

static void check_task(void)
{
    const int S = 400;
    int32_t *tok = sl_k_malloc(T_BE, SL_MEM_OTHER, (size_t)S * T * 4), *tgt = sl_k_malloc(T_BE, SL_MEM_OTHER, (size_t)S * T * 4);
    int32_t *ht = t_xmalloc((size_t)S * T * 4), *hg = t_xmalloc((size_t)S * T * 4), *h2 = t_xmalloc(2 * T * 4);
    sl_gpt_task_tokens(T_BE, 11, T, V, 0, S, tok, tgt);
    t_down(ht, tok, (size_t)S * T * 4);
    t_down(hg, tgt, (size_t)S * T * 4);
    int shifted = 1, range = 1;
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++) {
            range &= ht[s * T + t] >= 0 && ht[s * T + t] < V && hg[s * T + t] >= 0 && hg[s * T + t] < V;
            if (t + 1 < T) shifted &= hg[s * T + t] == ht[s * T + t + 1];
        }
    ok(range && shifted, "task: tokens in [0, V), each target the next token");
    sl_gpt_task_tokens(T_BE, 11, T, V, 5, 2, tok, tgt); /* sequences 5 and 6 alone */
    t_down(h2, tok, 2 * T * 4);
    ok(memcmp(h2, ht + 5 * T, 2 * T * 4) == 0, "task: a sequence is the same whoever generates it, in any batch");
    /* the most frequent successor of each token carries about 3/4 + 1/(4V) of its transitions */
    int count[V][V] = {{0}}, total = 0, top = 0;
    for (int s = 0; s < S; s++)
        for (int t = 0; t < T; t++) count[ht[s * T + t]][hg[s * T + t]]++;
    for (int a = 0; a < V; a++) {
        int best = 0;
        for (int b = 0; b < V; b++) {
            best = count[a][b] > best ? count[a][b] : best;
            total += count[a][b];
        }
        top += best;
    }
    const double frac = (double)top / total, want = 0.75 + 0.25 / V;
    ok(fabs(frac - want) < 0.03, "task: the successor table carries %.3f of the transitions (3/4 + 1/(4V) = %.3f)",
       frac, want);
    /* V = 2 by hand: p = 7/8, q = 1/8: 7/8 ln(8/7) + 1/8 ln 8 = 0.116840 + 0.259930 */
    ok(fabs(sl_gpt_task_floor(2) - 0.376770) < 1e-6 && sl_gpt_task_floor(V) < log(V),
       "task: its loss floor is 0.37677 nats at V = 2 (by hand), %.4f below ln V = %.4f at V = %d",
       sl_gpt_task_floor(V), log(V), V);
    t_free(tok), t_free(tgt), free(ht), free(hg), free(h2);
}

/* The model's dropout sites of layer l (sequence 0 first), as gpt_model.c numbers them:
 * d[0..2] a block's (attention probabilities, its two outputs), d[3] the embedding's. */
static void ref_drops(const sl_mlp *m, int l, sl_dropout d[4])
{
    const float p = m->gpt.dropout;
    static const int site[4] = {SL_DROP_ATTN, SL_DROP_RESID_ATTN, SL_DROP_RESID_MLP, SL_DROP_EMBED};
    for (int i = 0; i < 4; i++) d[i] = (sl_dropout){p, sl_dropout_key(DROP_SEED, l, site[i]), 0};
}

/* The double model: the same layers composed from gpt_ref.h, with the model's dropout. p holds
 * the parameters (double), returns the loss and accumulates dp. */
static double ref_model(const sl_mlp *m, const double *p, const int32_t *tok, const int32_t *tgt, double norm,
                        double *dp)
{
    const int N = B * T;
    const size_t NC = (size_t)N * C;
    double *x[L + 2], *dx = t_xmalloc(NC * 8), *dy = t_xmalloc(NC * 8);
    sl_dropout d[L + 1][4];
    for (int l = 0; l <= L; l++) ref_drops(m, l, d[l]);
    for (int l = 1; l <= L + 1; l++) x[l] = t_xmalloc(NC * 8);
    sl_ref_embedding_forward(B, T, C, tok, p, p + (size_t)V * C, x[1]);
    sl_ref_dropout(&d[0][3], NC, x[1]);
    for (int b = 0; b < L; b++)
        sl_ref_gpt_block_drop(B, T, C, NH, p + m->w_off[b + 1], x[b + 1], x[b + 2], NULL, NULL, NULL, d[b + 1]);
    const double *head = p + m->w_off[L + 1];
    double *lnf = t_xmalloc(NC * 8), mean[B * T], rstd[B * T];
    sl_ref_layernorm_forward(N, C, x[L + 1], head, head + C, lnf, mean, rstd);
    double *dhead = dp + m->w_off[L + 1];
    const double loss = sl_ref_lmhead_xent(N, C, V, lnf, head + 2 * C, tgt, norm, dy, dhead + 2 * C);
    sl_ref_layernorm_backward(N, C, dy, x[L + 1], head, dx, dhead, dhead + C);
    for (int b = L - 1; b >= 0; b--) {
        double *swap = dy;
        dy = dx, dx = swap; /* dy: dL/d(block output) */
        double *out = t_xmalloc(NC * 8);
        sl_ref_gpt_block_drop(B, T, C, NH, p + m->w_off[b + 1], x[b + 1], out, dy, dx, dp + m->w_off[b + 1],
                              d[b + 1]);
        free(out);
    }
    sl_ref_dropout(&d[0][3], NC, dx);
    sl_ref_embedding_backward(B, T, C, tok, dx, dp, dp + (size_t)V * C);
    for (int l = 1; l <= L + 1; l++) free(x[l]);
    free(dx), free(dy), free(lnf);
    return loss;
}

static void pass(const sl_mlp *m, sl_gpt_acts *a, const void *W, size_t es, float *g32);

static double normwise(const float *got, const double *want, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(got[i] - want[i]));
        s = fmax(s, fabs(want[i]));
    }
    return s > 0 ? d / s : d;
}

static void check_model(sl_dtype dt, float drop)
{
    sl_mlp m = model_p(drop);
    const size_t n = m.nparams, es = sl_dtype_size(dt);
    const int N = B * T;
    /* parameters away from their initial values, so that every gradient is a real one */
    float *w = t_xmalloc(n * 4), *d0 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_gpt_init_params(&m, 3, 0, n, d0);
    t_down(w, d0, n * 4);
    for (size_t i = 0; i < n; i++) w[i] += 0.05f * sl_rng_normal(99, i);
    void *hw = t_pack(dt, w, n);
    double *p = t_xmalloc(n * 8), *dp = calloc(n, 8);
    for (size_t i = 0; i < n; i++) p[i] = t_load(dt, hw, i);
    void *W = t_up(hw, n * es);
    float *g32 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_k_memset0(T_BE, g32, n * 4);
    sl_gpt_acts a;
    sl_gpt_acts_alloc(&m, dt, B, &a);
    a.B = B, a.norm = 1.0f / N, a.scale = dt == SL_F16 ? 256.0f : 1.0f; /* f16 with a loss scale, as trained */
    sl_gpt_task_tokens(T_BE, 5, T, V, 0, B, a.tok, a.tgt);
    int32_t tok[B * T], tgt[B * T];
    t_down(tok, a.tok, sizeof tok);
    t_down(tgt, a.tgt, sizeof tgt);
    pass(&m, &a, W, es, g32);
    const double loss = ref_model(&m, p, tok, tgt, 1.0 / N, dp);
    float *g = t_xmalloc(n * 4);
    t_down(g, g32, n * 4);
    for (size_t i = 0; i < n; i++) g[i] /= a.scale;
    double worst = 0;
    int worst_layer = 0;
    for (int l = 0; l < m.nlayers; l++) {
        double e = normwise(g + m.w_off[l], dp + m.w_off[l], sl_mlp_layer_size(&m, l));
        if (!(e <= worst)) worst = e, worst_layer = l;
    }
    const double u = unit(dt), el = fabs(a.loss - loss) / loss;
    const double bound_g = dt == SL_F32 ? 1e-5 : 8 * u, bound_l = dt == SL_F32 ? 1e-6 : 4 * u;
    ok(el <= bound_l && worst <= bound_g,
       "%s %s%s: one step through the %d layers against the double model: loss %.6f vs %.6f (rel %.2g, bound "
       "%.2g), parameter gradients within %.2g of each layer's largest (worst layer %d; bound %.2g)",
       sl_backend_name(T_BE), sl_dtype_name(dt), drop > 0 ? ", dropout 0.25" : "", m.nlayers, a.loss, loss, el,
       bound_l, worst, worst_layer, bound_g);
    sl_gpt_acts_free(&a);
    free(w), free(hw), free(p), free(dp), free(g);
    t_free(d0), t_free(W), t_free(g32);
}

/* One forward and backward of B sequences on activations sized for more, into g32 (f32,
 * accumulating), as the training layer runs a micro-batch. */
static void pass(const sl_mlp *m, sl_gpt_acts *a, const void *W, size_t es, float *g32)
{
    for (int l = 0; l < m->nlayers; l++) sl_gpt_layer_forward(m, a, l, (const char *)W + m->w_off[l] * es);
    void *dy = sl_gpt_dout(a, m);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        void *dx = sl_gpt_dx(a, l);
        sl_gpt_layer_backward(m, a, l, dy, dx, (const char *)W + m->w_off[l] * es, g32 + m->w_off[l]);
        dy = dx;
    }
    sl_k_sync(T_BE);
}

/* Parameter gradients accumulate (+=) over passes, at fewer sequences than the activations hold
 * (micro-batches): two passes give twice one pass's, up to the rounding of the sums (f32). */
static void check_accumulate(sl_dtype dt)
{
    sl_mlp m = model();
    const size_t n = m.nparams, es = sl_dtype_size(dt);
    float *w = t_xmalloc(n * 4), *d0 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_gpt_init_params(&m, 3, 0, n, d0);
    t_down(w, d0, n * 4);
    void *hw = t_pack(dt, w, n), *W = t_up(hw, n * es);
    float *g1 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4), *g2 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_k_memset0(T_BE, g1, n * 4);
    sl_k_memset0(T_BE, g2, n * 4);
    sl_gpt_acts a;
    sl_gpt_acts_alloc(&m, dt, B + 2, &a);
    a.B = B, a.norm = 1.0f / (B * T), a.scale = 1.0f;
    sl_gpt_task_tokens(T_BE, 8, T, V, 0, B, a.tok, a.tgt);
    pass(&m, &a, W, es, g1);
    pass(&m, &a, W, es, g2);
    pass(&m, &a, W, es, g2);
    float *h1 = t_xmalloc(n * 4), *h2 = t_xmalloc(n * 4);
    t_down(h1, g1, n * 4);
    t_down(h2, g2, n * 4);
    double d = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(h2[i] - 2.0 * h1[i]));
        big = fmax(big, fabs(2.0 * h1[i]));
    }
    ok(big > 0 && d <= 1e-6 * big, "%s %s: gradients accumulate over passes of %d sequences on activations for %d: "
                                   "two passes give twice one's (largest difference %.2g of the largest)",
       sl_backend_name(T_BE), sl_dtype_name(dt), B, B + 2, d / big);
    sl_gpt_acts_free(&a);
    free(w), free(hw), free(h1), free(h2);
    t_free(d0), t_free(W), t_free(g1), t_free(g2);
}

/* Dropout's masks follow the sequences, not the pass: B sequences in one pass and the same
 * sequences in two passes (the second numbered from its first sequence, a->seq0, as a
 * micro-batch or another rank's share is) draw the same masks, so their gradients sum to the
 * one pass's up to f32 rounding; numbered alike from 0, the second pass would drop other
 * elements and differ by O(1). */
static void check_dropout_split(void)
{
    sl_mlp m = model_p(0.25f);
    const size_t n = m.nparams;
    float *d0 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4), *g1 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    float *g2 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4), *g3 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_gpt_init_params(&m, 3, 0, n, d0);
    sl_k_memset0(T_BE, g1, n * 4), sl_k_memset0(T_BE, g2, n * 4), sl_k_memset0(T_BE, g3, n * 4);
    sl_gpt_acts a;
    sl_gpt_acts_alloc(&m, SL_F32, B, &a);
    a.norm = 1.0f / (B * T), a.scale = 1.0f;
    a.B = B, a.seq0 = 0;
    sl_gpt_task_tokens(T_BE, 8, T, V, 0, B, a.tok, a.tgt);
    pass(&m, &a, d0, 4, g1);
    a.B = 1, a.seq0 = 0;
    sl_gpt_task_tokens(T_BE, 8, T, V, 0, 1, a.tok, a.tgt);
    pass(&m, &a, d0, 4, g2);
    pass(&m, &a, d0, 4, g3);
    a.B = B - 1, a.seq0 = 1;
    sl_gpt_task_tokens(T_BE, 8, T, V, 1, B - 1, a.tok, a.tgt);
    pass(&m, &a, d0, 4, g2);
    a.seq0 = 0; /* the same sequences numbered as if they came first: other masks */
    pass(&m, &a, d0, 4, g3);
    float *h1 = t_xmalloc(n * 4), *h2 = t_xmalloc(n * 4), *h3 = t_xmalloc(n * 4);
    t_down(h1, g1, n * 4), t_down(h2, g2, n * 4), t_down(h3, g3, n * 4);
    double d2 = 0, d3 = 0, big = 0;
    for (size_t i = 0; i < n; i++) {
        d2 = fmax(d2, fabs(h2[i] - h1[i]));
        d3 = fmax(d3, fabs(h3[i] - h1[i]));
        big = fmax(big, fabs(h1[i]));
    }
    ok(big > 0 && d2 <= 1e-5 * big && d3 > 1e-2 * big,
       "%s dropout 0.25: %d sequences in passes of 1 and %d give one pass's gradients (largest difference %.2g of the "
       "largest); the second pass numbered from 0 instead differs by %.2g",
       sl_backend_name(T_BE), B, B - 1, d2 / big, d3 / big);
    sl_gpt_acts_free(&a);
    free(h1), free(h2), free(h3);
    t_free(d0), t_free(g1), t_free(g2), t_free(g3);
}

/* Block l's attention core placed (selective) while it runs: on, recomputed from qkv before its
 * backward, off after. */
static void core_on(const sl_mlp *m, sl_gpt_acts *a, int l, void *core, int backward)
{
    if (!core || l < 1 || l > m->gpt.layers) return;
    sl_gpt_core_map(m, a, l, core);
    if (backward) sl_gpt_core_recompute(m, a, l);
}
static void core_off(const sl_mlp *m, sl_gpt_acts *a, int l, void *core)
{
    if (core && l >= 1 && l <= m->gpt.layers) sl_gpt_core_map(m, a, l, NULL);
}

/* Placed activations, as a checkpointing technique places them (sl_gpt_acts_map_input): layers
 * [0, 2) and [2, L + 2) on blocks of their own, the first range's block zeroed after its forward
 * and recomputed without its output (its top block skipping its last linear) before its
 * backward; selective: each block's attention core placed only while the block runs and
 * recomputed from qkv before its backward. With dropout 0.25, the loss and every gradient equal
 * the fully allocated pass's bit for bit: the same arithmetic, the same masks. */
static void check_placed(sl_dtype dt, int selective)
{
    sl_mlp m = model_p(0.25f);
    const size_t n = m.nparams, es = sl_dtype_size(dt);
    const int N = m.nlayers, cut = 2;
    float *w32 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    void *W = sl_k_malloc(T_BE, SL_MEM_OTHER, n * es);
    float *g1 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4), *g2 = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_gpt_init_params(&m, 3, 0, n, w32);
    sl_k_cast(T_BE, n, w32, SL_F32, W, dt, NULL);
    sl_k_memset0(T_BE, g1, n * 4), sl_k_memset0(T_BE, g2, n * 4);
    sl_gpt_acts a, p;
    sl_gpt_acts_alloc(&m, dt, B, &a);
    a.B = B, a.norm = 1.0f / (B * T), a.scale = 1.0f, a.seq0 = 0;
    sl_gpt_task_tokens(T_BE, 8, T, V, 0, B, a.tok, a.tgt);
    pass(&m, &a, W, es, g1);

    sl_gpt_acts_alloc_work(&m, dt, B, &p);
    p.B = B, p.norm = a.norm, p.scale = 1.0f, p.seq0 = 0, p.selective = selective, p.tgt = a.tgt;
    const int keep = selective ? SL_GPT_KEEP_SELECTIVE : SL_GPT_KEEP_ALL;
    const size_t in0 = sl_gpt_range_bytes(&m, dt, B, 0, cut, SL_GPT_KEEP_INPUT);
    const size_t body0 = sl_gpt_range_bytes(&m, dt, B, 0, cut, keep) - in0;
    const size_t body1 = sl_gpt_range_bytes(&m, dt, B, cut, N, keep) - sl_gpt_range_bytes(&m, dt, B, cut, N, SL_GPT_KEEP_INPUT);
    const size_t io = sl_gpt_io_bytes(&m, dt, B, 1);
    char *tok = sl_k_malloc(T_BE, SL_MEM_OTHER, in0), *b0 = sl_k_malloc(T_BE, SL_MEM_OTHER, body0);
    char *b1 = sl_k_malloc(T_BE, SL_MEM_OTHER, body1), *ck1 = sl_k_malloc(T_BE, SL_MEM_OTHER, io);
    char *dout = sl_k_malloc(T_BE, SL_MEM_OTHER, io), *db[2] = {sl_k_malloc(T_BE, SL_MEM_OTHER, io), sl_k_malloc(T_BE, SL_MEM_OTHER, io)};
    void *core = selective ? sl_k_malloc(T_BE, SL_MEM_OTHER, sl_gpt_core_bytes(&m, dt, B)) : NULL;
    sl_k_memcpy(T_BE, tok, a.tok, (size_t)B * T * sizeof(int32_t), SL_K_D2D);
#define LP(l) ((const char *)W + m.w_off[l] * es)
    sl_gpt_acts_map_input(&m, &p, 0, cut, B, tok, b0, ck1, NULL);
    for (int l = 0; l < cut; l++) {
        core_on(&m, &p, l, core, 0);
        sl_gpt_layer_forward(&m, &p, l, LP(l));
        core_off(&m, &p, l, core);
    }
    sl_k_memset0(T_BE, b0, body0); /* dropped: only its checkpoint ck1 stays */
    sl_gpt_acts_map_input(&m, &p, cut, N, B, ck1, b1, NULL, dout);
    for (int l = cut; l < N; l++) {
        core_on(&m, &p, l, core, 0);
        sl_gpt_layer_forward(&m, &p, l, LP(l));
        core_off(&m, &p, l, core);
    }
    void *dy = dout;
    for (int l = N - 1; l >= 0; l--) {
        if (l == cut - 1) { /* the first range again, from its input, without its output */
            sl_gpt_acts_map_input(&m, &p, 0, cut, B, tok, b0, NULL, NULL);
            for (int r = 0; r < cut; r++) {
                core_on(&m, &p, r, core, 0);
                sl_gpt_layer_forward(&m, &p, r, LP(r));
                core_off(&m, &p, r, core);
            }
        }
        void *dx = l > 0 ? db[l & 1] : NULL;
        core_on(&m, &p, l, core, 1);
        sl_gpt_layer_backward(&m, &p, l, dy, dx, LP(l), g2 + m.w_off[l]);
        core_off(&m, &p, l, core);
        dy = dx;
    }
#undef LP
    sl_k_sync(T_BE);
    float *h1 = t_xmalloc(n * 4), *h2 = t_xmalloc(n * 4);
    t_down(h1, g1, n * 4), t_down(h2, g2, n * 4);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&h1[i], &h2[i], 4) != 0;
    ok(!differ && a.loss == p.loss,
       "%s %s%s, dropout 0.25: layers placed in two ranges, the first recomputed without its output: loss and "
       "gradients bit for bit the fully allocated pass's (%zu of %zu differ)",
       sl_backend_name(T_BE), sl_dtype_name(dt), selective ? ", selective (the attention core recomputed)" : "",
       differ, n);
    sl_gpt_acts_free(&a);
    sl_gpt_acts_free_work(&p);
    void *bufs[] = {w32, W, g1, g2, tok, b0, b1, ck1, dout, db[0], db[1], core};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) sl_k_free(T_BE, bufs[i]);
    free(h1), free(h2);
}

static void run_backend(void)
{
    check_layout();
    check_init();
    check_task();
    check_model(SL_F32, 0);
    check_model(SL_F16, 0);
    check_model(SL_BF16, 0);
    check_model(SL_F32, 0.25f);
    check_model(SL_BF16, 0.25f);
    check_dropout_split();
    check_placed(SL_F32, 0);
    check_placed(SL_F32, 1);
    check_placed(SL_BF16, 1);
    check_accumulate(SL_F32);
    check_accumulate(SL_BF16);
}

int main(void)
{
    t_each_backend(run_backend, NULL);
    done_testing();
    return exit_status();
}
