"""Expressions over cache tiles: what a tile program computes in the cache, as plain data.

A program never holds a tile's values: it holds :class:`Tile` handles and combines them with
NumPy's operators (``+ - * / @``, comparisons, ``.T``, ``[:, None]``, ``.sum(axis=1)``,
``.max(axis=1)``) and the functions here (:func:`exp`, :func:`log`, :func:`sqrt`,
:func:`maximum`, :func:`minimum`, :func:`where`, :func:`row_index`, :func:`col_index`). Each
combination is an :class:`Expr`, a tree kept as nested lists of strings and numbers
(:meth:`Expr.data`), which the machine holding the values evaluates when the expression is
assigned to a tile (``S[...] = Q_i @ K_j.T``) or accumulated into one (``O_i += P @ V_j``).

One assignment is one fused loop: every entry of the target is computed from the operands
without storing anything else, so the cache holds exactly the tiles the program allocated.
The machine costs an assignment before it computes any of it (a product, its output's entries
times its inner size; anything else, the entries it makes) and refuses one that costs more than
a stated multiple of what a product of two cache-sized tiles can (:mod:`ioattn.tiles.machine`).

Examples
--------
>>> from ioattn.tiles import Memory, exp
>>> import numpy as np
>>> mem = Memory(8, inspect=True)
>>> A = mem.load("A", np.arange(4.0).reshape(2, 2))
>>> t, m = mem.read(A, slice(0, 2)), mem.allocate(2)
>>> m[...] = t.max(axis=1)
>>> t[...] = exp(t - m[:, None])
>>> mem.values(t).round(3).tolist()
[[0.368, 1.0], [0.368, 1.0]]

The tile being assigned may appear on the right only entry by entry: its row maxima need a tile
of their own (``m`` above), as they would in a kernel.

>>> t[...] = t - t.max(axis=1)[:, None]
Traceback (most recent call last):
...
ioattn.tiles.machine.TileError: the tile being assigned may appear on the right only entry by entry, as a whole (not under @, .T, [:, None] or a reduction, and not as another part of itself): one assignment is one fused loop with no storage besides its tiles
"""

from __future__ import annotations

from numbers import Integral, Real

__all__ = ["Expr", "Tile", "col_index", "exp", "log", "maximum", "minimum", "row_index", "sqrt",
           "where"]

#: Operations with two operands, by name, and the NumPy operator they stand for.
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "lt", "le", "gt", "ge")
#: Operations with one operand.
UNARY = ("neg", "exp", "log", "sqrt", "abs")
#: Reductions along one axis.
REDUCE = ("sum", "max", "min")


