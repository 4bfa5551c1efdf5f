/* pm_platform.c — a platform file (pm_platform.h) read, and the primitives it gives a schedule
 * of p ranks: GEMMs at the stated rate, element-wise bytes at the stated bandwidth, and each
 * operation's alpha-beta from the link's by the algorithm's textbook cost model.
 *
 * Links: a message between ranks of one group (ranks [kg, (k+1)g)) costs alpha + m beta, between
 * groups alpha_far + m beta_far; an algorithm is paced by its slowest pair at each step, so a
 * step whose partners may sit in two groups (some do once p > g) pays the far link. Each step's
 * message is cut into `segment`-byte pieces that each pay alpha (the suite's own algorithms:
 * 256 KiB, coll_xfer.c): charged as alpha / segment more per byte, which is ceil(m / segment)
 * alpha to within one alpha a step. With beta' = beta + alpha / segment (beta where segment is 0):
 *   ring  all-reduce of n bytes   2(p-1) alpha + 2(p-1)/p n beta'     (slowest hop: far once p > g)
 *         reduce-scatter, all-gather of m bytes per rank   (p-1) alpha + (p-1) m beta'
 *   rhd   all-reduce, q = 2^floor(log2 p): halving then doubling, step k (k = 0 ..) at distance
 *         q / 2^(k+1) with n / 2^(k+1) bytes:  2 sum_k (alpha_k + n / 2^(k+1) beta'_k),
 *         = 2 log2(p) alpha + 2(p-1)/p n beta' on one level; p not a power of two folds the
 *         extra ranks in, a whole vector to a neighbour before and after: + 2 (alpha + n beta').
 *         Reduce-scatter (all-gather): the halving (doubling) half of it, on the p m-byte vector.
 *         (Up to 32 KiB the suite's rhd all-reduce doubles whole vectors instead; not modelled:
 *         a schedule's gradients are larger.)
 *   tree  binomial reduce then broadcast, round k at distance 2^k, the whole vector each:
 *         2 sum_k (alpha_k + n beta'_k), k < ceil(log2 p); no reduce-scatter or all-gather
 *   p2p   alpha + m beta' (the far link once p > g: a parameter server talks to every worker)
 * A step at distance d is on the near link when d < g (g a power of two: partners i and i^d,
 * or v and v + d with v a multiple of 2d, stay in one group).
 * The reduction's additions (gamma) are element-wise work inside the operation: each element
 * added reads two and writes one, charged at reduce_bw (default bw; on host buffers they run on
 * the rank's core between the messages, a segment at a time, in cache: with compute = measured,
 * an add over one segment timed here). Bytes added, per byte of the operation: ring and rhd all-reduce (p-1)/p (the
 * reduce-scatter half; rhd's fold adds a whole vector more), their reduce-scatter p-1 per byte
 * of a rank's part, the tree's all-reduce ceil(log2 p) (every round adds a whole vector on the
 * root's path); all-gather and p2p add nothing. (sl_pm_platform_gamma, once bw is known.) */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pm_platform.h"

static const char *const algo_names[SL_PMA_N] = {"ring", "rhd", "tree"};
const char *sl_pm_algo_name(sl_pm_algo a) { return (unsigned)a < SL_PMA_N ? algo_names[a] : "?"; }

static int algo_of(const char *s)
{
    for (int a = 0; a < SL_PMA_N; a++)
        if (!strcmp(s, algo_names[a])) return a;
    return -1;
}

static int fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* A finite number > 0 (>= 0 where zero_ok); -1 otherwise. */
static int number(const char *v, int zero_ok, double *out)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || x < 0 || (!zero_ok && x == 0)) return -1;
    *out = x;
    return 0;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

