/* test_kernels_checks.h — every kernel against a naive double-precision reference, on shapes
 * that include 1, odd and prime sizes. Runs on the backend in T_BE (test_kernels_util.h).
 *
 * Tolerances follow the standard rounding-error bounds for f32 (unit roundoff u = 2^-24):
 * a dot product of length k is within (k + 2) u sum |a||b| of the exact value (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 3.1), plus one rounding for each of
 * alpha, beta and a 16-bit output; element-wise formulas are within a few ulp. */
#ifndef TEST_KERNELS_CHECKS_H
#define TEST_KERNELS_CHECKS_H

#include "test_kernels_util.h"

/* GEMM ------------------------------------------------------------------------------------ */

/* One GEMM of shape (m, n, k) with transposes, padding of the leading dimensions, alpha, beta.
 * Returns the worst error / bound ratio (<= 1 passes). */
static double gemm_case(sl_dtype ab, sl_dtype cdt, int m, int n, int k, int ta, int tb, int pad,
                        float alpha, float beta, uint64_t seed)
{
    int ar = ta ? k : m, ac = (ta ? m : k), br = tb ? n : k, bc = (tb ? k : n);
    int lda = (ac ? ac : 1) + pad, ldb = (bc ? bc : 1) + pad, ldc = n + pad; /* BLAS: ld >= 1 */
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)m * ldc;
    float *a = t_randn(seed, na, 1.0f), *b = t_randn(seed + 1, nb, 1.0f);
    float *c = t_randn(seed + 2, nc, 1.0f);
    for (size_t i = 0; i < na; i++) a[i] = sl_round_to(ab, a[i]);
    for (size_t i = 0; i < nb; i++) b[i] = sl_round_to(ab, b[i]);
    for (size_t i = 0; i < nc; i++) c[i] = sl_round_to(cdt, c[i]);
    /* beta == 0 must not read C: poison it */
    if (beta == 0.0f)
        for (size_t i = 0; i < nc; i++) c[i] = NAN;
    void *ah = t_pack(ab, a, na), *bh = t_pack(ab, b, nb), *ch = t_pack(cdt, c, nc);
    size_t es = sl_dtype_size(ab), ecs = sl_dtype_size(cdt);
    void *ad = t_up(ah, na * es), *bd = t_up(bh, nb * es), *cd = t_up(ch, nc * ecs);
    sl_k_gemm(T_BE, ta, tb, m, n, k, alpha, ad, lda, bd, ldb, beta, cd, ldc, ab, cdt);
    t_down(ch, cd, nc * ecs);
    double out_u = cdt == SL_F16 ? 0x1p-11 : cdt == SL_BF16 ? 0x1p-8 : 0.0;
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double sa, s = sl_ref_gemm_at(ta, tb, k, a, lda, b, ldb, i, j, &sa);
            double c0 = beta == 0.0f ? 0.0 : c[(size_t)i * ldc + j];
            double want = alpha * s + beta * c0;
            double bound = (k + 3) * U32 * (fabs(alpha) * sa + fabs(beta * c0)) +
                           out_u * fabs(want) * 1.001 + 1e-30; /* 1.001: the rounding is of the f32 result, not of want */
            double got = t_load(cdt, ch, (size_t)i * ldc + j);
            double r = fabs(got - want) / bound;
            if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
        }
    /* the padding columns of C must be untouched */
    for (int i = 0; i < m; i++)
        for (int j = n; j < ldc; j++) {
            float got = t_load(cdt, ch, (size_t)i * ldc + j), was = c[(size_t)i * ldc + j];
            if (!(got == was || (isnan(got) && isnan(was)))) worst = INFINITY;
        }
    t_free(ad), t_free(bd), t_free(cd);
    free(a), free(b), free(c), free(ah), free(bh), free(ch);
    return worst;
}

static void check_gemm(void)
{
    static const int shapes[][3] = {{1, 1, 1},   {1, 1, 7},    {2, 3, 5},   {7, 1, 13},
                                    {17, 19, 23}, {31, 8, 1},  {64, 64, 64}, {3, 97, 41},
                                    {128, 33, 67}, {5, 4, 0}};
    static const sl_dtype types[][2] = {
        {SL_F32, SL_F32}, {SL_F16, SL_F32}, {SL_BF16, SL_F32}, {SL_F16, SL_F16}, {SL_BF16, SL_BF16}};
    int nshapes = sizeof shapes / sizeof shapes[0];
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < nshapes; s++) {
            double worst = 0.0;
            for (int tr = 0; tr < 4; tr++) {
                float alpha = tr & 1 ? -0.75f : 1.0f, beta = s & 1 ? 0.5f : 0.0f;
                double r = gemm_case(types[t][0], types[t][1], shapes[s][0], shapes[s][1],
                                     shapes[s][2], tr & 1, tr >> 1, (s + tr) % 3, alpha, beta,
                                     1000 + 10 * s + tr);
                if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
            }
            ok(worst <= 1.0, "gemm A,B %s C %s m=%d n=%d k=%d, 4 transposes: error/bound %.3g",
               sl_dtype_name(types[t][0]), sl_dtype_name(types[t][1]), shapes[s][0],
               shapes[s][1], shapes[s][2], worst);
        }
}

/* Bias and activations ------------------------------------------------------------------- */

