"""The FlashAttention backward pass: accurate gradients, counted exactly as its closed form says,
within its cache, with the block rule and smallest cache of its module docstring."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn.masks import Mask
from ioattn.algorithms import get
from ioattn.algorithms.base import ceil_div

from ..conftest import random_qkv, reference_backward, relative_error

ALGO = get("flash", backward=True)

# (N, d, M): odd N, N below one block, d not a power of two, M at and around d^2.
SHAPES = [(7, 3, 64), (37, 5, 200), (64, 16, 256), (33, 12, 144), (50, 7, 1000),
          (129, 16, 1024), (10, 40, 4000), (100, 9, 81), (5, 3, 10 ** 4)]


def least_M(d, **options):
    return ALGO.min_M(d, **{**ALGO.options, **options})


def inputs(N, d, seed=0, magnitude=1.0):
    Q, K, V = random_qkv(N, d, seed=seed, magnitude=magnitude)
    dO = np.random.default_rng(seed + 1000).standard_normal((N, d))
    return Q, K, V, dO


def assert_gradients(result, Q, K, V, dO, scale=None, tol=1e-10):
    for name, got, want in zip(("dQ", "dK", "dV"), result.output,
                               reference_backward(Q, K, V, dO, scale)):
        assert got.shape == want.shape and got.dtype == np.float64, name
        assert relative_error(got, want) <= tol, name


def expected(N, d, T_c):
    """The module docstring's closed form."""
    return 3 * N * d + T_c * N * (3 * d + 2), N + 2 * N * d + T_c * N * d


def footprint(N, d, B_r, B_c):
    r, c = min(B_r, N), min(B_c, N)
    return 4 * c * d + 3 * r * d + 2 * r + 2 * r * c


def test_registered():
    assert "flash" in ioattn.algorithms(backward=True)
    assert ALGO.name == "flash" and ALGO.options == {"block": None, "dq": "store"}


@pytest.mark.parametrize("N, d, M", SHAPES)
def test_gradients_and_exact_count(N, d, M):
    M = max(M, least_M(d))
    Q, K, V, dO = inputs(N, d, seed=N + d)
    r = ioattn.run_backward("flash", Q, K, V, dO, M)
    assert_gradients(r, Q, K, V, dO)
    assert r.io == ioattn.io_cost("flash", N, d, M, backward=True)
    assert (r.io.reads, r.io.writes) == expected(N, d, ceil_div(N, r.plan.B_c))
    assert all(isinstance(getattr(r.io, f), int) for f in ("reads", "writes", "total", "peak"))
    assert r.io.peak == r.plan.footprint <= M


def test_one_row():
    """N = 1: the softmax is the constant 1, so dQ = dK = 0 (up to rounding) and dV = dO."""
    for d in (1, 2, 7):
        Q, K, V, dO = inputs(1, d, seed=d)
        M = least_M(d)
        r = ioattn.run_backward("flash", Q, K, V, dO, M)
        dQ, dK, dV = r.output
        assert np.abs(dQ).max() <= 1e-14 and np.abs(dK).max() <= 1e-14
        assert relative_error(dV, dO) <= 1e-15
        assert r.io == ioattn.io_cost("flash", 1, d, M, backward=True) and r.io.peak == M
        assert (r.io.reads, r.io.writes) == (6 * d + 2, 3 * d + 1)


def test_large_logits_do_not_overflow():
    """Logits of magnitude 10^3 and more: P is recomputed from L, never exp(S) alone."""
    N, d = 23, 6
    Q, K, V, dO = inputs(N, d, seed=3, magnitude=30.0)        # Q, K, V: the forward tests'
    assert np.abs(Q @ K.T / np.sqrt(d)).max() > 1e3
    r = ioattn.run_backward("flash", Q, K, V, dO, max(150, least_M(d)))
    assert all(np.isfinite(g).all() for g in r.output)
    assert_gradients(r, Q, K, V, dO)


def test_large_common_logit_offset():
    """Every logit near 10^3 (exp would overflow), differences O(1): gradients of size O(1)."""
    N, d = 19, 5
    Q, K, V, dO = inputs(N, d, seed=8)
    Q[:, 0] += 40.0
    K[:, 0] += 40.0
    assert (Q @ K.T / np.sqrt(d)).min() > 500
    r = ioattn.run_backward("flash", Q, K, V, dO, 200)
    assert_gradients(r, Q, K, V, dO)


