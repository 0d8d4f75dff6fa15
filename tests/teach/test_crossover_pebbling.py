"""Assignments 3 and 4: questions the package does not answer in one call, graded exactly.

The crossover under a write weight ``W`` and its leading-terms prediction (graded on hidden
sizes against an exact scan), and a pebbling schedule for graphs beyond exact search (graded on
hidden graphs against the grader's best known games, with partial credit), with the partition of
a game cut every ``T`` reads and writes for a ``T`` the package's construction does not take.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
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
from ioattn.teach.keys import crossover as key
from ioattn.teach.keys import pebbling as kp

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


def predicted(d, W):
    """What a student writes for the leading terms' crossover."""
    return 4 * d * d / (1 + sqrt(1 + W)) ** 2


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
        got = key.weighted_cost(name, N, d, Ms, 3, **opts)
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
    x = key.exact_crossover(N, d, W)
    assert x == honest_scan(N, d, W) == honest_totals(N, d, W)
    assert weighted("flash", N, d, x - 1, W) >= weighted("square_tiling", N, d, x - 1, W, **OUTER)


def test_the_question_is_well_defined_over_every_size_asked():
    """FlashAttention is the cheaper at 4 d^2 and the crossover is above 4 d + 4 for every
    variant, and for every hidden instance drawn (drawn again where it would not be), at the
    corners of the hidden ranges too."""
    for W in cx.WEIGHTS:
        for d in cx.DS:
            for N in cx.NS:
                assert key.exact_crossover(N, d, W) > 4 * d + 4      # raises if not defined
    spec = get("crossover")
    for k in range(40):
        p = spec.variant(STUDENTS[k % len(STUDENTS)]).params
        for N, d, W in spec.hidden(p, np.random.default_rng(k)):
            assert cx.HIDDEN_N[0] <= N <= cx.HIDDEN_N[1] and d != p["d"]
            assert cx.HIDDEN_D[0] <= d <= cx.HIDDEN_D[1] and cx.HIDDEN_W[0] <= W <= cx.HIDDEN_W[1]
            assert key.exact_crossover(N, d, W) > 4 * d + 4
    for N in cx.HIDDEN_N:
        for d in cx.HIDDEN_D:
            for W in cx.HIDDEN_W:
                key.exact_crossover(N, d, W)                         # defined at the corners
    assert set(cx.NS) <= set(range(cx.HIDDEN_N[0], cx.HIDDEN_N[1] + 1))
    assert set(cx.DS) <= set(range(cx.HIDDEN_D[0], cx.HIDDEN_D[1] + 1))
    assert set(cx.WEIGHTS) <= set(range(cx.HIDDEN_W[0], cx.HIDDEN_W[1] + 1))


def test_honest_answers_get_full_marks_hidden():
    for k, student in enumerate(STUDENTS):
        score, msg, _ = graded("crossover", "q1", student, {"crossover": honest_totals}, seed=k)
        assert score == 1.0, msg
        assert "3 hidden sizes" in msg
        score, msg, _ = graded("crossover", "q2", student, {"m_predicted": predicted}, seed=k)
        assert score == 1.0 and "3 hidden (d, W)" in msg, msg


def test_the_plain_scan_gets_full_marks_and_the_key_costs_every_M_at_once(monkeypatch):
    for student in STUDENTS[:2]:
        score, msg, _ = graded("crossover", "q1", student, {"crossover": honest_scan})
        assert score == 1.0, msg
    # the grader's own share of a hidden check, whatever 4 d^2 is: each schedule costed at every
    # cache size in one call on an array, and io_cost itself only at the answer's edge
    arrays, scalars = [], []
    array_cost, one_cost = key.weighted_cost, key._one_cost
    monkeypatch.setattr(key, "weighted_cost",
                        lambda name, N, d, Ms, W, **o: arrays.append(len(Ms))
                        or array_cost(name, N, d, Ms, W, **o))
    monkeypatch.setattr(key, "_one_cost",
                        lambda *args: scalars.append(args) or one_cost(*args))
    spec = get("crossover")
    for k, student in enumerate(STUDENTS[:10]):
        p = spec.variant(student).params
        for N, d, W in [(p["N"], p["d"], p["W"])] + spec.hidden(p, np.random.default_rng(k)):
            arrays.clear()
            scalars.clear()
            key.exact_crossover.cache_clear()
            key.exact_crossover(N, d, W)
            assert arrays == [4 * d * d - 4 * d - 3] * 2 and 5 <= len(scalars) <= 6


