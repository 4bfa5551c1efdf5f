/* test_perf_model.c — the step-time model's arithmetic (perf_model.h) on hand-computed cases:
 * known GEMM seconds, a known element-wise bandwidth and known alpha-beta give a known
 * prediction, exactly (every figure below is a sum of powers of two). No timing. */
#include <math.h>
#include <string.h>

#include "perf_model.h"
#include "sl_stats.h"
#include "../tap.h"

/* Two shapes, 1/4 s and 1/2 s; 1024 B/s; allreduce 1/8 s + 1 s per KiB, iallreduce 1/16 s +
 * 1/2 s per KiB. */
static sl_pm_prims prims(int background)
{
    sl_pm_prims p = {.ngemm = 2, .bw = 1024, .background = background};
    p.gemm[0] = (sl_pm_gemm_shape){.ta = 0, .tb = 1, .m = 32, .n = 64, .k = 128, .beta = 0, .dt = SL_F32};
    p.gemm[1] = (sl_pm_gemm_shape){.ta = 1, .tb = 0, .m = 64, .n = 128, .k = 32, .beta = 1, .dt = SL_F32};
    p.gemm_s[0] = 0.25, p.gemm_s[1] = 0.5;
    p.alpha[SL_PM_ALLREDUCE] = 0.125, p.beta[SL_PM_ALLREDUCE] = 1.0 / 1024;
    p.alpha[SL_PM_IALLREDUCE] = 0.0625, p.beta[SL_PM_IALLREDUCE] = 1.0 / 2048;
    return p;
}

/* GEMM A twice, 512 bytes, an iallreduce of 256 f32 started, GEMM B, its wait, a blocking
 * allreduce of 128 f32. */
static void schedule(sl_pm_sched *s)
{
    sl_pm_init(s, SL_F32);
    sl_pm_gemm(s, 0, 1, 32, 64, 128, 0, 2);
    sl_pm_bytes(s, 512);
    const int id = sl_pm_start(s, SL_PM_IALLREDUCE, 256);
    sl_pm_gemm(s, 1, 0, 64, 128, 32, 1, 1);
    sl_pm_wait(s, id);
    sl_pm_comm(s, SL_PM_ALLREDUCE, 128);
}

static sl_pm_sched sched; /* large: not on the stack */

int main(void)
{
    /* the costs: A x2 0.5, 512 B 0.5, iallreduce 1 KiB 0.0625 + 0.5, B 0.5, allreduce 512 B 0.125 + 0.5 */
    sl_pm_prims p = prims(1);
    schedule(&sched);
    is_int(sched.nshapes, 2, "two GEMM shapes in the schedule");
    sl_pm_pred r = sl_pm_predict(&sched, &p);
    is_double(r.gemm, 1.0, 0, "gemm: 2 x 1/4 + 1/2");
    is_double(r.bytes, 0.5, 0, "elementwise: 512 B at 1024 B/s");
    is_double(r.compute, 1.5, 0, "compute = gemm + elementwise");
    is_double(r.comm, 1.1875, 0, "comm: (1/16 + 1024/2048) + (1/8 + 512/1024)");
    /* background: the iallreduce runs [1, 1.5625] beside B [1, 1.5]: 1/16 exposed; the
     * allreduce is all exposed */
    is_double(r.exposed, 0.6875, 0, "exposed: what the iallreduce extends past B, and the blocking allreduce");
    is_double(r.step, 2.1875, 0, "step = compute + exposed");
    ok(!strcmp(sl_pm_dominant(&r), "gemm"), "dominant term: gemm (1 s of 2.1875)");

    /* without background progress the iallreduce runs in full where it starts */
    p = prims(0);
    r = sl_pm_predict(&sched, &p);
    is_double(r.exposed, 1.1875, 0, "no background progress: every operation exposed");
    is_double(r.step, 2.6875, 0, "no background progress: step = 1.5 + 1.1875");

    /* two operations queue on the one communication timeline; the step waits for both at its end */
    p = prims(1);
    sl_pm_init(&sched, SL_F32);
    sl_pm_start(&sched, SL_PM_IALLREDUCE, 256);
    sl_pm_start(&sched, SL_PM_IALLREDUCE, 256);
    sl_pm_gemm(&sched, 0, 1, 32, 64, 128, 0, 1);
    r = sl_pm_predict(&sched, &p);
    is_double(r.comm, 1.125, 0, "two queued operations: 2 x 0.5625");
    is_double(r.exposed, 0.875, 0, "never waited: waited for at the end, 1.125 - 0.25");
    is_double(r.step, 1.125, 0, "step ends with the second operation");

    /* a 16-bit schedule's operations are 2 bytes per element */
    sl_pm_init(&sched, SL_BF16);
    sl_pm_comm(&sched, SL_PM_ALLREDUCE, 512);
    r = sl_pm_predict(&sched, &p);
    is_double(r.comm, 1.125, 0, "bf16: 512 elements are 1 KiB: 1/8 + 1");
    ok(!strcmp(sl_pm_dominant(&r), "exposed_comm"), "dominant term: exposed_comm");

    /* a shape the primitives do not hold, or a wait for nothing: no prediction */
    sl_pm_init(&sched, SL_F32);
    sl_pm_gemm(&sched, 0, 0, 32, 64, 128, 0, 1);
    ok(isnan(sl_pm_predict(&sched, &p).step), "an uncalibrated shape: NAN");
    sl_pm_init(&sched, SL_F32);
    sl_pm_bytes(&sched, 1);
    sl_pm_wait(&sched, 0);
    ok(isnan(sl_pm_predict(&sched, &p).step), "a wait for no operation: NAN");

    /* the fit recovers a line through its points: alpha 2^-10 s, beta 2^-20 s/B */
    const double S[] = {1024, 4096, 16384, 65536};
    double t[4], a, b, rel;
    for (int i = 0; i < 4; i++) t[i] = 0x1p-10 + 0x1p-20 * S[i];
    sl_fit_alpha_beta(S, t, 4, &a, &b, &rel);
    is_double(a, 0x1p-10, 1e-15, "fit: alpha");
    is_double(b, 0x1p-20, 1e-20, "fit: beta");
    done_testing();
    return exit_status();
}
