"""The lower bounds: the steps of their proofs checked exhaustively on small cases, and every
algorithm's exact count at or above them over a grid of (N, d, P, H)."""

import itertools
from math import sqrt

import pytest

from ioattn.parallel import bounds, cost
from ioattn.parallel.costs import NAMES, SCHEMES, WITH_BACKWARD


def test_rows_needed_for_F_scores():
    # integers a, b with a b >= F: (a - n)^+ + (b - n)^+ >= 2 (sqrt(F) - n)^+
    for F in range(1, 200):
        for n in range(0, 15):
            least = min(max(a - n, 0) + max(-(-F // a) - n, 0) for a in range(1, F + 1))
            assert least >= 2 * max(sqrt(F) - n, 0) - 1e-9, (F, n)


def least_over_every_split(per_head):
    """(N, P, H, causal, n, Z, best) on small cases, where best is the least of
    sum(per_head(f, n)) over every integer split of the busiest processor's F scores among H
    heads of Z scores each."""
    for N, P, H in itertools.product(range(2, 9), range(2, 7), range(1, 4)):
        if N < P:
            continue
        for causal in (False, True):
            Z, n = bounds.scores(N, causal), -(-N // P)
            F = bounds.busiest_scores(N, P, H, causal)
            best = min(sum(per_head(f, n) for f in split)
                       for split in itertools.product(range(Z + 1), repeat=H)
                       if sum(split) >= F)
            yield N, P, H, causal, n, Z, best


def test_heads_vertex_formula_is_the_least_over_every_split():
    # the bound minimised over every integer split of F scores among H heads of Z scores
    for N, P, H, causal, n, Z, best in least_over_every_split(
            lambda f, n: 2 * max(sqrt(f) - n, 0)):
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


def _shapes(name, P, H):
    """The processor shapes to try: every ``P_u x P_r`` with ``P_u <= H`` for USP, and every
    ``P_u x P_a x P_b`` for head groups x grid."""
    if name not in ("usp", "usp_zigzag", "usp_grid"):
        return [None]
    usp = [(P_u, P // P_u) for P_u in range(1, min(P, H) + 1) if P % P_u == 0]
    if name != "usp_grid":
        return usp
    return [(P_u, P_a, P_r // P_a) for P_u, P_r in usp for P_a in range(1, P_r + 1)
            if P_r % P_a == 0]


def every_cost(causal):
    """(N, d, P, H, name, backward, cost) for every algorithm (the four and the schemes run in
    practice, USP at every shape) that applies on GRID."""
    for N, d, P, H in GRID:
        for name in NAMES:
            for backward in (False, True):
                if (name == "all_to_all" and H < P) or (backward and name not in WITH_BACKWARD):
                    continue
                for shape in _shapes(name, P, H):
                    yield N, d, P, H, name, backward, cost(name, N, d, P, heads=H,
                                                           causal=causal, backward=backward,
                                                           grid=shape)


@pytest.mark.parametrize("causal", [False, True])
def test_no_algorithm_receives_less_than_the_bounds(causal):
    checked, by_name, backwards = 0, dict.fromkeys(NAMES, 0), dict.fromkeys(WITH_BACKWARD, 0)
    for N, d, P, H, name, backward, c in every_cost(causal):
        bound = bounds.lower_bound(N, d, P, c.max_memory, heads=H, causal=causal)
        assert c.max_received >= bound, (name, N, d, P, H, backward)
        checked += 1
        by_name[name] += 1
        if backward:
            backwards[name] += 1
    assert checked > 4000
    # the schemes run in practice alone: more than 4,000 cases, each of them in hundreds
    assert sum(by_name[n] for n in SCHEMES) > 4000 and min(by_name[n] for n in SCHEMES) > 800
    # every backward pass too, the all-gather's and USP's (at every shape) among them;
    # all-to-all's wherever its forward pass runs (H >= P)
    assert min(v for n, v in backwards.items() if n != "all_to_all") > 800, backwards
    assert 2 * backwards["all_to_all"] == by_name["all_to_all"] > 600, backwards
    assert sum(backwards[n] for n in ("all_gather", "usp", "usp_zigzag")) > 4000, backwards


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
    with pytest.raises(ValueError, match="M must be at least 0"):
        bounds.memory_dependent(8, 2, 2, 4, M=-1)
    with pytest.raises(TypeError, match="P must be an integer"):
        bounds.memory_independent(8, 2, 2.5)
    # more processors than rows: refused as cost refuses it, not a bound of 128
    for f in (bounds.lower_bound, bounds.memory_independent, bounds.with_values):
        with pytest.raises(ValueError, match="N = 8 < P = 16"):
            f(8, 64, 16)
    with pytest.raises(ValueError, match="N = 8 < P = 16"):
        cost("ring", 8, 64, 16)
    for kwargs in ({"causal": "no"}, {"causal": 0}, {"values": "yes"}):
        with pytest.raises(TypeError, match="must be True or False"):
            bounds.lower_bound(64, 4, 4, 100, **kwargs)
    with pytest.raises(TypeError, match="causal must be True or False"):
        bounds.busiest_scores(64, 4, causal="no")


def test_rows_with_values_lemma():
    # a b >= F: (a - n)^+ + 2 (b - n)^+ >= (2 sqrt(2F) - 3n)^+, every a, b <= 40, n <= 12
    for n in range(13):
        for a in range(41):
            for b in range(41):
                left = max(a - n, 0) + 2 * max(b - n, 0)
                for F in range(1, a * b + 1):
                    assert left >= max(2 * sqrt(2 * F) - 3 * n, 0) - 1e-9, (a, b, n, F)
    # and it is tight at a = 2b, both above n
    a, b, n = 20, 10, 3
    assert (a - n) + 2 * (b - n) == pytest.approx(2 * sqrt(2 * a * b) - 3 * n)


def test_with_values_vertex_formula_is_the_least_over_every_split():
    for N, P, H, causal, n, Z, best in least_over_every_split(
            lambda f, n: max(2 * sqrt(2 * f) - 3 * n, 0)):
        got = bounds.with_values(N, 1, P, heads=H, causal=causal)
        assert got <= best + 1e-9, (N, P, H, causal)
        if H == 1:
            assert got == pytest.approx(best)
    assert bounds.with_values(4096, 64, 16) == pytest.approx(64 * (2 * sqrt(2 * 4096 ** 2 / 16)
                                                                   - 3 * 256))


@pytest.mark.parametrize("causal", [False, True])
def test_every_algorithm_meets_the_bound_with_values(causal):
    # all four meet (A_V): they form P_ij v_j where S_ij is computed, holding v_j whole
    checked = 0
    for N, d, P, H, name, backward, c in every_cost(causal):
        bound = bounds.lower_bound(N, d, P, c.max_memory, heads=H, causal=causal, values=True)
        assert bound >= bounds.with_values(N, d, P, heads=H, causal=causal)
        assert c.max_received >= bound, (name, N, d, P, H, backward)
        checked += 1
    assert checked > 4000


def test_grid_against_the_bound_with_values():
    # square q x q grid, equal shares: received (4d + 1) n (q - 1), bound d n (2 sqrt(2) q - 3);
    # the ratio falls toward sqrt(2) (1 + 1/(4d)) from above
    for d in (1, 8, 64):
        last = None
        for q in range(2, 40):
            N, P = 5 * q * q, q * q
            n = N // P
            c = cost("grid", N, d, P, grid=(q, q))
            assert c.max_received == (4 * d + 1) * n * (q - 1)
            W = bounds.with_values(N, d, P)
            assert W == pytest.approx(d * n * (2 * sqrt(2) * q - 3))
            ratio = c.max_received / W
            assert ratio > sqrt(2) * (1 + 1 / (4 * d))
            assert last is None or ratio < last
            last = ratio
    ratios = [cost("grid", 4096, 64, P).max_received / bounds.with_values(4096, 64, P)
              for P in (4, 16, 64, 1024)]
    assert [round(r, 3) for r in ratios] == [1.511, 1.449, 1.432, 1.423]


def test_memory_dependent_with_a_cache():
    F = bounds.busiest_scores(4096, 16)
    S, M = 20000, 3000
    assert bounds.memory_dependent(4096, 64, 16, S) == pytest.approx(F * 64 ** 2 / S - S)
    assert bounds.memory_dependent(4096, 64, 16, S, M=0) == bounds.memory_dependent(4096, 64, 16,
                                                                                    S)
    got = bounds.memory_dependent(4096, 64, 16, S, M=M)
    assert got == pytest.approx(4 * F * 64 ** 2 * S / (2 * S + M) ** 2 - S)
    assert got < bounds.memory_dependent(4096, 64, 16, S)


def test_piece_argument_on_small_schedules():
    # the step of the memory-dependent proof: with e entries of Q and K available (2S + M), the
    # rows a_h, b_h held whole satisfy d sum (a_h + b_h) <= e, and sum a_h b_h <= (e / 2d)^2
    for d in (1, 2, 3):
        for e in range(0, 30):
            for rows in itertools.product(range(6), repeat=4):      # (a_1, b_1, a_2, b_2)
                if d * sum(rows) > e:
                    continue
                assert rows[0] * rows[1] + rows[2] * rows[3] <= (e / (2 * d)) ** 2 + 1e-9


def test_own_rows_step_on_every_small_set():
    # under a causal mask, scores in A x B <= (n + x)(n + y) - n (n - 1) / 2 for every own rows
    # R (|R| <= n), query rows A and key rows B with x = |A minus R|, y = |B minus R|; N = 6
    N = 6
    size = [bin(s).count("1") for s in range(1 << N)]
    below = [sum(1 << j for j in range(i + 1)) for i in range(N)]          # keys j <= i
    pairs = [[sum(size[B & below[i]] for i in range(N) if A >> i & 1) for B in range(1 << N)]
             for A in range(1 << N)]
    tight = 0
    for R in range(1 << N):
        for n in range(size[R], N + 1):
            c = n * (n - 1) // 2
            for A in range(1 << N):
                x = size[A & ~R]
                for B in range(1 << N):
                    right = (n + x) * (n + size[B & ~R]) - c
                    assert pairs[A][B] <= right, (R, n, A, B)
                    tight += pairs[A][B] == right
    assert tight >= 800          # attained (e.g. A = B = R), so not a loose stand-in


def test_own_rows_vertex_formula_is_the_least_over_every_split():
    for N, P, H, causal, n, Z, best in least_over_every_split(
            lambda f, n: 2 * max(sqrt(f + n * (n - 1) // 2) - n, 0)):
        if not causal:
            continue
        got = bounds.own_rows(N, 1, P, heads=H, causal=True)
        assert got <= best + 1e-9, (N, P, H)
        if H == 1:
            assert got == pytest.approx(best)
    for N, P, H, causal, n, Z, best in least_over_every_split(
            lambda f, n: max(2 * sqrt(2 * (f + n * (n - 1) // 2)) - 3 * n, 0)):
        if causal:
            assert bounds.own_rows(N, 1, P, heads=H, causal=True, values=True) <= best + 1e-9


def test_own_rows_is_the_first_bound_without_a_mask():
    for N, d, P, H in GRID[::7]:
        assert bounds.own_rows(N, d, P, heads=H) == bounds.memory_independent(N, d, P, heads=H)
        assert bounds.own_rows(N, d, P, heads=H, values=True) == \
            bounds.with_values(N, d, P, heads=H)


def test_own_rows_at_two_processors():
    # one head, P = 2: 2d (sqrt(N (N + 1) / 4 + n (n - 1) / 2) - n), n = N / 2, about 0.2247 dN
    for N, d in [(4096, 64), (1 << 20, 128)]:
        n = N // 2
        want = 2 * d * (sqrt(N * (N + 1) // 4 + n * (n - 1) // 2) - n)
        assert bounds.own_rows(N, d, 2, causal=True) == pytest.approx(want)
        assert want / (d * N) == pytest.approx(sqrt(6) / 2 - 1, abs=1e-3)
        assert bounds.memory_independent(N, d, 2, causal=True) < 1e-3 * want


def test_every_scheme_meets_the_causal_bound():
    # bound <= the words the busiest processor receives, every algorithm and scheme at every
    # shape, causal, forward and backward; and it is stronger than the first bound
    checked, stronger, by_name = 0, 0, dict.fromkeys(NAMES, 0)
    for N, d, P, H, name, backward, c in every_cost(True):
        own = bounds.own_rows(N, d, P, heads=H, causal=True)
        first = bounds.memory_independent(N, d, P, heads=H, causal=True)
        assert own >= first
        assert c.max_received >= own, (name, N, d, P, H, backward)
        assert c.max_received >= bounds.own_rows(N, d, P, heads=H, causal=True, values=True)
        checked += 1
        stronger += own > first * (1 + 1e-9) + 1e-9
        by_name[name] += 1
    assert checked > 4000 and min(by_name.values()) > 300, by_name
    assert stronger > checked // 2
