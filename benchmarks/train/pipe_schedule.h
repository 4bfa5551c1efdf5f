/* pipe_pipe_schedule.h — pipeline.c's schedules as explicit lists of operations: one builder per
 * schedule gives each stage its list of forwards and backwards, simulate times those lists by
 * their dependencies, and print_timeline draws the result as the text timeline. Nothing here
 * depends on the program's options; pipeline.c's stage executor runs the lists. */
#ifndef PIPELINE_SCHEDULE_H
#define PIPELINE_SCHEDULE_H

#include "sl_enum.h"

#define SCHEDULES(X) X(S_GPIPE, "gpipe") X(S_1F1B, "1f1b") X(S_INTERLEAVED, "interleaved") X(S_PIPEDREAM, "pipedream")
SL_ENUM(schedule, SCHEDULES, NSCHEDULES);
extern const char *const schedule_names[NSCHEDULES];

typedef struct op {
    char kind;  /* 'F' or 'B' */
    int mb;     /* micro-batch: within the step, or in the whole stream (pipedream) */
    int chunk;  /* the stage's model chunk (interleaved), else 0 */
} op;

typedef struct geometry {
    int p, v, m;   /* stages, chunks per stage, micro-batches per step */
    int nsteps;    /* pipedream's stream runs over all of them */
} geometry;

/* Fills ops with stage s's list for the schedule; returns its length (at most ops_capacity). */
typedef int (*build_fn)(const geometry *g, int s, op *ops);
extern const build_fn builders[NSCHEDULES];

/* Entries a stage's list can need: a forward and a backward per micro-batch and chunk, over
 * every step (pipedream's stream). */
int ops_capacity(const geometry *g);

/* The lists' start times by their dependencies; the makespan, or -1 on deadlock (schedule.c). */
int simulate(const geometry *g, op *const *ops, const int *n, int **start);

/* The text timeline of schedule sched on stdout; pipedream: its first nshow operations. */
void print_timeline(const geometry *g0, int sched, int nshow);

#endif
