"""The decoding explorer: exact I/O of one attention step at inference against the cache size ``M``.

One attention step of a model with ``H_q`` query heads sharing ``H_kv = H_q / g`` key/value
heads (grouped-query attention, :mod:`ioattn.inference`), head dimension ``d``, ``N_q`` query
rows per head (a decoding step is ``N_q = 1``, speculative decoding a few rows, a chunk of
prefill many) against a KV cache of ``N_k`` keys. The picture is the crossover explorer's
(:mod:`ioattn.explorer`: log-log, exact I/O against ``M``, the on-chip memory of real GPUs on
the top edge), with three schedules (:data:`SCHEDULES`), all counted exactly by
:func:`ioattn.inference.grouped_cost`:

- stacked FlashAttention: the ``g`` query heads of a group stacked into one block of ``g N_q``
  rows against one read of the group's ``K``, ``V`` (schedule (b) of :mod:`ioattn.inference`);
- per-head FlashAttention: each query head on its own, reading its group's ``K``, ``V``
  (schedule (a));
- per-head standard attention (schedule (a) with the standard algorithm);

and the lower bound of grouped heads, :func:`ioattn.bounds.grouped_lower` (the bound of the
chapter on inference, section "Grouped heads": a shared ``K``, ``V`` counted once; for
programs, made monotone by :func:`ioattn.bounds.envelope`), dashed. A vertical line marks the
least ``M`` from which stacked FlashAttention reads the KV cache once, its I/O the trivial
term ``2 H_q N_q d + 2 H_kv N_k d`` of the bound (:func:`reads_once_from`, found by bisection
on the exact counts).

- :func:`decoding_curves`: the data of one picture (one ``N_q`` and ``g``);
- :func:`decoding_words` and :func:`decoding_readout`: what the explorer says at a point, in
  words (the schedule that moves the fewest entries, how many times as many the per-head
  schedules move, how far stacked FlashAttention is from the bound; exact ratios,
  :func:`ioattn.explorer.ratio_text`) and in numbers;
- :func:`static_decoding_explorer`: a self-contained HTML snippet for a static page (inline
  SVG, the counts of every ``N_q`` and ``g`` as JSON and a small script; sliders ``M`` with "−"
  and "+" buttons, ``N_q`` and ``g``), no kernel and nothing fetched from the network;
- :func:`ioattn.widgets.decoding_explorer`: the live ipywidgets version.

>>> c = decoding_curves(1, 8, Ms=[4096])
>>> c["H_kv"], c["totals"]["flash_stacked"] == [c["once"]]
(4, True)
"""

from __future__ import annotations

import hashlib
import html
import math

from . import bounds
from ._validate import as_count, as_counts
from .algorithms import get
from .explorer import (
    _B,
    _CHAR,
    _FONT,
    _H,
    _HALO,
    _HELPERS,
    _L,
    _R,
    _T,
    _W,
    CROSS_COLOUR,
    D_MAX,
    M_MAX,
    N_MAX,
    NOW_COLOUR,
    _details,
    _domain,
    _gpu_marks,
    _grid,
    _ids,
    _json_in_html,
    _px,
    _ranked,
    _side,
    _slider,
    _swatch,
    explorer_size,
    m_label,
    ratio_text,
)
from .inference import grouped_cost

__all__ = ["DECODE_D", "DECODE_GS", "DECODE_HEADS", "DECODE_N_K", "DECODE_N_QS", "N_K_MAX",
           "ONCE_LABEL", "SCHEDULES", "decoding_curves", "decoding_grid", "decoding_Ms",
           "decoding_panel", "decoding_picture",
           "decoding_readout", "decoding_title", "decoding_words", "g_label", "query_label",
           "reads_once_from", "static_decoding_explorer"]

#: The model of the explorer by default: 32 query heads of dimension 128, a cache of 4,096 keys.
DECODE_HEADS, DECODE_D, DECODE_N_K = 32, 128, 4096
#: Query rows per head offered by default: a decoding step, speculation, chunks of prefill.
DECODE_N_QS = (1, 2, 4, 7, 16, 64)
#: Query heads per key/value head offered by default (with ``H_q``: multi-query attention).
DECODE_GS = (1, 2, 4, 8, 32)
#: The largest cache ``N_k`` the explorer takes (the counts stay below ``2^53``, exact in the
#: script's numbers, for the sizes the explorer draws).
N_K_MAX = 1 << 20

#: The schedules drawn: key -> (algorithm, grouping of :mod:`ioattn.inference`, title in
#: prose, colour, line width). At ``N_q = 1`` the two per-head schedules move nearly the same
#: entries, so standard attention's thin line is drawn over per-head FlashAttention's wide one.
SCHEDULES = {
    "flash_stacked": ("flash", "stacked", "stacked FlashAttention", "#1f77b4", 2.5),
    "flash_per_head": ("flash", "per_head", "per-head FlashAttention", "#ff7f0e", 3.5),
    "standard_per_head": ("standard", "per_head", "per-head standard attention", "#7f7f7f", 1.6),
}
#: The label of the line from which stacked FlashAttention reads the KV cache once.
ONCE_LABEL = "KV cache read once →"
#: Counts the script holds as JavaScript numbers must stay below this to be exact.
_EXACT = 1 << 53


