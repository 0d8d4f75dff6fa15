"""The crossover explorer: exact I/O of each attention algorithm against the cache size ``M``.

Where does FlashAttention stop being the cheapest, in the forward pass and in the backward pass?
Two forms of one picture (exact I/O against ``M``, log-log, with the lower bounds and a line at
``M = d^2``):

- :func:`curves`: the data of one picture, from :func:`ioattn.sweep.sweep` (exact totals, the
  lower bound, the cheapest algorithm at each ``M`` and the exact crossovers), forward or
  backward, dense or causal;
- :func:`static_explorer`: a self-contained HTML snippet for a static page (an inline SVG, the
  exact totals of both passes, dense and causal, as JSON and a small script; two range inputs,
  ``M`` and ``d``, a forward/backward select and a "mask: none/causal" select), with no kernel
  and nothing fetched from the network;
- :func:`ioattn.widgets.explorer`: the live ipywidgets version, for a notebook with a kernel
  (sliders for ``N``, ``d`` and ``log2 M``, a forward/backward toggle, a none/causal mask
  toggle, a checkbox per algorithm, a "simulate" button that runs the algorithms on random data
  and checks the counts against :func:`ioattn.io_cost`).

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

from . import bounds
from .algorithms import get
from .api import io_cost
from .masks import Mask
from .plotting import STYLE, TITLES
from .sweep import sweep

__all__ = ["DEFAULT_NAMES", "DEFAULT_OPTIONS", "OTHER_COLOUR", "curves",
           "default_Ms", "m_label", "picture_title", "readout", "static_explorer"]

#: The algorithms shown by default.
DEFAULT_NAMES = ("flash", "square_tiling", "standard")
#: Their options by default: square tiling with the outer-product schedule (its cheaper one).
DEFAULT_OPTIONS = {"square_tiling": {"schedule": "outer"}}
#: Colour of a line without a style in :data:`ioattn.plotting.STYLE`.
OTHER_COLOUR = "#9467bd"


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
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    Ms = default_Ms(d) if Ms is None else list(Ms)
    names = sorted(names or DEFAULT_NAMES)
    options = DEFAULT_OPTIONS if options is None else options
    options = {n: dict(options[n]) for n in names if n in options}
    s = sweep(N, d, Ms, names, options, backward=backward)  # dense; validates the sizes
    out = {
        "N": s.N, "d": s.d, "backward": s.backward, "causal": causal, "Ms": list(s.Ms),
        "names": names,
        "labels": {n: s.label(n) for n in names},
        "titles": {n: TITLES.get(n, n) for n in names},
        "totals": {n: list(s.totals[n]) for n in names},
        "min_M": {n: _least(n, d, options, backward) for n in names},
        "lower": list(s.lower),
        "lower_any": list(s.lower_any),
        "cheapest": s.cheapest(),
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


def readout(data: dict, k: int) -> str:
    """The readout line of a picture ``data`` (from :func:`curves`) at ``Ms[k]``: the cheapest
    algorithm, then each algorithm's exact count (or the least ``M`` it needs) and the bound.
    A backward or causal picture says so after ``M``: ``M = 8,192 (backward pass): cheapest
    ...``, ``M = 8,192 (causal mask): ...``, ``M = 8,192 (backward pass, causal mask): ...``;
    there the lower bound is the sparse one (:func:`ioattn.bounds.sparse_lower`).

    The static explorer's script writes the same text.

    >>> print(readout(curves(1024, 32, Ms=[64, 8192]), 1))  # doctest: +NORMALIZE_WHITESPACE
    N = 1,024, d = 32, M = 8,192: cheapest FlashAttention. flash 655,360; square_tiling
    (schedule=outer) 3,082,240; standard 5,177,344; lower bound 131,072
    """
    best = data["cheapest"][k]
    parts = []
    for n in data["names"]:
        t = data["totals"][n][k]
        parts.append(data["labels"][n] + " " + (
            _commas(t) if t is not None else f"cannot run (needs M ≥ {_commas(data['min_M'][n])})"))
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


# ---------------------------------------------------------------------------------- static HTML
_ids = itertools.count()

#: The SVG's plot area: width, height, margins (left, right, top, bottom), in pixels.
_W, _H = 640, 400
_L, _R, _T, _B = 64, 16, 34, 44

_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _domain(*pictures: dict) -> list[float]:
    """``[x0, x1, y0, y1]``: log10 of the M range and of the I/O range rounded out to decades,
    over every picture given (the forward and backward pictures of one ``d`` share axes)."""
    ys = [t for data in pictures for n in data["names"] for t in data["totals"][n]
          if t is not None]
    ys += [b for data in pictures for b in data["lower"] + data["lower_any"]
           if b is not None and b > 0]
    Ms = [M for data in pictures for M in data["Ms"]]
    return [math.log10(min(Ms)), math.log10(max(Ms)),
            math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))]


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


def _frame(data: dict, dom, shown: bool) -> str:
    """The static parts of one ``d``'s picture, shared by both passes: ticks, grid, labels and
    the line at ``M = d^2``."""
    x0, x1, y0, y1 = dom
    bottom, right = _H - _B, _W - _R
    out = []
    for e in range(math.ceil(x0 - 1e-9), math.floor(x1 + 1e-9) + 1):
        x = _px(dom, 10 ** e)
        out.append(f'<line x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" stroke="#eee"/>'
                   f'<line x1="{x}" y1="{bottom}" x2="{x}" y2="{bottom + 5}" stroke="#333"/>'
                   f'<text x="{x}" y="{bottom + 18}" text-anchor="middle">'
                   f'10{str(e).translate(_SUP)}</text>')
    for e in range(int(y0), int(y1) + 1):
        y = _px(dom, 10 ** x0, 10 ** e)[1]
        out.append(f'<line x1="{_L}" y1="{y}" x2="{right}" y2="{y}" stroke="#eee"/>'
                   f'<line x1="{_L - 5}" y1="{y}" x2="{_L}" y2="{y}" stroke="#333"/>'
                   f'<text x="{_L - 8}" y="{y + 4}" text-anchor="end">'
                   f'10{str(e).translate(_SUP)}</text>')
    d2 = data["d"] ** 2
    x = _px(dom, d2)
    out.append(f'<line x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}" stroke="#000" '
               f'stroke-opacity="0.6"/><text x="{x + 4}" y="{_T + 12}">M = d² = {_commas(d2)}'
               '</text>')
    display = "" if shown else ' display="none"'
    return (f'<g class="ioe-frame" data-d="{data["d"]}"{display} font-family="sans-serif" '
            f'font-size="11" fill="#222">{"".join(out)}</g>')


def _cross(data: dict, dom, shown: bool) -> str:
    """The dotted lines at the exact crossovers of one picture (one ``d``, one pass, one
    mask)."""
    bottom = _H - _B
    out = []
    for c in data["crossovers"]:
        x = _px(dom, c["M"])
        out.append(f'<line x1="{x}" y1="{_T}" x2="{x}" y2="{bottom}"><title>crossover at '
                   f'M = {_commas(c["M"])}: {c["before"]} → {c["after"]}</title></line>')
    display = "" if shown else ' display="none"'
    return (f'<g class="ioe-cross" data-d="{data["d"]}" '
            f'data-pass="{"backward" if data["backward"] else "forward"}" '
            f'data-mask="{"causal" if data.get("causal") else "none"}"{display} '
            f'stroke="#2ca02c" stroke-dasharray="2 3">{"".join(out)}</g>')


def _points(data, dom, values) -> str:
    return " ".join("{},{}".format(*_px(dom, M, t)) for M, t in zip(data["Ms"], values)
                    if t is not None and t > 0)


_SCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var D = JSON.parse(root.querySelector("script.ioe-data").textContent);
  var W = %(W)d, H = %(H)d, L = %(L)d, R = %(R)d, T = %(T)d, B = %(B)d;
  var sM = root.querySelector("input.ioe-M"), sd = root.querySelector("input.ioe-d");
  var sp = root.querySelector("select.ioe-pass"), sk = root.querySelector("select.ioe-mask");
  var outM = root.querySelector(".ioe-Mvalue"), outd = root.querySelector(".ioe-dvalue");
  var out = root.querySelector(".ioe-readout"), now = root.querySelector("line.ioe-now");
  var title = root.querySelector("text.ioe-title");
  var lower = root.querySelector("polyline.ioe-lower");
  var lowerAny = root.querySelector("polyline.ioe-lower-any");
  var frames = root.querySelectorAll("g.ioe-frame");
  var cross = root.querySelectorAll("g.ioe-cross");
  var lines = {}, marks = {};
  var ls = root.querySelectorAll("polyline.ioe-curve");
  var ms = root.querySelectorAll("circle.ioe-marker");
  for (var i = 0; i < ls.length; i++) lines[ls[i].getAttribute("data-name")] = ls[i];
  for (i = 0; i < ms.length; i++) marks[ms[i].getAttribute("data-name")] = ms[i];
  function commas(n) { return String(n).replace(/\\B(?=(\\d{3})+(?!\\d))/g, ","); }
  function px(dom, M) {
    return Math.round(10 * (L + (Math.log10(M) - dom[0]) / (dom[1] - dom[0]) * (W - L - R))) / 10;
  }
  function py(dom, y) {
    return Math.round(10 * (T + (dom[3] - Math.log10(y)) / (dom[3] - dom[2]) * (H - T - B))) / 10;
  }
  function points(c, values) {
    var p = [];
    for (var k = 0; k < c.Ms.length; k++)
      if (values[k] !== null && values[k] > 0)
        p.push(px(c.dom, c.Ms[k]) + "," + py(c.dom, values[k]));
    return p.join(" ");
  }
  var shown = "";
  function show() {
    var back = sp.value === "backward", causal = sk.value === "causal";
    var j = Math.max(0, Math.min(D.ds.length - 1, Math.round(+sd.value)));
    var c = (causal ? (back ? D.causal_backward : D.causal) : (back ? D.backward : D.curves))[j];
    sM.max = String(c.Ms.length - 1);
    var k = Math.max(0, Math.min(c.Ms.length - 1, Math.round(+sM.value)));
    sd.value = String(j); sM.value = String(k);
    if (j + sp.value + sk.value !== shown) {
      shown = j + sp.value + sk.value;
      for (var f = 0; f < frames.length; f++)
        frames[f].setAttribute("display",
                               +frames[f].getAttribute("data-d") === c.d ? "inline" : "none");
      for (f = 0; f < cross.length; f++)
        cross[f].setAttribute("display", +cross[f].getAttribute("data-d") === c.d &&
                              cross[f].getAttribute("data-pass") === sp.value &&
                              cross[f].getAttribute("data-mask") === sk.value ? "inline" : "none");
      for (var n in lines) lines[n].setAttribute("points", points(c, c.totals[n]));
      lower.setAttribute("points", points(c, c.lower));
      lowerAny.setAttribute("points", points(c, c.lower_any));
      title.textContent = "Exact I/O of " + (back ? (causal ? "the causal attention backward pass"
        : "the attention backward pass") : (causal ? "causal attention" : "attention")) +
        ", N = " + commas(c.N);
    }
    var M = c.Ms[k], x = px(c.dom, M);
    now.setAttribute("x1", x); now.setAttribute("x2", x);
    var best = null, parts = [];
    for (var q = 0; q < c.names.length; q++) {
      var name = c.names[q], t = c.totals[name][k];
      if (t !== null && (best === null || t < c.totals[best][k])) best = name;
      parts.push(c.labels[name] + " " + (t !== null ? commas(t) :
        "cannot run (needs M \\u2265 " + commas(c.min_M[name]) + ")"));
      var m = marks[name];
      if (t !== null) {
        m.setAttribute("cx", x); m.setAttribute("cy", py(c.dom, t));
        m.setAttribute("visibility", "visible");
      } else {
        m.setAttribute("visibility", "hidden");
      }
    }
    parts.push("lower bound " + commas(c.lower[k]));
    outM.textContent = D.mlabels[j][k];
    outd.textContent = "d = " + c.d;
    var tags = (back ? ["backward pass"] : []).concat(causal ? ["causal mask"] : []);
    out.textContent = "N = " + commas(c.N) + ", d = " + c.d + ", M = " + commas(M) +
      (tags.length ? " (" + tags.join(", ") + ")" : "") + ": cheapest " +
      (best === null ? "none" : c.titles[best]) + ". " + parts.join("; ");
  }
  sM.addEventListener("input", show);
  sd.addEventListener("input", show);
  sp.addEventListener("change", show);
  sk.addEventListener("change", show);
  show();
})();"""


