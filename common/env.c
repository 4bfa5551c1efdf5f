/* env.c — what the run ran on, for manifest.json: hosts, CPU, hwloc topology, the last-level
 * cache (sysfs), each rank's binding, MPI library, build options and git describe. GPU facts
 * come from env_gpu. */
#include <hwloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sl_env.h"
#include "sl_error.h"
#include "sl_harness.h"
#include "sl_json.h"
#include "sl_coll.h"
#include "sl_sim.h"

/* "0-3,8" from a CPU set. */
static int cpuset_list(const cpu_set_t *set, char *buf, size_t len)
{
    int count = 0;
    size_t used = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set)) continue;
        int end = c;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set)) end++;
        int n = end == c ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", c)
                         : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, end);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
        count += end - c + 1;
        c = end;
    }
    return count;
}

void sl_env_local_capture(sl_env_local *e)
{
    memset(e, 0, sizeof *e);
    if (gethostname(e->host, sizeof e->host - 1) != 0) snprintf(e->host, sizeof e->host, "unknown");
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        e->nbound_cpus = cpuset_list(&set, e->binding, sizeof e->binding);
    else
        snprintf(e->binding, sizeof e->binding, "unknown");
}

int sl_env_cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[512];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            colon++;
            while (*colon == ' ') colon++;
            colon[strcspn(colon, "\n")] = 0;
            snprintf(buf, len, "%s", colon);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

int sl_env_cpu_has_flag(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int found = -1;
    const size_t n = strlen(flag);
    while (found < 0 && getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0 || !strchr(line, ':')) continue;
        found = 0; /* the first CPU's line: a word of it, between blanks */
        for (const char *p = strchr(line, ':') + 1; (p = strstr(p, flag)) != NULL; p += n)
            if ((p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0)) found = 1;
    }
    free(line);
    fclose(f);
    return found;
}

/* The loader's choice among kernels/cpu/cpu.h's SL_CPU_CLONES variants, asked the way GCC's
 * ifunc resolver asks (cpuid through __builtin_cpu_supports). Here rather than in the kernels
 * library because the manifest, written by this one, records it. */
const char *sl_env_cpu_vec_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? "avx512f"
           : __builtin_cpu_supports("avx2")  ? "avx2"
                                             : "sse2";
#else
    return "baseline";
#endif
}

/* The flags a vectorised CPU kernel may use, the wider variants' and the 16-bit casts'. */
static const char *const isa_flags[] = {"avx2", "fma", "avx512f", "f16c", "avx512_bf16"};

int sl_env_cpu_isa_flags(const char **has, int max)
{
    int n = 0;
    for (size_t i = 0; i < sizeof isa_flags / sizeof isa_flags[0]; i++) {
        int h = sl_env_cpu_has_flag(isa_flags[i]);
        if (h < 0) return -1;
        if (h && n < max) has[n++] = isa_flags[i];
    }
    return n;
}

/* The kernel's cache description (what lscpu and hwloc read). Not sysconf(_SC_LEVEL3_CACHE_SIZE):
 * glibc takes that from cpuid, which a hypervisor may fill with nonsense (a 2-vCPU AMD EPYC VM
 * here: 320 MiB for a 32 MiB L3, 384 MiB on another). */
#define SL_SYSFS_CACHE "/sys/devices/system/cpu/cpu0/cache"

/* One line of a sysfs file into buf, newline cut; -1 where it cannot be read. */
static int sysfs_line(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int rc = fgets(buf, (int)len, f) ? 0 : -1;
    fclose(f);
    buf[strcspn(buf, "\n")] = 0;
    return rc;
}

