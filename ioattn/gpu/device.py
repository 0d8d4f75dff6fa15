"""Is there a usable GPU? And the error every GPU call raises when there is none."""

from __future__ import annotations

from functools import lru_cache

COLAB = ("run on a machine with an NVIDIA GPU, CUDA and CuPy (pip install 'ioattn[gpu]'), for "
         "example Google Colab with Runtime > Change runtime type > T4 GPU; "
         "ioattn.gpu.run(..., backend='emulator') runs the same kernels slowly on the CPU")


class GPUUnavailableError(RuntimeError):
    """Raised by every GPU entry point when no CUDA GPU can be used; the message says why."""


@lru_cache(maxsize=1)
def why_unavailable() -> str | None:
    """None when a CUDA GPU is usable through CuPy, else the reason it is not."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    except Exception as err:  # a broken CUDA install fails at import
        return f"CuPy failed to import ({type(err).__name__}: {err})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        return _runtime_reason(err)
    if count < 1:
        return "CUDA reports no GPU"
    return None


def _runtime_reason(err: Exception) -> str:
    """Why the CUDA runtime's device query failed, in words (CUDA's error name kept)."""
    text = str(err)
    if "cudaErrorInsufficientDriver" in text:
        return ("CuPy finds no usable NVIDIA driver (cudaErrorInsufficientDriver: "
                "no driver is installed, as on a machine without an NVIDIA GPU, or it is older "
                "than CuPy's CUDA runtime)")
    if "cudaErrorNoDevice" in text:
        return "the NVIDIA driver reports no GPU (cudaErrorNoDevice)"
    return f"CUDA found no usable GPU ({type(err).__name__}: {text})"


def available() -> bool:
    """Whether a CUDA GPU is usable through CuPy (never raises)."""
    return why_unavailable() is None


def require_gpu(what: str = "this") -> None:
    """Raise :class:`GPUUnavailableError` naming ``what`` unless a GPU is usable."""
    reason = why_unavailable()
    if reason is not None:
        raise GPUUnavailableError(f"{what} needs a CUDA GPU, but {reason}. To run it, {COLAB}.")


def device_info() -> dict:
    """The current GPU: name, compute capability, multiprocessors, shared memory per block
    (the opt-in maximum, in bytes), driver and runtime versions. Raises
    :class:`GPUUnavailableError` without a GPU."""
    require_gpu("ioattn.gpu.device_info()")
    import cupy

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    return {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": int(props["multiProcessorCount"]),
        "shared_memory_per_block": int(props.get("sharedMemPerBlockOptin")
                                       or props["sharedMemPerBlock"]),
        "memory_bytes": int(props["totalGlobalMem"]),
        "driver": _version(cupy.cuda.runtime.driverGetVersion()),
        "runtime": _version(cupy.cuda.runtime.runtimeGetVersion()),
        "cupy": cupy.__version__,
    }


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"
