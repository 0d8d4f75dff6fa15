// flash_tc.cu: the FlashAttention-2 forward [FA2, Algorithm 1] on the tensor cores, with Q, K,
// V stored in float16 (flash_fwd_f16) or bfloat16 (flash_fwd_bf16, sm_80 and later) and every
// product accumulated in float32 (WMMA m16n16k16). The schedule is the NumPy reference's,
// ioattn/algorithms/flash.py `_fa2`, so that the counted traffic per head equals
// ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), mask=causal?, save_lse=...):
//
//   one block per query block i (rows i0 .. i0 + r - 1, r = min(B_r, N - i0)):
//     read Q_i (r d; 16-byte cp.async copies, copy_tile) and fold tau into it in shared
//     memory: Q_i = fp16(tau * Q_i) (scaled in float32, rounded once to the storage type);
//     O_i = 0, m_i = -inf, l_i = 0;
//     for each key block j (columns j0 .. j0 + c - 1; causal: only j0 <= i0 + r - 1):
//       read K_j, V_j (2 c d; 16-byte cp.async copies, copy_tile);
//       S_ij = Q_i K_j^T                                  (tensor cores, float32)
//       masked scores (causal, and columns >= N) = -inf
//       m_new = max(m_i, rowmax S_ij), alpha = exp(m_i - m_new), P_ij = exp(S_ij - m_new)
//       l_i = alpha l_i + rowsum P_ij, m_i = m_new
//       O_i = diag(alpha) O_i + P_ij V_j                  (tensor cores, P_ij in 16 bits)
//     write O_i = O_i / l_i (r d) and, with save_lse, L_i = m_i + log l_i (r).
//
// Shared memory is the model's cache, with the tiles padded to multiples of 16 (B_r and B_c
// are multiples of 16; rows and columns past N are zero-filled, masked to -inf in S_ij, and not
// counted as loads): Q_i, K_j, V_j in 16 bits; S_ij in float32 with P_ij in 16 bits aliased
// over it; O_i in float32; m_i, l_i, alpha in float32. Every tile row is padded by 16 bytes
// (8 entries of 16 bits, 4 of float32), so that the 8 rows of 16 bytes that one phase of a
// tile load or store reads (an 8 x 8 matrix of ldmatrix, which WMMA's loads are counted as)
// start 16 bytes further along the banks each and are served in one wavefront, not 8 (rows of
// 128 or 256 bytes all start in bank 0); the pads keep WMMA's 32-byte tile alignment and ldm
// a multiple of 16 bytes, and are never loaded from or stored to global memory:
//   2 B_r (d + 8) + 4 B_c (d + 8) + 4 B_r (B_c + 4) + 4 B_r (d + 4) + 12 B_r bytes
// (flash_tc.py, shared_bytes); the model's footprint, 2 B_r d + 3 B_r + 2 B_c d + B_r B_c
// entries, counts the entries cached, not the pads.
//
// Work split: warp w owns the 16-row strips w, w + warps, ... of Q_i, S_ij/P_ij, O_i, m_i, l_i
// and alpha, so inside the key loop only the loads of K_j and V_j need the whole block.
//
// [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
//       partitioning", arXiv:2307.08691, Algorithm 1.
#include "ioattn.cuh"

#ifndef IOATTN_EMULATE
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#endif
#include "mma.cuh"

using namespace nvcuda;

// Conversions between the storage type T and float32.
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x)
{
    return __float2bfloat16_rn(x);
}

// 16 bytes (8 entries) of a tile row.
struct __align__(16) chunk16 { unsigned w[4]; };

// Rows 0 .. rows - 1 of a (rows_pad x d) tile copied from global memory (row-major, d per row)
// into shared memory (ld entries a row), 16 bytes at a time, by cp.async (sm_80 and later; a
// plain 16-byte copy before): one warp request moves 512 consecutive bytes, and a thread does one
// integer division per 8 entries. Rows rows .. rows_pad - 1 are zero-filled. A thread's copies
// are complete after its cp_async_wait_all(), everyone's after that and a __syncthreads.
template <typename T>
__device__ __forceinline__ void copy_tile(T* dst, const T* __restrict__ src, int rows,
                                          int rows_pad, int d, int ld)
{
    const int per_row = d / 8;                        // d is a multiple of 16
    for (int e = threadIdx.x; e < rows_pad * per_row; e += blockDim.x) {
        const int row = e / per_row, col = 8 * (e - row * per_row);
        T* to = dst + row * ld + col;
        if (row < rows) cp_async<16, true>(to, src + row * d + col);
        else *reinterpret_cast<chunk16*>(to) = chunk16{{0u, 0u, 0u, 0u}};
    }
}

// Rows 0 .. rows - 1 of a (rows x d) tile in shared memory (ld entries a row) times `scale`,
// rounded once to T (each entry scaled in float32); shared memory only, no global traffic.
template <typename T>
__device__ __forceinline__ void scale_tile(T* tile, int rows, int d, int ld, float scale)
{
    for (int e = threadIdx.x; e < rows * d; e += blockDim.x) {
        const int row = e / d;
        T* x = tile + row * ld + e - row * d;
        *x = from_f32<T>(scale * to_f32(*x));
    }
}

