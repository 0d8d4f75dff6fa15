"""Run ioattn's CUDA kernels on the CPU: exact counts and float32 results, without a GPU.

The same source that CuPy compiles for the GPU is compiled here by the host C++ compiler with
``kernels/emulate.h``, which supplies what the kernels use of CUDA: thread and block indices,
``__syncthreads``, warp shuffles, atomics, 16-bit floats and WMMA. A launch runs the grid one
block at a time, each CUDA thread as a fiber; the header's comment says what that shows and what
it cannot. :class:`RawModule` takes CuPy's calling convention, so the host code of every
algorithm runs unchanged on NumPy arrays (:class:`ioattn.gpu.backend.EmulatorBackend`).

>>> import numpy as np
>>> from ioattn.gpu.emulator import RawModule
>>> code = '''
... #include "ioattn.cuh"
... extern "C" __global__ void twice(const float* x, float* y, int n) {
...     int i = blockIdx.x * blockDim.x + threadIdx.x;
...     if (i < n) y[i] = 2 * x[i];
... }'''
>>> x, y = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
>>> RawModule(code=code).get_function("twice")((2,), (4,), (x, y, np.int32(5)))
>>> y
array([0., 2., 4., 6., 8.], dtype=float32)

Kernels are compiled once and cached in ``$IOATTN_CACHE/emulator`` (default
``~/.cache/ioattn/emulator``). The environment variable ``IOATTN_EMULATOR_REVERSE=1`` runs the
threads of each block in reverse order between barriers, a second legal order that exposes
races the first hides.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np

from .sources import KERNELS, kernels_in

#: Shared memory a block may use without opting in, and at most (bytes), as on an H100/H200.
DEFAULT_DYNAMIC_LIMIT = 48 * 1024
MAX_SHARED = 227 * 1024


class EmulatorError(RuntimeError):
    """A kernel the emulator could not compile or run (the message says why)."""


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise EmulatorError("the emulator needs a C++20 compiler (g++ or clang++) on PATH")


def _cache_dir() -> Path:
    root = os.environ.get("IOATTN_CACHE") or Path.home() / ".cache" / "ioattn"
    path = Path(root) / "emulator"
    path.mkdir(parents=True, exist_ok=True)
    return path


@lru_cache(maxsize=None)
def _build(code: str, options: tuple[str, ...]) -> ctypes.CDLL:
    names = kernels_in(code)
    if not names:
        raise EmulatorError('no extern "C" __global__ kernel in the source')
    defines = [o for o in options if o.startswith(("-D", "-U"))]
    exports = "\n".join(f"IOATTN_EMU_EXPORT({n})" for n in names)
    text = f"{code}\n{exports}\n"
    header = (KERNELS / "emulate.h").read_text()
    key = hashlib.sha256("\0".join([text, header, *defines]).encode()).hexdigest()[:24]
    lib = _cache_dir() / f"{key}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(text)
            out = Path(tmp) / "kernel.so"
            cmd = [_compiler(), "-std=c++20", "-O2", "-shared", "-fPIC", "-w",
                   "-DIOATTN_EMULATE", *defines, f"-I{KERNELS}", "-o", str(out), str(src)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise EmulatorError(f"the kernel source does not compile for the emulator:\n"
                                    f"{done.stderr[-4000:]}")
            os.replace(out, lib)          # atomic: concurrent builds of one key are safe
    return ctypes.CDLL(str(lib))


class Function:
    """One kernel: ``function(grid, block, args, shared_mem=0)`` as in CuPy."""

    def __init__(self, lib: ctypes.CDLL, name: str):
        try:
            self._entry = getattr(lib, f"ioattn_emu_{name}")
        except AttributeError:
            raise EmulatorError(f'no extern "C" __global__ kernel named {name!r}') from None
        self._set_reverse = lib.ioattn_emu_set_reverse
        self.name = name
        self.max_dynamic_shared_size_bytes = DEFAULT_DYNAMIC_LIMIT

    def __call__(self, grid, block, args, shared_mem=0):
        grid, block = _dims(grid), _dims(block)
        limit = max(DEFAULT_DYNAMIC_LIMIT, min(self.max_dynamic_shared_size_bytes, MAX_SHARED))
        if shared_mem > limit:
            raise EmulatorError(f"{self.name}: {shared_mem} bytes of dynamic shared memory "
                                f"requested, the limit is {limit}")
        keep, pointers, sizes = [], [], []
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                if not a.flags.c_contiguous:
                    raise EmulatorError(f"{self.name}: argument {i} is not C-contiguous")
                value = ctypes.c_void_p(a.ctypes.data)
                size = ctypes.sizeof(ctypes.c_void_p)
            elif isinstance(a, np.generic):
                value = ctypes.create_string_buffer(a.tobytes(), a.nbytes)
                size = a.nbytes
            else:
                raise EmulatorError(f"{self.name}: argument {i} is {type(a).__name__}; pass "
                                    "NumPy arrays and NumPy scalars (numpy.int32, ...)")
            keep.append(value)
            pointers.append(ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
            sizes.append(size)
        n = len(args)
        err = ctypes.create_string_buffer(1024)
        self._set_reverse(int(os.environ.get("IOATTN_EMULATOR_REVERSE", "0") == "1"))
        rc = self._entry((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block),
                         ctypes.c_size_t(int(shared_mem)), (ctypes.c_void_p * n)(*pointers),
                         (ctypes.c_size_t * n)(*sizes), ctypes.c_int(n), err,
                         ctypes.c_size_t(len(err)))
        if rc != 0:
            raise EmulatorError(f"{self.name}: {err.value.decode()}")


def _dims(t) -> tuple[int, int, int]:
    t = tuple(int(v) for v in (t if isinstance(t, (tuple, list)) else (t,)))
    if not 1 <= len(t) <= 3 or min(t) < 1:
        raise EmulatorError(f"grid and block dimensions must be 1 to 3 positive ints, got {t}")
    return t + (1,) * (3 - len(t))


class RawModule:
    """A kernel source compiled for the emulator; ``get_function(name)`` as in CuPy."""

    def __init__(self, code: str, options: tuple[str, ...] = ()):
        self._lib = _build(code, tuple(options))

    def get_function(self, name: str) -> Function:
        return Function(self._lib, name)
