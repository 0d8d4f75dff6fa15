"""The crossover explorer: exact I/O of each attention algorithm against the cache size ``M``.

Where does FlashAttention stop being the cheapest, in the forward pass and in the backward pass?
Two forms of one picture (exact I/O against ``M``, log-log, with the lower bounds and a line at
``M = d^2``):

- :func:`curves`: the data of one picture, from :func:`ioattn.sweep.sweep` (exact totals, the
  lower bound, the cheapest algorithm at each ``M`` and the exact crossovers), forward or
  backward, dense or causal;
- :func:`static_explorer`: a self-contained HTML snippet for a static page (an inline SVG, the
  exact totals of a few ``N`` and ``d``, both passes, dense and causal, as JSON and a small
  script; range inputs for ``M``, ``N`` and ``d``, forward/backward and none/causal buttons
  directly under the picture, the legend folded under the readout), with no kernel and
  nothing fetched from the network. Its M axis is the same for every ``d`` (:func:`m_axis`,
  :func:`m_x`, :func:`octave_px`), so ``M = d^2`` and the crossover move by a factor 4 in
  ``M`` on the screen for each doubling of ``d``;
- :func:`words` and :func:`readout`: what both explorers say at a point, in words (the exact
  ratios, :func:`ratio_text`, said as "square tiling moves 1.12× as many entries as
  FlashAttention") and in numbers;
- :func:`ioattn.widgets.explorer`: the live ipywidgets version, for a notebook with a kernel
  (sliders for ``N``, ``d`` and ``log2 M``, a forward/backward toggle, a none/causal mask
  toggle, a checkbox per algorithm, a "simulate" button that runs the algorithms on random
  data and checks the counts against :func:`ioattn.io_cost`).

The panel "across P processors" belongs to the chapters on parallel attention: at given ``N``,
``d``, pass and mask, the words the busiest processor moves in each algorithm of
:mod:`ioattn.parallel` (``H = 16`` heads, :data:`PARALLEL_HEADS`) against ``P = 1, 2, 4, ...,
256``, with the lower bound, a ``P`` slider, and a sentence on the algorithm that moves the
fewest words at that ``P`` (:func:`across`, :func:`parallel_words`, :func:`parallel_readout`,
:func:`parallel_panel`; :func:`static_parallel_explorer` for a static page,
:func:`ioattn.widgets.parallel_explorer` live).

>>> c = curves(1024, 32, Ms=[64, 1024, 8192])
>>> c["names"], c["cheapest"]
(['flash', 'square_tiling', 'standard'], ['square_tiling', 'flash', 'flash'])
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from . import bounds, gpus
from ._validate import as_count, as_counts, as_flag, as_names
from .algorithms import BACKWARD, REGISTRY, get
from .api import io_cost
from .masks import Mask
from .plotting import PARALLEL_STYLE as _PSTYLE
from .plotting import STYLE, TITLES
from .plotting import label as plot_label
from .sweep import DEFAULT_OPTIONS, Sweep, as_options, sweep

__all__ = ["D_MAX", "DEFAULT_NAMES", "DEFAULT_OPTIONS", "KINDS", "M_MAX", "N_MAX", "OTHER_COLOUR",
           "PARALLEL_HEADS", "PARALLEL_PS", "PARALLEL_STYLE", "STATIC_HI", "across", "curves",
           "default_Ms", "explorer_size", "flash_from", "m_axis", "m_label", "m_x", "octave_px",
           "parallel_panel", "parallel_picture", "parallel_Ps", "parallel_readout",
           "parallel_title", "parallel_words", "picture", "picture_title", "ratio_text",
           "readout", "static_explorer", "static_Ms", "static_parallel_explorer", "words"]

#: The algorithms shown by default.
DEFAULT_NAMES = tuple(sorted(REGISTRY))
#: Colour of a line without a style in :data:`ioattn.plotting.STYLE`.
OTHER_COLOUR = "#9467bd"
#: The largest ``N`` and ``d`` the explorers take: the ends of the live explorer's sliders.
#: Beyond them one picture (its exact crossovers cost every ``M`` of the range) takes from
#: tens of seconds to minutes; :func:`ioattn.sweep.sweep` gives the counts of any size.
N_MAX = 1 << 16
D_MAX = 256
#: The largest cache size the explorers take: ``64 D_MAX^2``, the end of the live explorer's
#: ``log2 M`` slider at ``d = D_MAX``.
M_MAX = 64 * D_MAX ** 2


def explorer_size(value, name: str, most: int) -> int:
    """``value`` as a count from 1 to ``most`` (:data:`N_MAX`, :data:`D_MAX` or
    :data:`M_MAX`), with an error that says where larger sizes are computed."""
    value = as_count(value, name)
    if value > most:
        raise ValueError(f"{name} = {value:,} is more than the explorer draws ({name} <= "
                         f"{most:,}); ioattn.sweep.sweep gives the exact counts of larger sizes")
    return value


def default_Ms(d: int, count: int = 32, lo: int | None = None, hi_factor: int = 64) -> list[int]:
    """``count`` cache sizes evenly spaced in ``log2 M`` from ``lo`` to ``hi_factor * d^2``,
    rounded to distinct integers.

    ``lo`` is ``max(16, d^2 / 16)`` by default: from there on square tiling (outer schedule) is
    cheaper than standard attention for every ``N``, so the range runs from square tiling's
    regime into FlashAttention's.

    >>> default_Ms(8, count=5)
    [16, 64, 256, 1024, 4096]
    """
    lo = max(16, d * d // 16) if lo is None else lo
    a, b = math.log2(lo), math.log2(hi_factor * d * d)
    return sorted({round(2 ** (a + i * (b - a) / (count - 1))) for i in range(count)})


def _causal_cost(name: str, N: int, d: int, M: int, backward: bool, options: dict):
    """``io_cost(name, N, d, M, backward=backward, mask=ioattn.masks.causal(N), **options)``,
    with the causal mask as :meth:`ioattn.masks.Mask.causal` (no ``N x N`` array; the
    algorithms' masked costs have closed forms for it)."""
    return io_cost(name, N, d, M, backward=backward, mask=Mask.causal(N), **options)


def _causal_curves(N: int, d: int, Ms: list, names: list, options: dict,
                   backward: bool) -> dict:
    """Totals, bounds, cheapest and crossovers under the causal mask (what :func:`curves` does
    with :func:`ioattn.sweep.sweep` for dense attention)."""
    Z = N * (N + 1) // 2
    least = {n: _least(n, d, options, backward) for n in names}
    memo: dict = {}

    def total(n, M):
        if M < least[n]:
            return None
        if (n, M) not in memo:
            memo[n, M] = _causal_cost(n, N, d, M, backward, options.get(n, {})).total
        return memo[n, M]

    def best(M):                         # least total, ties to the first name (sorted)
        runnable = [(total(n, M), n) for n in names if total(n, M) is not None]
        return min(runnable)[1] if runnable else None

    mask = Mask.causal(N)
    crossings = [{"M": c.M, "before": c.before, "after": c.after}
                 for c in bounds.crossovers(N, d, min(Ms), max(Ms), names, options,
                                            backward=backward, mask=mask)]
    return {
        "totals": {n: [total(n, M) for M in Ms] for n in names},
        "lower": bounds.lower_curve(N, d, Ms, backward=backward, Z=Z),
        "lower_any": [None] * len(Ms),
        "cheapest": [best(M) for M in Ms],
        "crossovers": crossings,
    }


def _least(n: str, d: int, options: dict, backward: bool) -> int:
    algo = get(n, backward)
    return algo.min_M(d, **{**algo.options, **options.get(n, {})})


def curves(N: int, d: int, Ms=None, names=None, options=None, *, backward: bool = False,
           causal: bool = False) -> dict:
    """The data of one picture: exact I/O of each algorithm at each ``M``, and the bounds.

    Parameters
    ----------
    N, d : int
        Sequence length and head dimension.
    Ms : list of int, optional
        Cache sizes; :func:`default_Ms` (32 values from ``max(16, d^2/16)`` to ``64 d^2``) by
        default.
    names : list of str, optional
        Algorithms; :data:`DEFAULT_NAMES` by default.
    options : dict, optional
        Algorithm name -> options; :data:`DEFAULT_OPTIONS` by default.
    backward : bool, optional
        The backward passes' exact I/O (``io_cost(..., backward=True)``) and the backward
        bounds and crossovers instead of the forward's.
    causal : bool, optional
        Causal attention instead of dense: the exact I/O of the masked algorithms
        (``io_cost(..., mask=ioattn.masks.causal(N))``, with the causal mask as
        :meth:`ioattn.masks.Mask.causal`, which
        gives the same counts faster), ``lower`` is :func:`ioattn.bounds.lower_curve` with
        ``Z = N (N + 1) / 2`` computed scores (the sparse program bound, made monotone),
        ``lower_any`` is ``None`` at every ``M`` (no
        any-matrix-multiplication bound is stated for masked attention), and the crossovers are
        found as :func:`ioattn.bounds.crossovers` finds them, from the masked costs.

    Returns
    -------
    dict
        JSON-ready: ``N``, ``d``, ``backward``, ``causal``, ``Ms``; ``names`` (sorted) and
        ``labels`` (name with its options, :meth:`ioattn.sweep.Sweep.label`) and ``titles`` (the
        name in prose, :data:`ioattn.plotting.TITLES`); ``totals`` (name -> exact I/O at each
        ``M``, ``None`` where the algorithm cannot run); ``min_M`` (name -> least feasible
        ``M``); ``lower`` and ``lower_any`` (:func:`ioattn.bounds.lower_curve` for standard and
        for any matrix multiplication: the bounds for programs with an ``M``-entry cache, made
        monotone over ``Ms``); ``cheapest`` (the name with the least I/O at each ``M``,
        ties to the first name) and ``crossovers`` (a list of ``{"M", "before", "after"}``: at
        ``M`` the cheapest is ``after``, at ``M - 1`` it was ``before``, found exactly by
        :func:`ioattn.bounds.crossovers`; with ``causal``, see above).

    Examples
    --------
    >>> c = curves(256, 16, Ms=[16, 256])
    >>> c["totals"]["flash"][0] is None        # flash needs a larger cache at d = 16
    True
    >>> curves(256, 16, Ms=[16, 256], backward=True)["min_M"]["flash"]   # 7d + 4 backward
    116
    """
    causal = as_flag(causal, "causal")
    backward = as_flag(backward, "backward")
    Ms = default_Ms(as_count(d, "d")) if Ms is None else as_counts(Ms, "Ms")
    names = sorted(DEFAULT_NAMES if names is None else
                   set(as_names(names, "names", BACKWARD if backward else REGISTRY)))
    if not names:
        raise ValueError("names is empty: name at least one algorithm (None for the default)")
    options = as_options(DEFAULT_OPTIONS if options is None else options, backward)
    options = {n: options[n] for n in names if n in options}
    if causal:      # the dense crossovers would be replaced: sweep one M (checks the sizes)
        s = sweep(N, d, Ms[:1], names, options, backward=backward)
        s = Sweep(s.N, s.d, Ms, {}, [], [], options=s.options, backward=backward)
    else:
        s = sweep(N, d, Ms, names, options, backward=backward)  # dense; validates the sizes
    out = {
        "N": s.N, "d": s.d, "backward": s.backward, "causal": causal, "Ms": list(s.Ms),
        "names": names,
        "labels": {n: s.label(n) for n in names},
        "titles": {n: TITLES.get(n, n) for n in names},
        "totals": {n: list(s.totals.get(n, ())) for n in names},
        "min_M": {n: _least(n, d, options, backward) for n in names},
        "lower": list(s.lower),
        "lower_any": list(s.lower_any),
        "cheapest": s.cheapest() if not causal else [],
        "crossovers": [{"M": c.M, "before": c.before, "after": c.after} for c in s.crossovers],
    }
    if causal:
        out.update(_causal_curves(s.N, s.d, out["Ms"], names, options, backward))
    return out


# ---------------------------------------------------------------------------------- text
def _commas(n: int) -> str:
    return f"{n:,}"


def m_label(M: int, d: int) -> str:
    """``M`` as a power of two, in entries and as a multiple of ``d^2``.

    >>> m_label(2048, 64)
    'M = 2^11 = 2,048 entries = 0.5 d²'
    """
    k = math.log2(M)
    k_text = str(round(k)) if k == round(k) else f"{k:.2f}"
    r = M / (d * d)
    r_text = f"{r:.3g}" if r >= 0.01 else f"{r:.2g}"
    return f"M = 2^{k_text} = {_commas(M)} entries = {r_text} d²"


def ratio_text(a: int, b: int) -> str:
    """The exact ratio ``a / b`` of two counts, rounded half up, followed by ``×``.

    Two decimals below 10, one below 100, none from 100 on; more decimals when the rounded
    ratio would read ``1.00×`` although ``a != b``. Computed on integers (the static
    explorer's script does the same with ``BigInt``), so no floating-point rounding enters.

    Examples
    --------
    >>> ratio_text(3082240, 655360), ratio_text(5, 5), ratio_text(1003, 1000), ratio_text(250, 2)
    ('4.70×', '1.00×', '1.003×', '125×')
    """
    a, b = int(a), int(b)
    if b <= 0 or a < 0:
        raise ValueError(f"a ratio of counts needs a >= 0 and b > 0, got {a} and {b}")
    p = 2 if a < 10 * b else 1 if a < 100 * b else 0
    while True:
        s = 10 ** p
        q = (2 * a * s + b) // (2 * b)
        if a == b or q != s or p >= 9:
            break
        p += 1
    t = str(q)
    if p:
        t = t.rjust(p + 1, "0")
        t = t[:-p] + "." + t[-p:]
    return t + "×"


def _ranked(data: dict, k: int) -> tuple[list, list]:
    """The algorithms that run at ``Ms[k]`` as ``(total, index, name)``, least first (ties to
    the first name), and those that cannot."""
    run, cannot = [], []
    for i, n in enumerate(data["names"]):
        t = data["totals"][n][k]
        (cannot.append(n) if t is None else run.append((t, i, n)))
    return sorted(run), cannot


def words(data: dict, k: int) -> str:
    """The readout in words of a picture ``data`` (from :func:`curves`) at ``Ms[k]``: the
    algorithm that moves the fewest entries, then how many times as many each other one moves
    (exact ratios of exact counts, :func:`ratio_text`, always a factor of at least 1 and said
    as "moves 4.70× as many"), how many times the lower bound the cheapest moves, and which
    algorithms cannot run. Algorithms are named by :data:`ioattn.plotting.TITLES`. The static
    explorer's script and the live widget write the same sentence.

    >>> print(words(curves(1024, 32, Ms=[64, 8192]), 1))  # doctest: +NORMALIZE_WHITESPACE
    At M = 8,192: FlashAttention moves the fewest entries; square tiling moves 4.70× as many
    entries as FlashAttention and standard attention 7.90× as many; FlashAttention moves 5.00×
    as many as the lower bound.
    """
    T = data["titles"]
    run, cannot = _ranked(data, k)
    text = f"At M = {_commas(data['Ms'][k])}: "
    if not run:
        text += "no algorithm can run"
    else:
        tb, _, best = run[0]
        if len(run) == 1:
            text += f"only {T[best]} can run; it moves {_commas(tb)} entries"
        else:
            others = [T[n] + (" moves" if i == 0 else "")
                      + ("" if t == tb else f" {ratio_text(t, tb)}")
                      + (f" as many entries as {T[best]}" if i == 0 else " as many")
                      for i, (t, _, n) in enumerate(run[1:])]
            text += f"{T[best]} moves the fewest entries; " + " and ".join(others)
        lower = data["lower"][k]
        if lower:
            text += f"; {T[best]} moves {ratio_text(tb, lower)} as many as the lower bound"
    for n in cannot:
        text += f"; {T[n]} cannot run (it needs M ≥ {_commas(data['min_M'][n])})"
    return text + "."


def readout(data: dict, k: int) -> str:
    """The readout line of a picture ``data`` (from :func:`curves`) at ``Ms[k]``: the cheapest
    algorithm, then each algorithm's exact count (or the least ``M`` it needs) and the bound,
    every algorithm named by :data:`ioattn.plotting.TITLES`.
    A backward or causal picture says so after ``M``: ``M = 8,192 (backward pass): cheapest
    ...``, ``M = 8,192 (causal mask): ...``, ``M = 8,192 (backward pass, causal mask): ...``;
    there the lower bound is the sparse one (:func:`ioattn.bounds.sparse_lower`).

    The static explorer's script writes the same text.

    >>> print(readout(curves(1024, 32, Ms=[64, 8192]), 1))  # doctest: +NORMALIZE_WHITESPACE
    N = 1,024, d = 32, M = 8,192: cheapest FlashAttention. FlashAttention 655,360; square tiling
    3,082,240; standard attention 5,177,344; lower bound 131,072
    """
    run, _ = _ranked(data, k)
    best = run[0][2] if run else None
    parts = []
    for n in data["names"]:
        t = data["totals"][n][k]
        needs = f"cannot run (needs M ≥ {_commas(data['min_M'][n])})"
        parts.append(data["titles"][n] + " " + (_commas(t) if t is not None else needs))
    parts.append("lower bound " + _commas(data["lower"][k]))
    tags = [t for t, on in (("backward pass", data.get("backward")),
                            ("causal mask", data.get("causal"))) if on]
    where = f" ({', '.join(tags)})" if tags else ""
    return (f"N = {_commas(data['N'])}, d = {data['d']}, M = {_commas(data['Ms'][k])}{where}: "
            f"cheapest {data['titles'][best] if best is not None else 'none'}. "
            + "; ".join(parts))


def picture_title(N: int, backward: bool = False, causal: bool = False) -> str:
    """The title of the static picture: ``Exact I/O of attention, N = 4,096`` (forward) or
    ``Exact I/O of the attention backward pass, N = 4,096``; with ``causal``, ``Exact I/O of
    causal attention, N = 4,096`` (``of the causal attention backward pass``)."""
    what = ("the causal attention backward pass" if causal else "the attention backward pass") \
        if backward else ("causal attention" if causal else "attention")
    return f"Exact I/O of {what}, N = {_commas(N)}"


def flash_from(data: dict):
    """The ``M`` from which FlashAttention stays the cheapest to the end of the picture's range
    (the last exact crossover, when it is to FlashAttention), or ``None``.

    >>> flash_from(curves(4096, 64))
    3164
    """
    cs = data["crossovers"]
    return cs[-1]["M"] if cs and cs[-1]["after"] == "flash" else None


# ------------------------------------------------------------------- across P processors
#: Heads ``H`` of the panel "across P processors": 16, as in the chapter on GPUs (all-to-all
#: head parallelism needs ``H >= P``).
PARALLEL_HEADS = 16
#: The processor counts of the panel: powers of two from 1 to 256.
PARALLEL_PS = tuple(1 << k for k in range(9))


def parallel_Ps(N: int, Ps=PARALLEL_PS) -> list[int]:
    """The counts of ``Ps`` that ``N`` rows can be shared by (every processor needs a row)."""
    return [int(P) for P in Ps if P <= N]


def across(N: int, d: int, Ps=PARALLEL_PS, *, heads: int = PARALLEL_HEADS,
           backward: bool = False, causal: bool = False, names=None) -> dict:
    """The data of the panel "across P processors": the busiest processor's words in each
    algorithm of :mod:`ioattn.parallel` at each ``P``, and the lower bound.

    From :func:`ioattn.parallel.table.rows` (so from :func:`ioattn.parallel.cost`): ``traffic``,
    ``received`` and ``memory`` (name -> a value per ``P``, None where the algorithm does not
    apply, with the reason in ``why``) and ``bound``: the memory-independent lower bound on the
    words the busiest processor receives (:func:`ioattn.parallel.bounds.memory_independent`,
    causal with ``causal``) rounded down, which is still a lower bound since the words received
    are an integer. The causal mask changes no word moved (only the work, and the bound).
    ``names``: the algorithms drawn, :data:`ioattn.parallel.ALGORITHMS` (the four of the
    chapter on many processors) by default, :data:`ioattn.parallel.NAMES` with the schemes run
    in practice; ring attention, the baseline of :func:`parallel_words`, is always among them.

    >>> c = across(4096, 64, [1, 16])
    >>> c["traffic"]["all_to_all"], c["bound"]
    ([0, 1966080], [0, 475928])
    """
    from .parallel import bounds as pbounds
    from .parallel.table import TITLES as PTITLES
    from .parallel.table import rows as prows

    for flag, label in ((backward, "backward"), (causal, "causal")):
        if not isinstance(flag, bool):
            raise TypeError(f"{label} must be True or False, got {flag!r}")
    names = _panel_names(names)
    table = prows(N, d, Ps, heads=heads, backward=backward, names=names)
    names = list(dict.fromkeys(r["name"] for r in table))
    Ps = list(dict.fromkeys(r["P"] for r in table))
    out = {"N": int(N), "d": int(d), "heads": int(heads), "Ps": Ps, "backward": backward,
           "causal": causal, "names": names, "titles": {n: PTITLES[n] for n in names}}
    for key in ("traffic", "received", "memory", "why"):
        out[key] = {n: [r[key] for r in table if r["name"] == n] for n in names}
    out["bound"] = [math.floor(pbounds.memory_independent(N, d, P, heads=heads, causal=causal))
                    for P in Ps]
    return out


def _panel_names(names) -> tuple:
    """The panel's algorithms: ``names`` checked (:func:`ioattn.parallel.table.rows` checks
    each name), ring attention among them; :data:`ioattn.parallel.ALGORITHMS` for None."""
    from .parallel import ALGORITHMS as PNAMES
    from .parallel.table import _names

    names = PNAMES if names is None else _names(names)
    if "ring" not in names:
        raise ValueError(f"names must include 'ring', the panel's baseline; got {list(names)}")
    return names


def _and(items: list) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


#: How :func:`parallel_words` says why algorithms do not apply (one, several).
_WHY = {"no backward pass": ("has no backward pass here", "have no backward pass here"),
        "needs H ≥ P": ("needs H ≥ P (H = {H})", "need H ≥ P (H = {H})"),
        "needs N ≥ P": ("needs N ≥ P", "need N ≥ P")}


def parallel_words(c: dict, t: int) -> str:
    """The sentence of the panel "across P processors" (``c`` from :func:`across`) at
    ``P = Ps[t]``: the algorithm whose busiest processor moves the fewest words (ties to the
    least memory, then to the first name; the others that tie are named), how many times as many
    the ring moves, how much memory it holds per processor against the ring, and how many times
    as many words as the lower bound it receives (exact ratios of the integers,
    :func:`ratio_text`, each said as "X moves 8.47× as many"), then the algorithms that do not
    apply and why. At ``P = 1`` there is nothing to communicate. The static panel's script
    (:func:`static_parallel_explorer`) writes the same sentence.

    >>> print(parallel_words(across(4096, 64, [1, 256]), 1))  # doctest: +NORMALIZE_WHITESPACE
    At P = 256: the 2D grid moves the fewest words, 1,973,760 on the busiest processor; ring
    attention moves 8.47× as many; the 2D grid holds 8.06× as much memory per processor as
    ring attention (1,060,864 words against 131,584) and receives 7.66× as many words as the
    lower bound on the words received; all-to-all needs H ≥ P (H = 16).
    """
    P, T = c["Ps"][t], c["titles"]
    if P == 1:
        return "On P = 1 processor there is nothing to communicate: no algorithm moves a word."
    run = [(c["traffic"][n][t], c["memory"][n][t], i, n) for i, n in enumerate(c["names"])
           if c["traffic"][n][t] is not None]
    tb, mb, _, best = min(run)
    ties = [T[n] for x, _, _, n in sorted(run, key=lambda r: r[2]) if x == tb and n != best]
    text = f"At P = {P}: {T[best]} moves the fewest words, {_commas(tb)} on the busiest processor"
    if ties:
        text += f", as {_and(ties)} {'do' if len(ties) > 1 else 'does'}"
    ring_t, ring_m = c["traffic"]["ring"][t], c["memory"]["ring"][t]
    if ring_t != tb:
        text += f"; {T['ring']} moves {ratio_text(ring_t, tb)} as many"
    if best == "ring":
        text += f"; {T[best]} holds {_commas(mb)} words per processor"
    else:
        text += (f"; {T[best]} holds {ratio_text(mb, ring_m)} as much memory per processor as "
                 f"{T['ring']} ({_commas(mb)} words against {_commas(ring_m)})")
    if c["bound"][t]:
        text += (f" and receives {ratio_text(c['received'][best][t], c['bound'][t])} as many "
                 "words as the lower bound on the words received")
    for why, (one, many) in _WHY.items():
        out = [T[n] for n in c["names"] if c["why"][n][t] == why]
        if out:
            text += f"; {_and(out)} " + (one if len(out) == 1 else many).format(H=c["heads"])
    return text + "."


def parallel_readout(c: dict, t: int) -> str:
    """The numbers under :func:`parallel_words`: the words the busiest processor moves in each
    algorithm (``—`` where it does not apply) and the lower bound on the words it receives.

    >>> print(parallel_readout(across(4096, 64, [16]), 0))  # doctest: +NORMALIZE_WHITESPACE
    N = 4,096, d = 64, H = 16, P = 16: words moved by the busiest processor: ring attention
    15,728,640; striped attention 15,728,640; all-to-all 1,966,080; the 2D grid 6,316,032;
    lower bound on the words received 475,928
    """
    tags = [x for x, on in (("backward pass", c["backward"]), ("causal mask", c["causal"])) if on]
    where = f" ({', '.join(tags)})" if tags else ""
    parts = [c["titles"][n] + " " + ("—" if c["traffic"][n][t] is None
                                     else _commas(c["traffic"][n][t])) for n in c["names"]]
    return (f"N = {_commas(c['N'])}, d = {c['d']}, H = {c['heads']}, P = {c['Ps'][t]}{where}: "
            "words moved by the busiest processor: " + "; ".join(parts)
            + f"; lower bound on the words received {_commas(c['bound'][t])}")


def parallel_title(N: int, d: int, heads: int = PARALLEL_HEADS, backward: bool = False,
                   causal: bool = False) -> str:
    """The title of the panel: ``Across P processors: attention, H = 16, N = 4,096, d = 64``
    (``causal attention``, ``the attention backward pass``, ...)."""
    what = picture_title(N, backward, causal).split("Exact I/O of ")[1].split(", N = ")[0]
    return f"Across P processors: {what}, H = {heads}, N = {_commas(N)}, d = {d}"


# ---------------------------------------------------------------------------------- static HTML
_ids = itertools.count()

#: The SVG (in CSS pixels at its natural size): width, height, margins (left, right, top,
#: bottom). Narrow enough that on a 390 px phone its text is still about 11 px high.
_W, _H = 400, 330
_L, _R, _T, _B = 52, 12, 50, 38
#: Font size of every text in the SVG, and the width of a character assumed to place labels.
_FONT, _CHAR = 12, 6.6
#: Colours: the line at the slider's M, the crossovers, the lines at d^2.
NOW_COLOUR, CROSS_COLOUR = "#f2a900", "#2ca02c"

#: A white outline under a label, so that it stays readable over the lines.
_HALO = 'stroke="#fff" stroke-width="3" paint-order="stroke"'

_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _domain(*pictures: dict, axis=None) -> list[float]:
    """``[x0, x1, y0, y1]``: log10 of the M range (``axis``, the ``(lo, hi)`` of
    :func:`m_axis`, by default the pictures' own) and of the I/O range rounded out to decades,
    over every picture given (the four pictures of one ``N`` and ``d`` share axes)."""
    ys = [t for data in pictures for n in data["names"] for t in data["totals"][n]
          if t is not None]
    ys += [b for data in pictures for b in data["lower"] + data.get("lower_any", [])
           if b is not None and b > 0]
    Ms = [M for data in pictures for M in data["Ms"]]
    lo, hi = (min(Ms), max(Ms)) if axis is None else axis
    return [math.log10(lo), math.log10(hi),
            math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))]


