/* nocuda/dev_timer.c — the device timer where CUDA is not built: there is no device to time,
 * so create returns NULL and callers time on the host. */
#include <stddef.h>

#include "sl_timer.h"

sl_dev_timer *sl_dev_timer_create(void) { return NULL; }
void sl_dev_timer_start(sl_dev_timer *t, void *stream) { (void)t, (void)stream; }
void sl_dev_timer_stop(sl_dev_timer *t, void *stream) { (void)t, (void)stream; }
double sl_dev_timer_seconds(sl_dev_timer *t) { (void)t; return 0.0; }
void sl_dev_timer_destroy(sl_dev_timer *t) { (void)t; }
