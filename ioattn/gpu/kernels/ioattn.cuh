// ioattn.cuh: what every ioattn kernel shares.
//
// Conventions (see ioattn/gpu/README in the package docstring of ioattn.gpu):
//   * Q, K, V, O are (BH, N, d) row-major; L and other row vectors are (BH, N).
//   * blockIdx.y is the batch x head index; each kernel offsets its pointers by it.
//   * Every kernel takes `unsigned long long* io` last: io[0] += entries loaded from global
//     memory, io[1] += entries stored. The counts exist only when the source is compiled with
//     -DIOATTN_COUNT_IO; otherwise the COUNT_* macros compile to nothing and io is unused.
//   * Counting is per block: every thread calls COUNT_READ(n) with the same n, the number of
//     entries the block loads together (only the valid ones at a ragged edge); thread 0 keeps the
//     sum and COUNT_FLUSH(io) adds it atomically to io at the end of the block.
#pragma once

// No CUDA header is included here, so the fp32 kernels compile with NVRTC alone; the 16-bit
// kernel includes <cuda_fp16.h>, <cuda_bf16.h> and <mma.h> itself.
#ifdef IOATTN_EMULATE
#include "emulate.h"           // the CPU emulator (kernels/emulate.h, see ioattn/gpu/emulator.py)
#endif

// Dynamic shared memory, as `type* name`, 32-byte aligned: the 256-bit alignment WMMA load and
// store pointers need (CUDA C++ Programming Guide, Warp Matrix Functions), so that a tile at a
// multiple of 32 bytes from the start is aligned wherever the array is placed.
#ifdef IOATTN_EMULATE
#define IOATTN_SHARED(type, name) type* name = reinterpret_cast<type*>(ioattn_emu::dynamic_shared())
#else
#define IOATTN_SHARED(type, name) \
    extern __shared__ __align__(32) unsigned char ioattn_smem_[]; \
    type* name = reinterpret_cast<type*>(ioattn_smem_)
#endif

#ifdef IOATTN_COUNT_IO
#define IOATTN_COUNTERS unsigned long long ioattn_reads_ = 0, ioattn_writes_ = 0
#define IOATTN_LEAD (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0)
#define COUNT_READ(n) do { if (IOATTN_LEAD) ioattn_reads_ += (unsigned long long)(n); } while (0)
#define COUNT_WRITE(n) do { if (IOATTN_LEAD) ioattn_writes_ += (unsigned long long)(n); } while (0)
#define COUNT_FLUSH(io) do { if (IOATTN_LEAD && (io)) { \
        atomicAdd((io), ioattn_reads_); atomicAdd((io) + 1, ioattn_writes_); } } while (0)
#else
#define IOATTN_COUNTERS
#define COUNT_READ(n) ((void)0)
#define COUNT_WRITE(n) ((void)0)
#define COUNT_FLUSH(io) ((void)(io))
#endif

#define IOATTN_NEG_INF (-__int_as_float(0x7f800000))
#define IOATTN_POS_INF (__int_as_float(0x7f800000))

__device__ __forceinline__ int ioattn_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int ioattn_max(int a, int b) { return a > b ? a : b; }
