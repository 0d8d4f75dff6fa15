"""Lower bounds on the words a processor must receive to compute attention on ``P`` processors.

All are proved in the chapter on many processors, in the model of :mod:`ioattn.parallel.costs`,
under assumptions that every algorithm of :mod:`ioattn.parallel` meets:

(A) each score ``S_ij = q_i . k_j`` is computed by one processor, at a moment when it holds all
    ``2d`` entries of ``q_i`` and ``k_j``; entries of ``Q`` and ``K`` are stored and moved only
    as themselves (a word that holds one holds nothing else of them), and a processor holds one
    at a moment only if it held it just before or receives it then (or started with it).
(A_V) moreover each term ``P_ij v_j`` is formed by the processor that computes ``S_ij``, at a
    moment when it holds all ``d`` entries of ``v_j``, and entries of ``V`` obey (A) too.

Every score ``(i, j)`` of each head (``Z = N^2`` of them, ``N (N + 1) / 2`` under a causal mask)
is computed somewhere, so some processor computes ``F >= ceil(H Z / P)`` of them; it starts with
at most ``n = ceil(N / P)`` rows of ``Q``, ``K`` and ``V`` of each head.

*Memory-independent* (:func:`memory_independent`). A processor that computes ``F_h`` scores of
head ``h`` has held ``a`` rows of ``q`` and ``b`` rows of ``k`` with ``a b >= F_h`` and received
all but ``n`` of each (this uses only that it held every entry of ``q_i`` and ``k_j`` at some
time): at least ``2d (sqrt(F_h) - n)`` words when ``F_h >= n^2``. Minimised over the ways to
spread ``F`` over ``H`` heads of at most ``Z`` scores each (a sum of functions concave above
``n^2``, so the least is at a vertex: ``k`` whole heads, one partial, the rest at ``n^2``)::

    received >= 2d ( k (sqrt(Z) - n) + sqrt(n^2 + r) - n ),
    E = F - H n^2 > 0,  k = floor(E / (Z - n^2)),  r = E - k (Z - n^2);

for one head, ``2d (sqrt(F) - n) ~ 2dN / sqrt(P)``.

*With the values* (:func:`with_values`, under (A_V)). The processor also holds the ``b`` rows
of ``v``: it receives at least ``d ((a - n)^+ + 2 (b - n)^+) >= d (2 sqrt(2 F_h) - 3n)^+ =
2 sqrt(2) d (sqrt(F_h) - t)^+`` words of head ``h``, with ``t^2 = 9 n^2 / 8``; the same vertex
with ``t`` in place of ``n`` and ``2 sqrt(2) d`` in place of ``2d``. For one head it is about
``2 sqrt(2) dN / sqrt(P)``, ``sqrt(2)`` times the first.

*Own rows under a causal mask* (:func:`own_rows`). A processor starts with the same ``n_p <= n``
rows ``R`` of ``Q`` and of ``K``, and under a causal mask only ``n_p (n_p + 1) / 2`` of the
pairs ``R x R`` are scores (for any set ``R``: each row sees the rows of ``R`` up to itself).
If it computes ``F_h`` scores of head ``h`` from the query rows ``A`` and key rows ``B`` it
held, ``x = |A - R|`` and ``y = |B - R|`` of them received, then those scores lie in
``(A n R) x (B n R)``, in ``(A - R) x B`` or in ``(A n R) x (B - R)``::

    F_h <= n (n + 1) / 2 + x (n + y) + n y = (n + x)(n + y) - c,   c = n (n - 1) / 2

(the right side grows with ``n_p``, so ``n`` may replace it). So ``(n + x)(n + y) >= F_h + c``
and it receives ``d (x + y) >= 2d (sqrt(F_h + c) - n)^+`` words of head ``h``: the first bound
with ``F_h + c`` for ``F_h``. Minimised over the spreads as there (``G_h = F_h + c`` at most
``Z + c``, summing to ``F + H c``)::

    received >= 2d ( k (sqrt(Z + c) - n) + sqrt(n^2 + r) - n ),
    E = F + H c - H n^2,  k = floor(E / (Z + c - n^2)),  r = E - k (Z + c - n^2),

and under (A_V) the bound with the values with ``F_h + c`` likewise. Without a mask ``c = 0``
and these are the first two bounds. For one head at ``P = 2`` it is about ``0.22 dN`` where
the first is about ``d / 2``: the first lets the busiest processor compute ``N^2 / 4`` scores
from its own ``N / 2`` rows, which a causal mask does not allow.

*Memory-dependent* (:func:`memory_dependent`). If the processor never holds more than ``S``
words of its counted memory, and at most ``M`` entries of ``Q`` and ``K`` outside it (in its
cache; ``M = 0`` for a cache that only holds copies of words in the memory), cut its run after
every ``S`` words it receives. In one piece it can use at most ``2S + M`` entries of ``Q`` and
``K`` (``S + M`` held at the start, ``S`` received), hence rows ``a + b <= (2S + M)/d`` and at
most ``((2S + M) / (2d))^2`` scores (also summed over heads). With ``floor(R / S) + 1`` pieces
for ``R`` received words::

    received >= 4 F d^2 S / (2S + M)^2 - S     (F d^2 / S - S when M = 0).

Both kinds are bounds on the words *received* by the busiest processor, so on its traffic too.
They are the analogues for attention of the bounds on matrix multiplication ([ITT04]_,
[BDHLS12]_; with theorem numbers, [COSMA]_ Theorems 1 and 2), whose theorems do not apply
verbatim: there the product is an output held in memory, here the scores are consumed at once.

References
----------
.. [ITT04] D. Irony, S. Toledo, A. Tiskin, "Communication lower bounds for distributed-memory
   matrix multiplication", J. Parallel Distrib. Comput. 64(9):1017-1026 (2004).
.. [BDHLS12] G. Ballard, J. Demmel, O. Holtz, B. Lipshitz, O. Schwartz, "Brief announcement:
   strong scaling of matrix multiplication algorithms and memory-independent communication
   lower bounds", SPAA 2012.
.. [COSMA] G. Kwasniewski et al., "Red-blue pebbling revisited: near optimal parallel
   matrix-matrix multiplication", SC 2019 (arXiv:1908.09606).
"""

