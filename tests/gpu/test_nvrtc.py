"""Every kernel source compiles through the GPU path's own compile function,
:func:`ioattn.gpu.nvrtc.compile_module` (NVRTC through ``cupy.RawModule``, with the include
paths CuPy adds itself), for Turing (a Colab T4), Ampere and Hopper, plain and counting, on a
machine with no GPU and no driver; and a source that does not compile raises
:class:`~ioattn.gpu.KernelCompileError` naming the file and the fix.

Only what needs the driver is stubbed (the ``device`` fixture); the rest is CuPy's own code:

* the device query: ``cupy.cuda.compiler._get_arch`` (what CuPy compiles for) and
  :func:`ioattn.gpu.nvrtc.device_arch` (what nvcc compiles for) answer the architecture under
  test;
* CuPy's per-device memoisation of ``_get_raw_module`` and
  ``_get_arch_for_options_for_nvrtc``, which asks the driver for the current device: the
  undecorated functions (``__wrapped__``) run instead;
* the load into the driver: ``function.Module.load`` keeps the compiled binary, which the tests
  read as an ELF cubin (its architecture, and one ``.text.<kernel>`` section per kernel).

CuPy's kernel cache is a fresh folder per test, so NVRTC really runs. The tests need CuPy and
NVIDIA's NVRTC wheels (the ``nvrtc`` extra, which ``make test`` installs); without them they fail
saying how to install them, unless ``IOATTN_SKIP_NVRTC=1`` (then they are reported as skipped).
"""

import io
import os
import struct

import pytest

import ioattn.gpu as gpu
import ioattn.gpu.sources as sources
from ioattn.gpu import KernelCompileError, nvrtc
from ioattn.gpu.sources import ARCHS, files, kernel_names


@pytest.fixture(scope="module")
def cupy():
    try:
        import cupy
        from cupy._core import raw  # noqa: F401
        from cupy.cuda import compiler  # noqa: F401

        cupy.cuda.nvrtc.getVersion()
    except Exception as err:
        if os.environ.get("IOATTN_SKIP_NVRTC") == "1":
            pytest.skip(f"CuPy's NVRTC is not usable ({err}), and IOATTN_SKIP_NVRTC=1")
        pytest.fail(f"compiling the kernels as the GPU path does needs CuPy and NVIDIA's NVRTC, "
                    f"but {type(err).__name__}: {err}. Install them with "
                    "`.venv/bin/pip install -e '.[nvrtc]'` (`make test` does), or set "
                    "IOATTN_SKIP_NVRTC=1 to skip these tests, which are then reported as skipped",
                    pytrace=False)
    return cupy


@pytest.fixture
def device(cupy, monkeypatch, tmp_path):
    """``use("sm_75")`` makes the stubbed device that architecture; returns the list that every
    binary CuPy loads is appended to."""
    from cupy._core import raw
    from cupy.cuda import compiler

    loaded = []

    class Kept(compiler.function.Module):
        def load(self, binary):
            loaded.append(binary)

    monkeypatch.setattr(raw, "_get_raw_module", raw._get_raw_module.__wrapped__)
    monkeypatch.setattr(compiler, "_get_arch_for_options_for_nvrtc",
                        compiler._get_arch_for_options_for_nvrtc.__wrapped__)
    monkeypatch.setattr(compiler.function, "Module", Kept)
    monkeypatch.setattr(compiler, "_use_ptx", False)           # a cubin, as CuPy's default
    monkeypatch.setattr(compiler, "_kernel_cache_backend",
                        compiler._DiskKernelCacheBackend(str(tmp_path / "cupy-cache")))

    def use(arch):
        monkeypatch.setattr(compiler, "_get_arch", lambda: arch[3:])
        monkeypatch.setattr(nvrtc, "device_arch", lambda: arch[3:])
        return loaded

    return use


