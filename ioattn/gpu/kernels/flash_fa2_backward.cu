// flash_fa2_backward.cu: a FlashAttention-2-class backward [FA2, Algorithm 2 and Section 3.2],
// parallel over key blocks, on the tensor cores: Q, K, V, dO in float16 (flash_fa2_bwd_f16_d*)
// or bfloat16 (flash_fa2_bwd_bf16_d*, sm_80 and later), products by mma.sync.m16n8k16 with
// float32 accumulators; d = 64 (B_r = 64) or d = 128 (B_r = 16, which keeps the 128 dK, dV
// accumulators of a lane and the rest within 255 registers on sm_75) fixed at compile time, B_c =
// 16 w keys for w <= 4 warps.
//
// Schedule (so the counted traffic per head equals ioattn.io_cost("flash", N, d, M,
// backward=True, block=(B_r, B_c), dq="atomic", mask=causal?)):
//   1. flash_fa2_bwd_prep_*: D_i = rowsum(dO_i o O_i) for B_r rows a block, and dQ_i = 0
//      (reads 2 r d, writes r + r d).
//   2. flash_fa2_bwd_*: one block per key block j (grid T_c x heads, looping over the heads
//      bh = blockIdx.y, blockIdx.y + gridDim.y, ...): K_j, V_j (2 c d, 16-byte cp.async) into
//      shared memory once; dK_j = dV_j = 0 in registers; for each query block i (causal: from
//      the first with a key visible to it, floor(j0 / B_r); the blocks above the diagonal are
//      skipped): Q_i, dO_i, L_i, D_i (r (2d + 2)) into the buffer i % 2 by cp.async while block
//      i - 1 is computed;
//          S^T = K_j Q_i^T, dP^T = V_j dO_i^T                 (registers),
//          P^T = exp(tau S^T - L_i), masked (keys >= N, queries >= N, causal: key > query),
//          dS^T = tau P^T o (dP^T - D_i),
//          dV_j += P^T dO_i,  dK_j += dS^T Q_i               (registers, P^T and dS^T taken
//                                                             from the accumulators as A),
//          dS^T -> shared memory; dQ_i += dS K_j by float32 atomicAdd into global dQ (a read
//          and a write of each of the r d entries: the model's convention for a
//          read-modify-write);
//      then dK_j, dV_j (2 c d) are written.
//
// dQ by atomics, not by a second pass parallel over the query blocks: that pass would redo two
// of the five products of every block pair (S and dP; 40% more tensor-core work) and read K_j
// and V_j again for every query block (2 N d T_r entries more, with Q, dO, L, D once more),
// where the atomics move r d entries each way per block pair and overlap with the next
// block's copies. The price: the key blocks add into dQ in no fixed order, so dQ is
// reproducible only up to float32 rounding.
//
// Fragments (kernels/mma.cuh; g = lane >> 2, t = lane % 4): warp w owns keys 16 w .. 16 w + 15
// of the block; an S^T or dP^T accumulator tile of 8 queries holds keys g (c0, c1) and g + 8
// (c2, c3), queries 2t, 2t + 1. The A fragment of P^T (or dS^T) for queries 16 k .. 16 k + 15
// is {S[2k] c0 c1, S[2k] c2 c3, S[2k + 1] c0 c1, S[2k + 1] c2 c3} rounded to 16 bits, as in
// flash_fa2.cu. A of K_j, V_j: ldmatrix of their rows; B of Q_i^T, dO_i^T: ldmatrix of Q_i,
// dO_i rows; B of dO_i, Q_i (for dV, dK) and of K_j (for dQ): ldmatrix .trans of their rows;
// A of dS (for dQ): ldmatrix .trans of the stored dS^T rows.
//
// Shared memory (16-bit entries unless said): K_j, V_j (B_c rows each), Q_i[2], dO_i[2] (B_r
// rows each), every row d + 8 entries (16 bytes of pad, so the 8 rows of an ldmatrix matrix
// lie 16 bytes apart modulo 128 and each 8 x 8 matrix is one wavefront); dS^T (B_c rows of B_r
// + 8); L_i[2], D_i[2] (B_r floats each): flash_fa2_backward.py, shared_bytes.
//
// [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
//       partitioning", arXiv:2307.08691.
#include "ioattn.cuh"

