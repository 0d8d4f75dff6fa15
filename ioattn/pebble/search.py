"""The exact optimum of the red-blue pebble game on small graphs, by A* search.

:func:`min_io` finds the I/O complexity ``Q(G, M)`` of Hong and Kung [HK]_ -- the least number of
reads and writes over all complete games on ``G`` with at most ``M`` red pebbles -- together with
a game that attains it. The game is the classic one of :mod:`ioattn.pebble.game`: recomputation
is allowed, blue pebbles are never removed, the inputs start blue, and a game is complete when
every output is blue.

The search is A* over states ``(red, blue)`` (bit masks, bit ``i`` for ``graph.order[i]``),
reads and writes costing 1, computes and deletes 0. It is exact, but it explores only
*canonical* games: each rule below comes with an exchange argument that turns any game into one
that obeys it with no more I/O (and ``tests/pebble/test_search.py`` checks the whole against a
plain search over every move on random small DAGs).

1. *Lazy deletion.* A red pebble is removed only when a placement (read or compute) finds all
   ``M`` in use, and then exactly one (an *eviction*). Delaying the deletes of a game until their
   slots are needed keeps it legal: a larger red set enables every move (a placement on a vertex
   still red is dropped, saving its I/O), and when the cache is full where the original game has
   a free slot, some vertex red here is not red there -- evict it; it is neither the vertex being
   placed nor, since the original holds them red, one of its operands.
2. *Lazy writes.* A write of a non-output ``u`` only serves later reads of ``u``, which need it
   deleted first; moving the write to just before that delete keeps the game legal (``u`` stays
   red in between, so nothing in between reads it). So a non-output is written only as part of
   its eviction (a *spill*, one I/O), and only if it is not blue already.
3. *Eager output writes.* An output that is red and not yet blue is written at once: it must be
   written some time, and an earlier blue pebble only enables more (drop the later write).
4. *Dead vertices.* A vertex that is neither an output still to be written nor an ancestor of one
   is of no further use (nor are its descendants): its red pebble is deleted at once and it is
   never placed again.
5. *Free computes.* With a free slot, computing a live vertex whose operands are red is free and
   cannot hurt: a red set that is a superset (within ``M``) is never worse, by the simulation of
   rule 1. So while a slot is free and some live vertex can be computed, the lowest-numbered one
   is, and nothing else is considered; with a free slot the other moves are reads, which do not
   evict.
6. *No fresh plain eviction.* If a state was reached (on the best path found to it) by placing
   ``x`` and nothing else, evicting ``x`` unwritten by the next placement ``w`` leads where the
   parent leads directly: placing ``w`` while evicting what ``x`` evicted (or into the free slot
   ``x`` took; ``w`` is then a read, as a free compute would have been forced there), for no
   more I/O. The parent was expanded with that cost before, so the move is skipped.
7. *No undoing an eviction.* Likewise, if that placement of ``x`` evicted ``u`` unwritten, placing
   ``u`` again while evicting ``y`` leads where placing ``x`` while evicting ``y`` leads from the
   parent, for less; skipped whenever that move is legal there (``y`` is not ``x`` itself, nor
   an operand of a computed ``x``). If the parent skipped that move too, by rule 6 or 7, its own
   parent made it, and so on back: the states are reached at no more cost either way.
8. *Dominated reads.* A read of a vertex whose operands are all red, evicting a non-operand, is
   dropped: the compute leads to the same state for free.
9. *Mirror images.* An automorphism of the game (:mod:`ioattn.pebble.symmetry`) maps every game
   to a game of the same I/O, so the least I/O still needed from a state is that of its image.
   The search keeps one record for each set of images, under the canonical one, holding the
   image that its best step so far reached; that image is the one expanded, so the recorded
   steps form a game and rules 6 and 7 read them as they are (the states they argue about are
   reached, up to an image, at no more cost). The automorphisms used are those that also map
   the heuristic's families to themselves, so that ``h`` is equal on images and stays
   consistent on the merged states; rules 1-5 and 8 hold from every state, so merging keeps
   the optimum.

Rules 3-5 are applied as a deterministic closure after every move, so a search step is one
placement (with its eviction, plain or spilled) followed by the closure's forced moves.

The heuristic (``_Search.needed``) counts the writes of the outputs still to be written, the
reads of the inputs they still need, and reads (and writes) of computed values that the cache
size forces: admissible and consistent, so the first complete game taken off the queue is
optimal. Ties in the queue go to the state pushed last (depth first), which finds the goal in
the last layer of equal cost much sooner than ordering by the heuristic.

*An incumbent.* Given a complete game of I/O ``U`` (``min_io(..., incumbent=moves)``, such as
:func:`ioattn.pebble.upper.good_game` finds in a fraction of a second), the search records no
state whose ``f`` is ``U`` or more: ``h`` is admissible, so every game through such a state costs
at least ``U``, and none of them beats the incumbent. If the queue runs dry, no game costs less
than ``U``, and the incumbent is optimal. That saves the memory of those states and the search
for a goal among the states of ``f = U``, typically the largest layer.

:func:`min_io` runs this search compiled to machine code (:mod:`ioattn.pebble.compiled`, with
Numba) unless told ``engine="python"``, which runs it as written here: the reference the compiled
search is tested against. The queue's order (least ``f``, then the state pushed last) is total, so
both expand the same states in the same order and find the same optimal game.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
"""

