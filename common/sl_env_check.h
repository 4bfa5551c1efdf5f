/* sl_env_check.h — the environment variables that change what a program does, checked once at
 * start-up (sl_init, before MPI starts and before any OpenMP region runs): a malformed value is
 * a usage error (exit 2) whose one line names the variable and what it accepts, never a silent
 * fallback.
 *
 *   OMP_NUM_THREADS       read by libgomp, which only warns and falls back to its default
 *   OPENBLAS_NUM_THREADS  read by OpenBLAS, which reads garbage as 0 (its default, every core)
 *   SL_TEST_CORRUPT       the tests' switch that spoils one result so that a check must fail
 *   SL_NO_PHASES          the training programs' phase recording off (its cost, measured)
 *   SL_NO_PREDICT         the training programs' step prediction (and its calibration) off
 * SL_TEST_SLOWDOWN is checked by sl_slowdown_init (sl_slowdown.h), SL_COLL_SEGMENT,
 * SL_COLL_RANKS_PER_NODE and SL_COLL_STAGE by sl_init with the communication layer's parsers.
 */
#ifndef SL_ENV_CHECK_H
#define SL_ENV_CHECK_H

#include <stddef.h>

/* The most threads a *_NUM_THREADS variable may ask for. */
#define SL_MAX_ENV_THREADS 4096

/* Checks the variables above: 0, or SL_EXIT_USAGE with the one-line message in err. */
int sl_env_check(char *err, size_t len);

/* SL_TEST_CORRUPT=1: the tests of a check ask a program to spoil one result (checked by
 * sl_env_check: 0, 1 or unset). */
int sl_test_corrupt(void);

/* SL_NO_PHASES=1: the training programs record no phases of a step (sl_train_record and
 * sl_train_span do nothing), so that a step with them can be timed against one without: the
 * phase timers' own cost. Checked by sl_env_check: 0, 1 or unset. */
int sl_no_phases(void);

/* SL_NO_PREDICT=1: the training programs neither calibrate nor predict the step (the rows say
 * params.predict "off"): tests that do not read the prediction save the calibration's time.
 * Checked by sl_env_check: 0, 1 or unset. */
int sl_no_predict(void);

#endif
