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

/* 2 stages, 2 micro-batches, gpipe: stage 0 F0 F1 B0 B1, stage 1 likewise; activations sent
 * forward (tag 2 mb), gradients backward (tag 2 mb + 1), 128 f32 each. */
static void gpipe2(sl_pm_sched *s)
{
    sl_pm_init(s, SL_F32);
    for (int st = 0; st < 2; st++) {
        sl_pm_lane(s, st);
        for (int mb = 0; mb < 2; mb++) {
            if (st == 1) sl_pm_recv(s, 0, 2 * mb);
            sl_pm_gemm(s, 0, 1, 32, 64, 128, 0, 1);
            if (st == 0) sl_pm_send(s, 1, 2 * mb, 128);
        }
        for (int mb = 0; mb < 2; mb++) {
            if (st == 0) sl_pm_recv(s, 1, 2 * mb + 1);
            sl_pm_gemm(s, 1, 0, 64, 128, 32, 1, 1);
            if (st == 1) sl_pm_send(s, 0, 2 * mb + 1, 128);
        }
    }
}

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

    /* A 2-stage gpipe of 2 micro-batches, a lane per stage: F is GEMM A (1/4 s), B is GEMM B
     * (1/2 s), each boundary message 128 f32 = 512 B by p2p 1/8 s + 1 s per KiB = 5/8 s.
     * Without background progress a send runs in full on its sender:
     *   stage 0: F0 [0, .25] send [.25, .875] F1 [.875, 1.125] send [1.125, 1.75],
     *            waits for grad 0 until 3.125, B0 [3.125, 3.625], waits for grad 1 until 4.25,
     *            B1 [4.25, 4.75]
     *   stage 1: waits for act 0 until .875, F0 [.875, 1.125], waits until 1.75, F1 [1.75, 2],
     *            B0 [2, 2.5] send [2.5, 3.125], B1 [3.125, 3.625] send [3.625, 4.25]
     * The step is stage 0's 4.75: GEMMs 1.5, its sends 1.25, idle (the bubble) 1.375 + .625. */
    p = prims(0);
    p.alpha[SL_PM_P2P] = 0.125, p.beta[SL_PM_P2P] = 1.0 / 1024;
    gpipe2(&sched);
    r = sl_pm_predict(&sched, &p);
    is_double(r.step, 4.75, 0, "2-stage gpipe: step 4.75 (stage 0's)");
    is_double(r.gemm, 1.5, 0, "2-stage gpipe: stage 0's GEMMs, 2 x (1/4 + 1/2)");
    is_double(r.exposed, 1.25, 0, "2-stage gpipe: stage 0's two sends, run where started");
    is_double(r.idle, 2.0, 0, "2-stage gpipe: stage 0 waits 1.375 for grad 0 and .625 for grad 1");
    is_double(r.comm, 1.25, 0, "2-stage gpipe: comm is stage 0's sends");
    ok(!strcmp(sl_pm_dominant(&r), "idle"), "2-stage gpipe: dominant term idle (the bubble)");
    /* with background progress the sends run beside the compute, queued on the sender's
     * network: stage 0 sends [.25, .875] [.875, 1.5]; stage 1 F0 [.875, 1.125], F1 [1.5, 1.75],
     * B0 [1.75, 2.25] send [2.25, 2.875], B1 [2.25, 2.75] send [2.875, 3.5]; stage 0 waits until
     * 2.875, B0 until 3.375, waits until 3.5, B1 until 4 */
    p.background = 1;
    r = sl_pm_predict(&sched, &p);
    is_double(r.step, 4.0, 0, "2-stage gpipe, background sends: step 4");
    is_double(r.idle, 2.5, 0, "2-stage gpipe, background sends: idle 2.375 + .125");
    is_double(r.exposed, 0, 0, "2-stage gpipe, background sends: nothing exposed on stage 0");
    /* a receive of nothing sent, or lanes that wait for each other: no prediction */
    sl_pm_init(&sched, SL_F32);
    sl_pm_lane(&sched, 1);
    sl_pm_recv(&sched, 0, 7);
    ok(isnan(sl_pm_predict(&sched, &p).step), "a receive with no send: NAN");
    sl_pm_init(&sched, SL_F32);
    sl_pm_recv(&sched, 1, 0);
    sl_pm_send(&sched, 1, 1, 1);
    sl_pm_lane(&sched, 1);
    sl_pm_recv(&sched, 0, 1);
    sl_pm_send(&sched, 0, 0, 1);
    ok(isnan(sl_pm_predict(&sched, &p).step), "lanes waiting for each other: NAN");

    /* host<->device copies on a copy engine of their own, in the background even where the
     * collectives are not: a copy of 1 KiB (1 s at 1 KiB/s) started, a blocking allreduce of
     * 512 B (5/8 s) beside it, then the copy waited for: 3/8 s more, step 1 */
    p = prims(0);
    p.alpha[SL_PM_H2D] = 0, p.beta[SL_PM_H2D] = 1.0 / 1024;
    p.background_ops = 1u << SL_PM_H2D;
    sl_pm_init(&sched, SL_F32);
    const int cp = sl_pm_copy(&sched, 1024);
    sl_pm_comm(&sched, SL_PM_ALLREDUCE, 128);
    sl_pm_wait(&sched, cp);
    r = sl_pm_predict(&sched, &p);
    is_double(r.step, 1.0, 0, "a copy beside an allreduce: step 1 (two timelines)");
    is_double(r.comm, 1.625, 0, "a copy beside an allreduce: comm 1 + 5/8");
    is_double(r.exposed, 1.0, 0, "a copy beside an allreduce: exposed 5/8 + 3/8");
    ok(!strcmp(sl_pm_op_name(SL_PM_H2D), "h2d"), "the copy's name: h2d");

    /* operations on a group (sl_pm_group) at the group's alpha-beta: a blocking allreduce of
     * 128 f32 on group 1 (1/4 s + 512 B at 1/2 s per KiB: 1/2 s), back on the run's
     * communicator one of 128 f32 (1/8 + 1/2 s: 5/8 s); a group number out of range: NAN */
    p = prims(0);
    p.group_alpha[1][SL_PM_ALLREDUCE] = 0.25, p.group_beta[1][SL_PM_ALLREDUCE] = 1.0 / 2048;
    sl_pm_init(&sched, SL_F32);
    sl_pm_group(&sched, 1, "tp", NULL, 2);
    sl_pm_comm(&sched, SL_PM_ALLREDUCE, 128);
    sl_pm_group(&sched, 0, NULL, NULL, 0);
    sl_pm_comm(&sched, SL_PM_ALLREDUCE, 128);
    r = sl_pm_predict(&sched, &p);
    is_double(r.comm, 1.125, 0, "a group's allreduce and the run's: comm 1/2 + 5/8");
    is_double(r.step, 1.125, 0, "a group's allreduce and the run's: step 1/2 + 5/8");
    ok(!strcmp(sched.group_name[1], "tp") && sched.group_size[1] == 2, "the group's name and size kept");
    is_double(sl_pm_group_op_seconds(&p, 1, SL_PM_ALLREDUCE, 0), 0, 0, "a group's operation of 0 bytes: 0 s");
    sl_pm_group(&sched, SL_PM_MAX_GROUPS, "x", NULL, 2);
    ok(isnan(sl_pm_predict(&sched, &p).step), "a group number out of range: NAN");

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
