"""The CUDA C++ sources of the kernels, shipped as package data in ``ioattn/gpu/kernels``.

Every ``.cu`` file includes ``ioattn.cuh``; :func:`source` returns a file with that header
pasted in, so NVRTC (which CuPy uses by default) needs no include path. :func:`nvcc_check`
compiles a source with ``nvcc`` for a given architecture: the CPU-only test suite uses it so
that a kernel that does not compile fails CI even without a GPU.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

KERNELS = Path(__file__).with_name("kernels")
_INCLUDE = re.compile(r'^#include "(\w+\.cuh)"\s*$', re.M)
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+'
                     r'(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)\s*\(')

#: Architectures CI compiles every kernel for: Turing (T4, Colab), Ampere, Hopper.
ARCHS = ("sm_75", "sm_80", "sm_90")


def files() -> list[str]:
    """The kernel source files, e.g. ``["flash.cu", ...]``."""
    return sorted(p.name for p in KERNELS.glob("*.cu"))


@lru_cache(maxsize=None)
def source(name: str) -> str:
    """The text of kernel file ``name`` with ``ioattn.cuh`` (and any other ``#include "x.cuh"``
    of the kernels folder, e.g. ``matmul.cuh``) pasted in place of its include, once each."""
    path = KERNELS / name
    if not path.is_file():
        raise ValueError(f"no kernel source {name!r}; there are {', '.join(files())}")
    pasted = set()

    def paste(match):
        header = match.group(1)
        if header in pasted or not (KERNELS / header).is_file():
            return "" if header in pasted else match.group(0)
        pasted.add(header)
        return _INCLUDE.sub(paste, (KERNELS / header).read_text().replace("#pragma once", ""))

    return _INCLUDE.sub(paste, path.read_text())


def kernels_in(code: str) -> list[str]:
    """The names of the ``extern "C" __global__`` kernels defined in the source text ``code``."""
    return _KERNEL.findall(code)


def kernel_names(name: str) -> list[str]:
    """The ``extern "C" __global__`` kernels defined in source file ``name``."""
    return kernels_in(source(name))


def find_nvcc() -> str | None:
    """The ``nvcc`` on ``PATH`` or under ``CUDA_HOME``/``CUDA_PATH``, or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    for root in ("/usr/local/cuda/bin/nvcc",):
        if Path(root).is_file():
            return root
    return None


def nvcc_check(name: str, archs=ARCHS, *, count_io: bool = False,
               nvcc: str | None = None) -> str:
    """Compile kernel file ``name`` with nvcc for each architecture in ``archs`` (e.g.
    ``("sm_75", "sm_80", "sm_90")``, or one name) into one fat binary.

    Returns nvcc's messages (``-Xptxas -v``: registers, shared memory and spills per kernel and
    architecture). Raises ``RuntimeError`` with nvcc's output when the source does not compile
    or draws a warning, and ``FileNotFoundError`` when there is no nvcc.
    """
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError(
            "nvcc was not found on PATH or under CUDA_HOME: install the CUDA toolkit to compile "
            "the kernels")
    archs = (archs,) if isinstance(archs, str) else tuple(archs)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / name
        src.write_text(source(name))
        cmd = [nvcc, "-fatbin", "-std=c++17", "-Werror=all-warnings", "-Xptxas", "-v",
               "-o", str(Path(tmp) / "out.fatbin"), str(src)]
        for arch in archs:
            cmd[1:1] = [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
        if count_io:
            cmd.insert(1, "-DIOATTN_COUNT_IO")
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nvcc failed on {name} for {', '.join(archs)}:\n"
                           f"{done.stdout}{done.stderr}")
    return done.stdout + done.stderr
