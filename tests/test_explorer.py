"""The crossover explorer: its data, the static HTML (and its script, under node) and the widget."""

import html
import json
import math
import re
import shutil
import subprocess
import sys

import pytest

from ioattn import gpus, io_cost
from ioattn.algorithms import REGISTRY
from ioattn.bounds import lower_bound, lower_curve
from ioattn.explorer import (
    DEFAULT_OPTIONS,
    KINDS,
    N_MAX,
    PARALLEL_PS,
    STATIC_HI,
    _ppoints,
    _ppx,
    _ppy,
    _px,
    _side,
    _tenth,
    across,
    curves,
    default_Ms,
    flash_from,
    m_axis,
    m_label,
    m_x,
    octave_px,
    parallel_picture,
    parallel_Ps,
    parallel_readout,
    parallel_title,
    parallel_words,
    picture,
    picture_title,
    ratio_text,
    readout,
    static_explorer,
    static_Ms,
    static_parallel_explorer,
    words,
)
from ioattn.sweep import sweep
from ioattn.widgets import explorer, parallel_explorer

NAMES = sorted(REGISTRY)


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
    assert c["titles"]["square_tiling"] == "square tiling"
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
    assert f"FlashAttention {c['totals']['flash'][k]:,};" in text
    assert json.loads(json.dumps(c)) == c


def _embedded(page: str, cls: str = "ioe-data") -> dict:
    found = re.findall(rf'<script type="application/json" class="{cls}">(.*?)</script>',
                       page, re.S)
    assert len(found) == 1
    return json.loads(found[0])


#: The explorer the static tests read: two N, two d (the book's has three N and four d: the
#: same code, more sweeps).
NS, DS = (256, 1024), (32, 64)


@pytest.fixture(scope="module")
def page():
    return static_explorer(1024, ds=DS, Ns=NS, workers=1)


@pytest.fixture(scope="module", params=["the four", "every scheme"])
def ppage(request):
    """The static panel across P processors, for the same N and d: the four algorithms of
    the chapter on many processors, and every scheme of ioattn.parallel."""
    from ioattn.parallel import NAMES as PNAMES

    names = None if request.param == "the four" else PNAMES
    return static_parallel_explorer(1024, ds=DS, Ns=NS, names=names)


def test_static_explorer_html(page):
    assert re.search(r'>M</span><input type="range" class="ioe-M" min="0" max="24"', page)
    assert re.search(r'>N</span><input type="range" class="ioe-N" min="0" max="1" value="1"', page)
    assert re.search(r'>d</span><input type="range" class="ioe-d" min="0" max="1" value="1"', page)
    assert re.search(r'class="ioe-pass" data-value="forward" aria-pressed="true"', page)
    assert re.search(r'class="ioe-pass" data-value="backward" aria-pressed="false"', page)
    assert re.search(r'class="ioe-mask" data-value="none" aria-pressed="true"', page)
    assert 'class="ioe-less"' in page and 'class="ioe-more"' in page
    assert "http://" not in page and "https://" not in page and " src=" not in page
    assert len(page.encode()) < 64 * 1024
    assert page.count('class="ioe-curve"') == 3 and page.count('class="ioe-marker"') == 3
    assert page.count('class="ioe-lower"') == 1 and 'stroke-dasharray="5 3"' in page
    assert page.count('class="ioe-frame"') == 4 and "d² = 4,096" in page
    assert page.count('class="ioe-cross"') == 16               # per N, d, pass and mask
    assert page.count('data-pass="forward" data-mask="none" display="none"') == 3
    assert page.count('data-mask="causal" display="none"') == 8
    assert f'>{picture_title(1024)}, d = 64</div>' in page
    for colour in ("#1f77b4", "#d62728", "#7f7f7f"):
        assert colour in page
    # one name per algorithm: the legend and the readouts use the prose names
    assert "square tiling (outer schedule)" in page and "square_tiling (" not in page
    data = _embedded(page)
    assert data["Ns"] == list(NS) and data["ds"] == list(DS)
    assert data["titles"] == {"flash": "FlashAttention", "square_tiling": "square tiling",
                              "standard": "standard attention"}
    for kind in KINDS.values():
        assert len(data[kind]) == 2 and all(len(row) == 2 for row in data[kind])
    for i in range(2):
        for j in range(2):
            doms = [data[kind][i][j]["dom"] for kind in KINDS.values()]
            assert all(dom == doms[0] for dom in doms)                # the four share axes
    assert data["mlabels"] == [[m_label(M, d) for M in Ms] for Ms, d in zip(data["Ms"], DS)]
    # the readout of the initial point (N = 1024, d = 64, M nearest d^2) is in the HTML
    c = picture(data, "forward", 1, 1)
    k = int(re.search(r'class="ioe-M" min="0" max="24" value="(\d+)"', page)[1])
    assert c["Ms"][k] == min(c["Ms"], key=lambda M: abs(math.log(M / 4096)))
    unescaped = page.replace("&gt;", ">")
    assert readout(c, k) in unescaped and words(c, k) in unescaped
    assert m_label(c["Ms"][k], 64) in page
    # one M axis for both d; the controls directly under the picture, the legend folded last
    assert data["axis"] == [static_Ms(32)[0], static_Ms(64)[-1]] == [64, 16384]
    assert all(data[kind][i][j]["dom"][:2] == [math.log10(64), math.log10(16384)]
               for kind in KINDS.values() for i in range(2) for j in range(2))
    assert page.index("</svg>") < page.index('<div class="ioe-controls">') < \
        page.index('class="ioe-readout"') < page.index('<details class="ioe-legend"')
    assert "<summary" in page and "Legend</summary>" in page
    assert "iop-" not in page and "across P" not in page      # the panel is its own piece


@pytest.mark.parametrize("i, j", [(0, 0), (1, 1), (0, 1)])
@pytest.mark.parametrize("kind", list(KINDS.values()))
def test_static_explorer_totals_are_exact(page, i, j, kind):
    """Every embedded count is io_cost's, every bound is lower_curve's."""
    from ioattn.masks import causal

    data = _embedded(page)
    c = picture(data, kind, i, j)
    N, d, backward, masked = c["N"], c["d"], c["backward"], c["causal"]
    mask = causal(N) if masked else None
    for k in (0, 9, 20, 24):
        M = c["Ms"][k]
        for name in NAMES:
            t = c["totals"][name][k]
            assert t == (io_cost(name, N, d, M, backward=backward, mask=mask,
                                 **DEFAULT_OPTIONS.get(name, {})).total
                         if M >= c["min_M"][name] else None)
    Z = N * (N + 1) // 2 if masked else None
    assert c["lower"] == lower_curve(N, d, c["Ms"], backward=backward, Z=Z)


