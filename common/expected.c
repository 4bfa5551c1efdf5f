/* expected.c — a row's measured figure beside what its hardware should give (sl_expected.h):
 * which metric of which program is compared with which figure, and how the hardware is found. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sl_env.h"
#include "sl_expected.h"
#include "sl_sim.h"

const sl_expected_figure *sl_expected_find(const char *key, const char *figure)
{
    for (int i = 0; key && key[0] && i < sl_expected_ntable; i++)
        if (strcmp(sl_expected_table[i].key, key) == 0 &&
            strcmp(sl_expected_table[i].figure, figure) == 0)
            return &sl_expected_table[i];
    return NULL;
}

/* Where a rule applies. */
enum {
    ON_CUDA = 1,     /* rows on the cuda backend */
    ON_CPU = 2,      /* rows on the cpu backend (or none) */
    MULTI_HOST = 4,  /* ranks on more than one node */
    ONE_HOST = 8,    /* all ranks on one node */
    NCCL = 16,       /* collective nccl */
};

/* One rule: in `benchmark` (NULL: any), a row whose variant contains `variant` (NULL: any) and
 * none of the |-separated words of `not_variant`, that has `metric`, where
 * `where` says, compares it with `figure` (%s: the row's dtype) of the table, times `scale`
 * (the table's unit in the metric's; 0: times the ranks, for a figure of all the GPUs); or,
 * with a figure "=NAME", with the row's own metric NAME (a probe measured in the same run); or,
 * with no figure, says `why` there is no expected value. The first rule that applies wins. */
typedef struct rule {
    const char *benchmark, *variant, *not_variant, *metric;
    int where;
    const char *figure;
    double scale;
    const char *why;
} rule;

static const rule rules[] = {
    /* collectives: a link's bandwidth per direction is what busbw can reach (nccl-tests) */
    {"allreduce", NULL, NULL, "busbw", MULTI_HOST, "net_bw", 1, NULL},
    {"allreduce", NULL, NULL, "busbw", ONE_HOST | ON_CUDA | NCCL, "nvlink_bw", 1, NULL},
    {"allreduce", NULL, NULL, "busbw", ONE_HOST | ON_CUDA, NULL, 0, "one host, not nccl: no link figure"},
    {"allreduce", NULL, NULL, "busbw", ONE_HOST | ON_CPU, NULL, 0, "one host, cpu buffers (see of_copy)"},
    /* GEMM against the peak for its dtype; the element-wise kernels (all but GEMM, convolution
     * and the CPU copy probe, their reference), memory-bound by nature, against the memory */
    {"kernels", "gemm", NULL, "gflops", ON_CUDA, "%s_tflops", 1e3, NULL},
    {"kernels", "gemm", NULL, "gflops", ON_CPU, NULL, 0, "CPU: no datasheet peak (see roof_fraction)"},
    {"kernels", NULL, "gemm|conv", "gbps", ON_CUDA, "hbm_bw", 1, NULL},
    {"kernels", NULL, "gemm|conv|peak_", "gbps", ON_CPU, "=peak_gbps", 1, NULL},
    {"precision", "gemm", NULL, "gflops", ON_CUDA, "%s_tflops", 1e3, NULL},
    {"precision", "gemm", NULL, "gflops", ON_CPU, NULL, 0, "CPU: no datasheet peak"},
    {"mae_threads", NULL, NULL, "eff_bw", ON_CPU, "=read_bw", 1, NULL},
    /* training: model FLOP/s of all the ranks against the peak of as many GPUs */
    {NULL, NULL, NULL, "tflops", ON_CUDA, "%s_tflops", 0, NULL},
    {NULL, NULL, NULL, "tflops", ON_CPU, NULL, 0, "CPU: no datasheet peak"},
};

static int has_metric(const sl_result *r, const char *name, double *v)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) {
            *v = r->metrics[i].value;
            return 1;
        }
    return 0;
}

static const char *metric_unit(const sl_result *r, const char *name)
{
    for (int i = 0; i < r->nmetrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0) return r->metrics[i].unit;
    return "";
}

