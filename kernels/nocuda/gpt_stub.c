/* nocuda/gpt_stub.c — no cuda table of GPT kernels in a build without CUDA (gpt.c never gets
 * this far: sl_cuda_ops has said why first). */
#include <stddef.h>

#include "gpt_backend.h"

const sl_gpt_kops *sl_cuda_gpt_ops(void) { return NULL; }
