"""Assignments 3 and 4: questions the package does not answer in one call, graded exactly.

The crossover under a write weight ``W`` (graded on hidden sizes against an exact scan), and a
pebbling game on a graph beyond exact search (graded against the grader's best known game, with
partial credit), with the Hong-Kung partition of the student's own game.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from math import sqrt

import numpy as np
import pytest

import ioattn
from ioattn.bounds import cheapest, crossovers
from ioattn.pebble import (
    Graph,
    PebbleGame,
    SearchLimitError,
    check_partition,
    hong_kung_partition,
    min_io,
)
from ioattn.teach.answers import LocalAnswers
from ioattn.teach.assignments import crossover as cx
from ioattn.teach.assignments import pebbling as pb
from ioattn.teach.assignments.base import Context, get
from ioattn.teach.judge import KINDS, GradingFailure

STUDENTS = [f"student{i:03d}" for i in range(32)]
OUTER = {"schedule": "outer"}


def graded(assignment, question, student, names, seed=0, public=False):
    """``(score fraction, message, kinds)`` of one check, as the grader runs it (hidden mode
    unless ``public``)."""
    spec = get(assignment)
    ctx = Context(spec.variant(student), public, np.random.default_rng(seed))
    try:
        return 1.0, spec.check(question, LocalAnswers(names), ctx), []
    except GradingFailure as f:
        assert all(kind in KINDS for kind, _ in f.reasons)
        return f.score, str(f), [kind for kind, _ in f.reasons]


# ====================================================================== crossover
def weighted(name, N, d, M, W, **options):
    c = ioattn.io_cost(name, N, d, M, **options)
    return c.reads + W * c.writes


def honest_scan(N, d, W):
    """What a student writes: scan down from 4 d^2 with io_cost's reads and writes."""
    M = 4 * d * d
    while M - 1 >= 4 * d + 4 and weighted("flash", N, d, M - 1, W) < \
            weighted("square_tiling", N, d, M - 1, W, **OUTER):
        M -= 1
    return M


def honest_totals(N, d, W):
    """Another honest answer, faster: totals over the range (``ioattn.totals``) plus ``W - 1``
    times the writes, which do not depend on ``M`` for these two schedules
    (:func:`test_writes_do_not_depend_on_M`)."""
    Ms = np.arange(4 * d + 4, 4 * d * d + 1, dtype=np.int64)
    costs = []
    for name, opts in (("flash", {}), ("square_tiling", OUTER)):
        writes = ioattn.io_cost(name, N, d, int(Ms[-1]), **opts).writes
        costs.append(ioattn.totals(name, N, d, Ms, **opts) + (W - 1) * writes)
    dearer = np.flatnonzero(costs[0] >= costs[1])
    return int(Ms[0]) if dearer.size == 0 else int(Ms[dearer[-1]]) + 1


def unweighted_in_one_call(N, d, W):
    """``crossovers`` in one call: the last change to FlashAttention up to 4 d^2 (W ignored)."""
    changes = crossovers(N, d, M_max=4 * d * d, names=["flash", "square_tiling"],
                         options={"square_tiling": OUTER})
    return [c.M for c in changes if c.after == "flash"][-1]


def cheapest_scan(N, d, W):
    """A scan with ``cheapest``: the same unweighted answer (W ignored)."""
    M = 4 * d * d
    while cheapest(N, d, M - 1, names=["flash", "square_tiling"],
                   options={"square_tiling": OUTER}) == "flash":
        M -= 1
    return M


@pytest.mark.parametrize("N,d", [(200, 16), (300, 20), (1000, 33), (257, 64)])
def test_weighted_cost_equals_io_cost_over_the_whole_range(N, d):
    Ms = np.arange(4 * d + 4, 4 * d * d + 1, dtype=np.int64)
    step = 1 if d <= 20 else 7
    for name, opts in (("flash", {}), ("square_tiling", OUTER)):
        got = cx.weighted_cost(name, N, d, Ms, 3, **opts)
        for k in range(0, Ms.size, step):
            assert got[k] == weighted(name, N, d, int(Ms[k]), 3, **opts)


