"""Host code of standard attention (Algorithm 0 of [FA]_) on the GPU: ``S`` and ``P``
materialised in global memory.

``kernels/standard.cu`` runs the schedule of :mod:`ioattn.algorithms.standard` in three steps:
``S = tau Q K^T`` and, last, ``O = P V`` with the outer-product tiles of
:func:`~ioattn.algorithms.matmul.plan_matmul` (one thread block per output tile), and between
them ``P = softmax(S)``, in one pass over blocks of ``R`` whole rows when ``plan.passes == 1``,
else in two passes over each row in strips of ``W``. Shared memory is the model's cache; the
counted traffic is ``ioattn.io_cost("standard", N, d, M)`` per head (``+ N`` writes with
``save_lse``).

References
----------
.. [FA] T. Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 0.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.base import ceil_div
from .plans import ENTRY, check_heads, rule_plan
from .square_tiling import THREADS

FILE = "standard.cu"


def plan(N, d, *, M=None, block=None, dtype="float32", budget, **options):
    """The standard-attention plan the kernels run: :func:`ioattn.plan` for ``M`` (default:
    the device's shared memory per block, ``budget // 4`` entries).

    Raises
    ------
    ValueError
        For ``block`` or a dtype other than float32 (not supported), or a plan whose footprint
        does not fit in ``budget`` bytes (the message names the largest ``M`` that fits).
    """
    return rule_plan("standard", N, d, M=M, block=block, dtype=dtype, budget=budget, **options)


def _product(be, count_io, A, B, C, mp, BH, transpose_B, alpha, io):
    """The launch of ``C = alpha A @ B`` (``B`` stored transposed when ``transpose_B``) with
    the tiles of MatmulPlan ``mp``: one block per tile, shared memory its footprint."""
    kernel = be.function(FILE, "standard_product", count_io)
    grid = (ceil_div(mp.m, mp.b_r) * ceil_div(mp.n, mp.b_c), BH)
    i32 = np.int32
    args = (A, B, C, i32(mp.m), i32(mp.k), i32(mp.n), i32(mp.b_r), i32(mp.b_c), i32(mp.L),
            i32(transpose_B), np.float32(alpha), io)
    return lambda: kernel(grid, (THREADS,), args, shared_mem=ENTRY * mp.footprint)


def forward(be, plan, Q, K, V, O, L, io, *, scale, causal, save_lse, dtype, count_io):
    """A closure launching the three steps of standard attention once; see
    :mod:`ioattn.gpu.api`. Allocates the scratch ``S`` and ``P`` (``BH x N x N``) once."""
    if causal or plan.mask is not None:
        raise ValueError("the standard kernels are dense only (no mask, causal=False)")
    if dtype != "float32":
        raise ValueError(f"standard runs in float32 only, got dtype {dtype!r}")
    xp = be.xp
    BH, N, d = Q.shape
    check_heads(BH, "standard")
    S = be.scratch("S", (BH, N, N), xp.float32)
    P = be.scratch("P", (BH, N, N), xp.float32)
    scores = _product(be, count_io, Q, K, S, plan.scores, BH, True, scale, io)
    output = _product(be, count_io, P, V, O, plan.output, BH, False, 1.0, io)
    i32 = np.int32
    lse = i32(bool(save_lse))
    if plan.passes == 1:
        R = min(plan.R, N)
        rows = be.function(FILE, "standard_softmax_rows", count_io)
        grid, block, smem = (ceil_div(N, R), BH), (THREADS,), ENTRY * (R * N + 2 * R)
        args = (S, P, L, i32(N), i32(R), lse, io)
    else:
        W = min(plan.W, N)
        rows = be.function(FILE, "standard_softmax_strips", count_io)
        grid, block, smem = (N, BH), (32,), ENTRY * W     # one warp per row; m, l in registers
        args = (S, P, L, i32(N), i32(W), lse, io)

    def go():
        scores()
        rows(grid, block, args, shared_mem=smem)
        output()

    return go
