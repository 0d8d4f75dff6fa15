"""Computation DAGs for the red-blue pebble game.

A :class:`Graph` is a directed acyclic graph over hashable vertex ids, built from an edge list.
Its inputs (blue at the start of a game) default to the sources and its outputs (blue at the end)
to the sinks. Vertices are numbered in a topological order, so a set of vertices can also be
handled as a bit mask (bit ``i`` for ``graph.order[i]``), which is how the exact search stores
game states.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

__all__ = ["Graph"]


class Graph:
    """A computation DAG.

    Parameters
    ----------
    edges : iterable of (u, v)
        ``u -> v``: the value of ``u`` is an operand of ``v``.
    inputs, outputs : iterable, optional
        Defaults: the vertices with no parents, and those with no children. Inputs must have no
        parents, and every vertex with no parents must be an input; every vertex named must occur
        in ``edges`` or ``nodes``.
    nodes : iterable, optional
        Extra vertices (for a vertex with no edges).

    Attributes
    ----------
    order : tuple
        The vertices in a topological order (parents before children; ties in first-seen order).
    inputs, outputs : tuple
        In that order.
    index : dict
        Vertex -> its position in ``order``.

    Examples
    --------
    >>> g = Graph([("a", "c"), ("b", "c")])
    >>> g.inputs, g.outputs, g.parents("c")
    (('a', 'b'), ('c',), ('a', 'b'))
    """

    def __init__(self, edges: Iterable[tuple[Hashable, Hashable]], inputs=None, outputs=None,
                 nodes=None):
        parents: dict = {}
        children: dict = {}

        def add(v):
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"vertex ids must be hashable, got {v!r}") from None
            if v not in parents:
                parents[v] = []
                children[v] = []

        for v in nodes or ():
            add(v)
        for edge in edges:
            try:
                u, v = edge
            except (TypeError, ValueError):
                raise ValueError(f"an edge is a pair (u, v), got {edge!r}") from None
            if u == v:
                raise ValueError(f"the graph has a cycle: a self-loop on {u!r}")
            add(u)
            add(v)
            if u not in parents[v]:
                parents[v].append(u)
                children[u].append(v)
        if not parents:
            raise ValueError("the graph has no vertices")
        self._parents = {v: tuple(p) for v, p in parents.items()}
        self._children = {v: tuple(c) for v, c in children.items()}
        self.order = _topological_order(self._parents, self._children)
        self.index = {v: i for i, v in enumerate(self.order)}
        self.inputs = self._named(inputs, "input", [v for v in self.order if not parents[v]])
        self.outputs = self._named(outputs, "output", [v for v in self.order if not children[v]])
        for v in self.inputs:
            if self._parents[v]:
                raise ValueError(f"input {v!r} has parents {list(self._parents[v])}: inputs are "
                                 "given, not computed")
        missing = [v for v in self.order if not self._parents[v] and v not in set(self.inputs)]
        if missing:
            raise ValueError(f"vertices {missing[:5]} have no parents but are not inputs")

    def _named(self, given, what, default):
        if given is None:
            return tuple(default)
        given = list(given)
        unknown = [v for v in given if v not in self.index]
        if unknown:
            raise ValueError(f"unknown {what} vertex {unknown[0]!r}: it is in no edge")
        chosen = set(given)
        return tuple(v for v in self.order if v in chosen)

    # ------------------------------------------------------------------ structure
    @property
    def nodes(self) -> tuple:
        """All vertices, in topological order."""
        return self.order

    def parents(self, v) -> tuple:
        """The operands of ``v``."""
        return self._parents[self._known(v)]

    def children(self, v) -> tuple:
        """The vertices that use ``v``."""
        return self._children[self._known(v)]

    def is_input(self, v) -> bool:
        """Whether ``v`` is an input (False for a vertex not in the graph)."""
        return v in self._input_set

    @property
    def max_in_degree(self) -> int:
        """The most operands any vertex has; computing it needs that many red pebbles plus one."""
        return max(len(p) for p in self._parents.values())

    def __len__(self) -> int:
        return len(self.order)

    def __contains__(self, v) -> bool:
        try:
            return v in self.index
        except TypeError:
            return False

    def __iter__(self):
        return iter(self.order)

    def __repr__(self) -> str:
        edges = sum(len(p) for p in self._parents.values())
        return (f"Graph({len(self)} vertices, {edges} edges, {len(self.inputs)} inputs, "
                f"{len(self.outputs)} outputs)")

    @property
    def _input_set(self) -> frozenset:
        s = self.__dict__.get("_inputs_frozen")
        if s is None:
            s = self.__dict__["_inputs_frozen"] = frozenset(self.inputs)
        return s

    def _known(self, v):
        if v not in self:
            raise KeyError(f"unknown vertex {v!r}")
        return v

    # ------------------------------------------------------------------ bit masks
    def mask(self, vertices) -> int:
        """The bit mask of a set of vertices."""
        m = 0
        for v in vertices:
            m |= 1 << self.index[self._known(v)]
        return m

    def unmask(self, mask: int) -> list:
        """The vertices of a bit mask, in topological order."""
        return [v for i, v in enumerate(self.order) if mask >> i & 1]

    @property
    def parent_masks(self) -> tuple[int, ...]:
        """``parent_masks[i]``: the mask of the parents of ``order[i]``."""
        pm = self.__dict__.get("_parent_masks")
        if pm is None:
            pm = self.__dict__["_parent_masks"] = tuple(
                self.mask(self._parents[v]) for v in self.order)
        return pm


def _topological_order(parents, children) -> tuple:
    """Kahn's algorithm in first-seen order; a clear error naming a cycle if there is one."""
    waiting = {v: len(p) for v, p in parents.items()}
    ready = [v for v in parents if waiting[v] == 0]
    order = []
    k = 0
    while k < len(ready):
        v = ready[k]
        k += 1
        order.append(v)
        for c in children[v]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    if len(order) < len(parents):
        cycle = " -> ".join(map(repr, _a_cycle(parents, waiting)))
        raise ValueError(f"the graph has a cycle: {cycle}")
    return tuple(order)


def _a_cycle(parents, waiting):
    """Some cycle among the vertices Kahn's algorithm could not order."""
    stuck = {v for v, n in waiting.items() if n > 0}
    v = next(iter(stuck))
    seen = []
    while v not in seen:
        seen.append(v)
        v = next(p for p in parents[v] if p in stuck)
    cycle = seen[seen.index(v):] + [v]
    return cycle[::-1]
