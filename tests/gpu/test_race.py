"""The emulator's shared-memory race check: every kernel of the package runs through the real
host code without a race, and a kernel with a barrier missing is reported, with the right
threads, byte and kinds, even when neither of the emulator's thread orders changes its result."""

import os
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import ioattn.gpu.backend as backend_module
from ioattn.gpu import gpu_plan, run, run_backward
from ioattn.gpu.backend import EmulatorBackend, get_backend
from ioattn.gpu.emulator import EmulatorError, RawModule, SharedMemoryRace
from ioattn.gpu.sources import files, kernel_names, source

from ..conftest import reference_backward
from .conftest import reference, rel_error

RACECHECK = "emulator-racecheck"
HEADER = '#include "ioattn.cuh"\n'


def kernel(body, name="k", race_check=True):
    return RawModule(code=HEADER + body, race_check=race_check).get_function(name)


def races(error):
    """The reported races of a SharedMemoryRace, one line each."""
    return [line.strip() for line in str(error).splitlines()[1:]]


# --- every kernel of the package, through ioattn.gpu.run / run_backward ----------------------

@pytest.fixture(scope="module")
def race_builds():
    """The race-check builds of every source, with and without counting, compiled in parallel
    (the compiler is most of this file's time)."""
    be = get_backend(RACECHECK)
    jobs = [(f, count_io) for f in files() for count_io in (False, True)]
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        list(pool.map(lambda job: be._module(*job), jobs))


@pytest.fixture
def launched(monkeypatch, race_builds):
    """The kernels the race-check backend is asked for (each must be its race-check build)."""
    seen = set()
    function = EmulatorBackend.function

    def record(self, file, name, count_io):
        assert self.race_check and self.name == RACECHECK
        seen.add(name)
        return function(self, file, name, count_io)

    monkeypatch.setattr(EmulatorBackend, "function", record)
    return seen


# (name, shape, options, kernels launched): ragged edges (N not a multiple of any block), d 16
# and 32, two budgets or blocks each, one or several warps per block.
FORWARD = [
    ("flash", (1, 45, 16), {"M": 400}, {"flash_fwd_f32"}),
    ("flash", (2, 67, 32), {"M": 3000}, {"flash_fwd_f32"}),
    ("flash", (1, 50, 32), {"dtype": "float16", "block": (32, 16)}, {"flash_fwd_f16"}),
    ("flash", (1, 45, 16), {"dtype": "float16", "M": 1500}, {"flash_fwd_f16"}),
    ("flash", (1, 50, 32), {"dtype": "bfloat16", "block": (32, 16)}, {"flash_fwd_bf16"}),
    ("flash", (1, 45, 16), {"dtype": "bfloat16", "M": 1500}, {"flash_fwd_bf16"}),
    ("square_tiling", (1, 45, 16), {"M": 400, "schedule": "blocked"},
     {"square_tiling_scores", "square_tiling_output"}),
    ("square_tiling", (1, 40, 32), {"M": 600, "schedule": "outer"},
     {"square_tiling_scores", "square_tiling_output"}),
    ("standard", (1, 45, 16), {"M": 400}, {"standard_product", "standard_softmax_rows"}),
    ("standard", (1, 45, 16), {"M": 30}, {"standard_product", "standard_softmax_strips"}),
    ("flash_fa2", (1, 150, 64), {"dtype": "float16", "block": (32, 64)}, {"flash_fa2_f16_d64"}),
    ("flash_fa2", (2, 70, 128), {"dtype": "float16"}, {"flash_fa2_f16_d128"}),
    ("flash_fa2", (1, 75, 64), {"dtype": "bfloat16"}, {"flash_fa2_bf16_d64"}),
    ("flash_fa2", (1, 40, 128), {"dtype": "bfloat16", "block": (32, 16)},
     {"flash_fa2_bf16_d128"}),
]
CASES = [pytest.param(*case, causal, id=f"{case[0]}-{case[2].get('dtype', 'float32')}-{i}"
                      f"-{'causal' if causal else 'dense'}")
         for i, case in enumerate(FORWARD) for causal in (False, True)
         if not causal or case[0] in ("flash", "flash_fa2")]
