"""The algorithms' schedules, element by element, as moves of the pebble game.

Each generator turns the schedule an algorithm of :mod:`ioattn.algorithms` runs through the memory
model (the same plan, from the same block-size rule, loop for loop) into a move list on a graph of
:mod:`ioattn.pebble.builders` (:func:`schedule_graph`); :func:`play_schedule` plays it with
``M + EXTRA_PEBBLES`` red pebbles, every move checked by :class:`~ioattn.pebble.PebbleGame`.

What is checked
---------------
For every schedule below, ``tests/pebble/test_schedules.py`` checks at tiny sizes (the smallest
feasible ``M``, and ``M`` whose blocks do not divide ``N``) that the game is legal and complete
with ``M + 2`` red pebbles, that it never holds more than the memory model's peak ``+ 2``, and
how its reads and writes compare with the memory model's exact count (:func:`ioattn.io_cost`,
which the algorithm tests prove equal to :func:`ioattn.run` and :func:`ioattn.run_backward`):

- ``matmul`` on ``matmul_graph(m, k, n)``: reads and writes equal.
- ``flash`` (FA2 order) on ``attention_graph(N, d)``: equal. Without the row maximum, which the
  graph of [SY]_ does not have and FA2 never moves; the online row sums and numerators are its
  chains.
- ``flash`` with ``variant="fa1"`` on ``attention_graph(N, d, softmax="online", scale=True)``:
  reads equal, writes ``N (d + 2)`` fewer. FA1 moves ``m``, ``l`` and the normalised ``O`` after
  every key block, so its graph is FlashAttention's online softmax key by key, with ``tau``
  folded into ``Q`` as the algorithm folds it (a block of ``B_c`` keys is ``B_c`` steps in the
  cache; ``tau Q_i`` is recomputed in every key block, as FA1 rereads ``Q_i``). Its first step
  reads ``O = 0``, ``l = 0``, ``m = -inf``, which FA1 first writes to slow memory: ``N (d + 2)``
  writes of constants. A constant has no parents, so in a game it is an input, blue from the
  start, and writing it would first need a red pebble on it, that is a read the memory model does
  not make. So the game makes every read the model makes, and every write but those.
- ``square_tiling`` (both schedules) on ``attention_graph(N, d)``: equal. Phase 1 writes
  ``exp(S)`` and the row sums where the memory model writes ``S`` and the row maxima, the same
  number of entries; phase 2 reads them back.
- ``standard`` (one-pass and two-pass softmax) on ``attention_graph(N, d, softmax="rows")``:
  equal. ``S`` and ``P`` are vertices and are written as the model writes them. The softmax
  computes the graph's running maximum and sum (which the two-pass softmax needs, its rows being
  read in strips) also when a row block is read whole: arithmetic on red pebbles, no moves.
- backward passes, ``play_schedule(..., backward=True)``: ``flash`` on
  ``attention_backward_graph(N, d, scale=True)``, ``square_tiling`` (both schedules) and
  ``standard`` on ``attention_backward_graph(N, d)``: equal. ``P``, ``dP``, ``dS``, ``D`` and the
  partial sums of ``dQ`` (which the FlashAttention backward writes and reads back in every key
  block) are vertices. ``tau`` is a vertex where the algorithm folds it into an operand (``tau K_j``
  in the FlashAttention backward); where it scales a finished tile in the cache it is left out,
  which moves nothing either way.

The games are of dense attention: a mask, or ``save_lse`` (an ``L`` output that no forward graph
has), is refused.

Why ``M + 2``: the memory model updates ``C += a b`` in place; the game needs one red pebble for
the product and one for the new partial sum before the old ones are deleted (a value that
replaces another in place, such as ``P = exp(S - L)`` over ``S``, needs one). So a schedule that
fits in ``M`` entries is played with up to ``M + 2`` red pebbles (:data:`EXTRA_PEBBLES`), and a
lower bound on ``Q(G, M + 2)`` bounds the memory model's count at ``M``. A schedule that uses a
value as soon as it is computed (the flash schedule uses each score at once) can need fewer than
its memory-model footprint.

References
----------
.. [SY] B. Saha, C. Ye, ICML 2024, arXiv:2402.07443.
.. [FA] T. Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 1.
"""

from __future__ import annotations

