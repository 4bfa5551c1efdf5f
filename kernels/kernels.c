/* kernels.c — the backend-neutral entry points of kernels.h: check arguments once, then
 * dispatch to the cpu or cuda table (backend.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "sl_error.h"

static const sl_kops *ops(sl_backend be)
{
    if (be == SL_BACKEND_CPU) return &sl_cpu_ops;
    if (be == SL_BACKEND_CUDA) {
        char why[256];
        const sl_kops *k = sl_cuda_ops(why, sizeof why);
        if (!k) SL_FATAL("backend cuda: %s", why);
        return k;
    }
    SL_FATAL("kernels called with backend %d: resolve 'auto' with sl_k_backend_resolve first",
             (int)be);
}

int sl_k_backend_resolve(sl_backend want, char *why, size_t whylen)
{
    char buf[256] = "";
    if (why && whylen) why[0] = 0;
    if (want == SL_BACKEND_CPU) return SL_BACKEND_CPU;
    if (want == SL_BACKEND_CUDA) {
        if (sl_cuda_ops(buf, sizeof buf)) return SL_BACKEND_CUDA;
        if (why) snprintf(why, whylen, "%s", buf);
        return -1;
    }
    if (want == SL_BACKEND_AUTO) {
        if (sl_cuda_ops(buf, sizeof buf)) return SL_BACKEND_CUDA;
        if (why) snprintf(why, whylen, "cpu chosen: %s", buf);
        return SL_BACKEND_CPU;
    }
    if (why) snprintf(why, whylen, "unknown backend %d", (int)want);
    return -1;
}

int sl_k_backend_available(sl_backend be)
{
    return sl_k_backend_resolve(be, NULL, 0) == (int)be;
}

int sl_k_cuda_device_count(void) { return sl_cuda_device_count(); }

void sl_k_sync(sl_backend be) { ops(be)->sync(); }

/* Memory */

void *sl_k_malloc(sl_backend be, sl_mem_cat cat, size_t bytes)
{
    return ops(be)->malloc(cat, bytes);
}
void sl_k_free(sl_backend be, void *p)
{
    if (p) ops(be)->free(p);
}
void *sl_k_host_alloc(sl_backend be, sl_mem_cat cat, size_t bytes)
{
    return ops(be)->host_alloc(cat, bytes);
}
void sl_k_host_free(sl_backend be, void *p)
{
    if (p) ops(be)->host_free(p);
}
void sl_k_memcpy(sl_backend be, void *dst, const void *src, size_t bytes, sl_k_copy_kind kind)
{
    if (bytes) ops(be)->memcpy(dst, src, bytes, kind);
}
void sl_k_memset0(sl_backend be, void *p, size_t bytes)
{
    if (bytes) ops(be)->memset0(p, bytes);
}
void *sl_k_upload(sl_backend be, sl_mem_cat cat, const void *host, size_t bytes)
{
    void *d = sl_k_malloc(be, cat, bytes);
    sl_k_memcpy(be, d, host, bytes, SL_K_H2D);
    return d;
}
void *sl_k_download(sl_backend be, const void *src, size_t bytes)
{
    void *h = malloc(bytes ? bytes : 1);
    if (!h) SL_FATAL("out of memory: %zu bytes for a host copy", bytes);
    sl_k_memcpy(be, h, src, bytes, SL_K_D2H);
    return h;
}

/* A stream handle remembers nothing but the native pointer; the cpu table returns a dummy
 * non-NULL value so that "no stream" and "cpu stream" are distinguishable. */
sl_k_stream *sl_k_stream_create(sl_backend be) { return ops(be)->stream_create(); }
void sl_k_stream_destroy(sl_backend be, sl_k_stream *s)
{
    if (s) ops(be)->stream_destroy(s);
}
void sl_k_memcpy_async(sl_backend be, void *dst, const void *src, size_t bytes,
                       sl_k_copy_kind kind, sl_k_stream *s)
{
    if (bytes) ops(be)->memcpy_async(dst, src, bytes, kind, s);
}
void sl_k_stream_sync(sl_backend be, sl_k_stream *s) { ops(be)->stream_sync(s); }
void *sl_k_stream_native(sl_k_stream *s) { return s; }

