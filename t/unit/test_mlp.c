/* test_mlp.c — the shared MLP (kernels/mlp.h) on the cpu backend: flat layout, slice-wise
 * initialisation, finite-difference gradients of each layer type and of the whole model,
 * gradient accumulation, a pipeline-style layer range, memory accounting, training on the
 * synthetic task (loss falls at least 10x in 200 steps, reproducibly), and AdamW's default
 * learning rate (falls with width and depth; trains a shape that 0.01 diverges on). */
#include <string.h>

#include "mlp.h"
#include "train_ref.h"
#include "test_kernels_util.h"

#define BE SL_BACKEND_CPU

static void check_layout(void)
{
    sl_mlp m;
    ok(sl_mlp_init(&m, BE, 3, 5, 7, 3, SL_ACT_GELU) == 0, "a 3-layer 5-7-7-3 MLP is valid");
    is_int(m.nparams, 7 * 5 + 7 + 7 * 7 + 7 + 3 * 7 + 3, "parameter count");
    int contiguous = 1;
    for (int l = 0; l < m.nlayers; l++) {
        contiguous &= m.b_off[l] == m.w_off[l] + (size_t)m.dims[l + 1] * m.dims[l];
        if (l + 1 < m.nlayers) contiguous &= m.w_off[l + 1] == m.b_off[l] + m.dims[l + 1];
    }
    ok(contiguous && m.w_off[0] == 0, "layer blocks are contiguous: W then b, layer after layer");
    is_int(sl_mlp_range_size(&m, 1, 3), m.nparams - m.w_off[1], "size of the range of layers 1..2");
    ok(m.act[0] == SL_ACT_GELU && m.act[2] == SL_ACT_NONE, "the last layer has no activation");
    ok(sl_mlp_init(&m, BE, 0, 5, 7, 3, SL_ACT_RELU) == -1 && sl_mlp_init(&m, BE, 2, 5, 0, 3, SL_ACT_RELU) == -1,
       "empty shapes are rejected");
    sl_mlp_init(&m, BE, 2, 10, 20, 4, SL_ACT_RELU);
    is_double(sl_mlp_flops_forward(&m, 8), 2.0 * 8 * (10 * 20 + 20 * 4), 0, "forward FLOPs");
    is_double(sl_mlp_flops_backward(&m, 8), 2.0 * 8 * (2 * 10 * 20 + 2 * 20 * 4) - 2.0 * 8 * 10 * 20, 0,
              "backward FLOPs (no dx for the first layer)");
}

static void check_init_slices(void)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 4, 13, 17, 5, SL_ACT_RELU);
    float *whole = t_xmalloc(m.nparams * 4), *parts = t_xmalloc(m.nparams * 4);
    sl_mlp_init_params(&m, 99, 0, m.nparams, whole);
    size_t cuts[] = {0, 1, 100, 250, 251, m.nparams};
    for (int i = 0; i < 5; i++)
        sl_mlp_init_params(&m, 99, cuts[i], cuts[i + 1] - cuts[i], parts + cuts[i]);
    ok(memcmp(whole, parts, m.nparams * 4) == 0,
       "initialising slices (as ZeRO-3 shards do) gives the same bits as the whole");
    int zero_bias = 1;
    double ss = 0;
    for (int l = 0; l < m.nlayers; l++)
        for (int j = 0; j < m.dims[l + 1]; j++) zero_bias &= whole[m.b_off[l] + j] == 0.0f;
    for (size_t i = 0; i < m.b_off[0]; i++) ss += (double)whole[i] * whole[i];
    ok(zero_bias, "biases start at zero");
    double var = ss / m.b_off[0];
    /* He initialisation: variance 2 / 13 for the first layer; 221 samples, 5 sigma ~ 0.074 */
    ok(fabs(var - 2.0 / 13) < 0.075, "first-layer weight variance %.3f ~ 2/fan_in", var);
    free(whole), free(parts);
}

