"""What the host code of every kernel shares about plans: does a plan fit in the device's shared
memory, the largest ``M`` that does, and the square block a default plan takes."""

from __future__ import annotations

from typing import Callable

from ..algorithms.base import ceil_div
from ..api import plan as make_plan

#: Bytes per shared-memory entry of the float32 kernels.
ENTRY = 4

#: CUDA's limit on ``gridDim.y`` (CUDA C++ Programming Guide, Features and Technical
#: Specifications: "Maximum y- or z-dimension of a grid of thread blocks" 65535), which every
#: kernel takes as its batch x head index.
MAX_GRID_Y = 65535


#: Shared memory reserved per resident block on devices of compute capability 8.x and 9.0: the
#: CUDA C++ Programming Guide (Compute Capability 8.x, Shared Memory): "the maximum amount of
#: shared memory per thread block is smaller than the maximum shared memory partition available
#: per SM. The 1 KB of shared memory not made available to a thread block is reserved for system
#: use." (So an SM holds the opt-in maximum per block plus this: 164 KB on 8.0, 228 KB on 9.0.)
RESERVED = 1024


def per_block_for(budget: int, blocks: int) -> int:
    """The bytes of shared memory a block may take for ``blocks`` blocks to be resident on one
    multiprocessor of a device whose opt-in maximum per block is ``budget``: the SM holds
    ``budget + RESERVED`` bytes, and every resident block costs its own plus ``RESERVED``, so
    ``(budget + RESERVED) // blocks - RESERVED``. (On compute capability 7.5, which reserves
    nothing, this leaves ``RESERVED (blocks - 1) / blocks`` bytes unused: safe, not tight.)"""
    return (budget + RESERVED) // blocks - RESERVED


def resident_blocks(budget: int, shared_bytes: int) -> int:
    """How many blocks of ``shared_bytes`` each fit on one multiprocessor, by shared memory
    alone, on a device whose opt-in maximum per block is ``budget`` (see :data:`RESERVED`)."""
    return (budget + RESERVED) // (shared_bytes + RESERVED)


class SharedMemoryExceeded(ValueError):
    """A plan needs more shared memory per block than the device (or the GPU modelled) has."""


def largest_M(name: str, N: int, d: int, M: int, budget: int, *, backward: bool = False,
              **options) -> int:
    """The largest ``M' <= M`` whose plan (the NumPy rule of ``name``) fits in ``budget`` bytes:
    the rule's footprint grows with ``M`` and never exceeds it, so ``budget // 4`` fits."""
    def fits(m):
        return ENTRY * make_plan(name, N, d, m, backward=backward, **options).footprint <= budget

    lo, hi = budget // ENTRY, M
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def check_fits(name: str, the_plan, budget: int, *, backward: bool = False,
               block=None, **options) -> None:
    """A clear ``ValueError`` when ``the_plan`` needs more than ``budget`` bytes of shared memory
    per block; for a plan from the rule, it names the largest ``M`` that fits."""
    need = ENTRY * the_plan.footprint
    if need <= budget:
        return
    what = f"block {tuple(block)}" if block is not None else f"M = {the_plan.M}"
    hint = "" if block is not None else \
        f": use M <= {largest_M(name, the_plan.N, the_plan.d, the_plan.M, budget, backward=backward, **options)}"  # noqa: E501
    raise SharedMemoryExceeded(
        f"{name}{' backward' if backward else ''} with {what} needs {need} bytes of shared memory "
        f"per block ({the_plan.footprint} entries), but the device allows {budget}{hint}")


def check_heads(BH: int, name: str) -> None:
    """A clear ``ValueError`` when ``BH`` batch x heads exceed :data:`MAX_GRID_Y`, the launch's
    ``gridDim.y`` (a larger grid does not launch on a GPU)."""
    if BH > MAX_GRID_Y:
        raise ValueError(f"{name}: at most {MAX_GRID_Y} batch x heads per launch (CUDA's limit "
                         f"on gridDim.y), got {BH}; run the heads in groups")


def rule_plan(name: str, N: int, d: int, *, M, block, dtype, budget, **options):
    """The plan of a float32 kernel whose tiles follow from ``M`` alone (square tiling,
    standard attention): :func:`ioattn.plan` for ``M``, by default the device's ``budget // 4``
    entries; ``ValueError`` for ``block``, another dtype, or a plan beyond ``budget``."""
    if block is not None:
        raise ValueError(f"{name} takes no block=; its tiles follow from M")
    if dtype != "float32":
        raise ValueError(f"{name} runs in float32 only, got dtype {dtype!r}")
    the_plan = make_plan(name, N, d, budget // ENTRY if M is None else M, **options)
    check_fits(name, the_plan, budget, **options)
    return the_plan


def square_block(fits: Callable[[int], bool], N: int, multiple: int = 1) -> int:
    """The largest ``B`` (a multiple of ``multiple``, at most ``N`` rounded up to one) for which
    ``fits(B)`` holds, or 0 when none does; ``fits`` must be monotone."""
    cap = ceil_div(N, multiple) * multiple
    B = 0
    while B + multiple <= cap and fits(B + multiple):
        B += multiple
    return B
