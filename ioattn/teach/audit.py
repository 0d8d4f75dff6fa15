"""What a submission keeps outside the cache, audited at every transfer.

The memory model allows ``M`` entries in the cache and nothing else: a value kept anywhere but in
a cache buffer between two transfers is cache the algorithm did not pay for. At the start of each
transfer (``read``, ``write``, ``allocate``, ``allocate_slow``) the referee's :class:`Audit` takes
a census of the floating-point values the submission holds outside its cache buffers:

- the local variables of every frame of the submission between the grader's call and the
  transfer (closures included);
- its namespaces: the function's globals, the builtins, the function's attributes and the
  memory's instance dictionary. New names are counted at every transfer; every
  :data:`FULL_EVERY` transfers, and at the end, whatever the namespaces hold is counted again and
  compared with what they held when the call began, global arrays whose values changed count
  whole, and attributes added to any module count too.

The census follows lists, tuples, sets, dicts (keys and values), plain objects, the submission's
own classes, functions' default values and closures, suspended generators, and two-level memories
of the submission's own (their slow arrays and buffers), :data:`DEPTH` levels deep. Arrays count
by their whole base array (a view keeps all of it), floats inside containers one each, bytes one
entry per eight, text longer than :data:`TEXT_FREE` characters one entry per
:data:`TEXT_PER_ENTRY`; integers, booleans, short strings and lone Python numbers are free (loop
indices, names and scale factors), and so are cache buffers, views of them, and freed buffers
while they still hold the grader's NaN. If the cache's occupancy plus the census exceeds ``M``,
the submission exceeded the cache; values still held outside the cache when it returns count
too. A frame that belongs to ioattn's own algorithms means the submission ran the package's
schedule instead of its own.

What it cannot see: values hidden where no census looks (deeper than four levels, packed tighter
than the census assumes, inside C extensions, in objects reached only through the garbage
collector, or in a module attribute that is deleted again between two full censuses). The
grader's other checks back it up: the audit hooks (:mod:`ioattn.teach.hooks`) catch the garbage
collector, the stack and files, and a count below the lower bound that every algorithm obeys is
caught after the run.
"""

from __future__ import annotations

import array
import builtins
import collections
import hashlib
import numbers
import sys
import types
from itertools import islice

import numpy as np

from ..memory import SlowArray, TwoLevelMemory

__all__ = ["Audit", "is_library"]

#: How far the census follows containers and objects.
DEPTH = 4
#: How many items of one container it looks at.
ITEMS = 100_000
#: A full census of the namespaces every this many transfers.
FULL_EVERY = 32

_FREE_TYPES = (int, bool, type(None), range, slice, types.ModuleType,
               types.BuiltinFunctionType, types.MethodType, types.FrameType, types.CodeType)
(_FREE, _NUMBER, _ARRAY, _MAPPING, _SEQUENCE, _OBJECT, _FUNCTION, _CLASS, _BYTES, _GENERATOR,
 _SLOW, _MEMORY, _TEXT) = range(13)
#: Text longer than this counts, one entry per :data:`TEXT_PER_ENTRY` characters (a float
#: written out takes about that many); shorter strings (names, messages) are free.
TEXT_FREE = 64
TEXT_PER_ENTRY = 16
_KIND: dict = {}


def _kind_of(t: type) -> int:
    """How the census treats values of type ``t``."""
    if t.__module__ == "ioattn.teach.memory":          # the grader's memory, handles, referee
        return _FREE
    if issubclass(t, SlowArray):                       # a slow memory of the submission's own
        return _SLOW
    if issubclass(t, TwoLevelMemory):
        return _MEMORY
    if issubclass(t, _FREE_TYPES) or t.__module__ == "ioattn.memory":
        return _FREE
    if issubclass(t, (float, complex, np.floating, np.complexfloating, numbers.Real)):
        return _NUMBER
    if issubclass(t, np.ndarray):
        return _ARRAY
    if issubclass(t, (bytes, bytearray, memoryview, array.array)):
        return _BYTES
    if issubclass(t, str):
        return _TEXT
    if issubclass(t, dict):
        return _MAPPING
    if issubclass(t, (list, tuple, set, frozenset, collections.deque)):
        return _SEQUENCE
    if issubclass(t, types.FunctionType):
        return _FUNCTION
    if issubclass(t, type):
        return _CLASS
    if issubclass(t, (types.GeneratorType, types.CoroutineType)):
        return _GENERATOR
    return _OBJECT


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()


