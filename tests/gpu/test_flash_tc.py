"""The tensor-core FlashAttention-2 forward (``flash_tc.cu``): float16 and bfloat16 storage with
float32 accumulation, against the float64 reference computed from the *rounded* inputs, and
counted traffic equal to ``ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), ...)`` exactly,
per head; on the CPU emulator at small sizes and on a real GPU at larger ones."""

import numpy as np
import pytest

import ioattn
from ioattn.gpu import flash_tc as host
from ioattn.gpu import run
from ioattn.gpu.api import to_storage
from ioattn.gpu.backend import EMULATED_SHARED_MEMORY as EMULATED
from ioattn.masks import Mask

from .conftest import reference, rel_error


def rounded(x, dtype):
    """``x`` (float32) rounded to the storage dtype, as float64: what the kernel multiplies."""
    s = to_storage(np.asarray(x, np.float32), dtype, np)
    if dtype == "float16":
        return s.astype(np.float64)
    return (s.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def check(rng, shape, *, dtype, M=None, block=None, causal=False, save_lse=True, scale=None,
          spread=1.0, backend="emulator", tol=1e-2):
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    Q *= spread
    r = run("flash", Q, K, V, M=M, block=block, causal=causal, scale=scale, dtype=dtype,
            save_lse=save_lse, count_io=True, backend=backend)
    O = np.asarray(r.output.get() if hasattr(r.output, "get") else r.output)
    want_O, want_L = reference(*(rounded(x, dtype) for x in (Q, K, V)), scale, causal)
    assert O.shape == shape and O.dtype == np.float32
    assert np.isfinite(O).all(), "O not fully written"
    assert rel_error(O, want_O) <= tol, rel_error(O, want_O)
    if save_lse:
        L = np.asarray(r.lse.get() if hasattr(r.lse, "get") else r.lse)
        assert L.shape == shape[:-1] and np.isfinite(L).all()
        assert np.abs(L - want_L).max() <= tol * max(1.0, np.abs(want_L).max())
    p = r.plan
    N, d = shape[-2:]
    assert p.B_r % 16 == 0 and p.B_c % 16 == 0
    assert 4 * p.footprint <= (EMULATED if backend == "emulator" else 1 << 40)
    B_r, B_c = min(p.B_r, -(-N // 16) * 16), min(p.B_c, -(-N // 16) * 16)
    # the model's entries in at most 4 bytes each, and a pad of PAD bytes on every tile row
    assert host.shared_bytes(B_r, B_c, d) \
        <= 4 * host._footprint(B_r, B_c, d) + host.PAD * (3 * B_r + 2 * B_c)
    cost = ioattn.io_cost("flash", N, d, p.M, block=(p.B_r, p.B_c),
                          mask=Mask.causal(N) if causal else None, save_lse=save_lse)
    heads = int(np.prod(shape[:-2]))
    assert (r.io.reads, r.io.writes) == (heads * cost.reads, heads * cost.writes)
    return r


DTYPES = ["float16", "bfloat16"]

# (shape, M, block): several query and key blocks, ragged last blocks (rows and columns past N
# zero-filled and masked), N below one tile, batch x heads > 1, several warps per block.
CASES = [
    ((2, 37, 16), 1500, None),          # the rule: B_r = B_c = 16, 3 x 3 blocks, last 5 rows
    ((1, 50, 32), None, (32, 16)),      # 2 warps, ragged both ways
    ((3, 5, 16), None, None),           # N = 5 < one tile, three heads
    ((2, 2, 23, 16), None, (16, 32)),   # batch and heads in front, B_c > N
    ((1, 45, 16), None, (48, 16)),      # one query block of 3 strips, N rounded up within it
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape, M, block", CASES)
def test_emulator_matches_reference_and_io_cost(rng, shape, M, block, causal, dtype):
    check(rng, shape, dtype=dtype, M=M, block=block, causal=causal)


def test_emulator_strips_loop_over_warps(rng):
    """B_r = 144: nine 16-row strips for eight warps, so warp 0 runs two strips."""
    check(rng, (1, 150, 16), dtype="float16", block=(144, 16), causal=True, save_lse=False)


def test_emulator_scale_and_reverse_order(rng, monkeypatch):
    """A scale other than 1/sqrt(d), and the threads run in reverse order between barriers."""
    monkeypatch.setenv("IOATTN_EMULATOR_REVERSE", "1")
    check(rng, (2, 33, 32), dtype="bfloat16", M=3000, scale=0.3, causal=True)


def test_emulator_large_logits(rng):
    """Scores of size ~50: the online softmax stays finite in float32, P_ij in [0, 1]."""
    check(rng, (1, 40, 16), dtype="float16", M=1500, spread=12.0)


def test_plan_rule():
    budget = EMULATED
    for N, d, M in [(100, 16, 1500), (1000, 64, 20000), (37, 32, 2500), (500, 128, 40000)]:
        p = host.plan(N, d, M=M, dtype="float16", budget=budget)
        assert p.B_r % 16 == 0 and p.B_c % 16 == 0 and p.B_c <= -(-N // 16) * 16
        assert host._footprint(p.B_r, p.B_c, d) <= M
        fa2 = ioattn.plan("flash", N, d, M)
        assert p.B_r <= max(16, fa2.B_r)
        # B_c is the largest multiple of 16 that fits (or N rounded up to 16)
        assert p.B_c == -(-N // 16) * 16 or host._footprint(p.B_r, p.B_c + 16, d) > M
    least = host._footprint(16, 16, 64)
    assert host.plan(100, 64, M=least, dtype="float16", budget=budget).B_r == 16
    with pytest.raises(ValueError, match=f"M >= {least}"):
        host.plan(100, 64, M=least - 1, dtype="float16", budget=budget)


def test_plan_default_and_errors():
    budget = 48 * 1024
    p = host.plan(4096, 64, dtype="bfloat16", budget=budget)
    assert p.B_r == p.B_c and p.B_r % 16 == 0 and p.M == budget // 4
    two = (budget + 1024) // 2 - 1024          # two resident blocks, 1 KiB reserved for each
    assert host.shared_bytes(p.B_r, p.B_r, 64) <= two
    assert host.shared_bytes(p.B_r + 16, p.B_r + 16, 64) > two
    assert host.plan(20, 16, dtype="float16", budget=budget).B_r == 32       # capped at N
    with pytest.raises(ValueError, match="multiples of 16"):
        host.plan(100, 64, block=(24, 16), dtype="float16", budget=budget)
    with pytest.raises(ValueError, match="multiple of 16"):
        host.plan(100, 40, dtype="float16", budget=budget)
    with pytest.raises(ValueError, match="bytes of shared memory"):
        host.plan(100, 256, block=(64, 64), dtype="float16", budget=budget)
    with pytest.raises(ValueError, match="bytes of shared memory"):
        host.plan(200, 64, M=30000, dtype="float16", budget=budget)
    # d = 256 on a 64 KiB device (a T4): 16-bit Q_i, K_j, V_j leave room for a 16 x 16 block
    assert host.plan(1000, 256, dtype="float16", budget=64 * 1024).B_r == 16
    assert host.plan(100, 64, block=(32, 48), dtype="float16", budget=budget).B_c == 48


# -------------------------------------------------------------------------------- real GPU


def _cuda_major():
    from ioattn.gpu import device_info
    return int(device_info()["compute_capability"].split(".")[0])


def _fits(d, B_r, B_c):
    """Whether the device's shared memory takes a ``B_r x B_c`` plan's footprint (4 bytes an
    entry): a 64 KB Turing GPU does not take d = 256, nor large blocks."""
    from ioattn.gpu import device_info
    return 4 * host._footprint(B_r, B_c, d) <= device_info()["shared_memory_per_block"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [16, 32, 64, 80, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_head_dims(rng, d, causal, dtype):
    if dtype == "bfloat16" and _cuda_major() < 8:
        pytest.skip("bfloat16 tensor cores need compute capability 8.0")
    if not _fits(d, 16, 16):
        pytest.skip(f"d = {d} does not fit in this GPU's shared memory")
    check(rng, (2, 3, 301, d), dtype=dtype, causal=causal, backend="cuda")
    M = 72 * d + 600                                  # B_r = B_c = 16 at d = 256
    if _fits(d, 32, 32):
        check(rng, (1, 517, d), dtype=dtype, M=M, causal=causal, backend="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("N", [1, 7, 129, 1000])
def test_gpu_odd_N_and_blocks(rng, N, dtype):
    if dtype == "bfloat16" and _cuda_major() < 8:
        pytest.skip("bfloat16 tensor cores need compute capability 8.0")
    for block in [(16, 16), (64, 32), (160, 64)]:
        if _fits(64, *block):
            check(rng, (3, N, 64), dtype=dtype, block=block, causal=N % 2 == 1,
                  backend="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_large_logits(rng, dtype):
    if dtype == "bfloat16" and _cuda_major() < 8:
        pytest.skip("bfloat16 tensor cores need compute capability 8.0")
    check(rng, (2, 700, 64), dtype=dtype, spread=20.0, causal=True, backend="cuda",
          tol=2e-2 if dtype == "bfloat16" else 1e-2)


@pytest.mark.gpu
def test_gpu_bfloat16_needs_ampere(rng):
    if _cuda_major() >= 8:
        pytest.skip("this GPU has bfloat16 tensor cores")
    Q = rng.standard_normal((64, 64)).astype(np.float32)
    with pytest.raises(ValueError, match="compute capability 8.0"):
        run("flash", Q, Q, Q, dtype="bfloat16", backend="cuda")
