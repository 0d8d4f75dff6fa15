"""The crossover explorer and the pebble stepper of the built book, on a phone, by touch.

At 390 px wide, in a touch context, the explorer's buttons and sliders are tapped and its two
readouts must follow: the sentence names the cheapest algorithm and the exact ratios of the
counts the numbers line shows (:func:`ioattn.explorer.ratio_text`), the pass and mask buttons
say which is on, and the panel across P processors follows its own P slider. The stepper's
buttons are tapped and its readout must be the game's, in the drawing's labels, with each
move's reason. Nothing may be wider than the screen, every control
must be at least 40 px high, and no script may fail. Screenshots go where
``tests/test_browser.py`` puts its own.
"""

from __future__ import annotations

import inspect
import json
import re

import pytest

from ioattn.explorer import parallel_picture, parallel_readout, parallel_words, ratio_text
from ioattn.pebble.view import static_stepper

from .test_browser import Visit, browser, shots, site  # noqa: F401  (fixtures)

pytestmark = pytest.mark.book

PHONE = {"width": 390, "height": 844}


class Phone(Visit):
    """A page loaded in a fresh phone-sized touch context (else as :class:`Visit`)."""

    def __init__(self, browser, url: str):  # noqa: F811
        super().__init__(browser, url, **PHONE, is_mobile=True, device_scale_factor=2)


def _too_wide(page, width: int) -> list[str]:
    """Elements of the article that stick out of a screen ``width`` px wide (outside any box
    that scrolls sideways), and the page's own width."""
    found = page.evaluate("""(width) => {
      const out = [];
      if (document.documentElement.scrollWidth > width)
        out.push('page ' + document.documentElement.scrollWidth);
      const all = '.ioattn-explorer *, .ioattn-parallel *, .pebble-stepper *';
      for (const e of document.querySelectorAll(all)) {
        const r = e.getBoundingClientRect(), s = getComputedStyle(e);
        if (s.display === 'none' || r.width === 0) continue;
        let p = e.parentElement, scrolls = false;
        while (p) { if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX)) scrolls = true;
                    p = p.parentElement; }
        if (!scrolls && (r.right > width + 0.5 || r.left < -0.5))
          out.push(e.tagName + '.' + (e.getAttribute('class') || '') + ' ' + r.left + '..' +
                   r.right);
      }
      return out;
    }""", width)
    return found


def _small_controls(root) -> list[str]:
    out = []
    for sel in ("button", "input"):
        for i in range(root.locator(sel).count()):
            el = root.locator(sel).nth(i)
            box = el.bounding_box()
            if box and (box["height"] < 40 or box["width"] < 40):
                out.append(f"{sel} {el.get_attribute('class')}: {box['width']}x{box['height']}")
    return out


def _tap_end(slider, right: bool):
    box = slider.bounding_box()
    slider.tap(position={"x": box["width"] - 3 if right else 3, "y": box["height"] / 2})


def _check_words(words: str, numbers: str):
    """The sentence is right about the numbers line: the cheapest is named first, and each
    ratio is the exact ratio of the two counts shown."""
    counts = dict(re.findall(r"(FlashAttention|square tiling|standard attention) ([\d,]+)",
                             numbers))
    counts = {k: int(v.replace(",", "")) for k, v in counts.items()}
    best = re.search(r"cheapest ([^.]+)\.", numbers)[1]
    M = re.search(r"M = ([\d,]+)", numbers)[1]
    assert words.startswith(f"At M = {M}: {best} moves the fewest entries; "), (words, numbers)
    for name, t in counts.items():
        if name != best and t != counts[best]:
            assert re.search(f"{name} (moves )?{re.escape(ratio_text(t, counts[best]))} as many",
                             words), (words, numbers)
    lower = int(re.search(r"lower bound ([\d,]+)", numbers)[1].replace(",", ""))
    assert f"{best} moves {ratio_text(counts[best], lower)} as many as the lower bound" in words
    assert "less" not in words