from ..algorithms import plan_matmul
from ..api import plan as attention_plan
from ..bounds import EXTRA_PEBBLES
from .builders import attention_backward_graph, attention_graph, matmul_graph
from .game import PebbleGame
from .graph import Graph

__all__ = ["EXTRA_PEBBLES", "flash_backward_moves", "flash_moves", "matmul_moves",
           "play_schedule", "schedule_graph", "square_tiling_backward_moves",
           "square_tiling_moves", "standard_backward_moves", "standard_moves"]

class _Moves(list):
    """A move list with the steps every schedule repeats."""

    def add_term(self, acc, term, total):
        """Fold ``term`` into the running sum ``acc`` (None before the first term)."""
        if acc is None:
            return term
        self.append(("compute", total))
        self += [("delete", acc), ("delete", term)]
        return total

    def dot(self, acc, products, partials):
        """Compute each of ``products`` and fold it into ``acc`` as ``partials`` say."""
        for p, s in zip(products, partials):
            self.append(("compute", p))
            acc = self.add_term(acc, p, s)
        return acc

    def reads(self, vertices):
        self += [("read", v) for v in vertices]

    def writes(self, vertices):
        self += [("write", v) for v in vertices]

    def deletes(self, vertices):
        self += [("delete", v) for v in vertices]

    def store(self, vertices):
        """Write the red ``vertices`` to slow memory and free them."""
        vertices = list(vertices)
        self.writes(vertices)
        self.deletes(vertices)


def _blocks(n, b):
    return [range(s, min(s + b, n)) for s in range(0, n, b)]


def _plan(name, N, d, M, options, backward=False):
    """The algorithm's plan, for dense attention without ``save_lse`` (the games' graphs)."""
    if options.get("mask") is not None:
        raise ValueError("the games are played on the graphs of dense attention: no mask")
    if options.get("save_lse"):
        raise ValueError("the forward graphs have no L output: no save_lse")
    return attention_plan(name, N, d, M, backward=backward, **options)