class Expr:
    """A computation on tiles, not yet done: combine with operators, assign to a tile.

    Attributes
    ----------
    node : list
        ``[op, *operands]`` with operands that are nodes, numbers or ints (see
        :mod:`ioattn.tiles.machine` for the grammar).
    memory : Memory
        The memory whose tiles it uses.
    """

    __slots__ = ("node", "memory")
    __array_priority__ = 1000                      # ndarray op Expr: Expr's method, not NumPy's

    def __init__(self, node, memory):
        self.node = node
        self.memory = memory

    def data(self) -> list:
        """The expression as nested lists of strings and numbers (JSON-ready)."""
        return self.node

    def __repr__(self) -> str:
        return f"Expr({self.node!r})"

    def __bool__(self):
        raise TypeError("a tile expression has no truth value in the program: its values stay "
                        "in the cache (use where(condition, a, b) to choose between values)")

    # ------------------------------------------------------------------ operators
    def _bin(self, op, other, swap=False):
        a, b = self.node, _operand(other, self.memory)
        return Expr([op, b, a] if swap else [op, a, b], self.memory)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __truediv__(self, o): return self._bin("div", o)
    def __rtruediv__(self, o): return self._bin("div", o, True)
    def __lt__(self, o): return self._bin("lt", o)
    def __le__(self, o): return self._bin("le", o)
    def __gt__(self, o): return self._bin("gt", o)
    def __ge__(self, o): return self._bin("ge", o)

    def __matmul__(self, o):
        return Expr(["matmul", self.node, _operand(o, self.memory, number=False)], self.memory)

    def __rmatmul__(self, o):
        return Expr(["matmul", _operand(o, self.memory, number=False), self.node], self.memory)

    def __neg__(self): return Expr(["neg", self.node], self.memory)
    def __pos__(self): return self
    def __abs__(self): return Expr(["abs", self.node], self.memory)

    @property
    def T(self) -> Expr:
        """The transpose."""
        return Expr(["T", self.node], self.memory)

    def __getitem__(self, index) -> Expr:
        return Expr(["axes", self.node, _new_axes(index)], self.memory)

    def sum(self, axis: int) -> Expr:
        """Sum along ``axis`` (0 or 1; the axis goes away, as in NumPy)."""
        return Expr(["sum", self.node, _axis(axis)], self.memory)

    def max(self, axis: int) -> Expr:
        """Maximum along ``axis``."""
        return Expr(["max", self.node, _axis(axis)], self.memory)

    def min(self, axis: int) -> Expr:
        """Minimum along ``axis``."""
        return Expr(["min", self.node, _axis(axis)], self.memory)

    def __array__(self, *args, **kwargs):
        raise TypeError("tile values stay in the cache: combine tiles with operators and the "
                        "functions of ioattn.tiles, and assign the result to a tile")

    __hash__ = object.__hash__


class Tile(Expr):
    """A buffer in the cache: a handle, its shape, and (through its memory) its values.

    ``t[...] = expr`` and ``t[a:b, c:d] = expr`` compute ``expr`` into the tile (or a part of it);
    ``t += expr`` (and ``-= *= /=``) update it in place. ``t[a:b]`` in an expression is a part of
    the tile, ``t[:, None]`` a column, ``t[None, :]`` a row.

    Attributes
    ----------
    id : int
        The tile's number in its memory.
    shape : tuple of int
        One or two sizes.
    """

    __slots__ = ("id", "shape")

    def __init__(self, id: int, shape: tuple, memory):
        super().__init__(["tile", id], memory)
        self.id = id
        self.shape = tuple(shape)

    @property
    def size(self) -> int:
        """Entries in the tile."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"Tile({self.id}, shape={self.shape})"

    def __getitem__(self, index) -> Expr:
        if index is Ellipsis:
            return self
        if _is_new_axes(index):
            return Expr(["axes", self.node, _new_axes(index)], self.memory)
        return Expr(["part", self.id, _spans(index, self.shape)], self.memory)

    def __setitem__(self, index, value) -> None:
        if index is Ellipsis and value is self:      # after t[...] += x, which updated t
            return
        target = self.node if index is Ellipsis else ["part", self.id, _spans(index, self.shape)]
        self.memory._set(target, _operand(value, self.memory))

    def _update(self, op, value):
        self.memory._set(self.node, [op, self.node, _operand(value, self.memory)])
        return self

    def __iadd__(self, o): return self._update("add", o)
    def __isub__(self, o): return self._update("sub", o)
    def __imul__(self, o): return self._update("mul", o)
    def __itruediv__(self, o): return self._update("div", o)

    __hash__ = object.__hash__


# ---------------------------------------------------------------------- functions
def exp(x) -> Expr:
    """``e ** x``, entry by entry."""
    return _unary("exp", x)


def log(x) -> Expr:
    """The natural logarithm, entry by entry."""
    return _unary("log", x)


def sqrt(x) -> Expr:
    """The square root, entry by entry."""
    return _unary("sqrt", x)


def maximum(a, b) -> Expr:
    """The larger of ``a`` and ``b``, entry by entry (NumPy broadcasting)."""
    return _binary("maximum", a, b)


def minimum(a, b) -> Expr:
    """The smaller of ``a`` and ``b``, entry by entry."""
    return _binary("minimum", a, b)


def where(condition, a, b) -> Expr:
    """``a`` where ``condition`` holds, else ``b`` (as :func:`numpy.where`)."""
    memory = _memory_of(condition, a, b)
    return Expr(["where", *(_operand(x, memory) for x in (condition, a, b))], memory)


def row_index(start: int, count: int) -> Expr:
    """The column of row numbers ``start, ..., start + count - 1`` (shape ``(count, 1)``), for
    masks: ``where(col_index(j0, c) <= row_index(i0, r), S, -inf)`` keeps a causal block."""
    return Expr(["rows", _count(start, "start"), _count(count, "count")], None)


def col_index(start: int, count: int) -> Expr:
    """The row of column numbers ``start, ..., start + count - 1`` (shape ``(1, count)``)."""
    return Expr(["cols", _count(start, "start"), _count(count, "count")], None)


# ---------------------------------------------------------------------- internals
def _memory_of(*xs):
    for x in xs:
        if isinstance(x, Expr) and x.memory is not None:
            return x.memory
    raise TypeError("a tile expression needs at least one tile")


def _unary(op, x) -> Expr:
    if not isinstance(x, Expr):
        raise TypeError(f"{op}() takes a tile or a tile expression, got {type(x).__name__} "
                        f"(use math.{op} for plain numbers)")
    return Expr([op, x.node], x.memory)


def _binary(op, a, b) -> Expr:
    memory = _memory_of(a, b)
    return Expr([op, _operand(a, memory), _operand(b, memory)], memory)


def _operand(x, memory, *, number: bool = True):
    """A node for ``x``: an expression's node, or a real number as ``["num", x]``."""
    if isinstance(x, Expr):
        if x.memory is not None and memory is not None and x.memory is not memory:
            raise ValueError("these tiles belong to different memories")
        return x.node
    if number and isinstance(x, Real) and not isinstance(x, bool):
        return ["num", float(x)]
    what = "a tile or a number" if number else "a tile"
    raise TypeError(f"expected {what} in a tile expression, got {type(x).__name__}: tile values "
                    "stay in the cache, so only tiles, tile expressions and numbers combine")