def _json_in_html(obj) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def static_explorer(N: int = 4096, ds=(32, 64, 128, 256), Ms=None, *, d: int | None = None,
                    M: int | None = None, backward: bool = False, causal: bool = False,
                    names=None, options=None) -> str:
    """A self-contained HTML crossover explorer for a static page, forward and backward.

    An inline SVG log-log plot of exact I/O against ``M`` (decade ticks, one polyline per
    algorithm in the colours of :data:`ioattn.plotting.STYLE`, the lower bound dashed, a line at
    ``M = d^2``, dotted green lines at the exact crossovers, a circle on each curve at the
    current ``M`` and a line there); a range input labelled "M" stepping through the cache
    sizes (shown as ``M = 2^k = ... entries = r d²``), a range input labelled "d" switching
    between ``ds``, a select labelled "pass" switching between the forward and the backward
    pass, a select labelled "mask" switching between dense attention ("none") and causal
    attention ("causal": :func:`ioattn.masks.causal`, the masked algorithms' exact I/O and the
    sparse lower bound), and a readout line (:func:`readout`: the cheapest algorithm and every
    exact count). The exact totals of every ``d``, for both passes and both masks, are computed
    here by :func:`curves` and embedded as JSON in a ``<script type="application/json"
    class="ioe-data">`` element; a small inline script recomputes the geometry from them when a
    control changes. The four pictures of one ``d`` share the axes, so switching shows how much
    more the backward moves and how much a causal mask saves.
    Without script the picture shows the initial point. No external asset, no network access;
    every element sits under a ``div`` with a unique id, so several explorers can share a page.

    The JSON object has ``ds``; ``curves`` and ``backward``, one :func:`curves` dict per ``d``
    for the forward and the backward pass, and ``causal`` and ``causal_backward``, the same with
    ``causal=True``, each with, in addition, ``dom`` (log10 of the plotted M and I/O ranges,
    the same for the four pictures of one ``d``); and ``mlabels`` (per ``d``, the
    :func:`m_label` of each ``M``).

    Parameters
    ----------
    N : int
        Sequence length.
    ds : sequence of int
        Head dimensions offered by the "d" slider.
    Ms : list of int, optional
        Cache sizes, the same for every ``d``; :func:`default_Ms` of each ``d`` by default.
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

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).
    """
    ds = [int(v) for v in ds]
    if d is None:
        d = 64 if 64 in ds else ds[0]
    if d not in ds:
        raise ValueError(f"d = {d} is not one of ds = {ds}")
    for flag, label in ((backward, "backward"), (causal, "causal")):
        if not isinstance(flag, bool):
            raise TypeError(f"{label} must be True or False, got {flag!r}")
    j = ds.index(d)
    kinds = [(False, False), (True, False), (False, True), (True, True)]   # (backward, causal)
    pictures = {kind: [] for kind in kinds}
    mlabels = []
    for dd in ds:
        four = {(b, m): curves(N, dd, Ms, names, options, backward=b, causal=m)
                for b, m in kinds}
        dom = _domain(*four.values())
        for kind, p in four.items():
            p["dom"] = dom
            pictures[kind].append(p)
        mlabels.append([m_label(v, dd) for v in four[False, False]["Ms"]])
    forward = pictures[False, False]
    c = pictures[backward, causal][j]
    target = d * d if M is None else M
    k = min(range(len(c["Ms"])), key=lambda i: abs(math.log(c["Ms"][i] / target)))
    payload = _json_in_html({"ds": ds, "curves": forward, "backward": pictures[True, False],
                             "causal": pictures[False, True],
                             "causal_backward": pictures[True, True], "mlabels": mlabels})
    uid = f"ioattn-explorer-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"
    dom, bottom = c["dom"], _H - _B

    frames = "".join(_frame(p, p["dom"], i == j) for i, p in enumerate(forward))
    frames += "".join(_cross(p, p["dom"], i == j and kind == (backward, causal))
                      for kind in kinds for i, p in enumerate(pictures[kind]))
    polylines, markers, legend = [], [], []
    lh = 16 * len(c["names"]) + 38                # the legend box, bottom left
    lx, ly = _L + 6, bottom - 6 - lh
    for i, n in enumerate(c["names"]):
        colour = STYLE.get(n, {}).get("color", OTHER_COLOUR)
        polylines.append(f'<polyline class="ioe-curve" data-name="{html.escape(n)}" '
                         f'points="{_points(c, dom, c["totals"][n])}" fill="none" '
                         f'stroke="{colour}" stroke-width="2"/>')
        t = c["totals"][n][k]
        cx, cy = _px(dom, c["Ms"][k], t) if t is not None else (0, 0)
        markers.append(f'<circle class="ioe-marker" data-name="{html.escape(n)}" cx="{cx}" '
                       f'cy="{cy}" r="5" fill="{colour}" stroke="#fff" stroke-width="1.5" '
                       f'visibility="{"visible" if t is not None else "hidden"}"/>')
        y = ly + 14 + 16 * i
        legend.append(f'<line x1="{lx + 6}" y1="{y}" x2="{lx + 28}" y2="{y}" '
                      f'stroke="{colour}" stroke-width="2"/><text x="{lx + 34}" '
                      f'y="{y + 4}">{html.escape(c["labels"][n])}</text>')
    y = ly + 14 + 16 * len(c["names"])
    legend.append(f'<line x1="{lx + 6}" y1="{y}" x2="{lx + 28}" y2="{y}" '
                  f'stroke="#000" stroke-dasharray="5 3"/><text x="{lx + 34}" '
                  f'y="{y + 4}">lower bound for programs (standard matmul)</text>')
    legend.append(f'<line x1="{lx + 6}" y1="{y + 16}" x2="{lx + 28}" y2="{y + 16}" '
                  f'stroke="#000" stroke-dasharray="1 3"/><text x="{lx + 34}" '
                  f'y="{y + 20}">lower bound (any matmul; dense only)</text>')
    now = _px(dom, c["Ms"][k])
    svg = (
        f'<svg viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="exact I/O of attention, forward or backward pass, dense or causal, against '
        'the cache size '
        f'M, log-log, N = {N}" '
        'style="max-width:100%;height:auto;display:block;background:#fff">'
        f'{frames}'
        f'<rect x="{_L}" y="{_T}" width="{_W - _L - _R}" height="{_H - _T - _B}" fill="none" '
        'stroke="#333"/>'
        f'<line class="ioe-now" x1="{now}" y1="{_T}" x2="{now}" y2="{bottom}" stroke="#f2a900" '
        'stroke-width="2"/>'
        f'<polyline class="ioe-lower" points="{_points(c, dom, c["lower"])}" fill="none" '
        'stroke="#000" stroke-width="1.2" stroke-dasharray="5 3"/>'
        f'<polyline class="ioe-lower-any" points="{_points(c, dom, c["lower_any"])}" '
        'fill="none" stroke="#000" stroke-width="1.2" stroke-dasharray="1 3"/>'
        f'{"".join(polylines)}{"".join(markers)}'
        f'<g font-family="sans-serif" font-size="11" fill="#222">'
        f'<rect x="{lx}" y="{ly}" width="216" height="{lh}" '
        'fill="#fff" fill-opacity="0.85" stroke="#ccc"/>'
        f'{"".join(legend)}'
        f'<text x="{(_L + _W - _R) / 2}" y="{_H - 8}" text-anchor="middle">'
        'cache size M (entries)</text>'
        f'<text transform="translate(14 {(_T + bottom) / 2}) rotate(-90)" text-anchor="middle">'
        'I/O (entries read + written)</text>'
        f'<text class="ioe-title" x="{(_L + _W - _R) / 2}" y="{_T - 12}" text-anchor="middle" '
        f'font-size="13">{html.escape(picture_title(N, backward, causal))}</text></g></svg>'
    )
    row = ('display:flex;gap:0.6em;align-items:center;flex-wrap:wrap;margin:0.3em 0;'
           'font-family:sans-serif;font-size:0.9em')
    label = 'style="display:flex;gap:0.4em;align-items:center"'
    options_html = "".join(
        f'<option value="{v}"{" selected" if (v == "backward") == backward else ""}>{v}</option>'
        for v in ("forward", "backward"))
    mask_html = "".join(
        f'<option value="{v}"{" selected" if (v == "causal") == causal else ""}>{v}</option>'
        for v in ("none", "causal"))
    controls = (
        f'<div style="{row}"><label {label}>M '
        f'<input type="range" class="ioe-M" min="0" max="{len(c["Ms"]) - 1}" value="{k}" '
        'step="1" style="width:22em;max-width:60vw"></label>'
        f'<span class="ioe-Mvalue">{html.escape(mlabels[j][k])}</span></div>'
        f'<div style="{row}"><label {label}>d '
        f'<input type="range" class="ioe-d" min="0" max="{len(ds) - 1}" value="{j}" step="1" '
        f'style="width:8em"></label><span class="ioe-dvalue">d = {d}</span>'
        f'<span style="color:#666">({", ".join(map(str, ds))})</span>'
        '<label style="display:flex;gap:0.4em;align-items:center;margin-left:1.5em">pass '
        f'<select class="ioe-pass">{options_html}</select></label>'
        '<label style="display:flex;gap:0.4em;align-items:center;margin-left:1.5em" '
        'title="none: dense attention; causal: query i attends to keys j &lt;= i">mask '
        f'<select class="ioe-mask">{mask_html}</select></label></div>'
    )
    text = html.escape(readout(c, k), quote=False)
    return (
        f'<div class="ioattn-explorer" id="{uid}" style="margin:0.5em 0 1em">'
        f'{svg}{controls}'
        '<div class="ioe-readout" aria-live="polite" '
        f'style="font-family:monospace;font-size:0.85em">{text}</div>'
        f'<script type="application/json" class="ioe-data">{payload}</script>'
        f'<script>{_SCRIPT % dict(id=uid, W=_W, H=_H, L=_L, R=_R, T=_T, B=_B)}</script></div>'
    )
