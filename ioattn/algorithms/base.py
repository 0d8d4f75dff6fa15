"""What every attention algorithm in ioattn is: a name, a block-size rule, a feasibility rule,
a schedule run on real data through the memory model, and the exact cost of that schedule.

The registry maps names to algorithms, so the CLI, the book, the widgets and the graders can
iterate over them instead of naming each one.
"""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from .._validate import as_count
from ..masks import Mask, mask_of
from ..memory import IOCount, SlowArray, TwoLevelMemory

__all__ = ["Algorithm", "BACKWARD", "BackwardAlgorithm", "Plan", "REGISTRY", "ceil_div",
           "divide_rows", "get", "imax", "imin", "isqrt", "log_sum_exp", "register",
           "register_backward", "select", "variants"]


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers, exactly (integer arrays too, elementwise)."""
    return -(-a // b)


# The block-size rules and the dense closed forms are written once, for one M or for an array of
# them (``ioattn.api.totals``): these helpers are ``min``, ``max``, ``isqrt`` and ``x if c else
# y`` that work elementwise when an argument is a NumPy integer array.
def _fold(elementwise, scalar, values):
    if any(isinstance(v, np.ndarray) for v in values):
        return functools.reduce(elementwise, values)
    return scalar(values)


def imin(*values):
    """``min(values)``, elementwise if any of them is an array."""
    return _fold(np.minimum, min, values)


def imax(*values):
    """``max(values)``, elementwise if any of them is an array."""
    return _fold(np.maximum, max, values)


def isqrt(x):
    """``floor(sqrt(x))`` for a non-negative integer, or elementwise for an integer array."""
    if not isinstance(x, np.ndarray):
        return math.isqrt(x)
    if x.dtype == object:
        return np.frompyfunc(math.isqrt, 1, 1)(x)
    r = np.floor(np.sqrt(x.astype(np.float64))).astype(x.dtype)
    r = np.where(r * r > x, r - 1, r)                   # float rounding moves r by at most 1
    return np.where((r + 1) * (r + 1) <= x, r + 1, r)


def select(condition, if_true, if_false):
    """``if_true if condition else if_false``, elementwise if ``condition`` is an array."""
    if isinstance(condition, np.ndarray):
        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false


def divide_rows(O_i, l_i) -> None:
    """``O_i /= l_i`` row by row, in place; a row with ``l_i = 0`` (nothing to attend to) stays
    0."""
    np.divide(O_i, l_i[:, None], out=O_i, where=l_i[:, None] > 0)


def log_sum_exp(m_i, l_i) -> None:
    """``m_i <- m_i + log l_i`` in place (``l_i`` is overwritten): the row log-sum-exp ``L_i``,
    ``+inf`` for a row with ``l_i = 0`` (see :mod:`ioattn.masks`)."""
    empty = l_i == 0
    np.log(l_i, out=l_i, where=~empty)
    m_i += l_i
    m_i[empty] = np.inf


@dataclass(frozen=True)
class Plan:
    """Problem size and cache budget; each algorithm's plan adds its block sizes.

    ``N`` is the number of query rows (``N_q``) and ``N_k`` the number of key and value rows:
    ``N`` itself (square attention, the default) unless the plan is made for rectangular
    attention, ``Q`` of ``N`` rows against ``K``, ``V`` of ``N_k`` rows (a few new queries
    against a cache of keys, as in decoding). ``mask`` (a :class:`~ioattn.masks.Mask` or
    :class:`~ioattn.masks.RectMask`, or None for dense attention) and ``save_lse`` (whether the
    forward also writes the row log-sum-exp ``L``) are set by :meth:`Algorithm.plan`, after the
    block sizes: neither changes them.
    """

    N: int
    d: int
    M: int
    N_k: int | None = field(default=None, kw_only=True)
    mask: Mask | None = field(default=None, kw_only=True)
    save_lse: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        if self.N_k is None:                      # square attention: as many keys as queries
            object.__setattr__(self, "N_k", self.N)

    @property
    def footprint(self) -> int:
        """Most entries the schedule holds in the cache at once, by the closed form: the peak
        of the dense schedule, and an upper bound on the peak under any mask (a mask only
        skips work)."""
        raise NotImplementedError


class Algorithm:
    """Base class of the registered attention algorithms.

    A subclass sets ``name``, ``summary`` and ``options`` (option name -> default), and
    ``choices`` for the options that take one of a few named values, and implements
    :meth:`min_M`, :meth:`make_plan`, :meth:`simulate` and :meth:`cost`. Every algorithm also
    takes ``mask`` and (forward only) ``save_lse``, which :meth:`plan` puts on the plan:
    :meth:`simulate` and :meth:`cost` must honour both, and agree exactly.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    options: ClassVar[dict] = {}
    #: The options that take one of a few named values: option -> every value, the default
    #: first (:func:`variants` runs each one).
    choices: ClassVar[dict[str, tuple]] = {}
    #: False for a schedule whose I/O is the same under every mask (standard attention).
    mask_changes_cost: ClassVar[bool] = True

    def min_M(self, d: int, **options) -> int:
        """The least M from which the block rule fits, for that M and every larger one."""
        raise NotImplementedError

    def make_plan(self, N: int, d: int, M: int, **options) -> Plan:
        """Block sizes for this problem, derived from ``M`` (after feasibility is checked)."""
        raise NotImplementedError

    def simulate(self, mem: TwoLevelMemory, Q: SlowArray, K: SlowArray, V: SlowArray,
                 O: SlowArray, plan: Plan, scale: float, L: SlowArray | None = None) -> None:
        """Run the schedule on the data in ``mem``, writing the output to ``O``.

        With ``plan.mask``, visit only what the mask needs (see :mod:`ioattn.masks`); with
        ``plan.save_lse``, also write the row log-sum-exp to ``L`` (``N`` entries; allocated in
        slow memory here when ``L`` is None).
        """
        raise NotImplementedError

    def cost(self, plan: Plan) -> IOCount:
        """Exact I/O of :meth:`simulate` for ``plan`` (its mask and ``save_lse`` included), in
        closed form: no data, no simulation; with a mask, a sum over its blocks."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared checks
    def check_options(self, options: dict) -> dict:
        """``options`` with the defaults filled in; a TypeError naming any unknown option."""
        unknown = set(options) - set(self.options)
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise TypeError(
                f"{self.name!r} got unknown option(s) {', '.join(sorted(unknown))}; "
                f"its options are: {known} (and mask{self._extra_keywords})"
            )
        return {**self.options, **options}

    _extra_keywords = ", save_lse"

    def plan(self, N: int, d: int, M: int, *, N_k: int | None = None, mask=None,
             save_lse: bool = False, **options) -> Plan:
        """Check the options and ``M``, then return the plan.

        ``N_k`` (the key and value rows; ``N`` by default) makes the plan rectangular: ``N``
        query rows against ``N_k`` keys, block sizes chosen for that shape (see each
        algorithm's ``make_plan``). ``mask`` (a boolean ``N x N_k`` array, True = attend, or a
        :class:`~ioattn.masks.Mask`) and ``save_lse`` are accepted by every algorithm; they
        change what the schedule visits and writes, not its block sizes. An array is read once,
        into the plan's mask (:func:`~ioattn.masks.mask_of`): pass the plan's mask on to cost
        many plans with it.
        """
        opts = self.check_options(options)
        keys = {} if N_k is None or as_count(N_k, "N_k") == N else {"N_k": int(N_k)}
        if not isinstance(save_lse, (bool, np.bool_)):
            raise TypeError(f"save_lse must be True or False, got {save_lse!r}")
        least = self.min_M(d, **opts)
        if M < least:
            raise ValueError(
                f"{self.name!r} needs a cache of at least M = {least} entries at d = {d} "
                f"({self.describe_rule(d, **opts)}); got M = {M}"
            )
        plan = self.make_plan(N, d, M, **keys, **opts)   # square (N_k = N) as before
        if mask is None and not save_lse:
            return plan
        mask = mask_of(mask, N, plan.N_k)  # a Mask is kept as it is, with its blocks computed
        return replace(plan, mask=mask, save_lse=bool(save_lse))

    def describe_rule(self, d: int, **options) -> str:
        """One line on the block-size rule, quoted when M is too small."""
        return "its block-size rule does not fit below that"


class BackwardAlgorithm(Algorithm):
    """Base class of the registered backward passes: the same rules, plans and exact costs as a
    forward algorithm, with the gradient's inputs and outputs in :meth:`simulate`."""

    _extra_keywords = ""

    def check_options(self, options: dict) -> dict:
        if "save_lse" in options:
            raise TypeError("save_lse is an option of the forward pass (run(..., save_lse=True)"
                            " writes L); the backward pass reads L")
        if "N_k" in options:
            raise TypeError("N_k (the key rows) is not an option of a backward pass's block rule:"
                            " pass it to plan, io_cost, totals or run_backward (the least M does "
                            "not depend on it)")
        return super().check_options(options)

    @property
    def rectangular(self) -> bool:
        """Whether this backward pass runs ``N`` query rows against ``N_k != N`` keys: its
        ``make_plan`` takes ``N_k=`` (as a forward algorithm's does)."""
        return "N_k" in inspect.signature(self.make_plan).parameters

    def plan(self, N: int, d: int, M: int, *, N_k: int | None = None, mask=None,
             **options) -> Plan:
        """Check the options and ``M``, then return the plan (``N_k`` and ``mask`` as for the
        forward). ``N_k != N`` raises a TypeError for a backward pass that runs square problems
        only, naming those that take ``N_k``."""
        self.check_options(options)                   # before save_lse binds to the forward's
        if N_k is not None and as_count(N_k, "N_k") != N and not self.rectangular:
            takes = ", ".join(repr(n) for n in sorted(BACKWARD) if BACKWARD[n].rectangular)
            raise TypeError(f"the {self.name!r} backward pass takes as many keys as queries "
                            f"(N_k = N = {N}), got N_k = {N_k}; the backward passes that take "
                            f"N_k (rectangular attention): {takes or 'none'}")
        return super().plan(N, d, M, N_k=N_k, mask=mask, **options)

    def simulate(self, mem: TwoLevelMemory, Q: SlowArray, K: SlowArray, V: SlowArray,
                 O: SlowArray, dO: SlowArray, L: SlowArray, dQ: SlowArray, dK: SlowArray,
                 dV: SlowArray, plan: Plan, scale: float) -> None:
        """Compute ``dQ, dK, dV`` from ``Q, K, V``, the forward's ``O`` and row log-sum-exp
        ``L`` (``L_i = log sum_j exp(scale q_i . k_j)`` over the keys row ``i`` attends to,
        ``+inf`` for a row that attends to none) and ``dO``, all in slow memory."""
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


def variants(backward: bool = False) -> list[tuple[str, dict]]:
    """Every registered algorithm (its backward pass with ``backward=True``) with every value
    of its :attr:`~Algorithm.choices`, by name: ``(name, options)`` pairs, the defaults
    (``{}``) first, then each other value of each choice on its own.

    >>> variants()[:2]
    [('flash', {}), ('flash', {'variant': 'fa1'})]
    """
    table = BACKWARD if backward else REGISTRY
    out = []
    for name in sorted(table):
        algo = table[name]
        out.append((name, {}))
        for option, values in algo.choices.items():
            out += [(name, {option: v}) for v in values if v != algo.options[option]]
    return out


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
