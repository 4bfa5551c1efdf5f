/* test_coll.c — correctness of every collective of every implementation in sl_coll.h, on the
 * rank count it is started with (t/integration/coll.t runs it on 1..8 ranks).
 *
 * Data are small integers (|v| <= 8) that differ per rank, element and iteration, so sums over
 * eight ranks are exact in f16 and bf16 and any order of additions gives the same bits:
 * results are compared exactly, element by element, with the layer's reference
 * (coll_reference.h, shared with the allreduce benchmark). A wrong offset or chunk, a permutation of blocks or ranks, stale
 * data from the previous iteration or an input clobbered by an out-of-place call all show up as
 * a mismatch. avg is checked against the exact sum divided once, in the type's arithmetic.
 *
 * Every configuration runs twice with different data, in place and out of place, with the
 * default segment and with a tiny one (so that chunks are cut into many pipelined segments,
 * of sizes that do not divide the chunks). One TAP line covers one (implementation,
 * collective, dtype, op); the verdict is agreed by all ranks, and the failing rank prints the
 * first mismatch. Output is rank 0's; the wrapper numbers the lines across rank counts.
 *
 * With a GPU present the same checks also run on device buffers (CUDA builds). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "coll_device.h"
#include "coll_internal.h"
#include "coll_reference.h"

static int g_rank, g_size;
static MPI_Comm g_world; /* the ranks under test: MPI_COMM_WORLD, or --sizes' first k */
static const size_t small_counts[] = {0, 1, 2, 7, 1000};
#define NSMALL (sizeof small_counts / sizeof small_counts[0])
static const size_t large_counts[] = {100003, 1 << 20}; /* a prime above 10^5, and 2^20 */
#define TINY_SEGMENT 24 /* bytes: 6 f32, 3 f64, 12 f16 per segment */

/* ---- data and reference -------------------------------------------------------------- */

/* Rank p's value at element i in iteration it, and the reduction over all ranks as the type
 * would hold it (avg: the exact sum divided once): the layer's reference (coll_reference.h),
 * the one the allreduce benchmark checks against. */
static int val(int p, size_t i, int it) { return sl_coll_ref_value(p, i, (unsigned)it); }
static double expect(size_t i, int it, sl_dtype t, sl_redop op)
{
    return sl_coll_ref_reduce(g_size, i, (unsigned)it, t, op);
}

/* ---- per-rank failure bookkeeping ---------------------------------------------------- */

typedef struct tally {
    int fails;
    char first[256];
} tally;

static void fail(tally *ty, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(tally *ty, const char *fmt, ...)
{
    if (ty->fails++) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ty->first, sizeof ty->first, fmt, ap);
    va_end(ap);
}

