"""The matrix-product backward passes (standard, square tiling): exact gradients, counted exactly
as their closed forms say, within their cache from their smallest M on."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn.algorithms import get
from ioattn.algorithms.matmul import MatmulPlan

from ..conftest import random_qkv, reference_backward, relative_error

VARIANTS = [("standard", {}), ("square_tiling", {}), ("square_tiling", {"schedule": "outer"})]
IDS = ["standard", "square_tiling-blocked", "square_tiling-outer"]

# (N, d, M): odd N, N = 1, N below one tile, d not a power of two, M at and around d^2.
SHAPES = [(1, 1, 200), (1, 3, 4), (7, 3, 64), (37, 5, 200), (64, 16, 256), (33, 12, 144),
          (50, 7, 1000), (10, 40, 4000), (100, 9, 81), (9, 3, 4), (20, 6, 5), (5, 2, 7)]


def least_M(name, d, options):
    algo = get(name, backward=True)
    return algo.min_M(d, **{**algo.options, **options})


def inputs(N, d, seed=0, magnitude=1.0):
    Q, K, V = random_qkv(N, d, seed=seed, magnitude=magnitude)
    dO = np.random.default_rng(seed + 1000).standard_normal((N, d))
    return Q, K, V, dO


def assert_gradients(out, ref, tol=1e-10):
    for got, want, label in zip(out, ref, ("dQ", "dK", "dV")):
        assert got.shape == want.shape and got.dtype == np.float64
        if got.shape[0] == 1 and label != "dV":  # N = 1: dQ = dK = 0 in exact arithmetic (the
            assert np.abs(got).max() <= tol, label   # reference's rounding leaves ~1e-16)
        else:
            assert relative_error(got, want) <= tol, label


@pytest.fixture(params=VARIANTS, ids=IDS)
def variant(request):
    return request.param


@pytest.mark.parametrize("N, d, M", SHAPES)
def test_gradients_and_exact_count(variant, N, d, M):
    name, options = variant
    M = max(M, least_M(name, d, options))
    Q, K, V, dO = inputs(N, d, seed=N + d)
    r = ioattn.run_backward(name, Q, K, V, dO, M, **options)
    assert_gradients(r.output, reference_backward(Q, K, V, dO))
    assert r.io == ioattn.io_cost(name, N, d, M, backward=True, **options)
    assert all(isinstance(getattr(r.io, f), int) for f in ("reads", "writes", "total", "peak"))
    assert r.io.peak <= M
    assert r.plan.footprint == r.io.peak


def test_single_row(variant):
    """N = 1: the softmax is constant, so dQ = dK = 0 and dV = dO."""
    name, options = variant
    Q, K, V, dO = inputs(1, 5, seed=4)
    dQ, dK, dV = ioattn.run_backward(name, Q, K, V, dO, 40, **options).output
    assert np.abs(dQ).max() <= 1e-12 and np.abs(dK).max() <= 1e-12
    assert relative_error(dV, dO) <= 1e-14


def test_large_logits(variant):
    """Logits of magnitude 10^3 and more: P comes from L, so nothing overflows."""
    name, options = variant
    N, d = 23, 6
    Q, K, V, dO = inputs(N, d, seed=3, magnitude=30.0)
    assert np.abs(Q @ K.T / np.sqrt(d)).max() > 1e3
    out = ioattn.run_backward(name, Q, K, V, dO, 150, **options).output
    assert all(np.isfinite(g).all() for g in out)
    assert_gradients(out, reference_backward(Q, K, V, dO))


def test_scale_option(variant):
    name, options = variant
    Q, K, V, dO = inputs(12, 4, seed=5)
    r = ioattn.run_backward(name, Q, K, V, dO, 120, scale=0.7, **options)
    assert_gradients(r.output, reference_backward(Q, K, V, dO, scale=0.7))
    assert r.io == ioattn.io_cost(name, 12, 4, 120, backward=True, scale=0.7, **options)


@given(data=st.data(), N=st.integers(1, 30), d=st.integers(1, 10))
@pytest.mark.parametrize("name, options", VARIANTS, ids=IDS)
def test_count_equals_closed_form_on_drawn_sizes(name, options, data, N, d):
    lo = least_M(name, d, options)
    M = data.draw(st.integers(lo, lo + 50 * d * d), label="M")
    Q, K, V, dO = inputs(N, d, seed=N * d)
    r = ioattn.run_backward(name, Q, K, V, dO, M, **options)
    assert r.io == ioattn.io_cost(name, N, d, M, backward=True, **options)
    assert r.io.peak <= M
    assert_gradients(r.output, reference_backward(Q, K, V, dO))


def _sides(plan):
    """Every tile side, strip width and row-pass block of a plan (all must be at least 1)."""
    for value in vars(plan).values():
        if isinstance(value, MatmulPlan):
            yield from (value.b_r, value.b_c, value.L)
        elif hasattr(value, "R") and hasattr(value, "W"):
            yield from (value.R, value.W)
    if hasattr(plan, "h"):
        yield plan.h


def _rule_fits(name, options, N, d, M):
    try:
        plan = get(name, backward=True).make_plan(N, d, M, **{**get(name, True).options,
                                                               **options})
    except (ValueError, ZeroDivisionError):
        return False
    return min(_sides(plan)) >= 1 and plan.footprint <= M


@pytest.mark.parametrize("name, options", VARIANTS, ids=IDS)
@pytest.mark.parametrize("d", [1, 2, 3, 8, 31, 64])
def test_smallest_M_is_exact(name, options, d):
    """Below the minimum: a clear error quoting it. From it on: the rule fits, every M; and the
    minimum is the brute-force one (the rule does not fit just below it)."""
    lo = least_M(name, d, options)
    with pytest.raises(ValueError, match=f"at least M = {lo} entries"):
        ioattn.plan(name, 10 ** 6, d, lo - 1, backward=True, **options)
    for N in (1, 5, 10 ** 6):
        assert not _rule_fits(name, options, N, d, lo - 1)
        for M in range(lo, lo + 20 * d + 400):
            p = ioattn.plan(name, N, d, M, backward=True, **options)
            assert min(_sides(p)) >= 1 and p.footprint <= M, (M, p)


@pytest.mark.parametrize("name, options", VARIANTS, ids=IDS)
def test_runs_at_its_smallest_M(name, options):
    N, d = 9, 3
    M = least_M(name, d, options)
    Q, K, V, dO = inputs(N, d, seed=1)
    r = ioattn.run_backward(name, Q, K, V, dO, M, **options)
    assert r.io == ioattn.io_cost(name, N, d, M, backward=True, **options) and r.io.peak == M
    assert_gradients(r.output, reference_backward(Q, K, V, dO))


def test_trace_adds_up(variant):
    name, options = variant
    N, d = 17, 4
    r = ioattn.run_backward(name, *inputs(N, d, seed=2), 100, trace=True, **options)
    per = {}
    for t in r.trace:
        per[t.op, t.array] = per.get((t.op, t.array), 0) + t.entries
    assert sum(v for (op, _), v in per.items() if op == "read") == r.io.reads
    assert sum(v for (op, _), v in per.items() if op == "write") == r.io.writes
    assert ("write", "O") not in per and ("write", "L") not in per
    assert per["read", "O"] == N * d
    assert per["read", "L"] >= N
    for g in ("dQ", "dK", "dV"):
        assert per["write", g] == N * d
    assert {"Q", "K", "V", "dO"} <= {a for op, a in per if op == "read"}


def test_square_tiling_never_writes_dP():
    r = ioattn.run_backward("square_tiling", *inputs(11, 3), 40, trace=True, schedule="outer")
    arrays = {t.array for t in r.trace}
    assert "dP" not in arrays and {"P", "dS", "D"} <= arrays
    r = ioattn.run_backward("standard", *inputs(11, 3), 40, trace=True)
    assert {"P", "dP", "dS", "D"} <= {t.array for t in r.trace if t.op == "write"}


def test_standard_closed_form_by_hand():
    """The docstring formula, term by term, at one point."""
    N, d, M = 37, 5, 200
    p = ioattn.plan("standard", N, d, M, backward=True)
    products = sum(q.reads for q in (p.P, p.dV, p.dP, p.dQ, p.dK))
    c = ioattn.io_cost("standard", N, d, M, backward=True)
    assert c.reads == products + N * -(-N // p.P.b_c) + 2 * N * d + 2 * N * N + N
    assert c.writes == 3 * N * N + 3 * N * d + N


def test_square_tiling_closed_form_by_hand():
    N, d, M = 37, 5, 200
    for schedule in ("blocked", "outer"):
        p = ioattn.plan("square_tiling", N, d, M, backward=True, schedule=schedule)
        products = sum(q.reads for q in (p.P, p.dS, p.dV, p.dQ, p.dK))
        c = ioattn.io_cost("square_tiling", N, d, M, backward=True, schedule=schedule)
        assert c.reads == products + N + 2 * N * d + N + N * N
        assert c.writes == 2 * N * N + 3 * N * d + N
    B = int(np.floor(np.sqrt(M / 4)))
    p = ioattn.plan("square_tiling", N, d, M, backward=True)
    assert all((q.b_r, q.b_c, q.L) == (B, B, B) for q in (p.P, p.dS, p.dV, p.dQ, p.dK))


@pytest.mark.parametrize("N, d, M", [(64, 16, 64), (256, 16, 100), (1024, 32, 200),
                                     (1024, 64, 1024), (2048, 64, 4000)])
def test_outer_square_tiling_moves_less_than_standard_in_small_caches(N, d, M):
    """With M < d^2, fusing dS (no dP round trip) beats the unfused backward."""
    assert M < d * d
    standard = ioattn.io_cost("standard", N, d, M, backward=True).total
    outer = ioattn.io_cost("square_tiling", N, d, M, backward=True, schedule="outer").total
    assert outer < standard


def test_standard_moves_less_in_the_very_smallest_caches():
    """As in the forward: at a few entries, the row statistics square tiling keeps beside its
    tiles shrink them below standard's, and standard moves less (computed: M = 5 and 8)."""
    for M in (5, 8):
        assert ioattn.io_cost("standard", 128, 8, M, backward=True).total < \
            ioattn.io_cost("square_tiling", 128, 8, M, backward=True, schedule="outer").total


def test_bad_options():
    with pytest.raises(TypeError, match="unknown option.*schedule"):
        ioattn.io_cost("standard", 10, 2, 100, backward=True, schedule="outer")
    with pytest.raises(ValueError, match="blocked, outer"):
        ioattn.io_cost("square_tiling", 10, 2, 100, backward=True, schedule="diagonal")
    assert {"standard", "square_tiling"} <= set(ioattn.algorithms(backward=True))
