/* coll_setup.c — communicators of the communication layer: creation (backend checks, private
 * MPI communicators, the implementation's own set-up), destruction, and the queries that need
 * no communicator (names, error strings, what each implementation provides). */
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

static size_t default_segment(void)
{
    size_t seg = 256 * 1024;
    const char *e = getenv("SL_COLL_SEGMENT");
    size_t v;
    if (e && *e && sl_parse_size(e, &v) == 0 && v >= 8) seg = v;
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

int sl_comm_init(sl_comm *c, MPI_Comm comm, sl_coll impl, sl_mem_space space)
{
    memset(c, 0, sizeof *c);
    c->comm = c->nb_comm = MPI_COMM_NULL;
    c->mpi_half = MPI_DATATYPE_NULL;
    if ((unsigned)impl >= SL_NCOLLS || (unsigned)space >= SL_MEM_NSPACES) return SL_COLL_EINVAL;
    if (space == SL_MEM_DEVICE || impl == SL_COLL_NCCL) {
        if (!sl_cdev_built()) return SL_COLL_ENOTBUILT;
        if (impl == SL_COLL_NCCL && !sl_nccl_built()) return SL_COLL_ENOTBUILT;
        if (space != SL_MEM_DEVICE) return SL_COLL_ENOTSUP; /* NCCL works on device memory */
        if (sl_cdev_count() == 0) return SL_COLL_ENODEV;
    }
    c->impl = impl;
    c->space = space;
    c->seg_bytes = default_segment();
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->comm));
    SL_CHECK_MPI(MPI_Comm_dup(comm, &c->nb_comm));
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    if (space == SL_MEM_DEVICE) {
        c->mpi_device_ok = mpi_is_cuda_aware();
        c->stream = sl_cdev_stream_create();
    }
    if (impl == SL_COLL_MPI) return slc_mpi_init(c);
    if (impl == SL_COLL_NCCL) return slc_nccl_init(c);
    return SL_COLL_OK;
}

void sl_comm_free(sl_comm *c)
{
    if (c->comm == MPI_COMM_NULL) return;
    if (c->impl == SL_COLL_MPI) slc_mpi_free(c);
    if (c->impl == SL_COLL_NCCL) slc_nccl_free(c);
    slc_scratch_release_all(c);
    if (c->stream) sl_cdev_stream_destroy(c->stream);
    MPI_Comm_free(&c->comm);
    MPI_Comm_free(&c->nb_comm);
    memset(c, 0, sizeof *c);
    c->comm = c->nb_comm = MPI_COMM_NULL;
}
