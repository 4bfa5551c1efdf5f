/* gpt_model.c — the GPT as a layered model (see gpt_model.h): layout and initialisation, the
 * activations, each layer's forward and backward built from the kernels of gpt.h in any dtype,
 * and the synthetic next-token task. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"
#include "gpt_model.h"
#include "gpt_ref.h" /* the block's packing: sl_gpt_block_offsets */
#include "sl_error.h"
#include "sl_rng.h"

/* Layout ------------------------------------------------------------------------------------ */

int sl_gpt_model_init(sl_mlp *m, sl_backend be, const sl_gpt_dims *g)
{
    /* nlayers + 1 entries of w_off: the last holds nparams */
    if (g->layers < 1 || g->layers + 2 >= SL_MLP_MAX_LAYERS || g->C < 1 || g->NH < 1 ||
        g->C % g->NH != 0 || g->T < 1 || g->max_T < g->T || g->V < 2 || !(g->dropout >= 0 && g->dropout < 1))
        return -1;
    memset(m, 0, sizeof *m);
    m->be = be;
    m->gpt = *g;
    m->nlayers = g->layers + 2;
    const size_t C = (size_t)g->C, block = sl_ref_gpt_block_params(g->C);
    size_t off = ((size_t)g->V + (size_t)g->max_T) * C; /* layer 0: wte, wpe */
    for (int l = 1; l <= g->layers; l++) {
        m->w_off[l] = off;
        off += block;
    }
    m->w_off[g->layers + 1] = off;
    off += 2 * C + (size_t)g->V * C; /* lnf, whead */
    m->w_off[m->nlayers] = off;
    m->nparams = off;
    return 0;
}

size_t sl_gpt_layer_size(const sl_mlp *m, int l) { return m->w_off[l + 1] - m->w_off[l]; }

/* A run of the flat vector initialised alike: normal with std (> 0), or the constant value. */
typedef struct segment {
    size_t off, len;
    float std, value;
} segment;

/* Fills the part of segment s inside [first, first + count) of dst. */
static void init_segment(const sl_mlp *m, uint64_t seed, segment s, size_t first, size_t count, float *dst)
{
    size_t lo = s.off > first ? s.off : first, end = s.off + s.len;
    size_t hi = end < first + count ? end : first + count;
    if (lo >= hi) return;
    float *p = dst + (lo - first);
    if (s.std > 0) sl_k_rng_normal(m->be, seed, lo, hi - lo, p, 0.0f, s.std);
    else if (s.value != 0) sl_k_fill(m->be, SL_F32, hi - lo, p, s.value);
    else sl_k_memset0(m->be, p, (hi - lo) * sizeof(float));
}

void sl_gpt_init_params(const sl_mlp *m, uint64_t seed, size_t first, size_t count, float *dst)
{
    const sl_gpt_dims *g = &m->gpt;
    const size_t C = (size_t)g->C, VC = (size_t)g->V * C;
    /* GPT-2's: 0.02 throughout, 0.01 for the positions, and the projections that add into the
     * residual stream scaled by 1/sqrt(2L) so that its variance does not grow with depth */
    const float w = 0.02f, proj = 0.02f / sqrtf(2.0f * (float)g->layers);
    init_segment(m, seed, (segment){0, VC, w, 0}, first, count, dst);
    init_segment(m, seed, (segment){VC, (size_t)g->max_T * C, 0.01f, 0}, first, count, dst);
    size_t off[SL_GPT_NPARAMS + 1];
    sl_gpt_block_offsets(g->C, off);
    static const int is_proj[SL_GPT_NPARAMS] = {[SL_GPT_WPROJ] = 1, [SL_GPT_WFCPROJ] = 1};
    static const int is_gain[SL_GPT_NPARAMS] = {[SL_GPT_LN1W] = 1, [SL_GPT_LN2W] = 1};
    static const int is_weight[SL_GPT_NPARAMS] = {[SL_GPT_WQKV] = 1, [SL_GPT_WPROJ] = 1,
                                                  [SL_GPT_WFC] = 1, [SL_GPT_WFCPROJ] = 1};
    for (int l = 1; l <= g->layers; l++)
        for (int i = 0; i < SL_GPT_NPARAMS; i++) {
            segment s = {m->w_off[l] + off[i], off[i + 1] - off[i], 0, is_gain[i] ? 1.0f : 0.0f};
            if (is_weight[i]) s.std = is_proj[i] ? proj : w;
            init_segment(m, seed, s, first, count, dst);
        }
    const size_t head = m->w_off[g->layers + 1];
    init_segment(m, seed, (segment){head, C, 0, 1.0f}, first, count, dst);
    init_segment(m, seed, (segment){head + C, C, 0, 0}, first, count, dst);
    init_segment(m, seed, (segment){head + 2 * C, VC, w, 0}, first, count, dst);
}

