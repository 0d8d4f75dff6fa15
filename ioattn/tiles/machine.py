"""The machine that holds the values: slow arrays, cache tiles, and the requests that move them.

A tile program talks to a :class:`Machine` only through requests, lists of strings and numbers
(JSON-ready), and gets back plain data. The machine checks every request before it changes
anything and counts every entry moved with :class:`ioattn.memory.TwoLevelMemory`, so the counts,
the cache limit and the values are the memory model's own.

Requests
--------
``["read", name, spans]``
    A new tile holding ``name[spans]`` (``spans``: ``[[start, stop], ...]`` per axis); returns
    ``[id, shape]``. Counts the tile's entries as reads.
``["alloc", shape, fill]``
    A new tile of ``shape`` (one or two sizes), every entry ``fill``; returns ``[id, shape]``.
``["free", ids]``
    Gives the tiles back.
``["set", target, expr]``
    Computes ``expr`` into ``target`` (a tile, ``["tile", id]``, or a part of one,
    ``["part", id, spans]``), broadcasting as NumPy does. One fused loop: the target may appear
    in ``expr`` only entry by entry (not under ``@``, a transpose, a new axis or a reduction),
    and no other part of its tile may.
``["scratch", name, shape]``
    A new array in slow memory, NaN until written (room for what a program keeps between
    passes; free, as slow memory is unbounded, up to :data:`MAX_SCRATCH` entries in all).
``["write", name, spans, source]``
    Writes a tile or a part of one to ``name[spans]``; counts its entries as writes.
``["io"]``
    ``{"reads", "writes", "total", "peak", "occupancy"}``.
``["values", source]``
    The values of a tile or a part of one, only on a machine made with ``inspect=True`` (a
    program's own, never a grader's).

Expressions
-----------
``["tile", id]``, ``["part", id, spans]``, ``["num", x]``, ``["rows", start, count]`` (the column
of row numbers), ``["cols", start, count]`` (the row of column numbers), ``[op, a]`` for ``op`` in
``neg exp log sqrt abs``, ``[op, a, b]`` for ``op`` in ``add sub mul div maximum minimum lt le gt
ge``, ``["matmul", a, b]``, ``["T", a]``, ``["axes", a, "col" | "row"]``, ``[op, a, axis]`` for
``op`` in ``sum max min``, ``["where", c, a, b]``. A number is a real number within float64's
range, or ``±inf`` or ``nan`` (``-inf`` masks a score out).

Costs
-----
Every expression is costed before any of it is evaluated: each operation costs the entries it
makes (a reduction, the entries it reads), a product ``a @ b`` its output's entries times its
inner size. An assignment may cost at most :func:`max_cost` of ``M`` (:data:`COST_FACTOR`
``M (⌊√M⌋ + 1)``: a product of two tiles that fit in the cache costs at most ``M^{3/2}``), and
no value along the way may have more than :func:`max_intermediate` entries
(:data:`INTERMEDIATE_FACTOR` ``M``), so no request makes the machine do much more than an honest
program's largest one, however it is built.

Graded machines
---------------
A machine made with ``graded=True`` (the grader's, and a student's own checks') differs in two
ways, so that what a program can learn or store stays what its counted work earns:

- *Its time does not depend on the values.* NumPy is many times slower on lanes whose result
  or operand is subnormal (``exp`` of a large negative number, ``1e-200 * 1e-120``), so a
  program timing its requests could read hidden values. On a graded machine every value lies
  in :data:`STEADY` (0, ±inf, NaN, or a magnitude in [2⁻³⁰⁰, 2³⁰⁰]: after each operation
  smaller magnitudes become 0 and larger ones ±inf), and ``exp`` is evaluated on its argument
  clamped to [:data:`EXP_LOW`, :data:`EXP_HIGH`], where NumPy's ``exp`` takes its fast path,
  the lanes outside chosen by :func:`numpy.where` (:func:`steady_exp`). No sum, difference,
  product, quotient, square root, logarithm or matrix product of such values is subnormal, so
  no operation takes a slow path. Honest programs never come near these limits.
- *Every value stored keeps* :data:`WRITE_BITS` *significant bits* (float32's precision;
  :func:`round_bits`): what is written to slow memory, what an assignment leaves in a cache
  tile and a tile's fill. A program then cannot store two numbers in one entry, neither to
  read both back for one counted read nor to hold more than ``M`` numbers in its cache: an
  entry carries at most 24 bits of significand and 12 of sign and exponent, too few for two
  numbers each within the grader's tolerance, while an honest program's results stay well
  within it (at most 3.6e-7 relative error measured on the graded assignments, against a
  tolerance of 1e-6). Only the intermediate values of one expression, which no request can
  keep, have float64's full precision.
"""