def _tiled_product(moves: _Moves, plan, a, b, product, partial, finish_tile,
                   row_start=None, row_end=None) -> None:
    """The outer-product loop of :func:`ioattn.algorithms.matmul.tiled_product`, as moves.

    ``a(i, l)`` and ``b(l, j)`` name the operands, ``product(i, l, j)`` and ``partial(i, j, l)``
    the graph's products and partial sums; ``finish_tile(acc, state)`` gets the finished sums
    (``acc[i, j]``, in row-major order) while they are red; ``row_start(rows)`` and
    ``row_end(rows, state)`` bracket each block of rows.
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


def _store(moves: _Moves, record=None):
    """A ``finish_tile`` that writes the tile (noting each vertex in ``record``) and frees it."""
    def store(acc, state):
        if record is not None:
            record.update(acc)
        moves.store(acc.values())
    return store


def matmul_moves(m: int, k: int, n: int, M: int, tile=None) -> list:
    """The outer-product schedule of :func:`ioattn.run_matmul` on ``matmul_graph(m, k, n)``."""
    moves = _Moves()
    _tiled_product(moves, plan_matmul(m, k, n, M, tile), lambda i, l: ("A", i, l),
                   lambda l, j: ("B", l, j), lambda i, l, j: ("mul", i, l, j),
                   lambda i, j, l: ("sum", i, j, l), _store(moves))
    return list(moves)


# ---------------------------------------------------------------------- forward
def _score(moves: _Moves, i, j, d):
    """Compute ``exp(S_ij)`` from red ``Q_i``, ``K_j`` rows; only the exponential stays red."""
    acc = None
    for l in range(d):
        moves.append(("compute", ("QK", i, j, l)))
        acc = moves.add_term(acc, ("QK", i, j, l), ("S", i, j, l))
    moves += [("compute", ("exp", i, j)), ("delete", acc)]


def _scores(moves: _Moves, i, j, d):
    """Compute ``S_ij`` (left red) from red operand rows; return its vertex."""
    return moves.dot(None, [("QK", i, j, l) for l in range(d)],
                     [("S", i, j, l) for l in range(d)])


def flash_moves(N: int, d: int, M: int, **options) -> list:
    """FlashAttention (the plan of ``ioattn.plan("flash", ...)``) as moves.

    The FA2 order is played on ``attention_graph(N, d)``, the FA1 order (``variant="fa1"``) on
    ``attention_graph(N, d, softmax="online", scale=True)``; see the module docstring.
    """
    p = _plan("flash", N, d, M, options)
    if p.variant == "fa1":
        return _fa1_moves(p)
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


def _fa1_moves(p) -> list:
    """FA1 (:func:`ioattn.algorithms.flash._fa1`): ``K_j, V_j`` outer; each inner step reads
    ``R`` rows of ``Q_i, O_i, l_i, m_i``, scales ``Q_i`` by ``tau``, forms ``S_ij``, takes its keys
    one at a time through the online softmax and writes ``O_i, l_i, m_i`` back."""
    N, d = p.N, p.d
    moves = _Moves()
    for cols in _blocks(N, p.B_c):
        KV = [("K", j, l) for j in cols for l in range(d)] + \
             [("V", j, c) for j in cols for c in range(d)]
        moves.reads(KV)
        before = cols[0] - 1                                # the values read: after key before
        for block in _blocks(N, p.B_r):
            for rows in _blocks(len(block), p.R):
                rows = [block[r] for r in rows]
                O = {(i, c): ("O", i, c, before) for i in rows for c in range(d)}
                l = {i: ("l", i, before) for i in rows}
                m = {i: ("m", i, before) for i in rows}
                moves.reads([("Q", i, k) for i in rows for k in range(d)])
                moves.reads(O.values())
                moves.reads(l.values())
                moves.reads(m.values())
                for i in rows:                              # Q_i *= tau, in place
                    for k in range(d):
                        moves += [("compute", ("tauQ", i, k)), ("delete", ("Q", i, k))]
                S = {(i, j): _scores(moves, i, j, d) for i in rows for j in cols}
                for i in rows:
                    for j in cols:
                        m[i], l[i] = _fa1_key(moves, i, j, d, S[i, j], m[i], l[i], O)
                moves.writes(O.values())
                moves.writes(l.values())
                moves.writes(m.values())
                moves.deletes([("tauQ", i, k) for i in rows for k in range(d)])
                moves.deletes(O.values())
                moves.deletes(l.values())
                moves.deletes(m.values())
        moves.deletes(KV)
    return list(moves)


def _fa1_key(moves: _Moves, i, j, d, S_ij, m, l, O):
    """Key ``j`` of row ``i`` through the online softmax: ``m``, ``l`` and ``O[i, c]`` (red)
    are replaced by their values after key ``j``, and ``S_ij`` is used up. Returns ``(m, l)``."""
    m_new, alpha, rescale = ("m", i, j), ("alpha", i, j), ("rescale", i, j)
    e, l_new = ("exp", i, j), ("l", i, j)
    moves += [("compute", m_new), ("compute", alpha), ("delete", m),
              ("compute", rescale), ("delete", alpha), ("delete", l),
              ("compute", e), ("delete", S_ij), ("compute", l_new)]
    for c in range(d):
        old, av, num, new = ("rescaled", i, c, j), ("AV", i, j, c), ("num", i, c, j), \
            ("O", i, c, j)
        moves += [("compute", old), ("delete", O[i, c]), ("compute", av), ("compute", num),
                  ("delete", old), ("delete", av), ("compute", new), ("delete", num)]
        O[i, c] = new
    moves.deletes([rescale, e])
    return m_new, l_new


def square_tiling_moves(N: int, d: int, M: int, **options) -> list:
    """Square tiling (either schedule, the plan of ``ioattn.plan("square_tiling", ...)``) on
    ``attention_graph``. Needs ``N >= 2`` (for ``N = 1`` the row sum is the exponential itself)."""
    if N < 2:
        raise ValueError("the square-tiling game needs N >= 2: with N = 1 the row sum and the "
                         "single exponential are one vertex of the attention graph")
    p = _plan("square_tiling", N, d, M, options)
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


def standard_moves(N: int, d: int, M: int, **options) -> list:
    """Standard attention (:mod:`ioattn.algorithms.standard`) on
    ``attention_graph(N, d, softmax="rows")``: ``S = Q K^T`` written, the softmax in one pass
    (blocks of ``R`` whole rows) or two (each row in strips of ``W``, read twice), ``P``
    written, ``O = P V``."""
    p = _plan("standard", N, d, M, options)
    moves = _Moves()
    S = {}
    _tiled_product(moves, p.scores, lambda i, l: ("Q", i, l), lambda l, j: ("K", j, l),
                   lambda i, l, j: ("QK", i, j, l), lambda i, j, l: ("S", i, j, l),
                   _store(moves, S))
    if p.passes == 1:
        for rows in _blocks(N, p.R):
            block = [S[i, j] for i in rows for j in range(N)]
            moves.reads(block)
            red = set(block)
            stats = {i: _row_stats(moves, i, [S[i, j] for j in range(N)], red) for i in rows}
            P = [_normalise(moves, i, j, S[i, j], *stats[i]) for i in rows for j in range(N)]
            moves.store(P)
            for i in rows:
                _drop_stats(moves, *stats[i], S[i, 0])
    else:
        for i in range(N):
            stats = (None, None)
            for cols in _blocks(N, p.W):                    # pass 1: the running max and sum
                strip = [S[i, j] for j in cols]
                moves.reads(strip)
                stats = _row_stats(moves, i, strip, set(strip), cols[0], stats)
                moves.deletes([v for v in strip if v != stats[0]])
            for cols in _blocks(N, p.W):                    # pass 2: P = exp(S - m) / l
                moves.reads([S[i, j] for j in cols])
                P = [_normalise(moves, i, j, S[i, j], *stats) for j in cols]
                moves.store(P)
            _drop_stats(moves, *stats, S[i, 0])
    _tiled_product(moves, p.output, lambda i, j: ("P", i, j), lambda j, c: ("V", j, c),
                   lambda i, j, c: ("PV", i, j, c), lambda i, c, j: ("O", i, c, j),
                   _store(moves))
    return list(moves)


def _row_stats(moves: _Moves, i, scores, red, j0=0, stats=(None, None)):
    """Fold the red ``scores`` of row ``i`` (keys ``j0, j0 + 1, ...``) into its running maximum
    and sum ``stats = (m, l)`` of the ``"rows"`` graph; they stay red. A maximum that is one of
    the scores (``m = S_i0`` after key 0) is deleted when replaced only if it is not in ``red``
    (the scores the caller still holds)."""
    m, l = stats
    for j, S_ij in enumerate(scores, j0):
        if m is None:                                       # key 0: m = S_i0, l = exp(0)
            m, l = S_ij, ("exp", i, j)
            moves.append(("compute", l))
            continue
        m_new, alpha, rescale, e, l_new = (("m", i, j), ("alpha", i, j), ("rescale", i, j),
                                           ("exp", i, j), ("l", i, j))
        moves += [("compute", m_new), ("compute", alpha)]
        if m not in red:
            moves.append(("delete", m))
        moves += [("compute", rescale), ("delete", alpha), ("delete", l), ("compute", e),
                  ("compute", l_new), ("delete", rescale), ("delete", e)]
        m, l = m_new, l_new
    return m, l


def _normalise(moves: _Moves, i, j, S_ij, m, l):
    """``P_ij = exp(S_ij - m_i) / l_i`` over the red ``S_ij``, which is used up."""
    moves += [("compute", ("p", i, j)), ("delete", S_ij), ("compute", ("P", i, j)),
              ("delete", ("p", i, j))]
    return ("P", i, j)


def _drop_stats(moves: _Moves, m, l, S_i0):
    """Delete a row's statistics (``m`` is ``S_i0``, used up by ``P``, when ``N = 1``)."""
    moves.deletes([l] if m == S_i0 else [m, l])


