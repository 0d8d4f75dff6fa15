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

__all__ = ["TAGS", "Frame", "draw", "frames", "label", "layers", "layout", "readout",
           "static_stepper", "stepper", "tally", "why"]

#: Colours of the pictures: a red pebble, a blue pebble, no pebble, the vertex just moved.
RED, RED_EDGE = "#d62728", "#7f1414"
BLUE, BLUE_TINT = "#1f5fbf", "#cfe0f5"
GREY, GREY_EDGE = "#e3e3e3", "#9a9a9a"
HIGHLIGHT = "#f2a900"
#: The ring around a vertex being recomputed.
RECOMPUTE = "#9c27b0"


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


#: Why a move is made, by tag (:func:`why`), as the steppers explain it.
TAGS = {
    "input read": "an input read into the cache for the first time (one I/O)",
    "input re-read": "an input read again after its red pebble was removed (one I/O)",
    "read-back": "a value written to slow memory earlier, read back into the cache (one I/O)",
    "spill": "a value that is not an output written to slow memory, to be read back later "
             "(one I/O)",
    "unread write": "a value that is not an output written to slow memory and never read "
                    "back (one I/O, wasted)",
    "output write": "an output written to slow memory (one I/O)",
    "compute": "a value computed for the first time from its operands in the cache (free)",
    "recompute": "a value computed again: it was computed before and its red pebble removed "
                 "(free, but it needs its operands in the cache again)",
    "delete": "a red pebble removed, freeing a place in the cache (free)",
}
#: The tags that cost one I/O, reads then writes.
READ_TAGS = ("input read", "input re-read", "read-back")
WRITE_TAGS = ("spill", "unread write", "output write")


def why(graph: Graph, moves) -> list[str]:
    """The reason of each move of a game, one tag of :data:`TAGS` per move, from the game alone.

    A read is an *input read* the first time an input is read, an *input re-read* after that,
    and a *read-back* for any other vertex (its blue pebble came from a write). A write is an
    *output write* for an output, a *spill* for another vertex that is read later in the game,
    an *unread write* otherwise. A compute is a *recompute* when the vertex was computed
    before. The moves are replayed by :class:`~ioattn.pebble.game.PebbleGame`, so an illegal
    one raises :class:`~ioattn.pebble.IllegalMove`.

    Examples
    --------
    >>> from ioattn.pebble import Graph
    >>> g = Graph([("a", "b"), ("b", "c")])
    >>> why(g, [("read", "a"), ("compute", "b"), ("write", "b"), ("delete", "b"),
    ...         ("read", "b"), ("compute", "c"), ("delete", "c"), ("compute", "c"),
    ...         ("write", "c")])       # doctest: +NORMALIZE_WHITESPACE
    ['input read', 'compute', 'spill', 'delete', 'read-back', 'compute', 'delete',
     'recompute', 'output write']
    """
    moves = [tuple(m) for m in moves]
    game = PebbleGame(graph, max(1, len(graph)))        # rules only: the budget is checked
    for kind, v in moves:                              # by frames()
        game.play(kind, v)
    outputs = set(graph.outputs)
    read_after = [set() for _ in range(len(moves) + 1)]   # vertices read after move k
    for k in range(len(moves) - 1, -1, -1):
        read_after[k] = read_after[k + 1] | ({moves[k][1]} if moves[k][0] == "read" else set())
    tags, seen_read, seen_compute = [], set(), set()
    for k, (kind, v) in enumerate(moves):
        if kind == "read":
            tag = ("input re-read" if v in seen_read else "input read") \
                if graph.is_input(v) else "read-back"
            seen_read.add(v)
        elif kind == "write":
            tag = "output write" if v in outputs else \
                "spill" if v in read_after[k + 1] else "unread write"
        elif kind == "compute":
            tag = "recompute" if v in seen_compute else "compute"
            seen_compute.add(v)
        else:
            tag = "delete"
        tags.append(tag)
    return tags


def readout(k: int, n: int, frame: Frame, M: int, tag: str | None = None) -> str:
    """The line a stepper shows under the picture at move ``k`` of ``n``: the move, with the
    vertex named as the drawing names it (:func:`label`) and its reason (``tag``, from
    :func:`why`, unless it only repeats the move: ``compute``, ``delete``), then the I/O so
    far.

    Examples
    --------
    >>> from ioattn.pebble import Graph
    >>> g = Graph([("a", "c"), ("b", "c")])
    >>> readout(1, 4, next(frames(g, 3, [("read", "a")])), 3, "input read")
    'move 1 of 4: read a (input read) \u2014 reads 1, writes 0, red pebbles 1/3'
    """
    if frame.move is None:
        what = "start"
    else:
        kind = frame.move[0]
        what = f"{kind} {label(frame.move[1])}" + (f" ({tag})" if tag and tag != kind else "")
    return (f"move {k} of {n}: {what} \u2014 reads {frame.reads}, writes {frame.writes}, "
            f"red pebbles {len(frame.red)}/{M}")


