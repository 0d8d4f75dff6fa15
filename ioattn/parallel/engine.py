"""The parallel algorithms as MPI programs: each rank holds its rows, every word is counted.

Run by ``mpiexec -n P python -m ioattn.parallel.engine ...`` (:func:`ioattn.parallel.run` does it
for you). Each function below is what one rank executes, on its own shares, through a
:class:`~ioattn.parallel.counted.Counted` communicator; the schedules and their exact costs are
in :mod:`ioattn.parallel.costs`. Locally, each rank attends with the online softmax of
FlashAttention (running maximum ``m``, running sum ``l``), one block of keys at a time.

Two ways to start it:

- ``python -m ioattn.parallel.engine SPEC.json OUT.json``: the jobs in ``SPEC.json`` (written by
  :func:`ioattn.parallel.run`), results to ``OUT.json`` (rank 0);
- ``python -m ioattn.parallel.engine ring --N 4096 --d 64 [--heads H] [--causal] [--backward]
  [--grid 2x4] [--seed 0]`` (``--grid`` is ``P_r x P_c`` for ``grid``, ``P_u x P_r`` for
  ``usp``): one run on random inputs; rank 0 prints the counted words beside the
  closed form. The same command runs across machines with MPICH's ``mpiexec -n P -hosts a,b``.

With ``--M`` (``M=`` of :func:`ioattn.parallel.run`), each rank attends through its own cache of
``M`` entries over its memory (:mod:`~ioattn.parallel.two_level`) and reports the entries
between them beside its words: a :class:`~ioattn.parallel.two_level.Processor` for the rings,
the all-gather, all-to-all and USP (those two after their first all-to-all, on the rows of their
heads), a :class:`~ioattn.parallel.two_level.GridProcessor` for ``grid`` and ``usp_grid``, which
also merges the partial outputs through the cache; with ``--backward``, a
:class:`~ioattn.parallel.two_level.BackwardProcessor` for the rings, the all-gather (which
also adds the partials of its reduce-scatter through the cache), USP and all-to-all (those two
after their first all-to-all, on the rows of their heads), ``grid`` and ``usp_grid`` (one
step on the gathered blocks, given ``D``, then the additions of both reduce-scatters through
the cache).
Head groups x grid (:func:`usp_grid`) runs :func:`grid` on the ranks that share the heads.

The backward passes, one for every algorithm: :func:`ring_backward` (ring, striped and zigzag),
:func:`all_gather_backward` (the gather again, then a ring reduce-scatter of ``dK, dV``),
:func:`usp_backward` (USP and its zigzag form: all-to-all in, the ring's backward across the
groups, all-to-all back; with one group, ``P_r = 1``, it is all-to-all's backward, the reverse
all-to-all of DeepSpeed Ulysses), :func:`grid_backward` (gathers along the grid row and column,
then reduce-scatters of ``dQ`` along the row and of ``dK, dV`` along the column) and
:func:`usp_grid_backward` (all-to-all in, :func:`grid_backward` on the groups, all-to-all back);
the rings of the first and of USP are the same code (:func:`_gradient_ring`).

Zigzag ring attention is :func:`ring` and :func:`ring_backward` on the zigzag layout (the rows
of the two chunks of each processor, :func:`~ioattn.parallel.layout.rows`): the causal mask is
applied by the global row indices, so the same code computes exactly the scores it keeps.

Inputs come from a seeded generator (every rank draws the same arrays and keeps its rows) or from
an ``.npz`` file; the check against :mod:`ioattn.parallel.reference` gathers the outputs to rank 0
outside the counted communicator: it is verification, not part of the algorithm.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

import numpy as np

from .costs import LAYOUT, check, cost
from .counted import Counted
from .layout import group_rows, offsets, rows
from .reference import attention, attention_backward
from .two_level import BackwardProcessor, GridProcessor, Processor, check_M, key_steps

__all__ = ["ERROR", "all_gather", "all_gather_backward", "all_to_all", "grid", "grid_backward",
           "main", "ring", "ring_backward", "run_job", "usp", "usp_backward", "usp_grid",
           "usp_grid_backward"]

#: How a failing rank marks its error on stderr, for :func:`ioattn.parallel.launch.launch`.
ERROR = "ioattn-parallel-error:"


# -- local arithmetic ------------------------------------------------------------------------
def _scores(Q, K, qrows, krows, causal, scale):
    """``S = scale Q K^T`` per head, ``-inf`` where a causal mask hides a key, and the number of
    score entries per head that are not hidden (0: nothing to compute, ``S`` is None)."""
    count = len(qrows) * len(krows)
    if causal:
        keep = krows[None, :] <= qrows[:, None]
        count = int(np.count_nonzero(keep))
        if count == 0:
            return None, 0
    S = np.matmul(Q, K.transpose(0, 2, 1))
    S *= scale
    if causal and count < keep.size:
        S[:, ~keep] = -np.inf
    return S, count


def _attend(Q, K, V, qrows, krows, causal, scale, O, m, l) -> int:
    """Fold keys ``K, V`` (``H x c x d``) into the running ``O, m, l`` of queries ``Q`` by the
    online softmax; returns the score entries computed (those a causal mask keeps)."""
    S, count = _scores(Q, K, qrows, krows, causal, scale)
    if count == 0:
        return 0
    m_new = np.maximum(m, S.max(axis=2))
    live = np.isfinite(m_new)
    with np.errstate(invalid="ignore"):
        alpha = np.exp(np.where(live, m - m_new, -np.inf))
    P = np.exp(S - np.where(live, m_new, 0.0)[..., None])
    l *= alpha
    l += P.sum(axis=2)
    O *= alpha[..., None]
    O += np.matmul(P, V)
    m[...] = m_new
    return Q.shape[0] * count


def _finish(O, m, l) -> None:
    """``O /= l`` and ``m <- L = m + log l`` in place (``L = -inf`` for a row with no keys)."""
    np.divide(O, l[..., None], out=O, where=l[..., None] > 0)
    with np.errstate(divide="ignore"):
        m += np.log(l)


# -- the algorithms: what rank p runs ----------------------------------------------------------
def ring(cc: Counted, Q, KV, rows_of, causal: bool, scale: float, local=None):
    """Ring attention, forward (:mod:`~ioattn.parallel.costs`): ``K_j, V_j`` travel round the
    ring in one message per step, sent while the held block is used. Returns ``O_p, L_p``
    (``O_p`` only with ``local``, a :class:`~ioattn.parallel.two_level.Processor` through whose
    cache each step's block is attended)."""
    p, P = cc.rank, cc.size
    H, n, d = Q.shape
    O = cc.hold("O", np.zeros((H, n, d)))
    m = cc.hold("m", np.full((H, n), -np.inf))
    l = cc.hold("l", np.zeros((H, n)))
    cur, cur_name = KV, None
    for s in range(P):
        j = (p - s) % P
        handle = None
        if s < P - 1:
            nxt_name = f"block {s + 1}"
            nxt = cc.hold(nxt_name, np.empty((2, H, len(rows_of[(j - 1) % P]), d)))
            handle = cc.start([((p + 1) % P, cur)], [((p - 1) % P, nxt)])
        if local is None:
            cc.work.append(_attend(Q, cur[0], cur[1], rows_of[p], rows_of[j], causal, scale, O,
                                   m, l))
        else:
            cc.work.append(local.step(s, cur[0], cur[1]))
        if handle is not None:
            cc.wait(handle)
        if cur_name is not None:
            cc.drop(cur_name)
        if s < P - 1:
            cur, cur_name = nxt, nxt_name
    if local is not None:
        return (local.output(),)
    _finish(O, m, l)
    return O, m


def _gradients(Q, blk, dO, L, D, dQ, qrows, krows, causal, scale) -> int:
    """Add block ``j``'s part to ``dQ`` and to the travelling ``dK_j, dV_j`` (``blk[2:]``)."""
    K, V, dK, dV = blk
    S, count = _scores(Q, K, qrows, krows, causal, scale)
    if count == 0:
        return 0
    S -= L[..., None]
    Pm = np.exp(S)                                         # P_ij = exp(tau q_i.k_j - L_i)
    dV += np.matmul(Pm.transpose(0, 2, 1), dO)
    dS = np.matmul(dO, V.transpose(0, 2, 1))               # dP
    dS -= D[..., None]
    dS *= Pm                                               # dS = P o (dP - D)
    dQ += scale * np.matmul(dS, K)
    dK += scale * np.matmul(dS.transpose(0, 2, 1), Q)
    return Q.shape[0] * count


def ring_backward(cc: Counted, Q, KV, O, dO, L, rows_of, causal: bool, scale: float,
                  local=None):
    """Ring attention, backward: the block ``(K_j, V_j, dK_j, dV_j)`` travels (one message per
    step, after it is used), and a last step sends ``dK_j, dV_j`` home. Returns ``dQ, dK, dV``.
    With ``local``, a :class:`~ioattn.parallel.two_level.BackwardProcessor`, each step's block
    is folded through its cache (step ``s = p - j mod P``) and ``dQ`` is its gradient."""
    p, P = cc.rank, cc.size
    H, n, d = Q.shape
    D = cc.hold("D", np.einsum("hnd,hnd->hn", dO, O))
    dQ = cc.hold("dQ", np.zeros((H, n, d)))
    blk = cc.hold("block 0", np.zeros((4, H, n, d)))
    blk[:2] = KV
    if local is None:
        def fold(b, j):
            return _gradients(Q, b, dO, L, D, dQ, rows_of[p], rows_of[j], causal, scale)
    else:
        def fold(b, j):
            return local.step((p - j) % P, b)
    home = _gradient_ring(cc, blk, [len(r) for r in rows_of], p, list(range(P)), fold)
    if local is not None:
        dQ[...] = local.gradient()
    return dQ, home[0], home[1]


def _gradient_ring(cc: Counted, blk, sizes, r: int, ranks, fold, tag: int = 0):
    """The ring of the backward pass over the places ``ranks`` (this rank at place ``r``, place
    ``j`` holding ``sizes[j]`` rows): at step ``s`` fold the held block ``(K_j, V_j, dK_j,
    dV_j)`` of place ``j = r - s`` (``fold(blk, j)`` adds to its ``dK_j, dV_j``) and pass it
    on; a last step takes ``dK_r, dV_r`` home. ``blk`` is held as ``"block 0"``; returns the
    ``2 x H x n_r x d`` of ``dK_r, dV_r``, held (as ``"dK, dV"``, or in ``"block 0"`` when there
    is one place)."""
    P = len(ranks)
    nxt_rank, prev_rank = ranks[(r + 1) % P], ranks[(r - 1) % P]
    name = "block 0"
    for s in range(P):
        j = (r - s) % P
        cc.work.append(fold(blk, j))
        if s < P - 1:
            nxt = cc.hold(f"block {s + 1}", np.empty((4,) + blk.shape[1:2]
                                                     + (sizes[(j - 1) % P], blk.shape[3])))
            cc.exchange([(nxt_rank, blk)], [(prev_rank, nxt)], tag=tag)
            cc.drop(name)
            blk, name = nxt, f"block {s + 1}"
        elif P > 1:
            home = cc.hold("dK, dV", np.empty((2,) + blk.shape[1:2] + (sizes[r], blk.shape[3])))
            cc.exchange([(nxt_rank, blk[2:])], [(prev_rank, home)], tag=tag)
            cc.drop(name)
            return home
    return blk[2:]


def all_to_all(cc: Counted, QKV, N: int, rows_of, causal: bool, scale: float, M=None):
    """Head parallelism: ``QKV`` is this rank's ``H x 3 x n_p x d`` share; an all-to-all brings
    all rows of its heads, it attends locally, a second all-to-all returns the rows of ``O``.
    Returns ``O_p`` and, with ``M``, the :class:`~ioattn.parallel.two_level.Processor` through
    whose cache of ``M`` entries it attended its heads' ``N`` rows in one step (else None)."""
    p, P = cc.rank, cc.size
    H, _, n, d = QKV.shape
    ho = offsets(H, P)
    mine = slice(ho[p], ho[p + 1])
    h = ho[p + 1] - ho[p]
    peers = [q for q in range(P) if q != p]
    pieces = {p: QKV[mine]}
    for q in peers:
        pieces[q] = cc.hold(f"in {q}", np.empty((h, 3, len(rows_of[q]), d)))
    cc.exchange([(q, QKV[ho[q]:ho[q + 1]]) for q in peers], [(q, pieces[q]) for q in peers])
    out, work = {}, 0
    for q in range(P):
        out[q] = cc.hold(f"O {q}", np.zeros((h, len(rows_of[q]), d)))
    m = cc.hold("m", np.full((h, N), -np.inf))
    l = cc.hold("l", np.zeros((h, N)))
    local = None
    if M is not None:       # all N rows of its heads (the held words again), in one cache
        every = np.concatenate([pieces[q] for q in range(P)], axis=2)
        local = Processor(M, every[:, 0], np.arange(N), [np.arange(N)], causal, scale)
        work = local.step(0, every[:, 1], every[:, 2])
        O_all = local.output()
    for q in range(P):
        span = slice(rows_of[q][0], rows_of[q][-1] + 1)  # the contiguous layout: views
        if local is not None:
            out[q][...] = O_all[:, span]
            continue
        mq, lq = m[:, span], l[:, span]
        for r in range(P):
            work += _attend(pieces[q][:, 0], pieces[r][:, 1], pieces[r][:, 2], rows_of[q],
                            rows_of[r], causal, scale, out[q], mq, lq)
        _finish(out[q], mq, lq)
    cc.work.append(work)
    cc.drop("m", "l", *(f"in {q}" for q in peers))
    O = cc.hold("O", np.empty((H, n, d)))
    O[mine] = out[p]
    cc.exchange([(q, out[q]) for q in peers], [(q, O[ho[q]:ho[q + 1]]) for q in peers], tag=1)
    return O, local


def grid(cc: Counted, Q, KV, rows_of, shape, causal: bool, scale: float, ranks=None, M=None):
    """The two-dimensional scheme on a ``P_r x P_c`` grid, rank ``p = a P_c + b``: gather the
    query block along grid row ``a`` and the key block along grid column ``b``, attend, then a
    reduce-scatter along the row merges the partial ``(O, L)`` by log-sum-exp. ``ranks``, when
    given, are the MPI ranks of the grid's places (the grids of ``"usp_grid"``); ``rows_of``
    the rows of each place. Returns ``O_p`` and, with ``M``, the
    :class:`~ioattn.parallel.two_level.GridProcessor` through whose cache of ``M`` entries the
    blocks were attended and the partials merged (else None)."""
    at = list(range(cc.size)) if ranks is None else list(ranks)
    p = at.index(cc.rank)
    P_r, P_c = shape
    a, b = divmod(p, P_c)
    H, n, d = Q.shape
    row = [a * P_c + c for c in range(P_c)]
    col = [r * P_c + b for r in range(P_r)]
    Qs, KVs = {p: Q}, {p: KV}
    for q in row:
        if q != p:
            Qs[q] = cc.hold(f"Q {q}", np.empty((H, len(rows_of[q]), d)))
    cc.exchange([(at[q], Q) for q in row if q != p], [(at[q], Qs[q]) for q in row if q != p],
                tag=1)
    for k in col:
        if k != p:
            KVs[k] = cc.hold(f"KV {k}", np.empty((2, H, len(rows_of[k]), d)))
    cc.exchange([(at[k], KV) for k in col if k != p],
                [(at[k], KVs[k]) for k in col if k != p], tag=2)
    parts, work = {}, 0
    for q in row:                                  # partial (O, L) of chunk q, L in column d
        parts[q] = cc.hold(f"part {q}", np.zeros((H, len(rows_of[q]), d + 1)))
    stats = {q: (cc.hold(f"m {q}", np.full((H, len(rows_of[q])), -np.inf)),
                 cc.hold(f"l {q}", np.zeros((H, len(rows_of[q]))))) for q in row}
    local = None
    if M is not None:       # the gathered blocks (the held words again), in one cache
        off = np.cumsum([0] + [len(rows_of[q]) for q in row])
        local = GridProcessor(M, np.concatenate([Qs[q] for q in row], axis=1),
                              *np.concatenate([KVs[k] for k in col], axis=2),
                              np.concatenate([rows_of[q] for q in row]),
                              np.concatenate([rows_of[k] for k in col]),
                              slice(off[b], off[b + 1]), P_c, causal, scale)
        work = local.attend()
        part = local.partial() if P_c > 1 else None
    for q in row:
        if local is not None:
            if part is not None:
                parts[q][...] = part[:, off[q - row[0]]:off[q - row[0] + 1]]
            cc.drop(f"m {q}", f"l {q}")
            continue
        O_q = parts[q][..., :d]
        for k in col:
            work += _attend(Qs[q], KVs[k][0], KVs[k][1], rows_of[q], rows_of[k], causal, scale,
                            O_q, *stats[q])
        _finish(O_q, *stats[q])
        parts[q][..., d] = stats[q][0]
        cc.drop(f"m {q}", f"l {q}")
    cc.work.append(work)
    cc.drop(*(f"Q {q}" for q in row if q != p), *(f"KV {k}" for k in col if k != p))
    got = {p: parts[p]}
    for q in row:
        if q != p:
            got[q] = cc.hold(f"from {q}", np.empty((H, n, d + 1)))
    cc.exchange([(at[q], parts[q]) for q in row if q != p],
                [(at[q], got[q]) for q in row if q != p], tag=3)
    O = cc.hold("O", np.zeros((H, n, d)))
    if local is not None:
        local.merge([None if q == p else got[q] for q in row])
        O[...] = local.output()
        return O, local
    L = np.logaddexp.reduce(np.stack([got[q][..., d] for q in row]), axis=0)
    with np.errstate(invalid="ignore"):
        for q in row:
            O += np.nan_to_num(np.exp(got[q][..., d] - L))[..., None] * got[q][..., :d]
    return O, None


def all_gather(cc: Counted, Q, KV, rows_of, causal: bool, scale: float, local=None):
    """All-gather of ``K, V`` [LLAMA3]: rank ``p`` sends ``K_p, V_p`` to every other rank in one
    message each, then attends ``Q_p`` to every block (the whole of ``K, V`` held). Returns
    ``O_p, L_p`` (``O_p`` only with ``local``, which attends ``Q_p`` to all the blocks in one
    FlashAttention run through its cache).

    References
    ----------
    .. [LLAMA3] A. Grattafiori et al., "The Llama 3 herd of models", arXiv:2407.21783 (2024),
       section 3.3.2.
    """
    p, P = cc.rank, cc.size
    H, n, d = Q.shape
    peers = [q for q in range(P) if q != p]
    blocks = {p: KV}
    for q in peers:
        blocks[q] = cc.hold(f"K, V {q}", np.empty((2, H, len(rows_of[q]), d)))
    cc.exchange([(q, KV) for q in peers], [(q, blocks[q]) for q in peers])
    O = cc.hold("O", np.zeros((H, n, d)))
    m = cc.hold("m", np.full((H, n), -np.inf))
    l = cc.hold("l", np.zeros((H, n)))
    if local is not None:
        every = np.concatenate([blocks[q] for q in range(P)], axis=2)   # the held words again
        cc.work.append(local.step(0, every[0], every[1]))
        cc.drop(*(f"K, V {q}" for q in peers))
        return (local.output(),)
    cc.work.append(sum(_attend(Q, blocks[q][0], blocks[q][1], rows_of[p], rows_of[q], causal,
                               scale, O, m, l) for q in range(P)))
    cc.drop(*(f"K, V {q}" for q in peers))
    _finish(O, m, l)
    return O, m


def all_gather_backward(cc: Counted, Q, KV, O, dO, L, rows_of, causal: bool, scale: float,
                        local=None):
    """All-gather of ``K, V``, backward [LLAMA3]: rank ``p`` gathers every block of ``K, V``
    again (one message to each other rank), adds each block's part to ``dQ_p`` and to its own
    partial ``dK_j, dV_j`` of every block ``j``, and a ring reduce-scatter (``P - 1`` steps: at
    step ``s`` it passes the running sum of block ``p - s - 1`` to ``p + 1`` and adds its partial
    of block ``p - s - 2`` to the sum arriving from ``p - 1``) leaves it the whole ``dK_p,
    dV_p``. Returns ``dQ, dK, dV``. With ``local``, a
    :class:`~ioattn.parallel.two_level.BackwardProcessor`, the blocks are folded in one step
    through its cache (all ``N`` keys, the partials from zero) and each addition of the
    reduce-scatter goes through it too
    (:meth:`~ioattn.parallel.two_level.BackwardProcessor.add`)."""
    p, P = cc.rank, cc.size
    H, n, d = Q.shape
    D = cc.hold("D", np.einsum("hnd,hnd->hn", dO, O))
    dQ = cc.hold("dQ", np.zeros((H, n, d)))
    peers = [q for q in range(P) if q != p]
    blocks = {p: KV}
    for q in peers:
        blocks[q] = cc.hold(f"K, V {q}", np.empty((2, H, len(rows_of[q]), d)))
    cc.exchange([(q, KV) for q in peers], [(q, blocks[q]) for q in peers])
    parts = {q: cc.hold(f"dK, dV {q}", np.zeros((2, H, len(rows_of[q]), d))) for q in range(P)}
    if local is None:
        cc.work.append(sum(_gradients(Q, (*blocks[q], *parts[q]), dO, L, D, dQ, rows_of[p],
                                      rows_of[q], causal, scale) for q in range(P)))
    else:                   # every block and partial (the held words again), in one step
        blk = np.concatenate([np.concatenate([blocks[q], parts[q]]) for q in range(P)], axis=2)
        cc.work.append(local.step(0, blk))
        at = np.cumsum([0] + [len(r) for r in rows_of])
        for q in range(P):
            parts[q][...] = blk[2:, :, at[q]:at[q + 1]]
        dQ[...] = local.gradient()
    cc.drop(*(f"K, V {q}" for q in peers))
    for s in range(P - 1):                      # the ring reduce-scatter of dK, dV
        out, into = (p - s - 1) % P, (p - s - 2) % P
        got = cc.hold("sum", np.empty_like(parts[into]))
        cc.exchange([((p + 1) % P, parts[out])], [((p - 1) % P, got)], tag=1)
        if local is None:
            parts[into] += got
        else:
            local.add(parts[into], got)
        cc.drop("sum")
    return dQ, parts[p][0], parts[p][1]


def _to_group(cc: Counted, X, rows_of, P_u: int, P_r: int, tail):
    """The first all-to-all of USP and its variants on ``P_u x P_r`` ranks, ``p = r P_u + u``:
    rank ``p`` sends each rank ``q`` of its group ``r`` its rows of ``q``'s heads and takes
    theirs of its own heads. ``X`` is this rank's share, heads first; ``tail(m)`` the shape of
    one head's piece of ``m`` rows. Returns ``r, u``, the head offsets ``ho``, the heads ``h`` it
    serves, its ``group`` and ``peers``, the ``pieces`` (rank -> its rows of those heads), the
    ``block_rows`` of every group (its ranks' rows one after the other) and the ``views``
    (rank ``q``'s rows inside its group's block)."""
    p = cc.rank
    r, u = divmod(p, P_u)
    ho = offsets(X.shape[0], P_u)
    h = ho[u + 1] - ho[u]
    group = [r * P_u + v for v in range(P_u)]
    peers = [q for q in group if q != p]
    pieces = {p: X[ho[u]:ho[u + 1]]}
    for q in peers:
        pieces[q] = cc.hold(f"in {q}", np.empty((h, *tail(len(rows_of[q])))))
    cc.exchange([(q, X[ho[q % P_u]:ho[q % P_u + 1]]) for q in peers],
                [(q, pieces[q]) for q in peers])
    block_rows = [np.concatenate([rows_of[g * P_u + v] for v in range(P_u)]) for g in range(P_r)]
    at = np.cumsum([0] + [len(rows_of[q]) for q in group])
    views = {q: slice(at[v], at[v + 1]) for v, q in enumerate(group)}
    return r, u, ho, h, group, peers, pieces, block_rows, views


def usp(cc: Counted, QKV, N: int, rows_of, shape, causal: bool, scale: float, M=None):
    """Ulysses x ring [USP] on ``P_u x P_r`` ranks, ``p = r P_u + u`` (the rows of ``rows_of``:
    contiguous, or zigzag across the groups for ``"usp_zigzag"``): an all-to-all within
    group ``r`` gives rank ``p`` the group's rows of its heads; unless ``P_r = 1``, the ranks
    with the same ``u`` pass the group blocks of ``K, V`` round a ring (one message per step,
    sent while the held block is used); a second all-to-all returns the rows of ``O``. ``QKV``
    is this rank's ``H x 3 x n_p x d`` share. Returns ``O_p`` and, with ``M``, the
    :class:`~ioattn.parallel.two_level.Processor` through whose cache of ``M`` entries the
    group's rows were attended (else None).

    References
    ----------
    .. [USP] J. Fang, S. Zhao, "USP: a unified sequence parallelism approach for long context
       generative AI", arXiv:2405.07719 (2024).
    """
    p = cc.rank
    P_u, P_r = shape
    H, _, n, d = QKV.shape
    r, u, ho, h, group, peers, pieces, block_rows, views = _to_group(
        cc, QKV, rows_of, P_u, P_r, lambda rows: (3, rows, d))
    out = {q: cc.hold(f"O {q}", np.zeros((h, len(rows_of[q]), d))) for q in group}
    N_r = len(block_rows[r])
    m = cc.hold("m", np.full((h, N_r), -np.inf))
    l = cc.hold("l", np.zeros((h, N_r)))

    local, steps = None, iter(range(P_r))
    if M is not None:       # the group's rows of Q_r again (the held words), in one cache
        local = Processor(M, np.concatenate([pieces[q][:, 0] for q in group], axis=1),
                          block_rows[r], [block_rows[(r - s) % P_r] for s in range(P_r)],
                          causal, scale)

    def fold(K, V, krows) -> int:
        if local is not None:
            return local.step(next(steps), K, V)
        return sum(_attend(pieces[q][:, 0], K, V, rows_of[q], krows, causal, scale, out[q],
                           m[:, views[q]], l[:, views[q]]) for q in group)

    if P_r == 1 and local is not None:
        every = np.concatenate([pieces[k][:, 1:3] for k in group], axis=2)   # held words again
        cc.work.append(fold(every[:, 0], every[:, 1], block_rows[r]))
    elif P_r == 1:
        cc.work.append(sum(fold(pieces[k][:, 1], pieces[k][:, 2], rows_of[k]) for k in group))
    else:
        cur = cc.hold("K, V", np.empty((2, h, N_r, d)))
        for q in group:
            cur[:, :, views[q]] = pieces[q][:, 1:3].transpose(1, 0, 2, 3)
        _usp_ring(cc, cur, block_rows, P_u, r, u, fold)
        cc.drop("K, V")
    O_r = None if local is None else local.output()
    for q in group:
        if O_r is None:
            _finish(out[q], m[:, views[q]], l[:, views[q]])
        else:
            out[q][...] = O_r[:, views[q]]
    cc.drop("m", "l", *(f"in {q}" for q in peers))
    O = cc.hold("O", np.empty((H, n, d)))
    O[ho[u]:ho[u + 1]] = out[p]
    cc.exchange([(q, out[q]) for q in peers],
                [(q, O[ho[q % P_u]:ho[q % P_u + 1]]) for q in peers], tag=1)
    return O, local


def usp_backward(cc: Counted, X, N: int, rows_of, shape, causal: bool, scale: float, M=None):
    """USP, backward, on ``P_u x P_r`` ranks, ``p = r P_u + u``: ``X`` is this rank's
    ``H x (4d + 2) n_p`` share of ``Q, K, V, dO, L, D`` (per head its ``n_p`` rows of each, one
    after the other; ``D = rowsum(dO o O)`` is computed on the rows before, so ``O`` need not
    travel). An all-to-all within group ``r`` gives rank ``p`` the group's rows of its heads;
    the ranks with the same ``u`` run the ring's backward (:func:`_gradient_ring`) on the group
    blocks; a second all-to-all returns the rows of ``dQ, dK, dV``. Returns ``dQ, dK, dV`` and,
    with ``M``, the :class:`~ioattn.parallel.two_level.BackwardProcessor` through whose cache of
    ``M`` entries the group's rows of its heads were folded, given ``D`` (else None)."""
    p = cc.rank
    P_u, P_r = shape
    H, n = X.shape[0], len(rows_of[p])
    d = (X.shape[1] // n - 2) // 4
    r, u, ho, h, group, peers, pieces, block_rows, views = _to_group(
        cc, X, rows_of, P_u, P_r, lambda rows: ((4 * d + 2) * rows,))

    def part(q, k):
        """Piece ``q``'s ``Q, K, V, dO`` (``k`` = 0 to 3, ``h x n_q x d``) or ``L, D`` (4, 5)."""
        m = len(rows_of[q])
        if k < 4:
            return pieces[q][:, k * m * d:(k + 1) * m * d].reshape(h, m, d)
        return pieces[q][:, 4 * m * d + (k - 4) * m:4 * m * d + (k - 3) * m]

    dQ = {q: cc.hold(f"dQ {q}", np.zeros((h, len(rows_of[q]), d))) for q in group}
    blk = cc.hold("block 0", np.zeros((4, h, len(block_rows[r]), d)))
    for q in group:
        blk[0, :, views[q]], blk[1, :, views[q]] = part(q, 1), part(q, 2)

    local = None
    if M is None:
        def fold(b, j) -> int:
            return sum(_gradients(part(q, 0), b, part(q, 3), part(q, 4), part(q, 5), dQ[q],
                                  rows_of[q], block_rows[j], causal, scale) for q in group)
    else:                   # the group's rows of its heads (the held words again), one cache
        def rows_(k):
            return np.concatenate([part(q, k) for q in group], axis=-1 if k > 3 else 1)

        local = BackwardProcessor(M, rows_(0), None, rows_(3), rows_(4), block_rows[r],
                                  [block_rows[(r - s) % P_r] for s in range(P_r)], causal,
                                  scale, D=rows_(5))

        def fold(b, j) -> int:
            return local.step((r - j) % P_r, b)

    home = _gradient_ring(cc, blk, [len(b) for b in block_rows], r,
                          [g * P_u + u for g in range(P_r)], fold, tag=2)
    if local is not None:
        dQ_r = local.gradient()
        for q in group:
            dQ[q][...] = dQ_r[:, views[q]]
    cc.drop(*(f"in {q}" for q in peers))
    out = cc.hold("dQ, dK, dV", np.empty((H, 3, n, d)))
    packs = {}
    for q in group:
        dest = out[ho[u]:ho[u + 1]] if q == p else cc.hold(f"to {q}", np.empty(
            (h, 3, len(rows_of[q]), d)))
        dest[:, 0], dest[:, 1:] = dQ[q], home[:, :, views[q]].transpose(1, 0, 2, 3)
        packs[q] = dest
    cc.drop(*(f"dQ {q}" for q in group), "dK, dV" if P_r > 1 else "block 0")
    cc.exchange([(q, packs[q]) for q in peers],
                [(q, out[ho[q % P_u]:ho[q % P_u + 1]]) for q in peers], tag=1)
    return out[:, 0], out[:, 1], out[:, 2], local


def usp_grid(cc: Counted, QKV, N: int, rows_of, shape, causal: bool, scale: float, M=None):
    """Head groups x grid on ``P_u x P_a x P_b`` ranks, ``p = r P_u + u`` (``r = a P_b + b``),
    contiguous rows: the all-to-all of USP within group ``r`` gives rank ``p`` the group's rows
    of its heads; the ``P_r = P_a P_b`` ranks with the same ``u`` run :func:`grid` on their
    heads, the groups' rows in the places of a ``P_a x P_b`` grid; a second all-to-all returns
    the rows of ``O``. ``QKV`` is this rank's ``H x 3 x n_p x d`` share. Returns ``O_p`` and,
    with ``M``, the :class:`~ioattn.parallel.two_level.GridProcessor` of its grid (else None).
    """
    p = cc.rank
    P_u, P_a, P_b = shape
    P_r = P_a * P_b
    H, _, n, d = QKV.shape
    r, u, ho, h, group, peers, pieces, block_rows, views = _to_group(
        cc, QKV, rows_of, P_u, P_r, lambda rows: (3, rows, d))
    N_r = len(block_rows[r])
    Q_r = cc.hold("Q_r", np.empty((h, N_r, d)))
    KV_r = cc.hold("K_r, V_r", np.empty((2, h, N_r, d)))
    for q in group:
        Q_r[:, views[q]] = pieces[q][:, 0]
        KV_r[:, :, views[q]] = pieces[q][:, 1:3].transpose(1, 0, 2, 3)
    cc.drop(*(f"in {q}" for q in peers))
    O_r, local = grid(cc, Q_r, KV_r, block_rows, (P_a, P_b), causal, scale,
                      ranks=[g * P_u + u for g in range(P_r)], M=M)
    a = r // P_b
    row = [a * P_b + c for c in range(P_b)]
    cc.drop("Q_r", "K_r, V_r", *(f"part {q}" for q in row),
            *(f"from {q}" for q in row if q != r))
    out = {q: cc.hold(f"O {q}", np.ascontiguousarray(O_r[:, views[q]])) for q in group}
    cc.drop("O")
    O = cc.hold("O", np.empty((H, n, d)))
    O[ho[u]:ho[u + 1]] = out[p]
    cc.exchange([(q, out[q]) for q in peers],
                [(q, O[ho[q % P_u]:ho[q % P_u + 1]]) for q in peers], tag=4)
    return O, local


def grid_backward(cc: Counted, X, KV, rows_of, shape, causal: bool, scale: float, ranks=None,
                  M=None):
    """The two-dimensional scheme, backward, on a ``P_r x P_c`` grid, rank ``p = a P_c + b``:
    ``X`` is this place's ``H x n_p x (2d + 2)`` of ``Q, dO, L, D`` (``D = rowsum(dO o O)`` is
    computed on the rows before, so ``O`` need not travel), ``KV`` its ``2 x H x n_p x d``.
    Gather ``X`` of the query block along grid row ``a`` and ``K, V`` of the key block along grid
    column ``b`` (one message to each peer), add block ``b``'s part to a partial ``dQ`` of every
    chunk of block ``a`` and block ``a``'s part to a partial ``dK, dV`` of every chunk of block
    ``b`` (:func:`_gradients`), then reduce-scatter: each partial ``dQ`` goes to the place of its
    rows along the row, each partial ``dK, dV`` along the column, and the place sums those of its
    own rows. ``ranks``, when given, are the MPI ranks of the places (the grids of
    ``"usp_grid"``). Returns ``dQ`` and ``dK, dV`` (``2 x H x n_p x d``) of the place, held as
    ``"dQ {p}"`` and ``"dK, dV {p}"``, and, with ``M``, the
    :class:`~ioattn.parallel.two_level.BackwardProcessor` through whose cache of ``M`` entries
    the gathered blocks were folded in one step (given ``D``) and the partials that arrived
    were added (:meth:`~ioattn.parallel.two_level.BackwardProcessor.add`; else None)."""
    at = list(range(cc.size)) if ranks is None else list(ranks)
    p = at.index(cc.rank)
    P_r, P_c = shape
    a, b = divmod(p, P_c)
    H, n, w = X.shape
    d = (w - 2) // 2
    row = [a * P_c + c for c in range(P_c) if a * P_c + c != p]
    col = [r * P_c + b for r in range(P_r) if r * P_c + b != p]
    Xs, KVs = {p: X}, {p: KV}
    for q in row:
        Xs[q] = cc.hold(f"Q, dO, L, D {q}", np.empty((H, len(rows_of[q]), w)))
    cc.exchange([(at[q], X) for q in row], [(at[q], Xs[q]) for q in row], tag=5)
    for k in col:
        KVs[k] = cc.hold(f"K, V {k}", np.empty((2, H, len(rows_of[k]), d)))
    cc.exchange([(at[k], KV) for k in col], [(at[k], KVs[k]) for k in col], tag=6)
    dQ = {q: cc.hold(f"dQ {q}", np.zeros((H, len(rows_of[q]), d))) for q in Xs}
    dKV = {k: cc.hold(f"dK, dV {k}", np.zeros((2, H, len(rows_of[k]), d))) for k in KVs}
    local = None
    if M is None:
        cc.work.append(sum(_gradients(Xs[q][..., :d], (*KVs[k], *dKV[k]), Xs[q][..., d:2 * d],
                                      Xs[q][..., 2 * d], Xs[q][..., 2 * d + 1], dQ[q],
                                      rows_of[q], rows_of[k], causal, scale)
                           for q in Xs for k in KVs))
    else:                   # the gathered blocks (the held words again), one step, one cache
        qs = [a * P_c + c for c in range(P_c)]
        ks = [r * P_c + b for r in range(P_r)]
        Xq = np.concatenate([Xs[q] for q in qs], axis=1)
        krows = np.concatenate([rows_of[k] for k in ks])
        local = BackwardProcessor(M, Xq[..., :d], None, Xq[..., d:2 * d], Xq[..., 2 * d],
                                  np.concatenate([rows_of[q] for q in qs]), [krows], causal,
                                  scale, D=Xq[..., 2 * d + 1])
        blk = np.concatenate([np.concatenate([KVs[k], dKV[k]]) for k in ks], axis=2)
        cc.work.append(local.step(0, blk))
        off = np.cumsum([0] + [len(rows_of[k]) for k in ks])
        for i, k in enumerate(ks):
            dKV[k][...] = blk[2:, :, off[i]:off[i + 1]]
        dQ_a, off = local.gradient(), np.cumsum([0] + [len(rows_of[q]) for q in qs])
        for i, q in enumerate(qs):
            dQ[q][...] = dQ_a[:, off[i]:off[i + 1]]
    cc.drop(*(f"Q, dO, L, D {q}" for q in row), *(f"K, V {k}" for k in col))
    for parts, peers, name, tag in ((dQ, row, "dQ", 7), (dKV, col, "dK, dV", 8)):
        got = {q: cc.hold(f"{name} from {q}", np.empty_like(parts[p])) for q in peers}
        cc.exchange([(at[q], parts[q]) for q in peers], [(at[q], got[q]) for q in peers],
                    tag=tag)
        for q in peers:
            if local is None:
                parts[p] += got[q]
            elif name == "dQ":
                local.add(parts[p][None], got[q][None])
            else:
                local.add(parts[p], got[q])
        cc.drop(*(f"{name} from {q}" for q in peers), *(f"{name} {q}" for q in peers))
    return dQ[p], dKV[p], local


def usp_grid_backward(cc: Counted, X, N: int, rows_of, shape, causal: bool, scale: float,
                      M=None):
    """Head groups x grid, backward, on ``P_u x P_a x P_b`` ranks, ``p = r P_u + u``
    (``r = a P_b + b``): ``X`` is this rank's ``H x (4d + 2) n_p`` share of ``Q, K, V, dO, L,
    D`` (as for :func:`usp_backward`). The all-to-all within group ``r`` gives rank ``p`` the
    group's rows of its heads; the ranks with the same ``u`` run :func:`grid_backward` on them,
    the groups' rows in the places of a ``P_a x P_b`` grid; a second all-to-all returns the rows
    of ``dQ, dK, dV``. Returns ``dQ, dK, dV`` and, with ``M``, the
    :class:`~ioattn.parallel.two_level.BackwardProcessor` of its grid (else None)."""
    p = cc.rank
    P_u, P_a, P_b = shape
    P_r = P_a * P_b
    H, n = X.shape[0], len(rows_of[p])
    d = (X.shape[1] // n - 2) // 4
    r, u, ho, h, group, peers, pieces, block_rows, views = _to_group(
        cc, X, rows_of, P_u, P_r, lambda rows: ((4 * d + 2) * rows,))
    N_r = len(block_rows[r])
    X_r = cc.hold("Q_r, dO_r, L_r, D_r", np.empty((h, N_r, 2 * d + 2)))
    KV_r = cc.hold("K_r, V_r", np.empty((2, h, N_r, d)))
    for q in group:             # piece q: per head its rows of Q, K, V, dO (m d each), L, D
        m, piece = len(rows_of[q]), pieces[q]
        blocks = piece[:, :4 * m * d].reshape(h, 4, m, d)
        X_r[:, views[q], :d], X_r[:, views[q], d:2 * d] = blocks[:, 0], blocks[:, 3]
        X_r[:, views[q], 2 * d], X_r[:, views[q], 2 * d + 1] = \
            piece[:, 4 * m * d:4 * m * d + m], piece[:, 4 * m * d + m:]
        KV_r[:, :, views[q]] = blocks[:, 1:3].transpose(1, 0, 2, 3)
    cc.drop(*(f"in {q}" for q in peers))
    dQ_r, dKV_r, local = grid_backward(cc, X_r, KV_r, block_rows, (P_a, P_b), causal, scale,
                                       ranks=[g * P_u + u for g in range(P_r)], M=M)
    cc.drop("Q_r, dO_r, L_r, D_r", "K_r, V_r")
    out = cc.hold("dQ, dK, dV", np.empty((H, 3, n, d)))
    packs = {}
    for q in group:
        dest = out[ho[u]:ho[u + 1]] if q == p else cc.hold(f"to {q}", np.empty(
            (h, 3, len(rows_of[q]), d)))
        dest[:, 0], dest[:, 1:] = dQ_r[:, views[q]], dKV_r[:, :, views[q]].transpose(1, 0, 2, 3)
        packs[q] = dest
    cc.drop(f"dQ {r}", f"dK, dV {r}")
    cc.exchange([(q, packs[q]) for q in peers],
                [(q, out[ho[q % P_u]:ho[q % P_u + 1]]) for q in peers], tag=1)
    return out[:, 0], out[:, 1], out[:, 2], local


def _usp_ring(cc: Counted, cur, block_rows, P_u: int, r: int, u: int, fold) -> None:
    """The ring of USP over the ``P_r`` groups, on the ranks ``g P_u + u``: at step ``s`` fold
    the block of group ``j = r - s`` (``fold(K, V, rows)``) while the next one arrives."""
    P_r = len(block_rows)
    nxt_rank, prev_rank = ((r + 1) % P_r) * P_u + u, ((r - 1) % P_r) * P_u + u
    cur_name = None
    for s in range(P_r):
        j = (r - s) % P_r
        handle = None
        if s < P_r - 1:
            nxt_name = f"block {s + 1}"
            nxt = cc.hold(nxt_name, np.empty((2,) + cur.shape[1:2]
                                             + (len(block_rows[(j - 1) % P_r]), cur.shape[3])))
            handle = cc.start([(nxt_rank, cur)], [(prev_rank, nxt)], tag=2)
        cc.work.append(fold(cur[0], cur[1], block_rows[j]))
        if handle is not None:
            cc.wait(handle)
        if cur_name is not None:
            cc.drop(cur_name)
        if s < P_r - 1:
            cur, cur_name = nxt, nxt_name


# -- one job, on every rank --------------------------------------------------------------------
def _inputs(job):
    """Every rank's full ``Q, K, V`` (and ``dO``): drawn from ``seed`` or loaded from ``inputs``."""
    if job.get("inputs"):
        with np.load(job["inputs"]) as f:
            arrays = {k: f[k] for k in f.files}
    else:
        rng = np.random.default_rng(job.get("seed", 0))
        shape = (job["heads"], job["N"], job["d"])
        arrays = {k: rng.standard_normal(shape) for k in ("Q", "K", "V", "dO")}
    return arrays


def run_job(job: dict, comm) -> dict | None:
    """Run one job on every rank of ``comm``; rank 0 returns the counts, the closed form and the
    error against the reference (and ``outputs`` for :func:`ioattn.parallel.run`)."""
    name, causal, backward = job["name"], bool(job.get("causal")), bool(job.get("backward"))
    P, p = comm.Get_size(), comm.Get_rank()
    N, d, _, H, shape = check(name, job["N"], job["d"], P, job["heads"], backward,
                              job.get("grid"))
    scale = job.get("scale") or 1.0 / np.sqrt(d)
    full = _inputs(job)
    rows_of = group_rows(N, shape) if name == "usp_zigzag" else rows(N, P, LAYOUT[name])
    mine = rows_of[p]
    cc = Counted(comm)
    M = job.get("M")
    local = None
    if M is not None and name in ("usp", "usp_zigzag", "all_to_all", "grid", "usp_grid"):
        M = check_M(name, d, M, backward)      # the processor is made after the first exchange
    elif M is not None:
        M = check_M(name, d, M, backward)
        _, ksteps = key_steps(name, N, P)
        if not backward:            # the backward's processor takes O and L, made below
            local = Processor(M, np.ascontiguousarray(full["Q"][:, mine]), mine, ksteps[p],
                              causal, scale)

    def take(x):
        return np.ascontiguousarray(x[:, mine])

    if backward:
        O_full, L_full = attention(full["Q"], full["K"], full["V"], causal=causal, scale=scale)
    if backward and name in ("usp", "usp_zigzag", "all_to_all", "usp_grid"):
        O = cc.hold("O", take(O_full))
        dO = take(full["dO"])
        D = np.einsum("hnd,hnd->hn", dO, O)
        X = cc.hold("Q, K, V, dO, L, D", np.concatenate(
            [take(full["Q"]).reshape(H, -1), take(full["K"]).reshape(H, -1),
             take(full["V"]).reshape(H, -1), dO.reshape(H, -1), take(L_full), D], axis=1))
        comm.Barrier()
        if name == "usp_grid":
            *out, local = usp_grid_backward(cc, X, N, rows_of, shape, causal, scale, M)
        else:       # all-to-all's backward is USP's with one group (P_r = 1)
            *out, local = usp_backward(cc, X, N, rows_of,
                                       (P, 1) if name == "all_to_all" else shape, causal,
                                       scale, M)
        out = tuple(np.ascontiguousarray(x) for x in out)
    elif backward and name == "grid":
        O = cc.hold("O", take(O_full))
        dO = take(full["dO"])
        X = cc.hold("Q, dO, L, D", np.concatenate(
            [take(full["Q"]), dO, take(L_full)[..., None],
             np.einsum("hnd,hnd->hn", dO, O)[..., None]], axis=2))
        KV = cc.hold("K, V", np.ascontiguousarray(np.stack([take(full["K"]), take(full["V"])])))
        comm.Barrier()
        dQ, dKV, local = grid_backward(cc, X, KV, rows_of, shape, causal, scale, M=M)
        out = (dQ, dKV[0], dKV[1])
    elif name in ("all_to_all", "usp", "usp_zigzag", "usp_grid"):
        QKV = cc.hold("Q, K, V", np.ascontiguousarray(
            np.stack([full["Q"], full["K"], full["V"]], axis=1)[:, :, mine]))
        comm.Barrier()
        if name == "all_to_all":
            O, local = all_to_all(cc, QKV, N, rows_of, causal, scale, M)
            out = (O,)
        elif name == "usp_grid":
            O, local = usp_grid(cc, QKV, N, rows_of, shape, causal, scale, M)
            out = (O,)
        else:
            O, local = usp(cc, QKV, N, rows_of, shape, causal, scale, M)
            out = (O,)
    else:
        Q = cc.hold("Q", take(full["Q"]))
        KV = cc.hold("K, V", np.ascontiguousarray(np.stack([take(full["K"]), take(full["V"])])))
        if backward:
            O, dO = cc.hold("O", take(O_full)), cc.hold("dO", take(full["dO"]))
            L = cc.hold("L", take(L_full))
            if M is not None:       # the rings and all-gather (check_M): the held words again
                local = BackwardProcessor(M, Q, O, dO, L, mine, ksteps[p], causal, scale)
            comm.Barrier()
            if name == "all_gather":
                out = all_gather_backward(cc, Q, KV, O, dO, L, rows_of, causal, scale, local)
            else:
                out = ring_backward(cc, Q, KV, O, dO, L, rows_of, causal, scale, local)
        elif name == "grid":
            comm.Barrier()
            O, local = grid(cc, Q, KV, rows_of, shape, causal, scale, M=M)
            out = (O,)
        elif name == "all_gather":
            comm.Barrier()
            out = all_gather(cc, Q, KV, rows_of, causal, scale, local)[:1]
        else:
            comm.Barrier()
            out = ring(cc, Q, KV, rows_of, causal, scale, local)[:1]
    # verification, outside the counted communicator
    totals = cc.totals()
    if local is not None:
        totals.update(cache_reads=local.reads, cache_writes=local.writes)
    counts = comm.gather(totals, root=0)
    gathered = comm.gather([np.asarray(x) for x in out], root=0)
    if p != 0:
        return None
    results = []
    for i in range(len(out)):
        arr = np.empty_like(full["Q"])
        for q in range(P):
            arr[:, rows_of[q]] = gathered[q][i]
        results.append(arr)
    if backward:
        want = attention_backward(full["Q"], full["K"], full["V"], full["dO"], causal=causal,
                                  scale=scale)
    else:
        want = (attention(full["Q"], full["K"], full["V"], causal=causal, scale=scale)[0],)
    error = max(float(np.max(np.abs(g - w))) for g, w in zip(results, want))
    closed = cost(name, N, d, P, heads=H, causal=causal, backward=backward, grid=shape, M=M)
    steps = closed.work.shape[1]
    keys = ("sent", "received", "messages", "memory") + (() if M is None else
                                                          ("cache_reads", "cache_writes"))
    counted = {k: [c[k] for c in counts] for k in keys}
    counted["work"] = [c["work"] + [0] * (steps - len(c["work"])) for c in counts]
    return {"id": job.get("id"), "name": name, "N": N, "d": d, "P": P, "heads": H,
            "causal": causal, "backward": backward, "grid": shape, "M": M, "counted": counted,
            "error": error, "outputs": results}


def _serve(spec_path: str, out_path: str, comm) -> None:
    with open(spec_path) as f:
        jobs = json.load(f)
    done = []
    for job in jobs:
        r = run_job(job, comm)
        if r is not None:
            outputs = r.pop("outputs")
            if job.get("outputs"):
                np.savez(job["outputs"], *outputs)
            done.append(r)
    if comm.Get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump(done, f)


def _cli(argv, comm) -> None:
    p = argparse.ArgumentParser(prog="python -m ioattn.parallel.engine",
                                description="Run one parallel attention algorithm on MPI and "
                                "print its counted words beside the closed form.")
    p.add_argument("name", choices=sorted(LAYOUT))
    p.add_argument("--N", type=int, required=True)
    p.add_argument("--d", type=int, required=True)
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--backward", action="store_true")
    p.add_argument("--grid", help="P_r x P_c for grid, P_u x P_r for usp and usp_zigzag, "
                   "P_u x P_a x P_b (or P_u x P_r) for usp_grid, e.g. 2x4")
    p.add_argument("--M", type=int, help="a cache of M entries in every process: also count "
                   "the entries between its memory and its cache")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    grid_ = tuple(int(x) for x in a.grid.lower().split("x")) if a.grid else None
    r = run_job({"name": a.name, "N": a.N, "d": a.d, "heads": a.heads, "causal": a.causal,
                 "backward": a.backward, "grid": grid_, "seed": a.seed, "M": a.M}, comm)
    if r is None:
        return
    c = cost(a.name, a.N, a.d, comm.Get_size(), heads=a.heads, causal=a.causal,
             backward=a.backward, grid=grid_, M=a.M)
    print(f"{a.name} on {r['P']} processes, N={a.N}, d={a.d}, H={a.heads}"
          f"{', causal' if a.causal else ''}{', backward' if a.backward else ''}")
    print(f"{'rank':>4} {'sent':>12} {'received':>12} {'messages':>8} {'memory':>12}   "
          f"closed form equal")
    for q in range(r["P"]):
        got = [r["counted"][k][q] for k in ("sent", "received", "messages", "memory")]
        want = [int(getattr(c, k)[q]) for k in ("sent", "received", "messages", "memory")]
        print(f"{q:>4} {got[0]:>12,} {got[1]:>12,} {got[2]:>8} {got[3]:>12,}   {got == want}")
    if a.M is not None:
        for q in range(r["P"]):
            got = [r["counted"][k][q] for k in ("cache_reads", "cache_writes")]
            want = [int(c.cache_reads[q]), int(c.cache_writes[q])]
            print(f"rank {q}: cache reads {got[0]:,}, writes {got[1]:,} (M = {a.M:,})   "
                  f"closed form equal {got == want}")
    print(f"largest difference from the single-process reference: {r['error']:.2e}")


def main(argv=None) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0].endswith(".json"):
            _serve(argv[0], argv[1], comm)
        else:
            _cli(argv, comm)
    except SystemExit:
        raise
    except BaseException as exc:
        sys.stderr.write(traceback.format_exc())
        sys.stderr.write(f"{ERROR} rank {comm.Get_rank()}: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        comm.Abort(1)


if __name__ == "__main__":
    main()
