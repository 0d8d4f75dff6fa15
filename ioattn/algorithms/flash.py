"""FlashAttention: tiled attention with the online softmax, in the FA2 and the FA1 loop orders.

``variant="fa2"`` (default), the loop order of [FA2]_: the outer loop runs over blocks of
``B_r`` query rows. ``Q_i`` and the accumulators ``O_i``, ``m_i``, ``l_i`` stay in the cache
while every ``K_j``, ``V_j`` block streams past; ``O_i`` is written once at the end. The cache
holds ``Q_i, O_i`` (``B_r d`` each), ``m_i, l_i`` and one scratch vector (``B_r`` each),
``K_j, V_j`` (``B_c d`` each) and the score block ``S_ij`` (``B_r B_c``)::

    footprint = 2 B_r d + 3 B_r + 2 B_c d + B_r B_c <= M.

Only ``B_r`` moves data (``K`` and ``V`` are read once per query block), so the rule takes the
largest ``B_r`` that leaves room for ``B_c = 1``, then the largest ``B_c``::

    B_r = floor((M - 2d) / (2d + 4)),  B_c = floor((M - 2 B_r d - 3 B_r) / (2d + B_r)),
    I/O = N d + 2 N d ceil(N / B_r)  (reads)  +  N d  (writes),       needs M >= 4d + 4.

``B_r`` is then evened out to ``ceil(N / T_r)`` for the same number ``T_r`` of query blocks (the
I/O is unchanged and the room it frees goes to ``B_c``), and ``B_c`` is capped at ``N``.

Rectangular attention (``N_q = N`` query rows against ``N_k`` keys and values, as in decoding
and chunked prefill; ``make_plan(..., N_k=)``). ``K`` and ``V`` are read once per query block::

    FA2: I/O = N_q d + 2 N_k d ceil(N_q / B_r)  (reads)  +  N_q d  (writes).

The block rule is the one above with each side capped by its own dimension: balancing makes
``B_r = ceil(N_q / T_r)``, at most ``N_q``, and the room the query block does not need goes to
``B_c`` (capped at ``N_k``). A decoding step (``N_q = 1``) thus plans ``B_r = 1`` and
``B_c = min(N_k, floor((M - 2d - 3) / (2d + 1)))``: the cache holds the one query row and as
long a ``K_j, V_j`` block as fits, never a query block of rows that do not exist. Whenever
``B_r >= N_q`` the cache is read exactly once, ``N_q d + 2 N_k d + N_q d`` in all, the trivial
bound (:func:`ioattn.bounds.trivial_lower` with ``N_k``).

Under the causal mask of a chunk at the end of the cache
(:func:`ioattn.masks.causal_chunk`: query ``i`` sees the keys ``j <= N_k - N_q + i``), query
block ``I``, whose last row is ``i_I = min((I + 1) B_r, N_q) - 1``, visits the key blocks up to
the one holding key ``N_k - N_q + i_I``, so FA2 moves::

    reads  = N_q d + 2d sum_{I < T_r} min(N_k, B_c ceil((N_k - N_q + i_I + 1) / B_c)),
    writes = N_q d,

the sum over blocks below in closed form (at ``N_q = 1`` the dense count: a decoding step sees
the whole cache).

``variant="fa1"``, Algorithm 1 of [FA]_: ``B_c = ceil(M / 4d)``, ``B_r = min(B_c, d)``; the outer
loop runs over ``K_j, V_j`` blocks and each inner step reads ``Q_i, O_i, l_i, m_i`` and writes
``O_i, l_i, m_i`` back; ``O = 0, l = 0, m = -inf`` are first written to slow memory. The paper's
rule sizes the four ``d``-wide blocks to fill the cache on their own and leaves no room for
``S_ij``; to run in exactly ``M`` entries, each inner step takes the rows of ``Q_i`` ``R`` at a
time, as many as fit beside ``K_j, V_j``. That moves exactly the entries the paper's step moves::

    footprint = 2 B_c d + R (2d + B_c + 4) <= M,
    reads  = 2 N d + ceil(N / B_c) N (2d + 2),
    writes = N d + 2N + ceil(N / B_c) N (d + 2),

and against ``N_k`` keys ``reads = 2 N_k d + ceil(N_k / B_c) N_q (2d + 2)``, ``writes = N_q d +
2 N_q + ceil(N_k / B_c) N_q (d + 2)``. FA1 keeps the paper's rule ``B_c = ceil(M / 4d)`` at every
shape (it is the paper's algorithm); its inner step takes ``min(R, N_q)`` rows.

``save_lse=True`` also writes the row log-sum-exp ``L = m + log l`` to slow memory, ``N`` more
writes and nothing more held, as the forward of [FA2]_ (Algorithm 1) does for its backward:
FA2 writes ``L_i`` beside ``O_i`` from the ``m_i``, ``l_i`` in the cache; FA1 writes it in the
last inner step that visits the row (``L = +inf`` for a row with nothing to attend to, see
:mod:`ioattn.masks`).

Block-sparse FlashAttention (Section 3.3 and Proposition 4 of [FA]_)
-------------------------------------------------------------------
With a mask (:mod:`ioattn.masks`), a block ``(I, J)`` of ``B_r x B_c`` scores is *nonempty* when
any of its entries is True, and both variants visit only the nonempty blocks: the pair ``K_J,
V_J`` is read, and (FA1) ``Q_I, O_I, l_I, m_I`` read and written, only for them. In a block that
is only partly True the masked scores are set to ``-inf`` in the cache; the online softmax
treats a row whose scores are all ``-inf`` so far as empty (no ``-inf - (-inf)``). Reading the
mask costs nothing (see :mod:`ioattn.masks`). With ``r_I``, ``c_J`` the block sizes and sums over
nonempty blocks::

    FA2: reads  = d sum_{I with a nonempty block} r_I  +  2d sum_{(I, J) nonempty} c_J,
         writes = N d                   (a query block with nothing to attend to: zeros, no read)
    FA1: reads  = 2d sum_{J with a nonempty block} c_J  +  (2d + 2) sum_{(I, J) nonempty} r_I,
         writes = N d + 2N  +  (d + 2) sum_{(I, J) nonempty} r_I,

plus ``N`` writes with ``save_lse``: a sum over blocks, ``Theta(N d + N^2 d^2 s / M)`` for a
fraction ``s`` of nonempty blocks, as Proposition 4 of [FA]_ states. A causal mask about halves the
I/O. The peak is the largest working set of a visited block (or of a query block with nothing
to attend to, which holds only the zeros it writes).

References
----------
.. [FA] T. Dao, D. Y. Fu, S. Ermon, A. Rudra, C. Re, "FlashAttention: fast and memory-efficient
   exact attention with IO-awareness", NeurIPS 2022, Algorithm 1 and Theorem 2; Section 3.3,
   Algorithm 5 and Proposition 4 (block-sparse FlashAttention).
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithm 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._validate import as_count
from ..masks import band_sums
from ..memory import IOCount
from .base import Algorithm, Plan, ceil_div, divide_rows, imax, imin, log_sum_exp, register

VARIANTS = ("fa2", "fa1")


@dataclass(frozen=True)
class FlashPlan(Plan):
    """Block sizes of one FlashAttention run; ``R`` is the row step inside a query block."""

    clipped: ClassVar[dict] = {"B_r": "N", "B_c": "N_k", "R": "N"}   # see MatmulPlan.clipped

    variant: str
    B_r: int
    B_c: int
    R: int

    @property
    def footprint(self) -> int:
        N, d = self.N, self.d
        c = imin(self.B_c, self.N_k)
        if self.variant == "fa2":
            r = imin(self.B_r, N)
            return 2 * r * d + 3 * r + 2 * c * d + r * c
        r = imin(self.R, N)
        return 2 * c * d + r * (2 * d + c + 4)


def _fa1_rows(d: int, B_r: int, B_c: int, M: int) -> int:
    """Rows of ``Q_i`` per FA1 inner step that fit beside ``K_j``, ``V_j`` (0 if none fit)."""
    return imax(0, imin(B_r, (M - 2 * B_c * d) // (2 * d + B_c + 4)))


@register
class Flash(Algorithm):
    """FlashAttention [FA]_, [FA2]_; see the module docstring for the rules and exact costs."""

    name = "flash"
    summary = "FlashAttention: query blocks outer, K/V streamed, online softmax"
    options = {"variant": "fa2", "block": None}
    choices = {"variant": VARIANTS}

    def min_M(self, d, variant="fa2", block=None):
        _check_variant(variant)
        if block is not None:
            B_r, B_c = _block(block)
            if variant == "fa2":
                return 2 * B_r * d + 3 * B_r + 2 * B_c * d + B_r * B_c
            return 2 * B_c * d + 2 * d + B_c + 4
        if variant == "fa2":
            return 4 * d + 4
        # FA1: an inner step of one row fits iff M >= (2d + 1) ceil(M / 4d) + 2d + 4. Within each
        # range of M where ceil(M / 4d) = k this is M >= t_k; from k* on, whole ranges fit.
        k_star = ceil_div(6 * d + 3, 2 * d - 1)
        k = k_star - 1
        if k >= 1:
            start, end, t_k = 4 * d * (k - 1) + 1, 4 * d * k, (2 * d + 1) * k + 2 * d + 4
            if t_k <= end:
                return max(start, t_k)
        return 4 * d * (k_star - 1) + 1

    def describe_rule(self, d, variant="fa2", block=None):
        if block is not None:
            return f"the working set of a {block[0]}x{block[1]} block"
        if variant == "fa2":
            return "B_r = floor((M - 2d)/(2d + 4)) must be at least 1"
        return "with B_c = ceil(M/4d), K_j, V_j and one row of the inner step must fit"

    def make_plan(self, N, d, M, variant="fa2", block=None, *, N_k=None):
        """The block sizes for ``N`` query rows against ``N_k`` keys (``N`` by default); the
        rules of the module docstring, with ``B_r`` at most ``N`` and ``B_c`` at most ``N_k``."""
        N_k = N if N_k is None else N_k
        if variant == "fa2":
            if block is None:
                B_r = (M - 2 * d) // (2 * d + 4)
                B_r = ceil_div(N, ceil_div(N, B_r))          # as many blocks, balanced
                B_c = imin(N_k, (M - 2 * B_r * d - 3 * B_r) // (2 * d + B_r))
            else:
                B_r, B_c = _block(block)
            return FlashPlan(N, d, M, variant, B_r, B_c, B_r, N_k=N_k)
        if block is None:
            B_c = ceil_div(M, 4 * d)
            B_r = imin(B_c, d)
        else:
            B_r, B_c = _block(block)
        return FlashPlan(N, d, M, variant, B_r, B_c, _fa1_rows(d, B_r, B_c, M), N_k=N_k)

    def cost(self, plan: FlashPlan) -> IOCount:
        N, N_k, d = plan.N, plan.N_k, plan.d
        lse = N if plan.save_lse else 0
        if plan.mask is not None:
            return _masked_cost(plan, lse)
        if plan.variant == "fa2":
            reads = N * d + 2 * N_k * d * ceil_div(N, plan.B_r)
            writes = N * d
        else:
            T_c = ceil_div(N_k, plan.B_c)
            reads = 2 * N_k * d + T_c * N * (2 * d + 2)
            writes = N * d + 2 * N + T_c * N * (d + 2)
        return IOCount(reads=reads, writes=writes + lse, peak=plan.footprint)

    def simulate(self, mem, Q, K, V, O, plan: FlashPlan, scale, L=None):
        if plan.save_lse and L is None:
            L = mem.allocate_slow("L", plan.N)
        if plan.variant == "fa2":
            _fa2(mem, Q, K, V, O, L, plan, scale)
        else:
            _fa1(mem, Q, K, V, O, L, plan, scale)


def _masked_cost(plan: FlashPlan, lse: int) -> IOCount:
    """The module docstring's sums over the nonempty blocks, and the peak they reach."""
    N, d = plan.N, plan.d
    if plan.mask.band is not None:         # square: a band (the causal mask and the like)
        return _band_cost(plan, lse)
    blocks = plan.mask.blocks(plan.B_r, plan.B_c)
    act, r, c = blocks.nonempty, blocks.rows, blocks.cols
    rows_visited = act.any(axis=1)
    if plan.variant == "fa2":
        reads = d * int(r[rows_visited].sum()) + 2 * d * int(act.sum(axis=0) @ c)
        writes = N * d
        idle = r[~rows_visited] * d                                    # zeros for O_I
        peak = blocks.largest(lambda r_, c_: 2 * r_ * d + 3 * r_ + 2 * c_ * d + r_ * c_,
                              int(idle.max(initial=0)))                # a visited block
    else:
        visits = int(r @ act.sum(axis=1))                              # sum of r_I, (I, J) visited
        reads = 2 * d * int(c[act.any(axis=0)].sum()) + (2 * d + 2) * visits
        writes = N * d + 2 * N + (d + 2) * visits
        peak = blocks.largest(lambda r_, c_: 2 * c_ * d + min(plan.R, r_) * (2 * d + c_ + 4),
                              min(plan.R, N) * d)                      # init: R rows of zeros
    return IOCount(reads=reads, writes=writes + lse, peak=peak)


