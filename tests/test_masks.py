"""Masked (sparse) attention: the mask constructors and checks, every algorithm's outputs and
gradients against the float64 reference, the exact counts (``run(...).io == io_cost(...)``,
the peak within ``M``), rows with nothing to attend to, the saved row log-sum-exp, and the
causal mask halving the I/O."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ioattn
from ioattn import masks
from ioattn.algorithms.base import ceil_div
from ioattn.masks import Mask

from .conftest import (
    BACKWARD_IDS,
    BACKWARD_VARIANTS,
    VARIANT_IDS,
    VARIANTS,
    random_qkv,
    reference_attention,
    reference_backward,
    reference_softmax,
    relative_or_zero,
)


def least_M(name, d, options, backward=False):
    return ioattn.min_M(name, d, backward=backward, **options)


def inputs(N, d, seed=0, magnitude=1.0):
    Q, K, V = random_qkv(N, d, seed=seed, magnitude=magnitude)
    dO = np.random.default_rng(seed + 1000).standard_normal((N, d))
    return Q, K, V, dO


def random_mask(N, density, seed, empty_rows=()):
    mask = np.random.default_rng(seed).random((N, N)) < density
    mask[list(empty_rows)] = False
    return mask


def named_masks(N):
    """The masks every algorithm is checked with, at size N (N >= 6)."""
    return {
        "causal": masks.causal(N),
        "random": random_mask(N, 0.3, seed=N, empty_rows=(1, N - 2)),
        "block_sparse": masks.block_sparse(N, (4, 3), 0.4, seed=N),
        "window": masks.sliding_window(N, 3),
        "anti_causal": masks.causal(N).T.copy(),        # the last row attends to one key only
        "none_attend": np.zeros((N, N), dtype=bool),
        "all_attend": np.ones((N, N), dtype=bool),
    }


MASK_NAMES = list(named_masks(8))
# (N, d, M): odd N, N not a multiple of any block, M around d^2 and far above it.
SIZES = [(13, 3, 60), (37, 5, 200), (50, 7, 1000)]


# --------------------------------------------------------------------------- the constructors
def test_causal_and_sliding_window():
    c = masks.causal(5)
    assert c.dtype == bool and c.shape == (5, 5)
    assert all(c[i, j] == (j <= i) for i in range(5) for j in range(5))
    w = masks.sliding_window(6, 2)
    assert all(w[i, j] == (i - 2 < j <= i) for i in range(6) for j in range(6))
    assert np.array_equal(masks.sliding_window(6, 6), masks.causal(6))


def test_block_mask_and_from_blocks_are_inverse():
    blocks = np.array([[True, False, True], [False, False, True]])
    m = masks.from_blocks(blocks, (4, 3), 7)            # blocks cut to fit N = 7
    assert m.shape == (7, 7) and m.dtype == bool
    assert m[:4, :3].all() and not m[:4, 3:6].any() and m[:4, 6:].all() and not m[4:, :6].any()
    assert np.array_equal(masks.block_mask(m, 4, 3), blocks)
    # a block is nonempty when any entry is True
    assert np.array_equal(masks.block_mask(masks.causal(5), 2, 2),
                          [[True, False, False], [True, True, False], [True, True, True]])
    with pytest.raises(ValueError, match=r"blocks must be a boolean array of shape \(2, 3\)"):
        masks.from_blocks(blocks[:, :2], (4, 3), 7)


def test_block_sparse_density():
    m = masks.block_sparse(40, 5, 0.25, seed=3)
    assert masks.block_mask(m, 5, 5).sum() == 16          # 25% of 64 blocks
    assert np.array_equal(m, masks.block_sparse(40, 5, 0.25, seed=3))
    assert not masks.block_sparse(40, 5, 0.0).any() and masks.block_sparse(40, 5, 1.0).all()
    with pytest.raises(ValueError, match="density must lie in"):
        masks.block_sparse(40, 5, 1.5)
    for bad in ("0.5", None, True, [0.5]):           # not a number: a clear TypeError
        with pytest.raises(TypeError, match="density must be a number in"):
            masks.block_sparse(16, 4, density=bad)
        with pytest.raises(TypeError, match="density must be a number in"):
            Mask.block_sparse(16, 4, bad)
    with pytest.raises(ValueError, match="density must lie in"):
        masks.block_sparse(16, 4, float("nan"))
    assert np.array_equal(masks.block_sparse(16, 4, np.float32(0.5)),
                          masks.block_sparse(16, 4, 0.5))


@pytest.mark.parametrize("bad, message", [
    (np.ones((8, 8)), "mask must be a boolean array .* got dtype float64 .*astype"),
    (np.ones((8, 8), dtype=int), "got dtype int64"),
    (np.ones((8, 7), dtype=bool), r"mask must have shape \(N, N\) = \(8, 8\), got \(8, 7\)"),
    (np.ones(8, dtype=bool), r"got \(8,\)"),
    (np.ones((1, 8, 8), dtype=bool), r"got \(1, 8, 8\)"),
    ([[True, False], [True]], "mask must be a boolean N x N array"),
    ("causal", "got dtype <U6"),
])
def test_bad_masks_are_clear_errors(bad, message):
    Q, K, V, dO = inputs(8, 3)
    with pytest.raises(ValueError, match=message):
        masks.as_mask(bad, 8)
    with pytest.raises(ValueError, match=message):
        ioattn.run("flash", Q, K, V, 100, mask=bad)
    with pytest.raises(ValueError, match=message):
        ioattn.io_cost("square_tiling", 8, 3, 100, mask=bad)
    with pytest.raises(ValueError, match=message):
        ioattn.run_backward("flash", Q, K, V, dO, 100, mask=bad)


def test_mask_is_copied_compared_by_value_and_transposes():
    a = masks.causal(6).copy()
    m = Mask(a)
    a[0, 5] = True                                      # the caller's array is not the mask's
    assert not m.array[0, 5] and not m.array.flags.writeable
    assert Mask(a) != m and Mask(a).array[0, 5]         # and a changed array is read again
    assert m == Mask(masks.causal(6)) and hash(m) == hash(Mask(masks.causal(6)))
    assert m != Mask(np.ones((6, 6), bool)) and m.T.T is m
    assert np.array_equal(m.T.array, masks.causal(6).T)
    assert "21 of 36" in repr(m) and m.density == 21 / 36
    p = ioattn.plan("flash", 6, 2, 100, mask=masks.causal(6))
    assert p.mask == m and p == ioattn.plan("flash", 6, 2, 100, mask=m)
    assert ioattn.plan("flash", 6, 2, 100, mask=m).mask is m     # a Mask is kept, with its blocks


# ------------------------------------------------------------------- forward: every algorithm
@pytest.mark.parametrize("mask_name", MASK_NAMES)
@pytest.mark.parametrize("N, d, M", SIZES)
def test_forward_output_lse_and_exact_count(variant, N, d, M, mask_name):
    name, options = variant
    M = max(M, least_M(name, d, options))
    mask = named_masks(N)[mask_name]
    Q, K, V = random_qkv(N, d, seed=N + d)
    r = ioattn.run(name, Q, K, V, M, mask=mask, save_lse=True, **options)
    P, L = reference_softmax(Q, K, mask=mask)
    assert relative_or_zero(r.output, P @ V) <= 1e-12
    empty = ~mask.any(axis=1)
    assert np.array_equal(r.output[empty], np.zeros((empty.sum(), d)))
    assert np.array_equal(np.isposinf(r.lse), empty)
    scale = max(1.0, np.abs(L[~empty]).max(initial=1.0))
    assert np.abs(r.lse[~empty] - L[~empty]).max(initial=0) <= 1e-12 * scale
    assert r.io == ioattn.io_cost(name, N, d, M, mask=mask, save_lse=True, **options)
    assert r.io.peak <= r.plan.footprint <= M


@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_large_logits_with_masks(name, options):
    """Logits of magnitude 10^3 and more, a causal mask and empty rows: no overflow, no NaN."""
    N, d = 23, 6
    Q, K, V = random_qkv(N, d, seed=3, magnitude=30.0)
    mask = masks.causal(N).copy()                   # the constructors' arrays are read-only
    mask[[0, 9]] = False
    M = max(150, least_M(name, d, options))
    assert np.abs(Q @ K.T / np.sqrt(d)).max() > 1e3
    r = ioattn.run(name, Q, K, V, M, mask=mask, **options)
    assert np.isfinite(r.output).all()
    assert relative_or_zero(r.output, reference_attention(Q, K, V, mask=mask)) <= 1e-12


@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_all_true_mask_is_dense_attention(name, options):
    N, d, M = 29, 4, 150
    M = max(M, least_M(name, d, options))
    Q, K, V = random_qkv(N, d, seed=7)
    ones = np.ones((N, N), dtype=bool)
    for save_lse in (False, True):
        dense = ioattn.io_cost(name, N, d, M, save_lse=save_lse, **options)
        assert ioattn.io_cost(name, N, d, M, mask=ones, save_lse=save_lse, **options) == dense
    a = ioattn.run(name, Q, K, V, M, **options).output
    b = ioattn.run(name, Q, K, V, M, mask=ones, **options).output
    assert np.abs(a - b).max() <= 1e-14


def test_standard_moves_what_it_moves_without_a_mask():
    """Standard attention masks in the cache and skips nothing: its I/O ignores the mask."""
    for N, d, M in [(30, 4, 50), (30, 4, 1000)]:
        dense = ioattn.io_cost("standard", N, d, M)
        for mask in named_masks(N).values():
            assert ioattn.io_cost("standard", N, d, M, mask=mask) == dense
            assert ioattn.io_cost("standard", N, d, M, mask=mask, backward=True) == \
                ioattn.io_cost("standard", N, d, M, backward=True)


@settings(max_examples=12)
@given(data=st.data(), N=st.integers(1, 30), d=st.integers(1, 8),
       density=st.sampled_from([0.0, 0.05, 0.3, 0.9]))
@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_forward_count_on_drawn_masks(name, options, data, N, d, density):
    lo = least_M(name, d, options)
    M = data.draw(st.integers(lo, lo + 30 * d * d), label="M")
    seed = data.draw(st.integers(0, 10 ** 6), label="seed")
    mask = random_mask(N, density, seed)
    Q, K, V = random_qkv(N, d, seed=seed)
    save_lse = data.draw(st.booleans(), label="save_lse")
    r = ioattn.run(name, Q, K, V, M, mask=mask, save_lse=save_lse, **options)
    assert r.io == ioattn.io_cost(name, N, d, M, mask=mask, save_lse=save_lse, **options)
    assert r.io.peak <= M
    assert relative_or_zero(r.output, reference_attention(Q, K, V, mask=mask)) <= 1e-11


# ------------------------------------------------------------------ backward: every algorithm
@pytest.fixture(params=BACKWARD_VARIANTS, ids=BACKWARD_IDS)
def backward_variant(request):
    return request.param


def assert_gradients(out, Q, K, V, dO, mask, tol=1e-10):
    for got, want, label in zip(out, reference_backward(Q, K, V, dO, mask=mask),
                                ("dQ", "dK", "dV")):
        assert got.shape == want.shape and got.dtype == np.float64
        assert relative_or_zero(got, want) <= tol, label


@pytest.mark.parametrize("mask_name", MASK_NAMES)
@pytest.mark.parametrize("N, d, M", SIZES)
def test_backward_gradients_and_exact_count(backward_variant, N, d, M, mask_name):
    name, options = backward_variant
    M = max(M, least_M(name, d, options, backward=True))
    mask = named_masks(N)[mask_name]
    Q, K, V, dO = inputs(N, d, seed=N * d)
    r = ioattn.run_backward(name, Q, K, V, dO, M, mask=mask, **options)
    assert_gradients(r.output, Q, K, V, dO, mask)
    empty = ~mask.any(axis=1)
    assert np.array_equal(r.output[0][empty], np.zeros((empty.sum(), d)))   # dQ of empty rows
    assert r.io == ioattn.io_cost(name, N, d, M, backward=True, mask=mask, **options)
    assert r.io.peak <= r.plan.footprint <= M


@pytest.mark.parametrize("name, options", BACKWARD_VARIANTS, ids=BACKWARD_IDS)
def test_backward_large_logits_with_masks(name, options):
    """Every logit near 10^3 (exp alone would overflow), differences O(1) so the gradients are
    O(1), a block-sparse mask and an empty row: P comes from L, nothing overflows."""
    N, d = 23, 6
    Q, K, V, dO = inputs(N, d, seed=8)
    Q[:, 0] += 40.0
    K[:, 0] += 40.0
    assert (Q @ K.T / np.sqrt(d)).min() > 500
    mask = masks.block_sparse(N, 5, 0.5, seed=2) | np.eye(N, dtype=bool)
    mask[4] = False
    r = ioattn.run_backward(name, Q, K, V, dO, 150, mask=mask, **options)
    assert all(np.isfinite(g).all() for g in r.output)
    assert_gradients(r.output, Q, K, V, dO, mask)


@settings(max_examples=10)
@given(data=st.data(), N=st.integers(1, 25), d=st.integers(1, 7),
       density=st.sampled_from([0.0, 0.05, 0.3, 0.9]))
@pytest.mark.parametrize("name, options", BACKWARD_VARIANTS, ids=BACKWARD_IDS)
def test_backward_count_on_drawn_masks(name, options, data, N, d, density):
    lo = least_M(name, d, options, backward=True)
    M = data.draw(st.integers(lo, lo + 30 * d * d), label="M")
    seed = data.draw(st.integers(0, 10 ** 6), label="seed")
    mask = random_mask(N, density, seed)
    Q, K, V, dO = inputs(N, d, seed=seed)
    r = ioattn.run_backward(name, Q, K, V, dO, M, mask=mask, **options)
    assert r.io == ioattn.io_cost(name, N, d, M, backward=True, mask=mask, **options)
    assert r.io.peak <= M
    assert_gradients(r.output, Q, K, V, dO, mask)


@pytest.mark.parametrize("name, options", BACKWARD_VARIANTS, ids=BACKWARD_IDS)
def test_nothing_to_attend_to_anywhere(name, options):
    """An all-False mask: O = 0, L = +inf, zero gradients; flash reads nothing at all."""
    N, d = 9, 3
    Q, K, V, dO = inputs(N, d)
    none = np.zeros((N, N), dtype=bool)
    fwd = ioattn.run(name, Q, K, V, 100, mask=none, save_lse=True, **options)
    assert not fwd.output.any() and np.isposinf(fwd.lse).all()
    bwd = ioattn.run_backward(name, Q, K, V, dO, 100, mask=none, O=fwd.output, L=fwd.lse,
                              **options)
    assert not any(g.any() for g in bwd.output)
    if name == "flash":
        assert fwd.io.reads == 0 and bwd.io.reads == 0
        assert (fwd.io.writes, bwd.io.writes) == (N * d + N, 3 * N * d)


# ------------------------------------------------------------- block-sparse FlashAttention
@pytest.mark.parametrize("variant", ["fa2", "fa1"])
def test_flash_visits_only_nonempty_blocks(variant):
    """The trace: K_J and V_J are read only for the nonempty blocks of the flash plan's
    B_r x B_c grid, and (FA2) Q only for query blocks with one."""
    N, d, M = 45, 4, 300
    mask = random_mask(N, 0.02, seed=5)
    r = ioattn.run("flash", *random_qkv(N, d), M, mask=mask, variant=variant, trace=True)
    blocks = masks.block_mask(mask, r.plan.B_r, r.plan.B_c)
    assert 0 < blocks.sum() < blocks.size
    sizes = masks.block_sizes(N, r.plan.B_c)
    per = {}
    for t in r.trace:
        per[t.op, t.array] = per.get((t.op, t.array), 0) + t.entries
    if variant == "fa2":
        assert per["read", "K"] == per["read", "V"] == d * int(blocks.sum(axis=0) @ sizes)
        rows = masks.block_sizes(N, r.plan.B_r)
        assert per["read", "Q"] == d * int(rows[blocks.any(axis=1)].sum())
    else:
        assert per["read", "K"] == per["read", "V"] == d * int(sizes[blocks.any(axis=0)].sum())


def test_block_sparse_flash_is_proposition_4():
    """[FA] Proposition 4: with a fraction s of nonempty blocks, block-sparse FlashAttention moves
    N d (read Q) + N d (write O) + s times the dense K/V traffic, exactly, when the blocks of the
    mask are the algorithm's and divide N."""
    N, d, M = 96, 4, 400
    p = ioattn.plan("flash", N, d, M, block=(12, 8))
    T_r, T_c = N // 12, N // 8
    dense = ioattn.io_cost("flash", N, d, M, block=(12, 8))
    assert dense.reads == N * d + 2 * N * d * T_r
    for density in (0.1, 0.25, 0.5):
        mask = masks.block_sparse(N, (p.B_r, p.B_c), density, seed=1)
        blocks = masks.block_mask(mask, 12, 8)
        s = blocks.sum() / blocks.size
        assert s == round(density * T_r * T_c) / (T_r * T_c)
        c = ioattn.io_cost("flash", N, d, M, block=(12, 8), mask=mask)
        kv = 2 * N * d * T_r * s
        q = d * 12 * int(blocks.any(axis=1).sum())            # query blocks with a block
        assert c.reads == q + kv and c.writes == N * d