def test_explorer_by_touch_on_a_phone(site, browser, shots):  # noqa: F811
    visit = Phone(browser, site + "book/crossover.html")
    page = visit.page
    try:
        ex = page.locator(".ioattn-explorer").first
        ex.scroll_into_view_if_needed()
        words, numbers = ex.locator(".ioe-words"), ex.locator(".ioe-numbers")
        assert not _too_wide(page, PHONE["width"]), _too_wide(page, PHONE["width"])
        assert not _small_controls(ex), _small_controls(ex)
        # the SVG's 12 px text is still at least 10 px on the phone
        svg = ex.locator("svg").first
        scale = svg.bounding_box()["width"] / float(svg.get_attribute("width"))
        assert 12 * scale >= 10, f"SVG text at {12 * scale:.1f} px"
        first = words.inner_text()
        _check_words(first, numbers.inner_text())
        # − and + step M
        slider = ex.locator("input.ioe-M")
        k = int(slider.input_value())
        ex.locator("button.ioe-more").tap()
        assert int(slider.input_value()) == k + 1 and words.inner_text() != first
        ex.locator("button.ioe-less").tap()
        ex.locator("button.ioe-less").tap()
        assert int(slider.input_value()) == k - 1
        assert ex.locator(".ioe-Mvalue").inner_text().split(" = ")[2].split()[0] in \
            words.inner_text()
        _check_words(words.inner_text(), numbers.inner_text())
        # the M slider's ends: square tiling, then FlashAttention
        _tap_end(slider, False)
        assert slider.input_value() == "0"
        assert "cheapest square tiling." in numbers.inner_text()
        _check_words(words.inner_text(), numbers.inner_text())
        _tap_end(slider, True)
        assert slider.input_value() == slider.get_attribute("max")
        assert "cheapest FlashAttention." in numbers.inner_text()
        assert words.inner_text().startswith("At M = ")
        _check_words(words.inner_text(), numbers.inner_text())
        # pass and mask buttons
        ex.locator("button.ioe-pass[data-value=backward]").tap()
        assert ex.locator("button.ioe-pass[data-value=backward]").get_attribute(
            "aria-pressed") == "true"
        assert "(backward pass)" in numbers.inner_text()
        assert "attention backward pass" in ex.locator(".ioe-title").inner_text()
        ex.locator("button.ioe-mask[data-value=causal]").tap()
        assert "(backward pass, causal mask)" in numbers.inner_text()
        _check_words(words.inner_text(), numbers.inner_text())
        ex.locator("button.ioe-pass[data-value=forward]").tap()
        ex.locator("button.ioe-mask[data-value=none]").tap()
        assert "(" not in numbers.inner_text().split(":")[0]
        # N and d
        sN, sd = ex.locator("input.ioe-N"), ex.locator("input.ioe-d")
        _tap_end(sN, False)
        assert numbers.inner_text().startswith("N = 1,024, ")
        assert ex.locator(".ioe-Nvalue").inner_text() == "N = 1,024"
        _tap_end(sN, True)
        assert numbers.inner_text().startswith("N = 16,384, ")
        _tap_end(sd, True)
        assert numbers.inner_text().startswith("N = 16,384, d = 256, ")
        assert ex.locator(".ioe-title").inner_text().endswith("N = 16,384, d = 256")
        _check_words(words.inner_text(), numbers.inner_text())
        # the labelled lines: d^2, where FlashAttention takes over, the slider's M
        shown = ex.locator("g.ioe-frame:not([display=none])")
        assert "d² = 65,536" in shown.inner_html()
        cross = ex.locator("g.ioe-cross:not([display=none])")
        assert cross.count() == 1 and "FlashAttention cheapest" in cross.inner_html()
        M = numbers.inner_text().split("M = ")[1].split(":")[0]
        assert ex.locator("text.ioe-now-label").text_content() == f"M = {M}"
        assert not _too_wide(page, PHONE["width"]), _too_wide(page, PHONE["width"])
        ex.screenshot(path=str(shots / "explorer-phone.png"))
        assert not visit.errors, visit.errors
    finally:
        visit.close()


