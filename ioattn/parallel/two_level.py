"""Both levels counted together: the network between processors and the cache inside each.

In :mod:`ioattn.parallel.costs` a processor's memory holds its shares, the blocks it receives
and its running ``O, m, l``; here that memory is the *slow memory* of the two-level model
(:class:`~ioattn.memory.TwoLevelMemory`) and the processor computes through a cache of ``M``
entries, as a GPU computes through its shared memory. Each processor runs FlashAttention-2
([FA2]_; :mod:`ioattn.algorithms.flash`) on every step's rectangular block: its ``n_p`` query
rows against the ``n_j`` key rows it holds at that step, with the block sizes ``B_r, B_c`` of
``ioattn.plan("flash", n_p, d, M, N_k=n_j)`` (``B_r`` does not depend on ``n_j``, so the query
blocks are the same at every step), visiting only the blocks a causal mask keeps.

What changes from one FlashAttention run is the state. Query block ``I`` (``r_I`` rows) is
*visited* at a step when one of its score blocks there is nonempty; between its first and its
last visit its running ``(O_I, m_I, l_I)`` must survive the steps in between, while other query
blocks and the next ``K_j, V_j`` use the cache. So, per head:

- at a visit that is not its first, the block reads back ``O_I, m_I, l_I``: ``(d + 2) r_I``
  reads beyond FlashAttention's;
- at a visit that is not its last, it writes ``O_I`` (FlashAttention's write) and ``m_I, l_I``:
  ``2 r_I`` writes beyond it; only the last visit divides by ``l_I`` and writes the output;
- at a step that does not visit it nothing moves, where one FlashAttention run on the step's
  block would write its zeros: ``d r_I`` writes fewer.

Where the schedule does not need the slow memory, the state stays in the cache: with one head
whose ``n_p`` rows form one query block (``B_r >= n_p``), ``Q_p, O_p, m_p, l_p`` stay in the
cache from the first visited step to the last, and each later step reads only its keys and
values (``d n_p`` reads and ``d n_p`` writes fewer per step than a fresh run). Hence, with
``io_t`` = ``ioattn.io_cost("flash", n_p, d, M, N_k=n_j, mask=...)`` the cost of step ``t``'s
block (the causal mask of its global rows, or none)::

    reads_p  = H sum_t [ reads(io_t)  + (d + 2) sum_{I visited at t, not first} r_I ],
    writes_p = H sum_t [ writes(io_t) + 2 sum_{I visited at t, not last} r_I
                                      - d sum_{I not visited at t} r_I ],

over the steps ``t`` with a score to compute; with the state kept, ``reads_p = H (sum_t
reads(io_t) - (V - 1) d n_p)`` and ``writes_p = d n_p`` for ``V`` visited steps. The
all-gather of ``K, V`` [LLAMA3]_ holds every block at once, so it is one step: one
FlashAttention run of ``Q_p`` against all ``N`` keys, and its cost is ``io_cost``'s exactly.
USP [USP]_ (and its zigzag form) runs the same after its first all-to-all, on other rows and
heads (:func:`local_runs`): processor ``p = r P_u + u`` attends the ``N_r`` rows of group ``r``
for its ``h_u`` heads to the group blocks its ring brings, ``N_j`` rows at each of the ``P_r``
steps, so the formulas hold with ``n_p -> N_r``, ``n_j -> N_j`` and ``H -> h_u``; the
all-to-alls move words between processors, not entries through the cache.

Head parallelism [ULYSSES]_ (``"all_to_all"``) is one step too: after its all-to-all processor
``p`` holds all ``N`` rows of its ``h_p`` heads and runs FlashAttention once per head, so
``reads_p, writes_p = h_p io_cost("flash", N, d, M, mask=...)`` (the causal mask or none).

The grid (``"grid"``, ``P_r x P_c``, ``p = a P_c + b``; :mod:`ioattn.parallel.costs`) is one
step and a merge (:func:`grid_runs`). Processor ``(a, b)`` attends its gathered query block
(``N_a`` rows) to its gathered key block (``N^b`` rows) in one FlashAttention-2 run per head,
under the causal mask of the global rows, and with ``P_c > 1`` saves the row log-sum-exp ``L``
beside the normalised ``O`` (``save_lse=True``: ``N_a`` writes more; a row with nothing to attend
to gets ``O = 0`` and ``L = +inf``, as in :mod:`ioattn.masks`, and weight 0 in the merge). The
reduce-scatter brings it the other ``P_c - 1`` partials ``(O, L)`` of its ``n_p`` rows, and the
merge (:func:`merge`, its cost :func:`merge_io`) streams those rows through the cache: for each
block of rows it reads the ``d + 1`` entries of every partial, one partial after the other, folds
each into a running ``(O, L)`` by log-sum-exp, and writes the ``d`` entries of ``O``. Holding the
running ``O, L``, one partial's ``O, L`` and a scratch ``L`` takes ``2d + 3`` entries a row
(:func:`merge_M`), below FlashAttention's ``4d + 4``, so every cache that runs FlashAttention runs
the merge. With ``io`` = ``io_cost("flash", N_a, d, M, N_k=N^b, mask=..., save_lse=True)``::

    reads_p  = H [ reads(io)  + (d + 1) P_c n_p ],
    writes_p = H [ writes(io) + d n_p ],

and at ``P_c = 1`` (nothing to merge: the run's ``O`` is the output, no ``L`` written) ``H`` times
``io_cost("flash", n_p, d, M, N_k=N, mask=...)``, all-gather's count on contiguous rows. Head
groups x grid (``"usp_grid"``, ``P_u x P_a x P_b``) runs the grid, after its first all-to-all, on
the ``h_u`` heads of part ``u`` with the groups' rows in its places: the formulas hold with
``n_p -> N_r``, ``N_a, N^b`` the groups' blocks, ``P_c -> P_b`` and ``H -> h_u``.

The backward pass of the ring family (``"ring"``, ``"striped"``, ``"zigzag"``, the first of
:data:`BACKWARD_TWO_LEVEL`; the engine's ``ring_backward``) keeps ``Q_p, O_p, dO_p, L_p`` in the
processor's memory while each step's block ``(K_j, V_j, dK_j, dV_j)`` arrives there and leaves
with its partial ``dK_j, dV_j`` updated. Per head the processor first streams its rows through
the cache in blocks of ``B = min(n_p, floor(M / (2d + 1)))``: it reads ``dO_i, O_i``, writes
``D_i = rowsum(dO_i o O_i)`` and writes ``dQ_i = 0`` (``2 d n_p`` reads, ``(d + 1) n_p``
writes; ``D_p`` is computed once for all steps). At each step it runs the rectangular
FlashAttention backward ([FA2]_, Algorithm 2; :mod:`ioattn.algorithms.backward_flash`) of its
``n_p`` rows against the ``n_j`` keys held, with the blocks of ``ioattn.plan("flash", n_p, d, M,
N_k=n_j, backward=True)`` under the causal mask of the global rows, visiting only the nonempty
blocks (a step the mask empties moves nothing), with two changes: a visited key block ``J``
starts ``dK_J, dV_J`` from the partials that arrived (read, ``2 d c_J`` entries, not zeros) and
writes them back for the next hop, a key block no query visits is not touched (its partial
travels on as it came), and every visit reads ``dQ_i`` and writes it back, as ``dQ_p``
accumulates over the steps in the memory. With ``C_t = sum_{J visited at t} c_J`` and ``V_t =
sum_{(I, J) visited at t} r_I``::

    reads_p  = H [ 2 d n_p + sum_t ( 4 d C_t + (3d + 2) V_t ) ],
    writes_p = H [ (d + 1) n_p + sum_t ( 2 d C_t + d V_t ) ].

The last hop that takes ``dK_p, dV_p`` home moves words between processors, not entries
through the cache.

USP's backward (``"usp"``, ``"usp_zigzag"``; the engine's ``usp_backward``) runs the same after
its first all-to-all, on other rows and heads (:func:`local_runs`): processor ``p = r P_u + u``
folds the group blocks its ring brings into the ``N_r`` rows of group ``r`` for its ``h_u``
heads, so the step sums hold with ``n_p -> N_r``, ``n_j -> N_j`` and ``H -> h_u``. One thing
differs: ``D = rowsum(dO o O)`` is computed on each processor's own rows before the all-to-all
and travels with them (``O`` does not), so the processor does not compute it; it streams its
rows in blocks of ``min(N_r, floor(M / d))`` only to write ``dQ_i = 0``::

    reads_p  = h_u sum_t ( 4 d C_t + (3d + 2) V_t ),
    writes_p = h_u [ d N_r + sum_t ( 2 d C_t + d V_t ) ].

All-to-all's backward is USP's with one group (``P_r = 1``): one step per head, the whole ``N x
N`` backward of its ``h_p`` heads against partials ``dK, dV`` that start at zero. The
all-to-alls move words between processors, not entries through the cache.

The all-gather's backward (``"all_gather"``; the engine's ``all_gather_backward``) is the ring
family's with one step, its ``n_p`` rows against all ``N`` keys (in the order of the
processors) and partials ``dK, dV`` of every block that start at zero, followed by the ring
reduce-scatter of those partials. Its ``P - 1`` additions are computation, so they go through
the cache (:func:`add`): at step ``s`` the running sum of block ``j = p - s - 2`` arrives in the
memory, and for each of ``dK_j, dV_j`` and each head the processor streams rows of the sum and
of its own partial through the cache, in blocks of ``min(n_j, floor(M / 2d))``, and writes the
new sum over its partial (``2 d n_j`` reads, ``d n_j`` writes, :func:`add_io`). The blocks it
adds are all but that of ``p - 1``, so with ``C, V`` of its one step::

    reads_p  = H [ 2 d n_p + 4 d C + (3d + 2) V + 4 d (N - n_{p-1}) ],
    writes_p = H [ (d + 1) n_p + 2 d C + d V + 2 d (N - n_{p-1}) ].

The grid's backward (``"grid"``; the engine's ``grid_backward``) is one step and two
reduce-scatters. Processor ``(a, b)`` gathers ``Q, dO, L, D`` of its query block (``N_a`` rows)
along grid row ``a`` and ``K, V`` of its key block (``N^b`` rows) along grid column ``b``; ``D``
arrives with the rows, as in USP's backward, so per head it only zeroes ``dQ`` of the ``N_a``
rows (``d N_a`` writes) and runs one rectangular FlashAttention backward on its ``N_a x N^b``
block under the causal mask of the global rows, partials ``dK, dV`` starting at zero (``C, V``
of that one step, as above). Each partial is then sent straight to the processor of its rows:
processor ``(a, b)`` receives the ``P_c - 1`` partials ``dQ`` of its ``n_p`` rows from its grid
row and the ``P_r - 1`` partials ``dK, dV`` from its grid column, and adds each to its own
through the cache (:func:`add`, :func:`add_io`)::

    reads_p  = H [ 4 d C + (3d + 2) V + 2 d n_p (P_c - 1 + 2 (P_r - 1)) ],
    writes_p = H [ d N_a + 2 d C + d V + d n_p (P_c - 1 + 2 (P_r - 1)) ].

Head groups x grid (``"usp_grid"``; ``usp_grid_backward``) runs the same after its first
all-to-all on the ``h_u`` heads of part ``u``, with the groups' rows in the places of the ``P_a x
P_b`` grid: ``n_p -> N_r``, ``P_r -> P_a``, ``P_c -> P_b`` and ``H -> h_u``. So every scheme's
backward is counted at both levels (:data:`BACKWARD_TWO_LEVEL` is :data:`TWO_LEVEL`).

:func:`cache_io` gives these counts; :class:`Processor`, :class:`BackwardProcessor` and
:class:`GridProcessor` are what an MPI rank runs (:mod:`ioattn.parallel.engine`), through its own
:class:`~ioattn.memory.TwoLevelMemory`, and the tests check the two equal on 2 and 4 ranks.

References
----------
.. [FA2] T. Dao, "FlashAttention-2: faster attention with better parallelism and work
   partitioning", arXiv:2307.08691, Algorithms 1 and 2.
.. [LLAMA3] A. Grattafiori et al., "The Llama 3 herd of models", arXiv:2407.21783 (2024),
   section 3.3.2.
.. [USP] J. Fang, S. Zhao, "USP: a unified sequence parallelism approach for long context
   generative AI", arXiv:2405.07719 (2024).
.. [ULYSSES] S. A. Jacobs et al., "DeepSpeed Ulysses: system optimizations for enabling training
   of extreme long sequence transformer models", arXiv:2309.14509 (2023).
"""