/* L = sum g . act(x): dL/dx = g act'(x), checked by central differences away from the kink */
static void check_activation_fd(void)
{
    const size_t n = 64;
    float *x = t_randn(1, n, 2.0f), *g = t_randn(2, n, 1.0f), *dx = t_xmalloc(n * 4);
    float y[2];
    for (int a = 0; a < SL_NACTS; a++) {
        sl_k_act_backward(BE, (sl_act)a, n, x, g, dx);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            const float h = 1e-2f;
            if (a == SL_ACT_RELU && fabsf(x[i]) < 2 * h) continue;
            float xp[2] = {x[i] + h, x[i] - h};
            sl_k_act_forward(BE, (sl_act)a, 2, xp, y);
            double fd = g[i] * ((double)y[0] - y[1]) / ((double)xp[0] - xp[1]);
            double e = fabs(fd - dx[i]);
            if (e > worst) worst = e;
        }
        /* O(h^2) truncation (GeLU''' <= ~1) and f32 rounding / 2h: ~1e-4 */
        ok(worst < 1e-3, "%s backward matches finite differences (%.2g)", sl_act_name((sl_act)a), worst);
    }
    free(x), free(g), free(dx);
}

/* L = sum dz . linear(x): exact central differences up to rounding (the layer is linear) */
static void check_linear_fd(void)
{
    const int batch = 3, in = 5, out = 4;
    float *W = t_randn(3, out * in, 1), *b = t_randn(4, out, 1), *x = t_randn(5, batch * in, 1);
    float *dz = t_randn(6, batch * out, 1), *z = t_xmalloc(batch * out * 4);
    float *dW = t_xmalloc(out * in * 4), *db = t_xmalloc(out * 4), *dx = t_xmalloc(batch * in * 4);
    sl_linear_backward(BE, batch, in, out, W, x, dz, dW, db, dx);
    float *targets[3] = {W, b, x}, *grads[3] = {dW, db, dx};
    int sizes[3] = {out * in, out, batch * in};
    const char *names[3] = {"W", "b", "x"};
    for (int t = 0; t < 3; t++) {
        double worst = 0;
        for (int i = 0; i < sizes[t]; i++) {
            float v = targets[t][i], h = 0.25f;
            double L[2];
            for (int s = 0; s < 2; s++) {
                targets[t][i] = v + (s ? -h : h);
                sl_linear_forward(BE, batch, in, out, W, b, x, z);
                L[s] = 0;
                for (int j = 0; j < batch * out; j++) L[s] += (double)z[j] * dz[j];
            }
            targets[t][i] = v;
            double e = fabs((L[0] - L[1]) / (2 * h) - grads[t][i]);
            if (e > worst) worst = e;
        }
        /* rounding of z (~1e-7 * |z|, |z| <~ 10) over 2h */
        ok(worst < 1e-4, "linear layer d/d%s matches finite differences (%.2g)", names[t], worst);
    }
    free(W), free(b), free(x), free(dz), free(z), free(dW), free(db), free(dx);
}

static double mlp_loss(const sl_mlp *m, sl_mlp_acts *a, const float *p, const float *target,
                       float *dout)
{
    sl_mlp_forward(m, a, p);
    size_t n = (size_t)a->batch * m->dims[m->nlayers];
    return sl_k_mse(BE, n, a->x[m->nlayers], target, dout, 1.0f / n);
}

static void check_mlp_fd(sl_act act)
{
    sl_mlp m;
    const int batch = 4;
    sl_mlp_init(&m, BE, 3, 5, 7, 3, act);
    float *p = t_xmalloc(m.nparams * 4), *g = t_xmalloc(m.nparams * 4);
    sl_mlp_init_params(&m, 7, 0, m.nparams, p);
    for (size_t i = 0; i < m.nparams; i++) p[i] += 0.1f * sl_rng_normal(8, i); /* nonzero biases */
    sl_mlp_acts a;
    sl_mlp_acts_alloc(&m, batch, &a);
    float *target = t_randn(9, batch * 3, 1), *dout = t_xmalloc(batch * 3 * 4);
    sl_k_rng_normal(BE, 10, 0, batch * 5, a.x[0], 0, 1);
    mlp_loss(&m, &a, p, target, dout);
    sl_mlp_backward(&m, &a, p, g, dout);
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < m.nparams; i++) gmax = fabs(g[i]) > gmax ? fabs(g[i]) : gmax;
    for (size_t i = 0; i < m.nparams; i++) {
        float v = p[i], h = 1e-2f;
        p[i] = v + h;
        double lp = mlp_loss(&m, &a, p, target, NULL);
        p[i] = v - h;
        double lm = mlp_loss(&m, &a, p, target, NULL);
        p[i] = v;
        double fd = (lp - lm) / ((double)(v + h) - (v - h));
        double e = fabs(fd - g[i]) / gmax;
        if (e > worst) worst = e;
    }
    /* relative to the largest gradient: O(h^2) truncation ~1e-4, f32 noise / 2h ~ 1e-5 */
    ok(worst < 2e-3, "whole %s MLP: all %zu parameter gradients match finite differences (%.2g)",
       sl_act_name(act), m.nparams, worst);
    sl_mlp_acts_free(&m, &a);
    free(p), free(g), free(target), free(dout);
}

