"""The emulator's warp-level instructions (``kernels/mma.cuh``, modelled in ``emulate.h``):
``ldmatrix`` (x1/x2/x4, .trans), ``mma.sync`` m16n8k16 (float16, bfloat16) and m16n8k8
(float16), and ``cp.async`` with its groups, checked lane by lane and element by element
against the independent NumPy model of ``tests/gpu/ptx_model.py``; their shared-memory
wavefronts and global sectors against answers computed by hand; and kernels that read a wrong
register or row, or read a copy before waiting for it, shown to get wrong answers."""

import numpy as np
import pytest

from ioattn.gpu.emulator import EmulatorError, OutOfBounds, RawModule, SharedMemoryRace

from . import ptx_model as model

HEADER = '#include "ioattn.cuh"\n#include "mma.cuh"\n'


def kernel(code, name="k", race_check=False):
    return RawModule(code=HEADER + code, race_check=race_check).get_function(name)


# ---------------------------------------------------------------------------------- ldmatrix

def ldmatrix_kernel(num, trans):
    # shared = memory; lane l's row address: element rows[l]; out[l][i] = register i of lane l
    return kernel(f'''
extern "C" __global__ void k(const unsigned short* mem, const int* rows, unsigned* out, int n) {{
    IOATTN_SHARED(unsigned short, s);
    for (int e = threadIdx.x; e < n; e += 32) s[e] = mem[e];
    __syncthreads();
    unsigned r[{num}];
    ldmatrix<{num}, {"true" if trans else "false"}>(r, s + rows[threadIdx.x]);   // LDMATRIX
    for (int i = 0; i < {num}; ++i) out[threadIdx.x * {num} + i] = r[i];
}}''', race_check=True)


def run_ldmatrix(mem, rows, num, trans):
    f = ldmatrix_kernel(num, trans)
    out = np.zeros(32 * num, np.uint32)
    f((1,), (32,), (mem, rows.astype(np.int32), out, np.int32(mem.size)),
      shared_mem=2 * mem.size)
    (site,) = [c for c in f.accesses if "LDMATRIX" in c.code and c.space == "shared"]
    return out.reshape(32, num), site


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
@pytest.mark.parametrize("num", [1, 2, 4])
def test_ldmatrix_agrees_with_the_model_on_every_lane(rng, num, trans):
    stride = 72                                       # rows of 72 halves, 16-byte aligned
    mem = rng.integers(0, 2**16, size=32 * stride, dtype=np.uint16)
    rows = rng.permutation(32) * stride + 8 * rng.integers(0, 8, size=32)
    got, _ = run_ldmatrix(mem, rows, num, trans)
    np.testing.assert_array_equal(got, model.ldmatrix(mem, rows, num, trans))


