"""Host code of square-tiling attention (Saha and Ye, Algorithm 1 of [SY]_) on the GPU.

``kernels/square_tiling.cu`` runs the two tiled products of
:mod:`ioattn.algorithms.square_tiling`, both schedules, with the plan's tiles: one thread block
per row block ``I`` of each product (its column tiles ``J`` in order, the row statistics ``m_I``,
``l_I`` in shared memory), and shared memory equal to the model's cache. Phase 1 writes
``S = tau Q K^T`` and the row maxima ``m`` to global scratch; phase 2 computes
``O = exp(S - m) V / l``. The counted traffic is ``ioattn.io_cost("square_tiling", N, d, M,
schedule=...)`` per head (``+ N`` writes with ``save_lse``).

References
----------
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443, Algorithm 1.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.base import ceil_div
from .plans import ENTRY, check_heads, rule_plan

FILE = "square_tiling.cu"
THREADS = 256                   # threads per block: 8 warps, looping over the tile's entries


def plan(N, d, *, M=None, block=None, dtype="float32", budget, schedule="blocked", **options):
    """The square-tiling plan the kernels run: :func:`ioattn.plan` for ``M`` (default: the
    device's shared memory per block, ``budget // 4`` entries), with ``schedule`` ``"blocked"``
    or ``"outer"``.

    Raises
    ------
    ValueError
        For ``block`` or a dtype other than float32 (not supported), or a plan whose footprint
        does not fit in ``budget`` bytes (the message names the largest ``M`` that fits).
    """
    return rule_plan("square_tiling", N, d, M=M, block=block, dtype=dtype, budget=budget,
                     schedule=schedule, **options)


def forward(be, plan, Q, K, V, O, L, io, *, scale, causal, save_lse, dtype, count_io):
    """A closure launching the two phases of square tiling once; see :mod:`ioattn.gpu.api`.

    Allocates the scratch ``S`` (``BH x N x N``) and ``m`` (``BH x N``) once. Phase 1
    (``square_tiling_scores``) and phase 2 (``square_tiling_output``) each run one block of
    :data:`THREADS` threads per row block of their product.
    """
    if causal or plan.mask is not None:
        raise ValueError("the square_tiling kernels are dense only (no mask, causal=False)")
    if dtype != "float32":
        raise ValueError(f"square_tiling runs in float32 only, got dtype {dtype!r}")
    xp = be.xp
    BH, N, d = Q.shape
    check_heads(BH, "square_tiling")
    S = be.scratch("S", (BH, N, N), xp.float32)
    m = be.scratch("m", (BH, N), xp.float32)
    p1, p2 = plan.phase1, plan.phase2
    scores = be.function(FILE, "square_tiling_scores", count_io)
    output = be.function(FILE, "square_tiling_output", count_io)
    i32 = np.int32
    # shared memory: each phase's tile, strips and row statistics (m_i; m_i and l_i)
    smem1 = ENTRY * (p1.footprint + min(p1.b_r, N))
    smem2 = ENTRY * (p2.footprint + 2 * min(p2.b_r, N))
    args1 = (Q, K, S, m, i32(N), i32(d), i32(p1.b_r), i32(p1.b_c), i32(p1.L),
             np.float32(scale), io)
    args2 = (S, V, m, O, L, i32(N), i32(d), i32(p2.b_r), i32(p2.b_c), i32(p2.L),
             i32(bool(save_lse)), io)

    def go():
        scores((ceil_div(N, p1.b_r), BH), (THREADS,), args1, shared_mem=smem1)
        output((ceil_div(N, p2.b_r), BH), (THREADS,), args2, shared_mem=smem2)

    return go
