"""Assignment 4: a pebbling schedule for graphs too large for exact search, and the partition
its games give.

Each student gets a computation graph of their own, 30 to 40 vertices: inputs ``a, b, c, ...``
(6 to 8) and operations ``v1, v2, ...`` (24 to 32), each on two earlier values (one of the last
four, one anywhere earlier), every value used; the outputs are the operations nothing uses
(2 to 4). ``M``, the number of red pebbles, is 4 or 5, and ``T``, a segment length, is 2 or 3.
The edges are the variant's ``EDGES`` (``graph_of`` builds the :class:`ioattn.pebble.Graph`).
Hong and Kung's red-blue pebble game is played with one rule more: **every vertex is computed
once** (no recomputation). The student hands in two functions:

- ``pebble(edges, M)``: a complete game on the graph of ``edges`` with ``M`` red pebbles, each
  vertex computed once, with as little I/O as it can, as a list of ``(move, vertex)`` pairs
  (``("read", "a")``, ``("compute", "v1")``, ``("write", "v7")``, ``("delete", "a")``). Graded
  on the student's own graph and, when grading, on :data:`HIDDEN` graphs drawn as the variants
  are, each game legal and complete (:meth:`ioattn.pebble.PebbleGame.play` checks every move) and
  scored against the *best known* I/O ``B`` of its graph: ``q <= floor(5B/4)`` earns 1
  (:data:`SLACK`), more earns ``(2B - q) / (2B - floor(5B/4))`` rounded down to a hundredth, 0 from
  ``2B`` on (:func:`score`); the question earns the mean over the graphs, rounded down to a
  hundredth. ``B`` is no optimum and a good schedule of the student's own need not match it:
  an independent heuristic lands within the quarter (a test plays one).
- ``partition(moves, M, T)``: the parts of a game cut into segments of ``T`` reads and writes,
  which form an ``(M + T)``-partition (Hong and Kung's construction, with ``T`` in place of
  ``M``). Graded on a plain game of the student's own graph with their ``T`` and, when grading,
  on :data:`HIDDEN` more graphs with ``T`` from 1 to ``M - 1``, each result a valid
  ``(M + T)``-partition (:func:`ioattn.pebble.check_partition`) equal to the construction.

The answers come from :mod:`ioattn.teach.keys.pebbling`, which the graded notebook cannot read:
``B`` from the grader's heuristic schedules (not an optimum, hence the quarter of slack: pasting
the grader's game earns nothing a good schedule of one's own does not), the construction from
``segment_parts``. The exact optimum is out of reach on these graphs (below) and the search's
proven lower bounds are far below ``B``, so neither can be the reference.
:func:`ioattn.pebble.hong_kung_partition` cuts after every ``M`` reads and writes, not ``T < M``.

*Beyond exact search.* :func:`ioattn.pebble.min_io` does not finish on these graphs: a graph is
kept only if the search gives up within 1,000 states, with a proven lower bound above the I/O
of reading every input and writing every output once, so every game on the graph spills or reads
again: ``M`` matters. (No graph of 300 drawn was turned away by this; a test shows the search
still giving up after 200,000 states, and seconds, on a variant.) ``min_io`` allows
recomputation anyway, so its games need not be games of this assignment.
"""

from __future__ import annotations

from collections import Counter

from ...pebble import Graph, PebbleGame, SearchLimitError, check_partition, min_io
from ..judge import fail
from .base import Assignment, Context, Question, register

__all__ = ["HIDDEN", "Pebbling", "SLACK", "full_marks", "graph_of", "hidden_graphs", "max_moves",
           "score"]

#: Red pebbles a variant may have, and its segment lengths.
PEBBLES, SEGMENTS = (4, 5), (2, 3)

#: States the exact search may expand on a kept graph before it gives up (it must give up).
PROBE_STATES = 1_000

#: Hidden graphs each function is graded on, besides the student's own.
HIDDEN = 2

#: Full marks up to this fraction of the best known I/O: ``(5, 4)``, a quarter over. ``B``
#: comes from the grader's heuristics and is no optimum, so a game that merely matches it shows
#: nothing an independent good schedule does not: those land within a quarter of it (a test
#: plays one), and the exact search cannot say how far either is from the optimum.
SLACK = (5, 4)

#: Moves per vertex of the graph beyond which a game is refused unplayed (:func:`max_moves`).
MOVES_PER_VERTEX = 20

#: Seconds one call of a student's function may take.
TIME_LIMIT = 60.0


def graph_of(params: dict) -> Graph:
    """The variant's graph, from its ``EDGES``."""
    return Graph([tuple(e) for e in params["EDGES"]])


