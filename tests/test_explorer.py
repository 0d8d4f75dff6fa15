"""The crossover explorer: its data, the static HTML (and its script, under node) and the widget."""

import json
import math
import re
import shutil
import subprocess
import sys

import pytest

from ioattn import io_cost
from ioattn.bounds import lower_bound
from ioattn.explorer import (
    DEFAULT_OPTIONS,
    curves,
    default_Ms,
    m_label,
    picture_title,
    readout,
    static_explorer,
)
from ioattn.sweep import sweep
from ioattn.widgets import explorer

NAMES = ["flash", "square_tiling", "standard"]


def test_default_Ms():
    for d in (16, 64, 256):
        Ms = default_Ms(d)
        assert Ms[0] == max(16, d * d // 16) and Ms[-1] == 64 * d * d and len(Ms) == 32
        assert Ms == sorted(set(Ms))


def test_curves_equal_sweep_and_io_cost():
    N, d = 512, 32
    c = curves(N, d)
    s = sweep(N, d, default_Ms(d), NAMES, DEFAULT_OPTIONS)
    assert c["Ms"] == s.Ms and c["names"] == NAMES
    assert c["totals"] == s.totals and c["lower"] == s.lower and c["cheapest"] == s.cheapest()
    assert [(x["M"], x["before"], x["after"]) for x in c["crossovers"]] == \
        [tuple(x) for x in s.crossovers]
    assert c["labels"]["square_tiling"] == "square_tiling (schedule=outer)"
    for name in NAMES:
        opts = DEFAULT_OPTIONS.get(name, {})
        for M, t in zip(c["Ms"], c["totals"][name]):
            if M >= c["min_M"][name]:
                assert t == io_cost(name, N, d, M, **opts).total
            else:
                assert t is None
    assert c["totals"]["flash"][0] is None          # flash needs M >= 4d + 4
    assert json.loads(json.dumps(c)) == c           # JSON-ready
    assert c["backward"] is False


def test_backward_curves_equal_sweep_and_io_cost():
    N, d = 512, 32
    c = curves(N, d, backward=True)
    s = sweep(N, d, default_Ms(d), NAMES, DEFAULT_OPTIONS, backward=True)
    assert c["backward"] is True and c["Ms"] == s.Ms == curves(N, d)["Ms"]
    assert c["totals"] == s.totals and c["lower"] == s.lower and c["cheapest"] == s.cheapest()
    assert c["lower"] == [lower_bound(N, d, M, backward=True) for M in c["Ms"]]
    assert [(x["M"], x["before"], x["after"]) for x in c["crossovers"]] == \
        [tuple(x) for x in s.crossovers]
    assert c["min_M"]["flash"] == 7 * d + 4                 # the backward's least cache
    for name in NAMES:
        opts = DEFAULT_OPTIONS.get(name, {})
        for M, t in zip(c["Ms"], c["totals"][name]):
            if M >= c["min_M"][name]:
                assert t == io_cost(name, N, d, M, backward=True, **opts).total
            else:
                assert t is None
    k = 15
    text = readout(c, k)
    assert text.startswith(f"N = 512, d = 32, M = {c['Ms'][k]:,} (backward pass): cheapest ")
    assert f"flash {c['totals']['flash'][k]:,};" in text
    assert json.loads(json.dumps(c)) == c


def _embedded(page: str) -> dict:
    found = re.findall(r'<script type="application/json" class="ioe-data">(.*?)</script>',
                       page, re.S)
    assert len(found) == 1
    return json.loads(found[0])


@pytest.fixture(scope="module")
def page():
    return static_explorer()


def test_static_explorer_html(page):
    assert re.search(r'>M <input type="range" class="ioe-M" min="0" max="31"', page)
    assert re.search(r'>d <input type="range" class="ioe-d" min="0" max="3"', page)
    assert re.search(r'>pass <select class="ioe-pass"><option value="forward" selected>forward'
                     r'</option><option value="backward">backward</option></select>', page)
    assert "http://" not in page and "https://" not in page and " src=" not in page
    assert len(page.encode()) < 80 * 1024                   # both passes, four d
    assert page.count('class="ioe-curve"') == 3 and page.count('class="ioe-marker"') == 3
    assert page.count('class="ioe-lower"') == 1 and 'stroke-dasharray="5 3"' in page
    assert page.count('class="ioe-frame"') == 4 and "M = d² = 4,096" in page
    assert page.count('class="ioe-cross"') == 8                # per d and pass
    assert page.count('data-pass="backward" display="none"') == 4
    assert page.count('data-pass="forward" display="none"') == 3
    assert f'>{picture_title(4096)}</text>' in page
    for colour in ("#1f77b4", "#d62728", "#7f7f7f"):
        assert colour in page
    data = _embedded(page)
    assert data["ds"] == [32, 64, 128, 256]
    assert [c["backward"] for c in data["curves"]] == [False] * 4
    assert [c["backward"] for c in data["backward"]] == [True] * 4
    for f, b, labels in zip(data["curves"], data["backward"], data["mlabels"]):
        assert f["dom"] == b["dom"] and f["Ms"] == b["Ms"]     # the passes share the axes
        assert labels == [m_label(M, f["d"]) for M in f["Ms"]]
    # the readout of the initial point (d = 64, M nearest d^2) is in the HTML, for no script
    c = data["curves"][1]
    k = int(re.search(r'class="ioe-M" min="0" max="31" value="(\d+)"', page)[1])
    assert readout(c, k) in page.replace("&gt;", ">")
    assert m_label(c["Ms"][k], 64) in page


@pytest.mark.parametrize("d, M", [(32, 16), (32, 1024), (64, 4479), (128, 20000),
                                  (256, 64 * 256 * 256)])
@pytest.mark.parametrize("backward", [False, True])
def test_static_explorer_totals_are_exact(page, d, M, backward):
    data = _embedded(page)
    c = data["backward" if backward else "curves"][data["ds"].index(d)]
    k = min(range(len(c["Ms"])), key=lambda i: abs(c["Ms"][i] - M))
    M = c["Ms"][k]
    for name in NAMES:
        opts = DEFAULT_OPTIONS.get(name, {})
        t = c["totals"][name][k]
        assert t == (io_cost(name, 4096, d, M, backward=backward, **opts).total
                     if M >= c["min_M"][name] else None)
    assert c["lower"][k] == lower_bound(4096, d, M, backward=backward)


def test_static_explorers_are_unique():
    a, b = static_explorer(256, ds=(16,)), static_explorer(256, ds=(16,))
    ids = re.findall(r'<div class="ioattn-explorer" id="([^"]+)"', a + b)
    assert len(ids) == 2 and ids[0] != ids[1]
    assert a.count(ids[0]) == 2 and ids[0] not in b      # the div and its script
    with pytest.raises(ValueError, match="not one of"):
        static_explorer(256, ds=(16, 32), d=64)
    with pytest.raises(TypeError, match="backward must be True or False"):
        static_explorer(256, ds=(16,), backward="yes")


_NODE_DRIVER = r"""
const fs = require("fs");
const page = fs.readFileSync(0, "utf8");
const json = page.match(
  /<script type="application\/json" class="ioe-data">([\s\S]*?)<\/script>/)[1];
const code = page.match(/<script>([\s\S]*?)<\/script>/)[1];
const id = page.match(/<div class="ioattn-explorer" id="([^"]+)"/)[1];
function element(attrs) {
  return {attrs: Object.assign({}, attrs || {}), listeners: {}, textContent: "", value: "0",
    max: "0", setAttribute(k, v) { this.attrs[k] = String(v); },
    getAttribute(k) { return this.attrs[k]; },
    addEventListener(t, f) { this.listeners[t] = f; }};
}
function all(re) {
  return Array.from(page.matchAll(re), m => element({"data-name": m[1]}));
}
const curves = all(/class="ioe-curve" data-name="([^"]+)"/g);
const markers = all(/class="ioe-marker" data-name="([^"]+)"/g);
const frames = Array.from(page.matchAll(/class="ioe-frame" data-d="(\d+)"/g),
                          m => element({"data-d": m[1]}));
const cross = Array.from(page.matchAll(/class="ioe-cross" data-d="(\d+)" data-pass="(\w+)"/g),
                         m => element({"data-d": m[1], "data-pass": m[2]}));
const sM = element(), sd = element(), sp = element();
sM.value = page.match(/class="ioe-M" min="0" max="\d+" value="(\d+)"/)[1];
sd.value = page.match(/class="ioe-d" min="0" max="\d+" value="(\d+)"/)[1];
sp.value = page.match(/<option value="(\w+)" selected>/)[1];
const one = {"script.ioe-data": {textContent: json}, "input.ioe-M": sM, "input.ioe-d": sd,
  "select.ioe-pass": sp, ".ioe-Mvalue": element(), ".ioe-dvalue": element(),
  ".ioe-readout": element(), "line.ioe-now": element(), "text.ioe-title": element(),
  "polyline.ioe-lower": element(), "polyline.ioe-lower-any": element()};
const many = {"g.ioe-frame": frames, "g.ioe-cross": cross, "polyline.ioe-curve": curves,
  "circle.ioe-marker": markers};
const root = {querySelector: s => one[s], querySelectorAll: s => many[s]};
global.document = {getElementById: x => (x === id ? root : null)};
eval(code);
const seen = [];
function snap() {
  const m = {}, c = {};
  markers.forEach(e => { m[e.attrs["data-name"]] = Object.assign({}, e.attrs); });
  curves.forEach(e => { c[e.attrs["data-name"]] = e.attrs.points; });
  seen.push({d: +sd.value, k: +sM.value, pass: sp.value,
    text: one[".ioe-readout"].textContent, title: one["text.ioe-title"].textContent,
    M: one[".ioe-Mvalue"].textContent, now: one["line.ioe-now"].attrs.x1, markers: m, curves: c,
    lower: one["polyline.ioe-lower"].attrs.points,
    lower_any: one["polyline.ioe-lower-any"].attrs.points,
    frames: frames.map(f => f.attrs.display),
    cross: cross.map(f => [+f.attrs["data-d"], f.attrs["data-pass"], f.attrs.display])});
}
snap();                                                // the initial show()
const steps = JSON.parse(process.argv[1]);
for (const [which, v] of steps) {
  const s = {M: sM, d: sd, pass: sp}[which];
  s.value = String(v); (which === "pass" ? s.listeners.change : s.listeners.input)(); snap();
}
process.stdout.write(JSON.stringify(seen));
"""


def _check_shot(data, shot):
    """The script's state after a step is the one the data says."""
    back = shot["pass"] == "backward"
    c = data["backward" if back else "curves"][shot["d"]]
    assert shot["text"] == readout(c, shot["k"])
    assert shot["M"] == m_label(c["Ms"][shot["k"]], c["d"])
    assert shot["title"] == picture_title(c["N"], back)
    assert shot["frames"] == ["inline" if j == shot["d"] else "none"
                              for j in range(len(data["ds"]))]
    assert [x[2] for x in shot["cross"]] == \
        ["inline" if (x[0], x[1]) == (c["d"], shot["pass"]) else "none" for x in shot["cross"]]


def _run_node(page, steps):
    proc = subprocess.run(["node", "-e", _NODE_DRIVER, json.dumps(steps)], input=page,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_script_runs(page):
    """Under node with a stub DOM: the script's readout is :func:`readout` at every point, the
    M slider from smallest to largest turns the cheapest from square tiling into FlashAttention,
    and the d slider switches the picture."""
    data = _embedded(page)
    steps = [["M", 0], ["M", 31], ["d", 3], ["M", 0], ["M", 99], ["d", 0]] + \
        [["M", k] for k in range(32)]
    seen = _run_node(page, steps)
    start = int(re.search(r'class="ioe-M" min="0" max="31" value="(\d+)"', page)[1])
    assert seen[0]["text"] == readout(data["curves"][1], start)
    for shot in seen:
        _check_shot(data, shot)
    small, large = seen[1], seen[2]
    assert (small["d"], small["k"], large["k"]) == (1, 0, 31)
    assert "cheapest square tiling." in small["text"]
    assert "cheapest FlashAttention." in large["text"]
    assert small["markers"]["flash"]["visibility"] == "hidden"      # flash cannot run at M = 256
    assert large["markers"]["flash"]["visibility"] == "visible"
    assert float(large["now"]) > float(small["now"])
    assert float(large["markers"]["flash"]["cy"]) > float(small["markers"]["standard"]["cy"])
    # the geometry the script computes is the one the HTML starts with
    for name in NAMES:
        assert f'data-name="{name}" points="{seen[0]["curves"][name]}"' in page
    assert f'class="ioe-lower" points="{seen[0]["lower"]}"' in page
    assert f'class="ioe-lower-any" points="{seen[0]["lower_any"]}"' in page
    assert seen[3]["lower_any"] != seen[2]["lower_any"]         # redrawn for the new d
    # d = 256, then M past the end is clamped
    assert seen[3]["d"] == 3 and seen[3]["curves"] != seen[2]["curves"]
    assert seen[5]["k"] == 31 and "cheapest FlashAttention." in seen[5]["text"]
    cheapest = [s["text"].split("cheapest ")[1].split(".")[0] for s in seen[7:]]
    c = data["curves"][0]
    assert cheapest == [c["titles"][n] for n in c["cheapest"]]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_pass_switch(page):
    """Under node: the "pass" select switches to the backward pass and back; in both passes and
    for every d, the M slider from smallest to largest turns the cheapest from square tiling
    into FlashAttention, and the readout, title, curves and crossover lines follow."""
    data = _embedded(page)
    steps = [["pass", "backward"]]
    for j in range(4):
        steps += [["d", j], ["M", 0], ["M", 31]]
    steps += [["pass", "forward"]]
    for j in range(4):
        steps += [["d", j], ["M", 0], ["M", 31]]
    steps += [["pass", "backward"], ["d", 1]] + [["M", k] for k in range(32)]
    seen = _run_node(page, steps)
    for shot in seen:
        _check_shot(data, shot)
    start, back = seen[0], seen[1]
    assert back["pass"] == "backward" and (back["d"], back["k"]) == (start["d"], start["k"])
    assert back["title"] == picture_title(4096, True) != start["title"]
    assert back["text"] == readout(data["backward"][1], start["k"])
    for name in NAMES:                       # same axes, the backward moves more at every M
        assert back["curves"][name] != start["curves"][name]
        assert float(back["markers"][name]["cy"]) < float(start["markers"][name]["cy"])
    assert back["lower"] != start["lower"]
    for p, first in (("backward", 2), ("forward", 15)):
        for j in range(4):
            small, large = seen[first + 3 * j + 1], seen[first + 3 * j + 2]
            assert (small["pass"], small["d"], small["k"], large["k"]) == (p, j, 0, 31)
            assert "cheapest square tiling." in small["text"], small["text"]
            assert "cheapest FlashAttention." in large["text"], large["text"]
    # flash's backward cannot run at the smallest M for d = 64 (M = 256 < 7d + 4 = 452)
    assert seen[16]["markers"]["flash"]["visibility"] == "hidden"
    cheapest = [s["text"].split("cheapest ")[1].split(".")[0] for s in seen[-32:]]
    c = data["backward"][1]
    assert cheapest == [c["titles"][n] for n in c["cheapest"]]
    assert cheapest[0] == "square tiling" and cheapest[-1] == "FlashAttention"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_can_start_backward():
    page = static_explorer(1024, ds=(32, 64), backward=True, M=2048)
    assert '<option value="backward" selected>' in page
    assert f'>{picture_title(1024, True)}</text>' in page
    data = _embedded(page)
    c = data["backward"][1]
    k = c["Ms"].index(min(c["Ms"], key=lambda M: abs(M - 2048)))
    assert readout(c, k) in page.replace("&gt;", ">")
    assert "(backward pass)" in readout(c, k)
    (shot,) = _run_node(page, [])
    assert shot["pass"] == "backward" and shot["k"] == k
    _check_shot(data, shot)
    for name in NAMES:                       # the geometry the script draws is the HTML's
        assert f'data-name="{name}" points="{shot["curves"][name]}"' in page


# ---------------------------------------------------------------------------------- widget
def test_explorer_without_ipywidgets(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with pytest.raises(ImportError, match="needs ipywidgets.*static_explorer"):
        explorer()


def test_explorer_widget_update():
    widgets = pytest.importorskip("ipywidgets")
    w = explorer(N=4096, d=64, log2_M=6)
    assert isinstance(w, widgets.VBox)
    assert set(w.controls) >= {"N", "d", "log2_M", "simulate", *NAMES}
    assert w.image.value[:8] == b"\x89PNG\r\n\x1a\n"
    before_text, before_png = w.readout.value, w.image.value
    before = {n: tuple(w.markers[n].get_data()[0]) for n in NAMES}
    assert w.state["M"] == 64 and w.state["cheapest"] in ("square_tiling", "standard")
    assert not w.markers["flash"].get_visible()                    # flash needs M >= 260
    text = w.update(log2_M=16)
    M = 1 << 16
    assert text == w.readout.value != before_text and w.image.value != before_png
    assert w.state["M"] == M and w.state["cheapest"] == "flash"
    for name in NAMES:
        t = io_cost(name, 4096, 64, M, **DEFAULT_OPTIONS.get(name, {})).total
        assert f"{t:,}" in text and w.state["totals"][name] == t
        assert tuple(w.markers[name].get_data()[0]) != before[name]
        assert tuple(w.markers[name].get_data()[1]) == (t,)
        assert w.markers[name].get_visible()
    # moving the slider itself redraws too
    w.controls["log2_M"].value = 12
    assert w.state["M"] == 4096 and "M = 2^12 = 4,096 entries = 1 d²" in w.readout.value
    w.controls["flash"].value = False
    assert "flash" not in w.state["shown"] and not w.lines["flash"].get_visible()
    w.update(d=128, names=NAMES)
    assert w.state["d"] == 128 and w.controls["log2_M"].max == pytest.approx(20)


def test_explorer_simulate_agrees():
    pytest.importorskip("ipywidgets")
    w = explorer(N=4096, d=8, log2_M=9, N_sim_max=32)
    report = w.simulate()
    assert "counts agree: <b>yes</b>" in report and "N = 32" in report
    assert "simulated at N = 32" in report
    assert w.sim_readout.value == report
    w.controls["simulate"].click()                                  # the button does the same
    assert "counts agree: <b>yes</b>" in w.sim_readout.value
    w.update(N=256, log2_M=4)                                       # flash cannot run at M = 16
    report = w.simulate()
    assert "cannot run at this M" in report and "counts agree: <b>yes</b>" in report


def test_explorer_widget_backward_toggle():
    pytest.importorskip("ipywidgets")
    w = explorer(N=4096, d=64, log2_M=12)
    assert w.controls["pass"].value == "forward" and not w.state["backward"]
    forward_png, forward_text = w.image.value, w.readout.value
    forward_lower = tuple(w.lines["lower"].get_ydata())
    text = w.update(backward=True)
    assert w.state["backward"] and w.controls["pass"].value == "backward"
    assert text.startswith("<div style='font-family:monospace'>backward pass: N = 4,096, d = 64")
    assert w.image.value != forward_png and text != forward_text
    assert w.figure.axes[0].get_title() == \
        "Exact I/O of the attention backward pass, N = 4,096, d = 64"
    for name in NAMES:
        t = io_cost(name, 4096, 64, 4096, backward=True, **DEFAULT_OPTIONS.get(name, {})).total
        assert w.state["totals"][name] == t and f"{t:,}" in text
        assert tuple(w.markers[name].get_data()[1]) == (t,)
    assert w.state["lower"] == lower_bound(4096, 64, 4096, backward=True)
    assert tuple(w.lines["lower"].get_ydata()) != forward_lower
    # M = 300: flash's forward runs (4d + 4 = 260), its backward does not (7d + 4 = 452)
    w.controls["log2_M"].value = math.log2(300)
    assert w.state["M"] == 300 and w.state["totals"]["flash"] is None
    assert not w.markers["flash"].get_visible() and "cannot run at this M" in w.readout.value
    w.controls["pass"].value = "forward"                            # the toggle itself redraws
    assert not w.state["backward"] and w.state["totals"]["flash"] == \
        io_cost("flash", 4096, 64, 300).total
    assert w.markers["flash"].get_visible()
    with pytest.raises(TypeError, match="backward must be True or False"):
        w.update(backward="yes")
    assert explorer(N=1024, d=32, backward=True).state["backward"]


def test_explorer_simulate_backward_agrees():
    pytest.importorskip("ipywidgets")
    w = explorer(N=4096, d=8, log2_M=9, N_sim_max=16, backward=True)
    report = w.simulate()
    assert "ioattn.run_backward" in report and "counts agree: <b>yes</b>" in report
    assert report.count("= io_cost") == 3 and "N = 16" in report
    w.update(log2_M=5)                                      # flash's backward needs M >= 60
    report = w.simulate()
    assert "cannot run at this M" in report and "counts agree: <b>yes</b>" in report