/* One TAP line for what ty collected on every rank. */
static void verdict(tally *ty, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verdict(tally *ty, const char *fmt, ...)
{
    char name[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int any = 0;
    MPI_Allreduce(&ty->fails, &any, 1, MPI_INT, MPI_MAX, g_world);
    if (ty->fails) fprintf(stderr, "# np=%d rank %d: %s: %s\n", g_size, g_rank, name, ty->first);
    if (g_rank == 0) ok(any == 0, "np=%d %s", g_size, name);
    memset(ty, 0, sizeof *ty);
}

/* ---- buffers: host memory, or device memory mirrored by host copies ------------------ */

typedef struct bufs {
    sl_comm *c;
    size_t bytes;
    void *h[2]; /* host images */
    void *d[2]; /* what the collective is given: h[] on host comms, device memory otherwise */
} bufs;

static void bufs_init(bufs *b, sl_comm *c, size_t bytes)
{
    b->c = c;
    b->bytes = bytes;
    for (int k = 0; k < 2; k++) {
        b->h[k] = malloc(bytes ? bytes : 1);
        b->d[k] = sl_comm_space(c) == SL_MEM_DEVICE ? sl_cdev_malloc(bytes ? bytes : 1) : b->h[k];
    }
}

static void bufs_free(bufs *b)
{
    for (int k = 0; k < 2; k++) {
        if (b->d[k] != b->h[k]) sl_cdev_free(b->d[k]);
        free(b->h[k]);
    }
}

static void upload(bufs *b)
{
    if (sl_comm_space(b->c) == SL_MEM_DEVICE)
        for (int k = 0; k < 2; k++)
            sl_cdev_memcpy(b->d[k], b->h[k], b->bytes, SL_CDEV_H2D, NULL);
}

static void download(bufs *b)
{
    if (sl_comm_space(b->c) == SL_MEM_DEVICE)
        for (int k = 0; k < 2; k++)
            sl_cdev_memcpy(b->h[k], b->d[k], b->bytes, SL_CDEV_D2H, NULL);
}

/* Garbage that no correct result equals: stale or unwritten elements are caught. */
static void poison(void *p, size_t bytes) { memset(p, 0xA5, bytes); }

/* Element i of a host image, with its device twin's address. */
#define H(b, k, i, t) ((char *)(b)->h[k] + (size_t)(i) * sl_dtype_size(t))
#define D(b, k, i, t) ((void *)((char *)(b)->d[k] + (size_t)(i) * sl_dtype_size(t)))

/* The input of rank p, elements [0, n) of image k, unchanged? (out-of-place calls must not
 * write their input) */
static void check_input(tally *ty, bufs *b, int k, size_t n, size_t first, sl_dtype t, int it,
                        const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (sl_elem_get(b->h[k], i, t) != val(g_rank, first + i, it)) {
            fail(ty, "%s: input element %zu changed to %g", what, i, sl_elem_get(b->h[k], i, t));
            return;
        }
}

/* ---- one call of each collective, checked ------------------------------------------- */

static void do_allreduce(tally *ty, bufs *b, sl_dtype t, sl_redop op, size_t n, int inplace,
                         int it)
{
    sl_comm *c = b->c;
    for (size_t i = 0; i < n; i++) sl_elem_put(b->h[0], i, t, val(g_rank, i, it));
    poison(b->h[1], b->bytes);
    upload(b);
    int rc = sl_coll_allreduce(c, b->d[0], b->d[inplace ? 0 : 1], n, t, op);
    download(b);
    int k = inplace ? 0 : 1;
    if (rc) { fail(ty, "count %zu: rc %d (%s)", n, rc, sl_coll_strerror(rc)); return; }
    for (size_t i = 0; i < n; i++) {
        double want = expect(i, it, t, op), got = sl_elem_get(b->h[k], i, t);
        if (got != want) {
            fail(ty, "count %zu %s seg %zu it %d: element %zu is %g, expected %g", n,
                 inplace ? "in place" : "out of place", sl_comm_segment(c), it, i, got, want);
            return;
        }
    }
    if (!inplace) check_input(ty, b, 0, n, 0, t, it, "allreduce");
}

static void do_reduce_scatter(tally *ty, bufs *b, sl_dtype t, sl_redop op, size_t n,
                              int inplace, int it)
{
    sl_comm *c = b->c;
    size_t total = n * (size_t)g_size, mine = (size_t)g_rank * n;
    for (size_t i = 0; i < total; i++) sl_elem_put(b->h[0], i, t, val(g_rank, i, it));
    poison(b->h[1], b->bytes);
    upload(b);
    void *r = inplace ? D(b, 0, mine, t) : b->d[1];
    int rc = sl_coll_reduce_scatter(c, b->d[0], r, n, t, op);
    download(b);
    if (rc) { fail(ty, "count %zu: rc %d (%s)", n, rc, sl_coll_strerror(rc)); return; }
    const void *res = inplace ? (const void *)H(b, 0, mine, t) : b->h[1];
    for (size_t i = 0; i < n; i++) {
        double want = expect(mine + i, it, t, op), got = sl_elem_get(res, i, t);
        if (got != want) {
            fail(ty, "count %zu %s seg %zu it %d: element %zu is %g, expected %g", n,
                 inplace ? "in place" : "out of place", sl_comm_segment(c), it, i, got, want);
            return;
        }
    }
    if (!inplace) check_input(ty, b, 0, total, 0, t, it, "reduce_scatter");
    /* Out of place, the rest of the receive buffer is not ours to write. */
    static const unsigned char poisoned[8] = {0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5, 0xA5};
    size_t es = sl_dtype_size(t);
    if (!inplace && (n + 1) * es <= b->bytes && memcmp(H(b, 1, n, t), poisoned, es))
        fail(ty, "count %zu: wrote past its block", n);
}

static void do_allgather(tally *ty, bufs *b, sl_dtype t, size_t n, int inplace, int it)
{
    sl_comm *c = b->c;
    size_t mine = (size_t)g_rank * n;
    poison(b->h[1], b->bytes);
    /* Rank p contributes val(p, j, it) for j in its block [p n, p n + n). */
    void *s;
    if (inplace) {
        for (size_t i = 0; i < n; i++) sl_elem_put(b->h[1], mine + i, t, val(g_rank, mine + i, it));
        s = D(b, 1, mine, t);
    } else {
        for (size_t i = 0; i < n; i++) sl_elem_put(b->h[0], i, t, val(g_rank, mine + i, it));
        s = b->d[0];
    }
    upload(b);
    int rc = sl_coll_allgather(c, s, b->d[1], n, t);
    download(b);
    if (rc) { fail(ty, "count %zu: rc %d (%s)", n, rc, sl_coll_strerror(rc)); return; }
    for (size_t j = 0; j < n * (size_t)g_size; j++) {
        double want = val((int)(j / n), j, it), got = sl_elem_get(b->h[1], j, t);
        if (got != want) {
            fail(ty, "count %zu %s seg %zu it %d: element %zu is %g, expected %g", n,
                 inplace ? "in place" : "out of place", sl_comm_segment(c), it, j, got, want);
            return;
        }
    }
    if (!inplace) check_input(ty, b, 0, n, mine, t, it, "allgather");
}

static void do_broadcast(tally *ty, bufs *b, sl_dtype t, size_t n, int root, int it)
{
    sl_comm *c = b->c;
    poison(b->h[0], b->bytes);
    if (g_rank == root)
        for (size_t i = 0; i < n; i++) sl_elem_put(b->h[0], i, t, val(root, i, it));
    upload(b);
    int rc = sl_coll_broadcast(c, b->d[0], n, t, root);
    download(b);
    if (rc) { fail(ty, "count %zu: rc %d (%s)", n, rc, sl_coll_strerror(rc)); return; }
    for (size_t i = 0; i < n; i++) {
        double want = val(root, i, it), got = sl_elem_get(b->h[0], i, t);
        if (got != want) {
            fail(ty, "count %zu root %d seg %zu it %d: element %zu is %g, expected %g", n, root,
                 sl_comm_segment(c), it, i, got, want);
            return;
        }
    }
}

static void do_reduce(tally *ty, bufs *b, sl_dtype t, sl_redop op, size_t n, int root,
                      int inplace, int it)
{
    sl_comm *c = b->c;
    for (size_t i = 0; i < n; i++) sl_elem_put(b->h[0], i, t, val(g_rank, i, it));
    poison(b->h[1], b->bytes);
    upload(b);
    /* Away from the root the receive buffer is not used: pass NULL out of place. */
    void *r = inplace ? b->d[0] : (g_rank == root ? b->d[1] : NULL);
    int rc = sl_coll_reduce(c, b->d[0], r, n, t, op, root);
    download(b);
    if (rc) { fail(ty, "count %zu: rc %d (%s)", n, rc, sl_coll_strerror(rc)); return; }
    if (g_rank == root) {
        const void *res = b->h[inplace ? 0 : 1];
        for (size_t i = 0; i < n; i++) {
            double want = expect(i, it, t, op), got = sl_elem_get(res, i, t);
            if (got != want) {
                fail(ty, "count %zu root %d %s seg %zu it %d: element %zu is %g, expected %g", n,
                     root, inplace ? "in place" : "out of place", sl_comm_segment(c), it, i, got, want);
                return;
            }
        }
    }
    if (!inplace || g_rank != root) check_input(ty, b, 0, n, 0, t, it, "reduce");
}

/* ---- the sweep ----------------------------------------------------------------------- */

/* The segment sizes each configuration runs with: the default, and a tiny one that cuts even
 * the medium count into many segments. */
static size_t segments[2];

static void sweep_collectives(sl_comm *c, const char *space)
{
    const char *impl = sl_coll_name(sl_comm_impl(c));
    size_t maxn = small_counts[NSMALL - 1] * (size_t)g_size;
    bufs b;
    bufs_init(&b, c, maxn * sizeof(double));
    tally ty = {0};

    for (int w = 0; w < SL_NCOS; w++) {
        if (sl_coll_supports(sl_comm_impl(c), (sl_collective)w)) continue;
        /* What an implementation does not provide, it says so (and does nothing). */
        int rc = w == SL_CO_ALLREDUCE        ? sl_coll_allreduce(c, b.d[0], b.d[1], 4, SL_F32, SL_OP_SUM)
                 : w == SL_CO_REDUCE_SCATTER ? sl_coll_reduce_scatter(c, b.d[0], b.d[1], 4, SL_F32, SL_OP_SUM)
                 : w == SL_CO_ALLGATHER      ? sl_coll_allgather(c, b.d[0], b.d[1], 4, SL_F32)
                 : w == SL_CO_BROADCAST      ? sl_coll_broadcast(c, b.d[0], 4, SL_F32, 0)
                                             : sl_coll_reduce(c, b.d[0], b.d[1], 4, SL_F32, SL_OP_SUM, 0);
        if (rc != SL_COLL_ENOTSUP) fail(&ty, "rc %d, expected SL_COLL_ENOTSUP", rc);
        sl_coll_req *q = (sl_coll_req *)&ty; /* must come back NULL */
        rc = w == SL_CO_ALLREDUCE        ? sl_coll_iallreduce(c, b.d[0], b.d[1], 4, SL_F32, SL_OP_SUM, &q)
             : w == SL_CO_REDUCE_SCATTER ? sl_coll_ireduce_scatter(c, b.d[0], b.d[1], 4, SL_F32, SL_OP_SUM, &q)
             : w == SL_CO_ALLGATHER      ? sl_coll_iallgather(c, b.d[0], b.d[1], 4, SL_F32, &q)
                                         : SL_COLL_ENOTSUP;
        if (rc != SL_COLL_ENOTSUP || (w <= SL_CO_ALLGATHER && q)) fail(&ty, "non-blocking: rc %d, expected SL_COLL_ENOTSUP", rc);
        verdict(&ty, "%s %s %s: not provided, says so", space, impl, sl_collective_name((sl_collective)w));
    }

    for (int t = 0; t < SL_NDTYPES; t++) {
        for (int op = 0; op < SL_NREDOPS; op++) {
            if (sl_coll_supports(sl_comm_impl(c), SL_CO_ALLREDUCE)) {
                for (int it = 0; it < 2; it++)
                    for (int ip = 0; ip < 2; ip++)
                        for (size_t k = 0; k < NSMALL; k++)
                            for (int sg = 0; sg < 2; sg++) {
                                sl_comm_set_segment(c, segments[sg]);
                                do_allreduce(&ty, &b, t, op, small_counts[k], ip, it);
                            }
                verdict(&ty, "%s %s allreduce %s %s", space, impl, sl_dtype_name(t), sl_redop_name(op));
            }
            if (sl_coll_supports(sl_comm_impl(c), SL_CO_REDUCE_SCATTER)) {
                for (int it = 0; it < 2; it++)
                    for (int ip = 0; ip < 2; ip++)
                        for (size_t k = 0; k < NSMALL; k++)
                            for (int sg = 0; sg < 2; sg++) {
                                sl_comm_set_segment(c, segments[sg]);
                                do_reduce_scatter(&ty, &b, t, op, small_counts[k], ip, it);
                            }
                verdict(&ty, "%s %s reduce_scatter %s %s", space, impl, sl_dtype_name(t), sl_redop_name(op));
            }
            if (sl_coll_supports(sl_comm_impl(c), SL_CO_REDUCE)) {
                for (int it = 0; it < 2; it++)
                    for (int ip = 0; ip < 2; ip++)
                        for (size_t k = 0; k < NSMALL; k++)
                            for (int sg = 0; sg < 2; sg++) {
                                sl_comm_set_segment(c, segments[sg]);
                                /* root 0, and the last rank (a root other than 0) */
                                do_reduce(&ty, &b, t, op, small_counts[k], (it + ip) % 2 ? g_size - 1 : 0, ip, it);
                            }
                verdict(&ty, "%s %s reduce %s %s", space, impl, sl_dtype_name(t), sl_redop_name(op));
            }
        }
        if (sl_coll_supports(sl_comm_impl(c), SL_CO_ALLGATHER)) {
            for (int it = 0; it < 2; it++)
                for (int ip = 0; ip < 2; ip++)
                    for (size_t k = 0; k < NSMALL; k++)
                        for (int sg = 0; sg < 2; sg++) {
                            sl_comm_set_segment(c, segments[sg]);
                            do_allgather(&ty, &b, t, small_counts[k], ip, it);
                        }
            verdict(&ty, "%s %s allgather %s", space, impl, sl_dtype_name(t));
        }
        if (sl_coll_supports(sl_comm_impl(c), SL_CO_BROADCAST)) {
            for (int it = 0; it < 2; it++)
                for (int root = 0; root < g_size; root++)
                    for (size_t k = 0; k < NSMALL; k++)
                        for (int sg = 0; sg < 2; sg++) {
                            sl_comm_set_segment(c, segments[sg]);
                            do_broadcast(&ty, &b, t, small_counts[k], root, it);
                        }
            verdict(&ty, "%s %s broadcast %s (every root)", space, impl, sl_dtype_name(t));
        }
    }
    sl_comm_set_segment(c, segments[0]);
    bufs_free(&b);
}

/* Large counts: all-reduce for every implementation, with one op per dtype so that every op
 * and every dtype meets a prime count and 2^20; reduce-scatter and all-gather on the prime. */
static void sweep_large(sl_comm *c, const char *space)
{
    static const struct { sl_dtype t; sl_redop op; } pick[] = {
        {SL_F32, SL_OP_SUM}, {SL_F64, SL_OP_MAX}, {SL_F16, SL_OP_AVG}, {SL_BF16, SL_OP_MIN}};
    const char *impl = sl_coll_name(sl_comm_impl(c));
    size_t maxn = large_counts[1];
    if (large_counts[0] * (size_t)g_size > maxn) maxn = large_counts[0] * (size_t)g_size;
    bufs b;
    bufs_init(&b, c, maxn * sizeof(double));
    tally ty = {0};
    for (size_t p = 0; p < sizeof pick / sizeof pick[0]; p++) {
        if (!sl_coll_supports(sl_comm_impl(c), SL_CO_ALLREDUCE)) break;
        for (size_t k = 0; k < 2; k++)
            do_allreduce(&ty, &b, pick[p].t, pick[p].op, large_counts[k], (int)(k + p) % 2, (int)p % 2);
        verdict(&ty, "%s %s allreduce %s %s, counts 100003 and 2^20", space, impl,
                sl_dtype_name(pick[p].t), sl_redop_name(pick[p].op));
    }
    if (sl_coll_supports(sl_comm_impl(c), SL_CO_REDUCE_SCATTER)) {
        do_reduce_scatter(&ty, &b, SL_F32, SL_OP_SUM, large_counts[0], 0, 0);
        do_reduce_scatter(&ty, &b, SL_BF16, SL_OP_MAX, large_counts[0], 1, 1);
        verdict(&ty, "%s %s reduce_scatter count 100003 per rank", space, impl);
    }
    if (sl_coll_supports(sl_comm_impl(c), SL_CO_ALLGATHER)) {
        do_allgather(&ty, &b, SL_F16, large_counts[0], 0, 0);
        do_allgather(&ty, &b, SL_F64, large_counts[0], 1, 1);
        verdict(&ty, "%s %s allgather count 100003 per rank", space, impl);
    }
    bufs_free(&b);
}

/* Non-blocking all-reduce: two operations in flight at once (f32 sum in place, bf16 avg out of
 * place) with a blocking one (f64 max) issued while they are, the first driven to completion
 * by test alone, then both finished by wait; all checked like the blocking ones. With a
 * segment of `seg` bytes (0: the default), so that the schedules' steps travel in many
 * segments, each reduced as it arrives. */
static void sweep_nonblocking(sl_comm *c, const char *space, size_t seg)
{
    if (!sl_coll_supports(sl_comm_impl(c), SL_CO_ALLREDUCE)) return;
    size_t seg0 = sl_comm_segment(c);
    if (seg) sl_comm_set_segment(c, seg);
    static const size_t counts[] = {0, 1, 7, 1000, 100003};
    static const sl_dtype dt[3] = {SL_F32, SL_BF16, SL_F64};
    static const sl_redop rop[3] = {SL_OP_SUM, SL_OP_AVG, SL_OP_MAX};
    size_t maxn = 100003;
    tally ty = {0};
    bufs b[3];
    for (int k = 0; k < 3; k++) bufs_init(&b[k], c, maxn * sizeof(double));
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        for (int k = 0; k < 3; k++) { /* k = 0 in place, k = 1 and 2 out of place */
            for (size_t i = 0; i < n; i++) sl_elem_put(b[k].h[0], i, dt[k], val(g_rank, i, k));
            poison(b[k].h[1], b[k].bytes);
            upload(&b[k]);
        }
        sl_coll_req *q[2];
        int rc0 = sl_coll_iallreduce(c, b[0].d[0], b[0].d[0], n, dt[0], rop[0], &q[0]);
        int rc1 = sl_coll_iallreduce(c, b[1].d[0], b[1].d[1], n, dt[1], rop[1], &q[1]);
        int rc2 = sl_coll_allreduce(c, b[2].d[0], b[2].d[1], n, dt[2], rop[2]);
        if (rc0 || rc1 || rc2) { fail(&ty, "count %zu: rc %d %d %d", n, rc0, rc1, rc2); break; }
        int done0 = 0, spins = 0;
        while (!done0 && spins++ < 1000000) sl_coll_test(q[0], &done0); /* drive the first only */
        if (!done0) fail(&ty, "count %zu: test never reported completion", n);
        sl_coll_wait(q[0]);
        sl_coll_wait(q[1]);
        for (int k = 0; k < 3; k++) {
            download(&b[k]);
            const void *res = b[k].h[k ? 1 : 0];
            for (size_t i = 0; i < n; i++) {
                double want = expect(i, k, dt[k], rop[k]), got = sl_elem_get(res, i, dt[k]);
                if (got != want) {
                    fail(&ty, "count %zu op %d: element %zu is %g, expected %g", n, k, i, got, want);
                    break;
                }
            }
        }
    }
    verdict(&ty, "%s %s iallreduce: two in flight with a blocking one, test then wait (%s, "
            "segment %zu B)", space, sl_coll_name(sl_comm_impl(c)),
            sl_coll_iallreduce_overlaps(c) ? "progresses" : "completes at start",
            sl_comm_segment(c));
    sl_comm_set_segment(c, seg0);
    for (int k = 0; k < 3; k++) bufs_free(&b[k]);
}

/* Non-blocking reduce-scatter and all-gather, two in flight at once: both started before either
 * is waited for, waited in the opposite order (every wait advances both), each dtype and op
 * with prime and tiny counts, in and out of place. The ring's schedules must send what its
 * blocking algorithm does: (n-1) blocks each. */
static void sweep_nb_rs_ag(sl_comm *c, const char *space)
{
    if (!sl_coll_supports(sl_comm_impl(c), SL_CO_REDUCE_SCATTER) ||
        !sl_coll_supports(sl_comm_impl(c), SL_CO_ALLGATHER))
        return;
    static const size_t counts[] = {0, 1, 2, 7, 13, 1009};
    tally ty = {0};
    size_t maxn = 1009 * (size_t)g_size;
    bufs rs, ag;
    bufs_init(&rs, c, maxn * sizeof(double));
    bufs_init(&ag, c, maxn * sizeof(double));
    /* the ring's, direct's and the torus's schedules send (n-1) blocks per half */
    sl_coll impl = sl_comm_impl(c);
    int ring_host = (impl == SL_COLL_RING || impl == SL_COLL_DIRECT || impl == SL_COLL_TORUS) &&
                    sl_coll_iallreduce_overlaps(c);
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        for (int v = 0; v < 4; v++) {
            size_t n = counts[ci], total = n * (size_t)g_size, mine = (size_t)g_rank * n;
            sl_dtype t = (sl_dtype)((ci + (size_t)v) % SL_NDTYPES);
            sl_redop op = (sl_redop)v;
            int inplace = (int)(ci + (size_t)v) % 2, it = 10 + v;
            for (size_t i = 0; i < total; i++) sl_elem_put(rs.h[0], i, t, val(g_rank, i, it));
            poison(rs.h[1], rs.bytes);
            poison(ag.h[1], ag.bytes);
            if (inplace)
                for (size_t i = 0; i < n; i++) sl_elem_put(ag.h[1], mine + i, t, val(g_rank, mine + i, it));
            else
                for (size_t i = 0; i < n; i++) sl_elem_put(ag.h[0], i, t, val(g_rank, mine + i, it));
            upload(&rs);
            upload(&ag);
            void *rr = inplace ? D(&rs, 0, mine, t) : rs.d[1];
            void *as = inplace ? D(&ag, 1, mine, t) : ag.d[0];
            unsigned long long sent0 = sl_comm_bytes_sent(c);
            sl_coll_req *q[2] = {NULL, NULL};
            int rc0 = sl_coll_ireduce_scatter(c, rs.d[0], rr, n, t, op, &q[0]);
            int rc1 = sl_coll_iallgather(c, as, ag.d[1], n, t, &q[1]);
            if (rc0 || rc1 || !q[0] || !q[1]) {
                fail(&ty, "count %zu: rc %d %d", n, rc0, rc1);
                sl_coll_waitall(2, q);
                continue;
            }
            int done = 0, spins = 0;
            while (!done && spins++ < 1000000) sl_coll_test(q[1], &done);
            if (!done) fail(&ty, "count %zu: test never reported completion", n);
            sl_coll_wait(q[1]);
            sl_coll_wait(q[0]);
            download(&rs);
            download(&ag);
            size_t es = sl_dtype_size(t);
            if (ring_host && g_size > 1 && sl_comm_bytes_sent(c) - sent0 != 2 * (size_t)(g_size - 1) * n * es)
                fail(&ty, "count %zu: %llu bytes sent, expected %zu", n, sl_comm_bytes_sent(c) - sent0,
                     2 * (size_t)(g_size - 1) * n * es);
            const void *res = inplace ? (const void *)H(&rs, 0, mine, t) : rs.h[1];
            for (size_t i = 0; i < n; i++) {
                double want = expect(mine + i, it, t, op), got = sl_elem_get(res, i, t);
                if (got != want) {
                    fail(&ty, "reduce_scatter count %zu %s %s %s: element %zu is %g, expected %g", n,
                         sl_dtype_name(t), sl_redop_name(op), inplace ? "in place" : "out of place", i, got, want);
                    break;
                }
            }
            if (!inplace) check_input(&ty, &rs, 0, total, 0, t, it, "ireduce_scatter");
            for (size_t j = 0; j < total; j++) {
                double want = val((int)(j / n), j, it), got = sl_elem_get(ag.h[1], j, t);
                if (got != want) {
                    fail(&ty, "allgather count %zu %s %s: element %zu is %g, expected %g", n,
                         sl_dtype_name(t), inplace ? "in place" : "out of place", j, got, want);
                    break;
                }
            }
        }
    }
    verdict(&ty, "%s %s ireduce_scatter + iallgather in flight together, every dtype and op, counts 0 1 2 7 13 1009 (%s)",
            space, sl_coll_name(sl_comm_impl(c)),
            sl_coll_iallreduce_overlaps(c) ? "progresses" : "completes at start");
    bufs_free(&rs);
    bufs_free(&ag);
}

