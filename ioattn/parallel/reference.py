"""Single-process attention and its gradients, per head, in float64: what every MPI run is
checked against. Nothing here is counted."""

from __future__ import annotations

import numpy as np

__all__ = ["attention", "attention_backward"]


def _probabilities(Q, K, causal, scale):
    S = scale * np.matmul(Q, np.swapaxes(K, -1, -2))
    if causal:
        N = Q.shape[-2]
        S[..., np.triu(np.ones((N, N), dtype=bool), 1)] = -np.inf
    m = S.max(axis=-1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(axis=-1, keepdims=True)
    return P / l, (m + np.log(l))[..., 0]


def attention(Q, K, V, *, causal: bool = False, scale: float = 1.0):
    """``O = softmax(scale Q K^T) V`` and the row log-sum-exp ``L``, for arrays ``(H, N, d)``."""
    P, L = _probabilities(Q, K, causal, scale)
    return np.matmul(P, V), L


def attention_backward(Q, K, V, dO, *, causal: bool = False, scale: float = 1.0):
    """``dQ, dK, dV`` of :func:`attention` for the upstream gradient ``dO``."""
    P, _ = _probabilities(Q, K, causal, scale)
    dV = np.matmul(np.swapaxes(P, -1, -2), dO)
    dP = np.matmul(dO, np.swapaxes(V, -1, -2))
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    return scale * np.matmul(dS, K), scale * np.matmul(np.swapaxes(dS, -1, -2), Q), dV