def full_marks(best: int) -> int:
    """The most I/O that earns full marks against the best known ``best``: a quarter over it,
    ``floor(5 best / 4)`` (:data:`SLACK`)."""
    num, den = SLACK
    return num * best // den


def score(io: int, best: int) -> float:
    """The fraction of the points a game of I/O ``io`` earns against the best known ``best``:
    1 up to :func:`full_marks` ``F``, then falling linearly to 0 at ``2 best``:
    ``(2 best - io) / (2 best - F)`` rounded down to a hundredth (exactly, in integers)."""
    top = full_marks(best)
    if io <= top:
        return 1.0
    return max(0, 100 * (2 * best - io) // (2 * best - top)) / 100


def draw_edges(rng, M: int) -> list:
    """A graph of the assignment's kind: usable with ``M`` red pebbles (see the docstring)."""
    while True:
        n_in, n_ops = int(rng.integers(6, 9)), int(rng.integers(24, 33))
        edges = _random_edges(rng, n_in, n_ops)
        if _usable(edges, n_in, M):
            return [tuple(e) for e in edges]


def hidden_graphs(rng, M: int) -> list:
    """:data:`HIDDEN` graphs the student never saw, drawn as the variants are."""
    return [draw_edges(rng, M) for _ in range(HIDDEN)]


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


# ---------------------------------------------------------------------- the assignment
@register
class Pebbling(Assignment):
    name = "pebbling"
    title = "A pebbling schedule beyond exact search, and the partition of its games"
    questions = (
        Question("q1", "A schedule: complete games, each vertex computed once, little I/O", 3),
        Question("q2", "The (M + T)-partition of a game cut every T reads and writes", 2),
    )
    answers = {"q1": ("pebble",), "q2": ("partition",)}

    def parameters(self, rng):
        M = int(rng.choice(PEBBLES))
        return {"EDGES": draw_edges(rng, M), "M": M, "T": int(rng.choice(SEGMENTS))}

    def check(self, question, answers, ctx: Context) -> str:
        from ..keys import pebbling as key

        p, M = ctx.params, ctx.params["M"]
        others = [] if ctx.public else hidden_graphs(ctx.rng, M)
        if question == "q1":
            return _check_schedule(answers, [p["EDGES"], *others], M, key)
        cases = [(p["EDGES"], p["T"])]
        cases += [(edges, int(ctx.rng.integers(1, M))) for edges in others]
        for k, (edges, T) in enumerate(cases):
            where = "your graph" if k == 0 else f"hidden graph {k}"
            g, moves = Graph(edges), key.plain_game(edges, M)
            got, error = answers.call("partition", (moves, M, T), time_limit=TIME_LIMIT)
            if error is not None:
                fail("error", f"partition(moves, {M}, {T}) on {where}: {error}")
            parts = _parts(got, g, where)
            verdict = check_partition(g, parts, M + T)
            if not verdict.ok:
                fail("wrong", f"partition(moves, {M}, {T}) on {where} is not a valid "
                     f"{M + T}-partition: " + "; ".join(verdict.reasons))
            if sorted(map(sorted, parts)) != sorted(map(sorted, key.segment_parts(moves, T))):
                fail("wrong", f"partition(moves, {M}, {T}) on {where} is a valid "
                     f"{M + T}-partition but not the parts of the game cut every {T} reads "
                     "and writes (each vertex in the part of the segment that computes it)")
        hidden = "" if ctx.public else f" and on {HIDDEN} hidden graphs"
        return f"partition is the construction on your graph with T = {p['T']}{hidden}"


def _check_schedule(answers, graphs: list, M: int, key) -> str:
    """``pebble`` on each graph: legal, complete, each vertex once, scored against ``B``."""
    scores, lines = [], []
    for k, edges in enumerate(graphs):
        where = "your graph" if k == 0 else f"hidden graph {k}"
        best = key.best_known(edges, M)
        got, error = answers.call("pebble", (edges, M), time_limit=TIME_LIMIT)
        if error is not None:
            scores.append(0.0)
            lines.append(f"pebble on {where}: {error}")
            continue
        game, problem = _replay(Graph(edges), M, got)
        if problem:
            scores.append(0.0)
            lines.append(f"pebble on {where}: {problem}")
            continue
        scores.append(score(game.io, best))
        lines.append(f"pebble on {where}: I/O {game.io}, best known {best}, full marks up to "
                     f"{full_marks(best)}"
                     + ("" if scores[-1] == 1 else f", earning {scores[-1]:.2f}"))
    total = int(100 * sum(scores) / len(scores)) / 100     # the mean, rounded down
    if total == 1.0:
        return "; ".join(lines)
    fail("partial" if total > 0 else "wrong",
         f"mean {total:.2f} of the points over {len(graphs)} graph(s): " + "; ".join(lines),
         score=total)


def max_moves(g: Graph) -> int:
    """The most moves a game on ``g`` may have to be replayed: :data:`MOVES_PER_VERTEX` per
    vertex. No game that earns a point is refused: a game computing each vertex once has at
    most as many deletes as reads and computes, so at most ``2 io + 2 |V|`` moves; it earns
    nothing from ``io = 2B`` on; and ``B <= 3 |V|``, as the best known game reads at most two
    operands per operation and writes each value at most once."""
    return MOVES_PER_VERTEX * len(g)


def _replay(g: Graph, M: int, moves) -> tuple[PebbleGame | None, str]:
    """``(game, "")`` for a legal, complete game computing each vertex once, else
    ``(None, what is wrong)``."""
    shape = "it should return a list of (move, vertex) pairs of strings, e.g. ('read', 'a')"
    if not isinstance(moves, (list, tuple)):
        return None, shape
    if len(moves) > max_moves(g):
        return None, (f"{len(moves):,} moves: a game on this graph of {len(g)} vertices, each "
                      f"computed once, needs far fewer, and more than {max_moves(g):,} are "
                      "refused unplayed")
    if not all(isinstance(m, (list, tuple)) and len(m) == 2
               and all(isinstance(x, str) for x in m) for m in moves):
        return None, shape
    game = PebbleGame(g, M)
    for k, (kind, v) in enumerate(moves):
        try:
            game.play(kind, v)
        except ValueError as err:                    # IllegalMove, or an unknown kind of move
            return None, f"not a legal game: move {k}, {err}"
    if not game.is_complete():
        missing = [v for v in g.outputs if v not in game.blue]
        return None, (f"legal but not complete: output(s) {', '.join(missing)} never get a "
                      "blue pebble (write them)")
    again = sorted((v for v, n in Counter(v for kind, v in moves if kind == "compute").items()
                    if n > 1), key=g.index.get)
    if again:
        return None, (f"computes {', '.join(again[:5])} more than once: in this assignment "
                      "every vertex is computed once")
    return game, ""


def _parts(parts, g: Graph, where: str) -> list:
    """The parts ``partition`` returned, as a list of frozensets, or a failure.

    Before anything is built from them, the parts must be a partition of the graph's
    operations (its non-input vertices) in size and in content: at most one part per operation,
    none larger than the graph, each vertex an operation of the graph, none twice, none left
    out (at most one vertex more than the graph has is looked at). So the check that follows
    (:func:`ioattn.pebble.check_partition`, which builds a flow network per part) works on at
    most the graph's size, whatever was returned.
    """
    shape = "partition should return a list of sets of vertices, e.g. [{'v1', 'v2'}, {'v3'}]"
    if not isinstance(parts, (list, tuple)):
        fail("wrong", shape)
    ops = [v for v in g.order if not g.is_input(v)]
    lead = f"partition on {where} returned"
    if len(parts) > len(ops):
        fail("wrong", f"{lead} {len(parts):,} parts; the graph has {len(ops)} operations, so a "
             "partition of them has at most that many parts (refused unchecked)")
    known, seen = set(ops), set()
    for k, part in enumerate(parts):
        if not isinstance(part, (list, tuple, set, frozenset)):
            fail("wrong", shape)
        if len(part) > len(ops):
            fail("wrong", f"{lead} a part of {len(part):,} vertices (part {k}); the graph has "
                 f"{len(ops)} operations, each in exactly one part (refused unchecked)")
        if not part:
            fail("wrong", f"{lead} an empty part (part {k}): every part has a vertex")
        for v in part:                  # at most len(ops) + 1 vertices looked at in all
            if not isinstance(v, str):
                fail("wrong", shape)
            if v not in known:
                what = "an input (inputs belong to no part)" if v in g.index else \
                    "not a vertex of the graph"
                fail("wrong", f"{lead} {v!r} in part {k}: {what}")
            if v in seen:
                fail("wrong", f"{lead} {v!r} in two parts (or twice): each operation is in "
                     "exactly one part")
            seen.add(v)
    missing = [v for v in ops if v not in seen]
    if missing:
        fail("wrong", f"{lead} no part for {', '.join(missing[:5])}"
             f"{' ...' if len(missing) > 5 else ''}: every operation is in exactly one part")
    return [frozenset(part) for part in parts]
