"""Compiling a kernel source for the GPU: NVRTC through CuPy, and nvcc when NVRTC fails.

:func:`compile_module` is what :class:`~ioattn.gpu.backend.CudaBackend` runs for every source
(:mod:`ioattn.gpu.sources`), and what the CPU-only tests run with the device query stubbed:

1. NVRTC through ``cupy.RawModule(code=..., options=...)``, with the include paths CuPy adds
   itself (its own headers, then the CUDA headers it finds: NVIDIA's wheels first, then the
   toolkit). ``<mma.h>`` includes ``crt/mma.h``, which the runtime headers' wheel
   (nvidia-cuda-runtime-cu12) lacks; when CuPy's CUDA headers lack it, the folder of the nvcc
   headers that has it (wheel nvidia-cuda-nvcc-cu12, or the toolkit) is added (:func:`includes`).
2. When NVRTC rejects the source, the toolkit's ``nvcc`` compiles it on its own headers to a cubin
   for the GPU's architecture (:func:`nvcc_cubin`), loaded with ``cupy.RawModule(path=...)``.
3. When there is no nvcc either, :class:`KernelCompileError` names the file, quotes the
   compilers' logs and says how to fix it.

The sources compile with ``-std=c++17`` and, to count traffic, ``-DIOATTN_COUNT_IO``
(:func:`options`); both compilers flush denormals to zero (``-ftz=true``, which CuPy adds to
every NVRTC compile).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from .sources import find_nvcc, source

#: Lines of a compiler's log quoted in a :class:`KernelCompileError`.
LOG_LINES = 12


class KernelCompileError(RuntimeError):
    """A kernel source that compiled neither with NVRTC nor with nvcc; the message names the
    file, quotes the compilers' logs and says how to fix it."""


def options(count_io: bool) -> tuple[str, ...]:
    """The compiler options of every source: C++17, and ``-DIOATTN_COUNT_IO`` to count."""
    return ("-std=c++17",) + (("-DIOATTN_COUNT_IO",) if count_io else ())


def includes() -> tuple[str, ...]:
    """``-I`` for the folder holding ``crt/mma.h`` when the CUDA runtime headers CuPy uses lack
    it (the nvidia-cuda-runtime-cu12 wheel does), found as CuPy finds headers (cuda-pathfinder:
    NVIDIA's wheels, then ``CUDA_PATH``/``CUDA_HOME``, then the toolkit); else nothing."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError:            # CuPy before 14 finds the toolkit's headers, which have crt/
        return ()
    runtime = find_nvidia_header_directory("cudart")
    if runtime is None or (Path(runtime) / "crt" / "mma.h").is_file():
        return ()
    crt = find_nvidia_header_directory("nvcc")
    if crt is None or not (Path(crt) / "crt" / "mma.h").is_file():
        return ()
    return (f"-I{crt}",)


def compile_module(file: str, *, count_io: bool, log=None):
    """Kernel source ``file`` compiled for the current GPU, as a ``cupy.RawModule``.

    NVRTC through CuPy first (the module is compiled and loaded now); when NVRTC rejects the
    source, nvcc (:func:`nvcc_cubin`; the cubin is loaded at the first ``get_function``).

    Parameters
    ----------
    file : str
        A kernel source of :func:`ioattn.gpu.sources.files`, e.g. ``"flash_tc.cu"``.
    count_io : bool
        Compile with ``-DIOATTN_COUNT_IO``.
    log : file-like, optional
        Receives NVRTC's log (its warnings) when NVRTC succeeds.

    Raises
    ------
    KernelCompileError
        When NVRTC fails and nvcc is missing (or disabled by ``IOATTN_NO_NVCC=1``) or fails too.
    """
    import cupy

    code = source(file)
    try:
        module = cupy.RawModule(code=code, options=options(count_io) + includes())
        if log is None:
            module.compile()
        else:
            module.compile(log_stream=log)
        return module
    except cupy.cuda.compiler.CompileException as err:
        nvrtc_log = str(err)
    except RuntimeError as err:
        # CuPy's own "no NVRTC" and "no CUDA headers" errors; a CUDA runtime or driver error
        # (a subclass) is not the compiler's and passes through.
        if type(err) is not RuntimeError:
            raise
        nvrtc_log = str(err)
    nvcc = None if os.environ.get("IOATTN_NO_NVCC") else find_nvcc()
    if nvcc is None:
        raise KernelCompileError(_message(file, count_io, nvrtc_log)) from None
    try:
        cubin = nvcc_cubin(file, count_io=count_io, arch=device_arch(), nvcc=nvcc)
    except RuntimeError as err:
        raise KernelCompileError(_message(file, count_io, nvrtc_log, nvcc, str(err))) from None
    return cupy.RawModule(path=str(cubin))


def device_arch() -> str:
    """The current GPU's compute capability as CuPy gives it, e.g. ``"75"`` for a T4."""
    import cupy

    return cupy.cuda.Device().compute_capability


