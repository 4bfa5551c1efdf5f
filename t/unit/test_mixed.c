/* test_mixed.c — mixed precision on the cpu backend: the 16-bit MLP step (kernels/mlp_mixed.h)
 * against a host reference that rounds where the kernels round and accumulates in double; the
 * f32 path against the serial reference, bit for bit; the counts of what casts lose; weight
 * updates lost to rounding; and the loss scaler's state machine step by step against
 * hand-computed sequences (kernels/loss_scale.h). */
#include <float.h>
#include <string.h>

#include "loss_scale.h"
#include "mlp_mixed.h"
#include "train_ref.h"
#include "test_kernels_util.h"

#define BE SL_BACKEND_CPU

/* The reference step -------------------------------------------------------------------------
 * Inputs: the dt-rounded weights p (as floats), x[B, in], y[B, out]. Each value the kernels
 * store in dt is rounded here with sl_round_to; sums are in double, rounded once to f32 where
 * a kernel's f32 accumulator ends. Writes the gradients (rounded to dt) into g, returns the
 * loss. */
static double ref_step(const sl_mlp *m, sl_dtype dt, const float *p, int B, const float *x,
                       const float *y, float scale, float *g)
{
    const int L = m->nlayers;
    float *a[SL_MLP_MAX_LAYERS + 1], *z[SL_MLP_MAX_LAYERS];
    a[0] = t_xmalloc((size_t)B * m->dims[0] * 4);
    for (int i = 0; i < B * m->dims[0]; i++) a[0][i] = sl_round_to(dt, x[i]);
    for (int l = 0; l < L; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        const float *W = p + m->w_off[l], *b = p + m->b_off[l];
        z[l] = t_xmalloc((size_t)B * out * 4);
        a[l + 1] = t_xmalloc((size_t)B * out * 4);
        for (int r = 0; r < B; r++)
            for (int o = 0; o < out; o++) {
                double s = 0;
                for (int i = 0; i < in; i++) s += (double)a[l][r * in + i] * W[o * in + i];
                float zz = sl_round_to(dt, (float)s + b[o]);
                z[l][r * out + o] = zz;
                a[l + 1][r * out + o] = sl_round_to(dt, (float)sl_ref_act(m->act[l], zz));
            }
    }
    const int out = m->dims[L];
    const size_t nout = (size_t)B * out;
    double *d = t_xmalloc(nout * sizeof *d);
    double loss = sl_ref_mse(nout, a[L], y, 1.0 / ((double)B * out), d);
    float *dy = t_xmalloc(nout * 4);
    for (size_t i = 0; i < nout; i++) dy[i] = sl_round_to(dt, (float)d[i] * scale);
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], o_ = m->dims[l + 1];
        for (int i = 0; i < B * o_; i++)
            dy[i] = sl_round_to(dt, (float)(sl_ref_act_grad(m->act[l], z[l][i]) * dy[i]));
        const float *W = p + m->w_off[l];
        for (int o = 0; o < o_; o++) {
            double sb = 0;
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int r = 0; r < B; r++) s += (double)dy[r * o_ + o] * a[l][r * in + i];
                g[m->w_off[l] + (size_t)o * in + i] = sl_round_to(dt, (float)s);
            }
            for (int r = 0; r < B; r++) sb += dy[r * o_ + o];
            g[m->b_off[l] + o] = sl_round_to(dt, (float)sb);
        }
        float *dx = t_xmalloc((size_t)B * in * 4);
        for (int r = 0; r < B; r++)
            for (int i = 0; i < in; i++) {
                double s = 0;
                for (int o = 0; o < o_; o++) s += (double)dy[r * o_ + o] * W[o * in + i];
                dx[r * in + i] = sl_round_to(dt, (float)s);
            }
        free(dy);
        dy = dx;
    }
    free(dy), free(d);
    for (int l = 0; l < L; l++) free(z[l]), free(a[l + 1]);
    free(a[0]);
    return loss;
}