# (shape, options): several K/V and query blocks with ragged last ones; one block of each.
BACKWARD = [((1, 45, 16), {"block": (7, 12)}), ((1, 37, 32), {"M": 2500})]
BACKWARD_KERNELS = {"flash_backward_preprocess", "flash_backward"}
# (shape, options, kernels launched) of the tensor-core backward: several key and query blocks
FA2_BACKWARD = [
    ((1, 150, 64), {"dtype": "float16", "block": (64, 32), "causal": True},
     {"flash_fa2_bwd_prep_f16", "flash_fa2_bwd_f16_d64"}),
    ((2, 45, 128), {"dtype": "bfloat16"}, {"flash_fa2_bwd_prep_bf16", "flash_fa2_bwd_bf16_d128"}),
    ((1, 70, 64), {"dtype": "bfloat16", "causal": True},
     {"flash_fa2_bwd_prep_bf16", "flash_fa2_bwd_bf16_d64"}),
    ((1, 40, 128), {"dtype": "float16", "block": (16, 16)},
     {"flash_fa2_bwd_prep_f16", "flash_fa2_bwd_f16_d128"}),
]
# decoding (ioattn.gpu.decode): (batch, H_q, H_kv, N_q, N_k, d, B_c, P_s, S), pages that do not
# divide the tile and a ragged last page, d with and without 16-byte rows, one split or more,
# full warps of keys (the bank-conflict check below), and a chunk of N_q = 64 rows for two heads
# (R = 128 stacked rows, more than the block's threads cover in one pass of the row loops)
DECODE = [(2, 4, 2, 3, 37, 16, 8, 5, 3, "float32"), (1, 8, 1, 1, 45, 6, 16, None, 1, "float32"),
          (1, 2, 1, 7, 30, 32, 4, 8, 4, "float16"), (1, 2, 1, 2, 96, 32, 32, 8, 2, "bfloat16"),
          (1, 2, 1, 64, 70, 8, 16, 6, 3, "float32")]
DECODE_KERNELS = {"decode_split_f32", "decode_split_f16", "decode_split_bf16", "decode_merge"}


def test_the_cases_cover_every_kernel():
    every = {k for f in files() for k in kernel_names(f)}
    covered = set().union(*(case[3] for case in FORWARD), BACKWARD_KERNELS,
                          *(case[2] for case in FA2_BACKWARD), DECODE_KERNELS)
    assert covered == every


def test_no_kernel_declares_static_shared_memory():
    """Static ``__shared__`` arrays would be ``static`` variables in the emulator, outside the
    block's buffer that the race check watches: every kernel uses IOATTN_SHARED only."""
    for f in files():
        declared = re.findall(r"^.*__shared__.*$", source(f), re.M)
        assert len(declared) == 1 and "ioattn_smem_[]" in declared[0], (f, declared)


@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("name, shape, options, kernels, causal", CASES)
def test_forward_kernels_have_no_race(rng, launched, name, shape, options, kernels, causal,
                                      count_io):
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    r = run(name, Q, K, V, causal=causal, save_lse=True, count_io=count_io, backend=RACECHECK,
            **options)
    assert launched == kernels
    O, _ = reference(Q, K, V, causal=causal)
    tol = 1e-5 if options.get("dtype", "float32") == "float32" else 3e-2
    assert rel_error(r.output, O) <= tol
    assert (r.io is not None) == count_io and r.backend == RACECHECK


@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("shape, options", BACKWARD)
def test_backward_kernels_have_no_race(rng, launched, shape, options, count_io):
    Q, K, V, dO = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    O, L = reference(Q, K, V)
    r = run_backward(Q, K, V, O.astype(np.float32), dO, L.astype(np.float32),
                     count_io=count_io, backend=RACECHECK, **options)
    assert launched == BACKWARD_KERNELS
    want = reference_backward(*(x[0].astype(np.float64) for x in (Q, K, V, dO)))
    for got, w in zip(r.output, want):
        assert rel_error(got[0], w) <= 1e-5


@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("shape, options, kernels", FA2_BACKWARD)
def test_tensor_core_backward_kernels_have_no_race(rng, launched, shape, options, kernels,
                                                   count_io):
    Q, K, V, dO = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    causal = options.get("causal", False)
    O, L = reference(Q, K, V, causal=causal)
    r = run_backward(Q, K, V, O.astype(np.float32), dO, L.astype(np.float32),
                     kernel="flash_fa2", count_io=count_io, backend=RACECHECK, **options)
    assert launched == kernels
    mask = np.tril(np.ones(shape[1:2] * 2, dtype=bool)) if causal else None
    for h in range(shape[0]):
        want = reference_backward(*(x[h].astype(np.float64) for x in (Q, K, V, dO)),
                                  None, mask)
        for got, w in zip(r.output, want):
            assert rel_error(got[h], w) <= 3e-2


