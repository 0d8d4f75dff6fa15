"""The lower bounds: the steps of their proofs checked exhaustively on small cases, and every
algorithm's exact count at or above them over a grid of (N, d, P, H)."""

import itertools
from math import sqrt

import pytest

from ioattn.parallel import bounds, cost
from ioattn.parallel.costs import ALGORITHMS, BACKWARD


def test_rows_needed_for_F_scores():
    # integers a, b with a b >= F: (a - n)^+ + (b - n)^+ >= 2 (sqrt(F) - n)^+
    for F in range(1, 200):
        for n in range(0, 15):
            least = min(max(a - n, 0) + max(-(-F // a) - n, 0) for a in range(1, F + 1))
            assert least >= 2 * max(sqrt(F) - n, 0) - 1e-9, (F, n)


def test_heads_vertex_formula_is_the_least_over_every_split():
    # the bound minimised over every integer split of F scores among H heads of Z scores
    for N, P, H in itertools.product(range(2, 9), range(2, 7), range(1, 4)):
        if N < P:
            continue
        for causal in (False, True):
            Z, n = bounds.scores(N, causal), -(-N // P)
            F = bounds.busiest_scores(N, P, H, causal)
            best = min(sum(2 * max(sqrt(f) - n, 0) for f in split)
                       for split in itertools.product(range(Z + 1), repeat=H)
                       if sum(split) >= F)
            got = bounds.memory_independent(N, 1, P, heads=H, causal=causal)
            assert got <= best + 1e-9, (N, P, H, causal)
            assert got >= best - 2 * H * (sqrt(Z) + n)   # vertex value, not a weak stand-in
            if H == 1:
                assert got == pytest.approx(best)


def test_one_head_closed_form():
    assert bounds.memory_independent(4096, 64, 16) == 2 * 64 * (1024 - 256)
    assert bounds.memory_independent(4096, 64, 1) == 0.0
    assert bounds.memory_dependent(100, 4, 5, 10 ** 9) == 0.0
    F = bounds.busiest_scores(100, 5)
    assert bounds.memory_dependent(100, 4, 5, 50) == F * 16 / 50 - 50


GRID = [(N, d, P, H) for N in (64, 257, 1024) for d in (1, 8, 64) for P in range(1, 33)
        for H in (1, 4, 32) if N >= P]


@pytest.mark.parametrize("causal", [False, True])
def test_no_algorithm_receives_less_than_the_bounds(causal):
    checked = 0
    for N, d, P, H in GRID:
        for name in ALGORITHMS:
            for backward in (False, True):
                if (name == "all_to_all" and H < P) or (backward and name not in BACKWARD):
                    continue
                c = cost(name, N, d, P, heads=H, causal=causal, backward=backward)
                bound = bounds.lower_bound(N, d, P, c.max_memory, heads=H, causal=causal)
                assert c.max_received >= bound, (name, N, d, P, H, backward)
                checked += 1
    assert checked > 4000


def test_the_bounds_are_nearly_attained():
    # the grid scheme within a factor 2.5 of the memory-independent bound (N >> P, d >> 1)
    for P in (4, 16, 64, 256):
        c = cost("grid", 1 << 16, 64, P)
        assert c.max_received <= 2.5 * bounds.memory_independent(1 << 16, 64, P)
    # the ring within a factor 20 of the memory-dependent bound at its own memory, large P
    c = cost("ring", 1 << 16, 64, 1024)
    assert c.max_received <= 20 * bounds.memory_dependent(1 << 16, 64, 1024, c.max_memory)


def test_bad_input():
    with pytest.raises(ValueError, match="S must be at least 1"):
        bounds.memory_dependent(8, 2, 2, 0)
    with pytest.raises(TypeError, match="P must be an integer"):
        bounds.memory_independent(8, 2, 2.5)
