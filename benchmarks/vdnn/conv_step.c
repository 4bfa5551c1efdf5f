/* conv_step.c — vdnn's step on the conv stack (--model conv, net.h), one operation at a time
 * through the arena and the copy engine, and its analytic model; conv.c drives it.
 *
 * vDNN (Rhu et al., "vDNN: Virtualized Deep Neural Networks for Scalable,
 * Memory-Efficient Neural Network Design", 2016): a network whose activations do not fit in
 * device memory trains anyway, by moving each layer's input to pinned host memory once its
 * forward pass is done with it and bringing it back for its backward pass.
 *
 *   forward, operation i:  the copy of t[i] to the host starts (copy stream) while op i
 *                          computes t[i + 1]; once both are done, t[i] is released.
 *   backward, operation i: t[i] is back on the device — fetched now (no prefetch), or fetched
 *                          while op i + 1 computed (prefetch: the nearest offloaded input
 *                          below the current operation is brought in while it computes).
 *   policies: none (everything stays: the reference), all (every operation's input), conv
 *             (only convolutions' inputs: their compute hides the copy best).
 *
 * Device memory is an arena of fixed capacity (--device-mem): on cuda, device memory; in a cpu
 * build an emulation — host memory standing in for the device and a helper thread for the
 * copy engine, said so in every row. Every configuration's peak bytes by category are
 * measured and printed beside the analytic model; one whose model does not fit the arena gets
 * a "does not fit" row and the run goes on. Checked by default: weights and gradients
 * bit-identical to the `none` run, peak bytes equal to the model, bytes moved equal to it.
 *
 * In f16 and bf16 (-d) the activations t[i] are held, offloaded and fetched in 16 bits: half the
 * bytes kept and moved. Each operation widens its input into an f32 workspace, computes in f32
 * and rounds its output into 16 bits; parameters, gradients and the momentum stay f32 (so no
 * loss scaling is needed: the gradients never leave f32). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scalelab.h"
#include "run.h"

/* Which operations' inputs go to the host. */
static int offloaded(const vdnn_run *r, int i)
{
    return r->policy == P_ALL || (r->policy == P_CONV && r->n->op[i] == OP_CONV);
}

/* The offloaded input needed next in backward after operation i: the nearest below it. */
static int next_offloaded(const vdnn_run *r, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (offloaded(r, j)) return j;
    return -1;
}

/* The f32 view of tensor p (in r->dt): p itself in f32, else p widened into the workspace ws. */
static const float *wide(const vdnn_run *r, const void *p, float *ws)
{
    if (r->dt == SL_F32) return p;
    sl_k_cast(r->be, r->n->act_elems, p, r->dt, ws, SL_F32, NULL);
    return ws;
}

/* Brings t[i] back into a fresh device tensor; its ticket is what op i's backward waits for. */
static void fetch(vdnn_run *r, int i)
{
    r->t[i] = arena_alloc(&r->a, A_ACTIV, r->act_bytes);
    r->ticket[i] = copier_start(r->cp, r->t[i], r->host[i], r->act_bytes, SL_K_H2D);
}

static void forward(vdnn_run *r)
{
    const net *n = r->n;
    for (int i = 0; i < n->nops; i++) {
        r->t[i + 1] = arena_alloc(&r->a, A_ACTIV, r->act_bytes);
        int tk = offloaded(r, i) ? copier_start(r->cp, r->host[i], r->t[i], r->act_bytes, SL_K_D2H) : -1;
        /* overlaps the copy of t[i]; in 16 bits the gradient buffers, idle in forward, hold
         * the widened input and the f32 output before it is rounded into t[i + 1] */
        float *y = r->dt == SL_F32 ? r->t[i + 1] : r->dbuf[1];
        net_forward(n, i, r->params, wide(r, r->t[i], r->dbuf[0]), y);
        if (r->dt != SL_F32) sl_k_cast(r->be, n->act_elems, y, SL_F32, r->t[i + 1], r->dt, NULL);
        if (tk >= 0) {                   /* released once the copy and the layer are done */
            copier_wait(r->cp, tk);
            arena_free(&r->a, r->t[i]);
            r->t[i] = NULL;
        }
    }
}

static void backward(vdnn_run *r)
{
    const net *n = r->n;
    for (int i = n->nops - 1; i >= 0; i--) {
        if (!r->t[i]) fetch(r, i);       /* not prefetched: the copy is all exposed */
        int p = r->prefetch ? next_offloaded(r, i) : -1;
        if (p >= 0 && !r->t[p]) fetch(r, p); /* one ahead, while op i computes */
        if (r->ticket[i] >= 0) copier_wait(r->cp, r->ticket[i]);
        r->ticket[i] = -1;
        net_backward(n, i, r->params, wide(r, r->t[i], r->wide), r->dbuf[(i + 1) & 1], r->grads,
                     i ? r->dbuf[i & 1] : NULL);
        arena_free(&r->a, r->t[i]);
        r->t[i] = NULL;
    }
}