@pytest.mark.parametrize("name, options, backward", [
    ("flash", {}, False), ("flash", {"variant": "fa1"}, False), ("flash", {}, True),
    ("square_tiling", {}, False), ("square_tiling", {"schedule": "outer"}, False),
    ("square_tiling", {"schedule": "outer"}, True),
], ids=["flash-fa2", "flash-fa1", "flash-backward", "square_tiling-blocked",
        "square_tiling-outer", "square_tiling-outer-backward"])
def test_causal_mask_halves_the_io(name, options, backward):
    """At N = 4096, d = 64 the causal mask costs between 1/2 and 0.54 of the dense I/O, and the
    ratio falls toward 1/2 as N doubles. For FA2 it is about 1/2 + 1/(T_r + 1): the diagonal
    blocks are visited whole and Q, O move once whatever the mask."""
    d, M = 64, 16384
    ratios = []
    for N in (1024, 2048, 4096):
        causal = io_total(name, N, d, M, backward, options, masks.causal(N))
        ratios.append(causal / io_total(name, N, d, M, backward, options))
    assert ratios[0] > ratios[1] > ratios[2]
    assert 0.5 < ratios[2] < 0.54, ratios
    if name == "flash" and not backward and not options:
        T_r = ceil_div(4096, ioattn.plan("flash", 4096, d, M).B_r)
        assert abs(ratios[2] - (0.5 + 1 / (T_r + 1))) < 0.005


