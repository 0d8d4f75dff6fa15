"""The matrix-product building block: correct, counted exactly, near 2mnk/sqrt(M) + mn."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ioattn import TwoLevelMemory, matmul_cost, plan_matmul, run_matmul
from ioattn.algorithms.matmul import outer_product_side, product_io, tiled_product
from ioattn.bounds import matmul_lower
from ioattn.masks import Mask


@pytest.mark.parametrize("m, k, n, M", [(1, 1, 1, 3), (7, 5, 9, 3), (16, 16, 16, 64),
                                        (33, 7, 20, 100), (5, 40, 3, 1000), (64, 64, 64, 4096)])
def test_product_and_count(m, k, n, M):
    rng = np.random.default_rng(m * k + n)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    r = run_matmul(A, B, M)
    np.testing.assert_allclose(r.output, A @ B, rtol=1e-12, atol=1e-12)
    assert r.io == matmul_cost(m, k, n, M)
    assert r.io.peak <= M


@given(m=st.integers(1, 30), k=st.integers(1, 30), n=st.integers(1, 30), M=st.integers(3, 400),
       square=st.booleans())
def test_count_equals_closed_form(m, k, n, M, square):
    tile = None if square else (max(1, outer_product_side(M) // 2), outer_product_side(M))
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    r = run_matmul(A, B, M, tile=tile)
    assert r.io == matmul_cost(m, k, n, M, tile=tile)
    assert r.io.peak <= M
    assert r.io.total >= matmul_lower(m, k, n, M)
    np.testing.assert_allclose(r.output, A @ B, rtol=1e-10, atol=1e-10)


def test_tile_is_the_largest_square_with_its_strips():
    for M in range(3, 3000):
        b = outer_product_side(M)
        assert b * b + 2 * b <= M < (b + 1) ** 2 + 2 * (b + 1)


@pytest.mark.parametrize("s, M", [(128, 1024), (256, 4096), (200, 10000)])
def test_close_to_the_outer_product_bound(s, M):
    """Within 20% of 2mnk/sqrt(M) + mn for square matrices, and never below the lower bound."""
    io = matmul_cost(s, s, s, M).total
    target = 2 * s ** 3 / math.sqrt(M) + s * s
    assert matmul_lower(s, s, s, M) <= target <= io <= 1.2 * target


def test_bad_input():
    with pytest.raises(ValueError, match="cannot multiply"):
        run_matmul(np.ones((2, 3)), np.ones((2, 3)), 10)
    with pytest.raises(ValueError, match="at least M = 3"):
        plan_matmul(4, 4, 4, 2)
    with pytest.raises(ValueError, match=r"4x4 output tile .* M >= 24"):
        plan_matmul(4, 4, 4, 20, tile=(4, 4))
    with pytest.raises(TypeError, match="floating"):
        run_matmul(np.ones((2, 2), dtype=int), np.ones((2, 2)), 10)


@given(m=st.integers(1, 25), other=st.integers(1, 25), M=st.integers(3, 300),
       density=st.sampled_from([0.0, 0.1, 0.5, 1.0]), which=st.sampled_from("CA"),
       transpose_A=st.booleans())
@settings(max_examples=40)
def test_sparse_products_count_exactly(m, other, M, density, which, transpose_A):
    """With a mask on C (m x m) only its nonempty tiles are computed, masked entries filled;
    with a mask on A (m x m) only its nonempty strips are read, masked entries of A replaced by
    0 whatever slow memory holds there. product_io is the exact count and peak of both."""
    k, n = (other, m) if which == "C" else (m, other)
    rng = np.random.default_rng(m + 31 * k + 97 * n)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    plan = plan_matmul(m, k, n, M)
    mask = Mask(rng.random((m, m)) < density)
    mem = TwoLevelMemory(M)
    stored = A.copy()
    if which == "A":
        stored[mask.excluded] = np.nan                  # garbage where the mask hides A
    hA = mem.load("A", stored.T if transpose_A else stored)
    hB, hC = mem.load("B", B), mem.allocate_slow("C", (m, n))
    kwargs = {"c_mask": mask, "c_fill": -7.0} if which == "C" else {"a_mask": mask}
    tiled_product(mem, hA, hB, hC, plan, transpose_A=transpose_A, **kwargs)
    C = mem.fetch(hC)
    if which == "C":
        tiles = mask.blocks(plan.b_r, plan.b_c).nonempty
        done = np.repeat(np.repeat(tiles, plan.b_r, 0), plan.b_c, 1)[:m, :n]
        want = np.where(mask.array, A @ B, -7.0)
        np.testing.assert_allclose(C[done], want[done], rtol=1e-12, atol=1e-12)
        assert np.isnan(C[~done]).all()                 # skipped tiles: never written
        io = product_io(plan, c_mask=mask)
    else:
        np.testing.assert_allclose(C, np.where(mask.array, A, 0.0) @ B, rtol=1e-12, atol=1e-12)
        io = product_io(plan, a_mask=mask)
    assert (mem.reads, mem.writes, mem.peak) == io
    assert io[2] <= plan.footprint <= M
    if density == 1.0:
        assert io == product_io(plan) == (plan.reads, plan.writes, plan.footprint)