def test_writes_do_not_depend_on_M():
    for N, d in [(200, 16), (1000, 40), (4096, 64)]:
        Ms = range(4 * d + 4, 4 * d * d + 1, 97)
        assert {ioattn.io_cost("flash", N, d, M).writes for M in Ms} == {N * d}
        assert {ioattn.io_cost("square_tiling", N, d, M, **OUTER).writes for M in Ms} == \
            {N * N + N * d + N}


@pytest.mark.parametrize("N,d,W", [(256, 16, 2), (512, 24, 4), (1000, 17, 3), (3001, 40, 2)])
def test_exact_crossover_is_the_honest_scan(N, d, W):
    x = cx.exact_crossover(N, d, W)
    assert x == honest_scan(N, d, W) == honest_totals(N, d, W)
    assert weighted("flash", N, d, x - 1, W) >= weighted("square_tiling", N, d, x - 1, W, **OUTER)


def test_the_question_is_well_defined_over_every_size_asked():
    """FlashAttention is the cheaper at 4 d^2 and the crossover is above 4 d + 4, for every d of
    the hidden range (and so of the variants), N across its range, every weight."""
    for W in cx.WEIGHTS:
        for d in range(cx.HIDDEN_D[0], cx.HIDDEN_D[1] + 1):
            for N in (cx.HIDDEN_N[0], 257, 1000, 2048, cx.HIDDEN_N[1]):
                assert cx.exact_crossover(N, d, W) > 4 * d + 4      # raises if not defined
    assert set(cx.NS) <= set(range(cx.HIDDEN_N[0], cx.HIDDEN_N[1] + 1))
    assert set(cx.DS) <= set(range(cx.HIDDEN_D[0], cx.HIDDEN_D[1] + 1))


def test_honest_answers_get_full_marks_hidden():
    for k, student in enumerate(STUDENTS):
        score, msg, _ = graded("crossover", "q1", student, {"crossover": honest_totals}, seed=k)
        assert score == 1.0, msg
        assert "3 hidden sizes" in msg
        p = get("crossover").variant(student).params
        want = 4 * p["d"] ** 2 / (1 + sqrt(1 + p["W"])) ** 2
        score, msg, _ = graded("crossover", "q2", student, {"M_PREDICTED": want}, seed=k)
        assert score == 1.0, msg


def test_the_plain_scan_gets_full_marks_and_a_check_takes_seconds():
    for student in STUDENTS[:2]:
        score, msg, _ = graded("crossover", "q1", student, {"crossover": honest_scan})
        assert score == 1.0, msg
    # the grader's own share of a hidden check: milliseconds per size
    cx.exact_crossover.cache_clear()
    spec = get("crossover")
    start = time.perf_counter()
    for k, student in enumerate(STUDENTS[:10]):
        p = spec.variant(student).params
        for N, d in [(p["N"], p["d"])] + spec.hidden(p, np.random.default_rng(k)):
            cx.exact_crossover(N, d, p["W"])
    assert time.perf_counter() - start < 5


def test_an_answer_written_in_for_the_own_sizes_fails_the_hidden_ones():
    for student in STUDENTS[:8]:
        p = get("crossover").variant(student).params
        own = cx.exact_crossover(p["N"], p["d"], p["W"])
        table = {"crossover": lambda N, d, W, own=own: own}
        score, msg, _ = graded("crossover", "q1", student, table, public=True)
        assert score == 1.0, msg                          # the own check passes ...
        score, msg, kinds = graded("crossover", "q1", student, table)
        assert score == 0.0 and kinds == ["wrong"]        # ... the graded one does not
        assert "(the answer for your own sizes)" in msg


