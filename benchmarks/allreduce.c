/* allreduce.c — collective communication: all-reduce, reduce-scatter, all-gather and broadcast
 * over a size sweep, for each implementation of the communication layer (common/coll/sl_coll.h):
 * the MPI library, NCCL, ring, binomial tree, double binary tree, recursive halving/doubling,
 * a shared-memory window (shm), the hierarchical all-reduce (hier), the fully connected one
 * (direct) and the 2-D torus (torus).
 *
 * What is measured, as nccl-tests does:
 *   latency mode     every operation starts together (barrier) and is timed on its own; the
 *                    time is the slowest rank's; statistics over the iterations.
 *   throughput mode  operations back to back, the total divided by their number: what a
 *                    training step that issues many collectives sees.
 *   algbw = S / t, busbw = algbw x (2(n-1)/n all-reduce, (n-1)/n reduce-scatter and all-gather,
 *   1 broadcast): the bandwidth each rank's links must sustain, comparable across rank counts.
 *   With one rank nothing crosses a link: busbw is not applicable (null).
 * Buffers are warm by default: one send and one receive buffer reused by every iteration, as
 * OSU and nccl-tests do, so that figures compare with theirs. --cold rotates through a pool
 * several times the last-level cache instead, so that small messages are not flattered by
 * data the previous iteration left in cache. Every row says which (params.buffers).
 * The sweep runs size by size, both placements and every implementation in turn at each size
 * (the library first), so that a size's rows were all timed within seconds of each other.
 * At every fourth size and the last, each latency row of the all-reduce is also timed by the
 * plainest loop (OSU's), in chunks alternating with the row's: harness_overhead (the ovh
 * column) is the row's avg against that loop's, and core_rtt the round trip of one cache line
 * between ranks 0 and 1 beside them, the machine's own core-to-core latency at that moment.
 * Each row carries two statistics of the same samples: the median of each iteration's slowest
 * rank (the headline: a collective is done when its last rank is) and OSU's mean of the
 * per-rank means (time.rank_mean; the avg column), which leaves out barrier-exit skew.
 *
 * What is checked: for every size, implementation and placement, one call on fresh
 * integer-valued data that differs per rank, element and size is compared exactly with a
 * reference computed here from the generator, outside the timed region.
 *
 * What is derived: an alpha-beta model t = alpha + beta * S per implementation, fitted by least
 * squares on relative error over the latency sweep, and for the ring, the fully connected
 * (direct) and the torus algorithms the analytic model's terms read off it: alpha = steps x the
 * cost of one step (ring 2(n-1), direct 2 with n-1 messages in flight each, torus 2(R-1 + C-1))
 * and beta = 2(n-1)/n x the time per byte of one rank's link, the three sending the same bytes;
 * the size range in which each implementation
 * is the fastest; small-message latency and plateau busbw; and, from a large-copy probe run in
 * the same job, plateau busbw as a fraction of the memory bandwidth each rank gets; and for
 * shm, which moves nothing but memory, its time against its memory bound: the bytes each rank
 * must read from and write to memory (sl_coll_shm_memory_traffic) at that copy bandwidth.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels.h"
#include "probe.h"
#include "scalelab.h"
#include "coll_local.h"
#include "coll_reference.h"
#include "sl_corelat.h"
#include "sl_sim.h"
#include "sl_coll.h"

/* The operations measured (X: id, --op name, the communication layer's collective), the
 * timing modes and the placements; --mode and --place take bit masks of the last two. */
#define OP_LIST(X)                                                                            \
    X(OP_ALLREDUCE, "allreduce", SL_CO_ALLREDUCE)                                             \
    X(OP_REDUCE_SCATTER, "reduce_scatter", SL_CO_REDUCE_SCATTER)                              \
    X(OP_ALLGATHER, "allgather", SL_CO_ALLGATHER) X(OP_BROADCAST, "broadcast", SL_CO_BROADCAST)
#define MODE_LIST(X) X(M_LATENCY, "latency") X(M_THROUGHPUT, "throughput")
#define PLACE_LIST(X) X(P_OUT, "out") X(P_IN, "in")
SL_ENUM(op_id, OP_LIST, NOPS);
SL_ENUM(mode_id, MODE_LIST, NMODES);
SL_ENUM(place_id, PLACE_LIST, NPLACES);
#define OP_COLL(id, name, coll) coll,
static const sl_collective op_coll[NOPS] = {OP_LIST(OP_COLL)};
enum { MODE_LATENCY = 1u << M_LATENCY, MODE_THROUGHPUT = 1u << M_THROUGHPUT };
enum { PLACE_OUT = 1u << P_OUT, PLACE_IN = 1u << P_IN };

/* Technique options. */
static int opt_op = OP_ALLREDUCE;
static int opt_redop = SL_OP_SUM;
static unsigned opt_modes = MODE_LATENCY | MODE_THROUGHPUT;
static unsigned opt_places = PLACE_OUT | PLACE_IN;
static long long opt_root = 0;
static long long opt_reps = 3;
static int opt_cold = 0;     /* rotate through the pool rather than reuse one pair */
static size_t opt_pool = 0;  /* 0: four times the last-level cache, within [64M, 256M] */
static size_t opt_segment = 0; /* 0: the communication layer's default (SL_COLL_SEGMENT) */

static const sl_opt extra_opts[] = {
    {"op", 0, SL_OPT_CHOICE, &opt_op, 0, 0, SL_ENUM_CHOICES(OP_LIST), 0,
     "collective to measure (default allreduce)"},
    {"redop", 0, SL_OPT_CHOICE, &opt_redop, 0, 0, "sum|max|min|avg", 0,
     "reduction of allreduce and reduce_scatter (default sum)"},
    {"mode", 0, SL_OPT_CHOICE_LIST, &opt_modes, 0, 0, SL_ENUM_CHOICES(MODE_LIST), 0,
     "latency: each operation timed alone after a barrier; throughput: back to back (default all)"},
    {"place", 0, SL_OPT_CHOICE_LIST, &opt_places, 0, 0, SL_ENUM_CHOICES(PLACE_LIST), 0,
     "out of place and/or in place (default all; broadcast is in place only)"},
    {"root", 0, SL_OPT_INT, &opt_root, 0, 1 << 20, NULL, 0, "broadcast root (default 0)"},
    {"reps", 0, SL_OPT_INT, &opt_reps, 1, 1000, NULL, 0,
     "throughput mode: timed repetitions of the back-to-back operations (default 3; iters = reps x"
     " the latency row's)"},
    {"segment", 0, SL_OPT_SIZE, &opt_segment, 8, 1 << 30, NULL, 0,
     "pipelining segment of the suite's algorithms' messages (default 256K or $SL_COLL_SEGMENT)"},
    {"cold", 0, SL_OPT_FLAG, &opt_cold, 0, 0, NULL, 0,
     "rotate the buffers through a pool (--pool) so that each call finds them out of cache "
     "(default: one warm pair, as OSU and nccl-tests)"},
    {"pool", 0, SL_OPT_SIZE, &opt_pool, 1 << 20, (long long)1 << 34, NULL, 0,
     "bytes the --cold rotation cycles through (default 4 x the last-level cache as sysfs "
     "describes it, 64M..256M; 256M where unknown); "
     "the memory probe copies max(-e, this / 4)"},
    {0},
};

