"""The grader's memory: the two-level model of :mod:`ioattn.memory`, refereed.

A submission gets a :class:`GradedMemory`, which behaves like :class:`ioattn.TwoLevelMemory`
(``read``, ``write``, ``allocate``, ``free``, ``allocate_slow``, and the counters ``reads``,
``writes``, ``occupancy``, ``peak``, ``io``, ``M``) but keeps nothing the submission can change.
Everything lives in a :class:`Referee` that only the grader holds:

- **Counts.** The referee counts every transfer and records it in its own trace; the grader
  recounts from that trace (:meth:`Referee.recount`). The memory's counters are read-only views
  of it: assigning one (``mem.reads = 0``), replacing a method, or calling a private one is
  recorded as tampering and refused.
- **Slow memory.** A handle's values are not in the handle. ``handle._data`` holds random decoy
  values of the same shape, and merely touching it is recorded: a submission that reads slow
  memory without a counted read is caught at the attribute and, if it uses what it found, by its
  output, computed from the decoys. ``fetch`` and ``load`` are refused while the submission runs.
- **The cache.** Capacity is checked against the referee's ``M``; an overflow is recorded even if
  the submission catches the :class:`~ioattn.CacheOverflowError`. A freed buffer is filled with
  NaN, so values kept in it after ``free`` poison the result. While the submission runs, every
  transfer first audits what it holds outside the cache (:mod:`ioattn.teach.audit`).

The limit is Python itself: code that runs in the grader's process can reach any object. The
audit hooks (:mod:`ioattn.teach.hooks`) record the usual routes to the referee (the garbage
collector, the grader's frames), but a submission written against the grader's source (following
frames upward by hand, reading this module's private state, patching the grader) is an attack on
the grading harness, not on the model; grade in a container for high stakes.
"""

from __future__ import annotations

import hashlib
import sys
import time
import weakref
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from .._validate import as_count
from ..memory import (
    CacheOverflowError,
    IOCount,
    SlowArray,
    Transfer,
    TwoLevelMemory,
    _check_tile,
    _describe,
    _spans,
    _transfer,
)

__all__ = ["GradedMemory", "GradingTimeout", "Referee", "Violation", "KINDS"]

#: The kinds of failure, each with the headline that opens its reason. The first six are the
#: ways to cheat the model; the grader names them whatever else goes wrong.
KINDS = {
    "uncounted": "Used slow memory without a counted read or write",
    "counters": "Changed the memory's counters or methods",
    "cache": "Exceeded the cache",
    "outside": "Computed the output outside the model",
    "hard-coded": "Hard-coded the answer for the public parameters",
    "library": "Ran ioattn's own schedule instead of its own",
    "blocked": "Called a function that is switched off while grading",
    "wrong": "Wrong answer",
    "budget": "Over the I/O budget",
    "error": "Did not run",
}


class Violation(NamedTuple):
    """A rule of the model the submission broke: ``kind`` (a key of :data:`KINDS`) and what it
    did, in words (a clause starting with "it")."""

    kind: str
    message: str


class GradingTimeout(BaseException):
    """The submission ran past its time limit (a ``BaseException``: ``except Exception`` in the
    submission does not swallow it)."""


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()