def _group(H_q, g) -> tuple[int, int, int]:
    H_q, g = as_count(H_q, "H_q"), as_count(g, "g")
    if H_q % g:
        raise ValueError(f"g = {g} does not divide H_q = {H_q}: a group has g = H_q / H_kv "
                         "query heads")
    return H_q, g, H_q // g


def reads_once_from(H_q: int, g: int, N_q: int, d: int, N_k: int) -> int:
    """The least cache size ``M`` at which stacked FlashAttention (FA2, the ``g`` query heads
    of a group stacked, :func:`ioattn.inference.grouped_cost`) moves exactly the trivial term
    of :func:`ioattn.bounds.grouped_lower`, ``2 H_q N_q d + 2 H_kv N_k d``: every key and
    value read once.

    Found by bisection on the exact counts (they do not increase with ``M``: FA2's query
    block ``B_r`` does not shrink as ``M`` grows, so the number of passes over the cache,
    ``ceil(g N_q / B_r)``, does not grow); the search stops when the group's ``g N_q`` rows fit
    in one block.

    >>> reads_once_from(32, 8, 1, 128, 4096)           # 2d + (2d + 4) g N_q at d = 128
    2336
    """
    H_q, g, H_kv = _group(H_q, g)
    N_q, d, N_k = as_count(N_q, "N_q"), as_count(d, "d"), as_count(N_k, "N_k")
    once = H_kv * bounds.trivial_lower(g * N_q, d, N_k=N_k)

    def cost(M):
        return grouped_cost("flash", H_q, H_kv, N_q, d, M, N_k=N_k).total

    lo = get("flash").min_M(d)
    if cost(lo) == once:
        return lo
    hi = 2 * lo
    while cost(hi) != once:             # cost(lo) > once all along
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if cost(mid) == once else (mid, hi)
    return hi


def decoding_Ms(d: int, rows: int, N_k: int = DECODE_N_K) -> list[int]:
    """The explorer's cache sizes: four per octave (rounded powers of ``2^(1/4)``) from the
    power of two at or below FlashAttention's least cache (``4d + 4``) to the power of two at
    or above the cache from which ``rows`` stacked query rows are read in one block
    (:func:`reads_once_from` of one group of ``rows`` rows against ``N_k`` keys), at most
    :data:`ioattn.explorer.M_MAX`.

    >>> Ms = decoding_Ms(128, 32 * 64)
    >>> Ms[:3], Ms[-1], len(Ms)
    ([512, 609, 724], 1048576, 45)
    """
    d, rows = as_count(d, "d"), as_count(rows, "rows")
    a = math.floor(math.log2(get("flash").min_M(d)))
    top = reads_once_from(rows, rows, 1, d, N_k)
    b = max(a + 1, min(math.ceil(math.log2(top)), math.floor(math.log2(M_MAX))))
    return sorted({round(2 ** (a + i / 4)) for i in range(4 * (b - a) + 1)})


def decoding_curves(N_q: int, g: int, H_q: int = DECODE_HEADS, d: int = DECODE_D,
                    N_k: int = DECODE_N_K, Ms=None) -> dict:
    """The data of one picture: the exact I/O of each schedule of :data:`SCHEDULES` at each
    ``M`` and the lower bound.

    Parameters
    ----------
    N_q : int
        Query rows per head (``N`` of :func:`ioattn.inference.grouped_cost`).
    g : int
        Query heads per key/value head; it divides ``H_q`` (``H_kv = H_q / g``).
    H_q, d, N_k : int, optional
        Query heads, head dimension, keys and values in the cache (32, 128, 4,096).
    Ms : list of int, optional
        Cache sizes; :func:`decoding_Ms` of ``d`` and the rows of one stacked group by default.

    Returns
    -------
    dict
        JSON-ready: ``H_q``, ``H_kv``, ``g``, ``N_q``, ``N_k``, ``d``, ``Ms``; ``names`` (the
        keys of :data:`SCHEDULES`) and ``titles``; ``totals`` (name -> the exact total of
        :func:`ioattn.inference.grouped_cost` at each ``M``, ``None`` where the algorithm
        cannot run); ``min_M`` (name -> least feasible ``M``); ``lower``
        (:func:`ioattn.bounds.grouped_lower` for programs, ``program=True``, made monotone
        over ``Ms`` by :func:`ioattn.bounds.envelope`); ``once`` (its trivial term,
        ``H_kv`` times :func:`ioattn.bounds.trivial_lower` of a group's ``g N_q`` rows) and
        ``fits`` (:func:`reads_once_from`).
    """
    H_q, g, H_kv = _group(H_q, g)
    N_q, d, N_k = as_count(N_q, "N_q"), as_count(d, "d"), as_count(N_k, "N_k")
    Ms = decoding_Ms(d, g * N_q, N_k) if Ms is None else sorted(set(as_counts(Ms, "Ms")))
    names = list(SCHEDULES)
    least = {n: get(SCHEDULES[n][0]).min_M(d) for n in names}
    totals = {n: [grouped_cost(SCHEDULES[n][0], H_q, H_kv, N_q, d, M, N_k=N_k,
                               grouping=SCHEDULES[n][1]).total if M >= least[n] else None
                  for M in Ms] for n in names}
    lower = [bounds.grouped_lower(H_q, H_kv, N_q, d, M, N_k=N_k, program=True) for M in Ms]
    return {"H_q": H_q, "H_kv": H_kv, "g": g, "N_q": N_q, "N_k": N_k, "d": d, "Ms": Ms,
            "names": names, "titles": {n: SCHEDULES[n][2] for n in names}, "totals": totals,
            "min_M": least, "lower": bounds.envelope(lower),
            "once": H_kv * bounds.trivial_lower(g * N_q, d, N_k=N_k),
            "fits": reads_once_from(H_q, g, N_q, d, N_k)}


