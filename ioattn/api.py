"""The public entry points: run an algorithm through the memory model, or cost it in closed form."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import as_count, as_matrix, as_scale
from .algorithms import REGISTRY, get
from .algorithms.base import Plan
from .memory import IOCount, Transfer, TwoLevelMemory

__all__ = ["RunResult", "algorithms", "io_cost", "plan", "run"]


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


def algorithms() -> list[str]:
    """Names of the registered attention algorithms, sorted."""
    return sorted(REGISTRY)


def plan(name: str, N: int, d: int, M: int, **options) -> Plan:
    """The block sizes algorithm ``name`` uses for ``(N, d)`` under a cache of ``M`` entries.

    Raises ``ValueError`` naming the smallest feasible ``M`` when ``M`` is below it.
    """
    algo = get(name)
    return algo.plan(as_count(N, "N"), as_count(d, "d"), as_count(M, "M"), **options)


def io_cost(name: str, N: int, d: int, M: int, **options) -> IOCount:
    """Exact I/O of algorithm ``name`` from its closed form, with no data.

    Equal, field by field, to ``run(name, Q, K, V, M, **options).io`` for any ``N x d`` inputs;
    the tests prove it over a grid and over randomly drawn sizes.

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
    algo = get(name)
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
    Q, K, V = as_matrix(Q, "Q"), as_matrix(K, "K"), as_matrix(V, "V")
    for other, label in ((K, "K"), (V, "V")):
        if other.shape != Q.shape:
            raise ValueError(
                f"{label} has shape {other.shape} but Q has shape {Q.shape}: "
                "Q, K and V must all be N x d"
            )
    N, d = Q.shape
    the_plan = algo.plan(N, d, as_count(M, "M"), **options)
    tau = as_scale(scale, d)
    mem = TwoLevelMemory(the_plan.M, trace=trace, owner=name)
    hQ, hK, hV = mem.load("Q", Q), mem.load("K", K), mem.load("V", V)
    hO = mem.allocate_slow("O", (N, d))
    algo.simulate(mem, hQ, hK, hV, hO, the_plan, tau)
    return RunResult(mem.fetch(hO), mem.io, the_plan, mem.trace)
