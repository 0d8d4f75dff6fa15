"""The decoding explorer: its data (exact counts of grouped heads), its sentence, the static HTML
and its script under node, and the page in a browser at 390 and 1280 px."""

import json
import re
import shutil
import subprocess

import pytest

from ioattn import bounds
from ioattn.algorithms import get
from ioattn.decode_explorer import (
    DECODE_GS,
    DECODE_N_QS,
    ONCE_LABEL,
    SCHEDULES,
    decoding_curves,
    decoding_Ms,
    decoding_picture,
    decoding_readout,
    decoding_title,
    decoding_words,
    g_label,
    query_label,
    reads_once_from,
    static_decoding_explorer,
)
from ioattn.explorer import _px, _side, m_label, ratio_text
from ioattn.inference import grouped_cost

from .test_browser import Visit, browser, serve  # noqa: F401  (fixtures)
from .test_browser_widgets import _small_controls, _tap_end, _too_wide

H_Q, D, N_K = 32, 128, 4096


def _embedded(page: str) -> dict:
    found = re.findall(r'<script type="application/json" class="iod-data">(.*?)</script>',
                       page, re.S)
    assert len(found) == 1
    return json.loads(found[0])


@pytest.fixture(scope="module")
def page():
    return static_decoding_explorer()


@pytest.mark.parametrize("N_q, g", [(1, 1), (1, 8), (7, 4), (64, 32), (16, 2)])
def test_curves_are_the_exact_counts(N_q, g):
    c = decoding_curves(N_q, g)
    H_kv = H_Q // g
    assert (c["H_q"], c["H_kv"], c["g"], c["N_q"], c["N_k"], c["d"]) == (H_Q, H_kv, g, N_q,
                                                                         N_K, D)
    assert c["Ms"] == decoding_Ms(D, g * N_q, N_K)
    for name, (algo, grouping, *_) in SCHEDULES.items():
        assert c["min_M"][name] == get(algo).min_M(D)
        for M, t in zip(c["Ms"], c["totals"][name]):
            if M < get(algo).min_M(D):
                assert t is None
            else:
                assert t == grouped_cost(algo, H_Q, H_kv, N_q, D, M, N_k=N_K,
                                         grouping=grouping).total
    raw = [bounds.grouped_lower(H_Q, H_kv, N_q, D, M, N_k=N_K, program=True) for M in c["Ms"]]
    assert c["lower"] == bounds.envelope(raw)
    # the trivial term of the bound: Q and O of every query head, K and V of every K/V head
    assert c["once"] == 2 * H_Q * N_q * D + 2 * H_kv * N_K * D == c["lower"][-1]
    assert json.loads(json.dumps(c)) == c


@pytest.mark.parametrize("g, N_q, d, N_k", [(8, 1, 128, 4096), (32, 64, 128, 4096),
                                            (1, 1, 16, 10), (4, 7, 64, 8192), (2, 3, 1, 5)])
def test_reads_once_from_is_the_least_M(g, N_q, d, N_k):
    """Bisection on the exact counts finds the least M at which the stacked schedule moves the
    trivial term; for FA2's rule B_r = floor((M - 2d) / (2d + 4)) that is 2d + (2d + 4) g N_q."""
    H_kv = H_Q // g
    M = reads_once_from(H_Q, g, N_q, d, N_k)
    once = 2 * H_Q * N_q * d + 2 * H_kv * N_k * d

    def cost(m):
        return grouped_cost("flash", H_Q, H_kv, N_q, d, m, N_k=N_k).total

    assert cost(M) == once and cost(4 * M) == once
    assert M == get("flash").min_M(d) or cost(M - 1) > once
    assert M == max(get("flash").min_M(d), 2 * d + (2 * d + 4) * g * N_q)


