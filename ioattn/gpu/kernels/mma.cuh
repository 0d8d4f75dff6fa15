// mma.cuh: the warp-level tensor-core instructions of the PTX ISA as device functions, with
// every lane holding exactly the fragment elements the PTX ISA assigns it.
//
// On the GPU each function is one inline PTX instruction (or, below the architecture that has
// it, the instructions that do the same); under IOATTN_EMULATE the CPU emulator (emulate.h)
// defines the same functions with the same per-lane registers, so a kernel that reads the wrong
// register or row gets the same wrong answer in the emulator as on the hardware.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and
// "... for mma.m16n8k8"; groupID = laneid >> 2, threadID_in_group (t) = laneid % 4; a 32-bit
// register holds two 16-bit elements, the lower-numbered one in its low half):
//   m16n8k16, A (16 x 16, row): a0,a1: row groupID, cols 2t, 2t+1; a2,a3: row groupID + 8,
//     cols 2t, 2t+1; a4,a5: row groupID, cols 2t+8, 2t+9; a6,a7: row groupID + 8, cols 2t+8,
//     2t+9 (registers a[0] = {a0,a1}, a[1] = {a2,a3}, a[2] = {a4,a5}, a[3] = {a6,a7});
//   m16n8k16, B (16 x 8, col): b0,b1: rows 2t, 2t+1, col groupID; b2,b3: rows 2t+8, 2t+9
//     (b[0] = {b0,b1}, b[1] = {b2,b3});
//   C, D (16 x 8, float32): c0,c1: row groupID, cols 2t, 2t+1; c2,c3: row groupID + 8;
//   m16n8k8 (f16, sm_75): A (16 x 8): a[0] = {a0,a1} row groupID, a[1] = {a2,a3} row
//     groupID + 8, cols 2t, 2t+1; B (8 x 8): b[0] = {b0,b1} rows 2t, 2t+1, col groupID; C, D
//     as above.
// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: lanes 8i .. 8i+7 give the row
// addresses (16 bytes each, 16-byte aligned, in shared memory) of matrix i; register r[i] of
// lane l holds, of matrix i, row l >> 2, elements 2 (l % 4) and 2 (l % 4) + 1; with .trans
// column l >> 2, rows 2 (l % 4) and 2 (l % 4) + 1 (the fragment of the transposed matrix).
// cp.async.{ca,cg}.shared.global (sm_80): an asynchronous copy of 4, 8 or 16 bytes (.cg: 16)
// from global to shared memory, both addresses aligned to the size, that is guaranteed visible
// to the issuing thread only after a cp.async.wait_group / wait_all that covers its group
// (commit_group closes a group of the thread's copies); other threads see it after that and a
// barrier. Below sm_80 the copy is a plain load and store (the waits are then nothing).
#pragma once

#ifndef IOATTN_EMULATE

// The shared-memory address (a 32-bit .shared window offset) of a generic pointer.
__device__ __forceinline__ unsigned ioattn_shared_address(const void* p)
{
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// ldmatrix: `row` is this lane's row address (lanes 8 num .. 31 give none and are ignored).
template <int num, bool trans = false>
__device__ __forceinline__ void ldmatrix(unsigned (&r)[num], const void* row)
{
    static_assert(num == 1 || num == 2 || num == 4, "ldmatrix loads 1, 2 or 4 matrices");
#if __CUDA_ARCH__ >= 750
    const unsigned a = ioattn_shared_address(row);
    if constexpr (num == 1 && !trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
                     : "=r"(r[0]) : "r"(a));
    if constexpr (num == 1 && trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                     : "=r"(r[0]) : "r"(a));
    if constexpr (num == 2 && !trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                     : "=r"(r[0]), "=r"(r[num > 1 ? 1 : 0]) : "r"(a));
    if constexpr (num == 2 && trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                     : "=r"(r[0]), "=r"(r[num > 1 ? 1 : 0]) : "r"(a));
    if constexpr (num == 4 && !trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[num > 1 ? 1 : 0]), "=r"(r[num > 2 ? 2 : 0]),
                       "=r"(r[num > 2 ? 3 : 0]) : "r"(a));
    if constexpr (num == 4 && trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r[0]), "=r"(r[num > 1 ? 1 : 0]), "=r"(r[num > 2 ? 2 : 0]),
                       "=r"(r[num > 2 ? 3 : 0]) : "r"(a));
#else
    __trap();                                  // ldmatrix needs sm_75
#endif
}

// D = A B + C, m16n8k8, float16 inputs, float32 accumulators (sm_75).
__device__ __forceinline__ void mma_m16n8k8(float (&d)[4], const unsigned (&a)[2],
                                            const unsigned (&b)[1], const float (&c)[4])
{
#if __CUDA_ARCH__ >= 750
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5}, {%6}, {%7, %8, %9, %10};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
    __trap();
#endif
}

// D = A B + C, m16n8k16, T = __half or __nv_bfloat16 inputs, float32 accumulators (sm_80;
// float16 on sm_75 as two m16n8k8: k = 0..7 takes a[0], a[1], b[0], k = 8..15 a[2], a[3], b[1]).
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                                             const unsigned (&b)[2], const float (&c)[4]);

template <>
__device__ __forceinline__ void mma_m16n8k16<__half>(float (&d)[4], const unsigned (&a)[4],
                                                     const unsigned (&b)[2],
                                                     const float (&c)[4])
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
    const unsigned lo[2] = {a[0], a[1]}, hi[2] = {a[2], a[3]}, b0[1] = {b[0]}, b1[1] = {b[1]};
    float t[4];
    mma_m16n8k8(t, lo, b0, c);
    mma_m16n8k8(d, hi, b1, t);
#endif
}

template <>
__device__ __forceinline__ void mma_m16n8k16<__nv_bfloat16>(float (&d)[4],
                                                            const unsigned (&a)[4],
                                                            const unsigned (&b)[2],
                                                            const float (&c)[4])
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
                   "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
    __trap();                                  // bfloat16 tensor cores need sm_80
#endif
}

// cp.async of `bytes` (4, 8 or 16; cg: 16) from global `src` to shared `dst`.
template <int bytes, bool cg = false>
__device__ __forceinline__ void cp_async(void* dst, const void* src)
{
    static_assert(bytes == 4 || bytes == 8 || bytes == 16, "cp.async copies 4, 8 or 16 bytes");
    static_assert(!cg || bytes == 16, "cp.async.cg copies 16 bytes");
#if __CUDA_ARCH__ >= 800
    const unsigned a = ioattn_shared_address(dst);
    if constexpr (cg)
        asm volatile("cp.async.cg.shared.global [%0], [%1], %2;"
                     :: "r"(a), "l"(src), "n"(bytes) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;"
                     :: "r"(a), "l"(src), "n"(bytes) : "memory");
#else
    struct alignas(bytes) chunk { unsigned char b[bytes]; };
    *static_cast<chunk*>(dst) = *static_cast<const chunk*>(src);
#endif
}

__device__ __forceinline__ void cp_async_commit()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Wait until at most `pending` of this thread's most recent committed groups are incomplete.
template <int pending>
__device__ __forceinline__ void cp_async_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" :: "n"(pending) : "memory");
#endif
}

// Every cp.async of this thread, committed or not, complete.
__device__ __forceinline__ void cp_async_wait_all()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

#endif  // !IOATTN_EMULATE (the emulator's model of every function: emulate.h)
