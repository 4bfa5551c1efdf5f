/* copier.c — the copy engine of copier.h: a helper thread in the cpu emulation, a copy stream
 * with events on cuda. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sl_error.h"
#include "sl_timer.h"
#include "copier.h"

typedef struct request {
    void *dst;
    const void *src;
    size_t bytes;
} request;

struct copier {
    sl_backend be;
    int emulated, max;
    int issued, waits;       /* this step's copies and waits */
    size_t d2h, h2d;
    /* emulation: requests [done, issued) are queued for the thread, in order */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, finished;
    request *queue;
    int done, stop;
    double busy, exposed;    /* seconds: the thread copying, the main thread waiting */
    /* device: per copy, ready (compute), start and end (copy stream); per wait, the compute
     * stream's marks around it; fin, the end of the step's compute */
    sl_k_stream *stream;
    sl_k_event **ready, **start, **end, **w0, **w1, *fin;
};

static void *copy_thread(void *arg)
{
    copier *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->done == c->issued) pthread_cond_wait(&c->work, &c->mu);
        if (c->done == c->issued) break; /* stopping, nothing left */
        request r = c->queue[c->done];
        pthread_mutex_unlock(&c->mu);
        double t0 = sl_now();
        memcpy(r.dst, r.src, r.bytes);
        double t1 = sl_now();
        pthread_mutex_lock(&c->mu);
        c->busy += t1 - t0;
        c->done++;
        pthread_cond_broadcast(&c->finished);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static sl_k_event **events(sl_backend be, int n)
{
    sl_k_event **e = calloc((size_t)n, sizeof *e);
    if (!e) SL_FATAL("out of memory for %d events", n);
    for (int i = 0; i < n; i++) e[i] = sl_k_event_create(be);
    return e;
}

static void events_free(sl_backend be, sl_k_event **e, int n)
{
    for (int i = 0; e && i < n; i++) sl_k_event_destroy(be, e[i]);
    free(e);
}

copier *copier_open(sl_backend be, int maxcopies)
{
    copier *c = calloc(1, sizeof *c);
    if (!c) SL_FATAL("out of memory for the copy engine");
    c->be = be;
    c->max = maxcopies;
    c->emulated = be != SL_BACKEND_CUDA;
    if (c->emulated) {
        c->queue = calloc((size_t)maxcopies, sizeof *c->queue);
        if (!c->queue) SL_FATAL("out of memory for %d copies", maxcopies);
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->work, NULL);
        pthread_cond_init(&c->finished, NULL);
        int rc = pthread_create(&c->thread, NULL, copy_thread, c);
        if (rc) SL_FATAL("pthread_create of the copy thread failed: %s", strerror(rc));
    } else {
        c->stream = sl_k_stream_create(be);
        c->ready = events(be, maxcopies);
        c->start = events(be, maxcopies);
        c->end = events(be, maxcopies);
        c->w0 = events(be, maxcopies);
        c->w1 = events(be, maxcopies);
        c->fin = sl_k_event_create(be);
    }
    return c;
}

void copier_close(copier *c)
{
    if (!c) return;
    if (c->emulated) {
        pthread_mutex_lock(&c->mu);
        c->stop = 1;
        pthread_cond_signal(&c->work);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        pthread_cond_destroy(&c->work);
        pthread_cond_destroy(&c->finished);
        pthread_mutex_destroy(&c->mu);
        free(c->queue);
    } else {
        sl_k_stream_sync(c->be, c->stream);
        sl_k_stream_destroy(c->be, c->stream);
        events_free(c->be, c->ready, c->max);
        events_free(c->be, c->start, c->max);
        events_free(c->be, c->end, c->max);
        events_free(c->be, c->w0, c->max);
        events_free(c->be, c->w1, c->max);
        sl_k_event_destroy(c->be, c->fin);
    }
    free(c);
}


int copier_start(copier *c, void *dst, const void *src, size_t bytes, sl_k_copy_kind kind)
{
    int t = c->issued;
    if (t == c->max) SL_FATAL("copy engine: more than %d copies in one step", c->max);
    if (kind == SL_K_D2H) c->d2h += bytes;
    else c->h2d += bytes;
    if (c->emulated) {
        pthread_mutex_lock(&c->mu);
        c->queue[t] = (request){dst, src, bytes};
        c->issued++;
        pthread_cond_signal(&c->work);
        pthread_mutex_unlock(&c->mu);
    } else {
        c->issued++;
        sl_k_event_record(c->be, c->ready[t], NULL);          /* what the copy reads is written */
        sl_k_stream_wait_event(c->be, c->stream, c->ready[t]); /* and what it overwrites is read */
        sl_k_event_record(c->be, c->start[t], c->stream);
        sl_k_memcpy_async(c->be, dst, src, bytes, kind, c->stream);
        sl_k_event_record(c->be, c->end[t], c->stream);
    }
    return t;
}

void copier_wait(copier *c, int ticket)
{
    if (c->emulated) {
        pthread_mutex_lock(&c->mu);
        if (c->done <= ticket) {
            double t0 = sl_now();
            while (c->done <= ticket) pthread_cond_wait(&c->finished, &c->mu);
            c->exposed += sl_now() - t0;
        }
        pthread_mutex_unlock(&c->mu);
    } else {
        int w = c->waits++;
        if (w == c->max) SL_FATAL("copy engine: more than %d waits in one step", c->max);
        sl_k_event_record(c->be, c->w0[w], NULL);
        sl_k_stream_wait_event(c->be, NULL, c->end[ticket]);
        sl_k_event_record(c->be, c->w1[w], NULL);
    }
}

void copier_step_end(copier *c, copier_step *st)
{
    memset(st, 0, sizeof *st);
    st->copies = c->issued;
    st->bytes_d2h = c->d2h;
    st->bytes_h2d = c->h2d;
    if (c->emulated) {
        pthread_mutex_lock(&c->mu);
        while (c->done < c->issued) pthread_cond_wait(&c->finished, &c->mu);
        st->transfer_s = c->busy;
        st->exposed_s = c->exposed;
        c->done = c->issued = 0;
        c->busy = c->exposed = 0;
        pthread_mutex_unlock(&c->mu);
    } else {
        sl_k_event_record(c->be, c->fin, NULL);
        sl_k_event_sync(c->be, c->fin);
        if (c->issued) sl_k_event_sync(c->be, c->end[c->issued - 1]);
        for (int t = 0; t < c->issued; t++) st->transfer_s += sl_k_event_elapsed(c->be, c->start[t], c->end[t]);
        for (int w = 0; w < c->waits; w++) st->exposed_s += sl_k_event_elapsed(c->be, c->w0[w], c->w1[w]);
        c->issued = c->waits = 0;
    }
    c->d2h = c->h2d = 0;
}
