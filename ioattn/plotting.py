"""The book's figures: one style, one size, prose names.

Every figure of the book is made by :func:`subplots` (or :func:`plot_sweep`, which uses it) and
shown by :func:`show`, so the rules live here once:

- **Size.** Figures are :data:`WIDTH` inches wide, shown at their natural size (about 460 CSS
  pixels) in the book's content column at 1280 px (about 670 px); panels are stacked vertically,
  never side by side, so a figure keeps most of its text size on a phone, where it is scaled to
  the column (about 340 px at 390 px).
- **Text.** Every text is :data:`FONT` points (``FONT * 4/3`` CSS px at the natural size), and
  nothing is smaller than :data:`MIN_FONT` points; a sub- or superscript of mathtext, drawn at
  :data:`SCRIPT` of its text's size, must still be at least :data:`MIN_SCRIPT_FONT` points, so
  that even an exponent is at least 10 CSS px on a desktop.
- **Vector.** In a notebook, :func:`use_style` makes the inline backend emit SVG only, so the
  figures are sharp at any zoom; the SVG's text is drawn as paths, the same on every device.
- **Legends outside the data**, below the axes (:func:`legend_below`), and names as the prose
  says them (:data:`TITLES`, :data:`BOUNDS`, :func:`label`), never function names.
- **Colours** of the algorithms from :data:`STYLE`, shared with the explorer.
"""

from __future__ import annotations

from .sweep import Sweep

__all__ = ["plot_sweep", "STYLE", "GPU_COLORS", "TITLES", "BOUNDS", "WIDTH", "FONT", "MIN_FONT",
           "MIN_SCRIPT_FONT", "RC", "use_style", "subplots", "legend_below", "label", "problems",
           "show"]

#: Colour and marker of each algorithm, shared by every figure.
STYLE = {
    "flash": dict(color="#1f77b4", marker="o"),
    "square_tiling": dict(color="#d62728", marker="s"),
    "standard": dict(color="#7f7f7f", marker="^"),
}

#: Colour of each GPU of :data:`ioattn.gpus.GPUS`, shared by every figure that compares them.
GPU_COLORS = {"T4": "#2ca02c", "A100": "#ff7f0e", "H100": "#9467bd", "H200": "#8c564b"}

#: Colour and marker of each algorithm of :mod:`ioattn.parallel` (the book's figures and the
#: explorer's panel "across P processors").
PARALLEL_STYLE = {"ring": dict(color="#6a3d9a", marker="o"),
                  "striped": dict(color="#7cb342", marker="v"),
                  "all_to_all": dict(color="#0f8b8d", marker="s"),
                  "grid": dict(color="#c2185b", marker="D"),
                  "zigzag": dict(color="#e65100", marker="^"),
                  "all_gather": dict(color="#5d4037", marker="P"),
                  "usp": dict(color="#1565c0", marker="X"),
                  "usp_zigzag": dict(color="#00838f", marker="*"),
                  "usp_grid": dict(color="#9e9d24", marker="p")}

#: How the prose and the readouts name each algorithm.
TITLES = {"flash": "FlashAttention", "square_tiling": "square tiling",
          "standard": "standard attention"}

#: How the prose names the lower bounds of :mod:`ioattn.bounds` (legends use these, not the
#: function names).
BOUNDS = {
    "lower_bound": "lower bound (standard matrix products)",
    "partition_lower": "M-partition bound",
    "reduction_lower": "reduction bound",
    "any_matmul_lower": "bound for any matrix multiplication",
    "trivial_lower": "trivial bound 4Nd",
    "matmul_lower": "matrix-product lower bound",
    "sparse_lower": "sparse lower bound",
}

