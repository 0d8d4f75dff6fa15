"""Assignment 5: FlashAttention's backward pass as a tile program, within an I/O budget.

The student writes the tile program ``flash_backward(mem, Q, K, V, O, dO, L, dQ, dK, dV)``
(:mod:`ioattn.tiles`): the gradients of ``O = softmax(Q K^T / sqrt(d) + B) V`` for the upstream
``dO``, given the forward's ``O`` and row log-sum-exp ``L`` in slow memory (``L`` has ``N``
entries), written to ``dQ, dK, dV``. The variant's mask ``B`` is none or causal. The budget is a
quarter more than the exact count of ioattn's FlashAttention-2 backward with the same mask at the
same ``M`` (``ioattn.io_cost("flash", N, d, M, backward=True, mask=mask)``): a program that keeps
``dK_j, dV_j`` in the cache while ``Q, dO, L, D`` and ``dQ`` stream past, with ``K/V`` blocks as
large as the cache allows, fits (a test runs one at the least and greatest M of every
``(N, d)`` of the grid, for both masks).

Variants: the mask; ``d`` in {4, 8}, ``N`` in {48, 64, 80}, ``M`` with a largest ``K/V`` block of
3 to 8 rows (the grid of :func:`grid`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...algorithms.base import ceil_div
from ...api import io_cost, saved_for_backward
from .base import BudgetAssignment, Question, register

__all__ = ["Backward", "MASKS", "budget", "example_inputs", "gradients", "grid", "mask_of"]


#: The masks a variant asks for.
MASKS = ("none", "causal")


def mask_of(p: dict):
    """The variant's ``N x N`` boolean mask (``None`` for no mask)."""
    return None if p["MASK"] == "none" else np.tri(p["N"], dtype=bool)


def gradients(Q, K, V, dO, mask=None):
    """``(dQ, dK, dV)`` of ``softmax(Q K^T / sqrt(d) + B) V`` for the upstream ``dO`` (float64
    NumPy): ``dV = P^T dO``, ``dS = P o (dO V^T - rowsum(dO o O))``, ``dQ = tau dS K``,
    ``dK = tau dS^T Q``."""
    tau = 1 / np.sqrt(Q.shape[1])
    S = tau * (Q @ K.T)
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    O = P @ V
    dS = P * (dO @ V.T - (dO * O).sum(axis=1, keepdims=True))
    return tau * dS @ K, tau * dS.T @ Q, P.T @ dO


def budget(N: int, d: int, M: int, mask=None) -> int:
    """``floor(5/4 * io_cost("flash", N, d, M, backward=True, mask=mask).total)``."""
    return 5 * io_cost("flash", N, d, M, backward=True, mask=mask).total // 4


def example_inputs(params: dict, rng=None) -> dict:
    """The notebook's example ``Q, K, V, dO`` (standard normal, from ``SEED``, or from ``rng``)
    with the forward's ``O`` and ``L`` (:func:`ioattn.saved_for_backward`)."""
    rng = np.random.default_rng(params["SEED"]) if rng is None else rng
    Q, K, V, dO = (rng.standard_normal((params["N"], params["d"])) for _ in range(4))
    O, L = saved_for_backward(Q, K, V, mask=mask_of(params))
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
    title = "FlashAttention's backward pass as a tile program"
    questions = (
        Question("q1", "dQ, dK, dV computed by a tile program", 2),
        Question("q2", "I/O within 5/4 of the FlashAttention-2 backward at the same M", 3),
    )
    answers = {"q1": ("flash_backward",), "q2": ("flash_backward",)}
    function = "flash_backward"

    def parameters(self, rng):
        g = grid()
        N, d, M = g[int(rng.integers(len(g)))]
        return {"MASK": MASKS[int(rng.integers(len(MASKS)))], "N": N, "d": d, "M": M,
                "SEED": int(rng.integers(2 ** 31))}

    def budget(self, p):
        return budget(p["N"], p["d"], p["M"], mask_of(p))

    def problem(self, p, rng):
        data = example_inputs(p, rng)
        grads = gradients(data["Q"], data["K"], data["V"], data["dO"], mask_of(p))
        names = ("dQ", "dK", "dV")
        shape = (p["N"], p["d"])
        return data, {g: shape for g in names}, dict(zip(names, grads))

    def hidden(self, p, rng, question):
        if question == "q2":
            return {**self.parameters(rng), "MASK": p["MASK"]}
        d = int(rng.integers(2, 7))
        return {"MASK": p["MASK"], "N": int(rng.integers(17, 41)), "d": d,
                "M": int(rng.integers(10 * d + 10, 24 * d + 1)), "SEED": 0}