static void check_bias(void)
{
    static const int shapes[][2] = {{1, 1}, {1, 13}, {7, 1}, {31, 17}, {128, 257}};
    for (int s = 0; s < 5; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *y = t_randn(1, n, 1), *b = t_randn(2, cols, 1), *db = t_randn(3, cols, 1);
        double *want = t_xmalloc(n * sizeof *want), *wantb = t_xmalloc(cols * sizeof *wantb);
        for (size_t i = 0; i < n; i++) want[i] = (double)y[i] + b[i % cols];
        /* dbias += column sums of y; bound (rows + 1) u sum |.| */
        double worst_tol = 0;
        for (int j = 0; j < cols; j++) {
            double s2 = db[j], sa = fabs(db[j]);
            for (int i = 0; i < rows; i++) s2 += y[(size_t)i * cols + j], sa += fabs(y[(size_t)i * cols + j]);
            wantb[j] = s2;
            double tol = (rows + 1) * U32 * sa;
            if (tol > worst_tol) worst_tol = tol;
        }
        float *yd = t_up(y, n * 4), *bd = t_up(b, cols * 4), *dbd = t_up(db, cols * 4);
        sl_k_bias_grad(T_BE, rows, cols, yd, dbd); /* before the add changes y */
        sl_k_bias_add(T_BE, rows, cols, yd, bd);
        t_down(y, yd, n * 4);
        t_down(db, dbd, cols * 4);
        /* one rounding of the add */
        ok(t_ratio(y, want, n, 0, U32) <= 1.0, "bias add %dx%d within 1 rounding", rows, cols);
        ok(t_ratio(db, wantb, cols, worst_tol, 0) <= 1.0, "bias grad %dx%d accumulates column sums",
           rows, cols);
        t_free(yd), t_free(bd), t_free(dbd);
        free(y), free(b), free(db), free(want), free(wantb);
    }
}

static void check_activations(void)
{
    /* the reference derivative itself, against a central difference in double */
    double worst_fd = 0;
    for (double x = -6.0; x <= 6.0; x += 0.37) {
        double h = 1e-5, fd = (sl_ref_gelu(x + h) - sl_ref_gelu(x - h)) / (2 * h);
        double e = fabs(fd - sl_ref_gelu_grad(x));
        if (e > worst_fd) worst_fd = e;
    }
    /* central difference error O(h^2 f''') ~ 1e-10, plus cancellation ~ 1e-16 / h */
    ok(worst_fd < 1e-8, "gelu reference derivative matches central differences (%.2g)", worst_fd);

    const size_t sizes[] = {1, 2, 7, 1031, 100003};
    for (int s = 0; s < 5; s++) {
        size_t n = sizes[s];
        float *x = t_randn(40 + s, n, 3.0f), *dy = t_randn(50 + s, n, 1.0f);
        x[0] = 0.0f; /* relu'(0) is taken as 0 */
        float *y = t_xmalloc(n * 4), *dx = t_xmalloc(n * 4);
        double *want = t_xmalloc(n * sizeof *want), *wantd = t_xmalloc(n * sizeof *wantd);
        float *xd = t_up(x, n * 4), *dyd = t_up(dy, n * 4), *yd = t_up(y, n * 4);
        for (int a = 0; a < SL_NACTS; a++) {
            for (size_t i = 0; i < n; i++) {
                want[i] = sl_ref_act((sl_act)a, x[i]);
                wantd[i] = dy[i] * sl_ref_act_grad((sl_act)a, x[i]);
            }
            sl_k_act_forward(T_BE, (sl_act)a, n, xd, yd);
            t_down(y, yd, n * 4);
            sl_k_act_backward(T_BE, (sl_act)a, n, xd, dyd, yd);
            t_down(dx, yd, n * 4);
            /* relu and none are exact; gelu is the same formula in f32: tanhf is within a few
             * ulp and |x| <= ~15 here, so 1e-5 absolute plus 1e-5 relative holds */
            double at = a == SL_ACT_GELU ? 1e-5 : 0, rt = a == SL_ACT_GELU ? 1e-5 : U32;
            ok(t_ratio(y, want, n, at, rt) <= 1.0, "%s forward n=%zu", sl_act_name((sl_act)a), n);
            ok(t_ratio(dx, wantd, n, at, rt) <= 1.0, "%s backward n=%zu", sl_act_name((sl_act)a), n);
        }
        /* in place: y = act(y) and dx written over dy */
        sl_k_memcpy(T_BE, yd, xd, n * 4, SL_K_D2D);
        sl_k_act_forward(T_BE, SL_ACT_GELU, n, yd, yd);
        t_down(y, yd, n * 4);
        for (size_t i = 0; i < n; i++) want[i] = sl_ref_gelu(x[i]);
        ok(t_ratio(y, want, n, 1e-5, 1e-5) <= 1.0, "gelu forward in place n=%zu", n);
        t_free(xd), t_free(dyd), t_free(yd);
        free(x), free(dy), free(y), free(dx), free(want), free(wantd);
    }
}

/* Losses -------------------------------------------------------------------------------- */

static void check_mse(void)
{
    const size_t sizes[] = {1, 3, 1000, 65537};
    for (int s = 0; s < 4; s++) {
        size_t n = sizes[s];
        float *y = t_randn(60 + s, n, 1), *t = t_randn(70 + s, n, 1), *dy = t_xmalloc(n * 4);
        double *wantd = t_xmalloc(n * sizeof *wantd);
        float norm = 1.0f / (float)n;
        double want = sl_ref_mse(n, y, t, norm, wantd), sa = want / norm;
        float *yd = t_up(y, n * 4), *td = t_up(t, n * 4), *dyd = t_up(dy, n * 4);
        double got = sl_k_mse(T_BE, n, yd, td, dyd, norm);
        t_down(dy, dyd, n * 4);
        /* the loss: differences rounded once in f32, squares and sums in double */
        is_double(got, want, 3 * U32 * sa * norm + 1e-300, "mse loss n=%zu", n);
        ok(t_ratio(dy, wantd, n, 0, 3 * U32) <= 1.0, "mse gradient n=%zu", n);
        t_free(yd), t_free(td), t_free(dyd);
        free(y), free(t), free(dy), free(wantd);
    }
}

