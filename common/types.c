/* types.c — names of element types, backends and collective implementations (from the
 * tables of sl_types.h), and element access by dtype. */
#include <string.h>

#include "sl_half.h"

#include "sl_types.h"

#define DTYPE_SIZE(id, name, bytes) bytes,
static const char *const dtype_names[SL_NDTYPES] = SL_ENUM_NAMES(SL_DTYPE_LIST);
static const size_t dtype_sizes[SL_NDTYPES] = {SL_DTYPE_LIST(DTYPE_SIZE)};
static const char *const backend_names[SL_NBACKENDS] = SL_ENUM_NAMES(SL_BACKEND_LIST);
static const char *const coll_names[SL_NCOLLS] = SL_ENUM_NAMES(SL_COLL_LIST);

const char *sl_dtype_name(sl_dtype t) { return (unsigned)t < SL_NDTYPES ? dtype_names[t] : "?"; }
size_t sl_dtype_size(sl_dtype t) { return (unsigned)t < SL_NDTYPES ? dtype_sizes[t] : 0; }
const char *sl_backend_name(sl_backend b)
{
    return (unsigned)b < SL_NBACKENDS ? backend_names[b] : "?";
}
const char *sl_coll_name(sl_coll c) { return (unsigned)c < SL_NCOLLS ? coll_names[c] : "?"; }

static int lookup(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

int sl_dtype_from_name(const char *s) { return lookup(dtype_names, SL_NDTYPES, s); }
int sl_backend_from_name(const char *s) { return lookup(backend_names, SL_NBACKENDS, s); }
int sl_coll_from_name(const char *s) { return lookup(coll_names, SL_NCOLLS, s); }

double sl_elem_get(const void *b, size_t i, sl_dtype t)
{
    switch (t) {
    case SL_F32: return ((const float *)b)[i];
    case SL_F64: return ((const double *)b)[i];
    case SL_F16: return sl_f16_to_f32(((const uint16_t *)b)[i]);
    default: return sl_bf16_to_f32(((const uint16_t *)b)[i]);
    }
}

void sl_elem_put(void *b, size_t i, sl_dtype t, double v)
{
    switch (t) {
    case SL_F32: ((float *)b)[i] = (float)v; break;
    case SL_F64: ((double *)b)[i] = v; break;
    case SL_F16: ((uint16_t *)b)[i] = sl_f32_to_f16((float)v); break;
    default: ((uint16_t *)b)[i] = sl_f32_to_bf16((float)v); break;
    }
}
