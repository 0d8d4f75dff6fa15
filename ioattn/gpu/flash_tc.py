"""Host code of the tensor-core FlashAttention-2 forward (``kernels/flash_tc.cu``): float16 and
bfloat16 storage, float32 accumulation, WMMA ``16 x 16 x 16`` tiles.

The schedule is the FA2 loop order of the NumPy reference (:func:`ioattn.algorithms.flash._fa2`,
Algorithm 1 of [FA2]_), with ``B_r`` and ``B_c`` multiples of 16, so the counted traffic per head
equals ``ioattn.io_cost("flash", N, d, M, block=(B_r, B_c), mask=..., save_lse=...)``.

Block rule (:func:`plan`): from :func:`ioattn.plan`'s FA2 rule for ``M``, ``B_r`` rounded down to
a multiple of 16 (at least 16), then ``B_c`` the largest multiple of 16 with the footprint
``2 B_r d + 3 B_r + 2 B_c d + B_r B_c <= M`` (``B_r`` lowered by 16 until ``B_c = 16`` fits),
capped at ``N`` rounded up to 16. Without ``M``, the largest square block (a multiple of 16)
of which two blocks fit on a multiprocessor with the shared memory reserved per block
(:func:`ioattn.gpu.plans.per_block_for`).

References
----------
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 1.
"""

from __future__ import annotations

import numpy as np

from ..api import plan as make_plan
from .plans import SharedMemoryExceeded, per_block_for

FILE = "flash_tc.cu"
KERNEL = {"float16": "flash_fwd_f16", "bfloat16": "flash_fwd_bf16"}
#: WMMA tile side: B_r, B_c and d are multiples of it.
TILE = 16
#: Most warps per block; a warp owns 16-row strips of the query block, several if B_r > 128.
MAX_WARPS = 8


