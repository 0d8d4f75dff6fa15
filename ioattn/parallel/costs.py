"""Exact communication of attention on ``P`` processors, in closed form.

The model (the chapter on many processors states it in full). ``P`` processors, each with its own
memory, exchange messages. Processor ``p`` starts with ``n_p`` rows (:func:`~.layout.shares`) of
``Q, K, V`` for each of the ``H`` heads (head dimension ``d``) and must end with the same rows of
``O`` (and, for the backward pass, of ``dQ, dK, dV``). A *word* is one float64 entry. For every
processor the model counts

- ``sent``, ``received``: words it sends and receives (its traffic is their sum; the largest
  traffic is what takes time, the sum of ``sent`` over processors is the total);
- ``messages``: messages it sends (the latency term);
- ``memory``: the largest number of words it holds at once: its shares of the inputs and outputs,
  softmax statistics, gathered blocks and message buffers. The blocks of scores are scratch of
  the local computation (FlashAttention's online softmax keeps only a cache's worth of them) and
  are not counted;
- ``work``: the score entries ``S_ij`` it computes at each step (only those a causal mask keeps).

Every number here is a closed form in ``N, d, P, H`` and the shares; the tests check each against
the same algorithm run on MPI, counted where every message is sent
(:mod:`ioattn.parallel.engine`), for 2 and 4 processes.

Algorithms (:data:`ALGORITHMS`), with ``j_s = (p - s) mod P`` the block processor ``p`` holds at
step ``s`` of a ring and ``n`` the shares of the rows:

``"ring"`` -- ring attention [RING]_, contiguous rows. For ``s = 0, ..., P - 1``: attend ``Q_p``
to the ``K_j, V_j`` held, updating ``O_p, m_p, l_p`` by the online softmax; unless ``s = P - 1``,
pass ``K_j, V_j`` to ``p + 1`` and take ``K_{j-1}, V_{j-1}`` from ``p - 1`` (one message)::

    sent_p = 2dH (N - n_{p+1}),   received_p = 2dH (N - n_p),   messages_p = P - 1.

The backward pass (``backward=True``) rotates ``K_j, V_j`` with the gradients ``dK_j, dV_j``
accumulated on the way, and a last step takes ``dK_p, dV_p`` home::

    sent_p = 4dH (N - n_{p+1}) + 2dH n_{p+1},   received_p = 4dH (N - n_p) + 2dH n_p,
    messages_p = P.

``"striped"`` -- striped attention [STRIPE]_: the ring on the striped layout. The traffic is the
ring's; under a causal mask every step's work is balanced (at most ``n_p (n_p + 1) / 2``
scores), where the ring's processors idle on blocks above the diagonal.

``"all_to_all"`` -- head parallelism [ULYSSES]_ (``H >= P``): an all-to-all gives processor ``p``
all ``N`` rows of its ``h_p`` heads, it attends locally, and a second all-to-all returns the rows
of ``O``::

    sent_p = 3d n_p (H - h_p) + d h_p (N - n_p),
    received_p = 3d h_p (N - n_p) + d n_p (H - h_p),   messages_p = 2 (P - 1).

Its backward pass (``backward=True``) is the reverse all-to-alls of Ulysses, and it is USP's
backward pass below with one group (``grid = (P, 1)``, the same program): ``D = rowsum(dO o O)``
on the own rows, an all-to-all of ``Q, K, V, dO, L, D`` (``4d + 2`` words a row and head), the
gradients of whole heads, an all-to-all of ``dQ, dK, dV`` back::

    sent_p = (4d + 2) n_p (H - h_p) + 3d h_p (N - n_p),
    received_p = (4d + 2) h_p (N - n_p) + 3d n_p (H - h_p),   messages_p = 2 (P - 1).

``"grid"`` -- the two-dimensional scheme derived in the chapter: processors in a ``P_r x P_c``
grid, ``p = a P_c + b``. Grid row ``a`` gathers its query block (the ``N_a`` rows its processors
hold), grid column ``b`` its key block (``N^b`` rows); processor ``(a, b)`` attends block ``a`` to
block ``b`` and the partial outputs, with their row log-sum-exp, are merged by a reduce-scatter
along the grid row::

    sent_p = dH n_p (P_c - 1) + 2dH n_p (P_r - 1) + (d + 1) H (N_a - n_p),
    received_p = dH (N_a - n_p) + 2dH (N^b - n_p) + (d + 1) H n_p (P_c - 1),
    messages_p = 2 (P_c - 1) + (P_r - 1).

With equal shares the traffic of every processor is ``H n ((2d + 1)(P_c - 1) + 2d (P_r - 1))``
and its memory ``H n ((2d + 3) P_c + 2d P_r)``; the default shape (:func:`~.layout.grid_shape`)
is the factorisation ``P = P_r P_c`` with the least of that traffic (ties: the least memory).
For ``P_r = P_c = sqrt(P)`` the traffic is ``2 (4d + 1) H (N / sqrt(P)) (1 - 1 / sqrt(P))``,
against the ring's ``4 d H N (1 - 1/P)``: less on every grid with at least two rows and two
columns, equal on a ``P x 1`` grid, for memory ``(4d + 3) H N / sqrt(P)`` instead of the ring's
``(8d + 2) H N / P``.

Its backward pass (``backward=True``) computes ``D = rowsum(dO o O)`` on the own rows, gathers
``Q, dO, L, D`` of the query block along the grid row (``2d + 2`` words a row and head) and
``K, V`` of the key block along the grid column, adds block ``b``'s part to a partial ``dQ`` of
the ``N_a`` rows and block ``a``'s part to a partial ``dK, dV`` of the ``N^b`` rows, then two
reduce-scatters: the partial ``dQ`` along the grid row and ``dK, dV`` along the grid column,
each processor summing those of its own rows::

    sent_p = (2d + 2) H n_p (P_c - 1) + 2dH n_p (P_r - 1) + dH (N_a - n_p) + 2dH (N^b - n_p),
    received_p = (2d + 2) H (N_a - n_p) + 2dH (N^b - n_p) + dH n_p (P_c - 1)
                 + 2dH n_p (P_r - 1),
    messages_p = 2 (P_c - 1) + 2 (P_r - 1),
    memory_p = (5d + 2) H n_p + max((2d + 2) H (N_a - n_p) + 2dH (N^b - n_p) + dH N_a + 2dH N^b,
                                    dH N_a + 2dH N^b + dH n_p (P_c - 1),
                                    dH n_p + 2dH N^b + 2dH n_p (P_r - 1))

(``O``, the packed ``Q, dO, L, D`` and ``K, V`` of the own rows; then the gathered blocks and
the partial gradients, then the sums of ``dQ`` arriving, then those of ``dK, dV``). With equal
shares the traffic is ``2 H n ((3d + 2)(P_c - 1) + 4d (P_r - 1))``, against the ring's backward
``2 H n (4d (P - 1) + 2d)``.

Every count is an exact integer: the arrays are int64 where no count can reach ``2^62``, and
arrays of Python ints beyond (``N = 10^9`` and more), so nothing overflows.

The schemes run in practice (:data:`SCHEMES`), beside the four above (all are in :data:`NAMES`):

``"zigzag"`` -- zigzag (dual-chunk) ring attention [ZIGZAG]_: the ring, forward and backward,
on the zigzag layout (:func:`~.layout.sizes`: processor ``p`` holds chunks ``p`` and
``2P - 1 - p`` of ``2P``, ``n_p`` rows in all). The words and messages are the ring's formulas
with these shares. Under a causal mask a block ``j < p`` is seen by both query chunks through its
first chunk only, a block ``j > p`` by the second query chunk only, so at every step each
processor computes about ``n^2 / 2`` scores: with ``c`` the chunk sizes,
``work[p, s] = H sum c_a c_b`` (``c_a (c_a + 1) / 2`` when ``a = b``) over the pairs of its chunks
``a`` and the held block's chunks ``b <= a``.

``"all_gather"`` -- all-gather of ``K, V`` [LLAMA3]_ on the zigzag layout: processor ``p`` sends
its ``K_p, V_p`` to every other processor (one message each), attends ``Q_p`` to all ``N`` rows,
and holds the whole of ``K, V``::

    sent_p = 2dH n_p (P - 1),   received_p = 2dH (N - n_p),   messages_p = P - 1,
    memory_p = (4d + 2) H n_p + 2dH (N - n_p).

Its backward pass (``backward=True``) gathers ``K, V`` again the same way, adds to ``dQ_p`` and
to a partial ``dK_j, dV_j`` of every block ``j`` (``2dH N`` words), and ends with the ring
reduce-scatter of NCCL: ``P - 1`` steps, at step ``s`` processor ``p`` passes its running sum of
block ``p - s - 1`` to ``p + 1`` and adds its own partial of block ``p - s - 2`` to the sum that
arrives from ``p - 1``, so after the last step it holds the whole of block ``p``::

    sent_p = 2dH n_p (P - 1) + 2dH (N - n_p),   received_p = 2dH (N - n_p) + 2dH (N - n_{p-1}),
    messages_p = 2 (P - 1),
    memory_p = (6d + 2) H n_p + 2dH N + 2dH max(N - n_p, n_{p-s-2} for s < P - 1),

(the gathered blocks are let go before the reduce-scatter, whose buffer holds one sum).

``"usp"`` -- Ulysses x ring [USP]_ on ``P = P_u P_r`` processors (``grid = (P_u, P_r)``, default
:func:`~.layout.usp_shape`), contiguous rows, ``p = r P_u + u``: the ``P_u`` processors of group
``r`` share its ``N_r`` rows and split the heads (``h_u`` of :func:`~.layout.shares` ``(H, P_u)``,
so ``H >= P_u``); an all-to-all within the group gives ``p`` the ``N_r`` rows of its ``h_u``
heads, the ``P_r`` processors with the same ``u`` run the ring on their heads' ``K, V`` blocks of
``N_j`` rows, and a second all-to-all returns the rows of ``O``::

    sent_p = 3d n_p (H - h_u) + d h_u (N_r - n_p) + 2d h_u (N - N_{r+1}),
    received_p = 3d h_u (N_r - n_p) + d n_p (H - h_u) + 2d h_u (N - N_r),
    messages_p = 2 (P_u - 1) + (P_r - 1).

At ``P_r = 1`` these are all-to-all's counts, at ``P_u = 1`` the ring's (the memory too at
``P_r = 1``; at ``P_u = 1`` the ring's plus the ``2dH n_p`` words of the block of ``K, V`` copied
out of the packed ``Q, K, V`` it starts from).

Its backward pass computes ``D = rowsum(dO o O)`` on the processor's own rows first (a row's
``D`` needs only that row), so the first all-to-all moves ``Q, K, V, dO, L, D``, ``4d + 2``
words a row and head, and ``O`` stays; the ring's backward runs across the groups on the group
blocks (``K_j, V_j, dK_j, dV_j`` travelling, ``dK, dV`` sent home at the end); the second
all-to-all returns the rows of ``dQ, dK, dV``::

    sent_p = (4d + 2) n_p (H - h_u) + 4d h_u (N - N_{r+1}) + 2d h_u N_{r+1} + 3d h_u (N_r - n_p),
    received_p = (4d + 2) h_u (N_r - n_p) + 4d h_u (N - N_r) + 2d h_u N_r + 3d n_p (H - h_u),
    messages_p = 2 (P_u - 1) + P_r,

with the ring's terms (and its ``P_r`` messages) absent at ``P_r = 1``. Its memory: beside the
``(5d + 2) H n_p`` of ``O`` and the packed share, the larger of the ring phase (the pieces
received, ``(4d + 2) h_u (N_r - n_p)``, ``dQ`` of the group's rows, ``d h_u N_r``, and the
ring's largest held-plus-arriving blocks) and the return phase (``dQ`` and ``dK, dV`` of the
group's rows, the ``3dH n_p`` arriving and the ``3d h_u (N_r - n_p)`` packed to send).

``"usp_zigzag"`` -- USP with the zigzag ring across the groups, to balance a causal mask:
group ``r`` holds chunks ``r`` and ``2P_r - 1 - r`` of ``2P_r``, its processor ``u`` the
``u``-th part of them (:func:`~.layout.group_rows`, :func:`~.layout.group_sizes`). The same
formulas with these ``n_p`` and ``N_r``, forward and backward; at ``P_r = 1`` all-to-all's
counts, at ``P_u = 1`` zigzag ring attention's words, messages and work.

``"usp_grid"`` -- head groups x grid: USP with the grid scheme in place of the ring, on
``P = P_u P_a P_b`` processors (``grid = (P_u, P_a, P_b)``; from ``(P_u, P_r)``, default
:func:`~.layout.usp_shape`, the groups take the grid :func:`~.layout.grid_shape` ``(P_r, d)``),
contiguous rows, ``p = r P_u + u`` with ``r = a P_b + b``. The all-to-all within group ``r``
gives ``p`` the group's ``N_r`` rows of its ``h_u`` heads; the ``P_r = P_a P_b`` processors with
the same ``u`` run the grid scheme on those heads with the groups in its places (query block
``N_a`` the rows of the groups ``a P_b + c``, key block ``N^b`` those of the groups
``a' P_b + b``); the second all-to-all returns the rows of ``O``::

    sent_p = 3d n_p (H - h_u) + d h_u (N_r - n_p)
             + d h_u N_r (P_b - 1) + 2d h_u N_r (P_a - 1) + (d + 1) h_u (N_a - N_r),
    received_p = 3d h_u (N_r - n_p) + d n_p (H - h_u)
                 + d h_u (N_a - N_r) + 2d h_u (N^b - N_r) + (d + 1) h_u N_r (P_b - 1),
    messages_p = 2 (P_u - 1) + 2 (P_b - 1) + (P_a - 1).

At ``P_u = 1`` these are the grid's words, messages and work, at ``P_a = P_b = 1``
all-to-all's. Its memory holds, beside the ``3dH n_p`` of its share, the pieces of the first
all-to-all copied into the group's ``Q_r`` and ``K_r, V_r`` (``3d h_u (2N_r - n_p)``), then
the grid's buffers on them (``3d h_u N_r`` plus the grid's ``max(compute, merge)`` with
``N_r`` and ``h_u``), then ``O_r`` cut into the pieces it returns (``2d h_u N_r``), then the
rows of ``O`` arriving (``d h_u N_r + dH n_p``): the largest of the four.

Its backward pass is USP's with the grid's in place of the ring's: the all-to-all of ``Q, K,
V, dO, L, D``, the grid's backward pass on the groups (its formulas with ``N_r`` for ``n_p``,
``h_u`` heads and the ``P_a x P_b`` grid), the all-to-all of ``dQ, dK, dV``::

    sent_p = (4d + 2) n_p (H - h_u) + 3d h_u (N_r - n_p) + (2d + 2) h_u N_r (P_b - 1)
             + 2d h_u N_r (P_a - 1) + d h_u (N_a - N_r) + 2d h_u (N^b - N_r),
    received_p = (4d + 2) h_u (N_r - n_p) + 3d n_p (H - h_u) + (2d + 2) h_u (N_a - N_r)
                 + 2d h_u (N^b - N_r) + d h_u N_r (P_b - 1) + 2d h_u N_r (P_a - 1),
    messages_p = 2 (P_u - 1) + 2 (P_b - 1) + 2 (P_a - 1).

Its memory: beside the ``(5d + 2) H n_p`` of ``O`` and the packed share, the largest of the
pieces copied into the group's ``Q, dO, L, D`` and ``K, V`` (``(4d + 2) h_u (2 N_r - n_p)``),
the grid's backward buffers on them (``(4d + 2) h_u N_r`` plus the grid's ``max`` above with
``N_r`` and ``h_u``) and the return (``3d h_u N_r + 3dH n_p + 3d h_u (N_r - n_p)``).

References
----------
.. [RING] H. Liu, M. Zaharia, P. Abbeel, "Ring attention with blockwise transformers for
   near-infinite context", arXiv:2310.01889 (2023).
.. [STRIPE] W. Brandon et al., "Striped attention: faster ring attention for causal
   transformers", arXiv:2311.09431 (2023).
.. [ULYSSES] S. A. Jacobs et al., "DeepSpeed Ulysses: system optimizations for enabling training
   of extreme long sequence transformer models", arXiv:2309.14509 (2023).
.. [ZIGZAG] Z. Zhu, "ring-flash-attention", https://github.com/zhuzilin/ring-flash-attention
   (2024): ``zigzag_ring_flash_attn``.
.. [LLAMA3] A. Grattafiori et al., "The Llama 3 herd of models", arXiv:2407.21783 (2024),
   section 3.3.2 (context parallelism).
.. [USP] J. Fang, S. Zhao, "USP: a unified sequence parallelism approach for long context
   generative AI", arXiv:2405.07719 (2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import as_count, as_flag
from .layout import grid_shape, group_sizes, offsets, shares, sizes, usp_shape
from .two_level import cache_io, check_M

__all__ = ["ALGORITHMS", "BACKWARD", "NAMES", "RINGS", "SCHEMES", "WITH_BACKWARD",
           "ParallelCost", "as_flag", "check", "cost", "pairs", "step_words", "sweep"]

#: The algorithms, in the order the book introduces them.
ALGORITHMS = ("ring", "striped", "all_to_all", "grid")
#: Those with a backward pass: all four.
BACKWARD = ALGORITHMS
#: The schemes run in practice: zigzag ring, all-gather of K, V, Ulysses x ring (and x zigzag
#: ring), and head groups x grid.
SCHEMES = ("zigzag", "all_gather", "usp", "usp_zigzag", "usp_grid")
#: Every algorithm :func:`cost` and the MPI runs know.
NAMES = ALGORITHMS + SCHEMES
#: Every algorithm with a backward pass.
WITH_BACKWARD = NAMES
#: The layout of the rows each algorithm uses.
LAYOUT = {"ring": "contiguous", "striped": "striped", "all_to_all": "contiguous",
          "grid": "contiguous", "zigzag": "zigzag", "all_gather": "zigzag", "usp": "contiguous",
          "usp_zigzag": "zigzag", "usp_grid": "contiguous"}
#: The algorithms whose ``grid=`` option is a shape of the processors: (P_r, P_c), (P_u, P_r),
#: (P_u, P_a, P_b).
SHAPED = ("grid", "usp", "usp_zigzag", "usp_grid")


@dataclass(frozen=True, eq=False)
class ParallelCost:
    """The exact communication of one algorithm on ``P`` processors (see the module docstring).

    ``sent``, ``received``, ``messages`` and ``memory`` are integer arrays of length ``P``
    (int64, or Python ints where int64 could overflow); ``work`` is ``P x steps`` (``steps = P``
    for the rings, ``P_r`` for USP, 1 otherwise): the score entries each processor computes at
    each step.
    """

    name: str
    N: int
    d: int
    P: int
    heads: int
    causal: bool
    backward: bool
    grid: tuple[int, int] | None
    sent: np.ndarray
    received: np.ndarray
    messages: np.ndarray
    memory: np.ndarray
    work: np.ndarray
    #: The cache of each processor (:mod:`~ioattn.parallel.two_level`), or None.
    M: int | None = None
    #: Entries each processor's cache reads from its memory and writes to it (with ``M``).
    cache_reads: np.ndarray | None = None
    cache_writes: np.ndarray | None = None

    @property
    def cache_io(self) -> np.ndarray:
        """Entries moved between each processor's memory and its cache (``M`` given)."""
        if self.M is None:
            raise ValueError("no cache was counted: pass M= to cost (or to run)")
        return self.cache_reads + self.cache_writes

    @property
    def max_cache_io(self) -> int:
        """The most entries one processor moves between its memory and its cache."""
        return int(self.cache_io.max())

    @property
    def traffic(self) -> np.ndarray:
        """Words each processor sends or receives."""
        return self.sent + self.received

    @property
    def max_traffic(self) -> int:
        """The largest traffic of one processor: the words that take time."""
        return int(self.traffic.max())

    @property
    def max_received(self) -> int:
        return int(self.received.max())

    @property
    def total(self) -> int:
        """Words sent in all (each word once)."""
        return int(self.sent.sum())

    @property
    def max_messages(self) -> int:
        return int(self.messages.max())

    @property
    def max_memory(self) -> int:
        return int(self.memory.max())

    @property
    def critical_work(self) -> int:
        """Score entries on the critical path: the sum over steps of the busiest processor's."""
        return int(self.work.max(axis=0).sum())

    @property
    def total_work(self) -> int:
        return int(self.work.sum())

    @property
    def balance(self) -> float:
        """``total_work / (P * critical_work)``: 1 when no processor ever waits for another."""
        return self.total_work / (self.P * self.critical_work) if self.critical_work else 1.0

    def __eq__(self, other) -> bool:
        if not isinstance(other, ParallelCost):
            return NotImplemented
        return all(np.array_equal(getattr(self, f), getattr(other, f)) for f in
                   ("sent", "received", "messages", "memory", "work")) and \
            (self.name, self.N, self.d, self.P, self.heads, self.causal, self.backward,
             self.grid, self.M) == (other.name, other.N, other.d, other.P, other.heads,
                                    other.causal, other.backward, other.grid, other.M) and \
            (self.M is None or (np.array_equal(self.cache_reads, other.cache_reads)
                                and np.array_equal(self.cache_writes, other.cache_writes)))

    __hash__ = None


