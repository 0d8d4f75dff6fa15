"""Paged and split-K decoding (FlashDecoding), counted exactly in the two-level memory.

The model (shared with the GPU kernel, whose emulator count must equal :func:`decoding_cost`):
``H_q`` query heads share ``H_kv`` key/value heads (``g = H_q / H_kv``); each query head has
``N_q`` rows (``N_q = 1`` is a decoding step, a few rows a speculation or a prefill chunk); each
key/value head a cache of ``N_k`` rows; head dimension ``d``; ``batch`` independent sequences of
the same sizes.

Units (``grouping=``): ``"stacked"``, one unit per key/value head, its ``g`` query heads' rows
stacked position-major (:func:`ioattn.inference.stack_group`), ``R = g N_q`` rows; ``"per_head"``,
one unit per query head, ``R = N_q`` rows against key/value head ``h // g``.

Row groups: the ``R`` rows of a unit are cut into ``G = ceil(R / B_r)`` groups of ``B_r`` rows
(``1 <= B_r <= R``), group ``r`` the rows ``[r B_r, min((r + 1) B_r, R))``, the last one
ragged; each group runs as a unit of its own (its query rows, every tile of its splits, its
output or partials, its merge). ``B_r = R`` (the default) is one group: the schedule below.

Tiles and splits: ``T = ceil(N_k / B_c)`` key tiles, tile ``t`` the keys ``[t B_c, min((t + 1)
B_c, N_k))``; ``S`` splits (``1 <= S <= T``), split ``s`` the next
:func:`ioattn.parallel.layout.shares` ``(T, S)[s]`` tiles in order.

Pages: page size ``P_s`` (``None``: a contiguous cache). Page ``p`` holds the rows ``[p P_s,
min((p + 1) P_s, N_k))``. A tile reads every page that overlaps it whole (all of that page's rows
of ``K`` and of ``V``) and one block-table entry per page it reads; with ``P_s = None`` it reads
exactly its own rows.

Counted, per row group of ``R_r`` rows and split: reads ``R_r d`` (its queries) plus, over its
tiles, ``2d`` times the rows of the pages read plus the pages read; writes ``R_r d`` (``S = 1``:
``O``) or ``R_r (d + 2)`` (``S > 1``: the partial ``O`` normalised by its own ``l``, its ``m`` and
``l``). When ``S > 1`` a merge per row group reads the ``S R_r (d + 2)`` partials and writes
``R_r d``. The chunk-causal mask (:func:`ioattn.masks.causal_chunk`) changes no count. Summed
over the tiles (each tile belongs to exactly one split) and the row groups (``sum_r R_r = R``)
this is::

    reads  = batch * units * (S R d + G (2 d W + E) + [S > 1] S R (d + 2)),
    writes = batch * units * (R d + [S > 1] S R (d + 2)),

with ``W`` the page rows all ``T`` tiles read and ``E`` the table entries (:func:`page_reads`;
``W = N_k``, ``E = 0`` without pages, and also ``W = N_k``, ``E = ceil(N_k / P_s)`` when
``P_s`` divides ``B_c``).
Row groups cost only the cache, read ``G`` times: ``(G - 1) (2 d W + E)`` a unit more.

The memory model's peak, from :func:`run_decoding`'s buffers (with ``R`` the ``B_r`` rows of
the largest row group): a split holds ``Q`` and the
accumulator ``O`` (``R d`` each), ``m``, ``l`` and a scratch row maximum (``R`` each), the
tile's table entries ``p_t``, its pages' ``K`` and ``V`` (``2 d w_t``) and the scores of the
tile's own keys (``R c_t``); the merge holds the merged ``O`` and one partial (``R d`` each),
the merged ``m``, ``l``, the partial's ``m``, ``l`` and a scratch (``R`` each)::

    peak = max over tiles of (2 R d + 3 R + p_t + 2 d w_t + R c_t),
           and at least 2 R d + 5 R (the merge) when S > 1.

What the model leaves open, fixed here (the GPU kernel's count, which must equal
:func:`decoding_cost`'s reads and writes, follows the same):

- the last page of a sequence has ``N_k - (ceil(N_k / P_s) - 1) P_s`` rows, as its definition
  says, and a tile that reads it reads only those: the pool's slots past the sequence's end
  are never read (reading the last page as ``P_s`` full rows would add ``2 d (P_s - r)`` a
  tile that reaches it);
- with ``P_s`` given and no block table (:func:`run_decoding` on a contiguous cache), the pages
  lie in order and the identity table is still read, one entry a page a tile: the count does
  not depend on where the pages are;
- the peak is the memory model's (the buffers above); the GPU kernel may ignore it;
- :func:`run_decoding` takes ``N_k`` beside the block table, since a page pool does not say
  how much of a sequence's last page is used.

References
----------
.. [FD] T. Dao, D. Haziza, F. Massa, G. Sizov, "Flash-Decoding for long-context inference",
   PyTorch blog, 2023 (split-K decoding: the cache split across thread blocks, partial results
   merged by log-sum-exp).
.. [PA] W. Kwon et al., "Efficient memory management for large language model serving with
   PagedAttention", SOSP 2023 (a paged cache found through a block table).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import NamedTuple

import numpy as np

from ._validate import as_count, as_flag, as_scale
from .algorithms.base import divide_rows
from .api import collector_paused
from .inference import _group, _grouping, _heads, stack_group, unstack_group
from .masks import floor_sum
from .memory import IOCount, TwoLevelMemory
from .parallel.layout import shares

__all__ = ["DecodingPlan", "DecodingPrediction", "DecodingResult", "TERMS", "decoding_cost",
           "decoding_flops", "decoding_plan", "decoding_predict", "decoding_terms", "page_reads",
           "row_groups", "run_decoding", "split_tiles", "tile_pages"]


# ------------------------------------------------------------------------------ checks
def _page_size(P_s) -> int | None:
    return None if P_s is None else as_count(P_s, "P_s")


def _sizes(H_q, H_kv, N_q, N_k, d, grouping):
    """``(H_q, H_kv, g, N_q, N_k, d, units, R)`` checked."""
    H_q, H_kv, g = _group(H_q, H_kv)
    N_q, N_k, d = as_count(N_q, "N_q"), as_count(N_k, "N_k"), as_count(d, "d")
    stacked = _grouping(grouping) == "stacked"
    return H_q, H_kv, g, N_q, N_k, d, (H_kv if stacked else H_q), (g * N_q if stacked else N_q)


def _row_groups(R: int, B_r) -> tuple[int, int]:
    """``(B_r, G)`` checked: ``1 <= B_r <= R`` (``None``: ``R``), ``G = ceil(R / B_r)``."""
    if B_r is None:
        return R, 1
    B_r = as_count(B_r, "B_r")
    if B_r > R:
        raise ValueError(f"B_r = {B_r} rows a row group, but a unit has only R = {R} query rows: "
                         f"take 1 <= B_r <= {R}")
    return B_r, -(-R // B_r)


def row_groups(R: int, B_r: int) -> list[range]:
    """The rows of each row group: ``ceil(R / B_r)`` groups of ``B_r`` rows, the last ragged.

    >>> [list(r) for r in row_groups(5, 2)]
    [[0, 1], [2, 3], [4]]
    """
    R = as_count(R, "R")
    B_r, G = _row_groups(R, B_r)
    return [range(r * B_r, min((r + 1) * B_r, R)) for r in range(G)]


def _tiles_and_splits(N_k: int, B_c, S) -> tuple[int, int, int]:
    """``(B_c, T, S)`` checked: ``1 <= S <= T = ceil(N_k / B_c)``."""
    B_c, S = as_count(B_c, "B_c"), as_count(S, "S")
    T = -(-N_k // B_c)
    if S > T:
        raise ValueError(f"S = {S} splits need at least S key tiles, but N_k = {N_k} keys make "
                         f"T = ceil(N_k / B_c) = {T} tiles of B_c = {B_c}: take S <= {T} or a "
                         "smaller B_c")
    return B_c, T, S


# ------------------------------------------------------------------------------ tiles, pages
def split_tiles(T: int, S: int) -> list[range]:
    """The tiles of each split: split ``s`` takes the next ``shares(T, S)[s]`` tiles in order.

    >>> [list(r) for r in split_tiles(5, 2)]
    [[0, 1, 2], [3, 4]]
    """
    T, S = as_count(T, "T"), as_count(S, "S")
    if S > T:
        raise ValueError(f"S = {S} splits of T = {T} tiles: S must be at most T")
    o = np.concatenate(([0], np.cumsum(shares(T, S)))).tolist()
    return [range(o[s], o[s + 1]) for s in range(S)]


def tile_pages(t: int, N_k: int, B_c: int, P_s: int | None) -> tuple[range, int, int]:
    """What tile ``t`` reads: ``(pages, w, c)``, the pages it overlaps (``range(0)`` without
    pages), the rows of those pages (``w``; its own rows without pages) and its own rows ``c``.

    >>> tile_pages(1, 10, 4, 3)          # keys 4..7 overlap pages 1 (3..5) and 2 (6..8)
    (range(1, 3), 6, 4)
    >>> tile_pages(2, 10, 4, 3)          # keys 8, 9: pages 2 and 3, the last of one row
    (range(2, 4), 4, 2)
    """
    a, b = t * B_c, min((t + 1) * B_c, N_k)
    if P_s is None:
        return range(0), b - a, b - a
    p0, p1 = a // P_s, (b - 1) // P_s
    w = min((p1 + 1) * P_s, N_k) - p0 * P_s
    return range(p0, p1 + 1), w, b - a


def page_reads(N_k: int, B_c: int, P_s: int | None) -> tuple[int, int]:
    """``(W, E)``: the page rows and the block-table entries all ``T`` tiles read, in closed form.

    Tile ``t`` reads pages ``floor(t B_c / P_s)`` to ``floor((b_t - 1) / P_s)``, ``b_t =
    min((t + 1) B_c, N_k)``, so ``E = T + sum_{t < T - 1} floor((t B_c + B_c - 1) / P_s) +
    floor((N_k - 1) / P_s) - sum_{t < T} floor(t B_c / P_s)`` (floor sums); every page has
    ``P_s`` rows but the last, which has ``r = N_k - (n - 1) P_s`` (``n = ceil(N_k / P_s)``)
    and is read by the ``T - floor((n - 1) P_s / B_c)`` tiles that reach it, so ``W = P_s E -
    (P_s - r) (T - floor((n - 1) P_s / B_c))``. Without pages ``(N_k, 0)``.

    >>> page_reads(10, 4, 3)             # tiles read pages {0,1}, {1,2}, {2,3}
    (16, 6)
    >>> page_reads(12, 4, 2)             # P_s divides B_c: every row once, one entry a page
    (12, 6)
    """
    N_k, B_c, P_s = as_count(N_k, "N_k"), as_count(B_c, "B_c"), _page_size(P_s)
    if P_s is None:
        return N_k, 0
    T = -(-N_k // B_c)
    E = (T + floor_sum(T - 1, P_s, B_c, B_c - 1) + (N_k - 1) // P_s
         - floor_sum(T, P_s, B_c, 0))
    n = -(-N_k // P_s)
    r = N_k - (n - 1) * P_s
    W = P_s * E - (P_s - r) * (T - (n - 1) * P_s // B_c)
    return W, E


def _peak(R: int, d: int, N_k: int, B_c: int, P_s: int | None, S: int) -> int:
    """The memory model's peak (module docstring): the largest tile's working set, and the
    merge's when ``S > 1``. Tiles are visited once per distinct shape: the first
    ``P_s / gcd(B_c, P_s)`` (the offsets ``t B_c mod P_s`` repeat with that period) and those
    that reach the last page or are the last tile."""
    T = -(-N_k // B_c)
    if P_s is None:
        ts = [0]
    else:
        last_page = (-(-N_k // P_s) - 1) * P_s
        ts = set(range(min(T, P_s // gcd(B_c, P_s)))) | set(range(last_page // B_c, T))
    best = 0
    for t in ts:
        pages, w, c = tile_pages(t, N_k, B_c, P_s)
        best = max(best, len(pages) + 2 * d * w + R * c)
    peak = 2 * R * d + 3 * R + best
    return max(peak, 2 * R * d + 5 * R) if S > 1 else peak


# ------------------------------------------------------------------------------ closed form
def decoding_cost(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, *, B_c: int,
                  P_s: int | None = None, S: int = 1, grouping: str = "stacked",
                  batch: int = 1, B_r: int | None = None) -> IOCount:
    """Exact I/O of split-K, paged, grouped decoding, in closed form (the module docstring).

    Parameters
    ----------
    H_q, H_kv : int
        Query heads and key/value heads; ``H_kv`` divides ``H_q``.
    N_q, N_k, d : int
        Query rows per head, cached key/value rows per key/value head, head dimension.
    B_c : int
        Key tile (rows of ``K``, ``V`` per step).
    P_s : int, optional
        Page size in rows; ``None`` for a contiguous cache without a block table.
    S : int
        Splits of the ``T = ceil(N_k / B_c)`` tiles, ``1 <= S <= T``.
    grouping : {"stacked", "per_head"}
        A unit per key/value head with its ``g N_q`` query rows stacked, or one per query head.
    batch : int
        Independent sequences of these sizes.
    B_r : int, optional
        Rows of a row group, ``1 <= B_r <= R``; ``None``: ``R``, one group a unit. The cache is
        read once per row group, ``ceil(R / B_r)`` times a unit.

    Returns
    -------
    IOCount
        ``reads``, ``writes`` (exact Python ints) and the memory model's ``peak`` of
        :func:`run_decoding` (one row group's split or merge at a time).

    Raises
    ------
    TypeError
        For a size that is not an integer (bools are refused).
    ValueError
        For a size below 1, ``H_kv`` not dividing ``H_q``, ``S > T``, ``B_r > R`` or an unknown
        grouping.

    Examples
    --------
    One decoding step of one key/value head with 4 query heads, ``d = 2``, 10 keys in tiles
    of 4 read from pages of 3, in 2 splits; then in row groups of 3 rows (of 3 and 1): the
    cache and the table are read twice, ``2 d W + E = 70`` entries more, and the peak is that
    of 3 rows:

    >>> decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2)
    IOCount(reads=118, writes=40, total=158, peak=70)
    >>> decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2, B_r=3)
    IOCount(reads=188, writes=40, total=228, peak=59)
    """
    t = decoding_terms(H_q, H_kv, N_q, N_k, d, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                       batch=batch, B_r=B_r)
    R = (H_q // H_kv) * N_q if grouping == "stacked" else N_q
    return IOCount(reads=t["Q"] + t["KV"] + t["table"] + t["partial reads"],
                   writes=t["O"] + t["partial writes"],
                   peak=_peak(_row_groups(R, B_r)[0], as_count(d, "d"), N_k, B_c,
                              _page_size(P_s), S))


#: The parts of :func:`decoding_terms`, in the order a unit moves them.
TERMS = ("Q", "table", "KV", "partial writes", "partial reads", "O")


def decoding_terms(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, *, B_c: int,
                   P_s: int | None = None, S: int = 1, grouping: str = "stacked",
                   batch: int = 1, B_r: int | None = None) -> dict[str, int]:
    """:func:`decoding_cost` by what is moved, exact ints keyed by :data:`TERMS`.

    ``"Q"``: ``S R d`` a unit (each split of each row group reads its rows); ``"table"``:
    ``G E``; ``"KV"``: ``2 d G W`` (:func:`page_reads`; ``G = ceil(R / B_r)`` row groups, each
    reading the cache); ``"partial writes"`` and ``"partial reads"``: ``S R (d + 2)`` each when
    ``S > 1``, else 0; ``"O"``: ``R d``; each times ``batch * units``. The reads
    of :func:`decoding_cost` are the first five but ``"partial writes"``, its writes the
    partials written and ``"O"``.

    >>> decoding_terms(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2)
    {'Q': 16, 'table': 6, 'KV': 64, 'partial writes': 32, 'partial reads': 32, 'O': 8}
    """
    H_q, H_kv, g, N_q, N_k, d, units, R = _sizes(H_q, H_kv, N_q, N_k, d, grouping)
    P_s, batch = _page_size(P_s), as_count(batch, "batch")
    B_c, T, S = _tiles_and_splits(N_k, B_c, S)
    _, G = _row_groups(R, B_r)
    W, E = page_reads(N_k, B_c, P_s)
    partials = S * R * (d + 2) if S > 1 else 0
    n = batch * units
    return {"Q": n * S * R * d, "table": n * G * E, "KV": n * G * 2 * d * W,
            "partial writes": n * partials, "partial reads": n * partials, "O": n * R * d}


# ------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class DecodingPlan:
    """The sizes of one decoding run, its key tile ``B_c`` and its row group ``B_r``; ``R``
    rows a unit in ``G`` row groups, ``units`` units a sequence, ``T`` tiles in ``S`` splits,
    page size ``P_s`` (``None``: contiguous). ``B_r`` omitted is ``R``."""

    H_q: int
    H_kv: int
    N_q: int
    N_k: int
    d: int
    M: int
    B_c: int
    P_s: int | None
    S: int
    grouping: str
    B_r: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "B_r", _row_groups(self.R, self.B_r)[0])

    @property
    def g(self) -> int:
        """Query heads a key/value head serves."""
        return self.H_q // self.H_kv

    @property
    def G(self) -> int:
        """Row groups of a unit, ``ceil(R / B_r)``."""
        return -(-self.R // self.B_r)

    @property
    def R(self) -> int:
        """Query rows of one unit: ``g N_q`` stacked, ``N_q`` per head."""
        return self.g * self.N_q if self.grouping == "stacked" else self.N_q

    @property
    def units(self) -> int:
        """Units of one sequence: ``H_kv`` stacked, ``H_q`` per head."""
        return self.H_kv if self.grouping == "stacked" else self.H_q

    @property
    def T(self) -> int:
        """Key tiles, ``ceil(N_k / B_c)``."""
        return -(-self.N_k // self.B_c)

    @property
    def footprint(self) -> int:
        """The memory model's peak of a run (the module docstring)."""
        return _peak(self.B_r, self.d, self.N_k, self.B_c, self.P_s, self.S)

    def cost(self, batch: int = 1) -> IOCount:
        """:func:`decoding_cost` of this plan for ``batch`` sequences."""
        return decoding_cost(self.H_q, self.H_kv, self.N_q, self.N_k, self.d, B_c=self.B_c,
                             P_s=self.P_s, S=self.S, grouping=self.grouping, batch=batch,
                             B_r=self.B_r)