def cubin(binary):
    """``(sm, {section: size})`` of a CUDA cubin: an ELF64 file whose ``e_flags`` hold the SM
    number in their low byte (NVRTC 12) or in the next one (nvcc 13)."""
    assert binary[:4] == b"\x7fELF", binary[:16]
    flags = struct.unpack_from("<I", binary, 48)[0]
    shoff = struct.unpack_from("<Q", binary, 40)[0]
    entsize, count, names = struct.unpack_from("<HHH", binary, 58)
    headers = [struct.unpack_from("<IIQQQQIIQQ", binary, shoff + i * entsize)
               for i in range(count)]
    base = headers[names][4]

    def name(offset):
        return binary[base + offset:binary.index(b"\0", base + offset)].decode()

    return {flags & 0xFF, (flags >> 8) & 0xFF}, {name(h[0]): h[5] for h in headers}


def kernels(sections):
    return {name[len(".text."):]: size for name, size in sections.items()
            if name.startswith(".text.")}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("name", files())
def test_every_source_compiles_with_nvrtc(name, count_io, arch, device, monkeypatch):
    loaded = device(arch)
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: None)    # NVRTC's result, not nvcc's
    log = io.StringIO()
    module = nvrtc.compile_module(name, count_io=count_io, log=log)
    assert module.code is not None and module.options[:1] == ("-std=c++17",)
    assert ("-DIOATTN_COUNT_IO" in module.options) == count_io
    assert len(loaded) == 1, "NVRTC did not produce one binary"
    sms, sections = cubin(loaded[0])
    assert int(arch[3:]) in sms, (arch, sms)
    found = kernels(sections)
    assert set(kernel_names(name)) <= set(found), (kernel_names(name), found)
    assert log.getvalue().strip() == "", f"NVRTC warned:\n{log.getvalue()}"
    if name == "flash_tc.cu":
        # bfloat16 on the tensor cores needs sm_80: below it the kernel is an empty stub
        # (the host refuses to launch it there); from sm_80 on it is the whole kernel.
        if int(arch[3:]) < 80:
            assert found["flash_fwd_bf16"] * 10 < found["flash_fwd_f16"], found
        else:
            assert found["flash_fwd_bf16"] * 2 > found["flash_fwd_f16"], found


@pytest.fixture
def kernel_file(monkeypatch, tmp_path):
    """``write(name, body)`` puts a kernel source (including ioattn.cuh) in a kernels folder of
    its own, which :mod:`ioattn.gpu.sources` then reads."""
    (tmp_path / "ioattn.cuh").write_text((sources.KERNELS / "ioattn.cuh").read_text())
    monkeypatch.setattr(sources, "KERNELS", tmp_path)
    sources.source.cache_clear()

    def write(name, body):
        (tmp_path / name).write_text('#include "ioattn.cuh"\n' + body)
        sources.source.cache_clear()
        return name

    yield write
    sources.source.cache_clear()


MISSING_HEADER = ('#include <no_such_header.h>\n'
                  'extern "C" __global__ void f(float* x) { x[0] = 1.f; }\n')
SYNTAX_ERROR = 'extern "C" __global__ void f(float* x) { x[0] = y; }\n'
#: NVRTC has no C library headers; nvcc has the host's.
NEEDS_NVCC = ('#include <cstdio>\n'
              'extern "C" __global__ void f(float* x) { printf("%f\\n", x[0]); }\n')


def test_without_nvcc_a_missing_header_names_the_file_and_the_fix(device, kernel_file,
                                                                  monkeypatch):
    device("sm_75")
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: None)
    monkeypatch.delenv("IOATTN_NO_NVCC", raising=False)
    name = kernel_file("broken.cu", MISSING_HEADER)
    with pytest.raises(KernelCompileError) as caught:
        nvrtc.compile_module(name, count_io=True)
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError) and gpu.KernelCompileError is KernelCompileError
    assert message.startswith("broken.cu (with -DIOATTN_COUNT_IO) did not compile with NVRTC")
    assert 'cannot open source file "no_such_header.h"' in message     # NVRTC's log
    assert "no nvcc to fall back on" in message
    version = "{}.{}".format(*nvrtc._nvrtc_version())
    assert f'pip install "cuda-toolkit[nvrtc,cudart,nvcc]=={version}.*"' in message
    assert "Colab" in message and "emulator" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_ioattn_no_nvcc_disables_the_fallback(device, kernel_file, monkeypatch):
    device("sm_80")
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: "/nonexistent/nvcc")
    monkeypatch.setenv("IOATTN_NO_NVCC", "1")
    name = kernel_file("needs_nvcc.cu", NEEDS_NVCC)
    with pytest.raises(KernelCompileError, match="needs_nvcc.cu did not compile with NVRTC"
                       "(.|\n)*IOATTN_NO_NVCC is set(.|\n)*To fix it"):
        nvrtc.compile_module(name, count_io=False)


