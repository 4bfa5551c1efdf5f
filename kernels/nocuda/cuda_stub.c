/* nocuda/cuda_stub.c — the cuda backend's symbols in a build without CUDA: there is no
 * table, and every request for it is answered with the reason. */
#include <stdio.h>

#include "backend.h"

const sl_kops *sl_cuda_ops(char *why, size_t whylen)
{
    if (why && whylen)
        snprintf(why, whylen, "CUDA support not built (rebuild with nvcc and cuBLAS, CUDA=1)");
    return NULL;
}