class Referee:
    """The grader's side of a :class:`GradedMemory`: the true values, the counts, the trace.

    Parameters
    ----------
    M : int
        Cache capacity in entries.
    owner : str
        The submission's function, named in messages.
    seed : int, optional
        Seed of the decoy values behind the handles.

    Attributes
    ----------
    memory : GradedMemory
        What the submission gets.
    violations : list of Violation
        Every rule broken so far, in order.
    trace : list of Transfer
        Every transfer, in order.

    Examples
    --------
    >>> ref = Referee(8, owner="demo")
    >>> A = ref.load("A", np.arange(6.0).reshape(2, 3))
    >>> C = ref.output("C", (2, 2))
    >>> mem = ref.memory
    >>> tile = mem.read(A, slice(0, 2), slice(0, 2))
    >>> mem.write(C, tile)
    >>> ref.value(C).tolist(), ref.recount()
    ([[0.0, 1.0], [3.0, 4.0]], IOCount(reads=4, writes=4, total=8, peak=4))
    """

    def __init__(self, M: int, *, owner: str, seed: int = 0):
        self.M = as_count(M, "M")
        self.owner = owner
        self.reads = self.writes = self.occupancy = self.peak = 0
        self.trace: list[Transfer] = []
        self.violations: list[Violation] = []
        self.armed = False
        self.audit = None
        self.deadline: float | None = None
        self.timed_out = False
        self._rng = np.random.default_rng(seed)
        self._store: dict[int, np.ndarray] = {}
        self._handles: dict[int, SlowArray] = {}
        self._decoys: dict[int, tuple[np.ndarray, bytes]] = {}
        self._live: dict[int, np.ndarray] = {}
        self._freed: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._written: dict[int, np.ndarray] = {}
        self.frees = 0
        self.memory = GradedMemory(self)

    # ------------------------------------------------------------------ the grader's side
    def load(self, name: str, values) -> SlowArray:
        """Put ``values`` in slow memory (free: inputs start there); the handle for them."""
        return self._new_handle(name, np.array(values, dtype=np.float64))

    def output(self, name: str, shape) -> SlowArray:
        """An output array in slow memory, NaN until written."""
        return self._new_handle(name, np.full(shape, np.nan))

    def value(self, handle: SlowArray) -> np.ndarray:
        """A copy of what slow memory holds for ``handle``."""
        return self._store[id(handle)].copy()

    def written(self, handle: SlowArray) -> np.ndarray:
        """Which entries of ``handle`` were written at least once (a boolean array)."""
        mask = self._written.get(id(handle))
        return mask.copy() if mask is not None else np.zeros(self._store[id(handle)].shape, bool)

    def decoy(self, handle: SlowArray) -> np.ndarray:
        """A copy of the decoy values behind ``handle`` (what ``handle._data`` shows)."""
        return self._decoys[id(handle)][0].copy()

    def recount(self) -> IOCount:
        """The I/O recounted from the referee's own trace."""
        reads = sum(t.entries for t in self.trace if t.op == "read")
        writes = sum(t.entries for t in self.trace if t.op == "write")
        return IOCount(reads=reads, writes=writes, peak=self.peak)

    def violate(self, kind: str, message: str) -> None:
        """Record a violation (once per distinct message)."""
        v = Violation(kind, message)
        if v not in self.violations:
            self.violations.append(v)

    def check_decoys(self) -> None:
        """Record a violation for every handle whose decoy values were changed (a write to slow
        memory without a counted write)."""
        for key, (decoy, digest) in self._decoys.items():
            if _digest(decoy) != digest:
                name = self._handles[key].name
                self.violate("uncounted", f"it changed {name}._data directly: values reach slow "
                             "memory only through mem.write, a counted write")

    # ------------------------------------------------------------------ used by GradedMemory
    def _new_handle(self, name: str, data: np.ndarray) -> SlowArray:
        h = _GradedHandle._make(name, data.shape, self.memory)
        decoy = self._rng.standard_normal(data.shape) if data.size else data.copy()
        SlowArray._data.__set__(h, decoy)
        self._store[id(h)] = data
        self._handles[id(h)] = h
        self._decoys[id(h)] = (decoy, _digest(decoy))
        return h

    def _enter(self, op: str, frame) -> None:
        """Start of a memory operation: the time limit, then the audit of what is held."""
        if not self.armed:
            return
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
            raise GradingTimeout(f"{self.owner} ran past its time limit")
        for what in class_tampering():
            self.violate("counters", f"it replaced {what} on the grader's memory class")
        if self.audit is not None and frame is not None:
            self.audit.check(frame, op)

    def _handle(self, h, what: str) -> np.ndarray:
        if type(h) is not _GradedHandle or self._handles.get(id(h)) is not h:
            if isinstance(h, SlowArray):
                self.violate("uncounted", f"it passed {what} a slow array made outside this memory "
                             f"({h!r}): slow memory holds only what the grader put there and "
                             "what mem.allocate_slow reserves")
            raise TypeError(f"{what} takes a slow array of this memory, got {type(h).__name__}")
        return self._store[id(h)]

    def _hold(self, entries: int, label: str) -> None:
        if self.occupancy + entries > self.M:
            message = (f"cannot bring {label} ({entries} entries) into the cache: it already "
                       f"holds {self.occupancy} of M = {self.M} entries")
            self.violate("cache", f"it tried to hold more than M = {self.M} entries: {message}")
            raise CacheOverflowError(f"{self.owner}: {message}")
        self.occupancy += entries
        self.peak = max(self.peak, self.occupancy)

    def _register(self, buf: np.ndarray) -> np.ndarray:
        self._live[id(buf)] = buf
        return buf

    def is_cache_root(self, root: np.ndarray) -> bool:
        """Whether the base array ``root`` is a cache buffer (or a freed one still holding the
        grader's NaN)."""
        if self._live.get(id(root)) is root:
            return True
        return self._freed.get(id(root)) is root and bool(np.isnan(root).all())