/* Usage errors that depend on the rank count, found before the results directory exists. */
static void validate(sl_ctx *ctx)
{
    /* An option given for an operation or mode that is not measured would be silently unused:
     * a usage error, as everywhere in the suite. */
    const char *op = sl_collective_name(op_coll[opt_op]);
    if (sl_option_given(&ctx->opt, "root") && opt_op != OP_BROADCAST)
        sl_usage_error("--root applies to --op broadcast only (this run measures %s)", op);
    if (sl_option_given(&ctx->opt, "redop") && opt_op != OP_ALLREDUCE && opt_op != OP_REDUCE_SCATTER)
        sl_usage_error("--redop applies to --op allreduce and reduce_scatter only (this run measures %s, "
                       "which reduces nothing)", op);
    if (sl_option_given(&ctx->opt, "reps") && !(opt_modes & MODE_THROUGHPUT))
        sl_usage_error("--reps applies to --mode throughput only (this run measures latency alone)");
    if (opt_root >= ctx->nranks)
        sl_usage_error("--root: expected a rank in [0, %d], got %lld", ctx->nranks - 1, opt_root);
    if (opt_op == OP_BROADCAST && !(opt_places & PLACE_IN))
        sl_usage_error("--place: broadcast works in place only (--place in)");
    /* Every size must hold one element (one per rank where the collective splits the vector
     * into per-rank blocks). */
    int per_rank = opt_op == OP_REDUCE_SCATTER || opt_op == OP_ALLGATHER;
    size_t biggest_es = 0;
    for (int t = 0; t < SL_NDTYPES; t++)
        if ((ctx->opt.dtypes & (1u << t)) && sl_dtype_size(t) > biggest_es)
            biggest_es = sl_dtype_size(t);
    size_t smallest = biggest_es * (per_rank ? (size_t)ctx->nranks : 1);
    if (ctx->opt.minbytes < smallest)
        sl_usage_error("--minbytes (-b) %zu: %s needs at least %zu bytes (one %zu-byte element%s)",
                       ctx->opt.minbytes, sl_collective_name(op_coll[opt_op]), smallest,
                       biggest_es, per_rank ? " per rank" : "");
    if (ctx->opt.maxbytes > ((size_t)16 << 30))
        sl_usage_error("--maxbytes (-e) %zu: at most 16G", ctx->opt.maxbytes);
}

/* A timed configuration stops adding iterations once they would take longer than this, so
 * that the largest sizes do not dominate the run; the row records the count it used. */
#define TIME_BUDGET_S 0.25
#define STR_(x) #x
#define STR(x) STR_(x)

static const sl_program program = {
    .name = "allreduce",
    .summary = "collectives over a size sweep: ring, trees, recursive halving/doubling, shared "
               "memory, hierarchical, fully connected, 2-D torus, MPI, NCCL",
    .uses = SL_USES_SIZES | SL_USES_DTYPE | SL_USES_BACKEND | SL_USES_COLL,
    .dtypes = (1u << SL_F32) | (1u << SL_F64) | (1u << SL_F16) | (1u << SL_BF16),
    .default_dtype = SL_F32,
    .colls = (1u << SL_NCOLLS) - 1,
    .default_coll = SL_COLL_MPI,
    .default_colls = (1u << SL_NCOLLS) - 1, /* comparing the implementations is the point */
    .default_iters = 20,
    .default_warmup = 3,
    .default_minbytes = 16,
    .default_maxbytes = 64u << 20,
    .extra = extra_opts,
    .validate = validate,
    .help_notes =
        "iterations (the iters column): latency rows time -n operations, fewer where one is slow:\n"
        "  a configuration gets min(-n, " STR(TIME_BUDGET_S) " s / the time of one operation),\n"
        "  at least 3 (a note under the table says when); throughput rows time --reps\n"
        "  repetitions of that many back-to-back operations: their iters is --reps x the\n"
        "  latency row's (60 = 3 x 20)\n",
};

/* Data and reference: sl_coll_ref_value / sl_coll_ref_reduce (coll_reference.h), integers in
 * [-8, 8] per rank, element and check number, whose sums are exact in every dtype. */

/* ---- one configuration ------------------------------------------------------------------- */

typedef struct bench {
    sl_ctx *ctx;
    sl_comm *c;
    sl_backend be;
    sl_dtype t;
    int op, inplace, root;
    size_t count;       /* elements per call (per rank block for reduce_scatter/allgather) */
    size_t bytes;       /* S: the bytes of the whole vector, nccl-tests' "size" */
    char *arena;
    size_t stride, half;/* buffer set k: [arena + k stride, + half) and [.. + half, + 2 half) */
    int nsets, next;
    void *s, *r;        /* set next's buffers, found before the timed call rather than in it */
    int nops;           /* throughput mode: operations per timed repetition */
    double membw;       /* copy bandwidth per rank (reads + writes), for shm's bound */
    double scratch;     /* the collective's own scratch for one operation, largest over ranks */
    double sent;        /* bytes the busiest rank sent in one operation (hier: between nodes) */
    int si;             /* index of the size in the sweep */
} bench;

/* The send and receive buffers of set k, as the collective's conventions want them. */
static void buffers(const bench *b, int k, void **s, void **r)
{
    char *x = b->arena + (size_t)k * b->stride, *y = x + b->half;
    size_t es = sl_dtype_size(b->t), mine = (size_t)b->ctx->rank * b->count * es;
    switch (b->op) {
    case OP_ALLREDUCE: *s = x; *r = b->inplace ? x : y; break;
    case OP_REDUCE_SCATTER: *s = x; *r = b->inplace ? x + mine : y; break;
    case OP_ALLGATHER: *r = x; *s = b->inplace ? x + mine : y; break;
    default: *s = *r = x; break;
    }
}

static int call_on(bench *b, void *s, void *r)
{
    switch (b->op) {
    case OP_ALLREDUCE: return sl_coll_allreduce(b->c, s, r, b->count, b->t, (sl_redop)opt_redop);
    case OP_REDUCE_SCATTER:
        return sl_coll_reduce_scatter(b->c, s, r, b->count, b->t, (sl_redop)opt_redop);
    case OP_ALLGATHER: return sl_coll_allgather(b->c, s, r, b->count, b->t);
    default: return sl_coll_broadcast(b->c, r, b->count, b->t, b->root);
    }
}

static int call(bench *b, int k)
{
    void *s, *r;
    buffers(b, k, &s, &r);
    return call_on(b, s, r);
}

/* The timed operation: the collective on the buffers found beforehand, and nothing else for
 * warm buffers; a --cold rotation finds the next set's after the call. */
static void one_op(bench *b)
{
    int rc = call_on(b, b->s, b->r);
    if (rc) SL_FATAL("%s %s: %s", sl_coll_name(sl_comm_impl(b->c)), sl_collective_name(op_coll[b->op]),
                     sl_coll_strerror(rc));
    if (b->nsets > 1) {
        if (++b->next == b->nsets) b->next = 0;
        buffers(b, b->next, &b->s, &b->r);
    }
}

static void body_latency(void *arg) { one_op(arg); }

static void body_throughput(void *arg)
{
    bench *b = arg;
    for (int i = 0; i < b->nops; i++) one_op(b);
}

/* One call on set 0 with fresh data, compared exactly with the reference on every rank.
 * Returns the number of wrong elements over all ranks; *worst: the largest difference. */
