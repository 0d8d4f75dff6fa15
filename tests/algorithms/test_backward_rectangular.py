"""The FlashAttention backward pass of rectangular attention: ``N`` query rows against ``N_k``
keys. Its gradients equal the NumPy reference, its count equals ``io_cost(..., N_k=,
backward=True)`` dense and under masks of shape ``N x N_k``, its blocks are capped by their own
dimension, its plans and costs take an array of ``M``, and the square-only backward passes
refuse ``N_k`` by name."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn.algorithms import get
from ioattn.algorithms.base import ceil_div
from ioattn.masks import RectMask, causal_chunk

from ..conftest import reference_backward, relative_error

ALGO = get("flash", backward=True)
N_QS = (1, 2, 7, 64)
N_KS = (1, 5, 64, 300)
# (d, M): d = 1 at a tiny cache, d not a power of two, M about d^2 and well above it
D_MS = [(1, 11), (3, 64), (5, 200), (8, 1000)]
DQ = ("store", "atomic")


def _inputs(N, N_k, d, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((N, d)), rng.standard_normal((N_k, d)),
            rng.standard_normal((N_k, d)), rng.standard_normal((N, d)))


def _check(N, N_k, d, M, mask=None, dq="store", seed=0):
    Q, K, V, dO = _inputs(N, N_k, d, seed)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, mask=mask, dq=dq)
    want = reference_backward(Q, K, V, dO, mask=None if mask is None else np.asarray(mask))
    for label, got, ref, rows in zip(("dQ", "dK", "dV"), r.output, want, (N, N_k, N_k)):
        assert got.shape == (rows, d), label
        # relative to the gradient, or to the unit scale of the inputs where the gradient is
        # zero up to rounding (N_k = 1: the softmax is the constant 1, so dQ = dK = 0)
        assert np.abs(got - ref).max() <= 1e-10 * max(np.abs(ref).max(), 1.0), label
    assert r.io == ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True, mask=mask, dq=dq)
    assert r.io.peak <= M
    assert (r.plan.N, r.plan.N_k) == (N, N_k)
    return r


@pytest.mark.parametrize("N, N_k", list(itertools.product(N_QS, N_KS)))
@pytest.mark.parametrize("dq", DQ)
def test_dense_counted_equals_closed_form(N, N_k, dq):
    for d, M in D_MS:
        M = max(M, ioattn.min_M("flash", d, backward=True))
        r = _check(N, N_k, d, M, dq=dq, seed=N * 1000 + N_k + d)
        T_c = ceil_div(N_k, r.plan.B_c)
        extra = N * d if dq == "atomic" else 0
        assert (r.io.reads, r.io.writes) == (N * d + 2 * N_k * d + T_c * N * (3 * d + 2) + extra,
                                             N + 2 * N_k * d + T_c * N * d + extra)
        assert r.io.peak == r.plan.footprint


@pytest.mark.parametrize("N, N_k", [(q, k) for q, k in itertools.product(N_QS, N_KS) if q <= k])
@pytest.mark.parametrize("dq", DQ)
def test_causal_chunk_counted_equals_closed_form(N, N_k, dq):
    mask = causal_chunk(N, N_k)
    for d, M in D_MS:
        M = max(M, ioattn.min_M("flash", d, backward=True))
        _check(N, N_k, d, M, mask=mask, dq=dq, seed=N + N_k + d)
        # the blocks past the diagonal are skipped: never more than the dense count
        assert ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True, mask=mask, dq=dq).total \
            <= ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True, dq=dq).total


def test_causal_chunk_skips_blocks():
    dense = ioattn.io_cost("flash", 64, 8, 1000, N_k=300, backward=True)
    chunk = ioattn.io_cost("flash", 64, 8, 1000, N_k=300, backward=True,
                           mask=causal_chunk(64, 300))
    assert chunk.total < dense.total


@pytest.mark.parametrize("dq", DQ)
def test_random_masks_with_empty_rows_and_columns(dq):
    rng = np.random.default_rng(11)
    for N, N_k, d, M in [(7, 64, 3, 100), (2, 300, 5, 400), (64, 5, 4, 200), (9, 40, 2, 60)]:
        mask = rng.random((N, N_k)) < 0.3
        mask[0] = False                               # a row with nothing to attend to
        mask[:, :3] = False                           # keys no query attends to
        r = _check(N, N_k, d, M, mask=mask, dq=dq, seed=d)
        assert not r.output[0][0].any()               # dQ of the empty row
        assert not r.output[1][:3].any() and not r.output[2][:3].any()
        # a RectMask gives the same count as its array
        assert r.io == ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True,
                                      mask=RectMask(mask), dq=dq)


def test_blocks_capped_by_their_own_dimension():
    for N, N_k, d, M in itertools.product(N_QS, N_KS, (1, 8, 64), (300, 4096, 2 ** 16)):
        if M < ioattn.min_M("flash", d, backward=True):
            continue
        p = ioattn.plan("flash", N, d, M, N_k=N_k, backward=True)
        assert 1 <= p.B_r <= N and 1 <= p.B_c <= N_k
        assert p.T_c == ceil_div(N_k, p.B_c)
        assert p.footprint <= M
        # B_c is the square rule's, evened out over N_k; B_r the largest that fits
        B_c = (M - 3 * d - 2) // (4 * d + 2)
        assert p.B_c == ceil_div(N_k, ceil_div(N_k, B_c))
        assert p.B_r == min(N, (M - 4 * p.B_c * d) // (3 * d + 2 + 2 * p.B_c))


def test_few_queries_against_many_keys():
    # one query row against a long cache: B_r = 1, the key blocks as large as the rule allows
    # (it leaves room for B_r = 1 only), evened out over N_k
    d, M, N_k = 64, 2 ** 16, 8192
    p = ioattn.plan("flash", 1, d, M, N_k=N_k, backward=True)
    largest = (M - 3 * d - 2) // (4 * d + 2)
    assert p.B_r == 1 and p.B_c == ceil_div(N_k, ceil_div(N_k, largest)) and p.footprint <= M
    io = ioattn.io_cost("flash", 1, d, M, N_k=N_k, backward=True)
    assert io.reads == d + 2 * N_k * d + p.T_c * (3 * d + 2)
    assert io.writes == 1 + 2 * N_k * d + p.T_c * d


@pytest.mark.parametrize("dq", DQ)
def test_square_case_is_unchanged(dq):
    for N, d, M in [(37, 4, 300), (64, 16, 2000), (5, 3, 10 ** 4)]:
        square = ioattn.plan("flash", N, d, M, backward=True, dq=dq)
        assert square.N_k == N
        assert ioattn.plan("flash", N, d, M, N_k=N, backward=True, dq=dq) == square
        for mask in (None, ioattn.masks.causal(N)):
            assert ioattn.io_cost("flash", N, d, M, N_k=N, backward=True, mask=mask, dq=dq) == \
                ioattn.io_cost("flash", N, d, M, backward=True, mask=mask, dq=dq)


def test_block_option():
    for N, N_k, B_r, B_c in [(7, 30, 2, 4), (30, 7, 5, 3), (3, 10, 8, 20)]:
        d = 3
        M = ioattn.min_M("flash", d, backward=True, block=(B_r, B_c))
        Q, K, V, dO = _inputs(N, N_k, d, seed=B_r)
        r = ioattn.run_backward("flash", Q, K, V, dO, M, block=(B_r, B_c))
        assert r.io == ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True,
                                      block=(B_r, B_c))
        assert r.io.peak == r.plan.footprint <= M
        assert r.plan.T_c == ceil_div(N_k, B_c)


def test_plans_and_costs_take_an_array_of_M():
    d, N, N_k = 4, 7, 300
    Ms = np.arange(ioattn.min_M("flash", d, backward=True), 700, dtype=np.int64)
    p = ALGO.make_plan(N, d, Ms, N_k=N_k)
    io = ALGO.cost(p)
    for i in (0, 17, len(Ms) - 1):
        one = ioattn.io_cost("flash", N, d, int(Ms[i]), N_k=N_k, backward=True)
        assert (int(io.reads[i]), int(io.writes[i])) == (one.reads, one.writes)
    for mask in (None, causal_chunk(N, N_k)):
        for dq in DQ:
            got = ioattn.totals("flash", N, d, Ms, N_k=N_k, backward=True, mask=mask, dq=dq)
            assert [int(x) for x in got] == [
                ioattn.io_cost("flash", N, d, int(M), N_k=N_k, backward=True, mask=mask,
                               dq=dq).total for M in Ms]


def test_given_O_and_L_from_the_rectangular_forward():
    N, N_k, d, M = 5, 40, 4, 300
    Q, K, V, dO = _inputs(N, N_k, d, seed=3)
    mask = causal_chunk(N, N_k)
    fwd = ioattn.run("flash", Q, K, V, M, mask=mask, save_lse=True)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, O=fwd.output, L=fwd.lse, mask=mask)
    for got, want in zip(r.output, reference_backward(Q, K, V, dO, mask=mask)):
        assert relative_error(got, want) <= 1e-10
    assert r.io == ioattn.io_cost("flash", N, d, M, N_k=N_k, backward=True, mask=mask)


@given(N=st.integers(1, 30), N_k=st.integers(1, 70), d=st.integers(1, 7),
       M=st.integers(11, 2000), chunk=st.booleans(), atomic=st.booleans())
def test_drawn_sizes_counted_equals_closed_form(N, N_k, d, M, chunk, atomic):
    M = max(M, ioattn.min_M("flash", d, backward=True))
    mask = causal_chunk(N, N_k) if chunk and N <= N_k else None
    _check(N, N_k, d, M, mask=mask, dq="atomic" if atomic else "store", seed=M)


# ----------------------------------------------------------------------------- errors
Q, K, V, dO = _inputs(3, 10, 4, seed=0)


@pytest.mark.parametrize("name", ["standard", "square_tiling"])
def test_square_only_backward_passes_refuse_N_k(name):
    message = (rf"the '{name}' backward pass takes as many keys as queries \(N_k = N = 3\), "
               r"got N_k = 10; the backward passes that take N_k \(rectangular attention\): "
               r"'flash'")
    for call in (ioattn.io_cost, ioattn.plan):
        with pytest.raises(TypeError, match=message):
            call(name, 3, 4, 10 ** 4, N_k=10, backward=True)
    with pytest.raises(TypeError, match=message):
        ioattn.totals(name, 3, 4, [10 ** 4], N_k=10, backward=True)
    with pytest.raises(TypeError, match=message):
        ioattn.run_backward(name, Q, K, V, dO, 10 ** 4)
    # N_k = N is square attention, accepted by every backward pass
    assert ioattn.io_cost(name, 3, 4, 10 ** 4, N_k=3, backward=True) == \
        ioattn.io_cost(name, 3, 4, 10 ** 4, backward=True)


def test_rectangular_flags():
    assert ALGO.rectangular
    assert not get("standard", backward=True).rectangular
    assert not get("square_tiling", backward=True).rectangular


@pytest.mark.parametrize("N_k, error, message", [
    (0, ValueError, "N_k must be at least 1, got 0"),
    (2.0, TypeError, "N_k must be an integer"),
])
def test_bad_N_k(N_k, error, message):
    for call in (ioattn.io_cost, ioattn.plan):
        with pytest.raises(error, match=message):
            call("flash", 3, 4, 100, N_k=N_k, backward=True)


def test_N_k_is_not_an_option_of_min_M():
    with pytest.raises(TypeError, match="N_k .* is not an option of a backward pass's block "
                                        "rule"):
        ioattn.min_M("flash", 4, backward=True, N_k=10)


@pytest.mark.parametrize("args, message", [
    ((Q, K[:, :3], V[:, :3], dO), r"K has shape \(10, 3\) but Q has shape \(3, 4\)"),
    ((Q, K, V[:7], dO), r"V has shape \(7, 4\) but K has shape \(10, 4\)"),
    ((Q, K, V, dO[:2]), r"dO has shape \(2, 4\) but Q has shape \(3, 4\): dO must be N x d"),
])
def test_bad_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        ioattn.run_backward("flash", *args, 100)


def test_bad_O_and_L_shapes():
    with pytest.raises(ValueError, match=r"O has shape \(10, 4\) but Q has shape \(3, 4\)"):
        ioattn.run_backward("flash", Q, K, V, dO, 100, O=K, L=np.zeros(3))
    with pytest.raises(ValueError, match=r"L must hold N = 3 .* got shape \(10,\)"):
        ioattn.run_backward("flash", Q, K, V, dO, 100, O=Q, L=np.zeros(10))


@pytest.mark.parametrize("mask, message", [
    (np.ones((10, 3), dtype=bool), r"mask must have shape \(N_q, N_k\) = \(3, 10\), got "
                                   r"\(10, 3\)"),
    (ioattn.masks.Mask.causal(3), r"mask must have shape \(N_q, N_k\) = \(3, 10\)"),
])
def test_bad_mask_shape(mask, message):
    with pytest.raises(ValueError, match=message):
        ioattn.run_backward("flash", Q, K, V, dO, 100, mask=mask)
    with pytest.raises(ValueError, match=message):
        ioattn.io_cost("flash", 3, 4, 100, N_k=10, backward=True, mask=mask)
