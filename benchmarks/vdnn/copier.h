/* copier.h — vdnn's copy engine between the device (the arena) and pinned host memory, beside
 * the compute stream.
 *
 * On cuda it is a copy stream: a copy waits (by an event) for the compute work queued before
 * it, and the compute stream waits (by an event) for a copy before it uses or reuses the copy's
 * memory; the host never waits for the device inside a step. In the cpu emulation it is a
 * helper thread doing memcpy in order, and the "compute stream" is the main thread, which
 * blocks where the device would stall.
 *
 * Per step it measures the seconds the engine was copying (transfer), the seconds the compute
 * stream stood waiting for a copy (exposed), and the bytes each way. */
#ifndef VDNN_COPIER_H
#define VDNN_COPIER_H

#include <stddef.h>

#include "kernels.h"

typedef struct copier copier;

typedef struct copier_step {
    double transfer_s, exposed_s;
    size_t bytes_d2h, bytes_h2d;
    int copies;
} copier_step;

/* maxcopies: copies (and waits) one step may issue. */
copier *copier_open(sl_backend be, int maxcopies);
void copier_close(copier *c);
/* Queues a copy (kind SL_K_D2H or SL_K_H2D) that starts once the compute work queued so far is
 * done; returns its ticket. */
int copier_start(copier *c, void *dst, const void *src, size_t bytes, sl_k_copy_kind kind);
/* The compute stream waits for copy `ticket` before what is queued next. */
void copier_wait(copier *c, int ticket);
/* Ends the step: waits for its copies and compute work (events only), fills *st and starts
 * the next step's tickets at 0. */
void copier_step_end(copier *c, copier_step *st);

#endif
