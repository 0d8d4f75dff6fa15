"""Lower and upper bounds on the I/O of attention, with explicit constants, and the crossover.

Every function takes ``(N, d, M)`` (entries of cache) and returns an exact ``int``: a lower bound
``L`` means every algorithm of the stated class moves at least ``L`` entries (a real bound ``x``
is rounded up, which stays valid because I/O is an integer); an upper bound ``U`` means that
algorithm moves at most ``U`` (a real bound is rounded down). No float is involved, so a test can
compare them with the exact counts without tolerance.

Lower bounds
------------
- :func:`trivial_lower`: every entry of ``Q, K, V`` is read and every entry of ``O`` written.
- :func:`partition_lower` (standard matrix multiplication, any ``M``, strongest for ``M >= d^2``):
  Hong-Kung's lemma [HK]_ turns a pebbling with I/O ``q`` into a ``2M``-partition with
  ``ceil(q / M)`` parts, so ``q >= M (P(2M) - 1)``. A part holds at most ``(2d - 1)(4M + M^2/d^2)``
  of the ``N^2 (2d - 1)`` products and partial sums of ``Q K^T`` (the argument of [SY]_ Lemma 3.3
  with its constants written out), hence ``q >= M (ceil(N^2 d^2 / (4 M d^2 + M^2)) - 1)``.
- :func:`reduction_lower` (standard matrix multiplication, strongest for ``M < d^2``): an attention
  algorithm that also writes each entry of ``Q K^T`` when it is computed (``N^2`` more writes)
  multiplies ``Q K^T``; a segment of ``M`` I/Os of a matrix product performs at most ``M^{3/2}``
  of its ``N^2 d`` products (Loomis-Whitney), hence ``q >= M (ceil(N^2 d / M^{3/2}) - 1) - N^2``.
  This is [SY]_ Theorem 3.7 with explicit constants, for computations of ``Q K^T`` with the
  standard sums of products (recomputation allowed: the reduction writes each entry of ``Q K^T``
  when it is first computed); [SLLG]_ sharpen the matrix-product constant from 1 to 2.
- :func:`matmul_lower`: the same Loomis-Whitney segment argument for one standard matrix product.
- :func:`any_matmul_lower` (any matrix-multiplication algorithm, fast ones included, over a
  field ``F_q`` with ``q > N``): [SY]_ Theorem 4.8. Splitting the run into epochs of ``M`` I/Os,
  an epoch computes at most ``B = 8 max(M^2/d^2, M)`` entries of ``Q K^T`` by their
  matrix-compression lemma (a message of ``min(d sqrt(B/2), B/4)`` field elements is needed and
  the cache offers ``2M``), hence ``q >= M (ceil(N^2 / B) - 1)``. The lemma's constants are
  [SY]_'s; the epoch count is ours. (What the book proves of it, and for which programs, is in
  :func:`any_matmul_lower`.)

The derivation of each constant is written out in the book's chapters on lower bounds (the
M-partition chapter for :func:`partition_lower`, the small-cache chapter for
:func:`reduction_lower`, the communication chapter for :func:`any_matmul_lower`).

Upper bounds
------------
:func:`upper_bound` gives, for each algorithm, a simple formula that its exact cost never exceeds
(``ceil(x) <= x + 1`` applied to its closed form): FlashAttention ``4Nd + 2N^2 d (2d+4)/(M-4d-3)``
(about ``4 N^2 d^2 / M``, and ``6Nd + 6N + 4 N^2 d (3d+4) / M`` for the FA1 order); square tiling
and standard attention the reads of their two products without ceilings,
``k (m (n / b_c + 1) + n (m / b_r + 1))`` each, plus their other transfers (about
``8 N^2 d / sqrt(M) + N^2`` for blocked square tiling, ``4 N^2 d / sqrt(M) + N^2`` for the outer
schedule, ``4 N^2 d / sqrt(M) + 3 N^2`` for standard attention).

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
.. [SY] B. Saha, C. Ye, "The I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, arXiv:2402.07443 (Theorems 3.1, 3.7, 4.8; Lemma 3.3).
.. [SLLG] T. M. Smith et al., "A tight I/O lower bound for matrix multiplication",
   arXiv:1702.02017.
"""

from __future__ import annotations

from math import floor, isqrt
from typing import NamedTuple

from ._validate import as_count
from .algorithms import get
from .algorithms.base import REGISTRY, ceil_div
from .api import io_cost, plan