static double eps_of(sl_dtype dt) { return dt == SL_F16 ? 0x1p-10 : dt == SL_BF16 ? 0x1p-7 : 0x1p-23; }

/* One step of a 3-layer GeLU MLP in dt against the reference. Tolerance: the kernels
 * accumulate in f32 in another order than the double reference, so a value near a rounding
 * boundary of dt may round the other way (one unit, eps relative), and the flip propagates
 * through the later layers; 8 eps of the tensor's largest value bounds that, while a wrong
 * operand, transpose or missing term is off by O(1). */
static void check_step(sl_dtype dt)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 3, 6, 9, 4, SL_ACT_GELU);
    const int B = 5;
    sl_optim o = {.kind = SL_OPTIM_SGD, .sgd = {.lr = 0.1f, .momentum = 0.9f}};
    sl_mixed mx;
    sl_mixed_init(&mx, &m, dt, 1, B, 7, &o);
    float *x = t_randn(11, (size_t)B * 6, 1.0f), *y = t_randn(12, (size_t)B * 4, 1.0f);
    const float scale = 1024.0f;
    double loss = sl_mixed_forward_backward(&mx, x, y, 1.0f / ((float)B * 4.0f), scale);
    float *p = t_xmalloc(m.nparams * 4), *gref = t_xmalloc(m.nparams * 4), *got = t_xmalloc(m.nparams * 4);
    sl_k_cast(BE, m.nparams, mx.w16, dt, p, SL_F32, NULL);
    double want = ref_step(&m, dt, p, B, x, y, scale, gref);
    sl_k_cast(BE, m.nparams, mx.g16, dt, got, SL_F32, NULL);
    double gmax = 0;
    for (size_t i = 0; i < m.nparams; i++) gmax = fmax(gmax, fabs(gref[i]));
    double e = 0;
    for (size_t i = 0; i < m.nparams; i++) e = fmax(e, fabs((double)got[i] - gref[i]));
    ok(e <= 8 * eps_of(dt) * gmax, "%s step: scaled gradients within 8 eps of the reference (max diff %.3g of max %.3g)",
       sl_dtype_name(dt), e, gmax);
    ok(fabs(loss - want) <= 8 * eps_of(dt) * want, "%s step: loss %.6g, reference %.6g", sl_dtype_name(dt), loss, want);
    is_int(mx.cnt.wgrad_n, m.nparams, "%s step: every weight gradient is rounded once", sl_dtype_name(dt));
    is_int(mx.cnt.act_n, (unsigned long long)B * (6 + 2 * 9 + 2 * 9 + 4), "%s step: input, z and y of each layer counted",
           sl_dtype_name(dt));
    /* unscale: g32 = g16 / scale exactly (a power of two) */
    ok(sl_mixed_unscale(&mx, scale) == 0, "%s: no inf/NaN at scale %g", sl_dtype_name(dt), scale);
    int exact = 1;
    for (size_t i = 0; i < m.nparams; i++) exact &= mx.g32[i] == got[i] / scale;
    ok(exact, "%s: unscaled gradients are the 16-bit ones divided by the scale", sl_dtype_name(dt));
    /* apply: the master copy takes the SGD step, w16 is its rounding */
    float *before = t_xmalloc(m.nparams * 4);
    memcpy(before, mx.master, m.nparams * 4);
    sl_mixed_apply(&mx, &o);
    int sgd = 1, cast = 1;
    for (size_t i = 0; i < m.nparams; i++) {
        sgd &= mx.master[i] == before[i] - o.sgd.lr * mx.g32[i];
        cast &= t_load(dt, mx.w16, i) == sl_round_to(dt, mx.master[i]);
    }
    ok(sgd && cast, "%s: the master copy takes the step (first momentum step is plain SGD), w16 is its rounding",
       sl_dtype_name(dt));
    free(before), free(p), free(gref), free(got), free(x), free(y);
    sl_mixed_free(&mx);
}

