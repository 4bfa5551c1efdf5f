/* harness.c — start-up, the timing loop and shut-down shared by every program. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sl_env.h"
#include "sl_env_check.h"
#include "sl_expected.h"
#include "sl_harness.h"
#include "sl_coll.h"
#include "sl_json.h"
#include "sl_sim.h"
#include "sl_slowdown.h"
#include "sl_timer.h"
#include "sl_trace.h"

#define SL_VERSION "0.1"

void sl_print(const sl_ctx *ctx, const char *fmt, ...)
{
    if (ctx->rank != 0 || ctx->opt.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void sl_note(const sl_ctx *ctx, const char *fmt, ...)
{
    if (ctx->rank != 0) return;
    fputs("# ", stdout);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

/* Writes all of buf to fd; 0, or the errno of the failure (ENOSPC for a write of nothing). */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : ENOSPC;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) return -1;
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0775) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0775) != 0 && errno != EEXIST ? -1 : 0;
}

/* The first leading part of path (path itself included) that is a symbolic link to a missing
 * target, into link; 0 when there is none. mkdir -p would take such a link for an existing
 * directory and fail below it with a bare "No such file". */
static int dangling_link(const char *path, char *link, size_t len)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) return 0;
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        const char c = *p;
        *p = 0;
        struct stat st;
        if (lstat(buf, &st) == 0 && S_ISLNK(st.st_mode) && stat(buf, &st) != 0 && errno == ENOENT) {
            snprintf(link, len, "%s", buf);
            return 1;
        }
        *p = c;
        if (!c) return 0;
    }
}

/* A results file that exists and is not a regular file (a planted symbolic link): refused up
 * front, before anything is measured, with the words the write itself would use. */
static void refuse_planted_file(const char *path, const char *what)
{
    struct stat st;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) return;
    if (S_ISLNK(st.st_mode))
        SL_FATAL("cannot write %s %s: it is a symbolic link (refused: results are never written "
                 "through one)", what, path);
    SL_FATAL("cannot write %s %s: it is not a regular file", what, path);
}

/* A usage error found on rank 0 alone (the file system, the environment), told to every rank:
 * msg is empty where there is none. */
static void usage_error_from_rank0(sl_ctx *ctx, const char *msg)
{
    int bad = ctx->rank == 0 && msg[0];
    SL_CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, ctx->comm));
    if (bad) sl_usage_error("%s", msg);
}

/* A run id names a directory below results/: letters, digits, '.', '_' and '-', not starting
 * with '.', so that it can neither climb out (..) nor go down (/). */
static int run_id_ok(const char *id)
{
    if (!id[0] || id[0] == '.') return 0;
    for (const char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            return 0;
    return 1;
}

static void make_run_id(sl_ctx *ctx)
{
    const char *env = getenv("SL_RUN_ID");
    char msg[256] = "";
    if (ctx->rank == 0) {
        if (env && *env) {
            if (strlen(env) >= sizeof ctx->run_id || !run_id_ok(env))
                snprintf(msg, sizeof msg, "SL_RUN_ID '%.96s': expected at most %zu letters, digits, "
                         "'.', '_' or '-', not starting with '.' (it names a directory below "
                         "results/)", env, sizeof ctx->run_id - 1);
            snprintf(ctx->run_id, sizeof ctx->run_id, "%s", env);
        } else {
            char host[64] = "host", when[32];
            gethostname(host, sizeof host - 1);
            host[strcspn(host, ".")] = 0;
            for (char *c = host; *c; c++) /* the id must pass run_id_ok as SL_RUN_ID */
                if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') *c = '_';
            time_t now = time(NULL);
            strftime(when, sizeof when, "%Y%m%d-%H%M%S", localtime(&now));
            snprintf(ctx->run_id, sizeof ctx->run_id, "%s-%s-%d", when, host, (int)getpid());
        }
    }
    usage_error_from_rank0(ctx, msg);
    SL_CHECK_MPI(MPI_Bcast(ctx->run_id, (int)sizeof ctx->run_id, MPI_CHAR, 0, ctx->comm));
}

/* 1 when the manifest at path names a run other than run_id: a directory holds one run. */
static int manifest_run_id_differs(const char *path, const char *run_id)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) return 1;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char want[sizeof ((sl_ctx *)0)->run_id + 16];
    snprintf(want, sizeof want, "\"run_id\":\"%s\"", run_id);
    return strstr(buf, want) == NULL;
}

