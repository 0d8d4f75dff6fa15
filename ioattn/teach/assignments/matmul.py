"""Assignment 1: tiled matrix multiplication under the memory model.

The student writes ``tiled_matmul(mem, A, B, C)``, computing ``C = A @ B`` for ``A`` of shape
``(m, k)`` and ``B`` of shape ``(k, n)`` in slow memory through a cache of ``mem.M`` entries. It
is graded on correctness and on moving at most ``1.1 (2mnk / sqrt(M) + mn)`` entries, the
communication lower bound of [COSMA]_ with ten percent to spare: only the outer-product schedule
(one output tile kept in the cache while strips of ``A`` and ``B`` stream past) gets there.

Variants: a tile side ``b`` from 13 to 16, ``M = b^2 + 2b + r`` with ``0 <= r <= b/2`` (so the
largest square tile with room for a column of ``A`` and a row of ``B`` has side exactly ``b``),
``m`` and ``n`` multiples of ``b`` (3 to 5 tiles) and ``k`` from ``2b`` to ``5b``. Over that
range the outer-product schedule with ``b x b`` tiles stays within the budget (a test proves it
for every variant) and the classical three-tile blocking does not.

References
----------
.. [COSMA] G. Kwasniewski et al., "Red-blue pebbling revisited: near optimal parallel
   matrix-matrix multiplication", SC 2019.
"""

from __future__ import annotations

import numpy as np

from ... import bounds
from ..judge import fail
from .base import Assignment, Context, Question, register
from .trial import run_trial

__all__ = ["Matmul", "within_budget", "example_inputs"]


def within_budget(total: int, m: int, k: int, n: int, M: int) -> bool:
    """Whether ``total <= 1.1 (2mnk / sqrt(M) + mn)``, decided in exact integers."""
    lhs = 10 * total - 11 * m * n                   # 10 total - 11 mn <= 22 mnk / sqrt(M)
    return lhs <= 0 or lhs * lhs * M <= (22 * m * n * k) ** 2


def budget(m: int, k: int, n: int, M: int) -> float:
    """``1.1 (2mnk / sqrt(M) + mn)``, for messages (the test itself is exact)."""
    return 1.1 * (2 * m * n * k / M ** 0.5 + m * n)


def example_inputs(params: dict) -> tuple[np.ndarray, np.ndarray]:
    """The notebook's example ``A`` and ``B``: standard normal, from the variant's ``SEED``."""
    rng = np.random.default_rng(params["SEED"])
    A = rng.standard_normal((params["m"], params["k"]))
    B = rng.standard_normal((params["k"], params["n"]))
    return A, B


@register
class Matmul(Assignment):
    name = "matmul"
    title = "Tiled matrix multiplication under the memory model"
    questions = (
        Question("q1", "C = A B, computed through the memory model", 2),
        Question("q2", "I/O within 1.1 (2mnk/sqrt(M) + mn)", 3),
    )
    answers = {"q1": ("tiled_matmul",), "q2": ("tiled_matmul",)}

    def parameters(self, rng):
        b = int(rng.integers(13, 17))
        M = b * b + 2 * b + int(rng.integers(0, b // 2 + 1))
        m, n = (b * int(rng.integers(3, 6)) for _ in range(2))
        k = int(rng.integers(2 * b, 5 * b + 1))
        return {"m": m, "k": k, "n": n, "M": M, "SEED": int(rng.integers(2 ** 31))}

    def check(self, question, answers, ctx: Context) -> str:
        fn = answers["tiled_matmul"]
        p = ctx.params
        if question == "q1":
            self._correct(fn, p, ctx, main=True)
            if not ctx.public:
                self._correct(fn, self._awkward(ctx.rng), ctx, main=False)
            return "tiled_matmul computes C = A B" + ("" if ctx.public else " (hidden inputs too)")
        totals = [self._within(fn, p, ctx, main=True)]
        if not ctx.public:
            totals.append(self._within(fn, self.parameters(ctx.rng), ctx, main=False))
        return "; ".join(totals)

    # ------------------------------------------------------------------ the runs
    def _run(self, fn, p, ctx, main):
        if ctx.public:
            A, B = example_inputs(p)
        else:
            A, B = (ctx.rng.standard_normal(s) for s in ((p["m"], p["k"]), (p["k"], p["n"])))
        trial = run_trial(fn, "tiled_matmul", p["M"], {"A": A, "B": B},
                          {"C": (p["m"], p["n"])}, seed=int(ctx.rng.integers(2 ** 31)))
        want = {"expected": A @ B}
        decoys = trial.decoys()
        want["decoy"] = decoys["A"] @ decoys["B"]
        if main and not ctx.public:
            pA, pB = example_inputs(p)
            want["public"] = pA @ pB
        lower = bounds.matmul_lower(p["m"], p["k"], p["n"], p["M"])
        return trial.judge({"C": want}, lower=lower)

    def _correct(self, fn, p, ctx, main):
        self._run(fn, p, ctx, main)

    def _within(self, fn, p, ctx, main) -> str:
        io = self._run(fn, p, ctx, main)
        m, k, n, M = p["m"], p["k"], p["n"], p["M"]
        shape = f"m, k, n = {m}, {k}, {n} and M = {M}"
        if not within_budget(io.total, m, k, n, M):
            fail("budget", f"tiled_matmul moved {io.total:,} entries for {shape}; the budget "
                 f"1.1 (2mnk/sqrt(M) + mn) is {budget(m, k, n, M):,.0f}")
        return f"{io.total:,} entries for {shape} (budget {budget(m, k, n, M):,.0f})"

    @staticmethod
    def _awkward(rng) -> dict:
        """Sizes that are not multiples of any tile, and a cache of no special size."""
        m, k, n = (int(x) for x in rng.integers(5, 41, size=3))
        return {"m": m, "k": k, "n": n, "M": int(rng.integers(40, 201)), "SEED": 0}
