"""M-partitions: the objects of Hong and Kung's lower-bound argument.

For a set ``S`` of vertices of a computation graph:

- a *dominator set* of ``S`` is a set ``D`` of vertices such that every path from an input of the
  graph to a vertex of ``S`` contains a vertex of ``D`` (``D`` may contain inputs and vertices of
  ``S``);
- the *minimum set* of ``S`` is the set of vertices of ``S`` with no child in ``S``.

An *M-partition* splits the vertices into disjoint parts ``V_1, ..., V_h`` such that each part has
a dominator set of at most ``M`` vertices and a minimum set of at most ``M`` vertices, and the
parts have no cyclic dependence: the quotient graph, with an edge from part ``a`` to part ``b``
whenever some edge of the graph goes from ``V_a`` to ``V_b`` (``a != b``), is acyclic. With
``P(2M)`` the least number of parts of a 2M-partition, Hong and Kung prove that every complete
game with ``M`` red pebbles does at least ``M (P(2M) - 1)`` I/O ([HK]_, Section 3), by cutting
the game into segments of ``M`` I/O moves (:func:`hong_kung_partition`); [SY]_ build their lower
bound for attention on this theorem.

**Inputs belong to no part.** Here a partition covers the *non-input* vertices only: inputs hold
blue pebbles from the start and are never computed, so no segment of a game computes them. They
still count where they appear in dominator sets (a part's smallest dominator set may consist of
inputs). A part that contains an input is reported as a violation by :func:`check_partition`.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443.

Examples
--------
>>> from ioattn.pebble import matmul_graph, dominator_set, minimum_set, check_partition
>>> g = matmul_graph(1, 2, 1)         # c = a0 b0 + a1 b1
>>> products = {("mul", 0, 0, 0), ("mul", 0, 1, 0)}
>>> sorted(dominator_set(g, products | {("sum", 0, 0, 1)}))
[('mul', 0, 0, 0), ('mul', 0, 1, 0)]
>>> minimum_set(g, products | {("sum", 0, 0, 1)})
{('sum', 0, 0, 1)}
>>> check_partition(g, [products, {("sum", 0, 0, 1)}], M=2).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from .._validate import as_count
from .game import PebbleGame
from .graph import Graph

__all__ = ["HongKungPartition", "PartitionCheck", "check_partition", "dominator_set",
           "dominator_size", "hong_kung_partition", "is_partition_of", "minimum_set"]


# ---------------------------------------------------------------------- dominator and minimum sets
def _vertex_set(graph: Graph, S, what: str = "S") -> set:
    """``S`` as a set, with a clear error for vertices the graph does not have."""
    if not isinstance(graph, Graph):
        raise TypeError(f"expected an ioattn.pebble.Graph, not {type(graph).__name__}")
    try:
        S = set(S)
    except TypeError:
        raise TypeError(f"{what} must be an iterable of hashable vertex ids, got {S!r}") from None
    unknown = [v for v in S if v not in graph]
    if unknown:
        unknown = sorted(map(repr, unknown))
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ValueError(f"{what} has vertices the graph does not have: "
                         f"{', '.join(unknown[:5])}{more}")
    return S


def _sorted(graph: Graph, vertices) -> list:
    """``vertices`` in the graph's topological order (for stable messages)."""
    return sorted(vertices, key=graph.index.__getitem__)


def _min_cut(graph: Graph, S: set) -> set:
    """The vertices of a minimum vertex cut between the inputs and ``S`` (see dominator_set)."""
    if not S:
        return set()
    # Only the ancestors of S (S included) lie on a path from an input to S.
    ancestors, stack = set(S), list(S)
    while stack:
        for p in graph.parents(stack.pop()):
            if p not in ancestors:
                ancestors.add(p)
                stack.append(p)
    # Vertex order[i] becomes 2i -> 2i+1 (capacity 1); an edge without a capacity is infinite.
    source, sink = -1, -2
    net = nx.DiGraph()
    net.add_nodes_from((source, sink))
    for v in ancestors:
        i = graph.index[v]
        net.add_edge(2 * i, 2 * i + 1, capacity=1)
        if graph.is_input(v):
            net.add_edge(source, 2 * i)
        if v in S:
            net.add_edge(2 * i + 1, sink)
        for c in graph.children(v):
            if c in ancestors:
                net.add_edge(2 * i + 1, 2 * graph.index[c])
    value, (reachable, _) = nx.minimum_cut(net, source, sink)
    # Infinite edges are never cut, so the cut edges are exactly the split edges v_in -> v_out.
    cut = {v for v in ancestors
           if 2 * graph.index[v] in reachable and 2 * graph.index[v] + 1 not in reachable}
    assert len(cut) == value, (len(cut), value)
    return cut