@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("case", DECODE, ids=[f"decode-{i}" for i in range(len(DECODE))])
def test_decoding_kernels_have_no_race(rng, launched, case, count_io):
    from ioattn.gpu import decode
    from ioattn.gpu.flash_decoding import KERNELS as SPLIT

    from .test_flash_decoding import paged, rounded
    from .test_flash_decoding import reference as decode_reference

    batch, H_q, H_kv, N_q, N_k, d, B_c, P_s, S, dtype = case
    Q = rounded(rng.standard_normal((batch, H_q, N_q, d)), dtype)
    K, V = (rounded(rng.standard_normal((batch, H_kv, N_k, d)), dtype) for _ in range(2))
    cache = (K, V, None) if P_s is None else paged(rng, K, V, P_s)
    r = decode(Q, *cache, N_k, S=S, B_c=B_c, causal=True, dtype=dtype, count_io=count_io,
               backend=RACECHECK)
    assert launched == {SPLIT[dtype]} | ({"decode_merge"} if S > 1 else set())
    assert rel_error(r.output, decode_reference(Q, K, V, causal=True)) <= 1e-5
    assert (r.io is not None) == count_io and r.backend == RACECHECK
    # the scores read K_s without bank conflicts: 16-byte rows at a stride of d + 4 take one
    # wavefront a quarter-warp, exactly four a request where every warp reads 32 keys (B_c a
    # multiple of 32 that divides N_k; unpadded, d = 32 would take 32), scalar rows at d + 1
    # one; where a warp's entries of O_s are in one row (d a multiple of 32), P V reads V_s
    # and P in one
    sites = {c.code: c for c in r.accesses if c.space == "shared" and c.kernel == SPLIT[dtype]}
    score = next(c for code, c in sites.items() if "(kr + k)" in code or "kr[k]" in code)
    assert 0 < score.wavefronts <= (4 if d % 4 == 0 else 1) * score.requests
    if B_c % 32 == 0 and N_k % B_c == 0:
        assert score.wavefronts == 4 * score.requests
    pv = next(c for code, c in sites.items() if "V_t[j * ld + k]" in code)
    assert pv.wavefronts == pv.requests > 0 or d % 32


def test_a_real_kernel_without_a_barrier_is_reported(rng, monkeypatch):
    """flash.cu without the __syncthreads between loading K_j, V_j and reading them."""
    text = source("flash.cu")
    at = text.index("COUNT_READ(2 * c * d);")
    barrier = text.index("__syncthreads();", at)
    broken = text[:barrier] + text[barrier + len("__syncthreads();"):]
    monkeypatch.setattr(backend_module, "source",
                        lambda f: broken if f == "flash.cu" else source(f))
    Q = rng.standard_normal((1, 40, 16)).astype(np.float32)
    with pytest.raises(SharedMemoryRace, match=r"^flash_fwd_f32: \d shared-memory race") as e:
        run("flash", Q, Q, Q, M=400, backend=RACECHECK)
    p = gpu_plan("flash", 40, 16, M=400, backend=RACECHECK)
    tiles = range(4 * 2 * p.B_r * 16, 4 * (2 * p.B_r * 16 + 2 * p.B_c * 16))     # K_j^T, V_j
    for race in races(e.value):
        byte = int(re.search(r"byte (\d+) of shared memory", race).group(1))
        assert byte in tiles and "in warp" in race and "after 1 __syncthreads" in race, race


# --- small kernels: what is a race and what is not --------------------------------------------

REDUCE = '''extern "C" __global__ void reduce(const float* x, float* out, int barrier) {
    IOATTN_SHARED(float, s);
    const int t = threadIdx.x;
    s[t] = x[t];
    if (barrier) __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (t < h) s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0) out[0] = s[0];
}'''


def test_a_reduction_without_its_first_barrier():
    f = kernel(REDUCE, "reduce")
    x, out = np.arange(64, dtype=np.float32), np.zeros(1, np.float32)
    f((1,), (64,), (x, out, np.int32(1)), shared_mem=256)
    assert out[0] == x.sum()
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (64,), (x, out, np.int32(0)), shared_mem=256)
    assert isinstance(e.value, EmulatorError)
    first = races(e.value)[0]
    # thread 0 reads s[32] (bytes 128..131) before thread 32 has written it
    assert first.startswith("block (0,0,0): thread (32,0,0) writes byte 128 of shared memory "
                            "(4-byte access at bytes 128..131, entry 32) after thread (0,0,0) "
                            "read it"), first
    assert first.endswith("after 0 __syncthreads of the block, in different warps (0 and 1)")
    assert str(e.value).startswith("reduce: ")


