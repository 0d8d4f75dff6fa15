"""The public entry points: run an algorithm through the memory model, or cost it in closed form."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_count, as_matrix, as_scale
from .algorithms import BACKWARD, REGISTRY, get
from .algorithms.base import Plan
from .memory import IOCount, Transfer, TwoLevelMemory

__all__ = ["BackwardResult", "RunResult", "algorithms", "io_cost", "plan", "run", "run_backward",
           "saved_for_backward"]


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
    """

    output: np.ndarray
    io: IOCount
    plan: Plan
    trace: list[Transfer] | None = None


@dataclass(frozen=True)
class BackwardResult:
    """What :func:`run_backward` returns: ``output = (dQ, dK, dV)``, each ``(N, d)``; ``io``,
    ``plan`` and ``trace`` as in :class:`RunResult`."""

    output: tuple
    io: IOCount
    plan: Plan
    trace: list[Transfer] | None = None


def algorithms(backward: bool = False) -> list[str]:
    """Names of the registered attention algorithms (their backward passes with ``backward``)."""
    return sorted(BACKWARD if backward else REGISTRY)


def plan(name: str, N: int, d: int, M: int, *, backward: bool = False, **options) -> Plan:
    """The block sizes algorithm ``name`` (its backward pass with ``backward=True``) uses for
    ``(N, d)`` under a cache of ``M`` entries.

    Raises ``ValueError`` naming the smallest feasible ``M`` when ``M`` is below it.
    """
    algo = get(name, backward)
    return algo.plan(as_count(N, "N"), as_count(d, "d"), as_count(M, "M"), **options)


def io_cost(name: str, N: int, d: int, M: int, *, backward: bool = False,
            **options) -> IOCount:
    """Exact I/O of algorithm ``name`` from its closed form, with no data.

    Equal, field by field, to ``run(name, Q, K, V, M, **options).io`` for any ``N x d`` inputs
    (with ``backward=True``, to ``run_backward(name, Q, K, V, dO, M, **options).io``); the tests
    prove it over a grid and over randomly drawn sizes.

    Parameters
    ----------
    name : str
        A name from :func:`algorithms`.
    N, d : int
        Sequence length and head dimension.
    M : int
        Cache size in entries.
    **options
        The algorithm's options (e.g. ``variant="fa1"`` for flash). ``scale`` is accepted and
        ignored: it does not change the I/O.

    Returns
    -------
    IOCount
    """
    options.pop("scale", None)
    algo = get(name, backward)
    return algo.cost(algo.plan(as_count(N, "N"), as_count(d, "d"), as_count(M, "M"), **options))


def run(name: str, Q, K, V, M: int, *, scale: float | None = None, trace: bool = False,
        **options) -> RunResult:
    """Compute ``softmax(scale Q K^T) V`` with algorithm ``name`` through a cache of ``M`` entries.

    Parameters
    ----------
    name : str
        A name from :func:`algorithms`: ``"flash"``, ``"square_tiling"`` or ``"standard"``.
    Q, K, V : array_like
        Finite floating arrays of one shape ``(N, d)``; computed in float64.
    M : int
        Cache size in entries.
    scale : float, optional
        The softmax scale tau; ``1 / sqrt(d)`` by default.
    trace : bool
        Record every transfer in ``result.trace``.
    **options
        The algorithm's options (see each algorithm's documentation).

    Returns
    -------
    RunResult
        ``output`` and the exact counts ``io`` (equal to :func:`io_cost`).
    """
    algo = get(name)
    Q, K, V = _qkv(Q, K, V)
    N, d = Q.shape
    the_plan = algo.plan(N, d, as_count(M, "M"), **options)
    tau = as_scale(scale, d)
    mem = TwoLevelMemory(the_plan.M, trace=trace, owner=name)
    hQ, hK, hV = mem.load("Q", Q), mem.load("K", K), mem.load("V", V)
    hO = mem.allocate_slow("O", (N, d))
    algo.simulate(mem, hQ, hK, hV, hO, the_plan, tau)
    return RunResult(mem.fetch(hO), mem.io, the_plan, mem.trace)


