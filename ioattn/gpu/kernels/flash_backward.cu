// flash_backward.cu: the FlashAttention backward pass in float32, in the order of Algorithm 2
// of FlashAttention-2 [FA2] (the backward of FlashAttention [FA], Algorithm 4), exactly as the
// NumPy reference ioattn/algorithms/backward_flash.py schedules it, so that the counted traffic
// per head equals ioattn.io_cost("flash", N, d, M, backward=True).
//
//   1. flash_backward_preprocess: D_i = rowsum(dO_i o O_i), B_r rows per block, written to a
//      global scratch D (BH, N).
//   2. flash_backward: for each K/V block j (B_c rows): read K_j, V_j, K_j *= tau in place,
//      dK_j = dV_j = 0; for each query block i (B_r rows): read Q_i, L_i, dO_i, D_i and dQ_i
//      (dQ_i = 0 instead of a read for j = 0),
//          P_ij  = exp(Q_i K_j^T - L_i),          dV_j += P_ij^T dO_i,
//          dS_ij = P_ij o (dO_i V_j^T - D_i),     dQ_i += dS_ij K_j   (written back),
//                                                 dK_j += dS_ij^T Q_i;
//      then dK_j *= tau and dK_j, dV_j are written.
//
// Parallelism is over batch x heads only: ONE thread block per (batch, head) runs the whole
// K/V loop, with the query loop inside, so that dQ is read T_c - 1 times and written T_c times
// as in the model. (FA2's own GPU kernel runs the K/V blocks in parallel thread blocks and
// accumulates dQ with atomic adds, which moves more data than this model schedule.)
//
// Shared memory is the model's cache: K_j, V_j, dK_j, dV_j (c d each), Q_i, dO_i, dQ_i (r d
// each), L_i, D_i (r each), P_ij and dP_ij/dS_ij (r c each), with r = min(B_r, N) and
// c = min(B_c, N): 4 c d + 3 r d + 2 r + 2 r c floats, the plan's footprint.
//
// [FA]  T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, NeurIPS 2022, Algorithm 4.
// [FA2] T. Dao, arXiv:2307.08691, Algorithm 2.
#include "ioattn.cuh"

#define FLASH_BWD_THREADS 256

// 1. D = rowsum(dO o O): one warp per row, B_r rows per block (grid: T_r x BH).
extern "C" __global__ __launch_bounds__(FLASH_BWD_THREADS) void
flash_backward_preprocess(const float* __restrict__ O, const float* __restrict__ dO,
                          float* __restrict__ D, int N, int d, int B_r,
                          unsigned long long* io)
{
    IOATTN_COUNTERS;
    const long long bh = blockIdx.y;
    const int i0 = blockIdx.x * B_r;
    const int r = ioattn_min(B_r, N - i0);
    O += bh * N * d;
    dO += bh * N * d;
    D += bh * N;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int x = warp; x < r; x += warps) {
        const float* o = O + (long long)(i0 + x) * d;
        const float* g = dO + (long long)(i0 + x) * d;
        float s = 0.f;
        for (int k = lane; k < d; k += 32) s += g[k] * o[k];
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffff, s, off);
        if (lane == 0) D[i0 + x] = s;
    }
    COUNT_READ(2LL * r * d);                               // dO_i, O_i
    COUNT_WRITE(r);                                        // D_i
    COUNT_FLUSH(io);
}

