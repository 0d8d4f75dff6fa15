"""The CUDA backend's plumbing (device query, compile, the shared-memory opt-in, launches, copies
back) run against a stand-in for CuPy whose kernels are the emulator's and whose arrays are
NumPy's. It checks the host code the GPU path runs, not the GPU."""

import sys
import types

import numpy as np
import pytest

import ioattn
import ioattn.gpu as gpu
from ioattn.gpu import backend, device, nvrtc
from ioattn.gpu.emulator import RawModule as EmulatedModule

from .conftest import reference, rel_error


class CompileException(Exception):
    pass


def fake_cupy(nvrtc_fails=False, shared=99 * 1024):
    """A module that answers as CuPy does on a one-GPU machine."""
    cp = types.ModuleType("cupy")
    cp.__getattr__ = lambda name: getattr(np, name)        # arrays: NumPy's
    cp.__version__ = "0-fake"
    cp.asnumpy = np.asarray
    calls = cp.calls = []

    class RawModule:
        def __init__(self, code, options=(), backend="nvrtc"):
            calls.append(backend)
            self.code, self.options, self.backend = code, options, backend

        def compile(self):
            if nvrtc_fails and self.backend == "nvrtc":
                raise CompileException("cuda_fp16.h: not found")
            self._m = EmulatedModule(self.code, self.options)

        def get_function(self, name):
            function = self._m.get_function(name)
            function.max_dynamic_shared_size_bytes = 48 * 1024
            return function

    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 7, "minor": 5,
                                       "multiProcessorCount": 40, "sharedMemPerBlock": 49152,
                                       "sharedMemPerBlockOptin": shared,
                                       "totalGlobalMem": 16 << 30},
        driverGetVersion=lambda: 13000, runtimeGetVersion=lambda: 12080)
    stream = types.SimpleNamespace(synchronize=lambda: None)
    cp.cuda = types.SimpleNamespace(runtime=runtime, Device=lambda: types.SimpleNamespace(id=0),
                                    compiler=types.SimpleNamespace(
                                        CompileException=CompileException),
                                    get_current_stream=lambda: stream)
    cp.RawModule = RawModule
    return cp


@pytest.fixture
def with_fake_cupy(monkeypatch):
    def install(**kw):
        cp = fake_cupy(**kw)
        monkeypatch.setitem(sys.modules, "cupy", cp)
        device.why_unavailable.cache_clear()
        backend.get_backend.cache_clear()
        return cp

    yield install
    device.why_unavailable.cache_clear()
    backend.get_backend.cache_clear()


def test_device_info(with_fake_cupy):
    with_fake_cupy()
    assert gpu.available()
    info = gpu.device_info()
    assert info["name"] == "Fake GPU" and info["compute_capability"] == "7.5"
    assert info["shared_memory_per_block"] == 99 * 1024
    assert (info["driver"], info["runtime"]) == ("13.0", "12.8")


def test_the_cuda_path_runs_and_counts(with_fake_cupy, rng):
    cp = with_fake_cupy()
    Q, K, V = (rng.standard_normal((2, 40, 16)) for _ in range(3))
    r = gpu.run("flash", Q, K, V, causal=True, count_io=True)
    assert r.backend == "cuda" and cp.calls == ["nvrtc"]
    # the default plan comes from this device's 99 KiB, and needs the opt-in above 48 KiB
    assert r.plan.M == ((99 * 1024 + 1024) // 2 - 1024) // 4      # two blocks, 1 KiB each kept
    assert rel_error(r.output, reference(Q, K, V, causal=True)[0]) <= 1e-5
    c = ioattn.io_cost("flash", 40, 16, r.plan.M, block=(r.plan.B_r, r.plan.B_c),
                       mask=r.plan.mask)
    assert (r.io.reads, r.io.writes) == (2 * c.reads, 2 * c.writes)


def test_nvrtc_failure_without_nvcc(with_fake_cupy, rng, monkeypatch):
    """NVRTC failing with no nvcc to fall back on raises KernelCompileError naming the file and
    quoting NVRTC (the fallback itself runs with the real CuPy in test_nvrtc.py)."""
    cp = with_fake_cupy(nvrtc_fails=True)
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: None)
    Q = rng.standard_normal((20, 16))
    with pytest.raises(gpu.KernelCompileError,
                       match="standard.cu did not compile with NVRTC(.|\n)*cuda_fp16.h: not found"):
        gpu.run("standard", Q, Q, Q)
    assert cp.calls == ["nvrtc"]


def test_a_plan_beyond_the_device(with_fake_cupy, rng):
    with_fake_cupy(shared=48 * 1024)
    Q = rng.standard_normal((500, 64))
    with pytest.raises(ValueError, match="but the device allows 49152: use M <= 12487"):
        gpu.run("flash", Q, Q, Q, M=40000)


def test_bfloat16_needs_compute_capability_8(with_fake_cupy, rng):
    with_fake_cupy()                                   # compute capability 7.5, as a T4
    Q = rng.standard_normal((32, 16))
    r = gpu.run("flash", Q, Q, Q, dtype="float16")      # float16 runs on Turing
    assert rel_error(r.output, reference(Q, Q, Q)[0]) <= 1e-2
    with pytest.raises(ValueError, match="bfloat16.*8.0"):
        gpu.run("flash", Q, Q, Q, dtype="bfloat16")
