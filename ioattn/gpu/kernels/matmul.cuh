// matmul.cuh: one output tile of the outer-product matrix product, the loop of
// ioattn/algorithms/matmul.py (tiled_product), shared by square_tiling.cu and standard.cu.
// Include it after ioattn.cuh.
//
// A thread block holds the r x c tile C_IJ of C = A @ B in shared memory while the matching
// strips of A (r x w) and of B (w x c), w <= L columns of A (rows of B) at a time, stream through
// the cache: k (r + c) entries loaded per tile, as tiled_product loads them [COSMA].
//
// [COSMA] G. Kwasniewski et al., "Red-blue pebbling revisited", SC 2019.
#pragma once

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffff, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, o));
    return x;
}

// A_s (r x w) <- the strip of A at A: A[i, l] = A[i * lda + l], one warp per row. With m_i the
// entries become exp(a - m_i) as they arrive (phase 2 of square tiling); with l_i too, each row's
// sum is added to l_i.
__device__ __forceinline__ void load_a_strip(float* A_s, const float* __restrict__ A,
                                             long long lda, int r, int w,
                                             const float* m_i, float* l_i) {
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int i = threadIdx.x / 32; i < r; i += warps) {
        const float* a = A + i * lda;
        float sum = 0.0f;
        for (int l = lane; l < w; l += 32) {
            float x = a[l];
            if (m_i) {
                x = expf(x - m_i[i]);
                sum += x;
            }
            A_s[i * w + l] = x;
        }
        if (l_i) {
            sum = warp_sum(sum);
            if (lane == 0) l_i[i] += sum;
        }
    }
}

// B_s (w x c) <- the strip of B at B: B[l, j] = B[l * ldb + j], or with transpose_B (B stored as
// (n, k), as K is in Q K^T) B[l, j] = B[j * ldb + l].
__device__ __forceinline__ void load_b_strip(float* B_s, const float* __restrict__ B,
                                             long long ldb, int w, int c, bool transpose_B) {
    for (int e = threadIdx.x; e < w * c; e += blockDim.x) {
        if (transpose_B) {
            const int j = e / w, l = e % w;
            B_s[l * c + j] = B[j * ldb + l];
        } else {
            const int l = e / c, j = e % c;
            B_s[e] = B[l * ldb + j];
        }
    }
}

// C_IJ (r x c) += A_s (r x w) @ B_s (w x c); with first, C_IJ = A_s @ B_s.
__device__ __forceinline__ void multiply_strip(float* C_ij, const float* A_s, const float* B_s,
                                               int r, int w, int c, bool first) {
    for (int e = threadIdx.x; e < r * c; e += blockDim.x) {
        const float* a = A_s + (e / c) * w;
        const float* b = B_s + e % c;
        float s = first ? 0.0f : C_ij[e];
        for (int l = 0; l < w; ++l) s += a[l] * b[l * c];
        C_ij[e] = s;
    }
}

// C_IJ = A_I @ B_J in shared memory (r x c, row-major): A_I the r rows of A starting at A (row
// stride lda, k columns), B_J the c columns of B starting at B (row stride ldb; transpose_B as in
// load_b_strip), in strips of L. m_i and l_i as in load_a_strip (null for a plain product).
// All threads call it; each strip starts with __syncthreads (so C_IJ and the strips of the
// last tile are free), and it ends with one. It loads k (r + c) entries.
__device__ void tile_product(float* C_ij, float* A_s, float* B_s, const float* __restrict__ A,
                             long long lda, const float* __restrict__ B, long long ldb,
                             bool transpose_B, int r, int c, int k, int L, const float* m_i,
                             float* l_i) {
    for (int l0 = 0; l0 < k; l0 += L) {
        const int w = ioattn_min(L, k - l0);
        __syncthreads();                       // the last strip and tile are used up
        load_a_strip(A_s, A + l0, lda, r, w, m_i, l_i);
        load_b_strip(B_s, transpose_B ? B + l0 : B + l0 * ldb, ldb, w, c, transpose_B);
        __syncthreads();
        multiply_strip(C_ij, A_s, B_s, r, w, c, l0 == 0);
    }
    __syncthreads();
}
