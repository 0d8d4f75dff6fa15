"""Attention masks: which keys each query attends to, and the blocks the algorithms skip.

A mask is a boolean ``N x N`` array, ``True`` where query ``i`` attends to key ``j``. Masked
attention is ``O = softmax(tau Q K^T + B) V`` with ``B_ij = 0`` where the mask is True and
``-inf`` where it is False.

Rectangular attention (``N_q`` query rows against ``N_k`` keys, ``N_q != N_k``: a decoding
step, a chunk of a prefill) takes a boolean ``N_q x N_k`` array, read once into a
:class:`RectMask` (:func:`mask_of` chooses): the algorithms visit its blocks as they visit a
square mask's, and cost it as the sum over its blocks. :func:`causal_chunk` is the causal mask
of ``N_q`` new queries at the end of a cache of ``N_k`` keys, query ``i`` seeing the keys
``j <= N_k - N_q + i``.

Rows with nothing to attend to. Such a row has no softmax (its sum is empty). ioattn defines
its output row as **zeros**, its gradient contributions as zeros (it adds nothing to ``dK`` and
``dV``, and its ``dQ`` row is 0), and its row log-sum-exp as ``L_i = +inf``, not
``log 0 = -inf``, so that the backward's ``P = exp(S - L)`` is 0 on that row with no special
case. FlashAttention-2's CUDA kernels make the same choice: they store ``+inf`` as the
log-sum-exp of a row whose sum is 0, and zeros as its output.

Every algorithm derives a *block mask* from the element mask at its own block shape: a block of
``S`` is nonempty when any entry in it is True (:func:`block_mask`). Block-sparse FlashAttention
([FA]_, Section 3.3, Algorithm 5) visits only the nonempty blocks; inside a nonempty block that
is only partly True, the masked scores are set to ``-inf`` in the cache.

What the mask costs in I/O: nothing
-----------------------------------
The mask is part of the problem, not data the algorithm moves: it decides which entries of
``S`` exist, that is which vertices the computation graph of masked attention has (a masked
product ``q_i . k_j`` is simply not in the graph). An algorithm for a given mask is specialised
to it, as block-sparse FlashAttention is: [FA]_ takes the block-sparsity mask as predefined,
and its Proposition 4 counts ``Theta(N d + N^2 d^2 s / M)`` accesses of ``Q, K, V, O`` and the
statistics, for a fraction ``s`` of nonempty blocks, nothing for the mask. So in ioattn neither
the block structure (which blocks to visit) nor the element mask inside a partly filled block
(which scores to set to ``-inf``) costs any I/O, and ``io_cost(..., mask=mask)`` counts exactly
what ``run(..., mask=mask)`` moves on that basis. For the masks used in practice this is also
what kernels do: a causal or sliding-window mask is computed from the indices ``i, j`` and never
stored. (A model that stored an arbitrary element mask in slow memory would add, at most, one
read of every partly filled block per visit; ioattn does not count that.)

Constructors: :func:`causal`, :func:`sliding_window`, :func:`from_blocks`, :func:`block_sparse`
return boolean ``N x N`` arrays, **read-only** (``.copy()`` gives a writable one), that carry
their structure: ``io_cost(..., mask=causal(N))`` reads none of their ``N^2`` entries. The same
masks without an array: :meth:`Mask.causal`, :meth:`Mask.sliding_window`,
:meth:`Mask.from_blocks`, :meth:`Mask.block_sparse`. :func:`as_mask` validates (a boolean
``(N, N)`` array, else a ``ValueError`` that says what is wrong). :class:`Mask` is the validated,
immutable form an algorithm's plan carries.

How an array is read
--------------------
Every cost under a mask is a sum over its blocks at the algorithm's block shape, and a sweep over
``M`` asks for many block shapes. ``Mask(array)`` therefore reads the array **once**, a few rows
at a time (no ``N x N`` temporary), and keeps the smallest of three exact descriptions, from
which the blocks at any shape follow without the array:

- *runs*: each row's True entries as maximal runs ``[start, end)``, kept when every row is one
  run (causal, its transpose, sliding windows, bands, dense: ``O(N)`` numbers) or when the runs
  are few. Block ``(I, J)`` is nonempty iff a run of a row of ``I`` meets columns ``J``, and full
  iff every row of ``I`` has a run that covers them; each run marks a range of column blocks, so
  the blocks at ``b_r x b_c`` cost ``O(runs + T_r T_c)``. A band about the diagonal (the causal
  mask, its transpose, a sliding window) is recognised among these (:attr:`Mask.band`), and the
  algorithms cost it in closed form (:func:`band_sums`): no array and no block mask, at any
  ``N``; :meth:`Mask.causal` and :meth:`Mask.sliding_window` make such a mask from a few
  numbers, and its runs only if something asks for them.
- *grid*: the mask is constant on the tiles of the grid of its runs of equal consecutive rows
  and of equal consecutive columns (every mask is; a block-sparse one has few). Kept when that
  grid is small: a block's count of True tiles is four lookups in the grid's 2-D prefix sums.
- *bits*: anything else. A read-only array is kept as it is (no copy); a writable one as packed
  bits (``N^2 / 8`` bytes), and the blocks at each shape are reduced from it a few rows at a
  time.

An array is trusted not to change when it and every array it is a view of are read-only (as the
constructors' arrays are); its description is then remembered for as long as the array lives, so
repeated costs with it read nothing. A writable array is read again at each call, so a change to
it is always seen. (NumPy lets the owner of a read-only array make it writable again; an array
changed after being passed read-only is not seen to change. The constructors' arrays cannot be
made writable.) Plans, :func:`ioattn.api.totals`, :func:`ioattn.bounds.cheapest`,
:func:`ioattn.bounds.crossovers` and :func:`ioattn.sweep.sweep` read a mask once per call and
share the blocks they compute.

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Section 3.3 (block-sparse FlashAttention),
   Algorithm 5 and Proposition 4 (its I/O).
"""

from __future__ import annotations

import functools
import numbers
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from ._validate import as_count, as_flag

__all__ = ["BandSums", "Blocks", "Mask", "RectMask", "as_mask", "band_sums", "block_mask",
           "block_sizes", "block_sparse", "causal", "causal_chunk", "floor_sum", "from_blocks",
           "mask_of", "sliding_window"]

#: Entries of the mask handled at once (and an eighth as many 8-byte counts): the passes over
#: an array and the block computations work on pieces of this size, never on an ``N x N``
#: temporary.
_CHUNK = 1 << 18
_COUNTS = _CHUNK // 8


