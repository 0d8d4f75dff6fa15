"""The algorithms of :mod:`ioattn.parallel` side by side, against the number of processors ``P``.

For each ``P`` and each algorithm of :data:`~ioattn.parallel.costs.ALGORITHMS` (or of any
``names`` of :data:`~ioattn.parallel.costs.NAMES`: the schemes run in practice too), the exact
counts of :func:`~ioattn.parallel.costs.cost` for the busiest processor (its traffic, the words
it receives, the messages it sends, the words it holds at once) beside the lower bound of
:func:`~ioattn.parallel.bounds.lower_bound` on the words it must receive, with ``S`` the memory
that algorithm uses, and the ratio of the two. :func:`rows` gives the data (JSON-ready),
:func:`text` the plain-text table that ``ioattn parallel`` prints; the book and the explorer
(:func:`ioattn.explorer.static_parallel_explorer`) read the same rows.

>>> r = rows(4096, 64, [16], heads=16)
>>> [x["name"] for x in r if x["fewest"]], r[0]["received"] == cost("ring", 4096, 64, 16,
...                                                                  heads=16).max_received
(['all_to_all'], True)
"""

from __future__ import annotations

import math

from .._validate import as_count
from .bounds import lower_bound
from .costs import ALGORITHMS, NAMES, RINGS, WITH_BACKWARD, as_flag, cost

__all__ = ["TITLES", "data", "fewest", "rows", "text", "why_not"]

#: The algorithms' names in prose (the readouts of the explorer use them).
TITLES = {"ring": "ring attention", "striped": "striped attention", "all_to_all": "all-to-all",
          "grid": "the 2D grid", "zigzag": "zigzag ring attention",
          "all_gather": "the all-gather of K, V", "usp": "Ulysses × ring (USP)",
          "usp_zigzag": "Ulysses × zigzag ring", "usp_grid": "head groups × grid"}


def why_not(name: str, N: int, P: int, heads: int = 1, backward: bool = False) -> str | None:
    """Why ``name`` does not apply at ``(N, P, heads, backward)`` in a few words, or None when
    it does (the conditions :func:`~ioattn.parallel.costs.check` enforces).

    USP's default shape (:func:`~ioattn.parallel.layout.usp_shape`) always fits the heads.

    >>> why_not("all_to_all", 4096, 32, heads=16), why_not("grid", 4, 8, backward=True)
    ('needs H ≥ P', 'needs N ≥ P')
    >>> why_not("usp", 4096, 32, heads=16), why_not("zigzag", 4096, 4, backward=True)
    (None, None)
    """
    if name not in NAMES:
        raise ValueError(f"unknown parallel algorithm {name!r}; known: {', '.join(NAMES)}")
    if N < P:
        return "needs N ≥ P"
    if backward and name not in WITH_BACKWARD:
        return "no backward pass"
    if name == "all_to_all" and heads < P:
        return "needs H ≥ P"
    return None


def fewest(costs: dict) -> list[str]:
    """The names whose busiest processor has the least traffic (``max_traffic``), in the order
    of ``costs``; ``costs`` maps a name to a :class:`~ioattn.parallel.costs.ParallelCost` or
    None (does not apply). Ties are all named (ring and striped attention always tie)."""
    got = {n: c.max_traffic for n, c in costs.items() if c is not None}
    if not got:
        return []
    least = min(got.values())
    return [n for n, t in got.items() if t == least]


def _names(names) -> tuple[str, ...]:
    """``names`` checked against :data:`~ioattn.parallel.costs.NAMES` (None: ``ALGORITHMS``)."""
    if names is None:
        return ALGORITHMS
    if isinstance(names, str):
        raise TypeError(f"names must be a sequence of algorithm names, got the string {names!r}")
    names = tuple(names)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ValueError(f"unknown parallel algorithm {unknown[0]!r}; known: {', '.join(NAMES)}")
    if not names or len(set(names)) != len(names):
        raise ValueError(f"names must name each algorithm at most once, and at least one; "
                         f"got {list(names)}")
    return names


def _overlap(overlap, link):
    """``(gpu, link)`` checked, the link defaulting to the GPU's first (within a node)."""
    from ..interconnect import GPU_LINKS
    from ..interconnect import link as check_link
    from .overlap import peak

    peak(overlap)                                   # a clear error for an unknown GPU
    link = GPU_LINKS[overlap][0] if link is None else check_link(link).name
    return overlap, link


