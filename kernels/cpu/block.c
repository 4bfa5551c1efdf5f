/* cpu/block.c — strided 3-D block copies: the packing and unpacking of halo faces and the
 * cutting of tiles out of NCHW images (kernels.h, sl_k_copy_block). One memcpy per row. */
#include <string.h>

#include "cpu/cpu.h"

void sl_cpu_copy_block(int nz, int ny, int nx, const float *src, size_t src_z, size_t src_y,
                       float *dst, size_t dst_z, size_t dst_y)
{
    for (int z = 0; z < nz; z++)
        for (int y = 0; y < ny; y++)
            memcpy(dst + z * dst_z + y * dst_y, src + z * src_z + y * src_y, (size_t)nx * sizeof *dst);
}