def _band_cost(plan: FlashPlan, lse: int) -> IOCount:
    """:func:`_masked_cost` under a band mask (:attr:`~ioattn.masks.Mask.band`: the causal mask,
    a sliding window, their transposes), in closed form from the block sizes
    (:func:`~ioattn.masks.band_sums`: Python ints, no array, any ``N``). A band holds the
    diagonal, so every block row and column is visited, and block ``(0, 0)``, of the largest
    sides, is visited and sets the peak. FA2 reads ``Q`` once and ``K_J, V_J`` once per visit
    (the sum of ``c_J``); FA1 reads ``K, V`` once and moves ``Q_I, O_I, l_I, m_I`` once per
    visit (the sum of ``r_I``). The tests check both against a plain boolean mask."""
    N, d = plan.N, plan.d
    sums = band_sums(N, plan.B_r, plan.B_c, *plan.mask.band)
    R, C = min(plan.B_r, N), min(plan.B_c, N)
    if plan.variant == "fa2":
        return IOCount(reads=d * N + 2 * d * sums.cols, writes=N * d + lse,
                       peak=2 * R * d + 3 * R + 2 * C * d + R * C)
    rows = min(plan.R, N)
    return IOCount(reads=2 * d * N + (2 * d + 2) * sums.rows,
                   writes=N * d + 2 * N + (d + 2) * sums.rows + lse,
                   peak=max(2 * C * d + min(plan.R, R) * (2 * d + C + 4), rows * d))