def check(name: str, N: int, d: int, P: int, heads: int = 1, backward: bool = False,
          grid=None) -> tuple[int, int, int, int, tuple[int, int] | None]:
    """Validate the arguments of :func:`cost` (and of the MPI runs); clear errors naming them."""
    if name not in NAMES:
        raise ValueError(f"unknown parallel algorithm {name!r}; known: {', '.join(NAMES)}")
    N, d, P, heads = as_count(N, "N"), as_count(d, "d"), as_count(P, "P"), as_count(heads, "heads")
    backward = as_flag(backward, "backward")
    if N < P:
        raise ValueError(f"every processor needs at least one row: N = {N} < P = {P}")
    if backward and name not in WITH_BACKWARD:
        raise ValueError(f"{name!r} has no backward pass here; those that do: "
                         f"{', '.join(WITH_BACKWARD)}")
    if name == "all_to_all" and heads < P:
        raise ValueError(f"all_to_all gives each processor whole heads, so it needs heads >= P; "
                         f"got heads = {heads}, P = {P}")
    if grid is not None and name not in SHAPED:
        raise ValueError(f"grid= is an option of {', '.join(map(repr, SHAPED))} only, not of "
                         f"{name!r}")
    if name in SHAPED:
        grid = _shape(name, grid, P, d, heads)
    return N, d, P, heads, grid


