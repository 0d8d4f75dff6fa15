// FlashAttention forward, float32, in the FA2 loop order ([FA2] Algorithm 1; the schedule of
// ioattn.algorithms.flash, variant "fa2").
//
// One thread block per query block i (B_r rows) and batch-head (blockIdx.y). Its shared memory
// is the model's cache, entry for entry (B_r, B_c, M from ioattn.plan):
//   Q_i, O_i (B_r x d),  K_j^T (d x B_c),  V_j (B_c x d),  S_ij (B_r x B_c),  m_i, l_i, alpha (B_r)
// = 2 B_r d + 3 B_r + 2 B_c d + B_r B_c entries, the plan's footprint. Q_i is read once, each
// visited K_j, V_j once per query block, O_i (and L_i) written once: the count is
// ioattn.io_cost("flash", N, d, M, block=(B_r, B_c)). With `causal`, only the key blocks with a
// key at or before the block's last query are visited (block-sparse FlashAttention, [FA]
// Section 3.3), and scores of later keys are -inf.
//
// [FA]  Dao, Fu, Ermon, Rudra, Re, "FlashAttention", NeurIPS 2022.
// [FA2] Dao, "FlashAttention-2", arXiv:2307.08691.
#include "ioattn.cuh"

#define FULL 0xffffffffu

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

extern "C" __global__ void flash_fwd_f32(
    const float* __restrict__ Q, const float* __restrict__ K, const float* __restrict__ V,
    float* __restrict__ O, float* __restrict__ L, int N, int d, int B_r, int B_c, float tau,
    int causal, int save_lse, unsigned long long* io)
{
    IOATTN_COUNTERS;
    const long long head = blockIdx.y;
    Q += head * N * d; K += head * N * d; V += head * N * d; O += head * N * d;
    const int i0 = blockIdx.x * B_r, r = ioattn_min(B_r, N - i0);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int lane = tid % 32, warp = tid / 32, warps = (nt + 31) / 32;
    const bool rot = B_c % 2 == 0;

    IOATTN_SHARED(float, cache);
    float* Q_i = cache;                  // B_r x d, scaled by tau
    float* O_i = Q_i + B_r * d;          // B_r x d, unnormalised output
    float* K_t = O_i + B_r * d;          // d x B_c, K_j transposed, rows rotated (below)
    float* V_j = K_t + B_c * d;          // B_c x d
    float* S = V_j + B_c * d;            // B_r x B_c, scores, then P_ij in place
    float* m_i = S + B_r * B_c;          // running row maxima
    float* l_i = m_i + B_r;              // running row sums
    float* alpha = l_i + B_r;            // exp(m_old - m_new) of the current step

    // [load Q_i]
    for (int e = tid; e < r * d; e += nt) {
        Q_i[e] = tau * Q[(long long)i0 * d + e];
        O_i[e] = 0.0f;
    }
    COUNT_READ(r * d);
    for (int a = tid; a < r; a += nt) { m_i[a] = IOATTN_NEG_INF; l_i[a] = 0.0f; }

    const int keys = causal ? ioattn_min(N, i0 + r) : N;    // keys any row of the block sees
    for (int j0 = 0; j0 < keys; j0 += B_c) {
        const int c = ioattn_min(B_c, N - j0);
        __syncthreads();                 // the previous step is done with K_t, V_j, S
        // [load K_j, V_j]
        // Entry (k, b) of K_j^T lies at column (b + k) mod B_c of row k when B_c is even (rot):
        // the lanes of a warp store consecutive k of one b, which unrotated would be B_c
        // entries apart, gcd(B_c, 32) to a bank; rotated, they fall in consecutive banks. (For
        // B_c odd the stride alone spreads them.) Same entries, same footprint.
        for (int e = tid; e < c * d; e += nt) {
            const int k = e % d, b = e / d;
            K_t[k * B_c + (rot ? (b + k) % B_c : b)] = K[(long long)j0 * d + e];
            V_j[e] = V[(long long)j0 * d + e];
        }
        COUNT_READ(2 * c * d);
        __syncthreads();
        // [S_ij = Q_i K_j^T]
        for (int e = tid; e < r * c; e += nt) {
            const int a = e / c, b = e % c;
            float s = 0.0f;
            for (int k = 0, col = b; k < d; ++k) {      // col: where (k, b) lies in row k
                s += Q_i[a * d + k] * K_t[k * B_c + col];
                if (rot && ++col == B_c) col = 0;
            }
            S[a * B_c + b] = (causal && j0 + b > i0 + a) ? IOATTN_NEG_INF : s;
        }
        __syncthreads();
        // [online softmax] one warp per row: m_new = max(m_i, rowmax S), P = exp(S - m_new),
        // alpha = exp(m_i - m_new), l_i = alpha l_i + rowsum P. A row whose scores are all -inf
        // so far keeps P = 0 and alpha = 1 (no -inf - -inf).
        for (int a = warp; a < r; a += warps) {
            float* s = S + a * B_c;
            float mx = m_i[a];
            for (int b = lane; b < c; b += 32) mx = fmaxf(mx, s[b]);
            mx = warp_max(mx);
            const bool empty = mx == IOATTN_NEG_INF;
            float sum = 0.0f;
            for (int b = lane; b < c; b += 32) {
                const float p = empty ? 0.0f : expf(s[b] - mx);
                s[b] = p;
                sum += p;
            }
            sum = warp_sum(sum);
            __syncwarp();                // every lane has read m_i[a] (shuffles order no memory)
            if (lane == 0) {
                const float al = empty ? 1.0f : expf(m_i[a] - mx);
                alpha[a] = al;
                l_i[a] = al * l_i[a] + sum;
                m_i[a] = mx;
            }
        }
        __syncthreads();
        // [O_i = diag(alpha) O_i + P_ij V_j]
        for (int e = tid; e < r * d; e += nt) {
            const int a = e / d, k = e % d;
            float o = alpha[a] * O_i[e];
            for (int b = 0; b < c; ++b) o += S[a * B_c + b] * V_j[b * d + k];
            O_i[e] = o;
        }
    }
    __syncthreads();
    // [write O_i] O_i / l_i, and L_i = m_i + log l_i (+inf for a row with nothing to attend to)
    for (int e = tid; e < r * d; e += nt) {
        const float l = l_i[e / d];
        O[(long long)i0 * d + e] = l > 0.0f ? O_i[e] / l : 0.0f;
    }
    COUNT_WRITE(r * d);
    if (save_lse) {
        for (int a = tid; a < r; a += nt)
            L[head * N + i0 + a] = l_i[a] > 0.0f ? m_i[a] + logf(l_i[a]) : IOATTN_POS_INF;
        COUNT_WRITE(r);
    }
    COUNT_FLUSH(io);
}