def test_static_explorers_are_unique():
    a, b = static_explorer(256, ds=(16,), Ns=(256,)), static_explorer(256, ds=(16,), Ns=(256,))
    ids = re.findall(r'<div class="ioattn-explorer" id="([^"]+)"', a + b)
    assert len(ids) == 2 and ids[0] != ids[1]
    # the div, its style and its script
    assert a.count(ids[0]) == 3 and ids[0] not in b
    with pytest.raises(ValueError, match="not one of"):
        static_explorer(256, ds=(16, 32), d=64)
    with pytest.raises(ValueError, match="N = 512 is not one of"):
        static_explorer(512, ds=(16,), Ns=(256,))
    with pytest.raises(TypeError, match="backward must be True or False"):
        static_explorer(256, ds=(16,), backward="yes")


# ---------------------------------------------------------------------------------- words
def test_ratio_text_is_the_exact_ratio_rounded_half_up():
    import random
    from fractions import Fraction

    rng = random.Random(1)
    pairs = [(5, 5), (1003, 1000), (1001, 1000), (10005, 10000), (1005, 1000), (999, 1000),
             (250, 2), (99999, 1000), (3 * 10 ** 17 + 1, 10 ** 17), (10 ** 18 + 1, 10 ** 18)]
    pairs += [(rng.randrange(1, 10 ** 9), rng.randrange(1, 10 ** 9)) for _ in range(300)]
    for a, b in pairs:
        text = ratio_text(a, b)
        assert text.endswith("×")
        value = Fraction(text[:-1])
        p = len(text[:-1].split(".")[1]) if "." in text else 0
        r, half = Fraction(a, b), Fraction(1, 2 * 10 ** p)
        assert value - half <= r < value + half               # rounded half up, exactly
        assert (value == 1) == (a == b) or p == 9             # 1.00× only for equal counts
        assert p >= (2 if r < 10 else 1 if r < 100 else 0)
    assert ratio_text(1005, 1000) == "1.01×" and ratio_text(10005, 10000) == "1.001×"
    assert ratio_text(1001, 1000) == "1.001×" and ratio_text(999, 1000) == "0.999×"
    with pytest.raises(ValueError):
        ratio_text(1, 0)


def test_words_are_exact_ratios_of_exact_counts():
    N, d = 4096, 64
    c = curves(N, d, Ms=[64, 300, 3032, 4096, 65536])
    T = c["titles"]
    for k, M in enumerate(c["Ms"]):
        cost = {n: io_cost(n, N, d, M, **DEFAULT_OPTIONS.get(n, {})).total
                for n in NAMES if M >= c["min_M"][n]}
        ranked = sorted((t, n) for n, t in cost.items())
        (tb, best), rest = ranked[0], ranked[1:]
        text = words(c, k)
        assert text.startswith(f"At M = {M:,}: {T[best]} moves the fewest entries; ")
        for i, (t, n) in enumerate(rest):
            said = f"{T[n]} moves {ratio_text(t, tb)} as many entries as {T[best]}" if i == 0 \
                else f" and {T[n]} {ratio_text(t, tb)} as many;"
            assert said in text
        assert f"; {T[best]} moves {ratio_text(tb, c['lower'][k])} as many as the lower " \
            "bound" in text
        assert "less" not in text
        if "flash" not in cost:
            assert text.endswith("; FlashAttention cannot run (it needs M ≥ 260).")
        assert "_" not in text                            # prose names, not code names
    assert words(c, 3).startswith("At M = 4,096: FlashAttention moves the fewest entries; "
                                  "square tiling moves 1.")
    # only one runs, none runs, and a tie
    one = {"Ms": [10], "names": ["a", "b"], "titles": {"a": "A", "b": "B"},
           "totals": {"a": [50], "b": [None]}, "min_M": {"a": 1, "b": 20}, "lower": [25]}
    assert words(one, 0) == ("At M = 10: only A can run; it moves 50 entries; A moves 2.00× as "
                             "many as the lower bound; B cannot run (it needs M ≥ 20).")
    one["totals"]["b"] = [50]
    assert words(one, 0) == ("At M = 10: A moves the fewest entries; B moves as many entries "
                             "as A; A moves 2.00× as many as the lower bound.")
    one["totals"] = {"a": [None], "b": [None]}
    assert words(one, 0).startswith("At M = 10: no algorithm can run; A cannot run")


def test_flash_from_is_the_last_crossover_to_flash():
    for backward in (False, True):
        c = curves(4096, 64, backward=backward)
        M = flash_from(c)
        assert M == c["crossovers"][-1]["M"] and c["crossovers"][-1]["after"] == "flash"
        assert all(n == "flash" for m, n in zip(c["Ms"], c["cheapest"]) if m >= M)
    c = curves(4096, 64, Ms=[256, 1024])                    # square tiling wins throughout
    assert flash_from(c) is None


_RATIO_DRIVER = r"""
const page = require("fs").readFileSync(0, "utf8");
const src = page.match(/function ratio\(a, b\) \{[\s\S]*?\n  \}\n/)[0];
eval(src);
const pairs = JSON.parse(process.argv[1]);
process.stdout.write(JSON.stringify(pairs.map(p => ratio(p[0], p[1]))));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_script_ratios_are_python_ratios(page):
    """The script's ratio (on BigInt) prints what :func:`ratio_text` prints."""
    import random

    rng = random.Random(2)
    pairs = [[5, 5], [1003, 1000], [1005, 1000], [10005, 10000], [999, 1000], [250, 2],
             [2 ** 53 + 1, 2 ** 53 - 1]]
    pairs += [[rng.randrange(1, 10 ** 11), rng.randrange(1, 10 ** 11)] for _ in range(500)]
    pairs += [[rng.randrange(10 ** 6, 10 ** 7), rng.randrange(10 ** 6, 10 ** 7) // 10]
              for _ in range(100)]
    pairs = [p for p in pairs if max(p) < 2 ** 53]          # JSON numbers are doubles
    proc = subprocess.run(["node", "-e", _RATIO_DRIVER, json.dumps(pairs)], input=page,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [ratio_text(a, b) for a, b in pairs]


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
function all(re, keys) {
  return Array.from(page.matchAll(re), m => {
    const a = {}; keys.forEach((k, i) => { a[k] = m[i + 1]; }); return element(a); });
}
const curves = all(/class="ioe-curve" data-name="([^"]+)"/g, ["data-name"]);
const markers = all(/class="ioe-marker" data-name="([^"]+)"/g, ["data-name"]);
const frames = all(/class="ioe-frame" data-n="(\d+)" data-d="(\d+)"/g, ["data-n", "data-d"]);
const cross = all(
  /class="ioe-cross" data-n="(\d+)" data-d="(\d+)" data-pass="(\w+)" data-mask="(\w+)"/g,
  ["data-n", "data-d", "data-pass", "data-mask"]);
const passB = all(/class="ioe-pass" data-value="(\w+)" aria-pressed="(\w+)"/g,
                  ["data-value", "aria-pressed"]);
