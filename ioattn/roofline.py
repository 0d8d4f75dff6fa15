"""How fast can a schedule run on a GPU? A roofline from exact counts.

For a kernel of :mod:`ioattn.gpu` and the plan it runs, two numbers are exact:

- the entries it moves between global and shared memory: the closed form
  :func:`ioattn.io_cost` of its plan, which equals what the kernel itself counts when compiled
  with ``count_io=True`` (checked on the emulator in ``tests/test_roofline.py`` and
  ``tests/gpu``); in bytes, reads in the storage precision of ``Q, K, V`` (the 16-bit flash
  kernels read nothing else) or float32, writes in float32 (:func:`traffic_bytes`);
- the floating-point operations of its matrix products (:func:`attention_flops`): ``4 N^2 d``
  per head forward, the products ``Q K^T`` and ``P V`` at two operations per multiply-add, and
  ``10 N^2 d`` backward (five such products). The softmax's exponentials and divisions are not
  counted, as in the FlashAttention papers' TFLOP/s.

A GPU moves at most ``bandwidth`` bytes per second between its memory (HBM or GDDR) and the
chip, and does at most ``peak`` operations per second, so an implementation of the schedule that
overlaps its loads and its arithmetic perfectly still needs

.. math:: T = \\max\\left(\\frac{\\text{bytes}}{\\text{bandwidth}},
          \\frac{\\text{flops}}{\\text{peak}}\\right),

the *roofline* of Williams, Waterman and Patterson [WWP09]_; ``flops / T`` is the attainable
throughput. These are bounds computed from counts and datasheet figures
(:data:`ioattn.gpus.GPUS`), not measurements. The compute term bounds every run. The memory term
assumes that every counted entry crosses the memory interface: the GPU's L2 cache can serve a
re-read without it, so a real kernel can beat the memory term.
Launch overheads, occupancy, the L2 cache and partial sectors are not in the model.
One level down, :mod:`ioattn.gpu.predict` adds the shared-memory wavefronts and tensor-core
instructions the emulator counts, with the SMs and occupancy of each launch.

>>> p = predict("flash", 4096, 128, gpu="H100", dtype="float32", heads=16)
>>> p.bound, p.flops == 4 * 4096**2 * 128 * 16
('compute', True)
>>> p.tflops                                 # the H100 SXM's FP32 peak
67.0
>>> q = predict("flash", 4096, 128, gpu="H100", dtype="bfloat16", heads=16)
>>> q.bound, (q.plan.B_r, q.plan.B_c)        # 64 x 64 blocks: too few flops per byte
('memory', (64, 64))

References
----------
.. [WWP09] S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance
   model for multicore architectures", Communications of the ACM 52(4), 2009.
"""

from __future__ import annotations

from typing import NamedTuple

from .algorithms import get
from .algorithms.base import Plan
from .gpus import GPUS

__all__ = ["BYTES", "Prediction", "attention_flops", "traffic_bytes", "terms", "predict",
           "curve", "kernel_names"]

#: Bytes per entry of each storage precision.
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}

#: The kernels the roofline knows, as (name, dtype, backward): every kernel of ioattn.gpu.
KERNELS = (("flash", "float32", False), ("flash", "float16", False),
           ("flash", "bfloat16", False), ("square_tiling", "float32", False),
           ("standard", "float32", False), ("flash", "float32", True))


def kernel_names() -> list[str]:
    """Labels of :data:`KERNELS`, e.g. ``"flash (bfloat16)"``, ``"flash backward"``."""
    return [_label(n, t, b) for n, t, b in KERNELS]


def _label(name: str, dtype: str, backward: bool) -> str:
    return f"{name} backward" if backward else f"{name} ({dtype})"


def attention_flops(N: int, d: int, heads: int = 1, *, backward: bool = False) -> int:
    """Operations of the matrix products of attention without a mask: ``4 N^2 d`` per head
    forward (``S = Q K^T`` and ``P V``), ``10 N^2 d`` backward (``S`` recomputed, ``dV``,
    ``dP``, ``dQ``, ``dK``), two operations per multiply-add.

    >>> attention_flops(1024, 64), attention_flops(1024, 64, backward=True)
    (268435456, 671088640)
    """
    return (10 if backward else 4) * N * N * d * heads


def traffic_bytes(name: str, dtype: str, reads: int, writes: int) -> int:
    """Bytes of counted traffic: reads in the storage precision for flash (whose kernels read
    only ``Q, K, V`` forward), float32 for the others (they read float32 scratch too); writes
    in float32 (``O``, ``L`` and scratch are float32 in every kernel).

    >>> traffic_bytes("flash", "bfloat16", 10, 3), traffic_bytes("standard", "float32", 10, 3)
    (32, 52)
    """
    if dtype not in BYTES:
        raise ValueError(f"dtype must be one of {', '.join(BYTES)}, got {dtype!r}")
    return reads * (BYTES[dtype] if name == "flash" else 4) + writes * 4


