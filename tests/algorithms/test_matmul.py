"""The matrix-product building block: correct, counted exactly, near 2mnk/sqrt(M) + mn."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ioattn import matmul_cost, plan_matmul, run_matmul
from ioattn.algorithms.matmul import outer_product_side
from ioattn.bounds import matmul_lower


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
