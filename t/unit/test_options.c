/* test_options.c — the shared command line: values land where they should, and every bad
 * input is a usage error (2) whose message names the option and what it accepts. */
#include <limits.h>
#include <string.h>

#include "../tap.h"
#include "sl_error.h"
#include "sl_options.h"

static long long layers = 4;
static size_t chunk = 1024;
static double lr = 0.1;
static const char *name = "default";
static int mode = 0, verbose = 0;
static sl_int_list threads, segments;
static unsigned variants;

static const sl_opt extra[] = {
    {"layers", 'L', SL_OPT_INT, &layers, 1, 64, NULL, 0, "layers"},
    {"chunk", 0, SL_OPT_SIZE, &chunk, 1, 1 << 30, NULL, 0, "chunk size"},
    {"lr", 0, SL_OPT_DOUBLE, &lr, 0, 0, NULL, 0, "learning rate"},
    {"name", 0, SL_OPT_STRING, &name, 0, 0, NULL, 0, "a name"},
    {"mode", 0, SL_OPT_CHOICE, &mode, 0, 0, "sync|async|ps", 0, "mode"},
    {"verbose", 0, SL_OPT_FLAG, &verbose, 0, 0, NULL, 0, "flag"},
    {"threads", 't', SL_OPT_INT_LIST, &threads, 1, 64, NULL, 1, "threads"},
    {"variants", 0, SL_OPT_CHOICE_LIST, &variants, 0, 0, "a|b|c", 0, "variants"},
    {"segments", 0, SL_OPT_INT_LIST, &segments, 1, 99, "sweep", 1, "an int list with its own word"},
    {0},
};

static const sl_program prog = {
    .name = "testprog",
    .summary = "option parsing under test",
    .uses = SL_USES_SIZES | SL_USES_DTYPE | SL_USES_COLL | SL_USES_BACKEND,
    .dtypes = (1u << SL_F32) | (1u << SL_F64) | (1u << SL_BF16),
    .default_dtype = SL_F32,
    .colls = (1u << SL_COLL_MPI) | (1u << SL_COLL_RING) | (1u << SL_COLL_RHD),
    .default_coll = SL_COLL_MPI,
    .default_iters = 7,
    .default_warmup = 3,
    .extra = extra,
};

static long long clash_target;
static const sl_opt clashing[] = {
    {"out", 0, SL_OPT_INT, &clash_target, 0, 9, NULL, 0, "shadows the shared --out"},
    {0},
};
static const sl_program clash = {.name = "clash", .summary = "defective", .extra = clashing};

/* A group shared by a family of programs, listed before a program's own table. */
static long long group_width = 16, own_depth = 2;
static const sl_opt group_opts[] = {
    {"width", 0, SL_OPT_INT, &group_width, 1, 1024, NULL, 0, "width"},
    {0},
};
static const sl_opt_group group = {"family", group_opts};
static const sl_opt own_opts[] = {
    {"depth", 0, SL_OPT_INT, &own_depth, 1, 8, NULL, 0, "depth"},
    {0},
};
static const sl_program grouped = {.name = "grouped", .summary = "a group and its own", .groups = {&group}, .extra = own_opts};
static const sl_opt own_clashing[] = {
    {"width", 0, SL_OPT_INT, &own_depth, 1, 8, NULL, 0, "shadows the group's --width"},
    {0},
};
static const sl_program group_clash = {.name = "gclash", .summary = "defective", .groups = {&group}, .extra = own_clashing};

static const sl_program narrow = {
    .name = "narrow", .summary = "uses no sizes, dtypes, collectives", .default_iters = 1,
};

#define MAXARGS 8
static int parse(const sl_program *p, sl_options *o, char *err, size_t len, const char *a1,
                 const char *a2, const char *a3)
{
    char *argv[MAXARGS] = {"prog"};
    int argc = 1;
    if (a1) argv[argc++] = (char *)a1;
    if (a2) argv[argc++] = (char *)a2;
    if (a3) argv[argc++] = (char *)a3;
    err[0] = 0;
    return sl_options_parse(p, argc, argv, o, err, len);
}