# ---------------------------------------------------------------------------------- text
def decoding_words(c: dict, k: int) -> str:
    """The readout in words of a picture ``c`` (:func:`decoding_curves`) at ``Ms[k]``: the
    schedule that moves the fewest entries and how many, how many times as many each other one
    moves (exact ratios of exact counts, :func:`ioattn.explorer.ratio_text`), how many times
    as many per-head FlashAttention moves as stacked FlashAttention where neither is the
    cheapest, how far stacked FlashAttention is from the lower bound (exactly on it once it
    reads the KV cache once, else the ratio and the ``M`` from which it reads the cache once),
    and the schedules that cannot run. The static explorer's script writes the same sentence.

    >>> print(decoding_words(decoding_curves(1, 8, Ms=[4096]), 0))
    ... # doctest: +NORMALIZE_WHITESPACE
    At M = 4,096: stacked FlashAttention moves the fewest entries, 4,202,496; per-head
    FlashAttention moves 7.99× as many and per-head standard attention 8.14× as many; stacked
    FlashAttention moves exactly the lower bound: it reads the KV cache once.
    """
    T, M = c["titles"], c["Ms"][k]
    run, cannot = _ranked(c, k)
    text = f"At M = {M:,}: "
    if not run:
        text += "no schedule can run"
    else:
        tb, _, best = run[0]
        if len(run) == 1:
            text += f"only {T[best]} can run; it moves {tb:,} entries"
        else:
            others = [T[n] + (" moves" if i == 0 else "")
                      + ("" if t == tb else f" {ratio_text(t, tb)}") + " as many"
                      for i, (t, _, n) in enumerate(run[1:])]
            text += f"{T[best]} moves the fewest entries, {tb:,}; " + " and ".join(others)
        st, ph = c["totals"]["flash_stacked"][k], c["totals"]["flash_per_head"][k]
        if st is not None and best != "flash_stacked":
            text += (f"; {T['flash_per_head']} moves"
                     + ("" if ph == st else f" {ratio_text(ph, st)}")
                     + f" as many as {T['flash_stacked']}")
        if st is not None:
            low = c["lower"][k]
            if st == c["once"]:
                text += (f"; {T['flash_stacked']} moves exactly the lower bound: it reads the "
                         "KV cache once")
            elif st == low:
                text += f"; {T['flash_stacked']} moves exactly the lower bound"
            else:
                text += (f"; {T['flash_stacked']} moves {ratio_text(st, low)} as many as the "
                         f"lower bound and reads the KV cache once from M = {c['fits']:,} on")
    for n in cannot:
        text += f"; {T[n]} cannot run (it needs M ≥ {c['min_M'][n]:,})"
    return text + "."


def decoding_readout(c: dict, k: int) -> str:
    """The numbers under :func:`decoding_words`: the sizes, the cheapest schedule, each
    schedule's exact count (or the least ``M`` it needs) and the lower bound. The static
    explorer's script writes the same text.

    >>> print(decoding_readout(decoding_curves(1, 8, Ms=[4096]), 0))
    ... # doctest: +NORMALIZE_WHITESPACE
    H_q = 32, g = 8 (H_kv = 4), N_q = 1, N_k = 4,096, d = 128, M = 4,096: cheapest stacked
    FlashAttention. stacked FlashAttention 4,202,496; per-head FlashAttention 33,562,624;
    per-head standard attention 34,226,176; lower bound 4,202,496
    """
    run, _ = _ranked(c, k)
    parts = []
    for n in c["names"]:
        t = c["totals"][n][k]
        parts.append(c["titles"][n] + " " + (f"{t:,}" if t is not None else
                                             f"cannot run (needs M ≥ {c['min_M'][n]:,})"))
    parts.append(f"lower bound {c['lower'][k]:,}")
    return (f"H_q = {c['H_q']}, g = {c['g']} (H_kv = {c['H_kv']}), N_q = {c['N_q']:,}, "
            f"N_k = {c['N_k']:,}, d = {c['d']}, M = {c['Ms'][k]:,}: cheapest "
            f"{c['titles'][run[0][2]] if run else 'none'}. " + "; ".join(parts))


