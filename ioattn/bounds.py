"""Lower and upper bounds on the I/O of attention, with explicit constants, and the crossover.

Every function takes ``(N, d, M)`` and returns an exact ``int``: a lower bound ``L`` means every
computation of the stated class moves at least ``L`` entries (a real bound ``x`` is rounded up,
which stays valid because I/O is an integer); an upper bound ``U`` means that algorithm moves at
most ``U`` (a real bound is rounded down). No float is involved, so a test can compare them with
the exact counts without tolerance. ``backward=True`` gives the same bound for the backward pass
(its inputs ``Q, K, V, dO, O, L``, its outputs ``dQ, dK, dV``; see "Backward pass" below); the
``sparse_*`` functions give them for attention that computes only ``Z`` entries of ``Q K^T``
(see "Sparse attention"). Theorem numbers of [SY]_ are those of arXiv:2402.07443v1.

Games and programs
------------------
The partition, reduction and sparse bounds (and the backward ones) bound ``Q(G, M)``, the least
I/O of a red-blue pebble game on a graph ``G`` of the stated class with ``M`` red pebbles
[HK]_. A *program* with a cache of ``M`` entries, each step computing one value from at most two
values in the cache (a multiply-add counted as a product then a sum), is a game with at most
``M + EXTRA_PEBBLES`` red pebbles on its own computation graph: the new value needs a pebble
before the entry it overwrites is freed, and a multiply-add's product one more (the book's
pebble-game chapter proves it; :func:`ioattn.pebble.play_schedule` replays every algorithm of
ioattn as such a game). So a game bound holds for programs at ``M + 2``: that is what
``program=True`` evaluates (:func:`lower_bound`, :func:`sparse_lower`), and what the CLI, the
explorer and the book's figures draw next to the algorithms' counted I/O. The trivial bounds
hold for both unchanged. Every true lower bound is non-increasing in ``M`` (more pebbles, or a
larger cache, never hurt), but the formulas below are not: :func:`partition_lower` is a
sawtooth, growing with ``M`` wherever its number of parts stays the same (at ``N = 4096,
d = 64`` its value at ``M + 2`` exceeds its value at ``M`` for most ``M`` up to ``32 d^2``). A
curve drawn over ``M`` uses :func:`envelope`, the running maximum from the right.

Lower bounds
------------
- :func:`trivial_lower`: every entry of ``Q, K, V`` is read and every entry of ``O`` written
  (for every computation that forms every score; at ``N = 1`` no ``Q K^T`` product is needed at
  all, the lone weight being 1).

Each of the three forward bounds also takes ``N_k``: rectangular attention, ``N`` query rows
against ``N_k`` keys (a decoding step, a chunk of a prefill, the verification of speculated
tokens). The trivial bound becomes ``2 N d + 2 N_k d``; the partition and reduction arguments
count trees and multiplications whatever the rows, so they hold with ``N N_k`` trees in place
of ``N^2`` (see each function).
- :func:`partition_lower` (standard matrix multiplication, any ``M``, strongest for ``M >= d^2``):
  Hong-Kung's lemma [HK]_ turns a game with I/O ``q`` into a ``2M``-partition with
  ``ceil(q / M)`` parts, so ``q >= M (P(2M) - 1)``. A part holds at most ``(2d - 1)(4M + M^2/d^2)``
  of the ``N^2 (2d - 1)`` products and partial sums of ``Q K^T`` (the argument of [SY]_ Lemma 3.3,
  sharpened by AM-GM, and counted for the ``2M``-partition that Hong-Kung's lemma gives where
  [SY]_ write ``M``), hence ``q >= M (ceil(N^2 d^2 / (4 M d^2 + M^2)) - 1)``.
- :func:`reduction_lower` (standard matrix multiplication, strongest for ``M < d^2``): a game
  that also writes each entry of ``Q K^T`` when it is first computed (``N^2`` more writes) is a
  complete game for ``Q K^T``; a segment of ``M`` I/Os of a matrix product performs at most
  ``M^{3/2}`` of its ``N^2 d`` products (Loomis-Whitney), hence
  ``q >= M (ceil(N^2 d / M^{3/2}) - 1) - N^2``. This is [SY]_ Theorem 3.7 with explicit
  constants, for graphs in which every score is a standard sum of products (recomputation
  allowed) whose factors are input entries or one-parent chains from them, such as
  ``Q_il -> tau Q_il``: a product charges its pair ``(i, l)`` to the vertex of that chain that is
  red at the segment's start or read in it, and the chains are disjoint, so the count of the
  segment argument is unchanged (the book's small-cache chapter). FlashAttention, which folds
  ``tau`` into ``Q_i`` (and, backward, into ``K_j``), is of this class, as are all of ioattn's
  algorithms. [SLLG]_ sharpen the matrix-product constant from 1 to 2.
- :func:`matmul_lower`: the same Loomis-Whitney segment argument for one standard matrix product.
- :func:`any_matmul_lower` (any matrix-multiplication algorithm, fast ones included, over a
  field ``F_q`` with ``q > N``, computing ``Q K^T`` explicitly): [SY]_ Theorem 4.8. Splitting the
  run into epochs of ``M`` I/Os ([SY]_ Lemma 4.1, which is Theorem 3 of [PSi]_), an epoch computes
  at most ``B = 8 max(M^2/d^2, M)`` entries of ``Q K^T`` by their matrix-compression lemma (a
  message of ``min(d sqrt(B/2), B/4)`` field elements is needed and the cache offers ``2M``),
  hence ``q >= M (ceil(N^2 / B) - 1)``. The lemma's constants are [SY]_'s; the exact division
  into epochs of ``M`` and the resulting constant are the book's. (What the book proves of it,
  and for which programs, is in :func:`any_matmul_lower`: the compression theorem's ``N >= d``
  is needed only for adaptive programs.)

The derivation of each constant is written out in the book's chapters on lower bounds (the
M-partition chapter for :func:`partition_lower`, the small-cache chapter for
:func:`reduction_lower`, the communication chapter for :func:`any_matmul_lower`).

Backward pass
-------------
The backward pass of ``O = softmax(tau Q K^T) V`` takes ``Q, K, V`` (``N x d``), the upstream
gradient ``dO`` (``N x d``) and what the forward saved, ``O`` (``N x d``) and the row
log-sum-exp ``L`` (``N``), and produces ``dQ, dK, dV`` (``N x d`` each), through

    P = exp(tau Q K^T - L),  dV = P^T dO,  dP = dO V^T,  D = rowsum(dO o O),
    dS = P o (dP - D),  dQ = tau dS K,  dK = tau dS^T Q.

*Standard matrix multiplication* means here that the computation graph contains, for every pair
``(i, j)``, the standard sum-of-products tree of ``S_ij = sum_l Q_il K_jl`` (to rebuild ``P``)
**and** that of ``dP_ij = sum_l dO_il V_jl``: ``d`` product vertices whose parents are the two
input entries or one-parent chains from them (such as ``tau K_jl``), ``d - 1`` additions in any
binary tree, and no use of a product or partial sum outside its tree (the root may be used by
anything). Every backward pass of ioattn is of this kind. The two families of trees are disjoint
and have disjoint input rows (``Q, K`` and ``dO, V``), which is all the arguments below need;
both forward arguments therefore count ``2 N^2`` trees instead of ``N^2``:

- :func:`partition_lower` with ``backward=True`` is ``M (ceil(2 N^2 d^2 / (4 M d^2 + M^2)) - 1)``.
  Hong-Kung's lemma is unchanged. In [SY]_ Lemma 3.3, trees that meet a part ``U`` with dominator
  set ``D`` and minimum set ``X`` are of kind (a) (a vertex in ``D``), (b) (a vertex in ``X``) or
  (c); kinds (a) and (b) number at most ``|D| + |X|`` over both families. A tree of kind (c) has
  its root in ``U`` and, for each of its ``2d`` input entries, that entry or a vertex of its
  one-parent chain in ``D`` (distinct vertices for distinct entries). If the kind-(c) trees
  of ``Q K^T`` use ``a`` rows of ``Q`` and ``K`` together and those of ``dO V^T`` use ``b`` rows
  of ``dO`` and ``V``, then ``d (a + b) <= |D|``, and there are at most
  ``a^2/4 + b^2/4 <= (a + b)^2 / 4 <= |D|^2 / (4 d^2)`` of them. So a part of a ``2M``-partition
  still holds at most ``(2d - 1)(4M + M^2/d^2)`` level-1 vertices, now out of ``2 N^2 (2d - 1)``.
- :func:`reduction_lower` with ``backward=True`` is ``M (ceil(2 N^2 d / M^{3/2}) - 1) - 2 N^2``.
  Delete every move outside the trees of ``S`` and ``dP`` (with their input parents and chains:
  the subgraph contains the parents of its vertices) and write each ``S_ij`` and each ``dP_ij``
  after its first compute (``2 N^2`` writes): a complete game on the disjoint union of the graphs
  of the products ``Q K^T`` and ``dO V^T``, ``2 N^2 d`` multiplications. In the segment argument
  of :func:`matmul_lower`, the charges of the two products go to distinct vertices, so their
  projection sizes ``x_1, x_2`` satisfy ``x_1 + x_2 <= 3M``; each product performs at most
  ``(x_f / 3)^{3/2}`` multiplications in the segment (Loomis-Whitney and AM-GM), and
  ``t -> t^{3/2}`` is superadditive, so a segment performs at most ``M^{3/2}`` of them in all.
- :func:`trivial_lower` with ``backward=True`` is ``8 N d + N``: each of the ``5 N d + N`` input
  entries is an ancestor of an output (``O`` through ``D``, ``L`` through ``P``) and is read;
  each of the ``3 N d`` output entries is written. With ``given_D=True`` (``D`` is an input and
  ``O`` is not used) it is ``7 N d + 2 N``.
- :func:`any_matmul_lower` applies unchanged to a backward program that forms every score
  ``S_ij`` in its cache (announces it, in the book's model), as the algorithms of ioattn do on
  their way to ``P``: the theorem concerns any program that computes ``Q K^T``, whatever else it
  computes, with the other inputs held fixed. No backward-specific strengthening is claimed.

(The forward functions, ``backward=False``, also bound the backward pass of any graph that
computes ``Q K^T`` alone with standard sums of products, since they use only that subgraph; the
``backward=True`` forms need the ``dO V^T`` trees too.) [LLSS]_ state the backward's I/O
complexity as ``Theta(min{(N^2 d^2 + N d^3)/M, (N^2 d + N d^2)/sqrt(M)})`` for standard matrix
multiplication: their Theorem 1.1 (arXiv v1), known here only from secondary sources (it is not
in their abstract); :func:`order` with ``backward=True`` adds the trivial ``N d`` and is stated
for ``N >= d`` only: for ``N < d`` the backward passes here move less than that order. The
constants here are the book's.

Sparse attention
----------------
When only a set ``Z`` of pairs ``(i, j)`` of ``Q K^T`` is computed (a mask; ``Z`` also stands for
its size), the graph holds ``Z`` trees of ``S`` (and ``Z`` of ``dP`` in the backward pass) and
the same arguments apply with ``N^2`` replaced by the number of trees. The output is, by
convention, the whole ``N x d`` matrix ``O`` (``dQ, dK, dV`` backward): every entry is written,
a row with nothing to attend to as zeros, as every algorithm of ioattn does.

- :func:`sparse_partition_lower` ``= M (ceil(t d^2 / (4 M d^2 + M^2)) - 1)``, ``t = Z`` (``2Z``
  backward). [SY]_ Lemma 3.3 (with the two-family count above, backward) needs no change: it
  bounds the level-1 vertices of one part whichever trees the graph has, and there are
  ``t (2d - 1)`` of them.
- :func:`sparse_reduction_lower` ``= M (ceil(t d / M^{3/2}) - 1) - t``: the segment argument
  holds for any set of multiplication triples (Loomis-Whitney bounds every finite set), ``t d``
  of them, and the reduction writes ``t`` scores.
- :func:`sparse_trivial_lower`: the output's writes, and the reads of the input rows the
  computed scores use. With ``I`` the rows and ``J`` the columns that hold a pair of ``Z``,
  ``|I| |J| >= Z`` and ``|I|, |J| <= N``, so ``|I| + |J| >= ceil(2 sqrt(Z))`` and
  ``|I|, |J| >= ceil(Z / N)``. Forward: ``N d`` writes of ``O``, rows ``I`` of ``Q`` and rows
  ``J`` of ``K`` and ``V`` read: ``N d + d |I| + 2d |J|``. Backward: ``3 N d`` writes of ``dQ,
  dK, dV``, rows ``I`` of ``Q, dO, O`` and ``L`` and rows ``J`` of ``K, V`` read:
  ``3 N d + (3d + 1) |I| + 2d |J|``.

At ``Z = N^2`` each equals its dense counterpart exactly. For a block mask,
:func:`block_sparse_Z` counts ``Z``; when the block sides divide ``N``, ``Z = s N^2`` with ``s``
the fraction of nonzero blocks (:func:`block_density`), so the bounds are about
``N d + s N^2 d^2 / (5M)`` for ``M >= d^2`` (block-sparse FlashAttention moves
``Theta(N d + s N^2 d^2 / M)`` [FA]_ Proposition 4) and ``N d + s N^2 d / sqrt(M)`` for ``M``
well below ``d^2``. These sparse bounds are the book's (derived here, not taken from [LLSS]_).

Upper bounds
------------
:func:`upper_bound` gives, for each algorithm, a simple formula that its exact cost never exceeds
(``ceil(x) <= x + 1`` applied to its closed form): FlashAttention ``4Nd + 2N^2 d (2d+4)/(M-4d-3)``
(about ``4 N^2 d^2 / M``, and ``6Nd + 6N + 4 N^2 d (3d+4) / M`` for the FA1 order); square tiling
and standard attention the reads of their two products without ceilings,
``k (m (n / b_c + 1) + n (m / b_r + 1))`` each, plus their other transfers (about
``8 N^2 d / sqrt(M) + N^2`` for blocked square tiling, ``4 N^2 d / sqrt(M) + N^2`` for the outer
schedule, ``4 N^2 d / sqrt(M) + 3 N^2`` for standard attention). With ``backward=True``:
FlashAttention's backward ``9Nd + 3N + N^2 (4d+2)^2 / (M-7d-3)`` (about ``16 N^2 d^2 / M``);
square tiling's and standard attention's backward the reads of their five products without
ceilings plus their other transfers (about ``20 N^2 d / sqrt(M)`` for blocked square tiling,
``10 N^2 d / sqrt(M)`` for the outer schedule and for standard attention, plus ``O(N^2)``).

The crossover
-------------
:func:`cheapest` names the algorithm with the least exact I/O at one ``M``; :func:`crossovers`
lists **every** integer ``M`` in a range where that changes. Costs are step functions of ``M``
and the winner can change back (at ``N = 4096, d = 64``, outer schedule, FlashAttention is
cheapest from ``M = 3032``, square tiling again on ``[3078, 3163]``), so the whole range is
scanned: each algorithm's plan is computed for every ``M`` of a piece of the range at once from
its block-size rule on arrays (:func:`ioattn.api.totals`), which is the rule :func:`ioattn.plan`
applies to one ``M``; a range of more than ``MAX_RANGE`` values is refused.

References
----------
.. [HK] J.-W. Hong, H. T. Kung, "I/O complexity: the red-blue pebble game", STOC 1981.
.. [SY] B. Saha, C. Ye, "I/O complexity of attention, or how optimal is FlashAttention?",
   ICML 2024, PMLR 235:43024-43042; arXiv:2402.07443v1 ("The I/O complexity of attention, or
   how optimal is Flash Attention?"), whose numbering is used (Theorems 3.1, 3.7, 4.8;
   Lemmas 3.3, 4.1).
.. [PSi] R. Pagh, F. Silvestri, "The input/output complexity of triangle enumeration", PODS 2014
   (Theorem 3: the epochs of ``M`` I/Os).
.. [SLLG] T. M. Smith et al., "A tight I/O lower bound for matrix multiplication",
   arXiv:1702.02017.
.. [LLSS] X. Li, Y. Liang, Z. Shi, Z. Song et al., "On fine-grained I/O complexity of attention
   backward passes", arXiv:2410.09397 (title and authors of v2, January 2026; the theorem
   numbering quoted is that of v1, October 2024, "Fine-grained attention I/O complexity:
   comprehensive analysis for backward passes", by X. Li, Y. Liang, Z. Shi, Z. Song, Y. Zhou).
.. [FA] T. Dao et al., "FlashAttention", NeurIPS 2022 (Proposition 4: block-sparse FlashAttention).
"""

