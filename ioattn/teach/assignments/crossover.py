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
  Graded on the student's own ``(N, d, W)`` and, when grading, on three hidden ``(N, d, W)``
  (``N`` from 16 to 8192, ``d`` from 16 to 96 and not the student's, ``W`` from 1 to 12, each
  with a crossover above ``4 d + 4``), each against the grader's exact scan; the result must be
  an exact integer (a ``bool``, a ``float`` or anything else is wrong), so an answer written in
  for one size fails. The variants' sizes and weights are public and the crossover hardly
  depends on ``N`` at large ``N``, so a table of answers tabulated for them would carry over to
  hidden sizes of the same ``(d, W)``; hidden instances take ``d`` and ``W`` from wider ranges
  and ``N`` down to where it matters (a test shows such tables failing and the scan passing).
- ``m_predicted(d, W)``: the crossover predicted from the leading terms of the two costs, for
  any head dimension and write weight. Graded within one percent on the student's own
  ``(d, W)`` and, when grading, on :data:`HIDDEN` hidden ``(d, W)`` (``d`` in
  :data:`HIDDEN_D`, ``W`` in :data:`HIDDEN_W`, not the student's pair).
- a written explanation of the gap between the two (graded by a person).

No single call of the package answers either: ``ioattn.bounds.crossovers`` and
``ioattn.bounds.cheapest`` (and the sweep and the explorer, which call them) compare totals,
reads plus writes, which is the model with ``W = 1``; ``ioattn.totals`` gives totals too.
Computing the weighted costs from ``io_cost``'s reads and writes, and scanning them, is the
exercise. The answers come from :mod:`ioattn.teach.keys.crossover`, which the graded notebook
cannot read.
"""

from __future__ import annotations

from math import isfinite, sqrt

from ..judge import fail
from .base import Assignment, Context, Question, register

__all__ = ["Crossover", "HIDDEN_D", "HIDDEN_N", "HIDDEN_W", "LEADING", "WEIGHTS"]

#: ``(12 - 8 sqrt 2)``: with ``W = 1`` the leading terms cross at ``M = LEADING d^2``.
LEADING = 12 - 8 * sqrt(2)

#: The write weights a variant is drawn from.
WEIGHTS = (2, 3, 4)

#: The sizes a variant is drawn from.
NS = (256, 512, 1024, 2048, 4096)
DS = (16, 24, 32, 40, 48)

#: The ranges (inclusive) of the hidden sizes of both questions: ``N`` down to lengths where a
#: whole sequence fits in a query block (where the crossover moves with ``N``), ``d`` up to
#: twice the variants'.
HIDDEN_N, HIDDEN_D = (16, 8192), (16, 96)

#: The range (inclusive) of the hidden write weights of both questions: each hidden instance of
#: ``crossover`` has a weight of its own, so that a table of the variants' answers (sizes and
#: weights all public) does not carry over.
HIDDEN_W = (1, 12)

#: How many hidden ``(N, d)`` (``(d, W)``) a graded ``crossover`` (``m_predicted``) is called on.
HIDDEN = 3

@register
class Crossover(Assignment):
    name = "crossover"
    title = "The crossover when writes cost more: measured, and explained from the bounds"
    questions = (
        Question("q1", "The exact crossover under your write weight, for any (N, d)", 3),
        Question("q2", "The crossover predicted from the leading terms, for any d and W", 1),
        Question("q3", "Why the two differ (written answer)", 2, manual=True),
    )
    answers = {"q1": ("crossover",), "q2": ("m_predicted",)}

    def parameters(self, rng):
        return {"N": int(rng.choice(NS)), "d": int(rng.choice(DS)),
                "W": int(rng.choice(WEIGHTS))}

    def check(self, question, answers, ctx: Context) -> str:
        from ..keys.crossover import exact_crossover

        N, d, W = ctx.params["N"], ctx.params["d"], ctx.params["W"]
        if question == "q2":
            return self._predicted(answers, d, W, ctx)
        own = self._one(answers, N, d, W)
        truth = exact_crossover(N, d, W)
        if own != truth:
            fail("wrong", f"crossover({N}, {d}, {W}) returned {own:,}, which is not the "
                 f"crossover with write weight W = {W}")
        if ctx.public:
            return f"crossover({N}, {d}, {W}) = {own:,} is right"
        for N2, d2, W2 in self.hidden(ctx.params, ctx.rng):
            got, truth = self._one(answers, N2, d2, W2), exact_crossover(N2, d2, W2)
            if got != truth:
                same = " (the answer for your own sizes)" if got == own else ""
                fail("wrong", f"crossover({N2}, {d2}, {W2}) returned {got:,}{same}; the "
                     f"crossover at those hidden sizes and weight is {truth:,}")
        return (f"crossover is exact on ({N}, {d}, {W}) and on {HIDDEN} hidden sizes and "
                "weights")

    @staticmethod
    def hidden(p: dict, rng) -> list[tuple[int, int, int]]:
        """:data:`HIDDEN` instances ``(N, d, W)`` the student never saw, drawn from ``rng``:
        ``N``, ``d`` and ``W`` from :data:`HIDDEN_N`, :data:`HIDDEN_D` and :data:`HIDDEN_W`,
        ``d`` not theirs, each a question with a crossover inside the range (FlashAttention the
        cheaper at ``4 d^2`` and not below ``4 d + 4``; drawn again otherwise)."""
        from ..keys.crossover import exact_crossover

        sizes = []
        while len(sizes) < HIDDEN:
            N2, d2, W2 = (int(rng.integers(lo, hi + 1)) for lo, hi in (HIDDEN_N, HIDDEN_D,
                                                                       HIDDEN_W))
            if d2 == p["d"] or (N2, d2, W2) in sizes:
                continue
            try:
                inside = exact_crossover(N2, d2, W2) > 4 * d2 + 4
            except ValueError:
                inside = False
            if inside:
                sizes.append((N2, d2, W2))
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
    def _predicted(answers, d: int, W: int, ctx: Context) -> str:
        from ..keys.crossover import leading_crossover

        pairs = [(d, W)]
        while not ctx.public and len(pairs) < 1 + HIDDEN:
            pair = (int(ctx.rng.integers(HIDDEN_D[0], HIDDEN_D[1] + 1)),
                    int(ctx.rng.integers(HIDDEN_W[0], HIDDEN_W[1] + 1)))
            if pair not in pairs:
                pairs.append(pair)
        for k, (d2, W2) in enumerate(pairs):
            where = "" if k == 0 else " (hidden sizes)"
            got, error = answers.call("m_predicted", (d2, W2), time_limit=60.0)
            if error is not None:
                fail("error", f"m_predicted({d2}, {W2}){where}: {error}")
            if isinstance(got, bool) or not isinstance(got, (int, float)) or not isfinite(got):
                fail("wrong", f"m_predicted({d2}, {W2}) should return a number, got {got!r}")
            want = leading_crossover(d2, W2)
            if not abs(got - want) <= 0.01 * want:
                fail("wrong", f"m_predicted({d2}, {W2}) = {got:,.1f}{where} is not where the "
                     f"leading terms cross for d = {d2} and write weight W = {W2}")
        hidden = "" if ctx.public else f" and on {HIDDEN} hidden (d, W)"
        return f"m_predicted is where the leading terms cross, for ({d}, {W}){hidden}"
