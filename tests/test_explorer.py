"""The crossover explorer: its data, the static HTML (and its script, under node) and the widget."""

import json
import math
import re
import shutil
import subprocess
import sys

import pytest

from ioattn import io_cost
from ioattn.bounds import lower_bound, lower_curve
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
    assert c["lower"] == lower_curve(N, d, c["Ms"], backward=True)
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
    assert re.search(r'>mask <select class="ioe-mask"><option value="none" selected>none'
                     r'</option><option value="causal">causal</option></select>', page)
    assert "http://" not in page and "https://" not in page and " src=" not in page
    assert len(page.encode()) < 120 * 1024          # both passes, both masks, four d
    assert page.count('class="ioe-curve"') == 3 and page.count('class="ioe-marker"') == 3
    assert page.count('class="ioe-lower"') == 1 and 'stroke-dasharray="5 3"' in page
    assert page.count('class="ioe-frame"') == 4 and "M = d² = 4,096" in page
    assert page.count('class="ioe-cross"') == 16               # per d, pass and mask
    assert page.count('data-pass="backward" data-mask="none" display="none"') == 4
    assert page.count('data-pass="forward" data-mask="none" display="none"') == 3
    assert page.count('data-mask="causal" display="none"') == 8
    assert f'>{picture_title(4096)}</text>' in page
    for colour in ("#1f77b4", "#d62728", "#7f7f7f"):
        assert colour in page
    data = _embedded(page)
    assert data["ds"] == [32, 64, 128, 256]
    assert [c["backward"] for c in data["curves"]] == [False] * 4
    assert [c["backward"] for c in data["backward"]] == [True] * 4
    assert [(c["backward"], c["causal"]) for c in data["causal"]] == [(False, True)] * 4
    assert [(c["backward"], c["causal"]) for c in data["causal_backward"]] == [(True, True)] * 4
    for f, b, cf, cb, labels in zip(data["curves"], data["backward"], data["causal"],
                                    data["causal_backward"], data["mlabels"]):
        assert f["dom"] == b["dom"] == cf["dom"] == cb["dom"]   # the four share the axes
        assert f["Ms"] == b["Ms"] == cf["Ms"] == cb["Ms"]
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
    assert c["lower"][k] == lower_curve(4096, d, c["Ms"], backward=backward)[k]
    assert c["lower"][k] >= lower_bound(4096, d, M, backward=backward, program=True)


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
const cross = Array.from(
  page.matchAll(/class="ioe-cross" data-d="(\d+)" data-pass="(\w+)" data-mask="(\w+)"/g),
  m => element({"data-d": m[1], "data-pass": m[2], "data-mask": m[3]}));
const sM = element(), sd = element(), sp = element(), sk = element();
sM.value = page.match(/class="ioe-M" min="0" max="\d+" value="(\d+)"/)[1];
sd.value = page.match(/class="ioe-d" min="0" max="\d+" value="(\d+)"/)[1];
sp.value = page.match(/class="ioe-pass"><option[^]*?value="(\w+)" selected>/)[1];
sk.value = page.match(/class="ioe-mask"><option[^]*?value="(\w+)" selected>/)[1];
const one = {"script.ioe-data": {textContent: json}, "input.ioe-M": sM, "input.ioe-d": sd,
  "select.ioe-pass": sp, "select.ioe-mask": sk, ".ioe-Mvalue": element(), ".ioe-dvalue": element(),
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
  seen.push({d: +sd.value, k: +sM.value, pass: sp.value, mask: sk.value,
    text: one[".ioe-readout"].textContent, title: one["text.ioe-title"].textContent,
    M: one[".ioe-Mvalue"].textContent, now: one["line.ioe-now"].attrs.x1, markers: m, curves: c,
    lower: one["polyline.ioe-lower"].attrs.points,
    lower_any: one["polyline.ioe-lower-any"].attrs.points,
    frames: frames.map(f => f.attrs.display),
    cross: cross.map(f => [+f.attrs["data-d"], f.attrs["data-pass"], f.attrs["data-mask"],
                           f.attrs.display])});
}
snap();                                                // the initial show()
const steps = JSON.parse(process.argv[1]);
for (const [which, v] of steps) {
  const s = {M: sM, d: sd, pass: sp, mask: sk}[which];
  s.value = String(v); (s === sp || s === sk ? s.listeners.change : s.listeners.input)(); snap();
}
process.stdout.write(JSON.stringify(seen));
"""


def _picture(data, shot):
    """The picture (a :func:`curves` dict) a shot of the script shows."""
    back, causal = shot["pass"] == "backward", shot["mask"] == "causal"
    key = ("causal_backward" if back else "causal") if causal else \
        ("backward" if back else "curves")
    return data[key][shot["d"]]


def _check_shot(data, shot):
    """The script's state after a step is the one the data says."""
    back, causal = shot["pass"] == "backward", shot["mask"] == "causal"
    c = _picture(data, shot)
    assert (c["backward"], c["causal"]) == (back, causal)
    assert shot["text"] == readout(c, shot["k"])
    assert shot["M"] == m_label(c["Ms"][shot["k"]], c["d"])
    assert shot["title"] == picture_title(c["N"], back, causal)
    assert shot["frames"] == ["inline" if j == shot["d"] else "none"
                              for j in range(len(data["ds"]))]
    assert [x[3] for x in shot["cross"]] == \
        ["inline" if (x[0], x[1], x[2]) == (c["d"], shot["pass"], shot["mask"]) else "none"
         for x in shot["cross"]]


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
    assert w.state["lower"] == lower_bound(4096, 64, 4096, backward=True, program=True)
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


