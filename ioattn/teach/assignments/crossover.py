"""Assignment 3: where FlashAttention and square tiling trade places, measured and explained.

The student hands in

- ``crossover(N, d)``: the exact crossover, the least ``M <= 4 d^2`` from which FlashAttention
  (``"flash"``) moves strictly fewer entries than square tiling with the outer-product schedule
  (``"square_tiling"``, ``schedule="outer"``) at every cache size up to ``4 d^2``; graded on the
  student's own ``(N, d)`` and on two hidden ones, so an answer written in for one size fails;
- ``M_PREDICTED``: the crossover for the student's ``d`` predicted from the leading terms,
  ``4 N^2 d^2 / M`` for FlashAttention and ``4 N^2 d / sqrt(M) + N^2`` for square tiling: equal
  at ``M = (12 - 8 sqrt 2) d^2``, about ``0.69 d^2``; graded within one percent;
- a written explanation of the gap between the two (graded by a person).

``ioattn.bounds.crossovers`` and ``ioattn.bounds.cheapest`` (and so the sweep and the explorer,
which call them) are switched off while grading: the point is to find it.
"""

from __future__ import annotations

from math import sqrt

from ...api import io_cost
session = None  # rewritten next
call = None  # rewritten next
from ..judge import fail
need_callable = None  # rewritten next
from .base import Assignment, Context, Question, register

__all__ = ["Crossover", "LEADING", "exact_crossover"]

#: ``(12 - 8 sqrt 2)``: the leading terms cross at ``M = LEADING d^2``.
LEADING = 12 - 8 * sqrt(2)

#: The sizes a variant, and a hidden instance, is drawn from.
NS = (256, 512, 1024, 2048, 4096)
DS = (16, 24, 32, 40, 48)

_ADVICE = "find the crossover from the exact costs (ioattn.io_cost or ioattn.run)"


def _costs(N: int, d: int, M: int):
    flash = io_cost("flash", N, d, M).total if M >= 4 * d + 4 else None
    return flash, io_cost("square_tiling", N, d, M, schedule="outer").total


def exact_crossover(N: int, d: int) -> int:
    """The least ``M <= 4 d^2`` from which ``flash`` is strictly cheaper than square tiling
    (outer schedule) at every cache size up to ``4 d^2`` (a scan down from ``4 d^2``)."""
    M = 4 * d * d
    while M > 1:
        flash, square = _costs(N, d, M - 1)
        if flash is None or flash >= square:
            return M
        M -= 1
    return M


@register
class Crossover(Assignment):
    name = "crossover"
    title = "The crossover: measured, and explained from the bounds"
    questions = (
        Question("q1", "The exact crossover, for any (N, d)", 3),
        Question("q2", "The crossover predicted from the leading terms", 1),
        Question("q3", "Why the two differ (written answer)", 2, manual=True),
    )
    answers = {"q1": ("crossover",), "q2": ("M_PREDICTED",)}
    switched_off = {"ioattn.bounds.crossovers": _ADVICE, "ioattn.bounds.cheapest": _ADVICE}

    def parameters(self, rng):
        return {"N": int(rng.choice(NS)), "d": int(rng.choice(DS))}

    def check(self, question, answers, ctx: Context) -> str:
        N, d = ctx.params["N"], ctx.params["d"]
        if question == "q2":
            return self._predicted(answers["M_PREDICTED"], d)
        fn = answers["crossover"]
        public = self._one(fn, N, d)
        if public != exact_crossover(N, d):
            fail("wrong", f"crossover({N}, {d}) returned {public!r}, which is not the crossover")
        if ctx.public:
            return f"crossover({N}, {d}) = {public:,} is right"
        for _ in range(2):
            N2, d2 = int(ctx.rng.choice(NS)), int(ctx.rng.choice([x for x in DS if x != d]))
            got, truth = self._one(fn, N2, d2), exact_crossover(N2, d2)
            if got != truth:
                if got == public:
                    fail("hard-coded", f"crossover({N2}, {d2}) returned {got!r}, the answer for "
                         f"your own (N, d) = ({N}, {d}); for ({N2}, {d2}) it is {truth:,}")
                fail("wrong", f"crossover({N2}, {d2}) returned {got!r}; the crossover is "
                     f"{truth:,}")
        return f"crossover is exact on ({N}, {d}) and on two hidden sizes"

    @staticmethod
    def _one(fn, N: int, d: int):
        c = call(need_callable(fn, "crossover"), (N, d), name="crossover")
        s = session.current()
        if s is not None and s.blocked:
            fail("blocked", "; ".join(s.blocked))
        if c.timed_out:
            fail("error", f"crossover({N}, {d}) ran past its time limit")
        if c.error is not None:
            fail("error", f"crossover({N}, {d}) raised {c.describe_error()}")
        got = c.returned
        if isinstance(got, bool) or not isinstance(got, int):
            try:
                if float(got) != int(got):
                    raise ValueError
                got = int(got)
            except (TypeError, ValueError, OverflowError):
                fail("wrong", f"crossover({N}, {d}) should return an integer M, got {got!r}")
        return got

    @staticmethod
    def _predicted(value, d: int) -> str:
        want = LEADING * d * d
        try:
            got = float(value)
        except (TypeError, ValueError):
            fail("error" if value is None else "wrong",
                 "M_PREDICTED is not defined" if value is None
                 else f"M_PREDICTED should be a number, got {value!r}")
        if not abs(got - want) <= 0.01 * want:
            fail("wrong", f"M_PREDICTED = {got:,.1f} is not where the leading terms cross for "
                 f"d = {d}")
        return f"M_PREDICTED = {got:,.1f} is where the leading terms cross"