/* A usage error that names `opt` and, when given, `accepts`, on one line. */
static void bad(const sl_program *p, const char *a1, const char *a2, const char *opt,
                const char *accepts)
{
    sl_options o;
    char err[512];
    int rc = parse(p, &o, err, sizeof err, a1, a2, NULL);
    int named = strstr(err, opt) != NULL && (!accepts || strstr(err, accepts) != NULL);
    int one_line = strchr(err, '\n') == NULL && err[0] != 0;
    ok(rc == SL_EXIT_USAGE && named && one_line, "%s %s -> exit 2 naming %s", a1, a2 ? a2 : "", opt);
    if (!(rc == SL_EXIT_USAGE && named && one_line)) diag("rc %d, message: %s", rc, err);
}

int main(void)
{
    sl_options o;
    char err[512];

    is_int(parse(&prog, &o, err, sizeof err, NULL, NULL, NULL), 0, "no arguments parse");
    is_int(o.iters, 7, "default iters from the program");
    is_int(o.warmup, 3, "default warmup from the program");
    is_int(o.check, 1, "check is on by default");
    ok(o.dtypes == 1u << SL_F32, "default dtype");
    ok(o.colls == 1u << SL_COLL_MPI, "default collective");

    is_int(parse(&prog, &o, err, sizeof err, "-n", "12", "-w3"), 0, "-n 12 -w3");
    is_int(o.iters, 12, "-n value");
    is_int(o.warmup, 3, "-w attached value");
    is_int(parse(&prog, &o, err, sizeof err, "--iters=5", "-b", "4K"), 0, "--iters=5 -b 4K");
    is_int(o.iters, 5, "--iters= value");
    is_int(o.minbytes, 4096, "K suffix is 1024");
    is_int(parse(&prog, &o, err, sizeof err, "-e", "2M", NULL), 0, "-e 2M");
    is_int(o.maxbytes, 2 << 20, "M suffix");
    /* --torus RxC: two whole numbers and an x; the rank count is checked once MPI is up */
    is_int(parse(&prog, &o, err, sizeof err, "--torus", "2x4", NULL), 0, "--torus 2x4");
    ok(o.torus_rows == 2 && o.torus_cols == 4, "--torus 2x4: 2 rows of 4");
    is_int(parse(&prog, &o, err, sizeof err, "--torus=1x7", "--max-inflight", "3"), 0,
           "--torus=1x7 --max-inflight 3");
    ok(o.torus_rows == 1 && o.torus_cols == 7 && o.max_inflight == 3, "--torus 1x7, --max-inflight 3");
    ok(!o.torus_bidir, "the torus's rings one way unless --torus-bidir");
    is_int(parse(&prog, &o, err, sizeof err, "--torus-bidir", NULL, NULL), 0, "--torus-bidir");
    ok(o.torus_bidir == 1, "--torus-bidir: the torus's rings both ways");
    static const char *const bad_grids[] = {"2x",  "x4",   "0x4", "2x0",  "2x4x1",
                                            " 2x4", "2x+4", "2X4", "-1x4", "99999999x1"};
    for (size_t i = 0; i < sizeof bad_grids / sizeof bad_grids[0]; i++)
        bad(&prog, "--torus", bad_grids[i], "--torus", "RxC");
    bad(&prog, "--max-inflight", "0", "--max-inflight", NULL);
    bad(&narrow, "--torus", "2x2", "--torus", "does not apply");
    is_int(parse(&prog, &o, err, sizeof err, "-d", "f64,bf16", NULL), 0, "dtype list");
    ok(o.dtypes == ((1u << SL_F64) | (1u << SL_BF16)), "dtype list mask");
    is_int(parse(&prog, &o, err, sizeof err, "-d", "all", NULL), 0, "dtype all");
    ok(o.dtypes == prog.dtypes, "all = every accepted dtype");
    is_int(parse(&prog, &o, err, sizeof err, "-C", "all", NULL), 0, "coll all");
    ok(o.colls == prog.colls, "all = every accepted collective");
    is_int(parse(&prog, &o, err, sizeof err, "-C", "ring,rhd", NULL), 0, "coll list");
    ok(o.colls == ((1u << SL_COLL_RING) | (1u << SL_COLL_RHD)), "coll list mask");

    is_int(parse(&prog, &o, err, sizeof err, "--layers", "9", "--verbose"), 0, "extra int and flag");
    is_int(layers, 9, "extra int lands");
    is_int(verbose, 1, "flag lands");
    is_int(parse(&prog, &o, err, sizeof err, "--chunk", "64K", "--lr=0.5"), 0, "size and double");
    is_int(chunk, 65536, "extra size");
    is_double(lr, 0.5, 0, "extra double");
    is_int(parse(&prog, &o, err, sizeof err, "--mode", "ps", "--name=x"), 0, "choice and string");
    is_int(mode, 2, "choice index");
    ok(strcmp(name, "x") == 0, "string value");
    is_int(parse(&prog, &o, err, sizeof err, "-t", "1,2,4", NULL), 0, "int list");
    ok(threads.n == 3 && threads.v[2] == 4 && !threads.is_max, "int list values");
    is_int(parse(&prog, &o, err, sizeof err, "--threads", "max", NULL), 0, "int list max");
    ok(threads.is_max && threads.n == 0, "max recorded");
    is_int(parse(&prog, &o, err, sizeof err, "--variants", "a,c", NULL), 0, "choice list");
    ok(variants == 5u, "choice list mask");
    is_int(parse(&prog, &o, err, sizeof err, "--help", NULL, NULL), 0, "--help parses");
    ok(o.help == 1, "--help flagged");

    bad(&prog, "--iters", "-1", "--iters", "[1,");
    bad(&prog, "-n", "0", "--iters", NULL);
    /* an option given twice (long or short spelling) is a usage error naming it */
    int rc2 = parse(&prog, &o, err, sizeof err, "-n1", "--iters=2", NULL);
    ok(rc2 == SL_EXIT_USAGE && strstr(err, "--iters (-n) is given more than once"),
       "a repeated option -> exit 2 naming it (%s)", err);
    /* warmup + iters must fit in an int: the bounds say so and keep the sum below 2^31 */
    bad(&prog, "-n", "1073741825", "--iters", "1073741824]");
    bad(&prog, "-w", "1073741824", "--warmup", "1073741823]");
    is_int(parse(&prog, &o, err, sizeof err, "-n1073741824", "-w1073741823", NULL), 0,
           "the largest counts parse");
    ok(o.iters + o.warmup <= INT_MAX, "and their sum fits in an int");
    bad(&prog, "-n", "3x", "--iters", NULL);
    bad(&prog, "--iters", NULL, "--iters", "missing value");
    bad(&prog, "--bogus", NULL, "--bogus", "unknown option");
    bad(&prog, "-Z", NULL, "-Z", "unknown option");
    bad(&prog, "--dtype", "f128", "--dtype", "f32|f64|bf16");
    bad(&prog, "-d", "f16", "--dtype", "f32|f64|bf16");
    bad(&prog, "-C", "nccl", "--coll", "mpi|ring|rhd");
    bad(&prog, "-C", "", "--coll", NULL);
    bad(&prog, "-B", "gpu", "--backend", "cpu|cuda|auto");
    bad(&prog, "-b", "12Q", "--minbytes", "K/M/G");
    bad(&prog, "-b", "-5", "--minbytes", NULL);
    bad(&prog, "-f", "1", "--stepfactor", NULL);
    bad(&prog, "--check", "2", "--check", "[0, 1]");
    bad(&prog, "--layers", "65", "--layers", "[1, 64]");
    bad(&prog, "--lr", "fast", "--lr", "a finite number");
    bad(&prog, "--lr", "nan", "--lr", "a finite number");
    bad(&prog, "--lr", "inf", "--lr", "a finite number");
    bad(&prog, "--threads", "1,,2", "--threads", NULL);
    bad(&prog, "--variants", "a,", "--variants", NULL);
    bad(&prog, "--mode", "bsp", "--mode", "sync|async|ps");
    bad(&prog, "--verbose=1", NULL, "--verbose", "no value");
    bad(&prog, "--threads", "0", "--threads", "'max'");
    bad(&prog, "--threads", "1,,x", "--threads", NULL);
    bad(&prog, "--variants", "d", "--variants", "a|b|c");
    bad(&prog, "stray", NULL, "stray", "unexpected argument");
    /* every list option takes each value once; 'all' (and an int list's word) stands alone */
    bad(&prog, "-t", "2,4,2", "--threads (-t): '2' is given twice", "list each value once");
    bad(&prog, "-t", "max,max", "--threads (-t): 'max' is given twice", NULL);
    bad(&prog, "--variants", "a,b,a", "--variants: 'a' is given twice", NULL);
    bad(&prog, "--variants", "all,b", "--variants: 'all' already names every value", "alone");
    bad(&prog, "-d", "f64,f64", "--dtype (-d): 'f64' is given twice", NULL);
    bad(&prog, "-C", "ring,all", "--coll (-C): 'all' already names every value", NULL);
    bad(&prog, "-C", "ring,rhd,ring", "--coll (-C): 'ring' is given twice", NULL);
    bad(&prog, "--segments", "3,3", "--segments: '3' is given twice", NULL);
    bad(&prog, "--papi", "PAPI_TOT_CYC,PAPI_L3_TCM,PAPI_TOT_CYC", "--papi: 'PAPI_TOT_CYC' is given twice", NULL);
    bad(&prog, "--papi", "PAPI_TOT_CYC,", "--papi", "PAPI event names");
    is_int(parse(&prog, &o, err, sizeof err, "--papi", "PAPI_TOT_CYC,PAPI_L3_TCM", NULL), 0, "--papi list");
    bad(&prog, "--segments", "max", "--segments", "or 'sweep'");
    is_int(parse(&prog, &o, err, sizeof err, "--segments", "sweep", NULL), 0, "an int list's own word");
    ok(segments.is_max && segments.n == 0, "the word is recorded as is_max");
    is_int(parse(&prog, &o, err, sizeof err, "-t", "max,1,2", NULL), 0, "the word beside values");
    ok(threads.is_max && threads.n == 2, "both recorded");
    /* which options were given: an explicit option that cannot apply is refused by the program */
    is_int(parse(&prog, &o, err, sizeof err, "--layers", "9", "-n4"), 0, "two options");
    ok(sl_option_given(&o, "layers") && sl_option_given(&o, "iters"), "given: by long name, either spelling");
    ok(!sl_option_given(&o, "warmup") && !sl_option_given(&o, "chunk"), "not given: defaults");
    is_int(parse(&prog, &o, err, sizeof err, NULL, NULL, NULL), 0, "no options");
    is_int(o.ngiven, 0, "none given");
    bad(&narrow, "-b", "8", "--minbytes", "does not apply");
    bad(&narrow, "-d", "f32", "--dtype", "does not apply");
    bad(&narrow, "-C", "mpi", "--coll", "does not apply");
    bad(&narrow, "-B", "cpu", "--backend", "does not apply");
    {
        int rc = parse(&prog, &o, err, sizeof err, "-b", "1M", "-e");
        ok(rc == SL_EXIT_USAGE && strstr(err, "--maxbytes"), "-e without a value");
        char *argv[] = {"prog", "-b", "2M", "-e", "1M"};
        rc = sl_options_parse(&prog, 5, argv, &o, err, sizeof err);
        ok(rc == SL_EXIT_USAGE && strstr(err, "--minbytes") && strstr(err, "--maxbytes"),
           "minbytes > maxbytes is rejected naming both");
    }

    {
        int rc = parse(&clash, &o, err, sizeof err, "--out", "5", NULL);
        ok(rc == SL_EXIT_RUNTIME && strstr(err, "--out") && strstr(err, "clashes"),
           "a technique option named like a shared one is a program defect (exit 3), not parsed");
    }

    {
        int rc = parse(&grouped, &o, err, sizeof err, "--width", "64", "--depth=5");
        ok(rc == 0 && group_width == 64 && own_depth == 5, "options of a group and of the program's own table both land");
        bad(&grouped, "--width", "2000", "--width", "[1, 1024]");
        rc = parse(&group_clash, &o, err, sizeof err, "--depth", "1", NULL);
        ok(rc == SL_EXIT_RUNTIME && strstr(err, "--width") && strstr(err, "clashes"),
           "a program option named like one of its group's is a program defect (exit 3)");
    }

    size_t sz;
    ok(sl_parse_size("1G", &sz) == 0 && sz == (size_t)1 << 30, "1G");
    ok(sl_parse_size("64", &sz) == 0 && sz == 64, "plain bytes");
    ok(sl_parse_size("4MB", &sz) == 0 && sz == (size_t)4 << 20, "4MB means 4M");
    ok(sl_parse_size("", &sz) != 0, "empty size rejected");
    ok(sl_parse_size("99999999999999999999", &sz) != 0, "overflowing size rejected");
    ok(sl_parse_size("20000000000G", &sz) != 0, "size overflowing with its suffix rejected");

    done_testing();
    return exit_status();
}
