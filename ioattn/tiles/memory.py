"""What a tile program holds: a :class:`Memory` of handles, talking to a machine.

The program gets a :class:`Memory` and :class:`Slow` handles to arrays in slow memory. It moves
tiles with :meth:`Memory.read` and :meth:`Memory.write`, makes scratch tiles with
:meth:`Memory.allocate`, gives them back with :meth:`Memory.free`, and computes in them with
expressions (:mod:`ioattn.tiles.expr`). The values live wherever the machine is: in this process
(``Memory(M)``, for the book and for a student's own checks) or in a grader's process
(:mod:`ioattn.teach.referee`), the program unchanged.

Examples
--------
Tiled ``C = A B`` with one output tile kept in the cache while strips of ``A`` and ``B`` stream
past (the outer-product schedule):

>>> import numpy as np
>>> from ioattn.tiles import Memory
>>> mem = Memory(12)
>>> A = mem.load("A", np.arange(12.0).reshape(3, 4))
>>> B = mem.load("B", np.ones((4, 2)))
>>> C = mem.output("C", (3, 2))
>>> for i in range(0, 3, 2):
...     c = mem.allocate((min(2, 3 - i), 2))
...     for k in range(4):
...         a, b = mem.read(A, slice(i, i + 2), slice(k, k + 1)), mem.read(B, slice(k, k + 1))
...         c += a @ b
...         mem.free(a, b)
...     mem.write(C, c, slice(i, i + 2))
...     mem.free(c)
>>> bool(np.array_equal(mem.fetch(C), mem.fetch(A) @ mem.fetch(B)))
True
>>> mem.io
IOCount(reads=28, writes=6, total=34, peak=8)
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from ..memory import IOCount
from .expr import Expr, Tile
from .machine import Machine, TileError

__all__ = ["Memory", "Slow"]


class Slow:
    """A handle to an array in slow memory: its name and shape, never its values.

    Attributes
    ----------
    name : str
    shape : tuple of int
    """

    __slots__ = ("name", "shape", "memory")

    def __init__(self, name: str, shape, memory):
        self.name, self.shape, self.memory = name, tuple(shape), memory

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Slow({self.name!r}, shape={self.shape})"

    def _refuse(self, *args, **kwargs):
        raise TypeError(f"{self.name!r} is in slow memory: bring a tile of it into the cache with "
                        "mem.read(...)")

    __getitem__ = __array__ = __iter__ = _refuse


class Memory:
    """A cache of ``M`` entries over slow memory, as a tile program sees it.

    Parameters
    ----------
    M : int, optional
        Cache capacity, for a memory in this process (with its own :class:`Machine`).
    inspect : bool
        Whether :meth:`values` shows tile values (this process's memory only).
    channel : callable, optional
        ``channel(request) -> result``: a machine elsewhere (given instead of ``M``).
    capacity : int, optional
        ``M`` of the machine behind ``channel``.
    """

    def __init__(self, M: int | None = None, *, inspect: bool = False, channel=None,
                 capacity: int | None = None):
        if channel is None:
            if M is None:
                raise TypeError("Memory(M) needs the cache size M")
            self.machine = Machine(M, inspect=inspect)
            self._request = self.machine.request
            self.M = self.machine.M
        else:
            self.machine = None
            self._request = channel
            self.M = int(capacity)

    def __repr__(self) -> str:
        return f"Memory(M={self.M})"

    # ------------------------------------------------------------------ slow memory
    def load(self, name: str, values) -> Slow:
        """Put an input in slow memory (this process's memory only)."""
        handle = self._own("load").load(name, values)
        return Slow(name, handle.shape, self)

    def output(self, name: str, shape) -> Slow:
        """An output array in slow memory, NaN until written (this process's memory only)."""
        handle = self._own("output").output(name, shape)
        return Slow(name, handle.shape, self)

    def fetch(self, array: Slow) -> np.ndarray:
        """A copy of a slow array once the program is done (not counted)."""
        return self._own("fetch").fetch(self._slow(array).name)

    def scratch(self, name: str, shape) -> Slow:
        """A new array in slow memory for the program's own use (e.g. a statistic kept between
        two passes), NaN until written. Not counted: reading and writing it are."""
        shape = [shape] if isinstance(shape, Integral) else list(shape)
        self._request(["scratch", name, [int(s) for s in shape]])
        return Slow(name, shape, self)

    # ------------------------------------------------------------------ transfers
    def read(self, src: Slow, *index) -> Tile:
        """A new tile holding ``src[index]`` (unit-step slices; missing axes whole). Counted."""
        src = self._slow(src)
        tid, shape = self._request(["read", src.name, _spans(index, src.shape, src.name)])
        return Tile(tid, shape, self)

    def write(self, dst: Slow, source, *index) -> None:
        """Write a tile (or a part of one, ``t[a:b]``) to ``dst[index]``. Counted."""
        dst = self._slow(dst)
        self._request(["write", dst.name, _spans(index, dst.shape, dst.name),
                       self._source(source, "mem.write")])

    # ------------------------------------------------------------------ the cache
    def allocate(self, shape, fill: float = 0.0) -> Tile:
        """A new tile of ``shape`` (one or two sizes), every entry ``fill``. Not counted."""
        shape = [shape] if isinstance(shape, Integral) else shape
        if not isinstance(shape, (tuple, list)) or not all(
                isinstance(s, Integral) and not isinstance(s, bool) for s in shape):
            raise TypeError(f"a tile's shape is one or two integers, got {shape!r}")
        if isinstance(fill, bool) or not isinstance(fill, Real):
            raise TypeError(f"a tile's fill is a number, got {type(fill).__name__}")
        tid, shape = self._request(["alloc", [int(s) for s in shape], float(fill)])
        return Tile(tid, shape, self)

    def free(self, *tiles: Tile) -> None:
        """Give tiles back to the cache."""
        for t in tiles:
            if not isinstance(t, Tile) or t.memory is not self:
                raise TypeError(f"free() takes tiles of this memory, got {t!r}")
        self._request(["free", [t.id for t in tiles]])

    def _set(self, target, node) -> None:
        self._request(["set", target, node])

    @property
    def io(self) -> IOCount:
        """Entries read and written so far, and the most held at once."""
        c = self._request(["io"])
        return IOCount(reads=c["reads"], writes=c["writes"], peak=c["peak"])

    @property
    def occupancy(self) -> int:
        """Entries held in the cache now."""
        return self._request(["io"])["occupancy"]

    def values(self, source) -> np.ndarray:
        """The values of a tile or a part of one (a memory made with ``inspect=True``)."""
        return np.array(self._request(["values", self._source(source, "mem.values")]),
                        dtype=np.float64)

    # ------------------------------------------------------------------ internals
    def _own(self, what: str) -> Machine:
        if self.machine is None:
            raise TileError(f"{what} is for a memory in this process; this one is the grader's")
        return self.machine

    def _slow(self, array) -> Slow:
        if not isinstance(array, Slow) or array.memory is not self:
            raise TypeError(f"expected an array in this memory's slow memory, got "
                            f"{type(array).__name__}")
        return array

    def _source(self, source, what: str) -> list:
        if not isinstance(source, Expr) or source.memory is not self \
                or source.node[0] not in ("tile", "part"):
            raise TypeError(f"{what} takes a tile of this memory or a part of one (t[a:b]), "
                            f"got {type(source).__name__}: compute into a tile first")
        return source.node


def _spans(index, shape, name: str) -> list:
    """``[[start, stop], ...]`` for a tile of a slow array, from unit-step slices."""
    if len(index) > len(shape):
        raise IndexError(f"too many indices for {name!r} of shape {shape}")
    spans = []
    for k, size in enumerate(shape):
        part = index[k] if k < len(index) else slice(None)
        if not isinstance(part, slice):
            raise IndexError(f"tiles of {name!r} are taken with slices (a:b), got {part!r}; use "
                             "slice(i, i + 1) for one row")
        for bound in (part.start, part.stop):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, Integral)):
                raise TypeError(f"slice bounds are integers, got {bound!r}")
        start, stop, step = part.indices(size)
        if step != 1:
            raise IndexError(f"tiles of {name!r} are taken with unit-step slices, got {part!r}")
        spans.append([start, max(start, stop)])
    return spans