def io_total(name, N, d, M, backward, options, mask=None):
    return ioattn.io_cost(name, N, d, M, backward=backward, mask=mask, **options).total


# ------------------------------------------------------------------- the saved statistics
@pytest.mark.parametrize("name, options", VARIANTS, ids=VARIANT_IDS)
def test_save_lse_writes_N_more_entries(name, options):
    N, d = 31, 5
    M = max(200, least_M(name, d, options))
    Q, K, V = random_qkv(N, d, seed=11)
    plain = ioattn.run(name, Q, K, V, M, **options)
    saved = ioattn.run(name, Q, K, V, M, save_lse=True, trace=True, **options)
    assert plain.lse is None
    assert saved.io.reads == plain.io.reads and saved.io.writes == plain.io.writes + N
    assert saved.io.peak == plain.io.peak
    assert saved.io == ioattn.io_cost(name, N, d, M, save_lse=True, **options)
    assert sum(t.entries for t in saved.trace if t.array == "L" and t.op == "write") == N
    assert not any(t.array == "L" and t.op == "read" for t in saved.trace)
    assert np.array_equal(saved.output, plain.output)
    _, L = ioattn.saved_for_backward(Q, K, V)
    assert np.abs(saved.lse - L).max() <= 1e-12 * np.abs(L).max()


