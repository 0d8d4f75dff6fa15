"""The FlashAttention-2-class backward (``flash_fa2_backward.cu``): float16 and bfloat16 gradients
against the float64 ones of the rounded inputs, dense and causal, ragged ``N``, several heads
(more than the grid's y axis takes, too), counted traffic equal to ``ioattn.io_cost("flash", N,
d, M, backward=True, block=(B_r, B_c), dq="atomic", ...)`` per head, the causal blocks skipped,
and conflict-free ``ldmatrix`` and ``cp.async`` in shared memory. Its nvcc and NVRTC compiles
(sm_75, sm_80, sm_90, no spills) are in test_compile.py and test_nvrtc.py, which take every
kernel file."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ioattn
from ioattn.gpu import flash_fa2_backward as host
from ioattn.gpu import gpu_plan, run_backward
from ioattn.gpu.backend import EMULATED_SHARED_MEMORY as EMULATED
from ioattn.gpu.sources import kernel_names
from ioattn.masks import Mask

from ..conftest import reference_backward
from .conftest import reference, rel_error
from .test_flash_tc import rounded

TOL = {"float16": 2e-3, "bfloat16": 1e-2}


def problem(rng, shape, dtype, causal):
    """float32 ``Q, K, V, dO``; float32 ``O, L`` of the float64 forward of the rounded inputs;
    the float64 gradients of the rounded inputs."""
    Q, K, V, dO = (rng.standard_normal(shape).astype(np.float32) for _ in range(4))
    N, d = shape[-2:]
    Qr, Kr, Vr, dOr = (rounded(x, dtype).reshape(-1, N, d) for x in (Q, K, V, dO))
    O, L = reference(Qr, Kr, Vr, None, causal)
    mask = np.tril(np.ones((N, N), dtype=bool)) if causal else None
    want = [np.stack(g).reshape(shape) for g in
            zip(*(reference_backward(Qr[h], Kr[h], Vr[h], dOr[h], None, mask)
                  for h in range(Qr.shape[0])))]
    return (Q, K, V, dO, O.reshape(shape).astype(np.float32),
            L.reshape(shape[:-1]).astype(np.float32)), want


def check(rng, shape, *, dtype, causal, block=None, M=None, backend="emulator"):
    (Q, K, V, dO, O, L), want = problem(rng, shape, dtype, causal)
    r = run_backward(Q, K, V, O, dO, L, kernel="flash_fa2", dtype=dtype, causal=causal,
                     block=block, M=M, count_io=True, backend=backend)
    N, d = shape[-2:]
    errors = {}
    for name, g, w in zip(("dQ", "dK", "dV"), r.output, want):
        g = np.asarray(g.get() if hasattr(g, "get") else g)
        assert g.shape == shape and g.dtype == np.float32, name
        assert np.isfinite(g).all(), f"{name} not fully written"
        if N == 1 and name != "dV":          # softmax of one key is 1: dQ = dK = 0
            errors[name] = float(np.abs(g).max() / np.abs(dO).max())
        else:
            errors[name] = rel_error(g, w)
        assert errors[name] <= TOL[dtype], (name, errors[name])
    p = r.plan
    assert (p.B_r, p.dq) == (host.B_R[d], "atomic") and p.B_c % 16 == 0
    mask = Mask.causal(N) if causal else None
    cost = ioattn.io_cost("flash", N, d, p.M, backward=True, block=(p.B_r, p.B_c),
                          dq="atomic", mask=mask)
    heads = int(np.prod(shape[:-2]))
    assert (r.io.reads, r.io.writes) == (heads * cost.reads, heads * cost.writes)
    # the default schedule of the model, plus N d reads and N d writes (dQ = 0, atomics)
    store = ioattn.io_cost("flash", N, d, p.M, backward=True, block=(p.B_r, p.B_c), mask=mask)
    assert (cost.reads, cost.writes) == (store.reads + N * d, store.writes + N * d)
    assert r.io.peak == p.footprint
    return r, errors


def test_the_kernels():
    assert kernel_names("flash_fa2_backward.cu") == [
        "flash_fa2_bwd_prep_f16", "flash_fa2_bwd_prep_bf16", "flash_fa2_bwd_f16_d64",
        "flash_fa2_bwd_f16_d128", "flash_fa2_bwd_bf16_d64", "flash_fa2_bwd_bf16_d128"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape, block", [
    ((2, 37, 64), None),             # one ragged key block of 3 warps, one query block
    ((1, 150, 64), (64, 32)),        # 5 key blocks, 3 query blocks (double buffer), ragged
    ((1, 70, 128), None),            # d = 128: B_r = 16, 5 query blocks, 2 key blocks
    ((2, 3, 5, 64), (64, 16)),       # batch and heads in front, N below one tile
    ((1, 1, 128), (16, 16)),         # one row: dQ = dK = 0, dV = dO
])
def test_matches_reference_and_io_cost(rng, shape, block, causal, dtype):
    check(rng, shape, dtype=dtype, causal=causal, block=block)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_shapes(rng, data):
    heads = data.draw(st.integers(1, 2), label="heads")
    N = data.draw(st.integers(1, 80), label="N")
    d = data.draw(st.sampled_from([64, 128]), label="d")
    warps = data.draw(st.integers(1, 4), label="warps")
    dtype = data.draw(st.sampled_from(["float16", "bfloat16"]), label="dtype")
    causal = data.draw(st.booleans(), label="causal")
    check(rng, (heads, N, d), dtype=dtype, causal=causal, block=(host.B_R[d], 16 * warps))


def test_heads_beyond_the_grid_loop(rng, monkeypatch):
    """Five heads on a grid of two along y: blocks 0 and 1 loop over heads 0, 2, 4 and 1, 3."""
    monkeypatch.setattr(host, "GRID_Y", 2)
    check(rng, (5, 40, 64), dtype="float16", causal=True, block=(64, 32))


def test_causal_skips_the_blocks_above_the_diagonal(rng):
    """N = 128, B_r = 64, B_c = 32: key block j visits query blocks floor(32 j / 64) .. 1 only,
    6 (key block, query block) pairs of the dense 8, each moving 64 (3d + 2) reads and 64 d
    writes."""
    d = 64
    dense, _ = check(rng, (1, 128, d), dtype="float16", causal=False, block=(64, 32))
    causal, _ = check(rng, (1, 128, d), dtype="float16", causal=True, block=(64, 32))
    assert dense.io.reads - causal.io.reads == 2 * 64 * (3 * d + 2)
    assert dense.io.writes - causal.io.writes == 2 * 64 * d
    pairs = (causal.io.writes - (128 + 3 * 128 * d)) // (64 * d)        # D, dQ = 0, dK, dV
    assert pairs == 6


def test_named_cases_figures(rng):
    """N = 100, d = 64, the default plan (B_r = 64, B_c = 64): T_c = 2, so 4 N d + 2 N (3d + 2)
    reads and N + 3 N d + 2 N d writes; the default schedule's count plus N d each."""
    N, d = 100, 64
    r, _ = check(rng, (1, N, d), dtype="float16", causal=False)
    assert (r.plan.B_r, r.plan.B_c) == (64, 64)
    assert (r.io.reads, r.io.writes) == (4 * N * d + 2 * N * (3 * d + 2), N + 5 * N * d)