def test_scale_option():
    Q, K, V, dO = inputs(12, 4, seed=5)
    r = ioattn.run_backward("flash", Q, K, V, dO, 120, scale=0.7)
    assert_gradients(r, Q, K, V, dO, scale=0.7)
    assert r.io == ioattn.io_cost("flash", 12, 4, 120, backward=True, scale=0.7)


def test_given_O_and_L_are_used():
    """O and L passed in are the ones read: the saved ones give the same gradients."""
    Q, K, V, dO = inputs(15, 4, seed=6)
    O, L = ioattn.saved_for_backward(Q, K, V)
    a = ioattn.run_backward("flash", Q, K, V, dO, 100)
    b = ioattn.run_backward("flash", Q, K, V, dO, 100, O=O, L=L)
    assert all(np.array_equal(x, y) for x, y in zip(a.output, b.output))
    c = ioattn.run_backward("flash", Q, K, V, dO, 100, O=O, L=L + 1.0)   # P scaled by 1/e
    assert relative_error(c.output[2], a.output[2] / np.e) <= 1e-12


@given(data=st.data(), N=st.integers(1, 40), d=st.integers(1, 12))
def test_count_equals_closed_form_on_drawn_sizes(data, N, d):
    lo = least_M(d)
    M = data.draw(st.integers(lo, lo + 50 * d * d), label="M")
    Q, K, V, dO = inputs(N, d, seed=N * d)
    r = ioattn.run_backward("flash", Q, K, V, dO, M)
    assert r.io == ioattn.io_cost("flash", N, d, M, backward=True)
    assert r.io.peak <= M
    if N > 1:
        assert_gradients(r, Q, K, V, dO)


@given(data=st.data(), N=st.integers(1, 30), d=st.integers(1, 8))
def test_block_option_count_on_drawn_blocks(data, N, d):
    B_r, B_c = data.draw(st.integers(1, 35), label="B_r"), data.draw(st.integers(1, 35), "B_c")
    M = least_M(d, block=(B_r, B_c)) + data.draw(st.integers(0, 20), label="slack")
    Q, K, V, dO = inputs(N, d, seed=N + d)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, block=(B_r, B_c))
    assert (r.plan.B_r, r.plan.B_c) == (B_r, B_c)
    assert r.io == ioattn.io_cost("flash", N, d, M, backward=True, block=(B_r, B_c))
    assert r.io.peak == footprint(N, d, B_r, B_c) <= M
    if N > 1:
        assert_gradients(r, Q, K, V, dO)


@pytest.mark.parametrize("d", [1, 2, 3, 8, 31, 64])
def test_smallest_M_is_exact(d):
    """Below the minimum: a clear error quoting it. From it on: the working set fits, every M."""
    lo = least_M(d)
    assert lo == 7 * d + 4
    with pytest.raises(ValueError, match=f"at least M = {lo} entries.*B_c = floor"):
        ioattn.plan("flash", 10 ** 6, d, lo - 1, backward=True)
    for M in range(lo, lo + 20 * d + 400):
        for N in (1, 2, 3, 10 ** 6):
            p = ioattn.plan("flash", N, d, M, backward=True)
            assert p.B_r >= 1 and p.B_c >= 1 and p.footprint <= M, (M, p)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_block_rule_by_brute_force(d):
    """Below 7d + 4 no block pair fits at all; from it on, B_c is the most K/V rows beside one
    query row, evened out over the same number of blocks, and B_r the most query rows beside it."""
    for M in range(1, 7 * d + 4):
        assert all(footprint(50, d, r, c) > M for r in range(1, 51) for c in range(1, 51))
    for N, M in itertools.product((7, 50), range(7 * d + 4, 7 * d + 4 + 30 * d * d + 200)):
        p = ioattn.plan("flash", N, d, M, backward=True)
        widest = 0
        while footprint(10 ** 6, d, 1, widest + 1) <= M:
            widest += 1
        T_c = ceil_div(N, widest)
        assert p.B_c == ceil_div(N, T_c) and ceil_div(N, p.B_c) == T_c
        assert p.B_r == max(r for r in range(1, N + 1) if footprint(N, d, r, p.B_c) <= M)
        # no block pair with fewer K/V blocks fits, so no pair moves less
        assert all(footprint(N, d, 1, c) > M for c in range(p.B_c + 1, N + 1)
                   if ceil_div(N, c) < T_c)


def test_runs_at_its_smallest_M():
    N, d = 9, 3
    M = least_M(d)
    Q, K, V, dO = inputs(N, d, seed=1)
    r = ioattn.run_backward("flash", Q, K, V, dO, M)
    assert (r.plan.B_r, r.plan.B_c) == (1, 1)
    assert r.io == ioattn.io_cost("flash", N, d, M, backward=True) and r.io.peak == M
    assert_gradients(r, Q, K, V, dO)


