/* coll_device.c (no CUDA) — the device side of the communication layer in a build without
 * CUDA: nothing is built, no device is visible. sl_coll_available refuses device communicators
 * before any of the other functions could be reached, so reaching them is a bug. */
#include "coll_device.h"
#include "sl_error.h"

#define NOT_BUILT(what) SL_FATAL("%s: CUDA not built", what)

int sl_cdev_built(void) { return 0; }
int sl_cdev_count(void) { return 0; }
void sl_cdev_set(int dev) { (void)dev; NOT_BUILT("sl_cdev_set"); }
int sl_cdev_current(void) { NOT_BUILT("sl_cdev_current"); }
void *sl_cdev_malloc(size_t bytes) { (void)bytes; NOT_BUILT("sl_cdev_malloc"); }
void sl_cdev_free(void *p) { (void)p; }
void *sl_cdev_host_alloc(size_t bytes) { (void)bytes; NOT_BUILT("sl_cdev_host_alloc"); }
void sl_cdev_host_free(void *p) { (void)p; }
void *sl_cdev_stream_create(void) { NOT_BUILT("sl_cdev_stream_create"); }
void sl_cdev_stream_destroy(void *stream) { (void)stream; }
void sl_cdev_stream_sync(void *stream) { (void)stream; }
int sl_cdev_stream_done(void *stream) { (void)stream; return 1; }

void *sl_cdev_event_record(void *stream) { (void)stream; NOT_BUILT("sl_cdev_event_record"); }
int sl_cdev_event_done(void *event) { (void)event; return 1; }
void sl_cdev_event_destroy(void *event) { (void)event; }

void sl_cdev_memcpy(void *dst, const void *src, size_t bytes, int kind, void *stream)
{
    (void)dst; (void)src; (void)bytes; (void)kind; (void)stream;
    NOT_BUILT("sl_cdev_memcpy");
}

void sl_cdev_reduce(void *dst, const void *a, const void *b, size_t n, sl_dtype t, int op,
                    void *stream)
{
    (void)dst; (void)a; (void)b; (void)n; (void)t; (void)op; (void)stream;
    NOT_BUILT("sl_cdev_reduce");
}

void sl_cdev_divide(void *buf, size_t n, sl_dtype t, int divisor, void *stream)
{
    (void)buf; (void)n; (void)t; (void)divisor; (void)stream;
    NOT_BUILT("sl_cdev_divide");
}