def static_Ms(d: int) -> list[int]:
    """The static explorer's cache sizes at ``d``: four per octave (:func:`default_Ms`) from
    ``max(16, d^2 / 16)`` to :data:`STATIC_HI` ``d^2``, where FlashAttention is the cheapest in
    every picture the book draws (it takes over below ``2 d^2``). For ``d`` a power of two
    they are the rounded powers of ``2^(1/4)``, the same values for every ``d``.

    >>> static_Ms(32)[:5], static_Ms(32)[-1], len(static_Ms(32))
    ([64, 76, 91, 108, 128], 4096, 25)
    """
    d = as_count(d, "d")
    lo, hi = max(16, d * d // 16), STATIC_HI * d * d
    return default_Ms(d, count=max(2, round(4 * math.log2(hi / lo)) + 1), lo=lo,
                      hi_factor=STATIC_HI)


def m_axis(Ms_by_d) -> tuple[int, int]:
    """The static explorer's M axis: ``(lo, hi)``, the least and the largest cache size drawn
    for any ``d`` (``Ms_by_d`` is a list of lists of cache sizes, one list per ``d``). The axis
    is the same for every ``d``: log2 ``M`` at a fixed number of pixels per octave, so that
    ``M = d^2`` and the crossovers move on the screen as ``d`` changes (``4 x`` in ``M`` for
    each doubling of ``d``).

    >>> m_axis([static_Ms(32), static_Ms(256)])
    (64, 262144)
    """
    Ms = [M for row in Ms_by_d for M in row]
    if not Ms:
        raise ValueError("m_axis needs at least one cache size")
    return min(Ms), max(Ms)


def m_x(M: int, axis) -> float:
    """The x (in the SVG's pixels, to a tenth) of cache size ``M`` on the static explorer's M
    axis ``axis = (lo, hi)`` (:func:`m_axis`): ``52 + 336 log(M / lo) / log(hi / lo)``. The
    script draws with the same formula.

    >>> m_x(64, (64, 262144)), m_x(4096, (64, 262144)), m_x(262144, (64, 262144))
    (52, 220, 388)
    """
    return _px([math.log10(axis[0]), math.log10(axis[1]), 0, 1], M)


def octave_px(axis) -> float:
    """Pixels (of the SVG, at its natural width) per octave of ``M`` on the axis ``axis``: a
    factor ``2^k`` in ``M`` moves a line by ``k octave_px(axis)`` pixels.

    >>> octave_px((64, 262144))
    28.0
    """
    return (_W - _L - _R) / math.log2(axis[1] / axis[0])


def _tenth(v: float):
    """``v`` to a tenth of a pixel, printed as the script prints it (``Math.round(10 v) / 10``)."""
    v = math.floor(10 * v + 0.5) / 10
    return int(v) if v == int(v) else v


def _px(dom, M, y=None):
    """Pixel coordinates of ``(M, y)`` in the plot area (the script uses the same formula)."""
    x0, x1, y0, y1 = dom
    px = _L + (math.log10(M) - x0) / (x1 - x0) * (_W - _L - _R)
    if y is None:
        return _tenth(px)
    py = _T + (y1 - math.log10(y)) / (y1 - y0) * (_H - _T - _B)
    return _tenth(px), _tenth(py)


def _side(x, text: str) -> tuple:
    """Where a label beside the vertical line at ``x`` goes: ``(x, anchor)``, to the right of
    the line unless it would cross the plot's right edge (the script decides the same way)."""
    if x + 4 + _CHAR * len(text) > _W - _R:
        return _tenth(x - 4), "end"
    return _tenth(x + 4), "start"


def _gpu_marks(dom) -> str:
    """Triangles on the plot's top edge at the on-chip memory of real GPUs (:mod:`ioattn.gpus`,
    fp16 entries), each named on its own row above; GPUs beyond the range named at a side."""
    lo, hi = 10 ** dom[0], 10 ** dom[1]
    out, beyond = [], []
    for row, (names, M) in enumerate(gpus.marks()):
        what = (f"{names}: on-chip memory of one SM (shared memory + registers) = "
                f"{_commas(M)} fp16 entries")
        if not lo <= M <= hi:
            beyond.append((names, "→" if M > hi else "←", what))
            continue
        x = _px(dom, M)
        y = 13 + 13 * row
        tx, anchor = (_tenth(x - 5), "start") if x - 5 + 7.2 * len(names) <= _W - 2 else \
            (_tenth(x + 5), "end")
        out.append(f'<g class="ioe-gpu"><title>{html.escape(what)}</title>'
                   f'<path d="M{_tenth(x - 5)} {_T - 9}L{_tenth(x + 5)} {_T - 9}L{x} {_T}Z" '
                   f'fill="#444"/><line x1="{x}" y1="{y + 2}" x2="{x}" y2="{_T - 9}" '
                   f'stroke="#999"/><text x="{tx}" y="{y}" text-anchor="{anchor}">'
                   f'{html.escape(names)}</text></g>')
    for side in ("←", "→"):
        names = [n for n, s, _ in beyond if s == side]
        if names:
            text = ("GPUs: " + ", ".join(names) + " →") if side == "→" else \
                ("← GPUs: " + ", ".join(names))
            tip = "; ".join(w for _, s, w in beyond if s == side)
            x, anchor = (_W - _R, "end") if side == "→" else (_L, "start")
            out.append(f'<g class="ioe-gpu"><title>{html.escape(tip)}</title>'
                       f'<text x="{x}" y="13" text-anchor="{anchor}">{html.escape(text)}'
                       '</text></g>')
    return "".join(out)


def _grid(dom) -> list[str]:
    """The decade ticks and the grid of a picture's log-log axes ``dom`` (the static
    explorers' pictures against ``M`` share them)."""
    x0, x1, y0, y1 = dom
    bottom, right = _H - _B, _W - _R
    out = []
    for e in range(math.ceil(x0 - 1e-9), math.floor(x1 + 1e-9) + 1):
        x = _px(dom, 10 ** e)
        out.append(f'<line x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" stroke="#eee"/>'
                   f'<line x1="{x}" y1="{bottom}" x2="{x}" y2="{bottom + 5}" stroke="#333"/>'
                   f'<text x="{x}" y="{bottom + 17}" text-anchor="middle">'
                   f'10{str(e).translate(_SUP)}</text>')
    for e in range(int(y0), int(y1) + 1):
        y = _px(dom, 10 ** x0, 10 ** e)[1]
        out.append(f'<line x1="{_L}" y1="{y}" x2="{right}" y2="{y}" stroke="#eee"/>'
                   f'<line x1="{_L - 5}" y1="{y}" x2="{_L}" y2="{y}" stroke="#333"/>'
                   f'<text x="{_L - 7}" y="{y + 4}" text-anchor="end">'
                   f'10{str(e).translate(_SUP)}</text>')
    return out


def _frame(N: int, d: int, dom, shown: bool) -> str:
    """The static parts of one ``(N, d)``'s picture, shared by both passes and masks: ticks,
    grid (:func:`_grid`), the line at ``M = d^2`` (labelled) and the marks of real GPUs."""
    bottom = _H - _B
    out = _grid(dom)
    d2 = d * d
    x = _px(dom, d2)
    text = f"d² = {_commas(d2)}"
    tx, anchor = _side(x, text)
    out.append(f'<line class="ioe-d2" x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" stroke="#000" '
               f'stroke-opacity="0.6"/><text class="ioe-label" x="{tx}" y="{_T + 13}" '
               f'text-anchor="{anchor}" {_HALO}>{text}</text>')
    out.append(_gpu_marks(dom))
    display = "" if shown else ' display="none"'
    return (f'<g class="ioe-frame" data-n="{N}" data-d="{d}"{display}>{"".join(out)}</g>')


def _cross(data: dict, dom, shown: bool) -> str:
    """The lines at the exact crossovers of one picture (one ``N``, ``d``, pass and mask):
    dotted at each change of the cheapest, dashed and labelled at the ``M`` from which
    FlashAttention stays the cheapest (:func:`flash_from`)."""
    bottom = _H - _B
    out = []
    last = flash_from(data)
    for c in data["crossovers"]:
        x = _px(dom, c["M"])
        tip = (f'<title>crossover at M = {_commas(c["M"])}: {TITLES.get(c["before"], "none")} '
               f'→ {TITLES.get(c["after"], "none")}</title>')
        if c["M"] == last and c is data["crossovers"][-1]:
            first, second = "FlashAttention cheapest", f"from M = {_commas(last)}"
            tx, anchor = _side(x, first)
            out.append(f'<line class="ioe-flash" x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" '
                       f'stroke-width="1.6" stroke-dasharray="6 3">{tip}</line>'
                       f'<text class="ioe-label" x="{tx}" y="{_T + 28}" text-anchor="{anchor}" '
                       f'fill="#1a6e1a" {_HALO}>{first}<tspan x="{tx}" dy="13">{second}'
                       '</tspan></text>')
        else:
            out.append(f'<line x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" '
                       f'stroke-dasharray="2 3">{tip}</line>')
    display = "" if shown else ' display="none"'
    return (f'<g class="ioe-cross" data-n="{data["N"]}" data-d="{data["d"]}" '
            f'data-pass="{"backward" if data["backward"] else "forward"}" '
            f'data-mask="{"causal" if data.get("causal") else "none"}"{display} '
            f'stroke="{CROSS_COLOUR}">{"".join(out)}</g>')


def _points(data, dom, values) -> str:
    return " ".join("{},{}".format(*_px(dom, M, t)) for M, t in zip(data["Ms"], values)
                    if t is not None and t > 0)


#: The panel "across P processors" (CSS pixels at its natural size, as the main picture).
_PW, _PH = _W, 240                 # as wide as the picture: _side serves both
_PL, _PR, _PT, _PB = _L, _R, 24, 38
#: Each algorithm's line in the panel: colour, width, dashes. Ring and striped attention move
#: the same words, so striped attention is dashed over the ring's wider line.
PARALLEL_STYLE = {n: (_PSTYLE[n]["color"], width, dash) for n, width, dash in
                  (("ring", 3.5, None), ("striped", 1.6, "5 4"), ("all_to_all", 2, None),
                   ("grid", 2, None), ("zigzag", 1.6, "2 5"), ("all_gather", 2, None),
                   ("usp", 3, None), ("usp_zigzag", 1.6, "5 4"), ("usp_grid", 2, None))}


def _pspan(Ps) -> float:
    return math.log2(max(Ps)) or 1.0


def _ppx(Ps, P) -> float:
    """The x of ``P`` in the panel (log2 scale; the script uses the same formula)."""
    return _tenth(_PL + math.log2(P) / _pspan(Ps) * (_PW - _PL - _PR))


def _ppy(dom, v) -> float:
    return _tenth(_PT + (dom[1] - math.log10(v)) / (dom[1] - dom[0]) * (_PH - _PT - _PB))


def _pdomain(*cs: dict) -> list[int]:
    """``[y0, y1]``: the decades around every word count drawn in the panels ``cs`` (the
    traffic of both passes and the dense bound; the causal bound, much smaller at ``P = 2``,
    is clipped at the bottom); ``[0, 1]`` where nothing moves (``P = 1`` alone)."""
    ys = [v for c in cs for n in c["names"] for v in c["traffic"][n] if v]
    ys += [v for c in cs if not c["causal"] for v in c["bound"] if v]
    ys = ys or [1]
    lo, hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    return [lo, hi if hi > lo else lo + 1]


def _ppoints(Ps, dom, values) -> str:
    return " ".join(f"{_ppx(Ps, P)},{_ppy(dom, v)}" for P, v in zip(Ps, values) if v)


def _pframe(Ps, dom, k: int, shown: bool) -> str:
    """The ticks and grid of the panel's y range ``dom`` (the ``k``-th distinct one)."""
    out = []
    for e in range(dom[0], dom[1] + 1):
        y = _ppy(dom, 10 ** e)
        out.append(f'<line x1="{_PL}" y1="{y}" x2="{_PW - _PR}" y2="{y}" stroke="#eee"/>'
                   f'<line x1="{_PL - 5}" y1="{y}" x2="{_PL}" y2="{y}" stroke="#333"/>'
                   f'<text x="{_PL - 7}" y="{_tenth(y + 4)}" text-anchor="end">'
                   f'10{str(e).translate(_SUP)}</text>')
    display = "" if shown else ' display="none"'
    return f'<g class="iop-frame" data-k="{k}"{display}>{"".join(out)}</g>'


def _panel_svg(c: dict, t: int, dom, frames: str, uid: str) -> str:
    """The panel "across P processors" of ``c`` (from :func:`across`) at ``Ps[t]``: the busiest
    processor's words against ``P`` (log-log) for each algorithm, the lower bound dashed, a
    line at ``Ps[t]`` with a circle on each curve."""
    Ps, bottom = c["Ps"], _PH - _PB
    ticks = "".join(
        f'<line x1="{_ppx(Ps, P)}" y1="{_PT}" x2="{_ppx(Ps, P)}" y2="{bottom}" stroke="#f4f4f4"/>'
        f'<line x1="{_ppx(Ps, P)}" y1="{bottom}" x2="{_ppx(Ps, P)}" y2="{bottom + 5}" '
        f'stroke="#333"/><text x="{_ppx(Ps, P)}" y="{bottom + 17}" text-anchor="middle">{P}'
        '</text>' for P in Ps)
    lines, marks = [], []
    P = Ps[t]
    x = _ppx(Ps, P)
    for n in c["names"]:
        colour, width, dash = PARALLEL_STYLE.get(n, (OTHER_COLOUR, 2, None))
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        lines.append(f'<polyline class="iop-curve" data-name="{n}" '
                     f'points="{_ppoints(Ps, dom, c["traffic"][n])}" fill="none" '
                     f'stroke="{colour}" stroke-width="{width}"{dashes}/>')
        v = c["traffic"][n][t]
        cy = _ppy(dom, v) if v else 0
        marks.append(f'<circle class="iop-marker" data-name="{n}" cx="{x}" cy="{cy}" '
                     f'r="{6 if n == "ring" else 4}" fill="{colour}" stroke="#fff" '
                     f'stroke-width="1.5" visibility="{"visible" if v else "hidden"}"/>')
    label = f"P = {P}"
    lx, anchor = _side(x, label)
    clip = f"{uid}-pclip"
    return (
        f'<svg class="iop-svg" viewBox="0 0 {_PW} {_PH}" width="{_PW}" height="{_PH}" role="img" '
        'aria-label="words moved by the busiest processor against the number of processors P, '
        'log-log, for each parallel algorithm, with the lower bound" font-family="sans-serif" '
        f'font-size="{_FONT}" fill="#222" style="width:100%;max-width:540px;height:auto;'
        'display:block;background:#fff">'
        f'<clipPath id="{clip}"><rect x="{_PL}" y="{_PT}" width="{_PW - _PL - _PR}" '
        f'height="{bottom - _PT}"/></clipPath>{frames}{ticks}'
        f'<rect x="{_PL}" y="{_PT}" width="{_PW - _PL - _PR}" height="{bottom - _PT}" '
        'fill="none" stroke="#333"/>'
        f'<line class="iop-now" x1="{x}" y1="{_PT}" x2="{x}" y2="{bottom}" '
        f'stroke="{NOW_COLOUR}" stroke-width="2"/>'
        f'<g clip-path="url(#{clip})"><polyline class="iop-bound" '
        f'points="{_ppoints(Ps, dom, c["bound"])}" fill="none" stroke="#000" '
        f'stroke-width="1.2" stroke-dasharray="5 3"/>{"".join(lines)}</g>{"".join(marks)}'
        f'<text class="iop-now-label" x="{lx}" y="{_PT - 7}" text-anchor="{anchor}" '
        f'fill="#8a5d00" font-weight="bold" {_HALO}>{label}</text>'
        f'<text x="{(_PL + _PW - _PR) / 2}" y="{_PH - 4}" text-anchor="middle">processors P'
        f'</text><text transform="translate(13 {(_PT + bottom) / 2}) rotate(-90)" '
        'text-anchor="middle">words (busiest processor)</text></svg>')


def _plegend(c: dict) -> str:
    items = []
    for k, n in enumerate(c["names"]):
        colour, width, dash = PARALLEL_STYLE.get(n, (OTHER_COLOUR, 2, None))
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        same = [m for m in c["names"][:k] if c["traffic"][m] == c["traffic"][n]]
        text = c["titles"][n] + (f" (the words of {c['titles'][same[0]]})" if same else "")
        items.append((f'<line x1="1" y1="7" x2="27" y2="7" stroke="{colour}" '
                      f'stroke-width="{width}"{dashes}/>', text))
    items += [('<line x1="1" y1="7" x2="27" y2="7" stroke="#000" stroke-dasharray="5 3"/>',
               "lower bound on the words received, whatever the memory"),
              (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{NOW_COLOUR}" stroke-width="2"/>',
               "the P of the slider")]
    return "".join(
        '<span style="display:inline-flex;gap:0.35em;align-items:center;margin:0 1em 0.2em 0">'
        f'{_swatch(svg)}<span>{html.escape(text)}</span></span>' for svg, text in items)


def parallel_panel(c: dict, t: int, uid: str = "ioattn-across") -> str:
    """The panel "across P processors" as HTML (:func:`ioattn.widgets.parallel_explorer`
    shows it): the title, the picture (an inline SVG, as in :func:`static_parallel_explorer`),
    :func:`parallel_words` and :func:`parallel_readout` of ``c`` (from :func:`across`) at
    ``Ps[t]``, and the legend folded in a ``<details>``."""
    dom = _pdomain(c)
    frames = _pframe(c["Ps"], dom, 0, True)
    return (f'<div class="iop-panel" id="{uid}">' + _panel_parts(c, t, dom, frames, uid, "")
            + "</div>")


def _panel_parts(c: dict, t: int, dom, frames: str, uid: str, controls: str) -> str:
    """Title, picture, ``controls`` directly under it, the readout, and the legend folded in
    a ``<details>`` (under the readout, so that on a phone the controls stay next to the
    picture)."""
    return (
        '<div class="iop-title" style="font-family:sans-serif;font-weight:bold;margin:0.2em 0">'
        f'{html.escape(parallel_title(c["N"], c["d"], c["heads"], c["backward"], c["causal"]))}'
        f'</div>{_panel_svg(c, t, dom, frames, uid)}{controls}'
        '<div class="iop-readout" aria-live="polite" style="margin-top:0.4em">'
        '<div class="iop-words" style="font-family:sans-serif;font-size:1em;font-weight:bold">'
        f'{html.escape(parallel_words(c, t), quote=False)}</div>'
        '<div class="iop-numbers" style="font-family:monospace;font-size:0.85em;'
        f'overflow-wrap:anywhere">{html.escape(parallel_readout(c, t), quote=False)}</div></div>'
        + _details("iop-legend", _plegend(c)))


def _details(cls: str, inner: str) -> str:
    """A legend folded under a "Legend" summary (opened by the script on a wide screen)."""
    return (f'<details class="{cls}" style="font-family:sans-serif;font-size:0.85em;'
            'margin:0.4em 0 0.5em;line-height:1.4"><summary style="cursor:pointer;'
            f'min-height:40px;line-height:40px">Legend</summary><div>{inner}</div></details>')


#: The static explorer's cache sizes run to ``STATIC_HI d^2`` by default (:func:`static_Ms`):
#: FlashAttention is the cheapest there in every picture the book draws, and the exact
#: crossovers, which cost every integer ``M`` of the range, stay quick to compute.
STATIC_HI = 4

#: The pictures of the static explorer, by pass and mask, as the JSON names them.
KINDS = {(False, False): "forward", (True, False): "backward", (False, True): "causal",
         (True, True): "causal_backward"}


#: Helpers of both scripts: thousands separators, tenths of a pixel, :func:`ratio_text`, and
#: the handlers of the step and choice buttons.
_HELPERS = """  function commas(n) { return String(n).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ","); }
  function tenth(v) { return Math.round(10 * v) / 10; }
  function ratio(a, b) {            /* ioattn.explorer.ratio_text, on BigInt */
    var A = BigInt(a), Bq = BigInt(b), p = A < 10n * Bq ? 2 : A < 100n * Bq ? 1 : 0, s, r;
    for (;;) {
      s = 10n ** BigInt(p);
      r = (2n * A * s + Bq) / (2n * Bq);
      if (A === Bq || r !== s || p >= 9) break;
      p++;
    }
    var t = r.toString();
    if (p > 0) {
      while (t.length < p + 1) t = "0" + t;
      t = t.slice(0, t.length - p) + "." + t.slice(t.length - p);
    }
    return t + "\\u00d7";
  }
  /* the buttons - and + move slider s by one step; buttons bs set state[what] (each script
     has its own state and show) */
  function step(by, s) { return function () { s.value = String(+s.value + by); show(); }; }
  function choose(bs, what) {
    for (var b = 0; b < bs.length; b++)
      (function (el) {
        el.addEventListener("click", function () {
          state[what] = el.getAttribute("data-value");
          show();
        });
      })(bs[b]);
  }
"""


_SCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var D = JSON.parse(root.querySelector("script.ioe-data").textContent);
  var W = %(W)d, H = %(H)d, L = %(L)d, R = %(R)d, T = %(T)d, B = %(B)d, CHAR = %(CHAR)s;
  function q(s) { return root.querySelector(s); }
  function qa(s) { return root.querySelectorAll(s); }
  var sM = q("input.ioe-M"), sd = q("input.ioe-d"), sN = q("input.ioe-N");
  var passB = qa("button.ioe-pass"), maskB = qa("button.ioe-mask");
  var outM = q(".ioe-Mvalue"), outd = q(".ioe-dvalue"), outN = q(".ioe-Nvalue");
  var outWords = q(".ioe-words"), outNumbers = q(".ioe-numbers");
  var now = q("line.ioe-now"), nowText = q("text.ioe-now-label"), title = q(".ioe-title");
  var lower = q("polyline.ioe-lower"), lowerAny = q("polyline.ioe-lower-any");
  var frames = qa("g.ioe-frame"), cross = qa("g.ioe-cross");
  var lines = {}, marks = {}, i;
  var ls = qa("polyline.ioe-curve"), ms = qa("circle.ioe-marker");
  for (i = 0; i < ls.length; i++) lines[ls[i].getAttribute("data-name")] = ls[i];
  for (i = 0; i < ms.length; i++) marks[ms[i].getAttribute("data-name")] = ms[i];
  function pressed(bs) {
    for (var b = 0; b < bs.length; b++)
      if (bs[b].getAttribute("aria-pressed") === "true") return bs[b].getAttribute("data-value");
    return bs[0].getAttribute("data-value");
  }
  var state = {pass: pressed(passB), mask: pressed(maskB)};
  /* the legend: folded on a narrow screen (under the controls), open on a wide one */
  var legend = q("details.ioe-legend");
  if (legend && typeof window !== "undefined" && window.matchMedia &&
      window.matchMedia("(min-width: 720px)").matches) legend.open = true;
%(helpers)s  function px(dom, M) {
    return tenth(L + (Math.log10(M) - dom[0]) / (dom[1] - dom[0]) * (W - L - R));
  }
  function py(dom, y) {
    return tenth(T + (dom[3] - Math.log10(y)) / (dom[3] - dom[2]) * (H - T - B));
  }
  function points(c, Ms, values) {
    var p = [];
    for (var k = 0; k < Ms.length; k++)
      if (values[k] !== null && values[k] > 0)
        p.push(px(c.dom, Ms[k]) + "," + py(c.dom, values[k]));
    return p.join(" ");
  }
  function ranked(c, k) {
    var run = [], cannot = [];
    for (var j = 0; j < D.names.length; j++) {
      var n = D.names[j], t = c.totals[n][k];
      if (t === null) cannot.push(n); else run.push([t, j, n]);
    }
    run.sort(function (x, y) { return x[0] - y[0] || x[1] - y[1]; });
    return [run, cannot];
  }
  function words(c, M, k) {          /* ioattn.explorer.words */
    var T_ = D.titles, rc = ranked(c, k), run = rc[0], cannot = rc[1];
    var text = "At M = " + commas(M) + ": ";
    if (!run.length) text += "no algorithm can run";
    else {
      var tb = run[0][0], best = run[0][2];
      if (run.length === 1) text += "only " + T_[best] + " can run; it moves " + commas(tb) +
        " entries";
      else {
        var parts = [];
        for (var j = 1; j < run.length; j++)
          parts.push(T_[run[j][2]] + (j === 1 ? " moves" : "") +
                     (run[j][0] === tb ? "" : " " + ratio(run[j][0], tb)) +
                     (j === 1 ? " as many entries as " + T_[best] : " as many"));
        text += T_[best] + " moves the fewest entries; " + parts.join(" and ");
      }
      if (c.lower[k]) text += "; " + T_[best] + " moves " + ratio(tb, c.lower[k]) +
        " as many as the lower bound";
    }
    for (j = 0; j < cannot.length; j++)
      text += "; " + T_[cannot[j]] + " cannot run (it needs M \\u2265 " +
        commas(c.min_M[cannot[j]]) + ")";
    return text + ".";
  }
  function numbers(c, N, d, M, k, tags) {     /* ioattn.explorer.readout */
    var run = ranked(c, k)[0], parts = [];
    for (var j = 0; j < D.names.length; j++) {
      var n = D.names[j], t = c.totals[n][k];
      parts.push(D.titles[n] + " " + (t !== null ? commas(t) :
        "cannot run (needs M \\u2265 " + commas(c.min_M[n]) + ")"));
    }
    parts.push("lower bound " + commas(c.lower[k]));
    return "N = " + commas(N) + ", d = " + d + ", M = " + commas(M) +
      (tags.length ? " (" + tags.join(", ") + ")" : "") + ": cheapest " +
      (run.length ? D.titles[run[0][2]] : "none") + ". " + parts.join("; ");
  }
  function clamp(s, n) {
    var v = Math.max(0, Math.min(n - 1, Math.round(+s.value)));
    s.value = String(v);
    return v;
  }
  function nearest(Ms, M) {          /* the cache size of Ms nearest to M (in log) */
    var best = 0;
    for (var x = 1; x < Ms.length; x++)
      if (Math.abs(Math.log(Ms[x] / M)) < Math.abs(Math.log(Ms[best] / M))) best = x;
    return best;
  }
  var shown = "", lastJ = -1, lastM = 0;
  function show() {
    var back = state.pass === "backward", causal = state.mask === "causal";
    var i = clamp(sN, D.Ns.length), j = clamp(sd, D.ds.length);
    /* a new d keeps M in entries (the axis is M itself): the nearest of its cache sizes */
    if (lastJ >= 0 && j !== lastJ) sM.value = String(nearest(D.Ms[j], lastM));
    var k = clamp(sM, D.Ms[j].length);
    var kind = causal ? (back ? "causal_backward" : "causal") : (back ? "backward" : "forward");
    var c = D[kind][i][j], N = D.Ns[i], d = D.ds[j], Ms = D.Ms[j], M = Ms[k];
    sM.max = String(Ms.length - 1);
    lastJ = j; lastM = M;
    var key = i + " " + j + " " + kind;
    if (key !== shown) {
      shown = key;
      for (var f = 0; f < frames.length; f++)
        frames[f].setAttribute("display", +frames[f].getAttribute("data-n") === N &&
                               +frames[f].getAttribute("data-d") === d ? "inline" : "none");
      for (f = 0; f < cross.length; f++)
        cross[f].setAttribute("display", +cross[f].getAttribute("data-n") === N &&
                              +cross[f].getAttribute("data-d") === d &&
                              cross[f].getAttribute("data-pass") === state.pass &&
                              cross[f].getAttribute("data-mask") === state.mask ?
                              "inline" : "none");
      for (var n in lines) lines[n].setAttribute("points", points(c, Ms, c.totals[n]));
      lower.setAttribute("points", points(c, Ms, c.lower));
      lowerAny.setAttribute("points", points(c, Ms, c.lower_any));
      var what = back ? (causal ? "the causal attention backward pass" :
        "the attention backward pass") : (causal ? "causal attention" : "attention");
      title.textContent = "Exact I/O of " + what + ", N = " + commas(N) + ", d = " + d;
      for (f = 0; f < passB.length; f++)
        passB[f].setAttribute("aria-pressed",
                              String(passB[f].getAttribute("data-value") === state.pass));
      for (f = 0; f < maskB.length; f++)
        maskB[f].setAttribute("aria-pressed",
                              String(maskB[f].getAttribute("data-value") === state.mask));
    }
    var x = px(c.dom, M);
    now.setAttribute("x1", x); now.setAttribute("x2", x);
    var label = "M = " + commas(M), right = x + 4 + CHAR * label.length > W - R;
    nowText.setAttribute("x", tenth(right ? x - 4 : x + 4));
    nowText.setAttribute("text-anchor", right ? "end" : "start");
    nowText.textContent = label;
    for (var q2 = 0; q2 < D.names.length; q2++) {
      var name = D.names[q2], t = c.totals[name][k], m = marks[name];
      if (t !== null) {
        m.setAttribute("cx", x); m.setAttribute("cy", py(c.dom, t));
        m.setAttribute("visibility", "visible");
      } else {
        m.setAttribute("visibility", "hidden");
      }
    }
    outM.textContent = D.mlabels[j][k];
    outd.textContent = "d = " + d;
    outN.textContent = "N = " + commas(N);
    var tags = (back ? ["backward pass"] : []).concat(causal ? ["causal mask"] : []);
    outWords.textContent = words(c, M, k);
    outNumbers.textContent = numbers(c, N, d, M, k, tags);
  }
  sM.addEventListener("input", show);
  sd.addEventListener("input", show);
  sN.addEventListener("input", show);
  q("button.ioe-less").addEventListener("click", step(-1, sM));
  q("button.ioe-more").addEventListener("click", step(1, sM));
  choose(passB, "pass");
  choose(maskB, "mask");
  show();
})();"""


def _json_in_html(obj) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


#: What the JSON keeps of each :func:`curves` picture (the rest is shared, see
#: :func:`static_explorer`).
_KEPT = ("totals", "lower", "lower_any", "min_M", "dom")


def picture(payload: dict, kind: str, i: int, j: int) -> dict:
    """The picture of a static explorer's JSON ``payload`` for ``Ns[i]``, ``ds[j]`` and ``kind``
    (a value of :data:`KINDS`), as a dict that :func:`readout` and :func:`words` read: what
    :func:`curves` gives, without ``labels``, ``cheapest`` and ``crossovers``."""
    c = dict(payload[kind][i][j])
    backward, causal = next(b for b, k in KINDS.items() if k == kind)
    c.update(N=payload["Ns"][i], d=payload["ds"][j], Ms=payload["Ms"][j],
             names=payload["names"], titles=payload["titles"], backward=backward, causal=causal)
    return c


_TOUCH = "min-height:40px;min-width:44px"


def _buttons(cls: str, values, chosen: str, tips: dict) -> str:
    return "".join(
        f'<button type="button" class="{cls}" data-value="{v}" '
        f'aria-pressed="{"true" if v == chosen else "false"}" title="{html.escape(tips[v])}" '
        f'style="{_TOUCH};padding:0 0.8em">{v}</button>' for v in values)


def _swatch(inner: str) -> str:
    return (f'<svg width="28" height="14" viewBox="0 0 28 14" aria-hidden="true" '
            f'style="flex:none">{inner}</svg>')


def _legend(c: dict, names, options: dict) -> str:
    """The legend, in HTML under the picture (it wraps on a narrow screen)."""
    items = []
    for n in names:
        colour = STYLE.get(n, {}).get("color", OTHER_COLOUR)
        items.append((f'<line x1="1" y1="7" x2="27" y2="7" stroke="{colour}" stroke-width="2"/>'
                      f'<circle cx="14" cy="7" r="4" fill="{colour}"/>',
                      plot_label(n, **options.get(n, {}))))
    items += [
        ('<line x1="1" y1="7" x2="27" y2="7" stroke="#000" stroke-dasharray="5 3"/>',
         "lower bound for programs (standard matrix products; sparse with a mask)"),
        ('<line x1="1" y1="7" x2="27" y2="7" stroke="#000" stroke-dasharray="1 3"/>',
         "lower bound for any matrix multiplication (dense only)"),
        ('<line x1="14" y1="0" x2="14" y2="14" stroke="#000" stroke-opacity="0.6"/>',
         "M = d²"),
        (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{CROSS_COLOUR}" stroke-width="1.6" '
         'stroke-dasharray="4 2"/>', "from here on FlashAttention is the cheapest"),
        (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{CROSS_COLOUR}" '
         'stroke-dasharray="2 2"/>', "another change of the cheapest"),
        (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{NOW_COLOUR}" stroke-width="2"/>',
         "the M of the slider"),
        ('<path d="M9 2L19 2L14 11Z" fill="#444"/>',
         "on-chip memory of one SM of a GPU (shared memory + registers) in fp16 entries: "
         + "; ".join(f"{names} {_commas(M)}" for names, M in gpus.marks())),
    ]
    return "".join(
        '<span style="display:inline-flex;gap:0.35em;align-items:center;margin:0 1em 0.2em 0">'
        f'{_swatch(svg)}<span>{html.escape(text)}</span></span>' for svg, text in items)


def _four(block) -> dict:
    """The four pictures (:data:`KINDS`) of one ``(N, d)``, sharing their axes (``dom``; the
    M axis ``axis`` is every ``d``'s)."""
    N, d, Ms, names, options, axis = block
    four = {kind: curves(N, d, Ms, names, options, backward=bk, causal=ck)
            for (bk, ck), kind in KINDS.items()}
    dom = _domain(*four.values(), axis=axis)
    for p in four.values():
        p["dom"] = dom
    return four


def _across_block(N: int, d: int, Ps, heads: int, names) -> dict:
    """What the static explorer keeps of the panel of one ``(N, d)``: per pass, the
    ``traffic``, ``received`` and ``memory`` of :func:`across` (only the algorithms that have
    that pass); per mask, the ``bound``; and ``dom``, the y range (:func:`_pdomain`)."""
    from .parallel import bounds as pbounds

    out, cs = {}, []
    for backward in (False, True):
        c = across(N, d, Ps, heads=heads, backward=backward, names=names)
        cs.append(c)
        keep = [n for n in c["names"] if any(v is not None for v in c["traffic"][n])]
        out["backward" if backward else "forward"] = {
            key: {n: c[key][n] for n in keep} for key in ("traffic", "received", "memory")}
    out["bound"] = {"none": cs[0]["bound"], "causal": [
        math.floor(pbounds.memory_independent(N, d, P, heads=heads, causal=True)) for P in Ps]}
    out["dom"] = _pdomain(*cs)
    return out


def parallel_picture(payload: dict, kind: str, i: int, j: int) -> dict:
    """The panel "across P processors" of a static panel's JSON ``payload``
    (:func:`static_parallel_explorer`) for ``Ns[i]``,
    ``ds[j]`` and ``kind`` (a value of :data:`KINDS`), as :func:`across` gives it (what
    :func:`parallel_words` and :func:`parallel_readout` read)."""
    from .parallel.table import why_not

    par, block = payload["par"], payload["par"]["nd"][i][j]
    backward, causal = next(b for b, k in KINDS.items() if k == kind)
    side = block["backward" if backward else "forward"]
    N, Ps, names = payload["Ns"][i], par["Ps"], par["names"]
    none = [None] * len(Ps)
    c = {"N": N, "d": payload["ds"][j], "heads": par["heads"], "Ps": Ps, "backward": backward,
         "causal": causal, "names": names, "titles": par["titles"]}
    for key in ("traffic", "received", "memory"):
        c[key] = {n: side[key].get(n, none) for n in names}
    c["why"] = {n: [why_not(n, N, P, par["heads"], backward) for P in Ps] for n in names}
    c["bound"] = block["bound"]["causal" if causal else "none"]
    return c


_PSCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var D = JSON.parse(root.querySelector("script.iop-data").textContent), PD = D.par;
  var PW = %(PW)d, PH = %(PH)d, PL = %(PL)d, PR = %(PR)d, PT = %(PT)d, PB = %(PB)d;
  var CHAR = %(CHAR)s;
  function q(s) { return root.querySelector(s); }
  function qa(s) { return root.querySelectorAll(s); }
  var sP = q("input.iop-P"), sN = q("input.iop-N"), sd = q("input.iop-d");
  var passB = qa("button.iop-pass"), maskB = qa("button.iop-mask");
  var outP = q(".iop-Pvalue"), outN = q(".iop-Nvalue"), outd = q(".iop-dvalue");
  var pTitle = q(".iop-title"), pWords = q(".iop-words"), pNumbers = q(".iop-numbers");
  var pBound = q("polyline.iop-bound"), pNow = q("line.iop-now");
  var pNowText = q("text.iop-now-label"), pFrames = qa("g.iop-frame");
  var pLines = {}, pMarks = {}, i, pls = qa("polyline.iop-curve"), pms = qa("circle.iop-marker");
  for (i = 0; i < pls.length; i++) pLines[pls[i].getAttribute("data-name")] = pls[i];
  for (i = 0; i < pms.length; i++) pMarks[pms[i].getAttribute("data-name")] = pms[i];
  var legend = q("details.iop-legend");
  if (legend && typeof window !== "undefined" && window.matchMedia &&
      window.matchMedia("(min-width: 720px)").matches) legend.open = true;
  function pressed(bs) {
    for (var b = 0; b < bs.length; b++)
      if (bs[b].getAttribute("aria-pressed") === "true") return bs[b].getAttribute("data-value");
    return bs[0].getAttribute("data-value");
  }
  var state = {pass: pressed(passB), mask: pressed(maskB)};
  var PSPAN = Math.log2(PD.Ps[PD.Ps.length - 1]) || 1;
%(helpers)s  function ppx(P) { return tenth(PL + Math.log2(P) / PSPAN * (PW - PL - PR)); }
  function ppy(dom, v) {
    return tenth(PT + (dom[1] - Math.log10(v)) / (dom[1] - dom[0]) * (PH - PT - PB));
  }
  function ppoints(dom, values) {
    var p = [];
    if (!values) return "";
    for (var k = 0; k < PD.Ps.length; k++)
      if (values[k]) p.push(ppx(PD.Ps[k]) + "," + ppy(dom, values[k]));
    return p.join(" ");
  }
  function pval(side, key, n, t) { return side[key][n] ? side[key][n][t] : null; }
  function and(xs) {
    return xs.length === 1 ? xs[0] : xs.slice(0, -1).join(", ") + " and " + xs[xs.length - 1];
  }
  function pwhy(n, N, P, back) {     /* ioattn.parallel.table.why_not */
    if (N < P) return "needs N \\u2265 P";
    if (back && PD.backward_names.indexOf(n) < 0) return "no backward pass";
    if (n === "all_to_all" && PD.heads < P) return "needs H \\u2265 P";
    return null;
  }
  var WHY = [["no backward pass", "has no backward pass here", "have no backward pass here"],
             ["needs H \\u2265 P", "needs H \\u2265 P (H = " + PD.heads + ")",
              "need H \\u2265 P (H = " + PD.heads + ")"],
             ["needs N \\u2265 P", "needs N \\u2265 P", "need N \\u2265 P"]];
  function pwords(side, bound, t, N, back) {     /* ioattn.explorer.parallel_words */
    var P = PD.Ps[t], T_ = PD.titles, names = PD.names, best = null, tb = 0, mb = 0, j, n, v;
    if (P === 1)
      return "On P = 1 processor there is nothing to communicate: no algorithm moves a word.";
    for (j = 0; j < names.length; j++) {
      n = names[j]; v = pval(side, "traffic", n, t);
      if (v === null) continue;
      var m = pval(side, "memory", n, t);
      if (best === null || v < tb || (v === tb && m < mb)) { best = n; tb = v; mb = m; }
    }
    var ties = [];
    for (j = 0; j < names.length; j++)
      if (names[j] !== best && pval(side, "traffic", names[j], t) === tb) ties.push(T_[names[j]]);
    var text = "At P = " + P + ": " + T_[best] + " moves the fewest words, " + commas(tb) +
      " on the busiest processor";
    if (ties.length) text += ", as " + and(ties) + (ties.length > 1 ? " do" : " does");
    var rt = side.traffic.ring[t], rm = side.memory.ring[t];
    if (rt !== tb) text += "; " + T_.ring + " moves " + ratio(rt, tb) + " as many";
    if (best === "ring") text += "; " + T_[best] + " holds " + commas(mb) + " words per processor";
    else text += "; " + T_[best] + " holds " + ratio(mb, rm) +
      " as much memory per processor as " + T_.ring + " (" + commas(mb) + " words against " +
      commas(rm) + ")";
    if (bound[t]) text += " and receives " + ratio(side.received[best][t], bound[t]) +
      " as many words as the lower bound on the words received";
    for (var w = 0; w < WHY.length; w++) {
      var out = [];
      for (j = 0; j < names.length; j++)
        if (pwhy(names[j], N, P, back) === WHY[w][0]) out.push(T_[names[j]]);
      if (out.length) text += "; " + and(out) + " " + (out.length === 1 ? WHY[w][1] : WHY[w][2]);
    }
    return text + ".";
  }
  function pnumbers(side, bound, t, N, d, tags) {     /* ioattn.explorer.parallel_readout */
    var parts = [];
    for (var j = 0; j < PD.names.length; j++) {
      var n = PD.names[j], v = pval(side, "traffic", n, t);
      parts.push(PD.titles[n] + " " + (v === null ? "\\u2014" : commas(v)));
    }
    return "N = " + commas(N) + ", d = " + d + ", H = " + PD.heads + ", P = " + PD.Ps[t] +
      (tags.length ? " (" + tags.join(", ") + ")" : "") +
      ": words moved by the busiest processor: " + parts.join("; ") +
      "; lower bound on the words received " + commas(bound[t]);
  }
  function clamp(s, n) {
    var v = Math.max(0, Math.min(n - 1, Math.round(+s.value)));
    s.value = String(v);
    return v;
  }
  function show() {
    var back = state.pass === "backward", causal = state.mask === "causal";
    var i = clamp(sN, D.Ns.length), j = clamp(sd, D.ds.length), N = D.Ns[i], d = D.ds[j];
    var cp = PD.nd[i][j], side = cp[state.pass], bound = cp.bound[state.mask];
    var pdom = PD.doms[cp.dom], tp = clamp(sP, PD.Ps.length), P = PD.Ps[tp], f, n;
    var what = back ? (causal ? "the causal attention backward pass" :
      "the attention backward pass") : (causal ? "causal attention" : "attention");
    pTitle.textContent = "Across P processors: " + what + ", H = " + PD.heads + ", N = " +
      commas(N) + ", d = " + d;
    for (f = 0; f < pFrames.length; f++)
      pFrames[f].setAttribute("display", +pFrames[f].getAttribute("data-k") === cp.dom ?
                              "inline" : "none");
    for (n in pLines) pLines[n].setAttribute("points", ppoints(pdom, side.traffic[n]));
    pBound.setAttribute("points", ppoints(pdom, bound));
    for (f = 0; f < passB.length; f++)
      passB[f].setAttribute("aria-pressed",
                            String(passB[f].getAttribute("data-value") === state.pass));
    for (f = 0; f < maskB.length; f++)
      maskB[f].setAttribute("aria-pressed",
                            String(maskB[f].getAttribute("data-value") === state.mask));
    var xP = ppx(P), pl = "P = " + P, pright = xP + 4 + CHAR * pl.length > PW - PR;
    pNow.setAttribute("x1", xP); pNow.setAttribute("x2", xP);
    pNowText.setAttribute("x", tenth(pright ? xP - 4 : xP + 4));
    pNowText.setAttribute("text-anchor", pright ? "end" : "start");
    pNowText.textContent = pl;
    for (var q2 = 0; q2 < PD.names.length; q2++) {
      var pn = PD.names[q2], pv = pval(side, "traffic", pn, tp);
      if (pv) {
        pMarks[pn].setAttribute("cx", xP); pMarks[pn].setAttribute("cy", ppy(pdom, pv));
        pMarks[pn].setAttribute("visibility", "visible");
      } else {
        pMarks[pn].setAttribute("visibility", "hidden");
      }
    }
    var tags = (back ? ["backward pass"] : []).concat(causal ? ["causal mask"] : []);
    outP.textContent = pl;
    outN.textContent = "N = " + commas(N);
    outd.textContent = "d = " + d;
    pWords.textContent = pwords(side, bound, tp, N, back);
    pNumbers.textContent = pnumbers(side, bound, tp, N, d, tags);
  }
  sP.addEventListener("input", show);
  sN.addEventListener("input", show);
  sd.addEventListener("input", show);
  q("button.iop-less").addEventListener("click", step(-1, sP));
  q("button.iop-more").addEventListener("click", step(1, sP));
  choose(passB, "pass");
  choose(maskB, "mask");
  show();
})();"""


def _static_sizes(N, ds, Ns):
    """The checked ``N``, ``ds`` and ``Ns`` of the static explorers (``Ns``: ``N / 4, N, 4 N``
    up to :data:`N_MAX` by default)."""
    N = explorer_size(N, "N", N_MAX)
    ds = sorted({explorer_size(v, "ds", D_MAX) for v in as_counts(ds, "ds")})
    Ns = sorted({explorer_size(v, "Ns", N_MAX) for v in as_counts(Ns, "Ns")} if Ns is not None
                else {v for v in ((N // 4, N, 4 * N) if N >= 4 else (N,)) if v <= N_MAX})
    if N not in Ns:
        raise ValueError(f"N = {N} is not one of Ns = {Ns}")
    return N, ds, Ns


def _first_d(d, ds) -> int:
    d = (64 if 64 in ds else ds[0]) if d is None else as_count(d, "d")
    if d not in ds:
        raise ValueError(f"d = {d} is not one of ds = {ds}")
    return d


_ROW = ('display:flex;gap:0.5em;align-items:center;flex-wrap:wrap;margin:0.25em 0;'
        'font-family:sans-serif;font-size:0.95em')
_NAME = 'style="display:inline-block;min-width:2.6em;font-weight:bold"'
_RANGE = 'style="flex:1 1 12em;min-width:8em;max-width:28em;height:40px;margin:0"'


def _slider(cls: str, label: str, count: int, value: int, shown: str, note: str = "",
            steps: tuple = ()) -> str:
    """One row of controls: a range input ``cls`` labelled ``label`` (``count`` positions),
    optional "−" and "+" buttons (``steps``: their class prefix and what they say), its value
    and a grey note."""
    buttons = ""
    if steps:
        prefix, less, more = steps
        buttons = (f'<button type="button" class="{prefix}-less" aria-label="{less}" '
                   f'style="{_TOUCH}">−</button><button type="button" class="{prefix}-more" '
                   f'aria-label="{more}" style="{_TOUCH}">+</button>')
    note = f'<span style="color:#666">{html.escape(note)}</span>' if note else ""
    return (f'<div style="{_ROW}"><label style="display:contents"><span {_NAME}>{label}</span>'
            f'<input type="range" class="{cls}" min="0" max="{count - 1}" value="{value}" '
            f'step="1" {_RANGE}></label>{buttons}<span class="{cls}value">'
            f'{html.escape(shown)}</span>{note}</div>')


def _pass_mask(prefix: str, backward: bool, causal: bool) -> str:
    return (
        f'<div style="{_ROW}" role="group" aria-label="pass"><span {_NAME}>pass</span>'
        + _buttons(f"{prefix}-pass", ("forward", "backward"),
                   "backward" if backward else "forward",
                   {"forward": "the forward pass: O from Q, K, V",
                    "backward": "the backward pass: dQ, dK, dV from Q, K, V, dO, O, L"})
        + f'</div><div style="{_ROW}" role="group" aria-label="mask"><span {_NAME}>mask</span>'
        + _buttons(f"{prefix}-mask", ("none", "causal"), "causal" if causal else "none",
                   {"none": "dense attention: every query attends to every key",
                    "causal": "causal attention: query i attends to keys j <= i"})
        + '</div>')


def _progress(done: int, total: int, what: str) -> None:
    """One line on stderr per picture computed, rewritten in place (a notebook shows it while
    the cell runs)."""
    import sys

    sys.stderr.write(f"\r{what}: {done} of {total} pictures computed")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def static_explorer(N: int = 4096, ds=(32, 64, 128, 256), Ms=None, *, Ns=None,
                    d: int | None = None, M: int | None = None, backward: bool = False,
                    causal: bool = False, names=None, options=None, workers: int = 1,
                    progress: bool = False) -> str:
    """A self-contained HTML crossover explorer for a static page, forward and backward.

    An inline SVG log-log plot of exact I/O against ``M`` (decade ticks, one polyline per
    algorithm in the colours of :data:`ioattn.plotting.STYLE`, the lower bound dashed, a
    labelled line at ``M = d^2``, dotted green lines at the exact crossovers and a dashed,
    labelled one where FlashAttention becomes the cheapest for good (:func:`flash_from`),
    triangles on the top edge at the on-chip memory of real GPUs (:func:`ioattn.gpus.marks`),
    a circle on each curve at the current ``M`` and a labelled line there). The M axis is the
    same for every ``d`` (:func:`m_axis`: from the least to the largest cache size of any
    ``d``, :func:`m_x`), so changing ``d`` moves ``M = d^2`` and the crossovers on the screen:
    by :func:`octave_px` pixels for each factor 2 in ``M``, two octaves for each doubling of
    ``d``.

    Directly under the picture, the controls, one per row: a range input "M" stepping through
    the cache sizes of the current ``d`` (shown as ``M = 2^k = ... entries = r d²``) with "−"
    and "+" buttons, range inputs "N" and "d" switching between ``Ns`` and ``ds`` (a new ``d``
    keeps ``M`` in entries: the nearest of its cache sizes), "pass" buttons (forward,
    backward) and "mask" buttons (none: dense attention; causal: :func:`ioattn.masks.causal`,
    the masked algorithms' exact I/O and the sparse lower bound); then the readout:
    :func:`words` (the cheapest and exact ratios) and :func:`readout` (every exact count); then
    the legend, folded in a ``<details>`` "Legend" (the script opens it on a screen at least
    720 px wide), so that on a phone nothing comes between the picture and the sliders. Every
    control is at least 40 px high, for fingers. The SVG is 400 px wide at its natural size
    and scales down with the page. The panel across ``P`` processors is
    :func:`static_parallel_explorer`.

    The exact totals of every ``N`` and ``d``, for both passes and both masks, are computed
    here by :func:`curves` and embedded as JSON in a ``<script type="application/json"
    class="ioe-data">`` element; a small inline script recomputes the geometry and the
    readout from them when a control changes. The four pictures of one ``N`` and ``d`` share
    the axes, so switching shows how much more the backward moves and how much a causal mask
    saves. Without script the picture shows the initial point. No external asset, no network
    access; every element sits under a ``div`` with a unique id, so several explorers can share
    a page.

    The JSON object has ``Ns``, ``ds``, ``names``, ``titles`` and ``axis`` (:func:`m_axis`);
    ``Ms`` and ``mlabels`` (per ``d``, the cache sizes and their :func:`m_label`); and
    ``forward``, ``backward``, ``causal`` and ``causal_backward`` (the keys of :data:`KINDS`),
    each a list per ``N`` of a list per ``d`` of what :func:`curves` gives for that picture,
    reduced to ``totals``, ``lower``, ``lower_any``, ``min_M`` and ``dom`` (log10 of the
    plotted M and I/O ranges: the M range is ``axis`` everywhere, the I/O range the same for
    the four pictures of one ``N`` and ``d``); :func:`picture` reads one back.

    Parameters
    ----------
    N : int
        The sequence length shown first, from 1 to :data:`N_MAX` (65,536).
    ds : sequence of int
        Head dimensions offered by the "d" slider, each from 1 to :data:`D_MAX` (256).
    Ms : list of int, optional
        Cache sizes (from 1 to :data:`M_MAX`), the same for every ``d``; by default
        :func:`static_Ms` of each ``d`` (four per octave from ``max(16, d^2/16)`` to
        ``STATIC_HI d^2 = 4 d^2``: FlashAttention takes over below ``2 d^2``, and the exact
        crossovers cost every ``M`` of the range).
    Ns : sequence of int, optional
        Sequence lengths offered by the "N" slider (each at most :data:`N_MAX`); ``N / 4, N,
        4 N`` by default (those up to :data:`N_MAX`).
    d : int, optional
        The ``d`` shown first (64 if in ``ds``, else the first).
    M : int, optional
        The ``M`` shown first: the cache size nearest to it (in log); ``d^2`` by default.
    backward : bool, optional
        Show the backward pass first (the forward by default).
    causal : bool, optional
        Show the causal mask first (dense attention by default).
    names, options
        As for :func:`curves`.
    workers : int, optional
        Processes that compute the pictures, one ``(N, d)`` at a time, the largest ``d`` (the
        dearest: the exact crossovers cost each ``M`` of the range) first. With 1, the
        default, everything is computed in this process; with more, the processes are
        started with ``spawn``, so a script must call this under ``if __name__ ==
        "__main__":``. Never more than the pictures to compute.
    progress : bool, optional
        Write a line on standard error after each ``(N, d)`` computed ("static explorer: 5 of
        12 pictures computed"), for a notebook where the call takes several seconds.

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).

    Raises
    ------
    TypeError
        For a count that is not an integer, a flag that is not a bool, ``names`` that is not
        a list of names, ``options`` that is not a dict of dicts.
    ValueError
        Before computing anything: for a size out of the ranges above, an unknown algorithm
        (the closest known name suggested) or option, an ``N`` or ``d`` not among ``Ns`` or
        ``ds``.
    """
    N, ds, Ns = _static_sizes(N, ds, Ns)
    d = _first_d(d, ds)
    backward, causal = as_flag(backward, "backward"), as_flag(causal, "causal")
    progress = as_flag(progress, "progress")
    M = None if M is None else as_count(M, "M")
    if Ms is not None:
        Ms = sorted({explorer_size(v, "Ms", M_MAX) for v in as_counts(Ms, "Ms")})
    if names is not None:
        names = as_names(names, "names", REGISTRY)
        if not names:
            raise ValueError("names is empty: name at least one algorithm (None for the "
                             "default)")
    options = DEFAULT_OPTIONS if options is None else as_options(options)
    workers = as_count(workers, "workers")
    i, j = Ns.index(N), ds.index(d)
    by_d = [static_Ms(dd) if Ms is None else Ms for dd in ds]
    axis = m_axis(by_d)
    full = {kind: [[None] * len(ds) for _ in Ns] for kind in KINDS.values()}
    blocks = [(nn, dd, by_d[b], names, options, axis) for nn in Ns for b, dd in enumerate(ds)]
    workers = min(workers, len(blocks))         # no more processes than pictures to compute
    say = (lambda x: _progress(x, len(blocks), "static explorer")) if progress else \
        (lambda x: None)
    if workers > 1:                     # the sweeps of each (N, d) in separate processes,
        ctx = multiprocessing.get_context("spawn")          # the largest d first
        first = sorted(range(len(blocks)), key=lambda x: -blocks[x][1])
        got = {}
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            for x, four in zip(first, pool.map(_four, [blocks[x] for x in first])):
                got[x] = four
                say(len(got))
        done = [got[x] for x in range(len(blocks))]
    else:
        done = []
        for block in blocks:
            done.append(_four(block))
            say(len(done))
    for (a, b), four in zip(itertools.product(range(len(Ns)), range(len(ds))), done):
        for kind, p in four.items():
            full[kind][a][b] = p
    first = full["forward"][0]
    c = full[KINDS[backward, causal]][i][j]
    names = c["names"]
    target = d * d if M is None else M
    k = min(range(len(c["Ms"])), key=lambda x: abs(math.log(c["Ms"][x] / target)))
    data = {"Ns": Ns, "ds": ds, "names": names, "titles": c["titles"], "axis": list(axis),
            "Ms": [p["Ms"] for p in first], "mlabels": [[m_label(v, p["d"]) for v in p["Ms"]]
                                                        for p in first]}
    for kind, rows in full.items():
        data[kind] = [[{key: p[key] for key in _KEPT} for p in row] for row in rows]
    payload = _json_in_html(data)
    uid = f"ioattn-explorer-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"
    dom, bottom = c["dom"], _H - _B

    frames = "".join(_frame(nn, dd, full["forward"][a][b]["dom"], (a, b) == (i, j))
                     for a, nn in enumerate(Ns) for b, dd in enumerate(ds))
    frames += "".join(_cross(p, p["dom"], (a, b) == (i, j) and kind == KINDS[backward, causal])
                      for kind, rows in full.items() for a, row in enumerate(rows)
                      for b, p in enumerate(row))
    polylines, markers = [], []
    for n in names:
        colour = STYLE.get(n, {}).get("color", OTHER_COLOUR)
        polylines.append(f'<polyline class="ioe-curve" data-name="{html.escape(n)}" '
                         f'points="{_points(c, dom, c["totals"][n])}" fill="none" '
                         f'stroke="{colour}" stroke-width="2"/>')
        t = c["totals"][n][k]
        cx, cy = _px(dom, c["Ms"][k], t) if t is not None else (0, 0)
        markers.append(f'<circle class="ioe-marker" data-name="{html.escape(n)}" cx="{cx}" '
                       f'cy="{cy}" r="5" fill="{colour}" stroke="#fff" stroke-width="1.5" '
                       f'visibility="{"visible" if t is not None else "hidden"}"/>')
    now = _px(dom, c["Ms"][k])
    now_text = f"M = {_commas(c['Ms'][k])}"
    nx, nanchor = _side(now, now_text)
    title = f"{picture_title(N, backward, causal)}, d = {d}"
    svg = (
        f'<svg viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        'aria-label="exact I/O of attention against the cache size M, log-log, with the lower '
        'bounds, the crossovers and the on-chip memory of real GPUs" '
        f'font-family="sans-serif" font-size="{_FONT}" fill="#222" '
        'style="width:100%;max-width:540px;height:auto;display:block;background:#fff">'
        f'{frames}'
        f'<rect x="{_L}" y="{_T}" width="{_W - _L - _R}" height="{_H - _T - _B}" fill="none" '
        'stroke="#333"/>'
        f'<line class="ioe-now" x1="{now}" y1="{_T}" x2="{now}" y2="{bottom}" '
        f'stroke="{NOW_COLOUR}" stroke-width="2"/>'
        f'<polyline class="ioe-lower" points="{_points(c, dom, c["lower"])}" fill="none" '
        'stroke="#000" stroke-width="1.2" stroke-dasharray="5 3"/>'
        f'<polyline class="ioe-lower-any" points="{_points(c, dom, c["lower_any"])}" '
        'fill="none" stroke="#000" stroke-width="1.2" stroke-dasharray="1 3"/>'
        f'{"".join(polylines)}{"".join(markers)}'
        f'<text class="ioe-now-label" x="{nx}" y="{bottom - 7}" text-anchor="{nanchor}" '
        f'fill="#8a5d00" font-weight="bold" {_HALO}>{now_text}</text>'
        f'<text x="{(_L + _W - _R) / 2}" y="{_H - 4}" text-anchor="middle">'
        'cache size M (entries, the same axis for every d)</text>'
        f'<text transform="translate(13 {(_T + bottom) / 2}) rotate(-90)" text-anchor="middle">'
        'I/O (entries read + written)</text></svg>'
    )
    controls = (
        '<div class="ioe-controls">'
        + _slider("ioe-M", "M", len(c["Ms"]), k, data["mlabels"][j][k],
                  steps=("ioe", "smaller M", "larger M"))
        + _slider("ioe-N", "N", len(Ns), i, f"N = {_commas(N)}",
                  f"({', '.join(map(_commas, Ns))})")
        + _slider("ioe-d", "d", len(ds), j, f"d = {d}", f"({', '.join(map(str, ds))})")
        + _pass_mask("ioe", backward, causal) + '</div>')
    script = _SCRIPT % dict(id=uid, W=_W, H=_H, L=_L, R=_R, T=_T, B=_B, CHAR=_CHAR,
                            helpers=_HELPERS)
    style = (f'<style>#{uid} button[aria-pressed="true"]{{background:#1f5fbf;color:#fff;'
             'border-color:#1f5fbf}</style>')
    return (
        f'<div class="ioattn-explorer" id="{uid}" style="margin:0.5em 0 1em;max-width:100%">'
        f'{style}'
        f'<div class="ioe-title" style="font-family:sans-serif;font-weight:bold;'
        f'margin:0.2em 0">{html.escape(title)}</div>'
        f'{svg}{controls}'
        '<div class="ioe-readout" aria-live="polite" style="margin-top:0.4em">'
        '<div class="ioe-words" style="font-family:sans-serif;font-size:1em;'
        f'font-weight:bold">{html.escape(words(c, k), quote=False)}</div>'
        '<div class="ioe-numbers" style="font-family:monospace;font-size:0.85em;'
        f'overflow-wrap:anywhere">{html.escape(readout(c, k), quote=False)}</div></div>'
        + _details("ioe-legend", _legend(c, names, options))
        + f'<script type="application/json" class="ioe-data">{payload}</script>'
        f'<script>{script}'
        '</script></div>'
    )


def static_parallel_explorer(N: int = 4096, ds=(32, 64, 128, 256), *, Ns=None,
                             d: int | None = None, Ps=None, P: int | None = None,
                             heads: int = PARALLEL_HEADS, backward: bool = False,
                             causal: bool = False, names=None) -> str:
    """A self-contained HTML panel "across P processors" for a static page.

    One attention with ``H = heads`` heads shared by ``P`` processors: an inline SVG log-log
    plot of the words the busiest processor moves in each algorithm of :mod:`ioattn.parallel`
    (``names``: ring, striped, all-to-all, the 2D grid by default) against ``P``
    (:func:`across`, exact counts of :func:`ioattn.parallel.cost`), with the
    memory-independent lower bound on the words it receives dashed, and a line and a circle on
    each curve at the current ``P``. Directly under it the controls: a range input "P" with
    "−" and "+" buttons, range inputs "N" and "d" switching between ``Ns`` and ``ds``, "pass"
    buttons (forward, backward: only those of :data:`ioattn.parallel.WITH_BACKWARD` have a
    backward pass here) and "mask" buttons (none, causal: the words
    moved are the same, the bound is the causal one). Then the readout,
    :func:`parallel_words` (the algorithm that moves the fewest words, how many times as many
    the ring moves, its memory against the ring's, its ratio to the bound) and
    :func:`parallel_readout` (every count); then the legend folded in a ``<details>``.

    The counts of every ``N``, ``d``, pass and mask are computed here and embedded as JSON
    (``Ns``, ``ds`` and ``par``: ``heads``, ``Ps``, ``names``, ``titles``,
    ``backward_names`` (those of :data:`ioattn.parallel.WITH_BACKWARD`), ``doms`` (the
    distinct y ranges)
    and ``nd`` (per ``N``, per ``d``, the counts and the bounds, integers));
    :func:`parallel_picture` reads one back; a small inline script redraws from them. No
    kernel, no external asset, no network access; several panels can share a page.

    Parameters
    ----------
    N : int
        The sequence length shown first, from 1 to :data:`N_MAX`.
    ds : sequence of int
        Head dimensions of the "d" slider, each from 1 to :data:`D_MAX`.
    Ns : sequence of int, optional
        Sequence lengths of the "N" slider; ``N / 4, N, 4 N`` by default (those up to
        :data:`N_MAX`).
    d : int, optional
        The ``d`` shown first (64 if in ``ds``, else the first).
    Ps : sequence of int, optional
        The processor counts; by default those of :data:`PARALLEL_PS` (1, 2, 4, ..., 256)
        that every ``N`` can share (:func:`parallel_Ps`).
    P : int, optional
        The ``P`` shown first: 16 by default (if in ``Ps``, else the largest).
    heads : int, optional
        Heads ``H`` (:data:`PARALLEL_HEADS`, 16; all-to-all needs ``H >= P``).
    backward, causal : bool, optional
        Show the backward pass, the causal mask first.
    names : sequence of str, optional
        The algorithms drawn (:func:`across`): the four of :data:`ioattn.parallel.ALGORITHMS`
        by default, :data:`ioattn.parallel.NAMES` for every scheme; ``"ring"`` among them.

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).

    Raises
    ------
    TypeError
        For a count that is not an integer or a flag that is not a bool.
    ValueError
        Before computing anything: for a size out of range, an ``N``, ``d`` or ``P`` not among
        ``Ns``, ``ds`` or ``Ps``, a ``P`` above the least ``N``.

    Examples
    --------
    >>> page = static_parallel_explorer(1024, ds=(32,), Ns=(1024,), Ps=(1, 2, 4, 8, 16))
    >>> 'class="iop-P"' in page and "the fewest words" in page
    True
    """
    from .parallel import WITH_BACKWARD as PBACK
    from .parallel.table import TITLES as PTITLES

    PNAMES = _panel_names(names)
    N, ds, Ns = _static_sizes(N, ds, Ns)
    d = _first_d(d, ds)
    backward, causal = as_flag(backward, "backward"), as_flag(causal, "causal")
    heads = as_count(heads, "heads")
    Ps = parallel_Ps(min(Ns)) if Ps is None else sorted(set(as_counts(Ps, "Ps")))
    if Ps[-1] > min(Ns):
        raise ValueError(f"P = {Ps[-1]} is more than N = {min(Ns)}: every processor needs a row")
    P = (16 if 16 in Ps else Ps[-1]) if P is None else as_count(P, "P")
    if P not in Ps:
        raise ValueError(f"P = {P} is not one of Ps = {Ps}")
    i, j, tp = Ns.index(N), ds.index(d), Ps.index(P)
    nd = [[_across_block(nn, dd, Ps, heads, PNAMES) for dd in ds] for nn in Ns]
    doms = []
    for row in nd:
        for block in row:
            if block["dom"] not in doms:
                doms.append(block["dom"])
            block["dom"] = doms.index(block["dom"])
    data = {"Ns": Ns, "ds": ds,
            "par": {"heads": heads, "Ps": Ps, "names": list(PNAMES),
                    "titles": {n: PTITLES[n] for n in PNAMES},
                    "backward_names": [n for n in PNAMES if n in PBACK],
                    "doms": doms, "nd": nd}}
    payload = _json_in_html(data)
    uid = f"ioattn-parallel-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"
    pc = parallel_picture(data, KINDS[backward, causal], i, j)
    pdom = doms[nd[i][j]["dom"]]
    frames = "".join(_pframe(Ps, dm, x, dm == pdom) for x, dm in enumerate(doms))
    controls = (
        '<div class="iop-controls">'
        + _slider("iop-P", "P", len(Ps), tp, f"P = {P}", f"(H = {heads} heads)",
                  steps=("iop", "fewer processors", "more processors"))
        + _slider("iop-N", "N", len(Ns), i, f"N = {_commas(N)}",
                  f"({', '.join(map(_commas, Ns))})")
        + _slider("iop-d", "d", len(ds), j, f"d = {d}", f"({', '.join(map(str, ds))})")
        + _pass_mask("iop", backward, causal) + '</div>')
    script = _PSCRIPT % dict(id=uid, PW=_PW, PH=_PH, PL=_PL, PR=_PR, PT=_PT, PB=_PB,
                             CHAR=_CHAR, helpers=_HELPERS)
    style = (f'<style>#{uid} button[aria-pressed="true"]{{background:#1f5fbf;color:#fff;'
             'border-color:#1f5fbf}</style>')
    return (f'<div class="ioattn-parallel iop-panel" id="{uid}" '
            f'style="margin:0.5em 0 1em;max-width:100%">{style}'
            + _panel_parts(pc, tp, pdom, frames, uid, controls)
            + f'<script type="application/json" class="iop-data">{payload}</script>'
            f'<script>{script}</script></div>')
