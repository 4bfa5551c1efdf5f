/* slices.h — which elements of the flat parameter vector (serial.h's layout) tensor-parallel
 * rank r of t holds, and where in its own vector. With c = f/t, per block:
 *   A_r [c, h]  rows [r·c, (r+1)·c) of A      (column-parallel: its own output features)
 *   a_r [c]     the same features of a
 *   B_r [h, c]  columns [r·c, (r+1)·c) of B   (row-parallel: its own input features)
 *   b   [h]     all of b, replicated: added once, after the partial products are summed
 * one after another, per_block = 2·c·h + c + h elements; at t = 1 this is the flat layout. */
#ifndef MEGATRON_SLICES_H
#define MEGATRON_SLICES_H

#include <stddef.h>

#include "mlp.h"

size_t mm_slice_per_block(const sl_mlp *m, int t);

/* Calls fn(full, local, count, arg) for each contiguous run of elements rank r holds: flat
 * elements [full, full + count) are its [local, local + count). B_r is one run per row. */
typedef void (*mm_run_fn)(size_t full, size_t local, size_t count, void *arg);
void mm_slice_runs(const sl_mlp *m, int t, int r, mm_run_fn fn, void *arg);

/* Rank r's slices of sl_mlp_init_params(seed), into local (backend memory). */
void mm_slice_init(const sl_mlp *m, int t, int r, uint64_t seed, float *local);
/* Rank r's local vector (host) into its places in full (host). */
void mm_slice_scatter(const sl_mlp *m, int t, int r, const float *local, float *full);

#endif
