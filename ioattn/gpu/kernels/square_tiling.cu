// square_tiling.cu: square-tiling attention, Algorithm 1 of Saha and Ye [SY], as the NumPy
// reference ioattn/algorithms/square_tiling.py runs it (both schedules: the plan's tiles).
//
// Two tiled products through global memory, one thread block per row block I of B_r rows
// (grid: ceil(N / B_r) x BH), its column tiles J in order, row statistics in shared memory:
//   1. square_tiling_scores: S_IJ = tau Q_I K_J^T for every J, written to the scratch S, with
//      the running row maximum m_I, written once after the last tile.
//   2. square_tiling_output: O_IJ = exp(S_I - m_I) V_J / l_I for the tiles J of the d columns;
//      every strip of S_I is exponentiated as it arrives, the row sums l_I are accumulated during
//      the first tile (J = 0), and L_I = m_I + log l_I is written when save_lse.
// Traffic per head: the two products' k (m ceil(n / b_c) + n ceil(m / b_r)) reads and m n writes,
// plus m written and read once (+ N writes of L): io_cost("square_tiling", ...).
//
// [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
//      ICML 2024, arXiv:2402.07443, Algorithm 1.
#include "ioattn.cuh"
#include "matmul.cuh"

// Phase 1. Shared memory: S_ij (B_r x B_c), Q_s (B_r x L), K_s (L x B_c), m_i (B_r), the
// blocks clipped to N, N and d.
extern "C" __global__ void square_tiling_scores(const float* __restrict__ Q,
                                                const float* __restrict__ K,
                                                float* __restrict__ S, float* __restrict__ m,
                                                int N, int d, int B_r, int B_c, int L, float tau,
                                                unsigned long long* io) {
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, smem);
    const long long bh = blockIdx.y;
    Q += bh * N * d;
    K += bh * N * d;
    S += bh * N * N;
    m += bh * N;
    const int R = ioattn_min(B_r, N), C = ioattn_min(B_c, N), W = ioattn_min(L, d);
    float* S_ij = smem;
    float* Q_s = S_ij + R * C;
    float* K_s = Q_s + R * W;
    float* m_i = K_s + W * C;

    const int i0 = blockIdx.x * B_r, r = ioattn_min(B_r, N - i0);
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int i = threadIdx.x; i < r; i += blockDim.x) m_i[i] = IOATTN_NEG_INF;
    for (int j0 = 0; j0 < N; j0 += B_c) {
        const int c = ioattn_min(B_c, N - j0);
        tile_product(S_ij, Q_s, K_s, Q + (long long)i0 * d, d, K + (long long)j0 * d, d, true,
                     r, c, d, L, nullptr, nullptr);
        COUNT_READ((long long)d * (r + c));
        // S_ij *= tau; m_i = max(m_i, rowmax S_ij); write S_ij (one warp per row)
        for (int i = threadIdx.x / 32; i < r; i += warps) {
            float* S_row = S + (long long)(i0 + i) * N + j0;
            float mx = IOATTN_NEG_INF;
            for (int j = lane; j < c; j += 32) {
                const float s = tau * S_ij[i * c + j];
                S_row[j] = s;
                mx = fmaxf(mx, s);
            }
            mx = warp_max(mx);
            if (lane == 0) m_i[i] = fmaxf(m_i[i], mx);
        }
        COUNT_WRITE((long long)r * c);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < r; i += blockDim.x) m[i0 + i] = m_i[i];
    COUNT_WRITE(r);
    COUNT_FLUSH(io);
}

// Phase 2. Shared memory: O_ij (B_r x B_c), S_s (B_r x L), V_s (L x B_c), m_i, l_i (B_r each),
// the blocks clipped to N, d and N.
extern "C" __global__ void square_tiling_output(const float* __restrict__ S,
                                                const float* __restrict__ V,
                                                const float* __restrict__ m,
                                                float* __restrict__ O, float* __restrict__ Lse,
                                                int N, int d, int B_r, int B_c, int L,
                                                int save_lse, unsigned long long* io) {
    IOATTN_COUNTERS;
    IOATTN_SHARED(float, smem);
    const long long bh = blockIdx.y;
    S += bh * N * N;
    V += bh * N * d;
    O += bh * N * d;
    m += bh * N;
    const int R = ioattn_min(B_r, N), C = ioattn_min(B_c, d), W = ioattn_min(L, N);
    float* O_ij = smem;
    float* S_s = O_ij + R * C;
    float* V_s = S_s + R * W;
    float* m_i = V_s + W * C;
    float* l_i = m_i + R;

    const int i0 = blockIdx.x * B_r, r = ioattn_min(B_r, N - i0);
    for (int i = threadIdx.x; i < r; i += blockDim.x) {
        m_i[i] = m[i0 + i];
        l_i[i] = 0.0f;
    }
    COUNT_READ(r);
    for (int j0 = 0; j0 < d; j0 += B_c) {
        const int c = ioattn_min(B_c, d - j0);
        tile_product(O_ij, S_s, V_s, S + (long long)i0 * N, N, V + j0, d, false, r, c, N, L,
                     m_i, j0 == 0 ? l_i : nullptr);
        COUNT_READ((long long)N * (r + c));
        // O_ij /= l_i, written
        for (int e = threadIdx.x; e < r * c; e += blockDim.x) {
            const int i = e / c, j = e % c;
            O[(long long)(i0 + i) * d + j0 + j] = O_ij[e] / l_i[i];
        }
        COUNT_WRITE((long long)r * c);
    }
    if (save_lse) {
        for (int i = threadIdx.x; i < r; i += blockDim.x)
            Lse[bh * N + i0 + i] = m_i[i] + logf(l_i[i]);
        COUNT_WRITE(r);
    }
    COUNT_FLUSH(io);
}