def rows(N: int, d: int, Ps, *, heads: int = 1, causal: bool = False,
         backward: bool = False, names=None, overlap: str | None = None,
         link: str | None = None) -> list[dict]:
    """One row per ``P`` in ``Ps`` and algorithm (in the order of ``names``).

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension.
    Ps : sequence of int
        Processor counts, each at most ``N``.
    heads : int
        Heads ``H``.
    causal, backward : bool
        As for :func:`~ioattn.parallel.costs.cost`; the bound is the causal one with ``causal``
        (``Z = N (N + 1) / 2`` scores). The backward pass computes every score too, under the
        same assumption (A), so the same bound holds for it.
    names : sequence of str, optional
        The algorithms, default :data:`~ioattn.parallel.costs.ALGORITHMS` (the four the book
        introduces first); :data:`~ioattn.parallel.costs.NAMES` adds zigzag ring attention, the
        all-gather of ``K, V`` and USP at its default shape.
    overlap : str, optional
        A GPU of :data:`ioattn.gpus.GPUS`: add, for the rings of the forward pass
        (:data:`~ioattn.parallel.costs.RINGS`), the smallest ``N / P`` at which their transfers
        hide behind their compute (:func:`~ioattn.parallel.overlap.smallest`, a time model) on
        ``link``, default the GPU's link within a node (:data:`ioattn.interconnect.GPU_LINKS`).

    Returns
    -------
    list of dict
        Each with ``P``, ``name``, ``applies`` and ``why`` (:func:`why_not`); where it applies
        (else None) the busiest processor's ``traffic`` (``max_traffic``), ``received``
        (``max_received``), ``messages`` (``max_messages``), ``memory`` (``max_memory``), the
        ``balance`` of the work, the ``bound`` (:func:`~ioattn.parallel.bounds.lower_bound`
        with ``S = memory``: the words some processor must receive if none holds more than
        ``S``) and ``ratio = received / bound`` (None when the bound is 0); ``fewest``: True for
        the least traffic at that ``P`` (:func:`fewest`); ``hide_n`` (that smallest ``N / P``)
        and ``hides`` (``N / P >= hide_n``, with ``N / P`` rounded down), None without
        ``overlap``, for a backward pass, or for a scheme with no ring (USP whose default
        shape has one group).

    Examples
    --------
    >>> r = rows(4096, 64, [1, 8])
    >>> [(x["P"], x["name"], x["traffic"], x["fewest"]) for x in r if x["P"] == 8]
    ... # doctest: +NORMALIZE_WHITESPACE
    [(8, 'ring', 917504, False), (8, 'striped', 917504, False),
     (8, 'all_to_all', None, False), (8, 'grid', 525312, True)]
    >>> r[0]["traffic"], r[0]["bound"], r[0]["ratio"]     # one processor: nothing to send
    (0, 0.0, None)
    """
    N, d, heads = as_count(N, "N"), as_count(d, "d"), as_count(heads, "heads")
    Ps = [as_count(P, "P") for P in Ps]
    causal, backward = as_flag(causal, "causal"), as_flag(backward, "backward")
    names = _names(names)
    gpu_link = None if overlap is None else _overlap(overlap, link)
    too_many = [P for P in Ps if P > N]
    if too_many:
        raise ValueError(f"every processor needs at least one row: P = {too_many[0]} > N = {N}")
    out = []
    for P in Ps:
        costs = {n: None if why_not(n, N, P, heads, backward) else
                 cost(n, N, d, P, heads=heads, causal=causal, backward=backward)
                 for n in names}
        best = set(fewest(costs))
        for n, c in costs.items():
            row = {"P": P, "name": n, "applies": c is not None,
                   "why": why_not(n, N, P, heads, backward), "traffic": None, "received": None,
                   "messages": None, "memory": None, "balance": None, "bound": None,
                   "ratio": None, "fewest": n in best, "hide_n": None, "hides": None}
            if c is not None:
                bound = lower_bound(N, d, P, c.max_memory, heads=heads, causal=causal)
                row.update(traffic=c.max_traffic, received=c.max_received,
                           messages=c.max_messages, memory=c.max_memory, balance=c.balance,
                           bound=bound, ratio=c.max_received / bound if bound > 0 else None)
                if gpu_link and n in RINGS and not backward and P > 1 and c.work.shape[1] > 1:
                    from .overlap import smallest

                    hide = smallest(n, *gpu_link, d, P, heads=heads, causal=causal).n
                    row.update(hide_n=hide, hides=N // P >= hide)
            out.append(row)
    return out


def data(N: int, d: int, Ps, *, heads: int = 1, causal: bool = False,
         backward: bool = False, names=None, overlap: str | None = None,
         link: str | None = None) -> dict:
    """What ``ioattn parallel --json`` prints: ``N``, ``d``, ``heads``, ``causal``,
    ``backward``, ``Ps`` and the :func:`rows` (of ``names``; with ``overlap``, also
    ``overlap`` and ``link``)."""
    r = rows(N, d, Ps, heads=heads, causal=causal, backward=backward, names=names,
             overlap=overlap, link=link)
    out = {"N": int(N), "d": int(d), "heads": int(heads), "causal": causal,
           "backward": backward, "Ps": [int(P) for P in Ps], "rows": r}
    if overlap is not None:
        out["overlap"], out["link"] = _overlap(overlap, link)
    return out


def text(N: int, d: int, Ps, *, heads: int = 1, causal: bool = False,
         backward: bool = False, table: list | None = None, names=None,
         overlap: str | None = None, link: str | None = None) -> str:
    """The plain-text table of :func:`rows` (or of the given ``table`` of them): one line per
    ``P`` and algorithm, ``*`` after the least traffic at each ``P``, ``—`` where an algorithm
    does not apply (with the reason). The bound is printed rounded down (the words received
    are an integer, so that is still a lower bound) and the ratio to two decimals; with
    ``causal``, a column gives the balance of the work (1 when no processor waits).

    >>> print(text(4096, 64, [2]))   # doctest: +NORMALIZE_WHITESPACE
    Attention on P processors: N = 4,096, d = 64, H = 1 head, forward pass.
    Words of the busiest processor; * = the least traffic at that P; bound = lower bound on the
    words received if no processor holds more than its memory (rounded down).
        P  algorithm       traffic    received  messages       memory       bound  received/bound
        2  ring            524,288*    262,144         1      790,528     108,583            2.41
           striped         524,288*    262,144         1      790,528     108,583            2.41
           all_to_all            —   does not apply: needs H ≥ P
           grid            524,288*    262,144         1      792,576     108,583            2.41
    """
    table = rows(N, d, Ps, heads=heads, causal=causal, backward=backward, names=names,
                 overlap=overlap, link=link) if table is None else table
    hiding = any(r.get("hide_n") is not None for r in table)
    if overlap is not None:
        overlap, link = _overlap(overlap, link)
    cols = ["traffic", "received", "messages", "memory", "bound"] + (["balance"] if causal else [])
    what = ", ".join(["backward pass" if backward else "forward pass"]
                     + (["causal mask"] if causal else []))
    lines = [f"Attention on P processors: N = {N:,}, d = {d}, H = {heads} "
             f"head{'s' if heads != 1 else ''}, {what}.",
             "Words of the busiest processor; * = the least traffic at that P; bound = lower "
             "bound on the",
             "words received if no processor holds more than its memory (rounded down)."]
    if hiding:
        where = f" on {overlap} over {link}" if overlap else ""
        lines.append("N/P to hide = the smallest N/P at which a ring's transfers hide behind "
                     "its compute")
        lines.append(f"{where.strip()} (a time model: alpha + bytes/bandwidth a message, 4d "
                     "flops a score at the dense peak).")
    # every cell as text first, so that each column is as wide as its widest entry
    cells = []
    for r in table:
        if not r["applies"]:
            cells.append(None)
            continue
        row = [format(math.floor(r[c]) if c == "bound" else r[c],
                      ".2f" if c == "balance" else ",") + ("*" if c == "traffic" and r["fewest"]
                                                           else "")
               for c in cols]
        row.append("—" if r["ratio"] is None else f"{r['ratio']:.2f}")
        if hiding:
            row.append("—" if r.get("hide_n") is None else
                       f"{r['hide_n']:,} ({'yes' if r['hides'] else 'no'})")
        cells.append(row)
    names = cols + ["received/bound"] + (["N/P to hide"] if hiding else [])
    widths = [max([len(n)] + [len(row[i]) for row in cells if row is not None])
              for i, n in enumerate(names)]
    widths[0] = max(widths[0], 2)
    P_w = max([5] + [len(str(r["P"])) for r in table])
    A_w = max([len("algorithm")] + [len(r["name"]) for r in table])

    def line(P, name, row):
        return f"{P:>{P_w}}  {name:<{A_w}}  " + "  ".join(
            # the traffic column's '*' hangs past its numbers
            f"{c:>{w}}" if i or c.endswith("*") else f"{c + ' ':>{w}}"
            for i, (c, w) in enumerate(zip(row, widths)))

    widths[0] += 0 if any(row and row[0].endswith("*") for row in cells) else 1
    lines.append(line("P", "algorithm", names))
    last = None
    for r, row in zip(table, cells):
        P = str(r["P"]) if r["P"] != last else ""
        last = r["P"]
        if row is None:
            lines.append(f"{P:>{P_w}}  {r['name']:<{A_w}}  {'—':>{widths[0] - 1}}   "
                         f"does not apply: {r['why']}")
        else:
            lines.append(line(P, r["name"], row))
    return "\n".join(lines)