def test_the_per_head_schedule_reads_the_cache_g_times():
    """At N_q = 1, g = 8 and M = 2^16 the per-head schedule reads K and V 8 times as often as
    the stacked one (Q and O the same), so it moves about 8 times as much; the sentence says so
    with the exact ratio."""
    g, M = 8, 1 << 16
    H_kv = H_Q // g
    a = grouped_cost("flash", H_Q, H_kv, 1, D, M, N_k=N_K, grouping="per_head")
    b = grouped_cost("flash", H_Q, H_kv, 1, D, M, N_k=N_K, grouping="stacked")
    assert a.writes == b.writes == H_Q * D
    assert b.reads - H_Q * D == 2 * H_kv * N_K * D                 # the cache once
    assert a.reads - H_Q * D == g * (b.reads - H_Q * D)            # g times
    assert 7.9 * b.total < a.total < 8 * b.total
    c = decoding_curves(1, g, Ms=decoding_Ms(D, 32 * 64))
    k = c["Ms"].index(M)
    assert (c["totals"]["flash_per_head"][k], c["totals"]["flash_stacked"][k]) == (a.total,
                                                                                  b.total)
    text = decoding_words(c, k)
    assert text == (f"At M = 65,536: stacked FlashAttention moves the fewest entries, "
                    f"{b.total:,}; per-head FlashAttention moves {ratio_text(a.total, b.total)} "
                    f"as many and per-head standard attention "
                    f"{ratio_text(c['totals']['standard_per_head'][k], b.total)} as many; "
                    "stacked FlashAttention moves exactly the lower bound: it reads the KV cache "
                    "once.")
    assert ratio_text(a.total, b.total) == "7.99×"


def test_words_at_the_ends_of_the_range():
    c = decoding_curves(64, 32)
    # at the least M only standard attention runs; FlashAttention needs 4d + 4
    assert c["Ms"][0] == 512 and c["min_M"]["flash_stacked"] == 4 * D + 4
    assert decoding_words(c, 0) == (
        f"At M = 512: only per-head standard attention can run; it moves "
        f"{c['totals']['standard_per_head'][0]:,} entries; stacked FlashAttention cannot run "
        "(it needs M ≥ 516); per-head FlashAttention cannot run (it needs M ≥ 516).")
    # a small cache: standard attention is the cheapest, stacked is far from the bound
    text = decoding_words(c, 4)
    st, low = c["totals"]["flash_stacked"][4], c["lower"][4]
    assert text.startswith(f"At M = {c['Ms'][4]:,}: per-head standard attention moves the "
                           "fewest entries")
    assert "; per-head FlashAttention moves " in text and " as many as stacked FlashAttention;" \
        in text
    assert text.endswith(f"stacked FlashAttention moves {ratio_text(st, low)} as many as the "
                         f"lower bound and reads the KV cache once from M = {c['fits']:,} on.")
    assert c["fits"] == 2 * D + (2 * D + 4) * 32 * 64 == 532_736
    # multi-head (g = 1): the two FlashAttention schedules are one
    c1 = decoding_curves(1, 1)
    k = len(c1["Ms"]) - 1
    assert c1["totals"]["flash_stacked"] == c1["totals"]["flash_per_head"]
    assert decoding_words(c1, k).startswith(
        f"At M = {c1['Ms'][k]:,}: stacked FlashAttention moves the fewest entries, "
        f"{c1['once']:,}; per-head FlashAttention moves as many and per-head standard attention")
    assert decoding_readout(c1, k).startswith(
        f"H_q = 32, g = 1 (H_kv = 32), N_q = 1, N_k = 4,096, d = 128, M = {c1['Ms'][k]:,}: "
        "cheapest stacked FlashAttention. stacked FlashAttention ")


