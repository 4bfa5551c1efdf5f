/* test_expected.c — the expected-value table and its rules (common/expected.c): the figures of
 * results/expected as compiled, and what a row gets on hardware in the table, on hardware that
 * is not (no expected value, never a guess), on a CPU (this run's probe) and simulated; the
 * link speed read from a sysfs tree made here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "scalelab.h"
#include "sl_expected.h"

static sl_result row(const char *variant, const char *backend, const char *coll, const char *dtype,
                     const char *metric, double v, const char *unit)
{
    sl_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.variant, sizeof r.variant, "%s", variant);
    r.backend = backend;
    r.collective = coll;
    r.dtype = dtype;
    sl_result_metric(&r, metric, v, unit);
    snprintf(r.headline, sizeof r.headline, "%s", metric);
    return r;
}

static const char *param(const sl_result *r, const char *name)
{
    for (int i = 0; i < r->nparams; i++)
        if (!r->params[i].is_num && strcmp(r->params[i].name, name) == 0) return r->params[i].str;
    return "";
}

static void put(const char *dir, const char *rel, const char *text)
{
    char path[512], cmd[600];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    if (system(cmd) != 0) return;
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

int main(void)
{
    const sl_expected_figure *f = sl_expected_find("NVIDIA H100 80GB HBM3", "bf16_tflops");
    ok(f && f->value == 989 && strstr(f->source, "datasheet"), "H100 SXM bf16: 989 TFLOP/s dense, from the datasheet");
    f = sl_expected_find("NVIDIA H200", "hbm_bw");
    ok(f && f->value == 4800 && strcmp(f->unit, "GB/s") == 0, "H200: HBM3e 4800 GB/s");
    f = sl_expected_find("NVIDIA A100-SXM4-80GB", "hbm_bw");
    ok(f && f->value == 2039, "A100 SXM4 80GB: 2039 GB/s");
    f = sl_expected_find("net:400000", "net_bw");
    ok(f && f->value == 50, "a 400 Gb/s link: 50 GB/s per direction");
    ok(!sl_expected_find("NVIDIA H100 PCIe", "bf16_tflops") && !sl_expected_find("NVIDIA H100 80GB HBM3", "f64_tflops"),
       "no figure for a device or a figure that is not in the table");
    int sourced = 1;
    for (int i = 0; i < sl_expected_ntable; i++)
        sourced &= sl_expected_table[i].value > 0 && strlen(sl_expected_table[i].source) > 20;
    ok(sourced, "every one of the %d figures has a value and a source", sl_expected_ntable);

    sl_expected_hw h100 = {.gpu = "NVIDIA H100 80GB HBM3", .net = "net:100000", .net_from = "eth0"};
    sl_result r = row("gemm", "cuda", NULL, "bf16", "gflops", 494500, "GFLOP/s");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    is_double(sl_result_get(&r, "expected"), 989000, 1e-9, "kernels gemm bf16 on an H100: expected 989000 GFLOP/s");
    is_double(sl_result_get(&r, "of_expected"), 0.5, 1e-9, "of_expected = measured / expected");
    ok(!strcmp(param(&r, "expected_of"), "gflops") &&
           strstr(param(&r, "expected_source"), "nvidia-h100-sxm.json bf16_tflops"),
       "the row names the metric and the file and figure: %s", param(&r, "expected_source"));

    r = row("axpby", "cuda", NULL, "f32", "gbps", 3015, "GB/s");
    sl_result_metric(&r, "gflops", 500, "GFLOP/s");
    snprintf(r.headline, sizeof r.headline, "gflops"); /* the roofline may call it compute-bound */
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    is_double(sl_result_get(&r, "of_expected"), 0.9, 1e-9,
              "an element-wise kernel on an H100: against HBM3's 3350 GB/s");
    r = row("peak_copy", "cuda", NULL, "f32", "gbps", 3000, "GB/s");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    is_double(sl_result_get(&r, "expected"), 3350, 1e-9, "the copy probe on an H100: against HBM3 too");
    r = row("conv_fwd", "cuda", NULL, "f32", "gbps", 30, "GB/s");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    ok(r.nparams == 0, "a convolution row: neither a GEMM nor memory-bound, no expected value claimed");
    r = row("peak_copy", "cpu", NULL, "f32", "gbps", 10, "GB/s");
    sl_result_metric(&r, "peak_gbps", 10, "GB/s");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    ok(r.nparams == 0, "the CPU copy probe is not compared with itself");

    r = row("nccl", "cuda", "nccl", "f32", "busbw", 360, "GB/s");
    sl_expected_apply(&h100, "allreduce", 0, 8, &r);
    is_double(sl_result_get(&r, "of_expected"), 0.8, 1e-9,
              "nccl busbw on one host of H100s: against NVLink4's 450 GB/s");
    r = row("ring", "cpu", "ring", "f32", "busbw", 10, "GB/s");
    sl_expected_apply(&h100, "allreduce", 1, 4, &r);
    is_double(sl_result_get(&r, "expected"), 12.5, 1e-9, "busbw across hosts with a 100 Gb/s link: 12.5 GB/s");
    r = row("sync", "cuda", "nccl", "bf16", "tflops", 989.0 * 8 / 4, "TFLOP/s");
    sl_expected_apply(&h100, "ddp", 0, 8, &r);
    is_double(sl_result_get(&r, "of_expected"), 0.25, 1e-9, "training TFLOP/s of 8 ranks against 8 H100s' peak");

    sl_expected_hw other = {.gpu = "NVIDIA H100 PCIe", .net_from = "no link speed in sysfs"};
    r = row("gemm", "cuda", NULL, "bf16", "gflops", 1000, "GFLOP/s");
    sl_expected_apply(&other, "kernels", 0, 1, &r);
    ok(isnan(sl_result_get(&r, "expected")) && !strncmp(param(&r, "expected_source"), "no expected value", 17),
       "a GPU not in the table: no expected value, no figure: %s", param(&r, "expected_source"));
    r = row("ring", "cpu", "ring", "f32", "busbw", 1, "GB/s");
    sl_expected_apply(&other, "allreduce", 1, 4, &r);
    ok(isnan(sl_result_get(&r, "expected")) && strstr(param(&r, "expected_source"), "no link speed"),
       "across hosts of unknown link speed: %s", param(&r, "expected_source"));
    sl_expected_hw sim = h100;
    sim.simulated = 1;
    r = row("gemm", "cuda", NULL, "bf16", "gflops", 1000, "GFLOP/s");
    sl_expected_apply(&sim, "kernels", 0, 1, &r);
    ok(isnan(sl_result_get(&r, "expected")) && strstr(param(&r, "expected_source"), "simulated"),
       "simulated: %s", param(&r, "expected_source"));

    r = row("partial", "cpu", NULL, "f64", "eff_bw", 6, "GB/s");
    sl_result_metric(&r, "read_bw", 8, "GB/s");
    sl_expected_apply(&h100, "mae_threads", 0, 1, &r);
    ok(sl_result_get(&r, "expected") == 8 && sl_result_get(&r, "of_expected") == 0.75 &&
       !strcmp(param(&r, "expected_source"), "measured: this run's read_bw"),
       "a CPU: against this run's read probe (%s)", param(&r, "expected_source"));
    r = row("gemm", "cpu", NULL, "f32", "gflops", 50, "GFLOP/s");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    ok(isnan(sl_result_get(&r, "expected")) && strstr(param(&r, "expected_source"), "CPU"),
       "a CPU GEMM: no datasheet peak, said so: %s", param(&r, "expected_source"));
    r = row("gemm", "cpu", NULL, "f32", "loss", 1, "");
    sl_expected_apply(&h100, "kernels", 0, 1, &r);
    ok(r.nparams == 0 && r.nmetrics == 1, "a row without a comparable metric is left as it is");

    /* the link speed: the fastest interface that is up and a device, or an active IB port */
    char dir[] = "/tmp/sl-expected-sysfs.XXXXXX";
    if (mkdtemp(dir)) {
        put(dir, "class/net/lo/speed", "-1\n");
        put(dir, "class/net/lo/operstate", "unknown\n");
        put(dir, "class/net/eth0/speed", "25000\n");
        put(dir, "class/net/eth0/operstate", "up\n");
        put(dir, "class/net/eth0/device/vendor", "0x15b3\n");
        put(dir, "class/net/eth1/speed", "100000\n");
        put(dir, "class/net/eth1/operstate", "down\n");
        put(dir, "class/net/eth1/device/vendor", "0x15b3\n");
        put(dir, "class/net/veth0/speed", "400000\n");
        put(dir, "class/net/veth0/operstate", "up\n");
        setenv("SL_EXPECTED_SYSFS", dir, 1);
        sl_expected_hw hw;
        sl_expected_capture(&hw);
        ok(!strcmp(hw.net, "net:25000") && !strcmp(hw.net_from, "eth0"),
           "sysfs: eth0 at 25000 Mb/s (eth1 is down, veth0 is not a device): %s from %s", hw.net, hw.net_from);
        put(dir, "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
        put(dir, "class/infiniband/mlx5_0/ports/1/rate", "400 Gb/sec (4X NDR)\n");
        sl_expected_capture(&hw);
        ok(!strcmp(hw.net, "net:400000") && strstr(hw.net_from, "mlx5_0"),
           "sysfs: an active NDR port, 400 Gb/s: %s from %s", hw.net, hw.net_from);
        char buf[512];
        sl_expected_describe(&hw, buf, sizeof buf);
        ok(strstr(buf, "nic-400g.json") != NULL, "the header names the file: %s", buf);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) diag("could not remove %s", dir);
    }
    done_testing();
    return exit_status();
}
