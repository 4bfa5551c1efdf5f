/* sl_types.h — the names shared by the command line, the kernels and the communication layer:
 * element types, compute backends and collective implementations. Each is one table
 * (sl_enum.h): the enum, the names and the choice string come from it. */
#ifndef SL_TYPES_H
#define SL_TYPES_H

#include <stddef.h>

#include "sl_enum.h"

/* X(id, name, bytes per element) */
#define SL_DTYPE_LIST(X) X(SL_F32, "f32", 4) X(SL_F64, "f64", 8) X(SL_F16, "f16", 2) X(SL_BF16, "bf16", 2)
#define SL_BACKEND_LIST(X) X(SL_BACKEND_CPU, "cpu") X(SL_BACKEND_CUDA, "cuda") X(SL_BACKEND_AUTO, "auto")
#define SL_COLL_LIST(X)                                                                      \
    X(SL_COLL_MPI, "mpi") X(SL_COLL_NCCL, "nccl") X(SL_COLL_RING, "ring") X(SL_COLL_TREE, "tree") \
    X(SL_COLL_DBTREE, "dbtree") X(SL_COLL_RHD, "rhd") X(SL_COLL_SHM, "shm") X(SL_COLL_HIER, "hier") \
    X(SL_COLL_DIRECT, "direct") X(SL_COLL_TORUS, "torus")

SL_ENUM(sl_dtype, SL_DTYPE_LIST, SL_NDTYPES);
SL_ENUM(sl_backend, SL_BACKEND_LIST, SL_NBACKENDS);
SL_ENUM(sl_coll, SL_COLL_LIST, SL_NCOLLS);

#define SL_DTYPE_CHOICES SL_ENUM_CHOICES(SL_DTYPE_LIST)     /* "f32|f64|f16|bf16" */
#define SL_BACKEND_CHOICES SL_ENUM_CHOICES(SL_BACKEND_LIST) /* "cpu|cuda|auto" */
#define SL_COLL_CHOICES SL_ENUM_CHOICES(SL_COLL_LIST)       /* "mpi|nccl|ring|...|direct|torus" */

const char *sl_dtype_name(sl_dtype t);     /* "f32" ... */
size_t sl_dtype_size(sl_dtype t);          /* bytes per element */
const char *sl_backend_name(sl_backend b); /* "cpu" "cuda" "auto" */
const char *sl_coll_name(sl_coll c);       /* "mpi" "nccl" "ring" ... */

/* Element i of a buffer of type t, widened to double / stored from a double (rounded to
 * nearest even for the 16-bit types). For building and checking test data, not hot loops. */
double sl_elem_get(const void *buf, size_t i, sl_dtype t);
void sl_elem_put(void *buf, size_t i, sl_dtype t, double v);

/* Name -> value; -1 when unknown. */
int sl_dtype_from_name(const char *s);
int sl_backend_from_name(const char *s);
int sl_coll_from_name(const char *s);

#endif