def test_static_page(page):
    size = len(page.encode())
    assert size < 150 * 1024, size
    assert "http://" not in page and "https://" not in page and " src=" not in page
    data = _embedded(page)
    assert data["N_qs"] == list(DECODE_N_QS) and data["gs"] == list(DECODE_GS)
    assert (data["H_q"], data["d"], data["N_k"]) == (H_Q, D, N_K)
    assert data["Ms"] == decoding_Ms(D, 32 * 64, N_K) and data["Ms"][-1] == 1 << 20
    assert data["mlabels"] == [m_label(M, D) for M in data["Ms"]]
    assert data["qlabels"][0] == "N_q = 1: a decoding step" == query_label(1)
    assert data["glabels"] == [g_label(g, H_Q) for g in DECODE_GS]
    assert data["glabels"][-1] == "g = 32 (H_kv = 1, multi-query)"
    # every embedded count is grouped_cost's, every bound grouped_lower's
    for i, N_q in enumerate(DECODE_N_QS):
        for j, g in enumerate(DECODE_GS):
            assert decoding_picture(data, i, j) == decoding_curves(N_q, g, Ms=data["Ms"])
    # the controls directly under the picture, the readout, the folded legend last
    assert re.search(r'>M</span><input type="range" class="iod-M" min="0" max="44" '
                     r'value="28"', page)                            # 2^16 = 2^(9 + 28/4)
    assert re.search(r'class="iod-Nq" min="0" max="5" value="0"', page)
    assert re.search(r'class="iod-g" min="0" max="4" value="3"', page)       # g = 8
    assert page.index("</svg>") < page.index('<div class="iod-controls">') < \
        page.index('class="iod-readout"') < page.index('<details class="iod-legend"')
    assert page.count('class="iod-curve"') == 3 and page.count('class="iod-marker"') == 3
    assert f">{decoding_title(H_Q, N_K, D)}</div>" in page
    c = decoding_picture(data, 0, 3)
    unescaped = page.replace("&gt;", ">")
    assert decoding_words(c, 28) in unescaped and decoding_readout(c, 28) in unescaped
    # the main explorer's pieces are not here, but for the marks of real GPUs
    assert set(re.findall(r'class="(ioe-[\w-]+)"', page)) == {"ioe-gpu"}


# ------------------------------------------------------------------ the script, under node
_NODE_DRIVER = r"""
const fs = require("fs");
const page = fs.readFileSync(0, "utf8");
const json = page.match(
  /<script type="application\/json" class="iod-data">([\s\S]*?)<\/script>/)[1];
const code = page.match(/<script>([\s\S]*?)<\/script>/)[1];
const id = page.match(/<div class="ioattn-decoding" id="([^"]+)"/)[1];
function element(attrs) {
  return {attrs: Object.assign({}, attrs || {}), listeners: {}, textContent: "", value: "0",
    setAttribute(k, v) { this.attrs[k] = String(v); },
    getAttribute(k) { return this.attrs[k]; },
    addEventListener(t, f) { this.listeners[t] = f; }};
}
function all(re) {
  return Array.from(page.matchAll(re), m => element({"data-name": m[1]}));
}
const curves = all(/class="iod-curve" data-name="([^"]+)"/g);
const markers = all(/class="iod-marker" data-name="([^"]+)"/g);
const sM = element(), sQ = element(), sG = element();
sM.value = page.match(/class="iod-M" min="0" max="\d+" value="(\d+)"/)[1];
sQ.value = page.match(/class="iod-Nq" min="0" max="\d+" value="(\d+)"/)[1];
sG.value = page.match(/class="iod-g" min="0" max="\d+" value="(\d+)"/)[1];
const one = {"script.iod-data": {textContent: json}, "input.iod-M": sM, "input.iod-Nq": sQ,
  "input.iod-g": sG, ".iod-Mvalue": element(), ".iod-Nqvalue": element(),
  ".iod-gvalue": element(), ".iod-words": element(), ".iod-numbers": element(),
  "line.iod-now": element(), "text.iod-now-label": element(),
  "polyline.iod-lower": element(), "g.iod-fits": element(), "line.iod-fits-line": element(),
  "text.iod-fits-label": element(), "button.iod-less": element(),
  "button.iod-more": element(), "details.iod-legend": null};
const many = {"polyline.iod-curve": curves, "circle.iod-marker": markers};
const root = {querySelector: s => one[s], querySelectorAll: s => many[s]};
global.document = {getElementById: x => (x === id ? root : null)};
eval(code);
const seen = [];
function snap() {
  const m = {}, c = {};
  markers.forEach(e => { m[e.attrs["data-name"]] = Object.assign({}, e.attrs); });
  curves.forEach(e => { c[e.attrs["data-name"]] = e.attrs.points; });
  const nl = one["text.iod-now-label"], fl = one["text.iod-fits-label"];
  seen.push({i: +sQ.value, j: +sG.value, k: +sM.value,
    words: one[".iod-words"].textContent, numbers: one[".iod-numbers"].textContent,
    M: one[".iod-Mvalue"].textContent, Nq: one[".iod-Nqvalue"].textContent,
    g: one[".iod-gvalue"].textContent, now: one["line.iod-now"].attrs.x1,
    nowLabel: [nl.textContent, nl.attrs.x, nl.attrs["text-anchor"]],
    fits: [one["g.iod-fits"].attrs.display, one["line.iod-fits-line"].attrs.x1,
           fl.attrs.x, fl.attrs["text-anchor"]],
    markers: m, curves: c, lower: one["polyline.iod-lower"].attrs.points});
}
snap();
for (const [which, v] of JSON.parse(process.argv[1])) {
  if (which === "less" || which === "more") one["button.iod-" + which].listeners.click();
  else { const s = {M: sM, Nq: sQ, g: sG}[which]; s.value = String(v); s.listeners.input(); }
  snap();
}
process.stdout.write(JSON.stringify(seen));
"""


