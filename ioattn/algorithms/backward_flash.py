"""The FlashAttention backward pass: tiled gradients from the saved row log-sum-exp, FA2 order.

The schedule is Algorithm 2 of [FA2]_ (the backward of [FA]_, Algorithm 4, with the statistics
``m, l`` folded into ``L = m + log l`` and ``D = rowsum(dO o O)`` computed first). ``tau`` is the
softmax scale; ``Q, K, V, O, dO`` (``N x d``) and ``L`` (``N``) start in slow memory.

1. Preprocess, ``B_r`` rows at a time: read ``dO_i`` and ``O_i``, compute ``D_i = rowsum(dO_i o
   O_i)`` and write it to a slow array ``D`` of ``N`` entries.
2. Outer loop over blocks ``K_j, V_j`` of ``B_c`` rows: read them, scale ``K_j`` by ``tau`` in
   place, start ``dK_j = dV_j = 0`` in the cache. Inner loop over blocks of ``B_r`` query rows:
   read ``Q_i, L_i``; ``P = exp(Q_i K_j^T - L_i)`` (in place on the score block); read ``dO_i``,
   ``dV_j += P^T dO_i``; read ``D_i``, ``dP = dO_i V_j^T`` into a second block, ``dS = P o (dP -
   D_i)`` in place on it; read ``dQ_i``, ``dQ_i += dS K_j``, write ``dQ_i`` back; ``dK_j += dS^T
   Q_i``. After the inner loop ``dK_j`` is scaled by ``tau`` and ``dK_j``, ``dV_j`` are written.

``dQ`` is not zeroed in slow memory first: in the first ``K/V`` block (``j = 0``) ``dQ_i`` starts
as a zero buffer in the cache instead of being read, so ``dQ`` is read ``T_c - 1`` times and
written ``T_c`` times (zeroing it first would add ``N d`` writes and ``N d`` reads).

The inner step holds ``K_j, V_j, dK_j, dV_j`` (``B_c d`` each), ``Q_i, dO_i, dQ_i`` (``B_r d``
each), ``L_i, D_i`` (``B_r`` each) and the blocks ``P`` and ``dP``/``dS`` (``B_r B_c`` each), which
must coexist (``dS`` needs ``P``); the preprocess holds ``2 B_r d + B_r``, less. With
``r = min(B_r, N)`` and ``c = min(B_c, N)``::

    footprint = 4 c d + 3 r d + 2 r + 2 r c <= M.

Only the number of ``K/V`` blocks ``T_c = ceil(N / B_c)`` moves data (``Q, dO, L, D, dQ`` stream
past once per ``K/V`` block), so the rule takes the largest ``B_c`` that leaves room for ``B_r =
1``, evens it out to ``ceil(N / T_c)`` for the same ``T_c`` (the room it frees goes to ``B_r``),
then the largest ``B_r`` that fits, capped at ``N``::

    B_c = floor((M - 3d - 2) / (4d + 2)),  B_c <- ceil(N / ceil(N / B_c)),
    B_r = min(N, floor((M - 4 B_c d) / (3d + 2 + 2 B_c))).

Smallest cache: the footprint grows with ``B_r`` and ``B_c``, so no block of this schedule fits
below its value at ``B_r = B_c = 1``, ``7d + 4``; the rule's ``B_c`` is at least 1 exactly when
``M >= 7d + 4``, for that ``M`` and every larger one, and evening out only lowers ``B_c``, so
``B_r >= 1`` follows. Hence ``min_M = 7d + 4`` (for every ``N``: at ``N = 1`` the footprint is
``7d + 4`` too). The exact I/O, with ``T_c = ceil(N / B_c)``::

    reads  = 2 N d  (O, dO for D)  +  2 N d  (K, V)  +  T_c N (2d + 2)  (Q, dO, L, D)
             + (T_c - 1) N d  (dQ)                     =  3 N d + T_c N (3d + 2),
    writes = N  (D)  +  T_c N d  (dQ)  +  2 N d  (dK, dV)  =  N + 2 N d + T_c N d,
    peak   = footprint.

With ``B_c ~ M / 4d`` this is ``Theta(N^2 d^2 / M)`` entries, as Theorem 5 of [FA]_ states for
the backward pass. Producing ``O`` and ``L`` is the forward's work and is not counted.

Block-sparse backward. With a mask (:mod:`ioattn.masks`) only the nonempty ``B_r x B_c`` blocks
``(I, J)`` are visited, as in the forward ([FA]_, Section 3.3): a query block with no nonempty
block skips the preprocess and has ``dQ_I = 0`` written instead (it reads nothing); a key block
with none has ``dK_J = dV_J = 0`` written from one zero buffer (``c_J d`` entries held); ``dQ_I``
starts as zeros in the cache at the first nonempty block of its row. In a partly True block the
masked scores are ``-inf`` before ``exp``, so ``P`` and ``dS`` are 0 there; a row with nothing to
attend to (``L_i = +inf``) contributes nothing. With ``a_I = 1`` when query block ``I`` has a
nonempty block and sums over nonempty blocks::

    reads  = 2d sum_I a_I r_I + 2d sum_{J visited} c_J + (3d + 2) sum_{(I, J)} r_I
             - d sum_I a_I r_I,
    writes = sum_I a_I r_I  (D)  +  d sum_I (1 - a_I) r_I  +  d sum_{(I, J)} r_I  +  2 N d,

which is the dense count when every block is nonempty, and about half of it for a causal mask.

``dq="atomic"`` is the schedule of FlashAttention-2's GPU kernel, whose key blocks run in
parallel ([FA2]_, Section 3.2): no key block knows whether it is the first to touch ``dQ_i``,
so the preprocess also writes ``dQ = 0`` (all ``N d`` entries) and every visit adds its
``dS K_j`` into ``dQ_i`` in slow memory, an atomic read-modify-write counted as ``r d`` reads
and ``r d`` writes. With ``A = sum_I a_I r_I`` (``N`` when dense), it moves exactly ``d A``
more reads and ``d A`` more writes than the default ``dq="store"``::

    reads  = 4 N d + T_c N (3d + 2),    writes = N + 3 N d + T_c N d    (dense),

the same block sizes, footprint and ``min_M``.

Rectangular attention (``make_plan(..., N_k=)``): ``Q, O, dO, L, D, dQ`` have ``N`` rows and
``K, V, dK, dV`` have ``N_k``, the mask is ``N x N_k`` (e.g. :func:`ioattn.masks.causal_chunk`),
the same schedule runs with ``c = min(B_c, N_k)`` in the footprint, ``B_c`` is evened out to
``ceil(N_k / ceil(N_k / B_c))`` (so it never exceeds ``N_k``) and ``B_r`` is capped at ``N``.
With ``T_c = ceil(N_k / B_c)`` only the reads and writes of ``K, V, dK, dV`` change::

    reads  = N d + 2 N_k d + T_c N (3d + 2),    writes = N + 2 N_k d + T_c N d,

and under a mask ``2 N d`` becomes ``2 N_k d`` in the writes above (``dq="atomic"`` adds ``d A``
to each as before). At ``N_k = N`` every count is the square one.

``block=(B_r, B_c)`` fixes the blocks instead (the preprocess uses ``B_r`` rows as well); the
least ``M`` is then the unclipped footprint ``4 B_c d + 3 B_r d + 2 B_r + 2 B_r B_c``.

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Algorithm 4 and Theorem 5.
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..masks import band_sums
from ..memory import IOCount
from .base import BackwardAlgorithm, Plan, ceil_div, imin, register_backward
from .flash import _block


@dataclass(frozen=True)
class FlashBackwardPlan(Plan):
    """Block sizes of one FlashAttention backward run: ``B_r`` query rows, ``B_c`` key rows."""

    clipped: ClassVar[dict] = {"B_r": "N", "B_c": "N_k"}      # see MatmulPlan.clipped

    B_r: int
    B_c: int
    #: ``"store"`` (``dQ_i`` read and written back, zeros in the cache first) or ``"atomic"``
    #: (``dQ`` zeroed by the preprocess, every visit a read-modify-write).
    dq: str = "store"

    @property
    def T_c(self) -> int:
        """Number of ``K/V`` blocks, the passes ``Q, dO, L, D, dQ`` make through the cache."""
        return ceil_div(self.N_k, self.B_c)

    @property
    def footprint(self) -> int:
        d = self.d
        r, c = imin(self.B_r, self.N), imin(self.B_c, self.N_k)
        return 4 * c * d + 3 * r * d + 2 * r + 2 * r * c


@register_backward
class FlashBackward(BackwardAlgorithm):
    """FlashAttention backward [FA]_, [FA2]_; see the module docstring for the rule and cost."""

    name = "flash"
    summary = "FlashAttention backward: K/V blocks outer, Q/dO/dQ streamed, P recomputed from L"
    options = {"block": None, "dq": "store"}

    def min_M(self, d, block=None, dq="store"):
        _check_dq(dq)
        if block is not None:
            B_r, B_c = _block(block)
            return 4 * B_c * d + 3 * B_r * d + 2 * B_r + 2 * B_r * B_c
        return 7 * d + 4

    def describe_rule(self, d, block=None, dq="store"):
        if block is not None:
            return f"the working set of a {block[0]}x{block[1]} block"
        return "B_c = floor((M - 3d - 2)/(4d + 2)) must be at least 1"

    def make_plan(self, N, d, M, block=None, dq="store", *, N_k=None):
        """The block sizes for ``N`` query rows against ``N_k`` keys (``N`` by default): the
        module docstring's rule, ``B_c`` evened out over ``N_k`` (so at most ``N_k``) and
        ``B_r`` at most ``N``."""
        _check_dq(dq)
        N_k = N if N_k is None else N_k
        if block is None:
            B_c = (M - 3 * d - 2) // (4 * d + 2)
            B_c = ceil_div(N_k, ceil_div(N_k, B_c))      # as many blocks, balanced
            B_r = imin(N, (M - 4 * B_c * d) // (3 * d + 2 + 2 * B_c))
        else:
            B_r, B_c = _block(block)
        return FlashBackwardPlan(N, d, M, B_r, B_c, dq, N_k=N_k)

    def cost(self, plan: FlashBackwardPlan) -> IOCount:
        N, N_k, d, T_c = plan.N, plan.N_k, plan.d, plan.T_c
        if plan.mask is not None:
            return _masked_cost(plan)
        extra = N * d if plan.dq == "atomic" else 0         # dQ = 0, and a read per visit
        reads = N * d + 2 * N_k * d + T_c * N * (3 * d + 2) + extra
        writes = N + 2 * N_k * d + T_c * N * d + extra
        return IOCount(reads=reads, writes=writes, peak=plan.footprint)

    def simulate(self, mem, Q, K, V, O, dO, L, dQ, dK, dV, plan: FlashBackwardPlan, scale):
        _fa2_backward(mem, Q, K, V, O, dO, L, dQ, dK, dV, plan, scale)


DQ_MODES = ("store", "atomic")


def _check_dq(dq):
    if dq not in DQ_MODES:
        raise ValueError(f"dq must be one of {', '.join(map(repr, DQ_MODES))}; got {dq!r}")


def _masked_cost(plan: FlashBackwardPlan) -> IOCount:
    """The module docstring's sums over the nonempty blocks, and the peak they reach."""
    N, d = plan.N, plan.d
    if plan.mask.band is not None:
        return _band_cost(plan)
    blocks = plan.mask.blocks(plan.B_r, plan.B_c)
    act, r, c = blocks.nonempty, blocks.rows, blocks.cols
    rows_on, cols_on = act.any(axis=1), act.any(axis=0)
    active_rows = int(r[rows_on].sum())
    visits = int(r @ act.sum(axis=1))                     # sum of r_I over visited blocks
    extra = d * active_rows if plan.dq == "atomic" else 0
    reads = 2 * d * active_rows + 2 * d * int(c[cols_on].sum()) + (3 * d + 2) * visits \
        - d * active_rows + extra
    writes = active_rows + d * (N - active_rows) + d * visits + 2 * plan.N_k * d + extra
    peak = max(blocks.largest(lambda r_, c_: 4 * c_ * d + 3 * r_ * d + 2 * r_ + 2 * r_ * c_),
               int((r[rows_on] * (2 * d + 1)).max(initial=0)),    # the preprocess
               int((r[~rows_on] * d).max(initial=0)),             # dQ_I = 0
               int((c[~cols_on] * d).max(initial=0)))             # dK_J = dV_J = 0
    return IOCount(reads=reads, writes=writes, peak=peak)


