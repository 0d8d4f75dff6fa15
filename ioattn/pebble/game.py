"""The red-blue pebble game of Hong and Kung, with every move checked against its rule.

Blue pebbles are slow memory (unbounded), red pebbles the cache (at most ``M`` at once). A game
starts with a blue pebble on every input and is complete when every output has a blue pebble.
The moves, each named after the rule it applies:

- ``read(v)`` (R1, input): put a red pebble on a vertex that has a blue one. One I/O.
- ``write(v)`` (R2, output): put a blue pebble on a vertex that has a red one. One I/O.
- ``compute(v)`` (R3): put a red pebble on a non-input vertex all of whose parents have red ones.
- ``delete(v)`` (R4): remove a red pebble.

No move may leave more than ``M`` red pebbles. The I/O of a game is its number of reads and
writes; the I/O complexity ``Q(G, M)`` is the least I/O of a complete game [HK]_.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
"""

from __future__ import annotations

from .._validate import as_count
from .graph import Graph

__all__ = ["IllegalMove", "PebbleGame", "MOVES", "without_idle_computes"]

#: The four kinds of move.
MOVES = ("read", "write", "compute", "delete")


class IllegalMove(ValueError):
    """A move that breaks a rule of the game; ``rule`` names it, ``move`` is ``(kind, vertex)``."""

    def __init__(self, move, rule: str, detail: str):
        self.move, self.rule = move, rule
        super().__init__(f"illegal {move[0]}({move[1]!r}): {rule}: {detail}")


RULES = {
    "read": "a read needs a blue pebble on the vertex",
    "write": "a write needs a red pebble on the vertex",
    "compute": "a compute needs a red pebble on every parent",
    "delete": "a delete needs a red pebble to remove",
    "capacity": "at most M red pebbles at once",
    "input": "inputs are read, never computed",
}


class PebbleGame:
    """A game on ``graph`` with at most ``M`` red pebbles.

    Attributes
    ----------
    red, blue : set
        Vertices holding a red (cache) or blue (slow memory) pebble now.
    reads, writes, io : int
        I/O so far; ``io = reads + writes``.
    peak : int
        The most red pebbles held at once so far.
    moves : list of (str, vertex)
        Every move made, in order; :meth:`replay` plays such a list.

    Examples
    --------
    >>> from ioattn.pebble import Graph, PebbleGame
    >>> g = Graph([("a", "c"), ("b", "c")])
    >>> game = PebbleGame(g, M=3)
    >>> for move in [("read", "a"), ("read", "b"), ("compute", "c"), ("write", "c")]:
    ...     game.play(*move)
    >>> game.io, game.is_complete()
    (3, True)
    """

    def __init__(self, graph: Graph, M: int):
        if not isinstance(graph, Graph):
            raise TypeError("a game is played on an ioattn.pebble.Graph, "
                            f"not {type(graph).__name__}")
        self.graph = graph
        self.M = as_count(M, "M")
        self.red: set = set()
        self.blue: set = set(graph.inputs)
        self.reads = self.writes = self.peak = 0
        self.moves: list = []

    @property
    def io(self) -> int:
        return self.reads + self.writes

    def is_complete(self) -> bool:
        """Whether every output holds a blue pebble."""
        return all(v in self.blue for v in self.graph.outputs)

    # ------------------------------------------------------------------ moves
    def read(self, v) -> None:
        """R1: red pebble on a blue vertex (one I/O)."""
        self._known(("read", v))
        self._check(("read", v), v in self.blue, "read", "it has no blue pebble")
        self._place(("read", v))
        self.reads += 1

    def write(self, v) -> None:
        """R2: blue pebble on a red vertex (one I/O)."""
        self._known(("write", v))
        self._check(("write", v), v in self.red, "write", "it has no red pebble")
        self.blue.add(v)
        self.writes += 1
        self.moves.append(("write", v))

    def compute(self, v) -> None:
        """R3: red pebble on a vertex whose parents are all red."""
        move = ("compute", v)
        self._known(move)
        self._check(move, not self.graph.is_input(v), "input", "it is an input")
        missing = [p for p in self.graph.parents(v) if p not in self.red]
        self._check(move, not missing, "compute", f"no red pebble on {missing}")
        self._place(move)

    def delete(self, v) -> None:
        """R4: remove a red pebble."""
        self._known(("delete", v))
        self._check(("delete", v), v in self.red, "delete", "it has no red pebble")
        self.red.discard(v)
        self.moves.append(("delete", v))

    def play(self, kind: str, v) -> None:
        """Make the move ``kind(v)``."""
        if kind not in MOVES:
            raise ValueError(f"unknown move {kind!r}; the moves are {', '.join(MOVES)}")
        getattr(self, kind)(v)

    @classmethod
    def replay(cls, graph: Graph, M: int, moves) -> PebbleGame:
        """Play ``moves`` (pairs ``(kind, vertex)``) from the start; each is checked."""
        game = cls(graph, M)
        for kind, v in moves:
            game.play(kind, v)
        return game

    def __repr__(self) -> str:
        return (f"PebbleGame(M={self.M}, moves={len(self.moves)}, io={self.io}, "
                f"red={len(self.red)}, complete={self.is_complete()})")

    # ------------------------------------------------------------------ internals
    def _known(self, move) -> None:
        if move[1] not in self.graph:              # also False for an unhashable id
            raise IllegalMove(move, "unknown vertex", "it is not in the graph")

    def _check(self, move, ok: bool, rule: str, detail: str) -> None:
        if not ok:
            raise IllegalMove(move, RULES[rule], detail)

    def _place(self, move) -> None:
        v = move[1]
        if v in self.red:
            raise IllegalMove(move, "one pebble of a colour per vertex",
                              "it already has a red pebble")
        self._check(move, len(self.red) < self.M, "capacity",
                    f"all M = {self.M} red pebbles are in use")
        self.red.add(v)
        self.peak = max(self.peak, len(self.red))
        self.moves.append(move)


def without_idle_computes(graph: Graph, moves) -> list:
    """``moves`` without the computes whose red pebble is never used, and their deletes.

    A computed value is used when a child is computed or it is written while it is red. A compute
    that is not (its pebble is deleted, or the game ends, first) changes no I/O and only takes a
    slot, so dropping it, with the delete that ends it, leaves a legal game with the same reads
    and writes and no more red pebbles at any time. Repeated until nothing changes, since
    dropping one compute can leave its operands' computes idle in turn.
    """
    moves = list(moves)
    while True:
        idle = set()
        open_at = {}                      # vertex -> index of the compute that made it red
        for k, (kind, v) in enumerate(moves):
            if kind == "compute":
                for p in graph.parents(v):
                    open_at.pop(p, None)  # used
                open_at[v] = k
            elif kind == "write":
                open_at.pop(v, None)
            elif kind == "delete" and v in open_at:
                idle.update((open_at.pop(v), k))
        idle.update(open_at.values())     # still red at the end, never used
        if not idle:
            return moves
        moves = [m for k, m in enumerate(moves) if k not in idle]
