"""Assignment 2: masked FlashAttention's forward pass as a tile program, within an I/O budget.

The student writes the tile program ``flash_attention(mem, Q, K, V, O)`` (:mod:`ioattn.tiles`),
which computes masked attention ``O = softmax(Q K^T / sqrt(d) + B) V`` (``B_ij = 0`` where query
``i`` attends to key ``j``, ``-inf`` elsewhere) for ``N x d`` inputs in slow memory through a
cache of ``mem.M`` entries, with the online softmax. The mask is the variant's own (:data:`MASKS`):
causal, a causal sliding window of ``W`` keys, or a prefix-LM mask whose first ``W`` keys every
query sees. The budget is a quarter more than the exact count of ioattn's block-sparse
FlashAttention-2 schedule with the same mask at the same ``M``
(``ioattn.io_cost("flash", N, d, M, mask=mask)``), which visits only the blocks the mask leaves
nonempty: a program that streams the keys a query block needs once per block, with the query
block as large as the cache allows, fits (a test runs one at the least and greatest M of
every (N, d) of the grid, for every mask, at the least and greatest W).

The loop order is part of question 2, and the notebook says so: FlashAttention-1's order (K/V
blocks outside) moves about 1.2 to 1.6 times the reference at its best blocks, and a quarter over
its own count would admit FlashAttention-2's order with square blocks or the first paper's block
rule; its over-budget message names the loop order (:meth:`Flash.budget_hint`).

Variants: the mask and ``W``; ``d`` in {8, 12, 16}, ``N`` in {96, 128, 160, 192}, and ``M`` with a
largest query block of 6 to 12 rows (the grid of :func:`grid`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...algorithms.base import ceil_div
from ...api import io_cost, saved_for_backward
from .base import BudgetAssignment, Question, register

__all__ = ["Flash", "MASKS", "attention", "budget", "example_inputs", "grid", "mask_of"]


#: The masks a variant asks for: name -> whether query ``i`` attends to key ``j`` (given ``W``).
MASKS = {
    "causal": lambda i, j, W: j <= i,
    "window": lambda i, j, W: (j <= i) & (j > i - W),
    "prefix": lambda i, j, W: (j <= i) | (j < W),
}


def mask_of(p: dict) -> np.ndarray:
    """The variant's ``N x N`` boolean mask."""
    i, j = np.ogrid[:p["N"], :p["N"]]
    return MASKS[p["MASK"]](i, j, p["W"])


def attention(Q, K, V, mask=None) -> np.ndarray:
    """``softmax(Q K^T / sqrt(d) + B) V`` in float64 NumPy (:func:`ioattn.saved_for_backward`'s
    ``O``)."""
    return saved_for_backward(Q, K, V, mask=mask)[0]


def budget(N: int, d: int, M: int, mask=None) -> int:
    """``floor(5/4 * io_cost("flash", N, d, M, mask=mask).total)``."""
    return 5 * io_cost("flash", N, d, M, mask=mask).total // 4


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
    """The ``(N, d, M)`` a variant is drawn from: ``M`` with a largest query block of 6 to 12
    rows, kept where a quarter over FlashAttention-2's dense count tells apart a natural
    schedule from one with the first paper's block rule, square blocks or a two-pass softmax
    (the dense assignment's grid, which keeps ``M`` varied across students)."""
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
    title = "Masked FlashAttention's forward pass as a tile program"
    questions = (
        Question("q1", "O = softmax(QK^T/sqrt(d) + B) V, computed by a tile program", 2),
        Question("q2", "I/O within 5/4 of block-sparse FlashAttention-2's at the same M", 3),
    )
    answers = {"q1": ("flash_attention",), "q2": ("flash_attention",)}
    function = "flash_attention"

    def parameters(self, rng):
        g = grid()
        N, d, M = g[int(rng.integers(len(g)))]
        kind = tuple(MASKS)[int(rng.integers(len(MASKS)))]
        W = int(rng.integers(N // 8, N // 2 + 1))
        return {"MASK": kind, "W": W, "N": N, "d": d, "M": M,
                "SEED": int(rng.integers(2 ** 31))}

    def budget(self, p):
        return budget(p["N"], p["d"], p["M"], mask_of(p))

    def budget_hint(self, p):
        return ("; the budget is that of FlashAttention-2's loop order, query blocks outside "
                "with their rows kept in the cache (FlashAttention-1's order, K/V blocks "
                "outside, moves more)")

    def problem(self, p, rng):
        N, d = p["N"], p["d"]
        if rng is None:
            Q, K, V = example_inputs(p)
        else:
            Q, K, V = (rng.standard_normal((N, d)) for _ in range(3))
        expected = attention(Q, K, V, mask_of(p))
        return {"Q": Q, "K": K, "V": V}, {"O": (N, d)}, {"O": expected}

    def hidden(self, p, rng, question):
        # the mask is the student's own: the same kind and W, on other sizes
        if question == "q2":
            return {**self.parameters(rng), "MASK": p["MASK"], "W": p["W"]}
        d = int(rng.integers(3, 10))
        N = int(rng.integers(33, 71))
        return {"MASK": p["MASK"], "W": p["W"], "N": N, "d": d,
                "M": int(rng.integers(8 * d, 20 * d + 1)), "SEED": 0}
