"""The two-level memory model: a cache of ``M`` entries, an unbounded slow memory, exact counts.

Everything ioattn says about I/O is counted here. Arrays in slow memory are opaque
:class:`SlowArray` handles; their values reach the cache only through :meth:`TwoLevelMemory.read`
and results leave it only through :meth:`TwoLevelMemory.write`. Each call moves one rectangular
tile and counts its entries, so a ``B x B`` tile costs one call and ``B**2`` entries.

The cache holds the buffers an algorithm allocates (by reading a tile, or with
:meth:`TwoLevelMemory.allocate`) until it frees them. Arithmetic happens in those buffers: an
operation that updates a buffer in place from other buffers, such as ``C += A @ B``, is one fused
loop and needs no extra storage; anything the algorithm keeps must be a buffer. Allocating past
``M`` entries raises :class:`CacheOverflowError` at once.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981. The cache
   plays the red pebbles (at most ``M``), slow memory the blue ones; a read or a write moves one
   entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import NamedTuple

import numpy as np

__all__ = ["CacheOverflowError", "IOCount", "SlowArray", "Transfer", "TwoLevelMemory"]


class CacheOverflowError(RuntimeError):
    """Raised when an allocation would hold more than ``M`` entries in the cache."""


@dataclass(frozen=True, kw_only=True)
class IOCount:
    """Exact I/O of one computation: entries read, entries written, their total, peak occupancy."""

    reads: int
    writes: int
    total: int = field(init=False)
    peak: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", self.reads + self.writes)


class Transfer(NamedTuple):
    """One traced transfer: ``op`` is ``"read"`` or ``"write"``; ``rows``/``cols`` are half-open."""

    op: str
    array: str
    rows: tuple[int, int]
    cols: tuple[int, int] | None
    entries: int


class SlowArray:
    """Handle to an array in slow memory. Its values are visible only through counted reads."""

    __slots__ = ("name", "shape", "_data", "_memory")

    def __init__(self, name: str, data: np.ndarray, memory: TwoLevelMemory):
        self.name = name
        self.shape = data.shape
        self._data = data
        self._memory = memory

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            f"{self.name!r} lives in slow memory: bring a tile into the cache with "
            "TwoLevelMemory.read(...) (a counted read)"
        )

    __array__ = __getitem__ = __iter__ = _refuse

    def __repr__(self) -> str:
        dims = "x".join(map(str, self.shape))
        return f"SlowArray({self.name!r}, {dims})"


def _check_tile(index) -> None:
    """A tile index takes, per axis, a unit-step slice or an int (NumPy basic indexing)."""
    for item in index:
        if item.__class__ is slice:
            if item.step is not None and item.step != 1:
                raise IndexError("a tile is a contiguous block: slices with a step are not tiles")
        elif not isinstance(item, (int, np.integer)) or isinstance(item, bool):
            raise IndexError(f"a tile index takes slices or ints, not {type(item).__name__}")


def _spans(index, shape):
    """Half-open ``(start, stop)`` per axis of a checked tile index."""
    spans = []
    for axis, n in enumerate(shape):
        item = index[axis] if axis < len(index) else slice(None)
        if item.__class__ is slice:
            start, stop, _ = item.indices(n)
            spans.append((start, max(start, stop)))
        else:
            i = int(item) + (n if item < 0 else 0)
            spans.append((i, i + 1))
    return spans


class TwoLevelMemory:
    """A cache of at most ``M`` entries over an unbounded slow memory, with exact I/O counts.

    Parameters
    ----------
    M : int
        Cache capacity in entries (numbers), ``M >= 1``.
    trace : bool, optional
        Record every transfer in :attr:`trace` (the order of reads and writes, for animation and
        auditing). Off by default: counting alone is cheaper.
    owner : str, optional
        Name of the algorithm using this memory, quoted in overflow messages.

    Attributes
    ----------
    reads, writes : int
        Entries moved from slow memory to the cache, and from the cache to slow memory.
    occupancy, peak : int
        Entries held in the cache now, and the most ever held at once.
    trace : list of Transfer or None
        The transfers in order, when ``trace=True``.

    Examples
    --------
    >>> import numpy as np
    >>> mem = TwoLevelMemory(8)
    >>> A = mem.load("A", np.arange(6.0).reshape(2, 3))
    >>> tile = mem.read(A, slice(0, 2), slice(0, 2))   # a 2x2 tile: 4 entries
    >>> tile *= 2
    >>> out = mem.allocate_slow("B", (2, 2))
    >>> mem.write(out, tile)
    >>> mem.free(tile)
    >>> mem.io
    IOCount(reads=4, writes=4, total=8, peak=4)
    """

    def __init__(self, M: int, *, trace: bool = False, owner: str | None = None):
        if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
            raise TypeError(f"the cache size M must be an integer, not {type(M).__name__}")
        if M < 1:
            raise ValueError(f"the cache size M must be at least 1, got {M}")
        self.M = int(M)
        self.owner = owner
        self.reads = 0
        self.writes = 0
        self.occupancy = 0
        self.peak = 0
        self.trace: list[Transfer] | None = [] if trace else None
        self._buffers: dict[int, np.ndarray] = {}

    # ----------------------------------------------------------------- slow memory
    def load(self, name: str, values) -> SlowArray:
        """Place an input in slow memory (free: inputs start there). Returns its handle."""
        return SlowArray(name, np.array(values, dtype=np.float64), self)

    def allocate_slow(self, name: str, shape) -> SlowArray:
        """Reserve an array in slow memory. Entries start as NaN until written, so a schedule
        that forgets to write part of its output shows it."""
        return SlowArray(name, np.full(shape, np.nan), self)

    def fetch(self, handle: SlowArray) -> np.ndarray:
        """A copy of a slow-memory array, for the caller once the computation is over.

        This is not a transfer and is not counted: algorithms must use :meth:`read`.
        """
        self._check_handle(handle)
        return handle._data.copy()

    # ----------------------------------------------------------------- the cache
    def allocate(self, shape, label: str = "buffer", fill: float | None = 0.0) -> np.ndarray:
        """A cache buffer of ``shape`` filled with ``fill`` (no I/O; capacity checked).

        ``fill=None`` leaves it uninitialised, for a buffer the next operation overwrites.
        """
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        entries = prod(shape)
        if self.occupancy + entries > self.M:
            self._overflow(entries, label)
        self._hold(entries)
        buf = np.empty(shape) if fill is None else np.full(shape, fill)
        self._buffers[id(buf)] = buf
        return buf

    def read(self, src: SlowArray, *index, label: str | None = None) -> np.ndarray:
        """Read the tile ``src[index]`` into a new cache buffer; counts its entries.

        ``index`` works as in NumPy with unit-step slices and ints (an int drops its axis);
        missing axes are taken whole.
        """
        self._check_handle(src)
        _check_tile(index)
        view = src._data[index]
        entries = view.size
        if self.occupancy + entries > self.M:
            self._overflow(entries, label or _describe(src.name, _spans(index, src.shape)))
        self._hold(entries)
        buf = view.copy()
        self._buffers[id(buf)] = buf
        self.reads += entries
        if self.trace is not None:
            self.trace.append(_transfer("read", src.name, _spans(index, src.shape), entries))
        return buf

    def write(self, dst: SlowArray, values: np.ndarray, *index) -> None:
        """Write ``values`` (a cache buffer, or a view of one) to the tile ``dst[index]``."""
        self._check_handle(dst)
        root = values
        while isinstance(root, np.ndarray) and root.base is not None:
            root = root.base
        if not isinstance(values, np.ndarray) or id(root) not in self._buffers:
            raise ValueError(
                f"only values held in the cache can be written to {dst.name!r}: compute into a "
                "buffer from TwoLevelMemory.read or TwoLevelMemory.allocate"
            )
        _check_tile(index)
        target = dst._data[index]
        if target.shape != values.shape:
            raise ValueError(
                f"cannot write a tile of shape {values.shape} to "
                f"{_describe(dst.name, _spans(index, dst.shape))}, whose shape is {target.shape}"
            )
        dst._data[index] = values
        self.writes += values.size
        if self.trace is not None:
            self.trace.append(_transfer("write", dst.name, _spans(index, dst.shape), values.size))

    def free(self, *buffers: np.ndarray) -> None:
        """Release cache buffers (their entries stop counting toward the occupancy)."""
        for buf in buffers:
            if self._buffers.pop(id(buf), None) is None:
                raise ValueError("free() takes buffers in the cache (was this one freed already?)")
            self.occupancy -= buf.size

    @property
    def io(self) -> IOCount:
        """The counts so far, as an :class:`IOCount`."""
        return IOCount(reads=self.reads, writes=self.writes, peak=self.peak)

    # ----------------------------------------------------------------- internals
    def _hold(self, entries: int) -> None:
        self.occupancy += entries
        if self.occupancy > self.peak:
            self.peak = self.occupancy

    def _overflow(self, entries: int, label: str):
        who = f"{self.owner}: " if self.owner else ""
        raise CacheOverflowError(
            f"{who}cannot bring {label} ({entries} entries) into the cache: it already "
            f"holds {self.occupancy} of M = {self.M} entries"
        )

    def _check_handle(self, handle) -> None:
        if handle.__class__ is not SlowArray or handle._memory is not self:
            raise TypeError(f"expected a SlowArray of this memory, got {type(handle).__name__}")


def _describe(name: str, spans) -> str:
    return f"{name}[" + ", ".join(f"{a}:{b}" for a, b in spans) + "]"


def _transfer(op: str, name: str, spans, entries: int) -> Transfer:
    return Transfer(op, name, spans[0], spans[1] if len(spans) > 1 else None, entries)
