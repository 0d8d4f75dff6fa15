"""The CPU emulator runs CUDA sources with the semantics the kernels rely on, and refuses what a
GPU would get wrong."""

import numpy as np
import pytest

from ioattn.gpu.emulator import EmulatorError, RawModule

HEADER = '#include "ioattn.cuh"\n'


def kernel(body, name="k"):
    return RawModule(code=HEADER + body).get_function(name)


def test_indices_cover_the_grid():
    f = kernel('''extern "C" __global__ void k(int* out) {
        int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
        out[i] = i; }''')
    out = np.full(2 * 3 * 40, -1, np.int32)
    f((3, 2), (40,), (out,))
    assert (out == np.arange(out.size)).all()


def test_syncthreads_orders_shared_memory():
    # each thread writes its slot, then reads its neighbour's: correct only with the barrier
    f = kernel('''extern "C" __global__ void k(float* out) {
        IOATTN_SHARED(float, s);
        int t = threadIdx.x, n = blockDim.x;
        s[t] = t * 2.0f;
        __syncthreads();
        out[t] = s[(t + 1) % n]; }''')
    out = np.zeros(64, np.float32)
    f((1,), (64,), (out,), shared_mem=64 * 4)
    assert (out == 2 * ((np.arange(64) + 1) % 64)).all()


def test_a_missing_barrier_is_a_visible_race():
    f = kernel('''extern "C" __global__ void k(float* out) {
        IOATTN_SHARED(float, s);
        int t = threadIdx.x, n = blockDim.x;
        s[t] = 1.0f;
        out[t] = s[(t + 1) % n]; }''')
    out = np.zeros(8, np.float32)
    f((1,), (8,), (out,), shared_mem=32)
    assert np.isnan(out[:7]).all()          # shared memory starts as NaN: read before written


def test_shuffles_reduce_within_a_warp():
    f = kernel('''extern "C" __global__ void k(const float* x, float* out) {
        float v = x[threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        float first = __shfl_sync(0xffffffffu, x[threadIdx.x], 0);
        out[threadIdx.x] = v + 1000.0f * first; }''')
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    out = np.zeros(64, np.float32)
    f((1,), (64,), (x, out))
    sums = x.reshape(2, 32).sum(axis=1).repeat(32)
    firsts = x[[0, 32]].repeat(32)
    np.testing.assert_allclose(out, sums + 1000 * firsts, rtol=1e-5)


def test_a_barrier_not_reached_by_all_is_an_error():
    f = kernel('''extern "C" __global__ void k(float* out) {
        if (threadIdx.x == 3) return;
        __syncthreads();
        out[threadIdx.x] = 1.0f; }''')
    with pytest.raises(EmulatorError, match="not reached by every thread"):
        f((1,), (8,), (np.zeros(8, np.float32),))


def test_divergent_barriers_are_a_deadlock():
    f = kernel('''extern "C" __global__ void k(float* out) {
        if (threadIdx.x < 16) __syncwarp(); else __syncthreads();
        out[threadIdx.x] = 1.0f; }''')
    with pytest.raises(EmulatorError, match="deadlock"):
        f((1,), (64,), (np.zeros(64, np.float32),))


def test_atomics_and_counting_switch():
    code = HEADER + '''extern "C" __global__ void k(unsigned long long* io) {
        IOATTN_COUNTERS;
        COUNT_READ(5);
        COUNT_WRITE(2);
        COUNT_FLUSH(io); }'''
    for options, expect in (((), [0, 0]), (("-DIOATTN_COUNT_IO",), [5 * 7, 2 * 7])):
        io = np.zeros(2, np.uint64)
        RawModule(code=code, options=options).get_function("k")((7,), (64,), (io,))
        assert io.tolist() == expect


def test_arguments_are_checked():
    f = kernel('extern "C" __global__ void k(float* x, int n) { x[0] = n; }')
    x = np.zeros(1, np.float32)
    with pytest.raises(EmulatorError, match="argument 1 has 8 bytes"):
        f((1,), (1,), (x, np.int64(3)))
    with pytest.raises(EmulatorError, match="takes 2 arguments"):
        f((1,), (1,), (x,))
    with pytest.raises(EmulatorError, match="NumPy scalars"):
        f((1,), (1,), (x, 3))
    with pytest.raises(EmulatorError, match="1 to 1024 threads"):
        f((1,), (2048,), (x, np.int32(1)))
    with pytest.raises(EmulatorError, match="dynamic shared memory"):
        f((1,), (1,), (x, np.int32(1)), shared_mem=64 * 1024)
    f.max_dynamic_shared_size_bytes = 64 * 1024     # opting in, as on a GPU
    f((1,), (1,), (x, np.int32(4)), shared_mem=64 * 1024)
    assert x[0] == 4


def test_a_source_that_does_not_compile():
    with pytest.raises(EmulatorError, match="does not compile"):
        RawModule(code=HEADER + 'extern "C" __global__ void k(float* x) { x[0] = y; }')


def test_16_bit_floats_round_as_numpy():
    f = kernel('''extern "C" __global__ void k(const float* x, unsigned short* h,
                                               unsigned short* b, float* back, int n) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            __half u = __float2half_rn(x[i]); __nv_bfloat16 v = __float2bfloat16_rn(x[i]);
            h[i] = u.x; b[i] = v.x; back[i] = __half2float(u) + __bfloat162float(v); } }''')
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(500) * 10.0 ** rng.integers(-9, 6, 500),
                        [0.0, -0.0, 65504.0, 70000.0, 1e-8]]).astype(np.float32)
    n = x.size
    h, b, back = np.zeros(n, np.uint16), np.zeros(n, np.uint16), np.zeros(n, np.float32)
    f((1,), (128,), (x, h, b, back, np.int32(n)))
    with np.errstate(over="ignore"):                         # 70000 overflows to inf
        as_half = x.astype(np.float16)
    assert (h == as_half.view(np.uint16)).all()
    from ioattn.gpu.api import to_storage
    assert (b == to_storage(x, "bfloat16", np)).all()
    expect = as_half.astype(np.float32) + (b.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(back, expect)


def test_wmma_multiplies_tiles():
    f = kernel('''
    using namespace nvcuda;
    extern "C" __global__ void k(const __half* a, const __half* b, float* c) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 1.0f);
        wmma::load_matrix_sync(fa, a, 16);
        wmma::load_matrix_sync(fb, b, 16);
        wmma::mma_sync(acc, fa, fb, acc);
        wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major); }''')
    rng = np.random.default_rng(2)
    A, B = (rng.standard_normal((16, 16)).astype(np.float16) for _ in range(2))
    C = np.zeros((16, 16), np.float32)
    f((1,), (32,), (A, np.ascontiguousarray(B.T), C))       # col-major B = B^T row-major
    np.testing.assert_allclose(C, A.astype(np.float32) @ B.astype(np.float32) + 1, rtol=1e-5)