int sl_pm_platform_load(const char *path, sl_pm_platform *pl, char *err, size_t errlen)
{
    memset(pl, 0, sizeof *pl);
    pl->mpi = pl->nccl = -1;
    pl->background = -1;
    pl->alpha = pl->link_bw = pl->bw = pl->alpha_far = pl->link_bw_far = pl->reduce_bw = -1;
    pl->h2d_alpha = pl->h2d_bw = -1;
    snprintf(pl->path, sizeof pl->path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return fail(err, errlen, "%s: cannot read the platform file: %s", path, strerror(errno));
    char line[512];
    int ln = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = fail(err, errlen, "%s:%d: line longer than %zu characters", path, ln, sizeof line - 2);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *s = trim(line);
        if (!*s) continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = fail(err, errlen, "%s:%d: expected 'key = value', got '%.60s'", path, ln, s);
            break;
        }
        *eq = 0;
        char *k = trim(s), *v = trim(eq + 1);
        double x = 0;
        double *num = NULL;
        int zero_ok = 0;
        if (!*v) {
            rc = fail(err, errlen, "%s:%d: %s has no value", path, ln, k);
        } else if (!strcmp(k, "name")) {
            snprintf(pl->name, sizeof pl->name, "%s", v);
        } else if (!strcmp(k, "source")) {
            snprintf(pl->source, sizeof pl->source, "%s", v);
        } else if (!strcmp(k, "compute")) {
            if (strcmp(v, "measured"))
                rc = fail(err, errlen, "%s:%d: compute: expected 'measured' (or give gemm_* and bw instead), got '%s'",
                          path, ln, v);
            pl->measured = 1;
        } else if (!strcmp(k, "mpi") || !strcmp(k, "nccl")) {
            const int a = algo_of(v);
            if (a < 0) rc = fail(err, errlen, "%s:%d: %s: expected ring|rhd|tree, got '%s'", path, ln, k, v);
            *(k[0] == 'm' ? &pl->mpi : &pl->nccl) = a;
        } else if (!strcmp(k, "background")) {
            if (strcmp(v, "0") && strcmp(v, "1")) rc = fail(err, errlen, "%s:%d: background: expected 0 or 1, got '%s'", path, ln, v);
            pl->background = v[0] == '1';
        } else if (!strcmp(k, "group")) {
            if (number(v, 1, &x) || x != floor(x) || x > 1e9)
                rc = fail(err, errlen, "%s:%d: group: expected a rank count (an integer >= 0), got '%s'", path, ln, v);
            pl->group = (long)x;
        } else if (!strcmp(k, "gemm_f32")) num = &pl->gemm[SL_F32];
        else if (!strcmp(k, "gemm_f16")) num = &pl->gemm[SL_F16];
        else if (!strcmp(k, "gemm_bf16")) num = &pl->gemm[SL_BF16];
        else if (!strcmp(k, "bw")) num = &pl->bw;
        else if (!strcmp(k, "reduce_bw")) num = &pl->reduce_bw;
        else if (!strcmp(k, "alpha")) num = &pl->alpha, zero_ok = 1;
        else if (!strcmp(k, "link_bw")) num = &pl->link_bw;
        else if (!strcmp(k, "alpha_far")) num = &pl->alpha_far, zero_ok = 1;
        else if (!strcmp(k, "link_bw_far")) num = &pl->link_bw_far;
        else if (!strcmp(k, "segment")) num = &pl->segment, zero_ok = 1;
        else if (!strcmp(k, "h2d_bw")) num = &pl->h2d_bw;
        else if (!strcmp(k, "h2d_alpha")) num = &pl->h2d_alpha, zero_ok = 1;
        else
            rc = fail(err, errlen, "%s:%d: unknown key '%s' (docs/predict.md lists the keys)", path, ln, k);
        if (rc == 0 && num && number(v, zero_ok, num))
            rc = fail(err, errlen, "%s:%d: %s: expected a finite number %s, got '%s'", path, ln, k, zero_ok ? ">= 0" : "> 0", v);
    }
    if (rc == 0 && ferror(f)) rc = fail(err, errlen, "%s: read error", path);
    fclose(f);
    if (rc) return rc;
    /* what every file must say, in the order a reader would look for it */
    if (!pl->name[0]) return fail(err, errlen, "%s: no 'name' (what machine the figures describe)", path);
    if (!pl->source[0]) return fail(err, errlen, "%s: no 'source' (where the figures come from)", path);
    if (!pl->measured && !(pl->gemm[SL_F32] > 0 || pl->gemm[SL_F16] > 0 || pl->gemm[SL_BF16] > 0))
        return fail(err, errlen, "%s: no GEMM rate: give gemm_f32 (gemm_f16, gemm_bf16) in FLOP/s, or compute = measured", path);
    if (!pl->measured && pl->bw < 0) return fail(err, errlen, "%s: no 'bw' (element-wise bytes per second)", path);
    if (pl->measured && (pl->bw >= 0 || pl->reduce_bw >= 0 || pl->gemm[SL_F32] > 0 || pl->gemm[SL_F16] > 0 || pl->gemm[SL_BF16] > 0))
        return fail(err, errlen, "%s: compute = measured takes no gemm_*, bw or reduce_bw (they would be measured)", path);
    if (pl->alpha < 0) return fail(err, errlen, "%s: no 'alpha' (a message's latency within a group, seconds)", path);
    if (pl->link_bw < 0) return fail(err, errlen, "%s: no 'link_bw' (a rank's link within a group, bytes/s)", path);
    if (pl->group > 0 && (pl->alpha_far < 0 || pl->link_bw_far < 0))
        return fail(err, errlen, "%s: group %ld needs alpha_far and link_bw_far (the link between groups)", path, pl->group);
    if (pl->group > 0 && (pl->group & (pl->group - 1)))
        return fail(err, errlen, "%s: group %ld: expected a power of two (the cost models place partners by it)", path, pl->group);
    if (pl->background < 0) return fail(err, errlen, "%s: no 'background' (1: operations progress while the rank computes)", path);
    if (pl->h2d_alpha >= 0 && pl->h2d_bw < 0)
        return fail(err, errlen, "%s: h2d_alpha needs h2d_bw (a host<->device copy's bytes/s each way)", path);
    if (pl->h2d_alpha < 0) pl->h2d_alpha = 0;
    return 0;
}

