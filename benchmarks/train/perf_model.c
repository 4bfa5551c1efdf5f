/* perf_model.c — the arithmetic of the step-time model (perf_model.h): a schedule built by the
 * technique, run on the primitives' two timelines. No measuring here (train_perf.c does it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_model.h"

static const char *const op_names[SL_PM_NOPS] = {"allreduce", "iallreduce", "ireduce_scatter", "iallgather", "p2p", "h2d"};
const char *sl_pm_op_name(sl_pm_op op) { return op < SL_PM_NOPS ? op_names[op] : "?"; }

void sl_pm_init(sl_pm_sched *s, sl_dtype dt)
{
    memset(s, 0, sizeof *s);
    s->dt = dt;
    s->nlanes = 1;
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
    e->lane = s->lane;
    e->peer = -1;
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

int sl_pm_start(sl_pm_sched *s, sl_pm_op op, double count)
{
    sl_pm_event *e = push(s, SL_PM_EV_START);
    if (!e) return -1;
    e->op = op;
    e->group = s->group;
    e->amount = count * (double)sl_dtype_size(s->dt);
    return s->nev - 1;
}

void sl_pm_wait(sl_pm_sched *s, int id)
{
    sl_pm_event *e = push(s, SL_PM_EV_WAIT);
    if (e) e->id = id;
}

void sl_pm_comm(sl_pm_sched *s, sl_pm_op op, double count) { sl_pm_wait(s, sl_pm_start(s, op, count)); }

int sl_pm_copy(sl_pm_sched *s, double bytes)
{
    const int id = sl_pm_start(s, SL_PM_H2D, 0);
    if (id >= 0) s->ev[id].amount = bytes;
    return id;
}

void sl_pm_group(sl_pm_sched *s, int g, const char *name, struct sl_comm *comm, int size)
{
    if (g < 0 || g >= SL_PM_MAX_GROUPS) {
        s->overflow = 1;
        return;
    }
    s->group = g;
    if (g == 0) return;
    s->group_comm[g] = comm;
    s->group_size[g] = size;
    snprintf(s->group_name[g], sizeof s->group_name[g], "%s", name ? name : "group");
}

void sl_pm_lane(sl_pm_sched *s, int lane)
{
    if (lane < 0 || lane >= SL_PM_MAX_LANES) {
        s->overflow = 1;
        return;
    }
    s->lane = lane;
    if (lane >= s->nlanes) s->nlanes = lane + 1;
}

int sl_pm_send(sl_pm_sched *s, int to, int tag, double count)
{
    const int id = sl_pm_start(s, SL_PM_P2P, count);
    if (id >= 0) s->ev[id].peer = to, s->ev[id].tag = tag;
    return id;
}

void sl_pm_recv(sl_pm_sched *s, int from, int tag)
{
    sl_pm_event *e = push(s, SL_PM_EV_RECV);
    if (e) e->peer = from, e->tag = tag;
}

double sl_pm_op_seconds(const sl_pm_prims *p, sl_pm_op op, double bytes)
{
    const double t = bytes > 0 ? p->alpha[op] + p->beta[op] * bytes : 0.0;
    return t > 0 ? t : 0.0; /* a fit to noise (one rank's in-place sum: nothing to do) may cross 0 */
}

double sl_pm_group_op_seconds(const sl_pm_prims *p, int g, sl_pm_op op, double bytes)
{
    if (g <= 0 || g >= SL_PM_MAX_GROUPS) return sl_pm_op_seconds(p, op, bytes);
    const double t = bytes > 0 ? p->group_alpha[g][op] + p->group_beta[g][op] * bytes : 0.0;
    return t > 0 ? t : 0.0;
}

double sl_pm_gemm_seconds(const sl_pm_prims *p, const sl_pm_gemm_shape *g)
{
    for (int i = 0; i < p->ngemm; i++)
        if (same_shape(&p->gemm[i], g)) return p->gemm_s[i];
    return NAN;
}

/* The sends, ordered by (sending lane, receiving lane, tag), for the receives to find theirs. */
static const sl_pm_sched *sort_sched;
static int send_key_cmp(const sl_pm_event *a, int a_idx, const sl_pm_event *b, int b_idx)
{
    if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
    if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
    if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
    return (a_idx > b_idx) - (a_idx < b_idx);
}
static int send_cmp(const void *x, const void *y)
{
    const int i = *(const int *)x, j = *(const int *)y;
    return send_key_cmp(&sort_sched->ev[i], i, &sort_sched->ev[j], j);
}

/* The index of the send a receive (event r) waits for, or -1. */
static int find_send(const sl_pm_sched *s, const int *sends, int nsends, int r)
{
    const sl_pm_event key = {.lane = s->ev[r].peer, .peer = s->ev[r].lane, .tag = s->ev[r].tag};
    int lo = 0, hi = nsends; /* the first send not below the key */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (send_key_cmp(&s->ev[sends[mid]], sends[mid], &key, -1) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == nsends) return -1;
    const sl_pm_event *e = &s->ev[sends[lo]];
    return e->lane == key.lane && e->peer == key.peer && e->tag == key.tag ? sends[lo] : -1;
}