#: Width of every figure, in inches (at 96 CSS px per inch: about 460 px).
WIDTH = 4.8
#: Height of one panel, in inches.
PANEL_HEIGHT = 3.1
#: The font size of every text, in points (1 pt = 4/3 CSS px at the natural size).
FONT = 11
#: Smallest font size of any text in a figure, in points.
MIN_FONT = 10
#: Size of a mathtext sub- or superscript relative to its text (matplotlib's shrink factor).
SCRIPT = 0.7
#: Smallest size of a sub- or superscript, in points: 7.5 pt is 10 CSS px.
MIN_SCRIPT_FONT = 7.5
#: The matplotlib settings of every figure.
RC = {
    "figure.figsize": (WIDTH, PANEL_HEIGHT),
    "figure.dpi": 100,
    "font.size": FONT,
    "axes.titlesize": FONT,
    "axes.labelsize": FONT,
    "xtick.labelsize": FONT,
    "ytick.labelsize": FONT,
    "legend.fontsize": FONT,
    "legend.title_fontsize": FONT,
    "figure.titlesize": FONT,
    "lines.markersize": 5,
    "svg.fonttype": "path",
    "svg.hashsalt": "ioattn",          # the same figure gives the same SVG, build after build
    "savefig.dpi": 200,                # a PNG (the CLI's --plot) at twice the screen's density
}

_ORDINAL = {"fa1": "FA1 order", "fa2": "FA2 order"}


def use_style() -> None:
    """Apply :data:`RC`, and, inside IPython, make the inline backend emit SVG only.

    Idempotent; :func:`subplots` calls it, so a figure cell needs nothing else.
    """
    import matplotlib

    matplotlib.rcParams.update(RC)
    try:
        from IPython import get_ipython
    except ImportError:                     # pragma: no cover - IPython is a book dependency
        return
    shell = get_ipython()
    if shell is None or "inline" not in matplotlib.get_backend():
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    # no date in the SVG, so an unchanged figure is an unchanged file
    set_matplotlib_formats("svg", metadata={"Date": None})


def subplots(nrows: int = 1, *, height: float = PANEL_HEIGHT, sharex: bool = False, **kwargs):
    """A figure in the book's style: ``nrows`` panels stacked vertically, :data:`WIDTH` wide.

    Parameters
    ----------
    nrows : int
        Number of panels, one above the other.
    height : float
        Height of each panel, in inches.
    sharex : bool
        Whether the panels share their x axis.
    **kwargs
        Passed to :func:`matplotlib.pyplot.subplots` (``gridspec_kw``, ``sharey``, ...).

    Returns
    -------
    fig : matplotlib.figure.Figure
    axes : matplotlib.axes.Axes or numpy.ndarray of Axes
        One Axes when ``nrows == 1``, else an array of ``nrows``.
    """
    import matplotlib.pyplot as plt

    use_style()
    return plt.subplots(nrows, 1, figsize=(WIDTH, height * nrows), layout="constrained",
                        sharex=sharex, **kwargs)


def legend_below(fig, axes=None, *, ncol: int = 1, **kwargs):
    """One legend for the figure, below its panels (outside the data).

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A figure made by :func:`subplots` (constrained layout makes room for the legend).
    axes : Axes or list of Axes, optional
        Whose labelled artists to list (default: all axes of ``fig``); a label is listed once.
    ncol : int
        Number of columns.
    **kwargs
        Passed to :meth:`matplotlib.figure.Figure.legend`.

    Returns
    -------
    matplotlib.legend.Legend
    """
    if axes is None:
        axes = fig.axes
    elif not isinstance(axes, (list, tuple)):
        axes = [axes]
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False,
                      **kwargs)


def label(name: str, **options) -> str:
    """The prose name of algorithm ``name`` run with ``options``.

    Examples
    --------
    >>> label("flash", variant="fa1")
    'FlashAttention (FA1 order)'
    >>> label("square_tiling", schedule="outer")
    'square tiling (outer schedule)'
    >>> label("standard")
    'standard attention'
    """
    words = []
    for key, value in options.items():
        if key == "variant":
            words.append(_ORDINAL.get(value, value))
        elif key == "schedule":
            words.append(f"{value} schedule")
        else:
            words.append(f"{key} {value}")
    title = TITLES.get(name, name)
    return title + (f" ({', '.join(words)})" if words else "")


def _has_script(text: str) -> bool:
    """Whether ``text`` has mathtext (between ``$`` signs) with a sub- or superscript."""
    parts = text.replace(r"\$", "").split("$")
    return any("^" in m or "_" in m for m in parts[1::2])