#ifndef IOATTN_EMULATE
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif
#include "mma.cuh"
#include "fa2.cuh"

namespace fa2b {

using namespace fa2;                // the 16-bit helpers of fa2.cuh

// Rows 0 .. rows - 1 of a (total x D) tile by 16-byte cp.async into `dst` (LD entries a row);
// the rows past them zero-filled.
template <typename T, int D, int LD>
__device__ __forceinline__ void copy_rows(T* dst, const T* __restrict__ src, int rows, int total)
{
    constexpr int per_row = D / 8;
    for (int e = threadIdx.x; e < total * per_row; e += blockDim.x) {
        const int row = e / per_row, col = 8 * (e - row * per_row);
        T* to = dst + row * LD + col;
        if (row < rows) cp_async<16, true>(to, src + row * D + col);
        else *reinterpret_cast<chunk16*>(to) = chunk16{{0u, 0u, 0u, 0u}};
    }
}

// Entries 0 .. rows - 1 of a float vector by 4-byte cp.async, the rest of `total` zero.
__device__ __forceinline__ void copy_floats(float* dst, const float* __restrict__ src,
                                            int rows, int total)
{
    for (int x = threadIdx.x; x < total; x += blockDim.x) {
        if (x < rows) cp_async<4>(dst + x, src + x);
        else dst[x] = 0.f;
    }
}

}  // namespace fa2b

// 1. D = rowsum(dO o O) and dQ = 0: one warp a row, R rows a block (grid ceil(N / R) x heads).
template <typename T>
__device__ void flash_fa2_bwd_prep(const float* __restrict__ O0, const T* __restrict__ dO0,
                                   float* __restrict__ D0, float* __restrict__ dQ0, int BH,
                                   int N, int d, int R, unsigned long long* io)
{
    IOATTN_COUNTERS;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int i0 = blockIdx.x * R;
    const int r = ioattn_min(R, N - i0);
    for (long long bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        for (int x = warp; x < r; x += warps) {
            const long long row = bh * N + i0 + x;
            const float* o = O0 + row * d;
            const T* g = dO0 + row * d;
            float* dq = dQ0 + row * d;
            float s = 0.f;
            #pragma unroll 1                               // (unrolled, ptxas spills on sm_80)
            for (int k = lane; k < d; k += 32) {
                s += fa2b::to_f32(g[k]) * o[k];
                dq[k] = 0.f;
            }
            #pragma unroll
            for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
            if (lane == 0) D0[row] = s;
        }
        COUNT_READ(2LL * r * d);                           // dO_i, O_i
        COUNT_WRITE(r + (long long)r * d);                 // D_i, dQ_i = 0
    }
    COUNT_FLUSH(io);
}

