"""Live widgets for a notebook with a kernel (ipywidgets).

- :func:`explorer`: the crossover explorer. The same picture as
  :func:`ioattn.explorer.static_explorer` (exact I/O of each algorithm against the cache size
  ``M``, the lower bounds, ``M = d^2``), with sliders for ``N``, ``d`` and ``log2 M``, a
  forward/backward toggle, a dense/causal mask toggle, a checkbox per algorithm, a readout
  naming the cheapest algorithm, and a "simulate" button that runs the algorithms (or their
  backward passes) through the memory model and checks the counts against
  :func:`ioattn.io_cost`. Its M axis is the same for every ``d``.
- :func:`parallel_explorer`: the panel across ``P`` processors
  (:func:`ioattn.explorer.parallel_panel`) with sliders for ``P``, ``N`` and ``d`` and the
  pass and mask toggles.
- :func:`decoding_explorer`: one attention step at inference
  (:func:`ioattn.decode_explorer.decoding_panel`: stacked and per-head schedules of grouped
  heads against ``M``, the lower bound of grouped heads) with sliders for ``M``, ``N_q`` and
  ``g``.
- :func:`stepper`: a red-blue pebble game replayed move by move
  (:func:`ioattn.pebble.view.stepper`).

All four need ipywidgets (the ``book`` extra); without it they raise an ``ImportError`` saying what
to install. On a static page, :func:`ioattn.explorer.static_explorer`,
:func:`ioattn.explorer.static_parallel_explorer`,
:func:`ioattn.decode_explorer.static_decoding_explorer` and
:func:`ioattn.pebble.view.static_stepper` draw the same pictures with no kernel.
"""

from __future__ import annotations

import html
import math

from ._optional import import_ipywidgets
from ._validate import as_count, as_flag, as_names, as_real
from .algorithms import get
from .api import io_cost
from .decode_explorer import (
    DECODE_D,
    DECODE_HEADS,
    DECODE_N_K,
    DECODE_N_QS,
    decoding_grid,
    decoding_panel,
    g_label,
    query_label,
)
from .explorer import (
    DEFAULT_NAMES,
    DEFAULT_OPTIONS,
    D_MAX,
    N_MAX,
    OTHER_COLOUR,
    PARALLEL_HEADS,
    _causal_cost,
    _details,
    _panel_names,
    _ids,
    _legend,
    across,
    curves,
    explorer_size,
    flash_from,
    m_label,
    parallel_panel,
    parallel_Ps,
    picture_title,
    words,
)
from .gpus import marks as gpu_marks
from .pebble.view import stepper
from .plotting import STYLE, TITLES
from .plotting import label as plot_label
from .sweep import as_options

__all__ = ["DPI_MAX", "LOG2_M_MIN", "decoding_explorer", "explorer", "parallel_explorer",
           "stepper"]

#: The smallest ``log2 M`` of the explorer's slider (``M = 16``).
LOG2_M_MIN = 4.0
#: The largest resolution of the explorer's picture (a 7.5 x 4.6 inch figure: 4,500 x 2,760
#: pixels at 600).
DPI_MAX = 600


def _log2_M_max(d: int) -> float:
    """The largest ``log2 M`` of the explorer's slider at ``d``: ``M = 64 d^2``."""
    return math.log2(64 * d * d)


def _log2_M(value, d: int) -> float:
    """``value`` as a ``log2 M`` the slider shows at ``d``: a finite number from
    :data:`LOG2_M_MIN` to ``log2(64 d^2)``; an error otherwise, never a silent clamp."""
    value = as_real(value, "log2_M")
    if not LOG2_M_MIN <= value <= _log2_M_max(d):
        raise ValueError(f"log2_M = {value:g} is outside the slider's range at d = {d}: from "
                         f"{LOG2_M_MIN:g} to {_log2_M_max(d):g} (M from {2 ** LOG2_M_MIN:g} to "
                         f"64 d^2 = {64 * d * d:,})")
    return value


def _beside(text, M: float, xlim, dy: float) -> None:
    """Put the label ``text`` of the vertical line at ``M`` right of it, or left of it when
    ``M`` is in the right half of the axis ``xlim`` (log scale), so that it stays inside the
    axes (the static explorer's labels do the same)."""
    right = math.log(M / xlim[0]) > 0.5 * math.log(xlim[1] / xlim[0])
    text.set_horizontalalignment("right" if right else "left")
    text.xyann = (-4 if right else 4, dy)


def _offered(value, name: str, most: int, slider):
    """``value`` checked as a size of the explorer (:func:`ioattn.explorer.explorer_size`) and as
    one of the values ``slider`` offers; None stays None (nothing to change)."""
    if value is None:
        return None
    value = explorer_size(value, name, most)
    if value not in slider.options:
        raise ValueError(f"{name} = {value} is not one of the explorer's {name}: "
                         f"{list(slider.options)}")
    return value


def _P(value, Ps) -> int:
    """``value`` as one of the panel's processor counts ``Ps``."""
    value = as_count(value, "P")
    if value not in Ps:
        raise ValueError(f"P = {value} is not one of {Ps}")
    return value


