// flash_fa2.cu: a FlashAttention-2-class forward [FA2, Algorithm 1 and Section 3.3] with every
// per-row quantity in registers: Q, K, V in float16 (flash_fa2_f16_d*) or bfloat16
// (flash_fa2_bf16_d*, sm_80 and later), products by mma.sync.m16n8k16 with float32 accumulators,
// d = 64 (B_c = 64) or d = 128 (B_c = 16) fixed at compile time; each warp owns 32 query rows
// (two m16 tiles, MT = 2), so B_r = 32 x warps, 128 with 4 warps (FA2's block for d = 128).
//
// Schedule (the FA2 loop order, so the counted traffic per head equals
// ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), mask=causal?, save_lse=...)):
//   one block per query block i (B_r = 32 x warps rows, rows i0 .. i0 + r - 1), looping over the
//   heads bh = blockIdx.y, blockIdx.y + gridDim.y, ... (any batch x heads):
//     read Q_i (r d) into shared memory as fp16(tau Q_i), then into A fragments (registers);
//     O = 0, m = -inf, l = 0 (registers);
//     for each key block j (causal: only j0 <= i0 + r - 1, the blocks above the diagonal are
//     skipped): K_j, V_j (2 c d, 16-byte cp.async) into the buffer j % 2 while block j - 1 is
//     computed; S = Q_i K_j^T (registers); columns >= N and, causal, columns > row masked to
//     -inf; m_new = max(m, rowmax S); P = exp(S - m_new); l = exp(m - m_new) l + rowsum P;
//     O = exp(m - m_new) O + P V_j, P taken from the S accumulators as A fragments directly;
//     write O / l (r d) and, with save_lse, L = m + log l (r).
//
// Fragments (kernels/mma.cuh; g = lane >> 2, t = lane % 4): warp w owns rows 32 w .. 32 w + 31
// of the block, m-tiles mt = 0, 1 of 16 rows each; an S or O accumulator tile of 8 columns
// holds rows g (c0, c1) and g + 8 (c2, c3) of its m-tile, columns 2t, 2t + 1, so a row's max
// and sum are reduced over the 4 lanes of a group by __shfl_xor_sync 1 and 2. The A fragment of P for keys 16 k .. 16 k + 15 is {S[2k] c0 c1,
// S[2k] c2 c3, S[2k + 1] c0 c1, S[2k + 1] c2 c3} rounded to 16 bits. B of K_j^T: ldmatrix
// (non-transposed) of K rows; B of V_j: ldmatrix .trans of V rows. Each B fragment is loaded
// once and used by both m-tiles: 4 wavefronts per ldmatrix x4 for 4 mma (1 per mma, half what
// one m-tile a warp takes), and the K_j, V_j copies, B_c d 4 bytes over 128 per block, are 1/4
// wavefront per mma at B_r = 128. Registers: O (2 x d/8 x 4 floats), the Q fragments
// (2 x d/16 x 4) and S (2 x B_c/8 x 4) live at once; B_c = 16 at d = 128 keeps them within
// 255 registers without spills on sm_75, sm_80 and sm_90 (B_c = 32 spills).
//
// Shared memory: Q_i (B_r rows) first, then, after Q_i is in registers, over it the two
// buffers K_j[2], V_j[2] (B_c rows each); every row holds d + 8 entries (16 bytes of pad), so
// the 8 row addresses of an ldmatrix matrix lie 16 bytes apart modulo 128 and each 8 x 8
// matrix is one wavefront: 2 * 2 * B_c * (d + 8) * 2 bytes (flash_fa2.py, shared_bytes).
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


