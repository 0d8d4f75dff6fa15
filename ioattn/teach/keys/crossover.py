"""The crossover assignment's answers: the exact weighted crossover and the leading terms'.

Part of :mod:`ioattn.teach.keys`: the grader imports it when it checks, a graded notebook cannot
read it (:mod:`ioattn.teach.sandbox`).

On memories where a write costs ``W`` reads, a schedule that reads ``R`` entries and writes
``Wr`` costs ``R + W Wr``. FlashAttention reads about ``4 N^2 d^2 / M`` entries (its ``N d``
writes are of lower order); square tiling (outer schedule) reads about ``4 N^2 d / sqrt(M)`` and
writes the ``N^2`` scores. The leading terms ``4 N^2 d^2 / M`` and ``4 N^2 d / sqrt(M) + W N^2``
are equal where ``x = sqrt(M) / d`` solves ``W x^2 + 4 x - 4 = 0``, so at

    M = 4 d^2 / (1 + sqrt(1 + W))^2,

about ``0.536 d^2``, ``0.444 d^2`` and ``0.382 d^2`` for ``W = 2, 3, 4`` (``W = 1`` gives
``(12 - 8 sqrt 2) d^2``). As ``N`` and ``d`` grow the exact crossover tends to it (a test shows
it within 4 percent at ``N = 65536``, ``d = 256``); at the assignment's sizes it is 10 to 90
percent higher.
"""

from __future__ import annotations

from functools import lru_cache
from math import sqrt

import numpy as np

from ...algorithms import get as algorithm
from ...api import io_cost

__all__ = ["FLASH", "SQUARE", "exact_crossover", "leading_crossover", "weighted_cost"]

#: The two schedules: ``(name, options)``.
FLASH = ("flash", {})
SQUARE = ("square_tiling", {"schedule": "outer"})


def weighted_cost(name: str, N: int, d: int, Ms, W: int, **options) -> np.ndarray:
    """``reads + W writes`` of algorithm ``name`` at every cache size of ``Ms``, exactly.

    Equal, entry by entry, to ``c.reads + W * c.writes`` for ``c = ioattn.io_cost(name, N, d,
    M, **options)`` (the tests prove it over whole ranges of ``M``), but costed for the whole
    array at once, as :func:`ioattn.totals` does, from the algorithm's block-size rule and
    closed form. Every ``M`` must be one at which the algorithm runs.

    Returns
    -------
    numpy.ndarray
        ``int64``, one entry per entry of ``Ms``.
    """
    algo = algorithm(name)
    Ms = np.asarray(Ms, dtype=np.int64)
    cost = algo.cost(algo.make_plan(int(N), int(d), Ms, **algo.check_options(dict(options))))
    reads = np.broadcast_to(np.asarray(cost.reads, dtype=np.int64), Ms.shape)
    writes = np.broadcast_to(np.asarray(cost.writes, dtype=np.int64), Ms.shape)
    return reads + int(W) * writes


def _one_cost(schedule, N: int, d: int, M: int, W: int) -> int | None:
    """The weighted cost of one schedule at one ``M`` from :func:`ioattn.io_cost` (``None`` if
    it cannot run there)."""
    name, options = schedule
    if name == "flash" and M < 4 * d + 4:
        return None
    c = io_cost(name, N, d, M, **options)
    return c.reads + W * c.writes


@lru_cache(maxsize=256)
def exact_crossover(N: int, d: int, W: int) -> int:
    """The least ``M`` from which FlashAttention's ``reads + W writes`` is strictly below square
    tiling's (outer schedule) at every cache size up to ``4 d^2`` (see the module docstring).

    All cache sizes from ``4 d + 4`` to ``4 d^2`` are costed at once (:func:`weighted_cost`);
    the answer is then confirmed at its edge with :func:`ioattn.io_cost` itself.

    Raises
    ------
    ValueError
        If FlashAttention is not the cheaper at ``4 d^2`` (no crossover in the range).
    """
    N, d, W = int(N), int(d), int(W)
    lo, hi = 4 * d + 4, 4 * d * d
    if hi < lo:
        raise ValueError(f"d = {d} is too small: FlashAttention needs M >= 4d + 4 > 4 d^2")
    Ms = np.arange(lo, hi + 1, dtype=np.int64)
    (flash, f_opts), (square, s_opts) = FLASH, SQUARE
    cheaper = weighted_cost(flash, N, d, Ms, W, **f_opts) < \
        weighted_cost(square, N, d, Ms, W, **s_opts)
    if not cheaper[-1]:
        raise ValueError(f"at N = {N}, d = {d}, W = {W} FlashAttention is not the cheaper at "
                         "M = 4 d^2: no crossover below it")
    dearer = np.flatnonzero(~cheaper)
    M = lo if dearer.size == 0 else int(Ms[dearer[-1]]) + 1
    # the edge, from io_cost itself: cheaper at M and at 4 d^2, not at M - 1
    below = _one_cost(FLASH, N, d, M - 1, W)
    if not (_one_cost(FLASH, N, d, M, W) < _one_cost(SQUARE, N, d, M, W)
            and _one_cost(FLASH, N, d, hi, W) < _one_cost(SQUARE, N, d, hi, W)
            and (below is None or below >= _one_cost(SQUARE, N, d, M - 1, W))):
        raise AssertionError(f"weighted_cost disagrees with io_cost at N = {N}, d = {d}, "
                             f"W = {W}, M = {M}")   # pragma: no cover - a bug, not a student's
    return M


def leading_crossover(d: int, W: float) -> float:
    """Where the leading terms cross: ``4 d^2 / (1 + sqrt(1 + W))^2``."""
    return 4 * d * d / (1 + sqrt(1 + W)) ** 2
