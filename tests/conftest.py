"""Shared helpers: the plain NumPy reference and random inputs."""

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("ioattn", deadline=None, max_examples=60, derandomize=True)
settings.load_profile("ioattn")

#: Every attention algorithm with every option value worth testing: (name, options).
VARIANTS = [
    ("flash", {}),
    ("flash", {"variant": "fa1"}),
    ("square_tiling", {}),
    ("square_tiling", {"schedule": "outer"}),
    ("standard", {}),
]
VARIANT_IDS = [name + "".join(f"-{v}" for v in opts.values()) for name, opts in VARIANTS]


def least_M(name, d, options):
    """The smallest cache size at which algorithm ``name`` runs with ``options``."""
    from ioattn.algorithms import get

    algo = get(name)
    return algo.min_M(d, **{**algo.options, **options})


def reference_attention(Q, K, V, scale=None):
    """softmax(scale Q K^T) V with the row maximum subtracted, in float64 NumPy."""
    scale = 1 / np.sqrt(Q.shape[1]) if scale is None else scale
    S = scale * (Q @ K.T)
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    P /= P.sum(axis=1, keepdims=True)
    return P @ V


def reference_backward(Q, K, V, dO, scale=None):
    """The analytic gradients of softmax(scale Q K^T) V for the upstream dO, in float64 NumPy:
    dV = P^T dO, dP = dO V^T, D = rowsum(dO * O), dS = P * (dP - D), dQ = scale dS K,
    dK = scale dS^T Q."""
    scale = 1 / np.sqrt(Q.shape[1]) if scale is None else scale
    S = scale * (Q @ K.T)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    O = P @ V
    dP = dO @ V.T
    dS = P * (dP - (dO * O).sum(axis=1, keepdims=True))
    return scale * dS @ K, scale * dS.T @ Q, P.T @ dO


def relative_error(x, y):
    return float(np.abs(x - y).max() / np.abs(y).max())


def random_qkv(N, d, seed=0, magnitude=1.0):
    rng = np.random.default_rng(seed)
    return tuple(magnitude * rng.standard_normal((N, d)) for _ in range(3))


@pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
def variant(request):
    return request.param
