"""GPU tests: ``@pytest.mark.gpu`` ones need a CUDA GPU and are reported as skipped without one;
the rest run the same kernel sources on the CPU emulator, or compile them with nvcc."""

import os

import numpy as np
import pytest

import ioattn
from ioattn.gpu import available, run, why_unavailable
from ioattn.gpu.backend import EMULATED_SHARED_MEMORY as EMULATED


def pytest_collection_modifyitems(config, items):
    if available():
        return
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: {why_unavailable()} (run `make test-gpu` "
                                   "on a GPU machine)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def reference(Q, K, V, scale=None, causal=False):
    """``(O, L)`` in float64 NumPy for ``(..., N, d)`` inputs: the oracle of every GPU test."""
    Q, K, V = (np.asarray(x, dtype=np.float64) for x in (Q, K, V))
    d = Q.shape[-1]
    scale = 1 / np.sqrt(d) if scale is None else scale
    S = scale * np.einsum("...id,...jd->...ij", Q, K)
    if causal:
        N = Q.shape[-2]
        S = np.where(np.tril(np.ones((N, N), dtype=bool)), S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(axis=-1, keepdims=True)
    return (P / l) @ V, (m + np.log(l))[..., 0]


def rel_error(x, ref):
    """``||x - ref|| / ||ref||`` (inf when x has a NaN: an output never written stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        return np.inf
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


@pytest.fixture
def rng(request):
    """Fresh random data for every test (seeded by its name, so a failure reproduces)."""
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def check_dense(rng, name, shape, *, M=None, save_lse=False, scale=None, backend="emulator",
                tol=1e-5, **options):
    """Run the float32 kernels of ``name`` on fresh data and check the output (fully written,
    within ``tol`` of float64), ``L``, the plan's shared memory and the counted traffic
    (``heads * io_cost`` for the plan). Returns the result."""
    Q, K, V = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    r = run(name, Q, K, V, M=M, save_lse=save_lse, scale=scale, count_io=True,
            backend=backend, **options)
    O, L = reference(Q, K, V, scale)
    out = np.asarray(r.output.get() if hasattr(r.output, "get") else r.output)
    assert out.shape == shape and out.dtype == np.float32
    assert np.isfinite(out).all(), "O not fully written"
    assert rel_error(out, O) <= tol
    if save_lse:
        lse = np.asarray(r.lse.get() if hasattr(r.lse, "get") else r.lse)
        assert rel_error(lse, L) <= tol
    N, d = shape[-2:]
    p, heads = r.plan, int(np.prod(shape[:-2]))
    assert 4 * p.footprint <= (EMULATED if backend == "emulator" else 1 << 40)
    cost = ioattn.io_cost(name, N, d, p.M, save_lse=save_lse, **options)
    assert (r.io.reads, r.io.writes) == (heads * cost.reads, heads * cost.writes)
    assert r.io.peak == p.footprint
    return r


@pytest.fixture(scope="session")
def nvcc():
    """The nvcc the compile tests use: a failure naming the fix when there is none, or a skip
    (reported as such) with IOATTN_SKIP_NVCC=1."""
    from ioattn.gpu.sources import find_nvcc

    found = find_nvcc()
    if found is None:
        if os.environ.get("IOATTN_SKIP_NVCC") == "1":
            pytest.skip("no nvcc, and IOATTN_SKIP_NVCC=1")
        pytest.fail("nvcc is needed to compile the kernels (install the CUDA toolkit, or set "
                    "IOATTN_SKIP_NVCC=1 to skip these tests, which are then reported as skipped)")
    return found
