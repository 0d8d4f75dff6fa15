"""Warp-level memory requests counted by the emulator (its race-check build): shared-memory
wavefronts (32 banks of 4 bytes; a broadcast is free; 8-byte accesses by half-warps, 16-byte by
quarter-warps) and the 32-byte global sectors of each request, against answers computed by hand."""

import numpy as np
import pytest

import ioattn
import ioattn.gpu as gpu
from ioattn.gpu.emulator import RawModule
from ioattn.masks import Mask

HEADER = '#include "ioattn.cuh"\n'

# Lane t of one warp reads element (t * stride + offset) of a shared array of ELEM, then writes
# the value to element (t * gstride + goffset) of a global array of ELEM.
PATTERN = HEADER + '''
extern "C" __global__ void k(ELEM* y, int stride, int offset, int gstride, int goffset) {
    IOATTN_SHARED(ELEM, s);
    ELEM v = s[threadIdx.x * stride + offset];                       // SHARED
    y[threadIdx.x * gstride + goffset] = v;                       // GLOBAL
}'''

TYPES = {4: "float", 2: "unsigned short", 8: "unsigned long long", 16: "unsigned __int128"}


def counts(size, stride, offset=0, gstride=1, goffset=0):
    code = f"#define ELEM {TYPES[size]}\n" + PATTERN
    f = RawModule(code=code, race_check=True).get_function("k")
    y = np.zeros((32 * 64 + 64) * size, np.uint8)
    f((1,), (32,), (y, np.int32(stride), np.int32(offset), np.int32(gstride),
                    np.int32(goffset)), shared_mem=(32 * 64 + 64) * size)
    shared = [c for c in f.accesses if c.space == "shared" and "SHARED" in c.code]
    glob = [c for c in f.accesses if c.space == "global" and "GLOBAL" in c.code]
    assert len(shared) == 1 and len(glob) == 1, f.accesses
    assert shared[0].requests == glob[0].requests == 1
    assert shared[0].accesses == glob[0].accesses == 32
    return shared[0].wavefronts, glob[0].sectors


@pytest.mark.parametrize("size, stride, offset, wavefronts", [
    (4, 1, 0, 1),        # 32 consecutive floats: one word per bank
    (4, 0, 5, 1),        # one float for every lane: a broadcast
    (4, 2, 0, 2),        # stride 2: banks 0, 2, ..., 30 twice each
    (4, 8, 0, 8),        # stride 8: 4 banks, 8 words each
    (4, 32, 0, 32),      # a column of a 32 x 32 float tile: one bank, 32 words
    (4, 33, 0, 1),       # the same column padded to 33: every bank once
    (4, 3, 7, 1),        # odd stride: a permutation of the banks
    (2, 1, 0, 1),        # 32 consecutive halves: 16 words, two lanes per word
    (2, 64, 0, 32),      # halves 128 bytes apart: one bank, 32 words
    (8, 1, 0, 2),        # 32 consecutive 8-byte words: two half-warps of 32 banks
    (8, 16, 0, 32),      # 8-byte, 128 bytes apart: per half-warp 16 words x 2 in 2 banks
    (16, 1, 0, 4),       # 32 consecutive 16-byte: four quarter-warps, 32 banks each
    (16, 2, 0, 8),       # 16-byte, 32 bytes apart: per quarter-warp 2 words per bank
    (16, 8, 0, 32),      # 16-byte, 128 bytes apart: per quarter-warp 8 words per bank
])
def test_shared_wavefronts(size, stride, offset, wavefronts):
    assert counts(size, stride, offset)[0] == wavefronts


@pytest.mark.parametrize("size, gstride, goffset, sectors", [
    (4, 1, 0, 4),        # 128 coalesced bytes: 4 sectors
    (4, 1, 1, 5),        # shifted by one float: straddles 5
    (4, 0, 0, 1),        # every lane the same float: one sector
    (4, 2, 0, 8),        # stride 2: 256 bytes spanned, 8 sectors
    (4, 8, 0, 32),       # 32 bytes apart: a sector per lane
    (4, 64, 0, 32),      # far apart: a sector per lane
    (16, 1, 0, 16),      # 512 coalesced bytes
    (2, 1, 0, 2),        # 64 coalesced bytes
])
def test_global_sectors(size, gstride, goffset, sectors):
    assert counts(size, 1, 0, gstride, goffset)[1] == sectors