# ---------------------------------------------------------------------- backward
def _row_pass_D(moves: _Moves, rp, D: dict) -> None:
    """The ``D = rowsum(dO o O)`` pass (:func:`ioattn.algorithms.backward_standard.row_pass`):
    blocks of ``R`` rows, strips of ``W`` columns; ``D_i`` is written and noted in ``D``."""
    for rows in _blocks(rp.m, rp.R):
        acc = {i: None for i in rows}
        for cols in _blocks(rp.n, rp.W):
            strips = [("dO", i, c) for i in rows for c in cols] + \
                     [("O", i, c) for i in rows for c in cols]
            moves.reads(strips)
            for i in rows:
                acc[i] = moves.dot(acc[i], [("dOO", i, c) for c in cols],
                                   [("D", i, c) for c in cols])
            moves.deletes(strips)
        D.update(acc)
        moves.store(acc.values())


def _tile_rows_cols(acc):
    """The rows and the columns of a finished tile ``acc``, in order."""
    rows = list(dict.fromkeys(i for i, _ in acc))
    cols = list(dict.fromkeys(j for _, j in acc))
    return rows, cols


def _gradient_products(moves: _Moves, p) -> None:
    """``dQ = tau dS K`` and ``dK = tau dS^T Q`` (``dS``, ``dS^T`` from slow memory; ``tau`` is
    applied to the finished tiles in the cache, no vertex)."""
    _tiled_product(moves, p.dQ, lambda i, j: ("dS", i, j), lambda j, c: ("K", j, c),
                   lambda i, j, c: ("dSK", i, j, c), lambda i, c, j: ("dQ", i, c, j),
                   _store(moves))
    _tiled_product(moves, p.dK, lambda j, i: ("dS", i, j), lambda i, c: ("Q", i, c),
                   lambda j, i, c: ("dSQ", i, j, c), lambda j, c, i: ("dK", j, c, i),
                   _store(moves))


