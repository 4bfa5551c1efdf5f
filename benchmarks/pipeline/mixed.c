/* mixed.c — pipeline -d f16|bf16: mixed-precision pipeline parallelism, as Megatron-LM and
 * DeepSpeed run it, for the schedules that take one optimizer step per batch (gpipe, 1f1b,
 * interleaved).
 *
 * What a stage holds (kernels/mlp_mixed.h's recipe, on the stage's chunks only):
 *   master weights   params  f32   the optimizer's, with its f32 state
 *   weights          w16     dt    cast from the master after each step: what the GEMMs read
 *   activations      kept    dt    each micro-batch's layer inputs and pre-activations
 *   boundary         act/grad dt   the activation sent forward and the gradient sent back
 *   gradients        grads   f32   the step's micro-batches accumulated (below), then unscaled
 *                    g16     dt    the accumulated gradient rounded once: what replicas sum
 * Every GEMM takes 16-bit operands and accumulates in f32 (sl_k_gemm), rounded once into dt.
 *
 * What crosses a stage boundary is the 16-bit tensor itself: 2 bytes an element, exactly half
 * of f32's bytes per step (bytes_model's element size is the dtype's; the row's bytes_sent is
 * counted by the communicators).
 *
 * Gradient accumulation over micro-batches in f32. Each micro-batch's dW comes out of an f32
 * GEMM; it is added into the stage's f32 accumulator and rounded into 16 bits once per step,
 * before the replicas' all-reduce. Megatron-LM accumulates in f32 likewise (its main_grad
 * buffers): summing m micro-batches in 16 bits would round m times, and the serial reference
 * (sl_train_serial_mixed: one GEMM over the whole batch, rounded once) is then matched up to
 * the order of the f32 additions and the replicas' all-reduce. That all-reduce stays 16-bit,
 * as ddp's (ddp/mixed.c says why: f32 would double the bytes; Megatron reduces its f32
 * main_grad instead unless told otherwise), and rounds at each hop.
 *
 * Loss scaling (f16). The last stage multiplies dL/d(output) by the scale before rounding it
 * into f16, so every activation gradient flowing back through the pipeline, and every weight
 * gradient, is scaled. Each stage unscales its own gradients and finds its own inf/NaN; the
 * flags are OR-ed over every rank, every stage and every replica (sl_train_mixed_decide), before
 * any optimizer step: an overflow in stage 3 is invisible to stage 0, and a step applied on some
 * stages and skipped on others would leave one model made of two different steps. All ranks run
 * the same scaler on the same flag, so they agree on the next step's scale too. bf16 has f32's
 * range and no scaler.
 *
 * The check: the master weights against sl_train_serial_mixed within SL_TRAIN_TOL_MIXED_*
 * (sl_train.h: the bounds of a run whose gradient sum is split and rounded differently from
 * the reference's), and the replicas bit for bit.
 */
#include <string.h>

#include "mixed.h"

static void *at(const pipe_mixed *pm, const void *p, size_t off)
{
    return (char *)p + off * sl_dtype_size(pm->mx.dt);
}

void pipe_mixed_setup(sl_train *t, pipe_mixed *pm, const float *master, size_t nparams, int rows_max,
                      int width_max, size_t block_max)
{
    const sl_backend be = t->be;
    const sl_dtype dt = t->dtype;
    const size_t es = sl_dtype_size(dt), act = (size_t)rows_max * width_max;
    memset(pm, 0, sizeof *pm);
    sl_train_mixed_init(&pm->ms, dt);
    pm->nparams = nparams;
    /* the layer kernels read the model's shape, the workspaces and x/z (set per operation) */
    pm->mx.m = t->m;
    pm->mx.be = be;
    pm->mx.dt = dt;
    pm->mx.t0 = sl_k_malloc(be, SL_MEM_OTHER, act * sizeof(float));
    pm->mx.t1 = sl_k_malloc(be, SL_MEM_OTHER, act * sizeof(float));
    pm->mx.bias32 = sl_k_malloc(be, SL_MEM_OTHER, (size_t)width_max * sizeof(float));
    const size_t nout = (size_t)rows_max * t->m->dims[t->m->nlayers] * sizeof(float);
    pm->mx.out32 = sl_k_malloc(be, SL_MEM_OTHER, nout);
    pm->mx.dout32 = sl_k_malloc(be, SL_MEM_OTHER, nout);
    pm->w16 = sl_k_malloc(be, SL_MEM_PARAMS, nparams * es);
    pm->g16 = sl_k_malloc(be, SL_MEM_GRADS, nparams * es);
    pm->gw32 = sl_k_malloc(be, SL_MEM_OTHER, block_max * sizeof(float));
    for (int i = 0; i < 2; i++) pm->dbuf[i] = sl_k_malloc(be, SL_MEM_ACTIV, act * es);
    sl_k_cast(be, nparams, master, SL_F32, pm->w16, dt, NULL);
}

