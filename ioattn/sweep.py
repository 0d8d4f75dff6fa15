"""Exact I/O of every algorithm over a range of cache sizes, forward or backward: the data behind
the CLI's table, the book's figures and the crossover explorer."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import bounds
from ._validate import as_count, as_counts, as_flag, as_name, as_names
from .algorithms import BACKWARD, REGISTRY, get
from .api import io_cost

__all__ = ["DEFAULT_OPTIONS", "Sweep", "as_options", "powers_of_two", "sweep"]

#: The options the book's crossover chapter, ``ioattn sweep`` and the explorers run the algorithms
#: with unless told otherwise: square tiling with the outer-product schedule, its cheaper one.
DEFAULT_OPTIONS = {"square_tiling": {"schedule": "outer"}}


def as_options(options, backward: bool = False) -> dict:
    """``options`` (algorithm name -> dict of its options; None for none) checked: every name
    known (the closest one suggested), every option one the algorithm has; a copy.

    >>> as_options({"square_tiling": {"schedule": "outer"}})
    {'square_tiling': {'schedule': 'outer'}}
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise TypeError("options must be a dict: algorithm name -> dict of its options, "
                        f"got {options!r}")
    out = {}
    for name, opts in options.items():
        algo = get(as_name(name, "options", BACKWARD if backward else REGISTRY), backward)
        if not isinstance(opts, dict):
            raise TypeError(f"options[{name!r}] must be a dict of {name}'s options, "
                            f"got {opts!r}")
        algo.check_options(opts)
        out[name] = dict(opts)
    return out


def powers_of_two(lo: int, hi: int) -> list[int]:
    """The powers of two ``p`` with ``lo <= p <= hi``."""
    return [1 << k for k in range(hi.bit_length()) if lo <= 1 << k <= hi]


@dataclass(frozen=True)
class Sweep:
    """Exact totals per algorithm at each ``M`` (``None`` where it cannot run), with the bounds.

    Attributes
    ----------
    N, d : int
    Ms : list of int
    totals : dict of str -> list of (int or None)
        Exact I/O (reads + writes) from :func:`ioattn.io_cost` (of the backward passes when
        ``backward``).
    lower : list of int
        :func:`ioattn.bounds.lower_curve` for standard matrix multiplication: the lower bound
        for programs with an ``M``-entry cache, made monotone over ``Ms``.
    lower_any : list of int
        :func:`ioattn.bounds.lower_curve` for any matrix multiplication.
    crossovers : list of Crossover
        Exact ``M`` where the cheapest algorithm changes (:func:`ioattn.bounds.crossovers`).
    options : dict
        Algorithm name -> the options it was swept with (only the names that have some).
    backward : bool
        Whether these are the backward passes' costs and bounds.
    """

    N: int
    d: int
    Ms: list[int]
    totals: dict[str, list[int | None]]
    lower: list[int]
    lower_any: list[int]
    crossovers: list = field(default_factory=list)
    options: dict = field(default_factory=dict)
    backward: bool = False

    @property
    def what(self) -> str:
        """``"attention"``, or ``"the attention backward pass"`` for a backward sweep."""
        return "the attention backward pass" if self.backward else "attention"

    def label(self, name: str) -> str:
        """``name`` with the options it was swept with, e.g. ``square_tiling (schedule=outer)``."""
        opts = self.options.get(name)
        return name + (" (" + ", ".join(f"{k}={v}" for k, v in opts.items()) + ")" if opts else "")

    def cheapest(self) -> list[str | None]:
        """The algorithm with the least I/O at each ``M`` (ties to the first name in sort order)."""
        out = []
        for k in range(len(self.Ms)):
            options = [(t[k], name) for name, t in sorted(self.totals.items()) if t[k] is not None]
            out.append(min(options)[1] if options else None)
        return out

    def table(self) -> str:
        """A plain-text table: one row per ``M``, the cheapest marked with ``*``.

        Each column is as wide as its widest entry (header or count), right-aligned, with two
        spaces before it, so counts of any length stay apart and aligned."""
        names = sorted(self.totals)
        cheapest = self.cheapest()
        columns = [["M "] + [f"{M:,} " for M in self.Ms]]
        for name in names:
            columns.append([name + " "] + [
                "- " if t is None else f"{t:,}" + ("*" if name == best else " ")
                for t, best in zip(self.totals[name], cheapest)])
        columns.append(["lower bound "] + [f"{b:,} " for b in self.lower])
        widths = [max(map(len, column)) for column in columns]
        lines = ["  ".join(f"{cell:>{w}}" for cell, w in zip(cells, widths)).rstrip()
                 for cells in zip(*columns)]
        head, body = lines[0], lines[1:]
        rows = [f"I/O of {self.what}, N = {self.N}, d = {self.d} (d^2 = {self.d ** 2}); "
                "exact counts, * = cheapest"]
        if self.options:
            rows.append("options: " + "; ".join(self.label(n) for n in names if n in self.options))
        rows += [head, "-" * len(head)]
        rows += [line + ("   <- d^2" if M == self.d ** 2 else "")
                 for M, line in zip(self.Ms, body)]
        for c in self.crossovers:
            rows.append(f"crossover at M = {c.M:,} ({c.M / self.d ** 2:.3g} d^2): "
                        f"{c.before} -> {c.after}")
        return "\n".join(rows)


def sweep(N: int, d: int, Ms=None, names=None, options=None, *, backward: bool = False) -> Sweep:
    """Exact I/O of ``names`` (default: every registered algorithm) at each ``M`` in ``Ms``.

    ``Ms`` defaults to the powers of two from 4 to ``32 d^2``; ``options`` maps a name to its
    options. Crossovers are every change of the cheapest algorithm between the smallest and
largest ``M`` (:func:`ioattn.bounds.crossovers`), not only between the ``Ms`` listed. With
    ``backward=True`` the costs are those of the backward passes
    (``io_cost(..., backward=True)``, default: every registered backward pass) and the bounds and
    crossovers are the backward's.

    >>> s = sweep(4096, 64, [1024, 65536], backward=True)
    >>> s.cheapest(), s.lower[1] == bounds.lower_bound(4096, 64, 65536, backward=True,
    ...                                                 program=True)
    (['standard', 'flash'], True)
    """
    N, d = as_count(N, "N"), as_count(d, "d")
    backward = as_flag(backward, "backward")
    Ms = as_counts(Ms if Ms is not None else powers_of_two(4, 32 * d * d), "Ms")
    table = BACKWARD if backward else REGISTRY
    names = sorted(table) if names is None else sorted(set(as_names(names, "names", table)))
    if not names:
        raise ValueError("names is empty: name at least one algorithm (None for all)")
    options = as_options(options, backward)
    totals = {}
    for name in names:
        opts = options.get(name, {})
        algo = get(name, backward)
        least = algo.min_M(d, **{**algo.options, **opts})
        totals[name] = [io_cost(name, N, d, M, backward=backward, **opts).total
                        if M >= least else None for M in Ms]
    return Sweep(
        N, d, Ms, totals,
        lower=bounds.lower_curve(N, d, Ms, backward=backward),
        lower_any=bounds.lower_curve(N, d, Ms, "any", backward=backward),
        crossovers=(bounds.crossovers(N, d, min(Ms), max(Ms), names, options, backward=backward)
                    if len(Ms) > 1 else []),
        options={name: dict(options[name]) for name in names if options.get(name)},
        backward=backward,
    )
