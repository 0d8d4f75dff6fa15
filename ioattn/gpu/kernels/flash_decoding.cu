// Split-K, grouped, paged decoding (FlashDecoding) in float32 arithmetic: the counted model of
// ioattn.decoding.decoding_cost (grouping "stacked"), entry for entry. Counted per block
// (COUNT_READ / COUNT_WRITE, in entries): its Rb d query entries; per tile the table entries
// and 2 d times the rows of the pages it reads; Rb d (S = 1) or Rb (d + 2) written; the merge
// reads S Rb (d + 2) and writes Rb d (Rb the rows of the block's row group).
//
// Inputs. Q is (batch, H_q, N_q, d); the key/value cache is either paged, a pool K, V of
// (pages, H_kv, P_s, d) with a block table (batch, table_width) of int32 page indices (page p
// of sequence b holds its rows [p P_s, min((p+1) P_s, N_k)) at pool page table[b][p]), or
// contiguous (P_s = 0 here), (batch, H_kv, capacity, d) with the first N_k rows valid.
//
// decode_split_{f32,f16,bf16} (Q and the cache stored in float32, float16 or bfloat16; loaded
// into shared memory as float32, and everything computed and written in float32): one block
// per (row group, split s, key/value head h, sequence b), grid (G S, H_kv, batch), blockIdx.x
// = (row group) S + s.
// Its unit is the g = H_q / H_kv query heads of head h stacked, R = g N_q rows, row
// a = i g + j being position i of query head h g + j (ioattn.inference.stack_group), cut into
// G = ceil(R / B_r) row groups of B_r rows (the last ragged; G = 1 when the R rows fit a
// block), each a unit of its own that reads the cache of its splits once: Rb rows from a0. The
// block reads its Rb rows of Q once (scaled by tau), then walks its split's key tiles in order
// (tiles of B_c keys, split s taking ioattn.parallel.layout.shares(T, S)[s] of them). For a
// tile it reads the block-table entries of the pages the tile overlaps and those pages whole
// (all their valid rows, K and V) into shared memory: a page that also overlaps the next tile
// is read again there, which is the model's cost of a page size that does not divide B_c.
// With a contiguous cache a tile reads its own rows. It computes the scores of the tile's own
// keys and the online softmax, and writes O (S = 1) or the split's partial O normalised by
// its own l, with m and l (S > 1; a row that saw no key of the split: O = 0, m = -inf, l = 0).
//
// decode_merge: one block per (row group, h, b), grid (G, H_kv, batch): the S partials merged
// per row by log-sum-exp, O = sum_s l_s e^(m_s - M) O_s / sum_s l_s e^(m_s - M), M = max_s m_s.
//
// Decoding is bound by reading the cache: the R = g N_q stacked rows make 4 R d operations per
// key against 2 d entries of K, V read, about R / 2 operations per byte of a float32 cache (R
// of a 16-bit one), under the float32 CUDA-core ridge of the GPUs of ioattn.gpus (10 to 25
// operations per byte) while R is below about 20 (10 in 16 bits; benchmarks/decode.py shows
// where multi-query heads or speculation cross it). So the products run in float32 on the
// CUDA cores, one thread per score and per output entry, which keeps the kernel readable;
// what sets the time is that the cache is read once per group, in 16-byte loads where a row
// is a multiple of 16 bytes.
//
// Shared memory (floats, in order; ld = d + 4 where d % 4 == 0, else d + 1: rows of K stay
// 16-byte aligned, and eight consecutive rows fall in distinct bank quads):
//   Q_s (Rb x ld), K_s (rows x ld), V_s (rows x ld), O_s (Rb x d), P (Rb x B_c), m, l,
//   alpha (Rb), then the tile's table entries (pages ints),
// where rows and pages are the most rows and pages any tile reads (ioattn.gpu.flash_decoding.layout).
// Rows map to threads only through loops strided by the block (an entry of Q_s, P or O_s a
// thread at a time, a row of the softmax a warp at a time), so R is a runtime bound and no
// register grows with it: the block's shared memory alone limits Rb (flash_decoding.max_rows),
// and every row uses each staged K/V tile before the next is read (at d = 128: 61 rows on
// sm_75, 157 on sm_80, 219 on sm_90, so a chunk of N_q = 64 rows for g <= 2 on the last two
// in one row group; more rows are cut into row groups, each reading the cache once more).
#include "ioattn.cuh"

#ifndef IOATTN_EMULATE
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#endif

#define FULL 0xffffffffu

// Four floats moved as one 16-byte access (CUDA's float4, which the emulator does not define).
struct __align__(16) dec_f4 { float x, y, z, w; };