@pytest.mark.parametrize("options", [{}, {"block": (7, 9)}], ids=["rule", "block"])
def test_trace_adds_up_and_per_array_totals(options):
    N, d, M = 40, 4, 600
    Q, K, V, dO = inputs(N, d, seed=2)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, trace=True, **options)
    T_c = ceil_div(N, r.plan.B_c)
    assert T_c > 1
    assert sum(t.entries for t in r.trace if t.op == "read") == r.io.reads
    assert sum(t.entries for t in r.trace if t.op == "write") == r.io.writes
    per_array = {}
    for t in r.trace:
        per_array[t.op, t.array] = per_array.get((t.op, t.array), 0) + t.entries
    Nd = N * d
    assert per_array == {
        ("read", "O"): Nd, ("read", "dO"): Nd + T_c * Nd, ("write", "D"): N,
        ("read", "K"): Nd, ("read", "V"): Nd,
        ("read", "Q"): T_c * Nd, ("read", "L"): T_c * N, ("read", "D"): T_c * N,
        ("read", "dQ"): (T_c - 1) * Nd, ("write", "dQ"): T_c * Nd,
        ("write", "dK"): Nd, ("write", "dV"): Nd,
    }
    # D is complete before the first K/V block; dQ is never read before it is written
    first_K = next(k for k, t in enumerate(r.trace) if t.array == "K")
    assert all(t.array in ("O", "dO", "D") for t in r.trace[:first_K])
    written = set()
    for t in r.trace:
        if t.array == "dQ":
            if t.op == "read":
                assert t.rows in written
            written.add(t.rows)


def test_count_excludes_the_forward():
    """O and L are read, never written; no input is written; only D and the gradients are."""
    Q, K, V, dO = inputs(17, 3, seed=4)
    r = ioattn.run_backward("flash", Q, K, V, dO, 100, trace=True)
    assert {"O", "L"} <= {t.array for t in r.trace if t.op == "read"}
    assert {t.array for t in r.trace if t.op == "write"} == {"D", "dQ", "dK", "dV"}


def test_block_option_is_checked():
    p = ioattn.plan("flash", 100, 8, 2000, backward=True, block=(10, 20))
    assert (p.B_r, p.B_c) == (10, 20)
    Q, K, V, dO = inputs(30, 8)
    r = ioattn.run_backward("flash", Q, K, V, dO, 2000, block=(10, 20))
    assert r.io == ioattn.io_cost("flash", 30, 8, 2000, backward=True, block=(10, 20))
    assert_gradients(r, Q, K, V, dO)
    # 4*40*8 + 3*10*8 + 2*10 + 2*10*40 = 2340
    with pytest.raises(ValueError, match="at least M = 2340 entries.*10x40 block"):
        ioattn.plan("flash", 100, 8, 2000, backward=True, block=(10, 40))
    with pytest.raises(TypeError, match=r"block must be a pair \(B_r, B_c\), got 5"):
        ioattn.plan("flash", 100, 8, 2000, backward=True, block=5)
    with pytest.raises(ValueError, match="B_c must be at least 1"):
        ioattn.plan("flash", 100, 8, 2000, backward=True, block=(4, 0))
    with pytest.raises(TypeError, match="unknown option.*variant"):
        ioattn.io_cost("flash", 10, 2, 100, backward=True, variant="fa1")


def test_bad_input():
    Q, K, V, dO = inputs(6, 3)
    M = 100
    with pytest.raises(ValueError, match=r"K has shape \(5, 3\)"):
        ioattn.run_backward("flash", Q, K[:5], V, dO, M)
    with pytest.raises(ValueError, match=r"V has shape \(6, 2\)"):
        ioattn.run_backward("flash", Q, K, V[:, :2], dO, M)
    with pytest.raises(ValueError, match=r"dO has shape \(6, 4\)"):
        ioattn.run_backward("flash", Q, K, V, np.ones((6, 4)), M)
    with pytest.raises(ValueError, match=r"O has shape \(5, 3\)"):
        ioattn.run_backward("flash", Q, K, V, dO, M, O=np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"L must hold N = 6 .* shape \(5,\)"):
        ioattn.run_backward("flash", Q, K, V, dO, M, L=np.zeros(5))
    with pytest.raises(ValueError, match=r"L must hold N = 6 .* shape \(6, 1\)"):
        ioattn.run_backward("flash", Q, K, V, dO, M, L=np.zeros((6, 1)))
    bad_L = np.zeros(6)
    bad_L[2] = np.inf
    with pytest.raises(ValueError, match="L must hold N = 6 finite"):
        ioattn.run_backward("flash", Q, K, V, dO, M, L=bad_L)
    bad = dO.copy()
    bad[1, 1] = np.nan
    with pytest.raises(ValueError, match="dO has 1 non-finite"):
        ioattn.run_backward("flash", Q, K, V, bad, M)
    with pytest.raises(ValueError, match="O has 1 non-finite"):
        ioattn.run_backward("flash", Q, K, V, dO, M, O=bad)
    with pytest.raises(ValueError, match="at least M = 25 entries"):
        ioattn.run_backward("flash", Q, K, V, dO, 24)
    with pytest.raises(ValueError, match="scale must be"):
        ioattn.run_backward("flash", Q, K, V, dO, M, scale=-1.0)


