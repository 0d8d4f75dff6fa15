// fa2.cuh: what the FA2-class kernels (flash_fa2.cu, flash_fa2_backward.cu) share: float16 and
// bfloat16 to and from float32, two floats packed into one 32-bit register (the A fragments of
// mma.sync), a 16-byte chunk for cp.async and ldmatrix, and a pair of float32 outputs stored
// in one 8-byte access. Included after cuda_fp16.h / cuda_bf16.h (or the emulator's).
#pragma once

namespace fa2 {

__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x)
{
    return __float2half_rn(x);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

// Two floats rounded to T in one 32-bit register, `lo` in the low half.
template <typename T>
__device__ __forceinline__ unsigned pack(float lo, float hi)
{
    const T a = from_f32<T>(lo), b = from_f32<T>(hi);
    unsigned short x, y;
    memcpy(&x, &a, 2);
    memcpy(&y, &b, 2);
    return unsigned(x) | (unsigned(y) << 16);
}

struct __align__(16) chunk16 { unsigned w[4]; };
struct __align__(8) pair { float x, y; };            // two float32 outputs, one 8-byte store

}  // namespace fa2
