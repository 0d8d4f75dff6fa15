"""Pictures of red-blue pebble games on small graphs.

- :func:`layout`: a layered drawing of a DAG (layer = longest path from the inputs);
- :func:`draw`: one state of a game with matplotlib (red fill for a red pebble, a blue ring and
  tint for a blue one, grey for none);
- :func:`frames`: the states of a game after each move, replayed by
  :class:`~ioattn.pebble.game.PebbleGame`, so every move is checked against its rule;
- :func:`static_stepper`: a self-contained HTML snippet (one inline SVG, the states as JSON and a
  few lines of script) that steps through a game in a static page, with no kernel and nothing
  fetched from the network;
- :func:`stepper`: the same stepper as an ipywidgets widget, for a notebook with a live kernel.

>>> from ioattn.pebble import Graph
>>> g = Graph([("a", "c"), ("b", "c")])
>>> [f.move for f in frames(g, 3, [("read", "a"), ("read", "b"), ("compute", "c")])]
[('read', 'a'), ('read', 'b'), ('compute', 'c')]
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
from collections.abc import Iterator
from typing import NamedTuple

from .._optional import import_ipywidgets
from .game import PebbleGame
from .graph import Graph

__all__ = ["Frame", "draw", "frames", "label", "layers", "layout", "readout", "static_stepper",
           "stepper"]

#: Colours of the pictures: a red pebble, a blue pebble, no pebble, the vertex just moved.
RED, RED_EDGE = "#d62728", "#7f1414"
BLUE, BLUE_TINT = "#1f5fbf", "#cfe0f5"
GREY, GREY_EDGE = "#e3e3e3", "#9a9a9a"
HIGHLIGHT = "#f2a900"


# ---------------------------------------------------------------------------------- layout
def layers(graph: Graph) -> dict:
    """The layer of each vertex: 0 for a vertex with no parents, else one more than its
    parents' highest layer (the longest path from the inputs).

    Returns
    -------
    dict
        Vertex -> layer; a parent's layer is always below its child's.

    Examples
    --------
    >>> from ioattn.pebble import matmul_graph
    >>> sorted(set(layers(matmul_graph(1, 2, 1)).values()))
    [0, 1, 2]
    """
    layer: dict = {}
    for v in graph.order:                       # parents come first in a topological order
        ps = graph.parents(v)
        layer[v] = 1 + max(layer[p] for p in ps) if ps else 0
    return layer


def layout(graph: Graph, sweeps: int = 8) -> dict:
    """Positions for a layered drawing of ``graph``, left to right.

    Each vertex sits at ``x`` = its layer (:func:`layers`); the vertices of a layer are spread
    evenly, one unit apart and centred on ``y = 0``. They start in topological order and are
    reordered by the barycentre heuristic (each layer sorted by the mean position of its
    parents, then, sweeping back, of its children); of the orders seen, the one with the least
    total vertical edge length is kept. Everything is deterministic: the same graph always gets
    the same picture.

    Parameters
    ----------
    graph : Graph
        A small DAG.
    sweeps : int, optional
        Number of barycentre sweeps (alternately from the inputs and from the outputs).

    Returns
    -------
    dict
        Vertex -> ``(x, y)``; the first vertex of a layer has the largest ``y`` (it is drawn at
        the top).

    Examples
    --------
    >>> from ioattn.pebble import Graph
    >>> layout(Graph([("a", "c"), ("b", "c")]))
    {'a': (0, 0.5), 'b': (0, -0.5), 'c': (1, 0.0)}
    """
    layer = layers(graph)
    rows = [[] for _ in range(max(layer.values()) + 1)]
    for v in graph.order:
        rows[layer[v]].append(v)
    rank: dict = {}

    def place(row):
        for r, v in enumerate(row):
            rank[v] = r - (len(row) - 1) / 2

    for row in rows:
        place(row)
    edges = [(p, v) for v in graph.order for p in graph.parents(v)]

    def length():
        return sum(abs(rank[u] - rank[v]) for u, v in edges)

    best = (length(), dict(rank))
    for sweep in range(sweeps):
        down = sweep % 2 == 0
        order = range(1, len(rows)) if down else range(len(rows) - 2, -1, -1)
        for L in order:
            def key(v, down=down):
                nb = graph.parents(v) if down else graph.children(v)
                centre = sum(rank[u] for u in nb) / len(nb) if nb else rank[v]
                return (centre, rank[v])
            rows[L].sort(key=key)
            place(rows[L])
        if length() < best[0]:
            best = (length(), dict(rank))
    rank = best[1]
    return {v: (layer[v], -rank[v] + 0.0) for v in graph.order}     # + 0.0: no -0.0


def _bend(pos, u, v):
    """The control point of a quadratic curve for the edge ``u -> v``, or None for a straight line.

    An edge spanning more than one layer is bowed (away from the middle row) so that it does not
    run straight through the vertices of the layers it crosses.
    """
    (x0, y0), (x1, y1) = pos[u], pos[v]
    span = x1 - x0
    if span <= 1:
        return None
    mid = (y0 + y1) / 2
    bow = min(0.5 * (span - 1), 1.2)
    return ((x0 + x1) / 2, mid + (bow if mid >= 0 else -bow))


def _curve(p0, c, p1, steps=16):
    """Points of the quadratic Bezier curve from ``p0`` to ``p1`` with control point ``c``."""
    pts = []
    for i in range(steps + 1):
        t = i / steps
        a, b, w = (1 - t) ** 2, 2 * t * (1 - t), t * t
        pts.append((a * p0[0] + b * c[0] + w * p1[0], a * p0[1] + b * c[1] + w * p1[1]))
    return pts


def label(v) -> str:
    """A short label: the kind followed by the indices, e.g. ``("QK", 0, 0, 1)`` -> ``"QK001"``.

    Indices are run together when all are single digits and separated by commas otherwise;
    any other vertex id is shown with ``str``.

    Examples
    --------
    >>> label(("Q", 0, 0)), label(("exp", 0, 1)), label(("sum", 10, 2, 1)), label("a")
    ('Q00', 'exp01', 'sum10,2,1', 'a')
    """
    if isinstance(v, tuple) and v and isinstance(v[0], str):
        rest = [str(x) for x in v[1:]]
        sep = "" if all(len(x) == 1 for x in rest) else ","
        return v[0] + sep.join(rest)
    return str(v)


# ---------------------------------------------------------------------------------- states
class Frame(NamedTuple):
    """The state of a game after a move.

    Attributes
    ----------
    move : (str, vertex) or None
        The move just made (``None`` for the start of the game).
    red, blue : frozenset
        The vertices holding a red (cache) or blue (slow memory) pebble.
    reads, writes : int
        The I/O so far.
    """

    move: tuple | None
    red: frozenset
    blue: frozenset
    reads: int
    writes: int

    @property
    def io(self) -> int:
        """``reads + writes``."""
        return self.reads + self.writes


def _frame(game: PebbleGame, move) -> Frame:
    return Frame(move, frozenset(game.red), frozenset(game.blue), game.reads, game.writes)


def frames(graph: Graph, M: int, moves, start: bool = False) -> Iterator[Frame]:
    """Replay ``moves`` with :class:`~ioattn.pebble.game.PebbleGame` and yield each state.

    Parameters
    ----------
    graph : Graph
        The graph played on.
    M : int
        Red pebbles.
    moves : iterable of (str, vertex)
        The game, e.g. ``PebbleGame.moves`` or the ``moves`` of an optimum.
    start : bool, optional
        Also yield the state before the first move (``move=None``) first.

    Yields
    ------
    Frame
        The state after each move, in order.

    Raises
    ------
    ioattn.pebble.IllegalMove
        When a move breaks a rule (raised as that move is reached).
    """
    game = PebbleGame(graph, M)
    if start:
        yield _frame(game, None)
    for kind, v in moves:
        game.play(kind, v)
        yield _frame(game, (kind, v))


def readout(k: int, n: int, frame: Frame, M: int) -> str:
    """The line a stepper shows under the picture at move ``k`` of ``n``.

    Examples
    --------
    >>> from ioattn.pebble import Graph
    >>> g = Graph([("a", "c"), ("b", "c")])
    >>> readout(1, 4, next(frames(g, 3, [("read", "a")])), 3)
    "move 1 of 4: read 'a' \u2014 reads 1, writes 0, red pebbles 1/3"
    """
    what = "start" if frame.move is None else f"{frame.move[0]} {frame.move[1]!r}"
    return (f"move {k} of {n}: {what} \u2014 reads {frame.reads}, writes {frame.writes}, "
            f"red pebbles {len(frame.red)}/{M}")


# ---------------------------------------------------------------------------------- matplotlib
def draw(graph: Graph, red, blue, ax=None, highlight=None, labels: bool = True, pos=None,
         legend: bool = True):
    """Draw one state of a game with matplotlib.

    The graph is laid out by :func:`layout`, inputs on the left; an edge that spans several
    layers is drawn as an arc, so that it does not run through the vertices in between.

    Parameters
    ----------
    graph : Graph
        The graph (small: every vertex is drawn and labelled).
    red, blue : collection of vertices
        The vertices with a red pebble (drawn filled red) and with a blue one (a thick blue ring,
        tinted blue when not also red). A vertex with neither is grey.
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new figure sized to the graph.
    highlight : vertex, optional
        The vertex of the current move, circled in amber.
    labels : bool, optional
        Label each vertex with :func:`label`.
    pos : dict, optional
        Positions (default: :func:`layout`); pass them in when drawing many states.
    legend : bool, optional
        Explain the colours under the picture.

    Returns
    -------
    matplotlib.axes.Axes
    """
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    pos = layout(graph) if pos is None else pos
    if ax is None:
        import matplotlib.pyplot as plt

        xs = [p[0] for p in pos.values()]
        ys = [p[1] for p in pos.values()]
        width = 1.4 * (max(xs) - min(xs) + 1) + 0.6
        height = 0.55 * (max(ys) - min(ys) + 1) + (1.0 if legend else 0.4)
        _, ax = plt.subplots(figsize=(width, height))
    red, blue = set(red), set(blue)
    order = graph.order
    segments = []
    for v in order:
        for p in graph.parents(v):
            c = _bend(pos, p, v)
            segments.append((pos[p], pos[v]) if c is None else _curve(pos[p], c, pos[v]))
    ax.add_collection(LineCollection(segments, colors=GREY_EDGE, linewidths=0.7, zorder=1))
    if highlight is not None:
        x, y = pos[highlight]
        ax.scatter([x], [y], s=420, facecolors="none", edgecolors=HIGHLIGHT, linewidths=3,
                   zorder=2)
    xy = [pos[v] for v in order]
    fill = [RED if v in red else BLUE_TINT if v in blue else GREY for v in order]
    ring = [BLUE if v in blue else RED_EDGE if v in red else GREY_EDGE for v in order]
    width = [2.6 if v in blue else 0.8 for v in order]
    ax.scatter([p[0] for p in xy], [p[1] for p in xy], s=150, c=fill, edgecolors=ring,
               linewidths=width, zorder=3)
    if labels:
        for v in order:
            ax.annotate(label(v), pos[v], xytext=(0, 8), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, zorder=4)
    if legend:
        def dot(face, edge, lw):
            return Line2D([], [], ls="", marker="o", ms=9, mfc=face, mec=edge, mew=lw)
        handles = [dot(RED, RED_EDGE, 0.8), dot(BLUE_TINT, BLUE, 2.6), dot(RED, BLUE, 2.6),
                   dot(GREY, GREY_EDGE, 0.8)]
        names = ["red pebble", "blue pebble", "red and blue", "no pebble"]
        if highlight is not None:
            handles.append(Line2D([], [], ls="", marker="o", ms=13, mfc="none", mec=HIGHLIGHT,
                                  mew=2.5))
            names.append("just moved")
        ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 0), ncol=len(names),
                  frameon=False, fontsize=7, handletextpad=0.2, columnspacing=1.0)
    ax.set_aspect("auto")
    ax.margins(0.08, 0.12)
    ax.autoscale_view()
    ax.axis("off")
    return ax


# ---------------------------------------------------------------------------------- static HTML
_ids = itertools.count()

# Pebble colours by state code (bit 1: red pebble, bit 2: blue pebble), in the SVG and the script.
_FILL = (GREY, RED, BLUE_TINT, RED)
_STROKE = (GREY_EDGE, RED_EDGE, BLUE, BLUE)
_WIDTH = ("1", "1", "3", "3")

_SCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var data = JSON.parse(root.querySelector("script.pebble-states").textContent);
  var dots = root.querySelectorAll("circle.pebble-vertex");
  var halo = root.querySelector("circle.pebble-halo");
  var slider = root.querySelector("input.pebble-move");
  var out = root.querySelector(".pebble-readout");
  var play = root.querySelector("button.pebble-play");
  var FILL = %(fill)s, STROKE = %(stroke)s, WIDTH = %(width)s;
  var n = data.moves.length, timer = null;
  function show(k) {
    k = Math.max(0, Math.min(n, Math.round(k)));
    slider.value = k;
    var s = data.states[k], red = 0;
    for (var i = 0; i < dots.length; i++) {
      var c = +s.charAt(i);
      if (c & 1) red++;
      dots[i].setAttribute("fill", FILL[c]);
      dots[i].setAttribute("stroke", STROKE[c]);
      dots[i].setAttribute("stroke-width", WIDTH[c]);
    }
    var what = "start";
    if (k > 0) {
      var m = data.moves[k - 1], dot = dots[m[1]];
      what = m[0] + " " + data.vertices[m[1]];
      halo.setAttribute("cx", dot.getAttribute("cx"));
      halo.setAttribute("cy", dot.getAttribute("cy"));
      halo.setAttribute("visibility", "visible");
    } else {
      halo.setAttribute("visibility", "hidden");
    }
    out.textContent = "move " + k + " of " + n + ": " + what + " \\u2014 reads " + data.reads[k] +
      ", writes " + data.writes[k] + ", red pebbles " + red + "/" + data.M;
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; play.textContent = "play"; }
  }
  slider.addEventListener("input", function () { stop(); show(+slider.value); });
  root.querySelector("button.pebble-prev").addEventListener("click", function () {
    stop(); show(+slider.value - 1);
  });
  root.querySelector("button.pebble-next").addEventListener("click", function () {
    stop(); show(+slider.value + 1);
  });
  play.addEventListener("click", function () {
    if (timer !== null) { stop(); return; }
    if (+slider.value >= n) show(0);
    play.textContent = "pause";
    timer = setInterval(function () {
      if (+slider.value >= n) { stop(); return; }
      show(+slider.value + 1);
    }, %(interval)d);
  });
  show(+slider.value);
})();"""


