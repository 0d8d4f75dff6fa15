"""Assignment 3: where FlashAttention and square tiling trade places when a write costs more.

The cost model is the student's own: on memories where writing is dearer than reading, a
schedule that moves ``R`` entries in and ``Wr`` entries out costs ``R + W Wr`` (in reads), for
a *write weight* ``W``. Each variant has sizes ``(N, d)`` and its own weight ``W`` in
:data:`WEIGHTS`. The two schedules are FlashAttention, ``ioattn.io_cost("flash", N, d, M)``
(default options; it runs from ``M = 4 d + 4`` up), and square tiling with the outer-product
schedule, ``ioattn.io_cost("square_tiling", N, d, M, schedule="outer")``; their weighted costs
come from the exact counts ``.reads`` and ``.writes`` of those calls. Square tiling writes the
``N x N`` scores, FlashAttention only ``O``: the weight moves the crossover down.

The student hands in

- ``crossover(N, d, W)``, returning an ``int``: the least cache size ``M`` such that, at every
  integer cache size ``M'`` with ``M <= M' <= 4 d^2``, FlashAttention's weighted cost is
  strictly less than square tiling's (below ``4 d + 4``, where FlashAttention cannot run, it is
  not). For every size the assignment asks about, FlashAttention is the cheaper at ``4 d^2``,
  so the answer is well defined and exceeds ``4 d + 4`` (a test proves it over the ranges).
  Graded on the student's own ``(N, d, W)`` and, when grading, on three hidden ``(N, d)`` (``N``
  from 200 to 4096, ``d`` from 16 to 64, ``d`` not the student's) with the student's ``W``,
  each against :func:`exact_crossover`; the result must be an exact integer (a ``bool``, a
  ``float`` or anything else is wrong), so an answer written in for one size fails.
- ``M_PREDICTED``: the crossover for the student's ``d`` and ``W`` predicted from the leading
  terms: FlashAttention reads about ``4 N^2 d^2 / M`` entries (its ``N d`` writes are of lower
  order), square tiling reads about ``4 N^2 d / sqrt(M)`` and writes the ``N^2`` scores, so the
  weighted costs ``4 N^2 d^2 / M`` and ``4 N^2 d / sqrt(M) + W N^2`` are equal at

      M = 4 d^2 / (1 + sqrt(1 + W))^2,

  about ``0.536 d^2``, ``0.444 d^2`` and ``0.382 d^2`` for ``W = 2, 3, 4`` (``W = 1`` gives
  ``(12 - 8 sqrt 2) d^2``, :data:`LEADING`). Graded within one percent. As ``N`` and ``d`` grow
  the exact crossover tends to it (a test shows it within 4 percent at ``N = 65536``,
  ``d = 256``); at the assignment's sizes it is 10 to 90 percent higher.
- a written explanation of the gap between the two (graded by a person).

No single call of the package answers either: ``ioattn.bounds.crossovers`` and
``ioattn.bounds.cheapest`` (and the sweep and the explorer, which call them) compare totals,
reads plus writes, which is the model with ``W = 1``; ``ioattn.totals`` gives totals too.
Computing the weighted costs from ``io_cost``'s reads and writes, and scanning them, is the
exercise. (This module is the grader: it computes the answers, as any grader must.)
"""

from __future__ import annotations

from functools import lru_cache
from math import isfinite, sqrt

import numpy as np

from ...algorithms import get as algorithm
from ...api import io_cost
from ..answers import Unsendable
from ..judge import fail
from .base import Assignment, Context, Question, register

__all__ = ["Crossover", "HIDDEN_D", "HIDDEN_N", "LEADING", "WEIGHTS", "exact_crossover",
           "weighted_cost"]

#: ``(12 - 8 sqrt 2)``: with ``W = 1`` the leading terms cross at ``M = LEADING d^2``.
LEADING = 12 - 8 * sqrt(2)

#: The write weights a variant is drawn from.
WEIGHTS = (2, 3, 4)

#: The sizes a variant is drawn from.
NS = (256, 512, 1024, 2048, 4096)
DS = (16, 24, 32, 40, 48)