@pytest.mark.parametrize("name, options", BACKWARD_VARIANTS, ids=BACKWARD_IDS)
def test_forward_then_backward_counts_a_training_step(name, options):
    """The forward's O and L, written and counted with save_lse, are what the backward reads:
    the gradients are the reference's, and the step's I/O is the sum of the two counts."""
    N, d, M = 26, 4, 160
    Q, K, V, dO = inputs(N, d, seed=12)
    mask = masks.causal(N)
    fwd = ioattn.run(name, Q, K, V, M, mask=mask, save_lse=True, **options)
    bwd = ioattn.run_backward(name, Q, K, V, dO, M, mask=mask, O=fwd.output, L=fwd.lse,
                              **options)
    assert_gradients(bwd.output, Q, K, V, dO, mask)
    assert bwd.io == ioattn.io_cost(name, N, d, M, backward=True, mask=mask, **options)
    step = fwd.io.total + bwd.io.total
    assert step == ioattn.io_cost(name, N, d, M, mask=mask, save_lse=True, **options).total + \
        ioattn.io_cost(name, N, d, M, mask=mask, backward=True, **options).total


def test_saved_for_backward_with_a_mask():
    N, d = 10, 3
    Q, K, V = random_qkv(N, d)
    mask = masks.causal(N).copy()
    mask[3] = False
    O, L = ioattn.saved_for_backward(Q, K, V, mask=mask)
    P, L_ref = reference_softmax(Q, K, mask=mask)
    assert np.array_equal(np.isposinf(L), ~mask.any(axis=1)) and not O[3].any()
    np.testing.assert_allclose(O, P @ V, rtol=1e-13, atol=0)
    np.testing.assert_allclose(L, L_ref, rtol=1e-13)


