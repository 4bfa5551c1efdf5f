/* bubble.h — pipeline.c's bubble figures, from what every rank recorded in each step: the
 * pipeline time W (stage 0's span from its first operation's start to its last one's end), the
 * stage's time in forward and backward work, and its waits for a gradient (before its first
 * backward of the step, and before the later ones, summed). Pure arithmetic on the gathered
 * records, so that the figures the rows and the lab sheet quote have one definition. */
#ifndef PIPELINE_BUBBLE_H
#define PIPELINE_BUBBLE_H

/* The records of one rank: PB_NREC arrays of nsteps doubles, one after the other. */
enum { PB_WIN, PB_WORK, PB_WAIT_FIRST_B, PB_WAIT_LATER_B, PB_NREC };

typedef struct pipe_bubble_figs {
    /* medians over the timed steps; per step, the largest over the replicas */
    double idle;  /* the busiest stage's idle time in W, seconds */
    double frac;  /* that over W */
    double mean;  /* the mean over the stages of idle / W */
    double span;  /* W */
    /* [p] each stage's idle / W, wait for its first backward's gradient and waits before its
     * later backwards (seconds per step) */
    double *stage_idle, *wait_first_b, *wait_later_b;
    int busiest;  /* the stage with the least idle (the lowest stage among equals) */
} pipe_bubble_figs;

/* all: the records of every rank (rank r*p + s is stage s of replica r), PB_NREC * n doubles per
 * rank; n steps of which the last `timed` are measured. out's arrays are allocated here
 * (pipe_bubble_free). */
void pipe_bubble_figures(const double *all, int p, int d, int n, int timed, pipe_bubble_figs *out);
void pipe_bubble_free(pipe_bubble_figs *f);

#endif
