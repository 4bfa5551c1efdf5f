/* sl_error.h — exit codes and the error macros every program uses.
 *
 * A runtime failure prints the failing call, file and line, then aborts all ranks (exit 3).
 * A usage error prints one line naming the option and what it accepts (exit 2).
 */
#ifndef SL_ERROR_H
#define SL_ERROR_H

#include <mpi.h>

enum {
    SL_EXIT_OK = 0,
    SL_EXIT_CHECK = 1,   /* a result failed validation, or a requested threshold was missed */
    SL_EXIT_USAGE = 2,   /* bad command line */
    SL_EXIT_RUNTIME = 3, /* out of memory, no device, MPI or CUDA failure */
};

/* Prints "<program>: [rank r] file:line: message" and ends every rank with `code`
 * (MPI_Abort when MPI is running, exit otherwise). */
#ifdef __cplusplus
extern "C" {
#endif

void sl_fatal(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));

/* A usage error that every rank detects identically (they all parsed the same command line):
 * rank 0 prints "<program>: message", every rank exits 2 without an abort storm. */
void sl_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* This process's rank as the launcher (mpirun, srun, ...) tells it, for output before MPI is
 * initialised; 0 when started without a launcher. */
int sl_launcher_rank(void);

/* The program name used as the prefix of every message (set by sl_init). */
void sl_set_program_name(const char *name);
const char *sl_program_name(void);

#ifdef __cplusplus
}
#endif

#define SL_FATAL(...) sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, __VA_ARGS__)

#define SL_CHECK_MPI(call)                                                        \
    do {                                                                          \
        int sl_rc_ = (call);                                                      \
        if (sl_rc_ != MPI_SUCCESS) {                                              \
            char sl_msg_[MPI_MAX_ERROR_STRING];                                   \
            int sl_len_ = 0;                                                      \
            MPI_Error_string(sl_rc_, sl_msg_, &sl_len_);                          \
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, "%s failed: %s", #call, \
                     sl_msg_);                                                    \
        }                                                                         \
    } while (0)

/* For libc calls that return -1 / NULL and set errno. */
#define SL_CHECK_SYS(ok, call)                                                          \
    do {                                                                                \
        if (!(ok))                                                                      \
            sl_fatal(SL_EXIT_RUNTIME, __FILE__, __LINE__, "%s failed: %s", call,        \
                     strerror(errno));                                                  \
    } while (0)

#endif
