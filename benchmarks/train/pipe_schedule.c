/* pipe_schedule.c — the pipeline schedules (gpipe, 1f1b, interleaved, pipedream) as one list of
 * operations F(mb) / B(mb) per stage, the dependency simulation that times them (one unit per
 * F, two per B) and the text timeline drawn from it. Used by pipeline.c's executor and its
 * pipedream reference, and by parallel3d's stages. */
#include <stdio.h>
#include <stdlib.h>

#include "pipe_schedule.h"
#include "sl_error.h"

const char *const schedule_names[NSCHEDULES] = SL_ENUM_NAMES(SCHEDULES);

/* The schedule as a list of operations ------------------------------------------------- */

static int op_add(op *ops, int n, char kind, int mb, int chunk)
{
    ops[n] = (op){kind, mb, chunk};
    return n + 1;
}

static int build_gpipe(const geometry *g, int s, op *ops)
{
    (void)s;
    int n = 0;
    for (int j = 0; j < g->m; j++) n = op_add(ops, n, 'F', j, 0);
    for (int j = 0; j < g->m; j++) n = op_add(ops, n, 'B', j, 0);
    return n;
}

/* 1F1B on `count` micro-batches: w warm-up forwards, alternate, drain. */
static int one_f_one_b(int count, int w, op *ops)
{
    int n = 0, f = 0, b = 0;
    if (w > count) w = count;
    while (f < w) n = op_add(ops, n, 'F', f++, 0);
    while (f < count) {
        n = op_add(ops, n, 'F', f++, 0);
        n = op_add(ops, n, 'B', b++, 0);
    }
    while (b < count) n = op_add(ops, n, 'B', b++, 0);
    return n;
}

static int build_1f1b(const geometry *g, int s, op *ops) { return one_f_one_b(g->m, g->p - s - 1, ops); }

/* The whole stream of nsteps * m micro-batches, as 1F1B without a flush. */
static int build_pipedream(const geometry *g, int s, op *ops)
{
    return one_f_one_b(g->nsteps * g->m, g->p - s - 1, ops);
}

/* Megatron's interleaved order: micro-batches in groups of p; the k-th forward of a stage is
 * chunk (k / group) % v of the group's micro-batches, the backwards the same with the chunks
 * reversed; (p-s-1)*2 + (v-1)*p warm-up forwards, then 1F1B, then drain. A last group smaller
 * than p (m not a multiple of p) is taken as one group of its own size. */
static void interleaved_order(const geometry *g, int backward, int *mbs, int *chunks)
{
    int k = 0;
    for (int g0 = 0; g0 < g->m; g0 += g->p) {
        int size = g->m - g0 < g->p ? g->m - g0 : g->p;
        for (int c = 0; c < g->v; c++)
            for (int i = 0; i < size; i++, k++) {
                mbs[k] = g0 + i;
                chunks[k] = backward ? g->v - 1 - c : c;
            }
    }
}

static int build_interleaved(const geometry *g, int s, op *ops)
{
    const int total = g->m * g->v;
    int *fm = malloc(4 * (size_t)total * sizeof *fm);
    if (!fm) SL_FATAL("out of memory");
    int *fc = fm + total, *bm = fc + total, *bc = bm + total;
    interleaved_order(g, 0, fm, fc);
    interleaved_order(g, 1, bm, bc);
    int w = (g->p - s - 1) * 2 + (g->v - 1) * g->p, n = 0, f = 0, b = 0;
    if (w > total) w = total;
    while (f < w) { n = op_add(ops, n, 'F', fm[f], fc[f]); f++; }
    while (f < total) {
        n = op_add(ops, n, 'F', fm[f], fc[f]); f++;
        n = op_add(ops, n, 'B', bm[b], bc[b]); b++;
    }
    while (b < total) { n = op_add(ops, n, 'B', bm[b], bc[b]); b++; }
    free(fm);
    return n;
}

const build_fn builders[NSCHEDULES] = {build_gpipe, build_1f1b, build_interleaved, build_pipedream};

int ops_capacity(const geometry *g) { return 2 * g->v * g->m * g->nsteps; }

