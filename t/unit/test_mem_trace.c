/* test_mem_trace.c — memory accounting (current and peak bytes per category) and the Chrome
 * trace writer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../tap.h"
#include "scalelab.h"

int main(void)
{
    char *a = sl_alloc(SL_MEM_PARAMS, 1000);
    char *b = sl_alloc(SL_MEM_ACTIV, 3000);
    ok(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0, "allocations are 64-byte aligned");
    ok(a[0] == 0 && a[999] == 0, "allocations are zeroed");
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_PARAMS), 1000, "params counted");
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV), 3000, "activations counted");
    sl_free(b);
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV), 0, "freed activations uncounted");
    is_int(sl_mem_peak(SL_MEM_HOST, SL_MEM_ACTIV), 3000, "peak of activations kept");
    is_int(sl_mem_peak_total(SL_MEM_HOST), 4000, "peak of the total");
    char *c = sl_alloc(SL_MEM_GRADS, 500);
    is_int(sl_mem_peak_total(SL_MEM_HOST), 4000, "total peak is the peak of the sum, not a sum of peaks");
    sl_mem_reset_peaks();
    is_int(sl_mem_peak(SL_MEM_HOST, SL_MEM_ACTIV), 0, "reset: peak becomes current");
    is_int(sl_mem_peak_total(SL_MEM_HOST), 1500, "reset: total peak becomes current");
    sl_mem_track(SL_MEM_DEVICE, SL_MEM_PARAMS, 1 << 20);
    is_int(sl_mem_current(SL_MEM_DEVICE, SL_MEM_PARAMS), 1 << 20, "device bytes tracked separately");
    sl_mem_track(SL_MEM_DEVICE, SL_MEM_PARAMS, -(1 << 20));
    is_int(sl_mem_peak(SL_MEM_DEVICE, SL_MEM_PARAMS), 1 << 20, "device peak kept");
    sl_free(a);
    sl_free(c);
    sl_free(NULL);
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_PARAMS) + sl_mem_current(SL_MEM_HOST, SL_MEM_GRADS), 0,
           "everything freed");
    ok(strcmp(sl_mem_cat_name(SL_MEM_OPTIM), "optim") == 0, "category names");
    /* a page or more starts on a page (as OSU's buffers), whatever malloc would have given */
    char *pg[3] = {sl_alloc(SL_MEM_COMM, 4096), sl_alloc(SL_MEM_COMM, 5000),
                   sl_alloc(SL_MEM_COMM, (size_t)8 << 20)};
    ok(((uintptr_t)pg[0] | (uintptr_t)pg[1] | (uintptr_t)pg[2]) % 4096 == 0,
       "a page or more (4096, 5000 B, 8 MiB) is page-aligned");
    ok(pg[1][4999] == 0 && pg[2][((size_t)8 << 20) - 1] == 0, "and zeroed to its end");
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_COMM), 4096 + 5000 + (8 << 20), "and counted as asked");
    for (int i = 0; i < 3; i++) sl_free(pg[i]);
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_COMM), 0, "page-aligned blocks freed");

    MPI_Init(NULL, NULL);
    sl_trace_event("ignored", "x", 0, 0, 1); /* disabled: recorded nowhere */
    sl_trace_enable(1);
    sl_trace_set_epoch(64.0); /* binary fractions keep the microsecond values exact */
    sl_trace_event("forward", "compute", 0, 64.5, 64.75);
    sl_trace_event("allreduce \"bucket 0\"", "comm", 1, 64.625, 65.0);
    char path[] = "/tmp/scalelab-trace-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    is_int(sl_trace_write(path, MPI_COMM_WORLD), 2, "two events written (the disabled one was not)");
    char cmd[512];
    const char *top = getenv("top");
    snprintf(cmd, sizeof cmd, "%s/scripts/validate trace %s >&2", top ? top : ".", path);
    is_int(system(cmd), 0, "the trace is valid Trace Event Format JSON");
    FILE *f = fopen(path, "r");
    char buf[4096] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ok(strstr(buf, "\"ts\":500000,\"dur\":250000") != NULL,
       "timestamps are microseconds from the epoch");
    remove(path);
    sl_trace_reset();
    MPI_Finalize();
    /* The cgroup limit: v2 (the smallest from the cgroup up) and v1, on a fake tree. */
    char root[] = "/tmp/scalelab-cgroup-XXXXXX";
    ok(mkdtemp(root) != NULL, "a fake cgroup tree");
    char sh[512], proc[300], which[600];
    snprintf(proc, sizeof proc, "%s/proc-cgroup", root);
    snprintf(sh, sizeof sh,
             "cd %s && mkdir -p job/step memory/slurm && printf '0::/job/step\n' >proc-cgroup && "
             "echo max >job/step/memory.max && echo 419430400 >job/memory.max && "
             "printf 'anon 1048576\nfile 9\n' >job/memory.stat && "
             "printf '5:memory:/slurm\n0::/\n' >proc-v1 && echo 9223372036854771712 >memory.max && "
             "echo 268435456 >memory/slurm/memory.limit_in_bytes && "
             "printf 'rss 1\ntotal_rss 2097152\n' >memory/slurm/memory.stat", root);
    ok(system(sh) == 0, "fake cgroup files");
    size_t limit = 0, used = 0;
    ok(sl_mem_cgroup_limit(proc, root, &limit, &used, which, sizeof which) == 1 &&
           limit == 419430400 && used == 1048576 && strstr(which, "v2"),
       "v2: the parent's memory.max binds (%zu, used %zu, %s)", limit, used, which);
    snprintf(proc, sizeof proc, "%s/proc-v1", root);
    ok(sl_mem_cgroup_limit(proc, root, &limit, &used, which, sizeof which) == 1 &&
           limit == 268435456 && used == 2097152 && strstr(which, "v1"),
       "v1: memory.limit_in_bytes (%zu, used %zu, %s)", limit, used, which);
    snprintf(proc, sizeof proc, "%s/none", root);
    ok(sl_mem_cgroup_limit(proc, root, &limit, &used, which, sizeof which) == 0,
       "no cgroup file: no limit");
    snprintf(sh, sizeof sh, "rm -rf %s", root);
    ok(system(sh) == 0, "clean up");

    done_testing();
    return exit_status();
}