def test_parallel_explorer_on_a_phone(browser, explorer_url):  # noqa: F811
    """The panel "across P processors" (:func:`ioattn.explorer.static_parallel_explorer`, on a
    page of its own): its P slider and − and + buttons, tapped, turn its sentence to what
    Python writes from the same data (:func:`ioattn.explorer.parallel_words`) at the new P;
    its own pass and mask buttons change it too; its P slider comes directly under the
    picture; nothing gets wider than the phone."""
    visit = Phone(browser, explorer_url.replace("explorer.html", "parallel.html"))
    page = visit.page
    try:
        ex = panel = page.locator(".ioattn-parallel").first
        panel.scroll_into_view_if_needed()
        data = json.loads(ex.locator("script.iop-data").text_content())
        Ps = data["par"]["Ps"]
        i, j = int(ex.locator("input.iop-N").input_value()), int(
            ex.locator("input.iop-d").input_value())
        picture = ex.locator("svg").first.bounding_box()
        gap = ex.locator("input.iop-P").bounding_box()["y"] - picture["y"] - picture["height"]
        assert 0 <= gap < 24, f"{gap} px between the picture and the P slider"
        assert not ex.locator("details.iop-legend").evaluate("e => e.open")
        sP, said = panel.locator("input.iop-P"), panel.locator(".iop-words")

        def expect(kind: str):
            t = int(sP.input_value())
            c = parallel_picture(data, kind, i, j)
            assert said.inner_text() == parallel_words(c, t)
            assert panel.locator(".iop-numbers").inner_text() == parallel_readout(c, t)
            assert panel.locator(".iop-Pvalue").inner_text() == f"P = {Ps[t]}"
            return t

        assert not _too_wide(page, PHONE["width"]), _too_wide(page, PHONE["width"])
        assert not _small_controls(panel), _small_controls(panel)
        t = expect("forward")
        first = said.inner_text()
        panel.locator("button.iop-more").tap()
        assert expect("forward") == t + 1 and said.inner_text() != first
        _tap_end(sP, False)
        assert expect("forward") == 0
        assert said.inner_text().startswith("On P = 1 processor there is nothing to communicate")
        assert panel.locator("circle.iop-marker[visibility=visible]").count() == 0
        _tap_end(sP, True)
        assert expect("forward") == len(Ps) - 1
        assert panel.locator("circle.iop-marker[visibility=visible]").count() == 3   # not H < P
        panel.locator("button.iop-less").tap()
        assert expect("forward") == len(Ps) - 2
        ex.locator("button.iop-pass[data-value=backward]").tap()
        expect("backward")
        assert "all-to-all needs H ≥ P (H = 16)" in said.inner_text()       # all have one
        assert panel.locator(".iop-title").inner_text().startswith(
            "Across P processors: the attention backward pass, H = 16")
        ex.locator("button.iop-mask[data-value=causal]").tap()
        expect("causal_backward")
        assert not _too_wide(page, PHONE["width"]), _too_wide(page, PHONE["width"])
        assert not visit.errors, visit.errors
    finally:
        visit.close()