/* Times every stage's list by its dependencies: F(mb) of global chunk c after F(mb) of c-1;
 * B(mb) of c after B(mb) of c+1 (the last chunk's after its own F). One unit per F, two per B,
 * each stage in list order, starting as soon as its inputs are there. ops[s] has n[s] entries;
 * start[s][i] receives each start. Returns the makespan, or -1 if the lists deadlock. */
int simulate(const geometry *g, op *const *ops, const int *n, int **start)
{
    const int p = g->p, G = p * g->v, M = g->m * g->nsteps;
    int *fin = malloc(2 * (size_t)M * G * sizeof *fin), *next = calloc((size_t)p, sizeof *next),
        *freeat = calloc((size_t)p, sizeof *freeat);
    if (!fin || !next || !freeat) SL_FATAL("out of memory");
    for (size_t i = 0; i < 2 * (size_t)M * G; i++) fin[i] = -1;
    int left = 0, span = 0;
    for (int s = 0; s < p; s++) left += n[s];
    while (left > 0) {
        int progressed = 0;
        for (int s = 0; s < p; s++) {
            while (next[s] < n[s]) {
                const op *o = &ops[s][next[s]];
                int c = o->chunk * p + s, dep;
                if (o->kind == 'F') dep = c > 0 ? fin[(size_t)o->mb * G + c - 1] : 0;
                else dep = c < G - 1 ? fin[(size_t)M * G + (size_t)o->mb * G + c + 1] : fin[(size_t)o->mb * G + c];
                if (dep < 0) break;
                int t0 = dep > freeat[s] ? dep : freeat[s], t1 = t0 + (o->kind == 'F' ? 1 : 2);
                fin[(o->kind == 'B' ? (size_t)M * G : 0) + (size_t)o->mb * G + c] = t1;
                if (start) start[s][next[s]] = t0;
                freeat[s] = t1;
                span = t1 > span ? t1 : span;
                next[s]++;
                left--;
                progressed = 1;
            }
        }
        if (!progressed) { span = -1; break; }
    }
    free(fin);
    free(next);
    free(freeat);
    return span;
}

/* One line per stage: a token per time unit, F<mb> (interleaved: F<mb><chunk letter>), a B's
 * first unit B<mb> and its second '-', idle '.'. pipedream: its first step. */
void print_timeline(const geometry *g0, int sched, int nshow)
{
    geometry g = *g0;
    if (sched != S_PIPEDREAM) g.nsteps = 1;
    const int p = g.p;
    op **ops = malloc((size_t)p * sizeof *ops);
    int *n = malloc((size_t)p * sizeof *n), **start = malloc((size_t)p * sizeof *start);
    if (!ops || !n || !start) SL_FATAL("out of memory");
    for (int s = 0; s < p; s++) {
        ops[s] = malloc((size_t)ops_capacity(&g) * sizeof **ops);
        start[s] = malloc((size_t)ops_capacity(&g) * sizeof **start);
        if (!ops[s] || !start[s]) SL_FATAL("out of memory");
        n[s] = builders[sched](&g, s, ops[s]);
        if (sched == S_PIPEDREAM && n[s] > nshow) n[s] = nshow; /* the ops of the first step */
    }
    int span = simulate(&g, ops, n, start);
    if (span < 0) SL_FATAL("%s: the schedule deadlocks for p=%d m=%d v=%d", schedule_names[sched], p, g.m, g.v);
    printf("# timeline %s p=%d m=%d%s: one token per unit, F 1 unit, B 2 (second '-'), '.' idle\n",
           schedule_names[sched], p, g.m, g.v > 1 ? " (chunks a, b, ...)" : "");
    char cell[32];
    for (int s = 0; s < p; s++) {
        printf("# s%d", s);
        int i = 0;
        for (int tu = 0; tu < span; tu++) {
            if (i < n[s] && start[s][i] == tu) {
                const op *o = &ops[s][i];
                if (g.v > 1) snprintf(cell, sizeof cell, "%c%d%c", o->kind, o->mb, 'a' + o->chunk);
                else snprintf(cell, sizeof cell, "%c%d", o->kind, o->mb);
                printf(" %s", cell);
                if (o->kind == 'B') { printf(" -"); tu++; }
                i++;
            } else {
                printf(" .");
            }
        }
        printf("\n");
        free(ops[s]);
        free(start[s]);
    }
    fflush(stdout);
    free(ops);
    free(n);
    free(start);
}