def test_shared_memory_is_conflict_free(rng):
    """Every ldmatrix x4 request is 4 wavefronts (8 rows of 16 bytes in distinct banks each,
    by the 16-byte row pad), every 16-byte cp.async request 4 (one per quarter-warp), and
    the 4-byte stores of dS^T one each."""
    for d in (64, 128):
        (Q, K, V, dO, O, L), _ = problem(rng, (1, 100, d), "float16", True)
        r = run_backward(Q, K, V, O, dO, L, kernel="flash_fa2", dtype="float16", causal=True,
                         backend="emulator-racecheck")
        sites = [c for c in r.accesses if c.space == "shared"
                 and c.kernel.startswith("flash_fa2_bwd_f16")]
        ld = [c for c in sites if "ldmatrix<4" in c.code]
        cp = [c for c in sites if "cp_async<16" in c.code]
        st_ = [c for c in sites if "reinterpret_cast<unsigned*>(row" in c.code]
        assert len(ld) == 6 and len(cp) == 1 and len(st_) == 4, sites
        for c in ld + cp:
            assert c.requests > 0 and c.wavefronts == 4 * c.requests, c
        for c in st_:
            assert c.requests > 0 and c.wavefronts == c.requests, c


def test_plan_rules():
    # the most warps whose shared memory fits, up to N rounded up to 16
    p = host.plan(1000, 64, budget=EMULATED)
    assert (p.B_r, p.B_c, p.dq) == (64, 64, "atomic")
    assert host.plan(20, 64, budget=EMULATED).B_c == 32
    small = host.shared_bytes(48, 64)
    assert host.plan(1000, 64, budget=small).B_c == 48
    assert host.plan(1000, 128, budget=EMULATED).B_r == 16
    assert host.plan(1000, 64, budget=EMULATED) == ioattn.plan(
        "flash", 1000, 64, p.M, backward=True, block=(64, 64), dq="atomic")
    assert p.M == ioattn.min_M("flash", 64, backward=True, block=(64, 64))