/* Non-blocking point to point: every rank sends to both neighbours and receives from both at
 * once (a halo exchange: with blocking sends of large messages this deadlocks), waited with
 * waitall; then an isend matched by a blocking recv, with a tiny segment so that both ends
 * must cut the message alike. Counts 0, 1, a prime and a large one; on one rank the
 * neighbours are the rank itself. */
static void sweep_nb_p2p(sl_comm *c, const char *space)
{
    static const size_t counts[] = {0, 1, 13, 100003};
    tally ty = {0};
    size_t maxn = 100003;
    bufs b[2]; /* b[0]: h[0] to the right, h[1] from the left; b[1]: to the left, from the right */
    bufs_init(&b[0], c, maxn * sizeof(double));
    bufs_init(&b[1], c, maxn * sizeof(double));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int counting = sl_comm_impl(c) != SL_COLL_NCCL;
    for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        size_t n = counts[ci];
        sl_dtype t = ci % 2 ? SL_F64 : SL_BF16;
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < n; i++) sl_elem_put(b[k].h[0], i, t, val(g_rank, i, 20 + k));
            poison(b[k].h[1], b[k].bytes);
            upload(&b[k]);
        }
        unsigned long long sent0 = sl_comm_bytes_sent(c);
        sl_coll_req *q[4];
        int rc = sl_coll_irecv(c, b[0].d[1], n, t, left, 7, &q[0]);
        rc |= sl_coll_irecv(c, b[1].d[1], n, t, right, 8, &q[1]);
        rc |= sl_coll_isend(c, b[0].d[0], n, t, right, 7, &q[2]);
        rc |= sl_coll_isend(c, b[1].d[0], n, t, left, 8, &q[3]);
        if (rc) fail(&ty, "count %zu: rc %d", n, rc);
        if (sl_coll_waitall(4, q)) fail(&ty, "count %zu: waitall failed", n);
        for (int k = 0; k < 4; k++)
            if (q[k]) fail(&ty, "waitall left a request");
        if (counting && sl_comm_bytes_sent(c) - sent0 != 2 * n * sl_dtype_size(t))
            fail(&ty, "count %zu: %llu bytes sent, expected %zu", n, sl_comm_bytes_sent(c) - sent0,
                 2 * n * sl_dtype_size(t));
        for (int k = 0; k < 2; k++) {
            download(&b[k]);
            int from = k ? right : left;
            for (size_t i = 0; i < n; i++)
                if (sl_elem_get(b[k].h[1], i, t) != val(from, i, 20 + k)) {
                    fail(&ty, "count %zu from %s: element %zu is %g, expected %d", n, k ? "right" : "left", i,
                         sl_elem_get(b[k].h[1], i, t), val(from, i, 20 + k));
                    break;
                }
        }
    }
    if (g_size > 1) { /* an isend to the right, a blocking recv from the left, then the wait */
        size_t n = 1001, seg = sl_comm_segment(c);
        sl_comm_set_segment(c, TINY_SEGMENT);
        for (size_t i = 0; i < n; i++) sl_elem_put(b[0].h[0], i, SL_F32, val(g_rank, i, 30));
        poison(b[0].h[1], b[0].bytes);
        upload(&b[0]);
        sl_coll_req *q;
        int rc = sl_coll_isend(c, b[0].d[0], n, SL_F32, right, 9, &q);
        rc |= sl_coll_recv(c, b[0].d[1], n, SL_F32, left, 9);
        rc |= sl_coll_wait(q);
        download(&b[0]);
        if (rc) fail(&ty, "isend + blocking recv: rc %d", rc);
        for (size_t i = 0; i < n; i++)
            if (sl_elem_get(b[0].h[1], i, SL_F32) != val(left, i, 30)) {
                fail(&ty, "isend + blocking recv: element %zu is %g", i, sl_elem_get(b[0].h[1], i, SL_F32));
                break;
            }
        sl_comm_set_segment(c, seg);
    }
    verdict(&ty, "%s %s isend/irecv to both neighbours at once (counts 0 1 13 100003), waitall; isend with a blocking recv",
            space, sl_coll_name(sl_comm_impl(c)));
    bufs_free(&b[0]);
    bufs_free(&b[1]);
}