sl_k_event *sl_k_event_create(sl_backend be) { return ops(be)->event_create(); }
void sl_k_event_destroy(sl_backend be, sl_k_event *e)
{
    if (e) ops(be)->event_destroy(e);
}
void sl_k_event_record(sl_backend be, sl_k_event *e, sl_k_stream *s) { ops(be)->event_record(e, s); }
void sl_k_stream_wait_event(sl_backend be, sl_k_stream *s, sl_k_event *e)
{
    ops(be)->stream_wait_event(s, e);
}
void sl_k_event_sync(sl_backend be, sl_k_event *e) { ops(be)->event_sync(e); }
double sl_k_event_elapsed(sl_backend be, sl_k_event *a, sl_k_event *b)
{
    return ops(be)->event_elapsed(a, b);
}

/* GEMM */

static int gemm_dtype_ok(sl_dtype ab, sl_dtype cdt)
{
    if (ab != SL_F32 && ab != SL_F16 && ab != SL_BF16) return 0;
    return cdt == SL_F32 || cdt == ab;
}

void sl_k_gemm(sl_backend be, int transa, int transb, int m, int n, int k, float alpha,
               const void *a, int lda, const void *b, int ldb, float beta, void *c, int ldc,
               sl_dtype ab, sl_dtype cdt)
{
    if (!gemm_dtype_ok(ab, cdt))
        SL_FATAL("sl_k_gemm: unsupported dtypes A,B %s, C %s", sl_dtype_name(ab),
                 sl_dtype_name(cdt));
    /* Row-major leading dimensions must cover a row of the stored matrix. */
    int acols = transa ? m : k, bcols = transb ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (acols > 1 ? acols : 1) ||
        ldb < (bcols > 1 ? bcols : 1) || ldc < (n > 1 ? n : 1))
        SL_FATAL("sl_k_gemm: bad shape m=%d n=%d k=%d lda=%d ldb=%d ldc=%d (trans %d %d)", m, n,
                 k, lda, ldb, ldc, transa, transb);
    if (m == 0 || n == 0) return;
    ops(be)->gemm(!!transa, !!transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ab, cdt);
}

void sl_k_sgemm(sl_backend be, int transa, int transb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    sl_k_gemm(be, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, SL_F32, SL_F32);
}

const char *sl_k_gemm_impl(sl_backend be, sl_dtype ab)
{
    if (!gemm_dtype_ok(ab, SL_F32)) return "unsupported";
    return ops(be)->gemm_impl(ab);
}

/* Linear layers, activations */

void sl_k_bias_add(sl_backend be, int rows, int cols, float *y, const float *bias)
{
    if (rows > 0 && cols > 0) ops(be)->bias_add(rows, cols, y, bias);
}
void sl_k_bias_grad(sl_backend be, int rows, int cols, const float *dy, float *dbias)
{
    if (rows > 0 && cols > 0) ops(be)->bias_grad(rows, cols, dy, dbias);
}

static const char *const act_names[SL_NACTS] = {"none", "relu", "gelu"};
const char *sl_act_name(sl_act a) { return (unsigned)a < SL_NACTS ? act_names[a] : "?"; }
int sl_act_from_name(const char *s)
{
    for (int i = 0; i < SL_NACTS; i++)
        if (s && strcmp(s, act_names[i]) == 0) return i;
    return -1;
}

void sl_k_act_forward(sl_backend be, sl_act act, size_t n, const float *x, float *y)
{
    if ((unsigned)act >= SL_NACTS) SL_FATAL("sl_k_act_forward: bad activation %d", (int)act);
    if (n) ops(be)->act_forward(act, n, x, y);
}
void sl_k_act_backward(sl_backend be, sl_act act, size_t n, const float *x, const float *dy,
                       float *dx)
{
    if ((unsigned)act >= SL_NACTS) SL_FATAL("sl_k_act_backward: bad activation %d", (int)act);
    if (n) ops(be)->act_backward(act, n, x, dy, dx);
}