static void check_accumulation_and_stages(void)
{
    sl_mlp m;
    const int batch = 8, in = 6, out = 3;
    sl_mlp_init(&m, BE, 4, in, 9, out, SL_ACT_GELU);
    float *p = t_xmalloc(m.nparams * 4);
    sl_mlp_init_params(&m, 21, 0, m.nparams, p);
    float *target = t_randn(22, batch * out, 1), *dout = t_xmalloc(batch * out * 4);
    float *g1 = t_xmalloc(m.nparams * 4), *g2 = t_xmalloc(m.nparams * 4), *gh = t_xmalloc(m.nparams * 4);
    sl_mlp_acts a, h;
    sl_mlp_acts_alloc(&m, batch, &a);
    sl_mlp_acts_alloc(&m, batch / 2, &h);
    float *x = t_randn(23, batch * in, 1);
    memcpy(a.x[0], x, sizeof(float) * batch * in);
    double L = mlp_loss(&m, &a, p, target, dout);
    sl_mlp_backward(&m, &a, p, g1, dout);
    memcpy(g2, g1, m.nparams * 4);
    mlp_loss(&m, &a, p, target, dout);
    sl_mlp_backward(&m, &a, p, g2, dout);
    int doubled = 1;
    for (size_t i = 0; i < m.nparams; i++) doubled &= g2[i] == 2 * g1[i];
    ok(doubled, "a second backward accumulates: gradients exactly double");

    /* two micro-batches of 4 with norm 1/8 accumulate the batch-8 gradient */
    double Lh = 0;
    for (int mb = 0; mb < 2; mb++) {
        memcpy(h.x[0], x + (size_t)mb * (batch / 2) * in, sizeof(float) * (batch / 2) * in);
        sl_mlp_forward(&m, &h, p);
        Lh += sl_k_mse(BE, (size_t)(batch / 2) * out, h.x[m.nlayers], target + mb * (batch / 2) * out,
                       dout, 1.0f / (batch * out));
        sl_mlp_backward(&m, &h, p, gh, dout);
    }
    double worst = 0, gmax = 0;
    for (size_t i = 0; i < m.nparams; i++) {
        worst = fmax(worst, fabs(gh[i] - g1[i]));
        gmax = fmax(gmax, fabs(g1[i]));
    }
    /* the same sums in another order: a few f32 roundings of values of order gmax */
    ok(worst <= 1e-5 * gmax, "two accumulated micro-batches give the full-batch gradient (%.2g)", worst / gmax);
    is_double(Lh, L, 1e-6 * L, "and the same loss");

    /* a pipeline stage holding only layers 2..3 in its own buffer computes the same bits */
    size_t off = m.w_off[2], cnt = sl_mlp_range_size(&m, 2, 4);
    float *sp = t_xmalloc(cnt * 4), *sg = t_xmalloc(cnt * 4), *y = t_xmalloc(sizeof(float) * batch * out);
    memcpy(sp, p + off, cnt * 4);
    float *zb = t_xmalloc(sizeof(float) * batch * 9), *xb = t_xmalloc(sizeof(float) * batch * 9);
    sl_mlp_layer_forward(&m, 2, batch, sp + (m.w_off[2] - off), a.x[2], zb, xb);
    sl_mlp_layer_forward(&m, 3, batch, sp + (m.w_off[3] - off), xb, y, y);
    ok(memcmp(y, a.x[4], sizeof(float) * batch * out) == 0,
       "layers run one at a time from a stage-local parameter slice match the whole forward");
    /* and its backward gives the same gradient slice */
    float *dyb = t_xmalloc(sizeof(float) * batch * 9);
    mlp_loss(&m, &a, p, target, dout);
    sl_mlp_layer_backward(&m, 3, batch, sp + (m.w_off[3] - off), xb, NULL, dout, sg + (m.w_off[3] - off), dyb);
    sl_mlp_layer_backward(&m, 2, batch, sp, a.x[2], zb, dyb, sg, NULL);
    ok(memcmp(sg, g1 + off, cnt * 4) == 0, "and the stage's backward gives the same gradient bits");

    sl_mlp_acts_free(&m, &a);
    sl_mlp_acts_free(&m, &h);
    free(p), free(target), free(dout), free(g1), free(g2), free(gh), free(x), free(sp), free(sg),
        free(y), free(zb), free(xb), free(dyb);
}

