/* error.c — fatal errors (exit 3, all ranks) and usage errors (exit 2, one line). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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

void sl_fatal(int code, const char *file, int line, const char *fmt, ...)
{
    int rank = 0;
    if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fflush(stdout);
    fprintf(stderr, "%s: [rank %d] %s:%d: ", program_name, rank, file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

/* The rank as the launcher tells it, for messages printed before MPI is initialised. */
int sl_launcher_rank(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

void sl_usage_error(const char *fmt, ...)
{
    int rank = sl_launcher_rank();
    if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        fflush(stdout);
        fprintf(stderr, "%s: ", program_name);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(" (see --help)\n", stderr);
        fflush(stderr);
    }
    if (mpi_running()) MPI_Finalize();
    exit(SL_EXIT_USAGE);
}