static void check_xent(void)
{
    static const int shapes[][2] = {{1, 1}, {1, 10}, {13, 7}, {64, 1000}, {300, 3}};
    for (int s = 0; s < 5; s++) {
        int rows = shapes[s][0], classes = shapes[s][1];
        size_t n = (size_t)rows * classes;
        float *z = t_randn(80 + s, n, 4.0f), *dz = t_xmalloc(n * 4);
        if (s == 2)
            for (size_t i = 0; i < n; i++) z[i] += 1000.0f; /* needs the max shift */
        int32_t *lab = t_xmalloc(rows * sizeof *lab);
        for (int r = 0; r < rows; r++) lab[r] = (int32_t)(sl_rng_u64(90 + s, r) % classes);
        double want = 0, *wantd = t_xmalloc(n * sizeof *wantd);
        float norm = 1.0f / rows;
        for (int r = 0; r < rows; r++)
            want += sl_ref_softmax_xent_row(classes, z + (size_t)r * classes, lab[r], norm,
                                            wantd + (size_t)r * classes);
        want *= norm;
        float *zd = t_up(z, n * 4), *dzd = t_up(dz, n * 4);
        int32_t *ld = t_up(lab, rows * sizeof *lab);
        double got = sl_k_softmax_xent(T_BE, rows, classes, zd, ld, dzd, norm);
        t_down(dz, dzd, n * 4);
        /* The cpu kernel takes exp in f32 (cpu/loss.c): each term within 4 ulp (2^-21, relative;
         * t/unit/test_vmath.c measures 2.5), and z - max z rounded to f32 first, which moves the
         * sum of the terms by at most ln(classes) 2^-24 of itself; log of the sum moves by as
         * much, absolutely. The rest is in double: the summation order differs. */
        double tol = (0x1p-21 + (log(classes) + 1) * 0x1p-24) + 1e-12 * (1 + fabs(want)) * classes;
        is_double(got, want, tol, "softmax xent loss %dx%d", rows, classes);
        /* probabilities rounded to f32 once, times norm: 2 roundings, relative to the
         * largest term (1 * norm) */
        ok(t_ratio(dz, wantd, n, 4 * U32 * norm, 0) <= 1.0, "softmax xent gradient %dx%d", rows,
           classes);
        /* finite differences of the loss itself, on a few logits */
        if (s == 3) {
            double worst = 0;
            for (int e = 0; e < 20; e++) {
                size_t i = sl_rng_u64(7, e) % n;
                float zi = z[i], h = 1e-2f;
                float zp = zi + h, zm = zi - h;
                sl_k_memcpy(T_BE, zd + i, &zp, 4, SL_K_H2D);
                double lp = sl_k_softmax_xent(T_BE, rows, classes, zd, ld, NULL, norm);
                sl_k_memcpy(T_BE, zd + i, &zm, 4, SL_K_H2D);
                double lm = sl_k_softmax_xent(T_BE, rows, classes, zd, ld, NULL, norm);
                sl_k_memcpy(T_BE, zd + i, &zi, 4, SL_K_H2D);
                double fd = (lp - lm) / ((double)zp - zm);
                double err = fabs(fd - dz[i]);
                if (err > worst) worst = err;
            }
            /* O(h^2) truncation with second derivative <= norm/4, third <= norm: ~ 1e-4 norm */
            ok(worst < 1e-3 * norm, "softmax xent gradient matches finite differences (%.2g)", worst);
        }
        t_free(zd), t_free(dzd), t_free(ld);
        free(z), free(dz), free(lab), free(wantd);
    }
}

/* Optimizers ----------------------------------------------------------------------------- */