static void check_memory(void)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 3, 16, 32, 4, SL_ACT_RELU);
    sl_optim o = {.kind = SL_OPTIM_ADAMW};
    sl_mlp_bytes b = sl_mlp_memory(&m, 10, &o);
    size_t before = sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV);
    sl_mlp_acts a;
    sl_mlp_acts_alloc(&m, 10, &a);
    size_t held = sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV) - before;
    sl_mlp_acts_free(&m, &a);
    is_int(held, b.activ, "the activation store holds what sl_mlp_memory predicts");
    /* x: 16+32+32+4, z: 32+32 (the last layer has none), gradient buffers 2*32 */
    is_int(b.activ, 10 * 4 * (16 + 32 + 32 + 4 + 32 + 32 + 2 * 32), "activation bytes by hand");
    is_int(b.optim, 2 * b.params, "AdamW keeps two floats per parameter");
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV), before, "and frees them all");
    sl_task t;
    sl_task_init(&t, BE, 16, 4, 1, 10);
    is_int(sl_mem_current(SL_MEM_HOST, SL_MEM_ACTIV), before,
           "the synthetic task's teacher holds no activation bytes (they count as data)");
    ok(sl_mem_current(SL_MEM_HOST, SL_MEM_DATA) > 0, "but data bytes");
    sl_task_free(&t);
}

/* Trains a student on the synthetic task (the serial training loop of train_ref.h); returns
 * the loss curve in curve[steps]. */
static void train(uint64_t seed, int steps, double *curve)
{
    const int in = 32, out = 8, batch = 32;
    sl_mlp m;
    sl_mlp_init(&m, BE, 3, in, 64, out, SL_ACT_RELU);
    float *p = sl_k_malloc(BE, SL_MEM_PARAMS, m.nparams * 4);
    sl_optim o = {.kind = SL_OPTIM_ADAMW,
                  .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0}};
    sl_task task;
    sl_task_init(&task, BE, in, out, seed, batch);
    sl_train_serial(&m, &task, &o, batch, steps, seed, p, curve);
    sl_task_free(&task);
    sl_k_free(BE, p);
}

static void check_training(void)
{
    enum { STEPS = 200 };
    static double c1[STEPS], c2[STEPS], c3[STEPS];
    train(1234, STEPS, c1);
    train(1234, STEPS, c2);
    train(4321, STEPS, c3);
    /* mean of the first and last 10 steps, so that one noisy batch decides nothing */
    double first = 0, last = 0;
    for (int s = 0; s < 10; s++) first += c1[s] / 10, last += c1[STEPS - 10 + s] / 10;
    for (int s = 0; s < STEPS; s += 20) diag("step %3d  loss %.5f", s, c1[s]);
    diag("step %3d  loss %.5f", STEPS - 1, c1[STEPS - 1]);
    ok(last * 10 <= first, "200 AdamW steps on the synthetic task lower the loss %.1fx (>= 10x): %.4f -> %.4f",
       first / last, first, last);
    ok(memcmp(c1, c2, sizeof c1) == 0, "the same seed reproduces the loss curve bit for bit");
    ok(memcmp(c1, c3, sizeof c1) != 0, "another seed gives another run");
}

