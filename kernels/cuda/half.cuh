/* cuda/half.cuh — loads and stores of f32/f64/f16/bf16 elements on the device, with f16 and
 * bf16 kept as raw 16-bit patterns (as on the host) and converted by the CUDA intrinsics
 * (round to nearest even), an implementation independent of sl_half.h. */
#ifndef SL_KERNELS_CUDA_HALF_CUH
#define SL_KERNELS_CUDA_HALF_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

struct slk_f32 {
    typedef float T;
    typedef float A; /* arithmetic type */
    __device__ static float load(float v) { return v; }
    __device__ static float store(float v) { return v; }
    __device__ static float min_normal() { return 0x1p-126f; }
};
struct slk_f64 {
    typedef double T;
    typedef double A;
    __device__ static double load(double v) { return v; }
    __device__ static double store(double v) { return v; }
};
struct slk_f16 {
    typedef uint16_t T;
    typedef float A;
    __device__ static float load(uint16_t v) { return __half2float(__ushort_as_half(v)); }
    __device__ static uint16_t store(float v) { return __half_as_ushort(__float2half_rn(v)); }
    __device__ static float min_normal() { return 0x1p-14f; }
};
struct slk_bf16 {
    typedef uint16_t T;
    typedef float A;
    __device__ static float load(uint16_t v)
    {
        return __bfloat162float(__ushort_as_bfloat16(v));
    }
    __device__ static uint16_t store(float v)
    {
        return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
    __device__ static float min_normal() { return 0x1p-126f; }
};

#endif