def _points(Ms, dom, values) -> str:
    return " ".join("{},{}".format(*_px(dom, M, t)) for M, t in zip(Ms, values)
                    if t is not None and t > 0)


def _check(data, shot):
    """The script's state after a step: Python's sentence, numbers and geometry."""
    c = decoding_picture(data, shot["i"], shot["j"])
    k, Ms, dom = shot["k"], data["Ms"], data["dom"]
    assert shot["words"] == decoding_words(c, k)
    assert shot["numbers"] == decoding_readout(c, k)
    assert shot["M"] == m_label(Ms[k], data["d"])
    assert shot["Nq"] == query_label(c["N_q"]) and shot["g"] == g_label(c["g"], c["H_q"])
    x = _px(dom, Ms[k])
    assert float(shot["now"]) == x
    label = f"M = {Ms[k]:,}"
    assert shot["nowLabel"] == [label, *map(str, _side(x, label))]
    for name in SCHEDULES:
        assert shot["curves"][name] == _points(Ms, dom, c["totals"][name])
        t, mark = c["totals"][name][k], shot["markers"][name]
        assert mark["visibility"] == ("visible" if t is not None else "hidden")
        if t is not None:
            assert (float(mark["cx"]), float(mark["cy"])) == _px(dom, Ms[k], t)
    assert shot["lower"] == _points(Ms, dom, c["lower"])
    inside = Ms[0] <= c["fits"] <= Ms[-1]
    fx = _px(dom, c["fits"]) if inside else 0
    assert shot["fits"] == ["inline" if inside else "none", str(fx),
                            *map(str, _side(fx, ONCE_LABEL))]