def test_backward_checks_L_against_the_mask():
    N, d = 6, 3
    Q, K, V, dO = inputs(N, d)
    mask = masks.causal(N).copy()
    mask[2] = False
    O, L = ioattn.saved_for_backward(Q, K, V, mask=mask)
    assert np.isposinf(L[2])
    ioattn.run_backward("flash", Q, K, V, dO, 100, mask=mask, O=O, L=L)   # +inf on row 2: fine
    L_finite = L.copy()
    L_finite[2] = 0.0                     # any finite value on an empty row: P = 0 there anyway
    a = ioattn.run_backward("flash", Q, K, V, dO, 100, mask=mask, O=O, L=L_finite).output
    assert_gradients(a, Q, K, V, dO, mask)
    for row, value in [(0, np.inf), (2, -np.inf), (2, np.nan), (4, np.nan)]:
        bad = L.copy()
        bad[row] = value
        with pytest.raises(ValueError, match=f"only on a row the mask leaves empty.*row {row} "):
            ioattn.run_backward("flash", Q, K, V, dO, 100, mask=mask, O=O, L=bad)
    with pytest.raises(ValueError, match="L must hold N = 6 finite"):
        ioattn.run_backward("flash", Q, K, V, dO, 100, O=O, L=L)          # no mask: all finite