def _room(ax, renderer, sizes: bool = True):
    """What the constrained layout reads from the explorer's axes ``ax``, measured at the axes'
    current position without laying the figure out; None where it cannot be read so (an axis
    with no tick label or with an offset text, or a matplotlib without ``Axis._update_ticks``).

    The constrained layout keeps room around the axes for ``ax.get_tightbbox(renderer,
    for_layout_only=True)``: the union of the axes, the tick labels the next draw shows, the
    axis labels, the title (its height), the spines and the other artists in the layout.
    Computing it costs about as much as drawing the axes (it updates every tick several times);
    this reads the same things once.

    Returns
    -------
    (ticks, reach, sizes) : tuple of tuples of float
        In display pixels. ``ticks``: how far the x axis's tick labels reach below the axes and
        the y axis's to the left of it (the ticks the next draw shows, with their labels, from
        ``Axis._update_ticks``); each axis label lies a fixed gap beyond them. ``reach``: how
        far the union of the axes, the tick labels, the title (its height, not its width) and
        the other artists in the layout (the annotations) reach beyond the axes on the left,
        bottom, right and top; the spines and the tick marks are left out (next to the axes,
        inside the tick labels). ``sizes``: the sizes of the axis labels and of the figure's
        legends (None if not ``sizes``).
    """
    from matplotlib.spines import Spine
    from matplotlib.transforms import Bbox

    box = ax.get_window_extent(renderer)
    boxes, ticks = [box], []
    for axis in (ax.xaxis, ax.yaxis):
        if axis.offsetText.get_visible() and axis.offsetText.get_text() or \
                not hasattr(axis, "_update_ticks"):
            return None
        # blank labels (points at their anchors, inside the others' box) are left out
        labels = [lab for t in axis._update_ticks() for lab in (t.label1, t.label2)
                  if lab.get_visible() and lab.get_in_layout() and lab.get_text()]
        if not labels:
            return None
        tick_box = Bbox.union([lab.get_window_extent(renderer) for lab in labels])
        boxes.append(tick_box)
        ticks.append(box.y0 - tick_box.y0 if axis is ax.xaxis else box.x0 - tick_box.x0)
    if ax.title.get_visible() and ax.title.get_text():
        title = ax.title.get_window_extent(renderer)
        boxes.append(Bbox([[box.x0, title.y0], [box.x0, title.y1]]))
    for a in ax.get_default_bbox_extra_artists():
        if not isinstance(a, Spine):
            b = a.get_tightbbox(renderer)
            if b is not None and all(map(math.isfinite, b.extents)):
                boxes.append(b)
    u = Bbox.union([b for b in boxes if b.width != 0 or b.height != 0])
    if sizes:
        sizes = tuple(tuple(x.get_window_extent(renderer).size)
                      for x in (ax.xaxis.label, ax.yaxis.label, *ax.get_figure().legends))
    return (tuple(ticks), (box.x0 - u.x0, box.y0 - u.y0, u.x1 - box.x1, u.y1 - box.y1),
            sizes or None)


class _FrozenLayout:
    """The constrained layout of a figure of fixed size with one axes (the explorer's): laid out
    once by the figure's layout engine, then reused.

    The figure's layout engine is replaced by none, so a draw no longer lays the figure out.
    Before a draw, :meth:`update` measures the margins the axes need (:func:`_room`): within
    ``tol`` pixels of those the last layout gave them, the axes stay where they are. Otherwise
    they are placed as the constrained layout places them in a new figure: in the cell the
    engine gave them (the figure less its pads and the legend) less the margins measured at
    their first position, then less the margins measured where that puts them (two passes, as
    the engine makes).
    When the legends or the axis labels change size, or :func:`_room` cannot measure, the engine
    lays the figure out again. After the engine's layout has been drawn, :meth:`drawn` takes the
    gaps between the tick labels and the axis labels, and the cell, from it. ``runs`` counts the
    engine's layouts, ``moves`` the others.
    """

    def __init__(self, fig, ax, tol: float = 0.5):
        self.fig, self.ax, self.tol = fig, ax, tol
        self.engine = fig.get_layout_engine()
        self.start = ax.get_position(original=True).frozen()
        fig.set_layout_engine("none")
        self.cell = self.gaps = self.margins = self.sizes = None
        self.runs = self.moves = 0

    def _place(self, pos) -> None:
        self.ax.set_position(pos)
        self.ax.set_in_layout(True)               # set_position takes the axes out of the layout

    def _margins(self, renderer, pos=None):
        """The margins (left, bottom, right, top, in pixels) the axes need at ``pos`` (where
        they are by default; where they are left); None if :func:`_room` cannot tell or, where
        the axes are, if the legends or axis labels changed size."""
        if pos is not None:
            self._place(pos)
        room = _room(self.ax, renderer, sizes=pos is None)
        if room is None or pos is None and room[2] != self.sizes:
            return None
        (below, left), (l, b, r, t), _ = room
        return (max(l, left + self.gaps[1]), max(b, below + self.gaps[0]), r, t)

    def _inside(self, m):
        """Where the axes go in their cell with margins ``m`` (figure coordinates)."""
        from matplotlib.transforms import Bbox

        (x0, y0, x1, y1), w, h = self.cell, self.fig.bbox.width, self.fig.bbox.height
        return Bbox([[(x0 + m[0]) / w, (y0 + m[1]) / h], [(x1 - m[2]) / w, (y1 - m[3]) / h]])

    def _near(self, m, n) -> bool:
        return max(abs(a - b) for a, b in zip(m, n)) <= self.tol

    def update(self, renderer) -> str:
        """Before a draw: keep the axes (``"kept"``), move them (``"moved"``) or lay the figure
        out with the engine (``"laid out"``)."""
        m = self._margins(renderer) if self.cell is not None else None
        if m is not None and self._near(m, self.margins):
            return "kept"
        if m is not None:                         # the engine's two passes from the start
            m = self._margins(renderer, self.start)
            m = m and self._margins(renderer, self._inside(m))
            if m is not None:
                self._place(self._inside(m))
                self.margins = m
                self.moves += 1
                return "moved"
        self._place(self.start)
        self.engine.execute(self.fig)
        self.runs += 1
        self.cell = None                          # taken again by drawn()
        return "laid out"

    def drawn(self, renderer) -> None:
        """After a draw of the engine's layout: take the gaps and the cell from it."""
        if self.cell is not None:
            return
        room = _room(self.ax, renderer)
        if room is None:
            return
        here, box = self.ax.get_position().frozen(), self.ax.get_window_extent(renderer)
        (below, left), _, self.sizes = room
        self.gaps = (box.y0 - self.ax.xaxis.label.get_window_extent(renderer).y0 - below,
                     box.x0 - self.ax.yaxis.label.get_window_extent(renderer).x0 - left)
        # The engine left the axes the margins measured after its first pass, m1, not those
        # here, m (they differ when a label beyond the axes moves with them): the cell from m,
        # then from m1 at the first pass redone in it.
        m = self._margins(renderer)
        self.cell = (box.x0 - m[0], box.y0 - m[1], box.x1 + m[2], box.y1 + m[3])
        m1 = self._margins(renderer, self.start)
        m1 = self.margins = m1 and self._margins(renderer, self._inside(m1))
        self._place(here)
        if m1 is None:
            self.cell = None
        else:
            self.cell = (box.x0 - m1[0], box.y0 - m1[1], box.x1 + m1[2], box.y1 + m1[3])


