/* pass.c — one step of a parallel3d stage (state.h): the schedule's list of forwards and
 * backwards run in order, each micro-batch of each of the stage's chunks in a slot of its own,
 * its boundary activation sent forward and its gradient backward to the neighbouring stages
 * (non-blocking point to point in the pp group, round the ring with interleaved; the wait for
 * a neighbour's is the pipeline's bubble), --recompute's forward again before a backward; then
 * the replicas' exchange and the update (replicas.c). */
#include <string.h>

#include "state.h"

/* Puts slot sl's activations (its chunk's layers) and the micro-batch's size in place for
 * tp_gpt.c's layers, and t->lo at its first sequence (the tokens' and the dropout masks'
 * numbering). */
static void install(sl_train *t, p3 *q, slot *sl)
{
    mg *s = &q->s;
    int first, count;
    micro(q, sl->mb, &first, &count);
    t->lo = first;
    s->B = count, s->N = count * s->T, s->Nl = s->N;
    const p3_chunk *c = &q->ch[sl->ck];
    for (int i = 0; i <= c->b1 - c->b0; i++) s->res[c->b0 + i] = sl->res[i];
    for (int i = 0; i < c->b1 - c->b0; i++) s->blk[c->b0 - 1 + i] = sl->blk[i];
    s->tok = sl->tok, s->tgt = sl->tgt, s->tokl = sl->tokl, s->htok = sl->htok, s->htgt = sl->htgt;
}

static void wait_req(sl_train *t, sl_coll_req **r, const char *name)
{
    if (!*r) return;
    const double t0 = sl_now();
    sl_train_coll_ok(sl_coll_wait(*r), "sl_coll_wait");
    *r = NULL;
    sl_train_blocking(t, name, t0);
}

/* A boundary tensor of the micro-batch from stage `from`, waited for (the time is the
 * pipeline's bubble: this stage idles until its neighbour has it). */
static void recv_boundary(sl_train *t, p3 *q, void *buf, int from, int tag, const char *name)
{
    const double t0 = sl_now();
    sl_coll_req *r = NULL;
    sl_train_coll_ok(sl_coll_irecv(q->pp, buf, (size_t)q->s.N * q->s.C, q->s.dt, from, tag, &r), name);
    sl_train_coll_ok(sl_coll_wait(r), name);
    sl_train_span(t, SL_PHASE_BUBBLE, name, t0, sl_now());
}

static void send_boundary(sl_train *t, p3 *q, const void *buf, int to, int tag, sl_coll_req **r, const char *name)
{
    sl_k_sync(t->be);
    const unsigned long long b0 = sl_comm_bytes_sent(q->pp);
    const double t0 = sl_now();
    sl_train_coll_ok(sl_coll_isend(q->pp, buf, (size_t)q->s.N * q->s.C, q->s.dt, to, tag, r), name);
    sl_train_blocking(t, name, t0);
    if (q->s.counting) q->sent_pp += (double)(sl_comm_bytes_sent(q->pp) - b0);
}

/* The neighbouring stages in the pp group: chunks go round the ring of stages (interleaved:
 * the last stage's chunk k feeds stage 0's chunk k + 1). */
static int next_stage(const p3 *q) { return (q->p + 1) % q->P; }
static int prev_stage(const p3 *q) { return (q->p + q->P - 1) % q->P; }

/* F of micro-batch mb in the stage's chunk k. */
static void forward(sl_train *t, p3 *q, int mb, int k)
{
    mg *s = &q->s;
    const p3_chunk *c = &q->ch[k];
    slot *sl = NULL;
    for (int i = 0; i < q->nslots && !sl; i++)
        if (q->slots[i].mb < 0) sl = &q->slots[i];
    if (!sl) SL_FATAL("parallel3d: stage %d has no free slot for micro-batch %d of chunk %d", q->p, mb, k);
    wait_req(t, &sl->sq_act, "send activation"); /* its last micro-batch's output has left */
    sl->mb = mb, sl->ck = k;
    q->slot_of[mb * q->v + k] = (int)(sl - q->slots);
    install(t, q, sl);
    if (first_chunk(q, k) || last_chunk(q, k)) mg_load(t, s);
    if (first_chunk(q, k)) mg_embedding_forward(t, s);
    else recv_boundary(t, q, s->res[c->b0], prev_stage(q), p3_tag(mb, q->v, k, 0), "recv activation");
    for (int l = c->b0; l < c->b1; l++) mg_block_forward(t, s, l);
    if (!last_chunk(q, k))
        send_boundary(t, q, s->res[c->b1], next_stage(q), p3_tag(mb, q->v, last_stage(q) ? k + 1 : k, 0), &sl->sq_act,
                      "send activation");
}

/* B of micro-batch mb in the stage's chunk k. */
static void backward(sl_train *t, p3 *q, int mb, int k)
{
    mg *s = &q->s;
    const p3_chunk *c = &q->ch[k];
    slot *sl = &q->slots[q->slot_of[mb * q->v + k]];
    install(t, q, sl);
    wait_req(t, &sl->sq_grad, "send gradient");
    if (q->recompute == RC_FULL) { /* the chunk's forward again from its kept input (its output's send has left) */
        wait_req(t, &sl->sq_act, "send activation");
        for (int l = c->b0; l < c->b1; l++) mg_block_forward(t, s, l);
    }
    int cur = 0;
    if (last_chunk(q, k)) {
        const double loss = mg_head(t, s, sl_task_loss_norm(t->task, t->global_batch), loss_scale(q), s->dres[0]);
        if (q->tr == 0) t->loss += loss; /* every rank of the group has it: counted once */
        p3_gradient_done(t, q, mb, s->L + 1);
    } else {
        recv_boundary(t, q, s->dres[0], next_stage(q), p3_tag(mb, q->v, k, 1), "recv gradient");
    }
    for (int l = c->b1 - 1; l >= c->b0; l--, cur = !cur) {
        if (q->recompute == RC_SELECTIVE) mg_attention_again(t, s, l); /* into the shared buffer */
        mg_block_backward(t, s, l, s->dres[cur], l == c->b0 && !first_chunk(q, k) ? sl->dsend : s->dres[!cur]);
        p3_gradient_done(t, q, mb, l);
    }
    if (first_chunk(q, k)) {
        mg_embedding_backward(t, s, s->dres[cur]);
        p3_gradient_done(t, q, mb, 0);
    } else {
        send_boundary(t, q, sl->dsend, prev_stage(q), p3_tag(mb, q->v, q->p == 0 ? k - 1 : k, 1), &sl->sq_grad,
                      "send gradient");
    }
    sl->mb = -1;
}

void p3_step(sl_train *t)
{
    p3 *q = t->state;
    mg *s = &q->s;
    s->counting = 1;
    p3_grads_zero(t, q);
    int live = 0;
    for (int i = 0; i < q->nops; i++) {
        if (q->ops[i].kind == 'F') forward(t, q, q->ops[i].mb, q->ops[i].chunk), live++;
        else backward(t, q, q->ops[i].mb, q->ops[i].chunk), live--;
        if (live > q->inflight_peak) q->inflight_peak = live;
    }
    for (int k = 0; k < q->nslots; k++) {
        wait_req(t, &q->slots[k].sq_act, "send activation");
        wait_req(t, &q->slots[k].sq_grad, "send gradient");
    }
    t->lo = q->lo;
    p3_update(t, q);
    s->counting = 0;
}