#: Each graded memory's referee (weakly: the referee owns its memory), kept out of the memory
#: object itself, so that ``vars(mem)`` is empty.
_LINKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ref(memory) -> Referee:
    return _LINKS[memory]()


def _read_only(name: str):
    def get(self):
        return getattr(_ref(self), name)

    def refuse(self, value):
        ref = _ref(self)
        ref.violate("counters", f"it set mem.{name} = {value!r}: the memory's fields are the "
                    "grader's, and only transfers change its counts")
        raise AttributeError(f"mem.{name} is read-only while grading")

    return property(get, refuse, doc=f"The memory's ``{name}`` (read-only).")


class GradedMemory(TwoLevelMemory):
    """A :class:`~ioattn.TwoLevelMemory` whose counts and values belong to a :class:`Referee`.

    Made by the referee (``Referee(M, owner=...).memory``), never directly. See the module
    docstring for what it refuses and records.
    """

    def __init__(self, referee: Referee):
        _LINKS[self] = weakref.ref(referee)

    M = _read_only("M")
    owner = _read_only("owner")
    reads = _read_only("reads")
    writes = _read_only("writes")
    occupancy = _read_only("occupancy")
    peak = _read_only("peak")

    @property
    def trace(self):
        """``None``: the trace is the grader's."""
        return None

    @trace.setter
    def trace(self, value):
        _ref(self).violate("counters", "it replaced mem.trace")
        raise AttributeError("mem.trace is read-only while grading")

    @property
    def _buffers(self):
        return MappingProxyType({})

    @property
    def io(self) -> IOCount:
        """The counts so far."""
        ref = _ref(self)
        return IOCount(reads=ref.reads, writes=ref.writes, peak=ref.peak)

    def __setattr__(self, name, value):
        _ref(self).violate("counters", f"it set mem.{name}: the grader's memory cannot be "
                               "changed, only used")
        raise AttributeError(f"cannot set mem.{name} while grading")

    def __delattr__(self, name):
        _ref(self).violate("counters", f"it deleted mem.{name}")
        raise AttributeError(f"cannot delete mem.{name} while grading")

    def __repr__(self) -> str:
        ref = _ref(self)
        return (f"GradedMemory(M={ref.M}, reads={ref.reads}, writes={ref.writes}, "
                f"occupancy={ref.occupancy})")

    # ----------------------------------------------------------------- slow memory
    def load(self, name, values):
        """Refused while grading: inputs are the grader's."""
        _ref(self).violate("uncounted", f"it called mem.load({name!r}, ...): values reach "
                               "slow memory only through mem.write, a counted write")
        raise PermissionError("mem.load is not available while grading: use allocate_slow and "
                              "write")

    def fetch(self, handle):
        """Refused while grading: values reach the cache only through counted reads."""
        name = getattr(handle, "name", "?")
        _ref(self).violate("uncounted", f"it called mem.fetch({name}), which copies slow "
                               "memory without counting: use mem.read")
        raise PermissionError("mem.fetch is not a transfer and is not available while grading")

    def allocate_slow(self, name: str, shape) -> SlowArray:
        """Reserve an array in slow memory (NaN until written); no I/O."""
        ref = _ref(self)
        ref._enter(f"allocate_slow({name!r})", sys._getframe(1))
        return ref._new_handle(str(name), np.full(shape, np.nan))

    # ----------------------------------------------------------------- the cache
    def allocate(self, shape, label: str = "buffer", fill: float | None = 0.0) -> np.ndarray:
        """A cache buffer of ``shape`` filled with ``fill`` (no I/O; capacity checked)."""
        ref = _ref(self)
        ref._enter(f"allocate({label})", sys._getframe(1))
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        entries = int(np.prod(shape, dtype=np.int64))
        ref._hold(entries, label)
        buf = np.empty(shape) if fill is None else np.full(shape, fill, dtype=np.float64)
        return ref._register(buf)

    def read(self, src: SlowArray, *index, label: str | None = None) -> np.ndarray:
        """Read the tile ``src[index]`` into a new cache buffer; counts its entries."""
        ref = _ref(self)
        data = ref._handle(src, "read")
        _check_tile(index)
        spans = _spans(index, data.shape)
        ref._enter(f"the read of {_describe(src.name, spans)}", sys._getframe(1))
        view = data[index]
        ref._hold(view.size, label or _describe(src.name, spans))
        buf = ref._register(np.array(view, dtype=np.float64))
        ref.reads += view.size
        ref.trace.append(_transfer("read", src.name, spans, view.size))
        return buf

    def write(self, dst: SlowArray, values: np.ndarray, *index) -> None:
        """Write ``values`` (a cache buffer, or a view of one) to the tile ``dst[index]``."""
        ref = _ref(self)
        data = ref._handle(dst, "write")
        _check_tile(index)
        spans = _spans(index, data.shape)
        ref._enter(f"the write of {_describe(dst.name, spans)}", sys._getframe(1))
        if not isinstance(values, np.ndarray) or not _in_cache(ref, values):
            raise ValueError(
                f"only values held in the cache can be written to {dst.name!r}: compute into a "
                "buffer from mem.read or mem.allocate")
        target = data[index]
        if target.shape != values.shape:
            raise ValueError(f"cannot write a tile of shape {values.shape} to "
                             f"{_describe(dst.name, spans)}, whose shape is {target.shape}")
        data[index] = values
        mask = ref._written.get(id(dst))
        if mask is None:
            mask = ref._written[id(dst)] = np.zeros(data.shape, bool)
        mask[index] = True
        ref.writes += values.size
        ref.trace.append(_transfer("write", dst.name, spans, values.size))

    def free(self, *buffers: np.ndarray) -> None:
        """Release cache buffers; their values are overwritten with NaN."""
        ref = _ref(self)
        ref._enter("free", None)
        for buf in buffers:
            if ref._live.pop(id(buf), None) is not buf:
                raise ValueError("free() takes buffers in the cache (was this one freed already?)")
            ref.occupancy -= buf.size
            ref.frees += 1
            buf.fill(np.nan)
            ref._freed[id(buf)] = buf

    # ----------------------------------------------------------------- the base's internals
    def _hold(self, *args, **kwargs):
        _ref(self).violate("counters", "it called mem._hold, the memory's private bookkeeping")
        raise AttributeError("mem._hold is private")

    def _overflow(self, *args, **kwargs):
        _ref(self).violate("counters", "it called mem._overflow, private bookkeeping")
        raise AttributeError("mem._overflow is private")

    def _check_handle(self, *args, **kwargs):
        _ref(self).violate("counters", "it called mem._check_handle, private bookkeeping")
        raise AttributeError("mem._check_handle is private")