// 2. The gradients (the schedule of the header); outside the namespace, so that the dynamic
// shared array keeps its unmangled name ioattn_smem_.
template <typename T, int D, int BR>
__device__ void flash_fa2_bwd(const T* __restrict__ Q0, const T* __restrict__ K0,
                              const T* __restrict__ V0, const T* __restrict__ dO0,
                              const float* __restrict__ L0, const float* __restrict__ D0,
                              float* __restrict__ dQ0, float* __restrict__ dK0,
                              float* __restrict__ dV0, int BH, int N, float tau, int causal,
                              unsigned long long* io)
{
    constexpr int LD = D + 8, LS = BR + 8, DK = D / 16, DT = D / 8, NT = BR / 8;
    constexpr int RT = BR / 16, CW = 32, CT = D / CW;      // dQ: units of 16 rows x 32 columns
    IOATTN_COUNTERS;
    IOATTN_SHARED(T, smem);
    const int warps = blockDim.x >> 5, BC = 16 * warps;
    T* sK = smem;                                          // [BC][LD]
    T* sV = sK + BC * LD;                                  // [BC][LD]
    T* sQ = sV + BC * LD;                                  // [2][BR][LD]
    T* sdO = sQ + 2 * BR * LD;                             // [2][BR][LD]
    T* sS = sdO + 2 * BR * LD;                             // [BC][LS]: dS^T (tau included)
    float* sL = reinterpret_cast<float*>(sS + BC * LS);    // [2][BR]
    float* sD = sL + 2 * BR;                               // [2][BR]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3, i8 = lane >> 3;
    const int j0 = blockIdx.x * BC, c = ioattn_min(BC, N - j0);
    const int T_r = (N + BR - 1) / BR;
    const int first = causal ? j0 / BR : 0;                // the first query block to see j0
    const int key0 = j0 + warp * 16 + g;                   // this lane's keys: key0, key0 + 8

    for (long long bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const T* Q = Q0 + bh * N * D;
        const T* dO = dO0 + bh * N * D;
        const float* L = L0 + bh * N;
        const float* Dv = D0 + bh * N;
        float* dQ = dQ0 + bh * N * D;
        __syncthreads();                                   // the previous head is done with smem
        fa2b::copy_rows<T, D, LD>(sK, K0 + bh * N * D + (long long)j0 * D, c, BC);
        fa2b::copy_rows<T, D, LD>(sV, V0 + bh * N * D + (long long)j0 * D, c, BC);
        COUNT_READ(2LL * c * D);
        auto load = [&](int ib, int buf) {                 // Q_i, dO_i, L_i, D_i into buf
            const int i0 = ib * BR, r = ioattn_min(BR, N - i0);
            fa2b::copy_rows<T, D, LD>(sQ + buf * BR * LD, Q + (long long)i0 * D, r, BR);
            fa2b::copy_rows<T, D, LD>(sdO + buf * BR * LD, dO + (long long)i0 * D, r, BR);
            fa2b::copy_floats(sL + buf * BR, L + i0, r, BR);
            fa2b::copy_floats(sD + buf * BR, Dv + i0, r, BR);
            cp_async_commit();
        };
        load(first, 0);

        float dk[DT][4], dv[DT][4];
        #pragma unroll
        for (int n = 0; n < DT; ++n)
            #pragma unroll
            for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

        for (int ib = first; ib < T_r; ++ib) {
            const int buf = (ib - first) & 1, i0 = ib * BR, r = ioattn_min(BR, N - i0);
            COUNT_READ((long long)r * (2 * D + 2));        // Q_i, dO_i, L_i, D_i
            if (ib + 1 < T_r) {                            // prefetch block ib + 1
                load(ib + 1, buf ^ 1);
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();                               // every thread's copies of block ib
            const T* Qi = sQ + buf * BR * LD;
            const T* dOi = sdO + buf * BR * LD;
            const float* Li = sL + buf * BR;
            const float* Di = sD + buf * BR;

            // S^T = K_j Q_i^T and dP^T = V_j dO_i^T, this warp's 16 keys by all B_r queries
            float s[NT][4], dp[NT][4];
            #pragma unroll
            for (int n = 0; n < NT; ++n)
                #pragma unroll
                for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.f;
            #pragma unroll
            for (int pass = 0; pass < 2; ++pass) {
                const T* A = pass ? sV : sK;
                const T* B = pass ? dOi : Qi;
                unsigned af[DK][4];
                #pragma unroll
                for (int k = 0; k < DK; ++k)
                    ldmatrix<4>(af[k], A + (warp * 16 + (lane & 7) + 8 * (i8 & 1)) * LD +
                                           16 * k + 8 * (i8 >> 1));
                #pragma unroll
                for (int n = 0; n < NT; ++n) {
                    #pragma unroll
                    for (int k = 0; k < DK; k += 2) {
                        unsigned b[4];
                        ldmatrix<4>(b, B + (n * 8 + (lane & 7)) * LD + 16 * k + 8 * i8);
                        const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                        float (&acc)[4] = pass ? dp[n] : s[n];
                        mma_m16n8k16<T>(acc, af[k], b0, acc);
                        mma_m16n8k16<T>(acc, af[k + 1], b1, acc);
                    }
                }
            }
            // P^T = exp(tau S^T - L_i), dS^T = tau P^T o (dP^T - D_i); masked entries P = 0
            const bool edge = j0 + BC > N || i0 + BR > N || (causal && j0 + BC - 1 > i0);
            #pragma unroll
            for (int n = 0; n < NT; ++n)
                #pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int x = 8 * n + 2 * t + (e & 1), key = key0 + 8 * (e >> 1);
                    float p = expf(tau * s[n][e] - Li[x]);
                    if (edge && (i0 + x >= N || key >= N || (causal && key > i0 + x))) p = 0.f;
                    s[n][e] = p;
                    dp[n][e] = tau * p * (dp[n][e] - Di[x]);
                }
            // dV_j += P^T dO_i, dK_j += dS^T Q_i; dS^T into shared memory for dQ
            #pragma unroll
            for (int k = 0; k < BR / 16; ++k) {
                const unsigned ap[4] = {fa2b::pack<T>(s[2 * k][0], s[2 * k][1]),
                                        fa2b::pack<T>(s[2 * k][2], s[2 * k][3]),
                                        fa2b::pack<T>(s[2 * k + 1][0], s[2 * k + 1][1]),
                                        fa2b::pack<T>(s[2 * k + 1][2], s[2 * k + 1][3])};
                const unsigned as[4] = {fa2b::pack<T>(dp[2 * k][0], dp[2 * k][1]),
                                        fa2b::pack<T>(dp[2 * k][2], dp[2 * k][3]),
                                        fa2b::pack<T>(dp[2 * k + 1][0], dp[2 * k + 1][1]),
                                        fa2b::pack<T>(dp[2 * k + 1][2], dp[2 * k + 1][3])};
                T* row = sS + (warp * 16 + g) * LS + 16 * k + 2 * t;
                *reinterpret_cast<unsigned*>(row) = as[0];
                *reinterpret_cast<unsigned*>(row + 8 * LS) = as[1];
                *reinterpret_cast<unsigned*>(row + 8) = as[2];
                *reinterpret_cast<unsigned*>(row + 8 * LS + 8) = as[3];
                const int q = 16 * k + 8 * (i8 & 1) + (lane & 7);
                #pragma unroll
                for (int n = 0; n < DT; n += 2) {
                    unsigned b[4];
                    ldmatrix<4, true>(b, dOi + q * LD + 8 * (n + (i8 >> 1)));
                    const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                    mma_m16n8k16<T>(dv[n], ap, b0, dv[n]);
                    mma_m16n8k16<T>(dv[n + 1], ap, b1, dv[n + 1]);
                    ldmatrix<4, true>(b, Qi + q * LD + 8 * (n + (i8 >> 1)));
                    const unsigned c0[2] = {b[0], b[1]}, c1[2] = {b[2], b[3]};
                    mma_m16n8k16<T>(dk[n], as, c0, dk[n]);
                    mma_m16n8k16<T>(dk[n + 1], as, c1, dk[n + 1]);
                }
            }
            __syncthreads();                               // dS^T complete

            // dQ_i += dS K_j: unit u = (16 query rows, 32 columns), atomics into global dQ
            for (int u = warp; u < RT * CT; u += warps) {
                const int rt = u / CT, col0 = (u - rt * CT) * CW;
                float acc[CW / 8][4];
                #pragma unroll
                for (int n = 0; n < CW / 8; ++n)
                    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
                for (int kc = 0; kc < warps; ++kc) {
                    unsigned a[4];
                    ldmatrix<4, true>(a, sS + (16 * kc + 8 * (i8 >> 1) + (lane & 7)) * LS +
                                             16 * rt + 8 * (i8 & 1));
                    const int key = 16 * kc + 8 * (i8 & 1) + (lane & 7);
                    #pragma unroll
                    for (int n = 0; n < CW / 8; n += 2) {
                        unsigned b[4];
                        ldmatrix<4, true>(b, sK + key * LD + col0 + 8 * (n + (i8 >> 1)));
                        const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                        mma_m16n8k16<T>(acc[n], a, b0, acc[n]);
                        mma_m16n8k16<T>(acc[n + 1], a, b1, acc[n + 1]);
                    }
                }
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int q = i0 + 16 * rt + g + 8 * h;
                    if (q < N) {
                        float* to = dQ + (long long)q * D + col0 + 2 * t;
                        #pragma unroll
                        for (int n = 0; n < CW / 8; ++n) {
                            atomicAdd(to + 8 * n, acc[n][2 * h]);
                            atomicAdd(to + 8 * n + 1, acc[n][2 * h + 1]);
                        }
                    }
                }
            }
            COUNT_READ((long long)r * D);                  // dQ_i += ...: a read and a write
            COUNT_WRITE((long long)r * D);
            __syncthreads();                               // dS^T and buffer ib % 2 are free
        }

        // dK_j (tau included), dV_j
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int key = key0 + 8 * h;
            if (key < N) {
                float* to_k = dK0 + bh * N * D + (long long)key * D + 2 * t;
                float* to_v = dV0 + bh * N * D + (long long)key * D + 2 * t;
                #pragma unroll
                for (int n = 0; n < DT; ++n) {
                    *reinterpret_cast<fa2b::pair*>(to_k + 8 * n) =
                        fa2b::pair{dk[n][2 * h], dk[n][2 * h + 1]};
                    *reinterpret_cast<fa2b::pair*>(to_v + 8 * n) =
                        fa2b::pair{dv[n][2 * h], dv[n][2 * h + 1]};
                }
            }
        }
        COUNT_WRITE(2LL * c * D);
    }
    COUNT_FLUSH(io);
}