double sl_gpt_flops_core(const sl_mlp *m, int batch)
{
    const sl_gpt_dims *g = &m->gpt;
    return 4.0 * batch * (double)g->T * g->T * g->C; /* QK^T and att V: 2BT^2C each */
}

double sl_gpt_flops_out(const sl_mlp *m, int batch)
{
    const double C = m->gpt.C;
    return 8.0 * batch * (double)m->gpt.T * C * C; /* (N,4C) x (4C,C) */
}

double sl_gpt_layer_flops(const sl_mlp *m, int l, int batch)
{
    const sl_gpt_dims *g = &m->gpt;
    const double N = (double)batch * g->T, C = g->C;
    if (l == 0) return 0; /* the embedding: lookups and adds */
    /* a block: qkv 6NC^2, projection 2NC^2, MLP 16NC^2, the attention core; the head 2NCV */
    if (l <= g->layers) return 24.0 * N * C * C + sl_gpt_flops_core(m, batch);
    return 2.0 * N * C * g->V;
}

double sl_gpt_flops_forward(const sl_mlp *m, int batch)
{
    double f = 0;
    for (int l = 0; l < m->nlayers; l++) f += sl_gpt_layer_flops(m, l, batch);
    return f;
}

/* Activations ----------------------------------------------------------------------------------- */

/* Elements of dt a block keeps for backward, and f32 moments. */
static size_t block_kept(const sl_gpt_dims *g, size_t N, size_t B)
{
    return 15 * N * (size_t)g->C + B * (size_t)g->NH * (size_t)g->T * (size_t)g->T;
}

/* The activations kept for backward (sl_gpt_acts_bytes less the two gradient buffers). */
static size_t acts_kept_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    const sl_gpt_dims *g = &m->gpt;
    const size_t B = rows > 0 ? (size_t)rows : 1, N = B * (size_t)g->T, es = sl_dtype_size(dt);
    const size_t L = (size_t)g->layers, NC = N * (size_t)g->C;
    /* the blocks' tensors and moments, the residual stream into layers 1..L+1, the final norm */
    return L * (block_kept(g, N, B) * es + 4 * N * sizeof(float)) + (L + 1) * NC * es + NC * es +
           2 * N * sizeof(float);
}

size_t sl_gpt_block_kept_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    const size_t B = rows > 0 ? (size_t)rows : 1, N = B * (size_t)m->gpt.T;
    return (block_kept(&m->gpt, N, B) + N * (size_t)m->gpt.C) * sl_dtype_size(dt) + 4 * N * sizeof(float);
}

size_t sl_gpt_block_kept_selective_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    const size_t B = rows > 0 ? (size_t)rows : 1, N = B * (size_t)m->gpt.T;
    const size_t core = B * (size_t)m->gpt.NH * m->gpt.T * m->gpt.T + N * (size_t)m->gpt.C; /* att, atty */
    return sl_gpt_block_kept_bytes(m, dt, rows) - core * sl_dtype_size(dt);
}

size_t sl_gpt_acts_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    const size_t N = (size_t)(rows > 0 ? rows : 1) * (size_t)m->gpt.T;
    return acts_kept_bytes(m, dt, rows) + 2 * N * (size_t)m->gpt.C * sl_dtype_size(dt);
}