/* Losses */

double sl_k_mse(sl_backend be, size_t n, const float *y, const float *t, float *dy, float norm)
{
    return n ? ops(be)->mse(n, y, t, dy, norm) : 0.0;
}
double sl_k_softmax_xent(sl_backend be, int rows, int classes, const float *logits,
                         const int32_t *labels, float *dlogits, float norm)
{
    if (rows <= 0) return 0.0;
    if (classes <= 0) SL_FATAL("sl_k_softmax_xent: %d classes", classes);
    return ops(be)->softmax_xent(rows, classes, logits, labels, dlogits, norm);
}

/* Optimizers */

void sl_k_sgd_step(sl_backend be, const sl_sgd *o, size_t n, float *w, const float *g,
                   float *v)
{
    if (n) ops(be)->sgd_step(o, n, w, g, v);
}
void sl_k_adamw_step(sl_backend be, const sl_adamw *o, size_t n, float *w, const float *g,
                     float *m, float *v)
{
    if (o->step < 1) SL_FATAL("sl_k_adamw_step: step %ld (the first update is step 1)", o->step);
    if (n) ops(be)->adamw_step(o, n, w, g, m, v);
}

/* Precision */

static int is_float_type(sl_dtype t) { return t == SL_F32 || t == SL_F16 || t == SL_BF16; }

void sl_k_cast(sl_backend be, size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
               sl_cast_count *cnt)
{
    if (!is_float_type(st) || !is_float_type(dt))
        SL_FATAL("sl_k_cast: unsupported cast %s -> %s", sl_dtype_name(st), sl_dtype_name(dt));
    if (n) ops(be)->cast(n, src, st, dst, dt, cnt);
}
size_t sl_k_cast_update(sl_backend be, sl_dtype dt, size_t n, const float *w, void *w16)
{
    if (!is_float_type(dt)) SL_FATAL("sl_k_cast_update: unsupported dtype %s", sl_dtype_name(dt));
    return n ? ops(be)->cast_update(dt, n, w, w16) : 0;
}
size_t sl_k_scale_check(sl_backend be, size_t n, float *x, float scale)
{
    return n ? ops(be)->scale_check(n, x, scale) : 0;
}

/* Element-wise */

static void check_elem_dtype(const char *fn, sl_dtype dt)
{
    if ((unsigned)dt >= SL_NDTYPES) SL_FATAL("%s: bad dtype %d", fn, (int)dt);
}
void sl_k_axpby(sl_backend be, sl_dtype dt, size_t n, double alpha, const void *x, double beta,
                void *y)
{
    check_elem_dtype("sl_k_axpby", dt);
    if (n) ops(be)->axpby(dt, n, alpha, x, beta, y);
}
void sl_k_add(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y)
{
    sl_k_axpby(be, dt, n, 1.0, x, 1.0, y);
}
void sl_k_scale(sl_backend be, sl_dtype dt, size_t n, void *x, double alpha)
{
    /* x = alpha x: axpby with alpha 0 does not read its x operand. */
    sl_k_axpby(be, dt, n, 0.0, x, alpha, x);
}
void sl_k_fill(sl_backend be, sl_dtype dt, size_t n, void *x, double value)
{
    check_elem_dtype("sl_k_fill", dt);
    if (n) ops(be)->fill(dt, n, x, value);
}

/* Convolution */