def _shape(name: str, grid, P: int, d: int, heads: int) -> tuple[int, ...]:
    """The processor shape of ``"grid"`` ``(P_r, P_c)``, of USP ``(P_u, P_r)`` or of
    ``"usp_grid"`` ``(P_u, P_a, P_b)``, checked."""
    if name == "usp_grid":
        return _usp_grid_shape(grid, P, d, heads)
    pair = "(P_r, P_c)" if name == "grid" else "(P_u, P_r)"
    if grid is None:
        grid = grid_shape(P, d) if name == "grid" else usp_shape(P, heads)
    try:
        a, b = (as_count(g, "grid side") for g in grid)
    except TypeError:
        raise TypeError(f"grid must be a pair {pair}, got {grid!r}") from None
    if a * b != P:
        raise ValueError(f"a {a} x {b} grid has {a * b} processors, not P = {P}")
    if name != "grid" and heads < a:
        raise ValueError(f"{name} splits the heads among P_u = {a} processors, so it needs "
                         f"heads >= P_u; got heads = {heads}")
    return a, b


def _usp_grid_shape(grid, P: int, d: int, heads: int) -> tuple[int, int, int]:
    """``(P_u, P_a, P_b)`` of ``"usp_grid"``: given, or from ``(P_u, P_r)`` (default
    :func:`~.layout.usp_shape`) with the grid :func:`~.layout.grid_shape` ``(P_r, d)``."""
    if grid is None:
        grid = usp_shape(P, heads)
    what = "grid must be (P_u, P_r) or (P_u, P_a, P_b)"
    try:
        sides = [as_count(g, "grid side") for g in grid]
    except TypeError:
        raise TypeError(f"{what}, got {grid!r}") from None
    if len(sides) not in (2, 3):
        raise ValueError(f"{what}, got {grid!r}")
    if len(sides) == 2:             # (P_u, P_r): the groups in the grid of least traffic
        if sides[0] * sides[1] != P:
            raise ValueError(f"a {sides[0]} x {sides[1]} shape has {sides[0] * sides[1]} "
                             f"processors, not P = {P}")
        sides = [sides[0], *grid_shape(sides[1], d)]
    P_u, P_a, P_b = sides
    if P_u * P_a * P_b != P:
        raise ValueError(f"a {' x '.join(map(str, sides))} shape has {P_u * P_a * P_b} "
                         f"processors, not P = {P}")
    if heads < P_u:
        raise ValueError(f"usp_grid splits the heads among P_u = {P_u} processors, so it needs "
                         f"heads >= P_u; got heads = {heads}")
    return P_u, P_a, P_b


