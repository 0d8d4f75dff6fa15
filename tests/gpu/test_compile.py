"""Every kernel source compiles with nvcc for Turing, Ampere and Hopper, with and without the
counting switch, without a warning and without spilling registers: a broken kernel fails CI,
which has no GPU."""

import re

import pytest

from ioattn.gpu.sources import ARCHS, files, kernel_names, nvcc_check, source


def test_there_are_kernels():
    assert {"flash.cu", "flash_tc.cu", "flash_backward.cu", "square_tiling.cu",
            "standard.cu"} <= set(files())


@pytest.mark.parametrize("count_io", [False, True], ids=["plain", "count_io"])
@pytest.mark.parametrize("name", files())
def test_compiles_for_every_arch(name, count_io, nvcc):
    log = nvcc_check(name, ARCHS, count_io=count_io, nvcc=nvcc)
    for arch in ARCHS:
        assert f"for '{arch}'" in log
    compiled = set(re.findall(r"Compiling entry function '(\w+)'", log))
    assert set(kernel_names(name)) <= compiled
    spills = re.findall(r"(\d+) bytes spill stores", log)
    assert spills and all(s == "0" for s in spills), log


def test_counting_is_a_compile_time_switch():
    text = source("flash.cu")
    assert "#ifdef IOATTN_COUNT_IO" in text and "COUNT_READ" in text


def test_a_broken_kernel_fails(nvcc, monkeypatch, tmp_path):
    import ioattn.gpu.sources as sources

    (tmp_path / "ioattn.cuh").write_text((sources.KERNELS / "ioattn.cuh").read_text())
    (tmp_path / "broken.cu").write_text('#include "ioattn.cuh"\n'
                                        'extern "C" __global__ void f(float* x) { x[0] = y; }\n')
    monkeypatch.setattr(sources, "KERNELS", tmp_path)
    sources.source.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="nvcc failed on broken.cu"):
            nvcc_check("broken.cu", "sm_80", nvcc=nvcc)
    finally:
        sources.source.cache_clear()


@pytest.mark.parametrize("name", files())
def test_shared_memory_is_32_byte_aligned_for_wmma(name, nvcc, tmp_path):
    # WMMA loads and stores take 256-bit aligned pointers: the dynamic shared array must be
    # declared so, not merely start at offset 0 of the block's shared memory
    import subprocess

    from ioattn.gpu.sources import KERNELS

    src = tmp_path / name
    src.write_text(source(name))
    (tmp_path / "ioattn.cuh").write_text((KERNELS / "ioattn.cuh").read_text())
    out = tmp_path / "k.ptx"
    subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-std=c++17", f"-I{KERNELS}", "-o", str(out),
                    str(src)], check=True, capture_output=True)
    aligns = re.findall(r"\.extern \.shared \.align (\d+) \.b8 ioattn_smem_", out.read_text())
    assert aligns and all(int(a) >= 32 for a in aligns)
