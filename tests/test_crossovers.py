"""Costs over whole ranges of M, and the crossovers found from them: ``ioattn.totals`` equals
``io_cost`` at every M, ``bounds.crossovers`` lists every change an exhaustive scan sees, the
program bounds and their envelope lie below every algorithm at every M, and a masked algorithm
stays within a constant of the sparse lower bound on every mask here."""

import numpy as np
import pytest
from hypothesis import given, settings, target
from hypothesis import strategies as st

import ioattn
from ioattn import bounds, masks

from .conftest import BACKWARD_VARIANTS, VARIANTS

CASES = [(False, name, options) for name, options in VARIANTS] + \
    [(True, name, options) for name, options in BACKWARD_VARIANTS]
IDS = [("backward-" if b else "") + name + "".join(f"-{v}" for v in opts.values())
       for b, name, opts in CASES]


def _one(N, i, j):
    mask = np.zeros((N, N), bool)
    mask[i, j] = True
    return mask


def _block(N, rows, cols):
    mask = np.zeros((N, N), bool)
    mask[rows, cols] = True
    return mask


def _masks(N):
    """Masks of every kind: structured, array, one score, one block, empty rows, none at all."""
    rng = np.random.default_rng(N)
    return {
        "causal (structured)": masks.Mask.causal(N),
        "causal (array)": masks.causal(N),
        "window": masks.sliding_window(N, max(1, N // 6)),
        "block-sparse": masks.block_sparse(N, (max(1, N // 8),) * 2, 0.3, seed=N),
        "fine block-sparse": masks.block_sparse(N, (8, 8), 0.3, seed=N),
        "random": rng.random((N, N)) < 0.05,
        "one score": _one(N, N // 3, N // 2),
        "one block": _block(N, slice(0, 16), slice(N // 2, N // 2 + 16)),
        "nothing": np.zeros((N, N), bool),
    }


def _Z(mask):
    """The scores a mask computes."""
    if isinstance(mask, masks.Mask):
        return int(np.count_nonzero(~mask.excluded))
    return int(np.count_nonzero(mask))


def _cost(name, N, d, M, backward, options, **extra):
    return ioattn.io_cost(name, N, d, M, backward=backward, **options, **extra).total


# --------------------------------------------------------------------------- totals == io_cost
@pytest.mark.parametrize("backward, name, options", CASES, ids=IDS)
def test_totals_equal_io_cost_at_every_M(backward, name, options):
    """Over every M of a range (from the least M up, past d^2 and past the point where whole
    rows fit), dense, with save_lse, and under every kind of mask."""
    for N, d in [(1, 3), (37, 5), (64, 8)]:
        lo = ioattn.min_M(name, d, backward=backward, **options)
        Ms = np.arange(lo, lo + 40 * d * d)
        settings = [{}] + ([] if backward else [{"save_lse": True}])
        settings += [{"mask": m} for m in _masks(N).values()]
        for extra in settings:
            got = ioattn.totals(name, N, d, Ms, backward=backward, **options, **extra)
            want = [_cost(name, N, d, int(M), backward, options, **extra) for M in Ms]
            assert got.tolist() == want, (N, d, list(extra))


def test_totals_for_large_N_agree_with_io_cost():
    Ms = np.array([5, 64, 4095, 4096, 65536, 10 ** 6])
    for name in ioattn.algorithms():
        for N in (4096, 2 ** 20):                  # 2^20: beyond int64, one M at a time
            lo = ioattn.min_M(name, 64)
            got = ioattn.totals(name, N, 64, Ms[Ms >= lo])
            assert [int(x) for x in got] == \
                [ioattn.io_cost(name, N, 64, int(M)).total for M in Ms[Ms >= lo]]


def test_totals_errors():
    with pytest.raises(ValueError, match="at least M = 260"):
        ioattn.totals("flash", 100, 64, [259, 300])
    with pytest.raises(TypeError, match="1-D array of integers"):
        ioattn.totals("flash", 100, 64, [300.5])
    with pytest.raises(TypeError, match="1-D array of integers"):
        ioattn.totals("flash", 100, 64, [[300]])
    with pytest.raises(ValueError, match="unknown algorithm"):
        ioattn.totals("fast", 100, 64, [300])
    with pytest.raises(TypeError, match="unknown option"):
        ioattn.totals("flash", 100, 64, [300], schedule="outer")
    assert ioattn.totals("flash", 100, 64, []).size == 0


# ------------------------------------------------------------------- crossovers == a full scan
def _scan(N, d, lo, hi, names, options, backward, mask=None):
    """Every change of the cheapest algorithm, by asking cheapest() at every M."""
    changes, prev = [], bounds.cheapest(N, d, lo, names, options, backward=backward, mask=mask)
    for M in range(lo + 1, hi + 1):
        w = bounds.cheapest(N, d, M, names, options, backward=backward, mask=mask)
        if w != prev and prev is not None:
            changes.append(bounds.Crossover(M, prev, w))
        prev = w
    return changes


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("schedule", ["blocked", "outer"])
def test_crossovers_are_every_change_of_a_full_scan(backward, schedule):
    options = {"square_tiling": {"schedule": schedule}}
    for N, d, kinds in [(64, 8, ("causal (array)", "one block", "random")), (300, 5, ())]:
        names = ioattn.algorithms(backward)
        lo = min(ioattn.min_M(n, d, backward=backward, **options.get(n, {})) for n in names)
        hi = 32 * d * d
        want = _scan(N, d, lo, hi, None, options, backward)
        assert bounds.crossovers(N, d, options=options, backward=backward) == want
        for kind in kinds:
            mask = _masks(N)[kind]
            want = _scan(N, d, lo, hi, None, options, backward, mask)
            assert bounds.crossovers(N, d, options=options, backward=backward,
                                     mask=mask) == want, kind


@settings(max_examples=40)
@given(data=st.data(), N=st.integers(1, 120), d=st.integers(1, 10), backward=st.booleans(),
       chunk=st.sampled_from([1, 7, 1 << 17]))
def test_crossovers_equal_a_full_scan_on_drawn_cases(data, N, d, backward, chunk):
    """Drawn (N, d), names, options, masks and ranges: crossovers() is every change that
    cheapest() at every M sees, with the range scanned in pieces of 1, 7 or 2^17 values (a change
    at a piece's edge is found)."""
    every = ioattn.algorithms(backward)
    names = data.draw(st.lists(st.sampled_from(every), min_size=2, max_size=3, unique=True))
    schedule = data.draw(st.sampled_from(["blocked", "outer"]))
    options = {"square_tiling": {"schedule": schedule}}
    if not backward and data.draw(st.booleans()):
        options["flash"] = {"variant": "fa1"}
    kind = data.draw(st.sampled_from([None, "causal (structured)", "causal (array)", "window",
                                      "block-sparse", "random", "one score", "nothing"]))
    mask = None if kind is None else _masks(N)[kind]
    least = min(ioattn.min_M(n, d, backward=backward, **options.get(n, {})) for n in names)
    lo = data.draw(st.integers(max(1, least - 20), least + 20))
    hi = data.draw(st.integers(lo + 1, lo + 40 * d * d + 60))
    want = _scan(N, d, lo, hi, names, options, backward, mask)
    target(float(len(want)))                        # steer the draws to ranges with changes
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bounds, "_SCAN_CHUNK", chunk)
        assert bounds.crossovers(N, d, lo, hi, names, options, backward=backward,
                                 mask=mask) == want


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_crossovers_at_N_1e6_agree_with_cheapest(backward):
    """Past 64 bits (Python-int costs), dense and causal: each change listed is a change of
    cheapest() at M - 1 and M, and between two changes (and on either side) the winner is the
    same at every probed M."""
    N, d = 10 ** 6, 16
    outer = {"square_tiling": {"schedule": "outer"}}
    for mask in (None, masks.Mask.causal(N)):
        found = bounds.crossovers(N, d, options=outer, backward=backward, mask=mask)
        assert found
        for c in found:
            assert bounds.cheapest(N, d, c.M - 1, options=outer, backward=backward,
                                   mask=mask) == c.before
            assert bounds.cheapest(N, d, c.M, options=outer, backward=backward,
                                   mask=mask) == c.after
        edges = [c.M for c in found] + [32 * d * d + 1]
        for a, b, c in zip(edges, edges[1:], found):
            for M in {a, (a + b) // 2, b - 1}:
                assert bounds.cheapest(N, d, M, options=outer, backward=backward,
                                       mask=mask) == c.after


def test_crossovers_list_the_flip_backs():
    """Costs are step functions of M: the winner can change back, and each change is listed."""
    outer = {"square_tiling": {"schedule": "outer"}}
    found = bounds.crossovers(4096, 64, options=outer)
    near = [(c.M, c.before, c.after) for c in found if c.M > 1000]
    assert near == [(3032, "square_tiling", "flash"), (3078, "flash", "square_tiling"),
                    (3164, "square_tiling", "flash")]
    found = bounds.crossovers(2048, 128, options=outer)
    assert [(c.M, c.after) for c in found if c.M > 1000] == \
        [(11696, "flash"), (11918, "square_tiling"), (11956, "flash")]
    # standard attention is not cheapest for every M below its last win
    small = [c for c in found if c.M < 1000]
    assert len(small) > 2 and small[0].before == "standard"
    for c in found:
        assert bounds.cheapest(2048, 128, c.M - 1, options=outer) == c.before
        assert bounds.cheapest(2048, 128, c.M, options=outer) == c.after


def test_crossovers_arguments():
    assert bounds.crossovers(64, 8, 100, 100) == []             # one M: nothing changes
    for lo, hi in [(101, 100), (9000, 100)]:
        with pytest.raises(ValueError, match=rf"\[{lo}, {hi}\] is empty: M_max must be at least "
                                             "M_min"):
            bounds.crossovers(64, 8, lo, hi)
    with pytest.raises(ValueError, match="is empty: M_max must be at least M_min .by default "
                                         "the least M, 260"):
        bounds.crossovers(1024, 64, M_max=100, names=["flash"])
    with pytest.raises(ValueError, match="more than the 67,108,864 it costs in one call"):
        bounds.crossovers(1024, 64, M_max=10 ** 12)
    with pytest.raises(TypeError, match="backward must be True or False"):
        bounds.crossovers(64, 8, backward="yes")
    with pytest.raises(TypeError, match="backward must be True or False"):
        bounds.cheapest(64, 8, 100, backward=1)
    with pytest.raises(TypeError, match="names must be a list of algorithm names"):
        bounds.crossovers(64, 8, names="flash")
    with pytest.raises(ValueError, match="unknown algorithm 'flsh'"):
        bounds.crossovers(64, 8, names=["flsh", "standard"])
    with pytest.raises(ValueError, match="unknown algorithm 'flsh'"):
        bounds.cheapest(64, 8, 100, names=["flsh"])
    with pytest.raises(TypeError, match="M must be an integer"):
        bounds.cheapest(64, 8, "100")
    with pytest.raises(ValueError, match="M_min must be at least 1"):
        bounds.crossovers(64, 8, 0, 100)
    with pytest.raises(TypeError, match="M_max must be an integer"):
        bounds.crossovers(64, 8, 3, 100.0)
    # a range that starts below every algorithm's least M: their start is no crossover
    assert bounds.crossovers(64, 8, 1, 40, names=["flash"]) == []


# ------------------------------------------------------------ bounds for programs, envelopes
@pytest.mark.parametrize("backward, name, options", CASES, ids=IDS)
def test_program_bounds_and_their_envelope_lie_below_every_cost(backward, name, options):
    """At every M of a range: the game bound at M + 2 (program=True), the envelope of it over
    the range, and the sparse program bound under masks, never exceed the exact cost."""
    for N, d in [(33, 4), (96, 8)]:
        lo = ioattn.min_M(name, d, backward=backward, **options)
        Ms = np.arange(lo, 20 * d * d)
        costs = ioattn.totals(name, N, d, Ms, backward=backward, **options)
        lower = [bounds.lower_bound(N, d, int(M), backward=backward, program=True) for M in Ms]
        env = bounds.envelope(lower)
        assert all(c >= e >= v for c, e, v in zip(costs.tolist(), env, lower))
        assert all(a >= b for a, b in zip(env, env[1:]))           # non-increasing
        for kind, mask in _masks(N).items():
            Z = _Z(mask)
            masked = ioattn.totals(name, N, d, Ms, backward=backward, mask=mask, **options)
            sparse = [bounds.sparse_lower(N, d, int(M), Z, backward=backward, program=True)
                      for M in Ms]
            assert all(c >= b for c, b in zip(masked.tolist(), sparse)), kind


def test_the_partition_formula_is_not_monotone_and_the_envelope_is():
    N, d = 4096, 64
    Ms = list(range(3, 32 * d * d + 1))
    values = [bounds.partition_lower(N, d, M) for M in Ms]
    rises = sum(1 for a, b in zip(values, values[2:]) if b > a)       # value at M + 2 > at M
    assert rises > len(Ms) // 2
    env = bounds.envelope(values)
    assert all(a >= b for a, b in zip(env, env[1:])) and all(e >= v for e, v in zip(env, values))
    assert bounds.envelope([]) == []


def test_program_bound_is_the_game_bound_two_pebbles_on():
    for N, d, M in [(4096, 64, 100), (4096, 64, 5000), (100, 8, 3)]:
        for backward in (False, True):
            assert bounds.lower_bound(N, d, M, backward=backward, program=True) == max(
                bounds.trivial_lower(N, d, backward=backward),
                bounds.partition_lower(N, d, M + bounds.EXTRA_PEBBLES, backward=backward),
                bounds.reduction_lower(N, d, M + bounds.EXTRA_PEBBLES, backward=backward))
    with pytest.raises(TypeError, match="program must be True or False"):
        bounds.lower_bound(10, 2, 10, program=1)


# ------------------------------------------------- masked algorithms against the sparse bound
#: The most a masked cost here exceeds sparse_lower(program=True), forward and backward, where
#: the algorithm is claimed optimal (FlashAttention from M = d^2, square tiling below), on masks
#: made of blocks. It is the looseness of the dense constants themselves (FlashAttention's
#: 4 N^2 d^2 / M against the partition bound's N^2 d^2 / (5M), at small d), not a growth with N
#: or with the mask. A random mask, or one of blocks much smaller than the algorithm's, is not:
#: nearly every block of the algorithm holds a score, it does nearly the dense work for a
#: smaller Z, and no constant is claimed (the ratio then grows like N^2 / Z).
FINE = ("random", "fine block-sparse")
RATIO = {False: 75, True: 100}


@pytest.mark.parametrize("backward, name, options",
                         [c for c in CASES if c[1] != "standard"],
                         ids=[i for c, i in zip(CASES, IDS) if c[1] != "standard"])
def test_masked_cost_stays_within_a_constant_of_the_sparse_bound(backward, name, options):
    worst = {}
    for N in (128, 512, 2048):
        for d in (8, 32):
            lo = ioattn.min_M(name, d, backward=backward, **options)
            Ms = [d * d, 4 * d * d, 16 * d * d] if name == "flash" else \
                [5, d * d // 4, d * d - 1]
            for kind, mask in _masks(N).items():
                if kind in FINE:
                    continue
                Z = _Z(mask)
                for M in (M for M in Ms if M >= lo):
                    cost = _cost(name, N, d, M, backward, options, mask=mask)
                    ratio = cost / bounds.sparse_lower(N, d, M, Z, backward=backward,
                                                       program=True)
                    worst[kind] = max(worst.get(kind, 0), ratio)
    assert max(worst.values()) <= RATIO[backward], worst
    # one score or one block: writing the output is most of the cost, and of the bound
    assert worst["one score"] <= 4 and worst["nothing"] <= 2, worst


@pytest.mark.parametrize("N", [512, 2048, 8192])
def test_one_block_at_M_d_squared_does_not_grow_with_N(N):
    """A single 32 x 32 block, d = 32, M = d^2: the ratio was 33, 129, 513 before the output's
    writes were counted in the bound; now it stays below 2 (forward) and 3 (backward: the
    bound's 3 N d of output against the algorithms' 5 N d, which also read dO and O for D)."""
    d = 32
    mask = masks.Mask(_block(N, slice(0, 32), slice(0, 32)), N)
    for backward, most in ((False, 2), (True, 3)):
        for name in ("flash", "square_tiling"):
            cost = _cost(name, N, d, d * d, backward, {}, mask=mask)
            assert cost <= most * bounds.sparse_lower(N, d, d * d, 32 * 32, backward=backward,
                                                      program=True)


@pytest.mark.parametrize("backward, options", [(False, {"block": (3, 5)}),
                                               (False, {"block": (3, 5), "variant": "fa1"}),
                                               (True, {"block": (3, 5)})])
def test_totals_with_an_explicit_block(backward, options):
    """A fixed block: only FA1's row step R still follows M."""
    lo = ioattn.min_M("flash", 4, backward=backward, **options)
    Ms = np.arange(lo, lo + 300)
    for extra in ({}, {"mask": masks.causal(20)}):
        got = ioattn.totals("flash", 20, 4, Ms, backward=backward, **options, **extra)
        assert got.tolist() == [_cost("flash", 20, 4, int(M), backward, options, **extra)
                                for M in Ms]


def test_crossovers_memory_does_not_grow_with_the_range():
    """The range is costed a piece at a time: eight times the values, about the same peak."""
    import tracemalloc

    def peak(hi):
        tracemalloc.start()
        try:
            found = bounds.crossovers(4096, 64, 3, hi, names=["flash", "standard"])
            return found, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (small, a), (large, b) = peak(1 << 18), peak(1 << 21)
    assert large[:len(small)] == small and b < 1.5 * a, (a, b)