# ------------------------------------------------------- the structured causal mask is exact
def plain_causal(N):
    """The causal mask as a plain boolean-array ``Mask``: the generic, block-by-block path."""
    m = Mask(np.tri(N, dtype=bool), structured=False)
    assert m.triangle is None
    return m


def test_structured_causal_mask_equals_the_array_mask():
    """``Mask.causal(N)`` (index-arithmetic blocks, array on demand) and ``Mask(causal(N))``
    (recognised) have the blocks of the plain array mask at every block shape (dividing ``N`` or
    not), and so do their transposes; they are equal, hash alike, and agree everywhere else."""
    import itertools

    for N in (1, 2, 7, 64, 100, 257):
        plain = plain_causal(N)
        for fast in (Mask.causal(N), Mask(masks.causal(N))):
            assert fast.triangle == "lower" and fast.T.triangle == ("lower" if N == 1 else "upper")
            for b_r, b_c in itertools.product([1, 2, 3, 5, 16, 64, 300], [1, 3, 7, 16, 300]):
                for a, b in ((fast, plain), (fast.T, plain.T)):
                    got, want = a.blocks(b_r, b_c), b.blocks(b_r, b_c)
                    assert all(np.array_equal(x, y) for x, y in zip(got, want)), (N, b_r, b_c)
            assert fast == plain and fast.T == plain.T and fast.T.T is fast
            assert plain == fast and hash(fast) == hash(plain) and hash(fast.T) == hash(plain.T)
            assert np.array_equal(fast.array, plain.array) and not fast.array.flags.writeable
            assert np.array_equal(fast.T.array, plain.T.array)
            assert np.array_equal(fast.excluded, plain.excluded)
            assert np.array_equal(fast.attending, plain.attending)
            assert fast.density == pytest.approx(plain.density) and repr(fast) == repr(plain)
    assert Mask.causal(64) is Mask.causal(64) and Mask.causal(64) == Mask(masks.causal(64))
    assert Mask.causal(5, lower=False) == Mask(masks.causal(5).T) == Mask.causal(5).T
    assert Mask.causal(5) != Mask.causal(5).T and Mask.causal(5) != Mask.causal(6)
    assert Mask.causal(1, lower=False) == Mask.causal(1)
    assert Mask.causal(1 << 16).blocks(4096, 4096).nonempty.sum() == 16 * 17 // 2  # no N^2 array
    with pytest.raises(ValueError):
        Mask.causal(0)


def test_only_the_causal_mask_and_its_transpose_are_recognised():
    a = masks.causal(9)
    for other in [masks.sliding_window(9, 3), ~a, np.ones((9, 9), bool), np.zeros((9, 9), bool),
                  np.eye(9, dtype=bool), np.zeros((1, 1), bool), np.tri(9, k=-1, dtype=bool)]:
        assert Mask(other).triangle is None
    for i, j in [(0, 0), (8, 8), (8, 0), (4, 2), (2, 4), (0, 8)]:
        b = a.copy()
        b[i, j] = not b[i, j]
        assert Mask(b).triangle is None and Mask(b.T).triangle is None
        assert Mask(b) != Mask.causal(9) and Mask(b.T) != Mask.causal(9).T
    assert Mask(a.T).triangle == "upper" and Mask(np.ones((1, 1), bool)).triangle == "lower"


