"""Who holds what: the rows of ``Q, K, V, O`` and the heads, shared among ``P`` processors.

Processor ``p`` (its MPI rank) starts with ``n_p`` rows of every head, ``n_p = N // P`` plus one
for the first ``N mod P`` processors. Two layouts of the rows:

- ``"contiguous"``: processor ``p`` holds rows ``o_p, ..., o_p + n_p - 1`` (``o_p = n_0 + ... +
  n_{p-1}``), as ring attention [RING]_ and the grid scheme assume;
- ``"striped"``: processor ``p`` holds rows ``p, p + P, p + 2P, ...`` (the same ``n_p``), as
  striped attention [STRIPE]_ does to balance a causal mask;
- ``"zigzag"``: the rows cut into ``2P`` contiguous chunks of :func:`shares` ``(N, 2P)`` rows,
  processor ``p`` holding chunks ``p`` and ``2P - 1 - p`` (:func:`chunks`), as zigzag ring
  attention [ZIGZAG]_ and Llama 3's context parallelism [LLAMA3]_ do to balance a causal mask.
  Its shares (:func:`sizes`) are not those of :func:`shares` ``(N, P)`` but none is larger than
  ``ceil(N / P)``.

The grid scheme arranges the processors as a ``P_r x P_c`` grid (:func:`grid_shape`); head
parallelism gives processor ``p`` the ``h_p`` heads of :func:`shares` ``(H, P)``; USP arranges
them as ``P_r`` groups of ``P_u`` (:func:`usp_shape`), processor ``p = r P_u + u``, and with a
zigzag ring across the groups it holds part ``u`` of the zigzag rows of group ``r``
(:func:`group_rows`).

References
----------
.. [RING] H. Liu, M. Zaharia, P. Abbeel, "Ring attention with blockwise transformers for
   near-infinite context", arXiv:2310.01889 (2023).
.. [STRIPE] W. Brandon, A. Nrusimha, K. Qian, Z. Ankner, T. Jin, Z. Song, J. Ragan-Kelley,
   "Striped attention: faster ring attention for causal transformers", arXiv:2311.09431 (2023).
.. [ZIGZAG] Z. Zhu, "ring-flash-attention", https://github.com/zhuzilin/ring-flash-attention
   (2024): ``zigzag_ring_flash_attn``.
.. [LLAMA3] A. Grattafiori et al., "The Llama 3 herd of models", arXiv:2407.21783 (2024),
   section 3.3.2.
"""

from __future__ import annotations

from math import isqrt

import numpy as np

from .._validate import as_count

__all__ = ["LAYOUTS", "chunks", "grid_shape", "group_rows", "group_sizes", "offsets", "rows",
           "shares", "sizes", "usp_shape"]

LAYOUTS = ("contiguous", "striped", "zigzag")


def shares(n: int, parts: int) -> np.ndarray:
    """How ``n`` items are shared by ``parts`` holders: ``n // parts`` each, plus one for the first
    ``n mod parts``. An int64 array of length ``parts`` summing to ``n``."""
    sizes = np.full(parts, n // parts, dtype=np.int64)
    sizes[: n % parts] += 1
    return sizes


def offsets(n: int, parts: int) -> np.ndarray:
    """Where each holder's items start in the contiguous layout (length ``parts + 1``)."""
    return np.concatenate(([0], np.cumsum(shares(n, parts))))


def chunks(p: int, P: int) -> tuple[int, int]:
    """The two chunks (of ``2P``) processor ``p`` holds in the zigzag layout: ``p, 2P - 1 - p``.

    >>> [chunks(p, 4) for p in range(4)]
    [(0, 7), (1, 6), (2, 5), (3, 4)]
    """
    return p, 2 * P - 1 - p


def sizes(N: int, P: int, layout: str = "contiguous") -> np.ndarray:
    """The rows each processor holds in ``layout`` (int64, length ``P``): :func:`shares`
    ``(N, P)``, or for ``"zigzag"`` the sizes of its two chunks added.

    >>> sizes(10, 4).tolist(), sizes(10, 4, "zigzag").tolist()
    ([3, 3, 2, 2], [3, 3, 2, 2])
    >>> sizes(6, 4, "zigzag").tolist()
    [1, 1, 2, 2]
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    if layout != "zigzag":
        return shares(N, P)
    c = shares(N, 2 * P)
    return c[:P] + c[::-1][:P]


def rows(N: int, P: int, layout: str = "contiguous") -> list[np.ndarray]:
    """The global row indices processor ``p`` holds, for every ``p``, in increasing order."""
    if layout == "striped":
        return [np.arange(p, N, P) for p in range(P)]
    if layout == "zigzag":
        o = offsets(N, 2 * P)
        return [np.concatenate([np.arange(o[c], o[c + 1]) for c in chunks(p, P)])
                for p in range(P)]
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


def usp_shape(P: int, heads: int) -> tuple[int, int]:
    """The default ``(P_u, P_r)`` of USP: the largest ``P_u`` dividing ``P`` with ``P_u <= H``
    (the all-to-all within a group moves fewer words than the ring across groups, so as many
    processors share the heads as there are heads for), and ``P_r = P / P_u`` groups in a ring.

    >>> usp_shape(8, 4), usp_shape(8, 16), usp_shape(8, 1), usp_shape(12, 8)
    ((4, 2), (8, 1), (1, 8), (6, 2))
    """
    P, heads = as_count(P, "P"), as_count(heads, "heads")
    P_u = max(c for c in range(1, min(P, heads) + 1) if P % c == 0)
    return P_u, P // P_u


def group_rows(N: int, shape: tuple[int, int]) -> list[np.ndarray]:
    """The rows of every processor when ``P_r`` groups of ``P_u`` (``shape = (P_u, P_r)``,
    ``p = r P_u + u``) hold the zigzag layout across the groups: group ``r`` holds the rows
    :func:`rows` ``(N, P_r, "zigzag")[r]``, and its processor ``u`` the ``u``-th of
    :func:`shares` ``(N_r, P_u)`` consecutive ones of them. No processor holds more than
    ``ceil(N / P)``.

    >>> [r.tolist() for r in group_rows(8, (2, 2))]
    [[0, 1], [6, 7], [2, 3], [4, 5]]
    >>> [r.tolist() for r in group_rows(6, (2, 1))] == [r.tolist() for r in rows(6, 2)]
    True
    """
    P_u, P_r = shape
    out = []
    for block in rows(N, P_r, "zigzag"):
        o = offsets(len(block), P_u)
        out += [block[o[u]:o[u + 1]] for u in range(P_u)]
    return out


def group_sizes(N: int, shape: tuple[int, int]) -> np.ndarray:
    """The lengths of :func:`group_rows` ``(N, shape)`` without listing the rows (int64).

    >>> group_sizes(10, (2, 2)).tolist(), [len(r) for r in group_rows(10, (2, 2))]
    ([3, 2, 3, 2], [3, 2, 3, 2])
    """
    P_u, P_r = shape
    return np.concatenate([shares(int(n), P_u) for n in sizes(N, P_r, "zigzag")])
