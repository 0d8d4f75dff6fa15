"""Assignment 2: FlashAttention's forward pass with the online softmax, within an I/O budget.

The student writes ``flash_attention(mem, Q, K, V, O)``, computing ``O = softmax(Q K^T / sqrt(d))
V`` for ``N x d`` inputs in slow memory through a cache of ``mem.M`` entries. The budget is a
quarter more than the exact count of ioattn's FlashAttention-2 schedule at the same ``M``
(``ioattn.io_cost("flash", N, d, M)``, whose query block is as large as the cache allows): a
schedule that streams ``K`` and ``V`` once per query block and keeps that block as large as it
can fits; one with a query block of ``M / 4d`` rows (the block rule of the first FlashAttention
paper), square blocks, or a two-pass softmax that reads ``K`` twice does not.

Variants: ``d`` in {8, 12, 16}, ``N`` in {96, 128, 160, 192}, and ``M`` with a largest query
block of 6 to 12 rows, kept only where the budget tells those schedules apart (a natural schedule
with two more scratch rows than ioattn's fits; the three above do not); a test checks the grid.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ... import bounds
from ...algorithms.base import ceil_div
from ...api import io_cost
from .base import BudgetAssignment, Question, register
from .trial import run_trial

__all__ = ["Flash", "attention", "budget", "example_inputs", "grid"]


def attention(Q, K, V) -> np.ndarray:
    """``softmax(Q K^T / sqrt(d)) V`` in float64 NumPy, the row maximum subtracted."""
    S = (Q @ K.T) / np.sqrt(Q.shape[1])
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return (P / P.sum(axis=1, keepdims=True)) @ V


def budget(N: int, d: int, M: int) -> int:
    """``floor(5/4 * io_cost("flash", N, d, M).total)``."""
    return 5 * io_cost("flash", N, d, M).total // 4


def example_inputs(params: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The notebook's example ``Q, K, V``: standard normal, from the variant's ``SEED``."""
    rng = np.random.default_rng(params["SEED"])
    return tuple(rng.standard_normal((params["N"], params["d"])) for _ in range(3))


def _fa2_total(N: int, d: int, B_r: int) -> int:
    """Exact I/O of a FlashAttention-2 schedule with ``B_r`` query rows per block (the count
    does not depend on ``B_c`` or on ``M``: the package's closed form at a roomy cache)."""
    return io_cost("flash", N, d, 1 << 40, block=(B_r, 1)).total


@lru_cache(maxsize=1)
def grid() -> tuple:
    """The ``(N, d, M)`` a variant is drawn from (see the module docstring)."""
    out = []
    for d in (8, 12, 16):
        for N in (96, 128, 160, 192):
            for B_r in range(6, 13):
                for slack in range(2 * d + 4):
                    M = 2 * d + B_r * (2 * d + 4) + slack
                    cap = budget(N, d, M)
                    natural = _fa2_total(N, d, (M - 2 * d) // (2 * d + 6))
                    fa1 = _fa2_total(N, d, min(ceil_div(M, 4 * d), d))
                    square = _fa2_total(N, d, max(b for b in range(1, M) if
                                                  4 * b * d + 3 * b + b * b <= M))
                    two_pass = 2 * N * d + 3 * N * d * ceil_div(N, (M - 2 * d) // (2 * d + 6))
                    if natural <= cap < min(fa1, square, two_pass):
                        out.append((N, d, M))
    return tuple(out)


@register
class Flash(BudgetAssignment):
    name = "flash"
    title = "FlashAttention's forward pass within an I/O budget"
    questions = (
        Question("q1", "O = softmax(QK^T/sqrt(d)) V, computed through the memory model", 2),
        Question("q2", "I/O within 5/4 of FlashAttention-2's at the same M", 3),
    )
    answers = {"q1": ("flash_attention",), "q2": ("flash_attention",)}
    function = "flash_attention"
    grid = staticmethod(grid)
    budget = staticmethod(budget)

    def _run(self, fn, p, ctx, main):
        N, d, M = p["N"], p["d"], p["M"]
        if ctx.public:
            Q, K, V = example_inputs(p)
        else:
            Q, K, V = (ctx.rng.standard_normal((N, d)) for _ in range(3))
        trial = run_trial(fn, "flash_attention", M, {"Q": Q, "K": K, "V": V}, {"O": (N, d)},
                          seed=int(ctx.rng.integers(2 ** 31)))
        want = {"expected": attention(Q, K, V), "decoy": attention(*trial.decoys().values())}
        if main and not ctx.public:
            want["public"] = attention(*example_inputs(p))
        return trial.judge({"O": want}, lower=bounds.lower_bound(N, d, M))

    @staticmethod
    def _awkward(rng) -> dict:
        """A length that is no multiple of a block, and a cache of no special size."""
        d = int(rng.integers(3, 10))
        return {"N": int(rng.integers(33, 71)), "d": d, "M": int(rng.integers(8 * d, 20 * d + 1)),
                "SEED": 0}
