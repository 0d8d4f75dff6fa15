"""The tiled algorithms' schedules, element by element, as moves of the pebble game.

Each function turns the schedule that :mod:`ioattn.algorithms` runs through the memory model
(the same plan, from the same block-size rule) into a move list on the graphs of
:mod:`ioattn.pebble.builders`. The game's I/O then equals the memory model's count exactly:

- ``matmul``: the outer-product schedule of :func:`ioattn.run_matmul` on ``matmul_graph``;
- ``flash``: FlashAttention in the FA2 order on ``attention_graph`` (without the row maximum,
  which the graph of [SY]_ does not have; the online row sums and numerators are its chains);
- ``square_tiling``: both schedules, on ``attention_graph``: phase 1 writes ``exp(S)`` and the
  row sums where the memory model writes ``S`` and the row maxima, the same number of entries.

The memory model updates ``C += a b`` in place; the game needs one red pebble for the product and
one for the new partial sum before the old ones are deleted. So a schedule that fits in ``M``
entries is played with up to ``M + 2`` red pebbles (:data:`EXTRA_PEBBLES`); the flash schedule,
which uses each score as soon as it is computed, needs fewer than its memory-model footprint.

References
----------
.. [SY] B. Saha, C. Ye, ICML 2024, arXiv:2402.07443.
"""

from __future__ import annotations

from ..algorithms import plan_matmul
from ..api import plan as attention_plan
from .builders import attention_graph, matmul_graph
from .game import PebbleGame

__all__ = ["EXTRA_PEBBLES", "flash_moves", "matmul_moves", "play_schedule", "square_tiling_moves"]

#: Red pebbles a schedule may need beyond its memory-model footprint (a product and a new sum).
EXTRA_PEBBLES = 2


class _Moves(list):
    """A move list with the chain-sum step every schedule repeats."""

    def add_term(self, acc, term, total):
        """Fold ``term`` into the running sum ``acc`` (None before the first term)."""
        if acc is None:
            return term
        self.append(("compute", total))
        self += [("delete", acc), ("delete", term)]
        return total

    def reads(self, vertices):
        self += [("read", v) for v in vertices]

    def deletes(self, vertices):
        self += [("delete", v) for v in vertices]


def _blocks(n, b):
    return [range(s, min(s + b, n)) for s in range(0, n, b)]


def _tiled_product(moves: _Moves, plan, a, b, product, partial, finish_tile,
                   row_start=None, row_end=None) -> None:
    """The outer-product loop of :func:`ioattn.algorithms.matmul.tiled_product`, as moves.

    ``a(i, l)`` and ``b(l, j)`` name the operands, ``product(i, l, j)`` and ``partial(i, j, l)``
    the graph's products and partial sums; ``finish_tile(acc, state)`` gets the finished sums
    (``acc[i, j]``) while they are red; ``row_start(rows)`` and ``row_end(rows, state)`` bracket
    each block of rows.
    """
    for rows in _blocks(plan.m, plan.b_r):
        state = row_start(rows) if row_start else None
        for cols in _blocks(plan.n, plan.b_c):
            acc = {(i, j): None for i in rows for j in cols}
            for strip in _blocks(plan.k, plan.L):
                operands = [a(i, l) for i in rows for l in strip] + \
                           [b(l, j) for l in strip for j in cols]
                moves.reads(operands)
                for l in strip:
                    for i in rows:
                        for j in cols:
                            p = product(i, l, j)
                            moves.append(("compute", p))
                            acc[i, j] = moves.add_term(acc[i, j], p, partial(i, j, l))
                moves.deletes(operands)
            finish_tile(acc, state)
        if row_end:
            row_end(rows, state)


def matmul_moves(m: int, k: int, n: int, M: int, tile=None) -> list:
    """The outer-product schedule of :func:`ioattn.run_matmul` on ``matmul_graph(m, k, n)``."""
    moves = _Moves()

    def store(acc, state):
        for v in acc.values():
            moves.extend([("write", v), ("delete", v)])

    _tiled_product(moves, plan_matmul(m, k, n, M, tile), lambda i, l: ("A", i, l),
                   lambda l, j: ("B", l, j), lambda i, l, j: ("mul", i, l, j),
                   lambda i, j, l: ("sum", i, j, l), store)
    return list(moves)


def _score(moves: _Moves, i, j, d):
    """Compute ``exp(S_ij)`` from red ``Q_i``, ``K_j`` rows; only the exponential stays red."""
    acc = None
    for l in range(d):
        moves.append(("compute", ("QK", i, j, l)))
        acc = moves.add_term(acc, ("QK", i, j, l), ("S", i, j, l))
    moves += [("compute", ("exp", i, j)), ("delete", acc)]


