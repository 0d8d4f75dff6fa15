"""Assignment 5: FlashAttention's backward pass within an I/O budget.

The student writes ``flash_backward(mem, Q, K, V, O, dO, L, dQ, dK, dV)``: the gradients of
``O = softmax(Q K^T / sqrt(d)) V`` for the upstream ``dO``, given the forward's ``O`` and row
log-sum-exp ``L`` in slow memory (``L`` has ``N`` entries), written to ``dQ, dK, dV``. The budget
is a quarter more than the exact count of ioattn's FlashAttention-2 backward at the same ``M``
(``ioattn.io_cost("flash", N, d, M, backward=True)``): a schedule that keeps ``dK_j, dV_j`` in
the cache while ``Q, dO, L, D`` and ``dQ`` stream past, with ``K/V`` blocks as large as the cache
allows, fits (even zeroing ``dQ`` first); one with square blocks does not.

Variants: ``d`` in {4, 8}, ``N`` in {48, 64, 80}, ``M`` with a largest ``K/V`` block of 3 to 8
rows, kept where the budget tells those schedules apart (a test checks the grid).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ... import bounds
from ...algorithms.base import ceil_div
from ...api import io_cost, saved_for_backward
from .base import BudgetAssignment, Question, register
from .trial import run_trial

__all__ = ["Backward", "budget", "example_inputs", "gradients", "grid"]


def gradients(Q, K, V, dO):
    """``(dQ, dK, dV)`` of ``softmax(Q K^T / sqrt(d)) V`` for the upstream ``dO`` (float64 NumPy):
    ``dV = P^T dO``, ``dS = P o (dO V^T - rowsum(dO o O))``, ``dQ = tau dS K``,
    ``dK = tau dS^T Q``."""
    tau = 1 / np.sqrt(Q.shape[1])
    S = tau * (Q @ K.T)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    O = P @ V
    dS = P * (dO @ V.T - (dO * O).sum(axis=1, keepdims=True))
    return tau * dS @ K, tau * dS.T @ Q, P.T @ dO


def budget(N: int, d: int, M: int) -> int:
    """``floor(5/4 * io_cost("flash", N, d, M, backward=True).total)``."""
    return 5 * io_cost("flash", N, d, M, backward=True).total // 4


def example_inputs(params: dict) -> dict:
    """The notebook's example ``Q, K, V, dO`` (standard normal, from ``SEED``) with the forward's
    ``O`` and ``L`` (:func:`ioattn.saved_for_backward`)."""
    rng = np.random.default_rng(params["SEED"])
    Q, K, V, dO = (rng.standard_normal((params["N"], params["d"])) for _ in range(4))
    O, L = saved_for_backward(Q, K, V)
    return {"Q": Q, "K": K, "V": V, "O": O, "dO": dO, "L": L}


def _total(N: int, d: int, B_c: int, zero_first: bool) -> int:
    T_c = ceil_div(N, B_c)
    total = 3 * N * d + T_c * N * (3 * d + 2) + N + 2 * N * d + T_c * N * d
    return total + (2 * N * d if zero_first else 0)


@lru_cache(maxsize=1)
def grid() -> tuple:
    """The ``(N, d, M)`` a variant is drawn from (see the module docstring)."""
    out = []
    for d in (4, 8):
        for N in (48, 64, 80):
            for B_c in range(3, 9):
                for slack in range(4 * d + 2):
                    M = 3 * d + 2 + B_c * (4 * d + 2) + slack
                    cap = budget(N, d, M)
                    natural = _total(N, d, (M - 3 * d - 2) // (4 * d + 3), zero_first=True)
                    b = max(x for x in range(1, M) if 7 * x * d + 2 * x + 2 * x * x <= M)
                    if natural <= cap < _total(N, d, b, zero_first=False):
                        out.append((N, d, M))
    return tuple(out)


@register
class Backward(BudgetAssignment):
    name = "backward"
    title = "FlashAttention's backward pass within an I/O budget"
    questions = (
        Question("q1", "dQ, dK, dV computed through the memory model", 2),
        Question("q2", "I/O within 5/4 of the FlashAttention-2 backward at the same M", 3),
    )
    answers = {"q1": ("flash_backward",), "q2": ("flash_backward",)}
    function = "flash_backward"
    grid = staticmethod(grid)
    budget = staticmethod(budget)

    def _run(self, fn, p, ctx, main):
        N, d, M = p["N"], p["d"], p["M"]
        if ctx.public:
            data = example_inputs(p)
        else:
            data = example_inputs({**p, "SEED": int(ctx.rng.integers(2 ** 31))})
        trial = run_trial(fn, "flash_backward", M, data, {g: (N, d) for g in ("dQ", "dK", "dV")},
                          seed=int(ctx.rng.integers(2 ** 31)))
        decoys = trial.decoys()
        wants = {g: {"expected": x} for g, x in zip(
            ("dQ", "dK", "dV"), gradients(data["Q"], data["K"], data["V"], data["dO"]))}
        for g, x in zip(("dQ", "dK", "dV"),
                        gradients(decoys["Q"], decoys["K"], decoys["V"], decoys["dO"])):
            wants[g]["decoy"] = x
        if main and not ctx.public:
            pub = example_inputs(p)
            for g, x in zip(("dQ", "dK", "dV"), gradients(pub["Q"], pub["K"], pub["V"],
                                                           pub["dO"])):
                wants[g]["public"] = x
        # the backward computes every entry of Q K^T again, so the forward's bounds apply
        return trial.judge(wants, lower=bounds.lower_bound(N, d, M))

    @staticmethod
    def _awkward(rng) -> dict:
        d = int(rng.integers(2, 7))
        return {"N": int(rng.integers(17, 41)), "d": d,
                "M": int(rng.integers(10 * d + 10, 24 * d + 1)), "SEED": 0}
