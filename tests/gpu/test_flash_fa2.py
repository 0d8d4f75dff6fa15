"""The register-resident FlashAttention-2 forward (``flash_fa2.cu``): float16 and bfloat16
against the float64 reference from the rounded inputs, dense and causal, ragged ``N``, several
heads (more than the grid's y axis takes, too), counted traffic equal to
``ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), ...)`` per head, and conflict-free
``ldmatrix`` and ``cp.async`` in shared memory. Its nvcc and NVRTC compiles (sm_75, sm_80,
sm_90, no spills) are in test_compile.py and test_nvrtc.py, which take every kernel file."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ioattn
from ioattn.gpu import flash_fa2 as host
from ioattn.gpu import run
from ioattn.gpu.sources import kernel_names
from ioattn.masks import Mask

from .conftest import reference, rel_error
from .test_flash_tc import rounded


def check(rng, shape, *, dtype, causal, block=None, M=None, backend="emulator", tol=1e-2):
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    r = run("flash_fa2", Q, K, V, block=block, M=M, causal=causal, dtype=dtype,
            save_lse=True, count_io=True, backend=backend)
    O = np.asarray(r.output.get() if hasattr(r.output, "get") else r.output)
    L = np.asarray(r.lse.get() if hasattr(r.lse, "get") else r.lse)
    want_O, want_L = reference(*(rounded(x, dtype) for x in (Q, K, V)), None, causal)
    assert O.shape == shape and np.isfinite(O).all(), "O not fully written"
    assert rel_error(O, want_O) <= tol, rel_error(O, want_O)
    assert L.shape == shape[:-1] and np.isfinite(L).all()
    assert np.abs(L - want_L).max() <= tol * max(1.0, np.abs(want_L).max())
    p = r.plan
    N, d = shape[-2:]
    assert p.B_c == host.B_C[d] and p.B_r % host.ROWS_PER_WARP == 0
    cost = ioattn.io_cost("flash", N, d, p.M, block=(p.B_r, p.B_c),
                          mask=Mask.causal(N) if causal else None, save_lse=True)
    heads = int(np.prod(shape[:-2]))
    assert (r.io.reads, r.io.writes) == (heads * cost.reads, heads * cost.writes)
    return r


def test_the_kernels():
    assert kernel_names("flash_fa2.cu") == ["flash_fa2_f16_d64", "flash_fa2_f16_d128",
                                            "flash_fa2_bf16_d64", "flash_fa2_bf16_d128"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape, block", [
    ((2, 37, 64), None),             # one ragged query block of 2 warps, one key block
    ((1, 150, 64), (32, 64)),        # 5 query blocks of 1 warp, 3 key blocks, ragged
    ((1, 70, 128), None),            # d = 128: B_r = 96 (3 warps), B_c = 16, 5 key blocks
    ((1, 300, 128), None),           # B_r = 128 (4 warps, 8 m-tiles), 3 query blocks, ragged
    ((2, 3, 5, 64), (32, 64)),       # batch and heads in front, N below one m-tile
])
def test_matches_reference_and_io_cost(rng, shape, block, causal, dtype):
    check(rng, shape, dtype=dtype, causal=causal, block=block)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_shapes(rng, data):
    heads = data.draw(st.integers(1, 3), label="heads")
    N = data.draw(st.integers(1, 90), label="N")
    d = data.draw(st.sampled_from([64, 128]), label="d")
    warps = data.draw(st.integers(1, 4), label="warps")
    dtype = data.draw(st.sampled_from(["float16", "bfloat16"]), label="dtype")
    causal = data.draw(st.booleans(), label="causal")
    check(rng, (heads, N, d), dtype=dtype, causal=causal,
          block=(host.ROWS_PER_WARP * warps, host.B_C[d]))


def test_heads_beyond_the_grid_loop(rng, monkeypatch):
    """Five heads on a grid of two along y: blocks 0 and 1 loop over heads 0, 2, 4 and 1, 3."""
    monkeypatch.setattr(host, "GRID_Y", 2)
    check(rng, (5, 40, 64), dtype="float16", causal=True, block=(32, 64))


def test_causal_skips_the_blocks_above_the_diagonal(rng):
    """N = 128, B_r = 32, B_c = 64: query block i reads key blocks 0 .. floor((32 i + 31) / 64)
    only, 6 key blocks of the dense 8."""
    dense = check(rng, (1, 128, 64), dtype="float16", causal=False, block=(32, 64))
    causal = check(rng, (1, 128, 64), dtype="float16", causal=True, block=(32, 64))
    Q_and_writes = 128 * 64 + 128 * 64 + 128
    assert dense.io.reads + dense.io.writes - Q_and_writes == 8 * 2 * 64 * 64
    assert causal.io.reads + causal.io.writes - Q_and_writes == 6 * 2 * 64 * 64


def test_shared_memory_is_conflict_free(rng):
    """Every ldmatrix x4 request is 4 wavefronts (8 rows of 16 bytes in distinct banks each,
    by the 16-byte row pad), every 16-byte cp.async request 4 (one per quarter-warp)."""
    for d in (64, 128):
        Q, K, V = (rng.standard_normal((1, 100, d)).astype(np.float32) for _ in range(3))
        r = run("flash_fa2", Q, K, V, causal=True, dtype="float16",
                backend="emulator-racecheck")
        sites = [c for c in r.accesses if c.space == "shared"]
        ld = [c for c in sites if "ldmatrix<4" in c.code]
        cp = [c for c in sites if "cp_async<16" in c.code]
        assert len(ld) == 3 and len(cp) == 1, sites   # Q fragments, K, V.trans; the copies
        for c in ld + cp:
            assert c.requests > 0 and c.wavefronts == 4 * c.requests, c


@pytest.mark.parametrize("kw, match", [
    (dict(dtype="float32"), "float16 or bfloat16"),
    (dict(dtype="float16", block=(80, 64)), "block"),
    (dict(dtype="float16", block=(16, 64)), "block"),       # a warp owns 32 rows
    (dict(dtype="float16", block=(160, 64)), "block"),
    (dict(dtype="float16", block=(32, 32)), "block"),
    (dict(dtype="float16", M=100), "M >="),
])
def test_bad_plans(kw, match):
    x = np.zeros((20, 64), np.float32)
    with pytest.raises(ValueError, match=match):
        run("flash_fa2", x, x, x, backend="emulator", **kw)


def test_head_dimensions():
    x = np.zeros((20, 32), np.float32)
    with pytest.raises(ValueError, match="d = 64 or 128"):
        run("flash_fa2", x, x, x, dtype="float16", backend="emulator")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_matches_reference_and_io_cost(rng, dtype, d):
    check(rng, (2, 3, 1000, d), dtype=dtype, causal=True, backend="cuda")
    check(rng, (1, 777, d), dtype=dtype, causal=False, backend="cuda")
