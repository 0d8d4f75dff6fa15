"""Where the kernels run: an NVIDIA GPU through CuPy, or the CPU emulator.

Both backends compile the same sources (:mod:`ioattn.gpu.sources`) and launch them with CuPy's
``RawModule`` calling convention, ``function(grid, block, args, shared_mem=bytes)``, where
``args`` holds arrays of the backend's array module ``xp`` (CuPy or NumPy) and NumPy scalars of
the kernel's parameter types (``numpy.int32`` for ``int``, ``numpy.float32`` for ``float``).
The host code of each algorithm is written once against this interface.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from .device import require_gpu
from .nvrtc import compile_module, options
from .sources import source

#: Shared memory per block (bytes) the emulator offers: the opt-in maximum of an H100 or H200.
EMULATED_SHARED_MEMORY = 227 * 1024

#: CUDA's default limit on dynamic shared memory, above which a kernel must opt in.
DEFAULT_DYNAMIC_LIMIT = 48 * 1024


class Backend:
    """Compiles kernel sources and launches their kernels; see the module docstring."""

    name: str
    xp = None
    #: Shared memory one block may use, in bytes.
    shared_memory_per_block: int

    def function(self, file: str, kernel: str, count_io: bool):
        """Kernel ``kernel`` of source ``file``, compiled with ``-DIOATTN_COUNT_IO`` when
        ``count_io``, as a callable ``(grid, block, args, shared_mem)``."""
        module = self._module(file, count_io)
        function = module.get_function(kernel)
        opted = [DEFAULT_DYNAMIC_LIMIT]      # the opt-in set so far (one cuFuncSetAttribute)

        def launch(grid, block, args, shared_mem=0):
            if shared_mem > opted[0]:
                function.max_dynamic_shared_size_bytes = int(shared_mem)
                opted[0] = int(shared_mem)
            function(tuple(grid), tuple(block), tuple(args), shared_mem=int(shared_mem))
            self._log().extend(getattr(function, "accesses", ()))

        return launch

    def synchronize(self) -> None:
        """Wait for every launched kernel to finish."""

    def take_accesses(self) -> tuple:
        """The per-site request counts the launches since the last call recorded (the
        emulator's race-check and counting builds record them), and forget them."""
        out = tuple(self._log())
        self._log().clear()
        return out

    def _log(self) -> list:
        return self.__dict__.setdefault("_access_log", [])

    #: While :meth:`shared_scratch` is active: scratch arrays by (tag, shape, dtype).
    _scratch = None

    def scratch(self, tag: str, shape: tuple, dtype):
        """An uninitialised array for a kernel's scratch (``S`` and ``P`` of the materialising
        algorithms): a new one, or inside :meth:`shared_scratch` the one every launch prepared
        there with the same ``tag``, shape and dtype shares (launches on one stream run one
        after another, so they may)."""
        if self._scratch is None:
            return self.xp.empty(shape, dtype=dtype)
        key = (tag, tuple(shape), np.dtype(dtype).str)
        if key not in self._scratch:
            self._scratch[key] = self.xp.empty(shape, dtype=dtype)
        return self._scratch[key]

    @contextmanager
    def shared_scratch(self):
        """Within the block, launches prepared share their scratch (:meth:`scratch`): the
        benchmark's input sets then hold one ``N x N`` scratch, not one each."""
        self._scratch = {}
        try:
            yield self
        finally:
            self._scratch = None

    def to_host(self, x) -> np.ndarray:
        """``x`` as a NumPy array."""
        return np.asarray(x)

    def _module(self, file, count_io):  # pragma: no cover - overridden
        raise NotImplementedError


class CudaBackend(Backend):
    """The current CUDA GPU through CuPy: each source compiled by
    :func:`~ioattn.gpu.nvrtc.compile_module` (NVRTC; nvcc when NVRTC rejects it)."""

    name = "cuda"

    def __init__(self):
        require_gpu("ioattn.gpu")
        import cupy

        from .device import device_info

        self.xp = cupy
        self.info = device_info()
        self.shared_memory_per_block = self.info["shared_memory_per_block"]
        self._modules = {}

    def _module(self, file, count_io):
        key = (file, count_io)
        if key not in self._modules:
            self._modules[key] = compile_module(file, count_io=count_io)
        return self._modules[key]

    def synchronize(self):
        self.xp.cuda.get_current_stream().synchronize()

    def to_host(self, x):
        return self.xp.asnumpy(x)


class EmulatorBackend(Backend):
    """The kernels compiled as C++ for the CPU and run one block at a time, each CUDA thread a
    fiber (:mod:`ioattn.gpu.emulator`). Exact counts and float32 results, slowly: for small
    problems, tests and readers without a GPU.

    With ``race_check=True`` (the backend ``"emulator-racecheck"``) every launch also checks
    shared memory for races and raises :class:`~ioattn.gpu.emulator.SharedMemoryRace` on one;
    without it, the environment variable ``IOATTN_EMULATOR_RACECHECK=1`` does the same.

    Inside :func:`ioattn.gpu.emulator.counting_sites` (or with ``IOATTN_EMULATOR_COUNT=1``) the
    plain emulator also counts every launch's warp-level requests per instruction site
    (shared-memory wavefronts, global sectors: :class:`~ioattn.gpu.emulator.SiteCount`, in the
    result's ``accesses``), by its counting build: the race-check build's instrumentation
    without the race check, slower than the plain build (``benchmarks/results/banks.md`` gives
    the measured factor), which is why it is asked for. The race check always counts."""

    name = "emulator"
    xp = np
    shared_memory_per_block = EMULATED_SHARED_MEMORY

    def __init__(self, race_check: bool = False):
        self.race_check = race_check
        if race_check:
            self.name = "emulator-racecheck"

    def _module(self, file, count_io):
        from .emulator import RawModule

        return RawModule(code=source(file), options=options(count_io),
                         race_check=True if self.race_check else None)


#: The names :func:`get_backend` takes.
BACKENDS = ("cuda", "emulator", "emulator-racecheck")


@lru_cache(maxsize=None)
def get_backend(name: str = "cuda") -> Backend:
    """The backend called ``name``: ``"cuda"`` (raises :class:`~ioattn.gpu.GPUUnavailableError`
    without a GPU), ``"emulator"``, or ``"emulator-racecheck"`` (the emulator with the
    shared-memory race check)."""
    if name == "cuda":
        return CudaBackend()
    if name in ("emulator", "emulator-racecheck"):
        return EmulatorBackend(race_check=name == "emulator-racecheck")
    raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {name!r}")