/* Point to point: a message around the ring, every rank sending to the next. Rank 0 sends
 * first and the others receive first, so blocking sends cannot deadlock. */
static void sweep_p2p(sl_comm *c, const char *space)
{
    if (g_size == 1) return; /* a blocking send to oneself would wait for its own receive */
    tally ty = {0};
    size_t n = 1003;
    bufs b;
    bufs_init(&b, c, n * sizeof(double));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    for (size_t i = 0; i < n; i++) sl_elem_put(b.h[0], i, SL_F64, val(g_rank, i, 3));
    poison(b.h[1], b.bytes);
    upload(&b);
    int rc1, rc2;
    if (g_rank == 0) {
        rc1 = sl_coll_send(c, b.d[0], n, SL_F64, right, 5);
        rc2 = sl_coll_recv(c, b.d[1], n, SL_F64, left, 5);
    } else {
        rc2 = sl_coll_recv(c, b.d[1], n, SL_F64, left, 5);
        rc1 = sl_coll_send(c, b.d[0], n, SL_F64, right, 5);
    }
    download(&b);
    if (rc1 || rc2) fail(&ty, "rc %d %d", rc1, rc2);
    for (size_t i = 0; i < n && !ty.fails; i++)
        if (sl_elem_get(b.h[1], i, SL_F64) != val(left, i, 3))
            fail(&ty, "element %zu is %g, expected %g", i, sl_elem_get(b.h[1], i, SL_F64), (double)val(left, i, 3));
    if (sl_coll_barrier(c)) fail(&ty, "barrier failed");
    verdict(&ty, "%s %s send/recv around the ring, barrier", space, sl_coll_name(sl_comm_impl(c)));
    bufs_free(&b);
}

