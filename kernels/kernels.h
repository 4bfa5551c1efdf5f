/* kernels.h — the compute kernels every benchmark uses, one API for the cpu backend (host
 * memory, OpenMP, OpenBLAS) and the cuda backend (device memory, CUDA kernels, cuBLAS).
 *
 * Every function takes the backend first; pointers are host pointers for SL_BACKEND_CPU and
 * device pointers for SL_BACKEND_CUDA (allocate them with sl_k_malloc). Calls on the cuda
 * backend are queued on the default stream and may return before the work is done; functions
 * that return a value to the host (losses, counts) wait for it. sl_k_sync waits for everything.
 *
 * Conventions:
 *   - matrices are row-major; shape comments read [rows, cols];
 *   - all element-wise, loss and optimizer kernels work on f32 (GEMM, casts and axpby take
 *     other dtypes where noted);
 *   - "grad" outputs of backward kernels ACCUMULATE (+=) into weight and bias gradients, so
 *     micro-batches and gradient accumulation need no extra buffer; the caller zeroes them;
 *     gradients with respect to inputs are assigned (=);
 *   - a shard of a tensor is just pointer + offset with its own count: every element-wise and
 *     optimizer kernel treats its arrays as flat vectors of n elements;
 *   - results are reproducible run to run on the same backend and thread counts; losses and
 *     bias gradients are also independent of the number of OpenMP threads (fixed chunking),
 *     GEMMs may depend on OpenBLAS's thread count.
 * A backend that cannot run (cuda not built, or no device visible) is a runtime error (exit 3)
 * naming why; sl_k_backend_resolve lets a program find out first.
 */
#ifndef SL_KERNELS_H
#define SL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "sl_mem.h"
#include "sl_types.h"

/* Backends --------------------------------------------------------------------------------- */

/* Resolves SL_BACKEND_AUTO to cuda when a device is visible, else cpu. Returns the backend,
 * or -1 when `want` cannot run here, with the reason in why ("CUDA support not built",
 * "no CUDA device visible: ..."). */
int sl_k_backend_resolve(sl_backend want, char *why, size_t whylen);
/* 1 when the backend can run here. */
int sl_k_backend_available(sl_backend be);
/* Number of visible CUDA devices (0 when CUDA is not built). */
int sl_k_cuda_device_count(void);
/* How the cpu backend uses threads, one line for the output: OpenBLAS always runs its own;
 * the OpenMP kernels use threads only when OMP_WAIT_POLICY=passive (or either library is on
 * one thread), because spinning OpenMP threads slow OpenBLAS's GEMMs down (cpu/ops.c). */
const char *sl_k_cpu_threading(void);
/* Threads the cpu backend's GEMMs run on in this process (OpenBLAS's count): what a one-rank
 * baseline measured inside a multi-rank run had, to be stated beside figures computed from it. */
int sl_k_cpu_threads(void);
/* Waits until all queued work of the backend is done (no-op on cpu). */
void sl_k_sync(sl_backend be);

/* Memory ----------------------------------------------------------------------------------- */

/* Backend memory, zero-filled, counted under `cat` (host space for cpu, device space for
 * cuda). sl_k_free(be, NULL) is a no-op. */
void *sl_k_malloc(sl_backend be, sl_mem_cat cat, size_t bytes);
void sl_k_free(sl_backend be, void *p);
/* Host memory that the backend copies from/to fastest (pinned on cuda; sl_alloc on cpu). */
void *sl_k_host_alloc(sl_backend be, sl_mem_cat cat, size_t bytes);
void sl_k_host_free(sl_backend be, void *p);

typedef enum { SL_K_H2D, SL_K_D2H, SL_K_D2D } sl_k_copy_kind;
/* Synchronous copy (on cpu, all three kinds are memcpy). */
void sl_k_memcpy(sl_backend be, void *dst, const void *src, size_t bytes, sl_k_copy_kind kind);
void sl_k_memset0(sl_backend be, void *p, size_t bytes);
/* The host <-> backend copies of checks and tests: new backend memory (counted under cat)
 * holding a copy of `bytes` of host memory; a new host array (malloc: release with free)
 * holding a copy of `bytes` of backend memory. Out of memory is a runtime error. */
