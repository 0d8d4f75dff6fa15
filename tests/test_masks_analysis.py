"""How a mask array is read (:mod:`ioattn.masks`, "How an array is read"): every description of a
mask (runs, grid, bits, transposed) has the blocks of the array at every block shape, checked
exhaustively for small ``N`` against a plain reduction over the array and on drawn masks at larger
``N``; the analysis picks the description by the entries; costs with an array, a structured mask
and the generic path agree; an array is read once per call (and never again while it is
read-only); a writable array that changes is read again; the memory a cost takes is far below the
array's; bad masks are clear errors."""

import gc
import itertools
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ioattn
from ioattn import bounds, masks
from ioattn.masks import Mask, _Bits, _Grid, _Runs, _Transposed

from .conftest import BACKWARD_VARIANTS, VARIANTS, random_qkv


def reference_blocks(a, b_r, b_c):
    """``(nonempty, full)`` by reducing the array itself."""
    N = a.shape[0]
    rows, cols = np.arange(0, N, b_r), np.arange(0, N, b_c)
    nonempty = np.logical_or.reduceat(np.logical_or.reduceat(a, rows, 0), cols, 1)
    full = np.logical_and.reduceat(np.logical_and.reduceat(a, rows, 0), cols, 1)
    return nonempty, full


def descriptions(a):
    """Every description of the array ``a``: the analysis's own choice and each kind made to
    hold it (some far past the size at which the analysis would choose it). Returns them and
    the read-only copy the ``bits-array`` one refers to (keep it alive)."""
    N = a.shape[0]
    scan = masks._scan(a, N * N)
    frozen = a.copy()
    frozen.flags.writeable = False
    aT = np.ascontiguousarray(a.T)
    scan_T = masks._scan(aT, N * N)
    reps = {
        "analysed": masks._analyse(a, False),
        "runs": _Runs(N, *scan.runs),
        "grid": masks._grid_of_scan(a, scan),
        "bits": _Bits.of(a, False),
        "bits-array": _Bits.of(frozen, True),
        "transposed-runs": _Transposed(_Runs(N, *scan_T.runs)),
        "transposed-grid": masks._grid_of_scan(aT, scan_T).transposed(),
        "transposed-bits": _Transposed(_Bits.of(aT, False)),
    }
    return reps, frozen


def interval_mask(N, rng, monotone, empty=0.2):
    """Each row one run ``[lo, hi)`` (or none): non-decreasing ends when ``monotone``."""
    lo = rng.integers(0, N, size=N)
    hi = lo + 1 + rng.integers(0, N, size=N)
    if monotone:
        lo, hi = np.sort(lo), np.sort(hi)
    hi = np.minimum(hi, N)
    j = np.arange(N)
    a = (j[None, :] >= lo[:, None]) & (j[None, :] < hi[:, None])
    a[rng.random(N) < empty] = False
    return a


