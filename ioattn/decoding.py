"""Paged and split-K decoding (FlashDecoding), counted exactly in the two-level memory.

The model (shared with the GPU kernel, whose emulator count must equal :func:`decoding_cost`):
``H_q`` query heads share ``H_kv`` key/value heads (``g = H_q / H_kv``); each query head has
``N_q`` rows (``N_q = 1`` is a decoding step, a few rows a speculation or a prefill chunk); each
key/value head a cache of ``N_k`` rows; head dimension ``d``; ``batch`` independent sequences of
the same sizes.

Units (``grouping=``): ``"stacked"``, one unit per key/value head, its ``g`` query heads' rows
stacked position-major (:func:`ioattn.inference.stack_group`), ``R = g N_q`` rows; ``"per_head"``,
one unit per query head, ``R = N_q`` rows against key/value head ``h // g``.

Tiles and splits: ``T = ceil(N_k / B_c)`` key tiles, tile ``t`` the keys ``[t B_c, min((t + 1)
B_c, N_k))``; ``S`` splits (``1 <= S <= T``), split ``s`` the next
:func:`ioattn.parallel.layout.shares` ``(T, S)[s]`` tiles in order.

Pages: page size ``P_s`` (``None``: a contiguous cache). Page ``p`` holds the rows ``[p P_s,
min((p + 1) P_s, N_k))``. A tile reads every page that overlaps it whole (all of that page's rows
of ``K`` and of ``V``) and one block-table entry per page it reads; with ``P_s = None`` it reads
exactly its own rows.

Counted, per unit and split: reads ``R d`` (its queries) plus, over its tiles, ``2d`` times the
rows of the pages read plus the pages read; writes ``R d`` (``S = 1``: ``O``) or ``R (d + 2)``
(``S > 1``: the partial ``O`` normalised by its own ``l``, its ``m`` and ``l``). When ``S > 1`` a
merge per unit reads the ``S R (d + 2)`` partials and writes ``R d``. The chunk-causal mask
(:func:`ioattn.masks.causal_chunk`) changes no count. Summed over the tiles (each tile belongs to
exactly one split) this is::

    reads  = batch * units * (S R d + 2 d W + E + [S > 1] S R (d + 2)),
    writes = batch * units * (R d + [S > 1] S R (d + 2)),

with ``W`` the page rows all ``T`` tiles read and ``E`` the table entries (:func:`page_reads`;
``W = N_k``, ``E = 0`` without pages, and also ``W = N_k``, ``E = ceil(N_k / P_s)`` when
``P_s`` divides ``B_c``).

The memory model's peak, from :func:`run_decoding`'s buffers: a split holds ``Q`` and the
accumulator ``O`` (``R d`` each), ``m``, ``l`` and a scratch row maximum (``R`` each), the
tile's table entries ``p_t``, its pages' ``K`` and ``V`` (``2 d w_t``) and the scores of the
tile's own keys (``R c_t``); the merge holds the merged ``O`` and one partial (``R d`` each),
the merged ``m``, ``l``, the partial's ``m``, ``l`` and a scratch (``R`` each)::

    peak = max over tiles of (2 R d + 3 R + p_t + 2 d w_t + R c_t)   [ max with 2 R d + 5 R if S > 1 ].

Reading of the shared model: the spec does not say how the last page of a sequence is laid
out; here, as in its page definition, the last page has ``N_k - (ceil(N_k / P_s) - 1) P_s``
rows and a tile that reads it reads only those (the slots of the pool beyond the sequence's
end are not read). No other choice is made beyond the shared model.

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

import numpy as np

from ._validate import as_count, as_scale
from .inference import _group, _grouping, _heads, stack_group, unstack_group
from .memory import IOCount, TwoLevelMemory
from .parallel.layout import shares

__all__ = ["decoding_cost", "page_reads", "split_tiles", "tile_pages"]


# ------------------------------------------------------------------------------ checks
def _page_size(P_s) -> int | None:
    return None if P_s is None else as_count(P_s, "P_s")


def _sizes(H_q, H_kv, N_q, N_k, d, grouping):
    """``(H_q, H_kv, g, N_q, N_k, d, units, R)`` checked."""
    H_q, H_kv, g = _group(H_q, H_kv)
    N_q, N_k, d = as_count(N_q, "N_q"), as_count(N_k, "N_k"), as_count(d, "d")
    stacked = _grouping(grouping) == "stacked"
    return H_q, H_kv, g, N_q, N_k, d, (H_kv if stacked else H_q), (g * N_q if stacked else N_q)


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


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``sum_{i < n} floor((a i + b) / m)`` for ``n >= 0``, ``m >= 1``, ``a, b >= 0`` (the
    Euclid-like reduction; exact ints, ``O(log)`` steps)."""
    total = 0
    while True:
        if a >= m:
            total += (n - 1) * n // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y = a * n + b
        if y < m:
            return total
        n, b, m, a = y // m, y % m, a, m


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
    E = (T + _floor_sum(T - 1, P_s, B_c, B_c - 1) + (N_k - 1) // P_s
         - _floor_sum(T, P_s, B_c, 0))
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
                  batch: int = 1) -> IOCount:
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

    Returns
    -------
    IOCount
        ``reads``, ``writes`` (exact Python ints) and the memory model's ``peak`` of
        :func:`run_decoding` (one unit's split or merge at a time).

    Raises
    ------
    TypeError
        For a size that is not an integer (bools are refused).
    ValueError
        For a size below 1, ``H_kv`` not dividing ``H_q``, ``S > T`` or an unknown grouping.

    Examples
    --------
    One decoding step of one key/value head with 4 query heads, ``d = 2``, 10 keys in tiles
    of 4 read from pages of 3, in 2 splits:

    >>> decoding_cost(4, 1, 1, 10, 2, B_c=4, P_s=3, S=2)
    IOCount(reads=118, writes=40, total=158, peak=70)
    """
    H_q, H_kv, g, N_q, N_k, d, units, R = _sizes(H_q, H_kv, N_q, N_k, d, grouping)
    P_s, batch = _page_size(P_s), as_count(batch, "batch")
    B_c, T, S = _tiles_and_splits(N_k, B_c, S)
    W, E = page_reads(N_k, B_c, P_s)
    partials = S * R * (d + 2) if S > 1 else 0
    reads = S * R * d + 2 * d * W + E + partials
    writes = R * d + partials
    n = batch * units
    return IOCount(reads=n * reads, writes=n * writes, peak=_peak(R, d, N_k, B_c, P_s, S))