/* The first results file (*.jsonl, *.trace.json) in dir, into name; 0 when there is none. */
static int find_results_file(const char *dir, char *name, size_t len)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if ((l > 6 && strcmp(e->d_name + l - 6, ".jsonl") == 0) ||
            (l > 11 && strcmp(e->d_name + l - 11, ".trace.json") == 0)) {
            snprintf(name, len, "%s", e->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found;
}

/* <out>/<program>.trace.json */
static void trace_path(const sl_ctx *ctx, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.trace.json", ctx->out_dir, ctx->prog->name);
}

/* Where results go: --out, else $SL_RESULTS, else results/<run-id>. */
static void open_results(sl_ctx *ctx)
{
    const char *env = getenv("SL_RESULTS");
    const char *what = "--out (-o)";
    if (ctx->opt.out) {
        snprintf(ctx->out_dir, sizeof ctx->out_dir, "%s", ctx->opt.out);
    } else if (env && *env) {
        snprintf(ctx->out_dir, sizeof ctx->out_dir, "%s", env);
        what = "SL_RESULTS";
    } else {
        snprintf(ctx->out_dir, sizeof ctx->out_dir, "results/%s", ctx->run_id);
        what = "the results directory";
    }

    int need_manifest = 0;
    char msg[PATH_MAX + 256] = "";
    if (ctx->rank == 0) {
        struct stat st;
        char path[PATH_MAX + 32], other[256];
        snprintf(path, sizeof path, "%s/manifest.json", ctx->out_dir);
        char link[PATH_MAX];
        if (stat(ctx->out_dir, &st) != 0 && dangling_link(ctx->out_dir, link, sizeof link)) {
            if (strcmp(link, ctx->out_dir) == 0)
                snprintf(msg, sizeof msg, "%s %s: a symbolic link to a missing target", what, link);
            else
                snprintf(msg, sizeof msg, "%s %s: %s is a symbolic link to a missing target", what,
                         ctx->out_dir, link);
        } else if (stat(ctx->out_dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
            snprintf(msg, sizeof msg, "%s '%s' is not a directory; expected a results directory",
                     what, ctx->out_dir);
        } else if (make_dirs(ctx->out_dir) != 0) {
            if (errno == ENOTDIR || errno == EEXIST)
                snprintf(msg, sizeof msg, "%s '%s': a part of the path is not a directory", what,
                         ctx->out_dir);
            else
                SL_FATAL("cannot create the results directory '%s': %s", ctx->out_dir,
                         strerror(errno));
        } else if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            snprintf(msg, sizeof msg, "%s %s: manifest.json is not a regular file (a link?); "
                     "choose a new directory", what, ctx->out_dir);
        } else if (lstat(path, &st) != 0) {
            /* one manifest per run, by its first program; results without one are another run's */
            need_manifest = 1;
            if (find_results_file(ctx->out_dir, other, sizeof other))
                snprintf(msg, sizeof msg, "%s %s holds results (%s) without a manifest.json of "
                         "this run; choose a new directory (rows of two runs would mix)", what,
                         ctx->out_dir, other);
        } else if (manifest_run_id_differs(path, ctx->run_id)) {
            snprintf(msg, sizeof msg, "%s %s already holds the results of another run; choose a "
                     "new directory (rows of two runs would mix)", what, ctx->out_dir);
        }
    }
    if (ctx->rank == 0 && !msg[0] && ctx->opt.trace) {
        /* written at the end (sl_finalize): a refusal must not wait for the whole run */
        char trace[PATH_MAX + 64];
        trace_path(ctx, trace, sizeof trace);
        refuse_planted_file(trace, "the trace");
    }
    usage_error_from_rank0(ctx, msg);
    SL_CHECK_MPI(MPI_Bcast(&need_manifest, 1, MPI_INT, 0, ctx->comm));
    if (need_manifest) {
        sl_json j;
        sl_json_init(&j);
        sl_env_manifest(ctx, &j); /* collective */
        if (ctx->rank == 0) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/manifest.json", ctx->out_dir);
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0664);
            if (fd >= 0) { /* O_EXCL: another program of the run may have just written it */
                int err = write_all(fd, j.buf, j.len);
                if (!err) err = write_all(fd, "\n", 1);
                if (close(fd) != 0 && !err) err = errno;
                if (err) {
                    unlink(path); /* a cut manifest would pass for this run's */
                    SL_FATAL("cannot write %s: %s", path, strerror(err));
                }
            } else if (errno != EEXIST) {
                SL_FATAL("cannot write %s: %s", path, strerror(errno));
            }
        }
        sl_json_free(&j);
    }
    if (ctx->rank == 0) ctx->jsonl = sl_results_file_open(ctx, "jsonl", ctx->jsonl_path, sizeof ctx->jsonl_path);
}

