"""Assignment 4: pebbling a graph too large for exact search, and its Hong-Kung partition.

Each student gets a computation graph of their own, 30 to 40 vertices: inputs ``a, b, c, ...``
(6 to 8) and operations ``v1, v2, ...`` (24 to 32), each on two earlier values (one of the last
four, one anywhere earlier), every value used; the outputs are the operations nothing uses
(2 to 4). ``M``, the number of red pebbles, is 4 or 5. The edges are the variant's ``EDGES``
(``graph_of`` builds the :class:`ioattn.pebble.Graph`). Hong and Kung's red-blue pebble game is
played on it, with one rule more: **every vertex is computed once** (no recomputation), the
games for which Hong and Kung's construction gives a 2M-partition. The student hands in

- ``MOVES``: a complete game with as little I/O as they can, a list of ``(move, vertex)`` pairs
  (``("read", "a")``, ``("compute", "v1")``, ``("write", "v7")``, ``("delete", "a")``); graded
  legal and complete by :meth:`ioattn.pebble.PebbleGame.replay`, each vertex computed once, and
  scored against the *best known* I/O ``B`` of the graph (:func:`best_known`): a game of I/O
  ``q <= B`` earns full marks, a game of I/O ``q > B`` the fraction
  ``max(0, 1 - (q - B) / B)`` of them, rounded down to a hundredth (one I/O over ``B = 25``
  earns 0.96, ``q >= 2 B`` nothing);
- ``PARTS``: Hong and Kung's ``2M``-partition of that game, a list of sets of vertices; graded
  a valid ``2M``-partition by :func:`ioattn.pebble.check_partition` and equal to the
  construction, :func:`ioattn.pebble.hong_kung_partition` of their own ``MOVES`` (cut the game
  after every ``M`` reads and writes, put each vertex in the segment of its compute).

The graph is public, so the checks a student runs are the grader's, with the same score.

*Beyond exact search.* :func:`ioattn.pebble.min_io` does not finish on these graphs: a graph is
kept only if the search gives up within 1,000 states, with a proven lower bound above the I/O
of reading every input and writing every output once, so every game on the graph spills or reads
again: ``M`` matters. (No graph of 300 drawn was turned away by this; a test shows the search
still giving up after 200,000 states, and seconds, on a variant.) ``min_io`` allows
recomputation anyway, so its games need not be games of this assignment.

*Best known.* ``B`` is not an optimum: it is the least I/O of the grader's own heuristic
schedules, written in this module. They compute the vertices in a topological order, read an
operand when it is not red, write each output when it is computed, and evict, when all ``M``
pebbles are in use, the red value used again furthest in the future (Belady's rule, with or
without a preference for values already blue, which cost no write to evict), spilling it if it
is needed again and not blue. Orders tried: the graph's own, two depth-first orders from the
outputs and 100 random topological orders, the best four then improved by 2,000 steps of local
search (move one vertex elsewhere in the order, keep the move unless the I/O grows); the random
choices come from the graph itself, so ``B`` is the same every time. The heuristic ships with
the package, so reading it is allowed; only :func:`best_known`, the number, is public, and the
game itself (the private ``_best_game``, which the tests hand in) is the grader's, not an answer.
A game that beats ``B`` earns full marks too.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from functools import lru_cache

import numpy as np

from ...pebble import (
    Graph,
    PebbleGame,
    SearchLimitError,
    check_partition,
    hong_kung_partition,
    min_io,
)
from ..answers import Unsendable
from ..judge import fail
from .base import Assignment, Context, Question, register

__all__ = ["Pebbling", "best_known", "graph_of", "score"]

#: Red pebbles a variant may have.
PEBBLES = (4, 5)

#: States the exact search may expand on a kept graph before it gives up (it must give up).
PROBE_STATES = 1_000

#: The heuristic's effort: random orders, orders improved, local-search steps on each.
TRIES, KEEP, STEPS = 100, 4, 2_000


def graph_of(params: dict) -> Graph:
    """The variant's graph, from its ``EDGES``."""
    return Graph([tuple(e) for e in params["EDGES"]])