def _block(block):
    """``block`` as two positive ints ``(B_r, B_c)``."""
    try:
        if isinstance(block, (str, bytes)):      # "88" would unpack letter by letter
            raise TypeError
        B_r, B_c = block
    except (TypeError, ValueError):
        raise TypeError(f"block must be a pair (B_r, B_c), got {block!r}") from None
    return as_count(B_r, "B_r"), as_count(B_c, "B_c")


def _check_variant(variant):
    if variant not in VARIANTS:
        raise ValueError(f"flash variant must be one of {', '.join(VARIANTS)}; got {variant!r}")


def _blocks(plan):
    """The mask's nonempty and full ``B_r x B_c`` blocks, or None without a mask."""
    return None if plan.mask is None else plan.mask.blocks(plan.B_r, plan.B_c)


def _empty_rows(mem, O, L, rows, r, d):
    """Rows with nothing to attend to: ``O = 0`` (and ``L = +inf``) written, nothing read."""
    zeros = mem.allocate((r, d), "O_i = 0")
    mem.write(O, zeros, rows)
    if L is not None:
        zeros[:, 0] = np.inf
        mem.write(L, zeros[:, 0], rows)
    mem.free(zeros)


def _fa2(mem, Q, K, V, O, L, plan, scale):
    N, d = plan.N, plan.d
    blocks = _blocks(plan)
    for bi, i0 in enumerate(range(0, N, plan.B_r)):
        rows = slice(i0, min(i0 + plan.B_r, N))
        if blocks is not None and not blocks.nonempty[bi].any():
            _empty_rows(mem, O, L, rows, rows.stop - i0, d)
            continue
        Q_i = mem.read(Q, rows)
        Q_i *= scale                      # fold tau into Q_i: S_ij = tau Q_i K_j^T
        r = Q_i.shape[0]
        O_i = mem.allocate((r, d), "O_i")
        m_i = mem.allocate(r, "m_i", fill=-np.inf)
        l_i = mem.allocate(r, "l_i")
        m_new = mem.allocate(r, "m_new", fill=None)
        for bj, j0 in enumerate(range(0, plan.N_k, plan.B_c)):
            if blocks is not None and not blocks.nonempty[bi, bj]:
                continue                  # block-sparse: an empty block is not visited
            cols = slice(j0, min(j0 + plan.B_c, plan.N_k))
            K_j, V_j = mem.read(K, cols), mem.read(V, cols)
            S_ij = mem.allocate((r, K_j.shape[0]), "S_ij", fill=None)
            np.matmul(Q_i, K_j.T, out=S_ij)
            partial = blocks is not None and not blocks.full[bi, bj]
            if partial:
                np.copyto(S_ij, -np.inf, where=plan.mask.excluded[rows, cols])
            np.maximum(m_i, S_ij.max(axis=1), out=m_new)
            if partial:                   # rows all -inf so far: alpha = 0, P = 0, no NaN
                live = np.isfinite(m_new)
                np.subtract(m_i, m_new, out=m_i, where=live)
                np.subtract(S_ij, m_new[:, None], out=S_ij, where=live[:, None])
            else:
                np.subtract(m_i, m_new, out=m_i)
                S_ij -= m_new[:, None]
            np.exp(m_i, out=m_i)          # m_i now holds alpha = exp(m_old - m_new)
            np.exp(S_ij, out=S_ij)        # P_ij, in place
            l_i *= m_i
            l_i += S_ij.sum(axis=1)
            O_i *= m_i[:, None]
            O_i += S_ij @ V_j
            m_i, m_new = m_new, m_i       # the running max moves to m_i; m_new is scratch again
            mem.free(S_ij, K_j, V_j)
        divide_rows(O_i, l_i)             # a row with nothing to attend to stays 0
        mem.write(O, O_i, rows)
        if L is not None:
            log_sum_exp(m_i, l_i)         # L_i = m_i + log l_i, in place
            mem.write(L, m_i, rows)
        mem.free(Q_i, O_i, m_i, l_i, m_new)