from __future__ import annotations

import heapq
import sys
import time
from dataclasses import dataclass, field, replace

from .._validate import as_count, as_real, as_threads
from .game import PebbleGame, without_idle_computes
from .graph import Graph
from .symmetry import MAX_SYMMETRIES, Symmetry

__all__ = ["MAX_VERTICES", "Optimum", "SearchLimitError", "min_io"]

#: The most vertices :func:`min_io` accepts unless told otherwise: the number of states grows
#: exponentially, and far below this the search already runs out of time.
MAX_VERTICES = 64

#: With ``progress=None``, the bar appears once the search has run this long (seconds).
PROGRESS_AFTER = 2.0


class SearchLimitError(RuntimeError):
    """The exact search gave up: it expanded ``max_states`` states or ran past its time limit.

    Attributes ``states`` (states expanded), ``seconds`` (time spent) and ``bound`` (the least
    f-value still open: a proven lower bound on the optimum); ``generated`` (distinct states
    reached) and ``memory`` (bytes of the compiled search's arrays) where known, else None.
    """

    def __init__(self, message: str, states: int, seconds: float, bound: int, *,
                 generated: int | None = None, memory: int | None = None):
        self.states, self.seconds, self.bound = states, seconds, bound
        self.generated, self.memory = generated, memory
        super().__init__(message)


def _limit_error(n: int, M: int, expanded: int, elapsed: float, f: int, max_states: int,
                 time_limit, **extra) -> SearchLimitError:
    """The error of a search that gave up after ``expanded`` states, with ``f`` the least open
    f-value."""
    why = (f"expanded max_states = {max_states} states" if expanded >= max_states
           else f"ran past time_limit = {time_limit} s")
    return SearchLimitError(
        f"exact search gave up: it {why} ({expanded} states explored in {elapsed:.1f} s; the "
        f"optimum is at least {f}): the instance (a graph of {n} vertices with M = {M}) is too "
        "large for exact search", expanded, elapsed, f, **extra)


@dataclass(frozen=True)
class Optimum:
    """The result of :func:`min_io`.

    Attributes
    ----------
    io : int
        The least I/O (reads + writes) of a complete game: the I/O complexity ``Q(G, M)``.
    moves : list of (str, vertex)
        An optimal game; ``PebbleGame.replay(graph, M, moves)`` plays it to a complete game of
        I/O ``io``.
    states : int
        States expanded by the search.
    seconds : float
        Wall-clock time of the search.
    M : int
        The number of red pebbles.
    reads, writes : int
        The I/O of ``moves``, split: ``reads + writes == io``.
    generated : int
        Distinct states the search reached (expanded or left on its frontier).
    lower_bound : int
        The heuristic at the start, a lower bound on ``io``: the number of outputs plus the
        number of inputs they depend on (outputs that are inputs excepted), plus reads of
        computed values that ``M`` forces.
    engine : str
        The engine that searched: ``"compiled"`` or ``"python"`` (see :func:`min_io`).
    symmetries : int
        The automorphisms of the game the search merged states by (rule 9; 1: the identity
        alone).
    memory : int
        Bytes of the compiled search's arrays (its table of states, queue and memos) at the end;
        0 for the Python engine.
    """

    io: int
    moves: list = field(repr=False)
    states: int
    seconds: float
    M: int = 0
    reads: int = 0
    writes: int = 0
    generated: int = 0
    lower_bound: int = 0
    engine: str = "python"
    memory: int = 0
    symmetries: int = 1


#: The engines of :func:`min_io`.
ENGINES = ("compiled", "python")