class Prediction(NamedTuple):
    """The roofline of one kernel, plan and GPU: exact counts, and the times they imply."""

    gpu: str
    name: str
    dtype: str
    backward: bool
    plan: Plan
    heads: int
    reads: int          # entries, over all heads (exact)
    writes: int         # entries, over all heads (exact)
    bytes: int          # traffic_bytes of reads and writes (exact)
    flops: int          # attention_flops (exact)
    memory_time: float  # bytes / bandwidth, seconds
    compute_time: float  # flops / peak, seconds

    @property
    def time(self) -> float:
        """The least time in seconds: the larger of the two terms."""
        return max(self.memory_time, self.compute_time)

    @property
    def tflops(self) -> float:
        """Attainable throughput, ``flops / time``, in TFLOP/s."""
        return self.flops / self.time / 1e12

    @property
    def bound(self) -> str:
        """``"memory"`` or ``"compute"``: which term is the larger."""
        return "memory" if self.memory_time > self.compute_time else "compute"

    @property
    def intensity(self) -> float:
        """Operations per byte of counted traffic."""
        return self.flops / self.bytes


def _gpu(gpu: str):
    if gpu not in GPUS:
        raise ValueError(f"unknown GPU {gpu!r}; the roofline knows {', '.join(GPUS)}")
    return GPUS[gpu]


def terms(nbytes: int, flops: int, *, gpu: str, dtype: str) -> tuple[float, float]:
    """The roofline's two terms in seconds, ``(nbytes / bandwidth, flops / peak)``, with the
    bandwidth and the dense ``dtype`` peak of ``gpu``; the least time is the larger.

    >>> terms(3_350 * 10**9, 0, gpu="H100", dtype="bfloat16")        # one second of HBM3
    (1.0, 0.0)
    """
    spec = _gpu(gpu)
    if dtype not in spec.peak:
        raise ValueError(f"the {gpu} has no {dtype} peak in its datasheet "
                         f"(it has {', '.join(spec.peak)})")
    return nbytes / spec.bandwidth, flops / spec.peak[dtype]


def predict(name: str, N: int, d: int, M: int | None = None, *, gpu: str,
            dtype: str = "float32", heads: int = 1, backward: bool = False,
            **options) -> Prediction:
    """The roofline of kernel ``name`` at ``(N, d)`` with a cache budget of ``M`` entries on
    ``gpu``.

    Parameters
    ----------
    name : {"flash", "square_tiling", "standard"}
        The algorithm whose kernels run (``backward=True``: flash's backward kernel).
    N, d : int
        Sequence length and head dimension (no mask).
    M : int, optional
        The budget in entries; the blocks follow :func:`ioattn.gpu.gpu_plan`'s rule. Default:
        what the kernel takes on that GPU by itself (flash: the largest square block in half of
        its shared memory per block; the others: all of it).
    gpu : str
        A key of :data:`ioattn.gpus.GPUS`.
    dtype : {"float32", "float16", "bfloat16"}
        The 16-bit ones run flash on the tensor cores and use their dense peak; float32 uses the
        FP32 (non-tensor) peak.
    heads : int
        Independent ``(N, d)`` problems (batch times heads); both counts scale with it.
    **options
        The algorithm's options (``schedule`` for square tiling).

    Raises
    ------
    ValueError
        For an unknown GPU or kernel, a dtype the GPU's datasheet gives no peak for (bfloat16
        on a T4), or a plan that does not fit in the GPU's shared memory per block.
    """
    from .gpu.api import _check_dtype, gpu_plan

    spec = _gpu(gpu)
    _check_dtype(name, dtype)
    if backward and (name != "flash" or dtype != "float32"):
        raise ValueError("the backward kernel is flash's, in float32")
    terms(0, 0, gpu=gpu, dtype=dtype)                 # a GPU with a peak for dtype
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        raise ValueError(f"heads must be a positive int, got {heads!r}")
    plan = gpu_plan(name, N, d, M=M, dtype=dtype, budget=spec.shared_per_block,
                    backward=backward, **options)
    cost = get(name, backward).cost(plan)
    reads, writes = heads * cost.reads, heads * cost.writes
    nbytes = traffic_bytes(name, dtype, reads, writes)
    flops = attention_flops(N, d, heads, backward=backward)
    return Prediction(gpu, name, dtype, backward, plan, heads, reads, writes, nbytes, flops,
                      *terms(nbytes, flops, gpu=gpu, dtype=dtype))


def curve(name: str, N: int, d: int, Ms, *, gpu: str, **options) -> list[Prediction | None]:
    """:func:`predict` at each budget of ``Ms`` (each at least the algorithm's least budget):
    ``None`` where the plan needs more shared memory per block than ``gpu`` has."""
    from .gpu.plans import SharedMemoryExceeded

    out = []
    for M in Ms:
        try:
            out.append(predict(name, N, d, int(M), gpu=gpu, **options))
        except SharedMemoryExceeded:
            out.append(None)
    return out