int sl_pm_platform_algo(const sl_pm_platform *pl, const char *coll, char *err, size_t errlen)
{
    int a = algo_of(coll);
    if (!strcmp(coll, "mpi")) a = pl->mpi;
    if (!strcmp(coll, "nccl")) a = pl->nccl;
    if (a >= 0) return a;
    if (!strcmp(coll, "mpi") || !strcmp(coll, "nccl"))
        return fail(err, errlen, "%s: the platform does not say which algorithm -C %s runs (key %s = ring|rhd|tree)",
                    pl->path, coll, coll);
    return fail(err, errlen, "-C %s: no cost model for it in the prediction (ring, rhd, tree, or mpi/nccl as the "
                "platform file names them)", coll);
}

/* The link a step between partners at distance d pays on p ranks: alpha, beta' (per byte). */
static void link_at(const sl_pm_platform *pl, int p, double d, double *a, double *b)
{
    const int far = pl->group > 0 && p > pl->group && d >= (double)pl->group;
    *a = far ? pl->alpha_far : pl->alpha;
    *b = 1.0 / (far ? pl->link_bw_far : pl->link_bw);
    if (pl->segment > 0) *b += *a / pl->segment;
}

void sl_pm_platform_prims(const sl_pm_platform *pl, sl_pm_algo algo, int p, sl_pm_prims *out)
{
    for (int o = 0; o < SL_PM_NOPS; o++) out->alpha[o] = out->beta[o] = 0;
    out->bw = pl->bw;
    out->background = pl->background;
    /* a copy between host and device memory: each rank's own, on a copy engine beside the
     * compute whatever `background` says of the network (train_perf.c charges measured copies so) */
    out->background_ops = 1u << SL_PM_H2D;
    if (pl->h2d_bw > 0) out->alpha[SL_PM_H2D] = pl->h2d_alpha, out->beta[SL_PM_H2D] = 1.0 / pl->h2d_bw;
    if (p < 2) return; /* nothing moves: an in-place sum of one rank */
    double a, b;
    /* the ring's slowest hop, and a point-to-point partner anywhere: the far link once p > g */
    link_at(pl, p, pl->group > 0 ? (double)pl->group : 0, &a, &b);
    out->alpha[SL_PM_P2P] = a, out->beta[SL_PM_P2P] = b;
    double ar_a = 0, ar_b = 0, half_a = 0, half_b = 0; /* all-reduce; one half, per byte of a rank's part */
    if (algo == SL_PMA_RING) {
        ar_a = 2.0 * (p - 1) * a, ar_b = 2.0 * (p - 1) / p * b;
        half_a = (p - 1) * a, half_b = (p - 1) * b;
    } else if (algo == SL_PMA_RHD) {
        int q = 1;
        while (2 * q <= p) q *= 2;
        for (int k = 0; (q >> (k + 1)) >= 1; k++) {
            const double d = (double)(q >> (k + 1)), frac = 1.0 / (double)(2 << k);
            double ak, bk;
            link_at(pl, p, d, &ak, &bk);
            ar_a += 2 * ak, ar_b += 2 * frac * bk;
            half_a += ak, half_b += (double)p * frac * bk; /* the p m-byte vector, halved */
        }
        if (q < p) { /* the fold: a whole vector to a neighbour, before and after */
            link_at(pl, p, 1, &a, &b);
            ar_a += 2 * a, ar_b += 2 * b;
            half_a += a, half_b += (double)p * b;
        }
    } else { /* tree: reduce then broadcast of the whole vector; no reduce-scatter or all-gather */
        for (int d = 1; d < p; d *= 2) {
            double ak, bk;
            link_at(pl, p, d, &ak, &bk);
            ar_a += 2 * ak, ar_b += 2 * bk;
        }
        half_a = half_b = NAN;
    }
    out->alpha[SL_PM_ALLREDUCE] = out->alpha[SL_PM_IALLREDUCE] = ar_a;
    out->beta[SL_PM_ALLREDUCE] = out->beta[SL_PM_IALLREDUCE] = ar_b;
    out->alpha[SL_PM_IREDUCE_SCATTER] = out->alpha[SL_PM_IALLGATHER] = half_a;
    out->beta[SL_PM_IREDUCE_SCATTER] = out->beta[SL_PM_IALLGATHER] = half_b;
}