template <typename T>
__device__ void flash_fwd_tc(const T* __restrict__ Q, const T* __restrict__ K,
                             const T* __restrict__ V, float* __restrict__ O,
                             float* __restrict__ L, int N, int d, int B_r, int B_c, float tau,
                             int causal, int save_lse, unsigned long long* io)
{
    IOATTN_COUNTERS;
    const long long bh = blockIdx.y;
    const int i0 = blockIdx.x * B_r;
    const int r = ioattn_min(B_r, N - i0);
    const int last = i0 + r - 1;                      // the last query row of the block
    Q += bh * N * d + (long long)i0 * d;
    K += bh * N * d;
    V += bh * N * d;
    O += bh * N * d + (long long)i0 * d;
    L += save_lse ? bh * N + i0 : 0;

    // The cache: float32 O_i (B_r x d), S_ij (B_r x B_c), m_i, l_i, alpha (B_r each), then the
    // 16-bit Q_i (B_r x d), K_j, V_j (B_c x d), every row padded by 16 bytes: ldo = d + 4,
    // lds = B_c + 4 float32 entries, ldh = d + 8 and ldp = B_c + 8 16-bit ones. P_ij (16 bits,
    // B_r x B_c, ldp a row) lies over S_ij, each 16-row strip of P_ij at the start of the strip
    // of S_ij it comes from.
    const int ldo = d + 4, lds = B_c + 4, ldh = d + 8, ldp = B_c + 8;
    IOATTN_SHARED(float, smem);
    float* O_i = smem;
    float* S_ij = O_i + B_r * ldo;
    float* m_i = S_ij + B_r * lds;
    float* l_i = m_i + B_r;
    float* alpha = l_i + B_r;
    T* Q_i = reinterpret_cast<T*>(alpha + B_r);
    T* K_j = Q_i + B_r * ldh;
    T* V_j = K_j + B_c * ldh;

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int strips = B_r / 16, dk = d / 16, ck = B_c / 16;

    // Q_i = tau Q_i in the storage type: copied 16 bytes a lane as K_j and V_j are (rows past
    // N zero-filled; d is a multiple of 16, so every row starts 32-byte aligned), then scaled
    // in place once every thread's copies are complete.
    copy_tile(Q_i, Q, r, B_r, d, ldh);
    cp_async_wait_all();
    COUNT_READ((long long)r * d);
    __syncthreads();
    scale_tile(Q_i, r, d, ldh, tau);                  // seen by WMMA after the loop's barrier
    for (int e = threadIdx.x; e < B_r * ldo; e += blockDim.x) O_i[e] = 0.f;
    for (int e = threadIdx.x; e < B_r; e += blockDim.x) {
        m_i[e] = IOATTN_NEG_INF;
        l_i[e] = 0.f;
    }

    for (int j0 = 0; j0 < N && (!causal || j0 <= last); j0 += B_c) {
        const int c = ioattn_min(B_c, N - j0);
        __syncthreads();                              // every warp is done with K_j, V_j, P_ij
        copy_tile(K_j, K + (long long)j0 * d, c, B_c, d, ldh);
        copy_tile(V_j, V + (long long)j0 * d, c, B_c, d, ldh);
        cp_async_wait_all();
        COUNT_READ(2LL * c * d);
        __syncthreads();                              // every thread's copies are complete

        for (int s = warp; s < strips; s += warps) {
            float* S_s = S_ij + s * 16 * lds;          // this warp's strip of S_ij
            T* P_s = reinterpret_cast<T*>(S_s);        // ... and of P_ij, over it
            float* O_s = O_i + s * 16 * ldo;

            // S_ij = Q_i K_j^T, one 16 x 16 tile at a time (K_j row-major = K_j^T col-major).
            for (int t = 0; t < ck; ++t) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::fill_fragment(acc, 0.f);
                for (int k = 0; k < dk; ++k) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
                    wmma::load_matrix_sync(a, Q_i + s * 16 * ldh + k * 16, ldh);
                    wmma::load_matrix_sync(b, K_j + t * 16 * ldh + k * 16, ldh);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(S_s + t * 16, acc, lds, wmma::mem_row_major);
            }
            __syncwarp();

            // The online softmax, one row at a time across the warp: the mask, m_new, alpha,
            // P_ij = exp(S_ij - m_new) in place in float32, l_i.
            for (int x = 0; x < 16; ++x) {
                const int row = s * 16 + x, q = i0 + row;
                float* S_row = S_s + x * lds;
                const float m_old = m_i[row];
                float mx = IOATTN_NEG_INF;
                for (int y = lane; y < B_c; y += 32) {
                    const int col = j0 + y;
                    float v = S_row[y];
                    if (col >= N || (causal && col > q)) v = IOATTN_NEG_INF;
                    S_row[y] = v;
                    mx = fmaxf(mx, v);
                }
                #pragma unroll
                for (int off = 16; off > 0; off >>= 1)
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, off));
                const float m_new = fmaxf(m_old, mx);
                // a row with nothing visible yet: alpha = 0 and P = 0, no -inf - (-inf)
                const float m_use = m_new == IOATTN_NEG_INF ? 0.f : m_new;
                float sum = 0.f;
                for (int y = lane; y < B_c; y += 32) {
                    const float p = expf(S_row[y] - m_use);
                    S_row[y] = p;
                    sum += p;
                }
                #pragma unroll
                for (int off = 16; off > 0; off >>= 1)
                    sum += __shfl_xor_sync(0xffffffff, sum, off);
                __syncwarp();                          // every lane has read m_i[row]
                if (lane == 0) {
                    const float a = expf(m_old - m_use);
                    alpha[row] = a;
                    l_i[row] = a * l_i[row] + sum;
                    m_i[row] = m_new;
                }
            }
            __syncwarp();

            // P_ij to 16 bits over S_ij, in chunks of 256 entries in row order: entry (x, y) of
            // P lands on bytes 2 (x ldp + y) of the strip, those of S at float x ldp / 2 + y / 2
            // <= x lds + y (ldp / 2 <= lds), at or before S entry (x, y): read in this chunk or
            // an earlier one.
            for (int base = 0; base < 16 * B_c; base += 256) {
                float p[8];
                #pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const int e = base + u * 32 + lane, x = e / B_c;
                    p[u] = S_s[x * lds + e - x * B_c];
                }
                __syncwarp();                          // the whole chunk is read ...
                #pragma unroll
                for (int u = 0; u < 8; ++u) {
                    const int e = base + u * 32 + lane, x = e / B_c;
                    P_s[x * ldp + e - x * B_c] = from_f32<T>(p[u]);
                }
                __syncwarp();                          // ... before it is written over
            }

            // O_i = diag(alpha) O_i + P_ij V_j.
            for (int e = lane; e < 16 * d; e += 32) {
                const int x = e / d;
                O_s[x * ldo + e - x * d] *= alpha[s * 16 + x];
            }
            __syncwarp();
            for (int t = 0; t < dk; ++t) {
                wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
                wmma::load_matrix_sync(acc, O_s + t * 16, ldo, wmma::mem_row_major);
                for (int k = 0; k < ck; ++k) {
                    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
                    wmma::load_matrix_sync(a, P_s + k * 16, ldp);
                    wmma::load_matrix_sync(b, V_j + k * 16 * ldh + t * 16, ldh);
                    wmma::mma_sync(acc, a, b, acc);
                }
                wmma::store_matrix_sync(O_s + t * 16, acc, ldo, wmma::mem_row_major);
            }
        }
    }
    __syncthreads();

    // O_i / l_i and L_i = m_i + log l_i for the r valid rows (a row with nothing to attend to,
    // l = 0: O = 0, L = +inf).
    for (int e = threadIdx.x; e < r * d; e += blockDim.x) {
        const int x = e / d;
        const float l = l_i[x];
        O[e] = l > 0.f ? O_i[x * ldo + e - x * d] / l : 0.f;
    }
    COUNT_WRITE((long long)r * d);
    if (save_lse) {
        for (int x = threadIdx.x; x < r; x += blockDim.x)
            L[x] = l_i[x] > 0.f ? m_i[x] + logf(l_i[x]) : IOATTN_POS_INF;
        COUNT_WRITE(r);
    }
    COUNT_FLUSH(io);
}

