"""Standard attention: materialise ``S`` and ``P`` in slow memory (Algorithm 0 of [FA]_).

Three kernels, as an unfused implementation runs them:

1. ``S = tau Q K^T`` with the outer-product matrix product, written to slow memory;
2. ``P = softmax(S)`` row by row, written to slow memory: when a whole row and its two statistics
   fit (``N + 2 <= M``), blocks of ``R = floor(M / (N + 2))`` rows are read once; otherwise each
   row is read twice in strips of ``M - 2`` entries, once for its maximum and sum (online) and
   once to normalise;
3. ``O = P V`` with the outer-product matrix product.

Both products use the tiles of :func:`~ioattn.algorithms.matmul.plan_matmul`; a product
``(m, k) @ (k, n)`` with ``b_r x b_c`` tiles reads ``k (m ceil(n / b_c) + n ceil(m / b_r))`` and
writes ``m n``. With ``p`` the number of softmax passes (1 or 2)::

    reads  = reads(Q K^T)  +  p N^2  +  reads(P V),
    writes = N^2 + N^2 + N d.

When ``M >= d^2`` this is ``Theta(N^2 + N d)``, as [FA]_ states.

Rectangular attention (``N_q = N`` query rows against ``N_k`` keys, ``make_plan(..., N_k=)``):
the products are ``(N_q, d) @ (d, N_k)`` and ``(N_q, N_k) @ (N_k, d)``, a row of ``S`` holds
``N_k`` scores (one pass when ``N_k + 2 <= M``), and ``N^2`` becomes ``N_q N_k`` above::

    reads  = reads(Q K^T)  +  p N_q N_k  +  reads(P V),
    writes = 2 N_q N_k + N_q d. ``save_lse=True`` writes the
row log-sum-exp ``L = m + log l`` from the softmax's statistics: ``N`` more writes.

With a mask (:mod:`ioattn.masks`) standard attention does what an unfused implementation does:
the masked scores are set to ``-inf`` in the epilogue of the first product, in the cache, and
everything else is as without a mask. Its I/O does not depend on the mask: only a schedule that
skips blocks (FlashAttention, square tiling) gains from sparsity. A row with nothing to attend
to gets ``P = 0`` and zeros in ``O``. Square tiling with the
outer-product schedule does the same two products and saves the round trip of ``P``, but keeps
room for row statistics beside its tiles; for the very smallest caches (a few dozen entries)
its tiles are then smaller than these and standard attention moves less.

References
----------
.. [FA] T. Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 0 and Theorem 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import IOCount
from .base import Algorithm, Plan, divide_rows, imax, imin, log_sum_exp, register, select
from .matmul import MatmulPlan, plan_matmul, products_io, tiled_product


@dataclass(frozen=True)
class StandardPlan(Plan):
    """The two products (``scores``: ``Q K^T``; ``output``: ``P V``) and the softmax's row block
    ``R``, strip ``W`` and number of passes."""

    scores: MatmulPlan
    output: MatmulPlan
    R: int
    W: int
    passes: int

    @property
    def footprint(self) -> int:
        R = imin(self.R, self.N)
        softmax = R * imin(self.W, self.N_k) + 2 * R
        return imax(self.scores.footprint, softmax, self.output.footprint)


@register
class Standard(Algorithm):
    """Standard attention [FA]_ (materialises S and P); see the module docstring."""

    name = "standard"
    summary = "standard attention: S and P materialised in slow memory"
    options = {}
    mask_changes_cost = False          # a mask only sets scores to -inf in the cache

    def min_M(self, d):
        return 3

    def describe_rule(self, d):
        return "a 1x1 product tile with one entry of each operand"

    def make_plan(self, N, d, M, *, N_k=None):
        """The two products' tiles and the softmax's rows for ``N`` queries against ``N_k``
        keys (``N`` by default): a row of ``S`` holds ``N_k`` scores, so one pass when
        ``N_k + 2 <= M``, with ``R = min(N, floor(M / (N_k + 2)))`` rows at a time."""
        N_k = N if N_k is None else N_k
        scores, output = plan_matmul(N, d, N_k, M), plan_matmul(N, N_k, d, M)
        one_pass = N_k + 2 <= M                 # a whole row and its two statistics fit
        return StandardPlan(N, d, M, scores, output,
                            R=select(one_pass, imin(N, M // (N_k + 2)), 1),
                            W=select(one_pass, N_k, M - 2), passes=select(one_pass, 1, 2),
                            N_k=N_k)

    def cost(self, plan: StandardPlan) -> IOCount:
        reads, writes = products_io(plan.scores, plan.output)
        NN = plan.N * plan.N_k                              # the softmax reads S, writes P
        writes += NN + (plan.N if plan.save_lse else 0)
        return IOCount(reads=reads + plan.passes * NN, writes=writes, peak=plan.footprint)

    def simulate(self, mem, Q, K, V, O, plan: StandardPlan, scale, L=None):
        N, mask = plan.N, plan.mask
        if plan.save_lse and L is None:
            L = mem.allocate_slow("L", N)
        S = mem.allocate_slow("S", (N, plan.N_k))
        P = mem.allocate_slow("P", (N, plan.N_k))

        def scale_tile(S_ij, state, rows, cols):
            S_ij *= scale
            if mask is not None:
                np.copyto(S_ij, -np.inf, where=mask.excluded[rows, cols])

        tiled_product(mem, Q, K, S, plan.scores, transpose_B=True, finish=scale_tile)
        if plan.passes == 1:
            _softmax_rows(mem, S, P, plan.R, L)
        else:
            _softmax_strips(mem, S, P, plan.W, L)
        tiled_product(mem, P, V, O, plan.output)


def _softmax_rows(mem, S, P, R, L=None):
    """One pass: blocks of whole rows, with their max and sum (and ``L = m + log l``)."""
    N = S.shape[0]
    for i0 in range(0, N, R):
        rows = slice(i0, min(i0 + R, N))
        S_i = mem.read(S, rows)
        m_i = mem.allocate(S_i.shape[0], "m_i")
        l_i = mem.allocate(S_i.shape[0], "l_i")
        S_i.max(axis=1, out=m_i)
        live = np.isfinite(m_i)[:, None]         # False only on a row the mask leaves empty
        np.subtract(S_i, m_i[:, None], out=S_i, where=live)
        np.exp(S_i, out=S_i)
        S_i.sum(axis=1, out=l_i)
        divide_rows(S_i, l_i)
        mem.write(P, S_i, rows)
        if L is not None:
            log_sum_exp(m_i, l_i)
            mem.write(L, m_i, rows)
        mem.free(S_i, m_i, l_i)


def _softmax_strips(mem, S, P, W, L=None):
    """Two passes over each row in strips of ``W``: online max and sum, then normalise."""
    N, N_k = S.shape
    for i in range(N):
        stats = mem.allocate(2, "m, l")                  # stats[0] = m, stats[1] = l
        stats[0] = -np.inf
        for j0 in range(0, N_k, W):
            x = mem.read(S, slice(i, i + 1), slice(j0, min(j0 + W, N_k)))
            m_new = max(stats[0], x.max())
            if m_new > -np.inf:                          # else the row is all -inf so far
                x -= m_new
                np.exp(x, out=x)
                stats[1] = stats[1] * np.exp(stats[0] - m_new) + x.sum()
                stats[0] = m_new
            mem.free(x)
        for j0 in range(0, N_k, W):
            cols = slice(j0, min(j0 + W, N_k))
            x = mem.read(S, slice(i, i + 1), cols)
            if stats[1] > 0:
                x -= stats[0]
                np.exp(x, out=x)
                x /= stats[1]
            else:                                        # a row with nothing to attend to
                x.fill(0.0)
            mem.write(P, x, slice(i, i + 1), cols)
            mem.free(x)
        if L is not None:
            log_sum_exp(stats[0:1], stats[1:2])
            mem.write(L, stats[0:1], slice(i, i + 1))
        mem.free(stats)