const maskB = all(/class="ioe-mask" data-value="(\w+)" aria-pressed="(\w+)"/g,
                  ["data-value", "aria-pressed"]);
const sM = element(), sd = element(), sN = element();
sM.value = page.match(/class="ioe-M" min="0" max="\d+" value="(\d+)"/)[1];
sd.value = page.match(/class="ioe-d" min="0" max="\d+" value="(\d+)"/)[1];
sN.value = page.match(/class="ioe-N" min="0" max="\d+" value="(\d+)"/)[1];
const one = {"script.ioe-data": {textContent: json}, "input.ioe-M": sM, "input.ioe-d": sd,
  "input.ioe-N": sN, ".ioe-Mvalue": element(), ".ioe-dvalue": element(),
  ".ioe-Nvalue": element(), ".ioe-words": element(), ".ioe-numbers": element(),
  "line.ioe-now": element(), "text.ioe-now-label": element(), ".ioe-title": element(),
  "polyline.ioe-lower": element(), "polyline.ioe-lower-any": element(),
  "button.ioe-less": element(), "button.ioe-more": element()};
const many = {"g.ioe-frame": frames, "g.ioe-cross": cross, "polyline.ioe-curve": curves,
  "circle.ioe-marker": markers, "button.ioe-pass": passB, "button.ioe-mask": maskB};
const root = {querySelector: s => one[s], querySelectorAll: s => many[s]};
global.document = {getElementById: x => (x === id ? root : null)};
eval(code);
const seen = [];
function pressed(bs) { return bs.filter(b => b.attrs["aria-pressed"] === "true")
                                .map(b => b.attrs["data-value"]); }
function snap() {
  const m = {}, c = {};
  markers.forEach(e => { m[e.attrs["data-name"]] = Object.assign({}, e.attrs); });
  curves.forEach(e => { c[e.attrs["data-name"]] = e.attrs.points; });
  const nl = one["text.ioe-now-label"];
  seen.push({i: +sN.value, j: +sd.value, k: +sM.value, pass: pressed(passB), mask: pressed(maskB),
    words: one[".ioe-words"].textContent, numbers: one[".ioe-numbers"].textContent,
    title: one[".ioe-title"].textContent, M: one[".ioe-Mvalue"].textContent,
    N: one[".ioe-Nvalue"].textContent, d: one[".ioe-dvalue"].textContent,
    now: one["line.ioe-now"].attrs.x1,
    nowLabel: [nl.textContent, nl.attrs.x, nl.attrs["text-anchor"]],
    markers: m, curves: c,
    lower: one["polyline.ioe-lower"].attrs.points,
    lower_any: one["polyline.ioe-lower-any"].attrs.points,
    frames: frames.map(f => [+f.attrs["data-n"], +f.attrs["data-d"], f.attrs.display]),
    cross: cross.map(f => [+f.attrs["data-n"], +f.attrs["data-d"], f.attrs["data-pass"],
                           f.attrs["data-mask"], f.attrs.display])});
}
snap();                                                // the initial show()
const steps = JSON.parse(process.argv[1]);
for (const [which, v] of steps) {
  if (which === "pass" || which === "mask") {
    (which === "pass" ? passB : maskB).find(b => b.attrs["data-value"] === v).listeners.click();
  } else if (which === "less" || which === "more") {
    one["button.ioe-" + which].listeners.click();
  } else {
    const s = {M: sM, d: sd, N: sN}[which];
    s.value = String(v); s.listeners.input();
  }
  snap();
}
process.stdout.write(JSON.stringify(seen));
"""


def _kind(shot) -> str:
    (p,), (m,) = shot["pass"], shot["mask"]
    return KINDS[p == "backward", m == "causal"]


def _check_shot(data, shot):
    """The script's state after a step is the one the data says, in the words Python writes."""
    kind = _kind(shot)
    c = picture(data, kind, shot["i"], shot["j"])
    k, N, d = shot["k"], c["N"], c["d"]
    assert shot["words"] == words(c, k)
    assert shot["numbers"] == readout(c, k)
    assert shot["M"] == m_label(c["Ms"][k], d)
    assert (shot["N"], shot["d"]) == (f"N = {N:,}", f"d = {d}")
    assert shot["title"] == f"{picture_title(N, c['backward'], c['causal'])}, d = {d}"
    x = _px(c["dom"], c["Ms"][k])
    assert float(shot["now"]) == x
    label = f"M = {c['Ms'][k]:,}"
    nx, anchor = _side(x, label)
    assert shot["nowLabel"] == [label, str(nx), anchor]
    assert [f[2] for f in shot["frames"]] == \
        ["inline" if (f[0], f[1]) == (N, d) else "none" for f in shot["frames"]]
    p, m = shot["pass"][0], shot["mask"][0]
    assert [x[4] for x in shot["cross"]] == \
        ["inline" if (x[0], x[1], x[2], x[3]) == (N, d, p, m) else "none" for x in shot["cross"]]
    for name in NAMES:
        t = c["totals"][name][k]
        mark = shot["markers"][name]
        assert mark["visibility"] == ("visible" if t is not None else "hidden")
        if t is not None:
            assert (float(mark["cx"]), float(mark["cy"])) == _px(c["dom"], c["Ms"][k], t)


def _check_panel(data, shot, kind):
    """The panel across P processors after a step: Python's sentence, numbers and geometry."""
    pc = parallel_picture(data, kind, shot["i"], shot["j"])
    assert shot["pass"] == ["backward" if pc["backward"] else "forward"]
    assert shot["mask"] == ["causal" if pc["causal"] else "none"]
    assert (shot["N"], shot["d"]) == (f"N = {pc['N']:,}", f"d = {pc['d']}")
    t, Ps = shot["t"], pc["Ps"]
    dom = data["par"]["doms"][data["par"]["nd"][shot["i"]][shot["j"]]["dom"]]
    assert shot["pwords"] == parallel_words(pc, t)
    assert shot["pnumbers"] == parallel_readout(pc, t)
    assert shot["ptitle"] == parallel_title(pc["N"], pc["d"], pc["heads"], pc["backward"],
                                            pc["causal"])
    assert shot["P"] == f"P = {Ps[t]}"
    x = _ppx(Ps, Ps[t])
    assert float(shot["pnow"]) == x
    assert shot["pnowLabel"] == [f"P = {Ps[t]}", *map(str, _side(x, f"P = {Ps[t]}"))]
    assert shot["pbound"] == _ppoints(Ps, dom, pc["bound"])
    assert [f[1] for f in shot["pframes"]] == \
        ["inline" if data["par"]["doms"][f[0]] == dom else "none" for f in shot["pframes"]]
    for name in pc["names"]:
        assert shot["pcurves"][name] == _ppoints(Ps, dom, pc["traffic"][name])
        v, mark = pc["traffic"][name][t], shot["pmarkers"][name]
        assert mark["visibility"] == ("visible" if v else "hidden")
        if v:
            assert (float(mark["cx"]), float(mark["cy"])) == (x, _ppy(dom, v))