def _causal_costs_agree(name, N, d, M, backward, options):
    want = ioattn.io_cost(name, N, d, M, backward=backward, mask=plain_causal(N), **options)
    for mask in (Mask.causal(N), masks.causal(N)):
        got = ioattn.io_cost(name, N, d, M, backward=backward, mask=mask, **options)
        assert got == want, (name, options, N, d, M, backward)


@pytest.mark.parametrize("backward", [False, True])
def test_structured_causal_mask_costs_equal_the_array_mask(backward):
    """Every algorithm's ``io_cost`` under the structured causal mask (its closed forms) equals
    its cost under the plain boolean-array mask (the sums over blocks), field by field, on a grid
    and on drawn sizes with blocks that do not divide ``N``."""
    variants = BACKWARD_VARIANTS if backward else VARIANTS
    variants = variants + [("flash", {"block": b}) for b in ((1, 1), (3, 5), (16, 16))]
    checked = 0
    for N in (1, 5, 17, 64, 100, 129):
        for d in (1, 3, 8, 16):
            for name, opts in variants:
                lo = least_M(name, d, opts, backward)
                for M in sorted({lo, lo + 1, lo + 7, 2 * lo, 3 * lo + 5, max(lo, 10 * d * d),
                                 5000}):
                    _causal_costs_agree(name, N, d, M, backward, opts)
                    checked += 1
    assert checked > 500
    rng = np.random.default_rng(7)
    for _ in range(80):
        N, d = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        name, opts = variants[rng.integers(len(variants))]
        M = least_M(name, d, opts, backward) + int(rng.integers(0, 20 * d * d + 50))
        _causal_costs_agree(name, N, d, M, backward, opts)


def test_mask_flags_must_be_booleans():
    with pytest.raises(TypeError, match="lower must be True or False, got 'no'"):
        Mask.causal(8, lower="no")
    with pytest.raises(TypeError, match="lower must be True or False"):
        Mask.causal(8, lower=0)
    with pytest.raises(TypeError, match="structured must be True or False"):
        Mask(masks.causal(8), structured="no")
    assert Mask.causal(8, lower=np.bool_(False)) == Mask.causal(8).T