from __future__ import annotations

from fractions import Fraction
from math import floor, sqrt

from .._validate import as_count
from ..algorithms.base import ceil_div
from .costs import as_flag

__all__ = ["busiest_scores", "lower_bound", "memory_dependent", "memory_independent", "own_rows",
           "scores", "with_values"]


def scores(N: int, causal: bool = False) -> int:
    """``Z``: the scores of one head, ``N^2``, or ``N (N + 1) / 2`` under a causal mask."""
    N, causal = as_count(N, "N"), as_flag(causal, "causal")
    return N * (N + 1) // 2 if causal else N * N


def busiest_scores(N: int, P: int, heads: int = 1, causal: bool = False) -> int:
    """``F = ceil(H Z / P)``: some processor computes at least this many scores."""
    P, heads = as_count(P, "P"), as_count(heads, "heads")
    return ceil_div(heads * scores(N, causal), P)


def _args(N, d, P, heads, causal):
    N, d, P, H = as_count(N, "N"), as_count(d, "d"), as_count(P, "P"), as_count(heads, "heads")
    if N < P:
        raise ValueError(f"every processor needs at least one row: N = {N} < P = {P}")
    return N, d, P, H, as_flag(causal, "causal")


def _vertex(F: int, H: int, Z: int, t2: Fraction) -> float:
    """``min sum_h (sqrt(x_h) - t)^+`` over reals ``0 <= x_h <= Z`` with ``sum_h x_h >= F``
    (``t^2 = t2``): ``k (sqrt(Z) - t) + sqrt(t^2 + r) - t`` with ``E = F - H t^2``,
    ``k = floor(E / (Z - t^2))``, ``r = E - k (Z - t^2)``; 0 when ``E <= 0`` or ``Z <= t^2``
    (the proof of the chapter's memory-independent bound, which holds for every ``t >= 0``)."""
    E = F - H * t2
    if E <= 0 or Z <= t2:
        return 0.0
    k = floor(E / (Z - t2))
    r = E - k * (Z - t2)
    t = sqrt(t2)
    return k * (sqrt(Z) - t) + sqrt(t2 + r) - t