from __future__ import annotations

import numpy as np

from .._validate import as_count
from ..algorithms import get
from ..algorithms.base import divide_rows
from ..api import io_cost, plan
from ..memory import TwoLevelMemory
from .layout import group_rows, offsets, rows, usp_shape

__all__ = ["BACKWARD_TWO_LEVEL", "GRIDS", "TWO_LEVEL", "BackwardProcessor", "GridProcessor",
           "Processor", "add", "add_io", "cache_io", "check_M", "grid_runs", "key_steps",
           "local_runs", "merge", "merge_M", "merge_io", "min_M"]

#: The algorithms whose processors run FlashAttention through a cache here (forward).
TWO_LEVEL = ("ring", "striped", "zigzag", "all_gather", "usp", "usp_zigzag", "all_to_all",
             "grid", "usp_grid")
#: Those whose backward pass is counted through the cache too: every scheme (the ring family,
#: USP, all-to-all, which is USP with one group, the all-gather and the grids with their
#: reduce-scatters).
BACKWARD_TWO_LEVEL = ("ring", "striped", "zigzag", "usp", "usp_zigzag", "all_to_all",
                      "all_gather", "grid", "usp_grid")
_D_HERE = ("ring", "striped", "zigzag", "all_gather")      # D_p computed through the cache
#: Those that end with the grid's merge of partial outputs (:func:`grid_runs`).
GRIDS = ("grid", "usp_grid")
_LAYOUT = {"ring": "contiguous", "striped": "striped", "zigzag": "zigzag",
           "all_gather": "zigzag", "usp": "contiguous", "usp_zigzag": "zigzag"}