// 16 bytes of a row in the storage type T: 4 float32 or 8 float16 / bfloat16 entries.
template <typename T> struct __align__(16) dec_pack { T v[16 / sizeof(T)]; };

__device__ __forceinline__ float dec_float(float x) { return x; }
__device__ __forceinline__ float dec_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float dec_float(__nv_bfloat16 x) { return __bfloat162float(x); }

__device__ __forceinline__ float dec_warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

__device__ __forceinline__ float dec_warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

// n rows of d entries of T, contiguous at src, into dst as float32 with row stride ld: 16 bytes
// a load when vec ((d * sizeof(T)) % 16 == 0, src 16-byte aligned; ld % 4 == 0), stored as
// 16-byte float4s.
template <typename T>
__device__ __forceinline__ void dec_copy_rows(float* dst, const T* __restrict__ src, int n,
                                              int d, int ld, bool vec, int tid, int nt) {
    constexpr int E = 16 / sizeof(T);
    if (vec) {
        const int q = d / E;
        for (int e = tid; e < n * q; e += nt) {
            const int row = e / q, col = E * (e % q);
            const dec_pack<T> x = *reinterpret_cast<const dec_pack<T>*>(src + E * (long long)e);
            float* out = dst + row * ld + col;
            for (int i = 0; i < E; i += 4) {
                const dec_f4 f = {dec_float(x.v[i]), dec_float(x.v[i + 1]), dec_float(x.v[i + 2]),
                                  dec_float(x.v[i + 3])};
                *reinterpret_cast<dec_f4*>(out + i) = f;
            }
        }
    } else {
        for (int e = tid; e < n * d; e += nt) dst[(e / d) * ld + e % d] = dec_float(src[e]);
    }
}

#define DECODE_SPLIT_PARAMS(T) \
    const T* __restrict__ Q, const T* __restrict__ K, const T* __restrict__ V, \
    const int* __restrict__ table, float* __restrict__ O, float* __restrict__ part_O, \
    float* __restrict__ part_ml, int H_q, int H_kv, int N_q, int N_k, int d, int B_c, int P_s, \
    int table_width, int capacity, int rows_max, int pages_max, float tau, int causal, int B_r, \
    unsigned long long* io
#define DECODE_SPLIT_ARGS Q, K, V, table, O, part_O, part_ml, H_q, H_kv, N_q, N_k, d, B_c, P_s, \
    table_width, capacity, rows_max, pages_max, tau, causal, B_r, io