int sl_pm_platform_gemms(const sl_pm_platform *pl, const sl_pm_sched *s, sl_pm_prims *out)
{
    out->ngemm = 0;
    for (int i = 0; i < s->nshapes; i++) {
        const sl_pm_gemm_shape *g = &s->shapes[i];
        const double rate = pl->gemm[g->dt];
        if (!(rate > 0)) return -1;
        out->gemm[out->ngemm] = *g;
        out->gemm_s[out->ngemm++] = 2.0 * g->m * g->n * (double)g->k / rate;
    }
    return 0;
}

void sl_pm_platform_gamma(sl_pm_algo algo, int p, double reduce_bw, sl_pm_prims *io)
{
    if (p < 2 || !(reduce_bw > 0)) return;
    double ar = 0, rs = 0; /* bytes added per byte of the operation */
    if (algo == SL_PMA_TREE) {
        for (int d = 1; d < p; d *= 2) ar += 1;
    } else {
        int q = 1;
        while (2 * q <= p) q *= 2;
        ar = (double)(p - 1) / p + (algo == SL_PMA_RHD && q < p ? 1 : 0);
        rs = p - 1;
    }
    io->beta[SL_PM_ALLREDUCE] += 3 * ar / reduce_bw;
    io->beta[SL_PM_IALLREDUCE] += 3 * ar / reduce_bw;
    io->beta[SL_PM_IREDUCE_SCATTER] += 3 * rs / reduce_bw;
}