# --- dq="atomic": FlashAttention-2's GPU schedule, dQ zeroed first and added into -----------

@given(data=st.data(), N=st.integers(1, 40), d=st.integers(1, 10))
def test_atomic_dq_count_equals_closed_form(data, N, d):
    """The run, its closed form, and the dense count plus N d reads and N d writes agree."""
    lo = least_M(d)
    M = data.draw(st.integers(lo, lo + 50 * d * d), label="M")
    Q, K, V, dO = inputs(N, d, seed=N * d + 1)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, dq="atomic")
    assert r.plan.dq == "atomic"
    assert r.io == ioattn.io_cost("flash", N, d, M, backward=True, dq="atomic")
    store = ioattn.io_cost("flash", N, d, M, backward=True)
    assert (r.io.reads, r.io.writes) == (store.reads + N * d, store.writes + N * d)
    reads, writes = expected(N, d, r.plan.T_c)
    assert (r.io.reads, r.io.writes) == (reads + N * d, writes + N * d)
    assert r.io.peak == store.peak <= M
    if N > 1:
        assert_gradients(r, Q, K, V, dO)


@given(data=st.data(), N=st.integers(2, 30), d=st.integers(1, 6))
def test_atomic_dq_count_under_masks(data, N, d):
    """Causal (the band closed form) and a drawn boolean mask (the block sums), each equal to
    the run and to the store schedule plus d times the rows of the active query blocks."""
    B_r, B_c = data.draw(st.integers(1, 12), label="B_r"), data.draw(st.integers(1, 12), "B_c")
    M = least_M(d, block=(B_r, B_c))
    Q, K, V, dO = inputs(N, d, seed=N + 7 * d)
    rng = np.random.default_rng(N * 31 + d)
    drawn = rng.random((N, N)) < data.draw(st.sampled_from([0.05, 0.3, 0.9]), label="density")
    for mask in (Mask.causal(N), drawn):
        kw = dict(block=(B_r, B_c), mask=mask)
        r = ioattn.run_backward("flash", Q, K, V, dO, M, dq="atomic", **kw)
        assert r.io == ioattn.io_cost("flash", N, d, M, backward=True, dq="atomic", **kw)
        store = ioattn.io_cost("flash", N, d, M, backward=True, **kw)
        blocks = r.plan.mask.blocks(B_r, B_c)
        active = int(blocks.rows[blocks.nonempty.any(axis=1)].sum())
        assert (r.io.reads, r.io.writes) == (store.reads + d * active, store.writes + d * active)


def test_atomic_dq_trace():
    """dQ is written once as zeros by the preprocess, then read and written once per visit."""
    N, d, M = 40, 4, 600
    Q, K, V, dO = inputs(N, d, seed=2)
    r = ioattn.run_backward("flash", Q, K, V, dO, M, trace=True, dq="atomic")
    T_c = r.plan.T_c
    assert T_c > 1
    per_array = {}
    for t in r.trace:
        per_array[t.op, t.array] = per_array.get((t.op, t.array), 0) + t.entries
    assert per_array["read", "dQ"] == T_c * N * d
    assert per_array["write", "dQ"] == (T_c + 1) * N * d
    first_K = next(k for k, t in enumerate(r.trace) if t.array == "K")
    assert {t.array for t in r.trace[:first_K]} == {"O", "dO", "D", "dQ"}
    assert_gradients(r, Q, K, V, dO)


def test_dq_option_is_checked():
    with pytest.raises(ValueError, match="dq must be one of 'store', 'atomic'"):
        ioattn.io_cost("flash", 10, 2, 100, backward=True, dq="atomics")
    with pytest.raises(ValueError, match="dq must be one of"):
        ioattn.min_M("flash", 2, backward=True, dq=None)
