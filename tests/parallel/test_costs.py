"""The closed forms of ioattn.parallel.costs against their definitions, over every small case."""

import itertools

import numpy as np
import pytest

from ioattn.parallel import cost, layout
from ioattn.parallel.bounds import scores
from ioattn.parallel.costs import ALGORITHMS, BACKWARD, LAYOUT, check, pairs, sweep

SMALL = [(N, P) for N in range(1, 21) for P in range(1, N + 1)]


def _applies(name, P, H, backward):
    return (name != "all_to_all" or H >= P) and (not backward or name in BACKWARD)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout_name", layout.LAYOUTS)
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
            assert [len(x) for x in r] == layout.shares(N, P).tolist()


@pytest.mark.parametrize("causal", [False, True])
def test_every_score_is_computed_once_and_every_word_sent_is_received(causal):
    for (N, P), H in itertools.product(SMALL, (1, 3)):
        for name in ALGORITHMS:
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
    for P in range(4, 65):
        ring, grid = cost("ring", 4096, 64, P), cost("grid", 4096, 64, P)
        if layout.grid_shape(P)[0] > 1:            # a grid that is not one row
            assert grid.max_traffic < ring.max_traffic, P
        assert grid.max_memory > ring.max_memory, P


def test_sweep_marks_what_does_not_apply():
    s = sweep(64, 8, [1, 2, 4, 8], heads=4)
    assert s["all_to_all"][3] is None and s["all_to_all"][2] is not None
    assert all(c is not None for c in s["grid"])
    b = sweep(64, 8, [2], backward=True)
    assert b["grid"] == [None] and b["ring"][0].backward


@pytest.mark.parametrize("args, kwargs, message", [
    (("tree", 8, 2, 2), {}, "unknown parallel algorithm"),
    (("ring", 3, 2, 4), {}, "N = 3 < P = 4"),
    (("grid", 8, 2, 2), {"backward": True}, "no backward pass"),
    (("all_to_all", 8, 2, 4), {"heads": 2}, "heads >= P"),
    (("ring", 8, 2, 4), {"grid": (2, 2)}, "option of 'grid' only"),
    (("grid", 8, 2, 4), {"grid": (3, 2)}, "not P = 4"),
    (("ring", 8, 0, 2), {}, "d must be at least 1"),
    (("ring", 8.0, 2, 2), {}, "N must be an integer"),
])
def test_bad_input_is_named(args, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        cost(*args, **kwargs)


def test_check_returns_the_default_grid():
    assert check("grid", 16, 2, 8)[-1] == (2, 4)
    assert layout.grid_shape(7) == (1, 7) and layout.grid_shape(36) == (6, 6)
    assert LAYOUT["striped"] == "striped"
