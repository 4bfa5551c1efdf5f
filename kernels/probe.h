/* probe.h — the memory-bandwidth probes programs set their figures against, measured in the
 * same run: a read (every element of an array of doubles summed, as STREAM's read kernels) and
 * a copy (read + write counted, as STREAM's copy), in a backend's memory.
 *
 * threads = 0: the backend's own kernels (sl_k_read_sum; sl_k_memcpy device to device), on
 * the OpenMP threads where the cpu backend uses them, or on the device; threads = T > 0 (cpu):
 * exactly T threads, each reading or copying its contiguous part, which is what T threads of a
 * program (or one rank's one thread) can draw. */
#ifndef SL_KERNELS_PROBE_H
#define SL_KERNELS_PROBE_H

#include "kernels.h"
#include "sl_harness.h"

typedef enum { SL_PROBE_READ, SL_PROBE_COPY } sl_probe_kind;

typedef struct sl_probe {
    sl_probe_kind kind;
    sl_backend be;
    size_t bytes; /* of the array read, or copied */
    int threads;  /* as above; may change between runs */
    char *src, *dst;
    double sink;  /* the sums read, so that no compiler drops the reads */
} sl_probe;

/* Allocates (SL_MEM_OTHER, in the backend's memory) and fills the arrays. */
void sl_probe_init(sl_probe *p, sl_probe_kind kind, sl_backend be, size_t bytes, int threads);
void sl_probe_free(sl_probe *p);

/* Times the probe with sl_time_loop_n (every rank at once; a call ends when the backend is
 * done) into st; returns the bytes one call moves per rank: bytes for a read, 2 bytes for a
 * copy. */
double sl_probe_run(sl_ctx *ctx, sl_probe *p, int warmup, int iters, sl_stats *st);

/* Starts the row of a probe run: variant, backend, time, the bandwidth metric (GB/s) as the
 * headline and check "none"; the caller adds its parameters and emits it. */
void sl_probe_result(sl_ctx *ctx, const sl_probe *p, const sl_stats *st, sl_result *r,
                     const char *variant, const char *metric, double gbps);

#endif
