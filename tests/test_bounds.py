"""Bounds: no algorithm ever beats a lower bound; no algorithm exceeds its upper bound; the
crossover helper finds exact change points."""

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn import bounds
from ioattn.bounds import _ceil_sqrt_ratio

from .conftest import VARIANT_IDS, VARIANTS, least_M


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
    assert bounds.order(100, 8, 64) == 100 ** 2 * 8 ** 2 / 64 == 100 ** 2 * 8 / 8
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
    assert len(found) == 1
    c = found[0]
    assert (c.before, c.after) == ("square_tiling", "flash")
    assert d * d / 8 <= c.M <= 4 * d * d
    assert bounds.cheapest(4096, d, c.M - 1, names, options) == "square_tiling"
    assert bounds.cheapest(4096, d, c.M, names, options) == "flash"


def test_crossovers_range_and_defaults():
    assert bounds.crossovers(4096, 64, 2 ** 14, 2 ** 17) == []       # flash wins throughout
    every = bounds.crossovers(4096, 64)
    assert every and all(c.before != c.after for c in every)
    for c in every:
        assert bounds.cheapest(4096, 64, c.M - 1) == c.before
        assert bounds.cheapest(4096, 64, c.M) == c.after
    assert math.isclose(every[-1].M / 64 ** 2, every[-1].M / 4096)