def _dV_product(moves: _Moves, p) -> None:
    """``dV = P^T dO`` with ``P`` read transposed."""
    _tiled_product(moves, p.dV, lambda j, i: ("P", i, j), lambda i, c: ("dO", i, c),
                   lambda j, i, c: ("PdO", i, j, c), lambda j, c, i: ("dV", j, c, i),
                   _store(moves))


def flash_backward_moves(N: int, d: int, M: int, **options) -> list:
    """The FlashAttention backward (:mod:`ioattn.algorithms.backward_flash`, FA2 order) on
    ``attention_backward_graph(N, d, scale=True)``: ``D`` first, then ``K_j, V_j`` blocks outer
    (``K_j`` scaled by ``tau``) and query blocks inner, ``dQ_i`` read (after the first key block)
    and written back in every inner step, ``dK_j`` scaled and written with ``dV_j``."""
    p = _plan("flash", N, d, M, options, backward=True)
    moves = _Moves()
    D = {}
    for rows in _blocks(N, p.B_r):                          # 1. D = rowsum(dO o O)
        dO = [("dO", i, c) for i in rows for c in range(d)]
        O = [("O", i, c) for i in rows for c in range(d)]
        moves.reads(dO)
        moves.reads(O)
        for i in rows:
            D[i] = moves.dot(None, [("dOO", i, c) for c in range(d)],
                             [("D", i, c) for c in range(d)])
        moves.writes(D[i] for i in rows)
        moves.deletes(dO + O + [D[i] for i in rows])
    dQ = {(i, c): None for i in range(N) for c in range(d)}
    for cols in _blocks(N, p.B_c):                          # 2. K/V blocks outer
        V = [("V", j, c) for j in cols for c in range(d)]
        moves.reads([("K", j, l) for j in cols for l in range(d)])
        moves.reads(V)
        tauK = []
        for j in cols:                                      # K_j *= tau, in place
            for l in range(d):
                moves += [("compute", ("tauK", j, l)), ("delete", ("K", j, l))]
                tauK.append(("tauK", j, l))
        dK = {(j, c): None for j in cols for c in range(d)}
        dV = dict(dK)
        for rows in _blocks(N, p.B_r):
            Q = [("Q", i, l) for i in rows for l in range(d)]
            L = [("L", i) for i in rows]
            moves.reads(Q)
            moves.reads(L)
            P = []
            for i in rows:                                  # P = exp(Q_i (tau K_j)^T - L_i)
                for j in cols:
                    S = _scores(moves, i, j, d)
                    moves += [("compute", ("P", i, j)), ("delete", S)]
                    P.append(("P", i, j))
            dO = [("dO", i, c) for i in rows for c in range(d)]
            moves.reads(dO)
            for j in cols:                                  # dV_j += P^T dO_i
                for c in range(d):
                    dV[j, c] = moves.dot(dV[j, c], [("PdO", i, j, c) for i in rows],
                                         [("dV", j, c, i) for i in rows])
            moves.reads(D[i] for i in rows)
            dS = []
            for i in rows:                                  # dS = P o (dO_i V_j^T - D_i)
                for j in cols:
                    dP = moves.dot(None, [("dOV", i, j, c) for c in range(d)],
                                   [("dP", i, j, c) for c in range(d)])
                    moves += [("compute", ("dPD", i, j)), ("delete", dP),
                              ("compute", ("dS", i, j)), ("delete", ("dPD", i, j))]
                    dS.append(("dS", i, j))
            started = [dQ[i, c] for i in rows for c in range(d) if dQ[i, c] is not None]
            moves.reads(started)                            # none in the first key block
            for i in rows:                                  # dQ_i += dS (tau K_j), written
                for c in range(d):
                    dQ[i, c] = moves.dot(dQ[i, c], [("dSK", i, j, c) for j in cols],
                                         [("dQ", i, c, j) for j in cols])
            moves.writes(dQ[i, c] for i in rows for c in range(d))
            for j in cols:                                  # dK_j += dS^T Q_i
                for c in range(d):
                    dK[j, c] = moves.dot(dK[j, c], [("dSQ", i, j, c) for i in rows],
                                         [("dK", j, c, i) for i in rows])
            moves.deletes(Q + L + P + dO + [D[i] for i in rows] + dS)
            moves.deletes(dQ[i, c] for i in rows for c in range(d))
        for (j, c), v in dK.items():                        # dK_j *= tau
            moves += [("compute", ("tau_dK", j, c)), ("delete", v)]
            dK[j, c] = ("tau_dK", j, c)
        moves.writes(dK.values())
        moves.writes(dV.values())
        moves.deletes(tauK + V + list(dK.values()) + list(dV.values()))
    return list(moves)