static void check_optim(void)
{
    const size_t n = 1037;
    float *w0 = t_randn(100, n, 1), *g = t_randn(101, n, 1);
    float *w = t_xmalloc(n * 4), *w2 = t_xmalloc(n * 4);
    double *rw = t_xmalloc(n * sizeof *rw), *rm = t_xmalloc(n * sizeof *rm),
           *rv = t_xmalloc(n * sizeof *rv);
    float *zeros = t_xmalloc(n * 4);

    /* SGD with momentum and weight decay, 3 steps, against double */
    sl_sgd sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
    float *wd = t_up(w0, n * 4), *gd = t_up(g, n * 4), *vd = t_up(zeros, n * 4);
    for (size_t i = 0; i < n; i++) rw[i] = w0[i], rv[i] = 0;
    for (int step = 0; step < 3; step++) {
        sl_k_sgd_step(T_BE, &sgd, n, wd, gd, vd);
        sl_ref_sgd_step(&sgd, n, rw, g, rv);
    }
    t_down(w, wd, n * 4);
    /* a handful of roundings per step on values of order 1 */
    ok(t_ratio(w, rw, n, 1e-5, 1e-5) <= 1.0, "sgd momentum 3 steps vs double");

    /* AdamW, 3 steps */
    sl_adamw ad = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
    float *md = t_up(zeros, n * 4), *v2d = t_up(zeros, n * 4);
    sl_k_memcpy(T_BE, wd, w0, n * 4, SL_K_H2D);
    for (size_t i = 0; i < n; i++) rw[i] = w0[i], rm[i] = rv[i] = 0;
    for (int step = 1; step <= 3; step++) {
        ad.step = step;
        sl_k_adamw_step(T_BE, &ad, n, wd, gd, md, v2d);
        sl_ref_adamw_step(&ad, n, rw, g, rm, rv);
    }
    t_down(w, wd, n * 4);
    /* each step moves w by ~lr; relative errors ~1e-6 of the step: 1e-6 absolute is ample */
    ok(t_ratio(w, rw, n, 1e-6, 1e-6) <= 1.0, "adamw 3 steps vs double");

    /* a shard updated on its own gives the same bits as the whole tensor (ZeRO relies on it) */
    float *md2 = t_up(zeros, n * 4), *vd2 = t_up(zeros, n * 4), *wd2 = t_up(w0, n * 4);
    sl_k_memcpy(T_BE, wd, w0, n * 4, SL_K_H2D);
    sl_k_memcpy(T_BE, md, zeros, n * 4, SL_K_H2D);
    sl_k_memcpy(T_BE, v2d, zeros, n * 4, SL_K_H2D);
    ad.step = 1;
    sl_k_adamw_step(T_BE, &ad, n, wd, gd, md, v2d);
    size_t cut = 400;
    sl_k_adamw_step(T_BE, &ad, cut, wd2, gd, md2, vd2);
    sl_k_adamw_step(T_BE, &ad, n - cut, wd2 + cut, gd + cut, md2 + cut, vd2 + cut);
    t_down(w, wd, n * 4);
    t_down(w2, wd2, n * 4);
    ok(memcmp(w, w2, n * 4) == 0, "adamw on two shards equals adamw on the whole tensor");

    t_free(wd), t_free(gd), t_free(vd), t_free(md), t_free(v2d), t_free(md2), t_free(vd2),
        t_free(wd2);
    free(w0), free(g), free(w), free(w2), free(rw), free(rm), free(rv), free(zeros);
}

/* Element-wise ---------------------------------------------------------------------------- */

static void check_elementwise(void)
{
    const size_t n = 100003;
    static const sl_dtype types[] = {SL_F32, SL_F64, SL_F16, SL_BF16};
    for (int t = 0; t < 4; t++) {
        sl_dtype dt = types[t];
        size_t es = sl_dtype_size(dt);
        /* integer-valued data in [-64, 64]: sums exact in every dtype (bf16 has 8 bits) */
        double *xv = t_xmalloc(n * 8), *yv = t_xmalloc(n * 8);
        void *x = t_xmalloc(n * es), *y = t_xmalloc(n * es), *out = t_xmalloc(n * es);
        for (size_t i = 0; i < n; i++) {
            xv[i] = (double)(int)(sl_rng_u64(5, i) % 65) - 32;
            yv[i] = (double)(int)(sl_rng_u64(6, i) % 65) - 32;
            switch (dt) {
            case SL_F32: ((float *)x)[i] = (float)xv[i], ((float *)y)[i] = (float)yv[i]; break;
            case SL_F64: ((double *)x)[i] = xv[i], ((double *)y)[i] = yv[i]; break;
            case SL_F16: ((uint16_t *)x)[i] = sl_f32_to_f16((float)xv[i]), ((uint16_t *)y)[i] = sl_f32_to_f16((float)yv[i]); break;
            default: ((uint16_t *)x)[i] = sl_f32_to_bf16((float)xv[i]), ((uint16_t *)y)[i] = sl_f32_to_bf16((float)yv[i]); break;
            }
        }
#define ELEM(p, i) (dt == SL_F64 ? ((double *)(p))[i] : (double)t_load(dt, p, i))
        void *xd = t_up(x, n * es), *yd = t_up(y, n * es);
        sl_k_add(T_BE, dt, n, xd, yd);
        t_down(out, yd, n * es);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += ELEM(out, i) != xv[i] + yv[i];
        ok(bad == 0, "add %s exact on integer data (%zu wrong)", sl_dtype_name(dt), bad);
        sl_k_axpby(T_BE, dt, n, 2.0, xd, -0.5, yd); /* y = 2x - (x + y)/2: halves are exact */
        t_down(out, yd, n * es);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += ELEM(out, i) != 2 * xv[i] - 0.5 * (xv[i] + yv[i]);
        ok(bad == 0, "axpby %s exact on integer data (%zu wrong)", sl_dtype_name(dt), bad);
        sl_k_scale(T_BE, dt, n, xd, -4.0);
        t_down(out, xd, n * es);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += ELEM(out, i) != -4 * xv[i];
        ok(bad == 0, "scale %s exact by a power of two (%zu wrong)", sl_dtype_name(dt), bad);
        sl_k_fill(T_BE, dt, n, xd, NAN);
        sl_k_fill(T_BE, dt, n, yd, 3.0);
        sl_k_axpby(T_BE, dt, n, 0.0, xd, 1.0, yd); /* x is NaN and must not be read */
        t_down(out, yd, n * es);
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += ELEM(out, i) != 3.0;
        ok(bad == 0, "fill %s, and axpby with alpha 0 does not read x (%zu wrong)",
           sl_dtype_name(dt), bad);
#undef ELEM
        t_free(xd), t_free(yd);
        free(xv), free(yv), free(x), free(y), free(out);
    }

    /* loss-scale check: counts what scaling made (or found) non-finite */
    const size_t m = 5003;
    float *v = t_randn(9, m, 1), *got = t_xmalloc(m * 4);
    v[10] = 3e38f, v[20] = -2e38f, v[30] = INFINITY, v[40] = NAN;
    float *vd = t_up(v, m * 4);
    size_t nb = sl_k_scale_check(T_BE, m, vd, 2.0f);
    t_down(got, vd, m * 4);
    int exact = 1;
    for (size_t i = 0; i < m; i++)
        if (i % 10 != 0 || i > 40 || i == 0) exact &= got[i] == v[i] * 2.0f;
    is_int(nb, 4, "scale_check counts 2 overflows, an inf and a NaN");
    ok(exact, "scale_check scales the finite values exactly (power of two)");
    t_free(vd);
    free(v), free(got);
}