from __future__ import annotations

from fractions import Fraction
from math import floor, isqrt
from typing import NamedTuple

import numpy as np

from ._validate import as_count, as_flag
from .algorithms import get
from .algorithms.base import BACKWARD, REGISTRY, ceil_div
from .api import io_cost, plan, totals
from .masks import Mask

__all__ = [
    "EXTRA_PEBBLES", "Crossover", "any_matmul_lower", "block_density", "block_sparse_Z",
    "cheapest", "crossovers", "decoding_lower", "envelope", "grouped_lower",
    "grouped_trivial_lower", "lower_bound", "lower_curve",
    "matmul_lower", "order", "partition_lower", "reduction_lower", "regime",
    "sparse_lower", "sparse_partition_lower", "sparse_reduction_lower", "sparse_trivial_lower",
    "trivial_lower", "upper_bound",
]


#: Red pebbles a program with an ``M``-entry cache may need beyond ``M`` when played as a game:
#: one for a new value before the entry it overwrites is freed, one for a multiply-add's product.
EXTRA_PEBBLES = 2


def _sizes(N, d, M=None):
    out = as_count(N, "N"), as_count(d, "d")
    return out if M is None else (*out, as_count(M, "M"))


def _keys(N: int, N_k, backward: bool) -> int:
    """``N_k`` checked (``N`` when None); rectangular bounds are stated for the forward only."""
    if N_k is None:
        return N
    N_k = as_count(N_k, "N_k")
    if backward and N_k != N:
        raise ValueError("N_k (rectangular attention) is given for the forward pass only: the "
                         "backward bounds are stated for N x N attention")
    return N_k