void pipe_mixed_free(sl_train *t, pipe_mixed *pm)
{
    void *bufs[] = {pm->mx.t0, pm->mx.t1, pm->mx.bias32, pm->mx.out32, pm->mx.dout32,
                    pm->w16, pm->g16, pm->gw32, pm->dbuf[0], pm->dbuf[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sl_k_free(t->be, bufs[i]);
    memset(pm, 0, sizeof *pm);
}

/* x[l] and z[l] of the chunk's layers inside the kept block (16-bit; the layout of
 * pipeline.c's map_block), x[l1] = out; the kernels then run on `rows` rows. */
static void map(pipe_mixed *pm, int l0, int l1, int rows, void *block, void *out)
{
    const sl_mlp *m = pm->mx.m;
    const size_t es = sl_dtype_size(pm->mx.dt);
    char *base = block;
    pm->mx.batch = rows;
    for (int l = l0; l < l1; l++) {
        pm->mx.x[l] = base;
        base += (size_t)rows * m->dims[l] * es;
    }
    pm->mx.x[l1] = out;
    for (int l = l0; l < l1; l++) {
        if (m->act[l] == SL_ACT_NONE) {
            pm->mx.z[l] = pm->mx.x[l + 1];
        } else {
            pm->mx.z[l] = base;
            base += (size_t)rows * m->dims[l + 1] * es;
        }
    }
}

void pipe_mixed_forward(pipe_mixed *pm, int l0, int l1, size_t off, int rows, void *block, void *out)
{
    const sl_mlp *m = pm->mx.m;
    map(pm, l0, l1, rows, block, out);
    for (int l = l0; l < l1; l++) sl_mixed_layer_forward(&pm->mx, l, at(pm, pm->w16, off + (m->w_off[l] - m->w_off[l0])));
}

double pipe_mixed_loss(sl_train *t, pipe_mixed *pm, int rows, void *out, const float *y, void *dout)
{
    const int L = t->m->nlayers;
    pm->mx.batch = rows;
    pm->mx.x[L] = out;
    pm->mx.dbuf[L & 1] = dout; /* where sl_mixed_loss leaves dL/d(out) (sl_mixed_dout) */
    const double loss = sl_mixed_loss(&pm->mx, y, sl_task_loss_norm(t->task, t->global_batch),
                                      (float)pm->ms.sc.scale);
    t->loss += loss;
    return loss;
}

void pipe_mixed_backward(pipe_mixed *pm, int l0, int l1, size_t off, int rows, void *block, void *out,
                         float *grads, void *dy, void *dx0)
{
    const sl_mlp *m = pm->mx.m;
    map(pm, l0, l1, rows, block, out);
    for (int l = l1 - 1; l >= l0; l--) {
        const size_t o = off + (m->w_off[l] - m->w_off[l0]);
        void *dx = l > l0 ? pm->dbuf[l & 1] : dx0;
        /* dW, db of this micro-batch in gw32 (f32); their 16-bit rounding into g16 is the
         * kernel's and is overwritten at the step's end by the accumulated sum's */
        sl_mixed_layer_backward(&pm->mx, l, dy, dx, at(pm, pm->w16, o), pm->gw32, at(pm, pm->g16, o));
        sl_k_add(m->be, SL_F32, sl_mlp_layer_size(m, l), pm->gw32, grads + o);
        dy = dx;
    }
}

void pipe_mixed_update(sl_train *t, pipe_mixed *pm, sl_comm *dp, int d, float *master, float *grads,
                       float *state)
{
    const sl_backend be = t->be;
    const sl_dtype dt = t->dtype;
    const size_t n = pm->nparams;
    const float scale = (float)pm->ms.sc.scale;
    double t0 = sl_now();
    sl_k_cast(be, n, grads, SL_F32, pm->g16, dt, &pm->mx.cnt.wgrad);
    sl_k_sync(be);
    sl_train_span(t, SL_PHASE_COMPUTE, "round gradients (16-bit)", t0, sl_now());
    if (d > 1) {
        t0 = sl_now();
        sl_train_coll_ok(sl_coll_allreduce(dp, pm->g16, pm->g16, n, dt, SL_OP_SUM), "allreduce (replicas, 16-bit)");
        sl_train_blocking(t, "allreduce 16-bit", t0);
    }
    t0 = sl_now();
    sl_k_cast(be, n, pm->g16, dt, grads, SL_F32, NULL);
    /* 1/scale is exact for the powers of two the scaler uses */
    const size_t bad = sl_k_scale_check(be, n, grads, 1.0f / scale);
    sl_optim o;
    if (sl_train_mixed_decide(t, &pm->ms, bad > 0, &o)) {
        sl_optim_step(be, &o, n, master, grads, state);
        sl_k_cast(be, n, master, SL_F32, pm->w16, dt, NULL);
    }
    sl_k_memset0(be, grads, n * sizeof(float));
    sl_k_sync(be);
    sl_train_span(t, SL_PHASE_COMPUTE, "unscale + optimizer (f32 master)", t0, sl_now());
}

void pipe_mixed_row(sl_train *t, pipe_mixed *pm, sl_result *res)
{
    sl_result_param_str(res, "precision", "mixed");
    sl_result_param_str(res, "boundary", "16-bit activations forward, 16-bit gradients backward");
    sl_result_param_str(res, "grad_accum", "f32 over micro-batches, rounded once into 16 bits");
    if (t->size > 1)
        sl_result_param_str(res, "grad_allreduce", "16-bit, summed pairwise in f32 and rounded at each hop");
    sl_train_mixed_row(t, &pm->ms, res);
}
