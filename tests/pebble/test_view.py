"""Pictures of games: a deterministic layered layout, states replayed by the game itself, a static
HTML stepper whose embedded states are the game's, a matplotlib drawing, the widget stepper."""

import json
import os
import re
import shutil
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from ioattn.pebble import Graph, IllegalMove, PebbleGame, attention_graph, matmul_graph  # noqa: E402
from ioattn.pebble.schedules import (  # noqa: E402
    EXTRA_PEBBLES,
    flash_moves,
    matmul_moves,
    square_tiling_moves,
)
from ioattn.pebble.view import (  # noqa: E402
    TAGS,
    draw,
    frames,
    label,
    layers,
    layout,
    readout,
    static_stepper,
    stepper,
    tally,
    why,
)

GRAPHS = [attention_graph(2, 1), attention_graph(3, 2), matmul_graph(2, 3, 2),
          Graph([("a", "c"), ("b", "c"), ("a", "d"), ("c", "d")])]


def games():
    """(graph, M, moves): a flash game and an outer-product game, both complete and legal."""
    return [(attention_graph(2, 1), 8 + EXTRA_PEBBLES, flash_moves(2, 1, 8)),
            (matmul_graph(2, 2, 2), 5 + EXTRA_PEBBLES, matmul_moves(2, 2, 2, 5))]


@pytest.mark.parametrize("graph", GRAPHS, ids=repr)
def test_layout_is_layered(graph):
    layer, pos = layers(graph), layout(graph)
    assert set(pos) == set(graph.order)
    for v in graph.order:
        ps = graph.parents(v)
        assert layer[v] == (1 + max(layer[p] for p in ps) if ps else 0)   # longest path
        assert pos[v][0] == layer[v]
        for p in ps:
            assert pos[p][0] < pos[v][0], f"parent {p} is not left of {v}"
    for L in set(layer.values()):                       # spread evenly, centred, no overlaps
        ys = sorted(pos[v][1] for v in graph.order if layer[v] == L)
        assert all(b - a == 1 for a, b in zip(ys, ys[1:]))
        assert sum(ys) == 0


@pytest.mark.parametrize("graph", GRAPHS, ids=repr)
def test_layout_is_deterministic(graph):
    assert layout(graph) == layout(graph)
    rebuilt = Graph([(p, v) for v in graph.order for p in graph.parents(v)], nodes=graph.order)
    assert rebuilt.order == graph.order and layout(rebuilt) == layout(graph)


def test_layout_does_not_depend_on_hashing():
    """The same picture in every process (string hashes differ between processes)."""
    code = ("from ioattn.pebble import attention_graph; from ioattn.pebble.view import layout; "
            "print(sorted(layout(attention_graph(2, 2)).items()))")
    out = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": seed}).stdout
           for seed in ("1", "2", "3")}
    assert len(out) == 1


def test_layout_keeps_edges_short():
    """The barycentre sweeps never lengthen the edges of the topological order they start from."""
    g = attention_graph(2, 1)
    pos = layout(g)
    start = layout(g, sweeps=0)

    def total(p):
        return sum(abs(p[u][1] - p[v][1]) for v in g.order for u in g.parents(v))

    assert total(pos) <= total(start)


def test_labels():
    assert [label(v) for v in [("Q", 0, 0), ("K", 1, 0), ("QK", 0, 0, 1), ("exp", 0, 1),
                               ("O", 0, 0)]] == ["Q00", "K10", "QK001", "exp01", "O00"]
    assert label(("A", 12, 3)) == "A12,3" and label(7) == "7"
    g = attention_graph(2, 2)
    assert len({label(v) for v in g}) == len(g)          # distinct within a graph


@pytest.mark.parametrize("graph, M, moves", games())
def test_frames_match_the_game(graph, M, moves):
    game = PebbleGame.replay(graph, M, moves)
    states = list(frames(graph, M, moves))
    assert len(states) == len(moves)
    assert [f.move for f in states] == [tuple(m) for m in moves]
    last = states[-1]
    assert (last.red, last.blue) == (game.red, game.blue)
    assert (last.reads, last.writes, last.io) == (game.reads, game.writes, game.io)
    for k, f in enumerate(states):                     # each state is the replayed prefix's
        prefix = PebbleGame.replay(graph, M, moves[:k + 1])
        assert (f.red, f.blue, f.reads, f.writes) == (prefix.red, prefix.blue, prefix.reads,
                                                      prefix.writes)
    first = next(frames(graph, M, moves, start=True))
    assert first.move is None and first.red == set() and first.blue == set(graph.inputs)