def _Z(N: int, Z) -> int:
    Z = as_count(Z, "Z", least=0)
    if Z > N * N:
        raise ValueError(f"Z counts computed entries of the N x N matrix Q K^T, so Z <= N^2 = "
                         f"{N * N}; got Z = {Z}")
    return Z


def _ceil_sqrt_ratio(a: int, b: int) -> int:
    """Smallest integer ``x >= 0`` with ``x**2 * b >= a``, i.e. ``ceil(sqrt(a / b))``, exactly."""
    q = ceil_div(a, b)
    x = isqrt(q)
    return x if x * x >= q else x + 1


# ------------------------------------------------------------------------ the two arguments
def _partition(trees: int, d: int, M: int) -> int:
    """``M (ceil(t d^2 / (4 M d^2 + M^2)) - 1)`` for a graph with ``t`` standard-sum trees of
    ``d`` products each (the level-1 vertices of [SY]_ Lemma 3.3)."""
    parts = ceil_div(trees * d * d, 4 * M * d * d + M * M)
    return M * max(0, parts - 1)


def _reduction(trees: int, d: int, M: int) -> int:
    """``M (ceil(t d / M^{3/2}) - 1) - t``: ``t`` trees written once each, ``t d``
    multiplications, at most ``M^{3/2}`` per segment of ``M`` I/Os."""
    segments = _ceil_sqrt_ratio((trees * d) ** 2, M ** 3)
    return max(0, M * (segments - 1) - trees)


def _rows(a: int, b: int, N: int, Z: int) -> int:
    """Least value of ``a |I| + b |J|`` we can prove when ``Z`` pairs lie in ``I x J`` and
    ``|I|, |J| <= N``: ``min(a, b) ceil(2 sqrt(Z)) + |a - b| ceil(Z / N)``."""
    return min(a, b) * _ceil_sqrt_ratio(4 * Z, 1) + abs(a - b) * ceil_div(Z, N)


# ------------------------------------------------------------------------ dense lower bounds
def trivial_lower(N: int, d: int, *, N_k: int | None = None, backward: bool = False,
                  given_D: bool = False) -> int:
    """Every input entry is read and every output entry written (for every computation that
    forms every score, game or program).

    Forward, ``4 N d``: ``Q, K, V`` read, ``O`` written. Rectangular (``N_k``, forward only:
    ``N`` query rows against ``N_k`` keys), ``2 N d + 2 N_k d``: ``Q`` (``N d``), ``K`` and
    ``V`` (``N_k d`` each) read, ``O`` (``N d``) written; for a decoding step (``N = 1``) this is
    reading the cache once, ``2 N_k d``, and the query and output rows. As for ``N = 1`` in
    the square case, it needs every score to be formed: at ``N_k = 1`` the lone weight is 1,
    ``O`` is ``V`` repeated and a program need read neither ``Q`` nor ``K``.

    With ``backward=True``, ``8 N d + N``:
    ``Q, K, V, dO, O`` (``5 N d``) and ``L`` (``N``) read, ``dQ, dK, dV`` (``3 N d``) written;
    each input is an ancestor of an output of the backward graph (``O`` through
    ``D = rowsum(dO o O)``, ``L`` through ``P``), and in a pebble game an input gets a red pebble
    only by a read and an output its blue pebble only by a write. With ``given_D=True``, the
    backward takes ``D`` (``N`` entries) as an input instead of computing it from ``O``:
    ``7 N d + 2 N``.
    """
    N, d = _sizes(N, d)
    if as_flag(given_D, "given_D") and not as_flag(backward, "backward"):
        raise ValueError("given_D concerns the backward pass: pass backward=True")
    N_k = _keys(N, N_k, backward)
    if not backward:
        return 2 * N * d + 2 * N_k * d
    return 7 * N * d + 2 * N if given_D else 8 * N * d + N