def square_tiling_backward_moves(N: int, d: int, M: int, **options) -> list:
    """The square-tiling backward (:mod:`ioattn.algorithms.backward_square_tiling`, either
    schedule) on ``attention_backward_graph(N, d)``: ``P`` (with ``L`` per row block), the ``D``
    pass, ``dS`` fused in the epilogue of ``dO V^T`` (with ``D`` per row block and ``P`` read in
    chunks of ``h`` rows), then ``dV``, ``dQ``, ``dK``."""
    p = _plan("square_tiling", N, d, M, options, backward=True)
    moves = _Moves()

    def read_rows(stat):
        def start(rows):
            vertices = [stat(i) for i in rows]
            moves.reads(vertices)
            return vertices
        return start

    def free_rows(rows, vertices):
        moves.deletes(vertices)

    def exponentiate(acc, L):                               # P = exp(tau S - L), written
        for (i, j), S in acc.items():
            moves.extend([("compute", ("P", i, j)), ("delete", S)])
        moves.store(("P",) + key for key in acc)

    _tiled_product(moves, p.P, lambda i, l: ("Q", i, l), lambda l, j: ("K", j, l),
                   lambda i, l, j: ("QK", i, j, l), lambda i, j, l: ("S", i, j, l),
                   exponentiate, read_rows(lambda i: ("L", i)), free_rows)
    D = {}
    _row_pass_D(moves, p.D_pass, D)

    def times_P(acc, D_rows):                               # dS = P o (dP - D), written
        for (i, j), dP in acc.items():
            moves.extend([("compute", ("dPD", i, j)), ("delete", dP)])
        rows, cols = _tile_rows_cols(acc)
        for h0 in range(0, len(rows), p.h):
            chunk = [("P", i, j) for i in rows[h0:h0 + p.h] for j in cols]
            moves.reads(chunk)
            for _, i, j in chunk:
                moves.extend([("compute", ("dS", i, j)), ("delete", ("dPD", i, j))])
            moves.deletes(chunk)
        moves.store(("dS",) + key for key in acc)

    _tiled_product(moves, p.dS, lambda i, c: ("dO", i, c), lambda c, j: ("V", j, c),
                   lambda i, c, j: ("dOV", i, j, c), lambda i, j, c: ("dP", i, j, c),
                   times_P, read_rows(lambda i: D[i]), free_rows)
    _dV_product(moves, p)
    _gradient_products(moves, p)
    return list(moves)