/* One training step: data, forward, loss, backward, SGD; the copy engine's figures. */
void vdnn_step(void *arg)
{
    vdnn_run *r = arg;
    const net *n = r->n;
    sl_k_memset0(r->be, r->grads, n->nparams * sizeof(float));
    r->t[0] = arena_alloc(&r->a, A_ACTIV, r->act_bytes);
    if (r->dt == SL_F32) net_load(r->n, r->step, r->t[0], r->target);
    else { /* the batch made in f32, held in 16 bits like every activation */
        net_load(r->n, r->step, r->dbuf[0], r->target);
        sl_k_cast(r->be, n->act_elems, r->dbuf[0], SL_F32, r->t[0], r->dt, NULL);
    }
    forward(r);
    r->loss = net_loss(n, wide(r, r->t[n->nops], r->wide), r->target, r->dbuf[n->nops & 1]);
    arena_free(&r->a, r->t[n->nops]);
    r->t[n->nops] = NULL;
    backward(r);
    sl_optim_step(r->be, &r->optim, n->nparams, r->params, r->grads, r->optim_state);
    copier_step end;
    copier_step_end(r->cp, &end);
    if (r->step < r->nsteps) r->steps[r->step] = end;
    r->step++;
}

/* The analytic model: bytes per category at the peak, with every tensor t[i] the same size s
 * (in the run's dtype; s32 the same tensor in f32).
 * Resident: parameters, gradients, SGD momentum, the target (s32), two gradient buffers (2 s32)
 * and in 16 bits the workspace an input is widened into in backward (s32).
 * Activations live during forward op i: the inputs kept below it, t[i] and t[i + 1];
 * during backward op i: the inputs kept below it, t[i], and with prefetch the next offloaded
 * input below i:
 *   none: N + 1 tensors;   all: 2;   conv: (ReLU inputs below the last conv) + 2. */
static void memory_model(const vdnn_run *r, size_t model[A_NCATS])
{
    const net *n = r->n;
    const size_t s = arena_round(r->act_bytes), s32 = arena_round(r->f32_bytes),
                 w = arena_round(n->nparams * sizeof(float));
    memset(model, 0, A_NCATS * sizeof *model);
    model[A_PARAMS] = model[A_GRADS] = model[A_OPTIM] = w;
    model[A_WORKSPACE] = (r->dt == SL_F32 ? 2 : 3) * s32;
    model[A_DATA] = s32;
    int kept = 0, most = 0; /* kept: inputs below op i that stay on the device */
    for (int i = 0; i < n->nops; i++) {
        int fwd = kept + 2;
        int bwd = kept + 1 + (r->prefetch && next_offloaded(r, i) >= 0);
        most = fwd > most ? fwd : most;
        most = bwd > most ? bwd : most;
        if (!offloaded(r, i)) kept++;
    }
    model[A_ACTIV] = (size_t)most * s;
}

size_t vdnn_model_total(const vdnn_run *r)
{
    size_t model[A_NCATS], total = 0;
    memory_model(r, model);
    for (int c = 0; c < A_NCATS; c++) total += model[c];
    return total;
}

/* Bytes each way per step: every offloaded input once out, once back. */
static size_t bytes_model(const vdnn_run *r)
{
    size_t k = 0;
    for (int i = 0; i < r->n->nops; i++) k += (size_t)offloaded(r, i);
    return k * r->act_bytes;
}

void vdnn_setup(vdnn_run *r)
{
    const net *n = r->n;
    arena_open(&r->a, r->be, r->capacity, n->nops + 16);
    r->act_bytes = n->act_elems * sl_dtype_size(r->dt);
    r->f32_bytes = net_act_bytes(n);
    const size_t pbytes = n->nparams * sizeof(float);
    r->params = arena_alloc(&r->a, A_PARAMS, pbytes);
    r->grads = arena_alloc(&r->a, A_GRADS, pbytes);
    r->optim_state = arena_alloc(&r->a, A_OPTIM, pbytes);
    r->target = arena_alloc(&r->a, A_DATA, r->f32_bytes);
    r->dbuf[0] = arena_alloc(&r->a, A_WORKSPACE, r->f32_bytes);
    r->dbuf[1] = arena_alloc(&r->a, A_WORKSPACE, r->f32_bytes);
    r->wide = r->dt == SL_F32 ? NULL : arena_alloc(&r->a, A_WORKSPACE, r->f32_bytes);
    net_init_params(n, r->params);
    for (int i = 0; i <= n->nops; i++) r->ticket[i] = -1;
    for (int i = 0; i < n->nops; i++)
        if (offloaded(r, i)) r->host[i] = sl_k_host_alloc(r->be, SL_MEM_ACTIV, r->act_bytes);
    r->cp = copier_open(r->be, 2 * n->nops + 2);
    arena_reset_peaks(&r->a); /* the peaks of the steps, all of setup's tensors live */
}

void vdnn_teardown(vdnn_run *r)
{
    copier_close(r->cp);
    for (int i = 0; i < r->n->nops; i++) sl_k_host_free(r->be, r->host[i]);
    arena_close(&r->a);
}

void vdnn_models(const vdnn_run *r, size_t model[A_NCATS], size_t *bytes_each_way)
{
    memory_model(r, model);
    *bytes_each_way = bytes_model(r);
}

