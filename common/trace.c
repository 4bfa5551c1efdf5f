/* trace.c — per-rank event recording and one Chrome trace file per run (see sl_trace.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_error.h"
#include "sl_json.h"
#include "sl_trace.h"

typedef struct event {
    char name[48], cat[24];
    int tid;
    double t0, t1;
} event;

static int enabled;
static double epoch;
static event *events;
static size_t nevents, capacity;

void sl_trace_enable(int on) { enabled = on; }
int sl_trace_enabled(void) { return enabled; }
void sl_trace_set_epoch(double t0) { epoch = t0; }

void sl_trace_event(const char *name, const char *cat, int tid, double t_begin, double t_end)
{
    if (!enabled) return;
    if (nevents == capacity) {
        size_t cap = capacity ? 2 * capacity : 1024;
        event *e = realloc(events, cap * sizeof *e);
        if (!e) SL_FATAL("out of memory recording trace events (%zu)", cap);
        events = e;
        capacity = cap;
    }
    event *e = &events[nevents++];
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->cat, sizeof e->cat, "%s", cat);
    e->tid = tid;
    e->t0 = t_begin;
    e->t1 = t_end;
}

void sl_trace_reset(void)
{
    free(events);
    events = NULL;
    nevents = capacity = 0;
}

/* This rank's events as comma-separated JSON objects, timestamps in microseconds. */
static void serialise(int rank, sl_json *j)
{
    char meta[160];
    snprintf(meta, sizeof meta,
             "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
             rank, rank);
    sl_json_raw(j, NULL, meta);
    for (size_t i = 0; i < nevents; i++) {
        const event *e = &events[i];
        sl_json_obj_begin(j, NULL);
        sl_json_str(j, "name", e->name);
        sl_json_str(j, "cat", e->cat);
        sl_json_str(j, "ph", "X");
        sl_json_int(j, "pid", rank);
        sl_json_int(j, "tid", e->tid);
        sl_json_num(j, "ts", (e->t0 - epoch) * 1e6);
        sl_json_num(j, "dur", (e->t1 - e->t0) * 1e6);
        sl_json_obj_end(j);
    }
}

long sl_trace_write(const char *path, MPI_Comm comm)
{
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);

    /* Serialise inside a dummy array so that the JSON writer places the commas. */
    sl_json j;
    sl_json_init(&j);
    sl_json_arr_begin(&j, NULL);
    serialise(rank, &j);
    sl_json_arr_end(&j);
    /* strip the brackets: each rank contributes "ev,ev,..." */
    int len = (int)j.len - 2;
    long count = (long)nevents, total_events = 0;
    SL_CHECK_MPI(MPI_Reduce(&count, &total_events, 1, MPI_LONG, MPI_SUM, 0, comm));

    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        lens = calloc((size_t)nranks, sizeof *lens);
        displs = calloc((size_t)nranks, sizeof *displs);
        if (!lens || !displs) SL_FATAL("out of memory gathering the trace");
    }
    SL_CHECK_MPI(MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, comm));
    long total = 0;
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) {
            displs[r] = (int)total;
            total += lens[r];
        }
        all = malloc((size_t)total + 1);
        if (!all) SL_FATAL("out of memory gathering %ld bytes of trace", total);
    }
    SL_CHECK_MPI(MPI_Gatherv(j.buf + 1, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, comm));
    sl_json_free(&j);

    if (rank == 0) {
        /* A new file, never through a symbolic link; a trace of an earlier program of the same
         * name in this run is replaced. */
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0664);
        if (fd < 0 && errno == EEXIST)
            fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) SL_FATAL("cannot write the trace %s: %s", path, strerror(errno));
        FILE *f = fdopen(fd, "w");
        if (!f) SL_FATAL("cannot write the trace %s: %s", path, strerror(errno));
        int ok = fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f) != EOF;
        for (int r = 0; ok && r < nranks; r++) {
            if (r && fputc(',', f) == EOF) ok = 0;
            if (ok && fwrite(all + displs[r], 1, (size_t)lens[r], f) != (size_t)lens[r]) ok = 0;
        }
        ok = ok && fputs("]}\n", f) != EOF && fflush(f) == 0;
        int err = errno;
        if (fclose(f) != 0 && ok) {
            ok = 0;
            err = errno;
        }
        if (!ok) {
            unlink(path); /* a cut trace does not load; say so rather than leave it */
            SL_FATAL("cannot write the trace %s: %s (removed)", path, strerror(err));
        }
        free(all);
        free(lens);
        free(displs);
    }
    return rank == 0 ? total_events : 0;
}
