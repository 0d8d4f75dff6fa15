"""Bounds: no algorithm ever beats a lower bound; no algorithm exceeds its upper bound; the
crossover helper finds exact change points."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn import bounds, masks
from ioattn.bounds import _ceil_sqrt_ratio

from .conftest import BACKWARD_VARIANTS, VARIANT_IDS, VARIANTS, least_M, reference_backward


def check_point(name, options, N, d, M):
    io = ioattn.io_cost(name, N, d, M, **options).total
    assert io >= bounds.lower_bound(N, d, M), "below the standard-matmul lower bound"
    assert io >= bounds.lower_bound(N, d, M, matmul="any"), "below the any-matmul lower bound"
    assert io <= bounds.upper_bound(name, N, d, M, **options), "above its own upper bound"


GRID = list(itertools.product([1, 7, 64, 257, 1024, 4096], [1, 3, 16, 64, 128],
                              [2 ** k for k in range(2, 21, 2)]))


@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_bounds_hold_on_a_grid(name, options):
    checked = 0
    for N, d, M in GRID:
        if M >= least_M(name, d, options):
            check_point(name, options, N, d, M)
            checked += 1
    assert checked > 100


@given(N=st.integers(1, 5000), d=st.integers(1, 300), M=st.integers(3, 10 ** 6),
       which=st.integers(0, len(VARIANTS) - 1))
def test_bounds_hold_on_drawn_sizes(N, d, M, which):
    name, options = VARIANTS[which]
    M = max(M, least_M(name, d, options))
    check_point(name, options, N, d, M)


def test_partition_bound_by_hand():
    # N = 4096, d = 64, M = d^2: ceil(N^2 d^2 / (4 M d^2 + M^2)) = ceil(4096 / 5) = 820 parts
    assert bounds.partition_lower(4096, 64, 4096) == 4096 * 819
    assert bounds.partition_lower(10, 4, 10 ** 6) == 0              # vacuous: everything fits


def test_reduction_bound_by_hand():
    # N = 1024, d = 256, M = 64: ceil(N^2 d / M^1.5) = 2^20 * 2^8 / 2^9 = 2^19 segments
    assert bounds.reduction_lower(1024, 256, 64) == 64 * (2 ** 19 - 1) - 1024 ** 2
    assert bounds.reduction_lower(1024, 64, 4096) == 0               # vacuous at M = d^2


def test_any_matmul_bound_by_hand():
    # M >= d^2: B = 8 M^2 / d^2; N = 4096, d = 64, M = 8192: N^2 d^2 / (8 M^2) = 2^36 / 2^29
    assert bounds.any_matmul_lower(4096, 64, 8192) == 8192 * 127
    # M < d^2: B = 8M; ceil(N^2 / (8 M)) = ceil(2^24 / 2^13) = 2048
    assert bounds.any_matmul_lower(4096, 64, 1024) == 1024 * 2047


def test_trivial_and_order_and_regime():
    assert bounds.trivial_lower(10, 3) == 120
    # min(N^2 d^2 / M, N^2 d / sqrt(M)) + N d: the trivial term is part of the order
    assert bounds.order(100, 8, 64) == 100 ** 2 * 8 ** 2 / 64 + 800 == 100 ** 2 * 8 / 8 + 800
    assert bounds.order(2, 64, 10 ** 9) == pytest.approx(128)   # M >> N d: reading the input
    assert bounds.regime(64, 4096) == "large" and bounds.regime(64, 4095) == "small"


def test_lower_bound_classes():
    assert bounds.lower_bound(4096, 64, 1024) >= bounds.lower_bound(4096, 64, 1024, "any")
    with pytest.raises(ValueError, match="'standard' or 'any'"):
        bounds.lower_bound(10, 2, 10, matmul="fast")


def test_bounds_are_tight_up_to_constants():
    """FlashAttention within 40x of the lower bound for M >= d^2; outer square tiling within 40x
    for M <= d^2 / 64 (the bounds' constants are loose, not wrong)."""
    N = 8192
    for d in (32, 64, 128):
        for M in (d * d, 4 * d * d, 16 * d * d):
            assert ioattn.io_cost("flash", N, d, M).total <= 40 * bounds.lower_bound(N, d, M)
        M = d * d // 64
        assert ioattn.io_cost("square_tiling", N, d, M, schedule="outer").total <= \
            40 * bounds.lower_bound(N, d, M)


def test_ceil_sqrt_ratio():
    for a in range(0, 300):
        for b in range(1, 12):
            x = _ceil_sqrt_ratio(a, b)
            assert x * x * b >= a and (x == 0 or (x - 1) ** 2 * b < a)
    assert _ceil_sqrt_ratio(10 ** 40, 1) == 10 ** 20


def test_upper_bound_errors():
    with pytest.raises(ValueError, match="at least M"):
        bounds.upper_bound("flash", 10, 8, 10)
    with pytest.raises(ValueError, match="explicit block"):
        bounds.upper_bound("flash", 10, 8, 1000, block=(2, 2))


def test_cheapest():
    assert bounds.cheapest(4096, 64, 16 * 4096) == "flash"
    assert bounds.cheapest(4096, 64, 64) == "standard"
    outer = {"square_tiling": {"schedule": "outer"}}
    assert bounds.cheapest(4096, 64, 1024, options=outer) == "square_tiling"
    assert bounds.cheapest(4096, 64, 64, names=["flash"]) is None     # flash cannot run there


@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("schedule", ["blocked", "outer"])
def test_flash_and_square_tiling_cross_near_d_squared(d, schedule):
    names, options = ["flash", "square_tiling"], {"square_tiling": {"schedule": schedule}}
    found = bounds.crossovers(4096, d, names=names, options=options)
    assert found[0].before == "square_tiling" and found[-1].after == "flash"
    for c in found:                       # the winner may change back: every change is listed
        assert d * d / 8 <= c.M <= 4 * d * d
        assert bounds.cheapest(4096, d, c.M - 1, names, options) == c.before
        assert bounds.cheapest(4096, d, c.M, names, options) == c.after


def test_crossovers_range_and_defaults():
    assert bounds.crossovers(4096, 64, 2 ** 14, 2 ** 17) == []       # flash wins throughout
    every = bounds.crossovers(4096, 64)
    assert every and all(c.before != c.after for c in every)
    for c in every:
        assert bounds.cheapest(4096, 64, c.M - 1) == c.before
        assert bounds.cheapest(4096, 64, c.M) == c.after
    assert math.isclose(every[-1].M / 64 ** 2, every[-1].M / 4096)


# ------------------------------------------------------------------------------- backward pass
#: Every backward pass with every option value worth testing.
BACKWARD = [("flash", {}), ("square_tiling", {}), ("square_tiling", {"schedule": "outer"}),
            ("standard", {})]
BACKWARD_IDS = [name + "".join(f"-{v}" for v in opts.values()) for name, opts in BACKWARD]


def least_M_backward(name, d, options):
    from ioattn.algorithms import get

    algo = get(name, backward=True)
    return algo.min_M(d, **{**algo.options, **options})


def check_backward_point(name, options, N, d, M):
    io = ioattn.io_cost(name, N, d, M, backward=True, **options).total
    standard = bounds.lower_bound(N, d, M, backward=True)
    assert io >= standard, "below the backward standard-matmul lower bound"
    assert standard >= bounds.lower_bound(N, d, M), "the backward bound is weaker than forward"
    assert io >= bounds.lower_bound(N, d, M, matmul="any", backward=True), \
        "below the backward any-matmul lower bound"
    assert io <= bounds.upper_bound(name, N, d, M, backward=True, **options), \
        "above its own backward upper bound"


BACKWARD_GRID = list(itertools.product([1, 7, 64, 257, 1024, 4096], [1, 3, 16, 64, 128],
                                       [2 ** k for k in range(2, 21, 2)] + [3, 5, 1000, 12345]))


@pytest.mark.parametrize("name, options", BACKWARD, ids=BACKWARD_IDS)
def test_backward_bounds_hold_on_a_grid(name, options):
    checked = 0
    for N, d, M in BACKWARD_GRID:
        if M >= least_M_backward(name, d, options):
            check_backward_point(name, options, N, d, M)
            checked += 1
    assert checked > 100


@given(N=st.integers(1, 5000), d=st.integers(1, 300), M=st.integers(3, 10 ** 6),
       which=st.integers(0, len(BACKWARD) - 1))
def test_backward_bounds_hold_on_drawn_sizes(N, d, M, which):
    name, options = BACKWARD[which]
    M = max(M, least_M_backward(name, d, options))
    check_backward_point(name, options, N, d, M)


def test_backward_lower_bounds_by_hand():
    # inputs Q, K, V, dO, O (5Nd) and L (N) read; dQ, dK, dV (3Nd) written
    assert bounds.trivial_lower(10, 3, backward=True) == 5 * 30 + 10 + 3 * 30 == 250
    assert bounds.trivial_lower(10, 3, backward=True, given_D=True) == 4 * 30 + 20 + 90 == 230
    # the trees of Q K^T and of dO V^T: 2 N^2 of them. N = 4096, d = 64, M = d^2:
    # ceil(2 N^2 d^2 / (4 M d^2 + M^2)) = ceil(8192 / 5) = 1639 parts
    assert bounds.partition_lower(4096, 64, 4096, backward=True) == 4096 * 1638
    # N = 1024, d = 256, M = 64: ceil(2 N^2 d / M^1.5) = 2^21 * 2^8 / 2^9 = 2^20 segments,
    # less the 2 N^2 writes of S and dP
    assert bounds.reduction_lower(1024, 256, 64, backward=True) == \
        64 * (2 ** 20 - 1) - 2 * 1024 ** 2
    assert bounds.reduction_lower(1024, 64, 4096, backward=True) == 0    # vacuous at M = d^2
    # the strongest: the partition bound at M = d^2, the reduction bound far below, trivial on top
    assert bounds.lower_bound(4096, 64, 4096, backward=True) == 4096 * 1638
    assert bounds.lower_bound(1024, 256, 64, backward=True) == 64 * (2 ** 20 - 1) - 2 * 2 ** 20
    assert bounds.lower_bound(64, 64, 2 ** 20, backward=True) == 8 * 64 * 64 + 64
    # any matmul: the forward's theorem, with the backward's trivial bound
    # (N^2 d^2 / (8 M^2) = 2^40 / 2^29 epochs at N = 16384, d = 64, M = 8192)
    assert bounds.lower_bound(16384, 64, 8192, "any", backward=True) == 8192 * 2047
    assert bounds.lower_bound(16, 64, 8192, "any", backward=True) == 8 * 16 * 64 + 16


def test_backward_order_regime_and_errors():
    # [LLSS]: min((N^2 d^2 + N d^3) / M, (N^2 d + N d^2) / sqrt(M)), equal at M = d^2
    # plus the trivial N d
    assert bounds.order(100, 8, 64, backward=True) == (100 ** 2 * 64 + 100 * 512) / 64 + 800
    assert bounds.order(100, 8, 16, backward=True) == (100 ** 2 * 8 + 100 * 64) / 4 + 800
    assert bounds.regime(64, 4096, backward=True) == "large"
    assert bounds.regime(64, 4095, backward=True) == "small"
    with pytest.raises(TypeError, match="backward must be True or False"):
        bounds.lower_bound(10, 2, 10, backward="yes")
    with pytest.raises(ValueError, match="given_D concerns the backward pass"):
        bounds.trivial_lower(10, 2, given_D=True)
    with pytest.raises(ValueError, match="at least M = 452"):       # 7d + 4 for d = 64
        bounds.upper_bound("flash", 10, 64, 451, backward=True)
    with pytest.raises(ValueError, match="explicit block"):
        bounds.upper_bound("flash", 10, 8, 1000, backward=True, block=(2, 2))
    with pytest.raises(ValueError, match="unknown backward pass"):
        bounds.upper_bound("nope", 10, 8, 1000, backward=True)
    with pytest.raises(ValueError, match="no mask, no save_lse"):
        bounds.upper_bound("flash", 10, 8, 1000, save_lse=True)
    with pytest.raises(ValueError, match="no mask, no save_lse"):
        bounds.upper_bound("standard", 4, 8, 1000, backward=True, mask=[[True] * 4] * 4)


def test_backward_order_is_stated_for_N_at_least_d():
    # [LLSS]'s order is claimed for N >= d only; N = d is the boundary
    with pytest.raises(ValueError, match="stated for N >= d only, got N = 8 < d = 512"):
        bounds.order(8, 512, 16, backward=True)
    assert bounds.order(512, 512, 16, backward=True) == (512**3 + 512**3) / 4 + 512**2
    assert bounds.order(8, 512, 16) == 8**2 * 512 / 4 + 8 * 512       # the forward is unchanged
    # why: for N << d the backward pass moves far less than (N^2 d + N d^2) / sqrt(M)
    N, d, M = 8, 512, 16
    rng = np.random.default_rng(0)
    Q, K, V, dO = rng.standard_normal((4, N, d))
    got = ioattn.run_backward("square_tiling", Q, K, V, dO, M, schedule="outer")
    assert got.io == ioattn.io_cost("square_tiling", N, d, M, backward=True, schedule="outer")
    assert got.io.peak <= M
    for grad, want in zip(got.output, reference_backward(Q, K, V, dO)):
        assert np.allclose(grad, want, rtol=0, atol=1e-12)
    assert got.io.total < 0.3 * (N * N * d + N * d * d) / math.sqrt(M)
    # and at N = 16, d = 4096 the cheapest backward pass is below a fifth of the formula
    N, d = 16, 4096
    outer = {"schedule": "outer"}
    for M in (4, 64, 1024, 4096):
        best = min(ioattn.io_cost(name, N, d, M, backward=True, **opts).total
                   for name, opts in (("square_tiling", outer), ("square_tiling", {}),
                                      ("standard", {})))
        formula = min((N * N * d * d + N * d**3) / M, (N * N * d + N * d * d) / math.sqrt(M))
        assert best < 0.2 * (formula + N * d)


def test_backward_flash_upper_bound_formula():
    # 9Nd + 3N + floor(N^2 (4d + 2)^2 / (M - 7d - 3)), within a few percent for large N
    N, d, M = 4096, 64, 4 * 64 * 64
    exact = ioattn.io_cost("flash", N, d, M, backward=True).total
    assert bounds.upper_bound("flash", N, d, M, backward=True) == \
        9 * N * d + 3 * N + N * N * 258 ** 2 // (M - 7 * d - 3)
    assert exact <= bounds.upper_bound("flash", N, d, M, backward=True) <= 1.1 * exact


def test_backward_bounds_are_tight_up_to_constants():
    """FlashAttention's backward within 50x of the backward lower bound for M >= d^2; outer
    square tiling's within 10x for M = d^2 / 64."""
    N = 8192
    for d in (32, 64, 128):
        for M in (d * d, 4 * d * d, 16 * d * d):
            assert ioattn.io_cost("flash", N, d, M, backward=True).total <= \
                50 * bounds.lower_bound(N, d, M, backward=True)
        M = d * d // 64
        assert ioattn.io_cost("square_tiling", N, d, M, backward=True, schedule="outer").total \
            <= 10 * bounds.lower_bound(N, d, M, backward=True)


def test_backward_cheapest():
    assert bounds.cheapest(4096, 64, 16 * 4096, backward=True) == "flash"
    assert bounds.cheapest(4096, 64, 64, backward=True) == "standard"
    outer = {"square_tiling": {"schedule": "outer"}}
    assert bounds.cheapest(4096, 64, 1024, options=outer, backward=True) == "square_tiling"
    # flash's backward needs M >= 7d + 4 = 452; its forward runs from 4d + 4 = 260
    assert bounds.cheapest(4096, 64, 300, names=["flash"], backward=True) is None
    assert bounds.cheapest(4096, 64, 300, names=["flash"]) == "flash"


def _winner_changes(N, d, schedule, M_lo, M_hi):
    """Every M in (M_lo, M_hi] where the cheaper of flash and square tiling (backward) changes."""
    prev, changes = None, []
    for M in range(M_lo, M_hi + 1):
        f = ioattn.io_cost("flash", N, d, M, backward=True).total
        s = ioattn.io_cost("square_tiling", N, d, M, backward=True, schedule=schedule).total
        w = "flash" if f < s else "square_tiling"
        if prev is not None and w != prev:
            changes.append(M)
        prev = w
    return changes


@pytest.mark.parametrize("d", [16, 32, 64, 128])
@pytest.mark.parametrize("schedule", ["blocked", "outer"])
def test_backward_flash_and_square_tiling_cross_near_d_squared(d, schedule):
    names, options = ["flash", "square_tiling"], {"square_tiling": {"schedule": schedule}}
    found = bounds.crossovers(4096, d, names=names, options=options, backward=True)
    assert found and found[0].before == "square_tiling" and found[-1].after == "flash"
    for c in found:
        assert d * d / 8 <= c.M <= 4 * d * d
        assert bounds.cheapest(4096, d, c.M - 1, names, options, backward=True) == c.before
        assert bounds.cheapest(4096, d, c.M, names, options, backward=True) == c.after


@pytest.mark.parametrize("d, top", [(16, 32), (32, 8)])
@pytest.mark.parametrize("schedule", ["blocked", "outer"])
def test_backward_every_change_lies_near_d_squared(d, top, schedule):
    """Every M (not only powers of two) from where flash's backward runs to ``top d^2``: the
    winner changes only inside [d^2/8, 4d^2], and crossovers() lists every change (the outer
    schedule trades places more than once at d = 16)."""
    changes = _winner_changes(4096, d, schedule, 7 * d + 4, top * d * d)
    assert changes and all(d * d / 8 <= M <= 4 * d * d for M in changes)
    assert len(changes) % 2 == 1                               # square tiling first, flash last
    found = bounds.crossovers(4096, d, names=["flash", "square_tiling"],
                              options={"square_tiling": {"schedule": schedule}}, backward=True)
    assert [c.M for c in found] == changes


def test_backward_crossovers_defaults():
    every = bounds.crossovers(4096, 64, backward=True)
    assert every and every[-1].after == "flash"
    for c in every:
        assert bounds.cheapest(4096, 64, c.M - 1, backward=True) == c.before
        assert bounds.cheapest(4096, 64, c.M, backward=True) == c.after
    assert bounds.crossovers(4096, 64, 2 ** 14, 2 ** 17, backward=True) == []


# ------------------------------------------------------------------------------ sparse attention
SPARSE_GRID = list(itertools.product([1, 7, 64, 1024, 4096], [1, 16, 64, 256],
                                     [3, 64, 1000, 4096, 2 ** 16, 2 ** 20]))


@pytest.mark.parametrize("backward", [False, True])
def test_sparse_at_Z_equal_N_squared_is_dense(backward):
    for N, d, M in SPARSE_GRID:
        Z = N * N
        assert bounds.sparse_partition_lower(N, d, M, Z, backward=backward) == \
            bounds.partition_lower(N, d, M, backward=backward)
        assert bounds.sparse_reduction_lower(N, d, M, Z, backward=backward) == \
            bounds.reduction_lower(N, d, M, backward=backward)
        assert bounds.sparse_trivial_lower(N, d, Z, backward=backward) == \
            bounds.trivial_lower(N, d, backward=backward)
        assert bounds.sparse_lower(N, d, M, Z, backward=backward) == \
            bounds.lower_bound(N, d, M, backward=backward)
    for N, d in itertools.product([1, 5, 64], [1, 2, 3, 64]):
        assert bounds.sparse_trivial_lower(N, d, N * N, backward=True, given_D=True) == \
            bounds.trivial_lower(N, d, backward=True, given_D=True)


@given(N=st.integers(1, 3000), d=st.integers(1, 300), M=st.integers(3, 10 ** 6),
       a=st.integers(0, 10 ** 7), b=st.integers(0, 10 ** 7), backward=st.booleans())
def test_sparse_bounds_are_monotone_in_Z(N, d, M, a, b, backward):
    Z1, Z2 = sorted((a % (N * N + 1), b % (N * N + 1)))
    # (The reduction bound is not monotone in Z: see the test below.)
    assert bounds.sparse_partition_lower(N, d, M, Z1, backward=backward) <= \
        bounds.sparse_partition_lower(N, d, M, Z2, backward=backward)
    assert bounds.sparse_trivial_lower(N, d, Z1, backward=backward) <= \
        bounds.sparse_trivial_lower(N, d, Z2, backward=backward)
    assert bounds.sparse_lower(N, d, M, Z2, backward=backward) <= \
        bounds.lower_bound(N, d, M, backward=backward)


def test_sparse_reduction_bound_is_not_monotone_in_Z():
    """Its "- Z" (the scores the reduction writes) can outgrow the ceiling: the bound holds for
    each Z, but a larger Z may give a smaller bound."""
    assert bounds.sparse_reduction_lower(2, 3, 3, 2) == 1
    assert bounds.sparse_reduction_lower(2, 3, 3, 3) == 0


def test_sparse_bounds_by_hand():
    N, d, M = 4096, 64, 4096
    causal = N * (N + 1) // 2                                      # 8,390,656 entries
    # ceil(Z d^2 / (4 M d^2 + M^2)) = ceil(8390656 / 20480) = ceil(409.7) = 410 parts
    assert bounds.sparse_partition_lower(N, d, M, causal) == 4096 * 409
    # backward: 2Z trees, ceil(16781312 / 20480) = ceil(819.4) = 820 parts
    assert bounds.sparse_partition_lower(N, d, M, causal, backward=True) == 4096 * 819
    # a quarter of the blocks of 128 x 128 at N = 1024: Z = N^2 / 4 = 2^18. d = 256, M = 64:
    # ceil(Z d / M^1.5) = 2^18 2^8 / 2^9 = 2^17 segments, less the Z writes
    mask = [[(I + J) % 4 == 0 for J in range(8)] for I in range(8)]
    assert bounds.block_density(mask) == Fraction(1, 4)
    Z = bounds.block_sparse_Z(1024, mask, (128, 128))
    assert Z == 2 ** 18 == bounds.block_density(mask) * 1024 ** 2
    assert bounds.sparse_reduction_lower(1024, 256, 64, Z) == 64 * (2 ** 17 - 1) - 2 ** 18
    assert bounds.sparse_reduction_lower(1024, 256, 64, Z, backward=True) == \
        64 * (2 ** 18 - 1) - 2 ** 19
    # trivial: the rows I and columns J that hold the Z entries. The diagonal alone, Z = N:
    # |I| + |J| >= ceil(2 sqrt(N)) (the bound cannot see that |I| = |J| = N here)
    # plus all of the output, written: N d forward, 3 N d backward
    # forward N d + d|I| + 2d|J| >= N d + d ceil(2 sqrt(Z)) + d ceil(Z / N)
    assert bounds.sparse_trivial_lower(100, 4, 100) == 400 + 4 * 20 + 4 * 1
    # backward 3 N d + (3d + 1)|I| + 2d|J| >= 3 N d + 2d ceil(2 sqrt(Z)) + (d + 1) ceil(Z / N)
    assert bounds.sparse_trivial_lower(100, 4, 100, backward=True) == 1200 + 8 * 20 + 5 * 1
    # given D: (2d + 2)|I| instead of (3d + 1)|I|
    assert bounds.sparse_trivial_lower(100, 4, 100, backward=True, given_D=True) == \
        1200 + 8 * 20 + 2 * 1
    # one row of Q K^T (Z = N): 1 row of Q, N rows of K and V, all of O: the bound is below
    assert bounds.sparse_trivial_lower(100, 4, 100) <= 400 + 4 * 1 + 2 * 4 * 100
    # nothing computed: O is still written (zeros), all of it
    assert bounds.sparse_lower(4096, 64, 4096, 0) == 4096 * 64
    assert bounds.sparse_lower(4096, 64, 4096, 0, backward=True) == 3 * 4096 * 64


def test_block_sparse_Z_clips_and_checks():
    # N = 6 in 4 x 4 blocks: block sides 4 and 2; computed (0, 0), (1, 0), (1, 1)
    assert bounds.block_sparse_Z(6, [[1, 0], [1, 1]], (4, 4)) == 16 + 8 + 4
    assert bounds.block_sparse_Z(6, [[True, True], [True, True]], (4, 4)) == 36
    assert bounds.block_sparse_Z(5, [[1], [0], [1]], (2, 5)) == 10 + 5
    with pytest.raises(ValueError, match="needs \\(2, 2\\)"):
        bounds.block_sparse_Z(6, [[1, 0, 1]], (4, 4))
    with pytest.raises(ValueError, match="rectangular"):
        bounds.block_sparse_Z(6, [[1, 0], [1]], (4, 4))
    with pytest.raises(TypeError, match="pair"):
        bounds.block_sparse_Z(6, [[1]], 6)


def test_sparse_errors():
    with pytest.raises(ValueError, match="Z <= N\\^2 = 100"):
        bounds.sparse_lower(10, 2, 10, 101)
    with pytest.raises(ValueError, match="Z must be at least 0"):
        bounds.sparse_partition_lower(10, 2, 10, -1)
    with pytest.raises(TypeError, match="Z must be an integer"):
        bounds.sparse_reduction_lower(10, 2, 10, 2.5)
    with pytest.raises(ValueError, match="given_D concerns the backward pass"):
        bounds.sparse_trivial_lower(10, 2, 10, given_D=True)


# ------------------------------------------------- masked algorithms against the sparse bound
def _masks(N):
    """Causal, sliding-window, block-sparse and random masks (one with empty rows) for ``N``."""
    rng = np.random.default_rng(N)
    return {
        "causal": masks.causal(N),
        "window": masks.sliding_window(N, max(1, N // 5)),
        "block": masks.block_sparse(N, (8, 16), 0.4, seed=N),
        "random": rng.random((N, N)) < 0.3,
        "sparse-random": rng.random((N, N)) < 0.02,   # empty rows and columns
    }


def _masked_Ms(name, d, options, backward):
    """From the least M the algorithm runs with up to several d^2."""
    lo = ioattn.min_M(name, d, backward=backward, **options)
    return sorted({lo, lo + 1, 2 * lo, max(lo, d * d), max(lo, 4 * d * d), max(lo, 9 * d * d)})


MASKED_CASES = [(False, name, options) for name, options in VARIANTS] + \
    [(True, name, options) for name, options in BACKWARD_VARIANTS]
MASKED_IDS = [("backward-" if b else "") + name + "".join(f"-{v}" for v in opts.values())
              for b, name, opts in MASKED_CASES]


@pytest.mark.parametrize("backward, name, options", MASKED_CASES, ids=MASKED_IDS)
def test_masked_costs_respect_the_sparse_lower_bound(backward, name, options):
    """Every algorithm's exact masked cost (io_cost with mask=) is at least
    sparse_lower(N, d, M, Z) with Z the mask's True entries, forward and backward."""
    checked = 0
    for N, d in [(1, 1), (7, 3), (33, 4), (64, 8), (96, 16)]:
        for kind, mask in _masks(N).items():
            Z = int(mask.sum())
            for M in _masked_Ms(name, d, options, backward):
                io = ioattn.io_cost(name, N, d, M, mask=mask, backward=backward, **options)
                bound = bounds.sparse_lower(N, d, M, Z, backward=backward)
                assert io.total >= bound, (kind, N, d, M, Z, io.total, bound)
                checked += 1
    assert checked > 100


def test_crossovers_under_a_mask():
    """An all-True mask changes nothing; under the causal mask the winner really differs at
    M - 1 and M, with the masked costs."""
    from ioattn.masks import causal

    N, d = 96, 8
    outer = {"square_tiling": {"schedule": "outer"}}
    dense = bounds.crossovers(N, d, options=outer)
    assert bounds.crossovers(N, d, options=outer, mask=np.ones((N, N), bool)) == dense
    mask = causal(N)
    found = bounds.crossovers(N, d, options=outer, mask=mask)
    assert found and found[-1].after == "flash"
    for c in found:
        assert bounds.cheapest(N, d, c.M, options=outer, mask=mask) == c.after
        assert bounds.cheapest(N, d, c.M - 1, options=outer, mask=mask) == c.before
