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

The occupancy is always the sum of the live buffers' current sizes, so a buffer whose size
changes in place (``ndarray.resize(..., refcheck=False)``) counts at its real size, and the next
operation on the cache raises :class:`CacheOverflowError` if the cache then holds more than ``M``
entries. Every method checks all its arguments before it changes anything: a call that raises
leaves the memory as it was.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981. The cache
   plays the red pebbles (at most ``M``), slow memory the blue ones; a read or a write moves one
   entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from numbers import Integral, Real
from operator import attrgetter
from typing import NamedTuple

import numpy as np

__all__ = ["CacheOverflowError", "IOCount", "SlowArray", "Transfer", "TwoLevelMemory"]

#: The size of a buffer now (a C-level getter: the occupancy is one ``sum(map(...))``).
_SIZE = attrgetter("size")
_F8 = np.dtype(np.float64)
#: The most float64 entries one array can have on this machine.
_MAX_ENTRIES = np.iinfo(np.intp).max // _F8.itemsize
#: What a registry lookup finds for an object that is not a live buffer (``None`` is no buffer).
_ABSENT = object()


class CacheOverflowError(RuntimeError):
    """Raised when the cache would hold, or already holds, more than ``M`` entries."""


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


def _is_int(x) -> bool:
    """Whether ``x`` is an integer (Python or NumPy), and not a bool."""
    return x.__class__ is int or (isinstance(x, Integral) and not isinstance(x, bool))


def _check_tile(index) -> None:
    """A tile index takes, per axis, a unit-step slice or an int (NumPy basic indexing).

    Raises IndexError naming the problem. Slice bounds that are not integers (TypeError), ints
    out of range and too many indices (IndexError) are left to NumPy, which raises before
    anything changes.
    """
    for item in index:
        if item.__class__ is slice:
            step = item.step
            if step is not None and not (_is_int(step) and step == 1):
                raise IndexError("a tile is a contiguous block: slices with a step are not tiles "
                                 f"(got step {step!r})")
        elif item.__class__ is not int and not _is_int(item):
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