def is_library(module: str) -> bool:
    """Whether ``module`` is part of ioattn's own algorithms (anything but ``ioattn.teach``)."""
    return module == "ioattn" or (module.startswith("ioattn.")
                                  and not module.startswith("ioattn.teach"))


class _Census:
    """Floating-point entries held outside the cache, and where."""

    def __init__(self, referee, own_modules):
        self.referee = referee
        self.own = own_modules                 # classes defined here are the submission's
        self.seen: set[int] = set()
        self.total = 0
        self.holders: collections.Counter = collections.Counter()

    def add(self, value, where: str) -> int:
        n = self.count(value)
        if n:
            self.total += n
            self.holders[where] += n
        return n

    def note(self, n: int, where: str) -> None:
        if n > 0:
            self.total += n
            self.holders[where] += n

    def where(self) -> str:
        parts = [f"`{w}` {n:,}" for w, n in self.holders.most_common(3)]
        more = len(self.holders) - 3
        return ", ".join(parts) + (f" and {more} more" if more > 0 else "")

    def count(self, v, depth: int = 0) -> int:
        kind = _KIND.get(type(v))
        if kind is None:
            kind = _KIND[type(v)] = _kind_of(type(v))
        if kind == _FREE:
            return 0
        if kind == _NUMBER:
            return 1 if depth else 0
        if kind == _ARRAY:
            root = _root(v)
            if id(root) in self.seen:
                return 0
            self.seen.add(id(root))
            if root.dtype.kind not in "fc" or self.referee.is_cache_root(root):
                return 0
            return int(root.size)
        if kind == _BYTES:                              # eight bytes hold a float
            return -(-memoryview(v).nbytes // 8)
        if kind == _TEXT:
            return len(v) // TEXT_PER_ENTRY if len(v) > TEXT_FREE else 0
        if depth >= DEPTH or id(v) in self.seen:
            return 0
        self.seen.add(id(v))
        if kind == _SLOW:
            items = [SlowArray._data.__get__(v)]
        elif kind == _MEMORY:
            items = list(v.__dict__.get("_buffers", {}).values())
        elif kind == _GENERATOR:
            frame = getattr(v, "gi_frame", None) or getattr(v, "cr_frame", None)
            items = list(frame.f_locals.values()) if frame is not None else []
        elif kind == _MAPPING:
            items = [*v.keys(), *v.values()]
        elif kind == _SEQUENCE:
            items = v
        elif kind == _FUNCTION:
            cells = [c.cell_contents for c in v.__closure__ or () if _filled(c)]
            items = [*(v.__defaults__ or ()), *(v.__kwdefaults__ or {}).values(), *cells]
        elif kind == _CLASS:
            if v.__module__ not in self.own:
                return 0
            items = list(vars(v).values())
        else:
            d = getattr(v, "__dict__", None)
            if not isinstance(d, dict):
                return 0
            items = d.values()
        return sum(self.count(x, depth + 1) for x in islice(items, ITEMS))


def _filled(cell) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:                        # a closure variable not assigned yet
        return False
    return True


class Audit:
    """The census of one submission call; see the module docstring.

    Parameters
    ----------
    referee : Referee
        Its memory is the one audited; violations are recorded there.
    fn : callable
        The submission's function (its globals and attributes are watched).
    boundary : code
        The code object of the grader's frame that calls ``fn``: frames above it are the
        grader's and are not audited.
    """

    def __init__(self, referee, fn, boundary):
        self.referee = referee
        self.boundary = boundary
        self.name = getattr(fn, "__name__", "the submission")
        self.own = {getattr(fn, "__module__", None) or "__main__", "__main__"}
        self.done = False
        self.calls = 0
        self.watched = {"global": getattr(fn, "__globals__", {}), "builtin": builtins.__dict__,
                        f"attribute of {self.name}": getattr(fn, "__dict__", {}),
                        "attribute of mem": object.__getattribute__(referee.memory, "__dict__")}
        self.sizes = {label: len(d) for label, d in self.watched.items()}
        self.held = self._namespaces()
        g = self.watched["global"]
        self.digests = {k: (id(v), _digest(v)) for k, v in g.items()
                        if isinstance(v, np.ndarray) and v.dtype.kind in "fc"}
        self.modules = self._module_keys()

    # ------------------------------------------------------------------ during the call
    def check(self, frame, op: str) -> None:
        """Census at the start of transfer ``op`` (called from the memory with its caller)."""
        if self.done:
            return
        ref = self.referee
        census = _Census(ref, self.own)
        f = frame
        while f is not None and f.f_code is not self.boundary:
            module = f.f_globals.get("__name__", "")
            if is_library(module):
                ref.violate("library", f"it ran {module}.{f.f_code.co_name} on the grader's "
                            "memory: the assignment is to write the schedule, not to call "
                            "ioattn's")
            elif not module.startswith("ioattn.teach"):
                for name, value in f.f_locals.items():
                    census.add(value, f"{f.f_code.co_name}: {name}")
            f = f.f_back
        if f is None:               # not under the grader's call (another thread): not audited
            return
        self.calls += 1
        if self.calls % FULL_EVERY == 0:
            self._full(census)
        else:
            self._new_names(census)
        self._judge(census, f"at {op}", ref.occupancy)

    def finish(self) -> None:
        """After the call: values still kept outside the cache."""
        if self.done:
            return
        census = _Census(self.referee, self.own)
        self._full(census)
        if census.total:
            self.done = True
            self.referee.violate(
                "cache", f"it still held {census.total:,} entries outside the cache when it "
                f"returned ({census.where()}): values kept anywhere but in cache buffers are "
                "cache it did not pay for")

    # ------------------------------------------------------------------ internals
    def _judge(self, census: _Census, when: str, occupancy: int) -> None:
        M = self.referee.M
        if occupancy + census.total > M:
            self.done = True
            self.referee.violate(
                "cache", f"{when} it held {census.total:,} entries outside the cache "
                f"({census.where()}) besides the {occupancy:,} in it: more than M = {M:,}. "
                "Everything kept between transfers must be in cache buffers (mem.read, "
                "mem.allocate)")

    def _namespaces(self) -> dict:
        """(label, name) -> entries each namespace entry holds outside the cache."""
        out = {}
        census = _Census(self.referee, self.own)
        for label, d in self.watched.items():
            for key, value in list(d.items()):
                if key == "__builtins__":           # the builtins, watched on their own
                    continue
                n = census.count(value)
                if n:
                    out[label, key] = n
        return out

    def _new_names(self, census: _Census) -> None:
        for label, d in self.watched.items():
            if len(d) != self.sizes[label]:
                self._full(census)
                return

    def _full(self, census: _Census) -> None:
        for (label, key), n in self._namespaces().items():
            census.note(n - self.held.get((label, key), 0), f"{label} {key}")
        g = self.watched["global"]
        for key, (ident, digest) in self.digests.items():
            value = g.get(key)
            if id(value) == ident and _digest(value) != digest:
                census.note(value.size, f"global {key} (changed)")
        for name, module in list(sys.modules.items()):
            keys = self.modules.get(name)
            if keys is not None and isinstance(module, types.ModuleType) \
                    and len(vars(module)) != len(keys):
                for key in set(vars(module)) - keys:
                    census.add(vars(module).get(key), f"{name}.{key}")

    @staticmethod
    def _module_keys() -> dict:
        return {name: frozenset(vars(m)) for name, m in list(sys.modules.items())
                if isinstance(m, types.ModuleType)}