/* Whether s contains the n characters at w. */
static int contains(const char *s, const char *w, size_t n)
{
    for (; *s; s++)
        if (strncmp(s, w, n) == 0) return 1;
    return 0;
}

static int applies(const rule *u, const char *benchmark, int multi_host, const sl_result *r)
{
    double v;
    int cuda = r->backend && strcmp(r->backend, "cuda") == 0;
    int nccl = r->collective && strcmp(r->collective, "nccl") == 0;
    if (u->benchmark && strcmp(u->benchmark, benchmark) != 0) return 0;
    if (u->variant && !strstr(r->variant, u->variant)) return 0;
    for (const char *w = u->not_variant; w && *w;) {
        size_t n = strcspn(w, "|");
        if (n && contains(r->variant, w, n)) return 0;
        w += n + (w[n] == '|');
    }
    if (!has_metric(r, u->metric, &v)) return 0;
    if ((u->where & ON_CUDA) && !cuda) return 0;
    if ((u->where & ON_CPU) && cuda) return 0;
    if ((u->where & MULTI_HOST) && !multi_host) return 0;
    if ((u->where & ONE_HOST) && multi_host) return 0;
    if ((u->where & NCCL) && !nccl) return 0;
    return 1;
}

static void none(sl_result *r, const char *metric, const char *fmt, const char *a, const char *b)
{
    char why[160];
    snprintf(why, sizeof why, fmt, a, b);
    sl_result_param_str(r, "expected_of", metric);
    sl_result_param_str(r, "expected_source", why);
}

void sl_expected_apply(const sl_expected_hw *hw, const char *benchmark, int multi_host, int nranks,
                       sl_result *r)
{
    const rule *u = NULL;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0] && !u; i++)
        if (applies(&rules[i], benchmark, multi_host, r)) u = &rules[i];
    if (!u) return;
    double measured = NAN, expected = NAN;
    has_metric(r, u->metric, &measured);
    char source[64];
    if (hw->simulated) {
        none(r, u->metric, "no expected value: a simulated run%s%s", "", "");
        return;
    }
    if (!u->figure) {
        none(r, u->metric, "no expected value: %s%s", u->why, "");
        return;
    }
    if (u->figure[0] == '=') { /* the same run's probe */
        if (!has_metric(r, u->figure + 1, &expected) || isnan(expected) || expected <= 0) {
            none(r, u->metric, "no expected value: probe %s not measured%s", u->figure + 1, "");
            return;
        }
        snprintf(source, sizeof source, "measured: this run's %s", u->figure + 1);
    } else {
        char figure[32];
        snprintf(figure, sizeof figure, u->figure, r->dtype ? r->dtype : "f32");
        const char *key = strcmp(figure, "net_bw") == 0 ? hw->net : hw->gpu;
        if (!key[0]) {
            none(r, u->metric, "no expected value: %s%s",
                 strcmp(figure, "net_bw") == 0 ? hw->net_from : "no GPU name", "");
            return;
        }
        const sl_expected_figure *f = sl_expected_find(key, figure);
        if (!f) {
            none(r, u->metric, "no expected value: %.24s: no %s", key, figure);
            return;
        }
        expected = f->value * (u->scale > 0 ? u->scale : nranks);
        snprintf(source, sizeof source, "%s %s%s", f->file, f->figure, u->scale > 0 ? "" : " x ranks");
    }
    sl_result_metric(r, "expected", expected, metric_unit(r, u->metric));
    sl_result_metric(r, "of_expected", measured / expected, "fraction");
    sl_result_param_str(r, "expected_of", u->metric);
    sl_result_param_str(r, "expected_source", source);
}