def _axis(axis) -> int:
    if isinstance(axis, bool) or not isinstance(axis, Integral) or axis not in (0, 1, -1):
        raise ValueError(f"axis must be 0 or 1 (or -1), got {axis!r}")
    return int(axis)


def _count(x, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, Integral) or x < 0:
        raise ValueError(f"the index {what} must be a non-negative integer, got {x!r}")
    return int(x)


def _is_new_axes(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(p is None for p in parts)


def _new_axes(index) -> list:
    """``[:, None]`` -> ``"col"``, ``[None, :]`` -> ``"row"`` (the only new axes a vector gets)."""
    if index == (slice(None), None):
        return "col"
    if index == (None, slice(None)) or index is None or index == (None,):
        return "row"
    raise IndexError("a tile expression takes [:, None] (a column) or [None, :] (a row); "
                     "parts of a tile are taken from the tile itself, t[a:b, c:d]")


def _spans(index, shape) -> list:
    """``[[start, stop], ...]`` for a tile part: unit-step slices within ``shape``."""
    parts = index if isinstance(index, tuple) else (index,)
    if len(parts) > len(shape):
        raise IndexError(f"too many indices for a tile of shape {shape}")
    spans = []
    for k, size in enumerate(shape):
        part = parts[k] if k < len(parts) else slice(None)
        if not isinstance(part, slice):
            raise IndexError(f"a part of a tile is taken with slices (a:b), got {part!r}; "
                             "use a:a+1 for one row or column")
        start, stop, step = part.indices(size)
        if step != 1:
            raise IndexError(f"a part of a tile is taken with unit-step slices, got {part!r}")
        spans.append([start, max(start, stop)])
    return spans
