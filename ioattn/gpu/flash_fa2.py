"""Host code of the register-resident FlashAttention-2 forward (``kernels/flash_fa2.cu``):
float16 and bfloat16 storage, float32 accumulation, ``mma.sync.m16n8k16`` with ``Q_i``, ``S``,
``P`` and ``O_i`` in registers and ``K_j, V_j`` double-buffered by ``cp.async``.

The schedule is the FA2 loop order of :func:`ioattn.algorithms.flash._fa2` (Algorithm 1 of
[FA2]_), as in :mod:`ioattn.gpu.flash_tc`, so the counted traffic per head equals
``ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), mask=..., save_lse=...)``.

Blocks: ``d`` is 64 (``B_c = 64``) or 128 (``B_c = 16``), compiled in; each warp owns
``ROWS_PER_WARP = 32`` query rows (two ``m16`` tiles, so that every ``K_j`` and ``V_j`` fragment
loaded from shared memory serves both), and ``B_r = 32 w`` for ``w <= 4`` warps, by default the
largest up to 128 (FlashAttention-2's query block at ``d = 128``) and ``N`` rounded up to 32.

References
----------
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691.
"""

from __future__ import annotations

import numpy as np

from ..api import plan as make_plan
from .flash_tc import TILE, _footprint
from .plans import MAX_GRID_Y

FILE = "flash_fa2.cu"
#: ``B_c`` for each head dimension the kernel is compiled for.
B_C = {64: 64, 128: 16}
MAX_WARPS = 4
#: Query rows per warp: two m16 tiles (``MT = 2`` in the kernel).
ROWS_PER_WARP = 2 * TILE
#: Most heads along the grid's y axis (CUDA's limit); the kernel loops over the rest.
GRID_Y = MAX_GRID_Y
PAD = 16


def shared_bytes(B_r: int, d: int) -> int:
    """Dynamic shared memory: ``Q_i`` (``B_r`` rows), then over it ``K_j, V_j`` twice (``B_c``
    rows each), every row ``d + 8`` 16-bit entries."""
    return 2 * max(B_r, 4 * B_C[d]) * (d + PAD // 2)


def plan(N: int, d: int, *, M: int | None = None, block=None, dtype: str = "float16",
         budget: int, **options):
    """The :class:`~ioattn.algorithms.flash.FlashPlan` the kernel runs.

    Raises ``ValueError`` for ``d`` not 64 or 128, a dtype other than float16 or bfloat16, a
    ``block`` not ``(32 w, B_c)`` with ``w <= 4``, an ``M`` below the block's footprint, or
    shared memory above ``budget``.
    """
    if options:
        raise ValueError(f"flash_fa2 takes no options {sorted(options)}")
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"flash_fa2 stores float16 or bfloat16, not {dtype!r}")
    if d not in B_C:
        raise ValueError(f"flash_fa2 is compiled for d = 64 or 128; got d = {d}")
    B_c = B_C[d]
    if block is None:
        B_r = min(ROWS_PER_WARP * MAX_WARPS, -(-N // ROWS_PER_WARP) * ROWS_PER_WARP)
    else:
        B_r, b_c = (int(b) for b in block)
        if B_r % ROWS_PER_WARP or not 0 < B_r <= ROWS_PER_WARP * MAX_WARPS or b_c != B_c:
            raise ValueError(f"flash_fa2 needs block = (32 w, {B_c}) with 1 <= w <= "
                             f"{MAX_WARPS} at d = {d}; got {tuple(block)}")
    least = _footprint(B_r, B_c, d)
    if M is None:
        M = least
    elif M < least:
        raise ValueError(f"flash_fa2 needs M >= {least} entries for its block ({B_r}, {B_c}) "
                         f"at d = {d}; got M = {M}")
    if shared_bytes(B_r, d) > budget:
        raise ValueError(f"flash_fa2 needs {shared_bytes(B_r, d)} bytes of shared memory per "
                         f"block, the device has {budget}")
    return make_plan("flash", N, d, M, block=(B_r, B_c))


def forward(be, plan, Q, K, V, O, L, io, *, scale, causal, save_lse, dtype, count_io):
    """The launch of one forward pass, as a closure (arguments as
    :func:`ioattn.gpu.flash_tc.forward`)."""
    if dtype not in ("float16", "bfloat16"):
        raise ValueError(f"flash_fa2 stores float16 or bfloat16, not {dtype!r}")
    if be.name == "cuda":
        cc = be.info["compute_capability"]
        if dtype == "bfloat16" and tuple(int(x) for x in cc.split(".")) < (8, 0):
            raise ValueError(f"bfloat16 needs compute capability 8.0 or later; this GPU has "
                             f"{cc}: use dtype='float16'")
    storage = np.float16 if dtype == "float16" else np.uint16
    for name, x in (("Q", Q), ("K", K), ("V", V)):
        if x.dtype != storage:
            raise TypeError(f"{name} must be stored as {np.dtype(storage).name} for dtype "
                            f"{dtype!r}, got {x.dtype}")
    BH, N, d = (int(n) for n in Q.shape)
    if (d not in B_C or plan.B_c != B_C[d] or plan.B_r % ROWS_PER_WARP
            or plan.B_r > ROWS_PER_WARP * MAX_WARPS):
        raise ValueError(f"flash_fa2 runs d = 64 or 128 with block (32 w, B_c); got d = {d}, "
                         f"block ({plan.B_r}, {plan.B_c})")
    kernel = be.function(FILE, f"flash_fa2_{'f16' if dtype == 'float16' else 'bf16'}_d{d}",
                         count_io)
    grid = (-(-N // plan.B_r), min(BH, GRID_Y))
    args = (Q, K, V, O, L, np.int32(BH), np.int32(N), np.float32(scale),
            np.int32(bool(causal)), np.int32(bool(save_lse)), io)
    smem = shared_bytes(plan.B_r, d)

    def go():
        kernel(grid, (32 * (plan.B_r // ROWS_PER_WARP),), args, shared_mem=smem)

    return go
