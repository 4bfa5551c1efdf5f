/* sl_sim.h — running under a simulator (SimGrid's SMPI, `make SIMGRID=1`, scripts/simulate):
 * whether this build is simulated, the platform the rows are marked with, and memory folding.
 *
 * Folding: SMPI runs every rank in one process, so 1024 ranks of 512 MiB buffers cannot all be
 * real. With $SL_SIM_FOLD=BYTES, an allocation larger than that is mapped onto pages shared by
 * every rank (SMPI_SHARED_MALLOC): messages from and into it still take their simulated time,
 * but its contents are not real, so arithmetic and copies into it are skipped (sl_sim_real
 * says which) and a program checks its results on real buffers of the same size instead, or
 * reports the check as skipped. In the normal build every function here is a no-op. */
#ifndef SL_SIM_H
#define SL_SIM_H

#include <stddef.h>

/* 1 in the SMPI build (make SIMGRID=1), 0 otherwise. */
int sl_sim_active(void);
/* The platform as scripts/simulate describes it ($SL_SIM_PLATFORM), or "" where unset; NULL
 * in the normal build. */
const char *sl_sim_platform(void);
/* Under the simulator, writes "simulated": {"simulator", "platform"} into the open JSON object
 * (a results row, the manifest); nothing in the normal build. */
struct sl_json;
void sl_sim_json(struct sl_json *j);

/* The largest allocation kept real ($SL_SIM_FOLD), 0 when nothing is folded. */
size_t sl_sim_fold_bytes(void);

/* 1 when an allocation of `bytes` (what the program asked for) is folded: folding is on and
 * bytes is over the limit. A buffer of exactly $SL_SIM_FOLD bytes is real. */
int sl_sim_folds(size_t bytes);
/* Allocates `total` bytes folded (page aligned) when sl_sim_folds(bytes); NULL when folding
 * does not apply (the caller allocates normally). The decision is on `bytes`, not on `total`
 * (bytes plus the allocator's header), so that a buffer at the limit stays real as the programs
 * that compare their sizes with the limit expect. `note` is kept for sl_sim_free: what the
 * caller would write into the block itself, which every rank's folded blocks share. */
void *sl_sim_alloc(size_t bytes, size_t total, size_t note);
/* Frees p if sl_sim_alloc made it (returns 1, with its note), else returns 0. */
int sl_sim_free(void *p, size_t *note);
/* 1 when [p, p + len) holds real data (it touches no folded allocation). */
int sl_sim_real(const void *p, size_t len);

/* Compute sampling ($SL_SIM_SAMPLE=N, scripts/simulate --sample N). A block of computation
 * written
 *
 *     SL_SIM_SAMPLED("site", key) { ...the computation... }
 *
 * runs for real, timed, its first N times per (site, key) on each rank; after that, while the
 * program has sampling on (sl_sim_sampling(1)), it is skipped and the mean of those N runs is
 * charged to the simulated clock in its place, where the program's computation is charged at
 * all ($SL_SIM_CHARGE=1: scripts/simulate sets it for the programs other than allreduce). Its
 * outputs are then not computed, so a program turns sampling on only around work whose results
 * no check reads: allreduce, for its timed calls, never for the call it checks. Key: what the
 * block's time depends on (its element count). In the normal build the block just runs. */
#if SL_SMPI
typedef struct sl_sim_sample {
    int slot;  /* the (site, key) entry, -1 when not sampling */
    int state; /* 0: run the block and time it, 1: done */
    double t0;
} sl_sim_sample;
sl_sim_sample sl_sim_sample_begin(const char *site, size_t key);
void sl_sim_sample_end(sl_sim_sample *s);
#define SL_SIM_SAMPLED(site, key)                                                                 \
    for (sl_sim_sample sl_sample_ = sl_sim_sample_begin(site, key); !sl_sample_.state;           \
         sl_sim_sample_end(&sl_sample_))
#else
#define SL_SIM_SAMPLED(site, key)
#endif
/* Turns sampling on (1) or off (0) on this rank; off at the start. No-op in the normal build. */
void sl_sim_sampling(int on);
/* Samples per (site, key) ($SL_SIM_SAMPLE), 0 when compute is not sampled. */
int sl_sim_samples(void);

#endif