def _simulate(names, N, d, M, options, backward=False, seed=0, causal=False):
    """Run each of ``names`` (their backward passes with ``backward``) at ``(N, d, M)`` on random
    data (under the causal mask with ``causal``); ``{name: (io, io_cost) or None}``."""
    import numpy as np

    from .api import run, run_backward
    from .masks import causal as causal_array

    rng = np.random.default_rng(seed)
    Q, K, V, dO = (rng.standard_normal((N, d)) for _ in range(4))
    out = {}
    mask = causal_array(N) if causal else None
    for n in names:
        opts = options.get(n, {})
        algo = get(n, backward)
        if M < algo.min_M(d, **{**algo.options, **opts}):
            out[n] = None
            continue
        counted = (run_backward(n, Q, K, V, dO, M, mask=mask, **opts) if backward
                   else run(n, Q, K, V, M, mask=mask, **opts)).io
        out[n] = (counted, io_cost(n, N, d, M, backward=backward, mask=mask, **opts))
    return out


def explorer(N: int = 4096, d: int = 64, log2_M: float | None = None, names=None, *,
             backward: bool = False, causal: bool = False, options=None, N_sim_max: int = 256,
             dpi: int = 80):
    """The crossover explorer as an ipywidgets widget, for a notebook with a live kernel.

    Sliders for ``N`` (powers of two from 256 to 65536), ``d`` (powers of two from 16 to 256)
    and ``log2 M``; a "pass" toggle between the forward and the backward pass (the backward
    passes' exact I/O, ``io_cost(..., backward=True)``, and the backward bounds); a "mask"
    toggle between dense attention ("none") and causal attention ("causal": the exact I/O of
    the masked algorithms, equal to ``io_cost(..., mask=ioattn.masks.causal(N))``, and
    :func:`ioattn.bounds.sparse_lower` with ``Z = N (N + 1) / 2``, for programs with an
    ``M``-entry cache; no any-matmul bound is drawn
    for it); a checkbox per algorithm; a matplotlib log-log plot (rendered to PNG by the
    Agg backend into an ``ipywidgets.Image``, so no ipympl is needed) of exact I/O against ``M``
    for the checked algorithms with the lower bounds (standard and any matrix multiplication),
    labelled lines at ``M = d^2``, at the ``M`` from which FlashAttention stays the cheapest
    (:func:`ioattn.explorer.flash_from`) and at the current ``M``, a marker on each curve
    there and the names of real GPUs above their on-chip memory (:func:`ioattn.gpus.marks`);
    a readout: the sentence of :func:`ioattn.explorer.words` (the
    cheapest and the exact ratios, as the static explorer writes it) and each exact count.
    The curves come from :func:`curves` (cached per ``(N, d)``, pass and mask);
    moving ``M`` only moves the markers, and the figure is kept and its lines updated, never
    recreated. The figure is laid out once (matplotlib's constrained layout); a change of ``N``,
    ``d``, the pass, the mask or the checked algorithms moves the axes only when the room their
    labels need changes, to where the constrained layout puts them. The label at ``M`` is shown
    when ``M`` is in the plotted range.

    The M axis is the same for every ``d`` (from ``M = 16`` to ``64 D_MAX^2``, the slider's
    ends over all ``d``), so changing ``d`` moves ``M = d^2`` and the line where FlashAttention
    takes over on the screen, by a factor 4 in ``M`` for each doubling of ``d``; the ``M`` of
    the slider stays the same number of entries. The picture comes first, the controls
    directly under it (``log2 M`` first), then the readout and the legend, folded in a
    ``<details>`` "Legend" (an ``HTML`` widget), so that on a phone nothing comes between the
    picture and the sliders. The panel across ``P`` processors is :func:`parallel_explorer`.

    A "simulate" button runs :func:`ioattn.run` (:func:`ioattn.run_backward` for the backward
    pass) on random data at ``(N_sim, d, M)`` with ``N_sim = min(N, N_sim_max)`` (the simulation
    moves every entry in Python: at ``N = 4096`` it can take minutes) for every checked
    algorithm (under the causal mask when it is on), and reports whether each counted ``io``
    equals :func:`ioattn.io_cost` at that size.

    Parameters
    ----------
    N, d : int
        The initial sizes: ``N`` from 1 to :data:`ioattn.explorer.N_MAX` (65,536), ``d`` from 1
        to :data:`ioattn.explorer.D_MAX` (256), the ends of the sliders.
    log2_M : float, optional
        The initial ``log2 M``, from 4 to ``log2(64 d^2)`` (the slider's range); ``log2 d^2``
        by default (clipped to that range).
    names : list of str, optional
        The algorithms checked at first, names of :data:`DEFAULT_NAMES` (all of them by
        default; an empty list checks none).
    backward : bool, optional
        Start on the backward pass (the forward by default).
    causal : bool, optional
        Start with the causal mask (dense attention by default).
    options : dict, optional
        Algorithm name -> options; :data:`DEFAULT_OPTIONS` by default.
    N_sim_max : int, optional
        The largest ``N`` the "simulate" button runs.
    dpi : int, optional
        Resolution of the picture, at most :data:`DPI_MAX`.

    Returns
    -------
    ipywidgets.VBox
        The widget, with extra attributes: ``update(N=None, d=None, log2_M=None, names=None,
        backward=None, causal=None)`` (set any of them and redraw once; returns the readout
        text),
        ``simulate()`` (what the button does; returns its report), ``controls`` (a dict of the
        sliders, checkboxes and button, ``"pass"``, the forward/backward toggle, and
        ``"mask"``, the none/causal toggle),
        ``readout``, ``sim_readout`` and ``legend`` (``HTML`` widgets), ``image`` (the
        ``Image``), ``xlim`` (the M axis, the same for every ``d``),
        ``figure``, ``lines`` and ``markers`` (name -> matplotlib ``Line2D``; the lower bounds
        are ``lines["lower"]`` and ``lines["lower_any"]``) and ``state`` (the current ``N``,
        ``d``, ``M``, ``backward``, ``causal``, totals, cheapest).

    Raises
    ------
    ImportError
        When ipywidgets is not installed (:func:`static_explorer` needs no kernel and no
        widgets).
    TypeError, ValueError
        Up front, for a count that is not an integer (``N="4096"``, ``N=4096.7``), a flag that
        is not a bool, a size or ``log2_M`` out of the ranges above (never clamped), an unknown
        algorithm (the closest known name suggested) or option; ``update`` checks its values
        the same way before it moves any control.
    """
    widgets = import_ipywidgets("ioattn.widgets.explorer", "ioattn.explorer.static_explorer")
    all_names = list(DEFAULT_NAMES)
    backward, causal = as_flag(backward, "backward"), as_flag(causal, "causal")
    N, d = explorer_size(N, "N", N_MAX), explorer_size(d, "d", D_MAX)
    start = min(max(math.log2(d * d), LOG2_M_MIN), _log2_M_max(d)) if log2_M is None else \
        _log2_M(log2_M, d)
    checked = set(all_names if names is None else as_names(names, "names", all_names))
    options = DEFAULT_OPTIONS if options is None else as_options(options)
    N_sim_max = as_count(N_sim_max, "N_sim_max")
    dpi = as_count(dpi, "dpi")
    if dpi > DPI_MAX:
        raise ValueError(f"dpi must be at most {DPI_MAX}, got {dpi}")
    import io

    import PIL.Image
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from . import bounds

    Ns = sorted({1 << k for k in range(8, 17)} | {N})
    ds = sorted({1 << k for k in range(4, 9)} | {d})
    # the M axis: the slider's ends over every d, the same for all of them
    xlim = (2 ** LOG2_M_MIN / 1.2, 2 ** _log2_M_max(ds[-1]) * 1.2)
    cache: dict = {}

    def data_for(n_, d_, b_=False, k_=False):
        if (n_, d_, b_, k_) not in cache:
            cache[(n_, d_, b_, k_)] = curves(n_, d_, names=all_names, options=options,
                                             backward=b_, causal=k_)
        return cache[(n_, d_, b_, k_)]

    def _least(n, d_, b_):
        algo = get(n, b_)
        return algo.min_M(d_, **{**algo.options, **options.get(n, {})})

    m_max = _log2_M_max
    sN = widgets.SelectionSlider(options=Ns, value=N, description="N",
                                 continuous_update=False)
    sd = widgets.SelectionSlider(options=ds, value=d, description="d",
                                 continuous_update=False)
    sM = widgets.FloatSlider(value=start, min=LOG2_M_MIN, max=m_max(d),
                             step=0.05, description="log2 M", readout_format=".2f",
                             continuous_update=True)
    sk = widgets.ToggleButtons(options=["none", "causal"], value="causal" if causal else "none",
                               description="mask",
                               tooltips=["dense attention: every query attends to every key",
                                         "causal attention: query i attends to keys j <= i"])
    sp = widgets.ToggleButtons(options=["forward", "backward"],
                               value="backward" if backward else "forward", description="pass",
                               tooltips=["the forward pass: O from Q, K, V",
                                         "the backward pass: dQ, dK, dV from Q, K, V, dO, O, L"])
    boxes = {n: widgets.Checkbox(value=n in checked,
                                 description=plot_label(n, **options.get(n, {})),
                                 indent=False) for n in all_names}
    button = widgets.Button(description="simulate", tooltip="run the checked algorithms on "
                            f"random data at N = min(N, {N_sim_max}) and compare with io_cost")
    text = widgets.HTML()
    sim_text = widgets.HTML()
    legend = widgets.HTML(_details("ioe-legend", _legend(None, all_names, options)))
    image = widgets.Image(format="png")

    fig = Figure(figsize=(7.5, 4.6), dpi=dpi, layout="constrained")
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set(xscale="log", yscale="log", xlabel="cache size M (entries)",
           ylabel="I/O (entries read + written)")
    lines, markers = {}, {}
    for n in all_names:
        colour = STYLE.get(n, {}).get("color", OTHER_COLOUR)
        (lines[n],) = ax.plot([1], [1], color=colour, lw=1.8, label=boxes[n].description)
        (markers[n],) = ax.plot([1], [1], "o", color=colour, ms=8, mec="white", mew=1.2,
                                animated=True)
    (lines["lower"],) = ax.plot([1], [1], "k--", lw=1,
                                label="lower bound for programs (standard matrix products)")
    (lines["lower_any"],) = ax.plot([1], [1], "k:", lw=1,
                                    label="lower bound for any matrix multiplication")
    d2_line = ax.axvline(1, color="k", lw=0.8, alpha=0.6)
    d2_text = ax.annotate("", (1, 1), xycoords=("data", "axes fraction"), xytext=(4, -14),
                          textcoords="offset points")
    flash_line = ax.axvline(1, color="#2ca02c", lw=1.2, ls="--",
                            label="from here on FlashAttention is the cheapest")
    flash_text = ax.annotate("", (1, 1), xycoords=("data", "axes fraction"), xytext=(4, -28),
                             textcoords="offset points", color="#1a6e1a")
    gpu_texts = [ax.annotate(f"▼ {names}", (M, 1), xycoords=("data", "axes fraction"),
                             xytext=(-4, 2 + 11 * row), textcoords="offset points",
                             fontsize="small", annotation_clip=False)
                 for row, (names, M) in enumerate(gpu_marks())]
    now_line = ax.axvline(1, color="#f2a900", lw=1.5, animated=True)
    now_text = ax.annotate("", (1, 0), xycoords=("data", "axes fraction"), xytext=(4, 6),
                           textcoords="offset points", color="#8a5d00", weight="bold",
                           animated=True)
    ax.set_xlim(*xlim)
    layout = _FrozenLayout(fig, ax)
    state: dict = {}
    busy = [False]

    def redraw():
        n_, d_, b_, k_ = sN.value, sd.value, sp.value == "backward", sk.value == "causal"
        c = data_for(n_, d_, b_, k_)
        M = max(1, round(2 ** sM.value))
        shown = [n for n in all_names if boxes[n].value]
        totals = {}
        for n in all_names:
            algo, opts = get(n, b_), options.get(n, {})
            ok = M >= algo.min_M(d_, **{**algo.options, **opts})
            if not ok:
                totals[n] = None
            elif k_:                     # = io_cost(..., mask=ioattn.masks.causal(N)), faster
                totals[n] = _causal_cost(n, n_, d_, M, b_, opts).total
            else:
                totals[n] = io_cost(n, n_, d_, M, backward=b_, **opts).total
        Z = n_ * (n_ + 1) // 2 if k_ else n_ * n_
        lower = (bounds.sparse_lower(n_, d_, M, Z, backward=b_, program=True) if k_
                 else bounds.lower_bound(n_, d_, M, backward=b_, program=True))
        runnable = [(totals[n], n) for n in sorted(shown) if totals[n] is not None]
        best = min(runnable)[1] if runnable else None
        key = (n_, d_, b_, k_)
        full = state.get("key") != key or state.get("shown") != shown
        if state.get("key") != key:
            for n in all_names:
                pts = [(m, t) for m, t in zip(c["Ms"], c["totals"][n]) if t is not None]
                lines[n].set_data(*zip(*pts)) if pts else lines[n].set_data([], [])
            lines["lower"].set_data(c["Ms"], c["lower"])
            pts = [(m, b) for m, b in zip(c["Ms"], c["lower_any"]) if b is not None]
            lines["lower_any"].set_data(*zip(*pts)) if pts else lines["lower_any"].set_data([], [])
            d2_line.set_xdata([d_ * d_, d_ * d_])
            d2_text.xy = (d_ * d_, 1)
            d2_text.set_text(f"M = d² = {d_ * d_:,}")
            _beside(d2_text, d_ * d_, xlim, -14)
            ys = [t for n in all_names for t in c["totals"][n] if t is not None]
            ys += [b for b in c["lower"] + c["lower_any"] if b is not None and b > 0]
            fx = flash_from(c)
            flash_line.set_visible(fx is not None)
            flash_text.set_visible(fx is not None)
            if fx is not None:
                flash_line.set_xdata([fx, fx])
                flash_text.xy = (fx, 1)
                flash_text.set_text(f"FlashAttention cheapest from M = {fx:,}")
                _beside(flash_text, fx, xlim, -28)
            for t, (_, gM) in zip(gpu_texts, gpu_marks()):
                t.set_visible(c["Ms"][0] <= gM <= c["Ms"][-1])
            ax.set_ylim(min(ys) / 1.5, max(ys) * 1.5)
            ax.set_title(f"{picture_title(n_, b_, k_)}, d = {d_}")
        for n in all_names:
            lines[n].set_visible(n in shown)
            t = totals[n]
            markers[n].set_visible(n in shown and t is not None)
            markers[n].set_data([M], [t if t is not None else 1])
        now_line.set_xdata([M, M])
        now_text.xy = (M, 0)
        now_text.set_text(f"M = {M:,}")
        lo, hi = ax.get_xlim()                      # M below the curves: no line, no label
        now_text.set_visible(lo <= M <= hi)
        state.update(key=key, N=n_, d=d_, M=M, backward=b_, causal=k_, totals=totals, lower=lower,
                     cheapest=best, shown=shown)
        # Blitting: the curves, axes and legend are drawn only when N, d, the pass, the mask or
        # the checked algorithms change (the axes move only when the margins their labels need
        # change: _FrozenLayout); a move of M restores that background and draws the line at M
        # and the markers (the "animated" artists) on it.
        if full or "background" not in state:
            layout.update(canvas.get_renderer())
            canvas.draw()
            layout.drawn(canvas.get_renderer())
            state["background"] = canvas.copy_from_bbox(fig.bbox)
        else:
            canvas.restore_region(state["background"])
        ax.draw_artist(now_line)
        ax.draw_artist(now_text)
        for n in all_names:
            ax.draw_artist(markers[n])
        buf = io.BytesIO()
        rgba = canvas.buffer_rgba()
        PIL.Image.frombuffer("RGBA", (rgba.shape[1], rgba.shape[0]), rgba, "raw", "RGBA", 0,
                             1).save(buf, format="png", compress_level=1)
        image.value = buf.getvalue()
        rows = "".join(
            f"<tr><td>{'<b>' if n == best else ''}{html.escape(TITLES.get(n, n))}"
            f"{'</b>' if n == best else ''}</td><td style='text-align:right'>"
            + (f"{totals[n]:,}" if totals[n] is not None else "cannot run at this M")
            + "</td></tr>" for n in shown)
        title = TITLES.get(best, best) if best else "none"
        said = words({"Ms": [M], "names": shown, "titles": TITLES,
                      "totals": {n: [totals[n]] for n in shown}, "lower": [lower],
                      "min_M": {n: _least(n, d_, b_) for n in shown}}, 0)
        text.value = (
            f"<div style='font-family:sans-serif;font-weight:bold'>{html.escape(said)}</div>"
            f"<div style='font-family:monospace'>{'backward pass: ' if b_ else ''}"
            f"{'causal mask: ' if k_ else ''}"
            f"N = {n_:,}, d = {d_}, {html.escape(m_label(M, d_))}<br>cheapest: <b>{title}</b>"
            f"<table>{rows}<tr><td>lower bound for programs (standard matrix products"
            f"{f', sparse, Z = {Z:,}' if k_ else ''})</td>"
            f"<td style='text-align:right'>{lower:,}</td></tr></table></div>")
        return text.value

    def update(N=None, d=None, log2_M=None, names=None, backward=None, causal=None):
        """Set any of ``N``, ``d``, ``log2_M``, ``names`` (the checked algorithms), ``backward``
        (the pass), ``causal`` (the mask) and redraw once; returns the readout HTML."""
        # every value checked before any control moves: a bad one changes nothing
        causal = None if causal is None else as_flag(causal, "causal")
        backward = None if backward is None else as_flag(backward, "backward")
        N = _offered(N, "N", N_MAX, sN)
        d = _offered(d, "d", D_MAX, sd)
        log2_M = None if log2_M is None else _log2_M(log2_M, sd.value if d is None else d)
        names = None if names is None else set(as_names(names, "names", all_names))
        busy[0] = True
        try:
            if causal is not None:
                sk.value = "causal" if causal else "none"
            if backward is not None:
                sp.value = "backward" if backward else "forward"
            if N is not None:
                sN.value = N
            if d is not None:
                sd.value = d
                sM.max = m_max(sd.value)
            if log2_M is not None:
                sM.value = log2_M
            if names is not None:
                for n in all_names:
                    boxes[n].value = n in names
        finally:
            busy[0] = False
        return redraw()

    def on_change(change):
        if busy[0]:
            return
        if change["owner"] is sd:
            busy[0] = True
            try:
                sM.max = m_max(sd.value)
            finally:
                busy[0] = False
        redraw()

    def simulate(_=None):
        """Run the checked algorithms at ``N_sim = min(N, N_sim_max)`` and report agreement."""
        n_sim = min(sN.value, N_sim_max)
        d_, M, b_ = sd.value, max(1, round(2 ** sM.value)), sp.value == "backward"
        shown = [n for n in all_names if boxes[n].value]
        sim_text.value = f"<i>simulating at N = {n_sim} ...</i>"
        k_ = sk.value == "causal"
        got = _simulate(shown, n_sim, d_, M, options, backward=b_, causal=k_)
        ran = {n: v for n, v in got.items() if v is not None}
        agree = all(io == cost for io, cost in ran.values())
        rows = "".join(
            f"<tr><td>{html.escape(TITLES.get(n, n))}</td><td style='text-align:right'>"
            + (f"{v[0].total:,}</td><td>{'=' if v[0] == v[1] else '≠'} io_cost "
               f"{v[1].total:,}" if v is not None else "cannot run at this M</td><td>")
            + "</td></tr>" for n, v in got.items())
        note = (f" (N = {sN.value:,} would take long: simulated at N = {n_sim})"
                if n_sim < sN.value else "")
        sim_text.value = (
            f"<div style='font-family:monospace'>simulated ioattn."
            f"{'run_backward' if b_ else 'run'} on random data "
            f"{'with the causal mask ' if k_ else ''}at "
            f"N = {n_sim}, d = {d_}, M = {M:,}{html.escape(note)}<table>{rows}</table>"
            f"counts agree: <b>{'yes' if ran and agree else 'no' if ran else 'nothing ran'}"
            "</b></div>")
        return sim_text.value

    for w in (sN, sd, sM, sp, sk, *boxes.values()):
        w.observe(on_change, names="value")
    button.on_click(simulate)
    redraw()
    box = widgets.VBox([                        # the picture, then its controls under it
        image, sM, widgets.HBox([sN, sd]), widgets.HBox([sp, sk]),
        widgets.HBox(list(boxes.values())), text, widgets.HBox([button]), sim_text, legend,
    ])
    box.update, box.simulate = update, simulate
    box.controls = {"N": sN, "d": sd, "log2_M": sM, "pass": sp, "mask": sk, "simulate": button,
                    **boxes}
    box.readout, box.sim_readout, box.image, box.legend = text, sim_text, image, legend
    box.xlim = xlim
    box.figure, box.lines, box.markers, box.state = fig, lines, markers, state
    return box


