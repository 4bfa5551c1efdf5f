/* sl_slowdown.h — the test-only slowdown switch, for tests of the regression gate.
 *
 * SL_TEST_SLOWDOWN=PROGRAM:FRACTION (e.g. ddp:0.2): in the program named PROGRAM, every timed
 * iteration of the technique is lengthened by FRACTION of its own measured duration, by a busy
 * wait inside the timed region (the timer includes it). The ceilings the rows' gate metrics
 * divide by (results/schema.md, "gate") are measured inside sl_slowdown_ceiling(1) ...
 * sl_slowdown_ceiling(0) and are not slowed: the slowdown then looks like a regression of the
 * technique's own code, which a gate on a normalised metric must catch, and a machine that is
 * slower overall (ceiling and technique alike) does not. Like SL_TEST_CORRUPT, it exists for
 * the tests and for measuring the gate's detection rate; a run that has it says so on stderr.
 */
#ifndef SL_SLOWDOWN_H
#define SL_SLOWDOWN_H

/* Reads SL_TEST_SLOWDOWN once (sl_init, before MPI starts): a malformed value is a usage
 * error (exit 2). A PROGRAM other than `program` leaves the switch off. */
void sl_slowdown_init(const char *program);

/* The fraction in force for this program (0: off), for the note on stderr. */
double sl_slowdown_fraction(void);

/* Around the measurement of a ceiling (nestable): iterations inside are not slowed. */
void sl_slowdown_ceiling(int on);

/* At the end of a timed region that began at t0 (sl_now()), before its end is read: busy-waits
 * FRACTION of the time since t0 when the switch is on and no ceiling is being measured. */
void sl_slowdown_pad(double t0);

#endif