def dominator_set(graph: Graph, S) -> set:
    """A smallest dominator set of ``S``: every path from an input to ``S`` meets it.

    Computed as a minimum vertex cut by max-flow: each vertex ``v`` becomes an edge
    ``v_in -> v_out`` of capacity 1, each graph edge ``u -> v`` an edge ``u_out -> v_in`` of
    infinite capacity; a super-source feeds every input's ``v_in`` and every ``v_out`` of ``S``
    drains into a super-sink (both infinite). The vertices whose unit edges a minimum cut severs
    form the set. It may hold inputs and vertices of ``S``; an input in ``S`` is always in it (the
    one-vertex path from it to itself must be hit). Only the ancestors of ``S`` enter the network.

    Parameters
    ----------
    graph : Graph
    S : iterable of vertices

    Returns
    -------
    set
        A dominator set of least size (among several, the one nearest the inputs that
        :func:`networkx.minimum_cut` finds); empty for an empty ``S``.

    Raises
    ------
    ValueError
        If ``S`` names a vertex the graph does not have.

    References
    ----------
    J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981, Section 3.

    Examples
    --------
    >>> from ioattn.pebble import Graph, dominator_set
    >>> g = Graph([("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])   # a diamond
    >>> dominator_set(g, {"b", "c"})
    {'a'}
    """
    return _min_cut(graph, _vertex_set(graph, S))


def dominator_size(graph: Graph, S) -> int:
    """The size of a smallest dominator set of ``S`` (see :func:`dominator_set`)."""
    return len(dominator_set(graph, S))


def minimum_set(graph: Graph, S) -> set:
    """The minimum set of ``S``: its vertices with no child in ``S``.

    Raises
    ------
    ValueError
        If ``S`` names a vertex the graph does not have.

    Examples
    --------
    >>> from ioattn.pebble import Graph, minimum_set
    >>> g = Graph([("a", "b"), ("b", "c"), ("a", "d")])
    >>> sorted(minimum_set(g, {"b", "c", "d"}))
    ['c', 'd']
    """
    S = _vertex_set(graph, S)
    return {v for v in S if not any(c in S for c in graph.children(v))}


# ---------------------------------------------------------------------- checking a partition
@dataclass(frozen=True)
class PartitionCheck:
    """The verdict of :func:`check_partition`; true exactly when the partition is valid.

    Attributes
    ----------
    ok : bool
        Whether the parts form an M-partition of the non-input vertices.
    reasons : list of str
        What is wrong, one line each, naming the part (by its index in the list given) and the
        vertices involved; empty when ``ok``.
    dominator_sizes, minimum_sizes : list of int
        For each part, the size of its smallest dominator set and of its minimum set (vertices
        the graph does not have are left out of both).
    """

    ok: bool
    reasons: list
    dominator_sizes: list
    minimum_sizes: list

    def __bool__(self) -> bool:
        return self.ok


def _structure(graph: Graph, parts) -> tuple[list[set], list[str]]:
    """The parts as sets of known vertices, and what is wrong with them as a partition."""
    if not isinstance(graph, Graph):
        raise TypeError(f"expected an ioattn.pebble.Graph, not {type(graph).__name__}")
    sets, reasons = [], []
    where: dict = {}
    for k, part in enumerate(parts):
        try:
            part = set(part)
        except TypeError:
            raise TypeError(f"part {k} must be an iterable of hashable vertex ids, "
                            f"got {part!r}") from None
        unknown = [v for v in part if v not in graph]
        if unknown:
            reasons.append(f"part {k} has vertices the graph does not have: "
                           f"{', '.join(sorted(map(repr, unknown)))}")
        part -= set(unknown)
        if not part and not unknown:
            reasons.append(f"part {k} is empty")
        inputs = [v for v in part if graph.is_input(v)]
        if inputs:
            reasons.append(f"part {k} contains the input(s) "
                           f"{', '.join(map(repr, _sorted(graph, inputs)))}: inputs are given, "
                           "never computed, and belong to no part")
        for v in part:
            where.setdefault(v, []).append(k)
        sets.append(part)
    for v in _sorted(graph, where):
        if len(where[v]) > 1:
            reasons.append(f"vertex {v!r} is in more than one part: parts "
                           f"{', '.join(map(str, where[v]))}")
    missing = [v for v in graph.order if v not in where and not graph.is_input(v)]
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        reasons.append(f"{len(missing)} non-input vertex(es) in no part: "
                       f"{', '.join(map(repr, missing[:5]))}{more}")
    return sets, reasons


def is_partition_of(graph: Graph, parts) -> bool:
    """Whether ``parts`` are non-empty, disjoint, and together exactly the non-input vertices.

    Only the set structure is checked; :func:`check_partition` checks the M-partition conditions
    as well.

    Examples
    --------
    >>> from ioattn.pebble import Graph, is_partition_of
    >>> g = Graph([("a", "b"), ("b", "c")])
    >>> is_partition_of(g, [{"b"}, {"c"}]), is_partition_of(g, [{"a", "b"}, {"c"}])
    (True, False)
    """
    return not _structure(graph, parts)[1]


