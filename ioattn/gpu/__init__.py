"""CUDA kernels of the tiled algorithms, run through CuPy, counting their global-memory traffic.

>>> import ioattn.gpu
>>> isinstance(ioattn.gpu.available(), bool)
True

The kernels (``ioattn/gpu/kernels/*.cu``) are FlashAttention-2's forward in float32 and, on
the tensor cores, in float16 and bfloat16; its backward in float32; Saha and Ye's square tiling;
standard attention with ``S`` and ``P`` materialised; and split-K, grouped, paged decoding
(:func:`decode`, :mod:`ioattn.gpu.flash_decoding`). Compiled with ``-DIOATTN_COUNT_IO``
they count every entry they load from and store to global memory, and
``run(name, Q, K, V, M=..., count_io=True).io`` equals :func:`ioattn.io_cost` for the same
plan. Without a GPU every call raises :class:`GPUUnavailableError`; ``backend="emulator"``
runs the same sources on the CPU, one fiber per CUDA thread. A source that neither NVRTC nor nvcc
compiles raises :class:`KernelCompileError`, saying how to fix it (:mod:`ioattn.gpu.nvrtc`).
"""

from .api import (
    DTYPES,
    KERNELS,
    GPUBackwardResult,
    GPUResult,
    Launch,
    gpu_plan,
    prepare,
    run,
    run_backward,
)
from .flash_decoding import DecodeResult, decode
from .device import GPUUnavailableError, available, device_info, why_unavailable
from .nvrtc import KernelCompileError

__all__ = ["DTYPES", "DecodeResult", "GPUBackwardResult", "GPUResult", "GPUUnavailableError",
           "KERNELS", "KernelCompileError", "Launch", "available", "decode", "device_info",
           "gpu_plan", "prepare", "run", "run_backward", "why_unavailable"]