from __future__ import annotations

from math import isqrt
from numbers import Integral, Real

import numpy as np

from ..memory import CacheOverflowError, SlowArray, TwoLevelMemory
from .expr import BINARY, REDUCE, UNARY

__all__ = ["COST_FACTOR", "INTERMEDIATE_FACTOR", "Machine", "TileError", "CacheOverflowError",
           "STEADY", "WRITE_BITS", "max_cost", "max_intermediate", "round_bits", "steady",
           "steady_exp"]

#: The most nodes, and the deepest nesting, one expression may have.
MAX_NODES, MAX_DEPTH = 512, 64
#: The most entries a program's scratch arrays may have in all, beyond its inputs' and outputs'.
MAX_SCRATCH = 1 << 22
#: The most entries an intermediate value may have, as a multiple of ``M`` (keeps a machine's
#: own memory bounded whatever a program asks), and at least :data:`MIN_INTERMEDIATE`.
INTERMEDIATE_FACTOR, MIN_INTERMEDIATE = 4, 4096
#: The most arithmetic one assignment may cost, as a multiple of ``M (⌊√M⌋ + 1)``.
COST_FACTOR = 16
#: Significant bits a grader's machine keeps of every value written to slow memory.
WRITE_BITS = 24
#: The magnitudes a graded machine's finite nonzero values have.
STEADY = (2.0 ** -300, 2.0 ** 300)
#: Where a graded machine evaluates ``exp`` (outside: 0 below, ``inf`` above; inside, its
#: results lie in :data:`STEADY`).
EXP_LOW, EXP_HIGH = -207.0, 207.0
_FLOAT_MAX = float(np.finfo(np.float64).max)

_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
           "maximum": np.maximum, "minimum": np.minimum, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
_exp = np.exp