def parallel_explorer(N: int = 4096, d: int = 64, P: int | None = None, *,
                      heads: int = PARALLEL_HEADS, backward: bool = False,
                      causal: bool = False, names=None):
    """The panel "across P processors" as an ipywidgets widget, for a notebook with a kernel.

    One attention with ``H = heads`` heads shared by ``P`` processors: the words the busiest
    processor moves in each algorithm of :mod:`ioattn.parallel` (ring, striped, all-to-all,
    the 2D grid) against ``P`` (log-log), with the memory-independent lower bound on the words
    it receives, a line and a circle on each curve at the slider's ``P``, and the sentence of
    :func:`ioattn.explorer.parallel_words` with the numbers of
    :func:`ioattn.explorer.parallel_readout` (:func:`ioattn.explorer.parallel_panel`, an
    inline SVG, the same picture as :func:`ioattn.explorer.static_parallel_explorer`'s).
    Directly under the picture: a "P" slider (1, 2, 4, ..., 256, those the least ``N`` of the
    slider can share), sliders for ``N`` (powers of two from 256 to 65,536) and ``d`` (powers
    of two from 16 to 256), and "pass" and "mask" toggles. The counts come from
    :func:`ioattn.explorer.across` (cached per ``N``, ``d``, pass and mask).

    Parameters
    ----------
    N, d : int
        The initial sizes (``N`` up to :data:`ioattn.explorer.N_MAX`, ``d`` up to
        :data:`ioattn.explorer.D_MAX`).
    P : int, optional
        The initial number of processors: 16 by default.
    heads : int, optional
        Heads ``H`` (:data:`ioattn.explorer.PARALLEL_HEADS`, 16; all-to-all needs ``H >= P``).
    backward, causal : bool, optional
        Start on the backward pass, with the causal mask.
    names : sequence of str, optional
        The algorithms drawn: :data:`ioattn.parallel.ALGORITHMS` by default,
        :data:`ioattn.parallel.NAMES` for every scheme (``"ring"`` among them).

    Returns
    -------
    ipywidgets.VBox
        The widget, with extra attributes: ``update(N=None, d=None, P=None, backward=None,
        causal=None)`` (set any of them and redraw once; returns the panel's HTML),
        ``controls`` (a dict: ``"P"``, ``"N"``, ``"d"``, ``"pass"``, ``"mask"``), ``panel``
        (the ``HTML`` widget) and ``state`` (``N``, ``d``, ``P``, ``backward``, ``causal`` and
        ``across``, the data of :func:`ioattn.explorer.across` drawn).

    Raises
    ------
    ImportError
        When ipywidgets is not installed.
    TypeError, ValueError
        Up front, for a count that is not an integer, a flag that is not a bool, a size out
        of range or a ``P`` not on the slider; ``update`` checks its values the same way
        before it moves any control.
    """
    widgets = import_ipywidgets("ioattn.widgets.parallel_explorer",
                                "ioattn.explorer.static_parallel_explorer")
    N, d = explorer_size(N, "N", N_MAX), explorer_size(d, "d", D_MAX)
    backward, causal = as_flag(backward, "backward"), as_flag(causal, "causal")
    heads = as_count(heads, "heads")
    names = _panel_names(names)
    Ns = sorted({1 << k for k in range(8, 17)} | {N})
    ds = sorted({1 << k for k in range(4, 9)} | {d})
    Ps = parallel_Ps(Ns[0])
    P = (16 if 16 in Ps else Ps[-1]) if P is None else _P(P, Ps)
    uid = f"ioattn-across-{next(_ids)}"
    cache: dict = {}
    sP = widgets.SelectionSlider(options=Ps, value=P, description="P",
                                 tooltip="processors sharing the attention")
    sN = widgets.SelectionSlider(options=Ns, value=N, description="N",
                                 continuous_update=False)
    sd = widgets.SelectionSlider(options=ds, value=d, description="d",
                                 continuous_update=False)
    sp = widgets.ToggleButtons(options=["forward", "backward"],
                               value="backward" if backward else "forward", description="pass")
    sk = widgets.ToggleButtons(options=["none", "causal"], value="causal" if causal else "none",
                               description="mask")
    panel = widgets.HTML()
    state: dict = {}
    busy = [False]

    def redraw():
        n_, d_, b_, k_ = sN.value, sd.value, sp.value == "backward", sk.value == "causal"
        if (n_, d_, b_, k_) not in cache:
            cache[n_, d_, b_, k_] = across(n_, d_, Ps, heads=heads, backward=b_, causal=k_,
                                           names=names)
        c = cache[n_, d_, b_, k_]
        html_ = parallel_panel(c, Ps.index(sP.value), uid)
        # the picture first, the controls (ipywidgets) under it: the readout and the folded
        # legend follow the picture's SVG in the panel's HTML, so split it there
        cut = html_.index('<div class="iop-readout"')
        picture.value, panel.value = html_[:cut] + "</div>", f'<div>{html_[cut:]}'
        state.update(N=n_, d=d_, P=sP.value, backward=b_, causal=k_, across=c)
        return html_

    picture = widgets.HTML()

    def update(N=None, d=None, P=None, backward=None, causal=None):
        """Set any of ``N``, ``d``, ``P``, ``backward`` (the pass), ``causal`` (the mask) and
        redraw once; returns the panel's HTML."""
        causal = None if causal is None else as_flag(causal, "causal")
        backward = None if backward is None else as_flag(backward, "backward")
        N = _offered(N, "N", N_MAX, sN)
        d = _offered(d, "d", D_MAX, sd)
        P = None if P is None else _P(P, Ps)
        busy[0] = True
        try:
            for value, control, text in ((causal, sk, ("none", "causal")),
                                         (backward, sp, ("forward", "backward"))):
                if value is not None:
                    control.value = text[value]
            for value, control in ((N, sN), (d, sd), (P, sP)):
                if value is not None:
                    control.value = value
        finally:
            busy[0] = False
        return redraw()

    def on_change(change):
        if not busy[0]:
            redraw()

    for w in (sP, sN, sd, sp, sk):
        w.observe(on_change, names="value")
    redraw()
    box = widgets.VBox([picture, sP, widgets.HBox([sN, sd]), widgets.HBox([sp, sk]), panel])
    box.update = update
    box.controls = {"P": sP, "N": sN, "d": sd, "pass": sp, "mask": sk}
    box.panel, box.picture, box.state = panel, picture, state
    return box