def memory_independent(N: int, d: int, P: int, *, heads: int = 1, causal: bool = False) -> float:
    """Words the busiest processor receives, whatever its memory, under (A) (module docstring).

    >>> memory_independent(4096, 64, 16)   # 2d (N/4 - N/16)
    98304.0
    >>> memory_independent(4096, 64, 1)
    0.0
    """
    N, d, P, H, causal = _args(N, d, P, heads, causal)
    n = ceil_div(N, P)
    return 2.0 * d * _vertex(busiest_scores(N, P, H, causal), H, scores(N, causal),
                             Fraction(n * n))


def with_values(N: int, d: int, P: int, *, heads: int = 1, causal: bool = False) -> float:
    """Words the busiest processor receives, whatever its memory, under (A) and (A_V): it also
    holds the rows of ``V`` of the keys it uses (module docstring). For one head
    ``d (2 sqrt(2F) - 3n)``.

    >>> with_values(4096, 64, 16) == 64 * (2 * (2 * 4096**2 / 16) ** 0.5 - 3 * 256)
    True
    """
    N, d, P, H, causal = _args(N, d, P, heads, causal)
    n = ceil_div(N, P)
    return 2.0 * sqrt(2.0) * d * _vertex(busiest_scores(N, P, H, causal), H, scores(N, causal),
                                         Fraction(9 * n * n, 8))


def own_rows(N: int, d: int, P: int, *, heads: int = 1, causal: bool = False,
             values: bool = False) -> float:
    """Words the busiest processor receives, whatever its memory, counting that a causal mask
    leaves only ``n (n + 1) / 2`` scores among the ``n`` rows it starts with (module
    docstring): :func:`memory_independent` (with ``values``, :func:`with_values`) with
    ``F + H c`` and ``Z + c`` for ``F`` and ``Z``, ``c = n (n - 1) / 2``; without a mask those
    bounds themselves.

    >>> own_rows(4096, 64, 2, causal=True) > 0.22 * 64 * 4096 > memory_independent(
    ...     4096, 64, 2, causal=True)
    True
    >>> own_rows(4096, 64, 16) == memory_independent(4096, 64, 16)
    True
    """
    N, d, P, H, causal = _args(N, d, P, heads, causal)
    values = as_flag(values, "values")
    n = ceil_div(N, P)
    c = n * (n - 1) // 2 if causal else 0
    F, Z = busiest_scores(N, P, H, causal) + H * c, scores(N, causal) + c
    if values:
        return 2.0 * sqrt(2.0) * d * _vertex(F, H, Z, Fraction(9 * n * n, 8))
    return 2.0 * d * _vertex(F, H, Z, Fraction(n * n))


def memory_dependent(N: int, d: int, P: int, S: int, *, M: int = 0, heads: int = 1,
                     causal: bool = False) -> float:
    """Words the busiest processor receives when no processor holds more than ``S`` words of
    its memory and ``M`` entries of ``Q`` and ``K`` outside it (module docstring):
    ``4 F d^2 S / (2S + M)^2 - S``, ``F d^2 / S - S`` at ``M = 0``, or 0 when negative.

    >>> memory_dependent(4096, 64, 16, S=2 * 64 * 256)   # (N^2/16) d^2 / S - S
    98304.0
    """
    N, d, P, H, causal = _args(N, d, P, heads, causal)
    S, M = as_count(S, "S"), as_count(M, "M", least=0)
    F = busiest_scores(N, P, H, causal)
    return max(0.0, float(Fraction(4 * F * d * d * S, (2 * S + M) ** 2) - S))


def lower_bound(N: int, d: int, P: int, S: int | None = None, *, M: int = 0, heads: int = 1,
                causal: bool = False, values: bool = False) -> float:
    """The largest of the bounds that apply: :func:`memory_independent` and :func:`own_rows`,
    with ``values`` also :func:`with_values` and :func:`own_rows` with the values (under
    (A_V)), and :func:`memory_dependent` when ``S`` is given."""
    values = as_flag(values, "values")
    bound = max(memory_independent(N, d, P, heads=heads, causal=causal),
                own_rows(N, d, P, heads=heads, causal=causal))
    if values:
        bound = max(bound, with_values(N, d, P, heads=heads, causal=causal),
                    own_rows(N, d, P, heads=heads, causal=causal, values=True))
    if S is not None:
        bound = max(bound, memory_dependent(N, d, P, S, M=M, heads=heads, causal=causal))
    return bound
