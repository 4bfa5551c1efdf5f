/* sl_compute.h — sleep mode (--compute real|sleep), the training layer's: in the timed steps
 * each piece of a technique's compute (a layer's forward or backward, the loss, the optimizer
 * step) is replaced by one sleep of the time it was measured to take, while communication
 * stays real, so that more ranks than cores still show the technique's shape (pipeline's
 * schedules on 4 ranks of a 2-core machine). Sleeping ranks leave the cores to the ranks still
 * "computing", which real compute on fewer cores than ranks does not.
 *
 * A technique takes the option by setting .sleep_mode in its sl_technique, with
 *   .reset      back to the initial weights and optimizer state: the timed steps train
 *               nothing, so the driver then runs every step again with real compute
 *               (t->replaying set) before the check and the row read the weights;
 *   .calibrate  (may be NULL) measures the rank's pieces alone: after the warm-up steps the
 *               driver runs it on each rank in turn, the others waiting without spinning;
 * and keeps an sl_compute_clock per rank: each piece runs through SL_COMPUTE_PIECE (its
 * shortest time kept while it computes, slept while t->sleeping), or a sum of pieces is slept
 * at once with sl_compute_sleep_span. The driver owns the rest: the option, t->sleeping in the
 * timed steps, a barrier before and after each of them that sleeps between polls, the
 * calibration's turns, the replay, the Open MPI and timer-slack settings, and the row's
 * compute_mode. */
#ifndef SL_COMPUTE_H
#define SL_COMPUTE_H

#include "sl_train.h"

/* The option (added to a .sleep_mode technique's program): 1 when --compute sleep was given. */
int sl_compute_sleep_mode(void);

/* A rank's measured pieces of work. */
typedef struct sl_compute_clock {
    double *shortest;  /* per piece: the shortest time it took (0: not yet run) */
    int npieces;
    double busy;       /* seconds in pieces, real or slept, so far */
    /* Advances the rank's messages in flight, between a sleep's slices and after each piece
     * (a large message moves only while its sender and receiver are inside the MPI library);
     * returns the sends still in flight. May be NULL. */
    int (*progress)(void *arg);
    void *arg;
} sl_compute_clock;
void sl_compute_clock_init(sl_compute_clock *c, int npieces, int (*progress)(void *), void *arg);
void sl_compute_clock_free(sl_compute_clock *c);

/* A timed piece: `work` runs (and the backend is synced) unless the step is slept, when the
 * piece's shortest time is slept instead; the span goes to `phase` as `name`. */
#define SL_COMPUTE_PIECE(t, c, piece, phase, name, work)                                         \
    do {                                                                                        \
        const double t0_ = sl_compute_piece_begin(t, c, piece);                                 \
        if (!(t)->sleeping) {                                                                   \
            work;                                                                               \
        }                                                                                       \
        sl_compute_piece_end(t, c, piece, phase, name, t0_);                                    \
    } while (0)
double sl_compute_piece_begin(sl_train *t, sl_compute_clock *c, int piece);
void sl_compute_piece_end(sl_train *t, sl_compute_clock *c, int piece, sl_phase phase, const char *name,
                          double t0);
/* Sleeps `seconds` (a sum of pieces' shortest times: one wake-up rather than one per piece,
 * each erring by microseconds), counted as busy and recorded in `phase` as `name`. */
void sl_compute_sleep_span(sl_train *t, sl_compute_clock *c, double seconds, sl_phase phase, const char *name);
/* Calibration: piece took `seconds` alone (kept if the shortest so far). */
void sl_compute_measured(sl_compute_clock *c, int piece, double seconds);

/* The shared MLP's pieces, for a clock of SL_COMPUTE_MLP_PIECES: layer l's forward and
 * backward, the loss, the optimizer step. */
#define SL_COMPUTE_FORWARD(l) (2 * (l))
#define SL_COMPUTE_BACKWARD(l) (2 * (l) + 1)
enum { SL_COMPUTE_LOSS = 2 * SL_MLP_MAX_LAYERS, SL_COMPUTE_OPTIM, SL_COMPUTE_MLP_PIECES };
/* In a slept step: sleeps layers [l0, l1)'s forward (backward = 0) or backward (1) pieces,
 * and the loss's with `loss`, as one sleep (sl_compute_sleep_span) and returns 1; otherwise
 * returns 0 (compute them). */
int sl_compute_sleep_layers(sl_train *t, sl_compute_clock *c, int l0, int l1, int backward, int loss,
                            sl_phase phase, const char *name);
/* A calibrate for the MLP's pieces: the rank's layer ranges [l0[i], l1[i]) (parameters at
 * params[i], the block of layer l0[i]) forward and backward on `rows` rows, the loss with
 * `loss`, and the optimizer step over nparams elements, 30 times each, alone. */
void sl_compute_calibrate_mlp(sl_train *t, sl_compute_clock *c, int nranges, const int *l0, const int *l1,
                              const float *const *params, int rows, int loss, size_t nparams);
/* One poll's pause of a wait in a slept step: progress, then 20 us asleep, so that a rank
 * waiting for a message does not spin on a core that a sleeping rank needs to wake on time. */
void sl_compute_nap(sl_compute_clock *c);

#endif