/* Casts (exhaustive checks in test_casts) -------------------------------------------------- */

static void check_cast_counts(void)
{
    float v[8] = {1.0f, 1e-9f, -2e-8f, 7e4f, -1e5f, 0.0f, INFINITY, 3.4e38f};
    uint16_t h[8];
    float back[8];
    float *vd = t_up(v, sizeof v);
    uint16_t *hd = t_up(h, sizeof h);
    float *bd = t_up(back, sizeof back);
    sl_cast_count c = {0};
    sl_k_cast(T_BE, 8, vd, SL_F32, hd, SL_F16, &c);
    /* f16: 1e-9 and -2e-8 are below half the smallest subnormal (2^-25 = 2.98e-8) */
    is_int(c.underflow, 2, "f32->f16 counts 2 underflows (1e-9, -2e-8)");
    is_int(c.overflow, 3, "f32->f16 counts 3 overflows (7e4, -1e5, 3.4e38; inf is not one)");
    sl_k_cast(T_BE, 8, hd, SL_F16, bd, SL_F32, &c);
    t_down(back, bd, sizeof back);
    ok(back[0] == 1.0f && back[5] == 0.0f && isinf(back[3]) && back[3] > 0 && isinf(back[4]) &&
           back[4] < 0 && back[1] == 0.0f,
       "f16 values come back as expected");
    is_int(c.underflow + c.overflow, 5, "widening loses nothing");
    sl_cast_count cb = {0};
    sl_k_cast(T_BE, 8, vd, SL_F32, hd, SL_BF16, &cb);
    is_int(cb.underflow, 0, "f32->bf16: no underflow at 1e-9 (bf16 has the f32 range)");
    is_int(cb.overflow, 1, "f32->bf16: 3.4e38 rounds up to inf");
    t_free(vd), t_free(hd), t_free(bd);
}

/* Convolution -------------------------------------------------------------------------------- */

