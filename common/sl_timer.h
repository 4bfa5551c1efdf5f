/* sl_timer.h — host wall-clock timer and a device (CUDA event) timer.
 *
 * The device timer has the same API with and without CUDA: without it, sl_dev_timer_create
 * returns NULL and the benchmark falls back to host timing, so benchmarks need no #ifdef.
 */
#ifndef SL_TIMER_H
#define SL_TIMER_H

/* Seconds from a monotonic clock. */
double sl_now(void);

typedef struct sl_dev_timer sl_dev_timer;
sl_dev_timer *sl_dev_timer_create(void);        /* NULL where CUDA is not built or no device */
void sl_dev_timer_start(sl_dev_timer *t, void *stream);
void sl_dev_timer_stop(sl_dev_timer *t, void *stream);
double sl_dev_timer_seconds(sl_dev_timer *t); /* waits for the stop event */
void sl_dev_timer_destroy(sl_dev_timer *t);

#endif
