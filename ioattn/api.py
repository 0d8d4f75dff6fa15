"""The public entry points: run an algorithm through the memory model, or cost it in closed form."""

from __future__ import annotations

import contextlib
import copy
import gc
from dataclasses import dataclass, fields, is_dataclass, replace

import numpy as np

from ._validate import as_count, as_flag, as_matrix, as_scale
from .algorithms import BACKWARD, REGISTRY, get
from .algorithms.base import Plan
from .algorithms.matmul import remembered_products
from .masks import Mask, mask_of
from .memory import IOCount, Transfer, TwoLevelMemory

__all__ = ["BackwardResult", "RunResult", "algorithms", "collector_paused", "io_cost", "min_M",
           "plan", "run", "run_backward", "saved_for_backward", "totals"]


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` returns.

    Attributes
    ----------
    output : numpy.ndarray
        The attention output ``O``, shape ``(N, d)``, float64.
    io : IOCount
        Exact ``reads``, ``writes``, ``total`` and ``peak`` counted by the memory model.
    plan : Plan
        The block sizes the algorithm derived from ``M``.
    trace : list of Transfer or None
        Every transfer in order, when ``run(..., trace=True)``.
    lse : numpy.ndarray or None
        With ``run(..., save_lse=True)``, the row log-sum-exp ``L`` (shape ``(N,)``) the
        algorithm wrote to slow memory (counted in ``io``): ``L_i = log sum_j exp(scale q_i .
        k_j)`` over the keys row ``i`` attends to, ``+inf`` for a row that attends to none.
        What :func:`run_backward` takes as ``L``.
    """

    output: np.ndarray
    io: IOCount
    plan: Plan
    trace: list[Transfer] | None = None
    lse: np.ndarray | None = None


@dataclass(frozen=True)
class BackwardResult:
    """What :func:`run_backward` returns: ``output = (dQ, dK, dV)``, ``dQ`` of shape ``(N, d)``
    and ``dK``, ``dV`` of ``(N_k, d)`` (``N_k = N`` unless rectangular); ``io``,
    ``plan`` and ``trace`` as in :class:`RunResult`."""

    output: tuple
    io: IOCount
    plan: Plan
    trace: list[Transfer] | None = None


def algorithms(backward: bool = False) -> list[str]:
    """Names of the registered attention algorithms (their backward passes with ``backward``)."""
    return sorted(BACKWARD if as_flag(backward, "backward") else REGISTRY)


def plan(name: str, N: int, d: int, M: int, *, N_k: int | None = None, backward: bool = False,
         **options) -> Plan:
    """The block sizes algorithm ``name`` (its backward pass with ``backward=True``) uses for
    ``(N, d)`` under a cache of ``M`` entries.

    ``N_k`` (``N`` by default) plans rectangular attention: ``N`` query rows against ``N_k``
    key and value rows (for the backward, the ``"flash"`` pass only; the others raise a
    TypeError naming it). Each block side is capped by its own dimension, so a
    decoding step (``N = 1``) never plans a query block of rows that do not exist: FlashAttention
    gives that room to its ``K_j, V_j`` blocks (see :mod:`ioattn.algorithms.flash`).
    ``mask=`` and ``save_lse=`` are accepted as by :func:`run` and kept on the plan; they do
    not change the block sizes. Raises ``ValueError`` naming the smallest feasible ``M`` when
    ``M`` is below it.

    >>> import ioattn
    >>> p = ioattn.plan("flash", 1, 128, 2 ** 16, N_k=8192)
    >>> p.B_r, p.B_c
    (1, 253)
    """
    algo = get(name, as_flag(backward, "backward"))
    return algo.plan(as_count(N, "N"), as_count(d, "d"), as_count(M, "M"),
                     **_keys(N_k), **options)


def _keys(N_k) -> dict:
    """``{"N_k": N_k}`` checked (a count), or ``{}`` for None: square attention."""
    return {} if N_k is None else {"N_k": as_count(N_k, "N_k")}


def min_M(name: str, d: int, *, backward: bool = False, **options) -> int:
    """The least cache size ``M`` at which algorithm ``name`` (its backward pass with
    ``backward=True``) runs at head dimension ``d``, for that ``M`` and every larger one.

    It does not depend on ``N``, on a mask or on ``save_lse`` (accepted and ignored, as is
    ``scale``); ``options`` are the algorithm's (``variant``, ``block``, ``schedule``).

    >>> import ioattn
    >>> ioattn.min_M("flash", 64), ioattn.min_M("flash", 64, backward=True)
    (260, 452)
    """
    backward = as_flag(backward, "backward")
    algo = get(name, backward)
    for ignored in ("scale", "mask") if backward else ("scale", "mask", "save_lse"):
        options.pop(ignored, None)
    return algo.min_M(as_count(d, "d"), **algo.check_options(options))


def io_cost(name: str, N: int, d: int, M: int, *, N_k: int | None = None,
            backward: bool = False, **options) -> IOCount:
    """Exact I/O of algorithm ``name`` from its closed form, with no data.

    Equal, field by field, to ``run(name, Q, K, V, M, **options).io`` for any ``N x d`` inputs
    (with ``backward=True``, to ``run_backward(name, Q, K, V, dO, M, **options).io``); the tests
    prove it over a grid and over randomly drawn sizes and masks.

    Parameters
    ----------
    name : str
        A name from :func:`algorithms`.
    N, d : int
        Sequence length (the query rows ``N_q``) and head dimension.
    M : int
        Cache size in entries.
    N_k : int, optional
        Key and value rows, for rectangular attention: ``N`` queries against ``N_k`` keys,
        equal to ``run`` with ``Q`` of ``N`` rows and ``K, V`` of ``N_k`` (with
        ``backward=True``, to ``run_backward`` with ``Q, dO`` of ``N`` rows and ``K, V`` of
        ``N_k``: the ``"flash"`` backward only). ``N`` by default (square attention).
    **options
        The algorithm's options (e.g. ``variant="fa1"`` for flash), and ``mask`` and
        ``save_lse`` as for :func:`run`. With a mask the closed form is a sum over the mask's
        blocks (no simulation). ``scale`` is accepted and ignored: it does not change the I/O.

    Returns
    -------
    IOCount

    >>> import ioattn
    >>> ioattn.io_cost("flash", 1, 128, 2 ** 16, N_k=8192).total   # one decoding step
    2097408
    """
    options.pop("scale", None)
    algo = get(name, as_flag(backward, "backward"))
    return algo.cost(algo.plan(as_count(N, "N"), as_count(d, "d"), as_count(M, "M"),
                               **_keys(N_k), **options))


# Costs of many M at once stay in int64 while N^2 max(N, d) does; beyond, the plans (block sizes,
# at most M) are still made in int64 and the costs from them in Python ints (object arrays).
_INT64_SAFE = 2 ** 58
_CHUNK = 1 << 16


def totals(name: str, N: int, d: int, Ms, *, N_k: int | None = None, backward: bool = False,
           **options) -> np.ndarray:
    """Exact total I/O (reads + writes) of algorithm ``name`` at every cache size in ``Ms``.

    Equal, entry by entry, to ``io_cost(name, N, d, M, backward=backward, **options).total``
    for each ``M`` in ``Ms`` (the tests prove it over whole ranges of ``M``), and fast enough to
    cost every integer ``M`` of a range: the algorithm's block-size rule and its dense closed form
    are written once and applied to the whole array of ``M`` at once. With a ``mask`` the closed
    form is a sum over the mask's blocks, evaluated once for each distinct set of block sizes.
    Where a count could pass 64 bits (``N^2 max(N, d) >= 2^58``), the block sizes are still
    found for the whole array in ``int64`` (they are at most ``M``) and the closed forms are
    applied to them as Python ints, elementwise: exact at any ``N``, at NumPy's speed for
    object arrays.

    Parameters
    ----------
    name : str
        A name from :func:`algorithms`.
    N, d : int
        Sequence length (the query rows) and head dimension.
    Ms : array_like of int
        Cache sizes, each at least :func:`min_M` of the algorithm.
    N_k : int, optional
        Key and value rows (rectangular attention), as for :func:`io_cost`.
    backward : bool
        Cost the backward pass instead.
    **options
        As for :func:`io_cost` (the algorithm's options, ``mask``, ``save_lse``, ``scale``).

    Returns
    -------
    numpy.ndarray
        One exact integer per entry of ``Ms`` (``int64``; Python ints in an object array when
        the counts could exceed 64 bits).

    >>> import ioattn
    >>> t = ioattn.totals("flash", 1024, 64, [4096, 8192, 16384])
    >>> [int(x) for x in t] == [ioattn.io_cost("flash", 1024, 64, M).total
    ...                         for M in (4096, 8192, 16384)]
    True
    """
    options.pop("scale", None)
    N, d = as_count(N, "N"), as_count(d, "d")
    algo = get(name, as_flag(backward, "backward"))
    Ms = np.asarray(Ms)
    if Ms.ndim != 1 or (Ms.size and not np.issubdtype(Ms.dtype, np.integer)):
        raise TypeError(f"Ms must be a 1-D array of integers, got shape {Ms.shape} and dtype "
                        f"{Ms.dtype}")
    if Ms.size == 0:
        return np.zeros(0, dtype=np.int64)
    # the plan at the largest M checks the options, the mask and save_lse once, and reads the
    # mask once: every later plan takes the plan's Mask
    keys = _keys(N_k)
    first = algo.plan(N, d, as_count(int(Ms.max()), "M"), **keys, **options)
    if first.mask is not None:
        options = {**options, "mask": first.mask}
    opts = algo.check_options(_own_options(options))
    least = int(Ms.min())
    if least < algo.min_M(d, **opts):
        algo.plan(N, d, as_count(least, "M"), **keys, **options)   # raises, naming the least M
    if first.N_k != N:
        opts = {**opts, "N_k": first.N_k}
    huge = N * first.N_k * max(N, first.N_k, d) >= _INT64_SAFE
    out = np.empty(Ms.shape, dtype=object if huge else np.int64)
    with remembered_products():
        _fill(out, algo, N, d, Ms, opts, first, huge)
    return out


def _fill(out, algo, N, d, Ms, opts, first, huge) -> None:
    """:func:`totals`' loop over chunks of ``Ms`` (``huge``: costs in Python ints)."""
    known: dict = {}                  # masked totals by plan, across chunks
    for start in range(0, Ms.size, _CHUNK):
        chunk = Ms[start:start + _CHUNK].astype(np.int64)
        p = algo.make_plan(N, d, chunk, **opts)
        if first.mask is None or not algo.mask_changes_cost:
            if huge:
                p = _as_objects(p)
            out[start:start + chunk.size] = algo.cost(replace(p, save_lse=first.save_lse)).total
            continue
        # a masked cost is a sum over blocks: once per distinct plan (M itself plays no part).
        # Plans come in runs of equal ones as M grows: cost the first of each run.
        keys = np.stack([np.broadcast_to(v, chunk.shape) for v in _plan_leaves(p)])
        starts = np.flatnonzero(np.concatenate(([True], (keys[:, 1:] != keys[:, :-1]).any(0))))
        values = np.empty(starts.size, dtype=out.dtype)
        for u, i in enumerate(starts.tolist()):
            key = tuple(keys[:, i].tolist())
            if key not in known:
                one = replace(_plan_at(p, i), mask=first.mask, save_lse=first.save_lse)
                known[key] = algo.cost(one).total
            values[u] = known[key]
        out[start:start + chunk.size] = np.repeat(values, np.diff(np.append(starts, chunk.size)))


def _as_objects(plan):
    """A plan computed for an array of ``M`` with every integer array (and NumPy integer) field
    turned into Python ints (an object array), so that the closed forms applied to it are
    exact: a copy, as :func:`_plan_at` makes."""
    out = copy.copy(plan)
    for name, value in vars(out).items():
        if is_dataclass(value):
            vars(out)[name] = _as_objects(value)
        elif isinstance(value, np.ndarray) and value.dtype != bool:
            vars(out)[name] = value.astype(object)
        elif isinstance(value, np.integer):
            vars(out)[name] = int(value)
    return out


def _own_options(options: dict) -> dict:
    """The algorithm's own options, without ``mask`` and ``save_lse``."""
    return {k: v for k, v in options.items() if k not in ("mask", "save_lse")}


def _plan_leaves(plan) -> list:
    """The integer fields of a plan and of the plans inside it, ``M`` left out and block sides
    clipped to their dimension (``clipped``), in a fixed order: what a cost depends on."""
    leaves = []
    clipped = getattr(plan, "clipped", {})
    for f in fields(plan):
        value = getattr(plan, f.name)
        if is_dataclass(value):
            leaves += _plan_leaves(value)
        elif f.name != "M" and isinstance(value, (int, np.integer, np.ndarray)) \
                and not isinstance(value, bool):
            if f.name in clipped:
                value = np.minimum(value, getattr(plan, clipped[f.name]))
            leaves.append(value)
    return leaves


def _plan_at(plan, i: int):
    """The plan for one ``M`` out of a plan computed for an array of them (a copy with each
    array field replaced by its ``i``-th entry; the plans are frozen dataclasses of plain
    fields, so no ``__init__`` need run again)."""
    out = copy.copy(plan)
    for name, value in vars(out).items():
        if is_dataclass(value):
            vars(out)[name] = _plan_at(value, i)
        elif isinstance(value, np.ndarray):
            vars(out)[name] = int(value[i])
        elif isinstance(value, np.integer):
            vars(out)[name] = int(value)
    return out


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector switched off inside the block, and back on after it
    (even on an error) unless it was off before.

    A simulated run allocates and frees many small objects (tiles, transfers), all freed by
    reference counting as soon as they are dropped; the collector's periodic passes over them
    find nothing to free and only cost time. :func:`run` and :func:`run_backward` simulate inside
    this block (``benchmarks/simulator.py`` measures the difference).

    >>> import gc
    >>> with collector_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def run(name: str, Q, K, V, M: int, *, scale: float | None = None, mask=None,
        save_lse: bool = False, trace: bool = False, **options) -> RunResult:
    """Compute ``softmax(scale Q K^T) V`` with algorithm ``name`` through a cache of ``M`` entries.

    Parameters
    ----------
    name : str
        A name from :func:`algorithms`: ``"flash"``, ``"square_tiling"`` or ``"standard"``.
    Q, K, V : array_like
        Finite floating arrays, ``Q`` of shape ``(N, d)`` and ``K``, ``V`` of one shape
        ``(N_k, d)``: square attention when ``N_k = N``, rectangular otherwise (a few query
        rows against a cache of keys and values, as in decoding); computed in float64. The
        count equals ``io_cost(name, N, d, M, N_k=N_k)``.
    M : int
        Cache size in entries.
    scale : float, optional
        The softmax scale tau; ``1 / sqrt(d)`` by default.
    mask : array_like of bool, optional
        ``(N, N_k)``, True where query ``i`` attends to key ``j`` (see :mod:`ioattn.masks`, e.g.
        ``ioattn.masks.causal(N)``, or ``ioattn.masks.causal_chunk(N, N_k)`` for a chunk of
        queries at the end of a cache). FlashAttention visits only the blocks with a True entry
        (block-sparse FlashAttention), square tiling computes only the tiles it needs, standard
        attention masks in the cache and moves what it moves without a mask. Reading the mask
        costs no I/O. A row with no True entry gets zeros in ``O``.
    save_lse : bool
        Also write the row log-sum-exp ``L`` to slow memory (``N`` more writes, counted) and
        return it as ``result.lse``: what :func:`run_backward` needs besides ``O``.
    trace : bool
        Record every transfer in ``result.trace``.
    **options
        The algorithm's options (see each algorithm's documentation).

    Returns
    -------
    RunResult
        ``output`` (and ``lse``) and the exact counts ``io`` (equal to :func:`io_cost` with the
        same ``mask`` and ``save_lse``).

    Raises
    ------
    ValueError
        If ``K`` and ``V`` differ in shape, ``Q`` and ``K`` in ``d``, ``mask`` is not a
        boolean ``(N, N_k)`` array, or ``M`` is below the least feasible cache (:func:`min_M`).
    """
    algo = get(name)
    Q, K, V = _qkv(Q, K, V)
    N, d = Q.shape
    the_plan = algo.plan(N, d, as_count(M, "M"), **_keys(K.shape[0]), mask=mask,
                         save_lse=save_lse, **options)
    tau = as_scale(scale, d)
    with collector_paused():
        mem = TwoLevelMemory(the_plan.M, trace=trace, owner=name)
        hQ, hK, hV = mem.load("Q", Q), mem.load("K", K), mem.load("V", V)
        hO = mem.allocate_slow("O", (N, d))
        hL = mem.allocate_slow("L", N) if the_plan.save_lse else None
        algo.simulate(mem, hQ, hK, hV, hO, the_plan, tau, L=hL)
        lse = None if hL is None else mem.fetch(hL)
        return RunResult(mem.fetch(hO), mem.io, the_plan, mem.trace, lse)


def saved_for_backward(Q, K, V, scale: float | None = None, *,
                       mask=None) -> tuple[np.ndarray, np.ndarray]:
    """What the forward pass saves for the backward: ``O`` and the row log-sum-exp ``L``.

    ``L_i = log sum_j exp(scale q_i . k_j)`` over the keys ``j`` row ``i`` attends to (all of
    them without a ``mask``; ``Q`` of ``N`` rows, ``K, V`` of ``N_k``, the mask ``N x N_k``),
    computed stably in float64 NumPy; a row that attends to none has
    ``O_i = 0`` and ``L_i = +inf`` (:mod:`ioattn.masks`). This is the data, not a schedule:
    nothing here is counted. To count producing ``O`` and ``L`` as well, run the forward with
    ``run(..., save_lse=True)`` and pass its ``output`` and ``lse`` to :func:`run_backward`.
    """
    Q, K, V = _qkv(Q, K, V)
    S = as_scale(scale, Q.shape[1]) * (Q @ K.T)
    if mask is not None:
        S[mask_of(mask, *S.shape).excluded] = -np.inf
    m = S.max(axis=1, keepdims=True)
    empty = np.isneginf(m)
    m[empty] = 0.0
    P = np.exp(S - m)
    l = P.sum(axis=1, keepdims=True)
    O = np.divide(P, l, out=np.zeros_like(P), where=~empty) @ V
    L = np.where(empty, np.inf, m + np.log(np.where(empty, 1.0, l)))
    return O, L[:, 0]


def run_backward(name: str, Q, K, V, dO, M: int, *, O=None, L=None, scale: float | None = None,
                 mask=None, trace: bool = False, **options) -> BackwardResult:
    """The gradients ``dQ, dK, dV`` of ``O = softmax(scale Q K^T) V`` for the upstream ``dO``,
    computed by the backward pass of ``name`` through a cache of ``M`` entries.

    The count is the backward's alone: ``O`` and ``L`` start in slow memory, and producing them
    is the forward's work, not counted here. For the I/O of a training step, add the forward's:
    ``fwd = run(name, Q, K, V, M, save_lse=True)`` counts writing ``O`` and ``L``, and
    ``run_backward(..., O=fwd.output, L=fwd.lse)`` counts reading them.

    Parameters
    ----------
    name : str
        A name from ``algorithms(backward=True)``.
    Q, K, V, dO : array_like
        Finite floating arrays, ``Q`` and ``dO`` of shape ``(N, d)`` and ``K``, ``V`` of one
        shape ``(N_k, d)``: square when ``N_k = N``; rectangular (``N`` queries against
        ``N_k`` keys, the mask then ``(N, N_k)``) for the ``"flash"`` backward only, whose
        count equals ``io_cost(name, N, d, M, N_k=N_k, backward=True)``.
    M : int
        Cache size in entries.
    O, L : array_like, optional
        The forward's output and row log-sum-exp (``RunResult.output`` and ``RunResult.lse``);
        by default :func:`saved_for_backward`. They are counted when read. ``L`` must be finite
        on every row that attends to something; a row that attends to nothing may have
        ``+inf`` (what the forward writes there).
    scale : float, optional
        The softmax scale tau; ``1 / sqrt(d)`` by default.
    mask : array_like of bool, optional
        The forward's mask (see :func:`run`): the backward skips what the mask skips.
        Rows with nothing to attend to get zero gradients and contribute none.
    trace : bool
        Record every transfer.
    **options
        The backward pass's options.

    Returns
    -------
    BackwardResult
        ``output = (dQ, dK, dV)`` and the exact counts ``io`` (equal to
        ``io_cost(name, N, d, M, N_k=N_k, backward=True, mask=mask)``).
    """
    algo = get(name, backward=True)
    Q, K, V = _qkv(Q, K, V)
    dO = _same_shape(as_matrix(dO, "dO"), "dO", Q)
    N, d = Q.shape
    N_k = K.shape[0]
    the_plan = algo.plan(N, d, as_count(M, "M"), **_keys(N_k), mask=mask, **options)
    tau = as_scale(scale, d)
    if O is None or L is None:
        O_saved, L_saved = saved_for_backward(Q, K, V, tau, mask=the_plan.mask)
        O = O_saved if O is None else O
        L = L_saved if L is None else L
    O = _same_shape(as_matrix(O, "O"), "O", Q)
    L = _check_lse(L, N, the_plan.mask)
    with collector_paused():
        mem = TwoLevelMemory(the_plan.M, trace=trace, owner=f"{name} backward")
        inputs = [mem.load(n, x) for n, x in (("Q", Q), ("K", K), ("V", V), ("O", O),
                                               ("dO", dO), ("L", L))]
        grads = [mem.allocate_slow(n, (rows, d)) for n, rows in (("dQ", N), ("dK", N_k),
                                                                   ("dV", N_k))]
        algo.simulate(mem, *inputs, *grads, the_plan, tau)
        return BackwardResult(tuple(mem.fetch(g) for g in grads), mem.io, the_plan, mem.trace)


def _check_lse(L, N: int, mask: Mask | None) -> np.ndarray:
    """``L`` as ``N`` float64 values: finite where the row attends to something, finite or
    ``+inf`` where it attends to nothing."""
    try:
        L = np.asarray(L, dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"L must hold N = {N} finite row log-sum-exp values: {exc}") from None
    if L.shape != (N,):
        raise ValueError(f"L must hold N = {N} finite row log-sum-exp values, got shape {L.shape}")
    finite = np.isfinite(L)
    if mask is None:
        if not finite.all():
            raise ValueError(f"L must hold N = {N} finite row log-sum-exp values; "
                             f"{int((~finite).sum())} are not")
        return L
    bad = ~finite & (mask.attending | ~np.isposinf(L))
    if bad.any():
        raise ValueError(f"L must hold N = {N} finite row log-sum-exp values (+inf is allowed "
                         f"only on a row the mask leaves empty); row {int(np.argmax(bad))} has "
                         f"{L[np.argmax(bad)]}")
    return L


def _same_shape(x: np.ndarray, label: str, Q: np.ndarray) -> np.ndarray:
    if x.shape != Q.shape:
        raise ValueError(f"{label} has shape {x.shape} but Q has shape {Q.shape}: "
                         f"{label} must be N x d, as Q is")
    return x


def _qkv(Q, K, V):
    """``Q, K, V`` checked: ``Q`` of shape ``(N, d)`` and ``K``, ``V`` of one shape ``(N_k, d)``
    (square attention when ``N_k = N``)."""
    Q = as_matrix(Q, "Q")
    K, V = as_matrix(K, "K"), as_matrix(V, "V")
    if K.shape[1] != Q.shape[1]:
        raise ValueError(f"K has shape {K.shape} but Q has shape {Q.shape}: the queries and "
                         f"keys must have the same head dimension d")
    if V.shape != K.shape:
        raise ValueError(f"V has shape {V.shape} but K has shape {K.shape}: K and V must both "
                         "be N_k x d (a value for every key)")
    return Q, K, V
