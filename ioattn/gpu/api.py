"""The public entry points of :mod:`ioattn.gpu`: run an algorithm's kernels, count their traffic.

The block sizes come from the same :class:`~ioattn.algorithms.base.Plan` as the NumPy reference
(:func:`ioattn.plan`), so the traffic the kernels count (compiled with ``-DIOATTN_COUNT_IO``)
is checked against :func:`ioattn.io_cost` for the same schedule.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .._validate import as_count, as_flag, suggest
from ..algorithms.base import Plan, get
from ..masks import Mask
from ..memory import IOCount
from . import backward as _backward
from . import flash as _flash
from . import flash_fa2 as _flash_fa2
from . import flash_fa2_backward as _flash_fa2_backward
from . import square_tiling as _square_tiling
from . import standard as _standard
from .backend import BACKENDS, Backend, get_backend

__all__ = ["GPUBackwardResult", "GPUResult", "Launch", "KERNELS", "BACKWARD_KERNELS", "DTYPES",
           "prepare", "run", "run_backward", "gpu_plan"]

#: The algorithms with GPU kernels, and the host code that launches them.
KERNELS = {"flash": _flash, "flash_fa2": _flash_fa2, "square_tiling": _square_tiling, "standard": _standard}

#: The backward kernels (:func:`run_backward`'s ``kernel``), and their host code.
BACKWARD_KERNELS = {"flash": _backward, "flash_fa2": _flash_fa2_backward}

#: Storage precisions: float32 everywhere; float16 and bfloat16 (tensor cores, float32
#: accumulation) for ``flash``.
DTYPES = ("float32", "float16", "bfloat16")

#: Largest head dimension the kernels take.
MAX_D = 256


@dataclass(frozen=True)
class GPUResult:
    """What :func:`run` returns.

    Attributes
    ----------
    output : array
        ``O``, shape ``(..., N, d)`` as the inputs, float32, on the backend (a CuPy array on the
        GPU, a NumPy array from the emulator).
    io : IOCount or None
        With ``count_io=True``: the entries the kernels loaded from (``reads``) and stored to
        (``writes``) global memory, summed over the leading batch and head dimensions; ``peak``
        is the plan's footprint, the shared-memory entries each block allocates. Per head this
        equals ``ioattn.io_cost`` for ``plan``.
    plan : Plan
        The block sizes, as :func:`ioattn.plan` gives them.
    lse : array or None
        With ``save_lse=True``, the row log-sum-exp ``L``, shape ``(..., N)``.
    heads : int
        The number of ``(N, d)`` problems (the product of the leading dimensions).
    """

    output: object
    io: IOCount | None
    plan: Plan
    lse: object = None
    heads: int = 1
    dtype: str = "float32"
    backend: str = "cuda"
    #: With ``backend="emulator-racecheck"``, or ``"emulator"`` inside
    #: :func:`ioattn.gpu.emulator.counting_sites`: every kernel's warp-level requests per
    #: instruction site (:class:`ioattn.gpu.emulator.SiteCount`: shared-memory wavefronts,
    #: global sectors, tensor-core instructions) of the last launch; empty otherwise.
    accesses: tuple = ()


@dataclass(frozen=True)
class GPUBackwardResult:
    """What :func:`run_backward` returns: ``output = (dQ, dK, dV)``; ``io``, ``plan`` and
    ``heads`` as in :class:`GPUResult`."""

    output: tuple
    io: IOCount | None
    plan: Plan
    heads: int = 1
    backend: str = "cuda"
    #: As :attr:`GPUResult.accesses`: every kernel's per-site requests.
    accesses: tuple = ()


class Launch:
    """Inputs on the device, outputs allocated, kernels compiled: calling it launches the
    kernels once (what :mod:`benchmarks.gpu` times); :meth:`result` collects the outputs."""

    def __init__(self, be: Backend, go: Callable[[], None], finish: Callable[[], object]):
        self.backend = be
        self._go, self._finish = go, finish

    def __call__(self) -> None:
        self._go()

    def result(self):
        """The outputs of the last launch (waits for the device)."""
        self.backend.synchronize()
        return self._finish()


def on_backend(x, be):
    """``x`` as an array of backend ``be``: CuPy on ``"cuda"``, NumPy on the emulators (a CuPy
    array is copied to the host)."""
    if be.name == "cuda":
        return be.xp.asarray(x)
    if type(x).__module__.startswith("cupy"):
        return x.get()
    return np.asarray(x)


def _as_heads(x, name, be, shape=None):
    """``x`` as a contiguous float32 ``(BH, N, d)`` array of the backend, with clear errors."""
    xp = be.xp
    x = on_backend(x, be)
    if x.ndim < 2:
        raise ValueError(f"{name} must be (N, d) or (..., N, d), got shape {tuple(x.shape)}")
    if shape is not None and tuple(x.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, but Q has shape {shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point values, got dtype {x.dtype}")
    if 0 in x.shape:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)})")
    bad = int(x.size - int(xp.count_nonzero(xp.isfinite(x))))
    if bad:
        raise ValueError(f"{name} has {bad} non-finite value(s) (NaN or infinity)")
    N, d = x.shape[-2:]
    return xp.ascontiguousarray(x.reshape(-1, N, d), dtype=xp.float32)


def to_storage(x, dtype: str, xp):
    """A float32 array in the storage precision the kernels read: float32, float16, or
    bfloat16 as its 16 raw bits (``uint16``), rounded to nearest even."""
    if dtype == "float32":
        return x
    if dtype == "float16":
        return x.astype(xp.float16)
    bits = x.view(xp.uint32)
    rounded = bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))
    return (rounded >> xp.uint32(16)).astype(xp.uint16)


def _check_arguments(name, *, M=None, block=None, dtype="float32", backend="cuda",
                     scale=None, options=None, **flags):
    """Every check of ``name`` and the arguments that needs no array and no device, so that a
    bad call says what is wrong before :func:`get_backend` looks for a GPU."""
    if not isinstance(name, str) or name not in KERNELS:
        raise ValueError(f"no GPU kernels for {name!r}{suggest(name, KERNELS)}; there are "
                         f"{', '.join(sorted(KERNELS))}")
    _check_dtype(name, dtype)
    for flag, value in flags.items():
        as_flag(value, flag)
    if M is not None:
        as_count(M, "M")
    if block is not None:
        if name not in ("flash", "flash_fa2"):
            raise ValueError(f"block is an option of flash only; {name} takes its blocks from M")
        if isinstance(block, (str, bytes)) or not hasattr(block, "__len__") or len(block) != 2:
            raise TypeError(f"block must be a pair (B_r, B_c), got {block!r}")
        as_count(block[0], "B_r"), as_count(block[1], "B_c")
    if scale is not None:
        _scale(scale, 1)
    if not isinstance(backend, Backend) and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {backend!r}{suggest(backend, BACKENDS)}")
    if options and name == "flash":
        raise ValueError(f"the flash kernels take no options {sorted(options)} (variant fa2)")
    if options and name != "flash_fa2":          # flash_fa2.plan refuses options
        get(name).check_options(options)


def _check_dtype(name, dtype):
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype != "float32" and name not in ("flash", "flash_fa2"):
        raise ValueError(f"dtype {dtype!r} is implemented for flash only; {name} runs in float32")


def _scale(scale, d):
    if scale is None:
        return 1.0 / float(np.sqrt(d))
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale) \
            or scale <= 0:
        raise ValueError(f"scale must be a finite positive number, got {scale!r}")
    return float(scale)


def gpu_plan(name: str, N: int, d: int, *, M: int | None = None, block=None,
             dtype: str = "float32", backend: str | Backend = "cuda", backward: bool = False,
             budget: int | None = None, **options) -> Plan:
    """The plan the kernels of ``name`` run with.

    With ``M`` (entries of shared memory per block) the block sizes follow the NumPy
    reference's rule for ``M`` (:func:`ioattn.plan`); the tensor-core kernel rounds them down to
    multiples of 16. With ``block=(B_r, B_c)`` (flash only) those blocks. With neither, ``M`` is
    the device's shared memory per block; flash then takes the largest square block that fits
    in half of it, so that two blocks share a multiprocessor. Raises ``ValueError`` when the
    plan does not fit in the device's shared memory.

    ``budget`` (bytes of shared memory per block) stands for the device: the plan a GPU with
    that much would run, with no GPU and no backend needed (:mod:`ioattn.roofline` uses it).
    """
    _check_arguments(name, M=M, block=block, dtype=dtype, backend=backend, backward=backward,
                     options=options)
    if budget is None:
        be = get_backend(backend) if isinstance(backend, str) else backend
        budget = be.shared_memory_per_block
    if backward and name not in BACKWARD_KERNELS:
        raise ValueError(f"no backward kernels for {name!r}; there are "
                         f"{', '.join(sorted(BACKWARD_KERNELS))}")
    host = BACKWARD_KERNELS[name] if backward else KERNELS[name]
    return host.plan(N, d, M=M, block=block, dtype=dtype, budget=budget, **options)


def prepare(name: str, Q, K, V, *, M: int | None = None, block=None, causal: bool = False,
            scale: float | None = None, dtype: str = "float32", count_io: bool = False,
            save_lse: bool = False, backend: str = "cuda", **options) -> Launch:
    """Everything :func:`run` does before launching; see :func:`run` for the parameters."""
    _check_arguments(name, M=M, block=block, dtype=dtype, backend=backend, scale=scale,
                     options=options, causal=causal, count_io=count_io, save_lse=save_lse)
    if causal and name not in ("flash", "flash_fa2"):
        raise ValueError(f"causal=True is implemented for flash only, not {name}")
    be = get_backend(backend)
    Qh = _as_heads(Q, "Q", be)
    shape = tuple(Q.shape)
    Kh, Vh = _as_heads(K, "K", be, shape), _as_heads(V, "V", be, shape)
    BH, N, d = Qh.shape
    if d > MAX_D:
        raise ValueError(f"the kernels take d <= {MAX_D}, got d = {d}")
    tau = _scale(scale, d)
    the_plan = gpu_plan(name, N, d, M=M, block=block, dtype=dtype, backend=be, **options)
    the_plan = replace(the_plan, mask=Mask.causal(N) if causal else None, save_lse=save_lse)
    xp = be.xp
    Qs, Ks, Vs = (to_storage(x, dtype, xp) for x in (Qh, Kh, Vh))
    O = xp.full((BH, N, d), np.nan, dtype=xp.float32)
    L = xp.full((BH, N), np.nan, dtype=xp.float32) if save_lse else xp.zeros(1, xp.float32)
    io = xp.zeros(2, dtype=xp.uint64)
    go = KERNELS[name].forward(be, the_plan, Qs, Ks, Vs, O, L, io, scale=tau, causal=causal,
                               save_lse=save_lse, dtype=dtype, count_io=count_io)
    lead = shape[:-2]

    def finish():
        counted = None
        if count_io:
            reads, writes = (int(v) for v in be.to_host(io))
            counted = IOCount(reads=reads, writes=writes, peak=the_plan.footprint)
        lse = L.reshape(*lead, N) if save_lse else None
        return GPUResult(O.reshape(*lead, N, d), counted, the_plan, lse, BH, dtype, be.name,
                         be.take_accesses())

    def launch():
        if count_io:                 # else nothing reads io: no extra kernel per launch
            io.fill(0)
        be.take_accesses()
        go()

    return Launch(be, launch, finish)


def run(name: str, Q, K, V, *, M: int | None = None, block=None, causal: bool = False,
        scale: float | None = None, dtype: str = "float32", count_io: bool = False,
        save_lse: bool = False, backend: str = "cuda", **options) -> GPUResult:
    """Attention ``softmax(scale Q K^T) V`` by the CUDA kernels of algorithm ``name``.

    Parameters
    ----------
    name : str
        ``"flash"`` (FlashAttention-2 forward), ``"flash_fa2"`` (the same schedule with ``Q_i``,
        ``S``, ``P``, ``O_i`` in registers: float16 or bfloat16, ``d`` 64 or 128;
        :mod:`ioattn.gpu.flash_fa2`), ``"square_tiling"`` (Saha-Ye Algorithm 1) or
        ``"standard"`` (``S`` and ``P`` materialised).
    Q, K, V : array_like
        Finite floating arrays of one shape ``(N, d)`` or ``(..., N, d)`` (batch and heads in
        front), NumPy or CuPy; ``d <= 256``.
    M : int, optional
        The cache budget in shared-memory entries per block; the block sizes follow the NumPy
        reference's rule for it (see :func:`gpu_plan`). Default: from the device.
    block : (int, int), optional
        ``(B_r, B_c)`` for flash, instead of the rule.
    causal : bool
        Causal mask (flash only): only the blocks with a visible key are visited.
    scale : float, optional
        The softmax scale; ``1 / sqrt(d)`` by default.
    dtype : {"float32", "float16", "bfloat16"}
        The precision ``Q, K, V`` are stored and multiplied in; the 16-bit ones use the tensor
        cores with float32 accumulation (flash only).
    count_io : bool
        Compile the kernels with ``-DIOATTN_COUNT_IO`` and return the counted traffic in
        ``io``.
    save_lse : bool
        Also write the row log-sum-exp ``L``.
    backend : {"cuda", "emulator", "emulator-racecheck"}
        ``"emulator"`` runs the same kernel sources on the CPU (small problems only);
        ``"emulator-racecheck"`` also stops at any shared-memory race between threads.
    **options
        The algorithm's options (``schedule`` for square tiling).

    Raises
    ------
    GPUUnavailableError
        With ``backend="cuda"`` and no usable GPU; the message says what to do.
    ValueError, TypeError
        For bad shapes, dtypes, non-finite values, or an ``M`` the algorithm or the device's
        shared memory cannot take.
    """
    launch = prepare(name, Q, K, V, M=M, block=block, causal=causal, scale=scale, dtype=dtype,
                     count_io=count_io, save_lse=save_lse, backend=backend, **options)
    launch()
    return launch.result()


def run_backward(Q, K, V, O, dO, L, *, M: int | None = None, block=None,
                 scale: float | None = None, count_io: bool = False,
                 backend: str = "cuda", kernel: str = "flash", dtype: str = "float32",
                 causal: bool = False) -> GPUBackwardResult:
    """The gradients ``(dQ, dK, dV)`` (float32) by a FlashAttention backward kernel, from the
    forward's ``O`` and ``L`` (``run("flash", ..., save_lse=True)``) and the upstream ``dO``.

    ``kernel="flash"`` (the default) is the readable float32 kernel, one block per head; its
    count equals ``ioattn.io_cost("flash", N, d, M, backward=True)`` per head.
    ``kernel="flash_fa2"`` is FlashAttention-2's backward, one block per key block, on the
    tensor cores (``dtype`` float16 or bfloat16, ``d`` 64 or 128, ``causal`` allowed;
    :mod:`ioattn.gpu.flash_fa2_backward`); its count equals ``ioattn.io_cost("flash", N, d, M,
    backward=True, block=(B_r, B_c), dq="atomic", mask=...)`` per head. ``Q, K, V, dO`` are
    rounded to ``dtype``; ``O`` and ``L`` are read in float32. ``M``, ``block``, ``scale``,
    ``count_io`` and ``backend`` as in :func:`run`.
    """
    if not isinstance(kernel, str) or kernel not in BACKWARD_KERNELS:
        raise ValueError(f"no backward kernels {kernel!r}{suggest(kernel, BACKWARD_KERNELS)}; "
                         f"there are {', '.join(sorted(BACKWARD_KERNELS))}")
    _check_arguments(kernel, M=M, block=block, backend=backend, scale=scale, dtype=dtype,
                     count_io=count_io, causal=causal)
    if kernel == "flash" and dtype != "float32":
        raise ValueError(f"the readable flash backward runs in float32, not {dtype!r}; "
                         f"kernel='flash_fa2' takes float16 and bfloat16")
    be = get_backend(backend)
    shape = tuple(Q.shape)
    Qh = _as_heads(Q, "Q", be)
    Kh, Vh, Oh, dOh = (_as_heads(x, n, be, shape) for x, n in ((K, "K"), (V, "V"), (O, "O"),
                                                                 (dO, "dO")))
    BH, N, d = Qh.shape
    if d > MAX_D:
        raise ValueError(f"the kernels take d <= {MAX_D}, got d = {d}")
    xp = be.xp
    Lh = xp.asarray(L) if be.name == "cuda" else np.asarray(L if not hasattr(L, "get")
                                                             else L.get())
    if tuple(Lh.shape) != shape[:-1]:
        raise ValueError(f"L has shape {tuple(Lh.shape)}, expected {shape[:-1]}")
    Lh = xp.ascontiguousarray(Lh.reshape(BH, N), dtype=xp.float32)
    if bool(xp.isnan(Lh).any()) or bool(xp.isneginf(Lh).any()):
        raise ValueError("L has NaN or -inf entries; pass the forward's row log-sum-exp")
    tau = _scale(scale, d)
    the_plan = gpu_plan(kernel, N, d, M=M, block=block, dtype=dtype, backend=be,
                        backward=True)
    if causal:
        the_plan = replace(the_plan, mask=Mask.causal(N))
    grads = tuple(xp.full((BH, N, d), np.nan, dtype=xp.float32) for _ in range(3))
    io = xp.zeros(2, dtype=xp.uint64)
    if kernel == "flash":
        go = _backward.backward(be, the_plan, Qh, Kh, Vh, Oh, dOh, Lh, *grads, io, scale=tau,
                                count_io=count_io)
    else:
        Qs, Ks, Vs, dOs = (to_storage(x, dtype, xp) for x in (Qh, Kh, Vh, dOh))
        go = _flash_fa2_backward.backward(be, the_plan, Qs, Ks, Vs, Oh, dOs, Lh, *grads, io,
                                          scale=tau, count_io=count_io, dtype=dtype)
    be.take_accesses()
    go()
    be.synchronize()
    counted = None
    if count_io:
        reads, writes = (int(v) for v in be.to_host(io))
        counted = IOCount(reads=reads, writes=writes, peak=the_plan.footprint)
    out = tuple(g.reshape(shape) for g in grads)
    return GPUBackwardResult(out, counted, the_plan, BH, be.name, be.take_accesses())
