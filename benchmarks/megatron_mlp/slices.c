/* slices.c — a tensor-parallel rank's slices of the flat parameter vector (slices.h). */
#include <string.h>

#include "slices.h"

size_t mm_slice_per_block(const sl_mlp *m, int t)
{
    const size_t h = (size_t)m->dims[0], c = (size_t)m->dims[1] / (size_t)t;
    return 2 * c * h + c + h;
}

void mm_slice_runs(const sl_mlp *m, int t, int r, mm_run_fn fn, void *arg)
{
    const size_t h = (size_t)m->dims[0], f = (size_t)m->dims[1], c = f / (size_t)t, per = mm_slice_per_block(m, t);
    for (int i = 0; i < m->nlayers / 2; i++) {
        const int la = 2 * i, lb = 2 * i + 1;
        const size_t base = (size_t)i * per;
        fn(m->w_off[la] + (size_t)r * c * h, base, c * h, arg);   /* A_r */
        fn(m->b_off[la] + (size_t)r * c, base + c * h, c, arg);   /* a_r */
        for (size_t j = 0; j < h; j++)                             /* B_r, row by row */
            fn(m->w_off[lb] + j * f + (size_t)r * c, base + c * h + c + j * c, c, arg);
        fn(m->b_off[lb], base + c * h + c + h * c, h, arg);        /* b */
    }
}

typedef struct init_arg {
    const sl_mlp *m;
    uint64_t seed;
    float *local;
} init_arg;

static void init_run(size_t full, size_t local, size_t count, void *arg)
{
    init_arg *a = arg;
    sl_mlp_init_params(a->m, a->seed, full, count, a->local + local);
}

void mm_slice_init(const sl_mlp *m, int t, int r, uint64_t seed, float *local)
{
    init_arg a = {m, seed, local};
    mm_slice_runs(m, t, r, init_run, &a);
}

typedef struct scatter_arg {
    const float *local;
    float *full;
} scatter_arg;

static void scatter_run(size_t full, size_t local, size_t count, void *arg)
{
    scatter_arg *a = arg;
    memcpy(a->full + full, a->local + local, count * sizeof(float));
}

void mm_slice_scatter(const sl_mlp *m, int t, int r, const float *local, float *full)
{
    scatter_arg a = {local, full};
    mm_slice_runs(m, t, r, scatter_run, &a);
}