/* dt = f32 through the mixed path is the serial reference, bit for bit, for any power-of-two
 * scale (multiplying and dividing by it is exact). */
static void check_f32_is_serial(void)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 3, 8, 16, 4, SL_ACT_GELU);
    const int B = 8, steps = 5;
    sl_task task;
    sl_task_init(&task, BE, 8, 4, 3, B);
    sl_optim o = {.kind = SL_OPTIM_SGD, .sgd = {.lr = 0.05f, .momentum = 0.9f}};
    float *ref = t_xmalloc(m.nparams * 4);
    double ref_loss[5];
    sl_train_serial(&m, &task, &o, B, steps, 21, ref, ref_loss);
    for (int k = 0; k < 2; k++) {
        float scale = k ? 65536.0f : 1.0f;
        sl_mixed mx;
        sl_mixed_init(&mx, &m, SL_F32, 1, B, 21, &o);
        float *x = t_xmalloc((size_t)B * 8 * 4), *y = t_xmalloc((size_t)B * 4 * 4);
        int same_loss = 1;
        for (int s = 0; s < steps; s++) {
            sl_task_batch(&task, (uint64_t)s * B, B, x, y);
            double l = sl_mixed_forward_backward(&mx, x, y, sl_task_loss_norm(&task, B), scale);
            same_loss &= l == ref_loss[s];
            sl_mixed_unscale(&mx, scale);
            sl_optim so = sl_optim_for_step(&o, s);
            sl_mixed_apply(&mx, &so);
        }
        ok(same_loss && memcmp(sl_mixed_weights(&mx), ref, m.nparams * 4) == 0,
           "f32 through the mixed path (scale %g) equals sl_train_serial bit for bit", scale);
        free(x), free(y);
        sl_mixed_free(&mx);
    }
    free(ref);
    sl_task_free(&task);
}

/* The counts of sl_k_cast: zero, subnormal, overflow, from values of known fate. */
static void check_cast_counts(void)
{
    /* f16: min normal 2^-14, min subnormal 2^-24 (values below 2^-25 round to 0), max 65504 */
    const float v[] = {1.0f, 0x1p-15f, 0x1p-24f, 0x1p-26f, 1e-30f, 65504.0f, 65520.0f, 1e6f, 0.0f, -0x1p-20f};
    uint16_t h[10];
    sl_cast_count c = {0};
    sl_k_cast(BE, 10, v, SL_F32, h, SL_F16, &c);
    is_int(c.underflow, 2, "f16: 2^-26 and 1e-30 underflow to zero (0 itself is not counted)");
    is_int(c.subnormal, 3, "f16: 2^-15, 2^-24 and -2^-20 become subnormal");
    is_int(c.overflow, 2, "f16: 65520 and 1e6 overflow (65504 is the largest finite)");
    sl_cast_count b = {0};
    sl_k_cast(BE, 10, v, SL_F32, h, SL_BF16, &b);
    ok(b.overflow == 0 && b.underflow == 0 && b.subnormal == 0, "bf16: the same values lose nothing to range (f32's exponent)");
    /* bf16: min normal 2^-126, min subnormal 2^-133; 2^-134 is the tie halfway to 0 (even: 0) */
    const float tiny[] = {0x1p-130f, 0x1p-133f, 0x1p-134f, 0x1p-140f};
    sl_cast_count t = {0};
    sl_k_cast(BE, 4, tiny, SL_F32, h, SL_BF16, &t);
    ok(t.subnormal == 2 && t.underflow == 2, "bf16: 2^-130, 2^-133 subnormal; 2^-134 (a tie, to even) and 2^-140 underflow");
}