static long check(bench *b, unsigned k, double *worst, char *msg, size_t msglen)
{
    sl_ctx *ctx = b->ctx;
    size_t es = sl_dtype_size(b->t), n = b->count, nr = (size_t)ctx->nranks;
    size_t in_elems = b->op == OP_REDUCE_SCATTER ? n * nr : n;
    size_t out_elems = b->op == OP_ALLGATHER ? n * nr : n;
    void *s, *r;
    buffers(b, 0, &s, &r);
    char *h = malloc((in_elems > out_elems ? in_elems : out_elems) * es + 1);
    if (!h) SL_FATAL("out of memory for the check of %zu bytes", b->bytes);
    /* Poison the result (so unwritten elements show), then write the input. */
    memset(h, 0xA5, out_elems * es);
    if (b->op == OP_ALLGATHER || (b->op == OP_BROADCAST && ctx->rank != b->root) ||
        (!b->inplace && b->op != OP_BROADCAST))
        sl_k_memcpy(b->be, r, h, out_elems * es, SL_K_H2D);
    size_t first = b->op == OP_ALLGATHER ? (size_t)ctx->rank * n : 0;
    int src_rank = b->op == OP_BROADCAST ? b->root : ctx->rank;
    if (b->op != OP_BROADCAST || ctx->rank == b->root) {
        for (size_t i = 0; i < in_elems; i++) sl_elem_put(h, i, b->t, sl_coll_ref_value(src_rank, first + i, k));
        sl_k_memcpy(b->be, s, h, in_elems * es, SL_K_H2D);
    }
    int rc = call(b, 0);
    if (rc) SL_FATAL("%s: %s", sl_coll_name(sl_comm_impl(b->c)), sl_coll_strerror(rc));
    sl_k_memcpy(b->be, h, r, out_elems * es, SL_K_D2H);
    /* For the tests of the check itself: SL_TEST_CORRUPT=1 spoils one element on the last
     * rank, which must then be reported and make the program exit 1. */
    if (sl_test_corrupt() && ctx->rank == ctx->nranks - 1 && out_elems)
        sl_elem_put(h, out_elems - 1, b->t, sl_elem_get(h, out_elems - 1, b->t) + 1);
    long wrong = 0;
    double w = 0;
    char first_msg[160] = "";
    size_t base = b->op == OP_REDUCE_SCATTER ? (size_t)ctx->rank * n : 0;
    for (size_t i = 0; i < out_elems; i++) {
        double want;
        if (b->op == OP_ALLGATHER) want = sl_coll_ref_value((int)(i / n), i, k);
        else if (b->op == OP_BROADCAST) want = sl_coll_ref_value(b->root, i, k);
        else want = sl_coll_ref_reduce(ctx->nranks, base + i, k, b->t, (sl_redop)opt_redop);
        double got = sl_elem_get(h, i, b->t);
        if (got != want) {
            if (!wrong++)
                snprintf(first_msg, sizeof first_msg, "rank %d element %zu: %g, expected %g",
                         ctx->rank, i, got, want);
            double d = isnan(got) ? INFINITY : fabs(got - want);
            if (d > w) w = d;
        }
    }
    free(h);
    long total = 0;
    SL_CHECK_MPI(MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(&w, worst, 1, MPI_DOUBLE, MPI_MAX, ctx->comm));
    /* The message of the lowest failing rank, for rank 0 to print. */
    int me = wrong ? ctx->rank : ctx->nranks, who = 0;
    SL_CHECK_MPI(MPI_Allreduce(&me, &who, 1, MPI_INT, MPI_MIN, ctx->comm));
    if (total) {
        if (who != 0 && who < ctx->nranks) {
            if (ctx->rank == who) MPI_Send(first_msg, sizeof first_msg, MPI_CHAR, 0, 7, ctx->comm);
            if (ctx->rank == 0)
                MPI_Recv(first_msg, sizeof first_msg, MPI_CHAR, who, 7, ctx->comm, MPI_STATUS_IGNORE);
        }
        snprintf(msg, msglen, "%ld wrong elements; first: %s", total, first_msg);
    }
    return total;
}

/* ---- the model ------------------------------------------------------------------------- */

/* The analytic model of the ring, direct and torus (coll_ring.c, coll_direct.c, coll_torus.c):
 * the steps one operation takes one after the other, the messages each rank has in flight in a
 * step, and the bytes each rank sends as a fraction of S; 0 for the other implementations. The
 * all-reduce is both halves, reduce-scatter and all-gather one. */
static int model_shape(sl_comm *c, int op, int *steps, int *in_flight, double *bytes)
{
    int n = sl_comm_size(c), rows, cols, halves = op == OP_ALLREDUCE ? 2 : 1;
    sl_coll impl = sl_comm_impl(c);
    if (n < 2 || op == OP_BROADCAST) return 0;
    sl_comm_torus(c, &rows, &cols);
    switch (impl) {
    case SL_COLL_RING: *steps = halves * (n - 1), *in_flight = 1; break;
    case SL_COLL_DIRECT: *steps = halves, *in_flight = sl_comm_max_inflight(c); break;
    case SL_COLL_TORUS: /* bidirectional: one message each way round the ring per step */
        *steps = halves * (rows - 1 + cols - 1), *in_flight = 1 + sl_comm_torus_bidir(c);
        break;
    default: return 0;
    }
    if (impl == SL_COLL_DIRECT && *in_flight < n - 1) /* rounds of in_flight exchanges each */
        *steps = halves * ((n - 2) / *in_flight + 1);
    *bytes = halves * (double)(n - 1) / n;
    return 1;
}

/* The grid of a torus row ("2x4"), for its params and notes. */
static const char *grid_name(sl_comm *c, char *buf, size_t len)
{
    int rows, cols;
    sl_comm_torus(c, &rows, &cols);
    snprintf(buf, len, "%dx%d", rows, cols);
    return buf;
}

/* ---- the run ------------------------------------------------------------------------------ */

#define MAX_SIZES 64

typedef struct series {  /* one implementation's sweep, for the model and the summary */
    int ran;
    int n;
    double S[MAX_SIZES], t_lat[MAX_SIZES], busbw[MAX_SIZES];
} series;

static const sl_column columns[] = {
    SL_COL("coll", "collective", 7),
    SL_COL("place", "place", 6),
    SL_COL("mode", "mode", 11),
    {"size", "B", "bytes", 11, 0, 0},
    {"count", "elts", "count", 10, 0, 0},
    SL_COL("iters", "iterations", 6),
    SL_COL_TIME("us", 1e6, 2, 11),
    SL_COL_P95("us", 1e6, 2, 11),
    {"avg", "us", "time.rank_mean", 11, 2, 1e6},
    /* avg against the plain loop's, at the sizes that have one (reference_size): n/a elsewhere */
    {"ovh", "%", "harness_overhead", 7, 1, 100},
    {"algbw", "GB/s", "algbw", 9, 3, 0},
    {"busbw", "GB/s", "busbw", 9, 3, 0},
    {"scratch", "KiB", "scratch_bytes", 9, 0, 1.0 / 1024},
    {"sent", "B", "sent_bytes", 11, 0, 0},
    {"vs_mpi", "x", "vs_mpi", 7, 2, 0},
    SL_COL_CHECK(6),
};