def _quotient_cycle(graph: Graph, sets: list[set]) -> str | None:
    """A description of a cycle among the parts, or None if the quotient graph is acyclic."""
    where: dict = {}
    for k, part in enumerate(sets):
        for v in part:
            where.setdefault(v, []).append(k)
    quotient = nx.DiGraph()
    quotient.add_nodes_from(range(len(sets)))
    for u in _sorted(graph, where):
        for v in graph.children(u):
            for a in where[u]:
                for b in where.get(v, ()):
                    if a != b and not quotient.has_edge(a, b):
                        quotient.add_edge(a, b, witness=(u, v))
    try:
        cycle = nx.find_cycle(quotient)
    except nx.NetworkXNoCycle:
        return None
    path = " -> ".join(f"part {a}" for a, _ in cycle) + f" -> part {cycle[0][0]}"
    edges = ", ".join(f"{quotient.edges[a, b]['witness'][0]!r} -> "
                      f"{quotient.edges[a, b]['witness'][1]!r}" for a, b in cycle)
    return f"the parts depend on each other in a cycle: {path} (edges {edges})"


def check_partition(graph: Graph, parts, M: int) -> PartitionCheck:
    """Check that ``parts`` form an M-partition of the non-input vertices of ``graph``.

    The conditions (Hong and Kung 1981, Section 3; Saha and Ye 2024): the parts are non-empty
    and disjoint, and together they are exactly the non-input vertices (inputs belong to no part,
    see the module docstring); each part has a dominator set of at most ``M`` vertices (its
    smallest one is computed by :func:`dominator_set`) and a minimum set of at most ``M``
    vertices; and the quotient graph of the parts is acyclic.

    Parameters
    ----------
    graph : Graph
    parts : sequence of iterables of vertices
        The parts, in any order; reasons name them by their index here.
    M : int
        The bound on dominator and minimum sets (``2M`` for the partition that
        :func:`hong_kung_partition` builds from a game with ``M`` red pebbles).

    Returns
    -------
    PartitionCheck
        ``ok``, the ``reasons`` it is not (every violation found, not just the first), and the
        sizes per part. Nothing is raised for a bad partition.

    Examples
    --------
    >>> from ioattn.pebble import Graph, check_partition
    >>> g = Graph([("a", "b"), ("a", "c")])
    >>> check = check_partition(g, [{"b", "c"}], M=1)
    >>> bool(check), check.reasons
    (False, ['part 0: its minimum set has 2 vertices, more than M = 1'])
    """
    M = as_count(M, "M")
    parts = list(parts)
    sets, reasons = _structure(graph, parts)
    dominator_sizes, minimum_sizes = [], []
    for k, part in enumerate(sets):
        D = _min_cut(graph, part)
        dominator_sizes.append(len(D))
        if len(D) > M:
            reasons.append(f"part {k}: its smallest dominator set has {len(D)} vertices, more "
                           f"than M = {M} (one such set: "
                           f"{', '.join(map(repr, _sorted(graph, D)))})")
        minimum = minimum_set(graph, part)
        minimum_sizes.append(len(minimum))
        if len(minimum) > M:
            reasons.append(f"part {k}: its minimum set has {len(minimum)} vertices, "
                           f"more than M = {M}")
    cycle = _quotient_cycle(graph, sets)
    if cycle:
        reasons.append(cycle)
    return PartitionCheck(not reasons, reasons, dominator_sizes, minimum_sizes)


# ---------------------------------------------------------------------- from a game
@dataclass(frozen=True)
class HongKungPartition:
    """The partition :func:`hong_kung_partition` builds from a game.

    Attributes
    ----------
    parts : list of set
        The non-empty parts, in the order of their segments.
    segments : list of (int, int)
        Every segment, as the half-open range ``[start, stop)`` of move indices into
        ``game.moves``; the segments tile the whole move list.
    part_segments : list of int
        ``part_segments[k]``: the index in ``segments`` of the segment that ``parts[k]`` comes
        from (segments that compute nothing give no part).
    io, M : int
        The game's I/O and its number of red pebbles.
    uncomputed : frozenset
        Non-input vertices the game never computes (possible only when some vertex is neither an
        output nor an ancestor of one); they are in no part.

    Notes
    -----
    With ``s = len(segments)`` and ``h = len(parts) <= s``: every segment but the last has
    exactly ``M`` I/O moves and the last has 1 to ``M``, so ``M (s - 1) < io <= M s`` (for
    ``io >= 1``), hence ``io >= M (h - 1)``, the inequality Hong and Kung's theorem uses. When
    every segment computes something, ``h = s`` and also ``io <= M h``; a segment that only
    reads and writes (a last one holding only the final writes, say) gives no part, and then
    ``io > M h``.
    """

    parts: list
    segments: list
    part_segments: list
    io: int
    M: int
    uncomputed: frozenset

    @property
    def h(self) -> int:
        """The number of parts."""
        return len(self.parts)