def decoding_explorer(H_q: int = DECODE_HEADS, d: int = DECODE_D, N_k: int = DECODE_N_K, *,
                      N_qs=DECODE_N_QS, gs=None, Ms=None, N_q: int = 1, g: int | None = None,
                      M: int | None = None):
    """The decoding explorer as an ipywidgets widget, for a notebook with a kernel.

    The picture of :func:`ioattn.decode_explorer.static_decoding_explorer` (one attention step
    of ``H_q`` query heads in groups of ``g``, ``N_q`` query rows per head against ``N_k``
    keys: the exact I/O of stacked FlashAttention, per-head FlashAttention and per-head
    standard attention against ``M``, the lower bound of grouped heads, the ``M`` from which
    the stacked schedule reads the KV cache once), with the sentence of
    :func:`ioattn.decode_explorer.decoding_words` and the numbers of
    :func:`ioattn.decode_explorer.decoding_readout` (:func:`ioattn.decode_explorer.decoding_panel`,
    an inline SVG). Directly under the picture: sliders for ``M``, ``N_q`` and ``g``. Every
    picture is computed up front (:func:`ioattn.decode_explorer.decoding_grid`: a fraction of a
    second at the default sizes) and shares one pair of axes.

    Parameters
    ----------
    H_q, d, N_k, N_qs, gs, Ms, N_q, g, M
        As for :func:`ioattn.decode_explorer.static_decoding_explorer`.

    Returns
    -------
    ipywidgets.VBox
        The widget, with extra attributes: ``update(N_q=None, g=None, M=None)`` (set any of
        them and redraw once; returns the panel's HTML), ``controls`` (a dict: ``"M"``,
        ``"N_q"``, ``"g"``), ``picture`` and ``panel`` (the ``HTML`` widgets of the picture and
        of the readout) and ``state`` (``N_q``, ``g``, ``M`` and ``curves``, the picture drawn,
        as :func:`ioattn.decode_explorer.decoding_curves` gives it).

    Raises
    ------
    ImportError
        When ipywidgets is not installed.
    TypeError, ValueError
        Up front, as :func:`ioattn.decode_explorer.static_decoding_explorer`; ``update``
        refuses an ``N_q``, ``g`` or ``M`` its sliders do not offer before it moves any control.
    """
    widgets = import_ipywidgets("ioattn.widgets.decoding_explorer",
                                "ioattn.decode_explorer.static_decoding_explorer")
    grid = decoding_grid(H_q, d, N_k, N_qs=N_qs, gs=gs, Ms=Ms, N_q=N_q, g=g, M=M)
    Ms, N_qs, gs, (i, j, k) = grid["Ms"], grid["N_qs"], grid["gs"], grid["start"]
    uid = f"ioattn-decoding-{next(_ids)}"
    sM = widgets.SelectionSlider(options=[(f"{v:,}", v) for v in Ms], value=Ms[k],
                                 description="M", tooltip="cache size M (entries)")
    sQ = widgets.SelectionSlider(options=[(query_label(v), v) for v in N_qs], value=N_qs[i],
                                 description="N_q", tooltip="query rows per head")
    sG = widgets.SelectionSlider(options=[(g_label(v, grid["H_q"]), v) for v in gs],
                                 value=gs[j], description="g",
                                 tooltip="query heads per key/value head")
    picture, panel = widgets.HTML(), widgets.HTML()
    state: dict = {}
    busy = [False]

    def redraw():
        c = grid["pics"][N_qs.index(sQ.value)][gs.index(sG.value)]
        html_ = decoding_panel(c, Ms.index(sM.value), grid["dom"], uid)
        cut = html_.index('<div class="iod-readout"')       # the picture, the sliders, the rest
        picture.value, panel.value = html_[:cut] + "</div>", f"<div>{html_[cut:]}"
        state.update(N_q=sQ.value, g=sG.value, M=sM.value, curves=c)
        return html_

    def offered(value, name, values):
        if value is None:
            return None
        value = as_count(value, name)
        if value not in values:
            raise ValueError(f"{name} = {value} is not one of the explorer's {name}: {values}")
        return value

    def update(N_q=None, g=None, M=None):
        """Set any of ``N_q``, ``g`` and ``M`` (each one the sliders offer) and redraw once;
        returns the panel's HTML."""
        changes = [(offered(N_q, "N_q", N_qs), sQ), (offered(g, "g", gs), sG),
                   (offered(M, "M", Ms), sM)]
        busy[0] = True
        try:
            for value, control in changes:
                if value is not None:
                    control.value = value
        finally:
            busy[0] = False
        return redraw()

    def on_change(change):
        if not busy[0]:
            redraw()

    for w in (sM, sQ, sG):
        w.observe(on_change, names="value")
    redraw()
    box = widgets.VBox([picture, sM, sQ, sG, panel])
    box.update = update
    box.controls = {"M": sM, "N_q": sQ, "g": sG}
    box.picture, box.panel, box.state = picture, panel, state
    return box