/* The backward's scratch and the kernels' workspaces (SL_MEM_OTHER): not activations kept. */
void sl_gpt_acts_alloc_work(const sl_mlp *m, sl_dtype dt, int rows, sl_gpt_acts *a)
{
    const sl_gpt_dims *g = &m->gpt;
    const sl_backend be = m->be;
    memset(a, 0, sizeof *a);
    a->be = be;
    a->dt = dt;
    a->rows = rows > 0 ? rows : 1;
    a->norm = a->scale = 1.0f;
    const size_t B = (size_t)a->rows, N = B * (size_t)g->T, C = (size_t)g->C, es = sl_dtype_size(dt);
    const size_t NC = N * C;
    a->dfc = sl_k_malloc(be, SL_MEM_OTHER, 4 * NC * es);
    a->dc = sl_k_malloc(be, SL_MEM_OTHER, NC * es);
    a->dh = sl_k_malloc(be, SL_MEM_OTHER, NC * es);
    a->dqkv = sl_k_malloc(be, SL_MEM_OTHER, 3 * NC * es);
    if (dt != SL_F32) a->lin32 = sl_k_malloc(be, SL_MEM_OTHER, 4 * NC * sizeof(float));
    a->vec32 = sl_k_malloc(be, SL_MEM_OTHER, 4 * C * sizeof(float));
    a->attn_work = sl_k_malloc(be, SL_MEM_OTHER, sl_k_attention_work_bytes(dt, (int)B, g->NH, g->T));
    a->head_work = sl_k_malloc(be, SL_MEM_OTHER, sl_k_lmhead_work_bytes((int)N, g->V));
}

void sl_gpt_acts_free_work(sl_gpt_acts *a)
{
    void *p[] = {a->dfc, a->dc, a->dh, a->dqkv, a->lin32, a->vec32, a->attn_work, a->head_work};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(a->be, p[i]);
    memset(a, 0, sizeof *a);
}

void sl_gpt_acts_alloc(const sl_mlp *m, sl_dtype dt, int rows, sl_gpt_acts *a)
{
    const sl_gpt_dims *g = &m->gpt;
    const sl_backend be = m->be;
    sl_gpt_acts_alloc_work(m, dt, rows, a);
    const size_t B = (size_t)a->rows, N = B * (size_t)g->T, C = (size_t)g->C, es = sl_dtype_size(dt);
    const size_t NC = N * C;
#define ACT(n) sl_k_malloc(be, SL_MEM_ACTIV, (n) * es)
#define F32(cat, n) ((float *)sl_k_malloc(be, cat, (n) * sizeof(float)))
    for (int l = 1; l <= g->layers + 1; l++) a->res[l] = ACT(NC);
    for (int b = 0; b < g->layers; b++) {
        sl_gpt_block_acts *k = &a->blk[b];
        k->ln1 = ACT(NC), k->qkv = ACT(3 * NC), k->atty = ACT(NC), k->h = ACT(NC), k->ln2 = ACT(NC);
        k->att = ACT(B * (size_t)g->NH * (size_t)g->T * (size_t)g->T);
        k->fc = ACT(4 * NC), k->ge = ACT(4 * NC);
        k->m1 = F32(SL_MEM_ACTIV, N), k->r1 = F32(SL_MEM_ACTIV, N);
        k->m2 = F32(SL_MEM_ACTIV, N), k->r2 = F32(SL_MEM_ACTIV, N);
    }
    a->lnf = ACT(NC);
    a->mf = F32(SL_MEM_ACTIV, N), a->rf = F32(SL_MEM_ACTIV, N);
    a->dres[0] = ACT(NC), a->dres[1] = ACT(NC);
    a->dlnf = a->dres[m->nlayers & 1];
#undef ACT
    a->dwhead = F32(SL_MEM_OTHER, (size_t)g->V * C);
#undef F32
    a->tok = sl_k_malloc(be, SL_MEM_DATA, N * sizeof(int32_t));
    a->tgt = sl_k_malloc(be, SL_MEM_DATA, N * sizeof(int32_t));
}

void sl_gpt_acts_free(sl_gpt_acts *a)
{
    const sl_backend be = a->be;
    for (int l = 0; l <= SL_MLP_MAX_LAYERS; l++) sl_k_free(be, a->res[l]);
    for (int b = 0; b < SL_MLP_MAX_LAYERS; b++) {
        sl_gpt_block_acts *k = &a->blk[b];
        void *p[] = {k->ln1, k->qkv, k->att, k->atty, k->h, k->ln2, k->fc, k->ge, k->m1, k->r1, k->m2, k->r2};
        for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(be, p[i]);
    }
    void *p[] = {a->lnf, a->mf, a->rf, a->dres[0], a->dres[1], a->dwhead, a->tok, a->tgt};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) sl_k_free(be, p[i]);
    sl_gpt_acts_free_work(a);
}

