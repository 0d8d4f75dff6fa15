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

Every count is an exact integer: the arrays are int64 where no count can reach ``2^62``, and
arrays of Python ints beyond (``N = 10^9`` and more), so nothing overflows.

References
----------
.. [RING] H. Liu, M. Zaharia, P. Abbeel, "Ring attention with blockwise transformers for
   near-infinite context", arXiv:2310.01889 (2023).
.. [STRIPE] W. Brandon et al., "Striped attention: faster ring attention for causal
   transformers", arXiv:2311.09431 (2023).
.. [ULYSSES] S. A. Jacobs et al., "DeepSpeed Ulysses: system optimizations for enabling training
   of extreme long sequence transformer models", arXiv:2309.14509 (2023).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import as_count, as_flag
from .layout import grid_shape, shares

__all__ = ["ALGORITHMS", "BACKWARD", "ParallelCost", "as_flag", "check", "cost", "pairs",
           "sweep"]

#: The algorithms, in the order the book introduces them.
ALGORITHMS = ("ring", "striped", "all_to_all", "grid")
#: Those with a backward pass.
BACKWARD = ("ring", "striped")
#: The layout of the rows each algorithm uses.
LAYOUT = {"ring": "contiguous", "striped": "striped", "all_to_all": "contiguous",
          "grid": "contiguous"}


@dataclass(frozen=True, eq=False)
class ParallelCost:
    """The exact communication of one algorithm on ``P`` processors (see the module docstring).

    ``sent``, ``received``, ``messages`` and ``memory`` are integer arrays of length ``P``
    (int64, or Python ints where int64 could overflow); ``work`` is ``P x steps`` (``steps = P``
    for the rings, 1 otherwise): the score entries each processor computes at each step.
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
             self.grid) == (other.name, other.N, other.d, other.P, other.heads, other.causal,
                            other.backward, other.grid)

    __hash__ = None


def check(name: str, N: int, d: int, P: int, heads: int = 1, backward: bool = False,
          grid=None) -> tuple[int, int, int, int, tuple[int, int] | None]:
    """Validate the arguments of :func:`cost` (and of the MPI runs); clear errors naming them."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown parallel algorithm {name!r}; known: {', '.join(ALGORITHMS)}")
    N, d, P, heads = as_count(N, "N"), as_count(d, "d"), as_count(P, "P"), as_count(heads, "heads")
    backward = as_flag(backward, "backward")
    if N < P:
        raise ValueError(f"every processor needs at least one row: N = {N} < P = {P}")
    if backward and name not in BACKWARD:
        raise ValueError(f"{name!r} has no backward pass here; those that do: "
                         f"{', '.join(BACKWARD)}")
    if name == "all_to_all" and heads < P:
        raise ValueError(f"all_to_all gives each processor whole heads, so it needs heads >= P; "
                         f"got heads = {heads}, P = {P}")
    if grid is not None and name != "grid":
        raise ValueError(f"grid= is an option of 'grid' only, not of {name!r}")
    if name == "grid":
        if grid is None:
            grid = grid_shape(P, d)
        try:
            P_r, P_c = (as_count(g, "grid side") for g in grid)
        except TypeError:
            raise TypeError(f"grid must be a pair (P_r, P_c), got {grid!r}") from None
        if P_r * P_c != P:
            raise ValueError(f"a {P_r} x {P_c} grid has {P_r * P_c} processors, not P = {P}")
        grid = (P_r, P_c)
    return N, d, P, heads, grid


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
         backward: bool = False, grid=None) -> ParallelCost:
    """The exact words, messages, memory and work of ``name`` on ``P`` processors.

    Parameters
    ----------
    name : {"ring", "striped", "all_to_all", "grid"}
    N, d : int
        Sequence length and head dimension; ``N >= P``.
    P : int
        Processors.
    heads : int
        Heads ``H``, each with its own ``Q, K, V`` (``all_to_all`` needs ``H >= P``).
    causal : bool
        The causal mask: only ``work`` changes (every algorithm here moves the same words).
    backward : bool
        The backward pass (``"ring"`` and ``"striped"``).
    grid : (int, int), optional
        ``(P_r, P_c)`` for ``"grid"``; default :func:`~.layout.grid_shape` ``(P, d)``.

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
    dtype = _dtype(N, d, H)
    if name in ("ring", "striped"):
        parts = _ring(shares(N, P).astype(dtype), N, d, P, H, causal, backward,
                      name == "striped")
    elif name == "all_to_all":
        parts = _all_to_all([int(x) for x in shares(N, P)], N, d, P, H, causal)
    else:
        parts = _grid([int(x) for x in shares(N, P)], N, d, P, H, causal, grid)
    sent, received, messages, memory, work = (np.asarray(x, dtype) for x in parts)
    return ParallelCost(name, N, d, P, H, causal, backward, grid, sent, received, messages,
                        memory, work.reshape(P, -1))


#: Below this every count fits an int64 with room to spare (a sum of two of them still fits).
_INT64_SAFE = 1 << 62


def _dtype(N: int, d: int, H: int):
    """int64 when every count of :func:`cost` is below ``2^62``, else ``object`` (Python ints).

    The largest counts are the work ``H N^2`` and the words ``(8d + 2) H N`` held or sent
    (``d >= 1``, so ``16 d H N`` bounds those)."""
    return np.int64 if max(H * N * N, 16 * d * H * N) < _INT64_SAFE else object


def _ring(n, N, d, P, H, causal, backward, striped):
    """The ring's counts for every processor at once: ``n`` the shares (int64, or Python ints
    in an object array), ``held[p, s] = j_s`` the block processor ``p`` holds at step ``s``."""
    p = np.arange(P)
    held = (p[:, None] - p[None, :]) % P                            # j_s
    n_p, n_j = n[:, None], n[held]
    if not causal:
        work = H * (n_p * n_j)
    elif striped:
        off = (held <= p[:, None]).astype(n.dtype)
        c = np.minimum(n_p, n_j - off + 1)
        work = H * (c * (c - 1) // 2 + off * c + (n_p - c) * n_j)
    else:
        work = H * np.where(held < p[:, None], n_p * n_j,
                            np.where(held == p[:, None], n_p * (n_p + 1) // 2, 0 * n_j))
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


def _all_to_all(n, N, d, P, H, causal):
    h = [int(x) for x in shares(H, P)]
    Z = N * (N + 1) // 2 if causal else N * N
    sent = [3 * d * n[p] * (H - h[p]) + d * h[p] * (N - n[p]) for p in range(P)]
    received = [3 * d * h[p] * (N - n[p]) + d * n[p] * (H - h[p]) for p in range(P)]
    memory = [3 * d * H * n[p] + max(3 * d * h[p] * (N - n[p]) + (d + 2) * h[p] * N,
                                     d * h[p] * N + d * H * n[p]) for p in range(P)]
    return sent, received, [2 * (P - 1)] * P, memory, [[h[p] * Z] for p in range(P)]


def _grid(n, N, d, P, H, causal, grid):
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


def sweep(N: int, d: int, Ps, *, heads: int = 1, causal: bool = False,
          backward: bool = False) -> dict[str, list[ParallelCost | None]]:
    """:func:`cost` of every algorithm at every ``P`` in ``Ps``; None where it does not apply
    (``all_to_all`` with fewer heads than processors, a backward pass it lacks, ``N < P``)."""
    out = {}
    for name in ALGORITHMS:
        row = []
        for P in Ps:
            try:
                row.append(cost(name, N, d, P, heads=heads, causal=causal, backward=backward))
            except ValueError:
                row.append(None)
        out[name] = row
    return out