def test_frames_check_the_rules():
    g = Graph([("a", "c"), ("b", "c")])
    it = frames(g, 3, [("read", "a"), ("compute", "c")])
    assert next(it).move == ("read", "a")
    with pytest.raises(IllegalMove, match="every parent"):
        next(it)


def _embedded(page: str) -> dict:
    found = re.findall(r'<script type="application/json" class="pebble-states">(.*?)</script>',
                       page, re.S)
    assert len(found) == 1
    return json.loads(found[0])


@pytest.mark.parametrize("graph, M, moves", games())
def test_static_stepper(graph, M, moves):
    page = static_stepper(graph, M, moves)
    n = len(moves)
    assert re.search(rf'<input type="range" class="pebble-move" min="0" max="{n}"', page)
    assert ">move <input" in page and "prev</button>" in page and "next</button>" in page
    assert "http://" not in page and "https://" not in page
    assert len(page) < 60_000
    data = _embedded(page)
    assert data["M"] == M and data["vertices"] == [repr(v) for v in graph.order]
    assert data["labels"] == [label(v) for v in graph.order]
    assert len(data["moves"]) == n and len(data["states"]) == n + 1
    assert [(kind, graph.order[i]) for kind, i in data["moves"]] == [tuple(m) for m in moves]
    for k in range(n + 1):
        game = PebbleGame.replay(graph, M, moves[:k])
        red = {v for v, c in zip(graph.order, data["states"][k]) if int(c) & 1}
        blue = {v for v, c in zip(graph.order, data["states"][k]) if int(c) & 2}
        assert (red, blue) == (game.red, game.blue)
        assert (data["reads"][k], data["writes"][k]) == (game.reads, game.writes)
    # the readouts are Python's, in the drawing's labels, with each move's reason
    tags = why(graph, moves)
    assert data["tags"] == tags
    states = list(frames(graph, M, moves, start=True))
    assert data["texts"] == [readout(k, n, f, M, tags[k - 1] if k else None)
                             for k, f in enumerate(states)]
    assert data["tallies"] == [tally(tags[:k]) for k in range(n + 1)]
    for k, (kind, v) in enumerate(moves, 1):
        why_ = f" ({tags[k - 1]})" if tags[k - 1] != kind else ""
        assert data["texts"][k].startswith(f"move {k} of {n}: {kind} {label(v)}{why_} — ")
        assert "(" not in label(v) and "'" not in data["texts"][k]        # no Python tuples
    # the readout of the start is in the HTML, for a page without script
    assert readout(0, n, states[0], M) in page and tally([]) in page
    # both drawings, every edge with an arrowhead, and the buttons
    assert page.count('class="pebble-graph"') == 2
    edges = sum(len(graph.parents(v)) for v in graph.order)
    assert page.count('marker-end="url(#') == 2 * edges
    for button in ("reset", "prev", "next", "play"):
        assert f'class="pebble-{button}" style="min-height:40px;' in page


def test_static_stepper_small_and_unique():
    g = attention_graph(2, 2)                          # 46 vertices, 146 moves
    moves = square_tiling_moves(2, 2, 5)
    a, b = static_stepper(g, 5 + EXTRA_PEBBLES, moves), static_stepper(g, 5 + EXTRA_PEBBLES, moves)
    assert len(moves) > 100 and len(a) < 100_000
    ids = re.findall(r'<div class="pebble-stepper" id="([^"]+)"', a + b)
    assert len(ids) == 2 and ids[0] != ids[1]
    assert static_stepper(g, 3, []).count('class="pebble-vertex"') == 2 * len(g)


def test_static_stepper_rejects_illegal_games():
    with pytest.raises(IllegalMove):
        static_stepper(Graph([("a", "c"), ("b", "c")]), 2, [("read", "a"), ("read", "b"),
                                                          ("compute", "c")])