__all__ = [
    "Crossover", "any_matmul_lower", "cheapest", "crossovers", "lower_bound", "matmul_lower",
    "order",
    "partition_lower", "reduction_lower", "regime", "trivial_lower", "upper_bound",
]


def _sizes(N, d, M=None):
    out = as_count(N, "N"), as_count(d, "d")
    return out if M is None else (*out, as_count(M, "M"))


def _ceil_sqrt_ratio(a: int, b: int) -> int:
    """Smallest integer ``x >= 0`` with ``x**2 * b >= a``, i.e. ``ceil(sqrt(a / b))``, exactly."""
    q = ceil_div(a, b)
    x = isqrt(q)
    return x if x * x >= q else x + 1


def trivial_lower(N: int, d: int) -> int:
    """``4 N d``: each input entry is read at least once and each output entry written once."""
    N, d = _sizes(N, d)
    return 4 * N * d


def partition_lower(N: int, d: int, M: int) -> int:
    """``M (ceil(N^2 d^2 / (4 M d^2 + M^2)) - 1)``, the M-partition bound (standard matmul).

    See the module docstring; [HK]_ and [SY]_ Lemma 3.3 with explicit constants. About
    ``N^2 d^2 / (5M)`` for ``M >= d^2``.
    """
    N, d, M = _sizes(N, d, M)
    parts = ceil_div(N * N * d * d, 4 * M * d * d + M * M)
    return M * max(0, parts - 1)


def reduction_lower(N: int, d: int, M: int) -> int:
    """``M (ceil(N^2 d / M^{3/2}) - 1) - N^2``, the small-cache bound by reduction to matmul.

    See the module docstring; [SY]_ Theorem 3.7 with explicit constants. About
    ``N^2 d / sqrt(M)`` for ``M`` well below ``d^2``; zero (vacuous) near and above ``d^2``.
    """
    N, d, M = _sizes(N, d, M)
    segments = _ceil_sqrt_ratio(N ** 4 * d * d, M ** 3)
    return max(0, M * (segments - 1) - N * N)


def any_matmul_lower(N: int, d: int, M: int) -> int:
    """``M (ceil(N^2 d^2 / (8 max(M^2, M d^2))) - 1)``: [SY]_ Theorem 4.8, any matrix product.

    About ``min(N^2 d^2 / (8M), N^2 / 8)``. [SY]_ state it over a finite field with more than
    ``N`` elements for every algorithm, fast matrix multiplication included. The book proves it
    for oblivious programs (whose transfers do not depend on the data: Strassen's algorithm and
    every algorithm of this package) over a field with at least ``N`` elements, and for adaptive
    programs over larger fields; for adaptive programs over smaller fields it relies on [SY]_.
    """
    N, d, M = _sizes(N, d, M)
    epochs = ceil_div(N * N * d * d, 8 * max(M * M, M * d * d))
    return M * max(0, epochs - 1)


def matmul_lower(m: int, k: int, n: int, M: int) -> int:
    """``max(mk + kn + mn, M (ceil(mnk / M^{3/2}) - 1))``: a standard ``(m, k) @ (k, n)`` product.

    Every input is read and every output written; and a segment of ``M`` I/Os performs at most
    ``M^{3/2}`` of the ``mnk`` products (Loomis-Whitney; see the module docstring). [SLLG]_ prove
    the sharper leading term ``2 mnk / sqrt(M)``.
    """
    m, k, n, M = (as_count(v, name) for v, name in ((m, "m"), (k, "k"), (n, "n"), (M, "M")))
    segments = _ceil_sqrt_ratio((m * n * k) ** 2, M ** 3)
    return max(m * k + k * n + m * n, M * (segments - 1))


def lower_bound(N: int, d: int, M: int, matmul: str = "standard") -> int:
    """The strongest lower bound here for the class of algorithms named by ``matmul``.

    ``matmul="standard"``: algorithms that compute ``Q K^T`` with the standard sums of products
    (all of ioattn's); ``matmul="any"``: every algorithm (over a large finite field).
    """
    if matmul == "standard":
        return max(trivial_lower(N, d), partition_lower(N, d, M), reduction_lower(N, d, M))
    if matmul == "any":
        return max(trivial_lower(N, d), any_matmul_lower(N, d, M))
    raise ValueError(f"matmul must be 'standard' or 'any', got {matmul!r}")


