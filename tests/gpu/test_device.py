"""Every kernel on a real GPU: outputs against the float64 reference, counted traffic against
``ioattn.io_cost``, and the crossover at ``d = 256``.

The ``@pytest.mark.gpu`` tests run only where CuPy sees a CUDA GPU (``make test-gpu``); elsewhere
they are reported as skipped. Each test draws fresh random data (the ``rng`` fixture); the API
fills every output with NaN before a launch, so an entry a kernel never writes fails the error
check. The 16-bit kernels are compared with the reference computed from their rounded inputs
(what they actually read), so the tolerance measures the kernel, not the input rounding.

One test here needs no GPU: without one, ``ioattn.gpu.run(..., backend="cuda")`` must raise
:class:`~ioattn.gpu.GPUUnavailableError` saying what is missing and how to get a GPU.
"""

import numpy as np
import pytest

import ioattn
import ioattn.gpu as g
from ioattn.gpu import GPUUnavailableError, available, why_unavailable

from ..conftest import reference_backward
from .conftest import reference, rel_error

#: Relative error allowed against the float64 reference, by storage precision.
TOL = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 1e-2}

#: Every forward kernel: (id, algorithm, dtype, options).
FORWARD = [
    ("flash-fp32", "flash", "float32", {}),
    ("flash-fp16", "flash", "float16", {}),
    ("flash-bf16", "flash", "bfloat16", {}),
    ("square-blocked", "square_tiling", "float32", {"schedule": "blocked"}),
    ("square-outer", "square_tiling", "float32", {"schedule": "outer"}),
    ("standard", "standard", "float32", {}),
]
IDS = [f[0] for f in FORWARD]

DS = (16, 32, 64, 80, 128, 256)
#: N below one tile of every plan, odd and ragged, and odd with many blocks.
NS = (5, 67, 1001)


def host(x):
    """A NumPy copy of a CuPy (or NumPy) array."""
    return x.get() if hasattr(x, "get") else np.asarray(x)


def stored(x, dtype):
    """``x`` rounded to the storage precision the kernels read, back in float64."""
    if dtype == "float32":
        return x.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float64)
    bits = g.api.to_storage(np.ascontiguousarray(x, dtype=np.float32), "bfloat16", np)
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def expected_io(name, the_plan, heads, backward=False):
    """``heads`` times ``ioattn.io_cost`` for the plan the kernels ran, as (reads, writes)."""
    opts = {}
    if name == "flash":
        opts["block"] = (the_plan.B_r, the_plan.B_c)
    elif name == "square_tiling":
        opts["schedule"] = the_plan.schedule
    if not backward:
        opts["save_lse"] = the_plan.save_lse
        if the_plan.mask is not None:
            opts["mask"] = the_plan.mask
    cost = ioattn.io_cost(name, the_plan.N, the_plan.d, the_plan.M, backward=backward, **opts)
    return heads * cost.reads, heads * cost.writes


def inputs(rng, shape, magnitude=1.0):
    return tuple((magnitude * rng.standard_normal(shape)).astype(np.float32) for _ in range(3))


def check_forward(name, dtype, options, Q, K, V, **kw):
    """Run once plain and once counting; check the output of both and the count."""
    heads = int(np.prod(Q.shape[:-2]))
    ref, _ = reference(*(stored(x, dtype) for x in (Q, K, V)), **kw)
    for count_io in (False, True):
        res = g.run(name, Q, K, V, dtype=dtype, count_io=count_io, **options, **kw)
        assert res.backend == "cuda" and res.heads == heads
        out = host(res.output)
        assert out.shape == Q.shape and out.dtype == np.float32
        err = rel_error(out, ref)
        assert err <= TOL[dtype], f"{name} {dtype} count_io={count_io}: error {err:.2e}"
        if count_io:
            assert (res.io.reads, res.io.writes) == expected_io(name, res.plan, heads)
            assert res.io.peak == res.plan.footprint
    return res


@pytest.mark.gpu
@pytest.mark.parametrize("N", NS)
@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("kernel", FORWARD, ids=IDS)
def test_forward_matches_the_reference_and_io_cost(kernel, d, N, rng):
    _, name, dtype, options = kernel
    check_forward(name, dtype, options, *inputs(rng, (N, d)))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", FORWARD, ids=IDS)