def _run_node(page, steps):
    proc = subprocess.run(["node", "-e", _NODE_DRIVER, json.dumps(steps)], input=page,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_script_writes_what_python_writes(page):
    """Under node with a stub DOM, at every slider position tried, the script writes
    :func:`decoding_words` and :func:`decoding_readout` and draws Python's geometry; the − and
    + buttons step M and the sliders clamp."""
    data = _embedded(page)
    steps = [["M", 0], ["M", 44], ["M", 99], ["less"], ["less"], ["more"]]
    for i in range(len(DECODE_N_QS)):
        for j in range(len(DECODE_GS)):
            steps += [["Nq", i], ["g", j], ["M", 1], ["M", 12], ["M", 30]]
    steps += [["Nq", 0], ["g", 3], ["M", 28], ["g", -5], ["Nq", 17]]
    seen = _run_node(page, steps)
    assert (seen[0]["i"], seen[0]["j"], seen[0]["k"]) == (0, 3, 28)
    for shot in seen:
        _check(data, shot)
    assert [s["k"] for s in seen[1:7]] == [0, 44, 44, 43, 42, 43]       # clamped, −, −, +
    assert seen[1]["words"].startswith("At M = 512: only per-head standard attention can run")
    assert seen[1]["markers"]["flash_stacked"]["visibility"] == "hidden"
    assert (seen[-3]["words"], seen[-3]["numbers"]) == (seen[0]["words"], seen[0]["numbers"])
    assert (seen[-2]["j"], seen[-1]["i"]) == (0, 5)                      # clamped
    # the initial geometry is the HTML's
    for name in SCHEDULES:
        assert f'data-name="{name}" points="{seen[0]["curves"][name]}"' in page
    assert f'class="iod-lower" points="{seen[0]["lower"]}"' in page
    assert len({s["words"] for s in seen}) > 60
    # the line where the stacked schedule starts reading the cache once moves with g N_q
    xs = {(s["i"], s["j"]): float(s["fits"][1]) for s in seen}
    assert xs[0, 0] < xs[0, 1] < xs[0, 3] < xs[5, 4]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_script_hides_the_line_beyond_the_range():
    """With a few cache sizes of one's own, the line where the stacked schedule starts reading
    the cache once is hidden where that M is beyond them, and the sentence still gives it."""
    page = static_decoding_explorer(Ms=(512, 1024, 4096), N_qs=(1, 64), gs=(8, 32), M=4096)
    data = _embedded(page)
    seen = _run_node(page, [["Nq", 1], ["g", 1], ["M", 0], ["Nq", 0], ["g", 0]])
    for shot in seen:
        _check(data, shot)
    assert seen[0]["fits"][0] == "inline" and seen[2]["fits"][0] == "none"
    assert 'class="iod-fits" display="inline"' in page
    assert seen[2]["words"].endswith("reads the KV cache once from M = 532,736 on.")
    assert seen[3]["words"].startswith("At M = 512: only per-head standard attention can run")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"H_q": 0}, ValueError, "H_q must be at least 1, got 0"),
    ({"H_q": 32.0}, TypeError, "H_q must be an integer"),
    ({"d": True}, TypeError, "d must be an integer"),
    ({"d": 512}, ValueError, "d = 512 is more than the explorer draws"),
    ({"N_k": 0}, ValueError, "N_k must be at least 1"),
    ({"N_k": 1 << 21}, ValueError, "N_k = 2,097,152 is more than the explorer draws"),
    ({"N_qs": 4}, TypeError, "N_qs must be a sequence of integers"),
    ({"N_qs": ()}, ValueError, "N_qs is empty"),
    ({"N_qs": (1, "2")}, TypeError, "N_qs must be an integer, got '2'"),
    ({"gs": (1, 3)}, ValueError, "g = 3 does not divide H_q = 32"),
    ({"gs": (0,)}, ValueError, "gs must be at least 1"),
    ({"Ms": (512, 0)}, ValueError, "Ms must be at least 1"),
    ({"Ms": (512, 1 << 30)}, ValueError, "Ms = 1,073,741,824 is more than the explorer draws"),
    ({"N_q": 3}, ValueError, r"N_q = 3 is not one of N_qs = \[1, 2, 4, 7, 16, 64\]"),
    ({"g": 16}, ValueError, r"g = 16 is not one of gs = \[1, 2, 4, 8, 32\]"),
    ({"g": "8"}, TypeError, "g must be an integer"),
    ({"M": 0}, ValueError, "M must be at least 1"),
    ({"H_q": 4096, "gs": (1,), "N_qs": (65536,), "N_q": 65536, "N_k": 1 << 20}, ValueError,
     "more than the script's numbers hold exactly"),
])
def test_bad_input_is_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        static_decoding_explorer(**kwargs)


def test_curves_refuse_bad_input():
    with pytest.raises(ValueError, match="g = 5 does not divide H_q = 32"):
        decoding_curves(1, 5)
    with pytest.raises(TypeError, match="N_q must be an integer"):
        decoding_curves(1.5, 8)
    with pytest.raises(ValueError, match="g = 3 does not divide H_q = 8"):
        reads_once_from(8, 3, 1, 16, 16)