def _code(v, red, blue) -> int:
    return (v in red) + 2 * (v in blue)


def _json_in_html(obj) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def static_stepper(graph: Graph, M: int, moves, *, interval: int = 400, x_step: int = 96,
                   y_step: int = 40) -> str:
    """A self-contained HTML stepper through a game, for a static page.

    One inline SVG of the graph (positions from :func:`layout`), a range input labelled "move",
    prev/next/play buttons and a readout line (:func:`readout`). The states are embedded as JSON
    in a ``<script type="application/json" class="pebble-states">`` element and a few lines of
    inline script recolour the SVG's circles; without script the picture shows the start. No
    external asset, no network access.

    The JSON object has ``M``; ``vertices`` (the ``repr`` of each vertex, in the SVG's circle
    order, which is ``graph.order``); ``moves``, a list of ``[kind, vertex index]``; and, with
    one entry per position ``k = 0 .. len(moves)`` (the start, then after each move),
    ``states`` (a string with one digit per vertex: 1 for a red pebble plus 2 for a blue one),
    ``reads`` and ``writes``.

    Parameters
    ----------
    graph : Graph
        A small graph.
    M : int
        Red pebbles; every move is checked by :class:`~ioattn.pebble.game.PebbleGame`.
    moves : iterable of (str, vertex)
        The game.
    interval : int, optional
        Milliseconds between moves when playing.
    x_step, y_step : int, optional
        Pixels between layers and between the vertices of a layer.

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).
    """
    moves = list(moves)
    states = list(frames(graph, M, moves, start=True))
    n = len(moves)
    order = graph.order
    index = graph.index
    data = {
        "M": M,
        "vertices": [repr(v) for v in order],
        "moves": [[kind, index[v]] for kind, v in moves],
        "states": ["".join(str(_code(v, f.red, f.blue)) for v in order) for f in states],
        "reads": [f.reads for f in states],
        "writes": [f.writes for f in states],
    }
    payload = _json_in_html(data)
    uid = f"pebble-stepper-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"

    pos = layout(graph)
    top = max(p[1] for p in pos.values())
    bottom = min(p[1] for p in pos.values())
    pad_x, pad_top = 40, 30

    def px(x, y):
        return round(pad_x + x * x_step), round(pad_top + (top - y) * y_step)

    def xy(v):
        return px(*pos[v])

    def edge(u, v):
        c = _bend(pos, u, v)
        if c is None:
            return "M{} {}L{} {}".format(*xy(u), *xy(v))
        return "M{} {}Q{} {} {} {}".format(*xy(u), *px(*c), *xy(v))

    width = 2 * pad_x + max(p[0] for p in pos.values()) * x_step
    legend_y = pad_top + round((top - bottom) * y_step) + 34
    height = legend_y + 16
    start = states[0]
    path = "".join(edge(p, v) for v in order for p in graph.parents(v))
    circles = "".join(
        '<circle class="pebble-vertex" cx="{}" cy="{}" r="8" fill="{}" stroke="{}" '
        'stroke-width="{}"><title>{}</title></circle>'.format(
            *xy(v), _FILL[c], _STROKE[c], _WIDTH[c], html.escape(repr(v)))
        for v in order for c in [_code(v, start.red, start.blue)])
    texts = "".join('<text x="{}" y="{}">{}</text>'.format(xy(v)[0], xy(v)[1] - 12,
                                                           html.escape(label(v)))
                    for v in order)
    keys = [(RED, RED_EDGE, 1, "red pebble (cache)"), (BLUE_TINT, BLUE, 3, "blue pebble (slow "
            "memory)"), (RED, BLUE, 3, "both"), (GREY, GREY_EDGE, 1, "none")]
    legend, x = [], pad_x - 8
    for fill, stroke, w, name in keys:
        legend.append(f'<circle cx="{x}" cy="{legend_y}" r="6" fill="{fill}" stroke="{stroke}" '
                      f'stroke-width="{w}"/><text x="{x + 11}" y="{legend_y + 4}" '
                      f'text-anchor="start">{name}</text>')
        x += 22 + 6 * len(name)
    legend.append(f'<circle cx="{x}" cy="{legend_y}" r="9" fill="none" stroke="{HIGHLIGHT}" '
                  f'stroke-width="3"/><text x="{x + 14}" y="{legend_y + 4}" '
                  'text-anchor="start">the vertex just moved</text>')
    width = max(width, x + 14 + 6 * len("the vertex just moved") + 10)
    script = _SCRIPT % {"id": uid, "fill": json.dumps(_FILL), "stroke": json.dumps(_STROKE),
                        "width": json.dumps(_WIDTH), "interval": interval}
    svg = (
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="the graph, {len(order)} vertices, with the pebbles of the current move" '
        'style="max-width:100%;height:auto;display:block;background:#fff;border-radius:4px">'
        f'<path d="{path}" fill="none" stroke="{GREY_EDGE}" stroke-width="0.8"/>'
        f'<circle class="pebble-halo" cx="0" cy="0" r="13" fill="none" stroke="{HIGHLIGHT}" '
        'stroke-width="4" visibility="hidden"/>'
        f'{circles}'
        '<g font-family="sans-serif" font-size="10" text-anchor="middle" fill="#222" '
        'stroke="#fff" stroke-width="3" paint-order="stroke">'
        f'{texts}</g>'
        '<g font-family="sans-serif" font-size="10" fill="#222">'
        f'{"".join(legend)}</g></svg>'
    )
    controls = (
        '<div class="pebble-controls" style="display:flex;gap:0.5em;align-items:center;'
        'flex-wrap:wrap;margin:0.4em 0">'
        '<button type="button" class="pebble-prev">prev</button>'
        '<button type="button" class="pebble-next">next</button>'
        '<button type="button" class="pebble-play">play</button>'
        f'<label style="display:flex;gap:0.4em;align-items:center">move '
        f'<input type="range" class="pebble-move" min="0" max="{n}" value="0" step="1" '
        'style="width:22em;max-width:60vw"></label></div>'
    )
    text = html.escape(readout(0, n, start, M), quote=False)
    return (
        f'<div class="pebble-stepper" id="{uid}" style="margin:0.5em 0 1em">'
        f'{svg}{controls}'
        '<div class="pebble-readout" aria-live="polite" '
        f'style="font-family:monospace;font-size:0.9em">{text}</div>'
        f'<script type="application/json" class="pebble-states">{payload}</script>'
        f'<script>{script}</script></div>'
    )


