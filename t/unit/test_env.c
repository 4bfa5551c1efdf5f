/* test_env.c — environment capture: this rank's host and binding, the CPU and topology, and a
 * manifest that validates against results/schema.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "scalelab.h"

static const sl_program prog = {.name = "env_test", .summary = "environment capture under test"};

int main(void)
{
    MPI_Init(NULL, NULL);
    sl_env_local e;
    sl_env_local_capture(&e);
    ok(e.host[0] != 0, "host name captured (%s)", e.host);
    ok(e.nbound_cpus >= 1, "bound to at least one CPU (%d: %s)", e.nbound_cpus, e.binding);

    char cpu[256], topo[256], mpi[512];
    int cores = 0, pus = 0;
    ok(sl_env_cpu_model(cpu, sizeof cpu) == 0 && cpu[0], "CPU model read (%s)", cpu);
    ok(sl_env_topology_summary(topo, sizeof topo, &cores, &pus) == 0, "hwloc topology (%s)", topo);
    ok(cores >= 1 && pus >= cores, "cores %d and PUs %d are sensible", cores, pus);
    sl_env_mpi_version(mpi, sizeof mpi);
    ok(strstr(mpi, "MPI") != NULL, "MPI library version (%s)", mpi);

    sl_env_gpu g;
    sl_env_gpu_capture(&g);
    ok(g.ndevices >= 0 && (g.ndevices > 0 || g.note[0]), "GPU capture: devices or a reason why none");
    is_int(sl_cuda_device_count(), g.ndevices, "device count agrees");

    sl_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.prog = &prog;
    ctx.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(ctx.comm, &ctx.rank);
    MPI_Comm_size(ctx.comm, &ctx.nranks);
    ctx.node_ranks = ctx.nranks; /* what the harness's placement fills in: one node here */
    ctx.node_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(ctx.run_id, sizeof ctx.run_id, "env-test");
    snprintf(ctx.cmdline, sizeof ctx.cmdline, "test_env");
    sl_json j;
    sl_json_init(&j);
    sl_env_manifest(&ctx, &j);
    char path[] = "/tmp/scalelab-manifest-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs(j.buf, f);
    fclose(f);
    ok(strstr(j.buf, "\"git_describe\"") && strstr(j.buf, "\"rank_binding\""),
       "manifest has git describe and rank binding");
    sl_json_free(&j);
    char cmd[512];
    const char *top = getenv("top");
    snprintf(cmd, sizeof cmd, "%s/scripts/validate manifest %s >&2", top ? top : ".", path);
    is_int(system(cmd), 0, "manifest validates against the schema");
    remove(path);
    MPI_Finalize();
    done_testing();
    return exit_status();
}