def test_the_reverse_order_reports_the_same_race(monkeypatch):
    monkeypatch.setenv("IOATTN_EMULATOR_REVERSE", "1")
    f = kernel(REDUCE, "reduce")
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (64,), (np.ones(64, np.float32), np.zeros(1, np.float32), np.int32(0)),
          shared_mem=256)
    # now thread 63 writes first, and thread 31 reads what it wrote, unordered all the same
    assert races(e.value)[0].startswith(
        "block (0,0,0): thread (31,0,0) reads byte 252 of shared memory (4-byte access at bytes "
        "252..255, entry 63) after thread (63,0,0) wrote it")


NEIGHBOUR = '''extern "C" __global__ void k(float* out, int sync) {
    IOATTN_SHARED(float, s);
    const int t = threadIdx.x;
    s[t] = t;
    if (sync == 1) __syncwarp();
    if (sync == 2) (void)__shfl_sync(0xffffffffu, t, 0);    // waits for the warp, orders nothing
    out[t] = s[t ^ 1];
}'''


def test_a_warp_needs_syncwarp_and_a_shuffle_is_not_one():
    want = (np.arange(32) ^ 1).astype(np.float32)
    f = kernel(NEIGHBOUR)
    out = np.zeros(32, np.float32)
    f((1,), (32,), (out, np.int32(1)), shared_mem=128)
    assert (out == want).all()
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (32,), (out, np.int32(0)), shared_mem=128)
    assert races(e.value)[0].startswith("block (0,0,0): thread (1,0,0) writes byte 4 ")
    assert "after thread (0,0,0) read it" in races(e.value)[0]
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (32,), (out, np.int32(2)), shared_mem=128)
    first = races(e.value)[0]
    assert first.startswith("block (0,0,0): thread (0,0,0) reads byte 4 ") and \
        "after thread (1,0,0) wrote it" in first and first.endswith("in warp 0 after 0 of its "
                                                                    "__syncwarp"), first


def test_both_thread_orders_miss_the_shuffle_race(monkeypatch):
    """Why the check exists: the emulator runs a shuffle as a warp barrier, so without the race
    check the kernel above gives the right result in both orders."""
    f = kernel(NEIGHBOUR, race_check=False)
    for reverse in ("0", "1"):
        monkeypatch.setenv("IOATTN_EMULATOR_REVERSE", reverse)
        out = np.zeros(32, np.float32)
        f((1,), (32,), (out, np.int32(2)), shared_mem=128)
        assert (out == (np.arange(32) ^ 1)).all()


def test_an_exited_thread_takes_no_part_in_a_later_syncwarp():
    f = kernel('''extern "C" __global__ void k(float* out) {
        IOATTN_SHARED(float, s);
        if (threadIdx.x == 0) { s[0] = 1.0f; return; }
        __syncwarp();
        out[threadIdx.x] = s[0]; }''')
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (32,), (np.zeros(32, np.float32),), shared_mem=4)
    first = races(e.value)[0]
    assert first.startswith("block (0,0,0): thread (1,0,0) reads byte 0 ") and \
        first.endswith("thread (0,0,0) exited before the warp's next __syncwarp"), first


def test_what_is_not_a_race():
    f = kernel('''extern "C" __global__ void k(const float* x, float* out) {
        IOATTN_SHARED(float, s);
        const int t = threadIdx.x;
        s[64 + t] = x[t];                 // written and read back by the same thread
        float mine = s[64 + t];
        if (t == 0) s[0] = 1.0f;
        if (t == 1) s[1] = 0.0f;
        __syncthreads();
        float a = s[0], b = s[0];         // every thread reads s[0]: reads do not conflict
        atomicAdd(&s[1], 1.0f);           // atomics do not conflict with each other
        atomicAdd(&s[1], 1.0f);
        __syncthreads();
        out[t] = mine + a + b + s[1]; }''')
    x = np.arange(96, dtype=np.float32)
    out = np.zeros(96, np.float32)
    f((2,), (96,), (x, out), shared_mem=4 * 160)
    np.testing.assert_array_equal(out, x + 2 + 2 * 96)


