/* train_compute.c — sleep mode (sl_compute.h): the --compute option, the sleeps that stand in
 * for a technique's measured pieces of work, and the driver's part around the steps (the
 * barriers that sleep, the calibration's turns, the replay with real compute). */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "sl_compute.h"
#include "train_internal.h"

static int opt_compute; /* 0 real, 1 sleep */

static const sl_opt compute_opts[] = {
    {"compute", 0, SL_OPT_CHOICE, &opt_compute, 0, 0, "real|sleep", 0,
     "timed steps compute, or sleep each layer's measured time (default real)"},
    {0},
};
const sl_opt_group train_compute_option_group = {"compute", compute_opts};

int sl_compute_sleep_mode(void) { return opt_compute == 1; }

/* Open MPI yields the core in every call that finds nothing to do when ranks outnumber cores
 * (mpi_yield_when_idle defaults to 1 when oversubscribed), so a sleeping rank's poll of a
 * message lost its core to another process for tens of microseconds after each piece (30-60 us
 * gaps between a pipeline stage's forward and its send in the trace). Sleep mode never blocks
 * inside MPI in a timed step (it polls between sleeps), so it asks for no yield, unless the
 * user chose (read at MPI_Init, hence before the options are parsed). */
void train_compute_env(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--compute=sleep") == 0 ||
            (strcmp(argv[i], "--compute") == 0 && i + 1 < argc && strcmp(argv[i + 1], "sleep") == 0))
            setenv("OMPI_MCA_mpi_yield_when_idle", "0", 0);
}

