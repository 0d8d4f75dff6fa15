"""Blocked matrix multiplication with the outer-product schedule: the building block.

``C = A @ B`` with ``A`` of shape ``(m, k)`` and ``B`` of shape ``(k, n)``. Each ``b_r x b_c``
tile of ``C`` stays in the cache while matching column strips of ``A`` and row strips of ``B``
stream past it, ``L`` columns (rows) at a time; the tile is then written once. Streaming in
chunks of ``L`` instead of one rank-1 update at a time moves exactly the same entries, so the
I/O is

    k * (m * ceil(n / b_c) + n * ceil(m / b_r)) + m * n,

about ``2mnk/b + mn`` for square tiles of side ``b``. The default tile is the largest square with
``b**2 + 2b <= M`` (one tile plus one column of ``A`` and one row of ``B``),
``b = floor(sqrt(M + 1)) - 1``, reshaped by :func:`best_tile` so that ``ceil`` wastes little; the
cost approaches the ``2mnk/sqrt(M) + mn`` of [COSMA]_.

The same tiled loop, with hooks, computes the two products of square-tiling attention and the two
of standard attention. Given a mask (:mod:`ioattn.masks`) it computes only the tiles of ``C`` the
mask needs, or reads only the strips of ``A`` it needs; :func:`product_io` is the exact cost of
either, a sum over the mask's blocks.

References
----------
.. [COSMA] G. Kwasniewski et al., "Red-blue pebbling revisited: near optimal parallel matrix-matrix
   multiplication", SC 2019 (the outer-product schedule and Q >= 2mnk/sqrt(M) + mn).
.. [SLLG] T. M. Smith, B. Lowery, J. Langou, R. A. van de Geijn, "A tight I/O lower bound for
   matrix multiplication", arXiv:1702.02017 (leading term 2mnk/sqrt(M)).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, ClassVar

import numpy as np

from .._validate import as_count, as_matrix
from ..masks import band_sums
from ..memory import IOCount, SlowArray, TwoLevelMemory
from .base import ceil_div, imax, imin, isqrt

__all__ = ["MatmulPlan", "MatmulResult", "plan_matmul", "matmul_cost", "run_matmul",
           "best_tile", "outer_product_side", "product_io", "products_io", "strip_width",
           "tiled_product"]


def outer_product_side(M: int, extra_per_row: int = 0) -> int:
    """Side ``b`` of the largest square tile with ``b**2 + (2 + extra_per_row) * b <= M``.

    ``extra_per_row`` reserves that many entries per tile row for row statistics. Zero when no
    tile fits. ``M`` may be an integer array (elementwise).
    """
    c = 2 + extra_per_row
    # b**2 + c*b <= M  <=>  (2b + c)**2 <= 4M + c**2
    return imax(0, (isqrt(4 * M + c * c) - c) // 2)


def best_tile(m: int, n: int, M: int, extra_per_row: int = 0) -> tuple[int, int]:
    """The output tile ``(b_r, b_c)`` the outer-product schedule uses for an ``m x n`` product.

    Start from the largest square (:func:`outer_product_side`); for a number of row tiles near
    ``ceil(m / b)`` make the rows as even as possible and the tile as wide as the cache then allows
    (with one strip of each operand and ``extra_per_row`` entries per row), and the same with the
    roles of rows and columns swapped. Of these, take the tile with the least I/O (then the
    largest). It is never worse than the square and removes most of the loss from ``ceil``.

    ``M`` may be an integer array: then ``b_r`` and ``b_c`` are arrays, the rule applied to each
    ``M`` (``(0, 0)`` where no tile fits).
    """
    if isinstance(M, np.ndarray):
        return _best_tiles(m, n, extra_per_row, int(M[0]), M.size) if _is_range(M) else \
            _best_tile(m, n, M, extra_per_row)
    return _best_tile(m, n, M, extra_per_row)


def _is_range(M: np.ndarray) -> bool:
    return M.ndim == 1 and M.size > 1 and bool((np.diff(M) == 1).all())


@functools.lru_cache(maxsize=16)
def _best_tiles(m: int, n: int, extra_per_row: int, first: int, count: int):
    """:func:`best_tile` for the consecutive ``M`` from ``first`` (kept: the products of square
    tiling and of standard attention, forward and backward, share tiles)."""
    tiles = _best_tile(m, n, np.arange(first, first + count, dtype=np.int64), extra_per_row)
    for t in tiles:
        t.flags.writeable = False
    return tiles


def _best_tile(m, n, M, extra_per_row):
    b = outer_product_side(M, extra_per_row)
    if not isinstance(b, np.ndarray) and b < 1:
        return 0, 0
    e1 = 1 + extra_per_row
    bb = imax(b, 1)                                     # (arrays: where no tile fits, any side)

    def cols_for(b_r):
        return (b_r, imin(n, (M - e1 * b_r) // (b_r + 1)))

    def rows_for(b_c):
        return (imin(m, (M - b_c) // (b_c + e1)), b_c)

    candidates = []                                     # (b_r, b_c, usable)
    for size, fit in ((m, cols_for), (n, rows_for)):
        T0 = ceil_div(size, imin(bb, size))
        for dT in (-1, 0, 1):
            T = imax(1, T0 + dT)
            b_r, b_c = fit(ceil_div(size, T))
            # T0 - 1 < 1 repeats T = 1, which the list holds already: skip it, as range() does
            candidates.append((b_r, b_c, (imin(b_r, b_c) >= 1) & (T0 + dT >= 1)))
    if not isinstance(b, np.ndarray):
        return min(((b_r, b_c) for b_r, b_c, ok in candidates if ok),
                   key=lambda t: (m * ceil_div(n, t[1]) + n * ceil_div(m, t[0]),
                                  -t[0] * t[1], t))
    # the same choice, for every M at once: the least (I/O, -area, b_r, b_c) among usable tiles
    shape = b.shape
    b_r, b_c, ok = (np.stack([np.broadcast_to(t[k], shape) for t in candidates]) for k in range(3))
    ok = ok & (b >= 1)
    # the I/O key is at most 2 m n: in Python ints where that could pass int64
    most = np.iinfo(np.int64).max
    wide = 2 * m * n >= most
    r_, c_ = (b_r.astype(object), b_c.astype(object)) if wide else (b_r, b_c)
    keys = (m * ceil_div(n, np.maximum(c_, 1)) + n * ceil_div(m, np.maximum(r_, 1)),
            -b_r * b_c, b_r, b_c)
    for k, key in enumerate(keys):                      # lexicographic least, one key at a time
        key = np.where(ok, key, 2 * m * n + 1 if k == 0 and wide else most)
        ok &= key == key.min(axis=0)
    pick = np.argmax(ok, axis=0)[None]
    fits = b >= 1
    return (np.where(fits, np.take_along_axis(b_r, pick, 0)[0], 0),
            np.where(fits, np.take_along_axis(b_c, pick, 0)[0], 0))


def strip_width(b_r: int, b_c: int, M: int, extra_per_row: int = 0) -> int:
    """Columns of ``A`` (rows of ``B``) per strip beside a ``b_r x b_c`` tile: as many as fit."""
    return (M - b_r * b_c - extra_per_row * b_r) // imax(b_r + b_c, 1)


@dataclass(frozen=True)
class MatmulPlan:
    """A ``(m, k) @ (k, n)`` product with ``b_r x b_c`` output tiles and ``L``-wide strips."""

    #: A side past its dimension cuts it into one block, like the dimension itself: what the
    #: costs depend on is the clipped side (``ioattn.api.totals`` groups plans by it).
    clipped: ClassVar[dict] = {"b_r": "m", "b_c": "n", "L": "k"}

    m: int
    k: int
    n: int
    M: int
    b_r: int
    b_c: int
    L: int

    @property
    def footprint(self) -> int:
        """Peak cache use: one output tile plus one strip of each operand (tiles clipped)."""
        r, c, L = imin(self.b_r, self.m), imin(self.b_c, self.n), imin(self.L, self.k)
        return r * c + L * (r + c)

    @property
    def reads(self) -> int:
        """``k (m ceil(n / b_c) + n ceil(m / b_r))``: each tile reads its two strips."""
        return self.k * (self.m * ceil_div(self.n, self.b_c) + self.n * ceil_div(self.m, self.b_r))

    @property
    def writes(self) -> int:
        """``m n``: each tile is written once."""
        return self.m * self.n

    @property
    def reads_bound(self) -> Fraction:
        """``k (m (n / b_c + 1) + n (m / b_r + 1))``: :attr:`reads` without ceilings, an upper
        bound since ``ceil(x) <= x + 1``."""
        m, k, n = self.m, self.k, self.n
        return k * (m * (Fraction(n, self.b_c) + 1) + n * (Fraction(m, self.b_r) + 1))


def products_io(*plans: MatmulPlan) -> tuple[int, int]:
    """Total (reads, writes) of several tiled products."""
    return sum(p.reads for p in plans), sum(p.writes for p in plans)


_REMEMBERED: contextvars.ContextVar = contextvars.ContextVar("products", default=None)


@contextlib.contextmanager
def remembered_products():
    """Within the block, :func:`product_io` under a mask remembers its answers, by the product's
    clipped tiles and the mask's identity (the masks stay alive in the keys, so an identity is
    never reused): one product recurs in many plans when ``ioattn.api.totals`` costs a range of
    ``M``."""
    token = _REMEMBERED.set({})
    try:
        yield
    finally:
        _REMEMBERED.reset(token)


def product_io(plan: MatmulPlan, *, c_mask=None, a_mask=None, stats: int = 0
               ) -> tuple[int, int, int]:
    """Exact ``(reads, writes, peak)`` of :func:`tiled_product` with ``stats`` entries of row
    state per row of a row block (held from ``row_start`` to ``row_end``).

    Dense: ``k (m ceil(n / b_c) + n ceil(m / b_r))`` reads, ``m n`` writes, peak ``footprint +
    stats r``. With ``c_mask`` only the nonempty ``b_r x b_c`` tiles ``(I, J)`` of ``C`` are
    computed: each reads ``k (r_I + c_J)`` and writes ``r_I c_J``. With ``a_mask`` every tile of
    ``C`` is computed but only the nonempty ``b_r x L`` strips ``(I, Λ)`` of ``A`` are read, each
    once per tile of its row block with its strip of ``B``: ``w_Λ (ceil(n / b_c) r_I + n)``
    reads. The peak is the largest working set the mask lets occur. A sum over blocks, no
    simulation; under a band (the causal mask, a sliding window, their transposes:
    :attr:`~ioattn.masks.Mask.band`) a closed form (:func:`_band_product_io`).
    """
    memo = _REMEMBERED.get()
    if memo is None or (c_mask is None and a_mask is None):
        return _product_io(plan, c_mask=c_mask, a_mask=a_mask, stats=stats)
    m, k, n = plan.m, plan.k, plan.n
    key = (m, k, n, min(plan.b_r, m), min(plan.b_c, n), min(plan.L, k), stats, id(c_mask),
           id(a_mask))
    if key not in memo:
        memo[key] = (_product_io(plan, c_mask=c_mask, a_mask=a_mask, stats=stats),
                     c_mask, a_mask)
    return memo[key][0]


def _product_io(plan: MatmulPlan, *, c_mask=None, a_mask=None, stats: int = 0
                ) -> tuple[int, int, int]:
    """:func:`product_io`, computed."""
    m, k, n = plan.m, plan.k, plan.n
    if c_mask is None and a_mask is None:
        return plan.reads, plan.writes, plan.footprint + stats * imin(plan.b_r, m)
    if (c_mask if c_mask is not None else a_mask).band is not None:
        return _band_product_io(plan, c_mask, a_mask, stats)
    if c_mask is not None:
        blocks = c_mask.blocks(plan.b_r, plan.b_c)
        act, r, c = blocks.nonempty, blocks.rows, blocks.cols
        reads = k * (int(act.sum(axis=1) @ r) + int(act.sum(axis=0) @ c))
        w = min(plan.L, k)
        peak = blocks.largest(lambda r_, c_: (stats + c_ + w) * r_ + w * c_, stats * int(r[0]))
        return reads, blocks.entries(), peak
    blocks = a_mask.blocks(plan.b_r, plan.L)
    act, r, w = blocks.nonempty, blocks.rows, blocks.cols
    reads = ceil_div(n, plan.b_c) * blocks.entries() + n * int(act.sum(axis=0) @ w)
    # the widest strip each row block reads: every strip but the last is w[0] wide
    widest = np.where(act[:, -1], w[-1], 0)
    if len(w) > 1:
        widest = np.where(act[:, :-1].any(axis=1), w[0], widest)
    c0 = min(plan.b_c, n)
    peak = int(((stats + c0 + widest) * r + widest * c0).max())
    return reads, m * n, peak


def _band_product_io(plan: MatmulPlan, c_mask, a_mask, stats: int) -> tuple[int, int, int]:
    """:func:`product_io` under a band mask (:attr:`~ioattn.masks.Mask.band`: the causal mask,
    a sliding window, their transposes) on ``C`` (``c_mask``) or on ``A`` (``a_mask``), in
    closed form from the block sizes (:func:`~ioattn.masks.band_sums`: Python ints, no array,
    any size). A band holds the diagonal, so block ``(0, 0)``, of the largest sides, is
    nonempty (on ``A``: block row 0, of the most rows, reads the first strip, of the most
    columns).

    ``c_mask``: each nonempty tile reads ``k (r_I + c_J)`` and writes ``r_I c_J``. ``a_mask``:
    each nonempty strip ``(I, Λ)`` is read with its strip of ``B`` once per tile of its row
    block, ``ceil(n / b_c) r_I w_Λ + n w_Λ``; the widest strip of block row 0 is the first, of
    ``min(L, k)`` columns, and block row 0 has the most rows, so it sets the peak. The tests
    check it against a plain boolean mask."""
    m, k, n = plan.m, plan.k, plan.n
    if c_mask is not None:
        t = band_sums(m, plan.b_r, plan.b_c, *c_mask.band)
        w = min(plan.L, k)
        R, C = min(plan.b_r, m), min(plan.b_c, n)
        return k * (t.rows + t.cols), t.entries, max(stats * R, (stats + C + w) * R + w * C)
    t = band_sums(m, plan.b_r, plan.L, *a_mask.band)
    reads = ceil_div(n, plan.b_c) * t.entries + n * t.cols
    R, C, w = min(plan.b_r, m), min(plan.b_c, n), min(plan.L, k)
    return reads, m * n, (stats + C + w) * R + w * C


def plan_matmul(m: int, k: int, n: int, M: int, tile=None) -> MatmulPlan:
    """Tile sizes for ``C = A @ B`` under a cache of ``M`` entries.

    Parameters
    ----------
    m, k, n : int
        ``A`` is ``m x k``, ``B`` is ``k x n``.
    M : int
        Cache size in entries; the default tile needs ``M >= 3``.
    tile : (int, int), optional
        Output tile ``(b_r, b_c)`` instead of the one :func:`best_tile` picks; it needs
        ``M >= b_r*b_c + b_r + b_c``.
    """
    if isinstance(M, np.ndarray) and tile is None:      # the rule for many M (ioattn.api.totals)
        b_r, b_c = best_tile(m, n, M)
        return MatmulPlan(m, k, n, M, b_r, b_c, strip_width(b_r, b_c, M))
    m, k, n, M = (as_count(v, name) for v, name in ((m, "m"), (k, "k"), (n, "n"), (M, "M")))
    if tile is None:
        b_r, b_c = best_tile(m, n, M)
        if b_r < 1:
            raise ValueError(f"matmul needs a cache of at least M = 3 entries; got M = {M}")
    else:
        b_r, b_c = (as_count(v, "tile side") for v in tile)
    L = strip_width(b_r, b_c, M)
    if L < 1:
        raise ValueError(
            f"a {b_r}x{b_c} output tile with one strip of each operand needs "
            f"M >= {b_r * b_c + b_r + b_c} entries; got M = {M}"
        )
    return MatmulPlan(m, k, n, M, b_r, b_c, L)


def matmul_cost(m: int, k: int, n: int, M: int, tile=None) -> IOCount:
    """Exact I/O of :func:`run_matmul` (reads, writes, peak) with no data.

    Proven equal to the simulated count by ``tests/algorithms/test_matmul.py``.
    """
    p = plan_matmul(m, k, n, M, tile)
    return IOCount(reads=p.reads, writes=p.writes, peak=p.footprint)


def tiled_product(
    mem: TwoLevelMemory,
    A: SlowArray,
    B: SlowArray,
    C: SlowArray,
    plan: MatmulPlan,
    *,
    transpose_A: bool = False,
    transpose_B: bool = False,
    row_start: Callable | None = None,
    prepare: Callable | None = None,
    finish: Callable | None = None,
    row_end: Callable | None = None,
    c_mask=None,
    c_fill: float | None = -np.inf,
    a_mask=None,
    a_fill: float = 0.0,
) -> None:
    """The outer-product schedule, with hooks for the fused steps of attention.

    Row blocks of ``C`` are outermost. ``row_start(i0, i1)`` may allocate per-row state (row
    statistics) and returns it; ``prepare(a, state, first)`` may transform each strip of ``A`` in
    the cache (``first`` is true in the first tile of the row block); ``finish(acc, state, rows,
    cols)`` transforms the finished tile ``C[rows, cols]`` before it is written;
    ``row_end(state, i0, i1)`` stores and frees the state. With ``transpose_B``, ``B`` is stored
    as ``(n, k)``: strips are read from its rows; with ``transpose_A``, ``A`` is stored as
    ``(k, m)``: strips are read from its rows and used transposed in the cache (a view, no
    copy). The I/O is the same either way.

    Masks (:class:`~ioattn.masks.Mask`, free to consult: see :mod:`ioattn.masks`), at most one:

    - ``c_mask``, aligned with ``C``: only the tiles with a True entry are computed and written
      (the others are left as they are); in a partly True tile the masked entries are set to
      ``c_fill`` before ``finish`` (unless it is None). Row hooks still run for every row block.
    - ``a_mask``, aligned with ``A`` as used (``m x k``): only the strips of ``A`` with a True
      entry are read, with their strips of ``B``; in a partly True strip the masked entries are
      set to ``a_fill`` before ``prepare``, so they may hold anything in slow memory (entries a
      sparse product never wrote, say). Every tile of ``C`` is computed and written.

    :func:`product_io` gives the exact count of either.
    """
    m, k, n = plan.m, plan.k, plan.n
    tiles = c_mask.blocks(plan.b_r, plan.b_c) if c_mask is not None else None
    strips = a_mask.blocks(plan.b_r, plan.L) if a_mask is not None else None
    for bi, i0 in enumerate(range(0, m, plan.b_r)):
        i1 = min(i0 + plan.b_r, m)
        state = row_start(i0, i1) if row_start else None
        for bj, j0 in enumerate(range(0, n, plan.b_c)):
            if tiles is not None and not tiles.nonempty[bi, bj]:
                continue
            j1 = min(j0 + plan.b_c, n)
            acc = mem.allocate((i1 - i0, j1 - j0), "C tile")
            for bl, l0 in enumerate(range(0, k, plan.L)):
                if strips is not None and not strips.nonempty[bi, bl]:
                    continue
                l1 = min(l0 + plan.L, k)
                if transpose_A:
                    a_buf = mem.read(A, slice(l0, l1), slice(i0, i1))
                    a = a_buf.T
                else:
                    a = a_buf = mem.read(A, slice(i0, i1), slice(l0, l1))
                if strips is not None and not strips.full[bi, bl]:
                    np.copyto(a, a_fill, where=a_mask.excluded[i0:i1, l0:l1])
                if prepare:
                    prepare(a, state, j0 == 0)
                if transpose_B:
                    b = mem.read(B, slice(j0, j1), slice(l0, l1))
                    acc += a @ b.T
                else:
                    b = mem.read(B, slice(l0, l1), slice(j0, j1))
                    acc += a @ b
                mem.free(a_buf, b)
            rows, cols = slice(i0, i1), slice(j0, j1)
            if tiles is not None and c_fill is not None and not tiles.full[bi, bj]:
                np.copyto(acc, c_fill, where=c_mask.excluded[rows, cols])
            if finish:
                finish(acc, state, rows, cols)
            mem.write(C, acc, rows, cols)
            mem.free(acc)
        if row_end:
            row_end(state, i0, i1)


@dataclass(frozen=True)
class MatmulResult:
    """``output`` (the product), ``io`` (exact counts), ``plan`` and ``trace`` (or None)."""

    output: np.ndarray
    io: IOCount
    plan: MatmulPlan
    trace: list | None = None


def run_matmul(A, B, M: int, *, tile=None, trace: bool = False) -> MatmulResult:
    """Multiply ``A @ B`` through the two-level memory with the outer-product schedule.

    Parameters
    ----------
    A, B : array_like
        Finite floating matrices of shapes ``(m, k)`` and ``(k, n)``.
    M : int
        Cache size in entries.
    tile : (int, int), optional
        Output tile shape (see :func:`plan_matmul`).
    trace : bool
        Record every transfer.

    Returns
    -------
    MatmulResult
        ``.io`` equals :func:`matmul_cost` exactly.
    """
    A = as_matrix(A, "A")
    B = as_matrix(B, "B")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"cannot multiply A of shape {A.shape} by B of shape {B.shape}")
    (m, k), n = A.shape, B.shape[1]
    plan = plan_matmul(m, k, n, M, tile)
    mem = TwoLevelMemory(plan.M, trace=trace, owner="matmul")
    hA, hB, hC = mem.load("A", A), mem.load("B", B), mem.allocate_slow("C", (m, n))
    tiled_product(mem, hA, hB, hC, plan)
    return MatmulResult(mem.fetch(hC), mem.io, plan, mem.trace)