def min_M(d: int, backward: bool = False) -> int:
    """The smallest cache FlashAttention-2 runs in: ``4d + 4`` (one query row, one key); its
    backward pass, ``7d + 4`` (``ioattn.min_M("flash", d, backward=True)``)."""
    return 7 * as_count(d, "d") + 4 if backward else 4 * as_count(d, "d") + 4


def merge_M(d: int) -> int:
    """The smallest cache the grid's merge runs in: ``2d + 3`` (one row of the running ``O, L``,
    of one partial's ``O, L`` and a scratch ``L``), less than :func:`min_M`."""
    return 2 * as_count(d, "d") + 3


def check_M(name: str, d: int, M, backward: bool = False) -> int:
    """``M`` checked for a two-level run of ``name``: clear errors naming the problem. The least
    ``M`` is FlashAttention's :func:`min_M`; for the grids it also covers the merge
    (:func:`merge_M` is smaller). With ``backward`` (every scheme, :data:`BACKWARD_TWO_LEVEL`)
    it is FlashAttention's backward's ``min_M(d, backward=True)``, which also covers the
    additions of the reduce-scatters (:func:`add`, ``2d``)."""
    if name not in TWO_LEVEL:
        raise ValueError(f"M= (the cache of each processor) is counted for "
                         f"{', '.join(TWO_LEVEL)} only, not for {name!r}")
    M = as_count(M, "M")
    if backward:
        if M < min_M(d, True):
            raise ValueError(f"FlashAttention's backward pass needs a cache of at least 7d + 4 "
                             f"= {min_M(d, True)} entries at d = {d}; got M = {M}")
        return M
    need = max(min_M(d), merge_M(d)) if name in GRIDS else min_M(d)
    if M < need:
        raise ValueError(f"FlashAttention needs a cache of at least 4d + 4 = {min_M(d)} "
                         f"entries at d = {d}; got M = {M}")
    return M


def key_steps(name: str, N: int, P: int) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """The rows each processor holds, and the key rows it attends to at each step: the ring's
    ``j_s = (p - s) mod P`` on the algorithm's layout, or (all-gather) every block at once, in
    the order of the processors."""
    rows_of = rows(N, P, _LAYOUT[name])
    if name == "all_gather":
        every = np.concatenate(rows_of)
        return rows_of, [[every] for _ in range(P)]
    return rows_of, [[rows_of[(p - s) % P] for s in range(P)] for p in range(P)]