void train_compute_validate(sl_ctx *ctx)
{
    if (opt_compute != 1) return;
    if (ctx->opt.dtypes & ~(1u << SL_F32))
        sl_usage_error("--compute sleep: with -d f16|bf16 not available (it sleeps the f32 layers' "
                       "measured times); use --compute real");
    if (ctx->opt.warmup < 1)
        sl_usage_error("--compute sleep: needs -w 1 or more (the warm-up steps measure each layer)");
    /* Sleeps of a tenth of a millisecond must end on time: Linux lets a sleep overrun by the
     * thread's timer slack (50 us by default), as much as a small layer's compute. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

/* The clock ---------------------------------------------------------------------------- */

void sl_compute_clock_init(sl_compute_clock *c, int npieces, int (*progress)(void *), void *arg)
{
    memset(c, 0, sizeof *c);
    c->shortest = calloc((size_t)npieces, sizeof *c->shortest);
    if (!c->shortest) SL_FATAL("out of memory for %d pieces' times", npieces);
    c->npieces = npieces;
    c->progress = progress;
    c->arg = arg;
}

void sl_compute_clock_free(sl_compute_clock *c)
{
    free(c->shortest);
    c->shortest = NULL;
}

static int progress(sl_compute_clock *c) { return c->progress ? c->progress(c->arg) : 0; }

/* How late nanosleep wakes, a running mean (tens of microseconds on a virtual machine, even
 * with a timer slack of 1 us: as much as a small layer's compute). */
static double wake_late = 20e-6;

/* Sleeps s seconds in slices, progressing the sends in flight between them: of at most 100 us,
 * or 10 us while a send is in flight (a message above the eager limit moves only when its
 * sender answers the receiver inside MPI: polled every 100 us, each pipeline boundary message
 * arrived some 50 us late, a quarter of an operation). Each slice asks for the time left less
 * how late a wake-up has been, and it stops when less than half a wake-up is left, so that it
 * ends on time on average without spinning: a plain sleep of the time left overran every
 * operation by one wake-up (about 30 us of 100). */
static void sleep_for(sl_compute_clock *c, double s)
{
    const double end = sl_now() + s;
    int pending = progress(c);
    for (double now = sl_now(); end - now > 0.5 * wake_late; now = sl_now()) {
        double slice = end - now - wake_late, most = pending ? 1e-5 : 1e-4;
        slice = slice > most ? most : slice < 1e-6 ? 1e-6 : slice;
        nanosleep(&(struct timespec){.tv_nsec = (long)(slice * 1e9)}, NULL);
        double late = sl_now() - now - slice; /* a wake-up that waited for a core is no measure */
        wake_late += 0.05 * ((late < 0 ? 0 : late > 50e-6 ? 50e-6 : late) - wake_late);
        pending = progress(c);
    }
}

/* Slept, the shortest time the piece took (the shortest, because with more ranks than cores
 * the others are inflated by waiting for a core). */
double sl_compute_piece_begin(sl_train *t, sl_compute_clock *c, int piece)
{
    const double t0 = sl_now();
    if (t->sleeping) sleep_for(c, c->shortest[piece]);
    return t0;
}

void sl_compute_piece_end(sl_train *t, sl_compute_clock *c, int piece, sl_phase phase, const char *name,
                          double t0)
{
    if (!t->sleeping) sl_k_sync(t->be);
    const double t1 = sl_now();
    c->busy += t1 - t0;
    if (!t->sleeping) sl_compute_measured(c, piece, t1 - t0);
    sl_train_span(t, phase, name, t0, t1);
    progress(c);
}

void sl_compute_sleep_span(sl_train *t, sl_compute_clock *c, double seconds, sl_phase phase, const char *name)
{
    const double t0 = sl_now();
    sleep_for(c, seconds);
    const double t1 = sl_now();
    c->busy += t1 - t0;
    sl_train_span(t, phase, name, t0, t1);
    progress(c);
}

void sl_compute_measured(sl_compute_clock *c, int piece, double seconds)
{
    if (c->shortest[piece] == 0 || seconds < c->shortest[piece]) c->shortest[piece] = seconds;
}

void sl_compute_nap(sl_compute_clock *c)
{
    progress(c);
    nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
}

int sl_compute_sleep_layers(sl_train *t, sl_compute_clock *c, int l0, int l1, int backward, int loss,
                            sl_phase phase, const char *name)
{
    if (!t->sleeping) return 0;
    double s = loss ? c->shortest[SL_COMPUTE_LOSS] : 0;
    for (int l = l0; l < l1; l++) s += c->shortest[backward ? SL_COMPUTE_BACKWARD(l) : SL_COMPUTE_FORWARD(l)];
    sl_compute_sleep_span(t, c, s, phase, name);
    return 1;
}

void sl_compute_calibrate_mlp(sl_train *t, sl_compute_clock *c, int nranges, const int *l0, const int *l1,
                              const float *const *params, int rows, int loss, size_t nparams)
{
    const sl_mlp *m = t->m;
    int width = m->dims[m->nlayers];
    for (int i = 0; i < nranges; i++)
        for (int l = l0[i]; l <= l1[i]; l++) width = m->dims[l] > width ? m->dims[l] : width;
    const size_t act = (size_t)rows * width;
    float *buf[5];
    for (int i = 0; i < 5; i++) {
        buf[i] = sl_k_malloc(t->be, SL_MEM_OTHER, act * sizeof(float) + 1);
        sl_k_memset0(t->be, buf[i], act * sizeof(float));
    }
    float *big = sl_k_malloc(t->be, SL_MEM_OTHER, 3 * nparams * sizeof(float) + 1);
    sl_k_memset0(t->be, big, 3 * nparams * sizeof(float));
    for (int rep = 0; rep < 30; rep++) {
        double t0;
        for (int i = 0; i < nranges; i++)
            for (int l = l0[i]; l < l1[i]; l++) {
                const float *lp = params[i] + (m->w_off[l] - m->w_off[l0[i]]);
                t0 = sl_now();
                sl_mlp_layer_forward(m, l, rows, lp, buf[0], buf[1], buf[2]);
                sl_k_sync(t->be);
                sl_compute_measured(c, SL_COMPUTE_FORWARD(l), sl_now() - t0);
                t0 = sl_now();
                sl_mlp_layer_backward(m, l, rows, lp, buf[0], buf[1], buf[3], big, l > 0 ? buf[4] : NULL);
                sl_k_sync(t->be);
                sl_compute_measured(c, SL_COMPUTE_BACKWARD(l), sl_now() - t0);
            }
        if (loss) {
            sl_mlp_acts a = {.batch = rows};
            a.x[m->nlayers] = buf[0];
            a.dbuf[m->nlayers & 1] = buf[1];
            t0 = sl_now();
            train_loss_f32(t, &a, buf[2]);
            sl_compute_measured(c, SL_COMPUTE_LOSS, sl_now() - t0);
        }
        sl_optim so = sl_optim_for_step(&t->optim, 0);
        t0 = sl_now();
        sl_optim_step(t->be, &so, nparams, big, big + nparams, big + 2 * nparams);
        sl_k_sync(t->be);
        sl_compute_measured(c, SL_COMPUTE_OPTIM, sl_now() - t0);
    }
    for (int i = 0; i < 5; i++) sl_k_free(t->be, buf[i]);
    sl_k_free(t->be, big);
}

/* The driver's part ------------------------------------------------------------------------ */

/* Waits for every rank without spinning (MPI_Ibarrier, polled between sleeps). A rank spinning
 * in MPI_Barrier holds a core that a rank still sleeping through its work needs to wake on
 * time when there are more ranks than cores, and spinning ranks are released from a barrier up
 * to a scheduler slice (about 1 ms) apart. */
static void quiet_barrier(MPI_Comm comm, long poll_ns)
{
    MPI_Request req;
    SL_CHECK_MPI(MPI_Ibarrier(comm, &req));
    sl_mpi_wait_quietly(&req, poll_ns);
}

static MPI_Comm world_of(const sl_train *t) { return t->baseline ? MPI_COMM_SELF : t->ctx->comm; }

void train_compute_before_step(sl_train *t)
{
    t->sleeping = opt_compute == 1 && t->tech->sleep_mode && t->step >= (int)t->ctx->opt.warmup;
    if (t->sleeping) quiet_barrier(world_of(t), 20000); /* the driver's barrier released ranks apart */
}

/* Calibration, after the warm-up steps: each rank in turn runs the technique's calibrate, its
 * pieces alone, the others waiting without spinning. In the warm-up steps every rank computes
 * at once on fewer cores than ranks, and the shortest of them was still up to a fifth longer
 * on some pipeline stages than on others for the same layer, which made equal stages unequal. */
static void calibrate(sl_train *t)
{
    for (int turn = 0; turn < t->size; turn++) {
        quiet_barrier(t->ctx->comm, 1000000); /* the others poll seldom while one measures */
        if (turn == t->rank) t->tech->calibrate(t);
    }
    quiet_barrier(t->ctx->comm, 1000000);
}

void train_compute_after_step(sl_train *t)
{
    if (t->sleeping) quiet_barrier(world_of(t), 20000); /* none spins in the next step's barrier */
    t->sleeping = 0;
    if (opt_compute == 1 && t->tech->sleep_mode && t->tech->calibrate && !t->baseline &&
        t->step == (int)t->ctx->opt.warmup - 1)
        calibrate(t);
}

/* The timed steps trained nothing: every step again, with real compute, from the initial
 * weights (collective), so that the check and the row read trained weights. */
void train_compute_replay(sl_train *t)
{
    if (opt_compute != 1 || !t->tech->sleep_mode) return;
    t->tech->reset(t);
    sl_train_mixed_init(&t->ms, t->dtype); /* the optimizer's step count starts again too */
    const int saved = t->step;
    t->replaying = 1;
    for (t->step = 0; t->step < t->nsteps; t->step++) {
        SL_CHECK_MPI(MPI_Barrier(t->ctx->comm));
        t->loss = 0;
        t->tech->step(t);
    }
    t->replaying = 0;
    t->step = saved;
}
