"""FlashAttention: tiled attention with the online softmax, in the FA2 and the FA1 loop orders.

``variant="fa2"`` (default), the loop order of [FA2]_: the outer loop runs over blocks of
``B_r`` query rows. ``Q_i`` and the accumulators ``O_i``, ``m_i``, ``l_i`` stay in the cache
while every ``K_j``, ``V_j`` block streams past; ``O_i`` is written once at the end. The cache
holds ``Q_i, O_i`` (``B_r d`` each), ``m_i, l_i`` and one scratch vector (``B_r`` each),
``K_j, V_j`` (``B_c d`` each) and the score block ``S_ij`` (``B_r B_c``)::

    footprint = 2 B_r d + 3 B_r + 2 B_c d + B_r B_c <= M.

Only ``B_r`` moves data (``K`` and ``V`` are read once per query block), so the rule takes the
largest ``B_r`` that leaves room for ``B_c = 1``, then the largest ``B_c``::

    B_r = floor((M - 2d) / (2d + 4)),  B_c = floor((M - 2 B_r d - 3 B_r) / (2d + B_r)),
    I/O = N d + 2 N d ceil(N / B_r)  (reads)  +  N d  (writes),       needs M >= 4d + 4.

``B_r`` is then evened out to ``ceil(N / T_r)`` for the same number ``T_r`` of query blocks (the
I/O is unchanged and the room it frees goes to ``B_c``), and ``B_c`` is capped at ``N``.

``variant="fa1"``, Algorithm 1 of [FA]_: ``B_c = ceil(M / 4d)``, ``B_r = min(B_c, d)``; the outer
loop runs over ``K_j, V_j`` blocks and each inner step reads ``Q_i, O_i, l_i, m_i`` and writes
``O_i, l_i, m_i`` back; ``O = 0, l = 0, m = -inf`` are first written to slow memory. The paper's
rule sizes the four ``d``-wide blocks to fill the cache on their own and leaves no room for
``S_ij``; to run in exactly ``M`` entries, each inner step takes the rows of ``Q_i`` ``R`` at a
time, as many as fit beside ``K_j, V_j``. That moves exactly the entries the paper's step moves::

    footprint = 2 B_c d + R (2d + B_c + 4) <= M,
    reads  = 2 N d + ceil(N / B_c) N (2d + 2),
    writes = N d + 2N + ceil(N / B_c) N (d + 2).

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Algorithm 1 and Theorem 2.
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import as_count
from ..memory import IOCount
from .base import Algorithm, Plan, ceil_div, register

VARIANTS = ("fa2", "fa1")


@dataclass(frozen=True)
class FlashPlan(Plan):
    """Block sizes of one FlashAttention run; ``R`` is the row step inside a query block."""

    variant: str
    B_r: int
    B_c: int
    R: int

    @property
    def footprint(self) -> int:
        N, d = self.N, self.d
        c = min(self.B_c, N)
        if self.variant == "fa2":
            r = min(self.B_r, N)
            return 2 * r * d + 3 * r + 2 * c * d + r * c
        r = min(self.R, N)
        return 2 * c * d + r * (2 * d + c + 4)


def _fa1_rows(d: int, B_r: int, B_c: int, M: int) -> int:
    """Rows of ``Q_i`` per FA1 inner step that fit beside ``K_j``, ``V_j`` (0 if none fit)."""
    return max(0, min(B_r, (M - 2 * B_c * d) // (2 * d + B_c + 4)))


@register
class Flash(Algorithm):
    """FlashAttention [FA]_, [FA2]_; see the module docstring for the rules and exact costs."""

    name = "flash"
    summary = "FlashAttention: query blocks outer, K/V streamed, online softmax"
    options = {"variant": "fa2", "block": None}

    def min_M(self, d, variant="fa2", block=None):
        _check_variant(variant)
        if block is not None:
            B_r, B_c = _block(block)
            if variant == "fa2":
                return 2 * B_r * d + 3 * B_r + 2 * B_c * d + B_r * B_c
            return 2 * B_c * d + 2 * d + B_c + 4
        if variant == "fa2":
            return 4 * d + 4
        # FA1: an inner step of one row fits iff M >= (2d + 1) ceil(M / 4d) + 2d + 4. Within each
        # range of M where ceil(M / 4d) = k this is M >= t_k; from k* on, whole ranges fit.
        k_star = ceil_div(6 * d + 3, 2 * d - 1)
        k = k_star - 1
        if k >= 1:
            start, end, t_k = 4 * d * (k - 1) + 1, 4 * d * k, (2 * d + 1) * k + 2 * d + 4
            if t_k <= end:
                return max(start, t_k)
        return 4 * d * (k_star - 1) + 1

    def describe_rule(self, d, variant="fa2", block=None):
        if block is not None:
            return f"the working set of a {block[0]}x{block[1]} block"
        if variant == "fa2":
            return "B_r = floor((M - 2d)/(2d + 4)) must be at least 1"
        return "with B_c = ceil(M/4d), K_j, V_j and one row of the inner step must fit"

    def make_plan(self, N, d, M, variant="fa2", block=None):
        if variant == "fa2":
            if block is None:
                B_r = (M - 2 * d) // (2 * d + 4)
                B_r = ceil_div(N, ceil_div(N, B_r))          # as many blocks, balanced
                B_c = min(N, (M - 2 * B_r * d - 3 * B_r) // (2 * d + B_r))
            else:
                B_r, B_c = _block(block)
            return FlashPlan(N, d, M, variant, B_r, B_c, B_r)
        if block is None:
            B_c = ceil_div(M, 4 * d)
            B_r = min(B_c, d)
        else:
            B_r, B_c = _block(block)
        return FlashPlan(N, d, M, variant, B_r, B_c, _fa1_rows(d, B_r, B_c, M))

    def cost(self, plan: FlashPlan) -> IOCount:
        N, d = plan.N, plan.d
        if plan.variant == "fa2":
            reads = N * d + 2 * N * d * ceil_div(N, plan.B_r)
            writes = N * d
        else:
            T_c = ceil_div(N, plan.B_c)
            reads = 2 * N * d + T_c * N * (2 * d + 2)
            writes = N * d + 2 * N + T_c * N * (d + 2)
        return IOCount(reads=reads, writes=writes, peak=plan.footprint)

    def simulate(self, mem, Q, K, V, O, plan: FlashPlan, scale):
        if plan.variant == "fa2":
            _fa2(mem, Q, K, V, O, plan, scale)
        else:
            _fa1(mem, Q, K, V, O, plan, scale)


def _block(block):
    """``block`` as two positive ints ``(B_r, B_c)``."""
    try:
        B_r, B_c = block
    except (TypeError, ValueError):
        raise TypeError(f"block must be a pair (B_r, B_c), got {block!r}") from None
    return as_count(B_r, "B_r"), as_count(B_c, "B_c")


def _check_variant(variant):
    if variant not in VARIANTS:
        raise ValueError(f"flash variant must be one of {', '.join(VARIANTS)}; got {variant!r}")


def _fa2(mem, Q, K, V, O, plan, scale):
    N, d = plan.N, plan.d
    for i0 in range(0, N, plan.B_r):
        rows = slice(i0, min(i0 + plan.B_r, N))
        Q_i = mem.read(Q, rows)
        Q_i *= scale                      # fold tau into Q_i: S_ij = tau Q_i K_j^T
        r = Q_i.shape[0]
        O_i = mem.allocate((r, d), "O_i")
        m_i = mem.allocate(r, "m_i", fill=-np.inf)
        l_i = mem.allocate(r, "l_i")
        m_new = mem.allocate(r, "m_new", fill=None)
        for j0 in range(0, N, plan.B_c):
            cols = slice(j0, min(j0 + plan.B_c, N))
            K_j, V_j = mem.read(K, cols), mem.read(V, cols)
            S_ij = mem.allocate((r, K_j.shape[0]), "S_ij", fill=None)
            np.matmul(Q_i, K_j.T, out=S_ij)
            np.maximum(m_i, S_ij.max(axis=1), out=m_new)
            np.subtract(m_i, m_new, out=m_i)
            np.exp(m_i, out=m_i)          # m_i now holds alpha = exp(m_old - m_new)
            S_ij -= m_new[:, None]
            np.exp(S_ij, out=S_ij)        # P_ij, in place
            l_i *= m_i
            l_i += S_ij.sum(axis=1)
            O_i *= m_i[:, None]
            O_i += S_ij @ V_j
            m_i, m_new = m_new, m_i       # the running max moves to m_i; m_new is scratch again
            mem.free(S_ij, K_j, V_j)
        O_i /= l_i[:, None]
        mem.write(O, O_i, rows)
        mem.free(Q_i, O_i, m_i, l_i, m_new)


def _fa1(mem, Q, K, V, O, plan, scale):
    N, d, R = plan.N, plan.d, plan.R
    l = mem.allocate_slow("l", N)
    m = mem.allocate_slow("m", N)
    for i0 in range(0, N, R):             # line 2: O = 0, l = 0, m = -inf in slow memory
        rows = slice(i0, min(i0 + R, N))
        r = rows.stop - i0
        zeros = mem.allocate((r, d), "zeros")
        mem.write(O, zeros, rows)
        mem.write(l, zeros[:, 0], rows)
        zeros[:, 0] = -np.inf
        mem.write(m, zeros[:, 0], rows)
        mem.free(zeros)
    for j0 in range(0, N, plan.B_c):
        cols = slice(j0, min(j0 + plan.B_c, N))
        K_j, V_j = mem.read(K, cols), mem.read(V, cols)
        c = K_j.shape[0]
        for b0 in range(0, N, plan.B_r):
            b1 = min(b0 + plan.B_r, N)
            for i0 in range(b0, b1, R):
                rows = slice(i0, min(i0 + R, b1))
                Q_i, O_i = mem.read(Q, rows), mem.read(O, rows)
                l_i, m_i = mem.read(l, rows), mem.read(m, rows)
                r = Q_i.shape[0]
                S_ij = mem.allocate((r, c), "S_ij")
                m_t = mem.allocate(r, "m~_ij")
                m_new = mem.allocate(r, "m_new")
                Q_i *= scale
                np.matmul(Q_i, K_j.T, out=S_ij)
                S_ij.max(axis=1, out=m_t)
                S_ij -= m_t[:, None]
                np.exp(S_ij, out=S_ij)                    # P~_ij
                np.maximum(m_i, m_t, out=m_new)
                np.exp(m_i - m_new, out=m_i)              # e^{m_i - m_new}
                np.exp(m_t - m_new, out=m_t)              # e^{m~_ij - m_new}
                O_i *= (l_i * m_i)[:, None]               # diag(l_i) e^{m_i - m_new} O_i
                l_i *= m_i
                l_i += m_t * S_ij.sum(axis=1)             # l_new
                S_ij *= m_t[:, None]
                O_i += S_ij @ V_j
                O_i /= l_i[:, None]
                mem.write(O, O_i, rows)
                mem.write(l, l_i, rows)
                mem.write(m, m_new, rows)
                mem.free(Q_i, O_i, l_i, m_i, S_ij, m_t, m_new)
        mem.free(K_j, V_j)