def partition_lower(N: int, d: int, M: int, *, N_k: int | None = None,
                    backward: bool = False) -> int:
    """The M-partition bound (standard matmul): ``M (ceil(t d^2 / (4 M d^2 + M^2)) - 1)`` with
    ``t = N^2`` trees (forward) or ``t = 2 N^2`` (``backward=True``: the trees of ``Q K^T`` and
    of ``dO V^T``).

    It bounds ``Q(G, M)``, games with ``M`` red pebbles; for a program with an ``M``-entry
    cache, evaluate it at ``M + EXTRA_PEBBLES`` (:func:`lower_bound` with ``program=True``).

    See the module docstring; [HK]_ and [SY]_ Lemma 3.3 with explicit constants. About
    ``N^2 d^2 / (5M)`` for ``M >= d^2`` (``2 N^2 d^2 / (5M)`` backward).

    Rectangular (``N_k``, forward only): ``t = N N_k`` trees, one for each score of the
    ``N x N_k`` matrix ``Q K^T``. The part bound of [SY]_ Lemma 3.3 counts the level-1
    vertices of any set of standard-sum trees (kind (c) trees use ``a`` rows of ``Q`` and ``b``
    of ``K`` with ``d (a + b) <= |D|``, at most ``a b <= |D|^2 / (4 d^2)`` of them, whatever
    ``N`` and ``N_k`` are), so only the number of trees changes, as for
    :func:`sparse_partition_lower`.
    """
    N, d, M = _sizes(N, d, M)
    backward = as_flag(backward, "backward")
    N_k = _keys(N, N_k, backward)
    return _partition((2 if backward else 1) * N * N_k, d, M)


def reduction_lower(N: int, d: int, M: int, *, N_k: int | None = None,
                    backward: bool = False) -> int:
    """The small-cache bound by reduction to matmul: ``M (ceil(t d / M^{3/2}) - 1) - t`` with
    ``t = N^2`` (forward) or ``t = 2 N^2`` (``backward=True``: ``Q K^T`` and ``dO V^T``).

    It bounds ``Q(G, M)``, games with ``M`` red pebbles on graphs whose scores are standard sums
    of products of input entries or of one-parent chains from them (FlashAttention's ``tau Q_il``
    included); for a program, evaluate it at ``M + EXTRA_PEBBLES``. See the module docstring;
    [SY]_ Theorem 3.7 with explicit constants. About
    ``N^2 d / sqrt(M)`` for ``M`` well below ``d^2`` (``2 N^2 d / sqrt(M)`` backward); zero
    (vacuous) near and above ``d^2``.

    Rectangular (``N_k``, forward only): ``t = N N_k``. Writing each of the ``N N_k`` scores
    once makes a complete game for the ``(N, d) @ (d, N_k)`` product, ``N N_k d``
    multiplications, and the segment argument (Loomis-Whitney) bounds any set of
    multiplication triples, so only ``t`` changes, as for :func:`sparse_reduction_lower`.
    """
    N, d, M = _sizes(N, d, M)
    backward = as_flag(backward, "backward")
    N_k = _keys(N, N_k, backward)
    return _reduction((2 if backward else 1) * N * N_k, d, M)