/* One lane's timeline as the prediction runs it. */
typedef struct lane_state {
    int next;                  /* its next event (in the schedule's order) */
    double now, comm_free[2]; /* the network's timeline, the copy engine's (SL_PM_H2D) */
    sl_pm_pred r;
} lane_state;

sl_pm_pred sl_pm_predict(const sl_pm_sched *s, const sl_pm_prims *p)
{
    const double nan = NAN;
    const sl_pm_pred none = {nan, nan, nan, nan, nan, nan, nan};
    if (s->overflow) return none;
    double shape_s[SL_PM_MAX_GEMMS];
    for (int i = 0; i < s->nshapes; i++) shape_s[i] = sl_pm_gemm_seconds(p, &s->shapes[i]);
    /* when each started operation ends on its lane's communication timeline: computed at its
     * START, read at its WAIT or a RECV of it (a WAIT follows its START in the lane) */
    const int n = s->nev, L = s->nlanes > 0 ? s->nlanes : 1;
    double *end = malloc((size_t)(n + 1) * sizeof *end);
    unsigned char *waited = calloc((size_t)n + 1, 1), *done = calloc((size_t)n + 1, 1);
    int *sends = malloc((size_t)(n + 1) * sizeof *sends), *match = malloc((size_t)(n + 1) * sizeof *match);
    lane_state lanes[SL_PM_MAX_LANES];
    memset(lanes, 0, sizeof lanes);
    int nsends = 0, bad = !end || !waited || !done || !sends || !match;
    for (int i = 0; !bad && i < n; i++)
        if (s->ev[i].kind == SL_PM_EV_START && s->ev[i].peer >= 0) sends[nsends++] = i;
    if (!bad) {
        sort_sched = s;
        qsort(sends, (size_t)nsends, sizeof *sends, send_cmp);
        for (int i = 0; i < n; i++) match[i] = s->ev[i].kind == SL_PM_EV_RECV ? find_send(s, sends, nsends, i) : -1;
    }
    /* Each lane runs its events in order until a receive whose send has not run yet; the lanes
     * take turns until every event has run, or none can (they wait for each other). */
    for (int progressed = 1, left = n; !bad && left > 0 && progressed;) {
        progressed = 0;
        for (int l = 0; l < L && !bad; l++) {
            lane_state *ls = &lanes[l];
            sl_pm_pred *r = &ls->r;
            for (; ls->next < n; ls->next++) {
                const int i = ls->next;
                const sl_pm_event *e = &s->ev[i];
                if (e->lane != l) continue;
                if (e->kind == SL_PM_EV_RECV) {
                    if (match[i] < 0) {
                        bad = 1; /* a receive of nothing sent: a defect of the schedule */
                        break;
                    }
                    if (!done[match[i]]) break; /* its sender has not got there yet */
                    if (end[match[i]] > ls->now) r->idle += end[match[i]] - ls->now, ls->now = end[match[i]];
                } else if (e->kind == SL_PM_EV_GEMM) {
                    const double d = e->amount * shape_s[e->shape];
                    r->gemm += d, ls->now += d;
                } else if (e->kind == SL_PM_EV_BYTES) {
                    const double d = e->amount / p->bw;
                    r->bytes += d, ls->now += d;
                } else if (e->kind == SL_PM_EV_START) {
                    const double d = sl_pm_group_op_seconds(p, e->group, e->op, e->amount);
                    double *free_at = &ls->comm_free[e->op == SL_PM_H2D];
                    const double start = ls->now > *free_at ? ls->now : *free_at;
                    end[i] = *free_at = start + d;
                    r->comm += d;
                    if (!p->background && !((p->background_ops >> e->op) & 1)) { /* it runs in full here: the rank is in the call */
                        r->exposed += end[i] - ls->now;
                        ls->now = end[i];
                    }
                } else { /* WAIT */
                    if (e->id < 0 || e->id >= i || s->ev[e->id].kind != SL_PM_EV_START || s->ev[e->id].lane != l) {
                        bad = 1; /* a wait for nothing started on this lane */
                        break;
                    }
                    waited[e->id] = 1;
                    if (end[e->id] > ls->now) r->exposed += end[e->id] - ls->now, ls->now = end[e->id];
                }
                done[i] = 1;
                left--;
                progressed = 1;
            }
        }
        if (!progressed && left > 0) bad = 1; /* the lanes wait for each other */
    }
    int last = 0;
    for (int l = 0; !bad && l < L; l++) {
        lane_state *ls = &lanes[l];
        for (int i = 0; i < n; i++) /* what the lane never waited for, it waits for at its end */
            if (s->ev[i].lane == l && s->ev[i].kind == SL_PM_EV_START && !waited[i] && end[i] > ls->now)
                ls->r.exposed += end[i] - ls->now, ls->now = end[i];
        ls->r.compute = ls->r.gemm + ls->r.bytes;
        ls->r.step = ls->now; /* = compute + exposed + idle, in the order the timeline added them */
        if (ls->now > lanes[last].now) last = l;
    }
    free(end), free(waited), free(done), free(sends), free(match);
    return bad ? none : lanes[last].r;
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