def upper_bound(name: str, N: int, d: int, M: int, **options) -> int:
    """A simple explicit upper bound on algorithm ``name``'s exact I/O (see the module docstring).

    Raises ``ValueError`` where the algorithm cannot run (``M`` below its minimum).
    """
    N, d, M = _sizes(N, d, M)
    if options.get("block") is not None:
        raise ValueError("upper_bound covers the default block rules, not an explicit block")
    p = plan(name, N, d, M, **options)          # checks the name, options and feasibility
    if name == "flash":
        if p.variant == "fa2":
            return 4 * N * d + (2 * N * N * d * (2 * d + 4)) // (M - 4 * d - 3)
        # ceil(N/B_c) <= N/B_c + 1 and B_c >= M/(4d)
        return 6 * N * d + 6 * N + (4 * d * N * N * (3 * d + 4)) // M
    if name == "square_tiling":
        phases = (p.phase1, p.phase2)
        extra = 2 * N + N * N + N * d                 # m written and read; S and O written
    elif name == "standard":
        phases = (p.scores, p.output)
        extra = (p.passes + 1) * N * N + N * N + N * d  # softmax; S and O written
    else:
        raise ValueError(f"no upper bound is written for {name!r}")
    return extra + floor(sum(q.reads_bound for q in phases))


def order(N: int, d: int, M: int) -> float:
    """``min(N^2 d^2 / M, N^2 d / sqrt(M))``: the Theta-order of [SY]_ Theorem 3.1, no constant."""
    N, d, M = _sizes(N, d, M)
    return min(N * N * d * d / M, N * N * d / M ** 0.5)


def regime(d: int, M: int) -> str:
    """``"large"`` when ``M >= d^2`` (FlashAttention is optimal), else ``"small"``."""
    return "large" if as_count(M, "M") >= as_count(d, "d") ** 2 else "small"


def cheapest(N: int, d: int, M: int, names=None, options=None) -> str | None:
    """The algorithm with the least exact I/O at ``(N, d, M)`` among ``names`` (default: all).

    ``options`` maps a name to its options (e.g. ``{"square_tiling": {"schedule": "outer"}}``).
    Algorithms that cannot run at this ``M`` are left out; ties go to the name first in sort
    order; ``None`` if none can run.
    """
    options = options or {}
    best = None
    for name in sorted(names or REGISTRY):
        algo, opts = get(name), options.get(name, {})
        if M < algo.min_M(d, **{**algo.options, **opts}):
            continue
        total = io_cost(name, N, d, M, **opts).total
        if best is None or total < best[0]:
            best = (total, name)
    return best and best[1]


class Crossover(NamedTuple):
    """At cache size ``M`` the cheapest algorithm is ``after``; at ``M - 1`` it was ``before``."""

    M: int
    before: str | None
    after: str | None


def crossovers(N: int, d: int, M_min: int | None = None, M_max: int | None = None,
               names=None, options=None) -> list[Crossover]:
    """Every ``M`` where the cheapest algorithm changes, found from exact costs.

    The powers of two from ``M_min`` (default: the least ``M`` at which any of ``names`` runs)
    to ``M_max`` (default: ``32 d^2``) are scanned; each change between neighbours is narrowed by
    bisection to an exact ``M`` with a different winner at ``M - 1``. (Costs are step functions of
    ``M``, so between two powers of two a change could in principle be followed by a change back;
    such a pair is not seen.)
    """
    N, d = _sizes(N, d)
    names = sorted(names or REGISTRY)
    options = options or {}
    lo = M_min if M_min is not None else min(
        get(n).min_M(d, **{**get(n).options, **options.get(n, {})}) for n in names)
    hi = M_max if M_max is not None else 32 * d * d
    if not lo < hi:
        return []
    powers = [1 << k for k in range(lo.bit_length(), hi.bit_length() + 1)]
    grid = [lo] + [p for p in powers if lo < p < hi] + [hi]
    found = []
    for a, b in zip(grid, grid[1:]):
        w_a, w_b = cheapest(N, d, a, names, options), cheapest(N, d, b, names, options)
        if w_a == w_b or w_a is None:     # the first algorithm becoming feasible is no crossover
            continue
        while b - a > 1:
            mid = (a + b) // 2
            if cheapest(N, d, mid, names, options) == w_a:
                a = mid
            else:
                b = mid
        found.append(Crossover(b, w_a, cheapest(N, d, b, names, options)))
    return found
