/* error.c — fatal errors (exit 3, all ranks) and usage errors (exit 2, one line). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_error.h"

static const char *program_name = "scalelab";

void sl_set_program_name(const char *name) { program_name = name; }
const char *sl_program_name(void) { return program_name; }

static int mpi_running(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

/* Writes HEAD, the formatted message and TAIL to stderr in one write(): the ranks' lines reach
 * the launcher through pipes, and a line written in pieces (stderr is unbuffered) could be cut
 * by another rank's. A write of up to PIPE_BUF (4096) bytes to a pipe is never interleaved;
 * a longer message is cut to fit, ending in "...". */
__attribute__((format(printf, 3, 0))) static void write_line(const char *head, const char *tail,
                                                              const char *fmt, va_list ap)
{
    char buf[4096];
    const size_t cap = sizeof buf - 5; /* room for "...\n" and the terminator */
    size_t len = (size_t)snprintf(buf, cap, "%s", head);
    if (len < cap) len += (size_t)vsnprintf(buf + len, cap - len, fmt, ap);
    if (len < cap) len += (size_t)snprintf(buf + len, cap - len, "%s", tail);
    if (len >= cap) { /* cut: snprintf left cap - 1 bytes */
        len = cap - 1;
        memcpy(buf + len, "...", 3);
        len += 3;
    }
    buf[len++] = '\n';
    fflush(stdout);
    fflush(stderr);
    for (size_t done = 0; done < len;) {
        ssize_t n = write(STDERR_FILENO, buf + done, len - done);
        if (n <= 0) break; /* nowhere left to say it */
        done += (size_t)n;
    }
}

void sl_fatal(int code, const char *file, int line, const char *fmt, ...)
{
    int rank = 0;
    if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char head[512];
    snprintf(head, sizeof head, "%s: [rank %d] %s:%d: ", program_name, rank, file, line);
    va_list ap;
    va_start(ap, fmt);
    write_line(head, "", fmt, ap);
    va_end(ap);
    if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* The first of the launchers' variables NAMES[0..N) that is set, as a number; FALLBACK where
 * none is (no launcher started this process). */
static int launcher_var(const char *const *names, size_t n, int fallback)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return fallback;
}

/* The rank as the launcher tells it, for messages printed before MPI is initialised. */
int sl_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    return launcher_var(vars, sizeof vars / sizeof vars[0], 0);
}

/* The number of ranks as the launcher tells it (1 where no launcher started this process). */
static int launcher_size(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    return launcher_var(vars, sizeof vars / sizeof vars[0], 1);
}

/* Waits, at most a few seconds, until every rank has reached this point. A deadline rather than
 * MPI_Barrier: a rank whose options (or environment) differ from the others' never comes, and a
 * usage error must not become a hang. */
static void meet_the_other_ranks(void)
{
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) return;
    for (int i = 0; i < 5000; i++) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        usleep(1000);
    }
}

void sl_usage_error(const char *fmt, ...)
{
    /* Options are parsed before MPI starts, on every rank, and every rank comes here. Rank 0
     * prints; the others must not exit first: a launcher that sees a rank exit non-zero stops
     * the rest, and under load it could stop rank 0 before its line is written. So where a
     * launcher started several ranks, they start MPI and meet once rank 0 has printed. */
    int init = 0;
    MPI_Initialized(&init);
    if (!init && launcher_size() > 1) MPI_Init(NULL, NULL); /* on failure: print and exit alone */
    int rank = sl_launcher_rank();
    if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        char head[256];
        snprintf(head, sizeof head, "%s: ", program_name);
        va_list ap;
        va_start(ap, fmt);
        write_line(head, " (see --help)", fmt, ap);
        va_end(ap);
    }
    if (mpi_running()) {
        meet_the_other_ranks();
        MPI_Finalize();
    }
    exit(SL_EXIT_USAGE);
}