size_t sl_env_llc(int *level, const char **source)
{
    size_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], lv[16], type[32], size[32];
        snprintf(path, sizeof path, SL_SYSFS_CACHE "/index%d/level", i);
        if (sysfs_line(path, lv, sizeof lv) != 0) break;
        snprintf(path, sizeof path, SL_SYSFS_CACHE "/index%d/type", i);
        if (sysfs_line(path, type, sizeof type) != 0 || !strcmp(type, "Instruction")) continue;
        snprintf(path, sizeof path, SL_SYSFS_CACHE "/index%d/size", i);
        if (sysfs_line(path, size, sizeof size) != 0) continue;
        char *end;
        unsigned long long v = strtoull(size, &end, 10);
        if (*end == 'K') v <<= 10;
        else if (*end == 'M') v <<= 20;
        else if (*end == 'G') v <<= 30;
        int l = atoi(lv);
        if (v > 0 && l > best_level) {
            best_level = l;
            best = (size_t)v;
        }
    }
    if (level) *level = best_level;
    if (source) *source = SL_SYSFS_CACHE;
    return best;
}

int sl_env_topology_summary(char *buf, size_t len, int *cores, int *pus)
{
    hwloc_topology_t topo;
    *cores = *pus = 0;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
        snprintf(buf, len, "hwloc could not load the topology");
        return -1;
    }
    int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    *cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    *pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    hwloc_topology_destroy(topo);
    /* the cache from the one source the suite uses for it (sl_env_llc), so that the manifest
     * and the programs that size buffers by it say the same */
    int level;
    size_t llc = sl_env_llc(&level, NULL);
    char l3s[48] = "";
    if (llc) snprintf(l3s, sizeof l3s, ", L%d %zu KiB", level, llc >> 10);
    snprintf(buf, len, "%d package%s, %d NUMA node%s, %d cores, %d PUs%s", packages,
             packages == 1 ? "" : "s", numa, numa == 1 ? "" : "s", *cores, *pus, l3s);
    return 0;
}

void sl_env_mpi_version(char *buf, size_t len)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int l = 0;
    MPI_Get_library_version(v, &l);
    v[strcspn(v, "\n")] = 0;
    int major = 0, minor = 0;
    MPI_Get_version(&major, &minor);
    snprintf(buf, len, "%s (MPI %d.%d)", v, major, minor);
}

