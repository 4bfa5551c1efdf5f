/* coll_setup.c — communicators of the communication layer: creation (backend checks, private
 * MPI communicators, the implementation's own set-up), destruction, and the queries that need
 * no communicator (names, error strings, what each implementation provides). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "sl_options.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support */
#endif

static const char *const redop_names[SL_NREDOPS] = {"sum", "max", "min", "avg"};
static const char *const co_names[SL_NCOS] = {"allreduce", "reduce_scatter", "allgather",
                                              "broadcast", "reduce"};

const char *sl_redop_name(sl_redop op)
{
    return (unsigned)op < SL_NREDOPS ? redop_names[op] : "?";
}

int sl_redop_from_name(const char *s)
{
    for (int i = 0; s && i < SL_NREDOPS; i++)
        if (!strcmp(s, redop_names[i])) return i;
    return -1;
}

const char *sl_collective_name(sl_collective w)
{
    return (unsigned)w < SL_NCOS ? co_names[w] : "?";
}

int sl_collective_from_name(const char *s)
{
    for (int i = 0; s && i < SL_NCOS; i++)
        if (!strcmp(s, co_names[i])) return i;
    return -1;
}

const char *sl_coll_strerror(int rc)
{
    switch (rc) {
    case SL_COLL_OK: return "success";
    case SL_COLL_EINVAL: return "invalid argument";
    case SL_COLL_ENOTSUP: return "not provided by this implementation";
    case SL_COLL_ENOTBUILT: return "not built (needs CUDA/NCCL at build time)";
    case SL_COLL_ENODEV: return "no CUDA device visible";
    default: return "unknown error";
    }
}

/* Whether MPI can be handed device pointers: compiled with CUDA support and says so now. */
static int mpi_is_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}

int sl_coll_env_segment(size_t *bytes)
{
    *bytes = 256 * 1024;
    const char *e = getenv("SL_COLL_SEGMENT");
    size_t v;
    if (!e || !*e) return 0;
    if (sl_parse_size(e, &v) != 0 || v < 8) return -1;
    *bytes = v;
    return 0;
}

int sl_coll_env_stage(int *on)
{
    *on = 0;
    const char *e = getenv("SL_COLL_STAGE");
    if (!e || !*e || !strcmp(e, "0")) return 0;
    if (strcmp(e, "1")) return -1;
    *on = 1;
    return 0;
}

int sl_coll_mpi_takes_device(void)
{
    int stage;
    sl_coll_env_stage(&stage); /* a malformed value leaves MPI's choice (programs reject it first) */
    return !stage && mpi_is_cuda_aware();
}

static size_t default_segment(void)
{
    size_t seg;
    sl_coll_env_segment(&seg); /* a malformed value keeps the default (programs reject it first) */
    return seg;
}

int sl_coll_bind_device(MPI_Comm comm)
{
    int ndev = sl_cdev_count(), local = 0;
    MPI_Comm node;
    SL_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    if (ndev == 0) return -1;
    sl_cdev_set(local % ndev);
    return local % ndev;
}

int sl_coll_available(sl_coll impl, sl_mem_space space, char *why, size_t whylen)
{
    const char *msg = NULL;
    int rc = SL_COLL_OK;
    if ((unsigned)impl >= SL_NCOLLS) {
        rc = SL_COLL_EINVAL, msg = "unknown implementation";
    } else if ((unsigned)space >= SL_MEM_NSPACES) {
        rc = SL_COLL_EINVAL, msg = "unknown memory space";
    } else if (space == SL_MEM_DEVICE && (impl == SL_COLL_SHM || impl == SL_COLL_HIER)) {
        rc = SL_COLL_ENOTSUP, msg = "shm and hier work on host buffers (a shared-memory window)";
    } else if (space == SL_MEM_DEVICE || impl == SL_COLL_NCCL) {
        if (!sl_cdev_built())
            rc = SL_COLL_ENOTBUILT, msg = impl == SL_COLL_NCCL
                                              ? "NCCL not built (this build has no CUDA)"
                                              : "CUDA not built (nvcc was not found at build time)";
        else if (impl == SL_COLL_NCCL && !sl_nccl_built())
            rc = SL_COLL_ENOTBUILT, msg = "NCCL not built (nccl.h/libnccl not found at build time)";
        else if (space != SL_MEM_DEVICE)
            rc = SL_COLL_ENOTSUP, msg = "NCCL needs device buffers";
        else if (sl_cdev_count() == 0)
            rc = SL_COLL_ENODEV, msg = "no CUDA device visible";
    }
    if (why && whylen) snprintf(why, whylen, "%s", msg ? msg : "available");
    return rc;
}