def _runs_budget(N: int) -> int:
    """Most runs the *runs* description keeps (12 bytes each, and about 30 while they are
    found): four a row, or more for a large ``N``."""
    return max(4 * N, N * N // 1024)


def _grid_budget(N: int) -> int:
    """Most tiles the *grid* description keeps (a byte each, and 4 in the prefix sums)."""
    return max(64, N * N // 64)


def _checked(mask, N: int | None = None) -> np.ndarray:
    """``mask`` as a boolean ``(N, N)`` ndarray (any square shape when ``N`` is None), not
    copied; a ``ValueError`` naming the problem otherwise."""
    try:
        arr = np.asarray(mask)
    except (ValueError, TypeError) as exc:              # ragged nested lists and the like
        raise ValueError(f"mask must be a boolean N x N array: {exc}") from None
    if arr.dtype != np.bool_:
        hint = " (for 0/1 values, pass mask.astype(bool))" if arr.dtype.kind in "iuf" else ""
        raise ValueError(f"mask must be a boolean array (True = attend), got dtype {arr.dtype}"
                         + hint)
    if N is None and (arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.size == 0):
        raise ValueError(f"mask must be a square N x N array, got shape {arr.shape}")
    if N is not None and arr.shape != (N, N):
        raise ValueError(f"mask must have shape (N, N) = ({N}, {N}), got {arr.shape}")
    return arr


def _read_only(arr: np.ndarray) -> bool:
    """Whether ``arr`` cannot be written through: it and every array (or buffer) it is a view
    of are read-only, down to memory nothing else can write (its own, or ``bytes``)."""
    x = arr
    while True:
        if isinstance(x, np.ndarray):
            if x.flags.writeable:
                return False
            x = x.base
        elif isinstance(x, memoryview):
            if not x.readonly:
                return False
            x = x.obj
        else:
            return x is None or isinstance(x, bytes)


def as_mask(mask, N: int | None = None) -> np.ndarray:
    """``mask`` checked as an attention mask for ``N`` queries and keys: a read-only boolean
    ``(N, N)`` array (any square shape when ``N`` is None): ``mask`` itself when it cannot be
    written through (it and every array it is a view of are read-only), else a read-only copy.

    Raises
    ------
    ValueError
        If ``mask`` is not a boolean array (True = attend) or its shape is not ``(N, N)``.
    """
    if isinstance(mask, Mask):
        if N is not None and mask.N != N:
            raise ValueError(f"mask must have shape (N, N) = ({N}, {N}), got "
                             f"({mask.N}, {mask.N})")
        return mask.array
    arr = _checked(mask, N)
    if _read_only(arr):
        return arr
    out = arr.copy()
    out.flags.writeable = False
    return out


def block_sizes(n: int, b: int) -> np.ndarray:
    """Sizes of the blocks ``range(0, n, b)`` cuts ``n`` into: ``b, ..., b, n - b (T - 1)``."""
    sizes = np.full(-(-n // b), b, dtype=np.int64)
    sizes[-1] = n - b * (len(sizes) - 1)
    return sizes


class Blocks(NamedTuple):
    """A mask at block granularity: ``nonempty[I, J]`` (any entry True) and ``full[I, J]`` (every
    entry True) for row block ``I`` and column block ``J``; ``rows``, ``cols``: block sizes."""

    nonempty: np.ndarray
    full: np.ndarray
    rows: np.ndarray
    cols: np.ndarray

    def largest(self, f, initial: int = 0) -> int:
        """``max(f(r_I, c_J))`` over the nonempty blocks ``(I, J)`` (``initial`` if none), with
        no ``T_r x T_c`` array of values: every block but the last of a row (column) has the same
        size, so ``f`` is evaluated once for each of the (at most four) pairs of sizes that a
        nonempty block has.

        >>> Mask(causal(5)).blocks(2, 2).largest(lambda r, c: r * c)
        4
        """
        act, best = self.nonempty, initial
        T_r, T_c = act.shape
        for I in (slice(0, T_r - 1), slice(T_r - 1, T_r)):
            for J in (slice(0, T_c - 1), slice(T_c - 1, T_c)):
                if act[I, J].any():
                    best = max(best, int(f(int(self.rows[I.start]), int(self.cols[J.start]))))
        return best

    def entries(self) -> int:
        """``sum(r_I c_J)`` over the nonempty blocks: the entries they hold (``r @ nonempty @
        c``, summed a few block rows at a time)."""
        act, r, c = self.nonempty, self.rows, self.cols
        step = max(1, _COUNTS // max(1, act.shape[1]))
        return sum(int(r[I:I + step] @ (act[I:I + step] @ c))
                   for I in range(0, act.shape[0], step))


# ----------------------------------------------------------------------------- descriptions
class _Rep:
    """An exact description of an ``N x N`` mask that gives its blocks at any shape. Blocks are
    remembered per shape, the least recently used forgotten past :meth:`_cache_bytes`."""

    triangle: str | None = None
    band: tuple[int, int] | None = None

    def __init__(self, N: int):
        self.N = N
        self._blocks: OrderedDict = OrderedDict()
        self._held = 0
        self._row_counts: np.ndarray | None = None
        self._col_counts: np.ndarray | None = None

    def _cache_bytes(self) -> int:
        return max(1 << 22, self.N * self.N // 16)

    def blocks(self, b_r: int, b_c: int) -> Blocks:
        key = (b_r, b_c)
        found = self._blocks.get(key)
        if found is not None:
            self._blocks.move_to_end(key)
            return found
        nonempty, full = self._compute_blocks(b_r, b_c)
        for x in (nonempty, full):
            x.flags.writeable = False
        found = Blocks(nonempty, full, block_sizes(self.N, b_r), block_sizes(self.N, b_c))
        self._blocks[key] = found
        self._held += 2 * nonempty.size
        while self._held > self._cache_bytes() and len(self._blocks) > 1:
            _, old = self._blocks.popitem(last=False)
            self._held -= 2 * old.nonempty.size
        return found

    def row_counts(self) -> np.ndarray:
        """True entries of each row (int64)."""
        if self._row_counts is None:
            self._row_counts = self._count(0)
            self._row_counts.flags.writeable = False
        return self._row_counts

    def col_counts(self) -> np.ndarray:
        """True entries of each column (int64)."""
        if self._col_counts is None:
            self._col_counts = self._count(1)
            self._col_counts.flags.writeable = False
        return self._col_counts

    def transposed(self) -> _Rep:
        return _Transposed(self)

    def same(self, other: _Rep) -> bool | None:
        """Whether the masks are equal, when the two descriptions tell it at once; else None."""
        return None

    # each description implements these
    def _compute_blocks(self, b_r: int, b_c: int):
        raise NotImplementedError

    def _count(self, axis: int) -> np.ndarray:
        raise NotImplementedError

    def to_array(self) -> np.ndarray:
        """The mask as a boolean ``(N, N)`` array (new, writable, unless the description keeps
        the caller's read-only array, which it then returns)."""
        raise NotImplementedError


def _rows_per_chunk(N: int) -> int:
    return max(1, _CHUNK // N)


class _Runs(_Rep):
    """Each row's True entries as maximal runs ``[starts, ends)``, in row order: ``rows``,
    ``starts``, ``ends`` (int32, one per run) and ``offsets`` (the runs of row ``i`` are
    ``offsets[i]:offsets[i + 1]``)."""

    kind = "runs"

    def __init__(self, N: int, rows, starts, ends):
        super().__init__(N)
        self.rows = np.asarray(rows, dtype=np.int32)
        self.starts = np.asarray(starts, dtype=np.int32)
        self.ends = np.asarray(ends, dtype=np.int32)
        self.offsets = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.rows, minlength=N), out=self.offsets[1:])
        self.band = None
        if len(self.rows) == N and np.array_equal(self.rows, np.arange(N)):
            self.band = _band_of_runs(N, self.starts, self.ends)
        self.triangle = _triangle_of_band(N, self.band)

    @classmethod
    def band_of(cls, N: int, a: int, b: int) -> _Runs:
        """The band ``i - a <= j <= i + b`` (``0 <= a, b < N``): the causal mask is ``(N - 1,
        0)``, its transpose ``(0, N - 1)``, a sliding window of ``w`` keys ``(w - 1, 0)``. Its
        ``O(N)`` runs are made only when something asks for them (:meth:`__getattr__`): its
        blocks, counts, sums over blocks (:func:`band_sums`) and equality come from the
        indices, so a mask of any ``N`` holds a few numbers."""
        self = cls.__new__(cls)
        _Rep.__init__(self, N)
        self.band = (a, b)
        self.triangle = _triangle_of_band(N, self.band)
        return self

    _LAZY = ("rows", "starts", "ends", "offsets")

    def __getattr__(self, name):
        # called only for an attribute not set: the runs of a band made by band_of
        if name not in _Runs._LAZY or self.__dict__.get("band") is None:
            raise AttributeError(name)
        (a, b), i = self.band, np.arange(self.N)
        _Runs.__init__(self, self.N, i, np.maximum(i - a, 0), np.minimum(i + b + 1, self.N))
        return getattr(self, name)

    def same(self, other):
        if not isinstance(other, _Runs):
            return None
        if self.band is not None or other.band is not None:
            return self.band == other.band              # both recognise a band exactly
        return (np.array_equal(self.offsets, other.offsets)
                and np.array_equal(self.starts, other.starts)
                and np.array_equal(self.ends, other.ends))

    def transposed(self):
        if self.band is None:
            return _Transposed(self)
        a, b = self.band
        if a == b:                                    # symmetric ([[True]] among them)
            return self
        return _band_rep(self.N, b, a)

    def _count(self, axis):
        N = self.N
        if self.band is not None:                       # row i: keys i - a .. i + b
            a, b = self.band if axis == 0 else self.band[::-1]
            i = np.arange(N)
            return np.minimum(i + b + 1, N) - np.maximum(i - a, 0)
        s, e = self.starts.astype(np.int64), self.ends.astype(np.int64)
        if axis == 0:
            total = np.zeros(len(s) + 1, dtype=np.int64)
            np.cumsum(e - s, out=total[1:])
            return total[self.offsets[1:]] - total[self.offsets[:-1]]
        steps = np.bincount(s, minlength=N + 1) - np.bincount(e, minlength=N + 1)
        return np.cumsum(steps[:N])

    def _compute_blocks(self, b_r, b_c):
        if self.band is not None:
            return _band_blocks(self.N, b_r, b_c, *self.band)
        # Row i's run [s, e) meets column blocks s // b_c .. (e - 1) // b_c and covers blocks
        # ceil(s / b_c) .. e // b_c - 1 (through the last one when e = N): each run adds 1 over a
        # range of one block row, summed by differences. Nonempty: a run meets J; full: as many
        # rows cover J as the block has rows (runs of a row are disjoint: one each at most).
        N = self.N
        T_r, T_c = -(-N // b_r), -(-N // b_c)
        W = T_c + 1
        nonempty = np.empty((T_r, T_c), dtype=bool)
        full = np.empty((T_r, T_c), dtype=bool)
        sizes = block_sizes(N, b_r)
        at_block = self.offsets[np.minimum(np.arange(T_r + 1) * b_r, N)]
        I0 = 0
        while I0 < T_r:
            I1 = min(T_r, I0 + max(1, _COUNTS // W))
            if at_block[I1] - at_block[I0] > _COUNTS:
                I1 = max(I0 + 1, int(np.searchsorted(at_block, at_block[I0] + _COUNTS,
                                                     side="right")) - 1)
            k0, k1, g = at_block[I0], at_block[I1], I1 - I0
            base = (self.rows[k0:k1] // b_r - I0).astype(np.int64) * W
            s = self.starts[k0:k1].astype(np.int64)
            e = self.ends[k0:k1].astype(np.int64)
            meets = (np.bincount(base + s // b_c, minlength=g * W)
                     - np.bincount(base + (e - 1) // b_c + 1, minlength=g * W))
            nonempty[I0:I1] = np.cumsum(meets.reshape(g, W), axis=1)[:, :T_c] > 0
            lo, hi = -(-s // b_c), np.where(e == N, T_c, e // b_c)
            ok = lo < hi
            covers = (np.bincount(base[ok] + lo[ok], minlength=g * W)
                      - np.bincount(base[ok] + hi[ok], minlength=g * W))
            full[I0:I1] = np.cumsum(covers.reshape(g, W), axis=1)[:, :T_c] == sizes[I0:I1, None]
            I0 = I1
        return nonempty, full

    def rows_array(self, x0: int, x1: int) -> np.ndarray:
        """Rows ``x0:x1`` as a boolean array."""
        N, c = self.N, x1 - x0
        k0, k1 = self.offsets[x0], self.offsets[x1]
        base = (self.rows[k0:k1] - x0).astype(np.int64) * (N + 1)
        steps = (np.bincount(base + self.starts[k0:k1], minlength=c * (N + 1))
                 - np.bincount(base + self.ends[k0:k1], minlength=c * (N + 1)))
        return np.cumsum(steps.reshape(c, N + 1), axis=1)[:, :N] > 0

    def to_array(self):
        N = self.N
        if self.triangle is not None:
            a = np.tri(N, dtype=bool)
            return a if self.triangle == "lower" else np.ascontiguousarray(a.T)
        if self.band is not None:
            i, j = np.ogrid[:N, :N]
            return (j >= i - self.band[0]) & (j <= i + self.band[1])
        out = np.empty((N, N), dtype=bool)
        step = max(1, _COUNTS // (N + 1))
        for x0 in range(0, N, step):
            x1 = min(N, x0 + step)
            out[x0:x1] = self.rows_array(x0, x1)
        return out


class _Grid(_Rep):
    """A mask constant on the tiles of a grid: rows ``row_edges[a]:row_edges[a + 1]`` and
    columns ``col_edges[b]:col_edges[b + 1]`` are all ``tiles[a, b]``. Canonical when no two
    neighbouring rows (columns) of ``tiles`` are equal, as :func:`_grid` makes it."""

    kind = "grid"

    def __init__(self, N: int, row_edges, col_edges, tiles):
        super().__init__(N)
        self.row_edges = np.asarray(row_edges, dtype=np.int64)
        self.col_edges = np.asarray(col_edges, dtype=np.int64)
        self.tiles = np.asarray(tiles, dtype=bool)
        self._prefix = None

    def same(self, other):
        if not isinstance(other, _Grid):
            return None
        return (np.array_equal(self.row_edges, other.row_edges)
                and np.array_equal(self.col_edges, other.col_edges)
                and np.array_equal(self.tiles, other.tiles))

    def transposed(self):
        return _Grid(self.N, self.col_edges, self.row_edges, np.ascontiguousarray(self.tiles.T))

    def _count(self, axis):
        heights, widths = np.diff(self.row_edges), np.diff(self.col_edges)
        t = self.tiles.astype(np.int64)
        if axis == 0:
            return np.repeat(t @ widths, heights)
        return np.repeat(heights @ t, widths)

    def _compute_blocks(self, b_r, b_c):
        # The True tiles that block (I, J) meets are those of grid rows ra..rb-1 and grid columns
        # ca..cb-1; it is nonempty iff one of them is True, full iff all of them are.
        R, C = self.tiles.shape
        if self._prefix is None:
            dtype = np.int32 if R * C < 2 ** 31 else np.int64
            P = np.zeros((R + 1, C + 1), dtype=dtype)
            P[1:, 1:] = self.tiles
            np.cumsum(P, axis=0, dtype=dtype, out=P)
            np.cumsum(P, axis=1, dtype=dtype, out=P)
            self._prefix = P
        P = self._prefix
        ra, rb = _spans(self.row_edges, self.N, b_r)
        ca, cb = _spans(self.col_edges, self.N, b_c)
        T_r, T_c = len(ra), len(ca)
        nonempty = np.empty((T_r, T_c), dtype=bool)
        full = np.empty((T_r, T_c), dtype=bool)
        width = (cb - ca)[None, :]
        step = max(1, _COUNTS // T_c)
        for I0 in range(0, T_r, step):
            a, b = ra[I0:I0 + step], rb[I0:I0 + step]
            true = (P[np.ix_(b, cb)] - P[np.ix_(a, cb)]) - (P[np.ix_(b, ca)] - P[np.ix_(a, ca)])
            nonempty[I0:I0 + step] = true > 0
            full[I0:I0 + step] = true == (b - a)[:, None] * width
        return nonempty, full

    def to_array(self):
        return np.repeat(np.repeat(self.tiles, np.diff(self.row_edges), axis=0),
                         np.diff(self.col_edges), axis=1)


def _spans(edges: np.ndarray, N: int, b: int):
    """For the blocks ``range(0, N, b)``: the first grid cell each meets and one past the last."""
    first = np.arange(0, N, b)
    last = np.minimum(first + b, N) - 1
    return (np.searchsorted(edges, first, side="right") - 1,
            np.searchsorted(edges, last, side="right"))


class _Bits(_Rep):
    """The mask entry by entry: the caller's read-only array (held weakly: the :class:`Mask`
    holds it), or packed bits (``N^2 / 8`` bytes) of a writable one."""

    kind = "bits"

    def __init__(self, N: int, array: np.ndarray | None = None, packed=None):
        super().__init__(N)
        self._ref = None if array is None else weakref.ref(array)
        self.packed = packed

    @classmethod
    def of(cls, arr: np.ndarray, read_only: bool) -> _Bits:
        N = arr.shape[0]
        if read_only:
            return cls(N, array=arr)
        packed = np.empty((N, -(-N // 8)), dtype=np.uint8)
        step = _rows_per_chunk(N)
        for x0 in range(0, N, step):
            packed[x0:x0 + step] = np.packbits(arr[x0:x0 + step], axis=1)
        return cls(N, packed=packed)

    def same(self, other):
        if isinstance(other, _Bits) and self.packed is not None and other.packed is not None:
            return bool(np.array_equal(self.packed, other.packed))
        return None

    def rows_array(self, x0: int, x1: int) -> np.ndarray:
        if self.packed is not None:
            return np.unpackbits(self.packed[x0:x1], axis=1, count=self.N).view(bool)
        arr = self._ref()
        if arr is None:                   # pragma: no cover - a Mask holds its array
            raise RuntimeError("the mask's array is gone")
        return arr[x0:x1]

    def _count(self, axis):
        N = self.N
        out = np.zeros(N, dtype=np.int64)
        step = _rows_per_chunk(N)
        for x0 in range(0, N, step):
            rows = self.rows_array(x0, min(N, x0 + step))
            if axis == 0:
                out[x0:x0 + step] = np.count_nonzero(rows, axis=1)
            else:
                out += np.count_nonzero(rows, axis=0)
        return out

    def _compute_blocks(self, b_r, b_c):
        N = self.N
        T_r, T_c = -(-N // b_r), -(-N // b_c)
        nonempty = np.zeros((T_r, T_c), dtype=bool)
        full = np.ones((T_r, T_c), dtype=bool)
        cols = np.arange(0, N, b_c)
        step = max(1, _COUNTS // N)
        for x0 in range(0, N, step):
            x1 = min(N, x0 + step)
            rows = self.rows_array(x0, x1)
            some = np.logical_or.reduceat(rows, cols, axis=1)
            every = np.logical_and.reduceat(rows, cols, axis=1)
            I = np.arange(x0, x1) // b_r
            first = np.flatnonzero(np.concatenate(([True], I[1:] != I[:-1])))
            at = I[first]
            nonempty[at] |= np.logical_or.reduceat(some, first, axis=0)
            full[at] &= np.logical_and.reduceat(every, first, axis=0)
        return nonempty, full

    def to_array(self):
        if self.packed is None:
            return self.rows_array(0, self.N)
        return np.unpackbits(self.packed, axis=1, count=self.N).view(bool)


class _Transposed(_Rep):
    """The transpose of another description: its blocks at ``b_r x b_c`` are the other's at
    ``b_c x b_r``, transposed."""

    kind = "transposed"

    def __init__(self, base: _Rep):
        super().__init__(base.N)
        self.base = base

    def blocks(self, b_r, b_c):
        b = self.base.blocks(b_c, b_r)
        return Blocks(b.nonempty.T, b.full.T, b.cols, b.rows)

    def same(self, other):
        if isinstance(other, _Transposed):
            return self.base.same(other.base)
        return None

    def transposed(self):
        return self.base

    def row_counts(self):
        return self.base.col_counts()

    def col_counts(self):
        return self.base.row_counts()

    def to_array(self):
        return self.base.to_array().T


@functools.lru_cache(maxsize=8)
def _band_rep(N: int, a: int, b: int) -> _Runs:
    return _Runs.band_of(N, a, b)


def _triangle_rep(N: int, lower: bool) -> _Runs:
    return _band_rep(N, N - 1, 0) if lower else _band_rep(N, 0, N - 1)


def _band_of_runs(N: int, starts: np.ndarray, ends: np.ndarray) -> tuple[int, int] | None:
    """``(a, b)`` when row ``i``'s one run is ``[max(0, i - a), min(N, i + b + 1))`` for every
    ``i`` (a band about the diagonal), else None."""
    i = np.arange(N)
    a, b = int((i - starts).max()), int((ends - 1 - i).max())
    if a < 0 or b < 0 or not np.array_equal(starts, np.maximum(i - a, 0)) \
            or not np.array_equal(ends, np.minimum(i + b + 1, N)):
        return None
    return a, b


def _triangle_of_band(N: int, band) -> str | None:
    if band == (N - 1, 0):
        return "lower"
    return "upper" if band == (0, N - 1) else None


def _band_blocks(N: int, b_r: int, b_c: int, a: int, b: int):
    """Nonempty and full blocks of the band ``i - a <= j <= i + b``, from the indices: with
    inclusive ends ``[r0, r1]`` and ``[c0, c1]``, block ``(I, J)`` is nonempty iff
    ``c0 <= r1 + b`` and ``c1 >= r0 - a`` (the rows' runs cover ``[r0 - a, r1 + b]`` without a
    gap), and full iff ``c0 >= r1 - a`` and ``c1 <= r0 + b``."""
    r0 = np.arange(0, N, b_r)
    r1 = np.minimum(r0 + b_r, N) - 1
    c0 = np.arange(0, N, b_c)
    c1 = np.minimum(c0 + b_c, N) - 1
    r0, r1, c0, c1 = r0[:, None], r1[:, None], c0[None, :], c1[None, :]
    return (c0 <= r1 + b) & (c1 >= r0 - a), (c0 >= r1 - a) & (c1 <= r0 + b)


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum(floor((a i + b) / m) for i in range(n))`` for integers ``n, a, b >= 0``, ``m >= 1``,
    exactly and in ``O(log m)`` steps (the Euclid-like reduction: take out ``floor(a / m)`` and
    ``floor(b / m)``, then count the lattice points under the line with the axes swapped).

    >>> floor_sum(10, 7, 3, 5) == sum((3 * i + 5) // 7 for i in range(10))
    True
    """
    total = 0
    while True:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        top = a * n + b
        if top < m:
            return total
        n, b = divmod(top, m)
        m, a = a, m


class BandSums(NamedTuple):
    """Sums over the nonempty ``b_r x b_c`` blocks ``(I, J)`` of a band, ``r_I`` and ``c_J``
    the blocks' sizes: what the costs under a causal mask or a sliding window are made of."""

    blocks: int      # the number of nonempty blocks
    rows: int        # sum of r_I
    cols: int        # sum of c_J
    entries: int     # sum of r_I c_J


def band_sums(N: int, b_r: int, b_c: int, a: int, b: int) -> BandSums:
    """:class:`BandSums` of the band ``i - a <= j <= i + b`` (``0 <= a, b < N``; the causal
    mask is ``(N - 1, 0)``, a window of ``w`` keys ``(w - 1, 0)``) at ``b_r x b_c`` blocks (a
    side past ``N`` cut to ``N``), in closed form: Python ints, ``O(log N)`` steps, no array,
    for any ``N``.

    Block row ``I`` holds rows ``r0 = I b_r`` to ``r1 = min((I + 1) b_r, N) - 1``, whose runs
    cover the keys ``[max(0, r0 - a), min(N - 1, r1 + b)]`` without a gap, so its nonempty blocks
    are ``lo_I <= J <= hi_I``, the column blocks of those two keys, and their widths sum to
    ``min((hi_I + 1) b_c, N) - lo_I b_c`` (only the last column block can pass ``N``, by
    ``T_c b_c - N``). Over the block rows ``I < T_r - 1`` (``r_I = b_r``), ``sum lo_I`` and
    ``sum hi_I`` are :func:`floor_sum` of ``(b_r I - a) / b_c`` from the first ``I`` with
    ``b_r I >= a`` (before it, ``lo_I = 0``) and of ``(b_r I + b_r - 1 + b) / b_c`` up to the
    first ``I`` whose last row reaches key ``N - 1`` (from it on, ``hi_I = T_c - 1``); the last
    block row has ``N - (T_r - 1) b_r`` rows and ``hi = T_c - 1``. The tests compare every sum
    with the blocks of the boolean array.

    >>> band_sums(5, 2, 2, 4, 0)    # causal: (0, 0); (1, 0), (1, 1); (2, 0..2), sides 2, 2, 1
    BandSums(blocks=6, rows=9, cols=11, entries=17)
    """
    T_r, T_c = -(-N // b_r), -(-N // b_c)
    K = T_r - 1                                     # block rows of b_r rows, before the last
    last = N - K * b_r
    I0 = min(K, -(-a // b_r))                       # block rows I < I0 start at key 0
    lo = floor_sum(K - I0, b_c, b_r, b_r * I0 - a) if K > I0 else 0
    I1 = min(K, max(0, -(-(N - b_r - b) // b_r)))   # block rows I >= I1 reach key N - 1
    hi = floor_sum(I1, b_c, b_r, b_r - 1 + b) + (K - I1) * (T_c - 1)
    I2 = max(0, -(-((T_c - 1) * b_c - b_r + 1 - b) // b_r))   # ... reach the last column block
    reach = max(0, K - I2)
    lo_K = max(0, K * b_r - a) // b_c
    per = hi - lo + K                               # sum over I < K of hi_I - lo_I + 1
    widths = b_c * (hi + K) - reach * (T_c * b_c - N) - b_c * lo
    return BandSums(per + T_c - lo_K, b_r * per + last * (T_c - lo_K), widths + N - lo_K * b_c,
                    b_r * widths + last * (N - lo_K * b_c))


# ------------------------------------------------------------------------------- the analysis
class _Scan(NamedTuple):
    """What one pass over an array's rows finds."""

    runs: tuple | None          # (rows, starts, ends) of every run, or None past the budget
    one_run: bool               # whether every row has at most one run
    new_row: np.ndarray         # new_row[i]: row i differs from row i - 1 (row 0: True)
    new_col: np.ndarray         # new_col[j]: column j differs from column j - 1 (column 0: True)


def _scan(a: np.ndarray, runs_budget: int) -> _Scan:
    """One pass over ``a``, a few rows at a time: each row's runs of True entries (kept while
    there are at most ``runs_budget`` in all), and which rows and columns differ from the one
    before. Holds ``O(_CHUNK)`` entries at a time besides what it returns."""
    N = a.shape[0]
    step = min(N, max(1, _CHUNK // (N + 2)))
    pad = np.zeros((step, N + 2), dtype=bool)         # a row between two False entries
    edges = np.empty((step, N + 1), dtype=bool)       # where the padded row changes value
    new_row = np.ones(N, dtype=bool)
    new_col = np.zeros(N, dtype=bool)
    new_col[0] = True
    pieces, total, one_run, last = [], 0, True, None
    for x0 in range(0, N, step):
        x1 = min(N, x0 + step)
        c = x1 - x0
        p, t = pad[:c], edges[:c]
        p[:, 1:-1] = a[x0:x1]
        q = p[:, 1:-1]
        np.not_equal(p[:, 1:], p[:, :-1], out=t)
        new_col[1:] |= t[:, 1:-1].any(axis=0)
        if c > 1:
            new_row[x0 + 1:x1] = (q[1:] != q[:-1]).any(axis=1)
        if last is not None:
            new_row[x0] = not np.array_equal(q[0], last)
        last = q[-1].copy()
        if pieces is None:
            continue
        k = int(np.count_nonzero(t)) // 2                # a run starts and ends in its row
        if total + k > runs_budget:
            pieces, one_run = None, False                # more runs than rows: some row has two
            continue
        if k:
            at = np.flatnonzero(t)                       # start, end, start, end, ... by row
            row = at // (N + 1)
            col = (at - row * (N + 1)).astype(np.int32)
            row = row[0::2]
            one_run = one_run and bool((row[1:] != row[:-1]).all())
            pieces.append(((row + x0).astype(np.int32), col[0::2], col[1::2]))
            total += k
    runs = None
    if pieces is not None:
        runs = tuple(np.concatenate([p[k] for p in pieces]) if pieces
                     else np.zeros(0, dtype=np.int32) for k in range(3))
    return _Scan(runs, one_run, new_row, new_col)


def _grid_of_scan(a: np.ndarray, scan: _Scan) -> _Grid:
    rows, cols = np.flatnonzero(scan.new_row), np.flatnonzero(scan.new_col)
    N = a.shape[0]
    return _Grid(N, np.append(rows, N), np.append(cols, N), a[np.ix_(rows, cols)])


def _analyse(a: np.ndarray, read_only: bool) -> _Rep:
    """The description :class:`Mask` keeps for the array ``a``: *runs* if every row is one run
    (or none), else the *grid* if it is small, else *runs* if they are few, else *bits*. The
    choice depends only on the entries (so equal masks get descriptions of one kind)."""
    N = a.shape[0]
    scan = _scan(a, _runs_budget(N))
    if scan.one_run:
        return _Runs(N, *scan.runs)
    if int(scan.new_row.sum()) * int(scan.new_col.sum()) <= _grid_budget(N):
        return _grid_of_scan(a, scan)
    if scan.runs is not None:
        return _Runs(N, *scan.runs)
    return _Bits.of(a, read_only)


def _of_grid(grid: _Grid) -> _Rep:
    """The description :func:`_analyse` would choose for the mask ``grid`` describes (``grid``
    canonical), made from the grid without reading an ``N x N`` array."""
    N, tiles = grid.N, grid.tiles
    R = tiles.shape[0]
    heights = np.diff(grid.row_edges)
    padded = np.zeros((R, tiles.shape[1] + 2), dtype=bool)
    padded[:, 1:-1] = tiles
    g, col = np.nonzero(padded[:, 1:] != padded[:, :-1])   # per grid row: start, end, ...
    per_grid_row = np.bincount(g[0::2], minlength=R)        # its runs (the same in its rows)
    if per_grid_row.max() > 1:
        if tiles.size <= _grid_budget(N):
            return grid
        if int(per_grid_row @ heights) > _runs_budget(N):
            return _Bits.of(grid.to_array(), False)
    # the runs of grid row r, repeated for each of its rows
    starts, ends = grid.col_edges[col[0::2]], grid.col_edges[col[1::2]]
    first = np.searchsorted(g[0::2], np.arange(R))          # its first run
    of_row = np.repeat(np.arange(R), heights)               # the grid row of each row
    count = per_grid_row[of_row]
    K = int(count.sum())
    before = np.cumsum(count) - count
    take = np.repeat(first[of_row], count) + (np.arange(K) - np.repeat(before, count))
    return _Runs(N, np.repeat(np.arange(N), count), starts[take], ends[take])


def _grid(N: int, blocks: np.ndarray, b_r: int, b_c: int) -> _Grid:
    """The canonical grid of the mask that is ``blocks[I, J]`` on block ``(I, J)``: neighbouring
    equal rows (columns) of blocks merged."""
    keep_r = np.concatenate(([True], (blocks[1:] != blocks[:-1]).any(axis=1)))
    keep_c = np.concatenate(([True], (blocks[:, 1:] != blocks[:, :-1]).any(axis=0)))
    row_edges = np.append(np.flatnonzero(keep_r) * b_r, N)
    col_edges = np.append(np.flatnonzero(keep_c) * b_c, N)
    return _Grid(N, row_edges, col_edges, blocks[np.ix_(keep_r, keep_c)])


# Read-only arrays seen before, by identity, with their description; an entry goes when its
# array does.
_KNOWN: dict[int, tuple[weakref.ref, _Rep]] = {}


def _known(arr: np.ndarray) -> _Rep | None:
    entry = _KNOWN.get(id(arr))
    if entry is None or entry[0]() is not arr:
        return None
    return entry[1]


def _remember(arr: np.ndarray, rep: _Rep) -> None:
    key = id(arr)

    def forget(ref, key=key):
        if _KNOWN.get(key, (None,))[0] is ref:
            _KNOWN.pop(key, None)

    _KNOWN[key] = (weakref.ref(arr, forget), rep)


def _describe(arr: np.ndarray, structured: bool = True) -> tuple[_Rep, bool]:
    """The description of the checked array ``arr``, and whether ``arr`` is read-only (then a
    :class:`Mask` keeps it as its array)."""
    read_only = _read_only(arr)
    if not structured:
        return _Bits.of(arr, read_only), read_only
    if read_only:
        rep = _known(arr)
        if rep is None:
            rep = _analyse(arr, True)
            _remember(arr, rep)
        return rep, True
    _KNOWN.pop(id(arr), None)             # made writable since: forget what it was
    return _analyse(arr, False), False


def _publish(mask: Mask) -> np.ndarray:
    """The array of ``mask``, new and read-only for good (a view of a read-only buffer, which
    NumPy will not make writable), known with the mask's description."""
    a = mask._rep.to_array()
    a.flags.writeable = False
    out = np.frombuffer(memoryview(a), dtype=bool).reshape(mask.N, mask.N)
    _remember(out, mask._rep)
    return out


# ------------------------------------------------------------------------------------- Mask
class Mask:
    """A validated attention mask (immutable), with its block structure at any block shape.

    Plans carry a ``Mask``; two are equal when their entries are. ``Mask(array)`` checks the
    array (as :func:`as_mask`) and reads it once (see the module's "How an array is read");
    ``structured=False`` keeps it entry by entry instead, for a reference that takes the
    generic path. The structured constructors :meth:`causal`, :meth:`sliding_window`,
    :meth:`from_blocks` and :meth:`block_sparse` make a mask from its structure alone, with no
    ``N x N`` array; :meth:`of` is what the entry points call on their ``mask`` argument.

    A mask that is a band about the diagonal, ``i - a <= j <= i + b`` (:attr:`band`), is
    recognised, and among the bands the causal mask (lower triangle, ``j <= i``) and its
    transpose (``j >= i``, :attr:`triangle`): the algorithms' masked costs use the closed forms
    this structure allows (:func:`band_sums`). For row block ``[r0, r1]`` and column block
    ``[c0, c1]`` (inclusive ends) of the band, the block has a True entry iff ``c0 <= r1 + b``
    and ``c1 >= r0 - a``, and is all True iff ``c0 >= r1 - a`` and ``c1 <= r0 + b``.

    Attributes
    ----------
    array : numpy.ndarray
        The boolean ``(N, N)`` mask, read-only; True = attend. The caller's array when that was
        read-only, else built on demand from the mask's description.
    excluded : numpy.ndarray
        Its complement (True = masked out), read-only: what a partly filled block sets to
        ``-inf``.
    N : int
    triangle : str or None
        ``"lower"`` for the causal mask, ``"upper"`` for its transpose, else None.
    band : (int, int) or None
        ``(a, b)`` when row ``i`` attends exactly to the keys ``i - a <= j <= i + b`` (``0 <= a,
        b < N``): ``(N - 1, 0)`` for the causal mask, ``(w - 1, 0)`` for a sliding window of
        ``w < N`` keys, ``(0, N - 1)`` and ``(0, w - 1)`` for their transposes; else None.
    """

    __slots__ = ("N", "triangle", "band", "_rep", "_array", "_excluded", "_T", "_hash")

    def __init__(self, mask, N: int | None = None, *, structured: bool = True):
        structured = as_flag(structured, "structured")
        if isinstance(mask, Mask):
            if N is not None and mask.N != N:
                raise ValueError(f"mask must have shape (N, N) = ({N}, {N}), got "
                                 f"({mask.N}, {mask.N})")
            rep, arr = mask._rep, mask._array
            if not structured and not isinstance(rep, _Bits):
                arr = mask.array
                rep = _Bits.of(arr, True)
        else:
            arr = _checked(mask, N)
            rep, read_only = _describe(arr, structured)
            if not read_only:
                arr = None
        self._init(rep, arr)

    def _init(self, rep: _Rep, array: np.ndarray | None) -> None:
        self.N = rep.N
        self.triangle = rep.triangle
        self.band = rep.band
        self._rep = rep
        self._array = array
        self._excluded = None
        self._T: Mask | None = None
        self._hash: int | None = None

    @classmethod
    def _of_rep(cls, rep: _Rep, array: np.ndarray | None = None) -> Mask:
        self = cls.__new__(cls)
        self._init(rep, array)
        return self

    @classmethod
    def of(cls, mask, N: int | None = None) -> Mask | None:
        """``mask`` as a ``Mask`` for ``N`` queries and keys: None stays None, a ``Mask`` of
        that size is returned as it is (with the blocks it has computed), anything else is
        checked and read by ``Mask(mask, N)``."""
        if mask is None or (isinstance(mask, Mask) and (N is None or mask.N == N)):
            return mask
        return cls(mask, N)

    @staticmethod
    def causal(N: int, lower: bool = True) -> Mask:
        """The causal mask of :func:`causal` (``lower=False``: its transpose) as a ``Mask``
        whose blocks come from the indices and whose array is built only on demand: no pass
        over ``N^2`` entries, so fast at any ``N``. Equal to ``Mask(causal(N))``; the same
        object for the same arguments (cached, with its blocks).

        >>> Mask.causal(4) == Mask(causal(4)), Mask.causal(4).T == Mask(causal(4).T)
        (True, True)
        """
        N = as_count(N, "N")
        return _triangle(N, as_flag(lower, "lower") or N == 1)

    @staticmethod
    def sliding_window(N: int, w: int) -> Mask:
        """The mask of :func:`sliding_window` (query ``i`` attends to keys ``i - w < j <= i``)
        from its structure, with no ``N x N`` array; equal to ``Mask(sliding_window(N, w))``.

        >>> Mask.sliding_window(6, 2) == Mask(sliding_window(6, 2)), Mask.sliding_window(6, 6)
        (True, Mask(N=6, 21 of 36 entries True))
        """
        return _window(as_count(N, "N"), as_count(w, "w"))

    @staticmethod
    def from_blocks(blocks, block, N: int) -> Mask:
        """The mask of :func:`from_blocks` (True exactly on the True blocks of ``blocks``) from
        the block mask alone, with no ``N x N`` array; equal to ``Mask(from_blocks(...))``.

        >>> m = Mask.from_blocks([[True, False], [False, True]], 2, 3)
        >>> m == Mask(from_blocks(np.array([[True, False], [False, True]]), 2, 3)), m.density
        (True, 0.5555555555555556)
        """
        N = as_count(N, "N")
        b_r, b_c = _pair(block)
        arr = np.asarray(blocks)
        shape = (-(-N // b_r), -(-N // b_c))
        if arr.dtype != np.bool_ or arr.shape != shape:
            raise ValueError(f"blocks must be a boolean array of shape {shape} for N = {N} and "
                             f"{b_r}x{b_c} blocks, got dtype {arr.dtype} and shape {arr.shape}")
        return Mask._of_rep(_of_grid(_grid(N, arr, b_r, b_c)))

    @staticmethod
    def block_sparse(N: int, block, density: float, *, seed: int = 0) -> Mask:
        """The mask of :func:`block_sparse` (the same blocks for the same arguments) with no
        ``N x N`` array; equal to ``Mask(block_sparse(N, block, density, seed=seed))``."""
        N = as_count(N, "N")
        b_r, b_c = _pair(block)
        density = _density(density)
        T_r, T_c = -(-N // b_r), -(-N // b_c)
        chosen = np.random.default_rng(seed).permutation(T_r * T_c) < round(density * T_r * T_c)
        return Mask.from_blocks(chosen.reshape(T_r, T_c), (b_r, b_c), N)

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            if self._T is not None and self._T._array is not None:
                a = self._T._array.T
            else:
                a = self._rep.to_array()
                a.flags.writeable = False
            self._array = a
        return self._array

    @property
    def excluded(self) -> np.ndarray:
        if self._excluded is None:
            if self._T is not None and self._T._excluded is not None:
                self._excluded = self._T._excluded.T
            else:
                self._excluded = ~self.array
                self._excluded.flags.writeable = False
        return self._excluded

    def blocks(self, b_r: int, b_c: int) -> Blocks:
        """The mask at ``b_r x b_c`` block granularity (computed once per block shape, from the
        mask's description: ``O(T_r T_c)`` for the causal mask, see the module for the rest)."""
        return self._rep.blocks(int(b_r), int(b_c))

    @property
    def T(self) -> Mask:
        """The transposed mask (keys by queries), for products that read ``P^T`` or ``dS^T``."""
        if self._T is None:
            rep = self._rep.transposed()
            if rep is self._rep:                  # symmetric (the 1 x 1 causal mask)
                self._T = self
            else:
                self._T = Mask._of_rep(rep)
                self._T._T = self
        return self._T

    @property
    def attending(self) -> np.ndarray:
        """``attending[i]``: whether query ``i`` attends to any key (its row has a True)."""
        return self._rep.row_counts() > 0

    @property
    def density(self) -> float:
        """Fraction of True entries."""
        return self._true() / (self.N * self.N)

    def _true(self) -> int:
        if self.band is not None:     # sum of min(N, i + b + 1) - max(0, i - a) over the rows
            N, (a, b) = self.N, self.band
            return N * (N - 1) // 2 + N * (b + 1) - b * (b + 1) // 2 - (N - a) * (N - a - 1) // 2
        return int(self._rep.row_counts().sum())

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mask):
            return NotImplemented
        if self is other or self._rep is other._rep:
            return True
        if self.N != other.N:
            return False
        if self.band is not None and other.band is not None:
            return self.band == other.band
        same = self._rep.same(other._rep)
        if same is not None:
            return same
        if not np.array_equal(self._rep.row_counts(), other._rep.row_counts()):
            return False
        return bool(np.array_equal(self.array, other.array))

    def __hash__(self) -> int:
        if self._hash is None:              # equal masks have as many True entries
            self._hash = hash((self.N, self._true()))
        return self._hash

    def __repr__(self) -> str:
        return f"Mask(N={self.N}, {self._true()} of {self.N * self.N} entries True)"


@functools.lru_cache(maxsize=8)
def _triangle(N: int, lower: bool) -> Mask:
    return Mask._of_rep(_triangle_rep(N, lower))


def _window(N: int, w: int) -> Mask:
    if w >= N:
        return _triangle(N, True)
    return Mask._of_rep(_band_rep(N, w - 1, 0))


def block_mask(mask, B_r: int, B_c: int) -> np.ndarray:
    """The block mask of ``mask`` for ``B_r x B_c`` blocks: ``[I, J]`` is True when block
    ``(I, J)`` of ``S`` has any True entry, shape ``(ceil(N / B_r), ceil(N / B_c))``."""
    m = mask if isinstance(mask, Mask) else Mask(mask)
    return m.blocks(as_count(B_r, "B_r"), as_count(B_c, "B_c")).nonempty.copy()


def causal(N: int) -> np.ndarray:
    """The causal mask: query ``i`` attends to keys ``j <= i`` (lower triangle, diagonal
    included). Read-only (``.copy()`` for a writable one) and known to be causal: a
    :class:`Mask` made from it (as every algorithm's plan makes) reads none of its entries and
    finds its blocks from the indices; :meth:`Mask.causal` is the same mask without the
    ``N x N`` array.

    >>> a = causal(3)
    >>> a.astype(int).tolist(), a.flags.writeable
    ([[1, 0, 0], [1, 1, 0], [1, 1, 1]], False)
    """
    return _publish(Mask.causal(as_count(N, "N")))


def sliding_window(N: int, w: int) -> np.ndarray:
    """Causal local attention: query ``i`` attends to the ``w`` keys ``i - w < j <= i``.
    Read-only, with its structure known (:meth:`Mask.sliding_window`)."""
    return _publish(Mask.sliding_window(N, w))


def from_blocks(blocks, block, N: int) -> np.ndarray:
    """The element mask that is True exactly on the True blocks of ``blocks``. Read-only, with
    its structure known (:meth:`Mask.from_blocks`).

    Parameters
    ----------
    blocks : array_like of bool, shape ``(ceil(N / b_r), ceil(N / b_c))``
        The block mask; True = the block is attended to.
    block : int or (int, int)
        The block shape ``(b_r, b_c)`` (an int for square blocks).
    N : int
        Sequence length; the last blocks are cut to fit.
    """
    return _publish(Mask.from_blocks(blocks, block, N))


def block_sparse(N: int, block, density: float, *, seed: int = 0) -> np.ndarray:
    """A random block-sparse mask: ``round(density T_r T_c)`` of the ``T_r x T_c`` blocks of
    shape ``block`` are True, chosen uniformly (``density`` is the ``s`` of [FA]_ Proposition 4).
    Read-only, with its structure known (:meth:`Mask.block_sparse`)."""
    return _publish(Mask.block_sparse(N, block, density, seed=seed))


def _density(density) -> float:
    """``density`` checked: a real number in ``[0, 1]`` (not a bool, not a string)."""
    if isinstance(density, bool) or not isinstance(density, numbers.Real):
        raise TypeError(f"density must be a number in [0, 1], got {density!r} "
                        f"({type(density).__name__})")
    if not 0 <= density <= 1:                  # False for NaN too
        raise ValueError(f"density must lie in [0, 1], got {density!r}")
    return float(density)


def _pair(block) -> tuple[int, int]:
    if isinstance(block, (int, np.integer)) and not isinstance(block, bool):
        block = (block, block)
    try:
        b_r, b_c = block
    except (TypeError, ValueError):
        raise TypeError(f"block must be an int or a pair (b_r, b_c), got {block!r}") from None
    return as_count(b_r, "b_r"), as_count(b_c, "b_c")


# ----------------------------------------------------------------------------- rectangular
class RectMask:
    """A validated, immutable mask of ``N_q`` query rows against ``N_k`` keys, ``N_q != N_k``:
    rectangular attention (a chunk of new queries against a cache of keys, see
    :func:`causal_chunk`). It offers what the algorithms consult in a plan's mask, as
    :class:`Mask` does: :meth:`blocks`, :attr:`excluded`, :attr:`attending`, and ``band = None``
    (its costs are the sums over its blocks). The array is read once; the blocks at each shape
    are counted from it once and remembered. Reading it costs no I/O, as for :class:`Mask`.

    Parameters
    ----------
    mask : array_like of bool, shape ``(N_q, N_k)``
        True where query ``i`` attends to key ``j``.
    N_q, N_k : int, optional
        The shape the mask must have (a ``ValueError`` naming it otherwise).
    """

    band = None

    def __init__(self, mask, N_q: int | None = None, N_k: int | None = None):
        try:
            arr = np.asarray(mask)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"mask must be a boolean N_q x N_k array: {exc}") from None
        if arr.dtype != np.bool_:
            raise ValueError(f"mask must be a boolean array (True = attend), got dtype "
                             f"{arr.dtype}")
        if N_q is not None and arr.shape != (N_q, N_k):
            raise ValueError(f"mask must have shape (N_q, N_k) = ({N_q}, {N_k}), got "
                             f"{arr.shape}")
        if arr.ndim != 2 or arr.size == 0:
            raise ValueError(f"mask must be a non-empty N_q x N_k array, got shape {arr.shape}")
        self._array = arr.copy()
        self._array.flags.writeable = False
        self.N, self.N_k = arr.shape
        self._blocks: dict = {}

    @classmethod
    def causal_chunk(cls, N_q: int, N_k: int) -> RectMask:
        """The mask of :func:`causal_chunk` (``N_q != N_k``)."""
        return cls(_chunk_array(N_q, N_k))

    @property
    def shape(self) -> tuple[int, int]:
        """``(N_q, N_k)``."""
        return self.N, self.N_k

    @property
    def array(self) -> np.ndarray:
        """The boolean ``(N_q, N_k)`` mask, read-only; True = attend."""
        return self._array

    @functools.cached_property
    def excluded(self) -> np.ndarray:
        """``~array``: True where the score is masked out."""
        out = ~self._array
        out.flags.writeable = False
        return out

    @property
    def attending(self) -> np.ndarray:
        """Per query row, whether it attends to any key."""
        return self._array.any(axis=1)

    def blocks(self, b_r: int, b_c: int) -> Blocks:
        """The mask at ``b_r x b_c`` blocks (sides past the shape cut to it), remembered."""
        key = (min(int(b_r), self.N), min(int(b_c), self.N_k))
        if key not in self._blocks:
            b_r, b_c = key
            rows, cols = block_sizes(self.N, b_r), block_sizes(self.N_k, b_c)
            counts = np.add.reduceat(self._array.astype(np.int64),
                                     np.arange(0, self.N, b_r), axis=0)
            counts = np.add.reduceat(counts, np.arange(0, self.N_k, b_c), axis=1)
            self._blocks[key] = Blocks(counts > 0, counts == np.outer(rows, cols), rows, cols)
        return self._blocks[key]

    def density(self) -> float:
        """The fraction of entries that are True."""
        return int(self._array.sum()) / self._array.size

    def __repr__(self) -> str:
        return (f"RectMask(N_q={self.N}, N_k={self.N_k}, {int(self._array.sum())} of "
                f"{self._array.size} entries True)")


def _chunk_array(N_q: int, N_k: int) -> np.ndarray:
    N_q, N_k = as_count(N_q, "N_q"), as_count(N_k, "N_k")
    if N_q > N_k:
        raise ValueError(f"a chunk at the end of a cache has at most as many queries as the "
                         f"cache has keys (its own among them): N_q = {N_q} > N_k = {N_k}")
    i = np.arange(N_q)[:, None]
    out = np.arange(N_k)[None, :] <= N_k - N_q + i
    out.flags.writeable = False
    return out


def causal_chunk(N_q: int, N_k: int) -> np.ndarray:
    """The causal mask of a chunk of ``N_q`` new queries at the end of a cache of ``N_k`` keys
    (the chunk's own keys are the cache's last ``N_q``): query ``i`` attends to the keys
    ``j <= N_k - N_q + i``. The last ``N_q`` rows of :func:`causal` ``(N_k)``; equal to it when
    ``N_q = N_k`` (a prefill), one row of ``True`` when ``N_q = 1`` (a decoding step sees the
    whole cache). Chunked prefill and the verification step of speculative decoding use it.
    Read-only.

    >>> causal_chunk(2, 4).astype(int).tolist()
    [[1, 1, 1, 0], [1, 1, 1, 1]]
    """
    return _chunk_array(N_q, N_k)


def mask_of(mask, N: int, N_k: int | None = None):
    """The mask an algorithm's plan carries for ``N`` queries against ``N_k`` keys (``N`` by
    default): None for None; :meth:`Mask.of` when ``N_k = N`` (square attention, as before);
    a :class:`RectMask` otherwise, ``mask`` itself when it is one of that shape. A
    ``ValueError`` naming the shape the mask must have."""
    if N_k is None or N_k == N:
        if isinstance(mask, RectMask):
            raise ValueError(f"mask must have shape (N, N) = ({N}, {N}), got {mask.shape}")
        return Mask.of(mask, N)
    if mask is None:
        return None
    if isinstance(mask, RectMask):
        if mask.shape != (N, N_k):
            raise ValueError(f"mask must have shape (N_q, N_k) = ({N}, {N_k}), got "
                             f"{mask.shape}")
        return mask
    if isinstance(mask, Mask):
        raise ValueError(f"mask must have shape (N_q, N_k) = ({N}, {N_k}), got "
                         f"({mask.N}, {mask.N})")
    return RectMask(mask, N, N_k)