# ---------------------------------------------------------------------------------- widget
def stepper(graph: Graph, M: int, moves, *, interval: int = 400, dpi: int = 90):
    """The stepper as an ipywidgets widget, redrawn with :func:`draw`; for a live kernel.

    A slider labelled "move", a play button, the :func:`readout` line and the picture (an
    ``Output`` widget showing a PNG rendered by :func:`draw`).

    Parameters
    ----------
    graph : Graph
        A small graph.
    M : int
        Red pebbles; every move is checked by :class:`~ioattn.pebble.game.PebbleGame`.
    moves : iterable of (str, vertex)
        The game.
    interval : int, optional
        Milliseconds between moves when playing.
    dpi : int, optional
        Resolution of the pictures.

    Returns
    -------
    ipywidgets.VBox
        The widget; its ``children[0].children[1]`` is the slider.

    Raises
    ------
    ImportError
        When ipywidgets is not installed (:func:`static_stepper` needs no kernel and no
        widgets).
    """
    widgets = import_ipywidgets("ioattn.pebble.view.stepper", "ioattn.pebble.view.static_stepper")
    import io

    from IPython.display import Image, display
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    moves = list(moves)
    states = list(frames(graph, M, moves, start=True))
    n = len(moves)
    pos = layout(graph)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    figsize = (1.4 * (max(xs) + 1) + 0.6, 0.55 * (max(ys) - min(ys) + 1) + 1.0)

    slider = widgets.IntSlider(value=0, min=0, max=n, step=1, description="move",
                               continuous_update=True)
    play = widgets.Play(value=0, min=0, max=n, step=1, interval=interval, description="play")
    widgets.jslink((play, "value"), (slider, "value"))
    line = widgets.Label(value=readout(0, n, states[0], M))
    out = widgets.Output()

    def render(k):
        f = states[k]
        fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        draw(graph, f.red, f.blue, ax=fig.add_subplot(), pos=pos,
             highlight=None if f.move is None else f.move[1])
        fig.subplots_adjust(0, 0.12, 1, 1)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        line.value = readout(k, n, f, M)
        with out:
            out.clear_output(wait=True)
            display(Image(data=buf.getvalue(), format="png"))

    slider.observe(lambda change: render(change["new"]), names="value")
    render(0)
    return widgets.VBox([widgets.HBox([play, slider]), line, out])