def test_one_call_of_the_package_does_not_answer():
    """``crossovers`` and ``cheapest`` compare reads + writes (W = 1): wrong for every variant's
    own sizes and weight, and the check says so."""
    for N in cx.NS:
        for d in cx.DS:
            one_call = unweighted_in_one_call(N, d, None)
            assert one_call == cx.exact_crossover(N, d, 1)
            for W in cx.WEIGHTS:
                assert one_call > cx.exact_crossover(N, d, W)
    student = STUDENTS[0]
    p = get("crossover").variant(student).params
    assert cheapest_scan(p["N"], p["d"], p["W"]) == unweighted_in_one_call(p["N"], p["d"], 0)
    for fn in (unweighted_in_one_call, cheapest_scan):
        score, msg, kinds = graded("crossover", "q1", student, {"crossover": fn}, public=True)
        assert score == 0.0 and kinds == ["wrong"], msg


class Liar(int):
    """An int whose comparisons always pass."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


class LiarFloat(float):
    def __eq__(self, other):
        return True

    def __le__(self, other):
        return True

    def __lt__(self, other):
        return True

    __hash__ = float.__hash__


def test_an_int_whose_comparisons_lie_is_refused():
    score, msg, kinds = graded("crossover", "q1", STUDENTS[0],
                               {"crossover": lambda N, d, W: Liar(1)}, public=True)
    assert score == 0.0 and kinds == ["error"] and "not plain data" in msg
    score, msg, kinds = graded("crossover", "q2", STUDENTS[0], {"M_PREDICTED": LiarFloat(1.0)})
    assert score == 0.0 and kinds == ["wrong"] and "not plain data" in msg


@pytest.mark.parametrize("bad", [lambda x: float(x), lambda x: True, lambda x: str(x),
                                 lambda x: None, lambda x: [x]])
def test_crossover_must_return_an_exact_int(bad):
    student = STUDENTS[1]
    p = get("crossover").variant(student).params
    x = cx.exact_crossover(p["N"], p["d"], p["W"])
    score, msg, kinds = graded("crossover", "q1", student,
                               {"crossover": lambda N, d, W: bad(x)}, public=True)
    assert score == 0.0 and kinds == ["wrong"] and "an int" in msg
    # a NumPy integer is an exact int: it arrives as one
    score, msg, _ = graded("crossover", "q1", student,
                           {"crossover": lambda N, d, W: np.int64(x)}, public=True)
    assert score == 1.0, msg


def test_an_error_in_crossover_is_reported():
    def broken(N, d, W):
        raise ZeroDivisionError("oops")

    score, msg, kinds = graded("crossover", "q1", STUDENTS[0], {"crossover": broken})
    assert score == 0.0 and kinds == ["error"] and "ZeroDivisionError: oops" in msg
    score, msg, kinds = graded("crossover", "q1", STUDENTS[0], {})
    assert kinds == ["error"] and "not defined" in msg


def test_M_PREDICTED_is_graded_within_one_percent():
    student = STUDENTS[2]
    p = get("crossover").variant(student).params
    d, W = p["d"], p["W"]
    want = 4 * d * d / (1 + sqrt(1 + W)) ** 2
    for value, ok in [(want, True), (want * 1.009, True), (round(want), abs(round(want) - want)
                                                            <= 0.01 * want),
                      (want * 1.02, False), (cx.LEADING * d * d, False),
                      (cx.exact_crossover(p["N"], d, W), False)]:
        score, msg, _ = graded("crossover", "q2", student, {"M_PREDICTED": value})
        assert (score == 1.0) == ok, (value, msg)
    for value, kind in [(None, "error"), (True, "wrong"), ("0.5 d^2", "wrong"),
                        (float("nan"), "wrong")]:
        score, msg, kinds = graded("crossover", "q2", student, {"M_PREDICTED": value})
        assert score == 0.0 and kinds == [kind], msg


def test_the_leading_terms_cross_where_the_closed_form_says_and_the_exact_scan_tends_there():
    for W in (1, *cx.WEIGHTS):
        # the leading terms per N^2: 4 d^2 / M against 4 d / sqrt(M) + W, with d = 1
        lo, hi = 1e-3, 4.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 4 / mid > 4 / sqrt(mid) + W else (lo, mid)
        assert abs(lo - cx._leading_crossover(1, W)) < 1e-12
    assert cx._leading_crossover(10, 1) == pytest.approx(cx.LEADING * 100)
    for W in cx.WEIGHTS:
        errors = [abs(cx.exact_crossover(N, d, W) / cx._leading_crossover(d, W) - 1)
                  for N, d in [(4096, 64), (16384, 128), (65536, 256)]]
        assert errors[0] > errors[-1] and errors[-1] < 0.04, errors


def test_the_crossover_variants_are_deterministic_and_differ():
    spec = get("crossover")
    first = [spec.variant(s).params for s in STUDENTS]
    assert first == [spec.variant(s).params for s in STUDENTS]
    assert len({tuple(sorted(p.items())) for p in first}) >= 15
    assert {p["W"] for p in first} == set(cx.WEIGHTS)


# ====================================================================== pebbling
def best_answers(params):
    """The grader's best known game and its Hong-Kung partition."""
    moves = list(pb._best_game(pb._edges_key(params), params["M"]))
    game = PebbleGame.replay(pb.graph_of(params), params["M"], moves)
    return moves, [set(part) for part in hong_kung_partition(game).parts]