// O (BH, N, d) float32, dO (BH, N, d) 16-bit; D (BH, N) and dQ (BH, N, d) float32 written.
// Grid (ceil(N / R), min(BH, 65535)), any multiple of 32 threads.
extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bwd_prep_f16(const float* __restrict__ O, const __half* __restrict__ dO,
    float* __restrict__ D, float* __restrict__ dQ, int BH, int N, int d, int R,
    unsigned long long* io)
{
    flash_fa2_bwd_prep<__half>(O, dO, D, dQ, BH, N, d, R, io);
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bwd_prep_bf16(const float* __restrict__ O, const __nv_bfloat16* __restrict__ dO,
    float* __restrict__ D, float* __restrict__ dQ, int BH, int N, int d, int R,
    unsigned long long* io)
{
    flash_fa2_bwd_prep<__nv_bfloat16>(O, dO, D, dQ, BH, N, d, R, io);
}

// Q, K, V, dO (BH, N, d) in 16 bits; L, D (BH, N), dQ (zeroed), dK, dV (BH, N, d) float32.
// Grid (ceil(N / B_c), min(BH, 65535)); 32 w threads (B_c = 16 w, w <= 4); dynamic shared
// memory 2 (2 B_c + 4 B_r) (d + 8) + 2 B_c (B_r + 8) + 16 B_r bytes. The bfloat16 kernels are
// empty below sm_80 (the host refuses them there).
#define FA2_BWD_ARGS(T) const T* __restrict__ Q, const T* __restrict__ K, \
    const T* __restrict__ V, const T* __restrict__ dO, const float* __restrict__ L, \
    const float* __restrict__ D, float* __restrict__ dQ, float* __restrict__ dK, \
    float* __restrict__ dV, int BH, int N, float tau, int causal, unsigned long long* io

extern "C" __global__ __launch_bounds__(128) void flash_fa2_bwd_f16_d64(FA2_BWD_ARGS(__half))
{
    flash_fa2_bwd<__half, 64, 64>(Q, K, V, dO, L, D, dQ, dK, dV, BH, N, tau, causal, io);
}

extern "C" __global__ __launch_bounds__(128) void flash_fa2_bwd_f16_d128(FA2_BWD_ARGS(__half))
{
    flash_fa2_bwd<__half, 128, 16>(Q, K, V, dO, L, D, dQ, dK, dV, BH, N, tau, causal, io);
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bwd_bf16_d64(FA2_BWD_ARGS(__nv_bfloat16))
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    flash_fa2_bwd<__nv_bfloat16, 64, 64>(Q, K, V, dO, L, D, dQ, dK, dV, BH, N, tau, causal, io);
#endif
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bwd_bf16_d128(FA2_BWD_ARGS(__nv_bfloat16))
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    flash_fa2_bwd<__nv_bfloat16, 128, 16>(Q, K, V, dO, L, D, dQ, dK, dV, BH, N, tau, causal,
                                          io);
#endif
}