def _fa1(mem, Q, K, V, O, L, plan, scale):
    N, d, R, B_r = plan.N, plan.d, plan.R, plan.B_r
    blocks = _blocks(plan)
    T_r, T_c = ceil_div(N, B_r), ceil_div(plan.N_k, plan.B_c)
    if blocks is None:
        visited = np.ones((T_r, T_c), dtype=bool)
    else:
        visited = blocks.nonempty
    # the last K/V block that visits each query block (-1: none), where L is written
    last = np.where(visited.any(axis=1), T_c - 1 - np.argmax(visited[:, ::-1], axis=1), -1)
    l = mem.allocate_slow("l", N)
    m = mem.allocate_slow("m", N)
    for bi, b0 in enumerate(range(0, N, B_r)):        # line 2: O = 0, l = 0, m = -inf
        b1 = min(b0 + B_r, N)
        for i0 in range(b0, b1, R):
            rows = slice(i0, min(i0 + R, b1))
            r = rows.stop - i0
            zeros = mem.allocate((r, d), "zeros")
            mem.write(O, zeros, rows)
            mem.write(l, zeros[:, 0], rows)
            zeros[:, 0] = -np.inf
            mem.write(m, zeros[:, 0], rows)
            if L is not None and last[bi] < 0:        # nothing to attend to: L = +inf
                zeros[:, 0] = np.inf
                mem.write(L, zeros[:, 0], rows)
            mem.free(zeros)
    for bj, j0 in enumerate(range(0, plan.N_k, plan.B_c)):
        if not visited[:, bj].any():
            continue                                  # block-sparse: K_j, V_j never needed
        cols = slice(j0, min(j0 + plan.B_c, plan.N_k))
        K_j, V_j = mem.read(K, cols), mem.read(V, cols)
        c = K_j.shape[0]
        for bi, b0 in enumerate(range(0, N, B_r)):
            if not visited[bi, bj]:
                continue
            partial = blocks is not None and not blocks.full[bi, bj]
            b1 = min(b0 + B_r, N)
            for i0 in range(b0, b1, R):
                rows = slice(i0, min(i0 + R, b1))
                Q_i, O_i = mem.read(Q, rows), mem.read(O, rows)
                l_i, m_i = mem.read(l, rows), mem.read(m, rows)
                r = Q_i.shape[0]
                S_ij = mem.allocate((r, c), "S_ij")
                m_t = mem.allocate(r, "m~_ij")
                m_new = mem.allocate(r, "m_new")
                Q_i *= scale
                np.matmul(Q_i, K_j.T, out=S_ij)
                if partial:
                    np.copyto(S_ij, -np.inf, where=plan.mask.excluded[rows, cols])
                S_ij.max(axis=1, out=m_t)
                np.maximum(m_i, m_t, out=m_new)
                if partial:               # rows all -inf so far: their factors are 0, no NaN
                    live = np.isfinite(m_t)[:, None]
                    np.subtract(S_ij, m_t[:, None], out=S_ij, where=live)
                    live = np.isfinite(m_new)
                    np.subtract(m_i, m_new, out=m_i, where=live)
                    np.subtract(m_t, m_new, out=m_t, where=live)
                else:
                    S_ij -= m_t[:, None]
                    m_i -= m_new
                    m_t -= m_new
                np.exp(S_ij, out=S_ij)                    # P~_ij
                np.exp(m_i, out=m_i)                      # e^{m_i - m_new}
                np.exp(m_t, out=m_t)                      # e^{m~_ij - m_new}
                O_i *= (l_i * m_i)[:, None]               # diag(l_i) e^{m_i - m_new} O_i
                l_i *= m_i
                l_i += m_t * S_ij.sum(axis=1)             # l_new
                S_ij *= m_t[:, None]
                O_i += S_ij @ V_j
                divide_rows(O_i, l_i)                     # a row still empty stays 0
                mem.write(O, O_i, rows)
                mem.write(l, l_i, rows)
                mem.write(m, m_new, rows)
                if L is not None and bj == last[bi]:      # the row's last block: L = m + log l
                    log_sum_exp(m_new, l_i)
                    mem.write(L, m_new, rows)
                mem.free(Q_i, O_i, l_i, m_i, S_ij, m_t, m_new)
        mem.free(K_j, V_j)
