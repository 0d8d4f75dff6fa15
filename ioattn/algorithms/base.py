"""What every attention algorithm in ioattn is: a name, a block-size rule, a feasibility rule,
a schedule run on real data through the memory model, and the exact cost of that schedule.

The registry maps names to algorithms, so the CLI, the book, the widgets and the graders can
iterate over them instead of naming each one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..memory import IOCount, SlowArray, TwoLevelMemory

__all__ = ["Algorithm", "BACKWARD", "BackwardAlgorithm", "Plan", "REGISTRY", "ceil_div", "get",
           "register", "register_backward"]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exactly."""
    return -(-a // b)


@dataclass(frozen=True)
class Plan:
    """Problem size and cache budget; each algorithm's plan adds its block sizes."""

    N: int
    d: int
    M: int

    @property
    def footprint(self) -> int:
        """Most entries the schedule holds in the cache at once (its peak), by the closed form."""
        raise NotImplementedError


class Algorithm:
    """Base class of the registered attention algorithms.

    A subclass sets ``name``, ``summary`` and ``options`` (option name -> default) and implements
    :meth:`min_M`, :meth:`make_plan`, :meth:`simulate` and :meth:`cost`.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    options: ClassVar[dict] = {}

    def min_M(self, d: int, **options) -> int:
        """The least M from which the block rule fits, for that M and every larger one."""
        raise NotImplementedError

    def make_plan(self, N: int, d: int, M: int, **options) -> Plan:
        """Block sizes for this problem, derived from ``M`` (after feasibility is checked)."""
        raise NotImplementedError

    def simulate(self, mem: TwoLevelMemory, Q: SlowArray, K: SlowArray, V: SlowArray,
                 O: SlowArray, plan: Plan, scale: float) -> None:
        """Run the schedule on the data in ``mem``, writing the output to ``O``."""
        raise NotImplementedError

    def cost(self, plan: Plan) -> IOCount:
        """Exact I/O of :meth:`simulate` for ``plan``, in closed form."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared checks
    def plan(self, N: int, d: int, M: int, **options) -> Plan:
        """Check the options and ``M``, then return the plan."""
        unknown = set(options) - set(self.options)
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise TypeError(
                f"{self.name!r} got unknown option(s) {', '.join(sorted(unknown))}; "
                f"its options are: {known}"
            )
        opts = {**self.options, **options}
        least = self.min_M(d, **opts)
        if M < least:
            raise ValueError(
                f"{self.name!r} needs a cache of at least M = {least} entries at d = {d} "
                f"({self.describe_rule(d, **opts)}); got M = {M}"
            )
        return self.make_plan(N, d, M, **opts)

    def describe_rule(self, d: int, **options) -> str:
        """One line on the block-size rule, quoted when M is too small."""
        return "its block-size rule does not fit below that"


class BackwardAlgorithm(Algorithm):
    """Base class of the registered backward passes: the same rules, plans and exact costs as a
    forward algorithm, with the gradient's inputs and outputs in :meth:`simulate`."""

    def simulate(self, mem: TwoLevelMemory, Q: SlowArray, K: SlowArray, V: SlowArray,
                 O: SlowArray, dO: SlowArray, L: SlowArray, dQ: SlowArray, dK: SlowArray,
                 dV: SlowArray, plan: Plan, scale: float) -> None:
        """Compute ``dQ, dK, dV`` from ``Q, K, V``, the forward's ``O`` and row log-sum-exp
        ``L`` (``L_i = log sum_j exp(scale q_i . k_j)``) and ``dO``, all in slow memory."""
        raise NotImplementedError


REGISTRY: dict[str, Algorithm] = {}
BACKWARD: dict[str, BackwardAlgorithm] = {}


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: add one instance of ``cls`` to :data:`REGISTRY` under ``cls.name``."""
    REGISTRY[cls.name] = cls()
    return cls


def register_backward(cls: type[BackwardAlgorithm]) -> type[BackwardAlgorithm]:
    """Class decorator: add one instance of ``cls`` to :data:`BACKWARD` under ``cls.name``."""
    BACKWARD[cls.name] = cls()
    return cls


def get(name: str, backward: bool = False) -> Algorithm:
    """The registered algorithm called ``name`` (its backward pass with ``backward=True``); a
    clear error listing the known names if there is none."""
    table = BACKWARD if backward else REGISTRY
    try:
        return table[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(table)) or "none yet"
        what, plural = ("backward pass", "backward passes") if backward else ("algorithm",
                                                                              "algorithms")
        raise ValueError(f"unknown {what} {name!r}; known {plural}: {known}") from None
