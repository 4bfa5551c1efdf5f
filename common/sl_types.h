/* sl_types.h — the names shared by the command line, the kernels and the communication layer:
 * element types, compute backends and collective implementations. */
#ifndef SL_TYPES_H
#define SL_TYPES_H

#include <stddef.h>

typedef enum { SL_F32, SL_F64, SL_F16, SL_BF16, SL_NDTYPES } sl_dtype;
typedef enum { SL_BACKEND_CPU, SL_BACKEND_CUDA, SL_BACKEND_AUTO, SL_NBACKENDS } sl_backend;
typedef enum {
    SL_COLL_MPI, SL_COLL_NCCL, SL_COLL_RING, SL_COLL_TREE, SL_COLL_DBTREE, SL_COLL_RHD,
    SL_NCOLLS
} sl_coll;

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
