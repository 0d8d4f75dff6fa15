"""GPU tests: ``@pytest.mark.gpu`` ones need a CUDA GPU and are reported as skipped without one;
the rest run the same kernel sources on the CPU emulator, or compile them with nvcc."""

import numpy as np
import pytest

from ioattn.gpu import available, why_unavailable


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