def test_an_atomic_and_a_plain_read_race():
    f = kernel('''extern "C" __global__ void k(float* out) {
        IOATTN_SHARED(float, s);
        if (threadIdx.x == 0) s[0] = 0.0f;
        __syncthreads();
        atomicAdd(&s[0], 1.0f);
        out[threadIdx.x] = s[0]; }''')
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (64,), (np.zeros(64, np.float32),), shared_mem=4)
    first = races(e.value)[0]
    assert first.startswith("block (0,0,0): thread (1,0,0) updates atomically byte 0 ") and \
        "after thread (0,0,0) read it" in first, first


def test_every_byte_of_an_access_is_checked():
    """A 16-byte load against a 4-byte store, a 2-byte store against a 4-byte load."""
    f = kernel('''struct alignas(16) Four { float v[4]; };
    extern "C" __global__ void k(float* out, int which) {
        IOATTN_SHARED(float, s);
        const int t = threadIdx.x;
        if (which == 0) {
            if (t == 0) s[2] = 1.0f;
            if (t == 1) reinterpret_cast<Four*>(out)[0] = reinterpret_cast<Four*>(s)[0];
        } else {
            if (t == 0) out[0] = s[0];
            if (t == 1) reinterpret_cast<__half*>(s)[1] = __half(1.0f);
        } }''')
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (64,), (np.zeros(4, np.float32), np.int32(0)), shared_mem=64)
    assert races(e.value)[0].startswith("block (0,0,0): thread (1,0,0) reads byte 8 of shared "
                                        "memory (16-byte access at bytes 0..15, entry 0) after "
                                        "thread (0,0,0) wrote it")
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (64,), (np.zeros(4, np.float32), np.int32(1)), shared_mem=64)
    assert races(e.value)[0].startswith("block (0,0,0): thread (1,0,0) writes byte 2 of shared "
                                        "memory (2-byte access at bytes 2..3, entry 1) after "
                                        "thread (0,0,0) read it")


WMMA = '''using namespace nvcuda;
extern "C" __global__ void k(const __half* a, float* out, int sync) {
    IOATTN_SHARED(float, s);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, a, 16);
    wmma::load_matrix_sync(acc, s, 16, wmma::mem_row_major);   // s read, written back below
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(s, acc, 16, wmma::mem_row_major);
    if (sync) __syncwarp();
    for (int e = threadIdx.x; e < 256; e += 32) out[e] = s[e];
}'''


def test_wmma_stores_are_the_warps():
    """A lane reading what a WMMA store wrote needs a __syncwarp (which lane stored which entry
    is unspecified); a WMMA load and store of the same tile by one warp are ordered."""
    f = kernel(WMMA)
    a = np.eye(16, dtype=np.float16)
    out = np.zeros(256, np.float32)
    with pytest.raises(SharedMemoryRace) as e:
        f((1,), (32,), (a, out, np.int32(0)), shared_mem=1024)
    assert races(e.value)[0].startswith("block (0,0,0): thread (0,0,0) reads byte 0 of shared "
                                        "memory (4-byte access at bytes 0..3, entry 0) after a "
                                        "WMMA operation of warp 0 wrote it")
    f((1,), (32,), (a, out, np.int32(1)), shared_mem=1024)
    assert np.isnan(out).all()          # the accumulator started as the NaN bytes of s


# --- switching it on, and the builds --------------------------------------------------------

def test_the_environment_variable_and_the_backends(monkeypatch):
    code = HEADER + NEIGHBOUR
    monkeypatch.setenv("IOATTN_EMULATOR_RACECHECK", "1")
    assert RawModule(code).race_check
    with pytest.raises(SharedMemoryRace):
        RawModule(code).get_function("k")((1,), (32,), (np.zeros(32, np.float32),
                                                         np.int32(2)), shared_mem=128)
    monkeypatch.setenv("IOATTN_EMULATOR_RACECHECK", "0")
    assert not RawModule(code).race_check
    RawModule(code).get_function("k")((1,), (32,), (np.zeros(32, np.float32), np.int32(2)),
                                      shared_mem=128)
    assert get_backend("emulator-racecheck").race_check
    assert get_backend("emulator").name == "emulator" and not get_backend("emulator").race_check
    with pytest.raises(ValueError, match="'emulator-racecheck'"):
        get_backend("racecheck")


def test_the_race_build_is_separate_and_the_normal_one_uninstrumented():
    code = HEADER + NEIGHBOUR
    normal, checked = RawModule(code, race_check=False), RawModule(code, race_check=True)
    assert normal._lib._name != checked._lib._name
    assert not hasattr(normal._lib, "__tsan_read4") and hasattr(checked._lib, "__tsan_read4")