@pytest.mark.parametrize("trans", [False, True], ids=["plain", "trans"])
def test_ldmatrix_of_an_index_matrix_puts_each_element_where_the_table_says(trans):
    # element e of memory holds e: every register half names the row and column it came from
    mem = np.arange(4 * 64, dtype=np.uint16)
    rows = np.arange(32) * 8                          # 4 matrices, 8 x 8 each, consecutive
    got, _ = run_ldmatrix(mem, rows, 4, trans)
    e = model.halves(got).reshape(32, 4, 2)
    lane = np.arange(32)[:, None]
    for i in range(4):
        r, c = (2 * (lane % 4) + np.arange(2), lane // 4) if trans else \
               (lane // 4, 2 * (lane % 4) + np.arange(2))
        np.testing.assert_array_equal(e[:, i, :], 64 * i + 8 * r + c)


@pytest.mark.parametrize("stride, num, wavefronts", [
    (64, 4, 32),       # rows of 128 bytes: 8 rows of a matrix in banks 0-3, 8-way, x4
    (64, 1, 8),
    (32, 4, 16),       # rows of 64 bytes: 4-way
    (128, 2, 16),      # rows of 256 bytes: 8-way
    (72, 4, 4),        # padded by 8 halves (16 bytes): every matrix one wavefront
    (8, 4, 4),         # consecutive 16-byte rows: one wavefront each
    (136, 4, 4),       # 256 bytes + 16
])
def test_ldmatrix_wavefronts(stride, num, wavefronts):
    mem = np.zeros(32 * stride, np.uint16)
    _, site = run_ldmatrix(mem, np.arange(32) * stride, num, False)
    # one warp request, 8 rows a matrix
    assert (site.requests, site.accesses, site.wavefronts) == (1, 8 * num, wavefronts)


def test_ldmatrix_refuses_a_misaligned_row():
    mem = np.zeros(32 * 72, np.uint16)
    with pytest.raises(EmulatorError, match="ldmatrix: a row address not 16-byte aligned"):
        run_ldmatrix(mem, np.arange(32) * 72 + 4, 4, False)


def test_ldmatrix_refuses_a_row_outside_shared_memory():
    mem = np.zeros(32 * 8, np.uint16)
    with pytest.raises(OutOfBounds, match="by ldmatrix"):
        run_ldmatrix(mem, np.arange(32) * 8 + 8, 4, False)


# --------------------------------------------------------------------------------------- mma

def mma_kernel(k, dtype):
    na, nb = k // 4, k // 8
    call = ("mma_m16n8k8(d, a, b, c);" if k == 8 else
            f"mma_m16n8k16<{'__half' if dtype == 'float16' else '__nv_bfloat16'}>(d, a, b, c);")
    return kernel(f'''
extern "C" __global__ void k(const unsigned* A, const unsigned* B, const float* C, float* D) {{
    const int l = threadIdx.x;
    unsigned a[{na}], b[{nb}];
    float c[4], d[4];
    for (int i = 0; i < {na}; ++i) a[i] = A[l * {na} + i];
    for (int i = 0; i < {nb}; ++i) b[i] = B[l * {nb} + i];
    for (int i = 0; i < 4; ++i) c[i] = C[l * 4 + i];
    {call}
    for (int i = 0; i < 4; ++i) D[l * 4 + i] = d[i];
}}''')


def run_mma(a, b, c, k, dtype):
    d = np.zeros((32, 4), np.float32)
    mma_kernel(k, dtype)((1,), (32,), (np.ascontiguousarray(a, np.uint32),
                                       np.ascontiguousarray(b, np.uint32),
                                       np.ascontiguousarray(c, np.float32), d))
    return d


SHAPES = [(16, "float16"), (16, "bfloat16"), (8, "float16")]


@pytest.mark.parametrize("k, dtype", SHAPES)
def test_mma_agrees_with_the_model_on_every_lane(rng, k, dtype):
    bits = lambda n: model.from_float(rng.standard_normal((32, 2 * n)), dtype)  # noqa: E731
    a, b = model.registers(bits(k // 4)), model.registers(bits(k // 8))
    c = rng.standard_normal((32, 4)).astype(np.float32)
    want = model.mma(a, b, c, k, dtype)
    np.testing.assert_allclose(run_mma(a, b, c, k, dtype), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k, dtype", SHAPES)
def test_mma_of_permutations_is_exact_and_places_every_element(rng, k, dtype):
    # A = a permutation matrix (16 x k), B holds distinct small integers (exact in 16 bits):
    # D = A B + C picks rows of B, so a wrong register, row or column changes some entry
    P = np.zeros((16, k))
    P[np.arange(16), rng.permutation(max(16, k))[:16] % k] = 1.0
    B = rng.permutation(k * 8).reshape(k, 8).astype(np.float64) - 32
    C = rng.integers(-8, 8, size=(16, 8)).astype(np.float64)
    a = model.fragment_a(model.from_float(P, dtype), k)
    b = model.fragment_b(model.from_float(B, dtype), k)
    c = model.fragment_c(C)
    d = run_mma(a, b, c, k, dtype)
    np.testing.assert_array_equal(model.matrix_c(d), P @ B + C)
    np.testing.assert_array_equal(d, model.mma(a, b, c, k, dtype))


# a whole tile product the way a kernel does it: A (16 x 16, row-major) by ldmatrix.x4, B
# (16 x 8) by ldmatrix.x2.trans from row-major [k][n], or .x2 from B^T stored [n][k]; D stored
# through the accumulator table. WRONG swaps registers a[1] and a[2] (a2,a3 with a4,a5).
PRODUCT = '''
extern "C" __global__ void k(const __half* A, const __half* B, float* D, int trans, int wrong) {
    IOATTN_SHARED(__half, s);
    __half* As = s;                          // 16 rows of 24 halves (48 bytes: 16-aligned)
    __half* Bs = s + 16 * 24;                // 16 rows of 8, or 8 rows of 16 (B^T)
    for (int e = threadIdx.x; e < 256; e += 32) As[(e / 16) * 24 + e % 16] = A[e];
    for (int e = threadIdx.x; e < 128; e += 32) Bs[e] = B[e];
    __syncthreads();
    const int l = threadIdx.x, g = l >> 2, t = l & 3;
    unsigned a[4], b[2];
    ldmatrix<4>(a, As + (l % 16) * 24 + 8 * (l / 16));
    if (trans) ldmatrix<2, true>(b, Bs + (l % 16) * 8);
    else ldmatrix<2>(b, Bs + (l % 8) * 16 + 8 * ((l / 8) % 2));
    if (wrong) { unsigned x = a[1]; a[1] = a[2]; a[2] = x; }
    float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
    mma_m16n8k16<__half>(d, a, b, c);
    for (int i = 0; i < 4; ++i) D[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = d[i];
}'''


@pytest.mark.parametrize("trans", [True, False], ids=["B row-major, .trans", "B^T, plain"])
def test_a_tile_product_through_ldmatrix_and_mma(rng, trans):
    A = rng.integers(-4, 5, size=(16, 16)).astype(np.float16)
    B = rng.integers(-4, 5, size=(16, 8)).astype(np.float16)
    f = kernel("#ifndef IOATTN_EMULATE\n#include <cuda_fp16.h>\n#endif\n" + PRODUCT)
    stored = B if trans else np.ascontiguousarray(B.T)
    out = {}
    for wrong in (0, 1):
        D = np.full(128, np.nan, np.float32)
        f((1,), (32,), (A.ravel(), stored.ravel(), D, np.int32(trans), np.int32(wrong)),
          shared_mem=2 * (16 * 24 + 128))
        out[wrong] = D.reshape(16, 8)
    exact = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_array_equal(out[0], exact)
    assert not np.array_equal(out[1], exact)           # the swapped registers: a wrong product
    swapped = A.astype(np.float64).copy()               # ... exactly this one: A with its
    swapped[:8, 8:], swapped[8:, :8] = A[8:, :8], A[:8, 8:]   # off-diagonal quarters swapped
    np.testing.assert_array_equal(out[1], swapped @ B.astype(np.float64))


# ---------------------------------------------------------------------------------- cp.async

COPY = '''
extern "C" __global__ void k(const unsigned* src, unsigned* out) {
    IOATTN_SHARED(unsigned, s);
    const int l = threadIdx.x;
    cp_async<16>(s + 4 * l, src + 4 * l);                   // COPY1
    cp_async_commit();
    cp_async<16, true>(s + 128 + 4 * l, src + 128 + 4 * l); // COPY2
    cp_async_commit();
    out[l] = s[4 * l];                       // before any wait: the old bytes
    out[32 + l] = s[128 + 4 * l];
    cp_async_wait<1>();                      // the first group, not the second
    out[64 + l] = s[4 * l];
    out[96 + l] = s[128 + 4 * l];
    cp_async_wait<0>();
    out[128 + l] = s[128 + 4 * l];
}'''


def test_cp_async_is_visible_only_after_its_wait_group(rng):
    src = rng.integers(0, 2**31, size=256, dtype=np.uint32)
    out = np.zeros(160, np.uint32)
    f = kernel(COPY, race_check=True)
    f((1,), (32,), (src, out), shared_mem=1024)
    stale = np.full(32, 0xFFFFFFFF, np.uint32)           # the emulator's fill of shared memory
    np.testing.assert_array_equal(out[:32], stale)
    np.testing.assert_array_equal(out[32:64], stale)
    np.testing.assert_array_equal(out[64:96], src[0:128:4])
    np.testing.assert_array_equal(out[96:128], stale)
    np.testing.assert_array_equal(out[128:], src[128::4])
    for tag in ("COPY1", "COPY2"):                      # 512 coalesced bytes a request:
        (g,) = [c for c in f.accesses if tag in c.code and c.space == "global"]
        (s,) = [c for c in f.accesses if tag in c.code and c.space == "shared"]
        assert (g.requests, g.sectors) == (1, 16)       # 16 sectors,
        assert (s.requests, s.wavefronts) == (1, 4)     # 4 quarter-warp wavefronts


def test_wait_all_completes_uncommitted_copies(rng):
    src = rng.integers(0, 2**31, size=64, dtype=np.uint32)
    out = np.zeros(64, np.uint32)
    kernel('''extern "C" __global__ void k(const unsigned* src, unsigned* out) {
        IOATTN_SHARED(unsigned, s);
        cp_async<8>(s + 2 * threadIdx.x, src + 2 * threadIdx.x);
        cp_async_wait_all();
        out[2 * threadIdx.x] = s[2 * threadIdx.x];
        out[2 * threadIdx.x + 1] = s[2 * threadIdx.x + 1]; }''')((1,), (32,), (src, out),
                                                                 shared_mem=256)
    np.testing.assert_array_equal(out, src)


def test_another_threads_copy_needs_a_barrier_after_the_wait(rng):
    f = kernel('''extern "C" __global__ void k(const unsigned* src, unsigned* out) {
        IOATTN_SHARED(unsigned, s);
        cp_async<4>(s + threadIdx.x, src + threadIdx.x);
        cp_async_wait_all();
        out[threadIdx.x] = s[(threadIdx.x + 1) % 32]; }''', race_check=True)
    with pytest.raises(SharedMemoryRace):
        f((1,), (32,), (np.zeros(32, np.uint32), np.zeros(32, np.uint32)), shared_mem=128)


@pytest.mark.parametrize("dst, src, message", [
    ("s + 1", "src", "a destination not aligned"),
    ("s", "src + 1", "a source not aligned"),
])
def test_cp_async_refuses_misaligned_addresses(dst, src, message):
    f = kernel(f'''extern "C" __global__ void k(const unsigned* src) {{
        IOATTN_SHARED(unsigned, s);
        cp_async<8>({dst}, {src}); cp_async_wait_all(); }}''')
    with pytest.raises(EmulatorError, match=message):
        f((1,), (32,), (np.zeros(64, np.uint32),), shared_mem=512)


def test_cp_async_refuses_a_destination_outside_shared_memory():
    f = kernel('''extern "C" __global__ void k(const unsigned* src) {
        IOATTN_SHARED(unsigned, s);
        cp_async<16>(s + 4 * threadIdx.x + 4, src); cp_async_wait_all(); }''')
    with pytest.raises(OutOfBounds, match="by cp.async.ca"):
        f((1,), (32,), (np.zeros(4, np.uint32),), shared_mem=512)


@pytest.mark.parametrize("threads, early", [(16, 0), (32, 1)],
                         ids=["half a warp", "a lane returned"])
def test_warp_instructions_need_every_lane(threads, early):
    f = kernel('''extern "C" __global__ void k(float* out, int early) {
        IOATTN_SHARED(unsigned short, s);
        if (early && threadIdx.x == 5) return;
        unsigned a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};
        float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4];
        mma_m16n8k16<__half>(d, a, b, c);
        out[threadIdx.x] = d[0] + s[0]; }''')
    with pytest.raises(EmulatorError, match="mma.sync: warp 0 does not have 32 live lanes"):
        f((1,), (threads,), (np.zeros(32, np.float32), np.int32(early)), shared_mem=64)
