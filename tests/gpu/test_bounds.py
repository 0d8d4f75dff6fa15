"""The emulator's bounds: shared memory and every array argument end at a guard page, so an
out-of-bounds access of a kernel fails loudly (:class:`OutOfBounds`), as WMMA operands that are
misaligned or have a bad ``ldm`` do; and the float32 flash launch that once wrote past its
shared memory (a user block larger than N) now stays inside it."""

import numpy as np
import pytest

import ioattn.gpu as gpu
from ioattn.gpu import flash
from ioattn.gpu.emulator import EmulatorError, OutOfBounds, RawModule
from ioattn.gpu.sources import source

HEADER = '#include "ioattn.cuh"\n'

# Thread t writes shared entry t + off, then reads its own entry back.
SHIFTED = HEADER + '''extern "C" __global__ void shifted(float* y, int off) {
    IOATTN_SHARED(float, s);
    s[int(threadIdx.x) + off] = 1.0f;
    __syncthreads();
    y[threadIdx.x] = s[threadIdx.x]; }'''


def shifted(off, shared_mem=128, race_check=False):
    f = RawModule(code=SHIFTED, race_check=race_check).get_function("shifted")
    y = np.zeros(32, np.float32)
    f((1,), (32,), (y, np.int32(off)), shared_mem=shared_mem)
    return y


def test_in_bounds_shared_memory_runs():
    assert (shifted(0) == 1).all()


@pytest.mark.parametrize("off, byte", [(1, 128), (2000, 8000), (-2000, -8000)])
def test_shared_memory_overrun_fails_loudly(off, byte):
    with pytest.raises(OutOfBounds, match=f"shared memory: byte {byte} of a 128-byte buffer"):
        shifted(off)


def test_a_write_into_the_last_partial_16_bytes_is_caught():
    # 126 bytes: the 2 bytes before the guard page hold the canary that the write changes
    f = RawModule(code=HEADER + '''extern "C" __global__ void k(int at) {
        IOATTN_SHARED(unsigned char, s);
        s[at] = 7; }''').get_function("k")
    f((1,), (1,), (np.int32(125),), shared_mem=126)
    with pytest.raises(OutOfBounds, match="byte 126 of a 126-byte buffer was written"):
        f((1,), (1,), (np.int32(126),), shared_mem=126)


@pytest.mark.parametrize("off", [-1, 1])
def test_race_check_checks_every_shared_access_exactly(off):
    # one entry before the start is inside the mapping: only the exact check sees it
    with pytest.raises(OutOfBounds, match="4-byte write at byte"):
        shifted(off, race_check=True)
    assert (shifted(0, race_check=True) == 1).all()


def test_array_argument_overrun_fails_and_results_come_back():
    f = RawModule(code=HEADER + '''extern "C" __global__ void k(float* y) {
        y[threadIdx.x] = threadIdx.x; }''').get_function("k")
    y = np.zeros(32, np.float32)
    f((1,), (32,), (y,))
    assert (y == np.arange(32)).all()
    with pytest.raises(OutOfBounds, match="argument 0: byte 128 of a 128-byte buffer"):
        f((1,), (33,), (y,))


WMMA = HEADER + '''using namespace nvcuda;
extern "C" __global__ void k(float* out, int offset, int ldm) {
    IOATTN_SHARED(__half, s);
    for (int e = threadIdx.x; e < 16 * 32 + 16; e += 32) s[e] = __half(1.0f);
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    wmma::load_matrix_sync(a, s + offset, ldm);
    wmma::load_matrix_sync(b, s, 16);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(out, c, 16, wmma::mem_row_major); }'''


@pytest.mark.parametrize("offset, ldm, match", [
    (0, 16, None), (16, 32, None), (8, 16, "not 256-bit"), (0, 12, "ldm = 12"),
    (0, 24, None)])
def test_wmma_operands_need_32_byte_alignment_and_16_byte_ldm(offset, ldm, match):
    f = RawModule(code=WMMA).get_function("k")
    out = np.zeros(256, np.float32)
    args = ((1,), (32,), (out, np.int32(offset), np.int32(ldm)))
    if match is None:
        f(*args, shared_mem=2 * (16 * 32 + 16))
        assert (out == 16).all()
    else:
        with pytest.raises(EmulatorError, match=match):
            f(*args, shared_mem=2 * (16 * 32 + 16))


FINDING_1 = [(20, (32, 32)), (3, (4, 4)), (50, (16, 64)), (20, (64, 64))]


@pytest.mark.parametrize("N, block", FINDING_1)
def test_unclipped_flash_launch_overruns_shared_memory(N, block):
    # the launch as it was: the block's B_r, B_c passed to the kernel, the shared memory of the
    # plan's footprint (which clips the block at N)
    d = 16
    plan = gpu.gpu_plan("flash", N, d, block=block, backend="emulator")
    f = RawModule(code=source(flash.FILE)).get_function("flash_fwd_f32")
    Q, K, V, O = (np.zeros((1, N, d), np.float32) for _ in range(4))
    args = (Q, K, V, O, np.zeros(N, np.float32), np.int32(N), np.int32(d),
            np.int32(block[0]), np.int32(block[1]), np.float32(0.25), np.int32(0),
            np.int32(0), np.zeros(2, np.uint64))
    with pytest.raises(OutOfBounds, match="shared memory"):
        f((1, 1), (flash.threads(block[0], d),), args, shared_mem=4 * plan.footprint)


@pytest.mark.parametrize("N, block", FINDING_1)
def test_flash_clips_the_block_as_its_footprint_does(rng, N, block):
    plan = gpu.gpu_plan("flash", N, 16, block=block, backend="emulator")
    assert flash.footprint(16, *flash.kernel_block(plan)) == plan.footprint
    for backend in ("emulator", "emulator-racecheck"):     # guard pages; every access checked
        Q, K, V = (rng.standard_normal((N, 16)) for _ in range(3))
        r = gpu.run("flash", Q, K, V, block=block, backend=backend, save_lse=True)
        assert np.isfinite(r.output).all() and (r.plan.B_r, r.plan.B_c) == block