// Q, K, V (BH, N, d) in float16; O (BH, N, d) and L (BH, N) in float32. Grid (ceil(N / B_r),
// BH); 32 x warps threads; B_r, B_c multiples of 16 (no larger than N rounded up to 16); d a
// multiple of 16; dynamic shared memory as in the header.
extern "C" __global__ void flash_fwd_f16(const __half* __restrict__ Q,
                                         const __half* __restrict__ K,
                                         const __half* __restrict__ V, float* __restrict__ O,
                                         float* __restrict__ L, int N, int d, int B_r, int B_c,
                                         float tau, int causal, int save_lse,
                                         unsigned long long* io)
{
    flash_fwd_tc<__half>(Q, K, V, O, L, N, d, B_r, B_c, tau, causal, save_lse, io);
}

// The same in bfloat16 (tensor cores for bfloat16 need sm_80; empty below it, and the host
// refuses to launch it there).
extern "C" __global__ void flash_fwd_bf16(const __nv_bfloat16* __restrict__ Q,
                                          const __nv_bfloat16* __restrict__ K,
                                          const __nv_bfloat16* __restrict__ V,
                                          float* __restrict__ O, float* __restrict__ L, int N,
                                          int d, int B_r, int B_c, float tau, int causal,
                                          int save_lse, unsigned long long* io)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    flash_fwd_tc<__nv_bfloat16>(Q, K, V, O, L, N, d, B_r, B_c, tau, causal, save_lse, io);
#endif
}