def flash_moves(N: int, d: int, M: int, **options) -> list:
    """FlashAttention in the FA2 order (the plan of ``ioattn.plan("flash", ...)``) as moves on
    ``attention_graph``."""
    p = attention_plan("flash", N, d, M, **options)
    if p.variant != "fa2":
        raise ValueError("only the FA2 order is a game on the attention graph: FA1 also moves the "
                         "row maxima, which the graph of Saha and Ye does not have")
    moves = _Moves()
    for rows in _blocks(N, p.B_r):
        Q = [("Q", i, l) for i in rows for l in range(d)]
        moves.reads(Q)
        num = {(i, c): None for i in rows for c in range(d)}
        lsum = {i: None for i in rows}
        for cols in _blocks(N, p.B_c):
            KV = [("K", j, l) for j in cols for l in range(d)] + \
                 [("V", j, c) for j in cols for c in range(d)]
            moves.reads(KV)
            for i in rows:
                for j in cols:
                    _score(moves, i, j, d)
                    for c in range(d):
                        moves.append(("compute", ("AV", i, j, c)))
                        num[i, c] = moves.add_term(num[i, c], ("AV", i, j, c), ("num", i, c, j))
                    if lsum[i] is None:
                        lsum[i] = ("exp", i, j)           # the row sum starts at exp(S_i0)
                    else:
                        moves.append(("compute", ("rowsum", i, j)))
                        moves.deletes([lsum[i], ("exp", i, j)])
                        lsum[i] = ("rowsum", i, j)
            moves.deletes(KV)
        for i in rows:
            for c in range(d):
                moves += [("compute", ("O", i, c)), ("write", ("O", i, c)),
                          ("delete", ("O", i, c)), ("delete", num[i, c])]
            moves.append(("delete", lsum[i]))
        moves.deletes(Q)
    return list(moves)


def square_tiling_moves(N: int, d: int, M: int, **options) -> list:
    """Square tiling (either schedule, the plan of ``ioattn.plan("square_tiling", ...)``) on
    ``attention_graph``. Needs ``N >= 2`` (for ``N = 1`` the row sum is the exponential itself)."""
    if N < 2:
        raise ValueError("the square-tiling game needs N >= 2: with N = 1 the row sum and the "
                         "single exponential are one vertex of the attention graph")
    p = attention_plan("square_tiling", N, d, M, **options)
    moves = _Moves()

    def start_scores(rows):
        return {i: None for i in rows}                     # the running row sums

    def exponentiate(acc, lsum):                            # write exp(S); fold it into l_i
        for (i, j), S_ij in acc.items():
            e = ("exp", i, j)
            moves.extend([("compute", e), ("delete", S_ij), ("write", e)])
            if lsum[i] is None:
                lsum[i] = e
            else:
                moves.append(("compute", ("rowsum", i, j)))
                moves.deletes([lsum[i], e])
                lsum[i] = ("rowsum", i, j)

    def store_sums(rows, lsum):
        for i in rows:
            moves.extend([("write", lsum[i]), ("delete", lsum[i])])

    _tiled_product(moves, p.phase1, lambda i, l: ("Q", i, l), lambda l, j: ("K", j, l),
                   lambda i, l, j: ("QK", i, j, l), lambda i, j, l: ("S", i, j, l),
                   exponentiate, start_scores, store_sums)

    def load_sums(rows):
        sums = [("rowsum", i, N - 1) for i in rows]
        moves.reads(sums)
        return sums

    def divide(acc, sums):                                  # O = num / l, written
        for (i, c), v in acc.items():
            moves.extend([("compute", ("O", i, c)), ("write", ("O", i, c)),
                          ("delete", ("O", i, c)), ("delete", v)])

    _tiled_product(moves, p.phase2, lambda i, j: ("exp", i, j), lambda j, c: ("V", j, c),
                   lambda i, j, c: ("AV", i, j, c), lambda i, c, j: ("num", i, c, j),
                   divide, load_sums, lambda rows, sums: moves.deletes(sums))
    return list(moves)


def play_schedule(name: str, *sizes, M: int, **options) -> PebbleGame:
    """Play an algorithm's schedule as a checked game with ``M + EXTRA_PEBBLES`` red pebbles.

    ``play_schedule("matmul", m, k, n, M=...)`` or ``play_schedule("flash", N, d, M=...)`` (also
    ``"square_tiling"``). Every move is checked by :class:`~ioattn.pebble.PebbleGame`.
    """
    if name == "matmul":
        graph, moves = matmul_graph(*sizes), matmul_moves(*sizes, M, **options)
    elif name in ("flash", "square_tiling"):
        make = flash_moves if name == "flash" else square_tiling_moves
        graph, moves = attention_graph(*sizes), make(*sizes, M, **options)
    else:
        raise ValueError(f"no game schedule for {name!r}; there are: matmul, flash, square_tiling")
    return PebbleGame.replay(graph, M + EXTRA_PEBBLES, moves)