def pairs(qrows, krows, causal: bool) -> int:
    """Score entries between two sets of rows (arrays of global indices, increasing): all of them,
    or those with key index at most the query index under a causal mask. Used by the tests as the
    definition; :func:`cost` uses the closed forms below."""
    if not causal:
        return len(qrows) * len(krows)
    return int(np.searchsorted(krows, qrows, side="right").sum())


def _contiguous_pairs(n_q: int, n_k: int, q: int, k: int, causal: bool) -> int:
    """Pairs between contiguous chunks ``q`` and ``k`` (chunk ``k`` before ``q`` when ``k < q``)."""
    if not causal or k < q:
        return n_q * n_k
    return n_q * (n_q + 1) // 2 if k == q else 0


def _striped_pairs(n_q: int, n_k: int, q: int, k: int, causal: bool) -> int:
    """Pairs between stripes ``q`` (rows ``q + aP``) and ``k`` (rows ``k + bP``): key ``k + bP <=
    q + aP`` iff ``b <= a`` when ``k <= q``, ``b <= a - 1`` when ``k > q``. The sum over ``a`` of
    ``min(a + off, n_k)`` is ``c (c - 1) / 2 + off c + (n_q - c) n_k`` with ``c = min(n_q, n_k -
    off + 1)`` the terms below the cap."""
    if not causal:
        return n_q * n_k
    off = 1 if k <= q else 0
    c = min(n_q, n_k - off + 1)
    return c * (c - 1) // 2 + off * c + (n_q - c) * n_k