def _band_cost(plan: FlashBackwardPlan) -> IOCount:
    """:func:`_masked_cost` under a band mask (:attr:`~ioattn.masks.Mask.band`: the causal mask,
    a sliding window, their transposes), in closed form from the block sizes
    (:func:`~ioattn.masks.band_sums`: Python ints, no array, any ``N``). A band holds the
    diagonal, so every block row and column is visited, the count needs only the sum of ``r_I``
    over visited blocks, and block ``(0, 0)``, of the largest sides, sets the peak. The tests
    check it against a plain boolean mask. (A band is square: ``N_k = N``.)"""
    N, d = plan.N, plan.d
    visits = band_sums(N, plan.B_r, plan.B_c, *plan.mask.band).rows   # sum of r_I, (I, J) visited
    R, C = min(plan.B_r, N), min(plan.B_c, N)
    extra = d * N if plan.dq == "atomic" else 0
    return IOCount(reads=3 * d * N + (3 * d + 2) * visits + extra,
                   writes=N + d * visits + 2 * N * d + extra,
                   peak=max(4 * C * d + 3 * R * d + 2 * R + 2 * R * C, R * (2 * d + 1)))


def _fa2_backward(mem, Q, K, V, O, dO, L, dQ, dK, dV, plan, scale):
    N, N_k, d = plan.N, plan.N_k, plan.d
    if plan.mask is None:
        visited = np.ones((ceil_div(N, plan.B_r), plan.T_c), dtype=bool)
        full = visited
    else:
        visited, full = plan.mask.blocks(plan.B_r, plan.B_c)[:2]
    atomic = plan.dq == "atomic"
    first = np.argmax(visited, axis=1)                    # where dQ_I starts as zeros
    if atomic:
        first[:] = -1                                     # never: dQ = 0 in slow memory
    D = mem.allocate_slow("D", N)
    for bi, i0 in enumerate(range(0, N, plan.B_r)):       # 1. D = rowsum(dO o O)
        rows = slice(i0, min(i0 + plan.B_r, N))
        if atomic or not visited[bi].any():               # dQ_I = 0 (attends to nothing)
            zeros = mem.allocate((rows.stop - i0, d), "dQ_i = 0")
            mem.write(dQ, zeros, rows)
            mem.free(zeros)
        if not visited[bi].any():
            continue
        dO_i, O_i = mem.read(dO, rows), mem.read(O, rows)
        D_i = mem.allocate(dO_i.shape[0], "D_i", fill=None)
        np.einsum("ij,ij->i", dO_i, O_i, out=D_i)
        mem.write(D, D_i, rows)
        mem.free(dO_i, O_i, D_i)
    for bj, j0 in enumerate(range(0, N_k, plan.B_c)):     # 2. K/V blocks outer
        cols = slice(j0, min(j0 + plan.B_c, N_k))
        if not visited[:, bj].any():                      # no query attends: dK_J = dV_J = 0
            zeros = mem.allocate((cols.stop - j0, d), "dK_j = dV_j = 0")
            mem.write(dK, zeros, cols)
            mem.write(dV, zeros, cols)
            mem.free(zeros)
            continue
        K_j, V_j = mem.read(K, cols), mem.read(V, cols)
        K_j *= scale                      # fold tau into K_j: S = tau Q_i K_j^T, dQ_i += tau dS K_j
        c = K_j.shape[0]
        dK_j = mem.allocate((c, d), "dK_j")
        dV_j = mem.allocate((c, d), "dV_j")
        for bi, i0 in enumerate(range(0, N, plan.B_r)):
            if not visited[bi, bj]:
                continue                                    # block-sparse: not visited
            rows = slice(i0, min(i0 + plan.B_r, N))
            Q_i, L_i = mem.read(Q, rows), mem.read(L, rows)
            r = Q_i.shape[0]
            P = mem.allocate((r, c), "P_ij", fill=None)
            np.matmul(Q_i, K_j.T, out=P)
            if not full[bi, bj]:                            # masked scores: -inf, so P = 0
                np.copyto(P, -np.inf, where=plan.mask.excluded[rows, cols])
            P -= L_i[:, None]                               # L_i = +inf: an empty row, P = 0
            np.exp(P, out=P)                                # P_ij, in place
            dO_i = mem.read(dO, rows)
            dV_j += P.T @ dO_i
            D_i = mem.read(D, rows)
            dS = mem.allocate((r, c), "dP_ij", fill=None)
            np.matmul(dO_i, V_j.T, out=dS)                  # dP_ij
            dS -= D_i[:, None]
            dS *= P                                         # dS_ij, in place
            dQ_i = mem.read(dQ, rows) if bj != first[bi] else mem.allocate((r, d), "dQ_i")
            dQ_i += dS @ K_j                                # atomic: one read-modify-write
            mem.write(dQ, dQ_i, rows)
            dK_j += dS.T @ Q_i                              # tau applied once, below
            mem.free(Q_i, L_i, P, dO_i, D_i, dS, dQ_i)
        dK_j *= scale
        mem.write(dK, dK_j, cols)
        mem.write(dV, dV_j, cols)
        mem.free(K_j, V_j, dK_j, dV_j)