def standard_backward_moves(N: int, d: int, M: int, **options) -> list:
    """The standard backward (:mod:`ioattn.algorithms.backward_standard`) on
    ``attention_backward_graph(N, d)``: ``P`` (reading ``L`` per tile), ``dV``, ``dP``
    (written), the ``D`` pass, the ``dS`` pass (``P``, ``dP`` and ``D`` read, ``dS`` written),
    ``dQ``, ``dK``."""
    p = _plan("standard", N, d, M, options, backward=True)
    moves = _Moves()

    def exponentiate(acc, state):                           # L read per tile; P written
        rows, _ = _tile_rows_cols(acc)
        L = [("L", i) for i in rows]
        moves.reads(L)
        for (i, j), S in acc.items():
            moves.extend([("compute", ("P", i, j)), ("delete", S)])
        moves.deletes(L)
        moves.store(("P",) + key for key in acc)

    _tiled_product(moves, p.P, lambda i, l: ("Q", i, l), lambda l, j: ("K", j, l),
                   lambda i, l, j: ("QK", i, j, l), lambda i, j, l: ("S", i, j, l),
                   exponentiate)
    _dV_product(moves, p)
    dP = {}
    _tiled_product(moves, p.dP, lambda i, c: ("dO", i, c), lambda c, j: ("V", j, c),
                   lambda i, c, j: ("dOV", i, j, c), lambda i, j, c: ("dP", i, j, c),
                   _store(moves, dP))
    D = {}
    _row_pass_D(moves, p.D_pass, D)
    rp = p.dS_pass
    for rows in _blocks(N, rp.R):                           # dS = P o (dP - D)
        moves.reads(D[i] for i in rows)
        for cols in _blocks(N, rp.W):
            moves.reads(("P", i, j) for i in rows for j in cols)
            moves.reads(dP[i, j] for i in rows for j in cols)
            dS = []
            for i in rows:
                for j in cols:
                    moves += [("compute", ("dPD", i, j)), ("delete", dP[i, j]),
                              ("compute", ("dS", i, j)), ("delete", ("dPD", i, j)),
                              ("delete", ("P", i, j))]
                    dS.append(("dS", i, j))
            moves.store(dS)
        moves.deletes(D[i] for i in rows)
    _gradient_products(moves, p)
    return list(moves)


# ---------------------------------------------------------------------- games
_FORWARD = {"flash": flash_moves, "square_tiling": square_tiling_moves,
            "standard": standard_moves}
_BACKWARD = {"flash": flash_backward_moves, "square_tiling": square_tiling_backward_moves,
             "standard": standard_backward_moves}


def schedule_graph(name: str, *sizes, backward: bool = False, **options) -> Graph:
    """The graph on which :func:`play_schedule` plays ``name`` (see the module docstring).

    Parameters
    ----------
    name : str
        ``"matmul"`` (sizes ``m, k, n``) or an attention algorithm (sizes ``N, d``).
    backward : bool
        The algorithm's backward pass.
    **options
        The algorithm's options; only ``variant`` (flash) changes the graph.
    """
    if name == "matmul" and not backward:
        return matmul_graph(*sizes)
    if backward and name in _BACKWARD:
        return attention_backward_graph(*sizes, scale=name == "flash")
    if not backward and name in _FORWARD:
        if name == "standard":
            return attention_graph(*sizes, softmax="rows")
        if name == "flash" and options.get("variant", "fa2") == "fa1":
            return attention_graph(*sizes, softmax="online", scale=True)
        return attention_graph(*sizes)
    known = ", ".join(sorted(_BACKWARD)) if backward else \
        ", ".join(["matmul"] + sorted(_FORWARD))
    what = "backward game schedule" if backward else "game schedule"
    raise ValueError(f"no {what} for {name!r}; there are: {known}")


def play_schedule(name: str, *sizes, M: int, backward: bool = False,
                  **options) -> PebbleGame:
    """Play an algorithm's schedule as a checked game with ``M + EXTRA_PEBBLES`` red pebbles.

    Parameters
    ----------
    name : str
        ``"matmul"`` (``play_schedule("matmul", m, k, n, M=...)``) or ``"flash"``,
        ``"square_tiling"``, ``"standard"`` (``play_schedule("flash", N, d, M=...)``).
    *sizes : int
        The problem's sizes.
    M : int
        The memory-model cache the schedule is planned for.
    backward : bool
        Play the algorithm's backward pass (on :func:`attention_backward_graph`).
    **options
        The algorithm's options (``variant``, ``block``, ``schedule``; ``tile`` for matmul).

    Returns
    -------
    PebbleGame
        The finished game on :func:`schedule_graph`; every move was checked.
    """
    graph = schedule_graph(name, *sizes, backward=backward, **options)
    if name == "matmul":
        moves = matmul_moves(*sizes, M, **options)
    else:
        moves = (_BACKWARD if backward else _FORWARD)[name](*sizes, M, **options)
    return PebbleGame.replay(graph, M + EXTRA_PEBBLES, moves)