static double bus_factor(int op, int n)
{
    if (n == 1) return NAN; /* nothing crosses a link */
    switch (op) {
    case OP_ALLREDUCE: return 2.0 * (n - 1) / n;
    case OP_REDUCE_SCATTER:
    case OP_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

/* The fewest iterations a configuration got when that was fewer than -n (0: none), for the
 * note that says so. */
static int fewest_iters;

/* The iterations a configuration gets: -n, fewer when one operation is slow (same on every
 * rank: from the slowest rank's time of one operation). */
static int iterations_for(sl_ctx *ctx, bench *b)
{
    SL_CHECK_MPI(MPI_Barrier(ctx->comm));
    double t0 = sl_now();
    one_op(b);
    double dt = sl_now() - t0, worst = 0;
    SL_CHECK_MPI(MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, ctx->comm));
    long long n = ctx->opt.iters;
    if (worst > 0 && worst * (double)n > TIME_BUDGET_S) n = (long long)(TIME_BUDGET_S / worst);
    n = n < 3 ? 3 : n;
    if (n < ctx->opt.iters && (fewest_iters == 0 || n < fewest_iters)) fewest_iters = (int)n;
    return (int)n;
}

/* The regression gate's ceilings (results/schema.md, "gate"): the MPI library's median time per
 * place, size and mode (latency, throughput), measured in this run at each size just before the
 * suite's own algorithms (mpi comes first in the -C order); 0 where it was not run. */
static double mpi_time[2][MAX_SIZES][2];
_Static_assert(SL_COLL_MPI == 0, "the library is measured first: the own algorithms' vs_mpi needs it");

/* The row's gate: an own algorithm against the library at the same bytes and mode (vs_mpi =
 * own busbw / library busbw = library time / own time), the library against the copy probe
 * (of_copy = busbw / copy bandwidth per rank). NCCL is a library with no ceiling here. */
static void gate_metric(sl_ctx *ctx, const bench *b, const char *mode, const sl_stats *st,
                        double busbw, sl_result *r)
{
    sl_coll impl = sl_comm_impl(b->c);
    double *ref = &mpi_time[b->inplace][b->si][strcmp(mode, "latency") != 0];
    if (impl == SL_COLL_MPI) {
        *ref = st->median;
        /* one rank moves nothing (busbw 0): no fraction of the probe */
        sl_result_metric(r, "of_copy", ctx->nranks > 1 ? busbw / b->membw : NAN, "ratio");
        sl_result_gate(r, "of_copy");
    } else if (impl != SL_COLL_NCCL && *ref > 0) {
        sl_result_metric(r, "vs_mpi", *ref / st->median, "ratio");
        sl_result_gate(r, "vs_mpi");
    }
}

/* ---- the reference loop --------------------------------------------------------------------- */

/* OSU's loop, as plain as it can be, in this process: the all-reduce called directly (the
 * library's MPI_Allreduce for mpi on host buffers of f32/f64 and sum/max/min; otherwise the
 * implementation through sl_coll_allreduce), timed per call with MPI_Wtime, a barrier after
 * each, on send and receive buffers of its own, page-aligned, as osu_allreduce allocates them.
 * Its statistics, as the harness's: rank_mean (OSU's avg: the mean over the calls on each rank,
 * averaged over the ranks), whose ratio to the harness's avg, minus 1, is the row's
 * harness_overhead; and the median of each call's slowest rank beside the harness's time. */
typedef struct reference {
    bench *b;
    char *s, *r, *recv;
    const void *send;
    MPI_Datatype ty;
    MPI_Op op;
    int library, rc;
} reference;

static void reference_open(reference *x, bench *b)
{
    size_t bytes = b->count * sl_dtype_size(b->t);
    memset(x, 0, sizeof *x);
    x->b = b;
    if (b->be == SL_BACKEND_CPU) {
        size_t len = (bytes + 4095) & ~(size_t)4095;
        if (posix_memalign((void **)&x->s, 4096, len) || posix_memalign((void **)&x->r, 4096, len))
            SL_FATAL("out of memory for the reference loop's buffers of %zu bytes", bytes);
        memset(x->s, 0, len);
        memset(x->r, 0, len);
    } else {
        x->s = sl_k_malloc(b->be, SL_MEM_COMM, bytes);
        x->r = sl_k_malloc(b->be, SL_MEM_COMM, bytes);
    }
    x->recv = b->inplace ? x->s : x->r;
    x->ty = b->t == SL_F32 ? MPI_FLOAT : b->t == SL_F64 ? MPI_DOUBLE : MPI_DATATYPE_NULL;
    x->op = opt_redop == SL_OP_SUM ? MPI_SUM : opt_redop == SL_OP_MAX ? MPI_MAX
          : opt_redop == SL_OP_MIN ? MPI_MIN : MPI_OP_NULL;
    x->library = sl_comm_impl(b->c) == SL_COLL_MPI && b->be == SL_BACKEND_CPU &&
                 x->ty != MPI_DATATYPE_NULL && x->op != MPI_OP_NULL;
    x->send = b->inplace ? MPI_IN_PLACE : x->s;
}

/* warmup untimed calls, then iters timed ones into dt (NULL with iters 0); the barrier before
 * the first is the one OSU's previous iteration ends with. */
static void reference_calls(reference *x, int warmup, int iters, double *dt)
{
    bench *b = x->b;
    int n = (int)b->count;
    MPI_Barrier(b->ctx->comm);
    for (int i = 0; i < warmup + iters; i++) {
        double t0 = MPI_Wtime();
        if (x->library) x->rc |= MPI_Allreduce(x->send, x->recv, n, x->ty, x->op, b->ctx->comm);
        else x->rc |= sl_coll_allreduce(b->c, x->s, x->recv, b->count, b->t, (sl_redop)opt_redop);
        double t1 = MPI_Wtime();
        if (i >= warmup) dt[i - warmup] = t1 - t0;
        MPI_Barrier(b->ctx->comm);
    }
}

static void reference_close(reference *x)
{
    if (x->rc) SL_FATAL("%s allreduce in the reference loop failed", sl_coll_name(sl_comm_impl(x->b->c)));
    if (x->b->be == SL_BACKEND_CPU) {
        free(x->s);
        free(x->r);
    } else {
        sl_k_free(x->b->be, x->s);
        sl_k_free(x->b->be, x->r);
    }
}

/* The latency row and its reference loop, iters calls each, timed in alternating chunks (the
 * order swapped every other chunk, each chunk's first call untimed to re-warm its buffers):
 * both loops then see the same machine, and harness_overhead compares the two timing paths
 * rather than two moments of a shared machine (a rank preempted, the clock changed) seconds
 * apart. The statistics of each are over all its chunks. Before each chunk, the round trip of
 * one cache line between ranks 0 and 1 (sl_corelat.h): *rtt is the median of the chunks'. */
#define REFERENCE_CHUNKS 10
#define CORELAT_TRIPS 100
static sl_corelat corelat;
static double rtt_lo = INFINITY, rtt_hi = -INFINITY; /* over the run's rows, for the note */

static void latency_with_reference(bench *b, int iters, sl_stats *st, sl_stats *ref, double *rtt)
{
    sl_ctx *ctx = b->ctx;
    double *h = malloc((size_t)iters * sizeof *h), *r = malloc((size_t)iters * sizeof *r);
    if (!h || !r) SL_FATAL("out of memory for %d iteration times", iters);
    long long counters[SL_PAPI_MAX_EVENTS] = {0};
    reference x;
    reference_open(&x, b);
    reference_calls(&x, (int)ctx->opt.warmup, 0, NULL);
    int chunks = iters < REFERENCE_CHUNKS ? iters : REFERENCE_CHUNKS;
    double trips[REFERENCE_CHUNKS];
    for (int c = 0; c < chunks; c++) {
        trips[c] = sl_corelat_measure(&corelat, CORELAT_TRIPS);
        int lo = (int)((long long)iters * c / chunks), k = (int)((long long)iters * (c + 1) / chunks) - lo;
        for (int half = 0; half < 2; half++) {
            if ((half == 0) == (c % 2 == 0)) {
                SL_CHECK_MPI(MPI_Barrier(ctx->comm));
                one_op(b);
                sl_time_iterations(ctx, k, body_latency, b, h + lo, counters);
            } else {
                reference_calls(&x, 1, k, r + lo);
            }
        }
    }
    reference_close(&x);
    sl_stats tr;
    sl_stats_compute(trips, chunks, &tr);
    *rtt = corelat.active ? tr.median : NAN;
    if (*rtt < rtt_lo) rtt_lo = *rtt;
    if (*rtt > rtt_hi) rtt_hi = *rtt;
    sl_stats_over_ranks(h, iters, ctx->comm, st);
    sl_stats_add_counters(ctx, counters, st);
    sl_stats_over_ranks(r, iters, ctx->comm, ref);
    free(h);
    free(r);
}

/* The sizes that get a reference loop: every fourth of the sweep from the first, and the last
 * (4 B, 64 B, 1 KiB, ... with -f 2), of --op allreduce on real hosts (a simulated run's times
 * are the model's, and its large buffers are folded: the loop's own would not be). */
static int reference_size(int si, int nsizes)
{
    return opt_op == OP_ALLREDUCE && !sl_sim_active() && (si % 4 == 0 || si == nsizes - 1);
}

/* The largest harness_overhead of the run and where it was, on the avg (OSU's statistic) and
 * on the median, for the note after the table. */
typedef struct overhead_worst {
    int n;
    double worst;
    char where[96];
} overhead_worst;
static overhead_worst overhead[2];

static void note_overhead(overhead_worst *o, double h, const bench *b)
{
    if (o->n++ && !(h > o->worst)) return;
    o->worst = h;
    snprintf(o->where, sizeof o->where, "%s %s %s %zu B", sl_coll_name(sl_comm_impl(b->c)),
             sl_dtype_name(b->t), b->inplace ? "in" : "out", b->bytes);
}

static void emit_row(sl_ctx *ctx, bench *b, const char *mode, const sl_stats *st, int iters,
                     sl_check_status cs, double err, const char *msg, const sl_stats *ref,
                     double rtt)
{
    sl_result r;
    sl_result_init(ctx, &r, sl_coll_name(sl_comm_impl(b->c)));
    r.collective = sl_coll_name(sl_comm_impl(b->c));
    r.dtype = sl_dtype_name(b->t);
    r.backend = sl_backend_name(b->be);
    sl_result_param_str(&r, "op", sl_collective_name(op_coll[b->op]));
    if (b->op != OP_ALLGATHER && b->op != OP_BROADCAST)
        sl_result_param_str(&r, "redop", sl_redop_name((sl_redop)opt_redop));
    sl_result_param_str(&r, "place", b->inplace ? "in" : "out");
    sl_result_param_str(&r, "mode", mode);
    sl_result_param_num(&r, "bytes", (double)b->bytes);
    sl_result_param_num(&r, "count", (double)b->count);
    sl_result_param_num(&r, "ranks", ctx->nranks);
    sl_result_param_str(&r, "buffers", opt_cold ? "cold" : "warm");
    sl_result_param_num(&r, "buffer_sets", b->nsets);
    if (sl_comm_impl(b->c) != SL_COLL_MPI && sl_comm_impl(b->c) != SL_COLL_NCCL)
        sl_result_param_num(&r, "segment_bytes", (double)sl_comm_segment(b->c));
    if (b->op == OP_BROADCAST) sl_result_param_num(&r, "root", b->root);
    char grid[32];
    if (sl_comm_impl(b->c) == SL_COLL_TORUS)
        sl_result_param_str(&r, "torus_grid", grid_name(b->c, grid, sizeof grid));
    if (sl_comm_torus_bidir(b->c)) sl_result_param_num(&r, "torus_bidir", 1);
    if (sl_comm_impl(b->c) == SL_COLL_DIRECT)
        sl_result_param_num(&r, "max_inflight", sl_comm_max_inflight(b->c));
    sl_result_set_time(&r, st);
    sl_result_param_num(&r, "iterations", iters);
    double algbw = (double)b->bytes / st->median / 1e9;
    sl_result_metric(&r, "algbw", algbw, "GB/s");
    sl_result_metric(&r, "busbw", algbw * bus_factor(b->op, ctx->nranks), "GB/s");
    /* the same from OSU's statistic: nccl-tests' busbw in throughput mode */
    double algbw_avg = (double)b->bytes / st->rank_mean / 1e9;
    sl_result_metric(&r, "algbw_rank_mean", algbw_avg, "GB/s");
    sl_result_metric(&r, "busbw_rank_mean", algbw_avg * bus_factor(b->op, ctx->nranks), "GB/s");
    if (sl_comm_impl(b->c) == SL_COLL_SHM && b->op == OP_ALLREDUCE && ctx->nranks > 1) {
        /* no message: the time is memory traffic. All of it (traffic_per_rank) includes the
         * window's, which stays in cache; the bound is what must reach memory / copy bandwidth */
        double traffic = sl_coll_shm_traffic(ctx->nranks, (double)b->bytes);
        double memory = sl_coll_shm_memory_traffic((double)b->bytes);
        sl_result_metric(&r, "traffic_per_rank", traffic, "B");
        sl_result_metric(&r, "memory_traffic_per_rank", memory, "B");
        sl_result_metric(&r, "bound_time", memory / (b->membw * 1e9), "s");
        sl_result_metric(&r, "of_bound", memory / (b->membw * 1e9) / st->median, "ratio");
    }
    /* the MPI library's and NCCL's scratch is their own: not observable */
    int opaque = sl_comm_impl(b->c) == SL_COLL_MPI || sl_comm_impl(b->c) == SL_COLL_NCCL;
    sl_result_metric(&r, "scratch_bytes", opaque ? NAN : b->scratch, "B");
    sl_result_metric(&r, "sent_bytes", opaque ? NAN : b->sent, "B");
    snprintf(r.headline, sizeof r.headline, "busbw");
    gate_metric(ctx, b, mode, st, algbw * bus_factor(b->op, ctx->nranks), &r);
    if (ref) { /* a size with a reference loop */
        double h = st->rank_mean / ref->rank_mean - 1, hm = st->median / ref->median - 1;
        sl_result_metric(&r, "reference_avg", ref->rank_mean, "s");
        sl_result_metric(&r, "reference_median", ref->median, "s");
        sl_result_metric(&r, "harness_overhead", h, "ratio");
        sl_result_metric(&r, "harness_overhead_median", hm, "ratio");
        note_overhead(&overhead[0], h, b);
        note_overhead(&overhead[1], hm, b);
        if (corelat.active) sl_result_metric(&r, "core_rtt", rtt, "s");
    }
    if (cs == SL_CHECK_SKIPPED) sl_result_check(&r, cs, 0, NULL);
    else sl_result_check(&r, cs, err, "%s", msg);
    sl_result_emit(ctx, &r);
}

/* Runs one implementation at one placement and size, in every mode asked for: its check, then
 * its timed rows; the point goes into the implementation's series. */
static void run_config(sl_ctx *ctx, sl_comm *c, sl_backend be, sl_dtype t, char *arena,
                       size_t arena_bytes, int place, size_t size, int si, int nsizes,
                       double membw, series *ser)
{
    size_t es = sl_dtype_size(t), nr = (size_t)ctx->nranks;
    int per_rank = opt_op == OP_REDUCE_SCATTER || opt_op == OP_ALLGATHER;
    static unsigned check_round;
    bench b = {.ctx = ctx, .c = c, .be = be, .t = t, .op = opt_op,
               .inplace = place == PLACE_IN, .root = (int)opt_root, .arena = arena,
               .membw = membw, .si = si};
    b.count = size / es / (per_rank ? nr : 1);
    b.bytes = b.count * es * (per_rank ? nr : 1);
    b.half = (b.bytes + 4095) & ~(size_t)4095;
    b.stride = 2 * b.half;
    b.nsets = opt_cold ? (int)(arena_bytes / b.stride) : 1;
    if (b.nsets > 64) b.nsets = 64;

    sl_check_status cs = SL_CHECK_SKIPPED;
    double err = 0;
    char msg[200] = "";
    /* Under the simulator, large buffers are folded (sl_sim.h): their contents are not
     * real, so the check runs the same call on a real set of the same size where one
     * fits under $SL_SIM_FOLD, and is skipped (said once) where none does. */
    static int said_folded;
    char *real_set = NULL;
    sl_sim_sampling(0); /* the checked call computes every sum (sl_sim.h) */
    if (!sl_sim_real(arena, b.stride) && !sl_sim_folds(b.stride))
        b.arena = real_set = sl_k_malloc(be, SL_MEM_COMM, b.stride);
    if (ctx->opt.check && !sl_sim_real(b.arena, b.stride)) {
        if (!said_folded++)
            sl_note(ctx, "%zu B and up: buffers folded by the simulator (SL_SIM_FOLD=%zu): "
                         "timed, not checked", b.bytes, sl_sim_fold_bytes());
    } else if (ctx->opt.check) {
        long wrong = check(&b, ++check_round, &err, msg, sizeof msg);
        cs = wrong ? SL_CHECK_FAIL : SL_CHECK_PASS;
    }
    b.arena = arena;
    buffers(&b, b.next, &b.s, &b.r);
    sl_k_free(be, real_set);
    /* Under the simulator with sampling the timed calls' sums may be sampled: no check
     * reads them. */
    sl_sim_sampling(1);
    /* the scratch of one operation, from none: the algorithms keep theirs between calls */
    sl_comm_scratch_free(b.c);
    unsigned long long sent0 = sl_comm_bytes_sent(b.c);
    one_op(&b);
    /* and the bytes it sent through the suite's transport: hier counts only what crossed
     * between nodes, shm sends none */
    double scratch_sent[2] = {(double)sl_comm_scratch_bytes(b.c),
                              (double)(sl_comm_bytes_sent(b.c) - sent0)}, most[2];
    SL_CHECK_MPI(MPI_Allreduce(scratch_sent, most, 2, MPI_DOUBLE, MPI_MAX, ctx->comm));
    b.scratch = most[0];
    b.sent = most[1];
    for (int k = 0; k < (int)ctx->opt.warmup; k++) one_op(&b);
    int iters = iterations_for(ctx, &b);
    sl_stats st;
    if (opt_modes & MODE_LATENCY) {
        sl_stats ref;
        double rtt = NAN;
        int referenced = reference_size(si, nsizes);
        if (referenced) latency_with_reference(&b, iters, &st, &ref, &rtt);
        else sl_time_loop_n(ctx, 0, iters, body_latency, &b, &st);
        emit_row(ctx, &b, "latency", &st, iters, cs, err, msg, referenced ? &ref : NULL, rtt);
        if (place == PLACE_OUT || opt_op == OP_BROADCAST || !(opt_places & PLACE_OUT)) {
            ser->S[ser->n] = (double)b.bytes;
            ser->t_lat[ser->n] = st.median;
        }
    }
    if (opt_modes & MODE_THROUGHPUT) {
        b.nops = iters;
        sl_time_loop_n(ctx, 0, (int)opt_reps, body_throughput, &b, &st);
        sl_stats_scale(&st, 1.0 / iters);
        emit_row(ctx, &b, "throughput", &st, iters * (int)opt_reps, cs, err, msg, NULL, NAN);
    }
    if (place == PLACE_OUT || opt_op == OP_BROADCAST || !(opt_places & PLACE_OUT)) {
        if (!(opt_modes & MODE_LATENCY)) {
            ser->S[ser->n] = (double)b.bytes;
            ser->t_lat[ser->n] = st.median;
        }
        ser->busbw[ser->n] = (double)b.bytes / st.median / 1e9 * bus_factor(opt_op, ctx->nranks);
        ser->n++;
    }
    /* the next implementation runs before this one's next size: its scratch goes */
    sl_comm_scratch_free(b.c);
    sl_sim_sampling(0);
    ser->ran = 1;
}

/* Memory bandwidth per rank, every rank copying at once on one thread (kernels/probe.h): the
 * ceiling for data that must pass through memory, which on one node is how every message
 * travels. STREAM counts a copy as reading and writing the bytes. */
static double memory_bandwidth(sl_ctx *ctx, size_t bytes)
{
    sl_probe p;
    sl_probe_init(&p, SL_PROBE_COPY, SL_BACKEND_CPU, bytes, 1);
    sl_stats st;
    double bw = sl_probe_run(ctx, &p, 2, 5, &st) / st.median / 1e9;
    sl_result r;
    sl_probe_result(ctx, &p, &st, &r, "memcpy", "copy_bw_per_rank", bw);
    sl_result_param_str(&r, "mode", "probe");
    sl_result_param_num(&r, "bytes", (double)bytes);
    sl_result_emit(ctx, &r);
    sl_probe_free(&p);
    return bw;
}

/* The reduction's time per byte of vector (the model's gamma), every rank at once on one
 * thread: the algorithms' local step (sl_reduce_host: two vectors into a third) at the sweep's
 * largest size, at most 64 MiB. NAN under the simulator, which charges the sums no time. */
typedef struct gamma_arg {
    void *dst, *a, *b;
    size_t n;
    sl_dtype t;
} gamma_arg;

static void body_reduce(void *arg)
{
    gamma_arg *g = arg;
    sl_reduce_host(g->dst, g->a, g->b, g->n, g->t, (sl_redop)opt_redop);
}

static double reduction_gamma(sl_ctx *ctx, sl_dtype t, size_t bytes)
{
    if (sl_sim_active()) return NAN;
    size_t es = sl_dtype_size(t);
    if (bytes > ((size_t)64 << 20)) bytes = (size_t)64 << 20;
    gamma_arg g = {.n = bytes / es ? bytes / es : 1, .t = t};
    g.dst = calloc(g.n, es), g.a = calloc(g.n, es), g.b = calloc(g.n, es); /* zeros: no subnormals */
    if (!g.dst || !g.a || !g.b) SL_FATAL("out of memory for the reduction probe of %zu bytes", bytes);
    sl_stats st;
    sl_time_loop_n(ctx, 1, 5, body_reduce, &g, &st);
    free(g.dst), free(g.a), free(g.b);
    return st.median / (double)(g.n * es);
}

static void summary(sl_ctx *ctx, series *ser, sl_comm **comms, double membw, double gamma)
{
    sl_note(ctx, "model t = alpha + beta*S (least squares on relative error, %s sweep, %s)",
            (opt_modes & MODE_LATENCY) ? "latency" : "throughput",
            opt_op == OP_BROADCAST ? "in place" : (opt_places & PLACE_OUT) ? "out of place" : "in place");
    if (fewest_iters)
        sl_note(ctx, "iterations: -n %lld, fewer where one operation is slow (a %.2f s budget per "
                     "configuration, at least 3; down to %d here): the iters column has each count "
                     "(throughput rows: --reps %lld times it)",
                ctx->opt.iters, TIME_BUDGET_S, fewest_iters, opt_reps);
    sl_note(ctx, "%-7s %11s %11s %9s %8s %12s %11s %9s %s", "coll", "alpha_us", "1/beta_GB/s",
            "fit_err%", "lat_us", "plateau_GB/s", "of_membw%", "fastest", "");
    for (int i = 0; i < SL_NCOLLS; i++) {
        series *s = &ser[i];
        if (!s->ran || s->n == 0) continue;
        double alpha, beta, maxrel;
        sl_fit_alpha_beta(s->S, s->t_lat, s->n, &alpha, &beta, &maxrel);
        /* Sizes at which this implementation had the lowest latency of those run. */
        char wins[160] = "";
        size_t wl = 0;
        for (int k = 0; k < s->n; k++) {
            int best = 1;
            for (int j = 0; j < SL_NCOLLS; j++)
                if (j != i && ser[j].ran && k < ser[j].n && ser[j].t_lat[k] < s->t_lat[k]) best = 0;
            if (best && wl < sizeof wins - 16)
                wl += (size_t)snprintf(wins + wl, sizeof wins - wl, "%s%.0f", wl ? "," : "", s->S[k]);
        }
        if (alpha < 0)
            sl_note(ctx, "%s: alpha < 0: the sweep does not pin the latency down (start it at a "
                         "smaller -b)", sl_coll_name(i));
        double plateau = s->busbw[s->n - 1];
        if (s->n < 2) /* a line needs two sizes: say so rather than print nan */
            sl_note(ctx, "%-7s %11s %11s %9s %8.2f %12.3f %11.1f %9s %s (one size: no alpha-beta fit; "
                         "give -b < -e)", sl_coll_name(i), "n/a", "n/a", "n/a", s->t_lat[0] * 1e6,
                    plateau, 100 * plateau / membw, wins[0] ? "at" : "never", wins);
        else
            sl_note(ctx, "%-7s %11.2f %11.3f %9.1f %8.2f %12.3f %11.1f %9s %s", sl_coll_name(i),
                    alpha * 1e6, 1.0 / beta / 1e9, 100 * maxrel, s->t_lat[0] * 1e6, plateau,
                    100 * plateau / membw, wins[0] ? "at" : "never", wins);
        int p2 = 1;
        while (2 * p2 <= ctx->nranks) p2 *= 2;
        if (i == SL_COLL_RHD && p2 < ctx->nranks && opt_op == OP_ALLREDUCE) {
            double S = s->S[s->n - 1];
            char sgamma[64] = "0 (simulated: the sums cost no time)";
            if (isfinite(gamma)) snprintf(sgamma, sizeof sgamma, "%.1f us (the reduction probe)", S * gamma * 1e6);
            sl_note(ctx, "rhd on %d ranks: the fold (%d rank%s give%s %s vector to a neighbour and "
                         "get%s the result back) costs 2 alpha + 2 S beta + S gamma by the model, "
                         "beyond %d ranks' schedule; at %.0f B, S gamma = %s; the sent column has "
                         "the extra S bytes", ctx->nranks,
                    ctx->nranks - p2, ctx->nranks - p2 == 1 ? "" : "s",
                    ctx->nranks - p2 == 1 ? "s" : "", ctx->nranks - p2 == 1 ? "its" : "their",
                    ctx->nranks - p2 == 1 ? "s" : "", p2, S, sgamma);
        }
        if (i == SL_COLL_SHM && opt_op == OP_ALLREDUCE && ctx->nranks > 1) {
            double S = s->S[s->n - 1], bound = sl_coll_shm_memory_traffic(S) / (membw * 1e9);
            double t = S / (plateau / bus_factor(opt_op, ctx->nranks) * 1e9);
            sl_note(ctx, "shm at %.0f B: %.1f us against its memory bound %.1f us (2 x S per rank, "
                         "its input read and its result written, at %.2f GB/s; the other "
                         "(3 - 2/%d) x S pass through the window in cache): %.0f%% of the bound",
                    S, t * 1e6, bound * 1e6, membw, ctx->nranks, 100 * bound / t);
        }

        /* The analytic model's terms: alpha per step, and the link's bandwidth from beta over the
         * bytes each rank sends (the ring, direct and the torus send the same 2(n-1)/n S). */
        int steps = 0, in_flight = 0;
        double frac = NAN, per_step = NAN, link_bw = NAN;
        char grid[32] = "";
        if (s->n < 2 || !comms[i] || !model_shape(comms[i], opt_op, &steps, &in_flight, &frac)) {
            steps = 0; /* no fit, or no analytic model */
        } else {
            per_step = alpha / steps;
            link_bw = frac / beta / 1e9;
            if (i == SL_COLL_TORUS) grid_name(comms[i], grid, sizeof grid);
            sl_note(ctx, "%-7s analytic: %d step%s%s%s%s%s x %.2f us + %.3f S / %.3f GB/s (%d message%s in "
                         "flight per step; each rank sends %.3f S)", sl_coll_name(i), steps,
                    steps == 1 ? "" : "s", grid[0] ? " (grid " : "", grid,
                    comms[i] && sl_comm_torus_bidir(comms[i]) ? ", bidirectional" : "",
                    grid[0] ? ")" : "",
                    per_step * 1e6, frac, link_bw, in_flight, in_flight == 1 ? "" : "s", frac);
        }

        sl_result r;
        sl_result_init(ctx, &r, "model");
        r.collective = sl_coll_name(i);
        sl_result_param_str(&r, "op", sl_collective_name(op_coll[opt_op]));
        sl_result_param_num(&r, "ranks", ctx->nranks);
        if (steps) {
            if (grid[0]) sl_result_param_str(&r, "torus_grid", grid);
            if (sl_comm_torus_bidir(comms[i])) sl_result_param_num(&r, "torus_bidir", 1);
            sl_result_param_num(&r, "steps", steps);
            sl_result_param_num(&r, "in_flight", in_flight);
            sl_result_metric(&r, "alpha_per_step", per_step, "s");
            sl_result_metric(&r, "link_bw", link_bw, "GB/s");
        }
        sl_result_param_num(&r, "sizes", s->n);
        sl_result_metric(&r, "alpha", alpha, "s");
        sl_result_metric(&r, "beta", beta, "s/B");
        sl_result_metric(&r, "beta_bw", 1.0 / beta / 1e9, "GB/s");
        sl_result_metric(&r, "fit_max_rel_err", maxrel, "ratio");
        sl_result_metric(&r, "small_latency", s->t_lat[0], "s");
        sl_result_metric(&r, "small_bytes", s->S[0], "B");
        sl_result_metric(&r, "plateau_busbw", plateau, "GB/s");
        sl_result_metric(&r, "plateau_bytes", s->S[s->n - 1], "B");
        sl_result_metric(&r, "membw_per_rank", membw, "GB/s");
        sl_result_metric(&r, "gamma", gamma, "s/B");
        sl_result_metric(&r, "plateau_of_membw", plateau / membw, "ratio");
        /* The gate: the plateau against the library's at the same (largest) size, measured
         * seconds apart in the size-by-size sweep, as each row's vs_mpi; the library's own
         * against the copy probe, as its rows' of_copy. Not the absolute plateau: it moved by
         * 12% between identical runs here when the machine's memory did, which this cancels. */
        const series *lib = &ser[SL_COLL_MPI];
        if (i != SL_COLL_MPI && i != SL_COLL_NCCL && lib->ran && lib->n == s->n && lib->busbw[s->n - 1] > 0) {
            sl_result_metric(&r, "plateau_vs_mpi", plateau / lib->busbw[s->n - 1], "ratio");
            sl_result_gate(&r, "plateau_vs_mpi");
        } else if (i == SL_COLL_MPI && isfinite(plateau / membw) && ctx->nranks > 1) {
            sl_result_gate(&r, "plateau_of_membw");
        }
        snprintf(r.headline, sizeof r.headline, "plateau_busbw");
        sl_result_check(&r, SL_CHECK_NONE, 0, "fitted model: nothing to check");
        int ncols = ctx->ncols; /* the jsonl row only: the notes above are its table */
        ctx->ncols = 0;
        sl_result_emit(ctx, &r);
        ctx->ncols = ncols;
    }
}

int main(int argc, char **argv)
{
    sl_ctx ctx;
    sl_init(&ctx, &program, argc, argv);

    char why[256] = "";
    int be = sl_k_backend_resolve(ctx.opt.backend, why, sizeof why);
    if (be < 0) SL_FATAL("-B %s: %s", sl_backend_name(ctx.opt.backend), why);
    sl_mem_space space = be == SL_BACKEND_CUDA ? SL_MEM_DEVICE : SL_MEM_HOST;
    if (space == SL_MEM_DEVICE) { /* sl_init gave each rank of a node its own GPU */
        sl_note(&ctx, "one GPU per rank of a node (rank 0: GPU %d)", sl_coll_bind_device(ctx.comm));
        /* which path the mpi rows and the suite's algorithms time: the two differ by the copies */
        int stage;
        sl_coll_env_stage(&stage);
        sl_note(&ctx, "device buffers through MPI: %s",
                sl_coll_mpi_takes_device() ? "handed to MPI directly (CUDA-aware)"
                : stage ? "staged through pinned host memory (SL_COLL_STAGE=1)"
                        : "staged through pinned host memory (MPI is not CUDA-aware)");
    }

    /* Sizes: -b, -b*f, ... <= -e (checked by validate()). */
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    for (size_t s = ctx.opt.minbytes; s <= ctx.opt.maxbytes && nsizes < MAX_SIZES;
         s *= (size_t)ctx.opt.stepfactor)
        sizes[nsizes++] = s;

    /* The buffers: the largest size's send and receive buffers; with --cold, a rotation pool
     * of at least four times the last-level cache so that a small message's buffers are cold
     * when it comes round again. Outside the checked set the pool holds zeros: the cost of an
     * addition does not depend on its operands, except for subnormals, which zeros and the
     * small integers of the checks cannot produce. */
    size_t arena_bytes = 2 * ((ctx.opt.maxbytes + 4095) & ~(size_t)4095);
    size_t llc = sl_env_llc(NULL, NULL), cold = opt_pool; /* the manifest's cpu.llc.bytes */
    if (!cold) { /* an unknown cache: the largest default pool */
        cold = llc ? 4 * llc : (size_t)256 << 20;
        if (cold < ((size_t)64 << 20)) cold = (size_t)64 << 20;
        if (cold > ((size_t)256 << 20)) cold = (size_t)256 << 20;
    }
    if (opt_cold && arena_bytes < cold) arena_bytes = cold;

    /* A simulated host has no memory bandwidth to measure: the simulator times the network. */
    double membw = sl_sim_active() ? NAN
                                   : memory_bandwidth(&ctx, ctx.opt.maxbytes > cold / 4 ? ctx.opt.maxbytes : cold / 4);
    char pool[200] = "warm: one pair reused, as OSU and nccl-tests";
    if (opt_cold && llc)
        snprintf(pool, sizeof pool, "cold: rotated through %zu MiB (last-level cache %zu %s%s)",
                 arena_bytes >> 20, llc % (1 << 20) ? llc >> 10 : llc >> 20, llc % (1 << 20) ? "KiB" : "MiB",
                 arena_bytes < llc ? ": smaller than the cache, so not fully cold; see --pool" : "");
    else if (opt_cold)
        snprintf(pool, sizeof pool, "cold: rotated through %zu MiB (last-level cache unknown: "
                                    "no sysfs cache description)", arena_bytes >> 20);
    sl_note(&ctx, "%s of %s over %d rank%s, %s buffers %s; memory copy %.2f GB/s per rank",
            sl_collective_name(op_coll[opt_op]),
            opt_op == OP_ALLGATHER || opt_op == OP_BROADCAST ? "data" : sl_redop_name((sl_redop)opt_redop),
            ctx.nranks, ctx.nranks == 1 ? "" : "s", sl_backend_name((sl_backend)be), pool, membw);
    sl_note(&ctx, "time: median of each iteration's slowest rank; avg: OSU's mean of per-rank "
                  "means (osu_allreduce: latency rows' avg; nccl-tests: throughput rows' avg)");
    {   /* the segment the suite's algorithms pipeline their messages in (rows: segment_bytes) */
        size_t seg = opt_segment;
        if (!seg && sl_coll_env_segment(&seg) != 0) seg = 0;
        if (seg)
            sl_note(&ctx, "segment: %zu %s for ring, tree, dbtree, rhd, direct and torus (--segment)",
                    seg % 1024 ? seg : seg >> 10, seg % 1024 ? "B" : "KiB");
    }
    int vnode = 0; /* hier's virtual nodes (a testing aid), also in the manifest */
    if (sl_coll_env_ranks_per_node(&vnode) == 0 && vnode > 0)
        sl_note(&ctx, "SL_COLL_RANKS_PER_NODE=%d: hier splits each host into virtual nodes of %d "
                      "consecutive ranks (%d here); its sent column is the bytes between them",
                vnode, vnode, (ctx.nranks + vnode - 1) / vnode);
    if (ctx.nranks == 1) sl_note(&ctx, "one rank: busbw is not applicable (null)");
    if (sl_sim_active())
        sl_note(&ctx, "simulated hosts: no memory probe (of_membw%% is nan); scripts/simulate "
                      "charges no time for the reductions' arithmetic: the times are the network's");
    if (sl_sim_samples())
        sl_note(&ctx, "compute sampled: each rank adds up its first %d segments of each length, "
                      "then skips the sums of the timed calls (their results are not read); the "
                      "checked call computes every sum", sl_sim_samples());
    /* Unbound ranks can be put on one core by the scheduler for a while, and a message then
     * waits for a time slice: milliseconds where microseconds were meant. Say so. */
    sl_env_local me;
    sl_env_local_capture(&me);
    int most_bound = me.nbound_cpus;
    SL_CHECK_MPI(MPI_Allreduce(&me.nbound_cpus, &most_bound, 1, MPI_INT, MPI_MAX, ctx.comm));
    if (most_bound > 1 && !sl_oversubscribed(&ctx, 1) && !sl_sim_active()) /* binding can work: suggest it */
        sl_note(&ctx, "ranks are not bound to one core each (up to %d CPUs): small-message times "
                      "may include scheduler delays; for latency, launch with --bind-to core",
                most_bound);
    double gamma[SL_NDTYPES]; /* the model's gamma per dtype, for the reductions' notes */
    for (int t = 0; t < SL_NDTYPES; t++) {
        gamma[t] = NAN;
        if (!(ctx.opt.dtypes & (1u << t)) || (opt_op != OP_ALLREDUCE && opt_op != OP_REDUCE_SCATTER))
            continue;
        gamma[t] = reduction_gamma(&ctx, (sl_dtype)t, sizes[nsizes - 1]);
        if (isfinite(gamma[t]))
            sl_note(&ctx, "reduction (%s %s, every rank at once, %zu B vectors): gamma = %.3f ns/B, "
                          "1/gamma = %.2f GB/s", sl_dtype_name(t), sl_redop_name((sl_redop)opt_redop),
                    sizes[nsizes - 1] < ((size_t)64 << 20) ? sizes[nsizes - 1] : (size_t)64 << 20,
                    gamma[t] * 1e9, 1 / gamma[t] / 1e9);
    }
    if (reference_size(0, nsizes) && (opt_modes & MODE_LATENCY)) {
        char at[160] = "";
        size_t l = 0;
        for (int si = 0; si < nsizes && l < sizeof at - 24; si++)
            if (reference_size(si, nsizes))
                l += (size_t)snprintf(at + l, sizeof at - l, "%s%zu", l ? "," : "", sizes[si]);
        sl_note(&ctx, "harness_overhead: latency rows at %s B are also timed by a plain loop "
                      "(MPI_Wtime around each call, a barrier after it, no harness code between), "
                      "in %d chunks alternating with the row's; the worst is said after the table",
                at, REFERENCE_CHUNKS);
    }
    sl_corelat_open(&corelat, ctx.comm);
    if (corelat.active) /* the machine a run starts on, before any row: docs/results.md */
        sl_note(&ctx, "core_rtt: %.3f us at the start (one cache line between ranks 0 and 1 and "
                      "back, no MPI call; small-message times move with it)",
                sl_corelat_measure(&corelat, 1000) * 1e6);
    sl_table_begin(&ctx, columns, (int)(sizeof columns / sizeof columns[0]));

    char *arena = sl_k_malloc((sl_backend)be, SL_MEM_COMM, arena_bytes);
    int first_dtype = 0; /* notes said once, at the first dtype */
    while (!(ctx.opt.dtypes & (1u << first_dtype))) first_dtype++;
    for (int t = 0; t < SL_NDTYPES; t++) {
        if (!(ctx.opt.dtypes & (1u << t))) continue;
        series ser[SL_NCOLLS];
        memset(ser, 0, sizeof ser);
        memset(mpi_time, 0, sizeof mpi_time); /* this dtype's library times, from none */
        /* Every implementation asked for and available, the library first (SL_COLL_MPI is 0) */
        sl_comm *comms[SL_NCOLLS] = {0};
        for (int i = 0; i < SL_NCOLLS; i++) {
            if (!(ctx.opt.colls & (1u << i))) continue;
            if (!sl_coll_supports((sl_coll)i, op_coll[opt_op])) {
                sl_note(&ctx, "%s: does not provide %s; skipped", sl_coll_name(i),
                        sl_collective_name(op_coll[opt_op]));
                continue;
            }
            char why[160];
            if (sl_coll_available((sl_coll)i, space, why, sizeof why)) {
                sl_note(&ctx, "%s: %s; skipped", sl_coll_name(i), why);
                continue;
            }
            int rc = sl_comm_create(&comms[i], ctx.comm, (sl_coll)i, space);
            if (rc == SL_COLL_ENOTSUP) { /* shm over several nodes */
                comms[i] = NULL;
                sl_note(&ctx, "%s: needs every rank on one node; skipped", sl_coll_name(i));
                continue;
            }
            if (rc) SL_FATAL("%s: %s", sl_coll_name(i), sl_coll_strerror(rc));
            if (opt_segment) sl_comm_set_segment(comms[i], opt_segment);
            if (i == SL_COLL_DBTREE && ctx.nranks > 1 && t == first_dtype) {
                char shape[1024];
                sl_coll_dbtree_describe(ctx.nranks, shape, sizeof shape);
                sl_note(&ctx, "dbtree on %d ranks: %s", ctx.nranks, shape);
            }
        }
        /* Size by size, both placements and every implementation in turn at each: the
         * library's time at a size, which the own algorithms' vs_mpi divides by, is taken
         * seconds before theirs rather than a whole sweep earlier, and the in-place rows of a
         * size seconds after its out-of-place ones rather than after the largest sizes, so that
         * what the machine did in between (a neighbour's job, a change of clock, what the
         * largest messages left behind) falls on all of them alike. */
        for (int si = 0; si < nsizes; si++)
            for (int place = PLACE_OUT; place <= PLACE_IN; place <<= 1) {
                if (!(opt_places & (unsigned)place)) continue;
                if (opt_op == OP_BROADCAST && place == PLACE_OUT) continue; /* one buffer: in place */
                for (int i = 0; i < SL_NCOLLS; i++) {
                    if (!comms[i]) continue;
                    /* the libraries are the gate's ceilings: SL_TEST_SLOWDOWN slows only the
                     * suite's own algorithms */
                    int library = i == SL_COLL_MPI || i == SL_COLL_NCCL;
                    if (library) sl_slowdown_ceiling(1);
                    run_config(&ctx, comms[i], (sl_backend)be, (sl_dtype)t, arena, arena_bytes, place,
                               sizes[si], si, nsizes, membw, &ser[i]);
                    if (library) sl_slowdown_ceiling(0);
                }
            }
        summary(&ctx, ser, comms, membw, gamma[t]);
        for (int i = 0; i < SL_NCOLLS; i++)
            if (comms[i]) sl_comm_destroy(comms[i]);
    }
    sl_k_free((sl_backend)be, arena);
    if (overhead[0].n)
        sl_note(&ctx, "harness_overhead (the row against a plain MPI_Wtime loop in this process, "
                      "%d latency rows): worst %+.1f%% on avg (%s), %+.1f%% on the median (%s)",
                overhead[0].n, 100 * overhead[0].worst, overhead[0].where, 100 * overhead[1].worst,
                overhead[1].where);
    if (overhead[0].n && corelat.active)
        sl_note(&ctx, "core_rtt (one cache line between ranks 0 and 1 and back, beside those rows): "
                      "%.3f to %.3f us%s", rtt_lo * 1e6, rtt_hi * 1e6,
                rtt_hi > 1.5 * rtt_lo ? ": the machine's core-to-core latency changed during the "
                                        "run (virtual CPUs moved, or shared): small-message rows "
                                        "timed at different moments are not comparable" : "");
    sl_corelat_close(&corelat);
    return sl_finalize(&ctx);
}