size_t sl_gpt_io_bytes(const sl_mlp *m, sl_dtype dt, int rows, int l)
{
    const size_t N = (size_t)(rows > 0 ? rows : 1) * (size_t)m->gpt.T;
    return l == 0 ? N * sizeof(int32_t) : N * (size_t)m->gpt.C * sl_dtype_size(dt);
}

/* Each piece of a placed block starts on a cache line, as sl_k_malloc's buffers do (the
 * kernels' vector loads and the GPU's 16-byte ones). */
#define PIECE_ALIGN 64

static size_t aligned(size_t bytes) { return (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN; }

/* The pieces of a range's block in order (sl_gpt_acts_map_input), kept as `keep` says: the input
 * at `in`, the others from `body` on, pointers set in a (NULL bases: a dummy, sizes only).
 * Returns the bytes of both: the input's (aligned) and the body's. */
static size_t range_layout(const sl_mlp *m, sl_dtype dt, int rows, int l0, int l1, int keep, char *in, char *body,
                           sl_gpt_acts *a)
{
    const sl_gpt_dims *g = &m->gpt;
    const size_t B = (size_t)(rows > 0 ? rows : 1), N = B * (size_t)g->T, es = sl_dtype_size(dt);
    const size_t NC = N * (size_t)g->C, f32 = sizeof(float);
    if (l0 == 0) a->tok = (int32_t *)in;
    else a->res[l0] = in;
    size_t at = 0;
#define PUT(ptr, bytes) ((ptr) = body ? (void *)(body + at) : NULL, at += aligned(bytes))
    for (int l = l0; keep != SL_GPT_KEEP_INPUT && l < l1; l++) {
        if (l > l0) PUT(a->res[l], NC * es);
        if (l >= 1 && l <= g->layers) {
            sl_gpt_block_acts *k = &a->blk[l - 1];
            PUT(k->ln1, NC * es), PUT(k->qkv, 3 * NC * es);
            if (keep == SL_GPT_KEEP_SELECTIVE) k->att = k->atty = NULL; /* the core: sl_gpt_core_map */
            else PUT(k->att, B * (size_t)g->NH * g->T * g->T * es), PUT(k->atty, NC * es);
            PUT(k->h, NC * es), PUT(k->ln2, NC * es), PUT(k->fc, 4 * NC * es);
            PUT(k->ge, 4 * NC * es), PUT(k->m1, N * f32), PUT(k->r1, N * f32), PUT(k->m2, N * f32);
            PUT(k->r2, N * f32);
        } else if (l == g->layers + 1) {
            PUT(a->lnf, NC * es), PUT(a->mf, N * f32), PUT(a->rf, N * f32);
            PUT(a->dwhead, (size_t)g->V * g->C * f32);
        }
    }
#undef PUT
    return aligned(sl_gpt_io_bytes(m, dt, rows, l0)) + at;
}

size_t sl_gpt_range_bytes(const sl_mlp *m, sl_dtype dt, int rows, int l0, int l1, int keep)
{
    sl_gpt_acts dummy;
    return range_layout(m, dt, rows, l0, l1, keep, NULL, NULL, &dummy);
}

void sl_gpt_acts_map_input(const sl_mlp *m, sl_gpt_acts *a, int l0, int l1, int rows, void *in, void *body,
                           void *out, void *dout)
{
    if (rows > a->rows) SL_FATAL("%d sequences on workspaces sized for %d", rows, a->rows);
    if (l0 < 0 || l1 <= l0 || l1 > m->nlayers) SL_FATAL("sl_gpt_acts_map_input: layers [%d, %d) of %d", l0, l1, m->nlayers);
    range_layout(m, a->dt, rows, l0, l1, a->selective ? SL_GPT_KEEP_SELECTIVE : SL_GPT_KEEP_ALL, in, body, a);
    a->B = rows;
    if (l1 < m->nlayers) a->res[l1] = out;
    else a->dlnf = dout;
}

size_t sl_gpt_core_bytes(const sl_mlp *m, sl_dtype dt, int rows)
{
    const size_t B = (size_t)(rows > 0 ? rows : 1);
    return aligned(B * (size_t)m->gpt.NH * m->gpt.T * m->gpt.T * sl_dtype_size(dt)) +
           aligned(sl_gpt_io_bytes(m, dt, rows, 1));
}

void sl_gpt_core_map(const sl_mlp *m, sl_gpt_acts *a, int l, void *core)
{
    sl_gpt_block_acts *k = &a->blk[l - 1];
    const size_t att = aligned((size_t)a->B * m->gpt.NH * m->gpt.T * m->gpt.T * sl_dtype_size(a->dt));
    k->att = core;
    k->atty = core ? (char *)core + att : NULL;
}

void *sl_gpt_dout(sl_gpt_acts *a, const sl_mlp *m)
{
    (void)m;
    return a->dlnf;
}
void *sl_gpt_dx(sl_gpt_acts *a, int l) { return l > 0 ? a->dres[l & 1] : NULL; }

/* Layers ----------------------------------------------------------------------------------------- */

static const void *at(const sl_gpt_acts *a, const void *p, size_t e)
{
    return (const char *)p + e * sl_dtype_size(a->dt);
}

/* A layer norm's gain and bias (C each, consecutive in the block, dt) as f32 for the kernels:
 * the block itself in f32, else widened into vec32. */
static const float *ln_params(sl_gpt_acts *a, int C, const void *wb)
{
    if (a->dt == SL_F32) return wb;
    sl_k_cast(a->be, 2 * (size_t)C, wb, a->dt, a->vec32, SL_F32, NULL);
    return a->vec32;
}

/* out (N,OC) = inp (N,K) W^T + b, W (OC,K) and b (OC) in dt; the product and the bias are
 * added in f32 and rounded into dt once. */
static void linear_forward(sl_gpt_acts *a, int N, int K, int OC, const void *inp, const void *W,
                           const void *b, void *out)
{
    if (a->dt == SL_F32) {
        sl_k_gemm(a->be, 0, 1, N, OC, K, 1.0f, inp, K, W, K, 0.0f, out, OC, SL_F32, SL_F32);
        sl_k_bias_add(a->be, N, OC, out, b);
        return;
    }
    sl_k_gemm(a->be, 0, 1, N, OC, K, 1.0f, inp, K, W, K, 0.0f, a->lin32, OC, a->dt, SL_F32);
    sl_k_cast(a->be, (size_t)OC, b, a->dt, a->vec32, SL_F32, NULL);
    sl_k_bias_add(a->be, N, OC, a->lin32, a->vec32);
    sl_k_cast(a->be, (size_t)N * OC, a->lin32, SL_F32, out, a->dt, NULL);
}

/* dW (OC,K) += dout^T inp and db (OC) += the column sums of dout, in f32; dinp (N,K) = dout W
 * in dt. */
static void linear_backward(sl_gpt_acts *a, int N, int K, int OC, const void *dout, const void *inp,
                            const void *W, void *dinp, float *dW, float *db)
{
    sl_k_gemm(a->be, 1, 0, OC, K, N, 1.0f, dout, OC, inp, K, 1.0f, dW, K, a->dt, SL_F32);
    if (a->dt == SL_F32) {
        sl_k_bias_grad(a->be, N, OC, dout, db);
    } else {
        sl_k_cast(a->be, (size_t)N * OC, dout, a->dt, a->lin32, SL_F32, NULL);
        sl_k_bias_grad(a->be, N, OC, a->lin32, db);
    }
    sl_k_gemm(a->be, 0, 0, N, K, OC, 1.0f, dout, OC, W, K, 0.0f, dinp, K, a->dt, a->dt);
}

/* Block b (pre-norm, as GPT-2): h = x + proj(attention(qkv(ln1(x)))); out = h + fcproj(gelu(fc(ln2(h)))). */
/* A block's sizes at the sequences loaded, and its parameters' offsets. */
typedef struct block_shape {
    int B, T, C, N;
    size_t NC, off[SL_GPT_NPARAMS + 1];
} block_shape;

static block_shape shape_of(const sl_gpt_dims *g, const sl_gpt_acts *a)
{
    block_shape s = {.B = a->B, .T = g->T, .C = g->C, .N = a->B * g->T};
    s.NC = (size_t)s.N * s.C;
    sl_gpt_block_offsets(s.C, s.off);
    return s;
}

/* Dropout site `site` of layer l over a tensor of per_seq elements per sequence, numbered from
 * the acts' first sequence (sl_dropout.h); p 0 when the model has none. */
static sl_dropout drop_at(const sl_gpt_dims *g, const sl_gpt_acts *a, int l, int site, size_t per_seq)
{
    sl_dropout d = {g->dropout, 0, 0};
    if (d.p > 0) {
        d.key = sl_dropout_key(g->dropout_seed, l, site);
        d.first = a->seq0 * per_seq;
    }
    return d;
}

/* A block's three sites: the attention probabilities (B,NH,T,T), the attention's and the MLP's
 * outputs (B,T,C) before their residual adds. */
typedef struct block_drops {
    sl_dropout attn, resid_attn, resid_mlp;
} block_drops;

static block_drops drops_of(const sl_gpt_dims *g, const sl_gpt_acts *a, int b)
{
    const size_t TC = (size_t)g->T * g->C, att = (size_t)g->NH * g->T * g->T;
    return (block_drops){drop_at(g, a, b + 1, SL_DROP_ATTN, att), drop_at(g, a, b + 1, SL_DROP_RESID_ATTN, TC),
                         drop_at(g, a, b + 1, SL_DROP_RESID_MLP, TC)};
}

/* The attention core of block b, att and atty from its qkv: the forward's, and the same call
 * again for a selective recomputation (the same arithmetic and dropout mask, so the same bits). */
static void attention_core(const sl_gpt_dims *g, sl_gpt_acts *a, int b)
{
    sl_gpt_block_acts *k = &a->blk[b];
    const sl_dropout d = drops_of(g, a, b).attn;
    sl_k_attention_forward_drop(a->be, a->dt, a->B, g->T, g->C, g->NH, k->qkv, k->att, k->atty, a->attn_work, &d);
}

/* out NULL: the block's output is not needed (the top of a recomputed segment), so its last
 * linear and residual add are skipped; everything its backward reads is computed. */
static void block_forward(const sl_gpt_dims *g, sl_gpt_acts *a, int b, const void *lp, const void *x, void *out)
{
    sl_gpt_block_acts *k = &a->blk[b];
    const block_shape s = shape_of(g, a);
    const int C = s.C, N = s.N;
    const size_t NC = s.NC, *off = s.off;
    const block_drops d = drops_of(g, a, b);
#define P(i) at(a, lp, off[i])
    const float *ln = ln_params(a, C, P(SL_GPT_LN1W));
    sl_k_layernorm_forward(a->be, a->dt, N, C, x, ln, ln + C, k->ln1, k->m1, k->r1);
    linear_forward(a, N, C, 3 * C, k->ln1, P(SL_GPT_WQKV), P(SL_GPT_BQKV), k->qkv);
    attention_core(g, a, b);
    linear_forward(a, N, C, C, k->atty, P(SL_GPT_WPROJ), P(SL_GPT_BPROJ), k->h);
    if (d.resid_attn.p > 0) sl_k_dropout(a->be, a->dt, NC, k->h, k->h, &d.resid_attn);
    sl_k_residual_forward(a->be, a->dt, NC, x, k->h, k->h);
    ln = ln_params(a, C, P(SL_GPT_LN2W));
    sl_k_layernorm_forward(a->be, a->dt, N, C, k->h, ln, ln + C, k->ln2, k->m2, k->r2);
    linear_forward(a, N, C, 4 * C, k->ln2, P(SL_GPT_WFC), P(SL_GPT_BFC), k->fc);
    sl_k_gelu_forward(a->be, a->dt, 4 * NC, k->fc, k->ge);
    if (!out) return;
    linear_forward(a, N, 4 * C, C, k->ge, P(SL_GPT_WFCPROJ), P(SL_GPT_BFCPROJ), out);
    if (d.resid_mlp.p > 0) sl_k_dropout(a->be, a->dt, NC, out, out, &d.resid_mlp);
    sl_k_residual_forward(a->be, a->dt, NC, k->h, out, out);
#undef P
}

/* The reverse, from dy = dL/dout into dx = dL/dx; the residuals pass their gradient through,
 * each dropout its mask again (into scratch free at that point: dc, then dfc). */
static void block_backward(const sl_gpt_dims *g, sl_gpt_acts *a, int b, const void *lp, const void *x,
                           const void *dy, void *dx, float *g32)
{
    sl_gpt_block_acts *k = &a->blk[b];
    const block_shape s = shape_of(g, a);
    const int B = s.B, T = s.T, C = s.C, N = s.N;
    const size_t NC = s.NC, *off = s.off;
    const block_drops d = drops_of(g, a, b);
#define P(i) at(a, lp, off[i])
#define G(i) (g32 + off[i])
    const void *dmlp = dy; /* dL/d(the MLP's output before its dropout) */
    if (d.resid_mlp.p > 0) sl_k_dropout(a->be, a->dt, NC, dy, a->dc, &d.resid_mlp), dmlp = a->dc;
    linear_backward(a, N, 4 * C, C, dmlp, k->ge, P(SL_GPT_WFCPROJ), a->dfc, G(SL_GPT_WFCPROJ), G(SL_GPT_BFCPROJ));
    sl_k_gelu_backward(a->be, a->dt, 4 * NC, k->fc, a->dfc, a->dfc);
    linear_backward(a, N, C, 4 * C, a->dfc, k->ln2, P(SL_GPT_WFC), a->dc, G(SL_GPT_WFC), G(SL_GPT_BFC));
    const float *ln = ln_params(a, C, P(SL_GPT_LN2W));
    sl_k_layernorm_backward(a->be, a->dt, N, C, a->dc, k->h, ln, k->m2, k->r2, a->dh, G(SL_GPT_LN2W),
                            G(SL_GPT_LN2B));
    sl_k_add(a->be, a->dt, NC, dy, a->dh); /* out = h + ...: dL/dh gets dy too */
    const void *dattn = a->dh; /* dL/d(the attention's output before its dropout) */
    if (d.resid_attn.p > 0) sl_k_dropout(a->be, a->dt, NC, a->dh, a->dfc, &d.resid_attn), dattn = a->dfc;
    linear_backward(a, N, C, C, dattn, k->atty, P(SL_GPT_WPROJ), a->dc, G(SL_GPT_WPROJ), G(SL_GPT_BPROJ));
    sl_k_attention_backward_drop(a->be, a->dt, B, T, C, g->NH, a->dc, k->qkv, k->att, a->dqkv, a->attn_work,
                                 &d.attn);
    linear_backward(a, N, C, 3 * C, a->dqkv, k->ln1, P(SL_GPT_WQKV), a->dc, G(SL_GPT_WQKV), G(SL_GPT_BQKV));
    ln = ln_params(a, C, P(SL_GPT_LN1W));
    sl_k_layernorm_backward(a->be, a->dt, N, C, a->dc, x, ln, k->m1, k->r1, dx, G(SL_GPT_LN1W), G(SL_GPT_LN1B));
    sl_k_add(a->be, a->dt, NC, a->dh, dx); /* h = x + ...: dL/dx gets dL/dh too */
#undef P
#undef G
}

void sl_gpt_layer_forward(const sl_mlp *m, sl_gpt_acts *a, int l, const void *lp)
{
    const sl_gpt_dims *g = &m->gpt;
    const int L = g->layers, C = g->C, N = a->B * g->T;
    if (l == 0) {
        if (!a->res[1]) return; /* its output not needed: it keeps nothing else */
        sl_k_embedding_forward(a->be, a->dt, a->B, g->T, C, g->V, a->tok, lp, at(a, lp, (size_t)g->V * C),
                               a->res[1]);
        const sl_dropout d = drop_at(g, a, 0, SL_DROP_EMBED, (size_t)g->T * C);
        if (d.p > 0) sl_k_dropout(a->be, a->dt, (size_t)N * C, a->res[1], a->res[1], &d);
    } else if (l <= L) {
        block_forward(g, a, l - 1, lp, a->res[l], a->res[l + 1]);
    } else { /* the head: final norm, logits, loss and its gradient */
        const float *ln = ln_params(a, C, lp);
        sl_k_layernorm_forward(a->be, a->dt, N, C, a->res[L + 1], ln, ln + C, a->lnf, a->mf, a->rf);
        sl_k_memset0(a->be, a->dwhead, (size_t)g->V * C * sizeof(float));
        double loss = sl_k_lmhead_xent(a->be, a->dt, N, C, g->V, a->lnf, at(a, lp, 2 * (size_t)C), a->tgt,
                                       sl_gpt_dout(a, m), a->dwhead, a->norm * a->scale, a->head_work);
        a->loss = loss / a->scale;
    }
}

void sl_gpt_core_recompute(const sl_mlp *m, sl_gpt_acts *a, int l) { attention_core(&m->gpt, a, l - 1); }

void sl_gpt_layer_backward(const sl_mlp *m, sl_gpt_acts *a, int l, void *dy, void *dx, const void *lp,
                           float *g32)
{
    const sl_gpt_dims *g = &m->gpt;
    const int L = g->layers, C = g->C, N = a->B * g->T;
    if (l == 0) {
        const sl_dropout d = drop_at(g, a, 0, SL_DROP_EMBED, (size_t)g->T * C);
        if (d.p > 0) sl_k_dropout(a->be, a->dt, (size_t)N * C, dy, dy, &d); /* dy is not kept */
        sl_k_embedding_backward(a->be, a->dt, a->B, g->T, C, g->V, a->tok, dy, g32, g32 + (size_t)g->V * C);
    } else if (l <= L) {
        block_backward(g, a, l - 1, lp, a->res[l], dy, dx, g32);
    } else { /* dy is dL/d(final norm's output), from the forward's loss */
        sl_k_add(a->be, SL_F32, (size_t)g->V * C, a->dwhead, g32 + 2 * (size_t)C);
        const float *ln = ln_params(a, C, lp);
        sl_k_layernorm_backward(a->be, a->dt, N, C, dy, a->res[L + 1], ln, a->mf, a->rf, dx, g32, g32 + C);
    }
}

/* The task ------------------------------------------------------------------------------------------ */

#define SUCCESSOR_STREAM 0x7375636365737372ull /* "successr" */
#define TOKEN_STREAM 0x746f6b656e737472ull     /* "tokenstr" */

void sl_gpt_task_tokens(sl_backend be, uint64_t seed, int T, int V, uint64_t first, int count,
                        int32_t *tok, int32_t *tgt)
{
    const size_t n = (size_t)count * (size_t)T;
    int32_t *succ = malloc((size_t)V * sizeof *succ), *h = malloc(2 * (n ? n : 1) * sizeof *h);
    if (!succ || !h) SL_FATAL("out of memory for %d sequences of %d tokens", count, T);
    for (int v = 0; v < V; v++) succ[v] = (int32_t)(sl_rng_u64(seed ^ SUCCESSOR_STREAM, (uint64_t)v) % (uint64_t)V);
    for (int s = 0; s < count; s++) {
        /* two draws per position: the coin and the uniform token */
        const uint64_t base = (first + (uint64_t)s) * 2 * ((uint64_t)T + 1);
        int32_t prev = (int32_t)(sl_rng_u64(seed ^ TOKEN_STREAM, base + 1) % (uint64_t)V);
        for (int t = 0; t <= T; t++) {
            if (t > 0) {
                const uint64_t i = base + 2 * (uint64_t)t;
                prev = sl_rng_uniform(seed ^ TOKEN_STREAM, i) < 0.75f
                           ? succ[prev]
                           : (int32_t)(sl_rng_u64(seed ^ TOKEN_STREAM, i + 1) % (uint64_t)V);
            }
            if (t < T) h[(size_t)s * T + t] = prev;
            if (t > 0) h[n + (size_t)s * T + t - 1] = prev;
        }
    }
    sl_k_memcpy(be, tok, h, n * sizeof *h, SL_K_H2D);
    sl_k_memcpy(be, tgt, h + n, n * sizeof *h, SL_K_H2D);
    sl_k_sync(be);
    free(h);
    free(succ);
}

double sl_gpt_task_floor(int V)
{
    const double q = 0.25 / V, p = 0.75 + q;
    return -p * log(p) - (V - 1) * q * log(q);
}