def _check_name(name, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a string, got {type(name).__name__} ({name!r})")
    if not name:
        raise ValueError(f"{what} must not be empty")


def _as_shape(shape, where: str, least_ndim: int) -> tuple[tuple[int, ...], int]:
    """``shape`` (an int, or a tuple or list of ints, with ``least_ndim`` to 2 axes) as a tuple
    of Python ints, and its number of entries. TypeError or ValueError naming the problem."""
    if _is_int(shape):
        dims = (shape,)
    elif isinstance(shape, (tuple, list)) or (isinstance(shape, np.ndarray) and shape.ndim == 1):
        dims = tuple(shape)
    else:
        raise TypeError(f"{where}: a shape is an int or a tuple of ints, got "
                        f"{type(shape).__name__} ({shape!r})")
    if not least_ndim <= len(dims) <= 2:
        axes = "1 or 2" if least_ndim == 1 else f"{least_ndim} to 2"
        raise ValueError(f"{where}: the shape must have {axes} axes, got {len(dims)} ({shape!r})")
    for n in dims:
        if not _is_int(n):
            raise TypeError(f"{where}: a shape takes ints, got {type(n).__name__} ({n!r}) in "
                            f"{shape!r}")
        if n < 0:
            raise ValueError(f"{where}: a shape takes non-negative sizes, got {shape!r}")
    dims = tuple(int(n) for n in dims)
    entries = prod(dims)
    if entries > _MAX_ENTRIES:
        raise ValueError(f"{where}: shape {dims} has {entries} entries, more than an array "
                         f"can hold here ({_MAX_ENTRIES})")
    return dims, entries


class TwoLevelMemory:
    """A cache of at most ``M`` entries over an unbounded slow memory, with exact I/O counts.

    Every method checks all its arguments before it changes anything, and a call that raises
    (TypeError, ValueError or IndexError for bad arguments, :class:`CacheOverflowError` for the
    capacity) leaves the counts, the occupancy, the peak and the trace as they were.

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
        Entries held in the cache now (the sum of the live buffers' current sizes), and the most
        held at once at any operation or query so far.
    trace : list of Transfer or None
        The transfers in order, when ``trace=True``.

    Notes
    -----
    The occupancy is computed from the buffers themselves, not from their sizes when they were
    allocated: a buffer resized in place (``ndarray.resize(..., refcheck=False)``, or any other
    way) counts at its new size, and the next :meth:`read`, :meth:`allocate`, :meth:`write` or
    :meth:`free` raises :class:`CacheOverflowError` while the cache holds more than ``M``
    entries. The check costs one pass over the live buffers (a handful in every algorithm here).

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
        if not isinstance(trace, (bool, np.bool_)):
            raise TypeError(f"trace must be True or False, got {type(trace).__name__}")
        if owner is not None and not isinstance(owner, str):
            raise TypeError(f"owner must be a string or None, got {type(owner).__name__}")
        self.M = int(M)
        self.owner = owner
        self.reads = 0
        self.writes = 0
        self._peak = 0
        self.trace: list[Transfer] | None = [] if trace else None
        self._buffers: dict[int, np.ndarray] = {}

    # ----------------------------------------------------------------- slow memory
    def load(self, name: str, values) -> SlowArray:
        """Place an input in slow memory (free: inputs start there). Returns its handle.

        Parameters
        ----------
        name : str
            The array's name, in traces and messages (not empty).
        values : array_like
            A 1-D or 2-D array of real numbers (bool, integer or float); copied as float64.

        Returns
        -------
        SlowArray
            The handle; its values are read with :meth:`read`.
        """
        _check_name(name, "load: the name")
        try:
            arr = np.asarray(values)
        except ValueError as exc:                  # ragged nested lists and the like
            raise ValueError(f"load({name!r}): the values must form an array: {exc}") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"load({name!r}): the values must be real numbers, got dtype "
                            f"{arr.dtype}")
        if arr.ndim not in (1, 2):
            raise ValueError(f"load({name!r}): slow memory holds 1-D or 2-D arrays, got "
                             f"shape {arr.shape}")
        return SlowArray(name, np.array(arr, dtype=np.float64), self)

    def allocate_slow(self, name: str, shape) -> SlowArray:
        """Reserve an array in slow memory (no I/O).

        Entries start as NaN until written, so a schedule that forgets to write part of its
        output shows it.

        Parameters
        ----------
        name : str
            The array's name, in traces and messages (not empty).
        shape : int or tuple of int
            One or two non-negative sizes.

        Returns
        -------
        SlowArray
            The handle; write to it with :meth:`write`.
        """
        _check_name(name, "allocate_slow: the name")
        dims, _ = _as_shape(shape, f"allocate_slow({name!r})", 1)
        return SlowArray(name, np.full(dims, np.nan), self)

    def fetch(self, handle: SlowArray) -> np.ndarray:
        """A copy of a slow-memory array, for the caller once the computation is over.

        This is not a transfer and is not counted: algorithms must use :meth:`read`.
        """
        self._check_handle(handle)
        return handle._data.copy()

    # ----------------------------------------------------------------- the cache
    def allocate(self, shape, label: str = "buffer", fill: float | None = 0.0) -> np.ndarray:
        """A new cache buffer (no I/O; capacity checked with the buffer counted).

        Parameters
        ----------
        shape : int or tuple of int
            Zero to two non-negative sizes.
        label : str, optional
            What the buffer is, quoted if it does not fit.
        fill : float or None, optional
            The buffer's initial value; ``None`` leaves it uninitialised, for a buffer the next
            operation overwrites.

        Returns
        -------
        numpy.ndarray
            A float64 buffer, held in the cache until :meth:`free`.

        Raises
        ------
        TypeError, ValueError
            For a shape that is not zero to two non-negative ints, a label that is not a string,
            or a fill that is not a real number.
        CacheOverflowError
            If the cache would hold more than ``M`` entries with this buffer.
        """
        # the shapes the algorithms use, (r, c) and r, checked inline: this is the hot path
        if shape.__class__ is int and shape >= 0:
            entries = shape
            shape = (shape,)
        elif (shape.__class__ is tuple and len(shape) == 2 and shape[0].__class__ is int
              and shape[1].__class__ is int and shape[0] >= 0 and shape[1] >= 0):
            entries = shape[0] * shape[1]
        else:
            shape, entries = _as_shape(shape, f"allocate({label!r})", 0)
        if label.__class__ is not str and not isinstance(label, str):
            raise TypeError(f"allocate: the label must be a string, got {type(label).__name__}")
        if fill is not None and fill.__class__ is not float:
            if isinstance(fill, bool) or not isinstance(fill, Real):
                raise TypeError(f"allocate({label!r}): fill must be a real number or None, got "
                                f"{type(fill).__name__} ({fill!r})")
            try:
                fill = float(fill)
            except OverflowError:
                raise ValueError(f"allocate({label!r}): fill {fill!r} is too large for a "
                                 "float64") from None
        buffers = self._buffers
        held = sum(map(_SIZE, buffers.values())) + entries
        if held > self.M:
            self._overflow(entries, label, held - entries)
        buf = np.empty(shape) if fill is None else np.full(shape, fill)
        buffers[id(buf)] = buf
        if held > self._peak:
            self._peak = held
        return buf

    def read(self, src: SlowArray, *index, label: str | None = None) -> np.ndarray:
        """Read the tile ``src[index]`` into a new cache buffer; counts its entries.

        Parameters
        ----------
        src : SlowArray
            A slow array of this memory.
        *index : slice or int
            As in NumPy, with unit-step slices (bounds clipped to the array) and ints (an int
            drops its axis); missing axes are taken whole.
        label : str, optional
            What the tile is, quoted if it does not fit (default: ``src``'s name and the tile).

        Returns
        -------
        numpy.ndarray
            A float64 copy of the tile, held in the cache until :meth:`free`.

        Raises
        ------
        TypeError
            If ``src`` is not a slow array of this memory, ``label`` not a string, or a slice
            bound not an integer.
        IndexError
            For a tile index that is not unit-step slices and ints within ``src``'s shape.
        CacheOverflowError
            If the cache would hold more than ``M`` entries with the tile.
        """
        if src.__class__ is not SlowArray or src._memory is not self:
            self._check_handle(src)
        _check_tile(index)
        if label is not None and not isinstance(label, str):
            raise TypeError(f"read: the label must be a string or None, got {type(label).__name__}")
        view = src._data[index]                    # an int out of range: IndexError, here
        entries = view.size
        buffers = self._buffers
        held = sum(map(_SIZE, buffers.values())) + entries
        if held > self.M:
            self._overflow(entries, label or _describe(src.name, _spans(index, src.shape)),
                           held - entries)
        buf = view.copy() if view.__class__ is np.ndarray else np.array(view)   # one entry: 0-D
        buffers[id(buf)] = buf
        if held > self._peak:
            self._peak = held
        self.reads += entries
        if self.trace is not None:
            self.trace.append(_transfer("read", src.name, _spans(index, src.shape), entries))
        return buf

    def write(self, dst: SlowArray, values: np.ndarray, *index) -> None:
        """Write ``values`` to the tile ``dst[index]``; counts its entries.

        Parameters
        ----------
        dst : SlowArray
            A slow array of this memory.
        values : numpy.ndarray
            A live cache buffer, or a (float64) view of one, of the tile's shape.
        *index : slice or int
            The tile, as in :meth:`read`.

        Raises
        ------
        TypeError, ValueError
            If ``dst`` is not a slow array of this memory, or ``values`` not a float64 view of a
            live cache buffer of the tile's shape.
        IndexError
            For a tile index as in :meth:`read`.
        CacheOverflowError
            If the cache holds more than ``M`` entries (a buffer grew in place).
        """
        if dst.__class__ is not SlowArray or dst._memory is not self:
            self._check_handle(dst)
        if not isinstance(values, np.ndarray):
            raise TypeError(f"only values held in the cache can be written to {dst.name!r}: "
                            f"got {type(values).__name__}, not a buffer from "
                            "TwoLevelMemory.read or TwoLevelMemory.allocate")
        root, base = values, values.base
        while isinstance(base, np.ndarray):
            root, base = base, base.base
        if self._buffers.get(id(root)) is not root:
            raise ValueError(
                f"only values held in the cache can be written to {dst.name!r}: compute into a "
                "buffer from TwoLevelMemory.read or TwoLevelMemory.allocate"
            )
        if values.dtype is not _F8 and values.dtype != _F8:
            raise ValueError(f"cannot write a view of a cache buffer as {values.dtype} to "
                             f"{dst.name!r}: the cache holds float64 entries")
        _check_tile(index)
        target = dst._data[index]
        if target.shape != values.shape:
            raise ValueError(
                f"cannot write a tile of shape {values.shape} to "
                f"{_describe(dst.name, _spans(index, dst.shape))}, whose shape is {target.shape}"
            )
        held = sum(map(_SIZE, self._buffers.values()))
        if held > self.M:
            self._overgrown(held, f"write to {dst.name!r}")
        if held > self._peak:
            self._peak = held
        dst._data[index] = values
        self.writes += values.size
        if self.trace is not None:
            self.trace.append(_transfer("write", dst.name, _spans(index, dst.shape), values.size))

    def free(self, *buffers: np.ndarray) -> None:
        """Release cache buffers (their entries stop counting toward the occupancy).

        Parameters
        ----------
        *buffers : numpy.ndarray
            Live cache buffers themselves (not views), each once. Nothing is freed unless all
            are.

        Raises
        ------
        TypeError, ValueError
            For an argument that is not a live cache buffer (a freed one, a view, an array
            from elsewhere), or the same buffer twice.
        CacheOverflowError
            If the cache holds more than ``M`` entries (a buffer grew in place): shrink it back.
        """
        live = self._buffers
        for buf in buffers:
            if live.get(id(buf), _ABSENT) is not buf:
                self._not_live(buf)
        held = sum(map(_SIZE, live.values()))
        try:
            for buf in buffers:
                del live[id(buf)]
        except KeyError:                           # the same buffer twice: undo, then refuse
            for buf in buffers:
                live[id(buf)] = buf
            raise ValueError("free() got the same buffer twice") from None
        if held > self.M:                          # a buffer grew in place: undo, then refuse
            for buf in buffers:
                live[id(buf)] = buf
            self._overgrown(held, "free buffers")
        if held > self._peak:
            self._peak = held

    @property
    def occupancy(self) -> int:
        """Entries held in the cache now: the sum of the live buffers' current sizes."""
        held = sum(map(_SIZE, self._buffers.values()))
        if held > self._peak:
            self._peak = held
        return held

    @property
    def peak(self) -> int:
        """The most entries held at once, at any operation or occupancy query so far."""
        return max(self._peak, self.occupancy)

    @property
    def io(self) -> IOCount:
        """The counts so far, as an :class:`IOCount`."""
        return IOCount(reads=self.reads, writes=self.writes, peak=self.peak)

    # ----------------------------------------------------------------- internals
    def _overflow(self, entries: int, label: str, held: int):
        if held > self._peak:                      # what the cache held is seen, if not more
            self._peak = held
        who = f"{self.owner}: " if self.owner else ""
        grown = (" (more than M: a cache buffer grew in place after it was allocated, e.g. by "
                 "ndarray.resize)") if held > self.M else ""
        raise CacheOverflowError(
            f"{who}cannot bring {label} ({entries} entries) into the cache: it already "
            f"holds {held} of M = {self.M} entries{grown}"
        )

    def _overgrown(self, held: int, what: str):
        if held > self._peak:
            self._peak = held
        who = f"{self.owner}: " if self.owner else ""
        raise CacheOverflowError(
            f"{who}cannot {what}: the cache holds {held} entries, more than M = {self.M}; a cache "
            "buffer grew in place after it was allocated (e.g. by ndarray.resize)"
        )

    def _not_live(self, buf):
        if not isinstance(buf, np.ndarray):
            raise TypeError(f"free() takes cache buffers, got {type(buf).__name__}")
        root, base = buf, buf.base
        while isinstance(base, np.ndarray):
            root, base = base, base.base
        if root is not buf and self._buffers.get(id(root)) is root:
            raise ValueError("free() takes the cache buffers themselves, not views of them")
        raise ValueError("free() takes buffers in the cache (was this one freed already?)")

    def _check_handle(self, handle) -> None:
        if handle.__class__ is not SlowArray:
            raise TypeError(f"expected a SlowArray of this memory, got {type(handle).__name__}")
        if handle._memory is not self:
            raise TypeError(f"expected a SlowArray of this memory, got {handle!r}, which belongs "
                            "to another memory")


def _describe(name: str, spans) -> str:
    return f"{name}[" + ", ".join(f"{a}:{b}" for a, b in spans) + "]"


def _transfer(op: str, name: str, spans, entries: int) -> Transfer:
    return Transfer(op, name, spans[0], spans[1] if len(spans) > 1 else None, entries)