/* The first line of root/rel as text, without its newline; 0 when it cannot be read. */
static int read_line(const char *root, const char *rel, char *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%.900s/%.120s", root, rel);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* The fastest link of this host in Mb/s, and its name: Ethernet (and IPoIB) interfaces that
 * are up and are a device (not lo, a bridge or a veth), and active InfiniBand ports. */
static long fastest_link(const char *sys, char *from, size_t len)
{
    long best = 0;
    char dir[1024], rel[1024], line[128];
    struct stat st;
    snprintf(dir, sizeof dir, "%.900s/class/net", sys);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(rel, sizeof rel, "%.700s/%.200s/device", dir, e->d_name);
        if (stat(rel, &st) != 0) continue;
        snprintf(rel, sizeof rel, "class/net/%.200s/operstate", e->d_name);
        if (!read_line(sys, rel, line, sizeof line) || strcmp(line, "up") != 0) continue;
        snprintf(rel, sizeof rel, "class/net/%.200s/speed", e->d_name);
        long mbps = read_line(sys, rel, line, sizeof line) ? strtol(line, NULL, 10) : 0;
        if (mbps > best) {
            best = mbps;
            snprintf(from, len, "%.32s", e->d_name);
        }
    }
    if (d) closedir(d);
    snprintf(dir, sizeof dir, "%.900s/class/infiniband", sys);
    d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        for (int port = 1; port <= 4; port++) {
            snprintf(rel, sizeof rel, "class/infiniband/%.200s/ports/%d/state", e->d_name, port);
            if (!read_line(sys, rel, line, sizeof line) || !strstr(line, "ACTIVE")) continue;
            snprintf(rel, sizeof rel, "class/infiniband/%.200s/ports/%d/rate", e->d_name, port);
            long mbps = read_line(sys, rel, line, sizeof line) ? (long)(strtod(line, NULL) * 1000) : 0;
            if (mbps > best) {
                best = mbps;
                snprintf(from, len, "%.32s port %d", e->d_name, port);
            }
        }
    }
    if (d) closedir(d);
    return best;
}

void sl_expected_capture(sl_expected_hw *hw)
{
    memset(hw, 0, sizeof *hw);
    sl_env_gpu g;
    sl_env_gpu_capture(&g);
    if (g.ndevices > 0) { /* "NAME (sm_90, 79 GiB)": the name alone */
        snprintf(hw->gpu, sizeof hw->gpu, "%s", g.models[0]);
        char *cut = strstr(hw->gpu, " (sm_");
        if (cut) *cut = 0;
    }
    const char *sys = getenv("SL_EXPECTED_SYSFS");
    char from[64] = "";
    long mbps = fastest_link(sys && sys[0] ? sys : "/sys", from, sizeof from);
    if (mbps > 0) {
        snprintf(hw->net, sizeof hw->net, "net:%ld", mbps);
        snprintf(hw->net_from, sizeof hw->net_from, "%.64s", from);
    } else {
        snprintf(hw->net_from, sizeof hw->net_from, "no link speed in sysfs");
    }
}

const sl_expected_hw *sl_expected_here(void)
{
    static sl_expected_hw hw;
    static int captured;
    if (!captured) {
        sl_expected_capture(&hw);
        hw.simulated = sl_sim_active();
        captured = 1;
    }
    return &hw;
}

void sl_expected_describe(const sl_expected_hw *hw, char *buf, size_t len)
{
    if (hw->simulated) {
        snprintf(buf, len, "expected values: none (a simulated run)");
        return;
    }
    const char *gfile = NULL, *nfile = NULL;
    for (int i = 0; i < sl_expected_ntable; i++) {
        const sl_expected_figure *f = &sl_expected_table[i];
        if (hw->gpu[0] && strcmp(f->key, hw->gpu) == 0) gfile = f->file;
        if (hw->net[0] && strcmp(f->key, hw->net) == 0) nfile = f->file;
    }
    char gpu[200], net[200];
    if (!hw->gpu[0]) snprintf(gpu, sizeof gpu, "no GPU");
    else snprintf(gpu, sizeof gpu, "GPU %s: %s", hw->gpu, gfile ? gfile : "not in the table");
    if (!hw->net[0]) snprintf(net, sizeof net, "link: %s", hw->net_from);
    else snprintf(net, sizeof net, "link %s Mb/s (%s): %s", hw->net + 4, hw->net_from,
                  nfile ? nfile : "not in the table");
    snprintf(buf, len, "expected values (results/expected): %s; %s; cpu: this run's memory probe",
             gpu, net);
}
