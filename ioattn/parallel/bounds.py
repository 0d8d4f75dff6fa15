"""Lower bounds on the words a processor must receive to compute attention on ``P`` processors.

Both bounds are proved in the chapter on many processors, in the model of
:mod:`ioattn.parallel.costs` and under one assumption that every algorithm of
:mod:`ioattn.parallel` meets:

(A) each score ``S_ij = q_i . k_j`` is computed by one processor, at a moment when it holds all
    ``2d`` entries of ``q_i`` and ``k_j``.

Every score ``(i, j)`` of each head (``Z = N^2`` of them, ``N (N + 1) / 2`` under a causal mask)
is computed somewhere, so some processor computes ``F >= ceil(H Z / P)`` of them; it starts with
at most ``n = ceil(N / P)`` rows of ``Q`` and of ``K`` of each head.

*Memory-independent* (:func:`memory_independent`). A processor that computes ``F_h`` scores of
head ``h`` has held ``a`` rows of ``q`` and ``b`` rows of ``k`` with ``a b >= F_h``, and received
all but ``n`` of each: at least ``2d (sqrt(F_h) - n)`` words when ``F_h >= n^2``. Minimised over
the ways to spread ``F`` over ``H`` heads of at most ``Z`` scores each (a sum of functions concave
above ``n^2``, so the least is at a vertex: ``k`` whole heads, one partial, the rest at ``n^2``)::

    received >= 2d ( k (sqrt(Z) - n) + sqrt(n^2 + r) - n ),
    E = F - H n^2 > 0,  k = floor(E / (Z - n^2)),  r = E - k (Z - n^2);

for one head, ``2d (sqrt(F) - n) ~ 2dN / sqrt(P)``. It is the analogue, for the product ``Q K^T``
with its inner dimension ``d`` never split, of the memory-independent bounds for matrix
multiplication [BDHLS12]_.

*Memory-dependent* (:func:`memory_dependent`). If the processor never holds more than ``S``
words, cut its run after every ``S`` words it receives. In one piece it can use at most ``2S``
entries of ``Q`` and ``K`` (``S`` held at the start, ``S`` received), hence rows ``a + b <= 2S/d``
and at most ``(S/d)^2`` scores (also summed over heads). With ``floor(R / S) + 1`` pieces for ``R``
received words::

    received >= F d^2 / S - S,

the analogue of the memory-dependent bound of [ITT04]_ for matrix multiplication (and of Hong and
Kung's argument for one cache).

Both are bounds on the words *received* by the busiest processor, so on its traffic too.

References
----------
.. [ITT04] D. Irony, S. Toledo, A. Tiskin, "Communication lower bounds for distributed-memory
   matrix multiplication", J. Parallel Distrib. Comput. 64(9):1017-1026 (2004).
.. [BDHLS12] G. Ballard, J. Demmel, O. Holtz, B. Lipshitz, O. Schwartz, "Brief announcement:
   strong scaling of matrix multiplication algorithms and memory-independent communication
   lower bounds", SPAA 2012.
"""

from __future__ import annotations

from math import sqrt

from .._validate import as_count
from ..algorithms.base import ceil_div

__all__ = ["busiest_scores", "lower_bound", "memory_dependent", "memory_independent", "scores"]


def scores(N: int, causal: bool = False) -> int:
    """``Z``: the scores of one head, ``N^2``, or ``N (N + 1) / 2`` under a causal mask."""
    return N * (N + 1) // 2 if causal else N * N


def busiest_scores(N: int, P: int, heads: int = 1, causal: bool = False) -> int:
    """``F = ceil(H Z / P)``: some processor computes at least this many scores."""
    return ceil_div(heads * scores(N, causal), P)


def _args(N, d, P, heads):
    return as_count(N, "N"), as_count(d, "d"), as_count(P, "P"), as_count(heads, "heads")


def memory_independent(N: int, d: int, P: int, *, heads: int = 1, causal: bool = False) -> float:
    """Words the busiest processor receives, whatever its memory (module docstring).

    >>> memory_independent(4096, 64, 16)   # 2d (N/4 - N/16)
    98304.0
    >>> memory_independent(4096, 64, 1)
    0.0
    """
    N, d, P, H = _args(N, d, P, heads)
    n = ceil_div(N, P)
    Z = scores(N, causal)
    E = busiest_scores(N, P, H, causal) - H * n * n
    if E <= 0 or Z <= n * n:
        return 0.0
    k, r = divmod(E, Z - n * n)
    return 2.0 * d * (k * (sqrt(Z) - n) + sqrt(n * n + r) - n)


def memory_dependent(N: int, d: int, P: int, S: int, *, heads: int = 1,
                     causal: bool = False) -> float:
    """Words the busiest processor receives when no processor holds more than ``S`` words
    (module docstring): ``F d^2 / S - S``, or 0 when that is negative.

    >>> memory_dependent(4096, 64, 16, S=2 * 64 * 256)   # (N^2/16) d^2 / S - S
    98304.0
    """
    N, d, P, H = _args(N, d, P, heads)
    S = as_count(S, "S")
    return max(0.0, busiest_scores(N, P, H, causal) * d * d / S - S)


def lower_bound(N: int, d: int, P: int, S: int | None = None, *, heads: int = 1,
                causal: bool = False) -> float:
    """The larger of the two bounds (only the memory-independent one when ``S`` is None)."""
    bound = memory_independent(N, d, P, heads=heads, causal=causal)
    if S is not None:
        bound = max(bound, memory_dependent(N, d, P, S, heads=heads, causal=causal))
    return bound
