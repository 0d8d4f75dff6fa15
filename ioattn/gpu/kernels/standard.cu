// standard.cu: standard attention, S and P materialised in global memory (Algorithm 0 of [FA]),
// as the NumPy reference ioattn/algorithms/standard.py runs it, in three launches:
//   1. standard_product: S = tau Q K^T, one thread block per B_r x B_c tile (I, J) of S, the
//      outer-product tiles of plan_matmul (matmul.cuh);
//   2. P = softmax(S) row by row: standard_softmax_rows reads blocks of R whole rows once
//      (plan.passes == 1), standard_softmax_strips reads each row twice in strips of W
//      (online max and sum, then normalise; plan.passes == 2); L = m + log l when save_lse;
//   3. standard_product: O = P V, one thread block per tile.
// Traffic per head: the two products' k (m ceil(n / b_c) + n ceil(m / b_r)) reads and m n
// writes, plus passes N^2 reads and N^2 writes for the softmax (+ N writes of L):
// io_cost("standard", ...).
//
// [FA] T. Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 0.
#include "ioattn.cuh"
#include "matmul.cuh"

// C = alpha A @ B for (m, k) @ (k, n) per head (B stored as (n, k) when transpose_B): tile
// (I, J) = (blockIdx.x / T_c, blockIdx.x % T_c), T_c = ceil(n / B_c). Shared memory: C_ij
// (B_r x B_c), A_s (B_r x L), B_s (L x B_c), the blocks clipped to m, n and k.
extern "C" __global__ void standard_product(const float* __restrict__ A,
                                            const float* __restrict__ B, float* __restrict__ C,
                                            int m, int k, int n, int B_r, int B_c, int L,
                                            int transpose_B, float alpha, unsigned long long* io) {
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, smem);
    const long long bh = blockIdx.y;
    A += bh * m * k;
    B += bh * k * n;
    C += bh * m * n;
    const int R = ioattn_min(B_r, m), Cw = ioattn_min(B_c, n), W = ioattn_min(L, k);
    float* C_ij = smem;
    float* A_s = C_ij + R * Cw;
    float* B_s = A_s + R * W;

    const int T_c = (n + B_c - 1) / B_c;
    const int i0 = (blockIdx.x / T_c) * B_r, j0 = (blockIdx.x % T_c) * B_c;
    const int r = ioattn_min(B_r, m - i0), c = ioattn_min(B_c, n - j0);
    const float* B_j = transpose_B ? B + (long long)j0 * k : B + j0;
    tile_product(C_ij, A_s, B_s, A + (long long)i0 * k, k, B_j, transpose_B ? k : n,
                 transpose_B != 0, r, c, k, L, nullptr, nullptr);
    COUNT_READ((long long)k * (r + c));
    for (int e = threadIdx.x; e < r * c; e += blockDim.x) {
        const int i = e / c, j = e % c;
        C[(long long)(i0 + i) * n + j0 + j] = alpha * C_ij[e];
    }
    COUNT_WRITE((long long)r * c);
    COUNT_FLUSH(io);
}

// One pass: the block of R whole rows S_i starting at row blockIdx.x * R, one warp per row.
// Shared memory: S_i (R x N), m_i, l_i (R each).
extern "C" __global__ void standard_softmax_rows(const float* __restrict__ S,
                                                 float* __restrict__ P, float* __restrict__ Lse,
                                                 int N, int R, int save_lse,
                                                 unsigned long long* io) {
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, smem);
    const long long bh = blockIdx.y;
    S += bh * N * N;
    P += bh * N * N;
    const int R0 = ioattn_min(R, N);
    float* S_i = smem;
    float* m_i = S_i + (long long)R0 * N;
    float* l_i = m_i + R0;

    const int i0 = blockIdx.x * R, r = ioattn_min(R, N - i0);
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int i = threadIdx.x / 32; i < r; i += warps) {
        const float* S_row = S + (long long)(i0 + i) * N;
        float* x = S_i + (long long)i * N;
        float mx = IOATTN_NEG_INF;
        for (int j = lane; j < N; j += 32) {
            x[j] = S_row[j];
            mx = fmaxf(mx, x[j]);
        }
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int j = lane; j < N; j += 32) {
            x[j] = expf(x[j] - mx);
            sum += x[j];
        }
        sum = warp_sum(sum);
        if (lane == 0) {
            m_i[i] = mx;
            l_i[i] = sum;
        }
        float* P_row = P + (long long)(i0 + i) * N;
        for (int j = lane; j < N; j += 32) P_row[j] = x[j] / sum;
        if (save_lse && lane == 0) Lse[bh * N + i0 + i] = mx + logf(sum);
    }
    COUNT_READ((long long)r * N);
    COUNT_WRITE((long long)r * N);
    if (save_lse) COUNT_WRITE(r);
    COUNT_FLUSH(io);
}

// Two passes over row blockIdx.x in strips of W: online max and sum, then normalise. One warp
// (launch with 32 threads); shared memory: the strip (W entries); m, l in registers.
extern "C" __global__ void standard_softmax_strips(const float* __restrict__ S,
                                                   float* __restrict__ P,
                                                   float* __restrict__ Lse, int N, int W,
                                                   int save_lse, unsigned long long* io) {
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, x);
    const long long bh = blockIdx.y;
    const long long row = bh * N * N + (long long)blockIdx.x * N;
    const float* S_row = S + row;
    float* P_row = P + row;
    const int lane = threadIdx.x;

    float m = IOATTN_NEG_INF, l = 0.0f;
    for (int j0 = 0; j0 < N; j0 += W) {
        const int w = ioattn_min(W, N - j0);
        float mx = IOATTN_NEG_INF;
        for (int j = lane; j < w; j += 32) {
            x[j] = S_row[j0 + j];
            mx = fmaxf(mx, x[j]);
        }
        const float m_new = fmaxf(m, warp_max(mx));
        float sum = 0.0f;
        for (int j = lane; j < w; j += 32) sum += expf(x[j] - m_new);
        l = l * expf(m - m_new) + warp_sum(sum);
        m = m_new;
        COUNT_READ(w);
    }
    for (int j0 = 0; j0 < N; j0 += W) {
        const int w = ioattn_min(W, N - j0);
        for (int j = lane; j < w; j += 32) {
            x[j] = S_row[j0 + j];
            P_row[j0 + j] = expf(x[j] - m) / l;
        }
        COUNT_READ(w);
        COUNT_WRITE(w);
    }
    if (save_lse) {
        if (lane == 0) Lse[bh * N + blockIdx.x] = m + logf(l);
        COUNT_WRITE(1);
    }
    COUNT_FLUSH(io);
}