def any_matmul_lower(N: int, d: int, M: int) -> int:
    """``M (ceil(N^2 d^2 / (8 max(M^2, M d^2))) - 1)``: [SY]_ Theorem 4.8, any matrix product.

    About ``min(N^2 d^2 / (8M), N^2 / 8)``. [SY]_ state it over a finite field with more than
    ``N`` elements for every algorithm that computes ``Q K^T`` explicitly, fast matrix
    multiplication included. It bounds programs with an ``M``-entry cache directly (the epochs
    count cache entries, not pebbles). The book proves it for oblivious programs (whose
    transfers do not depend on the data: Strassen's algorithm and every algorithm of this
    package) over a field with at least ``N`` elements. For adaptive programs (whose steps may
    depend on the data) it proves, when ``N >= d`` and over fields with at least
    ``binom(N, d) + 3`` elements, the same bound with ``M + ceil(log_q T)`` in place of ``M``
    inside the epoch count (``T`` the length of the longest run), which this function does not
    evaluate; with ``M`` itself, for adaptive programs, it relies on [SY]_. It bounds every
    program that computes (announces) each entry of ``Q K^T``, whatever else it computes, so it
    holds for the backward pass as well when the backward forms every score in its cache, as
    ioattn's do.
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


def _check_matmul(matmul):
    if matmul not in ("standard", "any"):
        raise ValueError(f"matmul must be 'standard' or 'any', got {matmul!r}")


def lower_bound(N: int, d: int, M: int, matmul: str = "standard", *, N_k: int | None = None,
                backward: bool = False, program: bool = False) -> int:
    """The strongest lower bound here for the class of computations named by ``matmul``.

    ``matmul="standard"``: computations of ``Q K^T`` with the standard sums of products (all of
    ioattn's algorithms), the largest of :func:`trivial_lower`, :func:`partition_lower` and
    :func:`reduction_lower`; ``matmul="any"``: every program that computes ``Q K^T`` explicitly
    (over a finite field with more than ``N`` elements), the larger of :func:`trivial_lower` and
    :func:`any_matmul_lower`. With ``backward=True``, the same for the backward pass (standard:
    ``Q K^T`` and ``dO V^T`` both with standard sums of products; any: a backward that forms
    every score; see the module docstring).

    By default the standard bound is one on ``Q(G, M)``, games with ``M`` red pebbles; with
    ``program=True`` it bounds programs with a cache of ``M`` entries, each step computing one
    value from at most two (the game bounds at ``M + EXTRA_PEBBLES``): this is the bound to
    compare with an algorithm's counted I/O. :func:`any_matmul_lower` bounds programs directly.

    ``N_k`` (forward, ``matmul="standard"`` only) gives the bound for ``N`` query rows against
    ``N_k`` keys: the rectangular forms of the three bounds.

    >>> lower_bound(4096, 64, 4096, program=True) <= lower_bound(4096, 64, 4096)
    True
    """
    _check_matmul(matmul)
    backward = as_flag(backward, "backward")
    if N_k is not None and matmul == "any":
        raise ValueError("N_k (rectangular attention) is given for matmul='standard' only: the "
                         "bound for any matrix product is stated for N x N attention")
    keys = {} if N_k is None else {"N_k": N_k}
    trivial = trivial_lower(N, d, backward=backward, **keys)
    if matmul == "any":
        return max(trivial, any_matmul_lower(N, d, M))
    pebbles = _sizes(N, d, M)[2] + (EXTRA_PEBBLES if as_flag(program, "program") else 0)
    return max(trivial, partition_lower(N, d, pebbles, backward=backward, **keys),
               reduction_lower(N, d, pebbles, backward=backward, **keys))


def grouped_lower(H_q: int, H_kv: int, N: int, d: int, M: int, *, N_k: int | None = None,
                  program: bool = False) -> int:
    """A lower bound for grouped heads: ``H_q`` query heads of ``N`` rows sharing ``H_kv``
    key/value heads of ``N_k`` rows (``N`` by default), standard sums of products, forward.

    The largest of three bounds, each by the argument of its dense form:

    - trivial, ``2 H_q N d + 2 H_kv N_k d``: every query and key/value head is read once and
      every output written (every score formed; at ``N_k = 1`` ``O`` is ``V`` repeated, as for
      :func:`trivial_lower`). A shared ``K``, ``V`` counts once, however many heads use it;
    - partition and reduction with ``t = H_q N N_k`` trees: the graph is the disjoint union of
      the ``H_q`` heads' trees, and both arguments count trees and multiplications in any set of
      them (a part's kind-(c) trees over all heads number at most ``sum_h a_h b_h <=
      (sum_h a_h + b_h)^2 / 4 <= |D|^2 / (4 d^2)``; Loomis-Whitney bounds any set of
      multiplication triples), as for :func:`partition_lower` and :func:`reduction_lower`.

    With ``program=True`` the game bounds are evaluated at ``M + EXTRA_PEBBLES``, as for
    :func:`lower_bound`. The stacked schedule of :mod:`ioattn.inference` meets the trivial
    term exactly whenever a group's ``g N`` rows fit in one query block.
    """
    H_q, H_kv = as_count(H_q, "H_q"), as_count(H_kv, "H_kv")
    if H_q % H_kv:
        raise ValueError(f"H_kv must divide H_q; got H_q = {H_q}, H_kv = {H_kv}")
    N, d, M = _sizes(N, d, M)
    N_k = _keys(N, N_k, False)
    pebbles = M + (EXTRA_PEBBLES if as_flag(program, "program") else 0)
    trees = H_q * N * N_k
    return max(grouped_trivial_lower(H_q, H_kv, N, d, N_k=N_k), _partition(trees, d, pebbles),
               _reduction(trees, d, pebbles))


def grouped_trivial_lower(H_q: int, H_kv: int, N: int, d: int, *,
                          N_k: int | None = None) -> int:
    """The trivial term of :func:`grouped_lower`, ``2 H_q N d + 2 H_kv N_k d``: every query and
    key/value head read once, every output written (``N_k = N`` by default).

    >>> grouped_trivial_lower(32, 8, 1, 128, N_k=8192)        # one decoding step, GQA g = 4
    16785408
    """
    H_q, H_kv = as_count(H_q, "H_q"), as_count(H_kv, "H_kv")
    if H_q % H_kv:
        raise ValueError(f"H_kv must divide H_q; got H_q = {H_q}, H_kv = {H_kv}")
    N, d = _sizes(N, d)
    return 2 * H_q * N * d + 2 * H_kv * _keys(N, N_k, False) * d


def decoding_lower(H_q: int, H_kv: int, N_q: int, N_k: int, d: int, M: int, *, batch: int = 1,
                   program: bool = False) -> int:
    """A lower bound for a decoding step of ``batch`` sequences, each ``H_q`` query heads of
    ``N_q`` rows sharing ``H_kv`` key/value heads of ``N_k`` cached rows (forward, standard sums
    of products): :func:`grouped_lower` with ``batch H_q`` and ``batch H_kv`` heads, since the
    sequences of a batch are disjoint heads (each has its own cache). Every schedule of
    :func:`ioattn.decoding.decoding_cost` moves at least this much at the peak it runs in (its
    block-table entries and partials come on top); the stacked one with ``S = 1`` and pages
    that divide its tile moves exactly the trivial term plus one entry a page
    (:func:`grouped_trivial_lower`; the book's decoding chapter).

    >>> decoding_lower(32, 8, 1, 8192, 128, 2 ** 16, batch=2)
    33570816
    """
    batch = as_count(batch, "batch")
    return grouped_lower(batch * as_count(H_q, "H_q"), batch * as_count(H_kv, "H_kv"), N_q, d, M,
                         N_k=as_count(N_k, "N_k"), program=program)


def lower_curve(N: int, d: int, Ms, matmul: str = "standard", *, backward: bool = False,
                Z: int | None = None) -> list[int]:
    """The lower bound to draw beside algorithms' counted I/O at the cache sizes ``Ms``: the
    program bound (:func:`lower_bound` with ``program=True``; :func:`sparse_lower` with
    ``program=True`` when ``Z`` computed scores are given) made monotone by :func:`envelope`
    over ``Ms`` (in any order; each value is the largest bound at any ``M' >= M`` of ``Ms``).

    >>> lower_curve(4096, 64, [8192, 4096]) == envelope(
    ...     [lower_bound(4096, 64, M, program=True) for M in (4096, 8192)])[::-1]
    True
    """
    Ms = [as_count(M, "M") for M in Ms]
    order = sorted(range(len(Ms)), key=Ms.__getitem__)
    if Z is None:
        values = [lower_bound(N, d, Ms[k], matmul, backward=backward, program=True)
                  for k in order]
    else:
        if matmul != "standard":
            raise ValueError("the sparse bounds are for standard matrix multiplication")
        values = [sparse_lower(N, d, Ms[k], Z, backward=backward, program=True) for k in order]
    out = [0] * len(Ms)
    for k, v in zip(order, envelope(values)):
        out[k] = v
    return out


def envelope(values) -> list[int]:
    """The running maximum from the right: ``out[k] = max(values[k:])``.

    ``values`` are lower bounds at increasing ``M_0 < M_1 < ...``. The least I/O is
    non-increasing in ``M`` (a game with more pebbles, or a program with a larger cache, can do
    whatever a smaller one does), so a bound valid at ``M_j`` is valid at every ``M_k <= M_j``:
    the envelope is valid at each ``M_k`` too, non-increasing, and at least ``values``. The
    formulas here are not monotone in ``M`` (each ``ceil`` makes a sawtooth); a curve of a lower
    bound over ``M`` is drawn as its envelope.

    >>> envelope([5, 7, 3, 4, 1])
    [7, 7, 4, 4, 1]
    """
    out, best = [], None
    for v in reversed(list(values)):
        best = v if best is None or v > best else best
        out.append(best)
    return out[::-1]


# ------------------------------------------------------------------------ sparse lower bounds
def sparse_trivial_lower(N: int, d: int, Z: int, *, backward: bool = False,
                         given_D: bool = False) -> int:
    """Every output entry is written, and every input row that a computed score uses is read.

    The output is the whole ``N x d`` matrix ``O`` (``dQ, dK, dV`` backward), every entry
    written, a row with nothing to attend to as zeros (the convention of the module docstring).
    Let ``I`` be the rows and ``J`` the columns of ``Q K^T`` that hold one of the ``Z`` computed
    entries. Then ``Z <= |I| |J|`` and ``|I|, |J| <= N``, so ``|I| + |J| >= ceil(2 sqrt(Z))`` and
    ``|I|, |J| >= ceil(Z / N)``, and ``a|I| + b|J| >= min(a, b) ceil(2 sqrt(Z)) + |a - b|
    ceil(Z / N)``. Forward: ``O`` written (``N d``), rows ``I`` of ``Q`` and rows ``J`` of ``K``
    and ``V`` read: ``N d + d|I| + 2d|J|``. Backward: ``dQ, dK, dV`` written (``3 N d``), rows
    ``I`` of ``Q, dO, O`` and ``L`` and rows ``J`` of ``K, V`` read:
    ``3 N d + (3d + 1)|I| + 2d|J|``; with ``given_D`` the rows ``I`` of ``O`` are replaced by
    those of ``D``: ``3 N d + (2d + 2)|I| + 2d|J|``. At ``Z = N^2`` this is :func:`trivial_lower`.

    >>> sparse_trivial_lower(8, 2, 64), trivial_lower(8, 2)
    (64, 64)
    >>> sparse_trivial_lower(8, 2, 8 * 9 // 2)    # causal: 16 + 2 ceil(2 sqrt(36)) + 2 ceil(36/8)
    50
    >>> sparse_trivial_lower(8, 2, 1)             # one score: O written, one row of Q, K, V read
    22
    """
    N, d = _sizes(N, d)
    Z = _Z(N, Z)
    if as_flag(given_D, "given_D") and not as_flag(backward, "backward"):
        raise ValueError("given_D concerns the backward pass: pass backward=True")
    if not backward:
        return N * d + _rows(d, 2 * d, N, Z)
    return 3 * N * d + _rows(2 * d + 2 if given_D else 3 * d + 1, 2 * d, N, Z)


def sparse_partition_lower(N: int, d: int, M: int, Z: int, *, backward: bool = False) -> int:
    """The M-partition bound when only ``Z`` entries of ``Q K^T`` are computed:
    ``M (ceil(t d^2 / (4 M d^2 + M^2)) - 1)``, ``t = Z`` (``2 Z`` with ``backward=True``).

    The argument of :func:`partition_lower` restricted to the computed entries: Hong-Kung's lemma
    gives ``q >= M (P(2M) - 1)``; the graph holds the ``Z`` standard-sum trees of the computed
    scores (and, backward, ``Z`` trees of ``dP``), ``t (2d - 1)`` level-1 vertices, and a part
    of a ``2M``-partition holds at most ``(2d - 1)(4M + M^2/d^2)`` of them ([SY]_ Lemma 3.3: its
    proof bounds the trees that any one part can use, whichever trees exist). Hence
    ``P(2M) >= ceil(t d^2 / (4 M d^2 + M^2))``. At ``Z = N^2`` this is :func:`partition_lower`;
    for ``M >= d^2`` it is at least ``t d^2 / (5M) - M``.

    >>> sparse_partition_lower(4096, 64, 4096, 4096 ** 2) == partition_lower(4096, 64, 4096)
    True
    """
    N, d, M = _sizes(N, d, M)
    Z = _Z(N, Z)
    return _partition((2 if as_flag(backward, "backward") else 1) * Z, d, M)


def sparse_reduction_lower(N: int, d: int, M: int, Z: int, *, backward: bool = False) -> int:
    """The small-cache bound when only ``Z`` entries of ``Q K^T`` are computed:
    ``M (ceil(t d / M^{3/2}) - 1) - t``, ``t = Z`` (``2 Z`` with ``backward=True``).

    The argument of :func:`reduction_lower` restricted to the computed entries: write each
    computed score (and, backward, each computed ``dP_ij``) after its first compute, ``t`` more
    writes, and keep only the moves on their trees and input parents: a complete game on a
    sparse standard product with ``t d`` multiplication triples. The segment argument of
    :func:`matmul_lower` needs no change for a subset of triples (the Loomis-Whitney inequality
    holds for every finite set of triples), so a segment of ``M`` I/Os performs at most
    ``M^{3/2}`` of them and ``q + t >= M (ceil(t d / M^{3/2}) - 1)``. At ``Z = N^2`` this is
    :func:`reduction_lower`.

    >>> sparse_reduction_lower(1024, 256, 64, 1024 ** 2) == reduction_lower(1024, 256, 64)
    True
    """
    N, d, M = _sizes(N, d, M)
    Z = _Z(N, Z)
    return _reduction((2 if as_flag(backward, "backward") else 1) * Z, d, M)


def sparse_lower(N: int, d: int, M: int, Z: int, *, backward: bool = False,
                 program: bool = False) -> int:
    """The strongest lower bound here for attention (standard matmul) that computes only ``Z``
    entries of ``Q K^T``: the largest of :func:`sparse_trivial_lower`,
    :func:`sparse_partition_lower` and :func:`sparse_reduction_lower`. At ``Z = N^2`` it is
    :func:`lower_bound` (``matmul="standard"``).

    A bound on games with ``M`` red pebbles; with ``program=True``, on programs with an
    ``M``-entry cache (the game bounds at ``M + EXTRA_PEBBLES``, see :func:`lower_bound`)."""
    pebbles = _sizes(N, d, M)[2] + (EXTRA_PEBBLES if as_flag(program, "program") else 0)
    return max(sparse_trivial_lower(N, d, Z, backward=backward),
               sparse_partition_lower(N, d, pebbles, Z, backward=backward),
               sparse_reduction_lower(N, d, pebbles, Z, backward=backward))


def _block_mask(block_mask):
    try:
        rows = [[bool(x) for x in row] for row in block_mask]
    except TypeError:
        raise TypeError("block_mask must be a 2-D array of booleans (one per block)") from None
    if not rows or not rows[0] or any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("block_mask must be a nonempty rectangular 2-D array of booleans")
    return rows


def block_sparse_Z(N: int, block_mask, block) -> int:
    """``Z``, the entries of ``Q K^T`` that a block mask computes.

    Parameters
    ----------
    N : int
        Sequence length.
    block_mask : 2-D array of bool
        ``block_mask[I][J]`` says whether block ``(I, J)`` is computed; its shape must be
        ``(ceil(N / b_r), ceil(N / b_c))``.
    block : (int, int)
        The block sides ``(b_r, b_c)``; the last block row and column are clipped to ``N``.

    Returns
    -------
    int
        The sum of the sizes of the computed blocks. When ``b_r`` and ``b_c`` divide ``N`` it is
        ``block_density(block_mask) * N^2``.

    >>> block_sparse_Z(6, [[1, 0], [1, 1]], (4, 4))     # blocks of 16, 8, 4 (clipped) entries
    28
    """
    N = as_count(N, "N")
    try:
        b_r, b_c = block
    except (TypeError, ValueError):
        raise TypeError(f"block must be a pair (b_r, b_c), got {block!r}") from None
    b_r, b_c = as_count(b_r, "b_r"), as_count(b_c, "b_c")
    rows = _block_mask(block_mask)
    want = (ceil_div(N, b_r), ceil_div(N, b_c))
    if (len(rows), len(rows[0])) != want:
        raise ValueError(f"block_mask has shape {(len(rows), len(rows[0]))}, but N = {N} in "
                         f"{b_r} x {b_c} blocks needs {want}")
    height = [min(b_r, N - I * b_r) for I in range(want[0])]
    width = [min(b_c, N - J * b_c) for J in range(want[1])]
    return sum(height[I] * width[J] for I, row in enumerate(rows) for J, x in enumerate(row) if x)


def block_density(block_mask) -> Fraction:
    """``s``, the fraction of blocks that ``block_mask`` computes, as an exact fraction.

    >>> block_density([[1, 0], [1, 1]])
    Fraction(3, 4)
    """
    rows = _block_mask(block_mask)
    return Fraction(sum(map(sum, rows)), len(rows) * len(rows[0]))


# ------------------------------------------------------------------------ upper bounds
def upper_bound(name: str, N: int, d: int, M: int, *, backward: bool = False, **options) -> int:
    """A simple explicit upper bound on algorithm ``name``'s exact I/O (see the module docstring);
    with ``backward=True``, on its backward pass's.

    Forward: FlashAttention (FA2 order) ``4Nd + floor(2 N^2 d (2d + 4) / (M - 4d - 3))``; the FA1
    order ``6Nd + 6N + floor(4 N^2 d (3d + 4) / M)``; square tiling and standard attention the
    reads of their products with every ``ceil(x)`` replaced by ``x + 1``, plus their other
    transfers.

    Backward: FlashAttention ``9Nd + 3N + floor(N^2 (4d + 2)^2 / (M - 7d - 3))``. Its exact I/O
    is ``5Nd + N + T_c N (4d + 2)`` with ``T_c = ceil(N / B_c)``; evening out the block keeps
    ``T_c = ceil(N / B)`` for ``B = floor((M - 3d - 2) / (4d + 2)) >= (M - 7d - 3) / (4d + 2)
    > 0``, and ``T_c <= N / B + 1``. Square tiling: the reads of its five products (``Q K^T``,
    ``dO V^T``: ``(N, d) @ (d, N)``; ``P^T dO``, ``dS K``, ``dS^T Q``: ``(N, N) @ (N, d)``)
    without ceilings, plus ``3 N^2 + 5 N d + 3 N`` (``P, dS`` written, ``P`` read in the epilogue,
    ``dQ, dK, dV`` written, ``D`` and ``L`` moved). Standard attention: the same five products
    plus ``N (N / b_c + 1)`` reads of ``L`` (``b_c`` the tile width of ``Q K^T``) and
    ``5 N^2 + 5 N d + 2 N`` (``P, dP, dS`` written, the ``dS`` pass, ``dQ, dK, dV`` written, ``D``).

    Raises ``ValueError`` where the algorithm cannot run (``M`` below its minimum), for an
    explicit ``block`` (the bounds cover the default block rules), and for a ``mask`` or
    ``save_lse=True`` (they cover dense attention that does not save ``L``).
    """
    N, d, M = _sizes(N, d, M)
    backward = as_flag(backward, "backward")
    if options.get("block") is not None:
        raise ValueError("upper_bound covers the default block rules, not an explicit block")
    if options.get("mask") is not None or options.get("save_lse"):
        raise ValueError("upper_bound covers dense attention as io_cost counts it by default: "
                         "no mask, no save_lse")
    p = plan(name, N, d, M, backward=backward, **options)  # checks the name, options, feasibility
    if backward:
        return _upper_backward(name, p)
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


def _upper_backward(name, p) -> int:
    N, d, M = p.N, p.d, p.M
    if name == "flash":
        return 9 * N * d + 3 * N + (N * N * (4 * d + 2) ** 2) // (M - 7 * d - 3)
    if name == "square_tiling":
        products = (p.P, p.dS, p.dV, p.dQ, p.dK)
        # P read in the epilogue, D computed (dO, O read; D written), L and D once per row
        extra = N * N + 2 * N * d + 3 * N
        return extra + sum(q.writes for q in products) + floor(
            sum(q.reads_bound for q in products))
    if name == "standard":
        products = (p.P, p.dV, p.dP, p.dQ, p.dK)
        # D computed (dO, O read; D written); the dS pass reads P, dP, D and writes dS
        extra = 2 * N * d + N + 3 * N * N + N
        L_reads = N * (Fraction(N, p.P.b_c) + 1)            # L per tile of P
        return extra + sum(q.writes for q in products) + floor(
            sum(q.reads_bound for q in products) + L_reads)
    raise ValueError(f"no backward upper bound is written for {name!r}")


# ------------------------------------------------------------------------ orders and regimes
def order(N: int, d: int, M: int, *, backward: bool = False) -> float:
    """The Theta-order with no constant: ``min(N^2 d^2 / M, N^2 d / sqrt(M)) + N d`` forward
    ([SY]_ Theorem 3.1, plus the trivial ``N d``: without it the order is false where ``M``
    exceeds ``N d`` or ``N < sqrt(M)``, since every input is read); with ``backward=True``,
    ``min((N^2 d^2 + N d^3) / M, (N^2 d + N d^2) / sqrt(M)) + N d``, the order [LLSS]_ state
    (their Theorem 1.1 in arXiv v1, as reported by secondary sources) plus the trivial term, for
    ``N >= d`` only.

    For ``N >= d`` each term of the backward minimum lies between its ``N^2`` part and twice
    it, so the backward order is the forward's. For ``N < d`` the formula is not the order of
    ioattn's backward passes: every product of the backward pass has two sides of length ``N``
    and one of length ``d``, so square tiling moves ``O(N^2 d / sqrt(M) + N d)``, a factor about
    ``1 + d / N`` below the formula's second term. So ``backward=True`` with ``N < d`` raises
    ``ValueError``. At ``N = 8, d = 512, M = 16`` the outer schedule's backward pass moves about
    a quarter of ``(N^2 d + N d^2) / sqrt(M)``:

    >>> io = io_cost("square_tiling", 8, 512, 16, backward=True, schedule="outer").total
    >>> io, round(io / ((8**2 * 512 + 8 * 512**2) / 16**0.5), 2)
    (139544, 0.26)
    """
    N, d, M = _sizes(N, d, M)
    if as_flag(backward, "backward"):
        if N < d:
            raise ValueError(
                f"order(backward=True) is stated for N >= d only, got N = {N} < d = {d}: for "
                "N < d the backward passes move O(N^2 d / sqrt(M) + N d), less than the formula "
                "of Li, Liang, Shi, Song et al. (arXiv:2410.09397)")
        return min((N * N * d * d + N * d ** 3) / M, (N * N * d + N * d * d) / M ** 0.5) + N * d
    return min(N * N * d * d / M, N * N * d / M ** 0.5) + N * d


def regime(d: int, M: int, *, backward: bool = False) -> str:
    """``"large"`` when ``M >= d^2``, else ``"small"``: which term of :func:`order` is the least.

    The same threshold for the backward pass: the two terms of :func:`order` are equal exactly
    at ``M = d^2`` in both directions (backward, they are ``N d (N + d)`` times ``d / M`` and
    times ``1 / sqrt(M)``). The regime says nothing about which algorithm runs: FlashAttention
    attains the large-cache order only where it runs, ``M >= 4d + 4`` (backward ``7d + 4``;
    :func:`ioattn.min_M`), which for ``d <= 4`` (backward ``d <= 7``) is above ``d^2``.

    >>> regime(64, 4096), regime(64, 4095), regime(2, 4)
    ('large', 'small', 'large')
    """
    as_flag(backward, "backward")
    return "large" if as_count(M, "M") >= as_count(d, "d") ** 2 else "small"


# ------------------------------------------------------------------------ cheapest, crossover
def _least_M(name: str, d: int, opts: dict, backward: bool) -> int:
    algo = get(name, backward)
    return algo.min_M(d, **{**algo.options, **opts})


def cheapest(N: int, d: int, M: int, names=None, options=None, *,
             backward: bool = False, mask=None) -> str | None:
    """The algorithm with the least exact I/O at ``(N, d, M)`` among ``names`` (default: all);
    with ``backward=True``, among their backward passes; with ``mask``, for that sparsity
    pattern (:func:`ioattn.io_cost`'s ``mask``).

    ``options`` maps a name to its options (e.g. ``{"square_tiling": {"schedule": "outer"}}``).
    Algorithms that cannot run at this ``M`` are left out; ties go to the name first in sort
    order; ``None`` if none can run.
    """
    N, d, M = _sizes(N, d, M)
    options = options or {}
    backward = as_flag(backward, "backward")
    if mask is not None:                            # an array is read once, for every name
        mask = Mask.of(mask, N)
    best = None
    for name in _names(names, backward):
        opts = options.get(name, {})
        if M < _least_M(name, d, opts, backward):
            continue
        total = io_cost(name, N, d, M, backward=backward, mask=mask, **opts).total
        if best is None or total < best[0]:
            best = (total, name)
    return best and best[1]


def _names(names, backward: bool) -> list[str]:
    """``names`` sorted (every algorithm when None or empty), each checked to be known."""
    if isinstance(names, str):
        raise TypeError(f"names must be a list of algorithm names, got the string {names!r}")
    names = sorted(names or (BACKWARD if backward else REGISTRY))
    for name in names:
        get(name, backward)                         # a clear error for an unknown name
    return names


class Crossover(NamedTuple):
    """At cache size ``M`` the cheapest algorithm is ``after``; at ``M - 1`` it was ``before``."""

    M: int
    before: str | None
    after: str | None


#: The most cache sizes :func:`crossovers` costs in one call: its range ``[M_min, M_max]``
#: may hold at most this many integers (about a minute of work on one core).
MAX_RANGE = 2 ** 26

#: Cache sizes costed at once by :func:`crossovers` (its memory does not grow with the range).
_SCAN_CHUNK = 1 << 17


def crossovers(N: int, d: int, M_min: int | None = None, M_max: int | None = None,
               names=None, options=None, *, backward: bool = False,
               mask=None) -> list[Crossover]:
    """**Every** integer ``M`` in ``(M_min, M_max]`` where the cheapest algorithm changes, from
    exact costs (of the backward passes with ``backward=True``; under ``mask`` with one).

    ``M_min`` defaults to the least ``M`` at which any of ``names`` runs, ``M_max`` to ``32 d^2``.
    Every integer ``M`` of ``[M_min, M_max]`` is costed (:func:`ioattn.api.totals` costs each
    algorithm over :data:`_SCAN_CHUNK` of them at once, so the memory does not grow with the
    range), so nothing is sampled: a change followed by a change back is listed twice. At each
    ``M`` the cheapest is :func:`cheapest`'s (ties to the name first in sort order; algorithms
    that cannot run at ``M`` left out); the first algorithm becoming feasible is not a crossover.

    Raises ``ValueError`` for an empty range (``M_max < M_min``, after the defaults; at
    ``M_max = M_min`` nothing can change and the list is empty) and for a range of more than
    :data:`MAX_RANGE` integers (narrow it: the cheapest changes only where
    some algorithm's block sizes do, below ``32 d^2`` in every case the book draws).

    >>> outer = {"square_tiling": {"schedule": "outer"}}
    >>> [(c.M, c.after) for c in crossovers(4096, 64, 2000, 4000, options=outer)]
    [(3032, 'flash'), (3078, 'square_tiling'), (3164, 'flash')]
    """
    N, d = _sizes(N, d)
    backward = as_flag(backward, "backward")
    names = _names(names, backward)
    options = options or {}
    mask = Mask.of(mask, N)                         # an array is read once, for every name
    least = [_least_M(n, d, options.get(n, {}), backward) for n in names]
    lo = as_count(M_min, "M_min") if M_min is not None else min(least)
    hi = as_count(M_max, "M_max") if M_max is not None else 32 * d * d
    if hi < lo:
        given = "M_min" if M_min is not None else f"M_min (by default the least M, {lo})"
        raise ValueError(f"the range [M_min, M_max] = [{lo}, {hi}] is empty: M_max must be at "
                         f"least {given}")
    if hi - lo + 1 > MAX_RANGE:
        raise ValueError(f"crossovers costs every M of [M_min, M_max] = [{lo}, {hi}], "
                         f"{hi - lo + 1:,} values, more than the {MAX_RANGE:,} it costs in one "
                         "call: narrow the range")
    found, before = [], -1
    for start in range(lo, hi + 1, _SCAN_CHUNK):
        Ms = np.arange(start, min(start + _SCAN_CHUNK, hi + 1), dtype=np.int64)
        winner = _winners(N, d, Ms, names, least, options, backward, mask)
        if start == lo:                             # M_min itself is only the reference
            before = winner[0]
        w = np.concatenate(([before], winner))
        for k in np.nonzero((w[1:] != w[:-1]) & (w[:-1] >= 0))[0].tolist():
            found.append(Crossover(int(Ms[k]), names[w[k]], names[w[k + 1]]))
        before = winner[-1]
    return found


def _winners(N, d, Ms, names, least, options, backward, mask) -> np.ndarray:
    """For each ``M`` of ``Ms``, the index in ``names`` of the cheapest algorithm that runs
    (the first in ``names`` on a tie), ``-1`` where none runs."""
    winner = np.full(Ms.size, -1, dtype=np.int64)
    best = np.zeros(Ms.size, dtype=object)
    for k, (name, first) in enumerate(zip(names, least)):
        start = int(np.searchsorted(Ms, first))     # the first M at which it runs
        if start == Ms.size:
            continue
        cost = totals(name, N, d, Ms[start:], backward=backward, mask=mask,
                      **options.get(name, {}))
        if k == 0 or best.dtype != cost.dtype:
            best = best.astype(cost.dtype)
        taken = (winner[start:] < 0) | (cost < best[start:])
        winner[start:][taken] = k
        best[start:][taken] = cost[taken]
    return winner
