"""Good games, found fast: upper bounds on the I/O complexity ``Q(G, M)``.

:func:`good_game` plays every vertex an output needs once, in a topological order, evicting
by Belady's rule (the red vertex whose next use is furthest away; one never used again first)
and writing an evicted value first if it is used again and not yet blue. It then improves the
order by local search: move one vertex to another place between its last parent and its first
child, keep the new order if its game costs no more. The result is a legal, complete game, so
its I/O bounds ``Q(G, M)`` from above; it need not be optimal (it never recomputes, and Belady's
rule minimises reads, not reads plus writes).

Its use: :func:`ioattn.pebble.min_io` takes such a game as ``incumbent``; the exact search then
skips every state that cannot lead to a cheaper game, and returns the incumbent itself, proved
optimal, when none exists (``attention_graph(2, 2)`` at ``M = 5``: the local search finds a game
of 24 I/O, and the search proves that no game does better).

>>> from ioattn.pebble import PebbleGame, matmul_graph, min_io
>>> g = matmul_graph(2, 2, 2)
>>> game = good_game(g, 4)
>>> PebbleGame.replay(g, 4, game).io
18
>>> min_io(g, 4, incumbent=game).io     # the exact search finds better
17
"""

from __future__ import annotations

import random

from .._validate import as_count
from .game import PebbleGame
from .graph import Graph

__all__ = ["good_game", "greedy_game"]

_NEVER = float("inf")


def greedy_game(graph: Graph, M: int, order) -> list:
    """The game that computes ``order`` once each, with Belady's eviction (see the module
    docstring).

    Parameters
    ----------
    graph : Graph
    M : int
        Red pebbles; at least ``graph.max_in_degree + 1``.
    order : sequence
        The non-input vertices to compute, parents before children (every non-input ancestor
        of an output, and only vertices of the graph).

    Returns
    -------
    list of (str, vertex)
        A complete game: reads, writes, computes and deletes, for
        :meth:`~ioattn.pebble.PebbleGame.replay`.
    """
    uses: dict = {v: [] for v in graph.order}       # the steps that use v, latest first
    for t in range(len(order) - 1, -1, -1):
        for p in graph.parents(order[t]):
            uses[p].append(t)
    outputs = set(graph.outputs)
    red: set = set()
    blue = set(graph.inputs)
    moves: list = []

    def next_use(u):
        return uses[u][-1] if uses[u] else _NEVER

    def make_room(keep):
        if len(red) < M:
            return
        u = max((x for x in red if x not in keep), key=next_use)
        if u not in blue and uses[u]:
            moves.append(("write", u))
            blue.add(u)
        moves.append(("delete", u))
        red.discard(u)

    for v in order:
        operands = graph.parents(v)
        keep = set(operands)
        for p in operands:
            if p not in red:
                make_room(keep)
                moves.append(("read", p))
                red.add(p)
        for p in operands:
            uses[p].pop()                           # this step's use of p is done
        make_room(keep)
        moves.append(("compute", v))
        red.add(v)
        if v in outputs:
            moves.append(("write", v))
            blue.add(v)
    return moves


def good_game(graph: Graph, M: int, *, iterations: int = 2000, seed: int = 0) -> list:
    """A good complete game on ``graph`` with ``M`` red pebbles: :func:`greedy_game` on a compute
    order improved by ``iterations`` steps of local search (see the module docstring).

    Deterministic for a given ``seed``. Its I/O is an upper bound on ``Q(G, M)``, to hand to
    :func:`ioattn.pebble.min_io` as ``incumbent``.

    Parameters
    ----------
    graph : Graph
    M : int
        Red pebbles; at least ``graph.max_in_degree + 1``.
    iterations : int, optional
        Orders tried after the first (each costs one greedy game, linear in the graph's size).
    seed : int, optional
        Seed of the local search's random moves.

    Returns
    -------
    list of (str, vertex)
        The cheapest game found, its moves checked by :class:`~ioattn.pebble.PebbleGame`.

    Raises
    ------
    ValueError
        If ``M`` is too small to compute some vertex.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"good_game plays an ioattn.pebble.Graph, not {type(graph).__name__}")
    M = as_count(M, "M")
    iterations = as_count(iterations, "iterations", least=0)
    if M < graph.max_in_degree + 1:
        raise ValueError(f"M = {M} red pebbles cannot compute a vertex with "
                         f"{graph.max_in_degree} operands: M must be at least "
                         f"{graph.max_in_degree + 1}")
    order = _depth_first(graph)
    moves = greedy_game(graph, M, order)
    cost = _io(moves)
    rng = random.Random(seed)
    parents = {v: set(graph.parents(v)) for v in order}
    children = {v: set(graph.children(v)) for v in order}
    for _ in range(iterations if len(order) > 1 else 0):
        trial = list(order)
        v = trial.pop(rng.randrange(len(trial)))
        first = max((k + 1 for k, w in enumerate(trial) if w in parents[v]), default=0)
        last = min((k for k, w in enumerate(trial) if w in children[v]), default=len(trial))
        trial.insert(rng.randint(first, last), v)
        trial_moves = greedy_game(graph, M, trial)
        trial_cost = _io(trial_moves)
        if trial_cost <= cost:
            order, moves, cost = trial, trial_moves, trial_cost
    game = PebbleGame.replay(graph, M, moves)
    if not game.is_complete():  # pragma: no cover - every output is computed and written
        raise AssertionError("the greedy game left an output unwritten")
    return moves


def _depth_first(graph: Graph) -> list:
    """The non-input ancestors of the outputs (outputs included), each after its parents, in
    the order a depth-first walk from the outputs finishes them."""
    order: list = []
    done: set = set()
    for root in graph.outputs:
        stack = [(root, iter(graph.parents(root)))]
        if root in done:
            continue
        done.add(root)
        while stack:
            v, rest = stack[-1]
            p = next(rest, None)
            if p is None:
                stack.pop()
                if not graph.is_input(v):
                    order.append(v)
            elif p not in done:
                done.add(p)
                stack.append((p, iter(graph.parents(p))))
    return order


def _io(moves: list) -> int:
    return sum(kind != "compute" and kind != "delete" for kind, _ in moves)