FILE *sl_results_file_open(const sl_ctx *ctx, const char *suffix, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/%s.%s", ctx->out_dir, ctx->prog->name, suffix);
    /* Appended to by every program of the run; never through a planted symbolic link. */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0664);
    if (fd < 0 && errno == ELOOP)
        SL_FATAL("cannot open %s: it is a symbolic link (refused: results are never written "
                 "through one)", path);
    if (fd < 0) SL_FATAL("cannot open %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "a");
    if (!f) SL_FATAL("cannot open %s: %s", path, strerror(errno));
    return f;
}

/* Why a CUDA build sees no device (the cudaGetDeviceCount error, or that it found 0). */
static const char *no_device_why(void)
{
    static sl_env_gpu g;
    sl_env_gpu_capture(&g);
    return g.note;
}

/* -B and -C choices that depend on what was built and what devices are visible. */
static void resolve_backend_and_colls(sl_ctx *ctx)
{
    sl_options *o = &ctx->opt;
    int devices = sl_cuda_device_count();
    if (ctx->prog->uses & SL_USES_BACKEND) {
        if (o->backend == SL_BACKEND_CUDA && !SL_HAVE_CUDA)
            sl_usage_error("--backend (-B) cuda: CUDA support was not built (nvcc and cuBLAS were "
                           "not found at build time); use -B cpu");
        if (o->backend == SL_BACKEND_CUDA && devices == 0)
            SL_FATAL("--backend cuda: no CUDA device is visible on this node (%s)", no_device_why());
        if (o->backend == SL_BACKEND_AUTO) {
            o->backend = devices > 0 ? SL_BACKEND_CUDA : SL_BACKEND_CPU;
            if (SL_HAVE_CUDA && devices == 0) /* built for a GPU, none here: say why */
                sl_note(ctx, "backend auto: cpu chosen: %s", no_device_why());
        }
        /* one GPU per rank of a node, before anything allocates device memory (NCCL needs it) */
        if (o->backend == SL_BACKEND_CUDA) sl_coll_bind_device(ctx->comm);
    } else {
        o->backend = SL_BACKEND_CPU;
    }
    if ((ctx->prog->uses & SL_USES_COLL) && (o->colls & (1u << SL_COLL_NCCL))) {
        /* The communication layer decides (sl_coll_available); a cpu backend means host buffers. */
        int cpu = (ctx->prog->uses & SL_USES_BACKEND) && o->backend == SL_BACKEND_CPU;
        char why[160];
        int rc = sl_coll_available(SL_COLL_NCCL, cpu ? SL_MEM_HOST : SL_MEM_DEVICE, why, sizeof why);
        if (rc == SL_COLL_ENOTSUP && cpu)
            snprintf(why, sizeof why, "NCCL needs device buffers and the backend is cpu (use -B cuda)");
        /* sl_coll_bind_device gives local rank r GPU r % devices: NCCL refuses a shared GPU */
        if (!rc && ctx->node_ranks > devices) {
            rc = SL_COLL_ENODEV;
            snprintf(why, sizeof why,
                     "%d ranks of a node share its %d GPU%s (NCCL needs one GPU per rank)",
                     ctx->node_ranks, devices, devices == 1 ? "" : "s");
        }
        if (rc && o->colls == (1u << SL_COLL_NCCL)) {
            if (rc == SL_COLL_ENODEV) SL_FATAL("--coll nccl: %s", why);
            sl_usage_error("--coll (-C) nccl: %s", why);
        }
        if (rc) {
            o->colls &= ~(1u << SL_COLL_NCCL);
            sl_note(ctx, "skipping the nccl collective: %s", why);
        }
    }
    /* shm and hier share host memory: a cuda backend runs without them, or refuses them alone */
    for (int i = SL_COLL_SHM; (ctx->prog->uses & SL_USES_COLL) && i <= SL_COLL_HIER; i++) {
        char why[160];
        if (!(o->colls & (1u << i)) || o->backend != SL_BACKEND_CUDA ||
            sl_coll_available((sl_coll)i, SL_MEM_DEVICE, why, sizeof why) == SL_COLL_OK)
            continue;
        if (o->colls == (1u << i))
            sl_usage_error("--coll (-C) %s: %s (use -B cpu)", sl_coll_name(i), why);
        o->colls &= ~(1u << i);
        sl_note(ctx, "skipping the %s collective: %s", sl_coll_name(i), why);
    }
}

