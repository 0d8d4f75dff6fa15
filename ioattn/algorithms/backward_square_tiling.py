"""Square-tiling attention backward: tiled products through slow memory, fused like the forward.

The small-cache backward to :mod:`~ioattn.algorithms.square_tiling`: with ``tau`` the scale and
``L`` the row log-sum-exp the forward saved, six kernels, the products all in the outer-product
loop of :func:`~ioattn.algorithms.matmul.tiled_product`:

1. ``P = exp(tau Q K^T - L)``: the rows of ``L`` for the current row block are read once and stay
   in the cache (``row_start``); each finished tile is scaled and exponentiated; ``P`` is written.
2. ``D = rowsum(dO o O)``, a pass over row blocks
   (:class:`~ioattn.algorithms.backward_standard.RowPass`), written (``N`` entries).
3. ``dS = P o (dO V^T - D)``, fused in the epilogue of the product ``dO V^T``: the rows of ``D``
   stay in the cache for the row block; each finished tile subtracts them and is multiplied by
   the matching tile of ``P``, read in chunks of ``h`` of its rows (``h`` as many as fit beside
   the tile, the whole tile when it fits); ``dS`` is written and ``dP`` never is.
4. ``dV = P^T dO``; 5. ``dQ = tau dS K``; 6. ``dK = tau dS^T Q`` (``P`` and ``dS`` read
   transposed; the scale in the epilogue).

Schedules, as in the forward:

- ``"blocked"`` (default): ``B = floor(sqrt(M / 4))``, ``B x B`` tiles and strips ``B`` wide in
  every product; the largest working set is ``3B^2 + B <= 4B^2 <= M``, so ``M >= 4`` suffices.
- ``"outer"``: the tile of :func:`~ioattn.algorithms.matmul.best_tile` with one entry per row
  reserved (``extra_per_row=1``) for ``L`` in kernel 1 and ``D`` in kernel 3, none in kernels
  4-6, and strips as wide as the rest of the cache allows
  (:func:`~ioattn.algorithms.matmul.strip_width`). It fits once ``b^2 + 3b <= M`` has ``b >= 1``,
  again ``M >= 4``.

A product ``(m, k) @ (k, n)`` with ``b_r x b_c`` tiles reads ``k (m ceil(n / b_c) +
n ceil(m / b_r))`` and writes ``m n``. The exact I/O is that of the five products plus the
statistics and the ``P`` tiles of the fused epilogue::

    reads  = reads(Q K^T) + N            (P; L once per row)
           + 2 N d                       (D: dO and O)
           + reads(dO V^T) + N + N^2     (dS; D once per row, P once)
           + reads(P^T dO) + reads(dS K) + reads(dS^T Q),
    writes = 2 N^2 + 3 N d + N           (P, dS; dV, dQ, dK; D).

The peak is the largest working set (:attr:`BackwardSquareTilingPlan.footprint`, tiles clipped to
``N``): a product's tile and strips, plus its rows of ``L`` or ``D`` in kernels 1 and 3; the ``D``
pass; and the epilogue of kernel 3, ``r c + r + h c`` (tile, ``D`` rows, one chunk of ``P``).

With a mask (:mod:`ioattn.masks`) the backward computes only the tiles it needs, as the forward
does. Kernels 1 and 3 compute and write only the tiles of ``P`` and ``dS`` with a True entry
(the two products share one tiling, so the epilogue of kernel 3 reads only tiles of ``P`` kernel
1 wrote); the masked scores are ``-inf`` before ``exp``, so ``P`` and ``dS`` are 0 there.
Kernels 4-6 read only the strips of ``P^T``, ``dS`` and ``dS^T`` with a True entry (of the mask,
or of its transpose) and set their masked entries to 0 in the cache, so entries the sparse
products never wrote are never used. ``L`` and ``D`` are still read once per row and the ``D``
pass is unchanged. The count is that of :func:`~ioattn.algorithms.matmul.product_io` for the
five products, plus ``N + 2 N d + N`` (``L``, the ``D`` pass, ``D``) read and ``N`` written, plus
the ``P`` tiles of the epilogue (``r_I c_J`` per nonempty tile): a sum over blocks.

Blocked, with ``B x B`` tiles, a ``(N, d) @ (d, N)`` product (kernels 1 and 3) reads
``2 N d ceil(N / B)`` and a ``(N, N) @ (N, d)`` product (kernels 4-6) reads
``N (N ceil(d / B) + d ceil(N / B))``. For ``d >> sqrt(M)`` the total is about
``20 N^2 d / sqrt(M)`` blocked and ``10 N^2 d / sqrt(M)`` outer, plus ``N^2`` read and
``2 N^2`` written.

References
----------
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443.
.. [COSMA] G. Kwasniewski et al., SC 2019.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..memory import IOCount
from .backward_standard import RowPass, plan_row_pass, row_pass, rowsum_product
from .base import BackwardAlgorithm, Plan, imax, imin, register_backward, select
from .matmul import MatmulPlan, product_io, tiled_product
from .square_tiling import SCHEDULES, check_schedule, square_tile_plan

__all__ = ["BackwardSquareTiling", "BackwardSquareTilingPlan"]


@dataclass(frozen=True)
class BackwardSquareTilingPlan(Plan):
    """The five products (``P``: ``Q K^T``; ``dS``: ``dO V^T`` with the fused epilogue; ``dV``:
    ``P^T dO``; ``dQ``: ``dS K``; ``dK``: ``dS^T Q``), the ``D`` pass, and ``h``, the rows of a
    ``P`` tile read at a time in the epilogue of the ``dS`` product."""

    schedule: str
    P: MatmulPlan
    dS: MatmulPlan
    dV: MatmulPlan
    dQ: MatmulPlan
    dK: MatmulPlan
    D_pass: RowPass
    h: int

    @property
    def footprint(self) -> int:
        N = self.N
        r1 = imin(self.P.b_r, N)
        r3, c3 = imin(self.dS.b_r, N), imin(self.dS.b_c, N)
        dS_epilogue = r3 * c3 + r3 + imin(self.h, r3) * c3  # tile, D rows, a chunk of P
        return imax(self.P.footprint + r1, self.D_pass.footprint, self.dS.footprint + r3,
                   dS_epilogue, self.dV.footprint, self.dQ.footprint, self.dK.footprint)


@register_backward
class BackwardSquareTiling(BackwardAlgorithm):
    """Square-tiling attention backward; see the module docstring for the rule and exact cost."""

    name = "square_tiling"
    summary = "square tiling backward: P and dS in tiles through slow memory, dP never written"
    options = {"schedule": "blocked"}
    choices = {"schedule": SCHEDULES}

    def min_M(self, d, schedule="blocked"):
        check_schedule(schedule)
        return 4

    def describe_rule(self, d, schedule="blocked"):
        if schedule == "blocked":
            return "B = floor(sqrt(M/4)) must be at least 1"
        return "a 1x1 tile, one entry of each operand and one row statistic must fit"

    def make_plan(self, N, d, M, schedule="blocked"):
        P = dS = square_tile_plan(N, d, N, M, schedule, 1)
        dV = dQ = dK = square_tile_plan(N, N, d, M, schedule, 0)
        h = select(dS.b_c > 0, imin(dS.b_r, (M - dS.b_r * dS.b_c - dS.b_r) // imax(dS.b_c, 1)),
                   0)
        return BackwardSquareTilingPlan(N, d, M, schedule, P, dS, dV, dQ, dK,
                                        plan_row_pass(N, d, M), h)

    def cost(self, plan: BackwardSquareTilingPlan) -> IOCount:
        N, d, mask = plan.N, plan.d, plan.mask
        T = None if mask is None else mask.T
        counts = [product_io(plan.P, c_mask=mask, stats=1),
                  product_io(plan.dS, c_mask=mask, stats=1),
                  product_io(plan.dV, a_mask=T),
                  product_io(plan.dQ, a_mask=mask),
                  product_io(plan.dK, a_mask=T)]
        reads = sum(x[0] for x in counts)
        writes = sum(x[1] for x in counts)
        peak = imax(*(x[2] for x in counts))
        reads += N                                      # L, once per row
        reads += 2 * N * d                              # D: dO and O
        reads += N + counts[1][1]                       # dS epilogue: D once per row, P tiles
        writes += N                                     # D
        peak = imax(peak, plan.D_pass.footprint, self._epilogue_peak(plan))
        return IOCount(reads=reads, writes=writes, peak=peak)

    @staticmethod
    def _epilogue_peak(plan) -> int:
        """Largest working set of kernel 3's epilogue: a tile, its ``D`` rows, a ``P`` chunk."""
        if plan.mask is None or plan.mask.band is not None:  # dense, or block (0, 0)
            r, c = imin(plan.dS.b_r, plan.N), imin(plan.dS.b_c, plan.N)
            return r * c + r + imin(plan.h, r) * c
        blocks = plan.mask.blocks(plan.dS.b_r, plan.dS.b_c)
        return blocks.largest(lambda r, c: r * c + r + min(plan.h, r) * c)

    def simulate(self, mem, Q, K, V, O, dO, L, dQ, dK, dV, plan: BackwardSquareTilingPlan,
                 scale):
        N, mask = plan.N, plan.mask
        T = None if mask is None else mask.T
        P = mem.allocate_slow("P", (N, N))
        D = mem.allocate_slow("D", N)
        dS = mem.allocate_slow("dS", (N, N))

        def read_rows(stat):
            def start(i0, i1):                          # [first row, its rows of stat, column]
                return [i0, mem.read(stat, slice(i0, i1)), 0]
            return start

        def free_rows(state, i0, i1):
            mem.free(state[1])

        def exponentiate(S_ij, state, rows, cols):
            S_ij *= scale                               # masked entries: -inf (c_mask)
            S_ij -= state[1][:, None]                   # L_i = +inf on an empty row: P = 0
            np.exp(S_ij, out=S_ij)

        tiled_product(mem, Q, K, P, plan.P, transpose_B=True, row_start=read_rows(L),
                      finish=exponentiate, row_end=free_rows, c_mask=mask, c_fill=-np.inf)

        row_pass(mem, dO, O, D, plan.D_pass, combine=rowsum_product)

        def times_P(dP_ij, state, rows, cols):
            D_i = state[1]
            r = dP_ij.shape[0]
            dP_ij -= D_i[:, None]
            for h0 in range(0, r, plan.h):
                h1 = min(h0 + plan.h, r)
                P_chunk = mem.read(P, slice(rows.start + h0, rows.start + h1), cols)
                dP_ij[h0:h1] *= P_chunk                 # P = 0 where masked: dS = 0
                mem.free(P_chunk)

        tiled_product(mem, dO, V, dS, plan.dS, transpose_B=True, row_start=read_rows(D),
                      finish=times_P, row_end=free_rows, c_mask=mask, c_fill=None)

        def scale_tile(acc, state, rows, cols):
            acc *= scale

        tiled_product(mem, P, dO, dV, plan.dV, transpose_A=True, a_mask=T)
        tiled_product(mem, dS, K, dQ, plan.dQ, finish=scale_tile, a_mask=mask)
        tiled_product(mem, dS, Q, dK, plan.dK, transpose_A=True, finish=scale_tile, a_mask=T)



