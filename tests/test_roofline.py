"""The roofline: exact counts (equal to what the kernels count on the emulator), exact
operation counts, and the times and throughputs they imply on each GPU of ioattn.gpus."""

import numpy as np
import pytest

import ioattn
from ioattn import roofline
from ioattn.gpu.plans import SharedMemoryExceeded
from ioattn.gpus import GPUS
from ioattn.roofline import attention_flops, curve, predict, traffic_bytes

FORWARD = [("flash", "float32", {}), ("flash", "float16", {}), ("flash", "bfloat16", {}),
           ("square_tiling", "float32", {"schedule": "blocked"}),
           ("square_tiling", "float32", {"schedule": "outer"}), ("standard", "float32", {})]


def _inputs(N, d, heads, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, heads, N, d)).astype(np.float32)


# every forward kernel on a GPU that has its precision (a T4 has no bfloat16)
CASES = [(n, t, o, g) for g in ("T4", "H100") for n, t, o in FORWARD
         if not (g == "T4" and t == "bfloat16")]


@pytest.mark.parametrize("name,dtype,options,gpu", CASES,
                         ids=[f"{n}-{t}-{o.get('schedule', '')}-{g}" for n, t, o, g in CASES])
def test_predicted_traffic_is_what_the_kernels_count(name, dtype, options, gpu):
    """The entries a prediction is made of are those the kernel counts on the emulator, for
    the plan the GPU would run (its default budget and a smaller one)."""
    N, d, heads = 40, 16, 2
    Q, K, V = _inputs(N, d, heads)
    for M in (None, 700 if dtype == "float32" else 1700):
        p = predict(name, N, d, M, gpu=gpu, dtype=dtype, heads=heads, **options)
        block = {"block": (p.plan.B_r, p.plan.B_c)} if name == "flash" else {"M": p.plan.M}
        run = ioattn.gpu.run(name, Q, K, V, dtype=dtype, count_io=True, backend="emulator",
                             **block, **options)
        assert (run.io.reads, run.io.writes) == (p.reads, p.writes)
        assert p.bytes == traffic_bytes(name, dtype, p.reads, p.writes)


@pytest.mark.parametrize("gpu", ["T4", "A100"])
def test_predicted_backward_traffic_is_what_the_kernel_counts(gpu):
    N, d, heads = 36, 16, 2
    Q, K, V = _inputs(N, d, heads, seed=1)
    dO = np.random.default_rng(2).standard_normal(Q.shape).astype(np.float32)
    fwd = ioattn.gpu.run("flash", Q, K, V, M=1000, save_lse=True, backend="emulator")
    for M in (None, 1200):
        p = predict("flash", N, d, M, gpu=gpu, heads=heads, backward=True)
        run = ioattn.gpu.run_backward(Q, K, V, fwd.output, dO, fwd.lse,
                                      block=(p.plan.B_r, p.plan.B_c), count_io=True,
                                      backend="emulator")
        assert (run.io.reads, run.io.writes) == (p.reads, p.writes)
        assert p.flops == 10 * N * N * d * heads


def test_flops_are_the_products_operations():
    # S = Q K^T and P V: N*N*d multiply-adds each, 2 operations apiece
    N, d = 48, 24
    assert attention_flops(N, d) == 2 * (2 * N * N * d)
    assert attention_flops(N, d, 3) == 3 * attention_flops(N, d)
    assert attention_flops(N, d, backward=True) * 2 == 5 * attention_flops(N, d)


def test_bytes_follow_the_storage_precision():
    assert traffic_bytes("flash", "float16", 5, 7) == 5 * 2 + 7 * 4
    assert traffic_bytes("flash", "float32", 5, 7) == 5 * 4 + 7 * 4
    assert traffic_bytes("square_tiling", "float32", 5, 7) == 48
    with pytest.raises(ValueError, match="dtype must be one of"):
        traffic_bytes("flash", "float64", 1, 1)


@pytest.mark.parametrize("gpu", list(GPUS))
def test_the_roofline_is_the_larger_of_two_terms(gpu):
    spec = GPUS[gpu]
    for name, dtype, options in FORWARD:
        if dtype not in spec.peak:
            continue
        p = predict(name, 2048, 64, gpu=gpu, dtype=dtype, heads=4, **options)
        assert p.memory_time == p.bytes / spec.bandwidth
        assert p.compute_time == p.flops / spec.peak[dtype]
        assert p.time == max(p.memory_time, p.compute_time)
        assert p.tflops * 1e12 <= spec.peak[dtype] * (1 + 1e-12)
        if p.bound == "memory":     # below the ridge: throughput = intensity x bandwidth
            assert p.tflops * 1e12 == pytest.approx(p.intensity * spec.bandwidth)
            assert p.intensity < spec.peak[dtype] / spec.bandwidth
        else:
            assert p.tflops * 1e12 == pytest.approx(spec.peak[dtype])


def test_heads_scale_time_but_not_throughput():
    one = predict("flash", 1024, 64, gpu="A100")
    eight = predict("flash", 1024, 64, gpu="A100", heads=8)
    assert (eight.reads, eight.writes, eight.flops) == (8 * one.reads, 8 * one.writes,
                                                        8 * one.flops)
    assert eight.time == pytest.approx(8 * one.time)
    assert eight.tflops == pytest.approx(one.tflops)


def test_more_cache_never_predicts_more_time_for_flash():
    """Over every M from the least budget to past the T4's limit at a small size, the
    predicted time never grows when the traffic does not."""
    N, d = 256, 32
    Ms = range(ioattn.min_M("flash", d), 4000)
    preds = [p for p in curve("flash", N, d, Ms, gpu="T4") if p is not None]
    for a, b in zip(preds, preds[1:]):
        if b.bytes <= a.bytes:
            assert b.time <= a.time


def test_curve_stops_exactly_where_the_plan_no_longer_fits():
    """Every M from the least budget to twice the T4's shared memory per block: None exactly
    when the plan's footprint (4 bytes an entry) exceeds 64 KB."""
    N, d = 512, 64
    limit = GPUS["T4"].shared_per_block
    for name in ("flash", "square_tiling", "standard"):
        least = ioattn.min_M(name, d)
        Ms = range(least, 2 * limit // 4, 7)
        for M, p in zip(Ms, curve(name, N, d, Ms, gpu="T4")):
            fits = 4 * ioattn.plan(name, N, d, M).footprint <= limit
            assert (p is not None) == fits, (name, M)


def test_bfloat16_needs_a_gpu_that_has_it():
    with pytest.raises(ValueError, match="T4 has no bfloat16"):
        predict("flash", 1024, 64, gpu="T4", dtype="bfloat16")
    assert predict("flash", 1024, 64, gpu="T4", dtype="float16").tflops > 0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown GPU 'V100'"):
        predict("flash", 1024, 64, gpu="V100")
    with pytest.raises(ValueError, match="flash only"):
        predict("standard", 1024, 64, gpu="A100", dtype="float16")
    with pytest.raises(ValueError, match="backward kernel is flash's"):
        predict("standard", 1024, 64, gpu="A100", backward=True)
    with pytest.raises(ValueError, match="heads must be a positive int"):
        predict("flash", 1024, 64, gpu="A100", heads=0)
    with pytest.raises(SharedMemoryExceeded, match="shared memory"):
        predict("square_tiling", 1024, 64, 40000, gpu="T4")


def test_every_kernel_has_a_label():
    assert roofline.kernel_names() == ["flash (float32)", "flash (float16)", "flash (bfloat16)",
                                       "square_tiling (float32)", "standard (float32)",
                                       "flash backward"]