/* --torus, --torus-bidir and --max-inflight against -C and the rank count, then handed to the communication
 * layer as the defaults of the communicators the program makes. A prime rank count has no
 * grid but 1 x N: asked for by name, torus then needs --torus 1xN; within "all" (or the
 * program's default list) it is left out with a note. */
static void resolve_torus_and_inflight(sl_ctx *ctx)
{
    sl_options *o = &ctx->opt;
    if (!(ctx->prog->uses & SL_USES_COLL)) return;
    int n = ctx->nranks, rows, cols, torus = (o->colls >> SL_COLL_TORUS) & 1;
    if (o->torus && !torus)
        sl_usage_error("--torus applies to -C torus only (this run does not measure it)");
    if (o->torus && o->torus_rows * o->torus_cols != n)
        sl_usage_error("--torus %s: a grid of %d ranks, this run has %d (RxC must equal the rank "
                       "count)", o->torus, o->torus_rows * o->torus_cols, n);
    if (torus && !o->torus && sl_coll_torus_grid(n, &rows, &cols)) {
        if ((o->colls_named >> SL_COLL_TORUS) & 1 || o->colls == (1u << SL_COLL_TORUS))
            sl_usage_error("--coll (-C) torus: %d ranks is prime, so the only grid is 1x%d (the "
                           "ring); give --torus 1x%d to run it", n, n, n);
        o->colls &= ~(1u << SL_COLL_TORUS);
        sl_note(ctx, "skipping the torus collective: %d ranks is prime (only 1x%d, the ring; "
                     "--torus 1x%d runs it)", n, n, n);
    }
    if (o->torus_bidir && !torus)
        sl_usage_error("--torus-bidir applies to -C torus only (this run does not measure it)");
    if (sl_option_given(o, "max-inflight") && !((o->colls >> SL_COLL_DIRECT) & 1))
        sl_usage_error("--max-inflight applies to -C direct only (this run does not measure it)");
    if (o->max_inflight > (n > 1 ? n - 1 : 1))
        sl_usage_error("--max-inflight %lld: at most %d exchange%s can be in flight on %d rank%s "
                       "(ranks - 1)", o->max_inflight, n > 1 ? n - 1 : 1, n > 2 ? "s" : "", n,
                       n == 1 ? "" : "s");
    sl_coll_set_torus(o->torus_rows, o->torus_cols);
    sl_coll_set_max_inflight((int)o->max_inflight);
    sl_coll_set_torus_bidir(o->torus_bidir);
}

static void print_header(sl_ctx *ctx)
{
    if (ctx->rank != 0 || ctx->opt.quiet) return;
    char cpu[256], mpi[512];
    sl_env_cpu_model(cpu, sizeof cpu);
    sl_env_mpi_version(mpi, sizeof mpi);
    mpi[strcspn(mpi, ",")] = 0;
    printf("# scalelab %s %s (%s)\n", ctx->prog->name, SL_VERSION, sl_build_git_describe);
    printf("# %d rank%s | %s | %s, thread level %s | backend %s\n", ctx->nranks,
           ctx->nranks == 1 ? "" : "s", cpu, mpi, sl_mpi_thread_name(ctx->mpi_thread_provided),
           sl_backend_name(ctx->opt.backend));
    if (sl_sim_active())
        printf("# SIMULATED by SimGrid SMPI (one process on this machine): %s\n",
               *sl_sim_platform() ? sl_sim_platform() : "platform not described (run by scripts/simulate)");
    printf("# results: %s/%s.jsonl\n", ctx->out_dir, ctx->prog->name);
    char expected[512];
    sl_expected_describe(sl_expected_here(), expected, sizeof expected);
    printf("# %s\n", expected);
    fflush(stdout);
}

/* MPI at the program's thread level, or --mpi-thread's: never below what the program needs,
 * since its threads would then call MPI (or run beside it) without the library knowing. */
