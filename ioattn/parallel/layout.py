"""Who holds what: the rows of ``Q, K, V, O`` and the heads, shared among ``P`` processors.

Processor ``p`` (its MPI rank) starts with ``n_p`` rows of every head, ``n_p = N // P`` plus one
for the first ``N mod P`` processors. Two layouts of the rows:

- ``"contiguous"``: processor ``p`` holds rows ``o_p, ..., o_p + n_p - 1`` (``o_p = n_0 + ... +
  n_{p-1}``), as ring attention [RING]_ and the grid scheme assume;
- ``"striped"``: processor ``p`` holds rows ``p, p + P, p + 2P, ...`` (the same ``n_p``), as
  striped attention [STRIPE]_ does to balance a causal mask.

The grid scheme arranges the processors as a ``P_r x P_c`` grid (:func:`grid_shape`); head
parallelism gives processor ``p`` the ``h_p`` heads of :func:`shares` ``(H, P)``.

References
----------
.. [RING] H. Liu, M. Zaharia, P. Abbeel, "Ring attention with blockwise transformers for
   near-infinite context", arXiv:2310.01889 (2023).
.. [STRIPE] W. Brandon, A. Nrusimha, K. Qian, Z. Ankner, T. Jin, Z. Song, J. Ragan-Kelley,
   "Striped attention: faster ring attention for causal transformers", arXiv:2311.09431 (2023).
"""

from __future__ import annotations

from math import isqrt

import numpy as np

from .._validate import as_count

__all__ = ["LAYOUTS", "grid_shape", "offsets", "rows", "shares"]

LAYOUTS = ("contiguous", "striped")


def shares(n: int, parts: int) -> np.ndarray:
    """How ``n`` items are shared by ``parts`` holders: ``n // parts`` each, plus one for the first
    ``n mod parts``. An int64 array of length ``parts`` summing to ``n``."""
    sizes = np.full(parts, n // parts, dtype=np.int64)
    sizes[: n % parts] += 1
    return sizes


def offsets(n: int, parts: int) -> np.ndarray:
    """Where each holder's items start in the contiguous layout (length ``parts + 1``)."""
    return np.concatenate(([0], np.cumsum(shares(n, parts))))


def rows(N: int, P: int, layout: str = "contiguous") -> list[np.ndarray]:
    """The global row indices processor ``p`` holds, for every ``p``, in increasing order."""
    if layout == "striped":
        return [np.arange(p, N, P) for p in range(P)]
    if layout != "contiguous":
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    o = offsets(N, P)
    return [np.arange(o[p], o[p + 1]) for p in range(P)]


def grid_shape(P: int, d: int) -> tuple[int, int]:
    """The ``P_r x P_c = P`` grid of the grid scheme with the least traffic per processor when
    the shares are equal, ``n ((2d + 1)(P_c - 1) + 2d (P_r - 1))`` words for one head, over
    every factorisation of ``P``; of those that tie, the one with the least memory,
    ``n ((2d + 3) P_c + 2d P_r)``, which is the one with the smaller ``P_c``.

    A grid column gathers keys and values (``2d`` words a row), a grid row gathers queries and
    reduces the partial outputs (``2d + 1``), so the grid has at least as many rows as columns.
    A prime ``P`` gives ``P x 1``, whose traffic is the ring's.

    >>> grid_shape(8, 64), grid_shape(16, 64), grid_shape(7, 64), grid_shape(2, 64)
    ((4, 2), (4, 4), (7, 1), (2, 1))
    """
    P, d = as_count(P, "P"), as_count(d, "d")
    small = [c for c in range(1, isqrt(P) + 1) if P % c == 0]
    shapes = [(P // c, c) for c in small] + [(c, P // c) for c in small]
    return min(shapes, key=lambda rc: ((2 * d + 1) * rc[1] + 2 * d * rc[0], rc[1]))
