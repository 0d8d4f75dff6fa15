"""Host code of the FlashAttention forward kernels: block sizes, launch.

float32 runs ``kernels/flash.cu`` (one block per query block, shared memory = the model's
cache); float16 and bfloat16 run the tensor-core kernel of :mod:`ioattn.gpu.flash_tc`. Both
follow the FA2 schedule of :mod:`ioattn.algorithms.flash`, so their counted traffic is
``ioattn.io_cost("flash", N, d, M, block=(B_r, B_c))`` per head.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.base import ceil_div
from ..api import plan as make_plan
from . import flash_tc
from .plans import (ENTRY, SharedMemoryExceeded, check_fits, check_heads, per_block_for,
                    square_block)

FILE = "flash.cu"


def footprint(d: int, B_r: int, B_c: int) -> int:
    """Shared-memory entries of a ``B_r x B_c`` block: ``2 B_r d + 3 B_r + 2 B_c d + B_r B_c``."""
    return 2 * B_r * d + 3 * B_r + 2 * B_c * d + B_r * B_c


def plan(N, d, *, M=None, block=None, dtype="float32", budget, **options):
    """The FA2 plan the kernels run: ``block``, else the NumPy rule for ``M``, else the largest
    square block of which two fit on a multiprocessor, each with the shared memory the device
    reserves per block (:func:`ioattn.gpu.plans.per_block_for`).
    The tensor-core kernel's rule is :func:`ioattn.gpu.flash_tc.plan`."""
    if options:
        raise ValueError(f"the flash kernels take no options {sorted(options)} (variant fa2)")
    if dtype != "float32":
        return flash_tc.plan(N, d, M=M, block=block, dtype=dtype, budget=budget)
    if block is not None:
        the_plan = make_plan("flash", N, d, M if M is not None else footprint(d, *block),
                             block=tuple(block))
    elif M is not None:
        the_plan = make_plan("flash", N, d, M)
    else:
        M = per_block_for(budget, 2) // ENTRY
        B = square_block(lambda b: footprint(d, b, b) <= M, N)
        if B < 1:
            raise SharedMemoryExceeded(f"no flash block fits in the device's {budget} bytes "
                                       f"of shared memory at d = {d}")
        the_plan = make_plan("flash", N, d, M, block=(B, B))
    check_fits("flash", the_plan, budget, block=block)
    return the_plan


def kernel_block(plan) -> tuple[int, int]:
    """The ``(B_r, B_c)`` the kernel lays its shared memory out with: the plan's, clipped at
    ``N`` as its footprint is (a block larger than ``N`` holds ``N`` rows; the one block of the
    grid is the same). The kernel's layout and the shared memory of the launch then agree:
    ``footprint(d, *kernel_block(plan)) == plan.footprint``."""
    return min(plan.B_r, plan.N), min(plan.B_c, plan.N)


def threads(B_r: int, d: int) -> int:
    """Threads per block: a warp per 32 entries of ``O_i``, from 1 to 8 warps."""
    return int(min(256, max(32, 32 * ceil_div(B_r * d, 32))))


def forward(be, plan, Q, K, V, O, L, io, *, scale, causal, save_lse, dtype, count_io):
    """A closure launching the forward kernel once; see :mod:`ioattn.gpu.api`."""
    check_heads(Q.shape[0], "flash")
    if dtype != "float32":
        return flash_tc.forward(be, plan, Q, K, V, O, L, io, scale=scale, causal=causal,
                                save_lse=save_lse, dtype=dtype, count_io=count_io)
    BH, N, d = Q.shape
    B_r, B_c = kernel_block(plan)
    kernel = be.function(FILE, "flash_fwd_f32", count_io)
    grid = (ceil_div(N, B_r), BH)
    args = (Q, K, V, O, L, np.int32(N), np.int32(d), np.int32(B_r), np.int32(B_c),
            np.float32(scale), np.int32(causal), np.int32(save_lse), io)
    smem = footprint(d, B_r, B_c) * ENTRY

    def go():
        kernel(grid, (threads(B_r, d),), args, shared_mem=smem)

    return go