def _run_node(page, steps):
    proc = subprocess.run(["node", "-e", _NODE_DRIVER, json.dumps(steps)], input=page,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_script_runs(page):
    """Under node with a stub DOM: at every point the script writes :func:`words` and
    :func:`readout`; the M slider from smallest to largest turns the cheapest from square tiling
    into FlashAttention; the N and d sliders and the − and + buttons do what they say."""
    data = _embedded(page)
    steps = [["M", 0], ["M", 24], ["d", 0], ["M", 0], ["M", 99], ["N", 0], ["less"], ["less"],
             ["more"], ["N", 1], ["d", 1]] + [["M", k] for k in range(25)]
    steps += [["M", 8], ["d", 0], ["d", 1]]             # M = 1,024 at d = 64, then d = 32, 64
    seen = _run_node(page, steps)
    start = int(re.search(r'class="ioe-M" min="0" max="24" value="(\d+)"', page)[1])
    assert (seen[0]["i"], seen[0]["j"], seen[0]["k"]) == (1, 1, start)
    for shot in seen:
        _check_shot(data, shot)
    small, large = seen[1], seen[2]
    assert (small["k"], large["k"]) == (0, 24)
    assert "cheapest square tiling." in small["numbers"]
    assert "cheapest FlashAttention." in large["numbers"]
    assert large["words"].startswith(f"At M = {STATIC_HI * 64 * 64:,}: FlashAttention "
                                     "moves the fewest entries; ")
    assert small["markers"]["flash"]["visibility"] == "hidden"      # flash cannot run at M = 256
    assert float(large["now"]) > float(small["now"])
    # the geometry the script computes is the one the HTML starts with
    for name in NAMES:
        assert f'data-name="{name}" points="{seen[0]["curves"][name]}"' in page
    assert f'class="ioe-lower" points="{seen[0]["lower"]}"' in page
    assert f'class="ioe-lower-any" points="{seen[0]["lower_any"]}"' in page
    assert seen[3]["j"] == 0 and seen[3]["curves"] != seen[2]["curves"]
    assert seen[5]["k"] == 24                                    # clamped
    assert seen[6]["i"] == 0 and seen[6]["curves"] != seen[5]["curves"]     # N = 256
    assert seen[6]["numbers"].startswith("N = 256, d = 32,")
    assert [s["k"] for s in seen[7:10]] == [23, 22, 23]          # −, −, +
    cheapest = [s["numbers"].split("cheapest ")[1].split(".")[0] for s in seen[12:37]]
    c = curves(1024, 64, Ms=static_Ms(64))
    assert data["Ms"][1] == c["Ms"] and c["Ms"][-1] == STATIC_HI * 64 * 64
    assert cheapest == [c["titles"][n] for n in c["cheapest"]]
    # a new d keeps M in entries: 1,024 at d = 64, at d = 32 and back at d = 64
    assert [s["M"].split(" = ")[2].split()[0] for s in seen[-3:]] == ["1,024"] * 3
    assert [s["j"] for s in seen[-3:]] == [1, 0, 1] and seen[-2]["now"] == seen[-3]["now"]
    # ... while M = d^2 moves by 2 octaves on the screen (d from 64 to 32: a factor 4 in M)
    x2 = [float(re.search(r'<line class="ioe-d2" x1="([\d.]+)"', f)[1]) for f in
          re.findall(r'<g class="ioe-frame" data-n="1024" data-d="\d+"[^>]*>.*?</g>', page)]
    assert x2[1] - x2[0] == pytest.approx(2 * octave_px(data["axis"]), abs=0.1)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_pass_and_mask_buttons(page):
    """Under node: the pass and mask buttons switch the picture (and say which is on); in both
    passes and masks, for every N and d, the M slider from smallest to largest turns the
    cheapest from square tiling into FlashAttention."""
    data = _embedded(page)
    steps = []
    for p in ("backward", "forward"):
        for m in ("causal", "none"):
            steps += [["pass", p], ["mask", m]]
            for i in range(2):
                for j in range(2):
                    steps += [["N", i], ["d", j], ["M", 0], ["M", 24]]
    seen = _run_node(page, steps)
    for shot in seen:
        _check_shot(data, shot)
    back = seen[1]
    assert back["pass"] == ["backward"] and back["mask"] == ["none"]
    assert back["title"] == f"{picture_title(1024, True)}, d = 64"
    assert back["numbers"].split(":")[0].endswith("(backward pass)")
    causal = seen[2]
    assert causal["mask"] == ["causal"] and "(backward pass, causal mask)" in causal["numbers"]
    assert causal["lower_any"] == "" and seen[0]["lower_any"] != ""
    ends = [(s["numbers"], t["numbers"]) for s, t in zip(seen, seen[1:])
            if (s["k"], t["k"]) == (0, 24) and (s["i"], s["j"]) == (t["i"], t["j"])]
    assert len(ends) == 16
    for small, large in ends:
        assert "cheapest square tiling." in small and "cheapest FlashAttention." in large


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_explorer_can_start_backward_and_causal():
    page = static_explorer(256, ds=(16, 32), Ns=(256,), d=32, backward=True, causal=True, M=512)
    assert re.search(r'class="ioe-pass" data-value="backward" aria-pressed="true"', page)
    assert re.search(r'class="ioe-mask" data-value="causal" aria-pressed="true"', page)
    data = _embedded(page)
    c = picture(data, "causal_backward", 0, 1)
    k = c["Ms"].index(min(c["Ms"], key=lambda M: abs(math.log(M / 512))))
    assert readout(c, k) in page.replace("&gt;", ">")
    (shot,) = _run_node(page, [])
    assert (shot["pass"], shot["mask"], shot["k"]) == (["backward"], ["causal"], k)
    _check_shot(data, shot)
    for name in NAMES:
        assert f'data-name="{name}" points="{shot["curves"][name]}"' in page
    with pytest.raises(TypeError, match="causal must be True or False"):
        static_explorer(256, ds=(16,), causal=1)


def test_static_explorer_marks_real_gpus():
    """The triangles sit at the GPUs' on-chip memory in fp16 entries, where in range."""
    page = static_explorer(1024, ds=(32, 64), Ns=(1024,))
    frames = re.findall(r'<g class="ioe-frame" data-n="1024" data-d="(\d+)"[^>]*>(.*?)</g>'
                        r'(?=<g class="ioe-(?:frame|cross)")', page, re.S)
    by_d = dict(frames)
    data = _embedded(page)
    for j, d in enumerate((32, 64)):
        dom = data["forward"][0][j]["dom"]
        for names, M in gpus.marks():
            inside = data["axis"][0] <= M <= data["axis"][1]        # one M axis for every d
            assert (f'<path d="M{_tenth(_px(dom, M) - 5)} ' in by_d[str(d)]) == inside
            assert (f">{names}</text>" in by_d[str(d)]) == inside
    assert "GPUs: T4, A100, H100, H200 →" in by_d["32"]         # all beyond 32 · 32 · 64
    assert "T4 163,840; A100 215,040; H100, H200 247,808" in page          # in the legend


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
    assert "<div style='font-family:monospace'>backward pass: N = 4,096, d = 64" in text
    c = curves(4096, 64, Ms=[4096], backward=True)
    assert text.startswith(f"<div style='font-family:sans-serif;font-weight:bold'>"
                           f"{html.escape(words(c, 0))}</div>")
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
    assert "<div style='font-family:monospace'>causal mask: N = 1,024, d = 64" in text
    c = curves(N, 64, Ms=[4096], causal=True)
    assert text.startswith(f"<div style='font-family:sans-serif;font-weight:bold'>"
                           f"{html.escape(words(c, 0))}</div>")
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
    assert "<div style='font-family:monospace'>backward pass: causal mask: " in w.readout.value
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


def test_static_explorer_in_processes_is_the_same():
    one = static_explorer(256, ds=(16, 32), Ns=(256, 512), workers=1)
    two = static_explorer(256, ds=(16, 32), Ns=(256, 512), workers=2)
    assert _embedded(one) == _embedded(two)
    uid = r"ioattn-explorer-\w+-\d+"
    assert re.sub(uid, "", one) == re.sub(uid, "", two)


# ---------------------------------------------------------------------- across P processors
@pytest.mark.parametrize("kind", list(KINDS.values()))
def test_static_explorer_panel_is_exact(ppage, kind):
    """Every count in the panel's JSON is ioattn.parallel.cost's, every bound the
    memory-independent bound rounded down; causal or not, the words moved are the same."""
    from ioattn.parallel import WITH_BACKWARD, cost
    from ioattn.parallel.bounds import memory_independent

    data = _embedded(ppage, "iop-data")
    Ps, names = data["par"]["Ps"], data["par"]["names"]
    assert data["par"]["backward_names"] == [n for n in names if n in WITH_BACKWARD]
    assert Ps == parallel_Ps(min(NS)) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for i, N in enumerate(NS):
        for j, d in enumerate(DS):
            pc = parallel_picture(data, kind, i, j)
            backward, causal = pc["backward"], pc["causal"]
            assert pc == across(N, d, Ps, heads=16, backward=backward, causal=causal,
                                names=names)
            for t, P in enumerate(Ps):
                assert pc["bound"][t] == math.floor(memory_independent(N, d, P, heads=16,
                                                                       causal=causal))
                for name in pc["names"]:
                    applies = (name in WITH_BACKWARD or not backward) and \
                        (name != "all_to_all" or P <= 16)
                    got = (pc["traffic"][name][t], pc["received"][name][t],
                           pc["memory"][name][t])
                    if not applies:
                        assert got == (None, None, None) and pc["why"][name][t]
                        continue
                    c = cost(name, N, d, P, heads=16, backward=backward, causal=causal)
                    assert got == (c.max_traffic, c.max_received, c.max_memory)
                    assert c.max_received >= pc["bound"][t]        # the bound holds


def test_parallel_words_at_several_P():
    c = across(4096, 64)
    said = {P: parallel_words(c, t) for t, P in enumerate(c["Ps"])}
    assert said[1] == ("On P = 1 processor there is nothing to communicate: no algorithm moves "
                       "a word.")
    assert said[2] == (
        "At P = 2: all-to-all moves the fewest words, 8,388,608 on the busiest processor, as "
        "ring attention, striped attention and the 2D grid do; all-to-all holds 0.92× as much "
        "memory per processor as ring attention (11,599,872 words against 12,648,448) and "
        "receives 2.96× as many words as the lower bound on the words received.")
    assert said[16] == (
        "At P = 16: all-to-all moves the fewest words, 1,966,080 on the busiest processor; "
        "ring attention moves 8.00× as many; all-to-all holds 0.85× as much memory per "
        "processor as ring attention (1,794,048 words against 2,105,344) and receives 2.07× "
        "as many words as the lower bound on the words received.")
    assert said[32] == (
        "At P = 32: the 2D grid moves the fewest words, 5,255,168 on the busiest processor; "
        "ring attention moves 3.09× as many; the 2D grid holds 3.01× as much memory per "
        "processor as ring attention (3,170,304 words against 1,052,672) and receives 7.53× "
        "as many words as the lower bound on the words received; all-to-all needs H ≥ P "
        "(H = 16).")
    assert all("less" not in text for text in said.values())
    back = across(4096, 64, backward=True, causal=True)
    assert parallel_words(back, 2) == (
        "At P = 4: all-to-all moves the fewest words, 11,059,200 on the busiest processor; "
        "ring attention moves 2.65× as many; all-to-all holds 1.09× as much memory per "
        "processor as ring attention (16,023,552 words against 14,712,832) and receives 9.61× "
        "as many words as the lower bound on the words received.")
    assert parallel_readout(back, 2) == (
        "N = 4,096, d = 64, H = 16, P = 4 (backward pass, causal mask): words moved by the "
        "busiest processor: ring attention 29,360,128; striped attention 29,360,128; "
        "all-to-all 11,059,200; the 2D grid 14,745,600; lower bound on the words received "
        f"{back['bound'][2]:,}")
    assert parallel_title(4096, 64, 16, True, True) == \
        "Across P processors: the causal attention backward pass, H = 16, N = 4,096, d = 64"


@pytest.mark.parametrize("N, d, heads, backward", [(1024, 32, 16, False), (300, 16, 4, False),
                                                   (4096, 128, 16, True), (1000, 8, 1, False)])
def test_parallel_words_name_the_fewest_words(N, d, heads, backward):
    """At every P the sentence names the algorithm whose busiest processor moves the fewest
    words (by ioattn.parallel.cost), with the exact ratios of its counts."""
    from ioattn.parallel import ALGORITHMS, cost
    from ioattn.parallel.table import TITLES, why_not

    Ps = parallel_Ps(N)
    c = across(N, d, Ps, heads=heads, backward=backward)
    for t, P in enumerate(Ps[1:], 1):
        costs = {n: cost(n, N, d, P, heads=heads, backward=backward) for n in ALGORITHMS
                 if why_not(n, N, P, heads, backward) is None}
        least = min(x.max_traffic for x in costs.values())
        best = min((x.max_memory, ALGORITHMS.index(n), n) for n, x in costs.items()
                   if x.max_traffic == least)[2]
        text = parallel_words(c, t)
        assert text.startswith(f"At P = {P}: {TITLES[best]} moves the fewest words, "
                               f"{least:,} on the busiest processor"), text
        ring, b = costs["ring"], costs[best]
        if ring.max_traffic != least:
            assert f"; ring attention moves {ratio_text(ring.max_traffic, least)} as many;" \
                in text
        if best != "ring":
            assert f"; {TITLES[best]} holds {ratio_text(b.max_memory, ring.max_memory)} as " \
                "much memory per processor as ring attention (" in text
        assert c["bound"][t] > 0
        assert f"receives {ratio_text(b.max_received, c['bound'][t])} as many words as the " \
            "lower bound" in text
        out = [n for n in ALGORITHMS if n not in costs]
        if out:         # every algorithm has a backward pass
            assert out == ["all_to_all"]
            assert text.endswith(f"; all-to-all needs H ≥ P (H = {heads}).")
        else:
            assert text.endswith("the lower bound on the words received.")


def test_the_panel_of_every_scheme_names_the_fewest_words():
    """With every scheme drawn, the sentence names the least traffic among all of them (at
    P = 16, H = 16: all-to-all, tied with the head-group hybrids, which are all-to-all there),
    backward too, and the legend says which lines lie on an earlier one."""
    from ioattn.parallel import NAMES as PNAMES
    from ioattn.parallel import WITH_BACKWARD, cost

    c = across(4096, 64, [1, 2, 16], names=PNAMES)
    assert c["names"] == list(PNAMES)
    text = parallel_words(c, 2)
    least = min(cost(n, 4096, 64, 16, heads=16).max_traffic for n in PNAMES)
    assert text.startswith(f"At P = 16: all-to-all moves the fewest words, {least:,} on the "
                           "busiest processor, as Ulysses × ring (USP), Ulysses × zigzag "
                           "ring and head groups × grid do;"), text
    back = parallel_words(across(4096, 64, [1, 2, 16], names=PNAMES, backward=True), 2)
    # backward: the head-group schemes (16 x 1 here) tie all-to-all, head groups x grid with
    # the least memory
    least = min(cost(n, 4096, 64, 16, heads=16, backward=True).max_traffic
                for n in WITH_BACKWARD)
    assert cost("usp_grid", 4096, 64, 16, heads=16, backward=True).max_traffic == least
    assert back.startswith(f"At P = 16: head groups × grid moves the fewest words, {least:,} "
                           "on the busiest processor, as all-to-all, Ulysses × ring (USP) and "
                           "Ulysses × zigzag ring do;"), back
    assert back.endswith("the lower bound on the words received."), back
    legend = static_parallel_explorer(4096, ds=(64,), Ns=(4096,), names=PNAMES)
    assert "zigzag ring attention (the words of ring attention)" in legend
    assert "Ulysses × zigzag ring (the words of Ulysses × ring (USP))" in legend
    assert "the 2D grid (the words" not in legend
    with pytest.raises(ValueError, match="names must include 'ring'"):
        across(4096, 64, names=("grid", "usp"))
    with pytest.raises(ValueError, match="unknown parallel algorithm 'flash'"):
        static_parallel_explorer(4096, names=("ring", "flash"))


def test_across_and_static_explorer_refuse_bad_input():
    with pytest.raises(ValueError, match="P = 512 > N = 256"):
        across(256, 16, [2, 512])
    with pytest.raises(TypeError, match="causal must be True or False"):
        across(256, 16, causal=1)
    with pytest.raises(ValueError, match="P = 512 is more than N = 256"):
        static_parallel_explorer(256, ds=(16,), Ns=(256,), Ps=(1, 512))
    with pytest.raises(ValueError, match=r"P = 3 is not one of Ps = \[1, 2, 4\]"):
        static_parallel_explorer(256, ds=(16,), Ns=(256,), Ps=(1, 2, 4), P=3)
    with pytest.raises(ValueError, match="d = 48 is not one of ds"):
        static_parallel_explorer(256, ds=(16,), Ns=(256,), d=48)
    with pytest.raises(TypeError, match="causal must be True or False"):
        static_parallel_explorer(256, ds=(16,), Ns=(256,), causal="no")
    assert parallel_Ps(100) == [1, 2, 4, 8, 16, 32, 64]


_PARALLEL_DRIVER = r"""
const page = require("fs").readFileSync(0, "utf8");
const json = page.match(
  /<script type="application\/json" class="iop-data">([\s\S]*?)<\/script>/)[1];
const code = page.match(/<script>([\s\S]*?)<\/script>/)[1];
const id = page.match(/<div class="ioattn-parallel iop-panel" id="([^"]+)"/)[1];
function element(attrs) {
  return {attrs: Object.assign({}, attrs || {}), listeners: {}, textContent: "", value: "0",
    setAttribute(k, v) { this.attrs[k] = String(v); }, getAttribute(k) { return this.attrs[k]; },
    addEventListener(t, f) { this.listeners[t] = f; }};
}
function all(re, keys) {
  return Array.from(page.matchAll(re), m => {
    const a = {}; keys.forEach((k, i) => { a[k] = m[i + 1]; }); return element(a); });
}
const many = {
  "polyline.iop-curve": all(/class="iop-curve" data-name="([^"]+)"/g, ["data-name"]),
  "circle.iop-marker": all(/class="iop-marker" data-name="([^"]+)"/g, ["data-name"]),
  "g.iop-frame": all(/class="iop-frame" data-k="(\d+)"/g, ["data-k"]),
  "button.iop-pass": all(/class="iop-pass" data-value="(\w+)" aria-pressed="(\w+)"/g,
                         ["data-value", "aria-pressed"]),
  "button.iop-mask": all(/class="iop-mask" data-value="(\w+)" aria-pressed="(\w+)"/g,
                         ["data-value", "aria-pressed"])};
const one = {"script.iop-data": {textContent: json}};
function q(s) {                       /* any other element, made when first asked for */
  if (!(s in one)) {
    one[s] = element();
    const m = s.match(/^input\.(iop-\w+)$/);
    if (m) one[s].value = page.match(new RegExp('class="' + m[1] + '" min="0" max="\\d+" ' +
                                                'value="(\\d+)"'))[1];
  }
  return one[s];
}
global.document = {getElementById: x => (x === id ? {querySelector: q,
  querySelectorAll: s => many[s]} : null)};
eval(code);
const seen = [];
function pressed(bs) { return bs.filter(b => b.attrs["aria-pressed"] === "true")
                                .map(b => b.attrs["data-value"]); }
function snap() {
  const pm = {}, pc = {};
  many["circle.iop-marker"].forEach(e => {
    pm[e.attrs["data-name"]] = Object.assign({}, e.attrs); });
  many["polyline.iop-curve"].forEach(e => { pc[e.attrs["data-name"]] = e.attrs.points; });
  const nl = q("text.iop-now-label");
  seen.push({i: +q("input.iop-N").value, j: +q("input.iop-d").value, t: +q("input.iop-P").value,
    pass: pressed(many["button.iop-pass"]), mask: pressed(many["button.iop-mask"]),
    pwords: q(".iop-words").textContent, pnumbers: q(".iop-numbers").textContent,
    ptitle: q(".iop-title").textContent, P: q(".iop-Pvalue").textContent,
    N: q(".iop-Nvalue").textContent, d: q(".iop-dvalue").textContent,
    pnow: q("line.iop-now").attrs.x1, pnowLabel: [nl.textContent, nl.attrs.x,
                                                  nl.attrs["text-anchor"]],
    pbound: q("polyline.iop-bound").attrs.points, pmarkers: pm, pcurves: pc,
    pframes: many["g.iop-frame"].map(f => [+f.attrs["data-k"], f.attrs.display])});
}
snap();
for (const [which, v] of JSON.parse(process.argv[1])) {
  if (which === "pass" || which === "mask")
    many["button.iop-" + which].find(b => b.attrs["data-value"] === v).listeners.click();
  else if (which === "less" || which === "more") q("button.iop-" + which).listeners.click();
  else { const s = q("input.iop-" + which); s.value = String(v); s.listeners.input(); }
  snap();
}
process.stdout.write(JSON.stringify(seen));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_static_parallel_explorer_controls(ppage):
    """Under node: the P slider and its − and + buttons move the panel's line and circles and
    change its sentence; the N and d sliders and the pass and mask buttons switch the data; at
    every step the script writes what Python writes (:func:`parallel_words`,
    :func:`parallel_readout`, the geometry)."""
    data = _embedded(ppage, "iop-data")
    steps = [["P", 0], ["P", 8], ["less"], ["less"], ["more"], ["P", 99], ["P", 5]]
    for p in ("backward", "forward"):
        for m in ("causal", "none"):
            steps += [["pass", p], ["mask", m]]
            for i in range(2):
                for j in range(2):
                    steps += [["N", i], ["d", j], ["P", 1], ["P", 4], ["P", 6]]
    proc = subprocess.run(["node", "-e", _PARALLEL_DRIVER, json.dumps(steps)], input=ppage,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert (seen[0]["i"], seen[0]["j"], seen[0]["t"]) == (1, 1, 4)      # N = 1024, d = 64, P = 16
    for shot in seen:
        _check_panel(data, shot, _kind(shot))
    assert [s["t"] for s in seen[1:8]] == [0, 8, 7, 6, 7, 8, 5]     # clamped at the end
    assert seen[1]["pwords"].startswith("On P = 1 processor there is nothing to communicate")
    best = "head groups × grid" if "usp_grid" in data["par"]["names"] else "the 2D grid"
    assert seen[2]["pwords"].startswith(f"At P = 256: {best} moves the fewest words")
    assert len({s["pwords"] for s in seen}) > 20
    assert seen[8]["ptitle"].startswith("Across P processors: the attention backward pass")


def test_static_parallel_explorer_html(ppage):
    """The panel's HTML: the picture, its controls directly under it, the readout, the folded
    legend; at P = 16 first, with Python's sentence."""
    from ioattn.parallel import NAMES as PNAMES

    assert re.search(r'>P</span><input type="range" class="iop-P" min="0" max="8" value="4"',
                     ppage)
    for cls in ("iop-N", "iop-d"):
        assert f'class="{cls}" min="0" max="1" value="1"' in ppage
    assert 'class="iop-less"' in ppage and 'class="iop-more"' in ppage
    drawn = len(_embedded(ppage, "iop-data")["par"]["names"])
    assert drawn in (4, len(PNAMES))
    assert ppage.count('class="iop-curve"') == drawn == ppage.count('class="iop-marker"')
    assert ppage.count('class="iop-bound"') == 1
    assert ppage.index("</svg>") < ppage.index('class="iop-controls"') < \
        ppage.index('class="iop-readout"') < ppage.index('<details class="iop-legend"')
    data = _embedded(ppage, "iop-data")
    assert data["par"]["Ps"] == list(PARALLEL_PS) and data["par"]["heads"] == 16
    pc = parallel_picture(data, "forward", 1, 1)
    unescaped = ppage.replace("&gt;", ">")
    assert parallel_words(pc, 4) in unescaped and parallel_readout(pc, 4) in unescaped
    assert f">{parallel_title(1024, 64)}</div>" in ppage
    assert ppage.count('class="iop-frame"') == len(data["par"]["doms"])
    assert "http://" not in ppage and "https://" not in ppage and " src=" not in ppage
    other = static_parallel_explorer(1024, ds=DS, Ns=NS, backward=True, causal=True, P=64)
    assert re.search(r'class="iop-pass" data-value="backward" aria-pressed="true"', other)
    c = parallel_picture(_embedded(other, "iop-data"), "causal_backward", 1, 1)
    assert parallel_words(c, 6) in other.replace("&gt;", ">")


def test_parallel_explorer_widget():
    pytest.importorskip("ipywidgets")
    w = parallel_explorer(N=4096, d=64)
    P = w.controls["P"]
    assert list(P.options) == list(PARALLEL_PS) and P.value == 16 and w.state["P"] == 16
    c = across(4096, 64)
    assert w.state["across"] == c
    assert html.escape(parallel_words(c, 4), quote=False) in w.panel.value
    assert html.escape(parallel_readout(c, 4), quote=False) in w.panel.value
    assert f'class="iop-now" x1="{_ppx(c["Ps"], 16)}"' in w.picture.value
    assert "<svg" in w.picture.value and "<svg" not in w.panel.value.split("<details")[0]
    assert w.children[0] is w.picture and w.children[1] is P      # P directly under the plot
    P.value = 64                                    # the slider redraws the panel
    assert w.state["P"] == 64
    assert html.escape(parallel_words(c, 6), quote=False) in w.panel.value
    assert "the 2D grid moves the fewest words" in w.panel.value
    w.update(backward=True, causal=True, P=1)
    back = across(4096, 64, backward=True, causal=True)
    assert w.state["across"] == back and w.state["P"] == 1
    assert "nothing to communicate" in w.panel.value
    assert parallel_title(4096, 64, 16, True, True) in w.picture.value
    w.update(P=4, N=1024)
    assert html.escape(parallel_words(across(1024, 64, backward=True, causal=True), 2),
                       quote=False) in w.panel.value
    w.controls["d"].value = 128                     # a slider itself redraws
    assert w.state["d"] == 128 and w.state["across"] == across(1024, 128, backward=True,
                                                                 causal=True)
    with pytest.raises(ValueError, match="P = 3 is not one of"):
        w.update(P=3)
    with pytest.raises(ValueError, match="P = 3 is not one of"):
        parallel_explorer(P=3)
    with pytest.raises(TypeError, match="backward must be True or False"):
        w.update(backward="yes")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"N": 0}, ValueError, "N must be at least 1, got 0"),
    ({"N": 10**9}, ValueError, "N = 1,000,000,000 is more than the explorer draws"),
    ({"N": "4096"}, TypeError, "N must be an integer, got '4096'"),
    ({"N": 4096.7}, TypeError, "N must be an integer, got 4096.7"),
    ({"ds": (64, 512)}, ValueError, "ds = 512 is more than the explorer draws \\(ds <= 256\\)"),
    ({"ds": ()}, ValueError, "ds is empty"),
    ({"ds": 64}, TypeError, "ds must be a sequence of integers"),
    ({"Ns": (4096, 10**6)}, ValueError, "Ns = 1,000,000 is more than the explorer draws"),
    ({"Ms": [64, 10**12]}, ValueError, "Ms = 1,000,000,000,000 is more than the explorer"),
    ({"Ms": [64, 0]}, ValueError, "Ms must be at least 1"),
    ({"M": 0}, ValueError, "M must be at least 1"),
    ({"M": "4096"}, TypeError, "M must be an integer"),
    ({"d": 48}, ValueError, "d = 48 is not one of ds"),
    ({"backward": "yes"}, TypeError, "backward must be True or False"),
    ({"names": ["flsh"]}, ValueError, "unknown algorithm 'flsh' \\(did you mean 'flash'\\?\\)"),
    ({"names": "flash"}, TypeError, "names must be a list of algorithm names"),
    ({"names": []}, ValueError, "names is empty"),
    ({"options": {"standrd": {}}}, ValueError, "did you mean 'standard'"),
    ({"options": {"square_tiling": "outer"}}, TypeError, "options\\['square_tiling'\\] must be"),
    ({"workers": 0}, ValueError, "workers must be at least 1"),
    ({"progress": 1}, TypeError, "progress must be True or False"),
])
def test_static_explorer_refuses_bad_input_up_front(kwargs, error, match, monkeypatch):
    import ioattn.explorer

    def computed(*args, **kw):
        raise AssertionError("computed before the arguments were checked")

    monkeypatch.setattr(ioattn.explorer, "_four", computed)
    with pytest.raises(error, match=match):
        static_explorer(**kwargs)