namespace fa2 {

// Rows 0 .. rows - 1 of a (BC x D) tile by 16-byte cp.async into `dst` (LD entries a row); the
// rows past them zero-filled.
template <typename T, int D, int BC, int LD>
__device__ __forceinline__ void copy_tile(T* dst, const T* __restrict__ src, int rows)
{
    constexpr int per_row = D / 8;
    for (int e = threadIdx.x; e < BC * per_row; e += blockDim.x) {
        const int row = e / per_row, col = 8 * (e - row * per_row);
        T* to = dst + row * LD + col;
        if (row < rows) cp_async<16, true>(to, src + row * D + col);
        else *reinterpret_cast<chunk16*>(to) = chunk16{{0u, 0u, 0u, 0u}};
    }
}

}  // namespace fa2

// One block's work (the schedule of the header); outside the namespace, so that the dynamic
// shared array keeps its unmangled name ioattn_smem_. MT m16 tiles per warp (16 MT rows).
template <typename T, int D, int BC, int MT>
__device__ void flash_fa2_forward(const T* __restrict__ Q0, const T* __restrict__ K0,
                        const T* __restrict__ V0, float* __restrict__ O0,
                        float* __restrict__ L0, int BH, int N, float tau, int causal,
                        int save_lse, unsigned long long* io)
{
    constexpr int LD = D + 8, DK = D / 16, DT = D / 8, NT = BC / 8;
    IOATTN_COUNTERS;
    IOATTN_SHARED(T, smem);
    T* sQ = smem;
    T* sK = smem;                                      // [2][BC][LD], over sQ
    T* sV = smem + 2 * BC * LD;                        // [2][BC][LD]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int B_r = 16 * MT * (blockDim.x >> 5);
    const int i0 = blockIdx.x * B_r;
    const int r = ioattn_min(B_r, N - i0);
    const int last = i0 + r - 1;
    const int blocks = causal ? ioattn_min((N + BC - 1) / BC, last / BC + 1) : (N + BC - 1) / BC;
    const int w0 = i0 + warp * 16 * MT;                // this warp's first row

    for (long long bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        const T* Q = Q0 + bh * N * D + (long long)i0 * D;
        const T* K = K0 + bh * N * D;
        const T* V = V0 + bh * N * D;
        __syncthreads();                               // the previous head is done with smem
        for (int e = threadIdx.x; e < B_r * D; e += blockDim.x) {
            const int row = e / D, col = e - row * D;
            sQ[row * LD + col] = fa2::from_f32<T>(row < r ? tau * fa2::to_f32(Q[e]) : 0.f);
        }
        __syncthreads();
        unsigned qf[MT][DK][4];
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int k = 0; k < DK; ++k) {
                const int i = lane >> 3;
                const int row = (warp * MT + mt) * 16 + (lane & 7) + 8 * (i & 1);
                ldmatrix<4>(qf[mt][k], sQ + row * LD + 16 * k + 8 * (i >> 1));
            }
        __syncthreads();                               // sQ is free for K_j, V_j

        float o[MT][DT][4];
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int n = 0; n < DT; ++n)
                o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
        float m[MT][2], l[MT][2];
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            m[mt][0] = m[mt][1] = IOATTN_NEG_INF;
            l[mt][0] = l[mt][1] = 0.f;
        }

        fa2::copy_tile<T, D, BC, LD>(sK, K, ioattn_min(BC, N));
        fa2::copy_tile<T, D, BC, LD>(sV, V, ioattn_min(BC, N));
        cp_async_commit();
        for (int jb = 0; jb < blocks; ++jb) {
            const int j0 = jb * BC;
            if (jb + 1 < blocks) {                     // prefetch block jb + 1
                const int b = (jb + 1) & 1, n1 = ioattn_min(BC, N - j0 - BC);
                fa2::copy_tile<T, D, BC, LD>(sK + b * BC * LD, K + (long long)(j0 + BC) * D, n1);
                fa2::copy_tile<T, D, BC, LD>(sV + b * BC * LD, V + (long long)(j0 + BC) * D, n1);
                cp_async_commit();
                cp_async_wait<1>();
            } else {
                cp_async_wait<0>();
            }
            __syncthreads();                           // every thread's copies of block jb
            const T* Kj = sK + (jb & 1) * BC * LD;
            const T* Vj = sV + (jb & 1) * BC * LD;

            // S = (tau Q_i) K_j^T: each B fragment of K_j, loaded once, serves the MT m-tiles
            float s[MT][NT][4];
            #pragma unroll
            for (int n = 0; n < NT; ++n) {
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
                #pragma unroll
                for (int k = 0; k < DK; k += 2) {
                    unsigned b[4];
                    ldmatrix<4>(b, Kj + (n * 8 + (lane & 7)) * LD + 16 * k + 8 * (lane >> 3));
                    const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                    #pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_m16n8k16<T>(s[mt][n], qf[mt][k], b0, s[mt][n]);
                        mma_m16n8k16<T>(s[mt][n], qf[mt][k + 1], b1, s[mt][n]);
                    }
                }
            }
            // masks: columns >= N, and (causal) columns > row
            if (j0 + BC > N || (causal && j0 + BC - 1 > w0)) {
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt)
                    #pragma unroll
                    for (int n = 0; n < NT; ++n)
                        #pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const int col = j0 + n * 8 + 2 * t + (e & 1);
                            const int q = w0 + 16 * mt + g + 8 * (e >> 1);
                            if (col >= N || (causal && col > q)) s[mt][n][e] = IOATTN_NEG_INF;
                        }
            }
            // the online softmax on rows g (h = 0) and g + 8 (h = 1) of each m-tile
            #pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                float alpha[2];
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    float mx = m[mt][h];
                    #pragma unroll
                    for (int n = 0; n < NT; ++n)
                        mx = fmaxf(mx, fmaxf(s[mt][n][2 * h], s[mt][n][2 * h + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
                    const float use = mx == IOATTN_NEG_INF ? 0.f : mx;   // nothing visible yet
                    alpha[h] = expf(m[mt][h] - use);
                    m[mt][h] = mx;
                    float sum = 0.f;
                    #pragma unroll
                    for (int n = 0; n < NT; ++n) {
                        s[mt][n][2 * h] = expf(s[mt][n][2 * h] - use);
                        s[mt][n][2 * h + 1] = expf(s[mt][n][2 * h + 1] - use);
                        sum += s[mt][n][2 * h] + s[mt][n][2 * h + 1];
                    }
                    l[mt][h] = alpha[h] * l[mt][h] + sum;   // this lane's part of the row sum
                }
                #pragma unroll
                for (int n = 0; n < DT; ++n) {
                    o[mt][n][0] *= alpha[0]; o[mt][n][1] *= alpha[0];
                    o[mt][n][2] *= alpha[1]; o[mt][n][3] *= alpha[1];
                }
            }
            // O += P V_j, P from the accumulators; each B fragment of V_j serves the MT m-tiles
            #pragma unroll
            for (int k = 0; k < BC / 16; ++k) {
                unsigned a[MT][4];
                #pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    a[mt][0] = fa2::pack<T>(s[mt][2 * k][0], s[mt][2 * k][1]);
                    a[mt][1] = fa2::pack<T>(s[mt][2 * k][2], s[mt][2 * k][3]);
                    a[mt][2] = fa2::pack<T>(s[mt][2 * k + 1][0], s[mt][2 * k + 1][1]);
                    a[mt][3] = fa2::pack<T>(s[mt][2 * k + 1][2], s[mt][2 * k + 1][3]);
                }
                #pragma unroll
                for (int n = 0; n < DT; n += 2) {
                    const int i = lane >> 3;
                    unsigned b[4];
                    const int key = 16 * k + 8 * (i & 1) + (lane & 7);
                    ldmatrix<4, true>(b, Vj + key * LD + 8 * (n + (i >> 1)));
                    const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                    #pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_m16n8k16<T>(o[mt][n], a[mt], b0, o[mt][n]);
                        mma_m16n8k16<T>(o[mt][n + 1], a[mt], b1, o[mt][n + 1]);
                    }
                }
            }
            __syncthreads();                           // every warp is done with buffer jb % 2
        }

        // O / l and L = m + log l (l = 0: O = 0, L = +inf)
        float* O = O0 + bh * N * D;
        #pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                float sum = l[mt][h];
                sum += __shfl_xor_sync(0xffffffff, sum, 1);
                sum += __shfl_xor_sync(0xffffffff, sum, 2);
                const int q = w0 + 16 * mt + g + 8 * h;
                if (q < N) {
                    const float inv = sum > 0.f ? 1.f / sum : 0.f;
                    #pragma unroll
                    for (int n = 0; n < DT; ++n)       // columns 2t, 2t + 1: one 8-byte store
                        *reinterpret_cast<fa2::pair*>(O + (long long)q * D + 8 * n + 2 * t) =
                            fa2::pair{o[mt][n][2 * h] * inv, o[mt][n][2 * h + 1] * inv};
                    if (save_lse && t == 0)
                        L0[bh * N + q] = sum > 0.f ? m[mt][h] + logf(sum) : IOATTN_POS_INF;
                }
            }
    }
    // The count, once for all heads of this block (so that no counter is live in the loops):
    // per head Q_i (r d), K_j and V_j of the blocks read (2 min(blocks B_c, N) d), O_i (r d)
    // and, with save_lse, L_i (r).
