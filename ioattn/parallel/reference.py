"""Single-process attention and its gradients, per head, in float64: what every MPI run is
checked against. Nothing here is counted."""

from __future__ import annotations

import numpy as np

from ..api import saved_for_backward
from ..masks import Mask

__all__ = ["attention", "attention_backward"]


def attention(Q, K, V, *, causal: bool = False, scale: float = 1.0):
    """``O = softmax(scale Q K^T) V`` and the row log-sum-exp ``L``, for arrays ``(H, N, d)``:
    :func:`ioattn.saved_for_backward` for each head."""
    mask = Mask.causal(Q.shape[-2]) if causal else None
    heads = [saved_for_backward(q, k, v, scale, mask=mask) for q, k, v in zip(Q, K, V)]
    return np.stack([O for O, _ in heads]), np.stack([L for _, L in heads])


def attention_backward(Q, K, V, dO, *, causal: bool = False, scale: float = 1.0):
    """``dQ, dK, dV`` of :func:`attention` for the upstream gradient ``dO``."""
    O, L = attention(Q, K, V, causal=causal, scale=scale)
    S = scale * np.matmul(Q, np.swapaxes(K, -1, -2))
    if causal:
        S[..., Mask.causal(Q.shape[-2]).excluded] = -np.inf
    P = np.exp(S - L[..., None])                   # exp(-inf) = 0 where the mask hides a key
    dV = np.matmul(np.swapaxes(P, -1, -2), dO)
    dP = np.matmul(dO, np.swapaxes(V, -1, -2))
    dS = P * (dP - (dO * O).sum(axis=-1, keepdims=True))
    return scale * np.matmul(dS, K), scale * np.matmul(np.swapaxes(dS, -1, -2), Q), dV
