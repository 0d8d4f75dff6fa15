"""Where the kernels run: an NVIDIA GPU through CuPy, or the CPU emulator.

Both backends compile the same sources (:mod:`ioattn.gpu.sources`) and launch them with CuPy's
``RawModule`` calling convention, ``function(grid, block, args, shared_mem=bytes)``, where
``args`` holds arrays of the backend's array module ``xp`` (CuPy or NumPy) and NumPy scalars of
the kernel's parameter types (``numpy.int32`` for ``int``, ``numpy.float32`` for ``float``).
The host code of each algorithm is written once against this interface.
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np

from .device import require_gpu
from .sources import find_nvcc, source

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

        def launch(grid, block, args, shared_mem=0):
            if shared_mem > DEFAULT_DYNAMIC_LIMIT:
                function.max_dynamic_shared_size_bytes = int(shared_mem)
            function(tuple(grid), tuple(block), tuple(args), shared_mem=int(shared_mem))

        return launch

    def synchronize(self) -> None:
        """Wait for every launched kernel to finish."""

    def to_host(self, x) -> np.ndarray:
        """``x`` as a NumPy array."""
        return np.asarray(x)

    def _module(self, file, count_io):  # pragma: no cover - overridden
        raise NotImplementedError


def _options(count_io: bool) -> tuple[str, ...]:
    return ("-std=c++17",) + (("-DIOATTN_COUNT_IO",) if count_io else ())


class CudaBackend(Backend):
    """The current CUDA GPU through CuPy (NVRTC; nvcc when NVRTC rejects a source)."""

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
            import cupy

            code, options = source(file), _options(count_io)
            try:
                module = cupy.RawModule(code=code, options=options)
                module.compile()
            except cupy.cuda.compiler.CompileException as nvrtc_error:
                if find_nvcc() is None or os.environ.get("IOATTN_NO_NVCC"):
                    raise
                try:
                    module = cupy.RawModule(code=code, options=options, backend="nvcc")
                    module.compile()
                except cupy.cuda.compiler.CompileException as nvcc_error:
                    raise RuntimeError(f"{file} compiled with neither NVRTC:\n{nvrtc_error}\n"
                                       f"nor nvcc:\n{nvcc_error}") from None
            self._modules[key] = module
        return self._modules[key]

    def synchronize(self):
        self.xp.cuda.get_current_stream().synchronize()

    def to_host(self, x):
        return self.xp.asnumpy(x)


class EmulatorBackend(Backend):
    """The kernels compiled as C++ for the CPU and run one block at a time, each CUDA thread a
    fiber (:mod:`ioattn.gpu.emulator`). Exact counts and float32 results, slowly: for small
    problems, tests and readers without a GPU."""

    name = "emulator"
    xp = np
    shared_memory_per_block = EMULATED_SHARED_MEMORY

    def _module(self, file, count_io):
        from .emulator import RawModule

        return RawModule(code=source(file), options=_options(count_io))


@lru_cache(maxsize=None)
def get_backend(name: str = "cuda") -> Backend:
    """The backend called ``name``: ``"cuda"`` (raises :class:`~ioattn.gpu.GPUUnavailableError`
    without a GPU) or ``"emulator"``."""
    if name == "cuda":
        return CudaBackend()
    if name == "emulator":
        return EmulatorBackend()
    raise ValueError(f"backend must be 'cuda' or 'emulator', got {name!r}")