template <typename St>                   // the storage type (T is the number of tiles)
__device__ __forceinline__ void decode_split_body(float* cache, DECODE_SPLIT_PARAMS(St))
{
    IOATTN_COUNTERS;
    const int g = H_q / H_kv, R = g * N_q, G = (R + B_r - 1) / B_r;
    const int S = gridDim.x / G, s = blockIdx.x % S, h = blockIdx.y, b = blockIdx.z;
    const int a0 = (blockIdx.x / S) * B_r, Rb = ioattn_min(B_r, R - a0);  // the row group
    const int tid = threadIdx.x, nt = blockDim.x;
    const int lane = tid % 32, warp = tid / 32, warps = (nt + 31) / 32;
    const bool vec = d % 4 == 0;                          // float4 rows in shared memory
    const bool wide = (d * (int)sizeof(St)) % 16 == 0;    // 16-byte rows in global memory
    const int ld = vec ? d + 4 : d + 1;

    float* Q_s = cache;                          // Rb x ld, scaled by tau
    float* K_s = Q_s + Rb * ld;                  // rows_max x ld: the pages of the tile
    float* V_s = K_s + rows_max * ld;            // rows_max x ld
    float* O_s = V_s + rows_max * ld;            // Rb x d, unnormalised output
    float* P = O_s + Rb * d;                     // Rb x B_c, scores, then probabilities
    float* m_i = P + Rb * B_c;                   // running row maxima
    float* l_i = m_i + Rb;                       // running row sums
    float* alpha = l_i + Rb;                     // exp(m_old - m_new) of the current tile
    int* pages = reinterpret_cast<int*>(alpha + Rb);  // the tile's table entries

    // [load Q] the row group's Rb rows: local row a is stacked row a0 + a = i g + j, from
    // query head h g + j, position i
    for (int e = tid; e < Rb * d; e += nt) {
        const int a = a0 + e / d, k = e % d, i = a / g, j = a % g;
        Q_s[(e / d) * ld + k] =
            tau * dec_float(Q[(((long long)b * H_q + h * g + j) * N_q + i) * d + k]);
    }
    COUNT_READ(Rb * d);
    for (int e = tid; e < Rb * d; e += nt) O_s[e] = 0.0f;
    for (int a = tid; a < Rb; a += nt) { m_i[a] = IOATTN_NEG_INF; l_i[a] = 0.0f; }

    // [this split's tiles] shares(T, S): T / S each, one more for the first T mod S
    const int T = (N_k + B_c - 1) / B_c;
    const int t_begin = s * (T / S) + ioattn_min(s, T % S);
    const int t_end = t_begin + T / S + (s < T % S ? 1 : 0);
    const long long head_rows = (long long)b * H_kv + h;    // contiguous: (b, h)'s rows

    for (int t = t_begin; t < t_end; ++t) {
        const int k0 = t * B_c, c = ioattn_min(B_c, N_k - k0);   // the tile's keys
        int first = k0, np = 0;          // first staged row; pages read (paged)
        __syncthreads();                 // the previous tile is done with K_s, V_s, P, pages
        if (P_s > 0) {
            // [read the tile's block-table entries] pages p0 .. p1 overlap keys k0 .. k0+c-1
            const int p0 = k0 / P_s, p1 = (k0 + c - 1) / P_s;
            np = p1 - p0 + 1;
            first = p0 * P_s;
            for (int p = tid; p < np; p += nt)
                pages[p] = table[(long long)b * table_width + p0 + p];
            COUNT_READ(np);
            __syncthreads();
            // [read those pages whole] K and V, every valid row of each
            int staged = 0;
            for (int p = 0; p < np; ++p) {
                const int n = ioattn_min(P_s, N_k - (p0 + p) * P_s);
                const long long at = (((long long)pages[p] * H_kv + h) * P_s) * d;
                dec_copy_rows(K_s + (p * P_s) * ld, K + at, n, d, ld, wide, tid, nt);
                dec_copy_rows(V_s + (p * P_s) * ld, V + at, n, d, ld, wide, tid, nt);
                staged += n;
            }
            COUNT_READ(2 * d * staged);
        } else {
            // [read the tile's own rows] contiguous cache
            const long long at = (head_rows * capacity + k0) * d;
            dec_copy_rows(K_s, K + at, c, d, ld, wide, tid, nt);
            dec_copy_rows(V_s, V + at, c, d, ld, wide, tid, nt);
            COUNT_READ(2 * d * c);
        }
        __syncthreads();
        const float* K_t = K_s + (k0 - first) * ld;      // the tile's own keys among the rows
        const float* V_t = V_s + (k0 - first) * ld;
        // [scores] P = Q_s K_t^T, -inf where the chunk-causal mask hides the key
        for (int e = tid; e < Rb * c; e += nt) {
            const int a = e / c, j = e % c;
            const float* q = Q_s + a * ld;
            const float* kr = K_t + j * ld;
            float acc = 0.0f;
            if (vec) {
                for (int k = 0; k < d; k += 4) {
                    const dec_f4 x = *reinterpret_cast<const dec_f4*>(q + k);
                    const dec_f4 y = *reinterpret_cast<const dec_f4*>(kr + k);
                    acc += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
                }
            } else {
                for (int k = 0; k < d; ++k) acc += q[k] * kr[k];
            }
            const bool hidden = causal && k0 + j > N_k - N_q + (a0 + a) / g;
            P[a * B_c + j] = hidden ? IOATTN_NEG_INF : acc;
        }
        __syncthreads();
        // [online softmax] one warp per row; a row with only -inf so far keeps P = 0, alpha = 1
        for (int a = warp; a < Rb; a += warps) {
            float* p = P + a * B_c;
            float mx = m_i[a];
            for (int j = lane; j < c; j += 32) mx = fmaxf(mx, p[j]);
            mx = dec_warp_max(mx);
            const bool empty = mx == IOATTN_NEG_INF;
            float sum = 0.0f;
            for (int j = lane; j < c; j += 32) {
                const float e = empty ? 0.0f : expf(p[j] - mx);
                p[j] = e;
                sum += e;
            }
            sum = dec_warp_sum(sum);
            __syncwarp();                // every lane has read m_i[a]
            if (lane == 0) {
                const float al = empty ? 1.0f : expf(m_i[a] - mx);
                alpha[a] = al;
                l_i[a] = al * l_i[a] + sum;
                m_i[a] = mx;
            }
        }
        __syncthreads();
        // [O_s = diag(alpha) O_s + P V_t]
        for (int e = tid; e < Rb * d; e += nt) {
            const int a = e / d, k = e % d;
            float o = alpha[a] * O_s[e];
            for (int j = 0; j < c; ++j) o += P[a * B_c + j] * V_t[j * ld + k];
            O_s[e] = o;
        }
    }
    __syncthreads();
    // [write] S = 1: O / l into O; else the split's O / l, m and l into the partials
    if (S == 1) {
        for (int e = tid; e < Rb * d; e += nt) {
            const int a = a0 + e / d, k = e % d, i = a / g, j = a % g;
            const float l = l_i[e / d];
            O[(((long long)b * H_q + h * g + j) * N_q + i) * d + k] = l > 0.0f ? O_s[e] / l : 0.0f;
        }
        COUNT_WRITE(Rb * d);
    } else {
        // row a0 of this split's partial (the partials of a split hold all R rows of the unit)
        const long long unit = (head_rows * S + s) * R + a0;
        for (int e = tid; e < Rb * d; e += nt) {
            const float l = l_i[e / d];
            part_O[unit * d + e] = l > 0.0f ? O_s[e] / l : 0.0f;
        }
        for (int a = tid; a < Rb; a += nt) {
            part_ml[2 * (unit + a)] = m_i[a];
            part_ml[2 * (unit + a) + 1] = l_i[a];
        }
        COUNT_WRITE(Rb * (d + 2));
    }
    COUNT_FLUSH(io);
}

