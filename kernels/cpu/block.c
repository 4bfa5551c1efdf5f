/* cpu/block.c — strided 3-D block copies: the packing and unpacking of halo faces and the
 * cutting of tiles out of NCHW images (kernels.h, sl_k_copy_block, sl_k_copy_block_cast). One
 * memcpy per row when the dtypes agree; otherwise each row goes through the cast kernel
 * (cpu/cast.c: F16C where the CPU has it), so a 16-bit tile is widened or rounded exactly as
 * sl_k_cast does it. Rows are spread over the OpenMP threads where sl_cpu_par allows. */
#include <string.h>

#include "cpu/cpu.h"

void sl_cpu_copy_block(int nz, int ny, int nx, const void *src, sl_dtype st, size_t src_z,
                       size_t src_y, void *dst, sl_dtype dt, size_t dst_z, size_t dst_y)
{
    const size_t ses = sl_dtype_size(st), des = sl_dtype_size(dt), rows = (size_t)nz * ny;
#pragma omp parallel for if (sl_cpu_par(rows * (size_t)nx)) schedule(static)
    for (size_t zy = 0; zy < rows; zy++) {
        const size_t z = zy / (size_t)ny, y = zy % (size_t)ny;
        const char *s = (const char *)src + (z * src_z + y * src_y) * ses;
        char *d = (char *)dst + (z * dst_z + y * dst_y) * des;
        if (st == dt) memcpy(d, s, (size_t)nx * ses);
        else sl_cpu_cast((size_t)nx, s, st, d, dt, NULL);
    }
}