/* Bad arguments are refused before any message, identically on every rank. */
static void sweep_errors(sl_comm *c)
{
    tally ty = {0};
    float x[8] = {0}, y[8 * 8] = {0};
    struct { int rc, want; const char *what; } cases[] = {
        {sl_coll_allreduce(c, x, y, 4, (sl_dtype)SL_NDTYPES, SL_OP_SUM), SL_COLL_EINVAL, "unknown dtype"},
        {sl_coll_allreduce(c, x, y, 4, SL_F32, (sl_redop)SL_NREDOPS), SL_COLL_EINVAL, "unknown op"},
        {sl_coll_allreduce(c, NULL, y, 4, SL_F32, SL_OP_SUM), SL_COLL_EINVAL, "NULL buffer"},
        {sl_coll_allreduce(c, x, y, SIZE_MAX / 2, SL_F32, SL_OP_SUM), SL_COLL_EINVAL, "count too large"},
        {sl_coll_broadcast(c, x, 4, SL_F32, g_size), SL_COLL_EINVAL, "root out of range"},
        {sl_coll_broadcast(c, x, 4, SL_F32, -1), SL_COLL_EINVAL, "negative root"},
        {sl_coll_send(c, x, 4, SL_F32, g_size, 0), SL_COLL_EINVAL, "peer out of range"},
        {sl_coll_recv(c, x, 4, SL_F32, 0, -1), SL_COLL_EINVAL, "negative tag"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (cases[i].rc != cases[i].want)
            fail(&ty, "%s: rc %d, expected %d", cases[i].what, cases[i].rc, cases[i].want);
    /* The non-blocking calls: the same checks, and no request on an error. */
    sl_coll_req *q[9];
    for (int i = 0; i < 9; i++) q[i] = (sl_coll_req *)&ty;
    struct { int rc, want; const char *what; } nb[] = {
        {sl_coll_iallreduce(c, x, y, 4, (sl_dtype)SL_NDTYPES, SL_OP_SUM, &q[0]), SL_COLL_EINVAL, "iallreduce: unknown dtype"},
        {sl_coll_ireduce_scatter(c, x, y, 4, SL_F32, (sl_redop)SL_NREDOPS, &q[1]),
         SL_COLL_EINVAL, "ireduce_scatter: unknown op"},
        {sl_coll_ireduce_scatter(c, NULL, y, 1, SL_F32, SL_OP_SUM, &q[2]),
         SL_COLL_EINVAL, "ireduce_scatter: NULL buffer (argument errors before ENOTSUP)"},
        {sl_coll_iallgather(c, x, y, SIZE_MAX / 2, SL_F32, &q[3]), SL_COLL_EINVAL, "iallgather: count too large"},
        {sl_coll_iallgather(c, x, NULL, 1, SL_F32, &q[4]),
         SL_COLL_EINVAL, "iallgather: NULL buffer"},
        {sl_coll_isend(c, x, 4, SL_F32, g_size, 0, &q[5]), SL_COLL_EINVAL, "isend: peer out of range"},
        {sl_coll_isend(c, x, 4, SL_F32, 0, 1 << 20, &q[6]), SL_COLL_EINVAL, "isend: tag too large"},
        {sl_coll_irecv(c, x, 4, SL_F32, -1, 0, &q[7]), SL_COLL_EINVAL, "irecv: negative peer"},
        {sl_coll_irecv(c, NULL, 4, SL_F32, 0, 0, &q[8]), SL_COLL_EINVAL, "irecv: NULL buffer"},
        {sl_coll_isend(c, x, 4, SL_F32, 0, 0, NULL), SL_COLL_EINVAL, "isend: NULL request"},
        {sl_coll_wait(NULL), SL_COLL_EINVAL, "wait: NULL request"},
        {sl_coll_waitall(2, (sl_coll_req *[2]){NULL, NULL}), SL_COLL_OK, "waitall: NULL entries skipped"},
    };
    for (size_t i = 0; i < sizeof nb / sizeof nb[0]; i++)
        if (nb[i].rc != nb[i].want)
            fail(&ty, "%s: rc %d, expected %d", nb[i].what, nb[i].rc, nb[i].want);
    for (int i = 0; i < 9; i++)
        if (q[i]) fail(&ty, "a refused non-blocking call left request %d set", i);
    verdict(&ty, "%s: bad arguments give SL_COLL_EINVAL", sl_coll_name(sl_comm_impl(c)));
}

/* Names, and communicators the build or the machine cannot provide. */
static void check_setup(void)
{
    tally ty = {0};
    sl_comm *c = (sl_comm *)&ty; /* must be cleared on a refusal */
    int dev = sl_coll_bind_device(MPI_COMM_WORLD); /* before any device memory */
    if ((dev < 0) != (sl_cdev_count() == 0)) fail(&ty, "bind_device gave %d", dev);
    if (sl_comm_create(&c, MPI_COMM_WORLD, (sl_coll)SL_NCOLLS, SL_MEM_HOST) != SL_COLL_EINVAL || c)
        fail(&ty, "unknown implementation accepted");
    sl_comm_destroy(c); /* NULL: a no-op */
    if (sl_comm_create(&c, MPI_COMM_WORLD, SL_COLL_RING, (sl_mem_space)SL_MEM_NSPACES) != SL_COLL_EINVAL)
        fail(&ty, "unknown memory space accepted");
    char why[160];
    int rc = sl_comm_create(&c, MPI_COMM_WORLD, SL_COLL_NCCL, SL_MEM_HOST);
    if (rc != (sl_nccl_built() ? SL_COLL_ENOTSUP : SL_COLL_ENOTBUILT))
        fail(&ty, "nccl on host buffers: rc %d", rc);
    if (sl_coll_available(SL_COLL_NCCL, SL_MEM_HOST, why, sizeof why) != rc || !strstr(why, "NCCL"))
        fail(&ty, "sl_coll_available(nccl, host) disagrees with sl_comm_create: %s", why);
    sl_comm_destroy(c);
    rc = sl_comm_create(&c, MPI_COMM_WORLD, SL_COLL_RING, SL_MEM_DEVICE);
    int want = !sl_cdev_built() ? SL_COLL_ENOTBUILT : sl_cdev_count() ? SL_COLL_OK : SL_COLL_ENODEV;
    if (rc != want) fail(&ty, "ring on device buffers: rc %d, expected %d", rc, want);
    if (sl_coll_available(SL_COLL_RING, SL_MEM_DEVICE, why, sizeof why) != want)
        fail(&ty, "sl_coll_available(ring, device) disagrees: %s", why);
    if (rc == SL_COLL_OK) {
        if (sl_comm_rank(c) != g_rank || sl_comm_size(c) != g_size || sl_comm_impl(c) != SL_COLL_RING ||
            sl_comm_space(c) != SL_MEM_DEVICE)
            fail(&ty, "accessors of a device communicator");
        sl_comm_destroy(c);
    } else if (c) {
        fail(&ty, "a refused communicator is not NULL");
    }
    rc = sl_comm_create(&c, MPI_COMM_WORLD, SL_COLL_RHD, SL_MEM_HOST);
    if (rc || !c || sl_comm_rank(c) != g_rank || sl_comm_size(c) != g_size ||
        sl_comm_impl(c) != SL_COLL_RHD || sl_comm_space(c) != SL_MEM_HOST || sl_comm_bytes_sent(c) != 0) {
        fail(&ty, "rhd on host buffers: rc %d, or accessors wrong", rc);
    } else {
        sl_comm_set_segment(c, 4096);
        if (sl_comm_segment(c) != 4096) fail(&ty, "segment not set");
    }
    sl_comm_destroy(c);
    if (sl_coll_available(SL_COLL_MPI, SL_MEM_HOST, why, sizeof why) != SL_COLL_OK)
        fail(&ty, "mpi on host buffers unavailable: %s", why);
    for (int i = 0; i < SL_NREDOPS; i++)
        if (sl_redop_from_name(sl_redop_name((sl_redop)i)) != i) fail(&ty, "op name %d", i);
    for (int i = 0; i < SL_NCOS; i++)
        if (sl_collective_from_name(sl_collective_name((sl_collective)i)) != i) fail(&ty, "collective name %d", i);
    if (sl_redop_from_name("prod") != -1 || sl_collective_from_name("alltoall") != -1)
        fail(&ty, "unknown names accepted");
    verdict(&ty, "setup: device binding, unknown implementation/space refused, unbuilt or absent backends reported (sl_coll_available agrees), accessors, names");
}

/* The double binary tree's shape, for every rank count up to 64: each tree spans all ranks
 * with consistent parent/child links and no cycle, inner nodes have at most two children, and
 * for even n no rank is an inner node of both trees. */
/* The reference by residue (one look-up per element) against the reduction term by term, for
 * every op and rank count up to 80 and 1024, over 500 elements and one of the rare ones where
 * the look-up must not be used. */
static void check_reference(void)
{
    if (g_rank != 0) return;
    static const sl_redop ops[] = {SL_OP_SUM, SL_OP_MAX, SL_OP_MIN, SL_OP_AVG};
    /* An element whose hash is within 5 x 1023 of 2^32 (about one in 800,000): there rank
     * 1023's value is not rank 0's plus 5 x 1023 mod 17. */
    size_t wrap = 0;
    for (size_t i = 0; i < ((size_t)1 << 24) && !wrap; i++)
        if ((val(0, i, 0) + 8 + 5 * 1023) % 17 != val(1023, i, 0) + 8) wrap = i;
    if (!wrap) diag("no element near the hash's wrap found: the shortcut's guard goes untested");
    int bad = 0;
    for (int n = 1; n <= 1024 && !bad; n = n < 80 ? n + 1 : n < 1024 ? 1024 : 1025)
        for (size_t e = 0; e <= 500 && !bad; e++)
            for (unsigned k = 0; k < 2; k++)
                for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                    size_t i = e < 500 ? e : wrap;
                    long acc = val(0, i, (int)k);
                    for (int p = 1; p < n; p++) {
                        long v = val(p, i, (int)k);
                        acc = ops[o] == SL_OP_MAX ? (v > acc ? v : acc)
                              : ops[o] == SL_OP_MIN ? (v < acc ? v : acc) : acc + v;
                    }
                    double want = ops[o] == SL_OP_AVG ? (double)acc / n : (double)acc;
                    if (sl_coll_ref_reduce(n, i, k, SL_F64, ops[o]) != want) {
                        diag("reference of %d ranks, element %zu, op %d: %g, expected %g", n, i,
                             (int)ops[o], sl_coll_ref_reduce(n, i, k, SL_F64, ops[o]), want);
                        bad = 1;
                    }
                }
    ok(!bad, "reference reductions equal the term-by-term sums for 1..80 and 1024 ranks");
}

static void check_dbtree_shapes(void)
{
    if (g_rank != 0) return;
    int bad = 0;
    for (int n = 1; n <= 64 && !bad; n++) {
        int inner[2][64] = {{0}};
        for (int w = 0; w < 2; w++) {
            int roots = 0;
            for (int r = 0; r < n; r++) {
                int p, c0, c1;
                slc_dbtree_shape(n, r, w, &p, &c0, &c1);
                if (p < 0) roots++;
                int kids[2] = {c0, c1};
                for (int k = 0; k < 2; k++) {
                    if (kids[k] < 0) continue;
                    int pp, a, b2;
                    if (kids[k] >= n) { bad = 1; continue; }
                    slc_dbtree_shape(n, kids[k], w, &pp, &a, &b2);
                    if (pp != r) bad = 1;
                    inner[w][r] = 1;
                }
                /* walk up: must reach the root within n steps */
                int x = r, steps = 0;
                while (x >= 0 && steps++ <= n) {
                    int a, b2;
                    slc_dbtree_shape(n, x, w, &x, &a, &b2);
                }
                if (x >= 0) bad = 1;
            }
            if (roots != 1) bad = 1;
        }
        if (n % 2 == 0)
            for (int r = 0; r < n; r++)
                if (inner[0][r] && inner[1][r]) bad = 1;
        if (bad) diag("double binary tree wrong for n = %d", n);
    }
    ok(!bad, "double binary tree shapes for 1..64 ranks");
}

/* shm sends no message; hier sends only its inter-node all-reduces: nothing on one node, and
 * where nodes are equal and a power of two in number (p), each rank owns one slice of n / L
 * elements and Rabenseifner sends 2 (p - 1) / p of it. SL_COLL_RANKS_PER_NODE (coll.t) sets
 * the virtual nodes. */
static void check_node_bytes(sl_comm *c)
{
    sl_coll impl = sl_comm_impl(c);
    if (impl != SL_COLL_SHM && impl != SL_COLL_HIER) return;
    int k = 0;
    sl_coll_env_ranks_per_node(&k);
    int per_node = impl == SL_COLL_HIER && k && k < g_size ? k : g_size;
    int nodes = (g_size + per_node - 1) / per_node;
    if (g_size % per_node || (nodes & (nodes - 1))) return; /* no simple formula */
    size_t n = (size_t)per_node * (size_t)nodes * 16384; /* slices above rhd's small-message path */
    float *x = calloc(n, sizeof *x);
    unsigned long long before = sl_comm_bytes_sent(c);
    int rc = sl_coll_allreduce(c, x, x, n, SL_F32, SL_OP_SUM);
    unsigned long long got = sl_comm_bytes_sent(c) - before;
    size_t slice = n / (size_t)per_node; /* elements each rank owns */
    size_t want = g_size == 1 ? 0 : 2 * (size_t)(nodes - 1) * slice / (size_t)nodes * sizeof(float);
    tally ty = {0};
    if (rc != SL_COLL_OK || got != want)
        fail(&ty, "rc %d, %llu bytes sent, expected %zu", rc, got, want);
    verdict(&ty, "%s on %d node(s) of %d: %zu bytes sent per rank (Rabenseifner between nodes "
            "only)", sl_coll_name(impl), nodes, per_node, want);
    free(x);
}

/* direct and torus: exact at the counts 0, 1, 3 (fewer than most rank counts) and, unless quick,
 * 10^6 + 3 (a prime) in every dtype, the blocking all-reduce in and out of place, and the
 * non-blocking one at the small counts (sweep_nonblocking runs its schedules on 100003); and
 * each rank sends 2 (n-1)/n of the vector S in the all-reduce ((n-1)/n in reduce-scatter and
 * in all-gather), the ring's volume, on a count that every grid divides evenly. */
static int g_bidir; /* --bidir: the torus's rings both ways */

static void check_direct_torus(sl_comm *c, const char *space, int quick)
{
    sl_coll impl = sl_comm_impl(c);
    if (impl != SL_COLL_DIRECT && impl != SL_COLL_TORUS) return;
    static const size_t counts[] = {0, 1, 3, 1000003};
    tally ty = {0};
    bufs b;
    bufs_init(&b, c, 1000003 * sizeof(double));
    int rows, cols;
    sl_comm_torus(c, &rows, &cols);
    char grid[64];
    if (impl == SL_COLL_TORUS)
        snprintf(grid, sizeof grid, "grid %dx%d%s", rows, cols, g_bidir ? ", bidirectional" : "");
    else snprintf(grid, sizeof grid, "%d in flight", sl_comm_max_inflight(c));
    if (rows * cols != g_size) fail(&ty, "grid %dx%d on %d ranks", rows, cols, g_size);
    size_t ncounts = sizeof counts / sizeof counts[0] - (quick ? 1 : 0);
    for (int t = 0; t < SL_NDTYPES; t++)
        for (size_t k = 0; k < ncounts; k++) {
            size_t n = counts[k];
            do_allreduce(&ty, &b, (sl_dtype)t, SL_OP_SUM, n, (int)(k + (size_t)t) % 2, t);
            if (n > 1000) continue;
            /* the non-blocking form, out of place */
            for (size_t i = 0; i < n; i++) sl_elem_put(b.h[0], i, (sl_dtype)t, val(g_rank, i, 40 + t));
            poison(b.h[1], b.bytes);
            upload(&b);
            sl_coll_req *q;
            int rc = sl_coll_iallreduce(c, b.d[0], b.d[1], n, (sl_dtype)t, SL_OP_AVG, &q);
            if (rc || sl_coll_wait(q)) fail(&ty, "iallreduce count %zu: rc %d", n, rc);
            download(&b);
            for (size_t i = 0; i < n; i++)
                if (sl_elem_get(b.h[1], i, (sl_dtype)t) != expect(i, 40 + t, (sl_dtype)t, SL_OP_AVG)) {
                    fail(&ty, "iallreduce avg count %zu %s: element %zu is %g", n,
                         sl_dtype_name((sl_dtype)t), i, sl_elem_get(b.h[1], i, (sl_dtype)t));
                    break;
                }
        }
    verdict(&ty, "%s %s (%s) allreduce exact at counts 0 1 3%s in every dtype, blocking and not",
            space, sl_coll_name(impl), grid, quick ? "" : " 1000003");

    size_t per = 4096, n = per * (size_t)g_size, es = sizeof(float);
    unsigned long long s0 = sl_comm_bytes_sent(c);
    int rc = sl_coll_allreduce(c, b.d[0], b.d[1], n, SL_F32, SL_OP_SUM);
    unsigned long long ar = sl_comm_bytes_sent(c) - s0;
    s0 = sl_comm_bytes_sent(c);
    rc |= sl_coll_reduce_scatter(c, b.d[0], b.d[1], per, SL_F32, SL_OP_SUM);
    unsigned long long rs = sl_comm_bytes_sent(c) - s0;
    s0 = sl_comm_bytes_sent(c);
    rc |= sl_coll_allgather(c, b.d[0], b.d[1], per, SL_F32);
    unsigned long long ag = sl_comm_bytes_sent(c) - s0;
    size_t S = n * es, want = 2 * (size_t)(g_size - 1) * S / (size_t)g_size;
    if (rc || ar != want || rs != want / 2 || ag != want / 2)
        fail(&ty, "rc %d; bytes sent: allreduce %llu (expected %zu), reduce_scatter %llu and "
             "allgather %llu (expected %zu each)", rc, ar, want, rs, ag, want / 2);
    verdict(&ty, "%s %s (%s): bytes sent per rank = 2(n-1)/n S = %zu for S = %zu (all-reduce), "
            "half of it in reduce-scatter and in all-gather", space, sl_coll_name(impl), grid, want, S);
    bufs_free(&b);
}

/* Rank p's value at element i where the order of additions must matter: fractions of many
 * bits (|v| < 102, not the small integers of val), so that sums taken in another order round
 * differently somewhere. */
static double frac_val(int p, size_t i)
{
    unsigned h = (unsigned)i * 2654435761u ^ (unsigned)(p + 1) * 40503u;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    return ((double)(h % 20001u) - 10000.0) / 99.0;
}

/* The non-blocking all-reduce and reduce-scatter of c against its blocking ones on frac_val
 * data, bit for bit, in every dtype, with the default segment and with 1000-byte ones (many
 * segments per exchange, arriving out of step): the schedule must take its sums in the
 * blocking algorithm's order. The engine's steps in flight (q->posted - q->step) are read right
 * after the start, where they must be `want` (direct's window, 2 for the bidirectional torus's
 * two directions), and after every test, where they must never be more. On 3 ranks and more
 * the data are shown to be order-sensitive: the sums in rank order differ from the blocking
 * result somewhere, so equal bits mean the same order, not merely exact arithmetic. */
static void check_nb_bits(sl_comm *c, int want, const char *label)
{
    if (g_size < 2 || !sl_coll_iallreduce_overlaps(c)) return;
    const size_t n = 100003, per = 14293; /* primes: uneven pieces, blocks of reduce-scatter */
    size_t cap = n > per * (size_t)g_size ? n : per * (size_t)g_size, bytes = cap * sizeof(double);
    char *in = malloc(bytes), *blk = malloc(bytes), *nbr = malloc(bytes), *acc = malloc(bytes);
    char *other = malloc(bytes);
    tally bits = {0}, flight = {0}, sens = {0};
    size_t seg0 = sl_comm_segment(c);
    for (int t = 0; t < SL_NDTYPES; t++) {
        size_t es = sl_dtype_size((sl_dtype)t);
        for (size_t i = 0; i < cap; i++) sl_elem_put(in, i, (sl_dtype)t, frac_val(g_rank, i));
        for (int sg = 0; sg < 2; sg++) {
            sl_comm_set_segment(c, sg ? 1000 : seg0);
            for (int w = 0; w < 2; w++) { /* all-reduce of n, reduce-scatter of per per rank */
                size_t len = w ? per : n;
                poison(blk, bytes);
                poison(nbr, bytes);
                int rc = w ? sl_coll_reduce_scatter(c, in, blk, per, (sl_dtype)t, SL_OP_SUM)
                           : sl_coll_allreduce(c, in, blk, n, (sl_dtype)t, SL_OP_SUM);
                sl_coll_req *q = NULL;
                rc |= w ? sl_coll_ireduce_scatter(c, in, nbr, per, (sl_dtype)t, SL_OP_SUM, &q)
                        : sl_coll_iallreduce(c, in, nbr, n, (sl_dtype)t, SL_OP_SUM, &q);
                if (rc || !q) {
                    fail(&bits, "rc %d", rc);
                    if (q) sl_coll_wait(q);
                    continue;
                }
                int first = q->posted - q->step, most = first, done = 0;
                while (!done) {
                    sl_coll_test(q, &done);
                    if (!done && q->posted - q->step > most) most = q->posted - q->step;
                }
                sl_coll_wait(q);
                if (first != want || most != want)
                    fail(&flight, "%s %s: %d steps in flight at the start, at most %d, expected %d",
                         w ? "ireduce_scatter" : "iallreduce", sl_dtype_name((sl_dtype)t), first, most, want);
                if (memcmp(blk, nbr, len * es)) {
                    size_t i = 0;
                    while (!memcmp(blk + i * es, nbr + i * es, es)) i++;
                    fail(&bits, "%s %s segment %zu B: element %zu is %.9g, blocking %.9g",
                         w ? "ireduce_scatter" : "iallreduce", sl_dtype_name((sl_dtype)t),
                         sl_comm_segment(c), i, sl_elem_get(nbr, i, (sl_dtype)t), sl_elem_get(blk, i, (sl_dtype)t));
                }
            }
        }
        /* the all-reduce's sums in rank order 0, 1, ..., as this type rounds them */
        for (int p = 0; p < g_size; p++) {
            for (size_t i = 0; i < n; i++) sl_elem_put(p ? other : acc, i, (sl_dtype)t, frac_val(p, i));
            if (p) sl_reduce_host(acc, acc, other, n, (sl_dtype)t, SL_OP_SUM);
        }
        sl_coll_allreduce(c, in, blk, n, (sl_dtype)t, SL_OP_SUM);
        int differ = memcmp(acc, blk, n * es) != 0, any = 0;
        MPI_Allreduce(&differ, &any, 1, MPI_INT, MPI_MAX, g_world);
        if (g_size >= 3 && !any) fail(&sens, "%s: the sums in rank order equal the blocking result", sl_dtype_name((sl_dtype)t));
    }
    sl_comm_set_segment(c, seg0);
    verdict(&bits, "host %s (%s) non-blocking all-reduce and reduce-scatter equal the blocking ones bit for bit, "
            "every dtype, order-sensitive data, segments default and 1000 B", sl_coll_name(sl_comm_impl(c)), label);
    verdict(&flight, "host %s (%s): %d step(s) in flight at the start, never more", sl_coll_name(sl_comm_impl(c)),
            label, want);
    if (g_size >= 3)
        verdict(&sens, "host %s (%s): the data are order-sensitive in every dtype (sums in rank order differ)",
                sl_coll_name(sl_comm_impl(c)), label);
    free(in), free(blk), free(nbr), free(acc), free(other);
}

/* direct's non-blocking form with at most K = 1, 2 and n - 1 exchanges in flight (each K once,
 * those below n), on communicators made for each; the default K of later ones is restored. */
static int g_max_inflight; /* --max-inflight */

static void check_direct_windows(void)
{
    int ks[3] = {1, 2, g_size - 1};
    for (int i = 0; i < 3; i++) {
        int k = ks[i];
        if (k < 1 || k > g_size - 1 || (i == 2 && k <= 2)) continue;
        sl_coll_set_max_inflight(k);
        sl_comm *c;
        if (sl_comm_create(&c, MPI_COMM_WORLD, SL_COLL_DIRECT, SL_MEM_HOST) != SL_COLL_OK) {
            if (g_rank == 0) ok(0, "np=%d host direct --max-inflight %d: create", g_size, k);
            continue;
        }
        char label[48];
        snprintf(label, sizeof label, "max-inflight %d", k);
        check_nb_bits(c, k, label);
        sl_comm_destroy(c);
    }
    sl_coll_set_max_inflight(g_max_inflight);
}

/* --sizes K,K,...: the torus's counts and bytes on the first K ranks of this launch, for each
 * K (at most the launch's size), so that one launch covers several grids; the others wait. */
static void check_torus_sizes(const char *list, int quick)
{
    int world_rank = g_rank, world_size = g_size;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *k = strtok(buf, ","); k; k = strtok(NULL, ",")) {
        int size = atoi(k);
        if (size < 1 || size > world_size) continue;
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, world_rank < size ? 0 : MPI_UNDEFINED, world_rank, &sub);
        if (sub != MPI_COMM_NULL) {
            g_world = sub;
            MPI_Comm_rank(sub, &g_rank);
            MPI_Comm_size(sub, &g_size);
            sl_comm *c;
            if (sl_comm_create(&c, sub, SL_COLL_TORUS, SL_MEM_HOST) == SL_COLL_OK) {
                check_direct_torus(c, "host", quick);
                check_nb_bits(c, 1 + g_bidir, g_bidir ? "bidirectional" : "one way");
                sl_comm_destroy(c);
            } else if (g_rank == 0) {
                ok(0, "np=%d host torus: create", g_size);
            }
            MPI_Comm_free(&sub);
        }
        g_world = MPI_COMM_WORLD, g_rank = world_rank, g_size = world_size;
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    g_world = MPI_COMM_WORLD;
    sl_set_program_name("test_coll");
    /* --quick: skip the large counts; --only a,b: these implementations only (coll.t runs
     * shm and hier again on virtual nodes) */
    int quick = 0, counts_only = 0;
    unsigned only = ~0u;
    const char *sizes = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--quick")) quick = 1;
        /* --counts-only: direct's and the torus's counts and bytes, nothing else (coll.t's
         * extra grids); --grid RxC, --bidir, --max-inflight K: as the programs' --torus, --torus-bidir,
         * --max-inflight; --sizes K,...: only the torus, on the first K ranks (check_torus_sizes) */
        if (!strcmp(argv[a], "--counts-only")) counts_only = 1;
        if (!strcmp(argv[a], "--grid") && a + 1 < argc) {
            int r = 0, k = 0;
            if (sscanf(argv[++a], "%dx%d", &r, &k) == 2) sl_coll_set_torus(r, k);
        }
        if (!strcmp(argv[a], "--bidir")) sl_coll_set_torus_bidir(g_bidir = 1);
        if (!strcmp(argv[a], "--max-inflight") && a + 1 < argc)
            sl_coll_set_max_inflight(g_max_inflight = atoi(argv[++a]));
        if (!strcmp(argv[a], "--sizes") && a + 1 < argc) sizes = argv[++a];
        if (!strcmp(argv[a], "--only") && a + 1 < argc) {
            only = 0;
            for (char *name = strtok(argv[++a], ","); name; name = strtok(NULL, ","))
                if (sl_coll_from_name(name) >= 0) only |= 1u << sl_coll_from_name(name);
        }
    }

    if (sizes) {
        check_torus_sizes(sizes, quick);
        if (g_rank == 0) done_testing();
        int status = exit_status();
        MPI_Finalize();
        return status;
    }
    if (!counts_only) {
        check_setup();
        /* The reference and the tree shapes depend on no communicator (every rank count is
         * computed): the one-rank run checks them (coll.t's first), the others need not. */
        if (g_size == 1) {
            check_reference();
            check_dbtree_shapes();
        }
    }
    for (int space = 0; space < 2; space++) {
        if (space == SL_MEM_DEVICE && sl_cdev_count() == 0) {
            if (g_rank == 0) skip(1, "device buffers: no CUDA device");
            continue;
        }
        const char *sname = space == SL_MEM_DEVICE ? "device" : "host";
        for (int impl = 0; impl < SL_NCOLLS; impl++) {
            if (!(only & (1u << impl))) continue;
            char why[160], line[200];
            int rc = sl_coll_available((sl_coll)impl, (sl_mem_space)space, why, sizeof why);
            if (rc) {
                snprintf(line, sizeof line, "%s %s: %s", sname, sl_coll_name(impl), why);
                if (g_rank == 0) skip(1, line);
                continue;
            }
            sl_comm *c;
            rc = sl_comm_create(&c, MPI_COMM_WORLD, (sl_coll)impl, (sl_mem_space)space);
            if (rc) {
                if (g_rank == 0) ok(0, "np=%d %s %s: create: %s", g_size, sname, sl_coll_name(impl), sl_coll_strerror(rc));
                continue;
            }
            segments[0] = sl_comm_segment(c);
            segments[1] = TINY_SEGMENT;
            check_direct_torus(c, sname, quick);
            if (space == SL_MEM_HOST && !counts_only && impl == SL_COLL_DIRECT) check_direct_windows();
            if (space == SL_MEM_HOST && !counts_only && impl == SL_COLL_TORUS)
                check_nb_bits(c, 1 + g_bidir, g_bidir ? "bidirectional" : "one way");
            /* A torus of one row or one column (1 x n: every prime rank count) runs the ring's
             * steps: the sweeps below are the ring's there, and cost time on 2 cores. */
            int rows, cols;
            sl_comm_torus(c, &rows, &cols);
            if (counts_only || (impl == SL_COLL_TORUS && (rows == 1 || cols == 1))) {
                sl_comm_destroy(c);
                continue;
            }
            sweep_collectives(c, sname);
            if (!quick) sweep_large(c, sname);
            sweep_nonblocking(c, sname, 0);
            sweep_nonblocking(c, sname, 1000); /* 250 f32, 125 f64, 500 bf16 per segment */
            sweep_nb_rs_ag(c, sname);
            sweep_p2p(c, sname);
            sweep_nb_p2p(c, sname);
            if (space == SL_MEM_HOST) sweep_errors(c);
            if (space == SL_MEM_HOST) check_node_bytes(c);
            sl_comm_destroy(c);
        }
    }
    if (g_rank == 0) done_testing();
    int status = exit_status();
    MPI_Finalize();
    return status;
}