_NODE_DRIVER = r"""
const fs = require("fs");
const page = fs.readFileSync(0, "utf8");
const json = page.match(
  /<script type="application\/json" class="pebble-states">([\s\S]*?)<\/script>/)[1];
const code = page.match(/<script>([\s\S]*?)<\/script>/)[1];
const id = page.match(/<div class="pebble-stepper" id="([^"]+)"/)[1];
const nCircles = (page.match(/class="pebble-vertex"/g) || []).length / 2;
function element() {
  const e = {attrs: {}, listeners: {}, textContent: "", value: "0", style: {},
    setAttribute(k, v) { this.attrs[k] = String(v); }, getAttribute(k) { return this.attrs[k]; },
    addEventListener(t, f) { this.listeners[t] = f; }};
  return e;
}
const svgs = [0, 1].map(g => {
  const circles = Array.from({length: nCircles}, (_, i) => {
    const c = element(); c.attrs.cx = String(i + 100 * g); c.attrs.cy = String(-i); return c; });
  const halo = element(), svg = element();
  svg.querySelectorAll = s => circles; svg.querySelector = s => halo;
  svg.circles = circles; svg.halo = halo;
  return svg;
});
const parts = {"script.pebble-states": {textContent: json}, "input.pebble-move": element(),
  ".pebble-readout": element(), ".pebble-tally": element(), ".pebble-tag": element(),
  "button.pebble-play": element(), "button.pebble-prev": element(),
  "button.pebble-next": element(), "button.pebble-reset": element()};
const root = {querySelector: s => parts[s], querySelectorAll: s => svgs};
global.document = {getElementById: x => (x === id ? root : null)};
let timer = null;
global.setInterval = (f, ms) => { timer = f; return 1; };
global.clearInterval = () => { timer = null; };
eval(code);
const slider = parts["input.pebble-move"], out = parts[".pebble-readout"];
const n = JSON.parse(json).moves.length;
const seen = [];
function snap() {
  seen.push({k: +slider.value, text: out.textContent, tally: parts[".pebble-tally"].textContent,
             tag: parts[".pebble-tag"].textContent, tagShown: parts[".pebble-tag"].style.display,
             fills: svgs.map(g => g.circles.map(c => c.attrs.fill)),
             halo: svgs.map(g => Object.assign({}, g.halo.attrs))});
}
snap();                                               // the initial show(0)
for (let k = 0; k <= n; k++) { slider.value = String(k); slider.listeners.input(); snap(); }
parts["button.pebble-prev"].listeners.click(); snap();  // from n to n - 1
parts["button.pebble-next"].listeners.click(); snap();  // back to n
parts["button.pebble-next"].listeners.click(); snap();  // stays at n
parts["button.pebble-reset"].listeners.click(); snap(); // back to the start
parts["button.pebble-play"].listeners.click();
for (let i = 0; i < 3 && timer; i++) timer();
snap();                                               // played three moves
parts["button.pebble-reset"].listeners.click(); snap(); // reset stops playing
process.stdout.write(JSON.stringify([seen, timer === null]));
"""