def score(io: int, best: int) -> float:
    """The fraction of the points a game of I/O ``io`` earns against the best known ``best``:
    1 if ``io <= best``, else ``max(0, 1 - (io - best) / best)`` rounded down to a hundredth
    (exactly, in integers)."""
    if io <= best:
        return 1.0
    return max(0, 100 * (2 * best - io) // best) / 100


def best_known(params: dict) -> int:
    """The best known I/O of the variant's game: the least over the grader's heuristic
    schedules (see the module docstring), not an optimum. The same every time."""
    return _io(_best_game(_edges_key(params), params["M"]))


def _edges_key(params: dict) -> tuple:
    return tuple(tuple(e) for e in params["EDGES"])


# ---------------------------------------------------------------------- the variants
def _random_edges(rng, n_in: int, n_ops: int, window: int = 4) -> list:
    """Inputs a, b, ... and operations v1, v2, ..., each on one of the last ``window`` values
    and one other earlier value, preferring values not used yet (all of them, near the end)."""
    values = [chr(ord("a") + i) for i in range(n_in)]
    uses = dict.fromkeys(values, 0)
    edges = []
    for t in range(1, n_ops + 1):
        recent = values[-window:]
        first = recent[int(rng.integers(len(recent)))]
        unused = [v for v in values if not uses[v] and v != first and v not in recent]
        if unused and (len(unused) >= n_ops - t or rng.random() < 0.5):
            second = unused[0]
        else:
            others = [v for v in values if v != first]
            second = others[int(rng.integers(len(others)))]
        v = f"v{t}"
        edges += [(first, v), (second, v)]
        uses[first] += 1
        uses[second] += 1
        values.append(v)
        uses[v] = 0
    return edges


def _usable(edges: list, n_in: int, M: int) -> bool:
    """Every input used, 2 to 4 outputs, and beyond exact search with spills needed: ``min_io``
    gives up within :data:`PROBE_STATES` states with a lower bound above reading each input and
    writing each output once."""
    g = Graph(edges)
    if len(g.inputs) != n_in or not 2 <= len(g.outputs) <= 4:
        return False
    try:
        min_io(g, M, max_states=PROBE_STATES, progress=False)
    except SearchLimitError as err:
        return err.bound > len(g.inputs) + len(g.outputs)
    return False


# ---------------------------------------------------------------------- the best known
def _io(moves) -> int:
    return sum(kind in ("read", "write") for kind, _ in moves)


class _Shape:
    """A graph as integers (vertex ``i`` is ``graph.order[i]``), for fast replays."""

    def __init__(self, g: Graph):
        self.g = g
        self.parents = [tuple(g.index[p] for p in g.parents(v)) for v in g.order]
        self.children = [tuple(g.index[c] for c in g.children(v)) for v in g.order]
        self.output = [v in set(g.outputs) for v in g.order]
        self.input = [g.is_input(v) for v in g.order]
        self.ops = [i for i in range(len(g)) if not self.input[i]]


def _play(shape: _Shape, M: int, order: list, bias: int, record: bool = False):
    """The game computing ``order`` (every non-input, parents first) once each: operands read
    when not red, outputs written when computed, values deleted after their last use, and, when
    all ``M`` pebbles are in use, the value used again furthest ahead evicted (a value not blue
    counted ``bias`` uses nearer; ties to the blue one, then the latest in the graph's order),
    written first if it is needed again and not blue. Its I/O, and its moves if ``record``."""
    parents, output = shape.parents, shape.output
    uses: list = [[] for _ in shape.input]
    for t, v in enumerate(order):
        for p in parents[v]:
            uses[p].append(t)
    never = len(order) + 1
    for at in uses:
        at.append(never)
    done = [0] * len(uses)
    red: set = set()
    blue = list(shape.input)
    moves: list = []
    io = 0

    def room(keep):
        nonlocal io
        if len(red) < M:
            return
        victim, key = -1, None
        for u in red:
            if u not in keep:
                k = (uses[u][done[u]] - (0 if blue[u] else bias), blue[u], u)
                if key is None or k > key:
                    victim, key = u, k
        if not blue[victim] and uses[victim][done[victim]] < never:
            io += 1
            blue[victim] = True
            if record:
                moves.append(("write", victim))
        red.discard(victim)
        if record:
            moves.append(("delete", victim))

    for v in order:
        ps = parents[v]
        for p in ps:
            if p not in red:
                room(ps)
                io += 1
                red.add(p)
                if record:
                    moves.append(("read", p))
        room(ps)
        red.add(v)
        if record:
            moves.append(("compute", v))
        for p in ps:
            done[p] += 1
            if uses[p][done[p]] == never and (blue[p] or not output[p]):
                red.discard(p)
                if record:
                    moves.append(("delete", p))
        if output[v]:
            io += 1
            blue[v] = True
            if record:
                moves.append(("write", v))
            if uses[v][done[v]] == never:
                red.discard(v)
                if record:
                    moves.append(("delete", v))
    if record:
        names = shape.g.order
        return io, [(kind, names[v]) for kind, v in moves]
    return io


def _cost(shape: _Shape, M: int, order: list) -> tuple[int, int]:
    """``(io, bias)`` of the best eviction rule for ``order``."""
    return min((_play(shape, M, order, bias), bias) for bias in (0, 1, 2))


def _random_order(shape: _Shape, rng) -> list:
    parents, children, is_input = shape.parents, shape.children, shape.input
    waiting = {v: sum(not is_input[p] for p in parents[v]) for v in shape.ops}
    ready = [v for v in shape.ops if not waiting[v]]
    order = []
    while ready:
        v = ready.pop(int(rng.integers(len(ready))))
        order.append(v)
        for c in children[v]:
            waiting[c] -= 1
            if not waiting[c]:
                ready.append(c)
    return order


def _depth_first_orders(shape: _Shape) -> list:
    """Post-orders from the outputs: first operands first, and last ones first from the last
    output."""
    outputs = [v for v in range(len(shape.input)) if shape.output[v]]
    orders = []
    for flip in (False, True):
        seen, order = set(), []
        for out in (outputs[::-1] if flip else outputs):
            stack = [(out, False)]
            while stack:
                u, expanded = stack.pop()
                if expanded:
                    order.append(u)
                elif u not in seen and not shape.input[u]:
                    seen.add(u)
                    stack.append((u, True))
                    ps = shape.parents[u]
                    stack += [(p, False) for p in (ps if flip else ps[::-1])]
        orders.append(order)
    return orders


def _improve(shape: _Shape, M: int, order: list, rng, steps: int) -> tuple[int, list]:
    """Local search: move one vertex to another place its parents and children allow; keep
    the move unless the I/O grows."""
    best, cur = _cost(shape, M, order)[0], list(order)
    for _ in range(steps):
        k = int(rng.integers(len(cur)))
        v = cur[k]
        rest = cur[:k] + cur[k + 1:]
        at = {u: i for i, u in enumerate(rest)}
        lo = max((at[p] + 1 for p in shape.parents[v] if p in at), default=0)
        hi = min((at[c] for c in shape.children[v]), default=len(rest))
        j = int(rng.integers(lo, hi + 1))
        cand = rest[:j] + [v] + rest[j:]
        io = _cost(shape, M, cand)[0]
        if io <= best:
            best, cur = io, cand
    return best, cur


@lru_cache(maxsize=64)
def _best_game(edges: tuple, M: int) -> tuple:
    """The grader's best heuristic game (see the module docstring), as a tuple of moves."""
    shape = _Shape(Graph(edges))
    digest = hashlib.sha256(repr((edges, M)).encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    orders = [list(shape.ops), *_depth_first_orders(shape)]
    orders += [_random_order(shape, rng) for _ in range(TRIES)]
    ranked = sorted(range(len(orders)), key=lambda i: (_cost(shape, M, orders[i])[0], i))
    best = None
    for i in ranked[:KEEP]:
        io, order = _improve(shape, M, orders[i], rng, STEPS)
        if best is None or io < best[0]:
            best = (io, order)
    order = best[1]
    io, moves = _play(shape, M, order, _cost(shape, M, order)[1], record=True)
    return tuple(moves)


# ---------------------------------------------------------------------- the assignment
@register
class Pebbling(Assignment):
    name = "pebbling"
    title = "Pebbling beyond exact search, and Hong and Kung's partition"
    questions = (
        Question("q1", "A complete game, each vertex computed once, with little I/O", 3),
        Question("q2", "Hong and Kung's 2M-partition of that game", 2),
    )
    answers = {"q1": ("MOVES",), "q2": ("MOVES", "PARTS")}

    def parameters(self, rng):
        M = int(rng.choice(PEBBLES))
        while True:
            n_in, n_ops = int(rng.integers(6, 9)), int(rng.integers(24, 33))
            edges = _random_edges(rng, n_in, n_ops)
            if _usable(edges, n_in, M):
                return {"EDGES": [tuple(e) for e in edges], "M": M}

    def check(self, question, answers, ctx: Context) -> str:
        p = ctx.params
        g, M = graph_of(p), p["M"]
        game = _replay(g, M, _value(answers, "MOVES"))
        if question == "q1":
            best = best_known(p)
            if game.io <= best:
                return (f"MOVES is a complete game with I/O {game.io}; the best known with "
                        f"M = {M} is {best}")
            s = score(game.io, best)
            detail = (f"MOVES is a complete game with I/O {game.io}, more than the best known "
                      f"{best} with M = {M}: it earns max(0, 1 - ({game.io} - {best}) / {best})"
                      f" = {s:.2f} of the points")
            fail("partial" if s > 0 else "wrong", detail, score=s)
        parts = _parts(_value(answers, "PARTS"))
        verdict = check_partition(g, parts, 2 * M)
        if not verdict.ok:
            fail("wrong", f"PARTS is not a valid {2 * M}-partition: " + "; ".join(verdict.reasons))
        expected = {frozenset(s) for s in hong_kung_partition(game).parts}
        if set(parts) != expected or len(parts) != len(expected):
            fail("wrong", f"PARTS is a valid {2 * M}-partition but not Hong and Kung's "
                 "construction from MOVES: cut the game after every M reads and writes, and put "
                 "each vertex in the segment of its compute")
        return f"PARTS is Hong and Kung's {2 * M}-partition of MOVES, with {len(parts)} parts"


def _value(answers, name: str):
    """The notebook's ``name`` as plain data; a failure if it is undefined or not plain data."""
    try:
        value = answers.value(name)
    except Unsendable as exc:
        fail("wrong", f"{name} should be plain data (lists, tuples, sets of strings): it is "
             f"{exc}")
    if value is None:
        fail("error", f"{name} is not defined: run the cell that defines it")
    return value


def _replay(g: Graph, M: int, moves) -> PebbleGame:
    """The game ``moves``, legal, complete and computing each vertex once, or a failure."""
    if not isinstance(moves, list) or not all(
            isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m)
            for m in moves):
        fail("wrong", "MOVES should be a list of (move, vertex) pairs of strings, e.g. "
             "('read', 'a')")
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
    again = sorted((v for v, n in Counter(v for kind, v in moves if kind == "compute").items()
                    if n > 1), key=g.index.get)
    if again:
        fail("wrong", f"MOVES computes {', '.join(again[:5])} more than once: in this "
             "assignment every vertex is computed once")
    return game


def _parts(parts) -> list:
    """``PARTS`` as a list of frozensets, or a failure."""
    shape = ("PARTS should be a list of sets of vertices, e.g. [{'v1', 'v2'}, {'v3'}]")
    if isinstance(parts, (str, dict)):
        fail("wrong", shape)
    try:
        if any(isinstance(part, (str, dict)) for part in parts):
            fail("wrong", shape)
        return [frozenset(part) for part in parts]
    except TypeError:
        fail("wrong", shape)