def test_an_nvcc_that_does_not_run_is_reported(device, kernel_file, monkeypatch):
    device("sm_75")
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: "/nonexistent/nvcc")
    monkeypatch.delenv("IOATTN_NO_NVCC", raising=False)
    name = kernel_file("needs_nvcc.cu", NEEDS_NVCC)
    with pytest.raises(KernelCompileError, match="nor with nvcc \\(/nonexistent/nvcc\\):\n"
                       "    /nonexistent/nvcc could not be run"):
        nvrtc.compile_module(name, count_io=False)


@pytest.mark.parametrize("arch", ARCHS)
def test_nvcc_compiles_what_nvrtc_rejects(arch, device, kernel_file, nvcc, monkeypatch):
    loaded = device(arch)
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: nvcc)
    monkeypatch.delenv("IOATTN_NO_NVCC", raising=False)
    name = kernel_file("needs_nvcc.cu", NEEDS_NVCC)
    module = nvrtc.compile_module(name, count_io=False)
    assert loaded == []                             # NVRTC produced nothing
    assert module.code is None and module.file_path.endswith(".cubin")
    with open(module.file_path, "rb") as f:
        sms, sections = cubin(f.read())
    assert int(arch[3:]) in sms and "f" in kernels(sections)


def test_when_both_compilers_fail_both_logs_are_quoted(device, kernel_file, nvcc, monkeypatch):
    device("sm_75")
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: nvcc)
    monkeypatch.delenv("IOATTN_NO_NVCC", raising=False)
    name = kernel_file("broken.cu", SYNTAX_ERROR)
    with pytest.raises(KernelCompileError) as caught:
        nvrtc.compile_module(name, count_io=False)
    message = str(caught.value)
    assert message.startswith("broken.cu did not compile with NVRTC")
    assert f"nor with nvcc ({nvcc})" in message
    assert message.count('identifier "y" is undefined') == 2          # NVRTC's and nvcc's
    assert "Both compilers reject it" in message


def test_mma_needs_the_crt_headers(device, monkeypatch, nvcc):
    """The runtime headers' wheel has ``mma.h`` but not the ``crt/mma.h`` it includes: without
    the nvcc headers' folder NVRTC cannot compile the tensor-core kernel (so a plain
    ``pip install cupy-cuda12x[ctk]`` would fail), and the error says so and how to fix it; with
    nvcc present, nvcc compiles it instead."""
    from cuda.pathfinder import find_nvidia_header_directory

    runtime = find_nvidia_header_directory("cudart")
    assert runtime and not os.path.isfile(os.path.join(runtime, "crt", "mma.h")), (
        f"the CUDA headers CuPy uses ({runtime}) should be nvidia-cuda-runtime-cu12's, which "
        "lack crt/mma.h: install the nvrtc extra")
    assert nvrtc.includes()                          # what makes the NVRTC test pass
    loaded = device("sm_75")
    monkeypatch.setattr(nvrtc, "includes", lambda: ())
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: None)
    with pytest.raises(KernelCompileError) as caught:
        nvrtc.compile_module("flash_tc.cu", count_io=False)
    message = str(caught.value)
    assert message.startswith("flash_tc.cu did not compile with NVRTC")
    assert 'cannot open source file "crt/mma.h"' in message and "cuda-toolkit[" in message
    monkeypatch.setattr(nvrtc, "find_nvcc", lambda: nvcc)
    monkeypatch.delenv("IOATTN_NO_NVCC", raising=False)
    module = nvrtc.compile_module("flash_tc.cu", count_io=False)
    with open(module.file_path, "rb") as f:
        assert set(kernel_names("flash_tc.cu")) <= set(kernels(cubin(f.read())[1]))
    assert loaded == []