def cost(name: str, N: int, d: int, P: int, *, heads: int = 1, causal: bool = False,
         backward: bool = False, grid=None, M: int | None = None) -> ParallelCost:
    """The exact words, messages, memory and work of ``name`` on ``P`` processors.

    Parameters
    ----------
    name : {"ring", "striped", "all_to_all", "grid", "zigzag", "all_gather", "usp", \
"usp_zigzag", "usp_grid"}
    N, d : int
        Sequence length and head dimension; ``N >= P``.
    P : int
        Processors.
    heads : int
        Heads ``H``, each with its own ``Q, K, V`` (``all_to_all`` needs ``H >= P``).
    causal : bool
        The causal mask: only ``work`` changes (every algorithm here moves the same words).
    backward : bool
        The backward pass (every algorithm has one: :data:`WITH_BACKWARD`).
    grid : (int, int), optional
        ``(P_r, P_c)`` for ``"grid"``, default :func:`~.layout.grid_shape` ``(P, d)``;
        ``(P_u, P_r)`` for ``"usp"`` and ``"usp_zigzag"``, default :func:`~.layout.usp_shape`
        ``(P, heads)``.
    M : int, optional
        A cache of ``M`` entries in every processor: also count the entries between each
        processor's memory and its cache, FlashAttention-2 on every step's block, and for
        ``"grid"`` and ``"usp_grid"`` the merge of the partial outputs by log-sum-exp
        through the cache (:mod:`~ioattn.parallel.two_level`; every algorithm's forward pass,
        ``M >= 4d + 4``, and every algorithm's backward pass, the FlashAttention backward on
        every step's block and the additions of the reduce-scatters of ``"all_gather"``,
        ``"grid"`` and ``"usp_grid"``, ``M >= 7d + 4``).

    Returns
    -------
    ParallelCost

    Examples
    --------
    >>> c = cost("ring", 4096, 64, 8)
    >>> c.max_received == 2 * 64 * (4096 - 512), c.max_messages
    (True, 7)
    >>> cost("grid", 4096, 64, 16).max_traffic < c.max_traffic
    True
    """
    N, d, P, H, grid = check(name, N, d, P, heads, backward, grid)
    causal = as_flag(causal, "causal")
    if M is not None:
        M = check_M(name, d, M, backward)
    dtype = _dtype(N, d, H)
    if name in ("ring", "striped"):
        parts = _ring(shares(N, P).astype(dtype), N, d, P, H, causal, backward,
                      name == "striped")
    elif name == "zigzag":
        parts = _ring(sizes(N, P, "zigzag").astype(dtype), N, d, P, H, causal, backward, False,
                      work=_zigzag_work(shares(N, 2 * P).astype(dtype), P, H, causal))
    elif name == "all_gather":
        parts = _all_gather(N, d, P, H, causal, backward)
    elif name == "usp":
        parts = _usp([int(x) for x in shares(N, P)], N, d, P, H, causal, grid,
                     backward=backward)
    elif name == "usp_zigzag":
        parts = _usp([int(x) for x in group_sizes(N, grid)], N, d, P, H, causal, grid,
                     chunks=[int(x) for x in shares(N, 2 * grid[1])], backward=backward)
    elif name == "usp_grid":
        parts = _usp_grid([int(x) for x in shares(N, P)], N, d, P, H, causal, grid, backward)
    elif name == "all_to_all":
        parts = _all_to_all([int(x) for x in shares(N, P)], N, d, P, H, causal, backward)
    else:
        parts = _grid([int(x) for x in shares(N, P)], N, d, P, H, causal, grid, backward)
    sent, received, messages, memory, work = (np.asarray(x, dtype) for x in parts)
    cache = (None, None)
    if M is not None:
        cache = cache_io(name, N, d, P, M, heads=H, causal=causal, grid=grid,
                         backward=backward)
        wide = max(map(max, cache)) >= _INT64_SAFE      # beyond int64: Python ints
        cache = tuple(np.asarray(x, object if wide else np.int64) for x in cache)
    return ParallelCost(name, N, d, P, H, causal, backward, grid, sent, received, messages,
                        memory, work.reshape(P, -1), M, *cache)


#: Below this every count fits an int64 with room to spare (a sum of two of them still fits).
_INT64_SAFE = 1 << 62


def _dtype(N: int, d: int, H: int):
    """int64 when every count of :func:`cost` is below ``2^62``, else ``object`` (Python ints).

    The largest counts are the work ``H N^2`` and the words held or sent, below
    ``(18d + 4) H N`` (USP's backward pass; ``d >= 1``, so ``32 d H N`` bounds those)."""
    return np.int64 if max(H * N * N, 32 * d * H * N) < _INT64_SAFE else object


def _ring(n, N, d, P, H, causal, backward, striped, work=None):
    """The ring's counts for every processor at once: ``n`` the shares (int64, or Python ints
    in an object array), ``held[p, s] = j_s`` the block processor ``p`` holds at step ``s``;
    ``work``, when given, replaces the ring's work (the zigzag layout's)."""
    p = np.arange(P)
    held = (p[:, None] - p[None, :]) % P                            # j_s
    n_p, n_j = n[:, None], n[held]
    if work is None:
        work = _ring_work(n_p, n_j, held, p, H, causal, striped)
    nxt = np.roll(n, -1)                                            # n_{p+1}
    zero = 0 * n_p
    if backward:
        base = (6 * d + 2) * H * n                           # Q, K, V, O, dO, dQ; L, D
        cur = 4 * d * H * n_j                                # (K_j, V_j, dK_j, dV_j)
        inc = np.concatenate([4 * d * H * n_j[:, 1:], 2 * d * H * n_p], axis=1) if P > 1 \
            else zero                                        # the next block / dK_p, dV_p
        sent = 4 * d * H * (N - nxt) + 2 * d * H * nxt if P > 1 else 0 * n
        received = 4 * d * H * (N - n) + 2 * d * H * n if P > 1 else 0 * n
        messages = np.full(P, P if P > 1 else 0)
    else:
        base = (4 * d + 2) * H * n                           # Q, K, V, O; m, l
        cur = np.concatenate([zero, 2 * d * H * n_j[:, 1:]], axis=1)
        inc = np.concatenate([2 * d * H * n_j[:, 1:], zero], axis=1)
        sent, received = 2 * d * H * (N - nxt), 2 * d * H * (N - n)
        messages = np.full(P, P - 1)
    memory = base + (cur + inc).max(axis=1)
    return sent, received, messages, memory, work


