"""Rectangular attention: ``N_q`` query rows against ``N_k`` keys (decoding, chunked prefill).

Every variant, run through the memory model with ``Q`` and ``K, V`` of different lengths, is
accurate and counted exactly as ``io_cost(..., N_k=)`` says, dense and under the causal mask of
a chunk at the end of a cache; the block rule of a decoding step gives the cache to ``K, V``.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ioattn
from ioattn.algorithms.base import ceil_div
from ioattn.masks import RectMask, causal, causal_chunk

from ..conftest import VARIANTS, least_M, reference_attention, relative_error

N_QS = (1, 2, 7, 64)
N_KS = (1, 5, 64, 300)
# (d, M): d = 1 at a tiny cache, d not a power of two, M about d^2 and well above it
D_MS = [(1, 40), (3, 64), (5, 200), (8, 1000)]


def _qkv(N_q, N_k, d, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((N_q, d)), rng.standard_normal((N_k, d)),
            rng.standard_normal((N_k, d)))


@pytest.mark.parametrize("N_q, N_k", list(itertools.product(N_QS, N_KS)))
def test_counted_equals_closed_form(variant, N_q, N_k):
    name, options = variant
    for d, M in D_MS:
        M = max(M, least_M(name, d, options))
        Q, K, V = _qkv(N_q, N_k, d, seed=N_q * 1000 + N_k + d)
        r = ioattn.run(name, Q, K, V, M, **options)
        assert r.output.shape == (N_q, d)
        assert relative_error(r.output, reference_attention(Q, K, V)) <= 1e-12
        assert r.io == ioattn.io_cost(name, N_q, d, M, N_k=N_k, **options)
        assert r.io.peak <= M
        assert r.plan.N == N_q and r.plan.N_k == N_k


@pytest.mark.parametrize("N_q, N_k", [(q, k) for q, k in itertools.product(N_QS, N_KS)
                                      if q <= k])
def test_causal_chunk_counted_equals_closed_form(variant, N_q, N_k):
    name, options = variant
    mask = causal_chunk(N_q, N_k)
    for d, M in D_MS:
        M = max(M, least_M(name, d, options))
        Q, K, V = _qkv(N_q, N_k, d, seed=N_q + N_k + d)
        r = ioattn.run(name, Q, K, V, M, mask=mask, save_lse=True, **options)
        assert relative_error(r.output, reference_attention(Q, K, V, mask=mask)) <= 1e-12
        assert r.io == ioattn.io_cost(name, N_q, d, M, N_k=N_k, mask=mask, save_lse=True,
                                      **options)
        assert r.io.peak <= M


def test_causal_chunk_skips_blocks():
    # a chunk of 64 queries at the end of 300 keys: flash skips the blocks past the diagonal
    dense = ioattn.io_cost("flash", 64, 8, 400, N_k=300)
    chunk = ioattn.io_cost("flash", 64, 8, 400, N_k=300, mask=causal_chunk(64, 300))
    assert chunk.total < dense.total
    # standard attention moves the same with or without a mask
    assert ioattn.io_cost("standard", 64, 8, 400, N_k=300, mask=causal_chunk(64, 300)) == \
        ioattn.io_cost("standard", 64, 8, 400, N_k=300)


def test_square_case_is_unchanged(variant):
    name, options = variant
    M = max(300, least_M(name, 4, options))
    square = ioattn.plan(name, 37, 4, M, **options)
    assert square.N_k == 37
    assert ioattn.plan(name, 37, 4, M, N_k=37, **options) == square
    assert ioattn.io_cost(name, 37, 4, M, N_k=37, **options) == \
        ioattn.io_cost(name, 37, 4, M, **options)


def test_fa2_closed_form():
    for N_q, N_k, d, M in itertools.product(N_QS, N_KS, (1, 8, 64), (300, 4096, 2 ** 16)):
        if M < ioattn.min_M("flash", d):
            continue
        p = ioattn.plan("flash", N_q, d, M, N_k=N_k)
        io = ioattn.io_cost("flash", N_q, d, M, N_k=N_k)
        assert io.reads == N_q * d + 2 * N_k * d * ceil_div(N_q, p.B_r)
        assert io.writes == N_q * d
        assert p.B_r <= N_q and p.B_c <= N_k


def test_fa2_causal_chunk_closed_form():
    for N_q, N_k, d, M in itertools.product(N_QS, N_KS, (1, 8, 64), (300, 4096, 2 ** 16)):
        if N_q > N_k or M < ioattn.min_M("flash", d):
            continue
        p = ioattn.plan("flash", N_q, d, M, N_k=N_k)
        seen = sum(min(N_k, p.B_c * ceil_div(N_k - N_q + min((I + 1) * p.B_r, N_q), p.B_c))
                   for I in range(ceil_div(N_q, p.B_r)))
        io = ioattn.io_cost("flash", N_q, d, M, N_k=N_k, mask=causal_chunk(N_q, N_k))
        assert (io.reads, io.writes) == (N_q * d + 2 * d * seen, N_q * d)


@pytest.mark.parametrize("d, M", [(128, 2 ** 16), (64, 4096), (16, 300), (1, 20)])
def test_decoding_step_gives_the_cache_to_kv_blocks(d, M):
    N_k = 8192
    p = ioattn.plan("flash", 1, d, M, N_k=N_k)
    assert p.B_r == 1
    assert p.B_c == min(N_k, (M - 2 * d - 3) // (2 * d + 1))
    # the K_j, V_j blocks take all but the one query row: no room for one more key is left
    assert p.footprint <= M < p.footprint + 2 * d + 1
    # a plan made as if N_q were N_k would hold a query block of rows that do not exist
    assert p.B_c > ioattn.plan("flash", N_k, d, M).B_c
    # and the cache is read once: the trivial bound
    assert ioattn.io_cost("flash", 1, d, M, N_k=N_k).total == \
        ioattn.bounds.trivial_lower(1, d, N_k=N_k)


def test_few_queries_read_the_cache_once():
    d, M, N_k = 128, 2 ** 16, 8192
    for N_q in (1, 2, 7, 64):            # speculative decoding, a chunk of a prefill
        assert ioattn.plan("flash", N_q, d, M, N_k=N_k).B_r == N_q
        assert ioattn.io_cost("flash", N_q, d, M, N_k=N_k).total == \
            2 * N_q * d + 2 * N_k * d


def test_totals_rectangular(variant):
    name, options = variant
    Ms = np.arange(least_M(name, 4, options), 600)
    for mask in (None, causal_chunk(7, 300)):
        got = ioattn.totals(name, 7, 4, Ms, N_k=300, mask=mask, **options)
        assert [int(x) for x in got] == [
            ioattn.io_cost(name, 7, 4, int(M), N_k=300, mask=mask, **options).total
            for M in Ms]


def test_causal_chunk_mask():
    assert causal_chunk(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert causal_chunk(1, 5).all()
    assert np.array_equal(causal_chunk(6, 6), causal(6))
    assert np.array_equal(causal_chunk(3, 9), causal(9)[6:])
    assert not causal_chunk(3, 9).flags.writeable
    with pytest.raises(ValueError, match="N_q = 4 > N_k = 3"):
        causal_chunk(4, 3)
    with pytest.raises(ValueError, match="N_k must be at least 1"):
        causal_chunk(1, 0)


def test_rect_mask_blocks_match_brute_force():
    rng = np.random.default_rng(3)
    for N_q, N_k, b_r, b_c in [(7, 30, 2, 4), (1, 300, 1, 64), (64, 5, 9, 2), (5, 64, 8, 100)]:
        arr = rng.random((N_q, N_k)) < 0.3
        blocks = RectMask(arr).blocks(b_r, b_c)
        for I, J in itertools.product(range(ceil_div(N_q, b_r)), range(ceil_div(N_k, b_c))):
            tile = arr[I * b_r:(I + 1) * b_r, J * b_c:(J + 1) * b_c]
            assert blocks.nonempty[I, J] == tile.any() and blocks.full[I, J] == tile.all()
        assert blocks.rows.sum() == N_q and blocks.cols.sum() == N_k


def test_random_rectangular_masks_counted_equals_closed_form(variant):
    name, options = variant
    rng = np.random.default_rng(7)
    for N_q, N_k, d, M in [(7, 64, 3, 100), (2, 300, 5, 400), (64, 5, 4, 200)]:
        M = max(M, least_M(name, d, options))
        mask = rng.random((N_q, N_k)) < 0.4
        mask[0] = False                              # a row with nothing to attend to
        Q, K, V = _qkv(N_q, N_k, d, seed=d)
        r = ioattn.run(name, Q, K, V, M, mask=mask, **options)
        assert relative_error(r.output, reference_attention(Q, K, V, mask=mask)) <= 1e-12
        assert not r.output[0].any()
        assert r.io == ioattn.io_cost(name, N_q, d, M, N_k=N_k, mask=mask, **options)


# ----------------------------------------------------------------------------- errors
Q, K, V = _qkv(3, 10, 4, seed=0)


@pytest.mark.parametrize("args, message", [
    ((Q, K[:, :3], V[:, :3]), r"K has shape \(10, 3\) but Q has shape \(3, 4\): .* head "
                              "dimension d"),
    ((Q, K, V[:7]), r"V has shape \(7, 4\) but K has shape \(10, 4\): K and V must both be "
                    "N_k x d"),
    ((Q, K, V[:, :2]), r"V has shape \(10, 2\) but K has shape \(10, 4\)"),
])
def test_bad_shapes(args, message):
    with pytest.raises(ValueError, match=message):
        ioattn.run("flash", *args, 100)


@pytest.mark.parametrize("mask, message", [
    (np.ones((10, 3), dtype=bool), r"mask must have shape \(N_q, N_k\) = \(3, 10\), got "
                                   r"\(10, 3\)"),
    (np.ones((3, 3), dtype=bool), r"mask must have shape \(N_q, N_k\) = \(3, 10\)"),
    (np.ones((3, 10)), "mask must be a boolean array"),
    (ioattn.masks.Mask.causal(3), r"mask must have shape \(N_q, N_k\) = \(3, 10\), got "
                                  r"\(3, 3\)"),
    (RectMask(causal_chunk(2, 10)), r"mask must have shape \(N_q, N_k\) = \(3, 10\)"),
])
def test_bad_mask_shape(mask, message):
    with pytest.raises(ValueError, match=message):
        ioattn.run("flash", Q, K, V, 100, mask=mask)
    with pytest.raises(ValueError, match=message):
        ioattn.io_cost("square_tiling", 3, 4, 100, N_k=10, mask=mask)


def test_rect_mask_refused_for_square_problem():
    with pytest.raises(ValueError, match=r"mask must have shape \(N, N\) = \(3, 3\)"):
        ioattn.io_cost("flash", 3, 4, 100, mask=RectMask(causal_chunk(2, 10)))


@pytest.mark.parametrize("N_k, error, message", [
    (0, ValueError, "N_k must be at least 1, got 0"),
    (-3, ValueError, "N_k must be at least 1"),
    (2.0, TypeError, "N_k must be an integer"),
    (True, TypeError, "N_k must be an integer"),
])
def test_bad_N_k(N_k, error, message):
    for call in (ioattn.io_cost, ioattn.plan):
        with pytest.raises(error, match=message):
            call("flash", 3, 4, 100, N_k=N_k)
    with pytest.raises(error, match=message):
        ioattn.totals("flash", 3, 4, [100, 200], N_k=N_k)


def test_backward_is_rectangular_for_flash_only():
    # the flash backward takes N_k (tests/algorithms/test_backward_rectangular.py); the others
    # run square problems only and say which backward takes N_k
    assert ioattn.run_backward("flash", Q, K, V, np.ones_like(Q), 1000).io == \
        ioattn.io_cost("flash", 3, 4, 1000, N_k=10, backward=True)
    for name in ("standard", "square_tiling"):
        with pytest.raises(TypeError, match=f"the '{name}' backward pass takes as many keys as "
                                            "queries .* take N_k .*: 'flash'"):
            ioattn.io_cost(name, 3, 4, 1000, N_k=10, backward=True)
        with pytest.raises(TypeError, match=f"the '{name}' backward pass takes as many keys"):
            ioattn.run_backward(name, Q, K, V, np.ones_like(Q), 1000)


def test_decoding_step_tiles_of_the_products():
    # the products' tiles are chosen for the (1, d) @ (d, N_k) shape: one row, wide columns
    d, M, N_k = 128, 2 ** 16, 8192
    for p in (ioattn.plan("square_tiling", 1, d, M, N_k=N_k, schedule="outer").phase1,
              ioattn.plan("standard", 1, d, M, N_k=N_k).scores):
        assert (p.b_r, p.b_c) == (1, N_k)
    s = ioattn.plan("standard", 1, d, M, N_k=N_k)
    assert (s.R, s.W, s.passes) == (1, N_k, 1)           # the one row of S read whole, once


@given(N_q=st.integers(1, 40), N_k=st.integers(1, 90), d=st.integers(1, 9),
       M=st.integers(3, 3000), which=st.integers(0, len(VARIANTS) - 1),
       chunk=st.booleans())
def test_drawn_sizes_counted_equals_closed_form(N_q, N_k, d, M, which, chunk):
    name, options = VARIANTS[which]
    M = max(M, least_M(name, d, options))
    mask = causal_chunk(N_q, N_k) if chunk and N_q <= N_k else None
    Q, K, V = _qkv(N_q, N_k, d, seed=M)
    r = ioattn.run(name, Q, K, V, M, mask=mask, **options)
    assert relative_error(r.output, reference_attention(Q, K, V, mask=mask)) <= 1e-12
    assert r.io == ioattn.io_cost(name, N_q, d, M, N_k=N_k, mask=mask, **options)