def test_batch_and_heads(kernel, rng):
    _, name, dtype, options = kernel
    res = check_forward(name, dtype, options, *inputs(rng, (2, 3, 333, 64)))
    assert res.heads == 6


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", FORWARD, ids=IDS)
def test_large_logits(kernel, rng):
    """Scores with a standard deviation of about 50: exp overflows unless the row maximum is
    subtracted (logit = tau q.k, with q, k ~ N(0, 50) entries: variance 50^2)."""
    _, name, dtype, options = kernel
    N, d = 513, 64
    Q, K, V = inputs(rng, (N, d))
    Q, K = Q * np.sqrt(50.0), K * np.sqrt(50.0)
    logits = (stored(Q, dtype) @ stored(K, dtype).T) / np.sqrt(d)
    assert 35 < logits.std() < 65
    check_forward(name, dtype, options, Q.astype(np.float32), K.astype(np.float32), V)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("N", [5, 1001])
def test_flash_causal_and_lse(dtype, N, rng):
    Q, K, V = inputs(rng, (2, N, 64))
    res = check_forward("flash", dtype, {}, Q, K, V, causal=True)
    full = g.run("flash", Q, K, V, dtype=dtype, causal=True, save_lse=True, count_io=True)
    _, L = reference(*(stored(x, dtype) for x in (Q, K, V)), causal=True)
    tol = 1e-4 if dtype == "float32" else 2e-2
    assert np.abs(host(full.lse) - L).max() <= tol
    assert (full.io.reads, full.io.writes) == expected_io("flash", full.plan, 2)
    assert full.io.writes == res.io.writes + 2 * N


@pytest.mark.gpu
@pytest.mark.parametrize("name, options", [("flash", {}), ("square_tiling", {}),
                                           ("square_tiling", {"schedule": "outer"}),
                                           ("standard", {})])