void sl_env_manifest(sl_ctx *ctx, sl_json *j)
{
    sl_env_local me;
    sl_env_local_capture(&me);
    sl_env_local *all = NULL;
    if (ctx->rank == 0) {
        all = calloc((size_t)ctx->nranks, sizeof *all);
        if (!all) SL_FATAL("out of memory gathering the environment");
    }
    SL_CHECK_MPI(MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, ctx->comm));
    if (ctx->rank != 0) return;

    char cpu[256], topo[256], mpi[512], when[64];
    int cores, pus;
    sl_env_cpu_model(cpu, sizeof cpu);
    sl_env_topology_summary(topo, sizeof topo, &cores, &pus);
    sl_env_mpi_version(mpi, sizeof mpi);
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    sl_env_gpu gpu;
    sl_env_gpu_capture(&gpu);

    sl_json_obj_begin(j, NULL);
    sl_json_int(j, "schema_version", SL_SCHEMA_VERSION);
    sl_json_str(j, "run_id", ctx->run_id);
    sl_json_str(j, "start_time", when);
    const char *runner = getenv("SL_RUN_COMMAND");
    sl_json_str(j, "command_line", runner && *runner ? runner : ctx->cmdline);
    sl_json_str(j, "first_program", ctx->prog->name);
    sl_json_str(j, "git_describe", sl_build_git_describe);
    sl_json_str(j, "build_options", sl_build_options);
    sl_json_int(j, "ranks", ctx->nranks);
    /* the busiest node: more ranks than CPUs there means the ranks time-share cores */
    sl_json_int(j, "ranks_per_node", ctx->node_ranks);
    sl_json_int(j, "cpus_per_node", ctx->node_cpus);
    sl_json_bool(j, "oversubscribed", sl_oversubscribed(ctx, 1));
    /* hier's virtual node split (a testing aid that changes what crosses "between nodes") */
    int vnode;
    if (sl_coll_env_ranks_per_node(&vnode) == 0 && vnode > 0) sl_json_int(j, "coll_ranks_per_node", vnode);
    else sl_json_null(j, "coll_ranks_per_node");
    sl_sim_json(j); /* "simulated": {...} under the simulator only */

    /* distinct hosts, in rank order */
    sl_json_arr_begin(j, "hosts");
    for (int r = 0; r < ctx->nranks; r++) {
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = strcmp(all[q].host, all[r].host) == 0;
        if (!seen) sl_json_str(j, NULL, all[r].host);
    }
    sl_json_arr_end(j);

    sl_json_obj_begin(j, "cpu");
    sl_json_str(j, "model", cpu);
    sl_json_int(j, "cores", cores);
    sl_json_int(j, "pus", pus);
    sl_json_int(j, "online_cpus", sysconf(_SC_NPROCESSORS_ONLN));
    sl_json_str(j, "topology", topo);
    int llc_level;
    const char *llc_source;
    size_t llc = sl_env_llc(&llc_level, &llc_source);
    sl_json_obj_begin(j, "llc");
    if (llc) sl_json_int(j, "level", llc_level);
    else sl_json_null(j, "level");
    if (llc) sl_json_int(j, "bytes", (long long)llc);
    else sl_json_null(j, "bytes");
    sl_json_str(j, "source", llc_source);
    sl_json_obj_end(j);
    sl_json_obj_end(j);

    sl_json_obj_begin(j, "cpu_isa");
    sl_json_str(j, "vector", sl_env_cpu_vec_isa());
    const char *flags[SL_ENV_ISA_FLAGS_MAX];
    int nflags = sl_env_cpu_isa_flags(flags, SL_ENV_ISA_FLAGS_MAX);
    if (nflags < 0) {
        sl_json_null(j, "flags");
    } else {
        sl_json_arr_begin(j, "flags");
        for (int i = 0; i < nflags; i++) sl_json_str(j, NULL, flags[i]);
        sl_json_arr_end(j);
    }
    sl_json_obj_end(j);

    sl_json_arr_begin(j, "rank_binding");
    for (int r = 0; r < ctx->nranks; r++) {
        sl_json_obj_begin(j, NULL);
        sl_json_int(j, "rank", r);
        sl_json_str(j, "host", all[r].host);
        sl_json_str(j, "cpus", all[r].binding);
        sl_json_int(j, "ncpus", all[r].nbound_cpus);
        sl_json_obj_end(j);
    }
    sl_json_arr_end(j);

    sl_json_str(j, "mpi_library", mpi);
    /* The level asked for decides whether the library locks on every call (DESIGN.md, figures
     * comparable with OSU): the run's first program's, as the other fields. */
    sl_json_obj_begin(j, "mpi_thread");
    sl_json_str(j, "requested", sl_mpi_thread_name(ctx->mpi_thread_requested));
    sl_json_str(j, "provided", sl_mpi_thread_name(ctx->mpi_thread_provided));
    sl_json_obj_end(j);

    sl_json_obj_begin(j, "cuda");
    sl_json_bool(j, "built", gpu.built);
    sl_json_str(j, "runtime", gpu.built ? gpu.cuda_runtime : NULL);
    sl_json_str(j, "driver", gpu.built && gpu.cuda_driver[0] ? gpu.cuda_driver : NULL);
    sl_json_str(j, "cublas", gpu.built && gpu.cublas[0] ? gpu.cublas : NULL);
    sl_json_str(j, "nccl", gpu.nccl[0] ? gpu.nccl : NULL);
    sl_json_int(j, "devices", gpu.ndevices);
    sl_json_arr_begin(j, "models");
    for (int i = 0; i < gpu.ndevices && i < 4; i++) sl_json_str(j, NULL, gpu.models[i]);
    sl_json_arr_end(j);
    sl_json_str(j, "note", gpu.note[0] ? gpu.note : NULL);
    sl_json_obj_end(j);
    sl_json_obj_end(j);
    free(all);
}