/* The largest of the first `steps` losses of serial AdamW training at lr, over the first. */
static double adamw_rise(const sl_mlp *m, double lr, int steps)
{
    const int batch = 32;
    float *p = sl_k_malloc(BE, SL_MEM_PARAMS, m->nparams * 4);
    sl_optim o = {.kind = SL_OPTIM_ADAMW,
                  .adamw = {.lr = (float)lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.01f}};
    sl_task task;
    sl_task_init(&task, BE, m->dims[0], m->dims[m->nlayers], 1234, batch);
    double curve[8], peak = 0;
    sl_train_serial(m, &task, &o, batch, steps, 1234, p, curve);
    for (int s = 0; s < steps; s++) peak = fmax(peak, curve[s]);
    sl_task_free(&task);
    sl_k_free(BE, p);
    return peak / curve[0];
}

/* AdamW's default rate: 2 sqrt(2) / sum_l sqrt(in_l out_l), at most 0.01; SGD's 0.01. At 3 x 512
 * a fixed 0.01 makes the loss rise more than tenfold in 3 steps (the training layer's check
 * calls that diverged); the default does not. */
static void check_default_lr(void)
{
    sl_mlp m;
    sl_mlp_init(&m, BE, 4, 256, 1024, 64, SL_ACT_GELU); /* zero's default model */
    const double want = 2 * sqrt(2.0) / (sqrt(256.0 * 1024) + 2 * 1024 + sqrt(1024.0 * 64));
    is_double(sl_optim_default_lr(&m, SL_OPTIM_ADAMW), want, 1e-15, "AdamW at 4 x 1024: 2 sqrt(2) / 2816 = %.4g",
              want);
    is_double(sl_optim_default_lr(&m, SL_OPTIM_SGD), 0.01, 0, "SGD: 0.01 whatever the shape");
    sl_mlp_init(&m, BE, 32, 256, 512, 64, SL_ACT_GELU);
    const double deep = sl_optim_default_lr(&m, SL_OPTIM_ADAMW);
    ok(deep > 1.7e-4 && deep < 1.8e-4, "AdamW at 32 x 512: %.3g, 57x below 0.01", deep);
    sl_mlp_init(&m, BE, 3, 12, 48, 5, SL_ACT_GELU);
    is_double(sl_optim_default_lr(&m, SL_OPTIM_ADAMW), 0.01, 0, "a small model: capped at 0.01");
    sl_mlp_init(&m, BE, 3, 64, 512, 16, SL_ACT_GELU);
    const double lr = sl_optim_default_lr(&m, SL_OPTIM_ADAMW), fixed = adamw_rise(&m, 0.01, 3),
                 dflt = adamw_rise(&m, lr, 3);
    ok(fixed > 10, "3 x 512, AdamW at 0.01: the loss rises %.1fx in 3 steps", fixed);
    ok(dflt < 10, "... at the default %.3g: %.1fx", lr, dflt);
}

static void check_task_slices(void)
{
    sl_task t;
    const int in = 7, out = 3;
    sl_task_init(&t, BE, in, out, 5, 16);
    float x1[16 * 7], y1[16 * 3], x2[16 * 7], y2[16 * 3];
    sl_task_batch(&t, 100, 16, x1, y1);
    sl_task_batch(&t, 100, 5, x2, y2);
    sl_task_batch(&t, 105, 11, x2 + 5 * in, y2 + 5 * out);
    ok(memcmp(x1, x2, sizeof x1) == 0, "task inputs: samples generated in pieces equal the whole batch");
    double d = 0;
    for (int i = 0; i < 16 * out; i++) d = fmax(d, fabs(y1[i] - y2[i]));
    /* the teacher's GEMM may block a batch of 5 differently from one of 16: rounding only */
    ok(d < 1e-5, "and so do targets (%.2g)", d);
    sl_task_free(&t);
}

int main(void)
{
    T_BE = BE;
    check_layout();
    check_init_slices();
    check_activation_fd();
    check_linear_fd();
    check_mlp_fd(SL_ACT_GELU);
    check_mlp_fd(SL_ACT_NONE);
    check_accumulation_and_stages();
    check_memory();
    check_task_slices();
    check_training();
    check_default_lr();
    done_testing();
    return exit_status();
}
