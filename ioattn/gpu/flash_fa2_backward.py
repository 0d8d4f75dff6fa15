"""Host code of the FlashAttention-2-class backward (``kernels/flash_fa2_backward.cu``): float16
and bfloat16 storage, float32 accumulation, ``mma.sync.m16n8k16``, one thread block per key
block (a grid of ``T_c x`` batch-heads, as [FA2]_, Section 3.2, parallelises the backward).

1. ``flash_fa2_bwd_prep_*`` (grid ``T_r x`` heads): ``D_i = rowsum(dO_i o O_i)`` into a scratch
   ``D`` of shape ``(BH, N)``, and ``dQ = 0``.
2. ``flash_fa2_bwd_*`` (grid ``T_c x`` heads): ``K_j, V_j`` in shared memory, ``dK_j, dV_j`` in
   registers; for each query block ``Q_i, dO_i, L_i, D_i`` double-buffered by ``cp.async``,
   ``S^T, P^T, dP^T, dS^T`` in registers, ``dS^T`` through shared memory for ``dQ_i += dS K_j``,
   which is added into ``dQ`` in float32 by ``atomicAdd``.

``dQ`` by atomics rather than by a second pass: a second pass (parallel over query blocks)
would redo two of the five products of every block pair (``S`` and ``dP``: 40% more
tensor-core work) and read ``K``, ``V`` again for every query block (``2 N d T_r`` entries);
the atomics move ``r d`` entries each way per block pair instead. The price is an order of the
additions that varies from run to run (float32 rounding only).

Since the key blocks run in parallel, none can start ``dQ_i`` from zeros in the cache as the
model's default schedule does: this is the model's ``dq="atomic"`` schedule
(:mod:`ioattn.algorithms.backward_flash`), and the counted traffic per head equals
``ioattn.io_cost("flash", N, d, M, backward=True, block=(B_r, B_c), dq="atomic",
mask=...)``: ``N d`` more reads and writes than ``dq="store"`` (dense), an atomic add counted
as a read and a write of its entry.

Blocks: ``d`` is 64 (``B_r = 64``) or 128 (``B_r = 16``), compiled in; ``B_c = 16 w`` keys for
``w <= 4`` warps, by default the most that fit in the device's shared memory, up to ``N``
rounded up to 16.

References
----------
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 2 and Section 3.2.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..algorithms.base import ceil_div
from ..api import min_M as least_M
from ..api import plan as make_plan
from ..masks import Mask
from .flash_fa2 import GRID_Y as _GRID_Y
from .flash_tc import TILE, _round_up

__all__ = ["FILE", "B_R", "MAX_WARPS", "GRID_Y", "shared_bytes", "plan", "backward"]

FILE = "flash_fa2_backward.cu"
#: ``B_r`` (query rows per step) for each head dimension the kernel is compiled for.
B_R = {64: 64, 128: 16}
MAX_WARPS = 4
#: Most heads along the grid's y axis; the kernels loop over the rest.
GRID_Y = _GRID_Y
#: Threads of the preprocess.
PREP_THREADS = 128
PAD = 16


def shared_bytes(B_c: int, d: int) -> int:
    """Dynamic shared memory of the main kernel: ``K_j, V_j`` (``B_c`` rows), ``Q_i, dO_i``
    twice (``B_r`` rows), every row ``d + 8`` 16-bit entries; ``dS^T`` (``B_c`` rows of
    ``B_r + 8``); ``L_i, D_i`` twice (``B_r`` floats)."""
    B_r = B_R[d]
    return 2 * (2 * B_c + 4 * B_r) * (d + PAD // 2) + 2 * B_c * (B_r + 8) + 16 * B_r


def _check_dtype(dtype):
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"flash_fa2's backward stores float16 or bfloat16, not {dtype!r}")


def plan(N: int, d: int, *, M: int | None = None, block=None, dtype: str = "float16",
         budget: int, **options):
    """The :class:`~ioattn.algorithms.backward_flash.FlashBackwardPlan` (``dq="atomic"``) the
    kernels run.

    Raises ``ValueError`` for ``d`` not 64 or 128, a dtype other than float16 or bfloat16, a
    ``block`` not ``(B_r, 16 w)`` with ``w <= 4``, an ``M`` below the block's footprint, or
    shared memory above ``budget``.
    """
    if options:
        raise ValueError(f"flash_fa2's backward takes no options {sorted(options)}")
    _check_dtype(dtype)
    if d not in B_R:
        raise ValueError(f"flash_fa2's backward is compiled for d = 64 or 128; got d = {d}")
    B_r = B_R[d]
    if block is None:
        fits = [w for w in range(1, MAX_WARPS + 1) if shared_bytes(TILE * w, d) <= budget]
        if not fits:
            raise ValueError(f"flash_fa2's backward needs {shared_bytes(TILE, d)} bytes of "
                             f"shared memory per block at d = {d}, the device has {budget}")
        B_c = TILE * min(max(fits), _round_up(N) // TILE)
    else:
        b_r, B_c = (int(b) for b in block)
        if b_r != B_r or B_c % TILE or not 0 < B_c <= TILE * MAX_WARPS:
            raise ValueError(f"flash_fa2's backward needs block = ({B_r}, 16 w) with 1 <= w <= "
                             f"{MAX_WARPS} at d = {d}; got {tuple(block)}")
    least = least_M("flash", d, backward=True, block=(B_r, B_c))
    if M is None:
        M = least
    elif M < least:
        raise ValueError(f"flash_fa2's backward needs M >= {least} entries for its block "
                         f"({B_r}, {B_c}) at d = {d}; got M = {M}")
    if shared_bytes(B_c, d) > budget:
        raise ValueError(f"flash_fa2's backward needs {shared_bytes(B_c, d)} bytes of shared "
                         f"memory per block, the device has {budget}")
    return make_plan("flash", N, d, M, backward=True, block=(B_r, B_c), dq="atomic")


def backward(be, plan, Q, K, V, O, dO, L, dQ, dK, dV, io, *, scale: float, count_io: bool,
             dtype: str) -> Callable[[], None]:
    """The launches of one backward pass, as a closure.

    ``Q, K, V, dO`` are ``(BH, N, d)`` arrays of ``be.xp`` in the storage of ``dtype``
    (:func:`ioattn.gpu.api.to_storage`), ``O`` float32 ``(BH, N, d)``, ``L`` float32 ``(BH,
    N)``, ``dQ, dK, dV`` float32 ``(BH, N, d)`` (every entry written), ``io`` a uint64 ``(2,)``
    counter. ``plan.mask`` is None or the causal mask. The scratch ``D`` is allocated here.
    """
    _check_dtype(dtype)
    if be.name == "cuda":
        cc = be.info["compute_capability"]
        if dtype == "bfloat16" and tuple(int(x) for x in cc.split(".")) < (8, 0):
            raise ValueError(f"bfloat16 needs compute capability 8.0 or later; this GPU has "
                             f"{cc}: use dtype='float16'")
    storage = np.float16 if dtype == "float16" else np.uint16
    for name, x in (("Q", Q), ("K", K), ("V", V), ("dO", dO)):
        if x.dtype != storage:
            raise TypeError(f"{name} must be stored as {np.dtype(storage).name} for dtype "
                            f"{dtype!r}, got {x.dtype}")
    BH, N, d = (int(n) for n in Q.shape)
    if d not in B_R or plan.B_r != B_R[d] or plan.B_c % TILE or plan.B_c > TILE * MAX_WARPS \
            or getattr(plan, "dq", None) != "atomic":
        raise ValueError(f"flash_fa2's backward runs d = 64 or 128 with block (B_r, 16 w), "
                         f"dq='atomic'; got d = {d}, block ({plan.B_r}, {plan.B_c})")
    causal = plan.mask is not None
    if causal and plan.mask != Mask.causal(N):
        raise ValueError("flash_fa2's backward takes the causal mask or none")
    short = "f16" if dtype == "float16" else "bf16"
    prep = be.function(FILE, f"flash_fa2_bwd_prep_{short}", count_io)
    main = be.function(FILE, f"flash_fa2_bwd_{short}_d{d}", count_io)
    xp = be.xp
    D = xp.empty((BH, N), dtype=xp.float32)
    heads = min(BH, GRID_Y)
    n, bh = np.int32(N), np.int32(BH)
    prep_args = (O, dO, D, dQ, bh, n, np.int32(d), np.int32(plan.B_r), io)
    main_args = (Q, K, V, dO, L, D, dQ, dK, dV, bh, n, np.float32(scale),
                 np.int32(causal), io)
    smem = shared_bytes(plan.B_c, d)

    def go():
        prep((ceil_div(N, plan.B_r), heads), (PREP_THREADS,), prep_args)
        main((ceil_div(N, plan.B_c), heads), (32 * (plan.B_c // TILE),), main_args,
             shared_mem=smem)

    return go
