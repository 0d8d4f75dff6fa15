"""Grouped heads at inference: ``H_q`` query heads sharing ``H_kv`` key/value heads, counted.

Grouped-query attention [GQA]_ gives ``H_kv`` heads of keys and values to ``H_q`` heads of
queries, ``g = H_q / H_kv`` query heads to a group (multi-query attention [MQA]_ is ``H_kv = 1``,
``g = H_q``; multi-head attention is ``g = 1``). Query head ``h`` attends with key/value head
``h // g``. Each head is rectangular attention: ``Q_h`` of ``N_q`` rows against ``K``, ``V`` of
``N_k`` rows (a decoding step is ``N_q = 1``). Two schedules (``grouping=``), both run with any
registered algorithm through the memory model:

- ``"per_head"`` (schedule (a)): each query head runs the algorithm on its own, as a kernel
  launched per query head does; the ``g`` heads of a group each read the group's ``K``, ``V``.
  Its I/O is ``H_q`` times that of one head::

      I/O = H_q * io_cost(name, N_q, d, M, N_k=N_k).

- ``"stacked"`` (schedule (b)): the ``g`` query heads of a group are served from one read of
  each ``K``, ``V`` tile: their rows are stacked as one block of ``g N_q`` rows against the
  group's shared ``K``, ``V``, as FlashInfer fuses the heads of a group into the query rows of
  one tile [FI]_. Row ``i g + j`` of the stacked ``Q`` is position ``i`` of the group's head
  ``j`` (position-major, so the rows of one position stay together, and the causal mask of a
  chunk, repeated ``g`` times row by row, keeps its blocks). Its I/O is ``H_kv`` times that of
  one stacked problem::

      I/O = H_kv * io_cost(name, g N_q, d, M, N_k=N_k),

  with the mask repeated ``g`` times row by row when there is one.

For FlashAttention (FA2, dense) with ``B_r`` the query block of one head's plan and ``B'_r`` that
of the stacked plan::

    per_head: H_q (2 N_q d + 2 N_k d ceil(N_q / B_r)),
    stacked:  H_kv (2 g N_q d + 2 N_k d ceil(g N_q / B'_r)).

When the stacked block holds the whole group (``B'_r >= g N_q``), the stacked schedule reads
every ``K``, ``V`` entry once, ``2 H_q N_q d + 2 H_kv N_k d`` in all: the trivial bound of
grouped heads (:func:`ioattn.bounds.grouped_lower`); the per-head schedule reads the cache
``g`` times, and at ``N_q = 1`` with ``N_k >> g`` moves about ``g`` times as much.

The counted run (:func:`run_grouped`) runs every head (or group) in one two-level memory, one
after another, and its count equals :func:`grouped_cost`, the closed form, field by field
(the tests prove it for ``g`` in ``1, 2, 8, H_q``).

References
----------
.. [GQA] J. Ainslie et al., "GQA: training generalized multi-query transformer models from
   multi-head checkpoints", EMNLP 2023.
.. [MQA] N. Shazeer, "Fast transformer decoding: one write-head is all you need",
   arXiv:1911.02150, 2019.
.. [FI] Z. Ye et al., "FlashInfer: efficient and customizable attention engine for LLM inference
   serving", MLSys 2025 (the query heads of a group fused into the rows of one tile).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_count, as_matrix, as_scale
from .algorithms import get
from .algorithms.base import Plan
from .api import collector_paused
from .memory import IOCount, TwoLevelMemory

__all__ = ["GroupedResult", "GROUPINGS", "grouped_cost", "grouped_plan", "run_grouped",
           "stack_group", "unstack_group"]

#: The two schedules of grouped heads: each query head on its own, or a group's heads stacked.
GROUPINGS = ("per_head", "stacked")


@dataclass(frozen=True)
class GroupedResult:
    """What :func:`run_grouped` returns.

    Attributes
    ----------
    output : numpy.ndarray
        ``O``, shape ``(H_q, N_q, d)``, float64.
    io : IOCount
        Exact counts of the whole run, every head.
    plan : Plan
        The plan of one run of the algorithm: one head (``"per_head"``) or one stacked group
        of ``g N_q`` rows (``"stacked"``).
    """

    output: np.ndarray
    io: IOCount
    plan: Plan


def _group(H_q, H_kv) -> tuple[int, int, int]:
    """``(H_q, H_kv, g)`` checked: counts with ``H_kv`` dividing ``H_q``."""
    H_q, H_kv = as_count(H_q, "H_q"), as_count(H_kv, "H_kv")
    if H_q % H_kv:
        raise ValueError(f"H_kv must divide H_q (each key/value head serves g = H_q / H_kv "
                         f"query heads); got H_q = {H_q}, H_kv = {H_kv}")
    return H_q, H_kv, H_q // H_kv


def _grouping(grouping) -> str:
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}; got {grouping!r}")
    return grouping


def _stacked_mask(mask, g: int):
    """The mask of a stacked group: each row repeated ``g`` times (position-major)."""
    if mask is None or g == 1:
        return mask
    arr = np.asarray(getattr(mask, "array", mask))
    if arr.dtype != np.bool_ or arr.ndim != 2:
        raise ValueError(f"mask must be a boolean N_q x N_k array, got dtype {arr.dtype} and "
                         f"shape {arr.shape}")
    return np.repeat(arr, g, axis=0)


def grouped_plan(name: str, H_q: int, H_kv: int, N: int, d: int, M: int, *,
                 N_k: int | None = None, grouping: str = "stacked", mask=None,
                 **options) -> Plan:
    """The plan of one run of algorithm ``name`` in a grouped-heads schedule: one head of ``N``
    query rows (``"per_head"``) or one group's ``g N`` stacked rows (``"stacked"``) against
    ``N_k`` keys (``N`` by default). The block rule is the algorithm's for that shape
    (:func:`ioattn.plan`)."""
    H_q, H_kv, g = _group(H_q, H_kv)
    N, N_k = as_count(N, "N"), as_count(N if N_k is None else N_k, "N_k")
    if mask is not None:
        _check_mask_shape(mask, N, N_k)
    rows = N * g if _grouping(grouping) == "stacked" else N
    stacked = _stacked_mask(mask, g) if grouping == "stacked" else mask
    algo = get(name)
    return algo.plan(rows, as_count(d, "d"), as_count(M, "M"), N_k=N_k, mask=stacked, **options)


def _check_mask_shape(mask, N: int, N_k: int) -> None:
    shape = getattr(mask, "shape", None) or np.shape(mask)
    if tuple(shape) != (N, N_k):
        raise ValueError(f"mask must have shape (N_q, N_k) = ({N}, {N_k}), the same for every "
                         f"head; got {tuple(shape)}")


def grouped_cost(name: str, H_q: int, H_kv: int, N: int, d: int, M: int, *,
                 N_k: int | None = None, grouping: str = "stacked", **options) -> IOCount:
    """Exact I/O of :func:`run_grouped`, in closed form (see the module docstring).

    Parameters
    ----------
    name : str
        A registered algorithm.
    H_q, H_kv : int
        Query heads and key/value heads; ``H_kv`` divides ``H_q``.
    N, d : int
        Query rows per head (``N_q``) and head dimension.
    M : int
        Cache size in entries.
    N_k : int, optional
        Key and value rows per key/value head; ``N`` by default.
    grouping : {"stacked", "per_head"}
        Schedule (b) or (a) of the module docstring.
    **options
        The algorithm's options, ``mask`` (``(N, N_k)``, the same for every head) and
        ``save_lse``.

    Returns
    -------
    IOCount
        ``H_q`` (per head) or ``H_kv`` (stacked) times the reads and writes of one run, and the
        peak of one run (the runs follow one another and each frees its cache).
    """
    options.pop("scale", None)
    H_q, H_kv, _ = _group(H_q, H_kv)
    p = grouped_plan(name, H_q, H_kv, N, d, M, N_k=N_k, grouping=grouping, **options)
    one = get(name).cost(p)
    runs = H_kv if grouping == "stacked" else H_q
    return IOCount(reads=runs * one.reads, writes=runs * one.writes, peak=one.peak)


def stack_group(Q_group: np.ndarray) -> np.ndarray:
    """The ``(g, N_q, d)`` queries of one group as ``(g N_q, d)`` rows, position-major: row
    ``i g + j`` is position ``i`` of head ``j``."""
    g, N_q, d = Q_group.shape
    return Q_group.transpose(1, 0, 2).reshape(N_q * g, d)


def unstack_group(O_rows: np.ndarray, g: int) -> np.ndarray:
    """The inverse of :func:`stack_group`: ``(g N_q, d)`` rows back to ``(g, N_q, d)``."""
    rows, d = O_rows.shape
    return O_rows.reshape(rows // g, g, d).transpose(1, 0, 2)


def _heads(x, label: str) -> np.ndarray:
    """``x`` as a finite float64 array of shape ``(heads, rows, d)``."""
    arr = np.asarray(x)
    if arr.ndim != 3:
        raise ValueError(f"{label} must be 3-D (heads x rows x d), got {arr.ndim}-D with shape "
                         f"{arr.shape}")
    return np.stack([as_matrix(arr[h], f"{label}[{h}]") for h in range(arr.shape[0])])


def _grouped_inputs(Q, K, V):
    Q, K, V = _heads(Q, "Q"), _heads(K, "K"), _heads(V, "V")
    if V.shape != K.shape:
        raise ValueError(f"V has shape {V.shape} but K has shape {K.shape}: K and V must both "
                         "be H_kv x N_k x d")
    if K.shape[2] != Q.shape[2]:
        raise ValueError(f"K has shape {K.shape} but Q has shape {Q.shape}: the queries and "
                         "keys must have the same head dimension d")
    return Q, K, V


def run_grouped(name: str, Q, K, V, M: int, *, grouping: str = "stacked",
                scale: float | None = None, mask=None, **options) -> GroupedResult:
    """Grouped-heads attention with algorithm ``name`` through one cache of ``M`` entries.

    Parameters
    ----------
    name : str
        A registered algorithm.
    Q : array_like, shape ``(H_q, N_q, d)``
        The query heads.
    K, V : array_like, shape ``(H_kv, N_k, d)``
        The key/value heads; ``H_kv`` divides ``H_q``, and query head ``h`` attends with
        key/value head ``h // g``.
    M : int
        Cache size in entries.
    grouping : {"stacked", "per_head"}
        Schedule (b), a group's heads stacked against one read of ``K``, ``V``, or (a), each
        query head on its own (see the module docstring).
    scale : float, optional
        The softmax scale; ``1 / sqrt(d)`` by default.
    mask : array_like of bool, optional
        ``(N_q, N_k)``, the same for every head (e.g. :func:`ioattn.masks.causal_chunk`).
    **options
        The algorithm's options, and ``save_lse``.

    Returns
    -------
    GroupedResult
        ``output`` of shape ``(H_q, N_q, d)`` and the exact count ``io``, equal to
        :func:`grouped_cost` with the same arguments.
    """
    Q, K, V = _grouped_inputs(Q, K, V)
    H_q, N_q, d = Q.shape
    H_kv, N_k, _ = K.shape
    H_q, H_kv, g = _group(H_q, H_kv)
    the_plan = grouped_plan(name, H_q, H_kv, N_q, d, M, N_k=N_k, grouping=grouping, mask=mask,
                            **options)
    algo, tau = get(name), as_scale(scale, d)
    out = np.empty_like(Q)
    with collector_paused():
        mem = TwoLevelMemory(the_plan.M, owner=name)
        for kv in range(H_kv):
            hK, hV = mem.load(f"K{kv}", K[kv]), mem.load(f"V{kv}", V[kv])
            heads = range(kv * g, (kv + 1) * g)
            if grouping == "stacked":
                jobs = [(heads, stack_group(Q[kv * g:(kv + 1) * g]))]
            else:
                jobs = [((h,), Q[h]) for h in heads]
            for which, rows in jobs:
                hQ = mem.load(f"Q{which[0]}", rows)
                hO = mem.allocate_slow(f"O{which[0]}", rows.shape)
                hL = mem.allocate_slow("L", rows.shape[0]) if the_plan.save_lse else None
                algo.simulate(mem, hQ, hK, hV, hO, the_plan, tau, L=hL)
                O_rows = mem.fetch(hO)
                out[list(which)] = unstack_group(O_rows, len(which))
        return GroupedResult(out, mem.io, the_plan)