def lru_game(g: Graph, M: int) -> list:
    """An honest but plain game: the graph's own order, every vertex computed once, the least
    recently used value evicted (and written first if it is needed again and not blue)."""
    order = [v for v in g.order if not g.is_input(v)]
    left = {v: 0 for v in g.order}
    for v in order:
        for p in g.parents(v):
            left[p] += 1
    red, blue, moves, last = [], set(g.inputs), [], {}

    def place(v, keep, kind):
        if len(red) == M:
            victim = min((u for u in red if u not in keep), key=lambda u: last[u])
            if left[victim] and victim not in blue:
                moves.append(("write", victim))
                blue.add(victim)
            moves.append(("delete", victim))
            red.remove(victim)
        moves.append((kind, v))
        red.append(v)

    for t, v in enumerate(order):
        for p in g.parents(v):
            if p not in red:
                place(p, g.parents(v), "read")
            last[p] = t
        place(v, g.parents(v), "compute")
        last[v] = t
        for p in g.parents(v):
            left[p] -= 1
        if v in g.outputs:
            moves.append(("write", v))
            blue.add(v)
    return moves


def test_the_best_known_game_gets_full_marks_for_both_questions():
    for k, student in enumerate(STUDENTS):
        p = get("pebbling").variant(student).params
        moves, parts = best_answers(p)
        names = {"MOVES": moves, "PARTS": parts}
        score, msg, _ = graded("pebbling", "q1", student, names, seed=k)
        assert score == 1.0 and f"best known with M = {p['M']} is {pb.best_known(p)}" in msg
        score, msg, _ = graded("pebbling", "q2", student, names, seed=k)
        assert score == 1.0, msg
        # tuples in, and PARTS as lists: the same answers
        names = {"MOVES": [tuple(m) for m in moves], "PARTS": [sorted(s) for s in parts]}
        assert graded("pebbling", "q2", student, names)[0] == 1.0