@pytest.mark.parametrize("kw, match", [
    (dict(dtype="float32"), "float16 or bfloat16"),
    (dict(dtype="float16", block=(32, 64)), "block"),
    (dict(dtype="float16", block=(64, 80)), "block"),
    (dict(dtype="float16", M=100), "M >="),
])
def test_bad_plans(kw, match):
    x = np.zeros((20, 64), np.float32)
    L = np.zeros(20, np.float32)
    with pytest.raises(ValueError, match=match):
        run_backward(x, x, x, x, x, L, kernel="flash_fa2", backend="emulator", **kw)


def test_bad_calls():
    x = np.zeros((20, 32), np.float32)
    L = np.zeros(20, np.float32)
    with pytest.raises(ValueError, match="d = 64 or 128"):
        run_backward(x, x, x, x, x, L, kernel="flash_fa2", dtype="float16", backend="emulator")
    with pytest.raises(ValueError, match="no backward kernels 'fa2'"):
        run_backward(x, x, x, x, x, L, kernel="fa2", backend="emulator")
    with pytest.raises(ValueError, match="readable flash backward runs in float32"):
        run_backward(x, x, x, x, x, L, dtype="float16", backend="emulator")
    with pytest.raises(ValueError, match="masks are not supported"):
        run_backward(x, x, x, x, x, L, causal=True, backend="emulator")
    with pytest.raises(ValueError, match="no backward kernels for .standard."):
        gpu_plan("standard", 20, 16, backward=True, budget=EMULATED)


def test_bfloat16_is_refused_below_sm_80():
    """On a compute capability 7.5 device the bfloat16 launch names the fix, before any
    compile."""
    be = SimpleNamespace(name="cuda", info={"compute_capability": "7.5"})
    p = host.plan(32, 64, dtype="bfloat16", budget=EMULATED)
    with pytest.raises(ValueError, match="compute capability 8.0.*7.5.*float16"):
        host.backward(be, p, *([None] * 10), scale=1.0, count_io=False, dtype="bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", [64, 128])
def test_gpu_matches_reference_and_io_cost(rng, dtype, d):
    check(rng, (2, 3, 1000, d), dtype=dtype, causal=True, backend="cuda")
    check(rng, (1, 777, d), dtype=dtype, causal=False, backend="cuda")
