/* perf_model.c — the arithmetic of the step-time model (perf_model.h): a schedule built by the
 * technique, run on the primitives' two timelines. No measuring here (train_perf.c does it). */
#include <math.h>
#include <string.h>

#include "perf_model.h"

static const char *const op_names[SL_PM_NOPS] = {"allreduce", "iallreduce", "ireduce_scatter", "iallgather", "p2p"};
const char *sl_pm_op_name(sl_pm_op op) { return op < SL_PM_NOPS ? op_names[op] : "?"; }

void sl_pm_init(sl_pm_sched *s, sl_dtype dt)
{
    memset(s, 0, sizeof *s);
    s->dt = dt;
}

static sl_pm_event *push(sl_pm_sched *s, sl_pm_ev_kind kind)
{
    if (s->nev == SL_PM_MAX_EVENTS) {
        s->overflow = 1;
        return NULL;
    }
    sl_pm_event *e = &s->ev[s->nev++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    return e;
}

static int same_shape(const sl_pm_gemm_shape *a, const sl_pm_gemm_shape *b)
{
    return a->ta == b->ta && a->tb == b->tb && a->m == b->m && a->n == b->n && a->k == b->k &&
           a->beta == b->beta && a->dt == b->dt;
}

void sl_pm_gemm(sl_pm_sched *s, int ta, int tb, int m, int n, int k, int beta, double count)
{
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return;
    const sl_pm_gemm_shape g = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .beta = beta != 0, .dt = s->dt};
    int i = 0;
    while (i < s->nshapes && !same_shape(&s->shapes[i], &g)) i++;
    if (i == s->nshapes) {
        if (i == SL_PM_MAX_GEMMS) {
            s->overflow = 1;
            return;
        }
        s->shapes[s->nshapes++] = g;
    }
    sl_pm_event *e = push(s, SL_PM_EV_GEMM);
    if (e) e->shape = i, e->amount = count;
}

void sl_pm_bytes(sl_pm_sched *s, double bytes)
{
    if (bytes <= 0) return;
    sl_pm_event *e = push(s, SL_PM_EV_BYTES);
    if (e) e->amount = bytes;
}

void sl_pm_idle(sl_pm_sched *s, double seconds)
{
    sl_pm_event *e = push(s, SL_PM_EV_IDLE);
    if (e) e->amount = seconds;
}

int sl_pm_start(sl_pm_sched *s, sl_pm_op op, double count)
{
    sl_pm_event *e = push(s, SL_PM_EV_START);
    if (!e) return -1;
    e->op = op;
    e->amount = count * (double)sl_dtype_size(s->dt);
    return s->nev - 1;
}

void sl_pm_wait(sl_pm_sched *s, int id)
{
    sl_pm_event *e = push(s, SL_PM_EV_WAIT);
    if (e) e->id = id;
}

void sl_pm_comm(sl_pm_sched *s, sl_pm_op op, double count) { sl_pm_wait(s, sl_pm_start(s, op, count)); }

double sl_pm_op_seconds(const sl_pm_prims *p, sl_pm_op op, double bytes)
{
    const double t = bytes > 0 ? p->alpha[op] + p->beta[op] * bytes : 0.0;
    return t > 0 ? t : 0.0; /* a fit to noise (one rank's in-place sum: nothing to do) may cross 0 */
}

double sl_pm_gemm_seconds(const sl_pm_prims *p, const sl_pm_gemm_shape *g)
{
    for (int i = 0; i < p->ngemm; i++)
        if (same_shape(&p->gemm[i], g)) return p->gemm_s[i];
    return NAN;
}

sl_pm_pred sl_pm_predict(const sl_pm_sched *s, const sl_pm_prims *p)
{
    sl_pm_pred r = {0};
    double shape_s[SL_PM_MAX_GEMMS];
    for (int i = 0; i < s->nshapes; i++) shape_s[i] = sl_pm_gemm_seconds(p, &s->shapes[i]);
    /* when each started operation ends on the communication timeline: computed at its START,
     * read at its WAIT (a WAIT always follows its START) */
    double end[SL_PM_MAX_EVENTS];
    unsigned char waited[SL_PM_MAX_EVENTS] = {0};
    double now = 0, comm_free = 0;
    for (int i = 0; i < s->nev; i++) {
        const sl_pm_event *e = &s->ev[i];
        switch (e->kind) {
        case SL_PM_EV_GEMM: {
            const double d = e->amount * shape_s[e->shape];
            r.gemm += d, now += d;
            break;
        }
        case SL_PM_EV_BYTES: {
            const double d = e->amount / p->bw;
            r.bytes += d, now += d;
            break;
        }
        case SL_PM_EV_IDLE:
            r.idle += e->amount, now += e->amount;
            break;
        case SL_PM_EV_START: {
            const double d = sl_pm_op_seconds(p, e->op, e->amount);
            const double start = now > comm_free ? now : comm_free;
            end[i] = comm_free = start + d;
            r.comm += d;
            if (!p->background) { /* it runs in full here: the rank is in the call */
                r.exposed += end[i] - now;
                now = end[i];
            }
            break;
        }
        case SL_PM_EV_WAIT:
            if (e->id < 0 || e->id >= i || s->ev[e->id].kind != SL_PM_EV_START) {
                r.step = NAN; /* a wait for nothing started: a defect of the schedule */
                break;
            }
            waited[e->id] = 1;
            if (end[e->id] > now) r.exposed += end[e->id] - now, now = end[e->id];
            break;
        }
    }
    for (int i = 0; i < s->nev; i++) /* what the step never waited for, it waits for at its end */
        if (s->ev[i].kind == SL_PM_EV_START && !waited[i] && end[i] > now) r.exposed += end[i] - now, now = end[i];
    r.compute = r.gemm + r.bytes;
    if (s->overflow || isnan(r.step)) {
        const double nan = NAN;
        return (sl_pm_pred){nan, nan, nan, nan, nan, nan, nan};
    }
    r.step = now; /* = compute + exposed + idle, in the order the timeline added them */
    return r;
}

const char *sl_pm_dominant(const sl_pm_pred *p)
{
    const double terms[] = {p->gemm, p->bytes, p->exposed, p->idle};
    static const char *const names[] = {"gemm", "elementwise", "exposed_comm", "idle"};
    int best = 0;
    for (int i = 1; i < 4; i++)
        if (terms[i] > terms[best]) best = i;
    return names[best];
}