def _round_up(n: int) -> int:
    return -(-n // TILE) * TILE


def _footprint(B_r: int, B_c: int, d: int) -> int:
    """The FA2 working set in entries: ``Q_i, O_i, m_i, l_i``, a scratch row, ``K_j, V_j``,
    ``S_ij``."""
    return 2 * B_r * d + 3 * B_r + 2 * B_c * d + B_r * B_c


def _blocks_for(N: int, d: int, M: int) -> tuple[int, int]:
    """``(B_r, B_c)``, multiples of 16, from the FA2 rule for a cache of ``M`` entries."""
    least = _footprint(TILE, TILE, d)
    if M < least:
        raise ValueError(f"the tensor-core flash kernel needs M >= {least} entries at d = {d} "
                         f"(a 16 x 16 block: 2 B_r d + 3 B_r + 2 B_c d + B_r B_c); got M = {M}")
    B_r = max(TILE, make_plan("flash", N, d, M).B_r // TILE * TILE)
    while True:
        B_c = (M - 2 * B_r * d - 3 * B_r) // (2 * d + B_r) // TILE * TILE
        if B_c >= TILE:
            return B_r, min(B_c, _round_up(N))
        B_r -= TILE                                   # terminates: B_r = 16 fits as M >= least


def plan(N: int, d: int, *, M: int | None = None, block=None, dtype: str = "float16",
         budget: int, **options):
    """The :class:`~ioattn.algorithms.flash.FlashPlan` the tensor-core kernel runs.

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension (``d`` a multiple of 16, at most 256).
    M : int, optional
        Cache size in entries: the block rule of the module docstring. Default: ``budget // 4``
        (or the block's footprint, if larger) and the largest square block whose shared memory
        fits in half of ``budget``.
    block : (int, int), optional
        ``(B_r, B_c)``, multiples of 16, instead of the rule.
    dtype : {"float16", "bfloat16"}
    budget : int
        Shared memory per block of the device, in bytes.

    Raises
    ------
    ValueError
        For ``d`` not a multiple of 16 or above 256, blocks not multiples of 16, unknown
        options, an ``M`` below the least 16 x 16 block, or a plan whose shared memory
        (:func:`shared_bytes`) exceeds ``budget``.
    """
    if options:
        raise ValueError(f"flash takes no options {sorted(options)} on the tensor cores")
    if dtype not in KERNEL:
        raise ValueError(f"the tensor-core flash kernel stores float16 or bfloat16, not {dtype!r}")
    if d % TILE or not 0 < d <= 256:
        raise ValueError(f"the tensor-core flash kernel needs d a multiple of {TILE} up to 256 "
                         f"(WMMA 16 x 16 x 16 tiles); got d = {d}")
    if block is not None:
        try:
            B_r, B_c = (int(b) for b in block)
        except (TypeError, ValueError):
            raise TypeError(f"block must be a pair (B_r, B_c), got {block!r}") from None
        if B_r <= 0 or B_c <= 0 or B_r % TILE or B_c % TILE:
            raise ValueError(f"the tensor-core flash kernel needs B_r and B_c positive multiples "
                             f"of {TILE}; got block = {tuple(block)}")
        M = _footprint(B_r, B_c, d) if M is None else M
    elif M is None:
        B = TILE                                      # (too large a 16 x 16: caught below)
        two = per_block_for(budget, 2)                # two resident blocks per multiprocessor
        while B + TILE <= _round_up(N) and shared_bytes(B + TILE, B + TILE, d) <= two:
            B += TILE
        # M counts entries, 16-bit ones too: a block may hold more entries than budget // 4
        B_r, B_c, M = B, B, max(budget // 4, _footprint(B, B, d))
    else:
        B_r, B_c = _blocks_for(N, d, M)
    the_plan = make_plan("flash", N, d, M, block=(B_r, B_c))
    # Q_i, K_j, V_j take 2 bytes an entry, the rest 4, and every tile row PAD bytes more
    need = shared_bytes(min(B_r, _round_up(N)), min(B_c, _round_up(N)), d)
    if need > budget:
        raise SharedMemoryExceeded(
            f"the flash plan for N = {N}, d = {d} needs {need} bytes of shared memory per block "
            f"(B_r = {B_r}, B_c = {B_c}), but the device has {budget}: use a smaller M")
    return the_plan


#: Bytes that pad every tile row in shared memory, so that the 8 rows of a 16-byte phase of a
#: tile load or store fall in distinct banks (``kernels/flash_tc.cu``).
PAD = 16


def shared_bytes(B_r: int, B_c: int, d: int) -> int:
    """Dynamic shared memory of one block: ``O_i`` and ``S_ij`` in float32 (``P_ij`` over
    ``S_ij``), ``m_i, l_i, alpha``, and ``Q_i, K_j, V_j`` in 16 bits, every tile row padded by
    :data:`PAD` bytes. The plan's footprint counts the model's entries (:func:`_footprint`),
    which the pads are not: they are never loaded or stored."""
    f32, f16 = PAD // 4, PAD // 2
    return 4 * (B_r * (d + f32) + B_r * (B_c + f32) + 3 * B_r) + 2 * (B_r + 2 * B_c) * (d + f16)


def forward(be, plan, Q, K, V, O, L, io, *, scale, causal, save_lse, dtype, count_io):
    """The launch of one forward pass (see the module docstring), as a closure.

    ``Q, K, V`` are ``(BH, N, d)`` float16 arrays, or ``uint16`` arrays of bfloat16 bits
    (:func:`ioattn.gpu.api.to_storage`); ``O`` float32 ``(BH, N, d)``, ``L`` float32 ``(BH, N)``
    (1 entry unless ``save_lse``), ``io`` uint64 ``(2,)``. The kernel folds ``scale`` into
    ``Q_i`` in float32 and rounds ``scale * Q_i`` once to the storage type, as the model scales
    ``Q_i`` in the cache.
    """
    if dtype not in KERNEL:
        raise ValueError(f"the tensor-core flash kernel stores float16 or bfloat16, not {dtype!r}")
    if dtype == "bfloat16" and be.name == "cuda":
        cc = be.info["compute_capability"]
        if tuple(int(x) for x in cc.split(".")) < (8, 0):
            raise ValueError(f"bfloat16 needs tensor cores of compute capability 8.0 (Ampere) or "
                             f"later; this GPU ({be.info['name']}) has {cc}: use "
                             f"dtype='float16'")
    storage = np.float16 if dtype == "float16" else np.uint16      # bfloat16: its raw bits
    for name, x in (("Q", Q), ("K", K), ("V", V)):
        if x.dtype != storage:
            raise TypeError(f"{name} must be stored as {np.dtype(storage).name} for dtype "
                            f"{dtype!r} (ioattn.gpu.api.to_storage), got {x.dtype}")
    BH, N, d = (int(n) for n in Q.shape)
    if d % TILE or d > 256:
        raise ValueError(f"the tensor-core flash kernel needs d a multiple of {TILE} up to 256; "
                         f"got d = {d}")
    # Blocks past N rounded up to 16 change nothing (one block either way) but shared memory.
    B_r, B_c = min(plan.B_r, _round_up(N)), min(plan.B_c, _round_up(N))
    if B_r % TILE or B_c % TILE:
        raise ValueError(f"the tensor-core flash kernel needs B_r and B_c multiples of {TILE}; "
                         f"the plan has {plan.B_r} x {plan.B_c}")
    warps = min(B_r // TILE, MAX_WARPS)
    smem = shared_bytes(B_r, B_c, d)
    kernel = be.function(FILE, KERNEL[dtype], count_io)
    grid = (-(-N // B_r), BH)
    args = (Q, K, V, O, L, np.int32(N), np.int32(d), np.int32(B_r), np.int32(B_c),
            np.float32(scale), np.int32(bool(causal)), np.int32(bool(save_lse)), io)

    def go():
        kernel(grid, (32 * warps,), args, shared_mem=smem)

    return go