# ---------------------------------------------------------------------------------- causal
@pytest.mark.parametrize("backward", [False, True])
def test_causal_curves_equal_io_cost(backward):
    from ioattn import bounds
    from ioattn.masks import causal

    N, d = 512, 32
    c = curves(N, d, backward=backward, causal=True)
    dense = curves(N, d, backward=backward)
    mask = causal(N)
    Z = N * (N + 1) // 2
    assert c["causal"] is True and dense["causal"] is False and c["Ms"] == dense["Ms"]
    assert c["min_M"] == dense["min_M"] and c["labels"] == dense["labels"]
    for name in NAMES:
        opts = DEFAULT_OPTIONS.get(name, {})
        for M, t in zip(c["Ms"], c["totals"][name]):
            if M >= c["min_M"][name]:
                assert t == io_cost(name, N, d, M, backward=backward, mask=mask, **opts).total
            else:
                assert t is None
    for k, M in enumerate(c["Ms"]):
        assert c["lower"][k] == lower_curve(N, d, c["Ms"], backward=backward, Z=Z)[k]
        assert c["lower"][k] >= bounds.sparse_lower(N, d, M, Z, backward=backward, program=True)
        for name in NAMES:                      # no algorithm beats the sparse bound
            assert c["totals"][name][k] is None or c["totals"][name][k] >= c["lower"][k]
        # causal FlashAttention moves no more than dense (the same once K, V fit: 4 N d)
        if c["totals"]["flash"][k] is not None:
            assert c["totals"]["flash"][k] <= dense["totals"]["flash"][k]
    first = c["totals"]["flash"].index(next(t for t in c["totals"]["flash"] if t is not None))
    assert c["totals"]["flash"][first] < dense["totals"]["flash"][first]
    assert c["lower_any"] == [None] * len(c["Ms"])
    assert c["cheapest"][0] == "square_tiling" and c["cheapest"][-1] == "flash"

    def best(M):
        got = [(io_cost(n, N, d, M, backward=backward, mask=mask,
                        **DEFAULT_OPTIONS.get(n, {})).total, n)
               for n in NAMES if M >= c["min_M"][n]]
        return min(got)[1]

    assert c["crossovers"]
    for x in c["crossovers"]:                  # exact: a different winner at M - 1
        assert best(x["M"] - 1) == x["before"] != x["after"] == best(x["M"])
    k = 15
    text = readout(c, k)
    where = "backward pass, causal mask" if backward else "causal mask"
    assert text.startswith(f"N = 512, d = 32, M = {c['Ms'][k]:,} ({where}): cheapest ")
    assert json.loads(json.dumps(c)) == c
    with pytest.raises(TypeError, match="causal must be True or False"):
        curves(N, d, causal="yes")