def family(N, seed=0):
    """The masks checked at size ``N``: causal, its transpose, sliding windows of every ``w``,
    two-sided bands, intervals (monotone or not, with empty rows), block-sparse masks at
    several tile shapes, causal with global keys, random masks, empty, full."""
    rng = np.random.default_rng(seed + 1000 * N)
    i, j = np.ogrid[:N, :N]
    out = {"causal": np.tri(N, dtype=bool), "anti-causal": np.tri(N, dtype=bool).T.copy(),
           "empty": np.zeros((N, N), bool), "full": np.ones((N, N), bool),
           "global keys": (j <= i) | (j < 2)}
    for w in range(1, N + 1):
        out[f"window {w}"] = (j <= i) & (j > i - w)
    for w in (1, 2, N // 3 + 1):
        out[f"band {w}"] = np.abs(i - j) < w
    for k in range(3):
        out[f"interval {k}"] = interval_mask(N, rng, monotone=False)
        out[f"monotone interval {k}"] = interval_mask(N, rng, monotone=True)
    for b_r, b_c in [(1, 1), (2, 3), (3, 2), (4, 4), (N // 2 + 1, 2)]:
        T_r, T_c = -(-N // b_r), -(-N // b_c)
        blocks = rng.random((T_r, T_c)) < 0.4
        out[f"blocks {b_r}x{b_c}"] = np.repeat(np.repeat(blocks, b_r, 0), b_c, 1)[:N, :N]
    for density in (0.1, 0.5, 0.9):
        out[f"random {density}"] = rng.random((N, N)) < density
    return out


def assert_description(rep, a, label):
    N = a.shape[0]
    assert np.array_equal(np.asarray(rep.to_array()), a), label
    assert np.array_equal(rep.row_counts(), a.sum(axis=1)), label
    assert np.array_equal(rep.col_counts(), a.sum(axis=0)), label
    for b_r, b_c in itertools.product(range(1, N + 1), repeat=2):
        got = rep.blocks(b_r, b_c)
        nonempty, full = reference_blocks(a, b_r, b_c)
        assert np.array_equal(got.nonempty, nonempty), (label, b_r, b_c)
        assert np.array_equal(got.full, full), (label, b_r, b_c)
        assert np.array_equal(got.rows, masks.block_sizes(N, b_r))
        assert np.array_equal(got.cols, masks.block_sizes(N, b_c))


@pytest.fixture(params=["pieces", "tiny pieces"])
def pieces(request, monkeypatch):
    """The passes and block computations in their usual pieces, and in pieces of a few entries
    (so that every boundary between pieces is crossed at small ``N``)."""
    if request.param == "tiny pieces":
        _tiny_pieces(monkeypatch)
    return request.param


def _tiny_pieces(monkeypatch):
    monkeypatch.setattr(masks, "_CHUNK", 7)
    monkeypatch.setattr(masks, "_COUNTS", 3)


# ------------------------------------------------------------------------ blocks, exhaustively
@pytest.mark.parametrize("N, tiny", [(N, False) for N in range(1, 13)]
                         + [(N, True) for N in (2, 7, 12)])
def test_every_description_has_the_blocks_of_the_array(N, tiny, monkeypatch):
    """For every mask of :func:`family` and every description of it, the nonempty and full
    blocks at every block shape ``b_r, b_c`` in ``1..N`` are the array's, and so are the array
    rebuilt from the description and its row and column counts (also with the passes in tiny
    pieces)."""
    if tiny:
        _tiny_pieces(monkeypatch)
    for label, a in family(N).items():
        reps, _frozen = descriptions(a)
        for kind, rep in reps.items():
            assert_description(rep, a, (label, kind))


@pytest.mark.parametrize("N", range(13, 25))
def test_the_analysis_has_the_blocks_of_the_array(N, pieces):
    """The same for the description the analysis chooses, up to N = 24."""
    for label, a in family(N).items():
        assert_description(masks._analyse(a, False), a, label)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), N=st.integers(25, 300),
       kind=st.sampled_from(["window", "interval", "monotone", "blocks", "random", "global"]))
def test_drawn_masks_at_larger_N(data, N, kind):
    """Drawn masks and block shapes at larger ``N``: the analysed description's blocks (and
    each forced description's) are the array's."""
    seed = data.draw(st.integers(0, 10 ** 6), label="seed")
    rng = np.random.default_rng(seed)
    i, j = np.ogrid[:N, :N]
    if kind == "window":
        a = (j <= i) & (j > i - int(rng.integers(1, N + 1)))
    elif kind in ("interval", "monotone"):
        a = interval_mask(N, rng, monotone=kind == "monotone")
    elif kind == "blocks":
        b_r, b_c = (int(x) for x in rng.integers(1, 40, size=2))
        blocks = rng.random((-(-N // b_r), -(-N // b_c))) < rng.random()
        a = np.repeat(np.repeat(blocks, b_r, 0), b_c, 1)[:N, :N]
    elif kind == "global":
        a = (j <= i) | (j < int(rng.integers(1, 5)))
    else:
        a = rng.random((N, N)) < rng.random()
    reps, _frozen = descriptions(a)
    for _ in range(4):
        b_r = data.draw(st.integers(1, N + 3), label="b_r")
        b_c = data.draw(st.integers(1, N + 3), label="b_c")
        nonempty, full = reference_blocks(a, b_r, b_c)
        for name, rep in reps.items():
            got = rep.blocks(b_r, b_c)
            assert np.array_equal(got.nonempty, nonempty), (name, b_r, b_c)
            assert np.array_equal(got.full, full), (name, b_r, b_c)


# ------------------------------------------------------------------- which description is kept
def test_the_analysis_recognises_the_structure():
    """At N = 256: the causal mask and its transpose are triangles (closed forms), windows,
    bands and causal-with-global-keys are runs, block-sparse masks a grid, random masks bits;
    read-only arrays are kept as they are, writable ones packed."""
    N = 256
    i, j = np.ogrid[:N, :N]
    rng = np.random.default_rng(0)
    tri = np.tri(N, dtype=bool)
    cases = {
        "causal": (tri, _Runs, "lower"), "anti-causal": (tri.T.copy(), _Runs, "upper"),
        "transposed view": (tri.T, _Runs, "upper"),
        "window": ((j <= i) & (j > i - 16), _Runs, None),
        "band": (np.abs(i - j) < 5, _Runs, None),
        "global keys": ((j <= i) | (j < 4), _Runs, None),
        "block-sparse": (np.array(masks.block_sparse(N, 16, 0.3, seed=1)), _Grid, None),
        "random": (rng.random((N, N)) < 0.3, _Bits, None),
        "empty": (np.zeros((N, N), bool), _Runs, None),
        "full": (np.ones((N, N), bool), _Runs, None),
    }
    for label, (a, kind, triangle) in cases.items():
        m = Mask(a)
        assert type(m._rep) is kind and m.triangle == triangle, label
    assert Mask(rng.random((N, N)) < 0.3)._rep.packed is not None
    frozen = rng.random((N, N)) < 0.3
    frozen.flags.writeable = False
    m = Mask(frozen)
    assert m._rep.packed is None and m.array is frozen          # no copy


def test_structured_constructors_equal_the_analysed_arrays(pieces):
    """``Mask.sliding_window``, ``Mask.from_blocks`` and ``Mask.block_sparse`` (no ``N x N``
    array) equal ``Mask`` of the arrays (and of writable copies, read by the analysis), with the
    same kind of description and the same blocks; the arrays are the plain formulas."""
    rng = np.random.default_rng(3)
    for N in (1, 2, 5, 17, 64):
        i, j = np.ogrid[:N, :N]
        for w in sorted({1, 2, N // 2 + 1, N, N + 3}):
            fast, arr = Mask.sliding_window(N, w), masks.sliding_window(N, w)
            assert np.array_equal(arr, (j <= i) & (j > i - w))
            slow = Mask(arr.copy())
            assert fast == slow == Mask(arr) and hash(fast) == hash(slow)
            assert type(fast._rep) is type(slow._rep) and fast.triangle == slow.triangle
        for b_r, b_c in [(1, 1), (2, 3), (4, 4), (N, 1), (7, 5)]:
            T_r, T_c = -(-N // b_r), -(-N // b_c)
            for density in (0.0, 0.3, 1.0):
                blocks = rng.random((T_r, T_c)) < density
                want = np.repeat(np.repeat(blocks, b_r, 0), b_c, 1)[:N, :N]
                fast, arr = Mask.from_blocks(blocks, (b_r, b_c), N), masks.from_blocks(
                    blocks, (b_r, b_c), N)
                assert np.array_equal(arr, want)
                slow = Mask(want.copy())
                assert fast == slow and hash(fast) == hash(slow)
                assert type(fast._rep) is type(slow._rep), (N, b_r, b_c)
                assert fast._rep.same(slow._rep), (N, b_r, b_c)
                for shape in [(1, 1), (b_r, b_c), (3, 2), (N, N)]:
                    assert all(np.array_equal(x, y) for x, y in
                               zip(fast.blocks(*shape), reference_blocks(want, *shape)))
    assert Mask.block_sparse(40, 5, 0.25, seed=3) == Mask(masks.block_sparse(40, 5, 0.25, seed=3))
    with pytest.raises(ValueError, match=r"blocks must be a boolean array of shape \(2, 3\)"):
        Mask.from_blocks(np.ones((2, 2), bool), (4, 3), 7)
    with pytest.raises(ValueError, match="w must be at least 1"):
        Mask.sliding_window(5, 0)
    with pytest.raises(ValueError, match="density must lie in"):
        Mask.block_sparse(8, 2, -0.5)


def test_a_grid_past_the_budgets_is_kept_as_bits(monkeypatch):
    """With the budgets at their least, ``Mask.from_blocks`` keeps what the analysis keeps: a
    checkerboard becomes bits, and still has the right entries and blocks."""
    monkeypatch.setattr(masks, "_grid_budget", lambda N: 0)
    monkeypatch.setattr(masks, "_runs_budget", lambda N: N)
    N = 12
    board = (np.add.outer(np.arange(4), np.arange(4)) % 2).astype(bool)
    m = Mask.from_blocks(board, 3, N)
    want = np.repeat(np.repeat(board, 3, 0), 3, 1)
    assert type(m._rep) is _Bits and type(Mask(want)._rep) is _Bits
    assert_description(m._rep, want, "checkerboard")
    assert m == Mask(want)


# ---------------------------------------------------------------- equality, hashing, transpose
def test_equal_masks_are_equal_whatever_their_description(pieces):
    """Masks are equal (and hash alike) exactly when their entries are, across every pair of
    descriptions; one entry changed makes them differ."""
    rng = np.random.default_rng(5)
    for N in (1, 3, 9):
        for label, a in family(N).items():
            reps, _frozen = descriptions(a)
            ms = [Mask._of_rep(r) for r in reps.values()] + [Mask(a), Mask(a, structured=False)]
            for x, y in itertools.product(ms, repeat=2):
                assert x == y and hash(x) == hash(y), label
            b = a.copy()
            b[tuple(rng.integers(0, N, size=2))] ^= True
            others, _frozen_b = descriptions(b)
            for x, y in itertools.product(ms, others.values()):
                assert x != Mask._of_rep(y), label


def test_transposes():
    """``m.T`` has the transposed entries and blocks, ``m.T.T is m``, and a transposed array
    gives the same mask."""
    for N in (1, 4, 11):
        for label, a in family(N).items():
            m = Mask(a.copy())
            assert m.T.T is m
            assert np.array_equal(m.T.array, a.T) and np.array_equal(m.T.excluded, ~a.T)
            assert m.T == Mask(a.T.copy()) and hash(m.T) == hash(Mask(a.T.copy())), label
            assert np.array_equal(m.T.attending, a.T.any(axis=1))
            for shape in [(1, 2), (3, 1), (N, 2)]:
                got = m.T.blocks(*shape)
                assert all(np.array_equal(x, y) for x, y in
                           zip(got[:2], reference_blocks(a.T, *shape))), (label, shape)


# ------------------------------------------------------------------- read once, trusted or not
def test_constructor_arrays_are_read_only_and_read_nothing(monkeypatch):
    """The constructors' arrays are read-only for good, and a ``Mask`` of one reads none of its
    entries: it has the constructor's description (the pass is never called)."""
    a = masks.causal(50)
    assert not a.flags.writeable and a.flags.c_contiguous and isinstance(a, np.ndarray)
    with pytest.raises(ValueError):
        a.flags.writeable = True
    with pytest.raises(ValueError, match="read-only"):
        a[0, 1] = True
    arrays = [a, masks.sliding_window(50, 7), masks.from_blocks(np.eye(5, dtype=bool), 10, 50),
              masks.block_sparse(50, (5, 10), 0.3)]

    def no_pass(*args):
        raise AssertionError("the array was read")

    monkeypatch.setattr(masks, "_scan", no_pass)
    for arr in arrays:
        m = Mask(arr)
        assert m.array is arr and m == Mask.of(arr) and Mask(arr)._rep is m._rep
    assert Mask(a)._rep is Mask.causal(50)._rep
    assert ioattn.io_cost("flash", 50, 4, 100, mask=a) == ioattn.io_cost(
        "flash", 50, 4, 100, mask=Mask.causal(50))


def test_a_read_only_array_is_read_once_and_not_copied():
    a = np.random.default_rng(1).random((40, 40)) < 0.3
    a.flags.writeable = False
    m = Mask(a)
    assert Mask(a)._rep is m._rep and m.array is a
    assert masks.as_mask(a) is a


def test_a_writable_array_is_read_again_and_changes_are_seen():
    """A writable array (or a read-only view of one) is read at each call: a change made after
    a cost is in the next cost."""
    N, d, M = 64, 4, 200
    a = np.tri(N, dtype=bool)
    before = ioattn.io_cost("flash", N, d, M, mask=a)
    a[N // 2:] = False                                  # half the queries attend to nothing
    after = ioattn.io_cost("flash", N, d, M, mask=a)
    assert after != before and after == ioattn.io_cost("flash", N, d, M, mask=a.copy())
    base = np.tri(N, dtype=bool)
    view = base[:]
    view.flags.writeable = False
    assert not masks._read_only(view)
    first = ioattn.io_cost("flash", N, d, M, mask=view)
    base[:] = False
    assert ioattn.io_cost("flash", N, d, M, mask=view) != first
    assert masks.as_mask(view) is not view                  # a copy: the view can change
    owner = np.tri(N, dtype=bool)
    owner.flags.writeable = False
    assert Mask(owner).triangle == "lower"
    owner.flags.writeable = True                            # its owner may make it writable
    owner[0, 1] = True
    assert Mask(owner).triangle is None and Mask(owner).array[0, 1]


@pytest.mark.parametrize("entry", ["totals", "cheapest", "crossovers"])
def test_entry_points_read_a_mask_once(monkeypatch, entry):
    """``totals``, ``cheapest`` and ``crossovers`` read a writable mask array once per call,
    however many algorithms and cache sizes they cost, and find what costing with the
    structured mask finds."""
    N, d = 96, 8
    arr = masks.causal(N).copy()
    reads = []
    analyse = masks._analyse
    monkeypatch.setattr(masks, "_analyse", lambda a, ro: reads.append(1) or analyse(a, ro))
    outer = {"square_tiling": {"schedule": "outer"}}
    if entry == "totals":
        Ms = np.arange(40, 3000)
        got = ioattn.totals("flash", N, d, Ms, mask=arr)
        want = ioattn.totals("flash", N, d, Ms, mask=Mask.causal(N))
    elif entry == "cheapest":
        got = bounds.cheapest(N, d, 500, options=outer, mask=arr)
        want = bounds.cheapest(N, d, 500, options=outer, mask=Mask.causal(N))
    else:
        got = bounds.crossovers(N, d, options=outer, mask=arr)
        want = bounds.crossovers(N, d, options=outer, mask=Mask.causal(N))
    assert len(reads) == 1
    assert np.array_equal(got, want) if entry == "totals" else got == want


# --------------------------------------------------------------- costs: array, structured, plain
STRUCTURED = {
    "causal": (lambda N: Mask.causal(N), masks.causal),
    "window": (lambda N: Mask.sliding_window(N, 5), lambda N: masks.sliding_window(N, 5)),
    "block-sparse": (lambda N: Mask.block_sparse(N, (4, 6), 0.4, seed=2),
                     lambda N: masks.block_sparse(N, (4, 6), 0.4, seed=2)),
}


@pytest.mark.parametrize("structure", list(STRUCTURED))
def test_costs_with_the_array_the_structure_and_the_generic_path_agree(structure):
    """Every algorithm, forward and backward, over a range of ``M``: ``io_cost`` with the
    structured mask, with the constructor's array, with a writable copy and on the generic
    path (``structured=False``) are one count; and at one size it is the simulated count."""
    make_mask, make_array = STRUCTURED[structure]
    for N, d in [(37, 3), (64, 5)]:
        fast, arr = make_mask(N), make_array(N)
        plain = Mask(arr, structured=False)
        cases = [(False, n, o) for n, o in VARIANTS] + [(True, n, o) for n, o in BACKWARD_VARIANTS]
        for backward, name, options in cases:
            lo = ioattn.min_M(name, d, backward=backward, **options)
            for M in sorted({lo, lo + 7, 4 * lo, max(lo, d * d + 3), max(lo, 40 * d * d)}):
                counts = {ioattn.io_cost(name, N, d, M, backward=backward, mask=m, **options)
                          for m in (fast, arr, arr.copy(), plain)}
                assert len(counts) == 1, (name, backward, M)
    N, d, M = 29, 3, 120
    Q, K, V = random_qkv(N, d, seed=4)
    for name, options in VARIANTS:
        M_ = max(M, ioattn.min_M(name, d, **options))
        assert ioattn.run(name, Q, K, V, M_, mask=make_array(N), **options).io == \
            ioattn.io_cost(name, N, d, M_, mask=make_mask(N), **options)


# --------------------------------------------------------------------------------- memory
def _peak(f, *args, **kwargs) -> int:
    """Bytes NumPy and Python allocate at the peak of ``f(*args, **kwargs)``, beyond those
    held before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        f(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_a_cost_with_an_array_takes_far_less_memory_than_the_array():
    """At N = 4096, d = 64, M = d^2 (flash: 30 x 1 blocks, a block mask of 560k entries),
    ``io_cost("flash", ...)`` with an array allocates less than N^2 / 4 bytes beyond it (NumPy's
    allocations are traced): the constructor's causal mask, a writable copy, a sliding window,
    a block-sparse mask (writable copies of both) and a random mask (packed bits), each on its
    first use; and with the structured masks every algorithm does."""
    N, d, M = 4096, 64, 4096
    limit = N * N // 4
    arrays = {"causal": masks.causal(N), "causal copy": masks.causal(N).copy(),
              "window copy": masks.sliding_window(N, 256).copy(),
              "block-sparse copy": masks.block_sparse(N, 64, 0.25).copy(),
              "random": np.random.default_rng(0).random((N, N)) < 0.5}
    for label, a in arrays.items():
        peak = _peak(ioattn.io_cost, "flash", N, d, M, mask=a)
        assert peak < limit, (label, peak)
    for label, a in {"causal": masks.causal(N), "window": masks.sliding_window(N, 256),
                     "block-sparse": masks.block_sparse(N, 64, 0.25)}.items():
        for name, options in VARIANTS:
            peak = _peak(ioattn.io_cost, name, N, d, M, mask=a, **options)
            assert peak < limit, (label, name, options, peak)


# --------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("bad, message", [
    (np.ones((6, 6)), "mask must be a boolean array .* got dtype float64 .*astype"),
    (np.ones((6, 6), dtype=np.uint8), "got dtype uint8"),
    (np.ones((6, 5), dtype=bool), r"shape \(N, N\) = \(6, 6\), got \(6, 5\)"),
    (np.ones((5, 5), dtype=bool), r"shape \(N, N\) = \(6, 6\), got \(5, 5\)"),
    (Mask.causal(5), r"shape \(N, N\) = \(6, 6\), got \(5, 5\)"),
    ([[True, False], [True]], "mask must be a boolean N x N array"),
    (np.ones((2, 3, 3), dtype=bool), r"got \(2, 3, 3\)"),
])
def test_bad_masks_are_clear_errors(bad, message):
    for call in (lambda: Mask(bad, 6), lambda: Mask.of(bad, 6), lambda: masks.as_mask(bad, 6),
                 lambda: ioattn.io_cost("flash", 6, 2, 100, mask=bad),
                 lambda: bounds.crossovers(6, 2, mask=bad),
                 lambda: bounds.cheapest(6, 2, 100, mask=bad)):
        with pytest.raises(ValueError, match=message):
            call()


def test_non_square_masks_without_N():
    for bad in (np.ones((3, 4), bool), np.ones(3, bool), np.ones((0, 0), bool)):
        with pytest.raises(ValueError, match="mask must be a square N x N array"):
            Mask(bad)