/* The defaults of sl_coll_set_torus, sl_coll_set_torus_bidir and sl_coll_set_max_inflight. */
static int torus_rows, torus_cols, torus_bidir, max_inflight;

void sl_coll_set_torus(int rows, int cols)
{
    torus_rows = rows;
    torus_cols = cols;
}

void sl_coll_set_max_inflight(int k) { max_inflight = k > 0 ? k : 0; }
void sl_coll_set_torus_bidir(int on) { torus_bidir = on != 0; }

int sl_comm_create(sl_comm **out, MPI_Comm comm, sl_coll impl, sl_mem_space space)
{
    if (!out) return SL_COLL_EINVAL;
    *out = NULL;
    int rc = sl_coll_available(impl, space, NULL, 0);
    if (rc) return rc;
    sl_comm *c = calloc(1, sizeof *c);
    if (!c) SL_FATAL("out of memory for a communicator");
    c->comm = c->nb_comm = MPI_COMM_NULL;
    c->mpi_half = MPI_DATATYPE_NULL;
    c->impl = impl;
    c->space = space;
    c->seg_bytes = default_segment();
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->comm));
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->nb_comm));
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (torus_rows > 0 && torus_cols > 0 && torus_rows * torus_cols == c->size) {
        c->torus_rows = torus_rows;
        c->torus_cols = torus_cols;
    } else {
        sl_coll_torus_grid(c->size, &c->torus_rows, &c->torus_cols);
    }
    c->torus_bidir = impl == SL_COLL_TORUS && torus_bidir;
    c->max_inflight = max_inflight && max_inflight < c->size - 1 ? max_inflight : c->size - 1;
    if (space == SL_MEM_DEVICE) {
        c->mpi_device_ok = sl_coll_mpi_takes_device();
        c->stream = sl_cdev_stream_create();
    }
    if (impl == SL_COLL_MPI) rc = slc_mpi_init(c);
    if (impl == SL_COLL_NCCL) rc = slc_nccl_init(c);
    if (impl == SL_COLL_SHM) rc = slc_shm_init(c);
    if (impl == SL_COLL_HIER) rc = slc_hier_init(c);
    if (rc) {
        sl_comm_destroy(c);
        return rc;
    }
    *out = c;
    return SL_COLL_OK;
}

void sl_comm_destroy(sl_comm *c)
{
    if (!c) return;
    if (c->nb_active) SL_FATAL("sl_comm_destroy: operations still in flight (wait for them first)");
    if (c->impl == SL_COLL_MPI) slc_mpi_free(c);
    if (c->impl == SL_COLL_NCCL) slc_nccl_free(c);
    slc_hier_free(c);
    slc_node_free(c->node);
    slc_scratch_release_all(c);
    if (c->stream) sl_cdev_stream_destroy(c->stream);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    if (c->nb_comm != MPI_COMM_NULL) MPI_Comm_free(&c->nb_comm);
    free(c);
}

int sl_comm_rank(const sl_comm *c) { return c->rank; }
int sl_comm_size(const sl_comm *c) { return c->size; }
sl_coll sl_comm_impl(const sl_comm *c) { return c->impl; }
sl_mem_space sl_comm_space(const sl_comm *c) { return c->space; }
size_t sl_comm_segment(const sl_comm *c) { return c->seg_bytes; }
void sl_comm_set_segment(sl_comm *c, size_t bytes) { c->seg_bytes = bytes ? bytes : 1; }
unsigned long long sl_comm_bytes_sent(const sl_comm *c) { return c->bytes_sent; }
void sl_comm_torus(const sl_comm *c, int *rows, int *cols)
{
    *rows = c->torus_rows;
    *cols = c->torus_cols;
}
int sl_comm_max_inflight(const sl_comm *c) { return c->max_inflight; }
int sl_comm_torus_bidir(const sl_comm *c) { return c->torus_bidir; }
size_t sl_comm_scratch_bytes(const sl_comm *c)
{
    return c->work_bytes + c->work_host_bytes + c->seg_scratch_bytes + c->stage_bytes;
}
void sl_comm_scratch_free(sl_comm *c) { slc_scratch_release_all(c); }