def test_stepper_by_touch_on_a_phone(site, browser, shots):  # noqa: F811
    visit = Phone(browser, site + "book/pebble.html")
    page = visit.page
    try:
        st = page.locator(".pebble-stepper").first
        st.scroll_into_view_if_needed()
        data = json.loads(st.locator("script.pebble-states").text_content())
        out, tag = st.locator(".pebble-readout"), st.locator(".pebble-tag")
        # the upright drawing on the phone, and nothing wider than the screen
        assert st.locator("svg[data-layout=upright]").is_visible()
        assert not st.locator("svg[data-layout=wide]").is_visible()
        assert not _too_wide(page, PHONE["width"]), _too_wide(page, PHONE["width"])
        assert not _small_controls(st), _small_controls(st)
        assert out.inner_text() == data["texts"][0] and not tag.is_visible()
        for _ in range(3):
            st.locator("button.pebble-next").tap()
        assert out.inner_text() == data["texts"][3]
        assert tag.inner_text() == data["tags"][2] and tag.is_visible()
        assert st.locator(".pebble-tally").inner_text() == data["tallies"][3]
        kind, v = data["moves"][2]
        why = f" ({data['tags'][2]})" if data["tags"][2] != kind else ""
        assert out.inner_text().startswith(f"move 3 of {len(data['moves'])}: {kind} "
                                           f"{data['labels'][v]}{why} — ")
        assert "('" not in out.inner_text()                       # labels, not tuples
        st.locator("button.pebble-prev").tap()
        assert out.inner_text() == data["texts"][2]
        st.locator("button.pebble-reset").tap()
        assert out.inner_text() == data["texts"][0]
        # a recompute is tagged and ringed in purple
        r = data["tags"].index("recompute") + 1
        for _ in range(r):
            st.locator("button.pebble-next").tap()
        assert tag.inner_text() == "recompute" and "(recompute)" in out.inner_text()
        halo = st.locator("svg[data-layout=upright] circle.pebble-halo")
        assert halo.get_attribute("stroke") == "#9c27b0"
        # play, then reset stops it: on the page's clock, paused and moved on by the test, so
        # that play takes as many steps whatever the machine's speed
        interval = inspect.signature(static_stepper).parameters["interval"].default
        page.clock.install()
        page.clock.pause_at(page.evaluate("Date.now()") + 1000)
        st.locator("button.pebble-play").tap()
        page.clock.run_for(2 * interval + interval // 2)
        assert out.inner_text() == data["texts"][r + 2]           # two steps on from r
        st.locator("button.pebble-reset").tap()
        assert out.inner_text() == data["texts"][0]
        assert st.locator("button.pebble-play").inner_text() == "play"
        page.clock.run_for(4 * interval)
        assert out.inner_text() == data["texts"][0]               # stopped
        st.screenshot(path=str(shots / "stepper-phone.png"))
        assert not visit.errors, visit.errors
    finally:
        visit.close()


def test_wide_screen_draws_the_wide_graph(site, browser, shots):  # noqa: F811
    visit = Visit(browser, site + "book/pebble.html")
    try:
        st = visit.page.locator(".pebble-stepper").first
        assert st.locator("svg[data-layout=wide]").is_visible()
        assert not st.locator("svg[data-layout=upright]").is_visible()
        assert st.locator("svg[data-layout=wide] path[marker-end]").count() > 0
        assert not visit.errors, visit.errors
    finally:
        visit.close()


# ------------------------------------------------- the crossover moves with d (a small page)
@pytest.fixture(scope="module")
def explorer_url(tmp_path_factory):
    """The book's explorer at one N (N = 4096; d = 32, 64, 128, 256) on a page of its own,
    served from localhost: what the crossover chapter embeds, without building the book."""
    from ioattn.explorer import static_explorer, static_parallel_explorer

    from .test_browser import serve

    folder = tmp_path_factory.mktemp("explorer")
    (folder / "explorer.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>explorer</title></head><body '
        'style="margin:0 16px;font-family:sans-serif">'
        + static_explorer(4096, ds=(32, 64, 128, 256), Ns=(4096,)) + "</body></html>",
        encoding="utf-8")
    (folder / "parallel.html").write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta name="viewport" '
        'content="width=device-width, initial-scale=1"><title>parallel</title></head><body '
        'style="margin:0 16px;font-family:sans-serif">'
        + static_parallel_explorer(4096, ds=(32, 64, 128, 256)) + "</body></html>",
        encoding="utf-8")
    with serve(folder) as url:
        yield url + "explorer.html"