def test_a_worse_legal_game_gets_partial_credit():
    for student in STUDENTS[:6]:
        p = get("pebbling").variant(student).params
        g, best = pb.graph_of(p), pb.best_known(p)
        moves, _ = best_answers(p)
        a = g.inputs[0]
        for extra, want in [(1, (100 * (best - 1)) // best / 100), (best // 2, None),
                            (best - 1, None), (best, 0.0), (2 * best, 0.0)]:
            padded = moves + [("read", a), ("delete", a)] * extra   # the cache is empty at the end
            score, msg, kinds = graded("pebbling", "q1", student, {"MOVES": padded})
            assert score == pb.score(best + extra, best)
            assert want is None or score == want
            if extra < best:
                assert 0 < score < 1 and kinds == ["partial"]
                assert f"I/O {best + extra}" in msg and f"best known {best}" in msg
            else:
                assert score == 0 and kinds == ["wrong"]


def test_a_plain_game_scores_by_the_rule():
    """Least recently used eviction in the graph's own order: worse than the best known, often
    by half or more."""
    for student in STUDENTS[:12]:
        p = get("pebbling").variant(student).params
        g, M, best = pb.graph_of(p), p["M"], pb.best_known(p)
        moves = lru_game(g, M)
        io = PebbleGame.replay(g, M, moves).io
        assert io > best                        # the heuristic beats the plain game
        score, msg, kinds = graded("pebbling", "q1", student, {"MOVES": moves})
        assert score == pb.score(io, best) == max(0, 100 * (2 * best - io) // best) / 100
        assert kinds == (["partial"] if io < 2 * best else ["wrong"]) and score < 1


def test_the_score_rule():
    assert pb.score(20, 20) == pb.score(3, 20) == 1.0
    assert pb.score(21, 20) == 0.95 and pb.score(26, 25) == 0.96
    assert pb.score(30, 20) == 0.5 and pb.score(40, 20) == 0.0 and pb.score(90, 20) == 0.0
    assert all(pb.score(b + 1, b) < 1 for b in range(1, 500))


def test_illegal_incomplete_or_recomputing_games_get_nothing():
    student = STUDENTS[3]
    p = get("pebbling").variant(student).params
    g, M = pb.graph_of(p), p["M"]
    moves, _ = best_answers(p)
    first_op = next(v for kind, v in moves if kind == "compute")
    bad = {
        "compute first": [("compute", first_op)] + moves,
        "read an output": [("read", g.outputs[0])] + moves,
        "too many red": [("read", v) for v in g.inputs[:M + 1]] + moves,
        "unknown move": [("fetch", "a")] + moves,
        "unknown vertex": [("read", "zz")] + moves,
        "incomplete": [m for m in moves if m != ("write", g.outputs[-1])],
        "not pairs": [["read"]] + moves,
        "not a list": "read a",
    }
    for label, answer in bad.items():
        score, msg, kinds = graded("pebbling", "q1", student, {"MOVES": answer})
        assert score == 0.0 and kinds == ["wrong"], (label, msg)
        assert graded("pebbling", "q2", student, {"MOVES": answer, "PARTS": []})[0] == 0.0
    # a legal complete game that computes a vertex twice
    k = moves.index(("compute", first_op))
    again = moves[:k + 1] + [("delete", first_op), ("compute", first_op)] + moves[k + 1:]
    assert PebbleGame.replay(g, M, again).is_complete()
    score, msg, kinds = graded("pebbling", "q1", student, {"MOVES": again})
    assert score == 0.0 and "more than once" in msg
    score, msg, kinds = graded("pebbling", "q1", student, {})
    assert kinds == ["error"] and "not defined" in msg


def test_an_answer_that_is_not_plain_data_is_refused():
    class Vertex(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    student = STUDENTS[3]
    p = get("pebbling").variant(student).params
    moves, parts = best_answers(p)
    lying = [(kind, Vertex(v)) for kind, v in moves]
    score, msg, kinds = graded("pebbling", "q1", student, {"MOVES": lying})
    assert score == 0.0 and kinds == ["wrong"] and "not plain data" in msg


def test_parts_must_be_the_construction_from_the_own_game():
    for student in STUDENTS[:6]:
        p = get("pebbling").variant(student).params
        g, M = pb.graph_of(p), p["M"]
        moves, parts = best_answers(p)
        other = lru_game(g, M)
        other_parts = [set(s) for s in hong_kung_partition(PebbleGame.replay(g, M, other)).parts]
        assert {frozenset(s) for s in other_parts} != {frozenset(s) for s in parts}
        # each game's own partition: accepted
        for m, ps in ((moves, parts), (other, other_parts)):
            assert check_partition(g, ps, 2 * M).ok
            score, msg, _ = graded("pebbling", "q2", student, {"MOVES": m, "PARTS": ps})
            assert score == 1.0, msg
        # another game's: rejected, valid or not
        score, msg, kinds = graded("pebbling", "q2", student,
                                   {"MOVES": moves, "PARTS": other_parts})
        assert score == 0.0 and kinds == ["wrong"], msg
        merged = [parts[0] | parts[1], *parts[2:]]
        score, msg, kinds = graded("pebbling", "q2", student, {"MOVES": moves, "PARTS": merged})
        assert score == 0.0 and kinds == ["wrong"]
    score, msg, kinds = graded("pebbling", "q2", student, {"MOVES": moves, "PARTS": "v1"})
    assert kinds == ["wrong"] and "list of sets" in msg
    score, msg, kinds = graded("pebbling", "q2", student, {"MOVES": moves, "PARTS": 3})
    assert kinds == ["wrong"] and "list of sets" in msg


def test_exact_search_does_not_reach_the_variants():
    """``min_io`` gives up on a variant's graph after 200,000 states (seconds of search), with a
    lower bound below the best known game; the graph has 30 to 40 vertices."""
    p = get("pebbling").variant(STUDENTS[0]).params
    g, M = pb.graph_of(p), p["M"]
    assert 30 <= len(g) <= 40
    with pytest.raises(SearchLimitError) as err:
        min_io(g, M, max_states=200_000, progress=False)
    assert len(g.inputs) + len(g.outputs) < err.value.bound <= pb.best_known(p)


def test_variants_are_fast_deterministic_distinct_and_need_spills():
    spec = get("pebbling")
    start = time.perf_counter()
    params = [spec.variant(f"id{k}").params for k in range(200)]
    seconds = time.perf_counter() - start
    assert seconds < 200 * 0.5, seconds                 # well under a second each
    assert params[:20] == [spec.variant(f"id{k}").params for k in range(20)]
    assert len({repr(p["EDGES"]) for p in params}) == 200
    assert {p["M"] for p in params} == set(pb.PEBBLES)
    for p in params:
        g = pb.graph_of(p)
        assert 30 <= len(g) <= 40 and g.max_in_degree == 2 and 2 <= len(g.outputs) <= 4
        assert all(len(g.children(v)) for v in g.order if v not in g.outputs)
        with pytest.raises(SearchLimitError) as err:    # spills proven: bound above trivial
            min_io(g, p["M"], max_states=pb.PROBE_STATES, progress=False)
        assert err.value.bound > len(g.inputs) + len(g.outputs)


def test_best_known_is_the_same_in_another_process():
    p = get("pebbling").variant(STUDENTS[5]).params
    here = (pb.best_known(p), pb._best_game(pb._edges_key(p), p["M"]))
    code = ("from ioattn.teach.assignments.base import get\n"
            "from ioattn.teach.assignments import pebbling as pb\n"
            f"p = get('pebbling').variant({STUDENTS[5]!r}).params\n"
            "print(repr((pb.best_known(p), pb._best_game(pb._edges_key(p), p['M']))))\n")
    for hashseed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": hashseed}, check=True)
        assert out.stdout.strip() == repr(here)


def test_the_pebbling_check_is_quick():
    spec = get("pebbling")
    student = "quick-check"
    p = spec.variant(student).params
    start = time.perf_counter()
    moves, parts = best_answers(p)
    graded("pebbling", "q1", student, {"MOVES": moves})
    graded("pebbling", "q2", student, {"MOVES": moves, "PARTS": parts})
    assert time.perf_counter() - start < 5