def tally(tags) -> str:
    """What the I/O so far was for, from the tags of the moves made (:func:`why`).

    >>> tally(["input read", "compute", "spill", "read-back", "recompute"])
    'so far: 1 input read, 0 input re-reads, 1 read-back, 1 spill, 0 output writes; 1 recompute'
    """
    count = {t: 0 for t in TAGS}
    for t in tags:
        count[t] += 1

    def n(t):
        c = count[t]
        return f"{c} {t}" + ("" if c == 1 else "s")

    parts = [n(t) for t in READ_TAGS + WRITE_TAGS if t != "unread write" or count[t]]
    return f"so far: {', '.join(parts)}; {n('recompute')}"


# ---------------------------------------------------------------------------------- matplotlib
def draw(graph: Graph, red, blue, ax=None, highlight=None, labels: bool = True, pos=None,
         legend: bool = True, recompute: bool = False):
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
    recompute : bool, optional
        The current move recomputes ``highlight``: circle it in purple, dashed.

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
    for seg in segments:                     # an arrowhead at the child's end of each edge
        ax.annotate("", xy=seg[-1], xytext=seg[-5] if len(seg) > 4 else seg[0],
                    arrowprops=dict(arrowstyle="-|>,head_length=0.5,head_width=0.22",
                                    color=GREY_EDGE, lw=0.7, shrinkA=0, shrinkB=6.5),
                    zorder=1)
    if highlight is not None:
        x, y = pos[highlight]
        ax.scatter([x], [y], s=420, facecolors="none", linestyles="--" if recompute else "-",
                   edgecolors=RECOMPUTE if recompute else HIGHLIGHT, linewidths=3, zorder=2)
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
#: Radius of a vertex and the font size of the labels, in CSS pixels at the natural size.
_RADIUS, _FONT, _CHAR = 8, 11, 6.4
_TOUCH = "min-height:40px;min-width:44px;padding:0 0.8em"

_SCRIPT = """(function () {
  var root = document.getElementById("%(id)s");
  if (!root) return;
  var data = JSON.parse(root.querySelector("script.pebble-states").textContent);
  var svgs = root.querySelectorAll("svg.pebble-graph");
  var slider = root.querySelector("input.pebble-move");
  var out = root.querySelector(".pebble-readout"), tally = root.querySelector(".pebble-tally");
  var tag = root.querySelector(".pebble-tag");
  var play = root.querySelector("button.pebble-play");
  var FILL = %(fill)s, STROKE = %(stroke)s, WIDTH = %(width)s;
  var HIGHLIGHT = "%(highlight)s", RECOMPUTE = "%(recompute)s";
  var n = data.moves.length, timer = null;
  function show(k) {
    k = Math.max(0, Math.min(n, Math.round(k)));
    slider.value = k;
    var s = data.states[k], m = k > 0 ? data.moves[k - 1] : null;
    var again = k > 0 && data.tags[k - 1] === "recompute";
    for (var g = 0; g < svgs.length; g++) {
      var dots = svgs[g].querySelectorAll("circle.pebble-vertex");
      var halo = svgs[g].querySelector("circle.pebble-halo");
      for (var i = 0; i < dots.length; i++) {
        var c = +s.charAt(i);
        dots[i].setAttribute("fill", FILL[c]);
        dots[i].setAttribute("stroke", STROKE[c]);
        dots[i].setAttribute("stroke-width", WIDTH[c]);
      }
      if (m) {
        halo.setAttribute("cx", dots[m[1]].getAttribute("cx"));
        halo.setAttribute("cy", dots[m[1]].getAttribute("cy"));
        halo.setAttribute("stroke", again ? RECOMPUTE : HIGHLIGHT);
        halo.setAttribute("stroke-dasharray", again ? "4 3" : "none");
        halo.setAttribute("visibility", "visible");
      } else {
        halo.setAttribute("visibility", "hidden");
      }
    }
    out.textContent = data.texts[k];
    tally.textContent = data.tallies[k];
    tag.textContent = k > 0 ? data.tags[k - 1] : "";
    tag.setAttribute("data-tag", k > 0 ? data.tags[k - 1] : "");
    tag.style.background = again ? RECOMPUTE : "#555";
    tag.style.display = k > 0 ? "inline-block" : "none";
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; play.textContent = "play"; }
  }
  function fit() {                  /* the upright drawing when the wide one does not fit */
    if (svgs.length < 2 || !root.clientWidth) return;
    var wide = root.clientWidth >= +svgs[0].getAttribute("width");
    svgs[0].style.display = wide ? "block" : "none";
    svgs[1].style.display = wide ? "none" : "block";
  }
  slider.addEventListener("input", function () { stop(); show(+slider.value); });
  root.querySelector("button.pebble-prev").addEventListener("click", function () {
    stop(); show(+slider.value - 1);
  });
  root.querySelector("button.pebble-next").addEventListener("click", function () {
    stop(); show(+slider.value + 1);
  });
  root.querySelector("button.pebble-reset").addEventListener("click", function () {
    stop(); show(0);
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
  if (typeof window !== "undefined" && window.addEventListener)
    window.addEventListener("resize", fit);
  fit();
  show(+slider.value);
})();"""