/* Updates lost to rounding when the weights themselves are 16-bit. */
static void check_lost_updates(void)
{
    /* around 1.0 the f16 spacing is 2^-10: a step of 2^-12 rounds back, 2^-10 does not */
    uint16_t w16[4] = {sl_f32_to_f16(1.0f), sl_f32_to_f16(1.0f), sl_f32_to_f16(1.0f), sl_f32_to_f16(1000.0f)};
    float w[4] = {1.0f + 0x1p-12f, 1.0f + 0x1p-10f, 1.0f, 1000.0f + 0.25f};
    size_t lost = sl_k_cast_update(BE, SL_F16, 4, w, w16);
    is_int(lost, 2, "f16: 1 + 2^-12 and 1000 + 0.25 round back to the old weight (lost); 1 + 2^-10 is kept; no change is not counted");
    ok(sl_f16_to_f32(w16[1]) == 1.0f + 0x1p-10f, "the kept update is stored");
    uint16_t b16[2] = {sl_f32_to_bf16(1.0f), sl_f32_to_bf16(1.0f)};
    float wb[2] = {1.0f + 0x1p-9f, 1.0f + 0x1p-7f};
    is_int(sl_k_cast_update(BE, SL_BF16, 2, wb, b16), 1, "bf16: 1 + 2^-9 lost (spacing 2^-7), 1 + 2^-7 kept");
    float f[2] = {1.0f, 2.0f}, w32[2] = {1.0f + 0x1p-20f, 2.0f};
    is_int(sl_k_cast_update(BE, SL_F32, 2, w32, f), 0, "f32 loses nothing and copies");
    ok(f[0] == 1.0f + 0x1p-20f, "f32 copy");
}

/* The loss scaler, step by step. Each row: the overflow flag given at that step, then the
 * expected (applied, scale after, skipped so far). */
typedef struct { int inf, applied; double scale; long skipped; } scaler_row;

static void run_sequence(const char *what, sl_loss_scaler *s, const scaler_row *rows, int n)
{
    int good = 1, bad_at = -1;
    for (int i = 0; i < n; i++) {
        int applied = sl_loss_scaler_update(s, rows[i].inf);
        if (applied != rows[i].applied || s->scale != rows[i].scale || s->skipped != rows[i].skipped) {
            good = 0;
            if (bad_at < 0) bad_at = i;
        }
    }
    ok(good, "%s%s", what, good ? "" : " (first difference at step index shown below)");
    if (!good) diag("step %d: scale %g skipped %ld", bad_at, s->scale, s->skipped);
}