def _recompute_game():
    """A game on a small graph that spills, reads back, re-reads an input and recomputes."""
    g = Graph([("a", "b"), ("b", "c"), ("c", "d"), ("b", "d")])
    moves = [("read", "a"), ("compute", "b"), ("write", "b"), ("compute", "c"), ("delete", "a"),
             ("delete", "b"), ("read", "b"), ("compute", "d"), ("write", "d"), ("delete", "b"),
             ("delete", "c"), ("delete", "d"), ("read", "a"), ("compute", "b"),
             ("delete", "b")]
    return g, 3, moves


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("game", [games()[0], _recompute_game()], ids=["flash", "recompute"])
def test_static_stepper_script_runs(game):
    """The inline script, run by node on a stub DOM, shows what the game says at every move,
    in both drawings, with Python's words; reset goes back to the start and stops playing."""
    graph, M, moves = game
    page = static_stepper(graph, M, moves)
    proc = subprocess.run(["node", "-e", _NODE_DRIVER], input=page, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen, stopped = json.loads(proc.stdout)
    states = list(frames(graph, M, moves, start=True))
    tags = why(graph, moves)
    n = len(moves)
    fill = {0: "#e3e3e3", 1: "#d62728", 2: "#cfe0f5", 3: "#d62728"}
    assert seen[0]["text"] == readout(0, n, states[0], M) and seen[0]["tagShown"] == "none"
    for k, shot in enumerate(seen[1:n + 2]):
        f = states[k]
        tag = tags[k - 1] if k else None
        assert shot["k"] == k and shot["text"] == readout(k, n, f, M, tag)
        assert shot["tally"] == tally(tags[:k]) and shot["tag"] == (tag or "")
        for g in range(2):
            assert shot["fills"][g] == [fill[(v in f.red) + 2 * (v in f.blue)]
                                        for v in graph.order]
            if k:
                halo = shot["halo"][g]
                assert halo["visibility"] == "visible"
                assert halo["cx"] == str(graph.index[f.move[1]] + 100 * g)
                assert (halo["stroke"] == "#9c27b0") == (tag == "recompute")
    assert [s["k"] for s in seen[n + 2:]] == [n - 1, n, n, 0, 3, 0] and stopped


def test_why_tags_every_move_from_the_game():
    g, M, moves = _recompute_game()
    assert why(g, moves) == ["input read", "compute", "spill", "compute", "delete", "delete",
                             "read-back", "compute", "output write", "delete", "delete",
                             "delete", "input re-read", "recompute", "delete"]
    text = readout(14, 15, list(frames(g, M, moves))[13], M, "recompute")
    assert text.startswith("move 14 of 15: compute b (recompute) — ")
    assert tally(why(g, moves)) == ("so far: 1 input read, 1 input re-read, 1 read-back, "
                                    "1 spill, 1 output write; 1 recompute")
    # a write of a non-output never read back is not a spill
    h = Graph([("a", "b"), ("b", "c")])
    assert why(h, [("read", "a"), ("compute", "b"), ("write", "b"), ("compute", "c"),
                   ("write", "c")]) == ["input read", "compute", "unread write", "compute",
                                        "output write"]
    assert set(TAGS) >= set(why(g, moves))
    with pytest.raises(IllegalMove):
        why(h, [("compute", "c")])


@pytest.mark.parametrize("graph, M, moves", games() + [_recompute_game()])
def test_why_agrees_with_the_counts(graph, M, moves):
    """The tags add up to the game's reads and writes; recomputes are the computes beyond the
    first of each vertex; spills are the writes of non-outputs that are read later."""
    from collections import Counter

    game = PebbleGame.replay(graph, M, moves)
    tags = why(graph, moves)
    count = Counter(tags)
    assert count["input read"] + count["input re-read"] + count["read-back"] == game.reads
    assert count["spill"] + count["unread write"] + count["output write"] == game.writes
    computes = Counter(v for kind, v in moves if kind == "compute")
    assert count["recompute"] == sum(c - 1 for c in computes.values())
    assert count["input read"] == len({v for kind, v in moves if kind == "read"
                                       and graph.is_input(v)})
    for k, ((kind, v), tag) in enumerate(zip(moves, tags)):
        later = {u for kk, u in moves[k + 1:] if kk == "read"}
        if tag == "spill":
            assert kind == "write" and v not in graph.outputs and v in later
        if tag == "read-back":
            assert kind == "read" and ("write", v) in moves[:k]


def test_draw_on_agg():
    import matplotlib.pyplot as plt

    g = attention_graph(2, 1)
    f = list(frames(g, 10, flash_moves(2, 1, 8)))[20]
    ax = draw(g, f.red, f.blue, highlight=f.move[1])
    assert len([t for t in ax.texts if t.get_text()]) == len(g)
    assert len([t for t in ax.texts if t.arrow_patch is not None]) == \
        sum(len(g.parents(v)) for v in g.order)                     # an arrowhead per edge
    ax.figure.canvas.draw()
    fig, ax2 = plt.subplots()
    assert draw(g, (), g.inputs, ax=ax2, labels=False, legend=False) is ax2
    assert not [t for t in ax2.texts if t.get_text()]
    plt.close("all")


def test_stepper_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    g = Graph([("a", "c"), ("b", "c")])
    with pytest.raises(ImportError, match="needs ipywidgets.*static_stepper"):
        stepper(g, 3, [("read", "a")])


def test_stepper_widget():
    widgets = pytest.importorskip("ipywidgets")
    graph, M, moves = games()[1]
    w = stepper(graph, M, moves)
    assert isinstance(w, widgets.VBox)
    play, slider = w.children[0].children
    line = w.children[2]
    assert isinstance(slider, widgets.IntSlider) and slider.max == len(moves)
    assert isinstance(play, widgets.Play) and slider.description == "move"
    states = list(frames(graph, M, moves, start=True))
    tags = why(graph, moves)
    assert line.value == readout(0, len(moves), states[0], M)
    slider.value = 5
    assert line.value == readout(5, len(moves), states[5], M, tags[4])
    assert w.children[3].value == tally(tags[:5])
    reset, prev, nxt = w.children[1].children
    prev.click()
    assert slider.value == 4 and line.value == readout(4, len(moves), states[4], M, tags[3])
    nxt.click()
    nxt.click()
    assert slider.value == 6
    reset.click()
    assert slider.value == 0 and line.value == readout(0, len(moves), states[0], M)
