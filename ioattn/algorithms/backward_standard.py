"""Standard attention backward: materialise ``P``, ``dP`` and ``dS`` in slow memory, unfused.

With ``tau`` the scale and ``L`` the row log-sum-exp the forward saved, the gradients are

    P = exp(tau Q K^T - L),  dV = P^T dO,  dP = dO V^T,  D = rowsum(dO o O),
    dS = P o (dP - D),  dQ = tau dS K,  dK = tau dS^T Q.

Seven kernels, as an unfused implementation runs them, each through slow memory:

1. ``P = exp(tau Q K^T - L)`` with the outer-product matrix product; the epilogue of each output
   tile (its ``finish`` hook) reads that tile's rows of ``L`` after the strips are freed, then
   scales, subtracts and exponentiates in place. Reading ``L`` per tile instead of keeping it per
   row block lets the product keep the default tile of
   :func:`~ioattn.algorithms.matmul.plan_matmul` (which leaves no room for row statistics beside
   the strips); it costs ``N ceil(N / b_c)`` reads of ``L`` instead of ``N``. ``P`` is written.
2. ``dV = P^T dO``: the product with ``P`` read transposed (strips from its rows).
3. ``dP = dO V^T``, written.
4. ``D = rowsum(dO o O)``, a pass over row blocks, written (``N`` entries).
5. ``dS = P o (dP - D)``, an elementwise pass over row blocks reading ``P``, ``dP`` and ``D``,
   writing ``dS``.
6. ``dQ = tau dS K``; 7. ``dK = tau dS^T Q`` (``dS`` read transposed); the scale in the epilogue.

Every product uses the tile of :func:`~ioattn.algorithms.matmul.plan_matmul`; a product
``(m, k) @ (k, n)`` with ``b_r x b_c`` tiles reads ``k (m ceil(n / b_c) + n ceil(m / b_r))`` and
writes ``m n``. The two row passes (:class:`RowPass`) read blocks of ``R`` whole rows when a row
of each operand and one statistic per row fit (``2n + 1 <= M`` for rows of ``n`` entries,
``R = floor(M / (2n + 1))``); otherwise one row at a time in strips of ``W = floor((M - 1) / 2)``
entries. Either way each pass reads its operands once, so the count does not depend on the
choice. With ``b_c(P)`` the tile width of kernel 1, the exact I/O is::

    reads  = reads(Q K^T) + N ceil(N / b_c(P))     (P, with L per tile)
           + reads(P^T dO) + reads(dO V^T)         (dV, dP)
           + 2 N d                                 (D: dO and O)
           + 2 N^2 + N                             (dS: P, dP and D)
           + reads(dS K) + reads(dS^T Q),          (dQ, dK)
    writes = 3 N^2 + 3 N d + N                     (P, dP, dS; dQ, dK, dV; D),

and the peak is the largest working set of the seven kernels
(:attr:`BackwardStandardPlan.footprint`). The rule fits from ``M = 3`` on (a ``1 x 1`` tile with
one entry of each operand; the row passes then take one row in strips of one entry).

With a mask (:mod:`ioattn.masks`) the masked scores are set to ``-inf`` in the epilogue of
kernel 1, so ``P`` and ``dS`` are 0 there, and nothing else changes: like the forward, the
unfused backward moves what it moves without a mask.

References
----------
.. [FA] T. Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 3 (standard attention backward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import IOCount
from .base import BackwardAlgorithm, Plan, ceil_div, imax, imin, register_backward, select
from .matmul import MatmulPlan, plan_matmul, products_io, tiled_product
from .standard import Standard

__all__ = ["BackwardStandard", "BackwardStandardPlan", "RowPass", "plan_row_pass", "row_pass",
           "rowsum_product"]


@dataclass(frozen=True)
class RowPass:
    """An elementwise pass over the ``m`` rows (``n`` entries each) of two operands, with one
    statistic per row: blocks of ``R`` rows, each row in strips of ``W`` entries."""

    m: int
    n: int
    R: int
    W: int

    @property
    def footprint(self) -> int:
        """Two operand tiles and the row statistics, clipped: ``R (2 min(W, n) + 1)``."""
        R = imin(self.R, self.m)
        return R * (2 * imin(self.W, self.n) + 1)


def plan_row_pass(m: int, n: int, M: int) -> RowPass:
    """Whole rows, ``R = floor(M / (2n + 1))`` at a time, when one fits; else single rows in
    strips of ``floor((M - 1) / 2)``. Needs ``M >= 3``."""
    R = M // (2 * n + 1)
    whole = R >= 1
    return RowPass(m, n, select(whole, R, 1), select(whole, n, (M - 1) // 2))


def row_pass(mem, A, B, out, rp: RowPass, *, stat=None, combine) -> None:
    """Run a :class:`RowPass` over ``A`` and ``B`` (both ``m x n``).

    Each row block's statistic buffer is read from ``stat`` (or allocated as zeros when ``stat``
    is None) before its strips; ``combine(a, b, s)`` updates the buffers in place for one strip
    (``s`` is the block's statistic) and returns the strip to write to ``out`` (or None). With
    ``stat`` None the statistic is written to ``out`` once the row block is done.
    """
    m, n = rp.m, rp.n
    for i0 in range(0, m, rp.R):
        rows = slice(i0, min(i0 + rp.R, m))
        s = mem.allocate(rows.stop - i0, "row statistic") if stat is None else mem.read(stat, rows)
        for j0 in range(0, n, rp.W):
            cols = slice(j0, min(j0 + rp.W, n))
            a, b = mem.read(A, rows, cols), mem.read(B, rows, cols)
            result = combine(a, b, s)
            if result is not None:
                mem.write(out, result, rows, cols)
            mem.free(a, b)
        if stat is None:
            mem.write(out, s, rows)
        mem.free(s)


def rowsum_product(a, b, s):
    """``s += rowsum(a o b)`` (for ``D = rowsum(dO o O)``)."""
    a *= b
    s += a.sum(axis=1)


def _ds_strip(p, dp, D_rows):
    """``dS = P o (dP - D)``, in the ``dP`` strip."""
    dp -= D_rows[:, None]
    dp *= p
    return dp


@dataclass(frozen=True)
class BackwardStandardPlan(Plan):
    """The five products (``P``: ``Q K^T``; ``dV``: ``P^T dO``; ``dP``: ``dO V^T``; ``dQ``:
    ``dS K``; ``dK``: ``dS^T Q``) and the two row passes (``D`` and ``dS``)."""

    P: MatmulPlan
    dV: MatmulPlan
    dP: MatmulPlan
    dQ: MatmulPlan
    dK: MatmulPlan
    D_pass: RowPass
    dS_pass: RowPass

    @property
    def footprint(self) -> int:
        r, c = imin(self.P.b_r, self.N), imin(self.P.b_c, self.N)
        P_epilogue = r * c + r                          # the finished tile and its L rows
        return imax(self.P.footprint, P_epilogue, self.dV.footprint, self.dP.footprint,
                   self.D_pass.footprint, self.dS_pass.footprint, self.dQ.footprint,
                   self.dK.footprint)


@register_backward
class BackwardStandard(BackwardAlgorithm):
    """Standard attention backward (P, dP and dS materialised); see the module docstring."""

    name = "standard"
    summary = "standard attention backward: P, dP and dS materialised in slow memory"
    options = {}
    mask_changes_cost = False          # a mask only sets entries of P to 0 in the cache

    # the forward's rule: every product takes plan_matmul's tiles
    min_M = Standard.min_M
    describe_rule = Standard.describe_rule

    def make_plan(self, N, d, M):
        scores, grads = plan_matmul(N, d, N, M), plan_matmul(N, N, d, M)
        return BackwardStandardPlan(N, d, M, P=scores, dV=grads, dP=scores, dQ=grads, dK=grads,
                                    D_pass=plan_row_pass(N, d, M),
                                    dS_pass=plan_row_pass(N, N, M))

    def cost(self, plan: BackwardStandardPlan) -> IOCount:
        N, d = plan.N, plan.d
        reads, writes = products_io(plan.P, plan.dV, plan.dP, plan.dQ, plan.dK)
        reads += N * ceil_div(N, plan.P.b_c)            # L, per tile of P
        reads += 2 * N * d                              # D: dO and O
        reads += 2 * N * N + N                          # dS: P, dP and D
        writes += N * N + N                             # dS and D (P and dP are products)
        return IOCount(reads=reads, writes=writes, peak=plan.footprint)

    def simulate(self, mem, Q, K, V, O, dO, L, dQ, dK, dV, plan: BackwardStandardPlan, scale):
        N = plan.N
        P = mem.allocate_slow("P", (N, N))
        dP = mem.allocate_slow("dP", (N, N))
        D = mem.allocate_slow("D", N)
        dS = mem.allocate_slow("dS", (N, N))

        mask = plan.mask

        def exponentiate(S_ij, state, rows, cols):
            L_i = mem.read(L, rows)
            S_ij *= scale
            if mask is not None:
                np.copyto(S_ij, -np.inf, where=mask.excluded[rows, cols])
            S_ij -= L_i[:, None]                        # L_i = +inf on an empty row: P = 0
            np.exp(S_ij, out=S_ij)
            mem.free(L_i)

        def scale_tile(acc, state, rows, cols):
            acc *= scale

        tiled_product(mem, Q, K, P, plan.P, transpose_B=True, finish=exponentiate)
        tiled_product(mem, P, dO, dV, plan.dV, transpose_A=True)
        tiled_product(mem, dO, V, dP, plan.dP, transpose_B=True)
        row_pass(mem, dO, O, D, plan.D_pass, combine=rowsum_product)
        row_pass(mem, P, dP, dS, plan.dS_pass, stat=D, combine=_ds_strip)
        tiled_product(mem, dS, K, dQ, plan.dQ, finish=scale_tile)
        tiled_product(mem, dS, Q, dK, plan.dK, transpose_A=True, finish=scale_tile)