def test_an_answer_written_in_for_the_own_sizes_fails_the_hidden_ones():
    for student in STUDENTS[:8]:
        p = get("crossover").variant(student).params
        own = key.exact_crossover(p["N"], p["d"], p["W"])
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
            assert one_call == key.exact_crossover(N, d, 1)
            for W in cx.WEIGHTS:
                assert one_call > key.exact_crossover(N, d, W)
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
    score, msg, kinds = graded("crossover", "q2", STUDENTS[0],
                               {"m_predicted": lambda d, W: LiarFloat(1.0)})
    assert score == 0.0 and kinds == ["error"] and "not plain data" in msg


@pytest.mark.parametrize("bad", [lambda x: float(x), lambda x: True, lambda x: str(x),
                                 lambda x: None, lambda x: [x]])
def test_crossover_must_return_an_exact_int(bad):
    student = STUDENTS[1]
    p = get("crossover").variant(student).params
    x = key.exact_crossover(p["N"], p["d"], p["W"])
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


def test_m_predicted_is_graded_within_one_percent_on_hidden_d_and_W():
    student = STUDENTS[2]
    p = get("crossover").variant(student).params
    d, W = p["d"], p["W"]
    for scale, ok in [(1.0, True), (1.009, True), (0.991, True), (1.02, False)]:
        answer = {"m_predicted": lambda d, W, s=scale: s * predicted(d, W)}
        score, msg, _ = graded("crossover", "q2", student, answer)
        assert (score == 1.0) == ok, (scale, msg)
    rounded = {"m_predicted": lambda d, W: round(predicted(d, W))}     # within 1% at d >= 16
    assert graded("crossover", "q2", student, rounded)[0] == 1.0
    own = predicted(d, W)                           # written in for the own (d, W) only
    score, msg, kinds = graded("crossover", "q2", student, {"m_predicted": lambda d, W: own},
                               public=True)
    assert score == 1.0, msg
    score, msg, kinds = graded("crossover", "q2", student, {"m_predicted": lambda d, W: own})
    assert score == 0.0 and kinds == ["wrong"] and "(hidden sizes)" in msg
    for wrong in (lambda d, W: cx.LEADING * d * d,                     # the W = 1 answer
                  lambda d, W: key.exact_crossover(p["N"], d, W)):
        assert graded("crossover", "q2", student, {"m_predicted": wrong})[0] == 0.0
    for value, kind in [(None, "wrong"), (True, "wrong"), ("0.5 d^2", "wrong"),
                        (float("nan"), "wrong")]:
        score, msg, kinds = graded("crossover", "q2", student,
                                   {"m_predicted": lambda d, W, v=value: v})
        assert score == 0.0 and kinds == [kind], msg
    score, msg, kinds = graded("crossover", "q2", student, {})
    assert score == 0.0 and kinds == ["error"] and "not defined" in msg


def test_the_leading_terms_cross_where_the_closed_form_says_and_the_exact_scan_tends_there():
    for W in (1, *cx.WEIGHTS):
        # the leading terms per N^2: 4 d^2 / M against 4 d / sqrt(M) + W, with d = 1
        lo, hi = 1e-3, 4.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 4 / mid > 4 / sqrt(mid) + W else (lo, mid)
        assert abs(lo - key.leading_crossover(1, W)) < 1e-12
    assert key.leading_crossover(10, 1) == pytest.approx(cx.LEADING * 100)
    for W in cx.WEIGHTS:
        errors = [abs(key.exact_crossover(N, d, W) / key.leading_crossover(d, W) - 1)
                  for N, d in [(4096, 64), (16384, 128), (65536, 256)]]
        assert errors[0] > errors[-1] and errors[-1] < 0.04, errors


def test_the_crossover_variants_are_deterministic_and_differ():
    spec = get("crossover")
    first = [spec.variant(s).params for s in STUDENTS]
    assert first == [spec.variant(s).params for s in STUDENTS]
    assert len({tuple(sorted(p.items())) for p in first}) >= 15
    assert {p["W"] for p in first} == set(cx.WEIGHTS)


# ====================================================================== pebbling
def best(edges, M):
    """The grader's best known game (what a student's function would have to match)."""
    return [list(m) for m in kp.best_game(edges, M)]