#: The ranges (inclusive) of the hidden sizes.
HIDDEN_N, HIDDEN_D = (200, 4096), (16, 64)

#: How many hidden ``(N, d)`` a graded ``crossover`` is called on.
HIDDEN = 3

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


def _leading_crossover(d: int, W: int) -> float:
    """Where the leading terms cross: ``4 d^2 / (1 + sqrt(1 + W))^2``."""
    return 4 * d * d / (1 + sqrt(1 + W)) ** 2


def _value(answers, name: str):
    """The notebook's ``name`` as plain data; a failure if it is not plain data."""
    try:
        return answers.value(name)
    except Unsendable as exc:
        fail("wrong", f"{name} should be plain data (a number): it is {exc}")


@register
class Crossover(Assignment):
    name = "crossover"
    title = "The crossover when writes cost more: measured, and explained from the bounds"
    questions = (
        Question("q1", "The exact crossover under your write weight, for any (N, d)", 3),
        Question("q2", "The crossover predicted from the leading terms", 1),
        Question("q3", "Why the two differ (written answer)", 2, manual=True),
    )
    answers = {"q1": ("crossover",), "q2": ("M_PREDICTED",)}

    def parameters(self, rng):
        return {"N": int(rng.choice(NS)), "d": int(rng.choice(DS)),
                "W": int(rng.choice(WEIGHTS))}

    def check(self, question, answers, ctx: Context) -> str:
        N, d, W = ctx.params["N"], ctx.params["d"], ctx.params["W"]
        if question == "q2":
            return self._predicted(_value(answers, "M_PREDICTED"), d, W)
        own = self._one(answers, N, d, W)
        truth = exact_crossover(N, d, W)
        if own != truth:
            fail("wrong", f"crossover({N}, {d}, {W}) returned {own:,}, which is not the "
                 f"crossover with write weight W = {W}")
        if ctx.public:
            return f"crossover({N}, {d}, {W}) = {own:,} is right"
        for N2, d2 in self.hidden(ctx.params, ctx.rng):
            got, truth = self._one(answers, N2, d2, W), exact_crossover(N2, d2, W)
            if got != truth:
                same = " (the answer for your own sizes)" if got == own else ""
                fail("wrong", f"crossover({N2}, {d2}, {W}) returned {got:,}{same}; the "
                     f"crossover at those hidden sizes is {truth:,}")
        return (f"crossover is exact on ({N}, {d}, {W}) and on {HIDDEN} hidden sizes with "
                f"W = {W}")

    @staticmethod
    def hidden(p: dict, rng) -> list[tuple[int, int]]:
        """:data:`HIDDEN` sizes ``(N, d)`` the student never saw (``d`` not theirs)."""
        sizes = []
        while len(sizes) < HIDDEN:
            N2, d2 = int(rng.integers(HIDDEN_N[0], HIDDEN_N[1] + 1)), \
                int(rng.integers(HIDDEN_D[0], HIDDEN_D[1] + 1))
            if d2 != p["d"] and (N2, d2) not in sizes:
                sizes.append((N2, d2))
        return sizes

    @staticmethod
    def _one(answers, N: int, d: int, W: int) -> int:
        """``crossover(N, d, W)`` from the notebook: an exact ``int``, or a failure."""
        got, error = answers.call("crossover", (N, d, W), time_limit=60.0)
        if error is not None:
            fail("error", f"crossover({N}, {d}, {W}): {error}")
        if type(got) is not int:                 # a bool, a float, None, ... (plain data)
            fail("wrong", f"crossover({N}, {d}, {W}) should return an integer M (an int), "
                 f"got {got!r}")
        return got

    @staticmethod
    def _predicted(value, d: int, W: int) -> str:
        want = _leading_crossover(d, W)
        if value is None:
            fail("error", "M_PREDICTED is not defined: run the cell that defines it")
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not isfinite(value):
            fail("wrong", f"M_PREDICTED should be a number, got {value!r}")
        if not abs(value - want) <= 0.01 * want:
            fail("wrong", f"M_PREDICTED = {value:,.1f} is not where the leading terms cross "
                 f"for d = {d} and write weight W = {W}")
        return f"M_PREDICTED = {value:,.1f} is where the leading terms cross"