#ifdef IOATTN_COUNT_IO
    const long long heads = blockIdx.y < BH ? (BH - 1 - blockIdx.y) / gridDim.y + 1 : 0;
    COUNT_READ(heads * ((long long)r * D + 2LL * ioattn_min(blocks * BC, N) * D));
    COUNT_WRITE(heads * ((long long)r * D + (save_lse ? r : 0)));
#endif
    COUNT_FLUSH(io);
}

// Q, K, V (BH, N, d) in 16 bits; O (BH, N, d) and L (BH, N) float32. Grid (ceil(N / B_r),
// min(BH, 65535)); 32 x warps threads (B_r = 32 x warps, warps <= 4); dynamic shared memory
// max(B_r, 4 B_c) (d + 8) 2 bytes. The bfloat16 kernels are empty below sm_80 (the host
// refuses them there).
extern "C" __global__ __launch_bounds__(128) void
flash_fa2_f16_d64(const __half* __restrict__ Q, const __half* __restrict__ K,
    const __half* __restrict__ V, float* __restrict__ O, float* __restrict__ L, int BH, int N,
    float tau, int causal, int save_lse, unsigned long long* io)
{
    flash_fa2_forward<__half, 64, 64, 2>(Q, K, V, O, L, BH, N, tau, causal, save_lse, io);
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_f16_d128(const __half* __restrict__ Q, const __half* __restrict__ K,
    const __half* __restrict__ V, float* __restrict__ O, float* __restrict__ L, int BH, int N,
    float tau, int causal, int save_lse, unsigned long long* io)
{
    flash_fa2_forward<__half, 128, 16, 2>(Q, K, V, O, L, BH, N, tau, causal, save_lse, io);
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bf16_d64(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
    const __nv_bfloat16* __restrict__ V, float* __restrict__ O, float* __restrict__ L, int BH,
    int N, float tau, int causal, int save_lse, unsigned long long* io)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    flash_fa2_forward<__nv_bfloat16, 64, 64, 2>(Q, K, V, O, L, BH, N, tau, causal, save_lse, io);
#endif
}

extern "C" __global__ __launch_bounds__(128) void
flash_fa2_bf16_d128(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
    const __nv_bfloat16* __restrict__ V, float* __restrict__ O, float* __restrict__ L, int BH,
    int N, float tau, int causal, int save_lse, unsigned long long* io)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    flash_fa2_forward<__nv_bfloat16, 128, 16, 2>(Q, K, V, O, L, BH, N, tau, causal, save_lse, io);
#endif
}