def decoding_plan(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, M: int, *,
                  B_c: int | None = None, P_s: int | None = None, S: int = 1,
                  grouping: str = "stacked", B_r: int | None = None) -> DecodingPlan:
    """The row group and key tile of a decoding run in a cache of ``M`` entries.

    The query rows of a row group stay in the cache for the whole split (they are read once a
    split), so only ``B_c`` is chosen, from the group's real ``B_r`` rows (never as if ``N_q =
    N_k``). Without pages the tile's working set is ``2 B_r d + 3 B_r + (2 d + B_r) B_c``, so
    ``B_c = floor((M - 2 B_r d - 3 B_r) / (2 d + B_r))``. With pages of ``P_s`` rows the rule
    takes the largest multiple of ``P_s`` whose working set fits (aligned tiles read no row
    twice, :func:`page_reads`), and only if none fits the largest ``B_c < P_s`` that does. In
    both cases ``B_c`` is at most ``floor(N_k / S)``, so that ``S`` splits have a tile each,
    and the merge (``2 B_r d + 5 B_r`` when ``S > 1``) must fit too.

    The row group: without ``B_r``, all ``R`` rows of a unit (``G = 1``) when they fit beside
    some tile (``B_c = 1``); else the fewest row groups that fit, ``G = ceil(R / B)`` for the
    largest ``B`` rows that fit beside a tile of one key, balanced as ``B_r = ceil(R / G)`` (no
    more groups, so no more reads of the cache, and the most room left for the tile). Each
    row group reads the cache once (:func:`decoding_cost`), so fewer groups is cheaper. A
    given ``B_c`` without ``B_r`` is checked with all ``R`` rows: a schedule given whole is
    checked, not changed.

    Parameters
    ----------
    H_q, H_kv, N_q, N_k, d : int
        The sizes of :func:`decoding_cost`.
    M : int
        Cache size in entries.
    B_c : int, optional
        A given key tile, checked (``S <= T``, working set ``<= M``) instead of chosen.
    P_s, S, grouping
        As in :func:`decoding_cost`.
    B_r : int, optional
        A given row group, ``1 <= B_r <= R``, checked instead of chosen.

    Returns
    -------
    DecodingPlan

    Raises
    ------
    ValueError
        When not even one query row fits beside a key tile in ``M`` (the message says how much
        one needs), when ``S > N_k``, ``B_r > R``, or when a given ``B_c`` or ``B_r`` does not
        fit.

    Examples
    --------
    A decoding step of 8 stacked query heads, ``d = 64``, in a cache of 4096 entries: the tile
    holds as many keys as fit beside the 8 query rows. A chunk of 8 rows of each of them (64
    rows) does not fit; at most 30 rows fit beside a tile of one key, so 3 row groups, of
    22, 22 and 20 rows:

    >>> decoding_plan(8, 1, 1, 4096, 64, 4096).B_c
    22
    >>> p = decoding_plan(8, 1, 8, 4096, 64, 4096)
    >>> p.R, p.G, p.B_r, p.B_c
    (64, 3, 22, 8)
    """
    H_q, H_kv, g, N_q, N_k, d, units, R = _sizes(H_q, H_kv, N_q, N_k, d, grouping)
    M, P_s, S = as_count(M, "M"), _page_size(P_s), as_count(S, "S")
    if S > N_k:
        raise ValueError(f"S = {S} splits of N_k = {N_k} keys: each split needs at least one "
                         "key tile, so S must be at most N_k")
    if B_c is not None:
        B_c, _, _ = _tiles_and_splits(N_k, B_c, S)
    choose = B_r is None and B_c is None
    B_r, _ = _row_groups(R, B_r)

    def fits(rows):                      # a tile of one key fits beside ``rows`` rows
        return _peak(rows, d, N_k, 1, P_s, S) <= M

    if choose and not fits(R):
        lo, hi = 0, R - 1                # the most rows that fit: fits(lo), not fits(hi + 1)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        if lo >= 1:
            G = -(-R // lo)
            B_r = -(-R // G)
        else:
            B_r = 1                      # not even one row: the errors below say why
    if S > 1 and 2 * B_r * d + 5 * B_r > M:
        raise ValueError(f"the merge of S = {S} partials holds 2 B_r d + 5 B_r = "
                         f"{2 * B_r * d + 5 * B_r} entries for the B_r = {B_r} query rows of a "
                         f"row group (of a unit's R = {R}), more than M = {M}")

    def plan(b):
        return DecodingPlan(H_q, H_kv, N_q, N_k, d, M, b, P_s, S, grouping, B_r)

    if B_c is not None:
        p = plan(B_c)
        if p.footprint > M:
            raise ValueError(f"B_c = {B_c} needs {p.footprint} entries of cache for B_r = {B_r} "
                             f"query rows (of R = {R}), d = {d}{_pages_text(P_s)}, more than "
                             f"M = {M}")
        return p
    fixed = 2 * B_r * d + 3 * B_r
    top = min((M - fixed) // (2 * d + B_r), N_k // S, N_k)
    if top >= 1 and P_s is not None:
        for b in range(top - top % P_s, 0, -P_s):          # aligned tiles first
            if plan(b).footprint <= M:
                return plan(b)
        top = min(top, P_s - 1)
    for b in range(top, 0, -1):
        if plan(b).footprint <= M:
            return plan(b)
    least = _peak(B_r, d, N_k, 1, P_s, S)
    raise ValueError(f"no key tile fits in M = {M}: a row group's B_r = {B_r} query rows (of a "
                     f"unit's R = {R}, g N_q with grouping={grouping!r}), d = {d}"
                     f"{_pages_text(P_s)} need at least {least} entries with B_c = 1; take a "
                     "larger M, fewer rows a row group or smaller pages")


def _pages_text(P_s) -> str:
    return "" if P_s is None else f" and whole pages of P_s = {P_s} rows"


# ------------------------------------------------------------------------------ the counted run
@dataclass(frozen=True)
class DecodingResult:
    """What :func:`run_decoding` returns.

    Attributes
    ----------
    output : numpy.ndarray
        ``O``, the shape of ``Q``: ``(H_q, N_q, d)`` or ``(batch, H_q, N_q, d)``.
    io : IOCount
        Exact counts of the whole run, equal to :func:`decoding_cost`.
    plan : DecodingPlan
    """

    output: np.ndarray
    io: IOCount
    plan: DecodingPlan


def _batched(x, label: str, batch: int | None) -> np.ndarray:
    """``x`` as float64 ``(batch, heads, rows, d)``, from 3-D (one sequence) or 4-D."""
    arr = np.asarray(x)
    if arr.ndim == 3:
        arr = arr[None]
    if arr.ndim != 4:
        raise ValueError(f"{label} must be 3-D (heads x rows x d) or 4-D (batch x heads x rows x "
                         f"d), got shape {arr.shape}")
    if batch is not None and arr.shape[0] != batch:
        raise ValueError(f"{label} has {arr.shape[0]} sequences but Q has {batch}")
    return np.stack([_heads(a, f"{label}[{b}]") for b, a in enumerate(arr)])


def _table(table, batch: int, n_pages: int, blocks: int) -> np.ndarray:
    """The block table as int64 ``(batch, n_pages)``, every entry a block of the pool."""
    arr = np.asarray(table)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape != (batch, n_pages):
        raise ValueError(f"table must have shape (n_pages,) or (batch, n_pages) = ({batch}, "
                         f"{n_pages}) for N_k keys in pages of P_s rows, got {np.shape(table)}")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"table must hold integers (pool block numbers), got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() >= blocks):
        raise ValueError(f"table entries must be blocks of the pool, 0 to {blocks - 1}; got "
                         f"{int(arr.min())} to {int(arr.max())}")
    return arr.astype(np.int64)


def run_decoding(Q, K, V, M: int, *, B_c: int | None = None, P_s: int | None = None, S: int = 1,
                 grouping: str = "stacked", causal: bool = False, scale: float | None = None,
                 table=None, N_k: int | None = None, B_r: int | None = None) -> DecodingResult:
    """Split-K, paged, grouped decoding through one cache of ``M`` entries, counted.

    Every unit (a key/value head with its ``g`` query heads stacked, or one query head) of
    every sequence runs its ``S`` splits one after another; a split reads its ``R`` query rows,
    then for each of its tiles the tile's block-table entries and the whole pages they name
    (``K`` and ``V``), and folds the tile's keys into ``(O, m, l)`` by the online softmax; it
    writes ``O`` (``S = 1``) or its partial ``(O / l, m, l)``. The merge then reads the ``S``
    partials of the unit and combines them by log-sum-exp (Lemma ``lem-parallel-merge`` of the
    book's Part IV, with ``L_s = m_s + log l_s``), one partial at a time, and writes ``O``.
    With row groups (``B_r < R``) each group of a unit's rows does all of this on its own, one
    group after another.

    Parameters
    ----------
    Q : array_like, shape ``(H_q, N_q, d)`` or ``(batch, H_q, N_q, d)``
        The query rows of one sequence or of a batch.
    K, V : array_like
        Without ``table``: the cache itself, ``(H_kv, N_k, d)`` or ``(batch, H_kv, N_k, d)``
        (with ``P_s`` it is cut into pages in order, as the identity block table would).
        With ``table``: a page pool ``(blocks, H_kv, P_s, d)`` shared by the batch; block
        ``table[b, p]`` holds page ``p`` of sequence ``b`` (rows ``p P_s`` to ``p P_s + P_s -
        1``), in any order, the last page's slots past ``N_k`` unused.
    M : int
        Cache size in entries.
    B_c : int, optional
        The key tile; by default :func:`decoding_plan`'s.
    P_s : int, optional
        Page size; with ``table`` it is the pool's and may be omitted.
    S : int
        Splits, ``1 <= S <= T``.
    grouping : {"stacked", "per_head"}
    causal : bool
        The chunk-causal mask (:func:`ioattn.masks.causal_chunk`): query row ``i`` sees the keys
        ``j <= N_k - N_q + i``. It changes no count.
    scale : float, optional
        The softmax scale, ``1 / sqrt(d)`` by default.
    table : array_like of int, optional
        The block table, ``(n_pages,)`` or ``(batch, n_pages)``, ``n_pages = ceil(N_k / P_s)``.
    N_k : int, optional
        Cached rows a sequence; required with ``table`` (the pool does not say), else read
        from ``K``.
    B_r : int, optional
        Rows of a row group; by default :func:`decoding_plan`'s (all ``R`` when they fit).

    Returns
    -------
    DecodingResult
        The output, the exact count (``== plan.cost(batch)`` field by field) and the plan.
    """
    one = np.ndim(Q) == 3
    Q = _batched(Q, "Q", None)
    batch, H_q, N_q, d = Q.shape
    causal, tau = as_flag(causal, "causal"), as_scale(scale, d)
    if table is None:
        K, V = _batched(K, "K", batch), _batched(V, "V", batch)
        if V.shape != K.shape or K.shape[3] != d:
            raise ValueError(f"K {K.shape[1:]} and V {V.shape[1:]} must both be H_kv x N_k x d "
                             f"with the d = {d} of Q")
        H_kv, N_k_given = K.shape[1], K.shape[2]
        if N_k is not None and as_count(N_k, "N_k") != N_k_given:
            raise ValueError(f"N_k = {N_k} but K holds {N_k_given} rows")
        N_k = N_k_given
        P_s = _page_size(P_s)
    else:
        if N_k is None:
            raise ValueError("with a block table give N_k, the cached rows of a sequence (the "
                             "pool's last page may be partly unused)")
        N_k = as_count(N_k, "N_k")
        K, V = np.asarray(K), np.asarray(V)
        if K.ndim != 4 or V.shape != K.shape or K.shape[3] != d:
            raise ValueError(f"with a table, K and V must both be page pools (blocks, H_kv, P_s, "
                             f"d) with the d = {d} of Q; got {K.shape} and {V.shape}")
        H_kv, pool_P = K.shape[1], K.shape[2]
        if P_s is not None and as_count(P_s, "P_s") != pool_P:
            raise ValueError(f"P_s = {P_s} but the pool's pages hold {pool_P} rows")
        P_s = pool_P
        table = _table(table, batch, -(-N_k // P_s), K.shape[0])
    H_q, H_kv, g = _group(H_q, H_kv)
    if causal and N_q > N_k:
        raise ValueError(f"causal: a chunk at the end of a cache has at most as many queries as "
                         f"the cache has keys (its own among them): N_q = {N_q} > N_k = {N_k}")
    p = decoding_plan(H_q, H_kv, N_q, N_k, d, M, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                      B_r=B_r)
    out = np.empty_like(Q)
    with collector_paused():
        mem = TwoLevelMemory(M, owner="decoding")
        for b in range(batch):
            if table is None:                       # the cache, page p at its own place
                Ks = [mem.load(f"K{b},{h}", K[b, h]) for h in range(H_kv)]
                Vs = [mem.load(f"V{b},{h}", V[b, h]) for h in range(H_kv)]
                tab = None if P_s is None else mem.load(f"table{b}", np.arange(-(-N_k // P_s)))
            else:                                   # the pool of each head, block after block
                if b == 0:
                    pool = [(mem.load(f"K pool {h}", K[:, h].reshape(-1, d)),
                             mem.load(f"V pool {h}", V[:, h].reshape(-1, d)))
                            for h in range(H_kv)]
                Ks, Vs = [k for k, _ in pool], [v for _, v in pool]
                tab = mem.load(f"table{b}", table[b])
            for u in range(p.units):
                h = u if grouping == "stacked" else u // g
                rows = (stack_group(Q[b, h * g:(h + 1) * g]) if grouping == "stacked"
                        else Q[b, u])
                O_u = _unit(mem, p, mem.load(f"Q{b},{u}", rows), Ks[h], Vs[h], tab, causal,
                            tau, f"{b},{u}")
                if grouping == "stacked":
                    out[b, h * g:(h + 1) * g] = unstack_group(O_u, g)
                else:
                    out[b, u] = O_u
        io = mem.io
    return DecodingResult(out[0] if one else out, io, p)


def _unit(mem, p: DecodingPlan, hQ, hK, hV, tab, causal: bool, tau: float, name: str):
    """One unit's row groups, each its splits and merge; returns its ``O`` (``R x d``, fetched
    after the run)."""
    R, d, N_k, B_c, P_s, S = p.R, p.d, p.N_k, p.B_c, p.P_s, p.S
    hO = mem.allocate_slow(f"O{name}", (R, d))
    if S > 1:
        parts = (mem.allocate_slow(f"O parts {name}", (S * R, d)),
                 mem.allocate_slow(f"m parts {name}", S * R),
                 mem.allocate_slow(f"l parts {name}", S * R))
    # the last key row r sees: N_k - N_q + (its position); stacked rows are position-major
    pos = np.arange(R) // (p.g if p.grouping == "stacked" else 1)
    last = N_k - p.N_q + pos
    for group in row_groups(R, p.B_r):
        r0, r1 = group.start, group.stop
        n = r1 - r0
        for s, tiles in enumerate(split_tiles(p.T, S)):
            Q_s = mem.read(hQ, slice(r0, r1))
            Q_s *= tau
            O_s = mem.allocate((n, d), "O_s")
            m_s = mem.allocate(n, "m_s", fill=-np.inf)
            l_s = mem.allocate(n, "l_s")
            m_new = mem.allocate(n, "m_new", fill=None)
            for t in tiles:
                _tile(mem, t, Q_s, O_s, m_s, l_s, m_new, hK, hV, tab, N_k, B_c, P_s,
                      last[r0:r1] if causal else None)
            divide_rows(O_s, l_s)             # a row that saw no key of the split stays 0
            if S == 1:
                mem.write(hO, O_s, slice(r0, r1))
            else:
                rows = slice(s * R + r0, s * R + r1)
                mem.write(parts[0], O_s, rows)
                mem.write(parts[1], m_s, rows)
                mem.write(parts[2], l_s, rows)
            mem.free(Q_s, O_s, m_s, l_s, m_new)
        if S > 1:
            _merge(mem, parts, hO, R, r0, r1, d, S)
    return mem.fetch(hO)


def _tile(mem, t, Q_s, O_s, m_s, l_s, m_new, hK, hV, tab, N_k, B_c, P_s, last) -> None:
    """Fold tile ``t`` into ``(O_s, m_s, l_s)``: its table entries, its whole pages, its keys."""
    a, b = t * B_c, min((t + 1) * B_c, N_k)
    R = Q_s.shape[0]
    if P_s is None:
        held = [mem.read(hK, slice(a, b)), mem.read(hV, slice(a, b))]
        spans = [(held[0], held[1], 0, b - a, 0)]          # (K, V, first row, end row, column)
        entries = None
    else:
        pages, _, _ = tile_pages(t, N_k, B_c, P_s)
        entries = mem.read(tab, slice(pages.start, pages.stop))
        held, spans = [], []
        for i, page in enumerate(pages):
            start = int(entries[i]) * P_s                  # where the block lies in the pool
            rows = min((page + 1) * P_s, N_k) - page * P_s
            K_p = mem.read(hK, slice(start, start + rows))
            V_p = mem.read(hV, slice(start, start + rows))
            held += [K_p, V_p]
            lo, hi = max(a, page * P_s) - page * P_s, min(b, page * P_s + rows) - page * P_s
            spans.append((K_p, V_p, lo, hi, page * P_s + lo - a))
    S_t = mem.allocate((R, b - a), "S_t", fill=None)
    for K_p, V_p, lo, hi, col in spans:
        np.matmul(Q_s, K_p[lo:hi].T, out=S_t[:, col:col + hi - lo])
    if last is not None:
        hidden = np.arange(a, b)[None, :] > last[:, None]
        np.copyto(S_t, -np.inf, where=hidden)
    np.maximum(m_s, S_t.max(axis=1), out=m_new)
    live = np.isfinite(m_new)             # rows that have seen no key yet: alpha = 0, P = 0
    np.subtract(m_s, m_new, out=m_s, where=live)
    np.subtract(S_t, m_new[:, None], out=S_t, where=live[:, None])
    np.exp(m_s, out=m_s)                  # m_s now holds alpha = exp(m_old - m_new)
    np.exp(S_t, out=S_t)                  # P, in place (exp(-inf) = 0 where hidden)
    l_s *= m_s
    l_s += S_t.sum(axis=1)
    O_s *= m_s[:, None]
    for K_p, V_p, lo, hi, col in spans:
        O_s += S_t[:, col:col + hi - lo] @ V_p[lo:hi]
    m_s[...] = m_new
    mem.free(S_t, *held, *(() if entries is None else (entries,)))


def _merge(mem, parts, hO, R: int, r0: int, r1: int, d: int, S: int) -> None:
    """Combine the ``S`` partials ``(O_s / l_s, m_s, l_s)`` of the rows ``r0 .. r1 - 1`` of a
    unit (a row group) by log-sum-exp, one at a time (Lemma ``lem-parallel-merge``: the weight
    of partial ``s`` is ``l_s e^{m_s - m}`` over their sum, ``m`` the largest ``m_s``), and
    write their ``O``."""
    n = r1 - r0
    O = mem.allocate((n, d), "O")
    m = mem.allocate(n, "m", fill=-np.inf)
    l = mem.allocate(n, "l")
    m_new = mem.allocate(n, "m_new", fill=None)
    for s in range(S):
        rows = slice(s * R + r0, s * R + r1)
        O_p, m_p, l_p = mem.read(parts[0], rows), mem.read(parts[1], rows), mem.read(parts[2], rows)
        np.maximum(m, m_p, out=m_new)
        live = np.isfinite(m_new)
        np.subtract(m, m_new, out=m, where=live)
        np.subtract(m_p, m_new, out=m_p, where=live)
        np.exp(m, out=m)                  # alpha, the old weight's factor
        np.exp(m_p, out=m_p)
        m_p *= l_p                        # beta = l_s e^{m_s - m_new}, 0 for an empty partial
        O *= m[:, None]
        O_p *= m_p[:, None]
        O += O_p
        l *= m
        l += m_p
        m[...] = m_new
        mem.free(O_p, m_p, l_p)
    divide_rows(O, l)
    mem.write(hO, O, slice(r0, r1))
    mem.free(O, m, l, m_new)


# ------------------------------------------------------------------------------ on a GPU
#: Bytes of a block-table entry (an int32 block number) and of a partial's entry (float32).
TABLE_BYTES = PARTIAL_BYTES = 4


class DecodingPrediction(NamedTuple):
    """The roofline of one decoding step (:func:`decoding_predict`): exact counts and bytes,
    the two times they imply, and the step's rate."""

    gpu: str
    dtype: str
    plan: DecodingPlan
    batch: int
    layers: int
    terms: dict          # decoding_terms, entries (exact)
    bytes: int           # of every layer (exact)
    flops: int           # of every layer (exact)
    memory_time: float   # seconds, every layer
    compute_time: float  # seconds, every layer

    @property
    def time(self) -> float:
        """The least time of the step in seconds: the larger of the two terms."""
        return max(self.memory_time, self.compute_time)

    @property
    def bound(self) -> str:
        """``"memory"`` or ``"compute"``: which term is the larger."""
        return "memory" if self.memory_time > self.compute_time else "compute"

    @property
    def intensity(self) -> float:
        """Operations per byte moved."""
        return self.flops / self.bytes

    @property
    def tokens_per_second(self) -> float:
        """Query rows served per second, ``batch N_q / time``: tokens per second of the GPU if
        each row is a token kept (a decoding step; a speculation whose rows are all accepted),
        counting the attention of ``layers`` layers and nothing else (no weights, no MLP),
        so an upper bound on a whole model's rate."""
        return self.batch * self.plan.N_q / self.time


def decoding_flops(H_q: int, N_q: int, N_k: int, d: int, *, batch: int = 1) -> int:
    """Operations of the matrix products of a decoding step: ``4 N_q N_k d`` a query head
    (``Q K^T`` and ``P V``, two operations a multiply-add, every tile computed whole, so a
    causal chunk changes nothing), as :func:`ioattn.roofline.attention_flops` counts them.

    >>> decoding_flops(32, 1, 8192, 128)
    134217728
    """
    return (4 * as_count(batch, "batch") * as_count(H_q, "H_q") * as_count(N_q, "N_q")
            * as_count(N_k, "N_k") * as_count(d, "d"))


def decoding_predict(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, *, gpu: str,
                     dtype: str = "bfloat16", batch: int = 1, layers: int = 1,
                     M: int | None = None, B_c: int | None = None, P_s: int | None = None,
                     S: int = 1, grouping: str = "stacked",
                     B_r: int | None = None) -> DecodingPrediction:
    """The roofline of a decoding step on ``gpu`` from its exact counts.

    Bytes: ``Q``, ``K``, ``V`` and ``O`` in the storage precision ``dtype``, block-table
    entries and the partials (``O / l, m, l``, written and read back) in four bytes
    (:data:`TABLE_BYTES`, :data:`PARTIAL_BYTES`); times from :func:`ioattn.roofline.terms`
    (HBM bandwidth and the dense ``dtype`` peak of :data:`ioattn.gpus.GPUS`), for ``layers``
    layers of attention. A bound from counts and datasheet figures, not a measurement.

    Parameters
    ----------
    H_q, H_kv, N_q, N_k, d, P_s, S, grouping
        As in :func:`decoding_cost`.
    gpu : str
        A key of :data:`ioattn.gpus.GPUS`.
    dtype : {"float16", "bfloat16", "float32"}
    batch, layers : int
        Sequences of the batch; attention layers of the model.
    M : int, optional
        The cache in entries; by default the GPU's shared memory per block in ``dtype``.
    B_c, B_r : int, optional
        The key tile and the row group; by default :func:`decoding_plan`'s for ``M`` (row
        groups only when a unit's rows do not fit, each reading the cache once).

    Returns
    -------
    DecodingPrediction

    Examples
    --------
    A GQA step (32 query heads, 8 key/value heads, ``d = 128``) against 8192 cached keys, in
    bf16 on an H100: four flops a cached byte short of the ridge at ~295, so memory-bound.

    >>> p = decoding_predict(32, 8, 1, 8192, 128, gpu="H100")
    >>> p.bound, round(p.intensity, 2)
    ('memory', 4.0)
    """
    from .gpus import GPUS
    from .roofline import BYTES, terms

    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; known: {', '.join(GPUS)}")
    if dtype not in BYTES:
        raise ValueError(f"dtype must be one of {', '.join(BYTES)}, got {dtype!r}")
    width, layers = BYTES[dtype], as_count(layers, "layers")
    M = GPUS[gpu].shared_per_block // width if M is None else as_count(M, "M")
    p = decoding_plan(H_q, H_kv, N_q, N_k, d, M, B_c=B_c, P_s=P_s, S=S, grouping=grouping,
                      B_r=B_r)
    t = decoding_terms(p.H_q, p.H_kv, p.N_q, p.N_k, p.d, B_c=p.B_c, P_s=p.P_s, S=p.S,
                       grouping=p.grouping, batch=batch, B_r=p.B_r)
    nbytes = layers * (width * (t["Q"] + t["KV"] + t["O"]) + TABLE_BYTES * t["table"]
                       + PARTIAL_BYTES * (t["partial writes"] + t["partial reads"]))
    flops = layers * decoding_flops(p.H_q, p.N_q, p.N_k, p.d, batch=batch)
    return DecodingPrediction(gpu, dtype, p, as_count(batch, "batch"), layers, t, nbytes, flops,
                              *terms(nbytes, flops, gpu=gpu, dtype=dtype))