@settings(max_examples=300)
@given(N=st.integers(1, 60), b_r=st.integers(1, 70), b_c=st.integers(1, 70), data=st.data())
def test_band_sums_are_the_sums_over_the_blocks(N, b_r, b_c, data):
    """The closed forms of :func:`masks.band_sums` against the blocks of the plain array, for
    every band ``i - a <= j <= i + b`` (the causal mask, its transpose, windows, two-sided)."""
    a, b = data.draw(st.integers(0, N - 1)), data.draw(st.sampled_from([0, N - 1, N // 3]))
    i, j = np.ogrid[:N, :N]
    blocks = Mask((j >= i - a) & (j <= i + b), structured=False).blocks(b_r, b_c)
    act, r, c = blocks.nonempty, blocks.rows, blocks.cols
    want = (int(act.sum()), int(r @ act.sum(axis=1)), int(act.sum(axis=0) @ c), int(r @ act @ c))
    assert tuple(masks.band_sums(N, b_r, b_c, a, b)) == want


def test_bands_are_recognised_and_equal_their_arrays():
    """A band read from an array is recognised (a writable copy too), equals and hashes like the
    structured one, and the structured one's blocks, counts and array are the plain ones."""
    for N in (1, 2, 9, 40):
        i, j = np.ogrid[:N, :N]
        for a, b in {(N - 1, 0), (0, N - 1), (min(3, N - 1), 0), (0, min(3, N - 1)),
                     (min(2, N - 1), min(5, N - 1)), (0, 0)}:
            arr = (j >= i - a) & (j <= i + b)
            read = Mask(arr.copy())
            assert read.band == (a, b), (N, a, b)
            fast = Mask._of_rep(masks._band_rep(N, a, b))
            plain = Mask(arr, structured=False)
            assert plain.band is None and fast == read == plain and hash(fast) == hash(plain)
            assert np.array_equal(fast.array, arr) and fast.T == Mask(arr.T.copy())
            assert np.array_equal(fast._rep.row_counts(), arr.sum(axis=1))
            assert np.array_equal(fast._rep.col_counts(), arr.sum(axis=0))
            for shape in [(1, 1), (2, 3), (7, 4), (N, N)]:
                assert all(np.array_equal(x, y) for x, y in
                           zip(fast.blocks(*shape), plain.blocks(*shape)))
    assert Mask.sliding_window(10, 4).band == (3, 0) and Mask.sliding_window(10, 4).T.band == (0, 3)
    assert Mask(np.eye(5, dtype=bool)).band == (0, 0)
    assert Mask(masks.sliding_window(9, 3) | np.eye(9, k=2, dtype=bool)).band is None


@pytest.mark.parametrize("backward", [False, True])
def test_window_costs_equal_the_array_mask(backward):
    """Every algorithm's ``io_cost`` under a sliding window and its transpose (closed forms)
    equals its cost under the plain boolean-array mask (sums over blocks), on drawn sizes."""
    variants = BACKWARD_VARIANTS if backward else VARIANTS
    rng = np.random.default_rng(11)
    for _ in range(150):
        N, d = int(rng.integers(1, 120)), int(rng.integers(1, 12))
        w = int(rng.integers(1, N + 1))
        name, opts = variants[rng.integers(len(variants))]
        M = least_M(name, d, opts, backward) + int(rng.integers(0, 12 * d * d + 50))
        fast = Mask.sliding_window(N, w)
        for m in (fast, fast.T):
            plain = Mask(np.array(m.array), structured=False)
            assert ioattn.io_cost(name, N, d, M, backward=backward, mask=m, **opts) == \
                ioattn.io_cost(name, N, d, M, backward=backward, mask=plain, **opts), \
                (name, opts, N, d, M, w)


@given(n=st.integers(0, 200), m=st.integers(1, 10 ** 6), a=st.integers(0, 10 ** 6),
       b=st.integers(0, 10 ** 6))
def test_floor_sum_is_the_sum(n, m, a, b):
    assert masks.floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


def _peak_bytes(f):
    import tracemalloc

    tracemalloc.start()
    try:
        result = f()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_causal_costs_at_N_1e9_allocate_nothing_that_grows_with_N():
    """``Mask.causal(10**9)`` and every algorithm's exact cost under it, forward and backward,
    at small and large M, allocate a few KiB, and so do a sliding window and its transpose (an
    array of N entries would be 1 GB, of the blocks at B_r = 1 as many), and give Python ints;
    the causal FA2 count is also the sum over block rows written out in Python ints."""
    N, d = 10 ** 9, 64
    cases = [(b, name, opts) for b, variants in ((False, VARIANTS), (True, BACKWARD_VARIANTS))
             for name, opts in variants]

    def cost_all():
        mask = Mask.causal(N)
        out = []
        for backward, name, opts in cases:
            for M in (least_M(name, d, opts, backward), 5000, 10 ** 7):
                out.append(ioattn.io_cost(name, N, d, M, backward=backward, mask=mask, **opts))
        return out, mask

    (counts, mask), peak = _peak_bytes(cost_all)
    assert peak < 200_000, peak
    window = _peak_bytes(lambda: [ioattn.io_cost(name, N, d, M, backward=backward, mask=m, **opts)
                                  for m in (Mask.sliding_window(N, 4096),
                                            Mask.sliding_window(N, 4096).T)
                                  for backward, name, opts in cases for M in (5000, 10 ** 7)
                                  if M >= least_M(name, d, opts, backward)])[1]
    assert window < 200_000, window
    assert peak < 200_000, peak
    assert all(type(c.reads) is int and type(c.writes) is int for c in counts)
    assert mask.density == (N + 1) / (2 * N) and mask.T.triangle == "upper"
    assert mask == Mask.causal(N) and hash(mask) == hash(Mask.causal(N))
    # FA2 at M = 10^7: N d reads of Q, and K_J, V_J read once for every block row reaching J
    p = ioattn.plan("flash", N, d, 10 ** 7)
    widths = 0
    for i0 in range(0, N, p.B_r):
        last_query = min(i0 + p.B_r, N) - 1
        widths += min((last_query // p.B_c + 1) * p.B_c, N)     # the keys it reads
    assert ioattn.io_cost("flash", N, d, 10 ** 7, mask=mask).reads == N * d + 2 * d * widths