def _ring_work(n_p, n_j, held, p, H, causal, striped):
    """``work[p, s]`` of the ring (contiguous) or striped attention (striped)."""
    if not causal:
        return H * (n_p * n_j)
    if striped:
        off = (held <= p[:, None]).astype(n_p.dtype)
        c = np.minimum(n_p, n_j - off + 1)
        return H * (c * (c - 1) // 2 + off * c + (n_p - c) * n_j)
    return H * np.where(held < p[:, None], n_p * n_j,
                        np.where(held == p[:, None], n_p * (n_p + 1) // 2, 0 * n_j))


def _chunk_pairs(c, a, b):
    """Causal pairs between contiguous chunks ``a`` (queries) and ``b`` (keys) of sizes ``c``,
    elementwise over index arrays: ``c_a c_b`` when ``b < a``, ``c_a (c_a + 1) / 2`` when
    ``b = a``, none when ``b > a``."""
    ca, cb = c[a], c[b]
    return np.where(b < a, ca * cb, np.where(b == a, ca * (ca + 1) // 2, 0 * cb))


def _zigzag_work(c, P, H, causal):
    """``work[p, s]`` of the zigzag ring: ``c`` the ``2P`` chunk sizes, processor ``p`` holding
    chunks ``p, 2P - 1 - p`` and at step ``s`` the block of processor ``j_s``."""
    p = np.arange(P)
    held = (p[:, None] - p[None, :]) % P
    mine = [np.broadcast_to(p[:, None], held.shape), np.broadcast_to(2 * P - 1 - p[:, None],
                                                                       held.shape)]
    theirs = [held, 2 * P - 1 - held]
    if not causal:
        n = c[:P] + c[::-1][:P]
        return H * (n[:, None] * n[held])
    return H * sum(_chunk_pairs(c, a, b) for a in mine for b in theirs)


def _all_gather(N, d, P, H, causal, backward=False):
    """All-gather of ``K, V`` on the zigzag layout (module docstring); ``backward``: the
    gradients, with the ring reduce-scatter of ``dK, dV``."""
    c = [int(x) for x in shares(N, 2 * P)]
    o = [int(x) for x in offsets(N, 2 * P)]
    n = [int(x) for x in sizes(N, P, "zigzag")]
    sent = [2 * d * H * n[p] * (P - 1) for p in range(P)]
    received = [2 * d * H * (N - n[p]) for p in range(P)]
    messages = [P - 1] * P
    if backward:    # the reduce-scatter: p sends every block's sum but its own, receives all
        sent = [sent[p] + 2 * d * H * (N - n[p]) for p in range(P)]      # but p - 1's
        received = [received[p] + 2 * d * H * (N - n[p - 1]) for p in range(P)]
        messages = [2 * (P - 1)] * P
        arriving = [max((n[(p - s - 2) % P] for s in range(P - 1)), default=0)
                    for p in range(P)]                  # the largest sum received
        memory = [(6 * d + 2) * H * n[p] + 2 * d * H * N
                  + 2 * d * H * max(N - n[p], arriving[p]) for p in range(P)]
    else:
        memory = [(4 * d + 2) * H * n[p] + 2 * d * H * (N - n[p]) for p in range(P)]
    if causal:      # chunk a sees the o_a rows before it and its own triangle
        work = [[H * sum(c[a] * o[a] + c[a] * (c[a] + 1) // 2 for a in (p, 2 * P - 1 - p))]
                for p in range(P)]
    else:
        work = [[H * n[p] * N] for p in range(P)]
    return sent, received, messages, memory, work


def _usp(n, N, d, P, H, causal, grid, chunks=None, backward=False):
    """Ulysses groups x ring (module docstring): ``grid = (P_u, P_r)``, ``p = r P_u + u``, ``n``
    the shares; ``chunks``: the ``2 P_r`` chunk sizes of the zigzag ring across the groups;
    ``backward``: the gradients (:func:`_usp_backward`)."""
    if backward:
        return _usp_backward(n, N, d, P, H, causal, grid, chunks)
    P_u, P_r = grid
    h = [int(x) for x in shares(H, P_u)]
    N_g = [sum(n[r * P_u: (r + 1) * P_u]) for r in range(P_r)]          # N_r
    sent, received, memory, work = [], [], [], []
    for p in range(P):
        r, u = divmod(p, P_u)
        hu, Nr, nxt = h[u], N_g[r], N_g[(r + 1) % P_r]
        sent.append(3 * d * n[p] * (H - hu) + d * hu * (Nr - n[p]) + 2 * d * hu * (N - nxt))
        received.append(3 * d * hu * (Nr - n[p]) + d * n[p] * (H - hu) + 2 * d * hu * (N - Nr))
        held = [(r - s) % P_r for s in range(P_r)]                      # the ring's j_s
        ring = 0
        if P_r > 1:     # the group's K, V block, and the blocks held and arriving at each step
            ring = 2 * d * hu * Nr + max(2 * d * hu * ((N_g[held[s]] if s else 0)
                                                       + (N_g[held[s + 1]] if s < P_r - 1
                                                          else 0)) for s in range(P_r))
        compute = 3 * d * hu * (Nr - n[p]) + (d + 2) * hu * Nr + ring
        memory.append(3 * d * H * n[p] + max(compute, d * hu * Nr + d * H * n[p]))
        work.append([hu * _group_pairs(N_g, chunks, r, j, causal) for j in held])
    return sent, received, [2 * (P_u - 1) + (P_r - 1)] * P, memory, work


def _usp_backward(n, N, d, P, H, causal, grid, chunks=None):
    """USP's backward pass (module docstring): the all-to-all of ``Q, K, V, dO, L, D``, the
    ring's backward across the groups on the group blocks, the all-to-all of ``dQ, dK, dV``."""
    P_u, P_r = grid
    h = [int(x) for x in shares(H, P_u)]
    N_g = [sum(n[r * P_u: (r + 1) * P_u]) for r in range(P_r)]          # N_r
    sent, received, memory, work = [], [], [], []
    for p in range(P):
        r, u = divmod(p, P_u)
        hu, Nr, nxt = h[u], N_g[r], N_g[(r + 1) % P_r]
        held = [(r - s) % P_r for s in range(P_r)]                      # the ring's j_s
        ring_sent = ring_received = 0
        if P_r > 1:
            ring_sent = 4 * d * hu * (N - nxt) + 2 * d * hu * nxt
            ring_received = 4 * d * hu * (N - Nr) + 2 * d * hu * Nr
        sent.append((4 * d + 2) * n[p] * (H - hu) + ring_sent + 3 * d * hu * (Nr - n[p]))
        received.append((4 * d + 2) * hu * (Nr - n[p]) + ring_received
                        + 3 * d * n[p] * (H - hu))
        # the block held (K, V, dK, dV) and the next one arriving, or dK, dV coming home
        ring = max(4 * d * hu * (N_g[held[s]] + (N_g[held[s + 1]] if s < P_r - 1 else 0))
                   + (2 * d * hu * Nr if s == P_r - 1 and P_r > 1 else 0)
                   for s in range(P_r))
        compute = (4 * d + 2) * hu * (Nr - n[p]) + d * hu * Nr + ring
        back = d * hu * Nr + (2 if P_r > 1 else 4) * d * hu * Nr + 3 * d * H * n[p] \
            + 3 * d * hu * (Nr - n[p])
        memory.append((5 * d + 2) * H * n[p] + max(compute, back))
        work.append([hu * _group_pairs(N_g, chunks, r, j, causal) for j in held])
    messages = 2 * (P_u - 1) + (P_r if P_r > 1 else 0)
    return sent, received, [messages] * P, memory, work


def _group_pairs(N_g, chunks, r, j, causal) -> int:
    """Scores between the rows of groups ``r`` (queries) and ``j`` (keys): contiguous groups of
    ``N_g`` rows, or (``chunks`` given) the zigzag groups of the ring across them."""
    if chunks is None:
        return _contiguous_pairs(N_g[r], N_g[j], r, j, causal)
    last = len(chunks) - 1
    return sum(_contiguous_pairs(chunks[a], chunks[b], a, b, causal)
               for a in (r, last - r) for b in (j, last - j))


def _usp_grid_places(n, P, H, causal, grid):
    """For every processor ``p = r P_u + u`` (``r = a P_b + b``) of head groups x grid: ``p``,
    its heads ``h_u``, its group's rows ``N_r``, the rows ``N_a`` of its query block (the
    groups ``a P_b + c``) and ``N^b`` of its key block (the groups ``a' P_b + b``), and the
    scores it computes."""
    P_u, P_a, P_b = grid
    h = [int(x) for x in shares(H, P_u)]
    N_g = [sum(n[r * P_u: (r + 1) * P_u]) for r in range(P_a * P_b)]      # N_r
    for p in range(P):
        r, u = divmod(p, P_u)
        a, b = divmod(r, P_b)
        qs = [a * P_b + c for c in range(P_b)]
        ks = [g * P_b + b for g in range(P_a)]
        yield (p, h[u], N_g[r], sum(N_g[q] for q in qs), sum(N_g[k] for k in ks),
               h[u] * sum(_contiguous_pairs(N_g[q], N_g[k], q, k, causal)
                          for q in qs for k in ks))


def _usp_grid(n, N, d, P, H, causal, grid, backward=False):
    """Head groups x grid (module docstring): ``grid = (P_u, P_a, P_b)``, ``p = r P_u + u``,
    ``r = a P_b + b``; the grid scheme's counts on the groups, with ``N_r`` for ``n_p`` and the
    ``h_u`` heads, beside USP's two all-to-alls; ``backward``: the gradients
    (:func:`_usp_grid_backward`)."""
    if backward:
        return _usp_grid_backward(n, N, d, P, H, causal, grid)
    P_u, P_a, P_b = grid
    sent, received, memory, work = [], [], [], []
    for p, hu, Nr, N_a, N_b, work_p in _usp_grid_places(n, P, H, causal, grid):
        sent.append(3 * d * n[p] * (H - hu) + d * hu * (Nr - n[p])
                    + d * hu * Nr * (P_b - 1) + 2 * d * hu * Nr * (P_a - 1)
                    + (d + 1) * hu * (N_a - Nr))
        received.append(3 * d * hu * (Nr - n[p]) + d * n[p] * (H - hu)
                        + d * hu * (N_a - Nr) + 2 * d * hu * (N_b - Nr)
                        + (d + 1) * hu * Nr * (P_b - 1))
        compute = d * hu * (N_a - Nr) + 2 * d * hu * (N_b - Nr) + (d + 3) * hu * N_a
        merge = (d + 1) * hu * N_a + (d + 1) * hu * Nr * (P_b - 1) + d * hu * Nr
        memory.append(3 * d * H * n[p] + max(
            6 * d * hu * Nr - 3 * d * hu * n[p],            # the pieces, copied to Q_r, K_r, V_r
            3 * d * hu * Nr + max(compute, merge),          # the grid on them
            2 * d * hu * Nr,                                # O_r cut into the pieces to return
            d * hu * Nr + d * H * n[p]))                    # the rows of O arriving
        work.append([work_p])
    return sent, received, [2 * (P_u - 1) + 2 * (P_b - 1) + (P_a - 1)] * P, memory, work


def _usp_grid_backward(n, N, d, P, H, causal, grid):
    """Head groups x grid, backward (module docstring): USP's all-to-all of ``Q, K, V, dO, L,
    D``, the grid's backward pass on the groups (``N_r`` for ``n_p``, ``h_u`` heads), the
    all-to-all of ``dQ, dK, dV``."""
    P_u, P_a, P_b = grid
    sent, received, messages, memory, work = [], [], [], [], []
    for p, hu, Nr, N_a, N_b, work_p in _usp_grid_places(n, P, H, causal, grid):
        s, rv, m, held = _grid_backward_words(Nr, N_a, N_b, d, hu, P_a, P_b)
        sent.append((4 * d + 2) * n[p] * (H - hu) + s + 3 * d * hu * (Nr - n[p]))
        received.append((4 * d + 2) * hu * (Nr - n[p]) + rv + 3 * d * n[p] * (H - hu))
        messages.append(2 * (P_u - 1) + m)
        memory.append((5 * d + 2) * H * n[p] + max(
            (4 * d + 2) * hu * (2 * Nr - n[p]),         # the pieces, copied to the group's
            (4 * d + 2) * hu * Nr + held,               # the grid's backward on them
            3 * d * hu * Nr + 3 * d * H * n[p] + 3 * d * hu * (Nr - n[p])))   # and back
        work.append([work_p])
    return sent, received, messages, memory, work


def _all_to_all(n, N, d, P, H, causal, backward=False):
    """Head parallelism (module docstring); ``backward``: USP's backward pass at ``P_r = 1``
    (:func:`_usp_backward` on the shape ``(P, 1)``), the same program."""
    if backward:
        return _usp_backward(n, N, d, P, H, causal, (P, 1))
    h = [int(x) for x in shares(H, P)]
    Z = N * (N + 1) // 2 if causal else N * N
    sent = [3 * d * n[p] * (H - h[p]) + d * h[p] * (N - n[p]) for p in range(P)]
    received = [3 * d * h[p] * (N - n[p]) + d * n[p] * (H - h[p]) for p in range(P)]
    memory = [3 * d * H * n[p] + max(3 * d * h[p] * (N - n[p]) + (d + 2) * h[p] * N,
                                     d * h[p] * N + d * H * n[p]) for p in range(P)]
    return sent, received, [2 * (P - 1)] * P, memory, [[h[p] * Z] for p in range(P)]


def _grid_backward_words(n, N_a, N_b, d, H, P_r, P_c):
    """The grid's backward pass at one place (module docstring): words sent and received,
    messages and the largest number of words held beyond the place's own inputs, for ``n`` own
    rows, query block ``N_a``, key block ``N_b`` and ``H`` heads."""
    sent = (2 * d + 2) * H * n * (P_c - 1) + 2 * d * H * n * (P_r - 1) \
        + d * H * (N_a - n) + 2 * d * H * (N_b - n)
    received = (2 * d + 2) * H * (N_a - n) + 2 * d * H * (N_b - n) \
        + d * H * n * (P_c - 1) + 2 * d * H * n * (P_r - 1)
    compute = (2 * d + 2) * H * (N_a - n) + 2 * d * H * (N_b - n) + d * H * N_a + 2 * d * H * N_b
    sum_dQ = d * H * N_a + 2 * d * H * N_b + d * H * n * (P_c - 1)
    sum_dKV = d * H * n + 2 * d * H * N_b + 2 * d * H * n * (P_r - 1)
    return sent, received, 2 * (P_c - 1) + 2 * (P_r - 1), max(compute, sum_dQ, sum_dKV)


def _grid(n, N, d, P, H, causal, grid, backward=False):
    """The grid (module docstring): ``grid = (P_r, P_c)``, ``p = a P_c + b``; ``backward``: the
    gradients (:func:`_grid_backward`)."""
    if backward:
        return _grid_backward(n, N, d, P, H, causal, grid)
    P_r, P_c = grid
    sent, received, messages, memory, work = [], [], [], [], []
    for p in range(P):
        a, b = divmod(p, P_c)
        qs = [a * P_c + c for c in range(P_c)]                  # chunks of query block a
        ks = [r * P_c + b for r in range(P_r)]                  # chunks of key block b
        N_a, N_b = sum(n[q] for q in qs), sum(n[k] for k in ks)
        sent.append(d * H * n[p] * (P_c - 1) + 2 * d * H * n[p] * (P_r - 1)
                    + (d + 1) * H * (N_a - n[p]))
        received.append(d * H * (N_a - n[p]) + 2 * d * H * (N_b - n[p])
                        + (d + 1) * H * n[p] * (P_c - 1))
        messages.append(2 * (P_c - 1) + (P_r - 1))
        # received Q and K, V blocks; the partial (O, L) of block a; m, l
        compute = d * H * (N_a - n[p]) + 2 * d * H * (N_b - n[p]) + (d + 3) * H * N_a
        merge = (d + 1) * H * N_a + (d + 1) * H * n[p] * (P_c - 1) + d * H * n[p]
        memory.append(3 * d * H * n[p] + max(compute, merge))
        work.append([H * sum(_contiguous_pairs(n[q], n[k], q, k, causal)
                             for q in qs for k in ks)])
    return sent, received, messages, memory, work


def _grid_backward(n, N, d, P, H, causal, grid):
    """The grid's backward pass (module docstring): the gathers of ``Q, dO, L, D`` along the
    row and of ``K, V`` along the column, the reduce-scatters of ``dQ`` along the row and of
    ``dK, dV`` along the column; the forward pass's work."""
    P_r, P_c = grid
    sent, received, messages, memory = [], [], [], []
    for p in range(P):
        a, b = divmod(p, P_c)
        N_a = sum(n[a * P_c + c] for c in range(P_c))           # query block a
        N_b = sum(n[r * P_c + b] for r in range(P_r))           # key block b
        s, r, m, held = _grid_backward_words(n[p], N_a, N_b, d, H, P_r, P_c)
        sent.append(s)
        received.append(r)
        messages.append(m)
        memory.append((5 * d + 2) * H * n[p] + held)    # O, the packed Q, dO, L, D, and K, V
    return sent, received, messages, memory, _grid(n, N, d, P, H, causal, grid)[4]


def sweep(N: int, d: int, Ps, *, heads: int = 1, causal: bool = False,
          backward: bool = False, names=ALGORITHMS) -> dict[str, list[ParallelCost | None]]:
    """:func:`cost` of every algorithm of ``names`` (default the four of :data:`ALGORITHMS`;
    :data:`NAMES` for every one) at every ``P`` in ``Ps``; None where it does not apply
    (``all_to_all`` with fewer heads than processors, a backward pass it lacks, ``N < P``)."""
    out = {}
    for name in names:
        row = []
        for P in Ps:
            try:
                row.append(cost(name, N, d, P, heads=heads, causal=causal, backward=backward))
            except ValueError:
                row.append(None)
        out[name] = row
    return out


#: The algorithms whose forward pass passes blocks of ``K, V`` round a ring, one per step.
RINGS = ("ring", "striped", "zigzag", "usp", "usp_zigzag")


def step_words(name: str, N: int, d: int, P: int, *, heads: int = 1, grid=None) -> np.ndarray:
    """Words processor ``p`` sends at each step of the forward ring of ``name`` (:data:`RINGS`),
    ``P x steps`` like ``cost(...).work``: the block ``K_j, V_j`` it holds at step ``s``
    (``j_s = p - s`` mod the ring), none at the last step. For USP the ring is the one across the
    ``P_r`` groups, blocks of ``2 d h_u N_j`` words; the all-to-alls are not steps. Summed over
    the steps: the ring's ``sent`` (for USP, its ring part)."""
    if name not in RINGS:
        raise ValueError(f"{name!r} has no ring of K, V blocks; those that do: "
                         f"{', '.join(RINGS)}")
    N, d, P, H, grid = check(name, N, d, P, heads, False, grid)
    if name in ("usp", "usp_zigzag"):
        P_u, P_r = grid
        n = [int(x) for x in (shares(N, P) if name == "usp" else group_sizes(N, grid))]
        h = [int(x) for x in shares(H, P_u)]
        block = [[2 * d * h[u] * sum(n[g * P_u: (g + 1) * P_u]) for g in range(P_r)]
                 for u in range(P_u)]
        words = [[block[p % P_u][(p // P_u - s) % P_r] if s < P_r - 1 else 0
                  for s in range(P_r)] for p in range(P)]
    else:
        n = [int(x) for x in (sizes(N, P, "zigzag") if name == "zigzag" else shares(N, P))]
        words = [[2 * d * H * n[(p - s) % P] if s < P - 1 else 0 for s in range(P)]
                 for p in range(P)]
    return np.asarray(words, _dtype(N, d, H))