def decoding_title(H_q: int, N_k: int, d: int) -> str:
    """The title of the picture: ``Exact I/O of one attention step at inference, H_q = 32,
    N_k = 4,096, d = 128``."""
    return f"Exact I/O of one attention step at inference, H_q = {H_q}, N_k = {N_k:,}, d = {d}"


def query_label(N_q: int) -> str:
    """What the ``N_q`` slider says: ``N_q = 1: a decoding step``, ``N_q = 4: speculation``
    (up to 8 rows), ``N_q = 64: a chunk of prefill``."""
    what = "a decoding step" if N_q == 1 else "speculation" if N_q <= 8 else "a chunk of prefill"
    return f"N_q = {N_q:,}: {what}"


def g_label(g: int, H_q: int) -> str:
    """What the ``g`` slider says: ``g = 8 (H_kv = 4)``; ``multi-head`` at ``g = 1``,
    ``multi-query`` at ``g = H_q``."""
    what = ", multi-head" if g == 1 else ", multi-query" if g == H_q else ""
    return f"g = {g} (H_kv = {H_q // g}{what})"


def decoding_picture(payload: dict, i: int, j: int) -> dict:
    """The picture of a static decoding explorer's JSON ``payload`` for ``N_qs[i]`` and
    ``gs[j]``, as :func:`decoding_curves` gives it (what :func:`decoding_words` and
    :func:`decoding_readout` read)."""
    p, g = payload["pics"][i][j], payload["gs"][j]
    return {"H_q": payload["H_q"], "H_kv": payload["H_q"] // g, "g": g,
            "N_q": payload["N_qs"][i], "N_k": payload["N_k"], "d": payload["d"],
            "Ms": payload["Ms"], "names": payload["names"], "titles": payload["titles"],
            "totals": p["totals"], "min_M": payload["min_M"], "lower": p["lower"],
            "once": p["once"], "fits": p["fits"]}


# ---------------------------------------------------------------------------------- static HTML
_SCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var D = JSON.parse(root.querySelector("script.iod-data").textContent);
  var W = %(W)d, H = %(H)d, L = %(L)d, R = %(R)d, T = %(T)d, B = %(B)d, CHAR = %(CHAR)s;
  var ONCE = "%(once)s";
  function q(s) { return root.querySelector(s); }
  function qa(s) { return root.querySelectorAll(s); }
  var sM = q("input.iod-M"), sQ = q("input.iod-Nq"), sG = q("input.iod-g");
  var outM = q(".iod-Mvalue"), outQ = q(".iod-Nqvalue"), outG = q(".iod-gvalue");
  var outWords = q(".iod-words"), outNumbers = q(".iod-numbers");
  var now = q("line.iod-now"), nowText = q("text.iod-now-label");
  var lower = q("polyline.iod-lower"), fits = q("g.iod-fits");
  var fitsLine = q("line.iod-fits-line"), fitsText = q("text.iod-fits-label");
  var lines = {}, marks = {}, i;
  var ls = qa("polyline.iod-curve"), ms = qa("circle.iod-marker");
  for (i = 0; i < ls.length; i++) lines[ls[i].getAttribute("data-name")] = ls[i];
  for (i = 0; i < ms.length; i++) marks[ms[i].getAttribute("data-name")] = ms[i];
  var state = {};
  var legend = q("details.iod-legend");
  if (legend && typeof window !== "undefined" && window.matchMedia &&
      window.matchMedia("(min-width: 720px)").matches) legend.open = true;