def _code(v, red, blue) -> int:
    return (v in red) + 2 * (v in blue)


def _json_in_html(obj) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _svg(graph: Graph, pos: dict, start: Frame, uid: str, kind: str, step: tuple,
         upright: bool) -> str:
    """One drawing of the graph: layers left to right, or top to bottom when ``upright``;
    ``step`` is the pixels between layers and between the vertices of a layer."""
    order = graph.order
    top = max(p[1] for p in pos.values())
    pad_x, pad_top = 36, 26
    along, across = step

    def px(x, y):                       # layout coordinates -> pixels
        if upright:
            return round(pad_x + (top - y) * across), round(pad_top + x * along)
        return round(pad_x + x * along), round(pad_top + (top - y) * across)

    def end(p0, p1):                    # stop short of the child's circle, for the arrowhead
        dx, dy = p1[0] - p0[0], p1[1] - p0[1]
        r = (dx * dx + dy * dy) ** 0.5 or 1
        return round(p1[0] - dx * (_RADIUS + 1) / r, 1), round(p1[1] - dy * (_RADIUS + 1) / r, 1)

    def edge(u, v):
        a, b = px(*pos[u]), px(*pos[v])
        c = _bend(pos, u, v)
        if c is None:
            return "M{} {}L{} {}".format(*a, *end(a, b))
        c = px(*c)
        return "M{} {}Q{} {} {} {}".format(*a, *c, *end(c, b))

    xs = [px(*p)[0] for p in pos.values()]
    ys = [px(*p)[1] for p in pos.values()]
    width, height = max(xs) + pad_x, max(ys) + 16
    arrow = f"{uid}-{kind}"
    paths = "".join(f'<path d="{edge(p, v)}" marker-end="url(#{arrow})"/>'
                    for v in order for p in graph.parents(v))
    circles = "".join(
        '<circle class="pebble-vertex" cx="{}" cy="{}" r="{}" fill="{}" stroke="{}" '
        'stroke-width="{}"><title>{}</title></circle>'.format(
            *px(*pos[v]), _RADIUS, _FILL[c], _STROKE[c], _WIDTH[c], html.escape(label(v)))
        for v in order for c in [_code(v, start.red, start.blue)])
    texts = "".join('<text x="{}" y="{}">{}</text>'.format(px(*pos[v])[0], px(*pos[v])[1] - 12,
                                                           html.escape(label(v)))
                    for v in order)
    display = "none" if upright else "block"
    return (
        f'<svg class="pebble-graph" data-layout="{kind}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" '
        f'aria-label="the graph, {len(order)} vertices, with the pebbles of the current move" '
        f'style="max-width:100%;height:auto;display:{display};background:#fff;border-radius:4px">'
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0 1L10 5L0 9Z" '
        f'fill="{GREY_EDGE}"/></marker></defs>'
        f'<g fill="none" stroke="{GREY_EDGE}" stroke-width="0.9">{paths}</g>'
        f'<circle class="pebble-halo" cx="0" cy="0" r="13" fill="none" stroke="{HIGHLIGHT}" '
        'stroke-width="4" visibility="hidden"/>'
        f'{circles}'
        f'<g font-family="sans-serif" font-size="{_FONT}" text-anchor="middle" fill="#222" '
        'stroke="#fff" stroke-width="3" paint-order="stroke">'
        f'{texts}</g></svg>'
    )


def _dot(fill, stroke, w, r=6, dash="none"):
    return (f'<svg width="22" height="22" viewBox="0 0 22 22" aria-hidden="true" '
            f'style="flex:none"><circle cx="11" cy="11" r="{r}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{w}" stroke-dasharray="{dash}"/></svg>')