def nvcc_cubin(file: str, *, count_io: bool, arch: str, nvcc: str) -> Path:
    """Compile kernel source ``file`` with ``nvcc`` (on the toolkit's own headers) to a cubin
    for ``sm_<arch>``; returns its path, in a folder removed when Python exits.

    Raises ``RuntimeError`` with nvcc's messages when it fails.
    """
    code = source(file)
    flags = ["-cubin", f"-arch=sm_{arch}", "-ftz=true", *options(count_io)]
    digest = hashlib.sha256("\0".join([nvcc, *flags, code]).encode()).hexdigest()[:16]
    out = _cubins() / f"{Path(file).stem}-sm_{arch}-{digest}.cubin"
    if not out.is_file():
        src = out.with_suffix(".cu")
        src.write_text(code)
        try:
            done = subprocess.run([nvcc, *flags, "-o", str(out), str(src)],
                                  capture_output=True, text=True)
        except OSError as err:
            raise RuntimeError(f"{nvcc} could not be run: {err}") from None
        if done.returncode != 0:
            out.unlink(missing_ok=True)
            raise RuntimeError(done.stdout + done.stderr)
    return out


@lru_cache(maxsize=1)
def _cubins() -> Path:
    folder = tempfile.mkdtemp(prefix="ioattn-cubins-")
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


def _excerpt(log: str) -> str:
    lines = [line for line in log.strip().splitlines() if line.strip()]
    more = len(lines) - LOG_LINES
    shown = "\n".join("    " + line for line in lines[:LOG_LINES])
    return shown + (f"\n    ... ({more} more lines)" if more > 0 else "")


def _nvrtc_version() -> tuple[int, int] | None:
    try:
        import cupy

        return tuple(cupy.cuda.nvrtc.getVersion())
    except Exception:              # no NVRTC library at all: the log says so
        return None


def _fix() -> str:
    """How to get a compiler that works, naming the NVRTC release when it is known."""
    version = _nvrtc_version()
    cuda = f"{version[0]}.{version[1]}.*" if version else "12.*"
    return ("To fix it, either\n"
            "  * install the CUDA toolkit, whose nvcc is then used: Google Colab has it; "
            "elsewhere NVIDIA's installer or `conda install -c conda-forge cuda-nvcc`, with nvcc "
            "on PATH or CUDA_HOME set; or\n"
            "  * install NVRTC and the CUDA headers of one release from PyPI: "
            f"pip install \"cuda-toolkit[nvrtc,cudart,nvcc]=={cuda}\" (the nvcc wheel brings the "
            "crt/ headers that <mma.h> needs, not the nvcc program).\n"
            "Without a GPU, ioattn.gpu.run(..., backend=\"emulator\") runs the same kernels on "
            "the CPU.")


def _message(file, count_io, nvrtc_log, nvcc=None, nvcc_log=None) -> str:
    """The text of a :class:`KernelCompileError`."""
    import cupy

    what = f"{file}{' (with -DIOATTN_COUNT_IO)' if count_io else ''}"
    version = _nvrtc_version()
    tools = f"CuPy {cupy.__version__}" + (f", NVRTC {version[0]}.{version[1]}" if version else "")
    text = f"{what} did not compile with NVRTC ({tools}):\n{_excerpt(nvrtc_log)}\n"
    if nvcc_log is not None:
        return (text + f"nor with nvcc ({nvcc}):\n{_excerpt(nvcc_log)}\n"
                "Both compilers reject it: the source (or the CUDA installation) is at fault.")
    if os.environ.get("IOATTN_NO_NVCC"):
        return text + "and IOATTN_NO_NVCC is set, so nvcc was not tried. " + _fix()
    return (text + "and there is no nvcc to fall back on (none on PATH, under CUDA_HOME or "
            "CUDA_PATH, or in /usr/local/cuda). " + _fix())
