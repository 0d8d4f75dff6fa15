"""Square-tiling attention: the small-cache algorithm of Saha and Ye (Algorithm 1 of [SY]_).

Two tiled matrix products through slow memory, both in the outer-product loop of
:func:`~ioattn.algorithms.matmul.tiled_product`:

1. ``S = tau Q K^T`` in tiles, each built from strips of ``Q`` and ``K`` and written to
   slow memory; the running row maximum ``m`` (kept for the rows of the current block) is written
   once per row.
2. ``O = softmax(S) V``: every strip of ``S`` is exponentiated as it arrives, ``exp(S - m)``; the
   row sums ``l`` are accumulated during the first output tile of each row block, and each output
   tile is divided by ``l`` before it is written.

Writing the scores and exponentiating in phase 2 (instead of writing ``exp(S)`` as [SY]_ does)
makes the result numerically stable at the price of writing and reading ``m`` (``2N`` entries)
where [SY]_ writes and reads the row sums. Schedules:

- ``"blocked"`` (default): Algorithm 1 of [SY]_, ``B = floor(sqrt(M / 4))`` and strips ``B``
  wide, so the cache holds three ``B x B`` tiles and two row vectors: ``3B^2 + 2B <= M`` for
  every ``M >= 5``.
- ``"outer"``: the outer-product schedule of [COSMA]_ for each product: the tile of
  :func:`~ioattn.algorithms.matmul.best_tile` (about ``sqrt(M) x sqrt(M)``, with room for the row
  statistics) and strips as wide as the rest of the cache allows. This lowers the constant of the
  ``N^2 d / sqrt(M)`` term from about 8 to about 4.

With ``b_r x b_c`` tiles, a product ``(m, k) @ (k, n)`` reads
``k (m ceil(n / b_c) + n ceil(m / b_r))`` entries and writes ``m n``. The exact I/O is that of
the two products plus ``m`` written and read once::

    reads  = d N (ceil(N / B) + ceil(N / B))  +  N (N ceil(d / B) + d ceil(N / B))  +  N,
    writes = N^2 + N + N d                                   (blocked, B x B tiles),

Against ``N_k`` keys (rectangular attention, ``make_plan(..., N_k=)``) the products are
``(N_q, d) @ (d, N_k)`` and ``(N_q, N_k) @ (N_k, d)``, with the tiles :func:`square_tile_plan`
picks for those shapes, and ``m`` has ``N_q`` entries::

    reads  = d (N_q ceil(N_k / b_c) + N_k ceil(N_q / b_r))
             + N_k (N_q ceil(d / b'_c) + d ceil(N_q / b'_r))  +  N_q,
    writes = N_q N_k + N_q + N_q d,

with ``b_r x b_c`` the tiles of the first product and ``b'_r x b'_c`` of the second. This is
about ``8 N^2 d / sqrt(M) + N^2`` blocked and ``4 N^2 d / sqrt(M) + N^2`` outer; the explicit
upper bound is :func:`ioattn.bounds.upper_bound`.

``save_lse=True`` writes the row log-sum-exp ``L = m + log l`` at the end of each row block of
phase 2, from the ``m`` and ``l`` already in the cache: ``N`` more writes, nothing more held.

With a mask (:mod:`ioattn.masks`) square tiling computes only the tiles it needs. Phase 1
computes and writes only the tiles of ``S`` with a True entry (a tile ``(I, J)`` of ``r_I x c_J``
entries reads ``d (r_I + c_J)`` and writes ``r_I c_J``), with ``-inf`` at its masked entries;
``m`` is still written for every row (``-inf`` for a row with nothing to attend to). Phase 2
reads only the strips of ``S`` with a True entry, with their strips of ``V`` (a strip ``(I, Λ)``
``w_Λ`` wide reads ``w_Λ (ceil(d / b'_c) r_I + d)``), sets its masked entries to ``-inf`` in the
cache (so entries of ``S`` phase 1 never wrote are never used), and writes every tile of ``O``:
a row with nothing to attend to gets zeros. The count is
:func:`~ioattn.algorithms.matmul.product_io` of the two products, plus ``m`` (``2N``), plus ``O``
and ``L``: a sum over the mask's blocks. A causal mask about halves both products and the
``N^2`` writes of ``S``.

References
----------
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443, Algorithm 1 and Theorem 3.5.
.. [COSMA] G. Kwasniewski et al., SC 2019.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import IOCount
from .base import Algorithm, Plan, divide_rows, imax, imin, isqrt, log_sum_exp, register
from .matmul import MatmulPlan, best_tile, product_io, strip_width, tiled_product

SCHEDULES = ("blocked", "outer")


def square_tile_plan(m: int, k: int, n: int, M: int, schedule: str, stats: int) -> MatmulPlan:
    """The tiles of one ``(m, k) @ (k, n)`` product of square tiling, forward or backward.

    ``"blocked"``: ``B x B`` tiles and strips with ``B = floor(sqrt(M / 4))`` [SY]_;
    ``"outer"``: :func:`~ioattn.algorithms.matmul.best_tile` with ``stats`` entries per tile row
    kept for row statistics, and strips as wide as the rest of the cache allows.
    """
    if schedule == "blocked":
        B = isqrt(M // 4)
        return MatmulPlan(m, k, n, M, B, B, B)
    b_r, b_c = best_tile(m, n, M, extra_per_row=stats)
    return MatmulPlan(m, k, n, M, b_r, b_c, strip_width(b_r, b_c, M, stats))


def check_schedule(schedule) -> None:
    """A clear error unless ``schedule`` is one of :data:`SCHEDULES`."""
    if schedule not in SCHEDULES:
        raise ValueError(
            f"square_tiling schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}"
        )


@dataclass(frozen=True)
class SquareTilingPlan(Plan):
    """The two tiled products: ``phase1`` is ``Q K^T``, ``(N, d) @ (d, N_k)``; ``phase2`` is
    ``exp(S - m) V``, ``(N, N_k) @ (N_k, d)``."""

    schedule: str
    phase1: MatmulPlan
    phase2: MatmulPlan

    @property
    def footprint(self) -> int:
        r1, r2 = imin(self.phase1.b_r, self.N), imin(self.phase2.b_r, self.N)
        return imax(self.phase1.footprint + r1, self.phase2.footprint + 2 * r2)


@register
class SquareTiling(Algorithm):
    """Square-tiling attention [SY]_; see the module docstring for the rule and exact cost."""

    name = "square_tiling"
    summary = "Saha-Ye square tiling: S in BxB tiles through slow memory, then softmax(S) V"
    options = {"schedule": "blocked"}
    choices = {"schedule": SCHEDULES}

    def min_M(self, d, schedule="blocked"):
        check_schedule(schedule)
        return 5

    def describe_rule(self, d, schedule="blocked"):
        if schedule == "blocked":
            return "B = floor(sqrt(M/4)) must be at least 1 and 3B^2 + 2B must fit"
        return "a 1x1 tile, one entry of each operand and two row statistics must fit"

    def make_plan(self, N, d, M, schedule="blocked", *, N_k=None):
        """The two products' tiles for ``N`` queries against ``N_k`` keys (``N`` by default):
        ``(N, d) @ (d, N_k)`` and ``(N, N_k) @ (N_k, d)``."""
        N_k = N if N_k is None else N_k
        return SquareTilingPlan(N, d, M, schedule, square_tile_plan(N, d, N_k, M, schedule, 1),
                                square_tile_plan(N, N_k, d, M, schedule, 2), N_k=N_k)

    def cost(self, plan: SquareTilingPlan) -> IOCount:
        N = plan.N
        r1, w1, p1 = product_io(plan.phase1, c_mask=plan.mask, stats=1)
        r2, w2, p2 = product_io(plan.phase2, a_mask=plan.mask, stats=2)
        # plus the row maxima m, written once and read once, and L when saved
        writes = w1 + w2 + N + (N if plan.save_lse else 0)
        return IOCount(reads=r1 + r2 + N, writes=writes, peak=imax(p1, p2))

    def simulate(self, mem, Q, K, V, O, plan: SquareTilingPlan, scale, L=None):
        N, mask = plan.N, plan.mask
        if plan.save_lse and L is None:
            L = mem.allocate_slow("L", N)
        S = mem.allocate_slow("S", (N, plan.N_k))
        m = mem.allocate_slow("m", N)

        def start_scores(i0, i1):
            return mem.allocate(i1 - i0, "m_i", fill=-np.inf)

        def finish_scores(S_ij, m_i, rows, cols):
            S_ij *= scale                 # masked entries are -inf already (c_mask)
            np.maximum(m_i, S_ij.max(axis=1), out=m_i)

        def end_scores(m_i, i0, i1):
            mem.write(m, m_i, slice(i0, i1))
            mem.free(m_i)

        tiled_product(mem, Q, K, S, plan.phase1, transpose_B=True, row_start=start_scores,
                      finish=finish_scores, row_end=end_scores, c_mask=mask, c_fill=-np.inf)

        def start_output(i0, i1):
            m_i = mem.read(m, slice(i0, i1))
            if mask is not None:          # a row with nothing to attend to: all its scores are
                m_i[np.isneginf(m_i)] = 0.0   # -inf, so any finite reference gives exp = 0
            return m_i, mem.allocate(i1 - i0, "l_i")

        def exponentiate(S_strip, stats, first_tile):
            m_i, l_i = stats
            S_strip -= m_i[:, None]
            np.exp(S_strip, out=S_strip)
            if first_tile:
                l_i += S_strip.sum(axis=1)

        def normalise(O_tile, stats, rows, cols):
            divide_rows(O_tile, stats[1])

        def end_output(stats, i0, i1):
            if L is not None:
                m_i, l_i = stats
                log_sum_exp(m_i, l_i)
                mem.write(L, m_i, slice(i0, i1))
            mem.free(*stats)

        tiled_product(mem, S, V, O, plan.phase2, row_start=start_output, prepare=exponentiate,
                      finish=normalise, row_end=end_output, a_mask=mask, a_fill=-np.inf)