def segments(moves, M, T):
    """What a student writes for ``partition``: cut every T reads and writes."""
    parts, current, io = [], set(), 0
    for kind, v in moves:
        if kind in ("read", "write"):
            if io and io % T == 0:
                if current:
                    parts.append(current)
                current = set()
            io += 1
        elif kind == "compute":
            current.add(v)
    return parts + ([current] if current else [])


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


def lru(edges, M):
    return lru_game(Graph([tuple(e) for e in edges]), M)


def test_the_best_known_schedule_gets_full_marks_for_both_questions():
    for k, student in enumerate(STUDENTS[:8]):
        p = get("pebbling").variant(student).params
        score, msg, _ = graded("pebbling", "q1", student, {"pebble": best}, seed=k)
        assert score == 1.0, msg
        assert msg.count("best known") == 1 + pb.HIDDEN and "hidden graph 2" in msg
        assert f"your graph: I/O {kp.best_known(p['EDGES'], p['M'])}" in msg
        score, msg, _ = graded("pebbling", "q2", student, {"partition": segments}, seed=k)
        assert score == 1.0 and f"T = {p['T']}" in msg, msg
        # tuples in, and parts as sorted lists: the same answers
        tupled = {"pebble": lambda e, M: [tuple(m) for m in best(e, M)],
                  "partition": lambda m, M, T: [sorted(s) for s in segments(m, M, T)]}
        assert graded("pebbling", "q1", student, tupled, seed=k)[0] == 1.0
        assert graded("pebbling", "q2", student, tupled, seed=k)[0] == 1.0


def test_the_segment_construction_is_hong_kung_at_T_equal_M():
    for student in STUDENTS[:6]:
        p = get("pebbling").variant(student).params
        g, M = pb.graph_of(p), p["M"]
        for moves in (best(p["EDGES"], M), kp.plain_game(p["EDGES"], M)):
            game = PebbleGame.replay(g, M, moves)
            hk = {frozenset(s) for s in hong_kung_partition(game).parts}
            assert set(kp.segment_parts(moves, M)) == hk
            for T in range(1, M + 1):                   # every T: a valid (M + T)-partition,
                parts = kp.segment_parts(moves, T)      # and io >= T (h - 1)
                assert check_partition(g, parts, M + T).ok, (student, T)
                assert game.io >= T * (len(parts) - 1)


def test_a_worse_schedule_gets_partial_credit_by_the_mean():
    for k, student in enumerate(STUDENTS[:4]):
        p = get("pebbling").variant(student).params
        score, msg, kinds = graded("pebbling", "q1", student, {"pebble": lru}, seed=k)
        graphs = [p["EDGES"], *pb.hidden_graphs(np.random.default_rng(k), p["M"])]
        each = []
        for edges in graphs:
            io = PebbleGame.replay(Graph(edges), p["M"], lru(edges, p["M"])).io
            each.append(pb.score(io, kp.best_known(edges, p["M"])))
        want = int(100 * sum(each) / len(each)) / 100
        assert score == want < 1 and kinds == (["partial"] if want > 0 else ["wrong"]), msg
        assert f"mean {want:.2f}" in msg


