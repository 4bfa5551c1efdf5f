/* sl_trace.h — Chrome trace (Trace Event Format) writer.
 *
 * Each rank records complete events ("ph":"X") in memory; at the end rank 0 gathers them and
 * writes one <benchmark>.trace.json per run, with one process row per rank and one thread row
 * per tid, which loads in Perfetto (ui.perfetto.dev) or chrome://tracing. Recording is a no-op
 * unless --trace was given, so benchmarks can call it unconditionally.
 */
#ifndef SL_TRACE_H
#define SL_TRACE_H

#include <mpi.h>

void sl_trace_enable(int on);
int sl_trace_enabled(void);
/* Sets time zero; call at the same moment on every rank (after a barrier). */
void sl_trace_set_epoch(double t0);
/* Records [t_begin, t_end] (sl_now() seconds) named `name` in category `cat` on thread row
 * `tid` (0 = main; use e.g. 1 for a communication stream). name and cat are copied. */
void sl_trace_event(const char *name, const char *cat, int tid, double t_begin, double t_end);
/* Gathers every rank's events to rank 0 and writes `path`. Collective over comm. Returns the
 * number of events written (0 on other ranks). */
long sl_trace_write(const char *path, MPI_Comm comm);
void sl_trace_reset(void);

#endif