def static_stepper(graph: Graph, M: int, moves, *, interval: int = 400, x_step: int = 96,
                   y_step: int = 40) -> str:
    """A self-contained HTML stepper through a game, for a static page.

    The graph drawn twice (positions from :func:`layout`, arrowheads on the edges): layers left
    to right, and layers top to bottom for a narrow screen (the script shows the upright one
    when the wide one does not fit); under it a legend, reset/prev/next/play buttons (each at
    least 40 px high, for fingers), a range input labelled "move", the move's reason as a tag
    (:func:`why`: input read, input re-read, read-back, spill, output write, compute,
    recompute, delete; a recompute is also ringed in purple, dashed) and two lines: the
    :func:`readout` (vertices named as the drawing names them, :func:`label`) and the
    :func:`tally` of the I/O so far. The states, tags and lines are computed here and
    embedded as JSON in a ``<script type="application/json" class="pebble-states">`` element;
    a few lines of inline script recolour the circles. Without script the picture shows the
    start. No external asset, no network access.

    The JSON object has ``M``; ``vertices`` and ``labels`` (the ``repr`` and the :func:`label`
    of each vertex, in the SVG's circle order, which is ``graph.order``); ``moves``, a list of
    ``[kind, vertex index]``;
    ``tags``, the :func:`why` of each move; and, with one entry per position
    ``k = 0 .. len(moves)`` (the start, then after each move), ``states`` (a string with one
    digit per vertex: 1 for a red pebble plus 2 for a blue one), ``reads``, ``writes``,
    ``texts`` (the :func:`readout`) and ``tallies`` (the :func:`tally`).

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
        Pixels between layers and between the vertices of a layer, in the wide drawing.

    Returns
    -------
    str
        The HTML snippet (e.g. for ``IPython.display.HTML``).
    """
    moves = [tuple(m) for m in moves]
    states = list(frames(graph, M, moves, start=True))
    tags = why(graph, moves)
    n = len(moves)
    order = graph.order
    index = graph.index
    data = {
        "M": M,
        "vertices": [repr(v) for v in order],
        "labels": [label(v) for v in order],
        "moves": [[kind, index[v]] for kind, v in moves],
        "tags": tags,
        "states": ["".join(str(_code(v, f.red, f.blue)) for v in order) for f in states],
        "reads": [f.reads for f in states],
        "writes": [f.writes for f in states],
        "texts": [readout(k, n, f, M, tags[k - 1] if k else None) for k, f in enumerate(states)],
        "tallies": [tally(tags[:k]) for k in range(n + 1)],
    }
    payload = _json_in_html(data)
    uid = f"pebble-stepper-{hashlib.sha1(payload.encode()).hexdigest()[:10]}-{next(_ids)}"
    pos = layout(graph)
    start = states[0]
    widest = max(len(label(v)) for v in order)
    upright_step = (64, max(40, round(_CHAR * widest + 10)))
    svgs = (_svg(graph, pos, start, uid, "wide", (x_step, y_step), False)
            + _svg(graph, pos, start, uid, "upright", upright_step, True))
    keys = [(_dot(RED, RED_EDGE, 1), "red pebble: in the cache"),
            (_dot(BLUE_TINT, BLUE, 3), "blue pebble: in slow memory"),
            (_dot(RED, BLUE, 3), "both"), (_dot(GREY, GREY_EDGE, 1), "none"),
            (_dot("none", HIGHLIGHT, 3, 9), "the vertex just moved"),
            (_dot("none", RECOMPUTE, 3, 9, "4 3"), "just recomputed")]
    legend = "".join(
        '<span style="display:inline-flex;gap:0.3em;align-items:center;margin:0 0.9em 0.2em 0">'
        f'{svg}<span>{text}</span></span>' for svg, text in keys)
    script = _SCRIPT % {"id": uid, "fill": json.dumps(_FILL), "stroke": json.dumps(_STROKE),
                        "width": json.dumps(_WIDTH), "interval": interval,
                        "highlight": HIGHLIGHT, "recompute": RECOMPUTE}
    glossary = "".join(f"<li><b>{t}</b>: {html.escape(d)}</li>" for t, d in TAGS.items())
    controls = (
        '<div class="pebble-controls" style="display:flex;gap:0.4em;align-items:center;'
        'flex-wrap:wrap;margin:0.4em 0">'
        f'<button type="button" class="pebble-reset" style="{_TOUCH}">reset</button>'
        f'<button type="button" class="pebble-prev" style="{_TOUCH}">prev</button>'
        f'<button type="button" class="pebble-next" style="{_TOUCH}">next</button>'
        f'<button type="button" class="pebble-play" style="{_TOUCH}">play</button>'
        '<label style="display:flex;gap:0.4em;align-items:center;flex:1 1 14em;min-width:0">'
        f'move <input type="range" class="pebble-move" min="0" max="{n}" value="0" step="1" '
        'style="flex:1;min-width:6em;height:40px;margin:0"></label></div>'
    )
    return (
        f'<div class="pebble-stepper" id="{uid}" style="margin:0.5em 0 1em;max-width:100%;'
        'font-family:sans-serif">'
        f'{svgs}'
        '<div class="pebble-legend" style="font-family:sans-serif;font-size:0.85em;'
        f'margin:0.3em 0">{legend}</div>'
        f'{controls}'
        '<div aria-live="polite"><span class="pebble-tag" data-tag="" style="display:none;'
        'color:#fff;border-radius:3px;padding:0 0.4em;font-family:sans-serif;font-size:0.9em;'
        'margin-right:0.4em"></span>'
        '<span class="pebble-readout" style="font-family:monospace;font-size:0.9em;'
        f'overflow-wrap:anywhere">{html.escape(data["texts"][0], quote=False)}</span>'
        '<div class="pebble-tally" style="font-family:monospace;font-size:0.85em;color:#444;'
        f'overflow-wrap:anywhere">{html.escape(data["tallies"][0], quote=False)}</div></div>'
        '<details style="font-family:sans-serif;font-size:0.85em;margin-top:0.3em">'
        f'<summary style="min-height:40px;line-height:40px;cursor:pointer">what the tags mean'
        f'</summary><ul style="margin:0">{glossary}</ul></details>'
        f'<script type="application/json" class="pebble-states">{payload}</script>'
        f'<script>{script}</script></div>'
    )