def steady_exp(x):
    """``e ** x`` in a time that does not depend on ``x``: :func:`numpy.exp` only of ``x``
    clamped to [:data:`EXP_LOW`, :data:`EXP_HIGH`] (its fast path), then 0 below and ``inf``
    above chosen by :func:`numpy.where` (NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    y = _exp(np.clip(x, EXP_LOW, EXP_HIGH))
    return np.where(x < EXP_LOW, 0.0, np.where(x > EXP_HIGH, np.inf, y))


def steady(value):
    """``value`` with every finite magnitude outside :data:`STEADY` made 0 (below) or ±inf
    (above); an array is changed in place."""
    low, high = STEADY
    if isinstance(value, np.ndarray):
        if value.dtype == np.float64:               # whole-array arithmetic, no branches
            size = np.abs(value)
            np.multiply(value, size >= low, out=value)          # NaN * 0 stays NaN
            np.multiply(value, np.where(size > high, np.inf, 1.0), out=value)
        return value
    if isinstance(value, np.floating):
        size = abs(float(value))
        if size < low:
            return np.float64(0.0)
        if size > high:
            return np.float64(np.copysign(np.inf, value))
    return value


_UNARY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs}
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}
assert set(_BINARY) == set(BINARY) and set(_UNARY) == set(UNARY) and set(_REDUCE) == set(REDUCE)


class TileError(ValueError):
    """A request the machine refuses: what is wrong, in words. The machine is unchanged."""


def max_cost(M: int) -> int:
    """The most arithmetic (see the module docstring) one assignment may cost on a machine with
    a cache of ``M`` entries: :data:`COST_FACTOR` ``M (⌊√M⌋ + 1)``."""
    return COST_FACTOR * M * (isqrt(M) + 1)


def max_intermediate(M: int) -> int:
    """The most entries a value computed along the way may have: :data:`INTERMEDIATE_FACTOR`
    ``M``, at least :data:`MIN_INTERMEDIATE`."""
    return max(INTERMEDIATE_FACTOR * M, MIN_INTERMEDIATE)


def round_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """``values`` (float64) rounded to ``bits`` significant bits, to nearest (ties away from
    zero); infinities and NaN unchanged.

    >>> round_bits(np.array([1 + 2.0 ** -30, 3.0]), 24).tolist()
    [1.0, 3.0]
    """
    values = np.asarray(values, dtype=np.float64)
    drop = 52 - (int(bits) - 1)
    if drop <= 0:
        return values.copy()
    raw = values.view(np.uint64)
    half, mask = np.uint64(1 << (drop - 1)), ~np.uint64((1 << drop) - 1)
    rounded = ((raw + half) & mask).view(np.float64)
    return np.where(np.isfinite(values), rounded, values)


class Machine:
    """Slow arrays and cache tiles behind requests, counted by the memory model.

    Parameters
    ----------
    M : int
        Cache capacity in entries.
    inspect : bool
        Whether ``["values", ...]`` requests are answered (a program's own machine: yes; a
        grader's: no).
    owner : str, optional
        Quoted in cache-overflow messages.
    graded : bool
        Whether the machine grades (see the module docstring): its time independent of the
        values, every value stored (in slow memory or in a cache tile) rounded to
        :data:`WRITE_BITS` bits.

    Examples
    --------
    >>> import numpy as np
    >>> m = Machine(8)
    >>> _ = m.load("A", np.ones((2, 3)))
    >>> m.request(["read", "A", [[0, 2], [0, 2]]])
    [0, [2, 2]]
    >>> m.request(["set", ["tile", 0], ["mul", ["tile", 0], ["num", 3.0]]])
    >>> m.request(["io"])["reads"]
    4
    """

    def __init__(self, M: int, *, inspect: bool = False, owner: str | None = None,
                 graded: bool = False):
        self.memory = TwoLevelMemory(M, owner=owner)
        self.inspect = bool(inspect)
        self.graded = bool(graded)
        self._steady = steady if self.graded else _same
        self._unary = {**_UNARY, "exp": steady_exp} if self.graded else _UNARY
        self._most, self._budget = max_intermediate(self.M), max_cost(self.M)
        self.slow: dict[str, SlowArray] = {}
        self.tiles: dict[int, np.ndarray] = {}
        self.requests = 0
        self._next = 0
        self._scratch: list[SlowArray] = []

    @property
    def M(self) -> int:
        return self.memory.M

    # ------------------------------------------------------------------ the owner's side
    def load(self, name: str, values) -> SlowArray:
        """Put an input in slow memory (the owner's call, not a request)."""
        handle = self.memory.load(name, values)
        self.slow[name] = handle
        return handle

    def output(self, name: str, shape) -> SlowArray:
        """An output array in slow memory, NaN until written (the owner's call)."""
        handle = self.memory.allocate_slow(name, shape)
        self.slow[name] = handle
        return handle

    def fetch(self, name: str) -> np.ndarray:
        """A copy of a slow array (the owner's call, not counted)."""
        return self.memory.fetch(self.slow[name])

    # ------------------------------------------------------------------ requests
    def request(self, req):
        """Carry out one request (see the module docstring); returns plain data.

        Raises
        ------
        TileError
            For a malformed request, an unknown tile or array, a bad shape or index.
        CacheOverflowError
            If the cache would hold more than ``M`` entries.
        """
        if not isinstance(req, list) or not req or not isinstance(req[0], str):
            raise TileError(f"a request is a list starting with its name, got {_short(req)}")
        op = req[0]
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise TileError(f"unknown request {op!r}")
        self.requests += 1
        try:
            return handler(*req[1:])
        except CacheOverflowError:
            raise
        except (TypeError, ValueError, IndexError) as exc:   # the memory model's own checks
            if isinstance(exc, TileError):
                raise
            raise TileError(str(exc)) from None
        except (ArithmeticError, MemoryError) as exc:        # e.g. a size too large for C
            raise TileError(f"{op}: {type(exc).__name__}: {_short(str(exc))}") from None

    def _op_read(self, name=None, spans=None, *extra):
        _no_extra(extra, "read")
        src = self._slow(name)
        index = _slices(spans, src.shape, f"read from {name!r}")
        buf = self.memory.read(src, *index, label=_label(name, spans))
        return self._new(buf)

    def _op_alloc(self, shape=None, fill=0.0, *extra):
        _no_extra(extra, "alloc")
        if (not isinstance(shape, list) or not 1 <= len(shape) <= 2
                or not all(_is_count(s) for s in shape)):
            raise TileError(f"a tile's shape is one or two non-negative sizes, got {_short(shape)}")
        fill = float(self._keep(self._steady(np.float64(_number(fill, "a tile's fill is")))))
        buf = self.memory.allocate(tuple(int(s) for s in shape), label="a tile", fill=fill)
        return self._new(buf)

    def _op_free(self, ids=None, *extra):
        _no_extra(extra, "free")
        if not isinstance(ids, list) or not all(_is_count(i) for i in ids):
            raise TileError(f"free takes a list of tile numbers, got {_short(ids)}")
        if len(set(ids)) != len(ids):
            raise TileError("free got the same tile twice")
        bufs = [self._tile(i) for i in ids]
        self.memory.free(*bufs)
        for i in ids:
            del self.tiles[i]

    def _op_set(self, target=None, expr=None, *extra):
        _no_extra(extra, "set")
        tid, view = self._source(target, "the target of an assignment")
        _count_nodes(expr)
        self._plan(expr, [0])                    # shapes and cost, before any arithmetic
        value = self._eval(expr, (tid, self._spans_of(target)), top=True)
        try:
            np.broadcast_to(value, view.shape)
        except ValueError:
            raise TileError(f"cannot assign a value of shape {np.shape(value)} to a tile (part) "
                            f"of shape {view.shape}") from None
        self._check_fits()
        view[...] = value
        if self.graded:
            view[...] = round_bits(view, WRITE_BITS)

    def _op_scratch(self, name=None, shape=None, *extra):
        _no_extra(extra, "scratch")
        if not isinstance(name, str) or not name.isidentifier():
            raise TileError(f"a scratch array's name is an identifier, got {_short(name)}")
        if name in self.slow:
            raise TileError(f"slow memory already has an array {name!r}")
        if (not isinstance(shape, list) or not 1 <= len(shape) <= 2
                or not all(_is_count(s) for s in shape)):
            raise TileError(f"an array's shape is one or two non-negative sizes, got "
                            f"{_short(shape)}")
        entries = int(np.prod(shape)) + sum(int(np.prod(a.shape)) for a in self._scratch)
        if entries > MAX_SCRATCH:
            raise TileError(f"scratch arrays may hold {MAX_SCRATCH:,} entries in all")
        self.output(name, tuple(int(s) for s in shape))
        self._scratch.append(self.slow[name])
        return list(shape)

    def _op_write(self, name=None, spans=None, source=None, *extra):
        _no_extra(extra, "write")
        dst = self._slow(name)
        index = _slices(spans, dst.shape, f"write to {name!r}")
        _, view = self._source(source, "what is written")
        self.memory.write(dst, view, *index)
        if self.graded:
            dst._data[index] = round_bits(dst._data[index], WRITE_BITS)

    def _keep(self, value):
        """``value`` as a graded machine stores it (:data:`WRITE_BITS` bits), else as it is."""
        return round_bits(value, WRITE_BITS) if self.graded else value

    def _op_io(self, *extra):
        _no_extra(extra, "io")
        io = self.memory.io
        return {"reads": io.reads, "writes": io.writes, "total": io.total, "peak": io.peak,
                "occupancy": self.memory.occupancy}

    def _op_values(self, source=None, *extra):
        _no_extra(extra, "values")
        if not self.inspect:
            raise TileError("this memory does not show tile values (the grader's never does)")
        _, view = self._source(source, "a tile to show")
        return view.tolist()

    # ------------------------------------------------------------------ internals
    def _new(self, buf: np.ndarray) -> list:
        tid = self._next
        self._next += 1
        self.tiles[tid] = buf
        return [tid, list(buf.shape)]

    def _slow(self, name) -> SlowArray:
        if not isinstance(name, str) or name not in self.slow:
            known = ", ".join(self.slow) or "none"
            raise TileError(f"no array {_short(name)} in slow memory (the arrays: {known})")
        return self.slow[name]

    def _tile(self, tid) -> np.ndarray:
        if not _is_count(tid) or tid not in self.tiles:
            raise TileError(f"no tile {_short(tid)} in the cache (freed already?)")
        return self.tiles[tid]

    def _source(self, node, what: str):
        """``(tile id, view)`` of a ``["tile", id]`` or ``["part", id, spans]`` node."""
        if isinstance(node, list) and len(node) == 2 and node[0] == "tile":
            return node[1], self._tile(node[1])
        if isinstance(node, list) and len(node) == 3 and node[0] == "part":
            buf = self._tile(node[1])
            return node[1], buf[_slices(node[2], buf.shape, "a part of a tile")]
        raise TileError(f"{what} must be a tile or a part of one, got {_short(node)}")

    def _check_fits(self) -> None:
        held = self.memory.occupancy
        if held > self.M:                            # a buffer cannot grow here; belt and braces
            raise CacheOverflowError(f"the cache holds {held} entries, more than M = {self.M}")

    def _spans_of(self, node) -> list:
        """The spans a ``tile`` or ``part`` node covers (a whole tile: all of it)."""
        if node[0] == "tile":
            return [[0, s] for s in self.tiles[node[1]].shape]
        return [list(span) for span in node[2]]

    def _eval(self, node, target, top=False):
        """The value of ``node``; ``target`` (tile id, spans) may appear only entry by entry,
        as itself (``top``: not under a matmul, transpose, new axis or reduction)."""
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            raise TileError(f"malformed expression {_short(node)}")
        op, args = node[0], node[1:]
        with np.errstate(all="ignore"):
            if op in ("tile", "part"):
                tid, view = self._source(node, "an operand")
                if tid == target[0] and not (top and self._spans_of(node) == target[1]):
                    raise TileError(
                        "the tile being assigned may appear on the right only entry by entry, "
                        "as a whole (not under @, .T, [:, None] or a reduction, and not as "
                        "another part of itself): one assignment is one fused loop with no "
                        "storage besides its tiles")
                return view
            if op == "num":
                if len(args) != 1:
                    raise TileError(f"malformed number {_short(node)}")
                return self._steady(np.float64(_number(args[0], f"malformed number "
                                                                f"{_short(node)}:")))
            if op in ("rows", "cols"):
                if len(args) != 2 or not all(_is_count(a) for a in args):
                    raise TileError(f"malformed index {_short(node)}")
                start, count = args
                self._room(count)
                idx = np.arange(start, start + count, dtype=np.float64)
                return idx[:, None] if op == "rows" else idx[None, :]
            if op in _UNARY and len(args) == 1:
                return self._checked(self._unary[op](self._eval(args[0], target, top)))
            if op in _BINARY and len(args) == 2:
                a, b = (self._eval(x, target, top) for x in args)
                return self._checked(_broadcast(_BINARY[op], a, b, limit=self._limit()))
            if op == "where" and len(args) == 3:
                c, a, b = (self._eval(x, target, top) for x in args)
                return self._checked(_broadcast(np.where, c, a, b, limit=self._limit()))
            if op == "matmul" and len(args) == 2:
                a, b = (self._eval(x, target) for x in args)
                if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[0]:
                    raise TileError(f"cannot multiply shapes {a.shape} @ {b.shape}")
                rows = a.shape[0] if a.ndim == 2 else 1
                cols = b.shape[1] if b.ndim == 2 else 1
                self._room(rows * cols)
                return self._steady(a @ b)
            if op == "T" and len(args) == 1:
                return self._eval(args[0], target).T
            if op == "axes" and len(args) == 2 and args[1] in ("col", "row"):
                a = self._eval(args[0], target)
                if a.ndim != 1:
                    raise TileError(f"[:, None] and [None, :] take a vector, got shape {a.shape}")
                return a[:, None] if args[1] == "col" else a[None, :]
            if op in _REDUCE and len(args) == 2 and args[1] in (0, 1, -1) \
                    and not isinstance(args[1], bool):
                a = self._eval(args[0], target)
                if a.ndim == 0 or args[1] >= a.ndim or a.shape[args[1]] == 0 and op != "sum":
                    raise TileError(f"cannot take the {op} along axis {args[1]} of shape "
                                    f"{a.shape}")
                return self._steady(_REDUCE[op](a, axis=args[1]))
        raise TileError(f"malformed expression {_short(node)}")

    def _plan(self, node, cost: list) -> tuple:
        """The shape of ``node``'s value, found without computing it; adds what computing it
        costs (see the module docstring) to ``cost[0]``. Raises :class:`TileError` for what
        :meth:`_eval` would refuse on shapes, and for an intermediate that is too large."""
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            raise TileError(f"malformed expression {_short(node)}")
        op, args = node[0], node[1:]
        if op in ("tile", "part"):
            return self._source(node, "an operand")[1].shape
        if op == "num":
            return ()
        if op in ("rows", "cols"):
            if len(args) != 2 or not all(_is_count(a) for a in args):
                raise TileError(f"malformed index {_short(node)}")
            if args[0] + args[1] > 2 ** 53:
                raise TileError(f"an index beyond 2**53 (not exact as a float64) in "
                                f"{_short(node)}")
            self._room(args[1])
            cost[0] += args[1]
            return (args[1], 1) if op == "rows" else (1, args[1])
        if (op in _UNARY and len(args) == 1 or op in _BINARY and len(args) == 2
                or op == "where" and len(args) == 3):
            shapes = [self._plan(x, cost) for x in args]
            shape = _broadcast_shape(shapes, self._limit())
            return self._costed(shape, _size(shape), cost)
        if op == "matmul" and len(args) == 2:
            a, b = (self._plan(x, cost) for x in args)
            if not a or not b or a[-1] != b[0]:
                raise TileError(f"cannot multiply shapes {a} @ {b}")
            shape = a[:-1] + b[1:]
            return self._costed(shape, _size(shape) * a[-1], cost)
        if op == "T" and len(args) == 1:
            return self._plan(args[0], cost)[::-1]
        if op == "axes" and len(args) == 2 and args[1] in ("col", "row"):
            a = self._plan(args[0], cost)
            if len(a) != 1:
                raise TileError(f"[:, None] and [None, :] take a vector, got shape {a}")
            return (a[0], 1) if args[1] == "col" else (1, a[0])
        if op in _REDUCE and len(args) == 2 and args[1] in (0, 1, -1) \
                and not isinstance(args[1], bool):
            a = self._plan(args[0], cost)
            if not a or args[1] >= len(a) or a[args[1]] == 0 and op != "sum":
                raise TileError(f"cannot take the {op} along axis {args[1]} of shape {a}")
            axis = args[1] % len(a)
            return self._costed(a[:axis] + a[axis + 1:], _size(a), cost)
        raise TileError(f"malformed expression {_short(node)}")

    def _costed(self, shape: tuple, work: int, cost: list) -> tuple:
        self._room(_size(shape))
        cost[0] += work
        if cost[0] > self._budget:                 # no need to look further
            raise TileError(f"this assignment would cost more than the {self._budget:,} "
                            f"operations one assignment may on a cache of M = {self.M:,} "
                            f"({COST_FACTOR} M (floor(sqrt M) + 1)): split it, or compute on "
                            "smaller tiles")
        return shape

    def _limit(self) -> int:
        return self._most

    def _room(self, entries: int) -> None:
        if entries > self._most:
            raise TileError(f"an intermediate value of {entries} entries is too large (at most "
                            f"{self._most:,} on a cache of M = {self.M:,})")

    def _checked(self, value):
        self._room(np.size(value))
        return self._steady(value)


# ---------------------------------------------------------------------- helpers
def _is_count(x) -> bool:
    return isinstance(x, Integral) and not isinstance(x, bool) and x >= 0


def _no_extra(extra, what: str) -> None:
    if extra:
        raise TileError(f"{what} got {len(extra)} argument(s) too many")


def _slices(spans, shape, what: str) -> tuple:
    """NumPy slices for ``[[start, stop], ...]`` within ``shape`` (one span per axis)."""
    if not isinstance(spans, list) or len(spans) != len(shape):
        raise TileError(f"{what}: expected {len(shape)} [start, stop] span(s), got "
                        f"{_short(spans)}")
    out = []
    for span, size in zip(spans, shape):
        if (not isinstance(span, list) or len(span) != 2 or not all(_is_count(x) for x in span)
                or not span[0] <= span[1] <= size):
            raise TileError(f"{what}: span {_short(span)} is not within 0..{size}")
        out.append(slice(int(span[0]), int(span[1])))
    return tuple(out)


def _label(name, spans) -> str:
    return f"{name}[" + ", ".join(f"{a}:{b}" for a, b in spans) + "]"


def _broadcast(fn, *xs, limit: int):
    _broadcast_shape([np.shape(x) for x in xs], limit)
    return fn(*xs)


def _broadcast_shape(shapes, limit: int) -> tuple:
    """The shape ``shapes`` broadcast to, checked: at most two axes, ``limit`` entries."""
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise TileError("shapes " + ", ".join(str(tuple(s)) for s in shapes)
                        + " do not broadcast together") from None
    if len(shape) > 2:
        raise TileError(f"a tile value has at most two axes, got shape {shape}")
    if _size(shape) > limit:
        raise TileError(f"an intermediate value of shape {shape} is too large (at most "
                        f"{limit:,} entries)")
    return shape


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _same(value):
    return value


def _number(x, what: str) -> float:
    """``x`` as a float64: a real number within its range, or ±inf or NaN (never a bool)."""
    if isinstance(x, bool) or not isinstance(x, Real):
        raise TileError(f"{what} not a number, got {_short(x)}")
    if isinstance(x, Integral) and abs(x) > _FLOAT_MAX:
        raise TileError(f"{what} not within float64's range (about ±1.8e308): an integer of "
                        f"{int(x).bit_length():,} bits")
    try:
        return float(x)
    except (OverflowError, ValueError):
        raise TileError(f"{what} not within float64's range, got {_short(x)}") from None


def _count_nodes(expr) -> None:
    """Refuse expressions with more than :data:`MAX_NODES` nodes or :data:`MAX_DEPTH` levels."""
    stack, seen = [(expr, 1)], 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, list):
            seen += 1
            if seen > MAX_NODES or depth > MAX_DEPTH:
                raise TileError(f"an expression may have at most {MAX_NODES} operations, "
                                f"{MAX_DEPTH} deep: split it over several assignments")
            stack.extend((x, depth + 1) for x in node[1:] if isinstance(x, list))


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."