def _line_x(ex, selector: str) -> float:
    """The on-screen x (CSS px) of the shown vertical line ``selector`` of the explorer."""
    x = ex.evaluate("""(root, sel) => {
      const shown = Array.from(root.querySelectorAll(sel)).filter(e => {
        for (let p = e; p && p !== root; p = p.parentElement)
          if (p.getAttribute && p.getAttribute('display') === 'none') return false;
        return true; });
      if (shown.length !== 1) return null;
      const r = shown[0].getBoundingClientRect();
      return r.left + r.width / 2; }""", selector)
    assert x is not None, f"not exactly one {selector} shown"
    return x


@pytest.mark.parametrize("width", [390, 1280])
def test_explorer_crossover_moves_with_d(browser, explorer_url, width):  # noqa: F811
    """On the absolute M axis, from d = 32 to d = 256 the line M = d² moves by 6 octaves (a
    factor 64 in M) on the screen and the "FlashAttention cheapest from" line by the octaves
    of its exact factor (about 64), within a pixel, at 390 and 1280 px; and the M slider's row
    comes directly under the picture, with no legend between (folded on the phone)."""
    import math

    from ioattn.explorer import curves, flash_from, m_axis, octave_px, static_Ms

    options = dict(width=width, height=900)
    if width < 1024:
        options.update(is_mobile=True, device_scale_factor=2)
    visit = Visit(browser, explorer_url, **options)
    page = visit.page
    try:
        ex = page.locator(".ioattn-explorer").first
        svg = ex.locator("svg").first
        box = svg.bounding_box()
        scale = box["width"] / float(svg.get_attribute("width"))
        ds = (32, 64, 128, 256)
        axis = m_axis([static_Ms(d) for d in ds])
        per = octave_px(axis) * scale                      # screen px per octave of M
        sd = ex.locator("input.ioe-d")
        d2, flash, said = {}, {}, {}
        for j, d in enumerate(ds):
            sd.evaluate("(s, v) => { s.value = String(v); "
                        "s.dispatchEvent(new Event('input')); }", j)
            assert ex.locator(".ioe-dvalue").inner_text() == f"d = {d}"
            d2[d] = _line_x(ex, "line.ioe-d2")
            flash[d] = _line_x(ex, "line.ioe-flash")
            said[d] = flash_from(curves(4096, d, static_Ms(d)))
            label = ex.locator("g.ioe-cross:not([display=none]) text").text_content()
            assert f"from M = {said[d]:,}" in label
        print(f"\n{width} px: {per:.2f} px per octave; M = d² at",
              {d: round(x - box["x"], 1) for d, x in d2.items()},
              "; FlashAttention cheapest from at", {d: round(x - box["x"], 1)
                                                    for d, x in flash.items()},
              "(px from the SVG's left edge)")
        assert d2[256] - d2[32] == pytest.approx(6 * per, abs=1.0)     # log2(64) octaves
        for a, b in zip(ds, ds[1:]):
            assert d2[b] - d2[a] == pytest.approx(2 * per, abs=1.0)
            assert flash[b] > flash[a]
        factor = said[256] / said[32]
        assert flash[256] - flash[32] == pytest.approx(per * math.log2(factor), abs=1.0)
        assert 5 * per < flash[256] - flash[32] < 7 * per          # about the factor 64
        # the controls directly under the picture; the legend after the readout
        row = ex.locator("input.ioe-M").bounding_box()
        gap = row["y"] - (box["y"] + box["height"])
        assert 0 <= gap < 24, f"{gap} px between the picture and the M slider"
        legend = ex.locator("details.ioe-legend")
        assert legend.bounding_box()["y"] > ex.locator(".ioe-readout").bounding_box()["y"]
        assert legend.evaluate("e => e.open") == (width >= 720)
        assert not visit.errors, visit.errors
    finally:
        visit.close()