def test_loops_pair_the_lanes_kth_iterations():
    # each lane writes s[e] for e = t, t + 32, ...: every iteration a conflict-free request
    f = RawModule(code=HEADER + '''extern "C" __global__ void k(float* y) {
        IOATTN_SHARED(float, s);
        for (int e = threadIdx.x; e < 200; e += blockDim.x) s[e] = 1.0f;   // FILL
        __syncthreads();
        y[threadIdx.x] = s[threadIdx.x]; }''', race_check=True).get_function("k")
    f((1,), (64,), (np.zeros(64, np.float32),), shared_mem=800)
    (fill,) = [c for c in f.accesses if "FILL" in c.code]
    # 2 warps; warp 0 covers e < 200 in 4 iterations (0..127 in 2, then 128..191), warp 1 too
    assert fill.accesses == 200
    assert fill.requests == fill.wavefronts == 7     # warp 0: 4 requests, warp 1: 3 (32..199)


def test_a_kernel_run_reports_its_sites():
    rng = np.random.default_rng(0)
    Q, K, V = (rng.standard_normal((40, 16)) for _ in range(3))
    r = gpu.run("flash", Q, K, V, block=(16, 32), backend="emulator-racecheck")
    assert r.accesses and {c.kernel for c in r.accesses} == {"flash_fwd_f32"}
    assert {c.space for c in r.accesses} == {"shared", "global"}
    assert all(c.wavefronts >= c.requests > 0 for c in r.accesses if c.space == "shared")
    assert all(c.sectors > 0 for c in r.accesses if c.space == "global")


def test_the_table_lists_every_kernel():
    from ioattn.gpu import banks

    kernels = set()
    for label in banks.CASES:
        rows = banks.site_counts(label)
        assert rows, label
        text = banks.markdown(label, rows)
        assert text.count("\n| ") == len(rows) + 1          # the header, then a row a site
        kernels |= {c.kernel for c in rows}
    assert kernels == {"flash_fwd_f32", "flash_fwd_f16", "square_tiling_scores",
                       "square_tiling_output",
                       "standard_product", "standard_softmax_rows", "standard_softmax_strips",
                       "flash_backward_preprocess", "flash_backward", "flash_fa2_f16_d64",
                       "flash_fa2_bwd_prep_f16", "flash_fa2_bwd_f16_d64", "decode_split_f32",
                       "decode_merge"}
    # every kernel file has a launch in the table
    from ioattn.gpu.sources import files, kernel_names

    for f in files():
        assert kernels & set(kernel_names(f)), f


@pytest.mark.parametrize("B_c, most", [(32, 1), (64, 1), (96, 1), (33, 1), (16, 2), (24, 2),
                                       (48, 2)])
def test_flash_stores_its_K_transpose_without_bank_conflicts(rng, B_c, most):
    # unrotated, the store of K_j^T put a warp's 32 lanes B_c entries apart: gcd(B_c, 32)-way
    # (32-way at B_c = 32, 64, 96; 16-way at 16 and 48; 8-way at 24), 8,192 wavefronts for the
    # 256 requests of N = 64, d = 64, block (32, 32); rotated, 256
    N, d = max(B_c, 40), 64
    Q, K, V = (rng.standard_normal((N, d)) for _ in range(3))
    r = gpu.run("flash", Q, K, V, block=(16, B_c), backend="emulator-racecheck")
    (store,) = [c for c in r.accesses if c.space == "shared" and c.code.startswith("K_t[")]
    assert store.wavefronts <= most * store.requests
    (loads,) = [c for c in r.accesses if c.space == "global" and c.code.startswith("K_t[")]
    assert loads.sectors == 4 * loads.requests        # the global side stays coalesced


def test_the_table_shows_the_rotated_store(rng):
    from ioattn.gpu import banks

    rows = banks.site_counts("flash float32")
    (store,) = [c for c in rows if c.space == "shared" and c.code.startswith("K_t[")]
    assert (store.requests, store.wavefronts) == (256, 256)