static void check_conv(void)
{
    /* n c h w  k r s  pad_h pad_w stride_h stride_w dil_h dil_w (0: not set, read as 1) */
    static const int shapes[][13] = {
        {1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0},  {2, 3, 7, 5, 4, 3, 3, 1, 1, 1, 1, 0, 0},
        {1, 2, 11, 13, 3, 3, 5, 2, 1, 2, 3, 0, 0}, {3, 5, 8, 8, 7, 1, 1, 0, 0, 1, 1, 0, 0},
        {1, 4, 9, 9, 2, 5, 5, 0, 0, 2, 2, 0, 0},  {2, 1, 5, 17, 3, 2, 3, 1, 0, 1, 2, 0, 0},
        {1, 3, 16, 16, 8, 3, 3, 1, 1, 1, 1, 0, 0}, {2, 3, 9, 10, 4, 3, 3, 2, 2, 1, 1, 2, 2},
        {1, 2, 12, 11, 3, 5, 3, 4, 1, 1, 2, 2, 1}, {2, 2, 13, 9, 2, 3, 3, 0, 3, 2, 1, 3, 3}};
    enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
    for (int s = 0; s < NSHAPES; s++) {
        const int *d = shapes[s];
        sl_conv2d cv = {.n = d[0], .c = d[1], .h = d[2], .w = d[3], .k = d[4], .r = d[5],
                        .s = d[6], .pad_h = d[7], .pad_w = d[8], .stride_h = d[9], .stride_w = d[10],
                        .dil_h = d[11], .dil_w = d[12]};
        if (sl_conv2d_init(&cv) != 0) {
            ok(0, "conv shape %d valid", s);
            continue;
        }
        size_t nx = (size_t)cv.n * cv.c * cv.h * cv.w, nw = (size_t)cv.k * cv.c * cv.r * cv.s,
               ny = (size_t)cv.n * cv.k * cv.p * cv.q;
        float *x = t_randn(200 + s, nx, 1), *w = t_randn(210 + s, nw, 1), *dy = t_randn(220 + s, ny, 1);
        float *dw0 = t_randn(230 + s, nw, 1);
        float *y = t_xmalloc(ny * 4), *dx = t_xmalloc(nx * 4), *dw = t_xmalloc(nw * 4);
        double *ry = t_xmalloc(ny * 8), *rdx = t_xmalloc(nx * 8), *rdw = t_xmalloc(nw * 8);
        double *ay = t_xmalloc(ny * 8), *adx = t_xmalloc(nx * 8), *adw = t_xmalloc(nw * 8);
        /* direct convolution in double, and its adjoints, with sums of |terms| for bounds */
        for (size_t i = 0; i < ny; i++) ry[i] = sl_ref_conv2d_forward_at(&cv, x, w, i, &ay[i], NULL);
        for (size_t i = 0; i < nx; i++) rdx[i] = sl_ref_conv2d_backward_data_at(&cv, dy, w, i, &adx[i], NULL);
        for (size_t i = 0; i < nw; i++) {
            rdw[i] = dw0[i] + sl_ref_conv2d_backward_filter_at(&cv, x, dy, i, &adw[i], NULL);
            adw[i] += fabs(dw0[i]);
        }
        float *xd = t_up(x, nx * 4), *wd = t_up(w, nw * 4), *dyd = t_up(dy, ny * 4);
        float *yd = t_up(y, ny * 4), *dxd = t_up(dx, nx * 4), *dwd = t_up(dw0, nw * 4);
        /* odd shapes run on the caller's workspace (what a timed loop does), even ones let
         * each call allocate its own: both must give the same sums */
        if (s % 2) cv.work = sl_k_malloc(T_BE, SL_MEM_OTHER, sl_conv2d_work_bytes(&cv));
        sl_k_conv2d_forward(T_BE, &cv, xd, wd, yd);
        sl_k_conv2d_backward_data(T_BE, &cv, dyd, wd, dxd);
        sl_k_conv2d_backward_filter(T_BE, &cv, xd, dyd, dwd);
        t_down(y, yd, ny * 4), t_down(dx, dxd, nx * 4), t_down(dw, dwd, nw * 4);
        /* each output is a dot product: error <= (terms + 2) u sum |terms| (col2im adds the
         * GEMM partial sums of up to r*s taps, one more rounding each) */
        double ky = cv.c * cv.r * cv.s + 2, kx = (double)cv.k * cv.r * cv.s + 2,
               kw = (double)cv.n * cv.p * cv.q + 2;
        double wy = 0, wx = 0, ww = 0;
        for (size_t i = 0; i < ny; i++) { double r = fabs(y[i] - ry[i]) / (ky * U32 * ay[i] + 1e-30); if (!(r <= wy)) wy = isnan(r) ? INFINITY : r; }
        for (size_t i = 0; i < nx; i++) { double r = fabs(dx[i] - rdx[i]) / (kx * U32 * adx[i] + 1e-30); if (!(r <= wx)) wx = isnan(r) ? INFINITY : r; }
        for (size_t i = 0; i < nw; i++) { double r = fabs(dw[i] - rdw[i]) / (kw * U32 * adw[i] + 1e-30); if (!(r <= ww)) ww = isnan(r) ? INFINITY : r; }
        ok(wy <= 1, "conv forward %dx%dx%dx%d k%d %dx%d pad %d,%d stride %d,%d dilation %d,%d%s (%.2g)",
           cv.n, cv.c, cv.h, cv.w, cv.k, cv.r, cv.s, cv.pad_h, cv.pad_w, cv.stride_h, cv.stride_w,
           cv.dil_h, cv.dil_w, cv.work ? ", caller's workspace" : "", wy);
        ok(wx <= 1, "conv backward data, shape %d (%.2g)", s, wx);
        ok(ww <= 1, "conv backward filter accumulates, shape %d (%.2g)", s, ww);

        /* finite differences of L = sum y . dy: the convolution is linear, so the central
         * difference is exact up to f32 rounding of y (~1e-6 relative) */
        if (s == 2 || s == 8) {
            double worst = 0;
            float *yp = t_xmalloc(ny * 4);
            for (int e = 0; e < 6; e++) {
                size_t i = sl_rng_u64(11, e) % nx;
                float xi = x[i], hstep = 0.5f, v;
                double L[2];
                for (int sgn = 0; sgn < 2; sgn++) {
                    v = xi + (sgn ? -hstep : hstep);
                    sl_k_memcpy(T_BE, xd + i, &v, 4, SL_K_H2D);
                    sl_k_conv2d_forward(T_BE, &cv, xd, wd, yd);
                    t_down(yp, yd, ny * 4);
                    L[sgn] = 0;
                    for (size_t j = 0; j < ny; j++) L[sgn] += (double)yp[j] * dy[j];
                }
                sl_k_memcpy(T_BE, xd + i, &xi, 4, SL_K_H2D);
                double fd = (L[0] - L[1]) / (2 * hstep);
                double err = fabs(fd - dx[i]) / (1 + fabs(dx[i]));
                if (err > worst) worst = err;
            }
            ok(worst < 1e-4, "conv backward data matches finite differences, shape %d (%.2g)", s, worst);
            free(yp);
        }
        t_free(xd), t_free(wd), t_free(dyd), t_free(yd), t_free(dxd), t_free(dwd);
        sl_k_free(T_BE, cv.work);
        free(x), free(w), free(dy), free(dw0), free(y), free(dx), free(dw);
        free(ry), free(rdx), free(rdw), free(ay), free(adx), free(adw);
    }
    sl_conv2d bad = {.n = 1, .c = 1, .h = 2, .w = 2, .k = 1, .r = 3, .s = 3, .stride_h = 1, .stride_w = 1};
    ok(sl_conv2d_init(&bad) == -1, "a filter larger than the padded image is rejected");
    sl_conv2d dil = {.n = 1, .c = 1, .h = 4, .w = 9, .k = 1, .r = 3, .s = 3, .pad_h = 0, .pad_w = 1,
                     .stride_h = 1, .stride_w = 1, .dil_h = 2, .dil_w = 2};
    ok(sl_conv2d_init(&dil) == -1, "a dilated filter (extent 5) taller than the image (4) is rejected");
    dil.h = 5;
    int rc = sl_conv2d_init(&dil);
    ok(rc == 0 && dil.p == 1 && dil.q == 7, "dilation 2: 5x9 pad 0,1 gives 1x7 (%dx%d)", dil.p, dil.q);
    ok(sl_conv2d_work_bytes(&dil) == 4u * 9 * 7, "workspace: c*r*s*p*q floats");
}