void *sl_k_upload(sl_backend be, sl_mem_cat cat, const void *host, size_t bytes);
void *sl_k_download(sl_backend be, const void *src, size_t bytes);

/* Streams for copies that overlap compute (vDNN prefetch). On cpu a stream is a dummy and an
 * async copy is a memcpy done at once. */
typedef struct sl_k_stream sl_k_stream;
sl_k_stream *sl_k_stream_create(sl_backend be);
void sl_k_stream_destroy(sl_backend be, sl_k_stream *s);
void sl_k_memcpy_async(sl_backend be, void *dst, const void *src, size_t bytes,
                       sl_k_copy_kind kind, sl_k_stream *s);
void sl_k_stream_sync(sl_backend be, sl_k_stream *s);
/* The native handle (cudaStream_t) for sl_dev_timer; NULL means the default stream. */
void *sl_k_stream_native(sl_k_stream *s);
/* Events order work between the compute stream (stream NULL: where every kernel runs) and
 * copy streams without a device-wide sync, and time it (vDNN offload). On cpu, where every
 * copy is done when issued, an event records the host time and waiting on it is free. */
typedef struct sl_k_event sl_k_event;
sl_k_event *sl_k_event_create(sl_backend be);
void sl_k_event_destroy(sl_backend be, sl_k_event *e);
/* Marks the point in stream s (NULL: the compute stream) that work queued so far reaches. */
void sl_k_event_record(sl_backend be, sl_k_event *e, sl_k_stream *s);
/* Work queued on s (NULL: the compute stream) after this call starts once e is reached; the
 * host does not wait. */
void sl_k_stream_wait_event(sl_backend be, sl_k_stream *s, sl_k_event *e);
/* The host waits until e is reached. */
void sl_k_event_sync(sl_backend be, sl_k_event *e);
/* Seconds from a to b, both recorded and reached. */
double sl_k_event_elapsed(sl_backend be, sl_k_event *a, sl_k_event *b);

/* GEMM ------------------------------------------------------------------------------------- */

/* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, row-major with leading dimensions
 * lda, ldb, ldc (elements). op(X) = X^T when transX is nonzero.
 * ab: dtype of A and B (f32, f16, bf16); c: dtype of C (f32, or the same as ab). Products are
 * accumulated in f32. With beta == 0, C is not read (it may hold NaN). */
void sl_k_gemm(sl_backend be, int transa, int transb, int m, int n, int k, float alpha,
               const void *a, int lda, const void *b, int ldb, float beta, void *c, int ldc,
               sl_dtype ab, sl_dtype cdt);