def hong_kung_partition(game: PebbleGame) -> HongKungPartition:
    """Hong and Kung's 2M-partition from a complete game with ``M`` red pebbles.

    The moves are cut into consecutive segments, each holding exactly ``M`` I/O moves (reads
    and writes) but the last, which holds at most ``M``: a new segment starts at the I/O move
    number ``M + 1``, ``2M + 1``, ... (counting from 1). Part ``k`` is the set of vertices
    computed in segment ``k``, each vertex counted in the segment of its **last** compute move;
    segments that compute nothing give no part.

    For a game without recomputation (each vertex computed once) the parts form a 2M-partition
    (Hong and Kung 1981, Section 3; used by Saha and Ye 2024): the vertices red at the start of a
    segment (at most ``M``) and those it reads (at most ``M``) dominate its part; a vertex of the
    minimum set is used only in later segments or is an output, so its value must survive the
    segment, red at its end (at most ``M``) or written during it (at most ``M``); and every edge
    goes from a segment to the same or a later one. Since there are ``h`` parts and
    ``io >= M (h - 1)`` (see :class:`HongKungPartition`), a game's I/O is at least
    ``M (P(2M) - 1)``, with ``P(2M)`` the least number of parts of any 2M-partition.

    Why the last compute: the minimum-set argument needs the value computed in the segment to be
    the one later segments use. With recomputation the construction is still defined, and the
    dominator bound still holds (it only needs each vertex of a part to be computed somewhere in
    its segment), but the other two can fail: a vertex whose children's last computes came
    earlier has an edge to an earlier part, so the quotient graph can have a cycle, and a
    recomputed value that is discarded, or reread from a blue copy written earlier, leaves the
    minimum set unbounded. :func:`check_partition` then reports "the parts depend on each other
    in a cycle" or "its minimum set has ... vertices, more than M".

    Parameters
    ----------
    game : PebbleGame
        A complete game (every output blue). To build one from a list of moves:
        ``PebbleGame.replay(graph, M, moves)``, which checks every move.

    Returns
    -------
    HongKungPartition
        The parts, the segments, and the game's ``io`` and ``M``.

    Raises
    ------
    ValueError
        If the game is not complete.

    References
    ----------
    J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981, Section 3:
    ``Q >= M (P(2M) - 1)``. B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is
    FlashAttention?", ICML 2024.

    Examples
    --------
    >>> from ioattn.pebble import Graph, PebbleGame, hong_kung_partition, check_partition
    >>> g = Graph([("a", "c"), ("b", "c"), ("c", "d")])
    >>> moves = [("read", "a"), ("read", "b"), ("compute", "c"), ("delete", "a"),
    ...          ("compute", "d"), ("write", "d")]
    >>> hk = hong_kung_partition(PebbleGame.replay(g, 3, moves))
    >>> [sorted(part) for part in hk.parts], hk.segments, hk.io
    ([['c', 'd']], [(0, 6)], 3)
    >>> check_partition(g, hk.parts, 2 * 3).ok
    True
    """
    if not isinstance(game, PebbleGame):
        raise TypeError(f"expected a PebbleGame, not {type(game).__name__}")
    if not game.is_complete():
        missing = [v for v in game.graph.outputs if v not in game.blue]
        raise ValueError(f"the game is not complete: output(s) "
                         f"{', '.join(map(repr, missing[:5]))} hold no blue pebble")
    M, moves = game.M, game.moves
    starts, last_compute, io = [], {}, 0
    for t, (kind, v) in enumerate(moves):
        if kind in ("read", "write"):
            if io % M == 0:
                starts.append(t)
            io += 1
        elif kind == "compute":
            last_compute[v] = t
    if starts:
        starts[0] = 0          # moves before the first I/O join the first segment (none is legal)
    elif moves:
        starts = [0]
    segments = [(a, b) for a, b in zip(starts, starts[1:] + [len(moves)])]
    segment_of = []                                   # move index -> segment index
    for s, (a, b) in enumerate(segments):
        segment_of += [s] * (b - a)
    by_segment: dict = {}
    for v, t in last_compute.items():
        by_segment.setdefault(segment_of[t], set()).add(v)
    part_segments = sorted(by_segment)
    uncomputed = frozenset(v for v in game.graph.order
                           if not game.graph.is_input(v) and v not in last_compute)
    return HongKungPartition([by_segment[s] for s in part_segments], segments, part_segments,
                             io, M, uncomputed)