def test_padding_costs_exactly_by_the_rule():
    student = STUDENTS[1]
    p = get("pebbling").variant(student).params
    B = kp.best_known(p["EDGES"], p["M"])
    a = pb.graph_of(p).inputs[0]
    for extra in (1, B // 2, B):
        def padded(edges, M, extra=extra):
            return best(edges, M) + [["read", a], ["delete", a]] * extra
        score, msg, kinds = graded("pebbling", "q1", student, {"pebble": padded}, public=True)
        assert score == pb.score(B + extra, B) and f"I/O {B + extra}" in msg


def test_the_score_rule():
    assert pb.score(20, 20) == pb.score(3, 20) == pb.score(25, 20) == 1.0   # a quarter over
    assert pb.full_marks(20) == 25 and pb.full_marks(25) == 31 and pb.full_marks(3) == 3
    assert pb.score(26, 20) == 0.93 and pb.score(32, 25) == 0.94            # 14/15, 18/19
    assert pb.score(30, 20) == 0.66 and pb.score(40, 20) == 0.0 and pb.score(90, 20) == 0.0
    assert pb.score(40, 25) == 0.52
    assert all(pb.score(pb.full_marks(b) + 1, b) < 1 <= pb.score(pb.full_marks(b), b)
               for b in range(1, 500))
    assert all(pb.score(2 * b, b) == 0 < pb.score(2 * b - 1, b) for b in range(2, 100))


def test_illegal_incomplete_or_recomputing_games_get_nothing():
    student = STUDENTS[3]
    p = get("pebbling").variant(student).params
    g, M = pb.graph_of(p), p["M"]
    moves = best(p["EDGES"], M)
    first_op = next(v for kind, v in moves if kind == "compute")
    k = moves.index(["compute", first_op])
    bad = {
        "compute first": [["compute", first_op]] + moves,
        "read an output": [["read", g.outputs[0]]] + moves,
        "too many red": [["read", v] for v in g.inputs[:M + 1]] + moves,
        "unknown move": [["fetch", "a"]] + moves,
        "unknown vertex": [["read", "zz"]] + moves,
        "incomplete": [m for m in moves if m != ["write", g.outputs[-1]]],
        "not pairs": [["read"]] + moves,
        "not a list": "read a",
        "twice": moves[:k + 1] + [["delete", first_op], ["compute", first_op]] + moves[k + 1:],
    }
    assert PebbleGame.replay(g, M, bad["twice"]).is_complete()
    for label, answer in bad.items():
        score, msg, kinds = graded("pebbling", "q1", student,
                                   {"pebble": lambda e, M, a=answer: a}, public=True)
        assert score == 0.0 and kinds == ["wrong"], (label, msg)
    assert "more than once" in msg
    def broken(edges, M):
        raise KeyError("v9")
    score, msg, kinds = graded("pebbling", "q1", student, {"pebble": broken}, public=True)
    assert score == 0.0 and "KeyError" in msg
    score, msg, kinds = graded("pebbling", "q1", student, {})
    assert score == 0.0 and "not defined" in msg


def test_an_answer_that_is_not_plain_data_is_refused():
    class Vertex(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    student = STUDENTS[3]
    lying = {"pebble": lambda e, M: [(kind, Vertex(v)) for kind, v in best(e, M)]}
    score, msg, kinds = graded("pebbling", "q1", student, lying, public=True)
    assert score == 0.0 and "not plain data" in msg


def test_partition_must_be_the_construction_with_the_segment_length_asked():
    for k, student in enumerate(STUDENTS[:6]):
        p = get("pebbling").variant(student).params
        M, T = p["M"], p["T"]
        assert 1 <= T < M
        hong_kung = {"partition": lambda m, M, T: segments(m, M, M)}   # T = M: the package's
        score, msg, kinds = graded("pebbling", "q2", student, hong_kung, seed=k)
        assert score == 0.0 and kinds == ["wrong"], msg
        merged = {"partition": lambda m, M, T: (lambda ps: [ps[0] | ps[1], *ps[2:]])(
            segments(m, M, T))}
        assert graded("pebbling", "q2", student, merged, seed=k)[0] == 0.0
        own_T = {"partition": lambda m, M, T, own=T: segments(m, M, own)}   # own T only
        assert graded("pebbling", "q2", student, own_T, public=True)[0] == 1.0
    for bad in ("v1", 3, [["v1", 2]]):
        score, msg, kinds = graded("pebbling", "q2", student,
                                   {"partition": lambda m, M, T, b=bad: b}, public=True)
        assert kinds == ["wrong"] and "list of sets" in msg


def test_hidden_cases_use_other_segment_lengths():
    """Over many grading seeds, the hidden T of q2 range over 1 .. M - 1, so an answer fixed to
    the student's own T fails some."""
    student = STUDENTS[0]
    p = get("pebbling").variant(student).params
    own_T = {"partition": lambda m, M, T, own=p["T"]: segments(m, M, own)}
    scores = [graded("pebbling", "q2", student, own_T, seed=s)[0] for s in range(6)]
    assert 0.0 in scores


def test_exact_search_does_not_reach_the_variants():
    """``min_io`` gives up on a variant's graph after 200,000 states (seconds of search), with a
    lower bound below the best known game; the graph has 30 to 40 vertices."""
    p = get("pebbling").variant(STUDENTS[0]).params
    g, M = pb.graph_of(p), p["M"]
    assert 30 <= len(g) <= 40
    with pytest.raises(SearchLimitError) as err:
        min_io(g, M, max_states=200_000, progress=False)
    assert len(g.inputs) + len(g.outputs) < err.value.bound <= kp.best_known(p["EDGES"], M)


def test_variants_are_deterministic_distinct_and_need_spills():
    spec = get("pebbling")
    params = [spec.variant(f"id{k}").params for k in range(200)]
    assert params[:20] == [spec.variant(f"id{k}").params for k in range(20)]
    assert len({repr(p["EDGES"]) for p in params}) == 200
    assert {p["M"] for p in params} == set(pb.PEBBLES)
    assert {p["T"] for p in params} == set(pb.SEGMENTS)
    for p in params:
        g = pb.graph_of(p)
        assert 30 <= len(g) <= 40 and g.max_in_degree == 2 and 2 <= len(g.outputs) <= 4
        assert all(len(g.children(v)) for v in g.order if v not in g.outputs)
        with pytest.raises(SearchLimitError) as err:    # spills proven: bound above trivial
            min_io(g, p["M"], max_states=pb.PROBE_STATES, progress=False)
        assert err.value.bound > len(g.inputs) + len(g.outputs)


def test_best_known_is_the_same_in_another_process():
    p = get("pebbling").variant(STUDENTS[5]).params
    here = (kp.best_known(p["EDGES"], p["M"]), kp.best_game(p["EDGES"], p["M"]))
    code = ("from ioattn.teach.assignments.base import get\n"
            "from ioattn.teach.keys import pebbling as kp\n"
            f"p = get('pebbling').variant({STUDENTS[5]!r}).params\n"
            "print(repr((kp.best_known(p['EDGES'], p['M']), kp.best_game(p['EDGES'], p['M']))))\n")
    for hashseed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": hashseed}, check=True)
        assert out.stdout.strip() == repr(here)


def test_the_pebbling_check_runs_no_unbounded_search(monkeypatch):
    """Drawing the hidden graphs and their best known games: seconds, not minutes, on any
    machine, as every exact search the check starts gives up within PROBE_STATES states (the
    best known games come from a fixed number of heuristic tries)."""
    budgets = []

    def probe(g, M, **options):
        budgets.append(options.get("max_states"))
        return min_io(g, M, **options)

    monkeypatch.setattr(pb, "min_io", probe)
    kp._best_game.cache_clear()
    for question, names in (("q1", {"pebble": best}), ("q2", {"partition": segments})):
        score, msg, _ = graded("pebbling", question, "quick-check", names, seed=3)
        assert score == 1.0, msg
    assert budgets and set(budgets) == {pb.PROBE_STATES}


# ====================================================================== graded end to end
def _as(fn, name: str) -> str:
    """The source of the test's own honest function ``fn``, renamed ``name``: a notebook cell."""
    return inspect.getsource(fn).replace(f"def {fn.__name__}(", f"def {name}(", 1)


CROSSOVER_CELL = ("from math import sqrt\nimport numpy as np\nimport ioattn\n"
                  f"OUTER = {OUTER!r}\n\n" + _as(honest_totals, "crossover")
                  + "\n" + _as(predicted, "m_predicted"))

PEBBLING_CELL = _as(segments, "partition") + '''

def pebble(edges, M):
    from ioattn.teach.keys.pebbling import best_game     # the grader's: out of reach
    return [list(m) for m in best_game(edges, M)]
'''


def test_crossover_and_pebbling_graded_in_the_confined_process(tmp_path):
    """The whole path: the notebook's functions run in their own process (confined where the
    kernel has Landlock), called on hidden sizes and graphs; the grader's keys stay out of
    reach."""
    from ioattn.teach import sandbox
    from ioattn.teach.grade import grade

    from .helpers import notebook

    path = notebook(tmp_path / "c.ipynb", "crossover", "ada", CROSSOVER_CELL)
    report = grade("crossover", path, seed=4)
    assert report.error is None and not report.cell_errors, report.text()
    assert [q.score for q in report.questions] == [3, 1, None], report.text()
    path = notebook(tmp_path / "p.ipynb", "pebbling", "ada", PEBBLING_CELL)
    report = grade("pebbling", path, seed=4)
    assert report.error is None and not report.cell_errors, report.text()
    q1, q2 = report.questions
    assert q2.score == 2, report.text()
    if sandbox.abi():
        assert "Landlock" in report.isolation
        assert q1.score == 0 and "PermissionError" in " ".join(q1.reasons), report.text()
    else:
        assert "no file confinement" in report.isolation
