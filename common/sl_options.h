/* sl_options.h — the command line shared by every program (DESIGN.md, "Command line"), plus a
 * per-program table of technique options.
 *
 * Parsing is strict: an unknown option, a missing or malformed value, a value out of range
 * or an option that does not apply to the program is a usage error whose one-line message
 * names the option and what it accepts. sl_options_parse reports it in `err` (for tests);
 * sl_init prints it and exits 2.
 */
#ifndef SL_OPTIONS_H
#define SL_OPTIONS_H

#include <stddef.h>
#include "sl_types.h"

struct sl_ctx;

#define SL_MAX_LIST 32
#define SL_MAX_GIVEN 160 /* options on one command line: each at most once */

/* MPI thread levels, lowest first (sl_program.mpi_thread, --mpi-thread). Open MPI takes locks
 * on every call above single, which costs small messages 1.3-1.5x: a program asks for the
 * lowest level it needs. */
#define SL_MPI_THREAD_LIST(X)                                                                 \
    X(SL_MPI_THREAD_SINGLE, "single") X(SL_MPI_THREAD_FUNNELED, "funneled")                   \
    X(SL_MPI_THREAD_SERIALIZED, "serialized") X(SL_MPI_THREAD_MULTIPLE, "multiple")
SL_ENUM(sl_mpi_thread, SL_MPI_THREAD_LIST, SL_NMPI_THREADS);

/* A comma-separated list of integers ("1,2,4"); `max` is allowed where the option says so
 * and is resolved by the program (e.g. to the number of cores). Every list option, of
 * integers or of names, takes each value once: a repeated value is a usage error. */
typedef struct sl_int_list {
    int n;
    long long v[SL_MAX_LIST];
    int is_max; /* the word was given: "max", or the option's choices (e.g. "sweep") */
} sl_int_list;

typedef enum {
    SL_OPT_INT,      /* long long *dest, within [min, max] */
    SL_OPT_SIZE,     /* size_t *dest, K/M/G suffixes (powers of 1024), within [min, max] */
    SL_OPT_DOUBLE,   /* double *dest */
    SL_OPT_STRING,   /* const char **dest */
    SL_OPT_CHOICE,   /* int *dest = index of the value in choices "a|b|c" */
    SL_OPT_FLAG,     /* int *dest = 1; takes no value */
    SL_OPT_INT_LIST, /* sl_int_list *dest, each within [min, max]; if allow_max, also the
                        word in choices (default "max") */
    SL_OPT_CHOICE_LIST, /* unsigned *dest = bit mask of the values in choices; "all" = every one */
} sl_opt_type;

typedef struct sl_opt {
    const char *name;   /* long name without the dashes; NULL ends a table */
    char short_name;    /* 0 when there is none */
    sl_opt_type type;
    void *dest;
    long long min, max; /* INT, SIZE, INT_LIST bounds (inclusive) */
    const char *choices;/* CHOICE: "a|b|c"; INT_LIST: the word allow_max accepts (NULL: "max") */
    int allow_max;      /* INT_LIST: accept the word ("max") */
    const char *help;   /* one line for --help */
} sl_opt;

/* A titled table of options shared by a family of programs (the training layer's group), so
 * that it is written once and each program of the family lists it in sl_program.groups. */
typedef struct sl_opt_group {
    const char *title;  /* heading in --help: "training" */
    const sl_opt *opts; /* ended by {0} */
} sl_opt_group;

#define SL_MAX_OPT_GROUPS 4

/* Which shared options mean something to a program. */
enum {
    SL_USES_SIZES = 1 << 0,   /* -b -e -f */
    SL_USES_DTYPE = 1 << 1,   /* -d */
    SL_USES_BACKEND = 1 << 2, /* -B */
    SL_USES_COLL = 1 << 3,    /* -C */
};

typedef struct sl_program {
    const char *name;          /* "mae_threads"; also the results file stem */
    const char *summary;       /* one line for --help */
    unsigned uses;             /* SL_USES_* */
    unsigned dtypes;           /* accepted dtypes, bit (1 << sl_dtype) */
    sl_dtype default_dtype;
    unsigned colls;            /* accepted collectives, bit (1 << sl_coll) */
    sl_coll default_coll;
    unsigned default_colls;    /* several by default (a mask); 0 means just default_coll */
    int default_iters, default_warmup;
    size_t default_minbytes, default_maxbytes;
    const sl_opt_group *groups[SL_MAX_OPT_GROUPS]; /* option groups before the program's own,
                                  in --help order; NULL-ended */
    const sl_opt *extra;       /* technique options, ended by {0}; may be NULL */
    /* Checks that need the rank count (or several options together), run by sl_init once MPI
     * is up and before anything is written: it calls sl_usage_error, or drops what cannot run
     * with an sl_note. May be NULL. */
    void (*validate)(struct sl_ctx *ctx);
    /* The MPI thread level the program needs: single (the default, zero) where no thread runs
     * alongside an MPI call; funneled where threads run while the main thread calls MPI. */
    sl_mpi_thread mpi_thread;
    /* Lines printed at the end of --help, after the options (what a column means, a rule that
     * changes an option's effect); may be NULL. */
    const char *help_notes;
} sl_program;

typedef struct sl_options {
    size_t minbytes, maxbytes;
    long long stepfactor;
    long long iters, warmup;
    unsigned dtypes;           /* bit (1 << sl_dtype) for each requested dtype */
    long long check;           /* 1: validate against the reference (default) */
    sl_backend backend;
    unsigned colls;            /* bit (1 << sl_coll) for each requested collective */
    unsigned colls_named;      /* those of them -C named (not through "all" or the default) */
    const char *torus;         /* --torus RxC as given (NULL: the most square grid) */
    int torus_rows, torus_cols;/* parsed from it */
    int torus_bidir;           /* --torus-bidir: each torus ring both ways at once */
    long long max_inflight;    /* --max-inflight: direct's exchanges in flight (0: nranks - 1) */
    const char *out;           /* results directory, NULL = default */
    int trace;
    const char *papi_events;   /* NULL = no counters */
    int quiet;
    int mpi_thread;            /* --mpi-thread: an sl_mpi_thread, or -1 for the program's level */
    int help, version;         /* set when --help / --version was given */
    const char *given[SL_MAX_GIVEN]; /* the long names of the options given, in order */
    int ngiven;
} sl_options;

/* Whether option `name` (its long name, without dashes) was on the command line: an option
 * given explicitly that cannot apply is a usage error, where its default would be a note. */
int sl_option_given(const sl_options *o, const char *name);

/* Parses argv[1..argc) into o (defaults first, from p) and into the destinations of p->groups'
 * and p->extra's options. Returns 0 on success; SL_EXIT_USAGE with a one-line message in err on
 * a usage error; SL_EXIT_RUNTIME when p itself is defective (a technique option named like a
 * shared one, or like another technique option). */
int sl_options_parse(const sl_program *p, int argc, char **argv, sl_options *o, char *err,
                     size_t errlen);

/* Writes the --help text for p to stdout. */
void sl_options_print_help(const sl_program *p);

/* Parses "64", "4K", "1M", "2G" (powers of 1024). Returns 0 on success. */
int sl_parse_size(const char *s, size_t *out);

/* "single" "funneled" "serialized" "multiple" */
const char *sl_mpi_thread_name(int level);

/* Number of bits set: how many dtypes / collectives were asked for. */
int sl_popcount(unsigned x);

/* The option group of programs that generate their own data: --seed, into sl_opt_seed
 * (default 42). */
extern long long sl_opt_seed;
extern const sl_opt_group sl_data_opts;

#endif