def test_small_budgets_count_exactly(name, options, rng):
    """Budgets far below the device's: many blocks, the NumPy block rule for each M."""
    N, d = 333, 64
    Q, K, V = inputs(rng, (N, d))
    ref, _ = reference(Q, K, V)
    least = ioattn.min_M(name, d, **options)
    for M in sorted({least, max(least, d * d // 4), d * d, 4 * d * d}):
        res = g.run(name, Q, K, V, M=M, count_io=True, **options)
        assert rel_error(host(res.output), ref) <= TOL["float32"], M
        assert res.plan.M == M
        assert (res.io.reads, res.io.writes) == expected_io(name, res.plan, 1), M


@pytest.mark.gpu
@pytest.mark.parametrize("N", NS)
@pytest.mark.parametrize("d", DS)
def test_backward_matches_the_reference_and_io_cost(d, N, rng):
    shape = (2, N, d)
    Q, K, V = inputs(rng, shape)
    dO = rng.standard_normal(shape).astype(np.float32)
    fwd = g.run("flash", Q, K, V, save_lse=True)
    for count_io in (False, True):
        res = g.run_backward(Q, K, V, fwd.output, dO, fwd.lse, count_io=count_io)
        assert res.backend == "cuda" and res.heads == 2
        for h in range(2):
            refs = reference_backward(*(x[h].astype(np.float64) for x in (Q, K, V, dO)))
            for got, want, label in zip(res.output, refs, ("dQ", "dK", "dV")):
                err = rel_error(host(got)[h], want)
                assert err <= TOL["float32"], f"{label} head {h}: error {err:.2e}"
        if count_io:
            assert (res.io.reads, res.io.writes) == expected_io("flash", res.plan, 2,
                                                                backward=True)


@pytest.mark.gpu
def test_the_gpu_is_used_and_no_error_is_raised(rng):
    assert available() and why_unavailable() is None
    info = g.device_info()
    assert info["name"] and info["shared_memory_per_block"] >= 48 * 1024
    Q, K, V = inputs(rng, (64, 32))
    res = g.run("flash", Q, K, V)             # GPUUnavailableError would fail the test
    assert type(res.output).__module__.startswith("cupy")


@pytest.mark.gpu
def test_crossover_at_d256_from_counted_traffic(rng):
    """flash against square tiling at d = 256: the counted traffic crosses between d^2/8 and
    4 d^2 (budgets whose blocks do not fit in shared memory are left out)."""
    N, d = 256, 256
    Q, K, V = inputs(rng, (N, d))
    points = []
    for k in range(9):
        M = d * d // 16 << k
        totals = []
        for name in ("flash", "square_tiling"):
            try:
                res = g.run(name, Q, K, V, M=M, count_io=True)
            except ValueError:             # does not fit in this GPU's shared memory
                totals.append(None)
                continue
            assert res.io.total == ioattn.io_cost(name, N, d, M).total
            totals.append(res.io.total)
        if None not in totals:
            points.append((M, *totals))
    assert len(points) >= 3, points
    crossing = [(M0, M1) for (M0, f0, s0), (M1, f1, s1) in zip(points, points[1:])
                if s0 < f0 and f1 <= s1]
    exact = ioattn.bounds.crossovers(N, d, names=["flash", "square_tiling"])[-1].M
    if not crossing and points[-1][0] < exact:
        pytest.skip(f"this GPU's shared memory holds budgets up to M = {points[-1][0]} only, "
                    f"below the crossover at M = {exact} (a T4, say)")
    assert crossing, f"the counted traffic does not cross: {points}"
    lo, hi = crossing[0]
    assert d * d / 8 <= lo and hi <= 4 * d * d, crossing


def test_without_a_gpu_the_cuda_backend_says_what_is_missing():
    if available():
        pytest.skip("a CUDA GPU is available here, so GPUUnavailableError is not raised")
    Q = np.ones((8, 4), dtype=np.float32)
    with pytest.raises(GPUUnavailableError) as caught:
        g.run("flash", Q, Q, Q, backend="cuda")
    message = str(caught.value)
    assert why_unavailable() in message          # e.g. "CuPy is not installed"
    assert "Colab" in message and "emulator" in message


class CUDARuntimeError(RuntimeError):
    """Stands for cupy_backends' error of that name."""


@pytest.mark.parametrize("error, says", [
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
     "CuPy finds no usable NVIDIA driver (cudaErrorInsufficientDriver: no driver is installed"),
    ("cudaErrorNoDevice: no CUDA-capable device is detected",
     "the NVIDIA driver reports no GPU (cudaErrorNoDevice)"),
    ("cudaErrorUnknown: unknown error", "CUDA found no usable GPU (CUDARuntimeError: "
     "cudaErrorUnknown: unknown error)"),
], ids=["no-driver", "no-device", "other"])
def test_with_cupy_but_no_driver_the_error_says_so_in_one_sentence(error, says, monkeypatch):
    """CuPy installed on a machine without a GPU: its device query fails; the error explains it
    in words, keeps CUDA's error name, and chains no traceback."""
    import sys
    import types

    from ioattn.gpu import device

    def no_driver():
        raise CUDARuntimeError(error)

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=no_driver))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    device.why_unavailable.cache_clear()
    try:
        assert why_unavailable().startswith(says)
        with pytest.raises(GPUUnavailableError) as caught:
            g.device_info()
    finally:
        device.why_unavailable.cache_clear()
    message = str(caught.value)
    assert message.startswith(f"ioattn.gpu.device_info() needs a CUDA GPU, but {says}")
    assert "Colab" in message and "emulator" in message and "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_the_installed_cupy_without_a_gpu_names_the_reason():
    """With the test environment's CuPy and no GPU (CI), the reason is CuPy's, not an import
    error; with no CuPy, that is the reason."""
    if available():
        pytest.skip("a CUDA GPU is available here")
    try:
        import cupy  # noqa: F401
    except ImportError:
        assert why_unavailable() == "CuPy is not installed"
        return
    assert why_unavailable().startswith(("CuPy finds no usable NVIDIA driver",
                                         "the NVIDIA driver reports no GPU",
                                         "CUDA found no usable GPU", "CUDA reports no GPU"))
