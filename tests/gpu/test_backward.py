"""The FlashAttention backward kernels (``flash_backward.cu``): float32 gradients against the
analytic float64 ones, and counted traffic equal to ``ioattn.io_cost("flash", ..., backward=True)``
exactly, per head; on the CPU emulator at small sizes and on a real GPU at larger ones."""

import numpy as np
import pytest

import ioattn
from ioattn.gpu import backward as host
from ioattn.gpu import run_backward
from ioattn.gpu.backend import EMULATED_SHARED_MEMORY as EMULATED

from ..conftest import reference_backward
from .conftest import reference, rel_error


def problem(rng, BH, N, d, scale=None):
    """float32 ``Q, K, V, dO`` of shape ``(BH, N, d)`` and the float64 forward's ``O, L`` and
    gradients ``dQ, dK, dV`` of those float32 values."""
    Q, K, V, dO = (rng.standard_normal((BH, N, d)).astype(np.float32) for _ in range(4))
    O, L = reference(Q, K, V, scale)
    grads = [np.stack(g) for g in zip(*(reference_backward(*(x[h].astype(np.float64)
                                                                for x in (Q, K, V, dO)), scale)
                                        for h in range(BH)))]
    return (Q, K, V, dO, O.astype(np.float32), L.astype(np.float32)), grads


def check(rng, BH, N, d, *, M=None, block=None, scale=None, backend="emulator", tol=1e-5):
    (Q, K, V, dO, O, L), want = problem(rng, BH, N, d, scale)
    r = run_backward(Q, K, V, O, dO, L, M=M, block=block, scale=scale, count_io=True,
                     backend=backend)
    got = [np.asarray(g.get() if hasattr(g, "get") else g) for g in r.output]
    for name, g, w in zip(("dQ", "dK", "dV"), got, want):
        assert g.shape == (BH, N, d) and g.dtype == np.float32, name
        assert np.isfinite(g).all(), f"{name} not fully written"
        if N == 1 and name != "dV":          # softmax of one key is 1: dQ = dK = 0 exactly
            assert np.abs(g).max() <= tol * np.abs(dO).max(), name
        else:
            assert rel_error(g, w) <= tol, (name, rel_error(g, w))
    p = r.plan
    assert 4 * p.footprint <= (EMULATED if backend == "emulator" else 1 << 40)
    options = {} if block is None and M is not None else {"block": (p.B_r, p.B_c)}
    cost = ioattn.io_cost("flash", N, d, p.M, backward=True, **options)
    if M is not None and block is None:
        assert cost == ioattn.io_cost("flash", N, d, M, backward=True)
    assert (r.io.reads, r.io.writes) == (BH * cost.reads, BH * cost.writes)
    assert r.io.peak == p.footprint
    return r


# (BH, N, d, M, block): several K/V and query blocks, ragged last blocks, T_c = 1, B_r = 1.
CASES = [
    (2, 37, 8, 400, None),           # the rule: B_c = 10 (4 blocks, last 7), B_r = 1
    (3, 50, 16, None, (7, 12)),      # ragged in both directions
    (1, 33, 32, 1500, None),         # d = 32: 32-way bank pattern, B_c = 9, B_r = 3
    (2, 29, 5, None, (29, 4)),       # one query block, many K/V blocks
    (1, 23, 3, None, (5, 40)),       # one K/V block (B_c > N): dQ never read
    (2, 20, 6, None, None),          # the default plan: one square block covering N
]


@pytest.mark.parametrize("BH, N, d, M, block", CASES)
def test_emulator_gradients_and_count(rng, BH, N, d, M, block):
    check(rng, BH, N, d, M=M, block=block)


def test_emulator_one_row_and_scale(rng):
    """N = 1 (dQ = dK = 0, dV = dO) and a non-default scale."""
    r = check(rng, 2, 1, 7, M=200)
    assert (r.io.reads, r.io.writes) == (2 * (6 * 7 + 2), 2 * (3 * 7 + 1))
    check(rng, 1, 19, 4, block=(3, 5), scale=0.3)


def test_plan_rules():
    # M given: the NumPy rule, unchanged.
    assert host.plan(100, 16, M=2000, budget=EMULATED) == ioattn.plan("flash", 100, 16, 2000,
                                                                     backward=True)
    # No M: the largest square block whose footprint fits in the budget, clipped at N.
    p = host.plan(1000, 64, budget=EMULATED)
    b = p.B_r
    assert (p.B_r, p.B_c) == (b, b) and 4 * p.footprint <= EMULATED
    assert 4 * host._footprint(64, b + 1, b + 1) > EMULATED
    assert host.plan(10, 64, budget=EMULATED).B_c == 10
    small = 48 * 1024
    assert 4 * host.plan(4096, 128, budget=small).footprint <= small


def test_plan_errors():
    with pytest.raises(ValueError, match="use M <= ") as err:
        host.plan(4096, 64, M=10 ** 6, budget=EMULATED)
    largest = int(str(err.value).rsplit("M <= ", 1)[1])
    fits = ioattn.plan("flash", 4096, 64, largest, backward=True).footprint
    beyond = ioattn.plan("flash", 4096, 64, largest + 1, backward=True).footprint
    assert 4 * fits <= EMULATED < 4 * beyond
    with pytest.raises(ValueError, match="block"):
        host.plan(4096, 64, block=(256, 256), budget=EMULATED)
    with pytest.raises(ValueError, match="float32"):
        host.plan(64, 16, dtype="float16", budget=EMULATED)
    with pytest.raises(ValueError, match="options"):
        host.plan(64, 16, budget=EMULATED, schedule="outer")
    with pytest.raises(ValueError, match="shared memory"):
        host.plan(64, 256, budget=1024)


@pytest.mark.gpu
@pytest.mark.parametrize("N", [1, 17, 257])
@pytest.mark.parametrize("d", [16, 64, 128])
def test_gpu_gradients_and_count(rng, N, d):
    check(rng, 3, N, d, backend="cuda")                                   # the default plan
    M = ioattn.min_M("flash", d, backward=True) + 40 * d
    check(rng, 2, N, d, M=M, backend="cuda")                              # many small blocks
    check(rng, 2, N, d, block=(16, 24), backend="cuda")