def min_io(graph: Graph, M: int, *, max_states: int = 2_000_000, time_limit: float | None = None,
           max_vertices: int = MAX_VERTICES, progress: bool | None = None,
           engine: str = "compiled", symmetry: bool = True,
           incumbent: list | None = None, threads: int = 1) -> Optimum:
    """The exact minimum I/O of the red-blue pebble game [HK]_ on ``graph`` with ``M`` red pebbles.

    The game is Hong and Kung's: reads and writes cost one I/O each, computes and deletes are
    free, recomputation is allowed, blue pebbles are never removed, the inputs start blue and
    the game is complete when every output is blue. The search is A* over canonical games (see
    the module docstring) with an admissible, consistent heuristic, so the result is the true
    optimum ``Q(G, M)``. Its cost grows exponentially with the graph: a few tens of vertices
    is the practical limit, less when ``M`` is small.

    Parameters
    ----------
    graph : Graph
        The computation DAG.
    M : int
        The number of red pebbles; at least ``graph.max_in_degree + 1``, so that every vertex
        can be computed.
    max_states : int, optional
        Give up (:class:`SearchLimitError`) after expanding this many states.
    time_limit : float, optional
        Give up (:class:`SearchLimitError`) after this many seconds; no limit by default.
    max_vertices : int, optional
        Refuse graphs with more vertices up front (default :data:`MAX_VERTICES`).
    progress : bool, optional
        A tqdm progress bar on stderr counting expanded states and showing the least open
        f-value (a lower bound on the optimum): ``True`` always, ``False`` never, ``None`` (the
        default) only once the search has run for two seconds.
    engine : {"compiled", "python"}, optional
        ``"compiled"`` (the default): the search compiled to machine code by Numba
        (:mod:`ioattn.pebble.compiled`), compiled on the first call of a process (or loaded
        from Numba's on-disk cache). ``"python"``: the same search in pure Python, the
        reference the compiled one is tested against. Both expand the same states in the same
        order and return the same optimum; the compiled search falls back to the Python one
        where Numba cannot be imported or the graph has more than 64 vertices.
    symmetry : bool, optional
        Merge states that are mirror images under automorphisms of the game (rule 9 of the
        module docstring): the same optimum from fewer states where the graph has symmetries
        (``attention_graph(2, 2)`` has 16). ``False`` searches every state.
    incumbent : list of (str, vertex), optional
        A complete game known beforehand, such as :func:`ioattn.pebble.upper.good_game` finds;
        its I/O ``U`` bounds the optimum from above. The search then skips every state whose
        ``f = g + h`` is at least ``U`` (no game through it costs less than ``U``), which saves
        the memory of those states and the search for a goal in the last layer of equal ``f``:
        if no cheaper game exists, the incumbent itself is returned, proved optimal.
    threads : int, optional
        Threads of the compiled search (default 1). With more, it expands the states of the
        least ``f`` in batches, listing their successors on the threads side by side
        (:func:`ioattn.pebble.compiled._threaded`): the same optimum, deterministic, but the
        states expanded, and the optimal game returned, may differ from those of one thread
        (and of the Python search, which runs on one). At most the cores this process may
        use: more are cut to that many, with a ``RuntimeWarning`` saying so (each thread has
        its own buffers, and more threads than cores would only add memory).

    Returns
    -------
    Optimum
        The optimum, an optimal move list and search statistics.

    Notes
    -----
    ``Q(G, M) = Q(G, n)`` for every ``M >= n``, the number of vertices, and the search runs at
    ``min(M, n)`` (its memory grows with ``M``). Proof: a vertex holds at most one red pebble,
    so no configuration of the game has more than ``n`` red pebbles; the rule "at most ``M``
    red pebbles" therefore forbids no move once ``M >= n``, and every ``M >= n`` allows the
    same set of games, with the same I/O. The optimum, and the optimal games, are those at
    ``M = n``; the result reports the ``M`` asked for.

    Raises
    ------
    TypeError
        If an argument has the wrong type (``M`` not an integer, ``time_limit`` not a number,
        ``progress`` or ``symmetry`` not a bool).
    ValueError
        If ``M`` is too small to compute some vertex, the graph has more than
        ``max_vertices`` vertices, or ``incumbent`` is not a complete game on it with ``M`` red
        pebbles (:class:`~ioattn.pebble.IllegalMove`, a ValueError, names its first illegal
        move).
    SearchLimitError
        If the search expands ``max_states`` states or runs past ``time_limit`` seconds.

    References
    ----------
    .. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.

    Examples
    --------
    >>> from ioattn.pebble import Graph, PebbleGame, min_io
    >>> g = Graph([("a", "b"), ("b", "c")])     # a chain: read a, compute b and c, write c
    >>> opt = min_io(g, M=2)
    >>> opt.io, opt.moves
    (2, [('read', 'a'), ('compute', 'b'), ('delete', 'a'), ('compute', 'c'), ('write', 'c')])
    >>> PebbleGame.replay(g, 2, opt.moves).io
    2
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"min_io searches an ioattn.pebble.Graph, not {type(graph).__name__}")
    M = as_count(M, "M")
    max_states = as_count(max_states, "max_states")
    max_vertices = as_count(max_vertices, "max_vertices")
    if time_limit is not None:
        as_real(time_limit, "time_limit (seconds, or None for no limit)", positive=True)
    if progress not in (None, True, False):
        raise TypeError(f"progress must be None, True or False, got {progress!r}")
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}, "
                         f"got {engine!r}")
    need = graph.max_in_degree + 1
    if M < need:
        widest = max(graph.order, key=lambda v: len(graph.parents(v)))
        raise ValueError(
            f"M = {M} red pebbles cannot compute {widest!r}, which has {need - 1} operands: "
            f"the smallest M that can compute every vertex is {need}")
    if len(graph) > max_vertices:
        raise ValueError(
            f"the graph has {len(graph)} vertices, more than max_vertices = {max_vertices}: "
            "exact search is exponential in the size of the graph and would not finish; "
            "pass a larger max_vertices to try anyway")
    if symmetry not in (True, False):
        raise TypeError(f"symmetry must be True or False, got {symmetry!r}")
    threads = as_threads(threads)
    if incumbent is not None:
        incumbent = _checked_game(graph, M, incumbent)
    # M above the vertex count changes no game (see the docstring, Notes): search at n, whose
    # memory does not grow with M, and report the M asked for
    n = len(graph)
    search = _Search(graph, min(M, n), symmetry)
    result = None
    if engine == "compiled" and n <= 64:
        from . import compiled

        if compiled.available():
            result = compiled.run(search, max_states, time_limit, progress, incumbent, threads)
    if result is None:
        result = search.run(max_states, time_limit, progress, incumbent)
    return result if M <= n else replace(result, M=M)


def _checked_game(graph: Graph, M: int, moves) -> tuple[int, list]:
    """``(io, moves)`` of the complete game ``moves``; IllegalMove or ValueError if it is not
    one."""
    if isinstance(moves, (str, bytes)) or not hasattr(moves, "__iter__"):
        raise TypeError("incumbent must be a list of moves (kind, vertex), "
                        f"not {type(moves).__name__}")
    try:
        moves = [tuple(move) for move in moves]
    except TypeError:
        moves = [()]
    if any(len(move) != 2 for move in moves):
        raise ValueError("incumbent must be a list of moves, pairs (kind, vertex)")
    game = PebbleGame.replay(graph, M, moves)
    if not game.is_complete():
        missing = [v for v in graph.outputs if v not in game.blue]
        raise ValueError(f"incumbent is not a complete game: it leaves {len(missing)} "
                         f"output(s) without a blue pebble, such as {missing[0]!r}")
    return game.io, moves


# ---------------------------------------------------------------------------------------- search
class _Search:
    """One exact search. Vertices are their indices in ``graph.order``, sets are bit masks, and
    a state is the key ``blue << n | red``."""

    def __init__(self, graph: Graph, M: int, symmetry: bool = True):
        self.graph, self.M = graph, M
        self.n = len(graph)
        self.pm = graph.parent_masks
        self.inp = graph.mask(graph.inputs)
        self.out = graph.mask(graph.outputs)
        anc = []                       # anc[i]: i and its ancestors (parents come first)
        for i, pmask in enumerate(self.pm):
            a = 1 << i
            for j in _bits(pmask):
                a |= anc[j]
            anc.append(a)
        self.anc = anc
        self._live: dict[int, int] = {}
        self.checking = False       # tests set it: check each shortcut h against a full count
        # the "tight" vertices of the heuristic (see `needed`): operands all computed, none of
        # which can be computed while the others are red; a fixed family with disjoint operand
        # sets, chosen greedily
        tight, used = [], 0
        for v, ops in enumerate(self.pm):
            if ops and not ops & (self.inp | used) and all(
                    (ops | self.pm[p]).bit_count() > M for p in _bits(ops)):
                tight.append((1 << v, ops))
                used |= ops
        self.tight = tuple(tight)
        # the "deep" vertices (see `needed`): their operands cannot all be red at once unless
        # some non-input ancestor is read; a fixed family with disjoint sets of non-input
        # ancestors, chosen greedily
        self._assembly: dict[tuple[int, int], bool] = {}
        deep, used_deep, related = [], 0, used | sum(v for v, _ in tight)
        for v, ops in enumerate(self.pm):
            region = anc[v] & ~self.inp & ~(1 << v)
            if ops and region and not region & used_deep and not self.assembles(v, 0):
                deep.append((1 << v, v, region))
                used_deep |= region
                related |= region | 1 << v
        self.deep = tuple(deep)
        self.tight_related = related
        # the automorphisms that map the heuristic's families to themselves (rule 9)
        self.symmetry = Symmetry(graph, keep=self._keeps_heuristic,
                                 limit=MAX_SYMMETRIES if symmetry else 1)

    def _keeps_heuristic(self, perm: tuple) -> bool:
        """Whether the automorphism ``perm`` maps the tight and the deep family (see
        :meth:`needed`) to themselves, so that ``h`` takes the same value on mirror images."""
        def image(mask):
            return sum(1 << perm[i] for i in _bits(mask))
        tight = {(image(v), image(ops)) for v, ops in self.tight}
        deep = {(image(vbit), perm[v], image(region)) for vbit, v, region in self.deep}
        return tight == set(self.tight) and deep == set(self.deep)

    # ------------------------------------------------------------------ the game's canon
    def live(self, pending: int) -> int:
        """The vertices of use while the outputs ``pending`` are still to be written (rule 4)."""
        lv = self._live.get(pending)
        if lv is None:
            lv = 0
            for i in _bits(pending):
                lv |= self.anc[i]
            self._live[pending] = lv
        return lv

    def close(self, red: int, blue: int, moves: list | None = None):
        """Apply the forced moves (rules 3-5); return ``(red, blue, writes made)``.

        Deterministic, so that the move list can be rebuilt by running it again with ``moves``
        a list, to which it appends ``(kind, index)`` pairs.
        """
        M, out, pm, inp = self.M, self.out, self.pm, self.inp
        writes = 0
        live = self.live(out & ~blue)
        while True:
            ready = out & red & ~blue
            if ready:                                       # rule 3: write a finished output
                low = ready & -ready
                blue |= low
                writes += 1
                if moves is not None:
                    moves.append(("write", low.bit_length() - 1))
                live = self.live(out & ~blue)
                dead = red & ~live                           # rule 4: drop what is of no use
                if dead:
                    red &= live
                    if moves is not None:
                        moves += [("delete", i) for i in _bits(dead)]
                continue
            if red.bit_count() < M:                          # rule 5: free computes
                cand = live & ~red & ~inp
                while cand:
                    low = cand & -cand
                    i = low.bit_length() - 1
                    if not pm[i] & ~red:
                        break
                    cand ^= low
                else:
                    break
                red |= low
                if moves is not None:
                    moves.append(("compute", i))
                continue
            break
        # the blue pebbles of dead non-outputs never matter again: drop them, so states merge
        blue &= live | out | inp
        return red, blue, writes

    def needed(self, red: int, blue: int) -> tuple[int, int, int]:
        """The heuristic ``h`` of a state, the set ``seen`` (the vertices on its paths, and
        their ends) and its term ``E``: ``(h, seen, E)``.

        ``h = |P| + |I| + E``. ``P``: the outputs not yet blue. ``I``: the inputs that are not
        red but are *needed*: reachable backwards from an output of ``P`` that is not red,
        through vertices neither red nor blue (*open*). ``E = max(E1, E2)``, sums over the open
        needed vertices ``v`` of two fixed families (chosen greedily at the start):

        - ``E1``, over *tight* ``v`` with some operand not red: 2, or 1 if an operand of ``v`` is
          blue or an output. ``v`` is tight if its operands are non-inputs none of which can be
          computed while the others are red (``|parents(v) | parents(p)| > M`` for each operand
          ``p``); the family's operand sets are disjoint.
        - ``E2``, over *deep* ``v`` whose operands cannot all be made red at once, from the
          current red set, without reading a non-input (:meth:`assembles`): 2, or 1 if one of
          its non-input ancestors is blue or an output. The family's sets of non-input
          ancestors are disjoint.

        Admissible: each output of ``P`` needs its own write. An open vertex can only become red
        by a compute (a read needs it blue, and a write needs it red first), so every one on
        such a path must be computed, which needs all its parents red at some time; an input
        that is not red can only become red by a read, one per input. A red or a blue non-input
        vertex ends a path (it may be recomputed or read) and counts nothing. An open needed
        ``v`` will be computed, with all its operands red. If ``v`` is tight, the last of them
        to be placed was placed with the others red, so it was not computed (that needs its
        own parents red too, more than ``M``): it was read; if ``v`` is deep, some non-input
        ancestor is read on the way. A read of a non-input, counted by neither ``P`` nor ``I``,
        and unless that vertex is blue now or an output (whose write ``P`` counts), a write
        before it. Within a family these I/Os are on disjoint sets of vertices.

        Consistent (``h(s) <= cost(s -> t) + h(t)`` for every move): a compute of ``x`` makes red
        a vertex whose parents are all red, so the paths through ``x`` reached only red vertices
        anyway, ``I`` keeps its inputs and ``P`` its outputs. ``x`` is no ``v`` of ``E`` (whose
        operands are not all red); a tight ``v`` keeps an operand not red (``x`` cannot be its
        last one) and a deep ``v`` stays deep (a way to make its operands red after the compute
        is one before it, the compute included). A delete (or eviction) only lengthens paths,
        and makes operands harder to make red. So ``h`` never drops on a free move. A read of
        ``x`` removes at most ``x`` from ``I`` (paths stopped at the blue ``x`` already) or, if
        ``x`` is a non-input (blue, so the term is 1), one ``v`` from a family; a write of
        ``x`` removes ``x`` from ``P`` if it is an output (red, so no path started from it;
        blue ends no path a red ``x`` did not end already), or lowers one term of each family
        from 2 to 1. Either drops ``h`` by at most its cost, 1. The closure's deletes of dead
        vertices change nothing, as no path from a pending output reaches them.
        """
        pending = self.out & ~blue
        front = pending & ~red
        h = pending.bit_count()
        if not front:
            return h, 0, 0
        pm, seen, closed = self.pm, front, red | blue
        while front:
            i = front.bit_length() - 1
            front ^= 1 << i
            new = pm[i] & ~seen
            if new:
                seen |= new
                front |= new & ~closed
        e = self.tight_cost(red, blue, seen) if self.tight or self.deep else 0
        return h + (seen & self.inp & ~red).bit_count() + e, seen, e

    def tight_cost(self, red: int, blue: int, seen: int) -> int:
        """The term ``E`` of the heuristic (see :meth:`needed`)."""
        e, d, done, ends = 0, 0, red | blue, blue | self.out
        for v, ops in self.tight:
            if seen & v and not done & v and ops & ~red:
                e += 1 if ops & ends else 2
        for vbit, v, region in self.deep:
            if seen & vbit and not done & vbit and not self.assembles(v, red):
                d += 1 if region & ends else 2
        return e if e > d else d

    def assembles(self, v: int, red: int) -> bool:
        """Whether the operands of ``v`` might all be made red at once, from the red set
        ``red``, with no read of a non-input vertex (False: they cannot).

        The last of a set ``X`` of vertices to be placed, ``y``, is placed while the rest of
        ``X`` is red: if ``y`` is an input, it is read, with ``|X| <= M``, after ``X - y`` was
        made red; otherwise (no non-input read) it is computed, which needs ``X | parents(y)``
        red at once: at most ``M``, and ``X - y | parents(y)`` made red before. ``X`` is red at
        once already if it is red now. The recursion replaces a vertex by earlier ones, so it
        ends; only ancestors of ``v`` occur in it, and an input in a red set could as well be
        read last, so it depends on ``red`` through the red non-input ancestors of ``v`` alone.
        """
        red &= self.anc[v] & ~self.inp
        known = self._assembly.get((v, red))
        if known is None:
            known = self._assembly[v, red] = self._assemble(self.pm[v], red, {})
        return known

    def _assemble(self, X: int, red: int, memo: dict) -> bool:
        if not X & ~red:
            return True
        ok = memo.get(X)
        if ok is None:
            ok = False
            M, pm, inp = self.M, self.pm, self.inp
            fits = X.bit_count() <= M
            for y in _bits(X):
                ybit = 1 << y
                if inp & ybit:
                    ok = fits and self._assemble(X ^ ybit, red, memo)
                else:
                    both = X | pm[y]
                    ok = both.bit_count() <= M and self._assemble(both ^ ybit, red, memo)
                if ok:
                    break
            memo[X] = ok
        return ok

    # ------------------------------------------------------------------ A*
    def run(self, max_states: int, time_limit, progress, incumbent=None) -> Optimum:
        """The search (see the module docstring); ``incumbent``: ``(io, moves)`` of a complete
        game, or None (see :func:`min_io`)."""
        start = time.perf_counter()
        limit = incumbent[0] if incumbent is not None else sys.maxsize
        n, M, pm, inp, out = self.n, self.M, self.pm, self.inp, self.out
        low_mask = (1 << n) - 1
        close, live_of, needed = self.close, self.live, self.needed
        tight_cost, tight_related = self.tight_cost, self.tight_related
        checking = self.checking

        canonical = self.symmetry.canonical
        red0, blue0, g0 = close(0, inp)
        h0 = needed(red0, blue0)[0]
        cr, cb, _ = canonical(red0, blue0)
        key0 = cb << n | cr
        # best[key]: the least cost found, or -1 - cost once expanded (final: h is consistent)
        best = {key0: g0}
        # parent[key] = (parent key, (x, u, spill, is_read), fresh, undone): the step placed x
        # (read or computed) evicting u (-1: none), written first if spill, then the closure;
        # fresh = x and undone = u (if not spilled) when the closure did nothing (rules 6, 7)
        # (rule 9: keys are canonical; as: the state as that step reached it, the one expanded)
        parent: dict[int, tuple] = {key0: (None, None, -1, -1, blue0 << n | red0)}
        heap = [(g0 + h0, 0, g0, key0)]
        push, pop = heapq.heappush, heapq.heappop
        counter = expanded = 0
        next_check = min(1024, max_states)
        bar = _progress_bar() if progress else None
        f = g0 + h0
        try:
            while heap:
                f, _, g, key = pop(heap)
                if g != best[key]:     # stale: pushed again at a lower cost since
                    continue
                _, last, fresh, undone, at = parent[key]
                red, blue = at & low_mask, at >> n
                if not out & ~blue:
                    break
                best[key] = -1 - g
                expanded += 1
                if expanded >= next_check:
                    next_check = min(next_check + 1024, max_states)
                    elapsed = time.perf_counter() - start
                    if bar is None and (progress or (progress is None
                                                     and elapsed > PROGRESS_AFTER)):
                        bar = _progress_bar()
                    if bar is not None:
                        bar.update(expanded - bar.n)
                        bar.set_postfix(f=f, refresh=False)
                    if expanded >= max_states or (time_limit is not None
                                                  and elapsed > time_limit):
                        raise _limit_error(n, M, expanded, elapsed, f, max_states, time_limit,
                                           generated=len(best))

                if undone >= 0:
                    # rule 7: re-placing `undone` may only evict what the parent could not have
                    # evicted instead of it when placing x: an operand of a computed x, or x
                    # itself (spilled: a state the parent does not reach)
                    x = last[0]
                    keep_for_undone = (red & pm[x] if not last[3] else 0) | 1 << x
                hs, seen, es = needed(red, blue)
                pending = out & ~blue
                live = live_of(pending)
                free = red.bit_count() < M
                # candidates: live, not red, and blue (read) or with red operands (compute;
                # with a free slot the closure has computed those already, rule 5)
                cand = live & ~red
                xs = cand & blue
                comp = 0
                if not free:
                    c = cand & ~inp
                    while c:
                        low = c & -c
                        c ^= low
                        if not pm[low.bit_length() - 1] & ~red:
                            comp |= low
                    xs |= comp
                while xs:
                    low = xs & -xs
                    xs ^= low
                    x = low.bit_length() - 1
                    # the closure can only act after a read into a free slot, or on an output
                    must_close = free or low & pending
                    # h drops by one if x is an input it counted (x is then read)
                    hx = hs - 1 if seen & inp & low else hs
                    if free:
                        steps = ((-1, 0, 1),)
                    else:
                        ops = pm[x]
                        if comp & low:
                            # compute evicting a non-operand; a read only evicting an operand
                            # (rule 8)
                            groups = ((red & ~ops, 0), (red & ops, 1)) if blue & low else \
                                ((red & ~ops, 0),)
                        else:
                            groups = ((red, 1),)
                        steps = []
                        for e, is_read in groups:
                            if x == undone:
                                e &= keep_for_undone
                            while e:
                                ulow = e & -e
                                e ^= ulow
                                u = ulow.bit_length() - 1
                                if u != fresh:              # rule 6
                                    steps.append((u, 0, is_read))
                                if not blue & ulow:         # rule 2: spill if not blue
                                    steps.append((u, 1, is_read))
                    for u, spill, is_read in steps:
                        if u < 0:
                            r, b = red | low, blue
                        else:
                            ulow = 1 << u
                            r = red ^ ulow | low
                            b = blue | ulow if spill else blue
                        if must_close:
                            r2, b2, w = close(r, b)
                            same = r2 == r and b2 == b
                        else:
                            r2, b2, w, same = r, b, 0, True
                        g2 = g + is_read + spill + w
                        # rule 9: one state of each set of mirror images
                        cr, cb, _ = canonical(r2, b2)
                        k2 = cb << n | cr
                        old = best.get(k2)
                        if old is not None and (old <= g2 or old < 0):
                            continue
                        # h of the new state from hs: making x red changes nothing else on the
                        # paths (a computed x has all its parents red); an evicted u off the
                        # paths stays off them; one on them that is blue afterwards (spilled,
                        # an input, or read before) ends its path, counting 1 if an input;
                        # else the paths go on through u: count again.
                        # the term E changes only if x or u is one of its vertices, or an
                        # operand or non-input ancestor of one: count E again then
                        related = tight_related
                        if not same:
                            h2 = needed(r2, b2)[0]
                            related = 0
                        elif u < 0 or spill or not seen >> u & 1:
                            h2 = hx
                        elif blue >> u & 1:
                            h2 = hx + (inp >> u & 1)
                        else:
                            h2 = needed(r2, b2)[0]
                            related = 0
                        if related and (low | (1 << u if u >= 0 else 0)) & related:
                            h2 += tight_cost(r2, b2, seen) - es
                        if checking:    # (tests: the shortcut agrees with a full count)
                            assert h2 == needed(r2, b2)[0] == needed(cr, cb)[0], (key, k2, h2)
                        if g2 + h2 >= limit:    # no cheaper game than the incumbent's here
                            continue
                        best[k2] = g2
                        parent[k2] = (key, (x, u, spill, is_read), x if same else -1,
                                      u if same and not spill else -1, b2 << n | r2)
                        counter += 1
                        push(heap, (g2 + h2, -counter, g2, k2))
            else:
                if incumbent is None:  # pragma: no cover - M >= max in-degree + 1 allows a game
                    raise AssertionError("the search ran out of states without completing a "
                                         "game")
                # every state that might lead to a cheaper game was expanded: none does
                return self.proved(incumbent, expanded, len(best), h0, start)
        finally:
            if bar is not None:
                bar.update(expanded - bar.n)
                bar.set_postfix(f=f, refresh=False)
                bar.close()

        chain = []
        while key is not None:
            pkey, step, _, _, _ = parent[key]
            if step is not None:
                at = parent[pkey][4]
                chain.append(((at & low_mask, at >> n), step))
            key = pkey
        chain.reverse()
        return self.result(chain, g, expanded, len(best), h0, start)

    def result(self, chain: list, g: int, expanded: int, generated: int, h0: int, start: float,
               **extra) -> Optimum:
        """The :class:`Optimum` of a goal of cost ``g`` reached by ``chain`` (see
        :meth:`rebuild`)."""
        moves = [(kind, self.graph.order[i]) for kind, i in self.rebuild(chain)]
        # the closure computes whatever it can while a slot is free; drop those never used
        moves = without_idle_computes(self.graph, moves)
        reads = sum(kind == "read" for kind, _ in moves)
        writes = sum(kind == "write" for kind, _ in moves)
        if reads + writes != g:  # pragma: no cover - a bug, not a user error
            raise AssertionError(f"rebuilt game has I/O {reads + writes}, the search found {g}")
        return Optimum(io=g, moves=moves, states=expanded, seconds=time.perf_counter() - start,
                       M=self.M, reads=reads, writes=writes, generated=generated,
                       lower_bound=h0, symmetries=len(self.symmetry), **extra)

    def proved(self, incumbent: tuple, expanded: int, generated: int, h0: int, start: float,
               **extra) -> Optimum:
        """The :class:`Optimum` of a search that found no game cheaper than ``incumbent``,
        ``(io, moves)``: that game is optimal."""
        io, moves = incumbent
        writes = sum(kind == "write" for kind, _ in moves)
        return Optimum(io=io, moves=list(moves), states=expanded,
                       seconds=time.perf_counter() - start, M=self.M, reads=io - writes,
                       writes=writes, generated=generated, lower_bound=h0,
                       symmetries=len(self.symmetry), **extra)

    def rebuild(self, chain: list) -> list:
        """The moves ``(kind, index)`` of the search steps ``chain``, every delete explicit.

        ``chain`` lists the steps from the start to the goal as pairs ``((red, blue), (x, u,
        spill, is_read))``: in the state ``(red, blue)``, place ``x`` (read if ``is_read``,
        else compute) evicting ``u`` (``-1``: none; written first if ``spill``); each step is
        followed by the closure (:meth:`close`), as is the start.
        """
        moves: list = []
        self.close(0, self.inp, moves)
        for (red, blue), (x, u, spill, is_read) in chain:
            if u >= 0:
                if spill:
                    moves.append(("write", u))
                    blue |= 1 << u
                moves.append(("delete", u))
                red ^= 1 << u
            moves.append(("read" if is_read else "compute", x))
            self.close(red | 1 << x, blue, moves)
        while moves and moves[-1][0] == "delete":       # clearing the cache at the end
            moves.pop()
        return moves


def _bits(mask: int):
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _progress_bar():
    from tqdm.auto import tqdm

    return tqdm(desc="min_io", unit=" states", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5)