%(helpers)s  var dom = D.dom, Ms = D.Ms, T_ = D.titles;
  function px(M) { return tenth(L + (Math.log10(M) - dom[0]) / (dom[1] - dom[0]) * (W - L - R)); }
  function py(y) { return tenth(T + (dom[3] - Math.log10(y)) / (dom[3] - dom[2]) * (H - T - B)); }
  function points(values) {
    var p = [];
    for (var k = 0; k < Ms.length; k++)
      if (values[k] !== null && values[k] > 0) p.push(px(Ms[k]) + "," + py(values[k]));
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
  function side(x, text) {
    var right = x + 4 + CHAR * text.length > W - R;
    return [tenth(right ? x - 4 : x + 4), right ? "end" : "start"];
  }
  function words(c, k) {            /* ioattn.decode_explorer.decoding_words */
    var rc = ranked(c, k), run = rc[0], cannot = rc[1], j;
    var text = "At M = " + commas(Ms[k]) + ": ", best = null;
    if (!run.length) text += "no schedule can run";
    else {
      var tb = run[0][0];
      best = run[0][2];
      if (run.length === 1) text += "only " + T_[best] + " can run; it moves " + commas(tb) +
        " entries";
      else {
        var parts = [];
        for (j = 1; j < run.length; j++)
          parts.push(T_[run[j][2]] + (j === 1 ? " moves" : "") +
                     (run[j][0] === tb ? "" : " " + ratio(run[j][0], tb)) + " as many");
        text += T_[best] + " moves the fewest entries, " + commas(tb) + "; " + parts.join(" and ");
      }
      var st = c.totals.flash_stacked[k], ph = c.totals.flash_per_head[k];
      if (st !== null && best !== "flash_stacked")
        text += "; " + T_.flash_per_head + " moves" + (ph === st ? "" : " " + ratio(ph, st)) +
          " as many as " + T_.flash_stacked;
      if (st !== null) {
        var low = c.lower[k];
        if (st === c.once) text += "; " + T_.flash_stacked +
          " moves exactly the lower bound: it reads the KV cache once";
        else if (st === low) text += "; " + T_.flash_stacked + " moves exactly the lower bound";
        else text += "; " + T_.flash_stacked + " moves " + ratio(st, low) +
          " as many as the lower bound and reads the KV cache once from M = " +
          commas(c.fits) + " on";
      }
    }
    for (j = 0; j < cannot.length; j++)
      text += "; " + T_[cannot[j]] + " cannot run (it needs M \\u2265 " +
        commas(D.min_M[cannot[j]]) + ")";
    return text + ".";
  }
  function numbers(c, Nq, g, k) {   /* ioattn.decode_explorer.decoding_readout */
    var run = ranked(c, k)[0], parts = [];
    for (var j = 0; j < D.names.length; j++) {
      var n = D.names[j], t = c.totals[n][k];
      parts.push(T_[n] + " " + (t !== null ? commas(t) :
        "cannot run (needs M \\u2265 " + commas(D.min_M[n]) + ")"));
    }
    parts.push("lower bound " + commas(c.lower[k]));
    return "H_q = " + D.H_q + ", g = " + g + " (H_kv = " + (D.H_q / g) + "), N_q = " +
      commas(Nq) + ", N_k = " + commas(D.N_k) + ", d = " + D.d + ", M = " + commas(Ms[k]) +
      ": cheapest " + (run.length ? T_[run[0][2]] : "none") + ". " + parts.join("; ");
  }
  function clamp(s, n) {
    var v = Math.max(0, Math.min(n - 1, Math.round(+s.value)));
    s.value = String(v);
    return v;
  }
  var shown = "";
  function show() {
    var i = clamp(sQ, D.N_qs.length), j = clamp(sG, D.gs.length), k = clamp(sM, Ms.length);
    var c = D.pics[i][j], Nq = D.N_qs[i], g = D.gs[j], M = Ms[k], n;
    if (shown !== i + " " + j) {
      shown = i + " " + j;
      for (n in lines) lines[n].setAttribute("points", points(c.totals[n]));
      lower.setAttribute("points", points(c.lower));
      var inside = c.fits >= Ms[0] && c.fits <= Ms[Ms.length - 1];
      fits.setAttribute("display", inside ? "inline" : "none");
      var fx = inside ? px(c.fits) : 0, fs = side(fx, ONCE);
      fitsLine.setAttribute("x1", fx); fitsLine.setAttribute("x2", fx);
      fitsText.setAttribute("x", fs[0]); fitsText.setAttribute("text-anchor", fs[1]);
    }
    var x = px(M), label = "M = " + commas(M), s = side(x, label);
    now.setAttribute("x1", x); now.setAttribute("x2", x);
    nowText.setAttribute("x", s[0]); nowText.setAttribute("text-anchor", s[1]);
    nowText.textContent = label;
    for (var q2 = 0; q2 < D.names.length; q2++) {
      n = D.names[q2];
      var t = c.totals[n][k], m = marks[n];
      if (t !== null) {
        m.setAttribute("cx", x); m.setAttribute("cy", py(t));
        m.setAttribute("visibility", "visible");
      } else {
        m.setAttribute("visibility", "hidden");
      }
    }
    outM.textContent = D.mlabels[k];
    outQ.textContent = D.qlabels[i];
    outG.textContent = D.glabels[j];
    outWords.textContent = words(c, k);
    outNumbers.textContent = numbers(c, Nq, g, k);
  }
  sM.addEventListener("input", show);
  sQ.addEventListener("input", show);
  sG.addEventListener("input", show);
  q("button.iod-less").addEventListener("click", step(-1, sM));
  q("button.iod-more").addEventListener("click", step(1, sM));
  show();
})();"""


def _points(Ms, dom, values) -> str:
    return " ".join("{},{}".format(*_px(dom, M, t)) for M, t in zip(Ms, values)
                    if t is not None and t > 0)


def _legend() -> str:
    items = [(f'<line x1="1" y1="7" x2="27" y2="7" stroke="{colour}" stroke-width="{width}"/>'
              f'<circle cx="14" cy="7" r="4" fill="{colour}"/>', title)
             for _, _, title, colour, width in SCHEDULES.values()]
    items += [
        ('<line x1="1" y1="7" x2="27" y2="7" stroke="#000" stroke-dasharray="5 3"/>',
         "lower bound for grouped heads (a shared K, V counted once)"),
        (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{CROSS_COLOUR}" stroke-width="1.6" '
         'stroke-dasharray="6 3"/>',
         "from here on stacked FlashAttention reads the KV cache once: the group's g N_q rows "
         "fit in one query block"),
        (f'<line x1="14" y1="0" x2="14" y2="14" stroke="{NOW_COLOUR}" stroke-width="2"/>',
         "the M of the slider"),
        ('<path d="M9 2L19 2L14 11Z" fill="#444"/>',
         "on-chip memory of one SM of a GPU (shared memory + registers) in fp16 entries"),
    ]
    return "".join(
        '<span style="display:inline-flex;gap:0.35em;align-items:center;margin:0 1em 0.2em 0">'
        f'{_swatch(svg)}<span>{html.escape(text)}</span></span>' for svg, text in items)


def _choice(values, name: str, value: int) -> int:
    value = as_count(value, name)
    if value not in values:
        raise ValueError(f"{name} = {value} is not one of {name}s = {values}")
    return values.index(value)


def static_decoding_explorer(H_q: int = DECODE_HEADS, d: int = DECODE_D, N_k: int = DECODE_N_K,
                             *, N_qs=DECODE_N_QS, gs=None, Ms=None, N_q: int = 1,
                             g: int | None = None, M: int | None = None) -> str:
    """A self-contained HTML decoding explorer for a static page.

    An inline SVG log-log plot (the look of :func:`ioattn.explorer.static_explorer`) of the
    exact I/O against ``M`` of one attention step with ``H_q`` query heads in groups of ``g``
    (``H_kv = H_q / g`` key/value heads), ``N_q`` query rows per head against ``N_k`` keys:
    stacked FlashAttention, per-head FlashAttention and per-head standard attention
    (:data:`SCHEDULES`, :func:`ioattn.inference.grouped_cost`), the lower bound of grouped
    heads dashed (:func:`ioattn.bounds.grouped_lower`), a dashed green line at the ``M`` from
    which stacked FlashAttention reads the KV cache once (:func:`reads_once_from`), the
    on-chip memory of real GPUs on the top edge, and a line and a circle on each curve at the
    current ``M``. Directly under the picture: a range input "M" with "−" and "+" buttons, and
    range inputs "N_q" (``N_qs``) and "g" (``gs``); then the readout, :func:`decoding_words`
    and :func:`decoding_readout`; then the legend folded in a ``<details>`` (opened by the
    script on a screen at least 720 px wide). Every control is at least 40 px high.

    The counts of every ``N_q`` and ``g`` (:func:`decoding_curves`, exact integers) are
    embedded as JSON (``H_q``, ``d``, ``N_k``, ``N_qs``, ``gs``, ``Ms``, ``mlabels``,
    ``qlabels``, ``glabels``, ``names``, ``titles``, ``min_M``, ``dom`` (log10 of the plotted
    M and I/O ranges, the same for every picture, so that moving ``g`` or ``N_q`` moves the
    curves on the screen) and ``pics``: per ``N_q``, per ``g``, ``totals``, ``lower``,
    ``once`` and ``fits``); :func:`decoding_picture` reads one back and a small inline script
    redraws from them. No kernel, no external asset, no network access; several explorers can
    share a page.

    Parameters
    ----------
    H_q : int
        Query heads (32).
    d : int
        Head dimension, at most :data:`ioattn.explorer.D_MAX` (128).
    N_k : int
        Keys and values in the cache, at most :data:`N_K_MAX` (4,096).
    N_qs : sequence of int
        Query rows per head offered by the "N_q" slider (:data:`DECODE_N_QS`), each at most
        :data:`ioattn.explorer.N_MAX`.
    gs : sequence of int, optional
        Query heads per key/value head offered by the "g" slider, each dividing ``H_q``; by
        default 1, 2, 4 and 8 (those that divide ``H_q``) and ``H_q``.
    Ms : sequence of int, optional
        Cache sizes, each at most :data:`ioattn.explorer.M_MAX`; :func:`decoding_Ms` of ``d``
        and the largest group by default.
    N_q, g : int, optional
        The ``N_q`` (1) and ``g`` shown first (8 if offered, else the largest).
    M : int, optional
        The ``M`` shown first: the cache size nearest to it (in log); ``2^16`` by default.

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).

    Raises
    ------
    TypeError
        For a count that is not an integer (``True`` included) or a sequence that is not one
        of integers.
    ValueError
        Before computing anything: a size out of range, a ``g`` that does not divide ``H_q``,
        an ``N_q`` or ``g`` not offered; and a count too large for the script's numbers.

    Examples
    --------
    >>> page = static_decoding_explorer(N_qs=(1, 4), gs=(1, 8))
    >>> 'class="iod-Nq"' in page and "reads the KV cache once" in page
    True
    """
    grid = decoding_grid(H_q, d, N_k, N_qs=N_qs, gs=gs, Ms=Ms, N_q=N_q, g=g, M=M)
    Ms, pics, (i, j, k) = grid["Ms"], grid["pics"], grid["start"]
    c = pics[i][j]
    data = {"H_q": grid["H_q"], "d": grid["d"], "N_k": grid["N_k"], "N_qs": grid["N_qs"],
            "gs": grid["gs"], "Ms": Ms, "mlabels": [m_label(v, grid["d"]) for v in Ms],
            "qlabels": [query_label(v) for v in grid["N_qs"]],
            "glabels": [g_label(v, grid["H_q"]) for v in grid["gs"]], "names": c["names"],
            "titles": c["titles"], "min_M": c["min_M"], "dom": grid["dom"],
            "pics": [[{key: p[key] for key in ("totals", "lower", "once", "fits")} for p in row]
                     for row in pics]}
    payload = _json_in_html(data)
    uid = f"ioattn-decoding-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"
    return _page(uid, data, payload, c, i, j, k)


def decoding_grid(H_q: int = DECODE_HEADS, d: int = DECODE_D, N_k: int = DECODE_N_K, *,
                  N_qs=DECODE_N_QS, gs=None, Ms=None, N_q: int = 1, g: int | None = None,
                  M: int | None = None) -> dict:
    """Every picture of an explorer (the static one, :func:`static_decoding_explorer`, and the
    live one, :func:`ioattn.widgets.decoding_explorer`), its arguments checked first (see
    :func:`static_decoding_explorer`).

    Returns
    -------
    dict
        ``H_q``, ``d``, ``N_k``, ``N_qs``, ``gs``, ``Ms`` (checked, sorted); ``pics`` (per
        ``N_q``, per ``g``, :func:`decoding_curves`); ``dom`` (log10 of the M range and of the
        I/O range rounded out to decades, over every picture) and ``start`` (the indices of
        ``N_q``, ``g`` and of the cache size nearest to ``M`` in log).
    """
    H_q = as_count(H_q, "H_q")
    d = explorer_size(d, "d", D_MAX)
    N_k = explorer_size(N_k, "N_k", N_K_MAX)
    N_qs = sorted({explorer_size(v, "N_qs", N_MAX) for v in as_counts(N_qs, "N_qs")})
    if gs is None:
        gs = sorted({v for v in (1, 2, 4, 8) if H_q % v == 0} | {H_q})
    else:
        gs = sorted({_group(H_q, v)[1] for v in as_counts(gs, "gs")})
    if Ms is not None:
        Ms = sorted({explorer_size(v, "Ms", M_MAX) for v in as_counts(Ms, "Ms")})
    i = _choice(N_qs, "N_q", N_q)
    j = _choice(gs, "g", (8 if 8 in gs else gs[-1]) if g is None else g)
    M = 1 << 16 if M is None else as_count(M, "M")
    if Ms is None:
        Ms = decoding_Ms(d, gs[-1] * N_qs[-1], N_k)
    pics = [[decoding_curves(nq, gg, H_q, d, N_k, Ms) for gg in gs] for nq in N_qs]
    top = max(t for row in pics for c in row
              for values in [*c["totals"].values(), c["lower"]] for t in values if t is not None)
    if top >= _EXACT:
        raise ValueError(f"a count of {top:,} entries is more than the script's numbers hold "
                         f"exactly (2^53); take a smaller H_q, N_k or N_q")
    k = min(range(len(Ms)), key=lambda x: abs(math.log(Ms[x] / M)))
    dom = _domain(*[c for row in pics for c in row], axis=(Ms[0], Ms[-1]))
    return {"H_q": H_q, "d": d, "N_k": N_k, "N_qs": N_qs, "gs": gs, "Ms": Ms, "pics": pics,
            "dom": dom, "start": (i, j, k)}


def _svg(c: dict, k: int, dom) -> str:
    """The picture ``c`` (:func:`decoding_curves`) at ``Ms[k]`` on the axes ``dom``."""
    Ms, bottom = c["Ms"], _H - _B
    polylines, markers = [], []
    for n, (_, _, _, colour, width) in SCHEDULES.items():
        polylines.append(f'<polyline class="iod-curve" data-name="{n}" '
                         f'points="{_points(Ms, dom, c["totals"][n])}" fill="none" '
                         f'stroke="{colour}" stroke-width="{width}"/>')
        t = c["totals"][n][k]
        cx, cy = _px(dom, Ms[k], t) if t is not None else (0, 0)
        markers.append(f'<circle class="iod-marker" data-name="{n}" cx="{cx}" cy="{cy}" r="5" '
                       f'fill="{colour}" stroke="#fff" stroke-width="1.5" '
                       f'visibility="{"visible" if t is not None else "hidden"}"/>')
    inside = Ms[0] <= c["fits"] <= Ms[-1]
    fx = _px(dom, c["fits"]) if inside else 0
    ftx, fanchor = _side(fx, ONCE_LABEL)
    fits = (f'<g class="iod-fits" display="{"inline" if inside else "none"}">'
            f'<line class="iod-fits-line" x1="{fx}" y1="{_T}" x2="{fx}" y2="{bottom}" '
            f'stroke="{CROSS_COLOUR}" stroke-width="1.6" stroke-dasharray="6 3"/>'
            f'<text class="iod-fits-label" x="{ftx}" y="{_T + 28}" text-anchor="{fanchor}" '
            f'fill="#1a6e1a" {_HALO}>{html.escape(ONCE_LABEL)}</text></g>')
    now = _px(dom, Ms[k])
    now_text = f"M = {Ms[k]:,}"
    nx, nanchor = _side(now, now_text)
    svg = (
        f'<svg viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        'aria-label="exact I/O of one attention step at inference against the cache size M, '
        'log-log, for stacked and per-head schedules, with the lower bound for grouped heads" '
        f'font-family="sans-serif" font-size="{_FONT}" fill="#222" '
        'style="width:100%;max-width:540px;height:auto;display:block;background:#fff">'
        f'<g class="iod-frame">{"".join(_grid(dom))}{_gpu_marks(dom)}</g>{fits}'
        f'<rect x="{_L}" y="{_T}" width="{_W - _L - _R}" height="{_H - _T - _B}" fill="none" '
        'stroke="#333"/>'
        f'<line class="iod-now" x1="{now}" y1="{_T}" x2="{now}" y2="{bottom}" '
        f'stroke="{NOW_COLOUR}" stroke-width="2"/>'
        f'<polyline class="iod-lower" points="{_points(Ms, dom, c["lower"])}" fill="none" '
        'stroke="#000" stroke-width="1.2" stroke-dasharray="5 3"/>'
        f'{"".join(polylines)}{"".join(markers)}'
        f'<text class="iod-now-label" x="{nx}" y="{bottom - 7}" text-anchor="{nanchor}" '
        f'fill="#8a5d00" font-weight="bold" {_HALO}>{now_text}</text>'
        f'<text x="{(_L + _W - _R) / 2}" y="{_H - 4}" text-anchor="middle">'
        'cache size M (entries)</text>'
        f'<text transform="translate(13 {(_T + bottom) / 2}) rotate(-90)" text-anchor="middle">'
        'I/O (entries read + written)</text></svg>')
    return svg


def _readout(c: dict, k: int) -> str:
    return ('<div class="iod-readout" aria-live="polite" style="margin-top:0.4em">'
            '<div class="iod-words" style="font-family:sans-serif;font-size:1em;'
            f'font-weight:bold">{html.escape(decoding_words(c, k), quote=False)}</div>'
            '<div class="iod-numbers" style="font-family:monospace;font-size:0.85em;'
            f'overflow-wrap:anywhere">{html.escape(decoding_readout(c, k), quote=False)}</div>'
            '</div>' + _details("iod-legend", _legend()))


def _heading(c: dict) -> str:
    return ('<div class="iod-title" style="font-family:sans-serif;font-weight:bold;'
            f'margin:0.2em 0">{html.escape(decoding_title(c["H_q"], c["N_k"], c["d"]))}</div>')


def decoding_panel(c: dict, k: int, dom=None, uid: str = "ioattn-decoding-panel") -> str:
    """The picture ``c`` (:func:`decoding_curves`) at ``Ms[k]`` as HTML, without controls or
    script (:func:`ioattn.widgets.decoding_explorer` shows it): the title, the inline SVG of
    :func:`static_decoding_explorer` on the axes ``dom`` (by default the picture's own),
    :func:`decoding_words` and :func:`decoding_readout`, and the legend folded in a
    ``<details>``."""
    dom = _domain(c, axis=(c["Ms"][0], c["Ms"][-1])) if dom is None else dom
    return (f'<div class="iod-panel" id="{html.escape(uid)}">{_heading(c)}{_svg(c, k, dom)}'
            f'{_readout(c, k)}</div>')


def _page(uid: str, data: dict, payload: str, c: dict, i: int, j: int, k: int) -> str:
    """The explorer's HTML around its JSON ``payload``, showing picture ``c`` at ``Ms[k]``."""
    Ms = data["Ms"]
    controls = (
        '<div class="iod-controls">'
        + _slider("iod-M", "M", len(Ms), k, data["mlabels"][k],
                  steps=("iod", "smaller M", "larger M"))
        + _slider("iod-Nq", "N<sub>q</sub>", len(data["N_qs"]), i, data["qlabels"][i],
                  f"(query rows per head: {', '.join(map(str, data['N_qs']))})")
        + _slider("iod-g", "g", len(data["gs"]), j, data["glabels"][j],
                  f"(query heads per K, V head: {', '.join(map(str, data['gs']))})")
        + '</div>')
    script = _SCRIPT % dict(id=uid, W=_W, H=_H, L=_L, R=_R, T=_T, B=_B, CHAR=_CHAR,
                            once=ONCE_LABEL.replace("→", "\\u2192"), helpers=_HELPERS)
    return (
        f'<div class="ioattn-decoding" id="{uid}" style="margin:0.5em 0 1em;max-width:100%">'
        f'{_heading(c)}{_svg(c, k, data["dom"])}{controls}{_readout(c, k)}'
        f'<script type="application/json" class="iod-data">{payload}</script>'
        f'<script>{script}</script></div>')