int sl_conv2d_init(sl_conv2d *cv)
{
    if (cv->dil_h == 0) cv->dil_h = 1;
    if (cv->dil_w == 0) cv->dil_w = 1;
    if (cv->n < 1 || cv->c < 1 || cv->h < 1 || cv->w < 1 || cv->k < 1 || cv->r < 1 ||
        cv->s < 1 || cv->pad_h < 0 || cv->pad_w < 0 || cv->stride_h < 1 || cv->stride_w < 1 ||
        cv->dil_h < 1 || cv->dil_w < 1)
        return -1;
    /* the filter's extent is (r - 1) * dil + 1 input rows */
    long long hp = cv->h + 2LL * cv->pad_h - ((long long)(cv->r - 1) * cv->dil_h + 1),
              wp = cv->w + 2LL * cv->pad_w - ((long long)(cv->s - 1) * cv->dil_w + 1);
    if (hp < 0 || wp < 0) return -1;
    cv->p = (int)(hp / cv->stride_h + 1);
    cv->q = (int)(wp / cv->stride_w + 1);
    return 0;
}

size_t sl_conv2d_work_bytes(const sl_conv2d *cv)
{
    return (size_t)cv->c * cv->r * cv->s * cv->p * cv->q * sizeof(float);
}

double sl_conv2d_flops(const sl_conv2d *cv)
{
    return 2.0 * cv->n * cv->k * cv->p * cv->q * (double)cv->c * cv->r * cv->s;
}

static void check_conv(const char *fn, const sl_conv2d *cv)
{
    sl_conv2d t = *cv;
    if (sl_conv2d_init(&t) != 0 || t.p != cv->p || t.q != cv->q || t.dil_h != cv->dil_h ||
        t.dil_w != cv->dil_w)
        SL_FATAL("%s: invalid convolution shape (call sl_conv2d_init first)", fn);
}
void sl_k_conv2d_forward(sl_backend be, const sl_conv2d *cv, const float *x, const float *w,
                         float *y)
{
    check_conv("sl_k_conv2d_forward", cv);
    ops(be)->conv2d_forward(cv, x, w, y);
}
void sl_k_conv2d_backward_data(sl_backend be, const sl_conv2d *cv, const float *dy,
                               const float *w, float *dx)
{
    check_conv("sl_k_conv2d_backward_data", cv);
    ops(be)->conv2d_backward_data(cv, dy, w, dx);
}
void sl_k_conv2d_backward_filter(sl_backend be, const sl_conv2d *cv, const float *x,
                                 const float *dy, float *dw)
{
    check_conv("sl_k_conv2d_backward_filter", cv);
    ops(be)->conv2d_backward_filter(cv, x, dy, dw);
}

void sl_k_copy_block(sl_backend be, int nz, int ny, int nx, const float *src, size_t src_z,
                     size_t src_y, float *dst, size_t dst_z, size_t dst_y)
{
    sl_k_copy_block_cast(be, nz, ny, nx, src, SL_F32, src_z, src_y, dst, SL_F32, dst_z, dst_y);
}
void sl_k_copy_block_cast(sl_backend be, int nz, int ny, int nx, const void *src, sl_dtype st,
                          size_t src_z, size_t src_y, void *dst, sl_dtype dt, size_t dst_z,
                          size_t dst_y)
{
    if (nz < 0 || ny < 0 || nx < 0) SL_FATAL("sl_k_copy_block: negative extent %d x %d x %d", nz, ny, nx);
    if (!is_float_type(st) || !is_float_type(dt))
        SL_FATAL("sl_k_copy_block_cast: unsupported dtypes %s -> %s", sl_dtype_name(st), sl_dtype_name(dt));
    if (nz && ny && nx) ops(be)->copy_block(nz, ny, nx, src, st, src_z, src_y, dst, dt, dst_z, dst_y);
}

/* Random numbers */

void sl_k_rng_uniform(sl_backend be, uint64_t seed, uint64_t first, size_t n, float *x, float lo,
                      float hi)
{
    if (n) ops(be)->rng_uniform(seed, first, n, x, lo, hi);
}
void sl_k_rng_normal(sl_backend be, uint64_t seed, uint64_t first, size_t n, float *x,
                     float mean, float stddev)
{
    if (n) ops(be)->rng_normal(seed, first, n, x, mean, stddev);
}

/* Memory probe */

double sl_k_read_sum(sl_backend be, size_t n, const double *x)
{
    return n ? ops(be)->read_sum(n, x) : 0.0;
}