/* Strided blocks ----------------------------------------------------------------------------- */

static void check_copy_block(void)
{
    /* src [3][5][7] = its flat index; copy [3][2][4] starting at (0, 1, 2) into dst [3][3][6]
     * at (0, 1, 1), the rest of dst untouched */
    enum { NS = 3 * 5 * 7, ND = 3 * 3 * 6 };
    float src[NS], dst[ND];
    for (int i = 0; i < NS; i++) src[i] = (float)i;
    for (int i = 0; i < ND; i++) dst[i] = -1;
    float *sd = t_up(src, sizeof src), *dd = t_up(dst, sizeof dst);
    sl_k_copy_block(T_BE, 3, 2, 4, sd + 1 * 7 + 2, 35, 7, dd + 1 * 6 + 1, 18, 6);
    sl_k_copy_block(T_BE, 0, 2, 4, sd, 35, 7, dd, 18, 6); /* empty: nothing */
    t_down(dst, dd, sizeof dst);
    int bad = 0;
    for (int z = 0; z < 3; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 6; x++) {
                int in = y >= 1 && x >= 1 && x < 5;
                float want = in ? (float)(z * 35 + (y - 1 + 1) * 7 + (x - 1 + 2)) : -1.0f;
                bad += dst[z * 18 + y * 6 + x] != want;
            }
    ok(bad == 0, "copy_block: a [3][2][4] block between strided arrays, nothing else written (%d wrong)", bad);
    t_free(sd), t_free(dd);
}

/* The same between dtypes: a [2][3][5] block of src [2][4][6] (dtype st) at (0, 1, 1) into dst
 * [2][3][7] (dtype dt) at (0, 0, 2), against a naive loop that rounds each value with
 * sl_half.h (the suite's one rounding): the bits must match, and nothing else is written. */
static void check_copy_block_cast(void)
{
    enum { NS = 2 * 4 * 6, ND = 2 * 3 * 7 };
    float vals[NS];
    for (int i = 0; i < NS; i++) vals[i] = (i % 7 - 3) * 0.3137f + (i % 5) * 1e-3f; /* not exact in 16 bits */
    vals[5] = 7e4f; /* past f16's range: inf in f16 */
    static const sl_dtype dts[] = {SL_F32, SL_F16, SL_BF16};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const sl_dtype st = dts[a], dt = dts[b];
            const size_t ses = sl_dtype_size(st), des = sl_dtype_size(dt);
            void *src = t_pack(st, vals, NS);
            float fill[ND];
            for (int i = 0; i < ND; i++) fill[i] = -1.0f;
            void *dst = t_pack(dt, fill, ND);
            char *sd = t_up(src, NS * ses), *dd = t_up(dst, ND * des);
            sl_k_copy_block_cast(T_BE, 2, 3, 5, sd + (1 * 6 + 1) * ses, st, 24, 6, dd + 2 * des, dt, 21, 7);
            t_down(dst, dd, ND * des);
            int bad = 0;
            for (int z = 0; z < 2; z++)
                for (int y = 0; y < 3; y++)
                    for (int x = 0; x < 7; x++) {
                        int in = x >= 2;
                        float want = in ? sl_round_to(dt, t_load(st, src, (size_t)z * 24 + (y + 1) * 6 + (x - 2 + 1)))
                                        : sl_round_to(dt, -1.0f);
                        float got = t_load(dt, dst, (size_t)z * 21 + y * 7 + x);
                        bad += memcmp(&got, &want, sizeof got) != 0;
                    }
            ok(bad == 0, "copy_block_cast %s -> %s: a [2][3][5] block, rounded as sl_half.h rounds, "
               "nothing else written (%d wrong)", sl_dtype_name(st), sl_dtype_name(dt), bad);
            t_free(sd), t_free(dd);
            free(src), free(dst);
        }
}

/* Random numbers ----------------------------------------------------------------------------- */