def _drawn_texts(fig) -> list:
    """The non-empty visible texts of ``fig``, without the tick labels of hidden axes."""
    from matplotlib.text import Text

    hidden = set()
    for ax in fig.axes:
        if not ax.axison:
            hidden.update(map(id, ax.get_xticklabels(which="both")))
            hidden.update(map(id, ax.get_yticklabels(which="both")))
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and id(t) not in hidden]


def problems(fig) -> list[str]:
    """What breaks the book's rules in ``fig``, in words (an empty list if nothing does).

    Checks that the figure is at most :data:`WIDTH` inches wide, that every visible text (tick
    labels, legends, titles, annotations) is at least :data:`MIN_FONT` points, its mathtext
    scripts at least :data:`MIN_SCRIPT_FONT`, and lies within the figure's width, and that no
    legend overlaps the data area of any axes (a colour bar counts as axes).
    """
    from matplotlib.legend import Legend

    out = []
    width = fig.get_size_inches()[0]
    if width > WIDTH + 1e-9:
        out.append(f"the figure is {width:g} in wide, more than {WIDTH:g}")
    fig.draw_without_rendering()
    texts = _drawn_texts(fig)
    for t in texts:
        size = t.get_fontsize()
        if size < MIN_FONT - 1e-9:
            out.append(f"text {t.get_text()!r} is {size:g} pt, less than {MIN_FONT} pt")
        elif _has_script(t.get_text()) and size * SCRIPT < MIN_SCRIPT_FONT - 1e-9:
            out.append(f"the scripts of {t.get_text()!r} are {size * SCRIPT:g} pt, "
                       f"less than {MIN_SCRIPT_FONT} pt")
    renderer = fig.canvas.get_renderer()
    page = fig.bbox.padded(1)
    ticks = set()
    for ax in fig.axes:
        ticks.update(map(id, ax.get_xticklabels(which="both") + ax.get_yticklabels(which="both")))
    for t in texts:
        if id(t) not in ticks and t.get_clip_box() is None:    # ticks: placed by the layout
            box = t.get_window_extent(renderer)
            if box.x0 < page.x0 or box.x1 > page.x1:
                out.append(f"text {t.get_text()!r} runs past the figure's edge")
    for leg in fig.findobj(Legend):
        if not leg.get_visible():
            continue
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            if box.overlaps(ax.get_window_extent(renderer)):
                out.append("a legend lies over the data of an axes")
                break
    return out


def show(fig) -> None:
    """Check ``fig`` against the book's rules (:func:`problems`), then show it.

    Raises
    ------
    ValueError
        If the figure breaks a rule: a figure that cannot be read fails the build.
    """
    import matplotlib.pyplot as plt

    found = problems(fig)
    if found:
        raise ValueError("figure not in the book's style: " + "; ".join(found))
    plt.show()


def plot_sweep(s: Sweep, ax=None):
    """Draw ``s``: exact I/O against the cache size ``M``, the lower bound, ``M = d^2``.

    Parameters
    ----------
    s : Sweep
        The sweep (forward or backward).
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure of :func:`subplots` (with its legend below) if None.

    Returns
    -------
    matplotlib.axes.Axes
    """
    new = ax is None
    if new:
        fig, ax = subplots(height=3.6)
    for name, totals in sorted(s.totals.items()):
        pts = [(M, t) for M, t in zip(s.Ms, totals) if t is not None]
        ax.plot(*zip(*pts), label=label(name, **s.options.get(name, {})), markersize=4,
                **STYLE.get(name, {}))
    lower = [(M, b) for M, b in zip(s.Ms, s.lower) if b > 0]
    if lower:
        ax.plot(*zip(*lower), "k--", lw=1, label=f"{BOUNDS['lower_bound']}, for programs")
    ax.axvline(s.d ** 2, color="k", lw=0.8, alpha=0.6)
    ax.annotate(r"$M = d^2$", (s.d ** 2, 1), xycoords=("data", "axes fraction"),
                xytext=(4, -14), textcoords="offset points")
    for c in s.crossovers:
        ax.axvline(c.M, color="#2ca02c", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="cache size M (entries)",
           ylabel="I/O (entries moved)")
    ax.set_title(f"Exact I/O of {s.what}\nN = {s.N}, d = {s.d}")
    if new:
        legend_below(ax.figure)
    else:
        ax.legend()
    return ax