def test_picture_title_causal():
    assert picture_title(4096, causal=True) == "Exact I/O of causal attention, N = 4,096"
    assert picture_title(4096, True, True) == \
        "Exact I/O of the causal attention backward pass, N = 4,096"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_mask_switch(page):
    """Under node: the "mask" select switches to the causal curves and back, in both passes;
    the readout says so, the curves and the bound change, the any-matmul bound is not drawn, and
    for every d and pass the M slider from smallest to largest still turns the cheapest from
    square tiling into FlashAttention."""
    data = _embedded(page)
    steps = [["mask", "causal"]]
    for p in ("forward", "backward"):
        steps += [["pass", p]]
        for j in range(4):
            steps += [["d", j], ["M", 0], ["M", 31]]
    steps += [["pass", "forward"], ["d", 1]] + [["M", k] for k in range(32)]
    steps += [["mask", "none"]]
    seen = _run_node(page, steps)
    for shot in seen:
        _check_shot(data, shot)
    start, causal = seen[0], seen[1]
    assert (start["mask"], causal["mask"]) == ("none", "causal")
    assert (causal["d"], causal["k"], causal["pass"]) == (start["d"], start["k"], "forward")
    assert "(causal mask): cheapest" in causal["text"] and "causal" not in start["text"]
    assert causal["title"] == picture_title(4096, causal=True) != start["title"]
    for name in ("flash", "square_tiling"):   # same axes; standard attention moves the same
        assert causal["curves"][name] != start["curves"][name]
    assert causal["curves"]["standard"] == start["curves"]["standard"]
    assert float(causal["markers"]["flash"]["cy"]) > float(start["markers"]["flash"]["cy"])
    assert causal["lower"] != start["lower"] and causal["lower_any"] == ""
    assert start["lower_any"] != ""
    for i, p in enumerate(("forward", "backward")):
        for j in range(4):
            small, large = seen[2 + 13 * i + 3 * j + 2], seen[2 + 13 * i + 3 * j + 3]
            assert (small["mask"], small["pass"], small["d"], small["k"], large["k"]) == \
                ("causal", p, j, 0, 31)
            assert "cheapest square tiling." in small["text"], small["text"]
            assert "cheapest FlashAttention." in large["text"], large["text"]
    cheapest = [s["text"].split("cheapest ")[1].split(".")[0] for s in seen[-33:-1]]
    c = data["causal"][1]
    assert cheapest == [c["titles"][n] for n in c["cheapest"]]
    back_causal = seen[15]
    assert back_causal["title"] == picture_title(4096, True, True)
    assert "(backward pass, causal mask): cheapest" in back_causal["text"]
    last = seen[-1]                                           # and back to dense
    assert last["mask"] == "none" and last["lower_any"] != "" and "causal" not in last["text"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_can_start_causal():
    page = static_explorer(1024, ds=(32, 64), causal=True, backward=True, M=2048)
    assert '<option value="causal" selected>' in page
    assert f'>{picture_title(1024, True, True)}</text>' in page
    data = _embedded(page)
    c = data["causal_backward"][1]
    k = c["Ms"].index(min(c["Ms"], key=lambda M: abs(M - 2048)))
    assert readout(c, k) in page.replace("&gt;", ">")
    (shot,) = _run_node(page, [])
    assert (shot["pass"], shot["mask"], shot["k"]) == ("backward", "causal", k)
    _check_shot(data, shot)
    for name in NAMES:
        assert f'data-name="{name}" points="{shot["curves"][name]}"' in page
    with pytest.raises(TypeError, match="causal must be True or False"):
        static_explorer(256, ds=(16,), causal=1)


def test_explorer_widget_causal_toggle():
    pytest.importorskip("ipywidgets")
    from ioattn import bounds
    from ioattn.masks import causal

    N = 1024
    w = explorer(N=N, d=64, log2_M=12)
    assert w.controls["mask"].value == "none" and not w.state["causal"]
    dense_png, dense_text = w.image.value, w.readout.value
    dense_totals = dict(w.state["totals"])
    text = w.update(causal=True)
    assert w.state["causal"] and w.controls["mask"].value == "causal"
    assert text.startswith("<div style='font-family:monospace'>causal mask: N = 1,024, d = 64")
    assert w.image.value != dense_png and text != dense_text
    assert w.figure.axes[0].get_title() == "Exact I/O of causal attention, N = 1,024, d = 64"
    mask = causal(N)
    Z = N * (N + 1) // 2
    for name in NAMES:
        t = io_cost(name, N, 64, 4096, mask=mask, **DEFAULT_OPTIONS.get(name, {})).total
        assert w.state["totals"][name] == t and f"{t:,}" in text
        assert tuple(w.markers[name].get_data()[1]) == (t,)
    assert w.state["totals"]["flash"] < dense_totals["flash"]
    assert w.state["lower"] == bounds.sparse_lower(N, 64, 4096, Z, program=True)
    assert f"Z = {Z:,}" in text
    assert len(w.lines["lower_any"].get_xdata()) == 0          # no any-matmul bound with a mask
    # the slider in causal mode: square tiling at the smallest M, FlashAttention at the largest
    w.update(log2_M=6)
    assert w.state["cheapest"] == "square_tiling"
    w.update(log2_M=18)
    assert w.state["cheapest"] == "flash"
    w.controls["pass"].value = "backward"                     # causal and backward together
    assert w.state["backward"] and w.state["causal"]
    assert w.state["totals"]["flash"] == \
        io_cost("flash", N, 64, 1 << 18, backward=True, mask=mask).total
    assert w.readout.value.startswith(
        "<div style='font-family:monospace'>backward pass: causal mask: ")
    w.controls["mask"].value = "none"                         # the toggle itself redraws
    assert not w.state["causal"] and w.state["totals"]["flash"] == \
        io_cost("flash", N, 64, 1 << 18, backward=True).total
    assert len(w.lines["lower_any"].get_xdata()) > 0
    with pytest.raises(TypeError, match="causal must be True or False"):
        w.update(causal="yes")
    assert explorer(N=256, d=32, causal=True).state["causal"]


def test_explorer_simulate_causal_agrees():
    pytest.importorskip("ipywidgets")
    for backward in (False, True):
        w = explorer(N=4096, d=8, log2_M=9, N_sim_max=32, causal=True, backward=backward)
        report = w.simulate()
        assert "with the causal mask" in report and "counts agree: <b>yes</b>" in report
        assert report.count("= io_cost") == 3
