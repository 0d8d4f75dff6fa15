"""Every kernel source compiles with nvcc for Turing, Ampere and Hopper, with and without the
counting switch, without a warning and without spilling registers: a broken kernel fails CI,
which has no GPU."""

import re

import pytest

from ioattn.gpu.sources import ARCHS, files, kernel_names, nvcc_check, source


def test_there_are_kernels():
    assert {"flash.cu", "flash_tc.cu", "flash_backward.cu", "square_tiling.cu",
            "standard.cu", "flash_decoding.cu"} <= set(files())


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


# every function of mma.cuh, instantiated (ldmatrix x1/x2/x4 with and without .trans, the two
# mma shapes and both 16-bit types, cp.async ca/cg of every size and its waits)
EVERY_WARP_INSTRUCTION = r'''
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "ioattn.cuh"
#include "mma.cuh"
extern "C" __global__ void every(const unsigned* g, float* out) {
    IOATTN_SHARED(unsigned, s);
    const int l = threadIdx.x;
    cp_async<4>(s + l, g + l);
    cp_async<8>(s + 64 + 2 * l, g + 64 + 2 * l);
    cp_async_commit();
    cp_async<16>(s + 256 + 4 * l, g + 256 + 4 * l);
    cp_async<16, true>(s + 512 + 4 * l, g + 512 + 4 * l);
    cp_async_commit();
    cp_async_wait<1>();
    cp_async_wait_all();
    __syncthreads();
    unsigned a1[1], a2[2], a4[4], t1[1], t2[2], t4[4];
    ldmatrix<1>(a1, s + 4 * l);
    ldmatrix<2>(a2, s + 4 * l);
    ldmatrix<4>(a4, s + 4 * l);
    ldmatrix<1, true>(t1, s + 4 * l);
    ldmatrix<2, true>(t2, s + 4 * l);
    ldmatrix<4, true>(t4, s + 4 * l);
    float c[4] = {0.f, 0.f, 0.f, 0.f}, d[4], e[4], f[4];
    const unsigned a8[2] = {a2[0], t2[1]}, b8[1] = {a1[0] ^ t1[0]};
    mma_m16n8k8(d, a8, b8, c);
    mma_m16n8k16<__half>(e, a4, t2, d);
#if __CUDA_ARCH__ >= 800
    mma_m16n8k16<__nv_bfloat16>(f, t4, a2, e);
#else
    for (int i = 0; i < 4; ++i) f[i] = e[i];
#endif
    for (int i = 0; i < 4; ++i) out[4 * l + i] = f[i];
}'''


@pytest.mark.parametrize("arch", ARCHS)
def test_the_warp_instructions_compile(arch, nvcc, tmp_path):
    import subprocess

    from ioattn.gpu.sources import KERNELS

    src = tmp_path / "every.cu"
    src.write_text(EVERY_WARP_INSTRUCTION)
    out = tmp_path / "every.cubin"
    done = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-std=c++17",
                           "-Werror=all-warnings", f"-I{KERNELS}", "-o", str(out), str(src)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ptx = tmp_path / "every.ptx"
    subprocess.run([nvcc, "-ptx", f"-arch={arch}", "-std=c++17", f"-I{KERNELS}", "-o", str(ptx),
                    str(src)], check=True, capture_output=True)
    text = ptx.read_text()
    for op in ("ldmatrix.sync.aligned.m8n8.x1.shared.b16",
               "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
               "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"):
        assert op in text, op
    ampere = arch != "sm_75"                # m16n8k16 and cp.async from sm_80 on
    assert ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in text) == ampere
    assert ("cp.async.cg.shared.global" in text) == ampere
    assert ("cp.async.wait_group 1" in text) == ampere
