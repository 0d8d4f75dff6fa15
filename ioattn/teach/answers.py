"""A submission's answers, as the checks see them: values and calls, never the notebook itself.

An assignment's check asks for answers through an :class:`Answers` object:

- :meth:`Answers.value` — a name the notebook defines, as plain data (numbers, strings, lists,
  dicts with string keys, sets; nothing else crosses);
- :meth:`Answers.run` — a tile program (:mod:`ioattn.tiles`) called on a fresh machine holding
  the check's inputs, returning a :class:`Run` with the machine, so the check reads the outputs
  and the counts from the machine itself;
- :meth:`Answers.call` — a plain function called with plain arguments, its result as plain data.

:class:`LocalAnswers` serves a student's own checks in their notebook (the example data is
theirs anyway), on graded machines like the grader's (:mod:`ioattn.tiles.machine`: every value
stored, in slow memory or in a tile, keeps 24 significant bits). When grading,
:class:`ioattn.teach.referee.Submission` serves the same requests from the notebook's process,
while the data, the machines and the verdicts stay in the grader's.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np

from ..tiles import Machine, Memory, Slow

__all__ = ["Answers", "LocalAnswers", "Run", "decode", "encode", "Unsendable"]

#: The most items (numbers, strings, containers) one answer may have, and how deep it may nest.
MAX_ITEMS, MAX_DEPTH = 200_000, 32
#: The largest magnitude an integer in an answer may have: float64's largest (an integer
#: beyond it could not be compared with a float).
MAX_INT = int(np.finfo(np.float64).max)


class Unsendable(TypeError):
    """A value that is not plain data (numbers, strings, lists, dicts with string keys, sets)."""


@dataclass
class Run:
    """One call of a tile program: the machine it ran on, and how it ended.

    Attributes
    ----------
    name : str
        The function's name.
    machine : Machine
        The machine holding the inputs, the outputs and the counts.
    returned : object
        What it returned, as plain data (``None`` if it raised or returned something else).
    error : str or None
        What it raised (``"ValueError: ... (line 3 in f)"``), or why it did not finish.
    seconds : float
        Wall-clock time of the call.
    """

    name: str
    machine: Machine
    returned: object = None
    error: str | None = None
    seconds: float = 0.0


class Answers:
    """Where a check gets a submission's answers (see the module docstring)."""

    #: Whether the answers come from a graded run (hidden data) or a student's own check.
    graded: bool = False

    def value(self, name: str):
        """The notebook's ``name`` as plain data; ``None`` if it does not define it.

        Raises
        ------
        Unsendable
            If the value is not plain data.
        """
        raise NotImplementedError

    def run(self, name: str, M: int, inputs: dict, outputs: dict, *, args=(),
            time_limit: float = 60.0) -> Run:
        """Call the notebook's tile program ``name(mem, *inputs, *outputs, *args)`` on a fresh
        machine with a cache of ``M`` entries; ``inputs``: name -> array, ``outputs``: name ->
        shape (NaN until written); ``args``: plain data."""
        raise NotImplementedError

    def call(self, name: str, args=(), *, time_limit: float = 60.0):
        """Call the notebook's function ``name(*args)``: ``(result as plain data, error)``."""
        raise NotImplementedError


class LocalAnswers(Answers):
    """Answers from a dict of the notebook's names, in this process (a student's own checks)."""

    graded = False

    def __init__(self, names: dict):
        self.names = dict(names)

    def value(self, name):
        if self.names.get(name) is None:
            return None
        return decode(encode(self.names[name]))

    def run(self, name, M, inputs, outputs, *, args=(), time_limit=60.0):
        machine = Machine(M, owner=name, graded=True)          # as when graded
        fn = self.names.get(name)
        run = Run(name, machine)
        if not callable(fn):
            run.error = _undefined(name, fn)
            return run
        mem, handles = connect(machine, inputs, outputs)
        start = time.perf_counter()
        try:
            run.returned = _plain(fn(mem, *handles, *args))
        except Exception as exc:                # noqa: BLE001 (reported to the student)
            run.error = describe(exc)
        run.seconds = time.perf_counter() - start
        return run

    def call(self, name, args=(), *, time_limit=60.0):
        fn = self.names.get(name)
        if not callable(fn):
            return None, _undefined(name, fn)
        try:
            return decode(encode(fn(*args))), None
        except Unsendable as exc:
            return None, f"{name} returned {exc}"
        except Exception as exc:                # noqa: BLE001
            return None, describe(exc)


