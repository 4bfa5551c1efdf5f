/* coll_nccl.c — setting up the NCCL communicator of an sl_comm: rank 0 creates the unique id,
 * MPI broadcasts it, every rank joins. The NCCL calls themselves are in common/coll/cuda/coll_nccl.cu
 * (stubs that say "NCCL not built" in common/coll/nocuda/ and in CUDA builds without NCCL). */
#include "coll_internal.h"

int slc_nccl_init(sl_comm *c)
{
    unsigned char id[512];
    size_t len = sl_nccl_id_bytes();
    if (len > sizeof id) SL_FATAL("NCCL unique id of %zu bytes does not fit", len);
    if (c->rank == 0) sl_nccl_get_id(id);
    SL_CHECK_MPI(MPI_Bcast(id, (int)len, MPI_BYTE, 0, c->comm));
    c->nccl = sl_nccl_comm_init(c->size, id, c->rank);
    return SL_COLL_OK;
}

void slc_nccl_free(sl_comm *c)
{
    if (c->nccl) sl_nccl_comm_destroy(c->nccl);
    c->nccl = NULL;
}