// 2. The gradients: one block per batch x head (grid: 1 x BH), K/V blocks outer.
extern "C" __global__ __launch_bounds__(FLASH_BWD_THREADS) void
flash_backward(const float* __restrict__ Q, const float* __restrict__ K,
               const float* __restrict__ V, const float* __restrict__ dO,
               const float* __restrict__ L, const float* __restrict__ D,
               float* __restrict__ dQ, float* __restrict__ dK, float* __restrict__ dV,
               int N, int d, int B_r, int B_c, float tau, unsigned long long* io)
{
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, smem);
    const int R = ioattn_min(B_r, N), C = ioattn_min(B_c, N);
    float* K_j = smem;                 // c x d, scaled by tau
    float* V_j = K_j + C * d;          // c x d
    float* dK_j = V_j + C * d;         // c x d
    float* dV_j = dK_j + C * d;        // c x d
    float* Q_i = dV_j + C * d;         // r x d
    float* dO_i = Q_i + R * d;         // r x d
    float* dQ_i = dO_i + R * d;        // r x d
    float* L_i = dQ_i + R * d;         // r
    float* D_i = L_i + R;              // r
    float* P = D_i + R;                // r x c: P_ij
    float* dS = P + R * C;             // r x c: dP_ij, then dS_ij

    const long long bh = blockIdx.y;
    Q += bh * N * d;  K += bh * N * d;  V += bh * N * d;  dO += bh * N * d;
    dQ += bh * N * d; dK += bh * N * d; dV += bh * N * d;
    L += bh * N;      D += bh * N;
    const int t = threadIdx.x, T = blockDim.x;

    for (int j0 = 0; j0 < N; j0 += B_c) {
        const int c = ioattn_min(B_c, N - j0);
        const long long kv = (long long)j0 * d;
        for (int e = t; e < c * d; e += T) {               // read K_j, V_j; dK_j = dV_j = 0
            K_j[e] = tau * K[kv + e];                       // tau folded into K_j
            V_j[e] = V[kv + e];
            dK_j[e] = 0.f;
            dV_j[e] = 0.f;
        }
        COUNT_READ(2LL * c * d);

        for (int i0 = 0; i0 < N; i0 += B_r) {
            const int r = ioattn_min(B_r, N - i0);
            const long long q = (long long)i0 * d;
            __syncthreads();                                // K_j loaded; last step done
            for (int e = t; e < r * d; e += T) {            // read Q_i, dO_i, dQ_i
                Q_i[e] = Q[q + e];
                dO_i[e] = dO[q + e];
                dQ_i[e] = j0 > 0 ? dQ[q + e] : 0.f;         // j = 0: dQ_i starts as zeros
            }
            for (int x = t; x < r; x += T) {                // read L_i, D_i
                L_i[x] = L[i0 + x];
                D_i[x] = D[i0 + x];
            }
            COUNT_READ((long long)r * d + r);               // Q_i, L_i
            COUNT_READ((long long)r * d + r);               // dO_i, D_i
            if (j0 > 0) COUNT_READ((long long)r * d);       // dQ_i
            __syncthreads();

            // P_ij = exp(Q_i K_j^T - L_i), dS_ij = P_ij o (dO_i V_j^T - D_i), one entry per
            // thread. Each thread starts its dot products at column y mod d, so the threads
            // of a warp (consecutive y) read different banks of K_j and V_j.
            for (int e = t; e < r * c; e += T) {
                const int x = e / c, y = e % c;
                const float* qx = Q_i + x * d;
                const float* gx = dO_i + x * d;
                const float* ky = K_j + y * d;
                const float* vy = V_j + y * d;
                float s = 0.f, dp = 0.f;
                int k = y % d;
                for (int n = 0; n < d; ++n) {
                    s += qx[k] * ky[k];
                    dp += gx[k] * vy[k];
                    if (++k == d) k = 0;
                }
                const float p = expf(s - L_i[x]);
                P[x * C + y] = p;
                dS[x * C + y] = p * (dp - D_i[x]);
            }
            __syncthreads();

            // dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i (tau applied once, at the end).
            for (int e = t; e < c * d; e += T) {
                const int y = e / d, n = e % d;
                float a = 0.f, b = 0.f;
                for (int x = 0; x < r; ++x) {
                    a += P[x * C + y] * dO_i[x * d + n];
                    b += dS[x * C + y] * Q_i[x * d + n];
                }
                dV_j[e] += a;
                dK_j[e] += b;
            }
            // dQ_i += dS_ij K_j, written back.
            for (int e = t; e < r * d; e += T) {
                const int x = e / d, n = e % d;
                float a = dQ_i[e];
                for (int y = 0; y < c; ++y) a += dS[x * C + y] * K_j[y * d + n];
                dQ_i[e] = a;
                dQ[q + e] = a;
            }
            COUNT_WRITE((long long)r * d);                  // dQ_i
        }
        __syncthreads();
        for (int e = t; e < c * d; e += T) {                // write tau dK_j, dV_j
            dK[kv + e] = tau * dK_j[e];
            dV[kv + e] = dV_j[e];
        }
        COUNT_WRITE(2LL * c * d);
        __syncthreads();                                    // before K_j, V_j are reloaded
    }
    COUNT_FLUSH(io);
}