static void start_mpi(sl_ctx *ctx)
{
    static const int mpi_level[SL_NMPI_THREADS] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED,
                                                   MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};
    sl_mpi_thread need = ctx->prog->mpi_thread, want = need;
    if (ctx->opt.mpi_thread >= 0) want = (sl_mpi_thread)ctx->opt.mpi_thread;
    if (want < need)
        sl_usage_error("--mpi-thread %s: %s needs at least %s (its threads run beside MPI calls)",
                       sl_mpi_thread_name(want), ctx->prog->name, sl_mpi_thread_name(need));
    int provided;
    SL_CHECK_MPI(MPI_Init_thread(NULL, NULL, mpi_level[want], &provided));
    ctx->mpi_thread_requested = want;
    ctx->mpi_thread_provided = SL_MPI_THREAD_SINGLE;
    for (int l = 0; l < SL_NMPI_THREADS; l++)
        if (provided >= mpi_level[l]) ctx->mpi_thread_provided = (sl_mpi_thread)l;
    if (ctx->mpi_thread_provided < need)
        SL_FATAL("MPI_Init_thread: %s needs thread level %s, the MPI library provides %s",
                 ctx->prog->name, sl_mpi_thread_name(need),
                 sl_mpi_thread_name(ctx->mpi_thread_provided));
}

void sl_init(sl_ctx *ctx, const sl_program *prog, int argc, char **argv)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->prog = prog;
    sl_set_program_name(prog->name);
    for (int i = 0; i < argc; i++) {
        size_t l = strlen(ctx->cmdline);
        snprintf(ctx->cmdline + l, sizeof ctx->cmdline - l, "%s%s", i ? " " : "", argv[i]);
    }

    /* Parse before MPI starts: a usage error is the same on every rank and needs no MPI. */
    char err[2048];
    int rc = sl_options_parse(prog, argc, argv, &ctx->opt, err, sizeof err);
    if (rc == SL_EXIT_RUNTIME) sl_fatal(rc, __FILE__, __LINE__, "%s", err); /* a program defect */
    if (rc) sl_usage_error("%s", err);
    /* The communication layer falls back to its default segment on a bad SL_COLL_SEGMENT: a
     * program that communicates calls it a usage error instead, with the rule. */
    size_t segv;
    if ((prog->uses & SL_USES_COLL) && sl_coll_env_segment(&segv) != 0)
        sl_usage_error("SL_COLL_SEGMENT: expected a size in bytes of at least 8 (K/M/G suffixes "
                       "allowed), got '%s'", getenv("SL_COLL_SEGMENT"));
    int stage;
    if ((prog->uses & SL_USES_COLL) && sl_coll_env_stage(&stage) != 0)
        sl_usage_error("SL_COLL_STAGE: expected 0 or 1 (1: device buffers staged through pinned "
                       "host memory even where MPI is CUDA-aware), got '%s'", getenv("SL_COLL_STAGE"));
    int rpn;
    if ((prog->uses & SL_USES_COLL) && sl_coll_env_ranks_per_node(&rpn) != 0)
        sl_usage_error("SL_COLL_RANKS_PER_NODE: expected a whole number of ranks per (virtual) "
                       "node, at least 1, got '%s'", getenv("SL_COLL_RANKS_PER_NODE"));
    if (ctx->opt.help || ctx->opt.version) {
        if (sl_launcher_rank() == 0) {
            if (ctx->opt.help)
                sl_options_print_help(prog);
            else
                printf("%s %s (%s)\n", prog->name, SL_VERSION, sl_build_git_describe);
        }
        exit(0);
    }
    /* the thread counts and test switches, before MPI and before any OpenMP region runs */
    if (sl_env_check(err, sizeof err)) sl_usage_error("%s", err);
    sl_slowdown_init(prog->name); /* a malformed SL_TEST_SLOWDOWN is a usage error */

    start_mpi(ctx);
    ctx->comm = MPI_COMM_WORLD;
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->nranks);
    /* MPI errors come back as codes so SL_CHECK_MPI can name the call. */
    MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);

    sl_placement_capture(ctx); /* before the manifest, which records it */
    resolve_backend_and_colls(ctx);
    resolve_torus_and_inflight(ctx);
    if (prog->validate) prog->validate(ctx);
    /* counters before the results directory: a bad event name leaves nothing behind */
    char note[256] = "";
    rc = sl_papi_init(&ctx->papi, ctx->opt.papi_events, note, sizeof note);
    if (rc < 0) sl_usage_error("%s", note);
    make_run_id(ctx);
    open_results(ctx);
    if (note[0]) sl_note(ctx, "%s", note);

    sl_trace_enable(ctx->opt.trace);
    MPI_Barrier(ctx->comm);
    sl_trace_set_epoch(sl_now());
    print_header(ctx);
    sl_note_oversubscription(ctx, 1);
    if (ctx->rank == 0 && sl_slowdown_fraction() > 0)
        fprintf(stderr, "%s: SL_TEST_SLOWDOWN: every timed iteration of the technique is lengthened by "
                "%g of its own time (busy wait; ceilings not slowed): a test of the regression gate, "
                "not a measurement\n", prog->name, sl_slowdown_fraction());
}