def saved_for_backward(Q, K, V, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """What the forward pass saves for the backward: ``O`` and the row log-sum-exp ``L``.

    ``L_i = log sum_j exp(scale q_i . k_j)``, computed stably in float64 NumPy. This is the data,
    not a schedule: nothing here is counted, and no backward count includes producing ``O`` and
    ``L`` (they start in slow memory, as the forward left them).
    """
    Q, K, V = _qkv(Q, K, V)
    S = as_scale(scale, Q.shape[1]) * (Q @ K.T)
    m = S.max(axis=1, keepdims=True)
    P = np.exp(S - m)
    l = P.sum(axis=1, keepdims=True)
    return (P / l) @ V, (m + np.log(l))[:, 0]


def run_backward(name: str, Q, K, V, dO, M: int, *, O=None, L=None, scale: float | None = None,
                 trace: bool = False, **options) -> BackwardResult:
    """The gradients ``dQ, dK, dV`` of ``O = softmax(scale Q K^T) V`` for the upstream ``dO``,
    computed by the backward pass of ``name`` through a cache of ``M`` entries.

    Parameters
    ----------
    name : str
        A name from ``algorithms(backward=True)``.
    Q, K, V, dO : array_like
        Finite floating arrays of one shape ``(N, d)``.
    M : int
        Cache size in entries.
    O, L : array_like, optional
        The forward's output and row log-sum-exp; by default :func:`saved_for_backward`. They
        start in slow memory and are counted when read; producing them is not counted.
    scale : float, optional
        The softmax scale tau; ``1 / sqrt(d)`` by default.
    trace : bool
        Record every transfer.
    **options
        The backward pass's options.

    Returns
    -------
    BackwardResult
        ``output = (dQ, dK, dV)`` and the exact counts ``io`` (equal to
        ``io_cost(name, N, d, M, backward=True)``).
    """
    algo = get(name, backward=True)
    Q, K, V = _qkv(Q, K, V)
    dO = _same_shape(as_matrix(dO, "dO"), "dO", Q)
    N, d = Q.shape
    the_plan = algo.plan(N, d, as_count(M, "M"), **options)
    tau = as_scale(scale, d)
    if O is None or L is None:
        O_saved, L_saved = saved_for_backward(Q, K, V, tau)
        O = O_saved if O is None else O
        L = L_saved if L is None else L
    O = _same_shape(as_matrix(O, "O"), "O", Q)
    L = np.asarray(L, dtype=np.float64)
    if L.shape != (N,) or not np.isfinite(L).all():
        raise ValueError(f"L must hold N = {N} finite row log-sum-exp values, got shape {L.shape}")
    mem = TwoLevelMemory(the_plan.M, trace=trace, owner=f"{name} backward")
    inputs = [mem.load(n, x) for n, x in (("Q", Q), ("K", K), ("V", V), ("O", O), ("dO", dO),
                                           ("L", L))]
    grads = [mem.allocate_slow(n, (N, d)) for n in ("dQ", "dK", "dV")]
    algo.simulate(mem, *inputs, *grads, the_plan, tau)
    return BackwardResult(tuple(mem.fetch(g) for g in grads), mem.io, the_plan, mem.trace)


def _same_shape(x: np.ndarray, label: str, Q: np.ndarray) -> np.ndarray:
    if x.shape != Q.shape:
        raise ValueError(f"{label} has shape {x.shape} but Q has shape {Q.shape}: "
                         "Q, K, V (and dO, O) must all be N x d")
    return x


def _qkv(Q, K, V):
    Q = as_matrix(Q, "Q")
    return Q, _same_shape(as_matrix(K, "K"), "K", Q), _same_shape(as_matrix(V, "V"), "V", Q)
