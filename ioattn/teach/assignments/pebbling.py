"""Assignment 4: lower bounds by hand and by machine, on a small graph of the student's own.

Each student gets a computation graph of a dozen vertices (inputs ``a, b, c, ...``, operations
``v1, v2, ...`` with two operands each) and a number ``M`` of red pebbles. They hand in

- ``MOVES``: an optimal game of the red-blue pebble game, a list of ``(move, vertex)`` pairs;
  graded legal and complete by :class:`ioattn.pebble.PebbleGame` and optimal against
  :func:`ioattn.pebble.min_io`, which the grader runs itself;
- ``PARTS``: Hong and Kung's ``2M``-partition of that game, a list of sets of vertices; graded
  equal to the construction (:func:`ioattn.pebble.hong_kung_partition` of their own game) and a
  valid ``2M``-partition by :func:`ioattn.pebble.check_partition`.

``min_io`` and ``hong_kung_partition`` are switched off while a submission is graded: the answers
are the moves and the parts themselves. Graphs are drawn until the exact optimum has a game that
computes every vertex once (so its partition is valid) and needs a spill (so ``M`` matters).
"""

from __future__ import annotations

from functools import lru_cache

from ...pebble import Graph, PebbleGame, check_partition, hong_kung_partition, min_io
from ..judge import fail
from .base import Assignment, Context, Question, register

__all__ = ["Pebbling", "graph_of", "optimum"]

_ADVICE = ("the answer is your list of moves (and parts) written out; check it with "
           "PebbleGame.replay and check_partition")


def graph_of(params: dict) -> Graph:
    """The variant's graph, from its ``EDGES``."""
    return Graph([tuple(e) for e in params["EDGES"]])


@lru_cache(maxsize=64)
def _optimum(edges: tuple, M: int):
    return min_io(Graph(edges), M, max_states=200_000)


def optimum(params: dict):
    """The exact optimum of the variant's game (an :class:`ioattn.pebble.Optimum`)."""
    return _optimum(tuple(tuple(e) for e in params["EDGES"]), params["M"])


def _random_edges(rng) -> list:
    """Inputs a, b, ... and operations v1, v2, ..., each on two earlier values; every input
    used, at most four reads of an input; the last two or three operations are the outputs."""
    n_in, n_ops = int(rng.integers(3, 5)), int(rng.integers(7, 9))
    values = [chr(ord("a") + i) for i in range(n_in)]
    edges = []
    for t in range(1, n_ops + 1):
        unused = [v for v in values[:n_in] if not any(u == v for u, _ in edges)]
        pool = values[-5:]
        first = unused[0] if unused and t > n_ops - n_in else pool[int(rng.integers(len(pool)))]
        rest = [v for v in values if v != first]
        second = rest[int(rng.integers(max(0, len(rest) - 5), len(rest)))]
        v = f"v{t}"
        edges += [(first, v), (second, v)]
        values.append(v)
    return edges


def _usable(edges, M) -> bool:
    try:
        g = Graph(edges)
    except ValueError:
        return False
    if len(g.inputs) < 3 or not 2 <= len(g.outputs) <= 3:
        return False
    opt = min_io(g, M, max_states=200_000)
    computed = [v for kind, v in opt.moves if kind == "compute"]
    if len(computed) != len(set(computed)):
        return False
    if opt.io <= len(g.inputs) + len(g.outputs):            # no spill: M plays no part
        return False
    hk = hong_kung_partition(PebbleGame.replay(g, M, opt.moves))
    return hk.h >= 2 and check_partition(g, hk.parts, 2 * M).ok


@register
class Pebbling(Assignment):
    name = "pebbling"
    title = "Lower bounds by hand and by machine: pebbling and M-partitions"
    questions = (
        Question("q1", "An optimal game: legal, complete, with the least I/O", 3),
        Question("q2", "Hong and Kung's 2M-partition of that game", 2),
    )
    answers = {"q1": ("MOVES",), "q2": ("MOVES", "PARTS")}
    switched_off = {"ioattn.pebble.search.min_io": _ADVICE,
                    "ioattn.pebble.partition.hong_kung_partition": _ADVICE}

    def parameters(self, rng):
        M = 3
        while True:
            edges = _random_edges(rng)
            if _usable(edges, M):
                return {"EDGES": [tuple(e) for e in edges], "M": M}

    def check(self, question, answers, ctx: Context) -> str:
        p = ctx.params
        g, M = graph_of(p), p["M"]
        game = _replay(g, M, answers["MOVES"])
        if question == "q1":
            if ctx.public:
                return f"MOVES is a legal, complete game with I/O {game.io}"
            best = optimum(p).io
            if game.io > best:
                fail("wrong", f"MOVES is legal and complete but its I/O is {game.io}; the "
                     f"optimum with M = {M} red pebbles is {best}")
            return f"MOVES is an optimal game: I/O {game.io}"
        parts = _parts(answers["PARTS"], g)
        verdict = check_partition(g, parts, 2 * M)
        if not verdict.ok:
            fail("wrong", "PARTS is not a valid 2M-partition: " + "; ".join(verdict.reasons))
        if not ctx.public:
            expected = [frozenset(s) for s in hong_kung_partition(game).parts]
            if [frozenset(s) for s in parts] != expected:
                fail("wrong", "PARTS is a valid 2M-partition but not Hong and Kung's "
                     "construction from MOVES: cut the game after every M reads and writes, "
                     "and put each vertex in the segment of its last compute")
        return f"PARTS is a valid {2 * M}-partition with {len(parts)} parts"


def _replay(g: Graph, M: int, moves) -> PebbleGame:
    if moves is None:
        fail("error", "MOVES is not defined: run the cell that defines it")
    try:
        moves = [(str(kind), v if not isinstance(v, list) else tuple(v)) for kind, v in moves]
    except (TypeError, ValueError):
        fail("wrong", "MOVES should be a list of (move, vertex) pairs, e.g. ('read', 'a')")
    game = PebbleGame(g, M)
    for k, (kind, v) in enumerate(moves):
        try:
            game.play(kind, v)
        except ValueError as err:                    # IllegalMove, or an unknown kind of move
            fail("wrong", f"MOVES is not a legal game: move {k}, {err}")
    if not game.is_complete():
        missing = [v for v in g.outputs if v not in game.blue]
        fail("wrong", f"MOVES is legal but not complete: output(s) {', '.join(missing)} never "
             "get a blue pebble (write them)")
    return game


def _parts(parts, g: Graph) -> list:
    if parts is None:
        fail("error", "PARTS is not defined: run the cell that defines it")
    try:
        return [set(part) for part in parts]
    except TypeError:
        fail("wrong", "PARTS should be a list of sets of vertices")