# ---------------------------------------------------------------------------------- widget
def stepper(graph: Graph, M: int, moves, *, interval: int = 400, dpi: int = 90):
    """The stepper as an ipywidgets widget, redrawn with :func:`draw`; for a live kernel.

    A play button and a slider labelled "move"; reset, prev and next buttons; the
    :func:`readout` line (with the move's reason, :func:`why`) and the :func:`tally` line,
    the same text as :func:`static_stepper`'s; and the picture (an ``Output`` widget showing a
    PNG rendered by :func:`draw`, a recompute ringed in purple).

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
        The widget; its ``children[0].children`` are the play widget and the slider,
        ``children[1].children`` the reset, prev and next buttons, ``children[2]`` and
        ``children[3]`` the readout and tally labels.

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

    moves = [tuple(m) for m in moves]
    states = list(frames(graph, M, moves, start=True))
    tags = why(graph, moves)
    n = len(moves)
    pos = layout(graph)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    figsize = (1.4 * (max(xs) + 1) + 0.6, 0.55 * (max(ys) - min(ys) + 1) + 1.0)

    slider = widgets.IntSlider(value=0, min=0, max=n, step=1, description="move",
                               continuous_update=True)
    play = widgets.Play(value=0, min=0, max=n, step=1, interval=interval, description="play")
    widgets.jslink((play, "value"), (slider, "value"))
    tall = widgets.Layout(min_height="40px", min_width="60px", width="auto")
    reset = widgets.Button(description="reset", layout=tall)
    prev = widgets.Button(description="prev", layout=tall)
    nxt = widgets.Button(description="next", layout=tall)
    line = widgets.Label(value=readout(0, n, states[0], M))
    counts = widgets.Label(value=tally([]))
    out = widgets.Output()

    def render(k):
        f = states[k]
        tag = tags[k - 1] if k else None
        fig = Figure(figsize=figsize)
        FigureCanvasAgg(fig)
        draw(graph, f.red, f.blue, ax=fig.add_subplot(), pos=pos,
             highlight=None if f.move is None else f.move[1], recompute=tag == "recompute")
        fig.subplots_adjust(0, 0.12, 1, 1)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        line.value = readout(k, n, f, M, tag)
        counts.value = tally(tags[:k])
        with out:
            out.clear_output(wait=True)
            display(Image(data=buf.getvalue(), format="png"))

    def go(k):
        slider.value = max(0, min(n, k))

    slider.observe(lambda change: render(change["new"]), names="value")
    reset.on_click(lambda _: go(0))
    prev.on_click(lambda _: go(slider.value - 1))
    nxt.on_click(lambda _: go(slider.value + 1))
    render(0)
    return widgets.VBox([widgets.HBox([play, slider]), widgets.HBox([reset, prev, nxt]), line,
                         counts, out])