# One WMMA load of a 16 x 16 tile of halves (or a float32 accumulator) with rows ldm apart.
WMMA = HEADER + '''
#ifndef IOATTN_EMULATE
#include <cuda_fp16.h>
#include <mma.h>
#endif
using namespace nvcuda;
extern "C" __global__ void k(float* y, int ldm, int acc) {
    IOATTN_SHARED(__half, s);
    for (int e = threadIdx.x; e < 16 * ldm; e += 32) s[e] = __float2half(0.f);
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    float* f = reinterpret_cast<float*>(s);
    if (acc) wmma::load_matrix_sync(c, f, ldm / 2, wmma::mem_row_major);     // ACC
    else wmma::load_matrix_sync(a, s, ldm);                                  // TILE
    y[threadIdx.x] = 0.f;
}'''


@pytest.mark.parametrize("ldm, acc, requests, wavefronts", [
    (64, 0, 1, 32),      # halves, rows of 128 bytes: each 16-byte column of 8 rows in 4 banks
    (72, 0, 1, 4),       # padded by 16 bytes: 4 phases of one wavefront
    (128, 0, 1, 32),     # rows of 256 bytes
    (136, 0, 1, 4),
    (32, 0, 1, 16),      # rows of 64 bytes: 4-way (rows 0, 2, 4, 6 of a phase in banks 0-3)
    (128, 1, 2, 64),     # float32 rows of 256 bytes: 2 requests of 4 phases, 8-way
    (136, 1, 2, 8),      # padded by 16 bytes
])
def test_wmma_tiles_count_as_16_byte_rows(ldm, acc, requests, wavefronts):
    f = RawModule(code=WMMA, race_check=True).get_function("k")
    f((1,), (32,), (np.zeros(32, np.float32), np.int32(ldm), np.int32(acc)),
      shared_mem=2 * 16 * ldm)
    (site,) = [c for c in f.accesses if ("ACC" if acc else "TILE") in c.code]
    assert (site.requests, site.wavefronts) == (requests, wavefronts)


def test_the_tensor_core_tiles_are_conflict_free(rng):
    # every WMMA load and store of flash_tc.cu: rows padded by 16 bytes, 4 wavefronts a request
    # (8 rows of 16 bytes a phase, 4 phases); unpadded (rows of d = 64 halves, 128 bytes) the
    # same loads took 32, 8-way
    from ioattn.gpu import banks

    rows = banks.site_counts("flash float16 (tensor cores)")
    tiles = [c for c in rows if "matrix_sync" in c.code]
    assert len(tiles) == 7
    assert all(c.space == "shared" and c.wavefronts == 4 * c.requests for c in tiles), tiles


def test_the_tensor_core_kernel_copies_Q_K_and_V_16_bytes_a_lane():
    # cp.async of 16 bytes a lane: a warp request moves 512 consecutive bytes of Q, K or V (16
    # sectors), written in 4 conflict-free quarter-warp phases; one thread loading one 2-byte
    # entry a time made 8 times as many requests of 2 sectors
    from ioattn.gpu import banks

    rows = banks.site_counts("flash float16 (tensor cores)")
    copies = [c for c in rows if c.code.startswith("if (row < rows) cp_async")]
    (glob,) = [c for c in copies if c.space == "global"]
    (shared,) = [c for c in copies if c.space == "shared"]
    # N = d = 64, block (32, 32): Q (64 rows), then 2 query blocks x 2 key blocks x (K_j, V_j)
    # x 32 rows, of 128 bytes each
    assert glob.accesses * 16 == 64 * 128 + 2 * 2 * 2 * 32 * 128
    assert glob.requests == shared.requests == glob.accesses // 32
    assert glob.sectors == 16 * glob.requests and shared.wavefronts == 4 * shared.requests