static void check_rng(void)
{
    const size_t n = 200000;
    float *a = t_xmalloc(n * 4), *b = t_xmalloc(n * 4);
    float *ad = sl_k_malloc(T_BE, SL_MEM_OTHER, n * 4);
    sl_k_rng_uniform(T_BE, 42, 0, n, ad, 0.0f, 1.0f);
    t_down(a, ad, n * 4);
    /* the same tensor generated as three slices in another order */
    sl_k_rng_uniform(T_BE, 42, 150000, n - 150000, ad + 150000, 0.0f, 1.0f);
    sl_k_rng_uniform(T_BE, 42, 0, 1, ad, 0.0f, 1.0f);
    sl_k_rng_uniform(T_BE, 42, 1, 149999, ad + 1, 0.0f, 1.0f);
    t_down(b, ad, n * 4);
    ok(memcmp(a, b, n * 4) == 0, "uniform: slices generated separately equal the whole");
    double s = 0, s2 = 0, lo = 1, hi = 0;
    for (size_t i = 0; i < n; i++) {
        s += a[i], s2 += (double)a[i] * a[i];
        lo = a[i] < lo ? a[i] : lo, hi = a[i] > hi ? a[i] : hi;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    /* fixed seed, so these are deterministic; bounds are 5 standard errors of the estimates */
    ok(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / n), "uniform mean %.5f", mean);
    ok(fabs(var - 1.0 / 12) < 5 * sqrt(1.0 / 180 / n), "uniform variance %.5f", var);
    ok(lo >= 0.0 && hi < 1.0, "uniform in [0, 1)");
    sl_k_rng_normal(T_BE, 43, 0, n, ad, 1.0f, 2.0f);
    t_down(a, ad, n * 4);
    s = s2 = 0;
    double s4 = 0;
    for (size_t i = 0; i < n; i++) {
        double z = (a[i] - 1.0) / 2.0;
        s += z, s2 += z * z, s4 += z * z * z * z;
    }
    mean = s / n, var = s2 / n - mean * mean;
    ok(fabs(mean) < 5 * sqrt(1.0 / n), "normal(1, 2) mean %.4f", 1 + 2 * mean);
    ok(fabs(var - 1) < 5 * sqrt(2.0 / n), "normal variance %.4f", var);
    ok(fabs(s4 / n - 3) < 5 * sqrt(96.0 / n), "normal fourth moment %.3f (3 for a Gaussian)", s4 / n);
    sl_k_rng_normal(T_BE, 44, 0, n, ad, 1.0f, 2.0f);
    t_down(b, ad, n * 4);
    size_t same = 0;
    for (size_t i = 0; i < n; i++) same += a[i] == b[i];
    ok(same < 10, "another seed gives another stream (%zu equal values)", same);
    sl_k_free(T_BE, ad);
    free(a), free(b);
}

static void check_memory_accounting(void)
{
    size_t before = sl_mem_current(T_BE == SL_BACKEND_CPU ? SL_MEM_HOST : SL_MEM_DEVICE, SL_MEM_ACTIV);
    void *p = sl_k_malloc(T_BE, SL_MEM_ACTIV, 12345);
    size_t during = sl_mem_current(T_BE == SL_BACKEND_CPU ? SL_MEM_HOST : SL_MEM_DEVICE, SL_MEM_ACTIV);
    float probe[4] = {1, 2, 3, 4}, back[4] = {0};
    sl_k_memcpy(T_BE, p, probe, sizeof probe, SL_K_H2D);
    sl_k_memcpy(T_BE, back, p, sizeof back, SL_K_D2H);
    sl_k_free(T_BE, p);
    size_t after = sl_mem_current(T_BE == SL_BACKEND_CPU ? SL_MEM_HOST : SL_MEM_DEVICE, SL_MEM_ACTIV);
    ok(during == before + 12345 && after == before, "backend allocations are counted by category");
    ok(memcmp(probe, back, sizeof probe) == 0, "host -> backend -> host copy round-trips");
}

/* A copy stream ordered against the compute stream by events (vdnn's offload and prefetch):
 * a device-to-host copy that waits for a fill sees the fill; compute that waits for a
 * host-to-device copy sees the copy; the elapsed time between two events is finite and >= 0. */
static void check_stream_events(void)
{
    enum { N = 1 << 16 };
    float *d = sl_k_malloc(T_BE, SL_MEM_OTHER, N * 4), *h = sl_k_host_alloc(T_BE, SL_MEM_OTHER, N * 4);
    sl_k_stream *s = sl_k_stream_create(T_BE);
    sl_k_event *ready = sl_k_event_create(T_BE), *a = sl_k_event_create(T_BE), *b = sl_k_event_create(T_BE);
    sl_k_fill(T_BE, SL_F32, N, d, 7.0);
    sl_k_event_record(T_BE, ready, NULL);
    sl_k_stream_wait_event(T_BE, s, ready);
    sl_k_event_record(T_BE, a, s);
    sl_k_memcpy_async(T_BE, h, d, N * 4, SL_K_D2H, s);
    sl_k_event_record(T_BE, b, s);
    sl_k_event_sync(T_BE, b);
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += h[i] != 7.0f;
    ok(wrong == 0, "stream: a copy that waits for the compute stream's event sees its fill (%zu wrong)", wrong);
    double dt = sl_k_event_elapsed(T_BE, a, b);
    ok(dt >= 0 && dt < 60, "stream: elapsed between two events %.3g s", dt);
    for (size_t i = 0; i < N; i++) h[i] = (float)i;
    sl_k_memcpy_async(T_BE, d, h, N * 4, SL_K_H2D, s);
    sl_k_event_record(T_BE, b, s);
    sl_k_stream_wait_event(T_BE, NULL, b);
    sl_k_scale(T_BE, SL_F32, N, d, 2.0);
    float *back = sl_k_download(T_BE, d, N * 4);
    wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += back[i] != 2.0f * (float)i;
    ok(wrong == 0, "stream: compute that waits for a copy's event sees the copy (%zu wrong)", wrong);
    free(back);
    sl_k_event_destroy(T_BE, ready), sl_k_event_destroy(T_BE, a), sl_k_event_destroy(T_BE, b);
    sl_k_stream_destroy(T_BE, s);
    sl_k_host_free(T_BE, h);
    sl_k_free(T_BE, d);
}

static void run_all_checks(void)
{
    check_memory_accounting();
    check_gemm();
    check_bias();
    check_activations();
    check_mse();
    check_xent();
    check_optim();
    check_elementwise();
    check_cast_counts();
    check_conv();
    check_copy_block();
    check_copy_block_cast();
    check_rng();
    check_stream_events();
}

#endif