void sl_time_iterations(sl_ctx *ctx, int iters, sl_body_fn body, void *arg, double *local,
                        long long *counters)
{
    sl_papi_start(&ctx->papi);
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(ctx->comm);
        double t0 = sl_now();
        body(arg);
        sl_slowdown_pad(t0); /* SL_TEST_SLOWDOWN: inside the timed region */
        double t1 = sl_now();
        local[i] = t1 - t0;
        sl_trace_event("iteration", "timed", 0, t0, t1);
    }
    sl_papi_stop(&ctx->papi);
    for (int i = 0; counters && ctx->papi.active && i < ctx->papi.nevents; i++)
        counters[i] += ctx->papi.values[i];
}

void sl_time_loop_n(sl_ctx *ctx, int warmup, int iters, sl_body_fn body, void *arg, sl_stats *stats)
{
    if (iters < 1) SL_FATAL("sl_time_loop_n: iters must be >= 1, got %d", iters);
    for (int i = 0; i < warmup; i++) {
        MPI_Barrier(ctx->comm);
        body(arg);
    }
    double *local = malloc((size_t)iters * sizeof *local);
    if (!local) SL_FATAL("out of memory for %d iteration times", iters);
    long long counters[SL_PAPI_MAX_EVENTS] = {0};
    sl_time_iterations(ctx, iters, body, arg, local, counters);
    sl_stats_over_ranks(local, iters, ctx->comm, stats);
    sl_stats_add_counters(ctx, counters, stats);
    free(local);
}

void sl_stats_add_counters(const sl_ctx *ctx, const long long *counters, sl_stats *stats)
{
    for (int i = 0; ctx->papi.active && i < ctx->papi.nevents && i < SL_STATS_MAX_COUNTERS; i++)
        stats->counters[stats->ncounters++] = counters[i];
}

void sl_time_loop(sl_ctx *ctx, sl_body_fn body, void *arg, sl_stats *stats)
{
    sl_time_loop_n(ctx, (int)ctx->opt.warmup, (int)ctx->opt.iters, body, arg, stats);
}

int sl_finalize(sl_ctx *ctx)
{
    int status = ctx->status, worst = 0, failed = 0;
    SL_CHECK_MPI(MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, ctx->comm));
    SL_CHECK_MPI(MPI_Allreduce(&ctx->nfailed, &failed, 1, MPI_INT, MPI_MAX, ctx->comm));
    if (ctx->opt.trace) {
        char path[PATH_MAX + 64];
        trace_path(ctx, path, sizeof path);
        long n = sl_trace_write(path, ctx->comm);
        sl_note(ctx, "trace: %s (%ld events; open in ui.perfetto.dev or chrome://tracing)", path, n);
    }
    sl_papi_shutdown(&ctx->papi);
    if (ctx->jsonl && fclose(ctx->jsonl) != 0)
        SL_FATAL("cannot close %s: %s", ctx->jsonl_path, strerror(errno));
    ctx->jsonl = NULL;
    if (worst == 0)
        sl_note(ctx, "%s: %d results, every check passed", ctx->prog->name, ctx->nrows);
    else
        sl_note(ctx, "%s: FAILED: %d of %d results failed their check", ctx->prog->name, failed,
                ctx->nrows);
    MPI_Finalize();
    return worst;
}

void sl_mpi_wait_quietly(MPI_Request *req, long poll_ns)
{
    for (int done = 0; !done;) {
        SL_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (!done) nanosleep(&(struct timespec){.tv_nsec = poll_ns}, NULL);
    }
}