def test_other_heads_and_a_smaller_model():
    page = static_decoding_explorer(8, 16, 100, N_qs=(1, 3), g=2, N_q=3)
    data = _embedded(page)
    assert data["gs"] == [1, 2, 4, 8] and data["N_qs"] == [1, 3]
    for i, N_q in enumerate((1, 3)):
        for j, g in enumerate((1, 2, 4, 8)):
            c = decoding_picture(data, i, j)
            assert c == decoding_curves(N_q, g, 8, 16, 100, Ms=data["Ms"])
            for k in (0, len(data["Ms"]) // 2, len(data["Ms"]) - 1):
                M = data["Ms"][k]
                assert c["totals"]["flash_stacked"][k] == (
                    None if M < 68 else grouped_cost("flash", 8, 8 // g, N_q, 16, M,
                                                     N_k=100).total)
    assert re.search(r'class="iod-g" min="0" max="3" value="1"', page)
    assert "g = 8 (H_kv = 1, multi-query)" in data["glabels"]


# ------------------------------------------------------------------ in a browser
@pytest.fixture(scope="module")
def decoding_url(tmp_path_factory, page):
    folder = tmp_path_factory.mktemp("decoding")
    (folder / "decoding.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>decoding</title></head><body '
        'style="margin:0 16px;font-family:sans-serif">' + page + "</body></html>",
        encoding="utf-8")
    with serve(folder) as url:
        yield url + "decoding.html"


@pytest.mark.book
@pytest.mark.parametrize("width", [390, 1280])
def test_decoding_explorer_in_a_browser(browser, decoding_url, width):  # noqa: F811
    """In chromium at 390 px (touch) and 1280 px: nothing wider than the screen, every control
    at least 40 px high, the M slider directly under the picture; the buttons and sliders turn
    the sentence into what Python writes from the same data; no script error."""
    options = dict(width=width, height=900)
    if width < 1024:
        options.update(is_mobile=True, device_scale_factor=2)
    visit = Visit(browser, decoding_url, **options)
    page = visit.page
    try:
        ex = page.locator(".ioattn-decoding").first
        data = json.loads(ex.locator("script.iod-data").text_content())
        said, nums = ex.locator(".iod-words"), ex.locator(".iod-numbers")
        wide = _too_wide(page, width) + page.evaluate(
            """(w) => [...document.querySelectorAll('.ioattn-decoding *')].filter(e => {
                 const r = e.getBoundingClientRect();
                 return r.width > 0 && (r.right > w + 0.5 || r.left < -0.5); })
               .map(e => e.tagName)""", width)
        assert not wide, wide
        assert not _small_controls(ex), _small_controls(ex)
        svg = ex.locator("svg").first.bounding_box()
        gap = ex.locator("input.iod-M").bounding_box()["y"] - svg["y"] - svg["height"]
        assert 0 <= gap < 24, f"{gap} px between the picture and the M slider"
        assert ex.locator("details.iod-legend").evaluate("e => e.open") == (width >= 720)

        def expect():
            i, j, k = (int(ex.locator(f"input.iod-{s}").input_value())
                       for s in ("Nq", "g", "M"))
            c = decoding_picture(data, i, j)
            assert said.inner_text() == decoding_words(c, k)
            assert nums.inner_text() == decoding_readout(c, k)
            return i, j, k

        assert expect() == (0, 3, 28)
        press = (lambda el: el.tap()) if width < 1024 else (lambda el: el.click())
        press(ex.locator("button.iod-more"))
        assert expect() == (0, 3, 29)
        press(ex.locator("button.iod-less"))
        press(ex.locator("button.iod-less"))
        assert expect() == (0, 3, 27)
        for s, right, want in (("Nq", True, (5, 3, 27)), ("g", True, (5, 4, 27)),
                               ("M", False, (5, 4, 0)), ("g", False, (5, 0, 0))):
            slider = ex.locator(f"input.iod-{s}")
            if width < 1024:
                _tap_end(slider, right)
            else:
                slider.evaluate("(e, v) => { e.value = v ? e.max : '0'; "
                                "e.dispatchEvent(new Event('input')); }", right)
            assert expect() == want
        assert said.inner_text().startswith("At M = 512: only per-head standard attention")
        assert not visit.errors, visit.errors
    finally:
        visit.close()