def connect(machine: Machine, inputs: dict, outputs: dict, channel=None):
    """Load ``inputs`` into ``machine``, make ``outputs``, and return a :class:`Memory` talking
    to it (through ``channel``, or directly) with the handles, inputs first."""
    for k, v in inputs.items():
        machine.load(k, np.asarray(v, dtype=np.float64))
    for k, shape in outputs.items():
        machine.output(k, shape)
    mem = Memory(channel=channel or machine.request, capacity=machine.M)
    handles = [Slow(k, machine.slow[k].shape, mem) for k in (*inputs, *outputs)]
    return mem, handles


def describe(exc: BaseException) -> str:
    """``"ValueError: message (line 12 in f)"``: the exception and the last line of the
    notebook's code (not ioattn's) it came through."""
    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    where = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if "/ioattn/" not in frame.filename.replace("\\", "/"):
            where = f"line {frame.lineno} in {frame.name}"
    return f"{text} ({where})" if where else text


def _undefined(name, fn) -> str:
    if fn is None:
        return f"{name} is not defined: run the cell that defines it, and keep its name"
    return f"{name} should be a function, got {type(fn).__name__}"


def _plain(x):
    try:
        return decode(encode(x))
    except Unsendable:
        return None


# ---------------------------------------------------------------------- plain data
def encode(x, _depth: int = 0, _count=None):
    """``x`` as JSON-ready data: ``None``, bools, ints, floats and strings as they are; lists
    and tuples as lists; dicts with string keys as ``{"dict": {...}}``; sets as
    ``{"set": [...]}``; NumPy scalars and arrays as numbers and lists. Anything else raises
    :class:`Unsendable`, and so do subclasses of the plain types (an ``int`` whose comparisons
    lie stays behind)."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_ITEMS or _depth > MAX_DEPTH:
        raise Unsendable(f"a value with more than {MAX_ITEMS:,} items or {MAX_DEPTH} levels")
    t = type(x)
    if x is None or t in (bool, str):
        return x
    if t is int:
        return x
    if t is float:
        return {"float": repr(x)} if x != x or x in (float("inf"), float("-inf")) else x
    if isinstance(x, np.generic) and type(x).__module__ == "numpy":
        if isinstance(x, np.bool_):
            return bool(x)
        if isinstance(x, np.integer):
            return int(x)
        if isinstance(x, np.floating):
            return encode(float(x), _depth, count)
    if t is np.ndarray and x.dtype.kind in "biuf":
        return encode(x.tolist(), _depth, count)
    if t in (list, tuple):
        return [encode(v, _depth + 1, count) for v in x]
    if t in (set, frozenset):
        return {"set": [encode(v, _depth + 1, count) for v in x]}
    if t is dict:
        if not all(type(k) is str for k in x):
            raise Unsendable("a dict whose keys are not all strings")
        return {"dict": {k: encode(v, _depth + 1, count) for k, v in x.items()}}
    raise Unsendable(f"a {t.__module__}.{t.__qualname__}, which is not plain data")


def _hashable(x):
    """Lists as tuples, all the way down (the members of a set)."""
    return tuple(_hashable(v) for v in x) if isinstance(x, list) else x


def decode(x):
    """The inverse of :func:`encode`: lists stay lists, sets come back as frozensets. Numbers
    are checked: an integer beyond float64's range (:data:`MAX_INT`) is :class:`Unsendable`;
    a float may be NaN or infinite (the check that gets it decides what that means)."""
    if isinstance(x, list):
        return [decode(v) for v in x]
    if isinstance(x, dict):
        if set(x) == {"set"} and isinstance(x["set"], list):
            items = [_hashable(decode(v)) for v in x["set"]]
            try:
                return frozenset(items)
            except TypeError:
                raise Unsendable("a set of unhashable items") from None
        if set(x) == {"dict"} and isinstance(x["dict"], dict):
            return {k: decode(v) for k, v in x["dict"].items()}
        if set(x) == {"float"} and x["float"] in ("nan", "inf", "-inf"):
            return float(x["float"])
        raise Unsendable("malformed plain data")
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > MAX_INT:
        raise Unsendable(f"an integer of {x.bit_length():,} bits, beyond float64's range "
                         "(about 1.8e308)")
    if x is None or isinstance(x, (bool, str)) or (isinstance(x, Integral | Real)):
        return x
    raise Unsendable("malformed plain data")