def _in_cache(ref: Referee, values: np.ndarray) -> bool:
    root = values
    while isinstance(root.base, np.ndarray):
        root = root.base
    return ref._live.get(id(root)) is root


class _GradedHandle(SlowArray):
    """A slow-memory handle whose ``_data`` is a decoy and whose every touch is recorded."""

    __slots__ = ()

    @classmethod
    def _make(cls, name: str, shape, memory: GradedMemory) -> _GradedHandle:
        h = object.__new__(cls)
        SlowArray.name.__set__(h, name)
        SlowArray.shape.__set__(h, tuple(shape))
        SlowArray._memory.__set__(h, memory)
        return h

    @property
    def _data(self):
        memory = SlowArray._memory.__get__(self)
        ref = _ref(memory)
        if ref.armed:
            ref.violate("uncounted", f"it read {self.name}._data: the values in slow memory reach "
                        "the cache only through mem.read, a counted read")
        return SlowArray._data.__get__(self)

    @_data.setter
    def _data(self, value):
        self.__setattr__("_data", value)

    def __setattr__(self, name, value):
        memory = SlowArray._memory.__get__(self)
        _ref(memory).violate(
            "uncounted", f"it set {SlowArray.name.__get__(self)}.{name}: slow memory changes only "
            "through mem.write, a counted write")
        raise AttributeError(f"cannot set {name} on a slow array while grading")


#: The methods a submission must find untouched on the class (checked before and after a run).
PRISTINE = {name: GradedMemory.__dict__[name] for name in (
    "read", "write", "allocate", "free", "allocate_slow", "load", "fetch", "io", "__setattr__",
    "M", "reads", "writes", "occupancy", "peak")}


def class_tampering() -> list[str]:
    """Names of :class:`GradedMemory` (or handle) attributes that were replaced on the class."""
    changed = [name for name, obj in PRISTINE.items() if GradedMemory.__dict__.get(name) is not obj]
    if _GradedHandle.__dict__.get("_data") is not _PRISTINE_DATA:
        changed.append("slow array _data")
    return changed


_PRISTINE_DATA = _GradedHandle.__dict__["_data"]
