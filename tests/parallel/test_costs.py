"""The closed forms of ioattn.parallel.costs against their definitions, over every small case."""

import itertools

import numpy as np
import pytest

from ioattn.parallel import cost, layout
from ioattn.parallel.bounds import scores
from ioattn.parallel.costs import (
    ALGORITHMS,
    BACKWARD,
    LAYOUT,
    NAMES,
    WITH_BACKWARD,
    check,
    pairs,
    sweep,
)

SMALL = [(N, P) for N in range(1, 21) for P in range(1, N + 1)]


def _applies(name, P, H, backward):
    return (name != "all_to_all" or H >= P) and (not backward or name in WITH_BACKWARD)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout_name", ["contiguous", "striped"])
def test_pairs_closed_forms_equal_the_definition_for_every_small_case(layout_name, causal):
    from ioattn.parallel.costs import _contiguous_pairs, _striped_pairs
    closed = _striped_pairs if layout_name == "striped" else _contiguous_pairs
    for N, P in SMALL:
        rows = layout.rows(N, P, layout_name)
        for q, k in itertools.product(range(P), repeat=2):
            want = pairs(rows[q], rows[k], causal)
            assert closed(len(rows[q]), len(rows[k]), q, k, causal) == want, (N, P, q, k)


def test_layouts_share_the_rows_exactly_once():
    for N, P in SMALL:
        for name in layout.LAYOUTS:
            r = layout.rows(N, P, name)
            assert sorted(np.concatenate(r).tolist()) == list(range(N))
            assert [len(x) for x in r] == layout.sizes(N, P, name).tolist()
            # the bounds assume no processor starts with more than ceil(N / P) rows
            assert max(len(x) for x in r) == -(-N // P) and min(len(x) for x in r) >= 1
            assert all((np.diff(x) > 0).all() for x in r)
        assert layout.sizes(N, P).tolist() == layout.shares(N, P).tolist()


@pytest.mark.parametrize("causal", [False, True])
def test_every_score_is_computed_once_and_every_word_sent_is_received(causal):
    for (N, P), H in itertools.product(SMALL, (1, 3)):
        for name in NAMES:
            for backward in (False, True):
                if not _applies(name, P, H, backward):
                    continue
                c = cost(name, N, 2, P, heads=H, causal=causal, backward=backward)
                assert c.total_work == H * scores(N, causal), (name, N, P)
                assert c.sent.sum() == c.received.sum(), (name, N, P)
                assert (c.sent >= 0).all() and (c.memory > 0).all()
                if P == 1:
                    assert c.max_traffic == 0 and c.max_messages == 0


def test_ring_formulas():
    c = cost("ring", 10, 3, 4, heads=2)            # shares 3, 3, 2, 2
    assert c.sent.tolist() == [2 * 3 * 2 * (10 - n) for n in (3, 2, 2, 3)]
    assert c.received.tolist() == [2 * 3 * 2 * (10 - n) for n in (3, 3, 2, 2)]
    assert c.messages.tolist() == [3] * 4
    b = cost("ring", 10, 3, 4, heads=2, backward=True)
    assert b.received.tolist() == [4 * 6 * (10 - n) + 2 * 6 * n for n in (3, 3, 2, 2)]
    assert b.messages.tolist() == [4] * 4


def test_striped_balances_the_causal_ring():
    ring = cost("ring", 4096, 64, 8, causal=True)
    striped = cost("striped", 4096, 64, 8, causal=True)
    assert (ring.traffic == striped.traffic).all()
    assert striped.critical_work < ring.critical_work
    assert striped.balance > 0.99 > 0.6 > ring.balance


def test_grid_beats_ring_from_four_processors_on_and_costs_memory():
    for P in range(2, 65):
        ring, grid = cost("ring", 4096, 64, P), cost("grid", 4096, 64, P)
        if min(layout.grid_shape(P, 64)) > 1:      # at least two rows and two columns
            assert grid.max_traffic < ring.max_traffic, P
        else:                                      # P x 1 at a prime P: no less than the ring
            assert grid.grid == (P, 1) and grid.max_traffic >= ring.max_traffic, P
            # and with equal shares exactly the ring's: each sends its K, V to all, receives all
            equal = cost("grid", 64 * P, 64, P), cost("ring", 64 * P, 64, P)
            assert equal[0].max_traffic == equal[1].max_traffic
        assert grid.max_memory > ring.max_memory, P


def _divisor_shapes(P):
    return [(P // c, c) for c in range(1, P + 1) if P % c == 0]


def test_default_grid_has_the_least_traffic_then_memory_of_every_factorisation():
    # with equal shares the exact counts of every shape, against the default one
    for P in range(2, 73):
        for d in (1, 2, 3, 8, 64):
            N = 2 * P
            got = cost("grid", N, d, P)
            assert got.grid == layout.grid_shape(P, d)
            every = {g: cost("grid", N, d, P, grid=g) for g in _divisor_shapes(P)}
            best = min(every, key=lambda g: (every[g].max_traffic, every[g].max_memory))
            want = every[best]
            assert (got.max_traffic, got.max_memory) == (want.max_traffic, want.max_memory), (P, d)
            n = N // P
            P_r, P_c = got.grid
            assert got.max_traffic == 2 * n * ((2 * d + 1) * (P_c - 1) + 2 * d * (P_r - 1))
            assert got.max_memory == n * ((2 * d + 3) * P_c + 2 * d * P_r)
    # the orientation: more rows than columns is better, N = 4096, d = 64, P = 8
    wide, tall = cost("grid", 4096, 64, 8, grid=(2, 4)), cost("grid", 4096, 64, 8)
    assert tall.grid == (4, 2) and (wide.max_traffic, tall.max_traffic) == (527360, 525312)
    assert tall.max_memory < wide.max_memory
    # a prime P: the P x 1 grid ties the ring
    assert cost("grid", 4096, 64, 2).max_traffic == cost("ring", 4096, 64, 2).max_traffic == 524288


def test_exact_integers_do_not_overflow():
    # N = 10^9: the work H N^2 and more are beyond int64; every count must stay exact
    N, d, H = 10 ** 9, 64, 16
    checked = 0
    for name in ALGORITHMS:
        for P in (1, 2, 3, 4, 16):
            for causal in (False, True):
                for backward in (False, True):
                    if not _applies(name, P, H, backward):
                        continue
                    c = cost(name, N, d, P, heads=H, causal=causal, backward=backward)
                    assert c.total_work == H * scores(N, causal), (name, P, causal, backward)
                    assert all(isinstance(int(x), int) for x in c.work.ravel())
                    assert c.sent.sum() == c.received.sum()
                    if name in ("ring", "striped") and not backward:
                        n = layout.shares(N, P).tolist()
                        assert c.received.tolist() == [2 * d * H * (N - x) for x in n]
                    checked += 1
    assert checked == 80
    c = cost("ring", N, d, 4, heads=H, causal=True)
    assert c.critical_work == H * ((N // 4) * (N // 4 + 1) // 2 + 3 * (N // 4) ** 2)
    # ordinary sizes keep int64 arrays
    assert cost("ring", 4096, 64, 16).work.dtype == np.int64


def test_sweep_marks_what_does_not_apply():
    s = sweep(64, 8, [1, 2, 4, 8], heads=4)
    assert s["all_to_all"][3] is None and s["all_to_all"][2] is not None
    assert all(c is not None for c in s["grid"])
    b = sweep(64, 8, [2], backward=True)
    assert b["all_to_all"] == [None] and b["grid"][0].backward and b["ring"][0].backward


@pytest.mark.parametrize("args, kwargs, message", [
    (("tree", 8, 2, 2), {}, "unknown parallel algorithm"),
    (("ring", 3, 2, 4), {}, "N = 3 < P = 4"),
    (("all_to_all", 8, 2, 4), {"heads": 2}, "heads >= P"),
    (("ring", 8, 2, 4), {"grid": (2, 2)}, "option of 'grid', 'usp', 'usp_zigzag', 'usp_grid' only"),
    (("zigzag", 8, 2, 4), {"grid": (2, 2)}, "option of 'grid', 'usp', 'usp_zigzag', 'usp_grid' only"),
    (("usp_zigzag", 8, 2, 4), {"grid": (4, 1), "heads": 3}, "usp_zigzag splits the heads"),
    (("usp", 8, 2, 4), {"grid": (4, 1), "heads": 2}, "heads >= P_u; got heads = 2"),
    (("usp", 8, 2, 4), {"grid": (2, 3), "heads": 2}, "not P = 4"),
    (("usp", 8, 2, 4), {"grid": 2}, r"a pair \(P_u, P_r\)"),
    (("grid", 8, 2, 4), {"grid": (3, 2)}, "not P = 4"),
    (("grid", 8, 2, 4), {"backward": True, "M": 17},
     "FlashAttention's backward pass needs a cache of at least 7d \\+ 4 = 18 entries at d = 2; "
     "got M = 17"),
    (("all_to_all", 8, 2, 4), {"backward": True, "heads": 2}, "heads >= P"),
    (("ring", 8, 0, 2), {}, "d must be at least 1"),
    (("ring", 8.0, 2, 2), {}, "N must be an integer"),
    (("ring", 8, 2, 2), {"causal": "no"}, "causal must be True or False, got 'no'"),
    (("grid", 8, 2, 2), {"causal": 1}, "causal must be True or False"),
    (("ring", 8, 2, 2), {"backward": "yes"}, "backward must be True or False"),
])
def test_bad_input_is_named(args, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        cost(*args, **kwargs)


def test_check_returns_the_default_grid():
    assert check("grid", 16, 2, 8)[-1] == (4, 2)
    assert layout.grid_shape(7, 64) == (7, 1) and layout.grid_shape(36, 64) == (6, 6)
    # d = 1: 3 * 4 + 2 * 9 = 3 * 6 + 2 * 6, a tie in traffic; fewer columns, less memory
    assert layout.grid_shape(36, 1) == (9, 4)
    assert layout.grid_shape(1, 3) == (1, 1)
    with pytest.raises(TypeError, match="d must be an integer"):
        layout.grid_shape(8, 2.0)
    assert LAYOUT["striped"] == "striped"
    assert check("usp", 16, 2, 8, heads=4)[-1] == (4, 2) == layout.usp_shape(8, 4)
    assert set(LAYOUT) == set(NAMES)
    # every algorithm has its backward pass
    assert BACKWARD == ALGORITHMS and WITH_BACKWARD == NAMES


def test_grid_backward_formulas():
    # N = 10, P = 4 as 2 x 2: shares 3, 3, 2, 2; query blocks 6, 4, key blocks 5, 5; d = 3, H = 2
    n, N_a, N_b, d, H = [3, 3, 2, 2], [6, 6, 4, 4], [5, 5, 5, 5], 3, 2
    b = cost("grid", 10, d, 4, heads=H, grid=(2, 2), backward=True)
    f = cost("grid", 10, d, 4, heads=H, grid=(2, 2))
    assert b.sent.tolist() == [(2 * d + 2) * H * n[p] + 2 * d * H * n[p] + d * H * (N_a[p] - n[p])
                               + 2 * d * H * (N_b[p] - n[p]) for p in range(4)]
    assert b.received.tolist() == [(2 * d + 2) * H * (N_a[p] - n[p]) + 2 * d * H * (N_b[p] - n[p])
                                   + d * H * n[p] + 2 * d * H * n[p] for p in range(4)]
    assert b.messages.tolist() == [4] * 4 and np.array_equal(b.work, f.work)
    assert b.sent.sum() == b.received.sum()
    # equal shares: traffic 2 H n ((3d + 2)(P_c - 1) + 4d (P_r - 1)), less than the ring's
    # backward on every grid with two rows and two columns
    for P_r, P_c in [(2, 2), (4, 2), (2, 4), (4, 4), (8, 1), (1, 8)]:
        P, nn = P_r * P_c, 8
        g = cost("grid", nn * P, 64, P, grid=(P_r, P_c), backward=True)
        assert g.max_traffic == 2 * nn * ((3 * 64 + 2) * (P_c - 1) + 4 * 64 * (P_r - 1))
        ring = cost("ring", nn * P, 64, P, backward=True)
        assert ring.max_traffic == 2 * nn * (4 * 64 * (P - 1) + 2 * 64)
        if min(P_r, P_c) > 1:
            assert g.max_traffic < ring.max_traffic, (P_r, P_c)
    one = cost("grid", 7, 2, 1, backward=True)
    assert (one.sent.tolist(), one.messages.tolist()) == ([0], [0])
    assert one.memory.tolist() == [(5 * 2 + 2) * 7 + 2 * 7 + 4 * 7]     # + dQ, dK, dV


def test_all_to_all_backward_is_usp_with_one_group():
    for N, d, P, H in [(30, 4, 2, 3), (37, 5, 4, 4), (50, 3, 8, 9)]:
        for causal in (False, True):
            a = cost("all_to_all", N, d, P, heads=H, causal=causal, backward=True)
            u = cost("usp", N, d, P, heads=H, causal=causal, grid=(P, 1), backward=True)
            f = cost("all_to_all", N, d, P, heads=H, causal=causal)
            for field in ("sent", "received", "messages", "memory", "work"):
                assert np.array_equal(getattr(a, field), getattr(u, field)), (N, P, field)
            assert np.array_equal(a.work, f.work) and a.grid is None and a.backward
            n, h = layout.shares(N, P), layout.shares(H, P)
            assert a.sent.tolist() == [(4 * d + 2) * n[p] * (H - h[p]) + 3 * d * h[p] * (N - n[p])
                                       for p in range(P)]
            assert a.messages.tolist() == [2 * (P - 1)] * P