// The cache and Q stored in float32, float16 or bfloat16; everything computed in float32.
extern "C" __global__ void decode_split_f32(DECODE_SPLIT_PARAMS(float))
{
    IOATTN_SHARED(float, cache);          // the block's shared memory, laid out by the body
    decode_split_body<float>(cache, DECODE_SPLIT_ARGS);
}

extern "C" __global__ void decode_split_f16(DECODE_SPLIT_PARAMS(__half))
{
    IOATTN_SHARED(float, cache);          // the block's shared memory, laid out by the body
    decode_split_body<__half>(cache, DECODE_SPLIT_ARGS);
}

extern "C" __global__ void decode_split_bf16(DECODE_SPLIT_PARAMS(__nv_bfloat16))
{
    IOATTN_SHARED(float, cache);          // the block's shared memory, laid out by the body
    decode_split_body<__nv_bfloat16>(cache, DECODE_SPLIT_ARGS);
}

// Shared memory: m then l of every split and row of the row group (S x Rb each); l is
// overwritten by each split's weight l_s e^(m_s - M) / sum. One block per (row group, h, b).
extern "C" __global__ void decode_merge(
    const float* __restrict__ part_O, const float* __restrict__ part_ml, float* __restrict__ O,
    int H_q, int H_kv, int N_q, int d, int S, int B_r, unsigned long long* io)
{
    IOATTN_COUNTERS;
    const int h = blockIdx.y, b = blockIdx.z;
    const int g = H_q / H_kv, R = g * N_q;
    const int a0 = blockIdx.x * B_r, Rb = ioattn_min(B_r, R - a0);    // the row group
    const int tid = threadIdx.x, nt = blockDim.x;
    const long long unit = ((long long)b * H_kv + h) * S * R + a0;   // its row 0 in split 0

    IOATTN_SHARED(float, cache);
    float* m = cache;                // S x Rb
    float* w = m + S * Rb;           // S x Rb: l, then the weights
    for (int e = tid; e < S * Rb; e += nt) {
        const long long at = unit + (long long)(e / Rb) * R + e % Rb;
        m[e] = part_ml[2 * at];
        w[e] = part_ml[2 * at + 1];
    }
    COUNT_READ(2 * S * Rb);
    __syncthreads();
    // a partial with l = 0 saw no key and has m = -inf (one that saw a key has l >= 1), so
    // the maximum M over all m_s is that of the partials with l > 0; M = -inf only when every
    // partial is empty, where the weights are 0
    for (int a = tid; a < Rb; a += nt) {
        float M = IOATTN_NEG_INF;
        for (int s = 0; s < S; ++s) M = fmaxf(M, m[s * Rb + a]);
        float sum = 0.0f;
        for (int s = 0; s < S; ++s) {
            const float l = w[s * Rb + a];
            const float x = l > 0.0f ? l * expf(m[s * Rb + a] - M) : 0.0f;
            w[s * Rb + a] = x;
            sum += x;
        }
        for (int s = 0; s < S; ++s) w[s * Rb + a] = sum > 0.0f ? w[s * Rb + a] / sum : 0.0f;
    }
    __syncthreads();
    for (int e = tid; e < Rb * d; e += nt) {
        const int la = e / d, a = a0 + la, k = e % d, i = a / g, j = a % g;
        float o = 0.0f;
        for (int s = 0; s < S; ++s)
            o += w[s * Rb + la] * part_O[(unit + (long long)s * R) * d + e];
        O[(((long long)b * H_q + h * g + j) * N_q + i) * d + k] = o;
    }
    COUNT_READ(S * Rb * d);
    COUNT_WRITE(Rb * d);
    COUNT_FLUSH(io);
}