static void check_scaler(void)
{
    sl_loss_scaler s;
    /* dynamic, interval 3 from 2^16: overflow at step 2 (0-based) -> skip, 2^15; three clean
     * steps (3, 4, 5) -> 2^16 after step 5; overflow at 6 and 7 -> 2^15, 2^14; clean 8, 9, 10 ->
     * 2^15 after 10; clean 11 does not grow yet */
    sl_loss_scaler_init(&s, SL_SCALE_DYNAMIC, 65536, 2, 0.5, 3);
    const scaler_row dyn[] = {
        {0, 1, 65536, 0}, {0, 1, 65536, 0}, {1, 0, 32768, 1}, {0, 1, 32768, 1}, {0, 1, 32768, 1},
        {0, 1, 65536, 1}, {1, 0, 32768, 2}, {1, 0, 16384, 3}, {0, 1, 16384, 3}, {0, 1, 16384, 3},
        {0, 1, 32768, 3}, {0, 1, 32768, 3},
    };
    run_sequence("dynamic (interval 3): overflow at step 2 halves and skips, growth after 3 clean steps, "
                 "two overflows in a row halve twice and reset the count", &s, dyn, 12);
    ok(s.growths == 2 && s.backoffs == 3 && s.steps == 12, "dynamic: 2 growths, 3 backoffs in 12 steps");
    /* GradScaler defaults: 1999 clean steps keep 2^16, the 2000th doubles it */
    sl_loss_scaler_init(&s, SL_SCALE_DYNAMIC, 65536, 2, 0.5, 2000);
    for (int i = 0; i < 1999; i++) sl_loss_scaler_update(&s, 0);
    int kept = s.scale == 65536;
    sl_loss_scaler_update(&s, 0);
    ok(kept && s.scale == 131072 && s.clean == 0, "defaults: 2^16 for 1999 clean steps, 2^17 after the 2000th");
    /* an overflow one step before growth restarts the count */
    sl_loss_scaler_init(&s, SL_SCALE_DYNAMIC, 8, 2, 0.5, 4);
    const scaler_row reset[] = {{0, 1, 8, 0}, {0, 1, 8, 0}, {0, 1, 8, 0}, {1, 0, 4, 1},
                                {0, 1, 4, 1}, {0, 1, 4, 1}, {0, 1, 4, 1}, {0, 1, 8, 1}};
    run_sequence("dynamic (interval 4): an overflow at the 4th step resets the clean count", &s, reset, 8);
    /* growth stops where the scale would no longer be a finite f32 */
    sl_loss_scaler_init(&s, SL_SCALE_DYNAMIC, 0x1p127, 2, 0.5, 1);
    sl_loss_scaler_update(&s, 0);
    ok(s.scale == 0x1p127 && s.growths == 0, "dynamic: no growth past the largest f32 power of two");
    /* static: the scale never moves; overflowing steps are skipped */
    sl_loss_scaler_init(&s, SL_SCALE_STATIC, 128, 2, 0.5, 1);
    const scaler_row stat[] = {{0, 1, 128, 0}, {1, 0, 128, 1}, {0, 1, 128, 1}, {0, 1, 128, 1}};
    run_sequence("static: fixed scale 128, the overflowing step 1 skipped", &s, stat, 4);
    /* none: scale 1, every step applied */
    sl_loss_scaler_init(&s, SL_SCALE_NONE, 1024, 2, 0.5, 1);
    const scaler_row none[] = {{0, 1, 1, 0}, {1, 1, 1, 0}, {0, 1, 1, 0}};
    run_sequence("none: scale 1 (the --scale given is ignored), even a non-finite step is applied", &s, none, 3);
}

/* Loss scaling at work in the MLP: at a loss scale of 2^-40 the f16 gradient of the loss
 * flushes to zero and every weight gradient downstream is zero; at 2^8 nothing flushes; bf16
 * keeps them at either scale. */
static void check_underflow_in_mlp(void)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 2, 8, 16, 4, SL_ACT_GELU);
    const int B = 8;
    sl_optim o = {.kind = SL_OPTIM_SGD, .sgd = {.lr = 0.1f}};
    float *x = t_randn(5, (size_t)B * 8, 1.0f), *y = t_randn(6, (size_t)B * 4, 1.0f);
    sl_mixed_counts c[2][2];
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) {
            sl_mixed mx;
            sl_mixed_init(&mx, &m, d ? SL_BF16 : SL_F16, 1, B, 9, &o);
            sl_mixed_forward_backward(&mx, x, y, 1.0f / (B * 4.0f), k ? 0x1p8f : 0x1p-40f);
            c[d][k] = mx.cnt;
            sl_mixed_free(&mx);
        }
    ok(c[0][0].agrad.underflow == (unsigned long long)B * 4 && c[0][0].wgrad.zero == m.nparams,
       "f16 at scale 2^-40: the %d elements of dL/d(output) underflow, so all %zu weight gradients are zero",
       B * 4, m.nparams);
    ok(c[0][1].agrad.underflow + c[0][1].wgrad.underflow + c[0][1].wgrad.zero == 0,
       "f16 at scale 2^8: no gradient underflows, none is zero");
    ok(c[1][0].agrad.underflow + c[1][0].wgrad.underflow + c[1][0].wgrad.zero == 0,
       "bf16 at scale 2^-40: no gradient underflows (f32's exponent range)");
    free(x), free(y);
}

int main(void)
{
    check_step(SL_F16);
    check_step(SL_BF16);
    check_f32_is_serial();
    check_cast_counts();
    check_lost_updates();
    check_scaler();
    check_underflow_in_mlp();
    done_testing();
    return exit_status();
}
