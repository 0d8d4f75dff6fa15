"""The symmetries of a pebble game, with which the exact search merges states that mirror each
other.

An *automorphism* of a game is a permutation ``sigma`` of the vertices of its graph that maps
edges to edges (``u -> v`` exactly when ``sigma(u) -> sigma(v)``), inputs to inputs and outputs to
outputs. It maps every legal move to a legal move of the same kind and cost, and every complete
game to a complete game; so the least I/O still needed from a state ``(red, blue)`` is the same as
from ``(sigma(red), sigma(blue))``. :func:`ioattn.pebble.min_io` therefore keeps one state of each
set of mirror images, its :meth:`Symmetry.canonical` form (the least image, ``blue`` compared
first, then ``red``), and the optimum it finds is unchanged (see :mod:`ioattn.pebble.search`).

``attention_graph(2, 2)`` has 16 automorphisms (the two rows, the two keys, the two terms of each
score and the two columns of ``O`` may each be swapped), so its search keeps about a sixteenth of
the states.

Any set of automorphisms merges only states of equal cost, whether or not it is the whole group;
:class:`Symmetry` finds them with networkx's VF2 matcher and keeps at most ``limit`` of them (the
identity first).
"""

from __future__ import annotations

import numpy as np

from .graph import Graph

__all__ = ["MAX_SYMMETRIES", "Symmetry"]

#: The most automorphisms a search uses: canonicalising a state maps it by each of them.
MAX_SYMMETRIES = 16


class Symmetry:
    """Automorphisms of the game on ``graph`` (see the module docstring), as permutations of the
    vertex indices of ``graph.order``.

    Parameters
    ----------
    graph : Graph
        The computation DAG.
    keep : callable, optional
        ``keep(perm) -> bool``: use only the automorphisms for which it is True (the search keeps
        those that map its heuristic's families to themselves). The identity is always kept.
    limit : int, optional
        The most automorphisms to use (:data:`MAX_SYMMETRIES` by default).

    Attributes
    ----------
    perms : tuple of tuple of int
        ``perms[k][i]``: the index of the image of vertex ``i`` under the ``k``-th automorphism;
        ``perms[0]`` is the identity.
    tables : numpy.ndarray
        ``uint64`` of shape ``(len(perms), 8, 256)``: ``tables[k, j, byte]`` is the image under
        ``perms[k]`` of the set whose bits ``8j .. 8j + 7`` are ``byte`` (a set of up to 64
        vertices is mapped by eight look-ups); None for more than 64 vertices.
    inverse_tables : numpy.ndarray
        The same for the inverse of each permutation.

    Examples
    --------
    >>> from ioattn.pebble import Graph
    >>> g = Graph([("a", "c"), ("b", "c")])          # a and b may be swapped
    >>> s = Symmetry(g)
    >>> len(s), s.image(1, 0b001)                      # a -> b
    (2, 2)
    >>> s.canonical(0b100, 0b010)                      # (red {c}, blue {b}) -> blue {a}
    (4, 1, 1)
    """

    def __init__(self, graph: Graph, keep=None, limit: int = MAX_SYMMETRIES):
        n = len(graph)
        identity = tuple(range(n))
        perms = [identity]
        if limit > 1:
            for perm in _automorphisms(graph):
                if perm != identity and (keep is None or keep(perm)):
                    perms.append(perm)
                    if len(perms) >= limit:
                        break
        self.n = n
        self.perms = tuple(perms)
        self.tables = _tables(self.perms) if n <= 64 else None
        self.inverse_tables = (_tables([self.inverse(k) for k in range(len(perms))])
                               if n <= 64 else None)
        # the tables as Python ints, for the Python search
        self._rows = None if self.tables is None else [
            [[int(x) for x in row] for row in table] for table in self.tables]

    def __len__(self) -> int:
        return len(self.perms)

    def image(self, k: int, mask: int) -> int:
        """The image of the vertex set ``mask`` under ``perms[k]``."""
        if self.tables is None:
            return self.image_by(self.perms[k], mask)
        table, out, j = self._rows[k], 0, 0
        while mask:
            out |= table[j][mask & 255]
            mask >>= 8
            j += 1
        return out

    def canonical(self, red: int, blue: int) -> tuple[int, int, int]:
        """``(red', blue', k)``: the least image of the state, ``blue`` compared first, then
        ``red``, and the first ``k`` whose ``perms[k]`` maps the state to it."""
        best_red, best_blue, best = red, blue, 0
        for k in range(1, len(self.perms)):
            b = self.image(k, blue)
            if b > best_blue:
                continue
            r = self.image(k, red)
            if b < best_blue or r < best_red:
                best_red, best_blue, best = r, b, k
        return best_red, best_blue, best

    @staticmethod
    def image_by(perm, mask: int) -> int:
        """The image of the vertex set ``mask`` under the permutation ``perm``."""
        out = 0
        while mask:
            low = mask & -mask
            out |= 1 << perm[low.bit_length() - 1]
            mask ^= low
        return out

    def inverse(self, k: int) -> tuple:
        """The inverse permutation of ``perms[k]``."""
        inv = [0] * self.n
        for i, j in enumerate(self.perms[k]):
            inv[j] = i
        return tuple(inv)


def _automorphisms(graph: Graph):
    """Every automorphism of the game on ``graph`` (VF2, networkx), as index permutations."""
    import networkx as nx
    from networkx.algorithms.isomorphism import DiGraphMatcher

    index, inputs, outputs = graph.index, set(graph.inputs), set(graph.outputs)
    D = nx.DiGraph()
    for v in graph.order:
        D.add_node(index[v], kind=(v in inputs, v in outputs))
        D.add_edges_from((index[p], index[v]) for p in graph.parents(v))
    matcher = DiGraphMatcher(D, D, node_match=lambda a, b: a["kind"] == b["kind"])
    for mapping in matcher.isomorphisms_iter():
        yield tuple(mapping[i] for i in range(len(graph)))


def _tables(perms) -> np.ndarray:
    """``tables[k, j, byte]``: the image of ``byte << 8j`` under ``perms[k]``."""
    tables = np.zeros((max(len(perms), 1), 8, 256), np.uint64)
    byte = np.arange(256, dtype=np.uint64)
    for k, perm in enumerate(perms):
        for i, j in enumerate(perm):
            bit = np.uint64(1) << np.uint64(j)
            tables[k, i // 8] |= np.where((byte >> np.uint64(i % 8)) & np.uint64(1), bit,
                                          np.uint64(0))
    return tables