def test_static_explorer_default_Ns_stay_in_range():
    page = static_explorer(N_MAX, ds=(16,), Ms=[64, 256])
    data = json.loads(re.search(r'class="ioe-data">(.*?)</script>', page, re.S).group(1))
    assert data["Ns"] == [N_MAX // 4, N_MAX]                    # not 4 N_MAX
    page = static_explorer(2, ds=(4,), Ms=[16, 32])
    data = json.loads(re.search(r'class="ioe-data">(.*?)</script>', page, re.S).group(1))
    assert data["Ns"] == [2]


def test_curves_refuse_bad_names_options_and_flags():
    with pytest.raises(ValueError, match="did you mean 'flash'"):
        curves(256, 16, [64], names=["flsh"])
    with pytest.raises(ValueError, match="names is empty"):
        curves(256, 16, [64], names=[])
    with pytest.raises(ValueError, match="did you mean 'square_tiling'"):
        curves(256, 16, [64], options={"square_tilng": {"schedule": "outer"}})
    with pytest.raises(TypeError, match="backward must be True or False, got 'yes'"):
        curves(256, 16, [64], backward="yes")
    with pytest.raises(TypeError, match="Ms must be an integer"):
        curves(256, 16, [64.0], causal=True)
    assert curves(256, 16, [64], names=["flash", "flash"])["names"] == ["flash"]


# ------------------------------------------------------------------------ the absolute M axis
def test_absolute_axis_moves_the_crossover_with_d(capsys):
    """On the book's axis (d = 32, 64, 128, 256; one M range for all), M = d^2 moves 2
    octaves, 56 px of the SVG, for each doubling of d: 6 octaves, 168 px, from d = 32 to
    d = 256, the factor 64 in M. The line where FlashAttention becomes the cheapest for good
    (exact crossovers at N = 4096) moves by the pixels of its own exact factor, which is
    within a factor 2 of 64."""
    ds = (32, 64, 128, 256)
    axis = m_axis([static_Ms(d) for d in ds])
    assert axis == (32 * 32 // 16, STATIC_HI * 256 * 256) == (64, 262144)
    per = octave_px(axis)
    assert per == 336 / 12 == 28.0
    assert m_x(axis[0], axis) == 52 and m_x(axis[1], axis) == 388     # the plot's two edges
    d2 = {d: m_x(d * d, axis) for d in ds}
    assert [d2[b] - d2[a] for a, b in zip(ds, ds[1:])] == [2 * per] * 3
    assert d2[256] - d2[32] == 6 * per == 168                          # log2(64) octaves
    flash = {d: flash_from(curves(4096, d, static_Ms(d))) for d in ds}
    x = {d: m_x(flash[d], axis) for d in ds}
    shift = x[256] - x[32]
    assert shift == pytest.approx(per * math.log2(flash[256] / flash[32]), abs=0.1)
    assert 32 < flash[256] / flash[32] < 128 and 5 * per < shift < 7 * per
    assert all(x[a] < x[b] for a, b in zip(ds, ds[1:]))               # it follows d^2
    with capsys.disabled():
        print(f"\nM axis {axis}, {per} px per octave (SVG px; 400 px wide)")
        for d in ds:
            print(f"d = {d}: M = d^2 = {d * d:,} at x = {d2[d]}, FlashAttention cheapest from "
                  f"M = {flash[d]:,} at x = {x[d]}")
        print(f"d = 32 -> 256: d^2 moves {d2[256] - d2[32]} px (factor 64), the FlashAttention "
              f"line {shift:.1f} px (factor {flash[256] / flash[32]:.2f})")


def test_static_Ms_and_the_axis():
    for d in (16, 32, 64, 100, 256):
        Ms = static_Ms(d)
        assert Ms[0] == max(16, d * d // 16) and Ms[-1] == STATIC_HI * d * d
        assert Ms == sorted(set(Ms))
    assert static_Ms(64) == [M for M in static_Ms(32) + static_Ms(128)
                             if 256 <= M <= 16384][:len(static_Ms(64))] or \
        set(static_Ms(64)) <= set(static_Ms(32)) | set(static_Ms(128))
    assert set(static_Ms(32)) & set(static_Ms(256)) == {4096}          # one shared grid
    with pytest.raises(ValueError, match="at least one cache size"):
        m_axis([[]])


def test_static_explorer_progress(capsys):
    static_explorer(256, ds=(16, 32), Ns=(256,), progress=True)
    err = capsys.readouterr().err
    assert "static explorer: 1 of 2 pictures computed" in err
    assert err.endswith("static explorer: 2 of 2 pictures computed\n")
    static_explorer(256, ds=(16,), Ns=(256,))
    assert capsys.readouterr().err == ""
