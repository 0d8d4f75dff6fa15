"""Host code of the FlashAttention backward kernels (``kernels/flash_backward.cu``), float32.

The kernels follow Algorithm 2 of FlashAttention-2 [FA2]_ (the backward of [FA]_, Algorithm 4)
in the exact order of the NumPy reference :mod:`ioattn.algorithms.backward_flash`:

1. ``flash_backward_preprocess`` (grid ``T_r x BH``): ``D_i = rowsum(dO_i o O_i)``, ``B_r`` rows
   per block, into a global scratch ``D`` of shape ``(BH, N)``.
2. ``flash_backward`` (grid ``1 x BH``): one thread block per batch x head loops over the ``K/V``
   blocks ``j`` and, inside, over the query blocks ``i``, holding the plan's footprint
   ``4 c d + 3 r d + 2 r + 2 r c`` floats in shared memory; ``dQ_i`` is read from global memory
   except in the first ``K/V`` block, updated and written back.

Parallelism is over batch x heads only, so that ``dQ`` moves ``T_c - 1`` reads and ``T_c``
writes as the model says; FA2's own kernel runs the key blocks in parallel and accumulates
``dQ`` with atomics, which moves more data. Compiled with ``-DIOATTN_COUNT_IO`` the kernels count
exactly ``ioattn.io_cost("flash", N, d, M, backward=True)`` per head.

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Algorithm 4.
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 2.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..algorithms.base import ceil_div
from ..api import min_M as least_M
from ..api import plan as make_plan
from .plans import MAX_GRID_Y, SharedMemoryExceeded, check_fits, check_heads, square_block

__all__ = ["FILE", "THREADS", "plan", "backward", "square_block"]

#: The kernel source.
FILE = "flash_backward.cu"

#: Threads per block of both kernels (``FLASH_BWD_THREADS`` in the source).
THREADS = 256

#: CUDA's limit on ``gridDim.y``, the batch x head index.
MAX_HEADS = MAX_GRID_Y


def _footprint(d: int, B_r: int, B_c: int) -> int:
    """Shared-memory entries of one block: ``4 B_c d + 3 B_r d + 2 B_r + 2 B_r B_c``."""
    return 4 * B_c * d + 3 * B_r * d + 2 * B_r + 2 * B_r * B_c


def plan(N: int, d: int, *, M: int | None = None, block=None, dtype: str = "float32",
         budget: int, **options):
    """The :class:`~ioattn.algorithms.backward_flash.FlashBackwardPlan` the kernels run.

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension.
    M : int, optional
        Cache entries: the blocks follow the NumPy rule, ``ioattn.plan("flash", N, d, M,
        backward=True)`` (or ``block`` when given). Default: the device's ``budget // 4``
        entries, with the largest square block ``B_r = B_c`` whose footprint fits in it
        (clipped at ``N``), unless ``block`` is given.
    block : (int, int), optional
        ``(B_r, B_c)`` instead of the rule.
    dtype : str
        Only ``"float32"``: the backward kernels run in float32.
    budget : int
        Shared memory per block of the device, in bytes.

    Raises
    ------
    ValueError
        For another dtype, any option, or a plan whose footprint does not fit in ``budget``
        (naming the largest ``M`` that does).
    """
    if dtype != "float32":
        raise ValueError(f"the flash backward kernels run in float32 only, got dtype {dtype!r}")
    if options:
        raise ValueError(f"the flash backward kernels take no options, got "
                         f"{', '.join(sorted(options))}")
    entries = budget // 4
    if M is None:
        if block is None:
            b = square_block(lambda B: _footprint(d, B, B) <= entries, N)
            if b < 1:
                need = 4 * least_M("flash", d, backward=True)
                raise SharedMemoryExceeded(f"the flash backward needs {need} bytes of shared "
                                           f"memory at d = {d}; the device offers {budget}")
            block = (b, b)
        M = max(entries, least_M("flash", d, backward=True, block=block))
    the_plan = make_plan("flash", N, d, M, backward=True,
                         **({} if block is None else {"block": block}))
    check_fits("flash", the_plan, budget, backward=True, block=block)
    return the_plan


def backward(be, plan, Q, K, V, O, dO, L, dQ, dK, dV, io, *, scale: float,
             count_io: bool) -> Callable[[], None]:
    """The launches of one backward pass, as a closure.

    ``Q, K, V, O, dO`` (and ``dQ, dK, dV``, prefilled with NaN, which the kernels overwrite) are
    float32 ``(BH, N, d)`` arrays of ``be.xp``, ``L`` the forward's row log-sum-exp ``(BH, N)``
    and ``io`` a uint64 ``(2,)`` counter. The scratch ``D`` (``(BH, N)``) is allocated here,
    once; the closure launches the preprocess (``D = rowsum(dO o O)``) and the main kernel.
    """
    if plan.mask is not None:
        raise ValueError("the flash backward kernels are dense: masks are not supported")
    BH, N, d = Q.shape
    check_heads(BH, "flash backward")
    xp = be.xp
    D = xp.empty((BH, N), dtype=xp.float32)
    preprocess = be.function(FILE, "flash_backward_preprocess", count_io)
    main = be.function(FILE, "flash_backward", count_io)
    n, dd = np.int32(N), np.int32(d)
    B_r, B_c = np.int32(plan.B_r), np.int32(plan.B_c)
    tau = np.float32(scale)
    shared = 4 * plan.footprint

    def go():
        preprocess((ceil_div(N, plan.B_r), BH), (THREADS,), (O, dO, D, n, dd, B_r, io))
        main((1, BH), (THREADS,), (Q, K, V, dO, L, D, dQ, dK, dV, n, dd, B_r, B_c, tau, io),
             shared_mem=shared)

    return go