def local_runs(name: str, N: int, P: int, heads: int = 1, grid=None) -> list[tuple]:
    """What each processor's FlashAttention runs on: for every ``p``, the heads ``(h0, h1)`` it
    computes, its query rows and the key rows of each step. The ring, striped, zigzag and
    all-gather schemes run all ``H`` heads of their own rows (:func:`key_steps`); all-to-all
    the ``h_p`` heads of :func:`~.layout.offsets` ``(H, P)`` on all ``N`` rows, in one step; USP
    (``grid = (P_u, P_r)``, default :func:`~.layout.usp_shape`) runs, after its all-to-all, the
    ``h_u`` heads of part ``u`` on the ``N_r`` rows of group ``r`` (``p = r P_u + u``) against
    the group blocks its ring brings, ``j_s = (r - s) mod P_r``.

    >>> [(h, q.tolist(), [k.tolist() for k in ks]) for h, q, ks in local_runs("usp", 4, 4, 2,
    ...                                                                      (2, 2))][:2]
    [((0, 1), [0, 1], [[0, 1], [2, 3]]), ((1, 2), [0, 1], [[0, 1], [2, 3]])]
    """
    if name == "all_to_all":
        if heads < P:
            raise ValueError(f"all_to_all needs heads >= P; got heads = {heads}, P = {P}")
        ho, every = offsets(heads, P), np.arange(N)
        return [((int(ho[p]), int(ho[p + 1])), every, [every]) for p in range(P)]
    if name not in ("usp", "usp_zigzag"):
        rows_of, ksteps = key_steps(name, N, P)
        return [((0, heads), rows_of[p], ksteps[p]) for p in range(P)]
    P_u, P_r = usp_shape(P, heads) if grid is None else grid
    if P_u * P_r != P or heads < P_u:
        raise ValueError(f"{name} needs P_u x P_r = P and heads >= P_u; got grid = {grid}, "
                         f"P = {P}, heads = {heads}")
    rows_of = rows(N, P) if name == "usp" else group_rows(N, (P_u, P_r))
    blocks = [np.concatenate(rows_of[g * P_u:(g + 1) * P_u]) for g in range(P_r)]
    ho = offsets(heads, P_u)
    return [((int(ho[p % P_u]), int(ho[p % P_u + 1])), blocks[p // P_u],
             [blocks[(p // P_u - s) % P_r] for s in range(P_r)]) for p in range(P)]


def grid_runs(name: str, N: int, d: int, P: int, heads: int = 1, grid=None) -> list[tuple]:
    """What each processor of the grid runs on (module docstring): for every ``p``, the heads
    ``(h0, h1)`` it computes, the rows of its query block and of its key block, the slice of its
    own rows in the query block (those it merges) and ``P_c``, the partials merged.

    ``"grid"``: ``grid = (P_r, P_c)`` (default :func:`~.layout.grid_shape` ``(P, d)``), ``p = a
    P_c + b``, contiguous rows, all ``H`` heads. ``"usp_grid"``: ``grid = (P_u, P_a, P_b)`` or
    ``(P_u, P_r)`` (:func:`ioattn.parallel.costs.cost`), ``p = r P_u + u``, ``r = a P_b + b``:
    the ``h_u`` heads of part ``u`` on the places' blocks of group rows, ``P_c = P_b``.

    >>> [(h, q.tolist(), k.tolist(), own, c) for h, q, k, own, c in
    ...  grid_runs("grid", 4, 2, 4, grid=(2, 2))][1]
    ((0, 1), [0, 1], [1, 3], slice(1, 2, None), 2)
    """
    from .costs import check                  # the shapes, checked once (costs imports this)

    if name not in GRIDS:
        raise ValueError(f"grid_runs is for {', '.join(GRIDS)}, not {name!r}")
    N, d, P, heads, shape = check(name, N, d, P, heads, False, grid)
    P_u, P_a, P_b = (1, *shape) if name == "grid" else shape
    rows_of = rows(N, P)
    blocks = [np.concatenate(rows_of[g * P_u:(g + 1) * P_u]) for g in range(P_a * P_b)]
    ho = offsets(heads, P_u)
    runs = []
    for p in range(P):
        r, u = divmod(p, P_u)
        a, b = divmod(r, P_b)
        at = sum(len(blocks[a * P_b + c]) for c in range(b))
        runs.append(((int(ho[u]), int(ho[u + 1])),
                     np.concatenate([blocks[a * P_b + c] for c in range(P_b)]),
                     np.concatenate([blocks[g * P_b + b] for g in range(P_a)]),
                     slice(at, at + len(blocks[r])), P_b))
    return runs


def _rect_mask(qrows, krows, causal: bool):
    """The causal mask of one FlashAttention run by the global rows: None when it keeps every
    score, else the boolean ``len(qrows) x len(krows)`` array (all False when it keeps none)."""
    if not causal:
        return None
    keep = krows[None, :] <= qrows[:, None]
    return None if keep.all() else keep


def merge_io(n: int, d: int, parts: int) -> tuple[int, int]:
    """The entries :func:`merge` moves for ``n`` rows of ``parts`` partials: it reads the
    ``d + 1`` entries of every partial's row and writes the ``d`` of the output's.

    >>> merge_io(4, 2, 3)
    (36, 8)
    """
    n, d, parts = as_count(n, "n"), as_count(d, "d"), as_count(parts, "parts")
    return parts * (d + 1) * n, d * n


def merge(mem: TwoLevelMemory, partials, out) -> None:
    """Merge partial outputs by log-sum-exp through the cache of ``mem``: ``out`` (an ``n x d``
    slow array) gets ``sum_q exp(L_q - L) O_q`` with ``L = log sum_q exp(L_q)``, row by row.

    ``partials`` are triples ``(O_q, L_q, i_q)`` of slow arrays, the partial's rows starting at
    row ``i_q`` of ``O_q`` (normalised, ``d`` wide) and of ``L_q`` (a row with nothing to attend
    to has ``L_q = +inf``, as FlashAttention saves it, and weight 0 here). Blocks of ``B = min(n,
    floor(M / (2d + 3)))`` rows stream through the cache: the running ``O, L``, one partial's
    ``O_q, L_q`` and a scratch ``L`` (:func:`merge_M`); each partial is read once and ``out``
    written once (:func:`merge_io`).
    """
    n, d = out.shape
    if mem.M < merge_M(d):
        raise ValueError(f"the merge streams rows of O and L through the cache, so it needs "
                         f"M >= 2d + 3 = {merge_M(d)} entries at d = {d}; got M = {mem.M}")
    B = min(n, mem.M // (2 * d + 3))
    for i0 in range(0, n, B):
        b = min(B, n - i0)
        O_acc = L_acc = L_new = None
        for O_q, L_q, at in partials:
            tile = slice(at + i0, at + i0 + b)
            l_q = mem.read(L_q, tile)
            o_q = mem.read(O_q, tile)
            l_q[l_q == np.inf] = -np.inf            # nothing to attend to: weight 0
            if O_acc is None:
                O_acc, L_acc = o_q, l_q
                L_new = mem.allocate(b, "L_new", fill=None)
                continue
            np.logaddexp(L_acc, l_q, out=L_new)
            live = np.isfinite(L_new)               # rows with no key yet stay 0, no NaN
            for w in (L_acc, l_q):                  # the weights exp(L_q - L_new), in place
                np.subtract(w, L_new, out=w, where=live)
                np.exp(w, out=w)
            O_acc *= L_acc[:, None]
            o_q *= l_q[:, None]
            O_acc += o_q
            L_acc, L_new = L_new, L_acc
            mem.free(o_q, l_q)
        mem.write(out, O_acc, slice(i0, i0 + b))
        mem.free(O_acc, L_acc, L_new)


def _mask(qrows, krows, causal: bool):
    """The step's mask: None (every score), False (none), or a boolean ``n x n_j`` array."""
    keep = _rect_mask(qrows, krows, causal)
    return keep if keep is None or keep.any() else False


class _Step:
    """One step's plan (of the forward pass, or of the ``backward`` one), mask and the blocks
    it visits: ``r`` and ``c`` the rows of its query and key blocks, ``nonempty`` and ``full``
    those of its score blocks; ``plan`` None for a step the causal mask empties."""

    def __init__(self, n, d, M, qrows, krows, causal, backward: bool = False):
        self.mask = _mask(qrows, krows, causal)
        self.n_k = len(krows)
        self.plan = None
        if self.mask is False:
            return
        self.plan = plan("flash", n, d, M, N_k=self.n_k, mask=self.mask, backward=backward)
        B_r, B_c = self.plan.B_r, self.plan.B_c
        self.r = np.minimum(B_r, n - B_r * np.arange(-(-n // B_r)))
        self.c = np.minimum(B_c, self.n_k - B_c * np.arange(-(-self.n_k // B_c)))
        if self.mask is None:
            self.nonempty = np.ones((self.r.size, self.c.size), bool)
            self.full = self.nonempty
        else:
            blocks = self.plan.mask.blocks(B_r, B_c)
            self.nonempty, self.full = blocks.nonempty, blocks.full

    @property
    def visited(self) -> np.ndarray:
        return self.nonempty.any(axis=1)


def _schedule(n, d, M, qrows, ksteps, causal):
    """The steps, the first and last visit of each query block, and whether the state stays."""
    steps = [_Step(n, d, M, qrows, k, causal) for k in ksteps]
    live = [t for t, s in enumerate(steps) if s.plan is not None]
    B_r = steps[live[0]].plan.B_r
    T_r = -(-n // B_r)
    seen = np.array([steps[t].visited if t in live else np.zeros(T_r, bool)
                     for t in range(len(steps))])
    first = seen.argmax(axis=0)
    last = len(steps) - 1 - seen[::-1].argmax(axis=0)
    return steps, B_r, T_r, first, last


class _BackwardStep(_Step):
    """One backward step (module docstring): a :class:`_Step` of the backward pass."""

    def __init__(self, n, d, M, qrows, krows, causal):
        super().__init__(n, d, M, qrows, krows, causal, backward=True)

    def io(self, d: int) -> tuple[int, int]:
        """``(4 d C_t + (3d + 2) V_t, 2 d C_t + d V_t)`` of the module docstring."""
        if self.plan is None:
            return 0, 0
        C = int(self.c[self.nonempty.any(axis=0)].sum())
        V = int(self.r @ self.nonempty.sum(axis=1))
        return 4 * d * C + (3 * d + 2) * V, 2 * d * C + d * V


def _backward_cache_io(name, N, d, P, M, H, causal, grid):
    """:func:`cache_io` of the backward passes of :data:`BACKWARD_TWO_LEVEL` (module
    docstring): the ring family computes ``D_p`` through the cache, USP and all-to-all receive
    it and only zero ``dQ``."""
    reads, writes = [], []
    if name in GRIDS:
        from .costs import check
        P_rows = check(name, N, d, P, H, True, grid)[4][-2]
        for (h0, h1), qrows, krows, own, P_c in grid_runs(name, N, d, P, H, grid):
            r, w = _BackwardStep(len(qrows), d, M, qrows, krows, causal).io(d)
            ar, aw = add_io(own.stop - own.start, d)
            adds = (P_c - 1) + 2 * (P_rows - 1)         # dQ along the row, dK, dV the column
            reads.append((h1 - h0) * (r + adds * ar))
            writes.append((h1 - h0) * (d * len(qrows) + w + adds * aw))
        return reads, writes
    for (h0, h1), qrows, ksteps in local_runs(name, N, P, H, grid):
        n = len(qrows)
        R, W = (2 * d * n, (d + 1) * n) if name in _D_HERE else (0, d * n)
        for krows in ksteps:
            r, w = _BackwardStep(n, d, M, qrows, krows, causal).io(d)
            R, W = R + r, W + w
        reads.append((h1 - h0) * R)
        writes.append((h1 - h0) * W)
    if name == "all_gather" and P > 1:        # the reduce-scatter's additions (add_io)
        sizes = [len(q) for _, q, _ in local_runs(name, N, P, H)]
        for p in range(P):
            r, w = add_io(N - sizes[(p - 1) % P], d)
            reads[p] += 2 * H * r
            writes[p] += 2 * H * w
    return reads, writes


def add_io(n: int, d: int) -> tuple[int, int]:
    """The entries :func:`add` moves for ``n x d`` arrays: it reads both and writes the sum.

    >>> add_io(5, 2)
    (20, 10)
    """
    n, d = as_count(n, "n"), as_count(d, "d")
    return 2 * d * n, d * n


def add(mem: TwoLevelMemory, total, part) -> None:
    """``total += part`` through the cache of ``mem`` (two ``n x d`` slow arrays; the sum
    overwrites ``total``): blocks of ``B = min(n, floor(M / 2d))`` rows stream through the cache,
    each row of both read once and of the sum written once (:func:`add_io`)."""
    n, d = total.shape
    if mem.M < 2 * d:
        raise ValueError(f"the addition streams rows of two arrays through the cache, so it "
                         f"needs M >= 2d = {2 * d} entries at d = {d}; got M = {mem.M}")
    B = min(n, mem.M // (2 * d))
    for i0 in range(0, n, B):
        rows_ = slice(i0, min(i0 + B, n))
        t, q = mem.read(total, rows_), mem.read(part, rows_)
        t += q
        mem.write(total, t, rows_)
        mem.free(t, q)


def cache_io(name: str, N: int, d: int, P: int, M: int, *, heads: int = 1,
             causal: bool = False, grid=None,
             backward: bool = False) -> tuple[list[int], list[int]]:
    """The entries each processor's cache reads from and writes to its memory (module
    docstring): two lists of ``P`` Python ints, from ``io_cost`` of every step's block (with
    ``backward=True``, the backward pass of :data:`BACKWARD_TWO_LEVEL`, from the blocks each
    step visits).

    >>> r, w = cache_io("ring", 64, 4, 2, 64)
    >>> r[0] == 2 * io_cost("flash", 32, 4, 64, N_k=32).reads + (4 + 2) * 32
    True
    >>> r, w = cache_io("grid", 64, 4, 4, 64, grid=(2, 2))   # 32 x 32 runs, merges of 16 rows
    >>> io = io_cost("flash", 32, 4, 64, N_k=32, save_lse=True)
    >>> (r[0], w[0]) == (io.reads + 2 * 5 * 16, io.writes + 4 * 16)
    True
    """
    N, d, P, H = as_count(N, "N"), as_count(d, "d"), as_count(P, "P"), as_count(heads, "heads")
    M = check_M(name, d, M, backward)
    if backward:
        return _backward_cache_io(name, N, d, P, M, H, causal, grid)
    reads, writes = [], []
    if name in GRIDS:
        for (h0, h1), qrows, krows, own, parts in grid_runs(name, N, d, P, H, grid):
            io = io_cost("flash", len(qrows), d, M, N_k=len(krows),
                         mask=_rect_mask(qrows, krows, causal), save_lse=parts > 1)
            mr, mw = merge_io(own.stop - own.start, d, parts) if parts > 1 else (0, 0)
            reads.append((h1 - h0) * (io.reads + mr))
            writes.append((h1 - h0) * (io.writes + mw))
        return reads, writes
    for (h0, h1), qrows, ksteps in local_runs(name, N, P, H, grid):
        n, h = len(qrows), h1 - h0
        steps, B_r, T_r, first, last = _schedule(n, d, M, qrows, ksteps, causal)
        r_I = np.minimum(B_r, n - B_r * np.arange(T_r))
        keep = h == 1 and T_r == 1
        R = W = 0
        for t, s in enumerate(steps):
            if s.plan is None:
                continue
            io = io_cost("flash", n, d, M, N_k=s.n_k, mask=s.mask)
            R, W = R + io.reads, W + io.writes
            v = s.visited
            if keep:
                R -= d * n * (t != first[0])
                W -= d * n * (t != last[0])
                continue
            R += (d + 2) * int(r_I[v & (first != t)].sum())
            W += 2 * int(r_I[v & (last != t)].sum()) - d * int(r_I[~v].sum())
        reads.append(h * R)
        writes.append(h * W)
    return reads, writes


class _Cached:
    """What every processor of this module reports: the entries between its memory and its
    cache, counted by its :class:`~ioattn.memory.TwoLevelMemory` ``mem``."""

    mem: TwoLevelMemory

    @property
    def reads(self) -> int:
        return self.mem.reads

    @property
    def writes(self) -> int:
        return self.mem.writes


class Processor(_Cached):
    """One processor's FlashAttention through its own cache of ``M`` entries.

    Its ``Q_p`` (``H x n_p x d``) and each step's ``K_j, V_j`` are placed in the slow memory of
    a :class:`~ioattn.memory.TwoLevelMemory` (its memory, where the network delivers them);
    :meth:`step` folds one step's block into the state, :meth:`output` returns ``O_p``.
    """

    def __init__(self, M: int, Q: np.ndarray, qrows, ksteps, causal: bool, scale: float):
        H, n, d = Q.shape
        self.mem = mem = TwoLevelMemory(M, owner="flash")
        self.H, self.n, self.d, self.scale = H, n, d, scale
        self.qrows = qrows
        self.steps, self.B_r, self.T_r, self.first, self.last = _schedule(n, d, M, qrows,
                                                                          ksteps, causal)
        self.keep = H == 1 and self.T_r == 1
        self.kept = None
        self.Q = [mem.load(f"Q {h}", Q[h]) for h in range(H)]
        self.O = [mem.allocate_slow(f"O {h}", (n, d)) for h in range(H)]
        self.m = [mem.allocate_slow(f"m {h}", n) for h in range(H)]
        self.l = [mem.allocate_slow(f"l {h}", n) for h in range(H)]

    def step(self, t: int, K: np.ndarray, V: np.ndarray) -> int:
        """Fold step ``t``'s keys and values (``H x n_j x d``) into the state; returns the
        score entries computed."""
        s = self.steps[t]
        if s.plan is None:
            return 0
        mem, work = self.mem, 0
        for h in range(self.H):
            K_h, V_h = mem.load(f"K {t} {h}", K[h]), mem.load(f"V {t} {h}", V[h])
            for I, i0 in enumerate(range(0, self.n, self.B_r)):
                if s.visited[I]:
                    work += self._block(t, s, h, I, slice(i0, min(i0 + self.B_r, self.n)),
                                        K_h, V_h)
        return work

    def _block(self, t, s, h, I, rows_, K, V) -> int:
        mem, d = self.mem, self.d
        first, last = t == self.first[I], t == self.last[I]
        r = rows_.stop - rows_.start
        if self.kept is not None:
            Q_i, O_i, m_i, l_i = self.kept
            self.kept = None
        else:
            Q_i = mem.read(self.Q[h], rows_)
            Q_i *= self.scale
            if first:
                O_i = mem.allocate((r, d), "O_i")
                m_i = mem.allocate(r, "m_i", fill=-np.inf)
                l_i = mem.allocate(r, "l_i")
            else:
                O_i, m_i = mem.read(self.O[h], rows_), mem.read(self.m[h], rows_)
                l_i = mem.read(self.l[h], rows_)
        m_new = mem.allocate(r, "m_new", fill=None)
        work = 0
        for J, j0 in enumerate(range(0, s.n_k, s.plan.B_c)):
            if not s.nonempty[I, J]:
                continue
            cols = slice(j0, min(j0 + s.plan.B_c, s.n_k))
            K_j, V_j = mem.read(K, cols), mem.read(V, cols)
            S_ij = mem.allocate((r, K_j.shape[0]), "S_ij", fill=None)
            np.matmul(Q_i, K_j.T, out=S_ij)
            if s.mask is None:
                work += S_ij.size
            else:
                keep = s.mask[rows_, cols]
                work += int(np.count_nonzero(keep))
                np.copyto(S_ij, -np.inf, where=~keep)
            np.maximum(m_i, S_ij.max(axis=1), out=m_new)
            live = np.isfinite(m_new)       # rows all -inf so far: alpha = 0, P = 0, no NaN
            np.subtract(m_i, m_new, out=m_i, where=live)
            np.subtract(S_ij, m_new[:, None], out=S_ij, where=live[:, None])
            np.exp(m_i, out=m_i)            # alpha = exp(m_old - m_new)
            np.exp(S_ij, out=S_ij)
            l_i *= m_i
            l_i += S_ij.sum(axis=1)
            O_i *= m_i[:, None]
            O_i += S_ij @ V_j
            m_i, m_new = m_new, m_i
            mem.free(S_ij, K_j, V_j)
        mem.free(m_new)
        if last:
            divide_rows(O_i, l_i)
            mem.write(self.O[h], O_i, rows_)
        elif self.keep:
            self.kept = (Q_i, O_i, m_i, l_i)
            return work
        else:
            mem.write(self.O[h], O_i, rows_)
            mem.write(self.m[h], m_i, rows_)
            mem.write(self.l[h], l_i, rows_)
        mem.free(Q_i, O_i, m_i, l_i)
        return work

    def output(self) -> np.ndarray:
        """``O_p`` (``H x n_p x d``), copied out of the slow memory (not a transfer)."""
        return np.stack([self.mem.fetch(O) for O in self.O])


class BackwardProcessor(_Cached):
    """One processor's part of the backward pass of :data:`BACKWARD_TWO_LEVEL` through its own
    cache of ``M`` entries (module docstring).

    Its ``Q_p, O_p, dO_p`` (``H x n_p x d``) and ``L_p`` (``H x n_p``) are placed in the slow
    memory of a :class:`~ioattn.memory.TwoLevelMemory`; the constructor computes ``D_p`` and
    zeroes ``dQ_p`` through the cache, :meth:`step` adds step ``t``'s block to ``dQ_p`` and to
    the travelling partials ``dK_j, dV_j``, :meth:`gradient` returns ``dQ_p``. USP,
    all-to-all and the grids receive ``D_p = rowsum(dO_p o O_p)`` with the rows (``O=None, D=D_p``,
    ``H x n_p``): it is placed in the memory beside ``L_p``, and the constructor only zeroes
    ``dQ_p``, in blocks of ``min(n_p, floor(M / d))`` rows (``d n_p`` writes, no reads).
    """

    def __init__(self, M: int, Q, O, dO, L, qrows, ksteps, causal: bool, scale: float,
                 D=None):
        H, n, d = Q.shape
        if (O is None) == (D is None):
            raise ValueError("BackwardProcessor takes O (to compute D through the cache) or D "
                             "(received), not both and not neither")
        self.mem = mem = TwoLevelMemory(M, owner="flash backward")
        self.H, self.n, self.d, self.scale, self.adds = H, n, d, scale, 0
        self.steps = [_BackwardStep(n, d, M, qrows, k, causal) for k in ksteps]
        self.Q = [mem.load(f"Q {h}", Q[h]) for h in range(H)]
        self.dO = [mem.load(f"dO {h}", dO[h]) for h in range(H)]
        self.L = [mem.load(f"L {h}", L[h]) for h in range(H)]
        self.dQ = [mem.allocate_slow(f"dQ {h}", (n, d)) for h in range(H)]
        if D is not None:
            self.D = [mem.load(f"D {h}", D[h]) for h in range(H)]
            B = min(n, M // d)
            for h in range(H):
                for i0 in range(0, n, B):
                    rows_ = slice(i0, min(i0 + B, n))
                    dQ_i = mem.allocate((rows_.stop - rows_.start, d), "dQ_i")
                    mem.write(self.dQ[h], dQ_i, rows_)
                    mem.free(dQ_i)
            return
        self.D = [mem.allocate_slow(f"D {h}", n) for h in range(H)]
        B = min(n, M // (2 * d + 1))
        for h in range(H):
            O_h = mem.load(f"O {h}", O[h])
            for i0 in range(0, n, B):
                rows_ = slice(i0, min(i0 + B, n))
                dO_i, O_i = mem.read(self.dO[h], rows_), mem.read(O_h, rows_)
                D_i = mem.allocate(dO_i.shape[0], "D_i", fill=None)
                np.einsum("ij,ij->i", dO_i, O_i, out=D_i)
                mem.write(self.D[h], D_i, rows_)
                mem.free(O_i, D_i)
                np.multiply(dO_i, 0.0, out=dO_i)           # dQ_i = 0, in dO_i's place
                mem.write(self.dQ[h], dO_i, rows_)
                mem.free(dO_i)

    def step(self, t: int, blk: np.ndarray) -> int:
        """Add step ``t``'s block ``blk = (K_j, V_j, dK_j, dV_j)`` (``4 x H x n_j x d``, as it
        arrived) to ``dQ_p`` and, in place in ``blk``, to ``dK_j, dV_j`` (what the next hop
        sends); returns the score entries computed."""
        s = self.steps[t]
        if s.plan is None:
            return 0
        mem, work = self.mem, 0
        for h in range(self.H):
            K, V, dK, dV = (mem.load(f"{x} {t} {h}", blk[i, h])
                            for i, x in enumerate(("K", "V", "dK", "dV")))
            work += self._head(s, h, K, V, dK, dV)
            blk[2, h] = mem.fetch(dK)                      # the memory the next hop sends from
            blk[3, h] = mem.fetch(dV)
        return work

    def _head(self, s, h, K, V, dK, dV) -> int:
        mem, d, B_r, B_c, work = self.mem, self.d, s.plan.B_r, s.plan.B_c, 0
        for J, j0 in enumerate(range(0, s.n_k, B_c)):
            if not s.nonempty[:, J].any():
                continue                                   # not touched: it travels on
            cols = slice(j0, min(j0 + B_c, s.n_k))
            K_j, V_j = mem.read(K, cols), mem.read(V, cols)
            K_j *= self.scale
            dK_j, dV_j = mem.read(dK, cols), mem.read(dV, cols)    # the arrived partials
            for I, i0 in enumerate(range(0, self.n, B_r)):
                if not s.nonempty[I, J]:
                    continue
                rows_ = slice(i0, min(i0 + B_r, self.n))
                Q_i, L_i = mem.read(self.Q[h], rows_), mem.read(self.L[h], rows_)
                P_ij = mem.allocate((Q_i.shape[0], K_j.shape[0]), "P_ij", fill=None)
                np.matmul(Q_i, K_j.T, out=P_ij)
                if s.mask is None:
                    work += P_ij.size
                else:
                    keep = s.plan.mask.excluded[rows_, cols]
                    work += int(keep.size - np.count_nonzero(keep))
                    if not s.full[I, J]:
                        np.copyto(P_ij, -np.inf, where=keep)
                P_ij -= L_i[:, None]
                np.exp(P_ij, out=P_ij)
                dO_i = mem.read(self.dO[h], rows_)
                dV_j += P_ij.T @ dO_i
                D_i = mem.read(self.D[h], rows_)
                dS = mem.allocate(P_ij.shape, "dP_ij", fill=None)
                np.matmul(dO_i, V_j.T, out=dS)
                dS -= D_i[:, None]
                dS *= P_ij
                dQ_i = mem.read(self.dQ[h], rows_)
                dQ_i += dS @ K_j
                mem.write(self.dQ[h], dQ_i, rows_)
                dS *= self.scale                           # dK_j += tau dS^T Q_i
                dK_j += dS.T @ Q_i
                mem.free(Q_i, L_i, P_ij, dO_i, D_i, dS, dQ_i)
            mem.write(dK, dK_j, cols)
            mem.write(dV, dV_j, cols)
            mem.free(K_j, V_j, dK_j, dV_j)
        return work

    def add(self, total: np.ndarray, part: np.ndarray) -> None:
        """One addition of a reduce-scatter: ``total += part`` in place, for ``k x H x n_j x d``
        partials (``k = 2``: ``dK_j, dV_j``; ``k = 1``: the grid's ``dQ``; its own, and the one
        that arrived, both placed in the memory), through the cache (:func:`add`)."""
        mem = self.mem
        self.adds += 1
        for i in range(total.shape[0]):
            for h in range(self.H):
                T = mem.load(f"sum {self.adds} {i} {h}", total[i, h])
                add(mem, T, mem.load(f"part {self.adds} {i} {h}", part[i, h]))
                total[i, h] = mem.fetch(T)

    def gradient(self) -> np.ndarray:
        """``dQ_p`` (``H x n_p x d``), copied out of the slow memory (not a transfer)."""
        return np.stack([self.mem.fetch(x) for x in self.dQ])


class GridProcessor(_Cached):
    """One processor of the grid through its own cache of ``M`` entries (module docstring).

    Its query block ``Q`` (``H x N_a x d``, rows ``qrows``) and key block ``K, V`` (``H x N^b x
    d``, rows ``krows``), gathered by the network, are placed in the slow memory of a
    :class:`~ioattn.memory.TwoLevelMemory`; :meth:`attend` runs FlashAttention-2
    (:mod:`ioattn.algorithms.flash`) once per head, saving ``L`` when ``parts = P_c > 1``;
    :meth:`partial` is what the reduce-scatter sends, :meth:`merge` folds the partials of its
    own rows ``own`` (a slice of the query block) and :meth:`output` returns ``O_p``.
    """

    def __init__(self, M: int, Q: np.ndarray, K: np.ndarray, V: np.ndarray, qrows, krows,
                 own: slice, parts: int, causal: bool, scale: float):
        H, n, d = Q.shape
        self.mem = mem = TwoLevelMemory(M, owner="flash")
        self.H, self.d, self.own, self.parts, self.scale = H, d, own, parts, scale
        mask = _rect_mask(qrows, krows, causal)
        self.plan = plan("flash", n, d, M, N_k=len(krows), mask=mask, save_lse=parts > 1)
        self.work = H * (n * len(krows) if mask is None else int(np.count_nonzero(mask)))
        self.Q = [mem.load(f"Q {h}", Q[h]) for h in range(H)]
        self.K = [mem.load(f"K {h}", K[h]) for h in range(H)]
        self.V = [mem.load(f"V {h}", V[h]) for h in range(H)]
        self.O = [mem.allocate_slow(f"O {h}", (n, d)) for h in range(H)]
        self.L = [mem.allocate_slow(f"L {h}", n) if parts > 1 else None for h in range(H)]
        self.out = None

    def attend(self) -> int:
        """One FlashAttention-2 run per head; returns the score entries the mask keeps."""
        flash = get("flash")
        for h in range(self.H):
            flash.simulate(self.mem, self.Q[h], self.K[h], self.V[h], self.O[h], self.plan,
                           self.scale, L=self.L[h])
        return self.work

    def partial(self) -> np.ndarray:
        """The partial ``(O, L)`` of the query block, ``H x N_a x (d + 1)`` with ``L`` in column
        ``d``, copied out of the slow memory (not a transfer: the network sends it from there)."""
        O = np.stack([self.mem.fetch(O) for O in self.O])
        return np.concatenate([O, np.stack([self.mem.fetch(L) for L in self.L])[..., None]],
                              axis=2)

    def merge(self, received) -> None:
        """Merge the ``P_c`` partials of its own rows (:func:`merge`): ``received`` lists, in
        the order of the grid row, each other processor's ``H x n_p x (d + 1)`` partial of them
        (placed in the memory by the network, not a transfer), and None in its own place."""
        if len(received) != self.parts or sum(x is None for x in received) != 1:
            raise ValueError(f"merge takes the {self.parts} partials of the grid row, None in "
                             f"this processor's own place")
        if self.parts == 1:
            return                                   # nothing to merge: O is the output
        mem, d, n = self.mem, self.d, self.own.stop - self.own.start
        self.out = [mem.allocate_slow(f"O_p {h}", (n, d)) for h in range(self.H)]
        for h in range(self.H):
            parts = []
            for c, x in enumerate(received):
                if x is None:
                    parts.append((self.O[h], self.L[h], self.own.start))
                else:
                    parts.append((mem.load(f"O from {c} {h}", x[h, :, :d]),
                                  mem.load(f"L from {c} {h}", x[h, :, d]), 0))
            merge(mem, parts, self.out[h])

    def output(self) -> np.ndarray:
        """``O_p`` (``H x n_p x d``), copied out of the slow memory (not a transfer)."""
        if self.parts > 1 and self.out is None:
            raise ValueError("the partials are not merged yet: call merge first")
        return np.stack([self.mem.fetch(O) for O in (self.O if self.parts == 1 else self.out)])