/* The f32 case. */
void sl_k_sgemm(sl_backend be, int transa, int transb, int m, int n, int k, float alpha,
                const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* How sl_k_gemm computes for these dtypes on this backend, e.g. "cblas_sbgemm" or
 * "f16 widened to f32, cblas_sgemm" — printed by benchmarks so that figures are not
 * mistaken for native half-precision throughput. */
const char *sl_k_gemm_impl(sl_backend be, sl_dtype ab);

/* Linear layers and activations -------------------------------------------------------------- */

/* y[rows, cols] += bias[cols] (broadcast over rows) */
void sl_k_bias_add(sl_backend be, int rows, int cols, float *y, const float *bias);
/* dbias[cols] += sum over rows of dy[rows, cols] */
void sl_k_bias_grad(sl_backend be, int rows, int cols, const float *dy, float *dbias);

typedef enum { SL_ACT_NONE, SL_ACT_RELU, SL_ACT_GELU, SL_NACTS } sl_act;
const char *sl_act_name(sl_act a);      /* "none" "relu" "gelu" */
int sl_act_from_name(const char *s);    /* -1 when unknown */
/* y[n] = act(x[n]); y may be x. GeLU is the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void sl_k_act_forward(sl_backend be, sl_act act, size_t n, const float *x, float *y);
/* dx[n] = dy[n] * act'(x[n]) where x is the pre-activation input; dx may be dy. */
void sl_k_act_backward(sl_backend be, sl_act act, size_t n, const float *x, const float *dy,
                       float *dx);

/* Losses ----------------------------------------------------------------------------------- */

/* MSE: returns norm * sum (y - t)^2 and writes dy = 2 norm (y - t) (dy may be NULL).
 * norm = 1/n gives the mean; data-parallel ranks pass 1/(global count). */
double sl_k_mse(sl_backend be, size_t n, const float *y, const float *t, float *dy, float norm);
/* Softmax cross-entropy over logits[rows, classes] with labels[rows] (int32 class ids in
 * [0, classes), on the backend; not range-checked there): returns norm * sum_rows -log softmax(logits)[label] and writes
 * dlogits = norm (softmax - onehot(label)) (may be NULL). */
double sl_k_softmax_xent(sl_backend be, int rows, int classes, const float *logits,
                         const int32_t *labels, float *dlogits, float norm);

/* Optimizers (fp32 master weights; pass pointer + offset and count for a shard) ------------- */

typedef struct sl_sgd {
    float lr, momentum, weight_decay; /* v = momentum v + g + wd w;  w -= lr v */
} sl_sgd;
/* v (the momentum buffer, zero before the first step) may be NULL: plain SGD. */
void sl_k_sgd_step(sl_backend be, const sl_sgd *o, size_t n, float *w, const float *g,
                   float *v);

typedef struct sl_adamw {
    float lr, beta1, beta2, eps, weight_decay;
    long step; /* 1 for the first update: used for bias correction */
} sl_adamw;
/* m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= lr (wd w + mhat / (sqrt(vhat) + eps)) */
void sl_k_adamw_step(sl_backend be, const sl_adamw *o, size_t n, float *w, const float *g,
                     float *m, float *v);

/* Precision -------------------------------------------------------------------------------- */

typedef struct sl_cast_count {
    unsigned long long underflow; /* nonzero finite inputs that became +-0 */
    unsigned long long overflow;  /* finite inputs that became +-inf */
    unsigned long long subnormal; /* nonzero finite inputs that became subnormal (nonzero, below
                                     the smallest normal of the destination: bits of precision lost) */
    unsigned long long zero;      /* inputs that were +-0 already (nothing lost here: a zero made
                                     upstream, e.g. by an underflow earlier in backward) */
} sl_cast_count;
/* dst[n] (dtype dt) = src[n] (dtype st), round to nearest even. Supported: f32, f16, bf16 in
 * any pair. cnt (host pointer, may be NULL) is incremented by what this call lost. */
void sl_k_cast(sl_backend be, size_t n, const void *src, sl_dtype st, void *dst, sl_dtype dt,
               sl_cast_count *cnt);
/* w16[n] (dtype dt: f16, bf16 or f32) = w[n] rounded: a weight update stored in dt. Returns
 * how many updates were lost to rounding: elements whose w differs from the value w16 held
 * before but rounds back to it (w = old + small step, with the step below half a unit in the
 * last place of the old value). Always 0 for f32. */
size_t sl_k_cast_update(sl_backend be, sl_dtype dt, size_t n, const float *w, void *w16);
/* x[n] *= scale; returns how many results are not finite (inf or NaN) — the loss-scaling
 * overflow check. */
size_t sl_k_scale_check(sl_backend be, size_t n, float *x, float scale);

/* Element-wise (dtype f32, f64, f16, bf16; 16-bit types are widened to f32, combined and
 * rounded once) --------------------------------------------------------------------------- */

/* y[n] = alpha x[n] + beta y[n]. As in BLAS, x is not read when alpha == 0 and y is not read
 * when beta == 0 (so 0 * inf never makes a NaN). With alpha = beta = 1 on integer-valued data
 * this is exact (as long as the sums are representable). */
void sl_k_axpby(sl_backend be, sl_dtype dt, size_t n, double alpha, const void *x, double beta,
                void *y);
/* y[n] += x[n] */
void sl_k_add(sl_backend be, sl_dtype dt, size_t n, const void *x, void *y);
/* x[n] *= alpha */
void sl_k_scale(sl_backend be, sl_dtype dt, size_t n, void *x, double alpha);
/* x[n] = value */
void sl_k_fill(sl_backend be, sl_dtype dt, size_t n, void *x, double value);

/* Convolution (NCHW) ------------------------------------------------------------------------ */

typedef struct sl_conv2d {
    int n, c, h, w;           /* input x[n, c, h, w] */
    int k, r, s;              /* filters w[k, c, r, s] */
    int pad_h, pad_w;         /* zero padding on each side */
    int stride_h, stride_w;
    int dil_h, dil_w;         /* dilation: tap i reads input row i * dil_h (0 is read as 1) */
    /* The im2col workspace, backend memory of sl_conv2d_work_bytes(cv) or more, owned by the
     * caller, so that a timed loop allocates nothing; NULL: each call allocates its own. */
    float *work;
    int p, q;                 /* output y[n, k, p, q]: filled by sl_conv2d_init */
} sl_conv2d;
/* Sets p and q (and a dilation of 0 to 1); returns 0, or -1 when the shape is invalid (the
 * output would be empty). */
int sl_conv2d_init(sl_conv2d *cv);
double sl_conv2d_flops(const sl_conv2d *cv); /* forward; each backward pass costs the same */
/* Bytes of the workspace the three passes need: one image's unfolded patches,
 * col[c*r*s, p*q] in f32. */
size_t sl_conv2d_work_bytes(const sl_conv2d *cv);
/* y = x (*) w (assigned) */
void sl_k_conv2d_forward(sl_backend be, const sl_conv2d *cv, const float *x, const float *w,
                         float *y);
/* dx = dL/dx (assigned) */
void sl_k_conv2d_backward_data(sl_backend be, const sl_conv2d *cv, const float *dy,
                               const float *w, float *dx);
/* dw += dL/dw */
void sl_k_conv2d_backward_filter(sl_backend be, const sl_conv2d *cv, const float *x,
                                 const float *dy, float *dw);

/* Strided blocks (halo packing, tiles of an image) ------------------------------------------- */

/* A 3-D block of f32: for z < nz, y < ny, x < nx:
 *   dst[z * dst_z + y * dst_y + x] = src[z * src_z + y * src_y + x]
 * (strides in elements; the blocks must not overlap). nz = images x channels, ny = rows,
 * nx = columns packs a face of a tile into a message or unpacks it into the halo. */
void sl_k_copy_block(sl_backend be, int nz, int ny, int nx, const float *src, size_t src_z,
                     size_t src_y, float *dst, size_t dst_z, size_t dst_y);
/* The same block between dtypes (f32, f16, bf16): src of dtype st, dst of dtype dt, each
 * element converted as sl_k_cast converts it (round to nearest even), its bits copied when
 * st == dt. A 16-bit run packs and unpacks its halos in its dtype (half the bytes of f32),
 * and widens a 16-bit window into f32 (or rounds an f32 result into a 16-bit tile) on the way. */
void sl_k_copy_block_cast(sl_backend be, int nz, int ny, int nx, const void *src, sl_dtype st,
                          size_t src_z, size_t src_y, void *dst, sl_dtype dt, size_t dst_z,
                          size_t dst_y);

/* Random numbers ---------------------------------------------------------------------------- */

/* Element i of the stream `seed` depends only on (seed, first + i), so any rank can generate
 * any slice of a tensor and get the same values as a serial run (see sl_rng.h). */
void sl_k_rng_uniform(sl_backend be, uint64_t seed, uint64_t first, size_t n, float *x, float lo,
                      float hi);
void sl_k_rng_normal(sl_backend be, uint64_t seed, uint64_t first, size_t n, float *x,
                     float mean, float stddev);

/* Memory probe ------------------------------------------------------------------------------ */

/* The sum of x[n], every element read once: the kernel of the read-bandwidth probe (probe.h). */
double sl_k_read_sum(sl_backend be, size_t n, const double *x);

#endif