def test_the_tensor_core_kernel_reads_Q_i_only_by_its_16_byte_copies(rng):
    # ragged: N = 40 leaves the last query block 8 of its 16 rows and the last key block 8 of
    # 16; the copy of every tile (Q_i, K_j, V_j) is the one global read site, a request per 32
    # chunks of 8 entries (a partial chunk group one more), 2 chunks a sector
    N, d, B = 40, 32, 16
    Q, K, V = (rng.standard_normal((N, d)) for _ in range(3))
    r = gpu.run("flash", Q, K, V, block=(B, B), causal=True, dtype="float16", count_io=True,
                backend="emulator-racecheck")
    reads = [c for c in r.accesses if c.space == "global" and not c.code.startswith(("O[", "L["))]
    (copy,) = reads
    assert copy.code.startswith("if (row < rows) cp_async")

    def requests(rows):                     # one tile of `rows` rows, 32 chunks a request
        return -(-rows * d // 8 // 32)

    q_rows = [min(B, N - i0) for i0 in range(0, N, B)]
    kv_rows = [min(B, N - j0) for i0, r_ in zip(range(0, N, B), q_rows)
               for j0 in range(0, i0 + r_, B)]
    entries = sum(q_rows) * d + 2 * sum(kv_rows) * d
    cost = ioattn.io_cost("flash", N, d, r.plan.M, block=(B, B), mask=Mask.causal(N))
    assert entries == r.io.reads == cost.reads == 6912
    assert copy.accesses * 8 == entries
    assert copy.sectors * 2 == copy.accesses
    q_requests = sum(map(requests, q_rows))
    assert q_requests == 5                  # one entry a lane: 40 * 32 / 32 = 40 requests
    assert copy.requests == q_requests + 2 * sum(map(requests, kv_rows)) == 27


# The counting build: the plain emulator's launches counted as the race-check build counts them.

@pytest.mark.parametrize("name, kw", [("flash", dict(block=(16, 32))),
                                      ("flash", dict(block=(16, 16), dtype="float16")),
                                      ("flash_fa2", dict(dtype="bfloat16", causal=True))])
def test_the_plain_emulator_counts_sites_as_the_race_check_does(rng, name, kw):
    from ioattn.gpu.emulator import counting_sites

    Q, K, V = (rng.standard_normal((40, 64)) for _ in range(3))
    plain = gpu.run(name, Q, K, V, backend="emulator", count_io=True, **kw)
    assert plain.accesses == ()                    # the plain build counts nothing
    with counting_sites():
        counted = gpu.run(name, Q, K, V, backend="emulator", count_io=True, **kw)
    raced = gpu.run(name, Q, K, V, backend="emulator-racecheck", count_io=True, **kw)
    assert counted.accesses and counted.accesses == raced.accesses
    assert counted.io == plain.io == raced.io
    np.testing.assert_array_equal(counted.output, plain.output)


def test_the_counting_build_counts_but_checks_no_race(monkeypatch):
    from ioattn.gpu.emulator import COUNT_ENV, SharedMemoryRace

    shift = HEADER + '''
extern "C" __global__ void shift(float* y) {
    IOATTN_SHARED(float, s);
    s[threadIdx.x] = threadIdx.x;
    y[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}'''
    y = np.zeros(64, np.float32)
    monkeypatch.setenv(COUNT_ENV, "1")
    f = RawModule(code=shift).get_function("shift")
    f((1,), (64,), (y,), shared_mem=256)           # no race check: no SharedMemoryRace
    shared = [c for c in f.accesses if c.space == "shared"]
    assert [(c.requests, c.wavefronts) for c in shared] == [(2, 2), (2, 2)]
    with pytest.raises(SharedMemoryRace):
        RawModule(code=shift, race_check=True).get_function("shift")((1,), (64,), (y,),
                                                                     shared_mem=256)


@pytest.mark.parametrize("name, dtype, code, block", [
    ("flash_fa2", "bfloat16", "mma.sync.aligned.m16n8k16", None),
    ("flash", "float16", "wmma::mma_sync", (32, 64))])
def test_the_tensor_core_instructions_are_counted(rng, name, dtype, code, block):
    # dense, N a multiple of every tile: Q K^T and P V are N^2 d multiply-adds each, per head,
    # 2,048 per mma.m16n8k16 and 4,096 per 16 x 16 x 16 WMMA product
    from ioattn.gpu.emulator import counting_sites

    N, d, heads = 128, 64, 2
    Q, K, V = (rng.standard_normal((heads, N, d)) for _ in range(3))
    with counting_sites():
        r = gpu.run(name, Q, K, V, dtype=dtype, block=block, backend="emulator")
    (row,) = [c for c in r.accesses if c.space == "tensor"]
    assert row.code == code and row.accesses == 2 * N * N * d * heads
    assert row.requests * (2048 if code.startswith("mma") else 4096) == row.accesses
    assert not gpu.run(name, Q, K, V, dtype=dtype, block=block, backend="emulator").accesses
